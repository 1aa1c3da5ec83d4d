"""A query's normal form, and how it is computed: shared by the memo (in-process) and the
helper processes (:mod:`evalharness_sql.workers`), which therefore import this module and not
each other."""

from __future__ import annotations

import pickle
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlglot import exp
from sqlglot.errors import SqlglotError

from evalharness_sql.clauses import clause_items
from evalharness_sql.rules import normalize
from evalharness_sql.sandbox import parse_statements

if TYPE_CHECKING:
    from evalharness_sql.engines import Engine


@dataclass(frozen=True)
class NormalForm:
    """A query's normal form: the tree (kept pickled: a sqlglot tree takes about seven times
    the memory of its pickle, and unpickling is as fast as copying), whether it was qualified
    against the schema, and its SQL text."""

    blob: bytes
    qualified: bool
    sql: str
    derived: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)
    """What is computed from the tree once (its clause items per dialect)."""

    @property
    def tree(self) -> exp.Expression:
        """A fresh copy of the normal form's tree, the caller's own."""
        return pickle.loads(self.blob)

    def clauses(self, dialect: str) -> dict[str, Counter]:
        """:func:`~evalharness_sql.clauses.clause_items` of the tree, computed once (read
        only); raises what that raises."""
        key = ("clauses", dialect)
        found = self.derived.get(key)
        if found is None:
            try:
                found = clause_items(self.tree, dialect)
            except Exception as exc:  # noqa: BLE001 - remembered, and raised again below
                found = exc
            self.derived[key] = found
        if isinstance(found, BaseException):
            raise found
        return found  # shared: callers compare and combine the counters, never change them


def compute_normal_form(sql: str, dialect: str, engine: Engine | None) -> NormalForm:
    """The normal form of the single statement ``sql``, qualified against the engine's
    schema when there is one (what :func:`evalharness_sql.memo.normal_form_entry` memoises,
    and what a helper process of :mod:`evalharness_sql.workers` computes)."""
    statements = parse_statements(sql, dialect)
    if len(statements) != 1:
        raise SqlglotError(f"expected one statement, found {len(statements)}")
    schema = engine.schema() if engine is not None else None
    state: dict[str, Any] = {}
    tree = normalize(statements[0], schema=schema, dialect=dialect, state=state)
    form = NormalForm(pickle.dumps(tree, protocol=pickle.HIGHEST_PROTOCOL),
                      bool(state.get("qualified")), tree.sql(dialect=dialect, comments=False))
    try:  # nearly every normal form is compared clause by clause: do it on the tree at hand
        form.derived[("clauses", dialect)] = clause_items(tree, dialect)
    except Exception:  # noqa: BLE001 - computed (and raised) again when asked for
        pass
    return form
