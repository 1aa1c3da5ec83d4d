"""The normalisation rules: an ordered tuple of small rewrites, each sound on every database.

:func:`normalize` runs them in order, passing each only the keyword arguments it declares
(``schema``, ``dialect``, ``state``), like sqlglot's optimizer. Every rule must keep the
query's meaning on *every* database of the schema — a rule that merges two non-equivalent
queries would make the normalise stage call them equivalent — so when in doubt a rule does
nothing. Rules that need qualified columns do nothing when qualification failed
(``state["qualified"]`` is false).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from sqlglot import exp

from evalharness_sql.rules.affinity_literals import affinity_literals
from evalharness_sql.rules.canonical_aliases import canonical_aliases
from evalharness_sql.rules.count_star import count_star
from evalharness_sql.rules.distinct_as_group_by import distinct_as_group_by
from evalharness_sql.rules.double_quoted_strings import double_quoted_strings
from evalharness_sql.rules.group_by_order import group_by_order
from evalharness_sql.rules.identifiers import identifiers
from evalharness_sql.rules.in_list_order import in_list_order
from evalharness_sql.rules.inner_joins import inner_joins
from evalharness_sql.rules.or_equalities_to_in import or_equalities_to_in
from evalharness_sql.rules.ordering_defaults import ordering_defaults
from evalharness_sql.rules.output_columns import output_columns
from evalharness_sql.rules.output_references import output_references
from evalharness_sql.rules.qualify_columns import qualify_columns
from evalharness_sql.rules.simplify import simplify
from evalharness_sql.rules.single_value_in import single_value_in
from evalharness_sql.rules.subquery_predicates import subquery_predicates
from evalharness_sql.rules.symmetric_comparisons import symmetric_comparisons
from evalharness_sql.schema import Schema

Rule = Callable[..., exp.Expression]

RULES: tuple[Rule, ...] = (
    double_quoted_strings,
    identifiers,
    qualify_columns,
    output_references,
    affinity_literals,
    count_star,
    single_value_in,
    or_equalities_to_in,
    subquery_predicates,
    inner_joins,
    canonical_aliases,
    in_list_order,
    symmetric_comparisons,
    simplify,
    group_by_order,
    distinct_as_group_by,
    ordering_defaults,
    output_columns,
)
"""The rules, in the order they run."""


def normalize(tree: exp.Expression, *, schema: Schema | None = None, dialect: str = "sqlite",
              rules: Sequence[Rule] = RULES, state: dict[str, Any] | None = None
              ) -> exp.Expression:
    """Run the rules on a copy of ``tree``; ``state`` receives what they record
    (``qualified``).

    >>> import sqlglot
    >>> from evalharness_sql.engines import SQLiteEngine
    >>> schema = SQLiteEngine.from_ddl("CREATE TABLE t (id INT PRIMARY KEY, a INT)").schema()
    >>> normalize(sqlglot.parse_one("SELECT COUNT(id) AS n FROM t WHERE a IN (2) OR a = 1"),
    ...           schema=schema).sql()
    'SELECT COUNT(*) FROM t AS t WHERE t.a IN (1, 2)'
    """
    state = {} if state is None else state
    available = {"schema": schema, "dialect": dialect, "state": state}
    tree = tree.copy()
    for rule in rules:
        tree = rule(tree, **{k: v for k, v in available.items() if k in _parameters(rule)})
    return tree


def _parameters(rule: Rule) -> frozenset[str]:
    """The keyword arguments a rule declares (read once per rule, not once per query)."""
    try:
        return _declared(rule)
    except TypeError:  # an unhashable callable
        return frozenset(inspect.signature(rule).parameters)


@functools.lru_cache(maxsize=256)
def _declared(rule: Rule) -> frozenset[str]:
    return frozenset(inspect.signature(rule).parameters)


__all__ = ["RULES", "normalize", *(r.__name__ for r in RULES)]
