"""Text-to-SQL evaluators: is the predicted query the gold query?

First metric (evaluator ``exact_match``): 1 when the predicted and gold queries have the same
normal form after sqlglot parsing, identifier normalisation and, when the scenario has a
database, qualification against its schema. Unparsable predictions score 0 (they are wrong
answers, not missing measurements); an unparsable *gold* query is an error.
"""

from __future__ import annotations

import re

import sqlglot
from pydantic import BaseModel, ConfigDict
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers
from sqlglot.optimizer.qualify import qualify

from evalharness import MetricValue, hookimpl
from evalharness.registry import Evaluator

__version__ = "0.1.0"

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ExactMatchSettings(BaseModel):
    """Settings of the ``exact_match`` evaluator."""

    model_config = ConfigDict(extra="forbid")

    dialect: str | None = None
    """SQL dialect; default: the scenario database's dialect, else ``sqlite``."""


def normal_form(sql: str, dialect: str = "sqlite", schema: dict | None = None) -> str:
    """A canonical rendering of one SQL statement.

    Identifiers are normalised (case, quoting), and with a schema every column is qualified
    with its table and every output column aliased, so that cosmetic differences vanish.

    >>> normal_form("select NAME from Products where price<10")
    'SELECT name FROM products AS products WHERE price < 10'
    >>> schema = {"products": {"name": "TEXT", "price": "REAL"}}
    >>> normal_form("SELECT name FROM products p", schema=schema) == \\
    ...     normal_form("select products.name from products", schema=schema)
    True
    """
    parsed = sqlglot.parse(sql, read=dialect)
    statements = [s for s in parsed if s is not None]
    if len(statements) != 1:
        raise SqlglotError(f"expected one statement, found {len(statements)}")
    tree = normalize_identifiers(statements[0], dialect=dialect)
    if schema is not None:
        try:
            tree = qualify(tree, schema=schema, dialect=dialect, quote_identifiers=False,
                           validate_qualify_columns=False)
        except SqlglotError:
            pass  # unknown tables or columns: compare unqualified
    tree = canonical_table_aliases(tree)
    for ident in tree.find_all(exp.Identifier):
        if ident.quoted and _PLAIN.match(ident.name):
            ident.set("quoted", False)  # after normalisation, "name" and name are one column
    return tree.sql(dialect=dialect, normalize=True, comments=False)


def canonical_table_aliases(tree: exp.Expression) -> exp.Expression:
    """Rename table aliases to canonical names in a flat query (no subqueries or CTEs).

    A table used once is aliased by its own name; one used several times gets ``name_1``,
    ``name_2``, ... in order of appearance. Nested queries are left as they are: renaming
    across scopes is not safe without full scope analysis.

    >>> tree = sqlglot.parse_one("SELECT p.name FROM products AS p WHERE p.price < 5")
    >>> canonical_table_aliases(tree).sql()
    'SELECT products.name FROM products AS products WHERE products.price < 5'
    """
    if any(True for _ in tree.find_all(exp.Subquery, exp.CTE)) or \
            len(list(tree.find_all(exp.Select))) != 1:
        return tree
    tables = list(tree.find_all(exp.Table))
    aliases = [t.alias_or_name for t in tables]
    if len(set(aliases)) != len(aliases):
        return tree
    counts: dict[str, int] = {}
    for t in tables:
        counts[t.name] = counts.get(t.name, 0) + 1
    seen: dict[str, int] = {}
    mapping: dict[str, str] = {}
    for t in tables:
        if counts[t.name] == 1:
            mapping[t.alias_or_name] = t.name
        else:
            seen[t.name] = seen.get(t.name, 0) + 1
            mapping[t.alias_or_name] = f"{t.name}_{seen[t.name]}"
    for t in tables:
        t.set("alias", exp.TableAlias(this=exp.to_identifier(mapping[t.alias_or_name])))
    for column in tree.find_all(exp.Column):
        if column.table in mapping:
            column.set("table", exp.to_identifier(mapping[column.table]))
    return tree


@hookimpl
def register_evaluators(register):
    register(Evaluator(
        name="exact_match", component="text2sql", metrics=["exact_match"],
        settings=ExactMatchSettings,
        description="1 when predicted and gold SQL have the same sqlglot normal form"))


@hookimpl
def evaluate_text2sql(evaluator, batch, settings, context):
    if evaluator != "exact_match":
        return None
    dialect = settings.dialect or (context.database.dialect if context.database else "sqlite")
    schema = context.database.schema() if context.database is not None else None
    rows = []
    for case, step in batch:
        if not case.gold.sql:
            rows.append({"exact_match": MetricValue.failed("the case has no gold SQL (gold.sql)")})
            continue
        try:
            gold = normal_form(case.gold.sql, dialect, schema)
        except SqlglotError as exc:
            rows.append({"exact_match": MetricValue.failed(
                f"the gold SQL does not parse as {dialect}: {str(exc).splitlines()[0]}")})
            continue
        if not step.sql:
            rows.append({"exact_match": MetricValue.of(False, reason="no SQL was produced")})
            continue
        try:
            pred = normal_form(step.sql, dialect, schema)
        except SqlglotError as exc:
            rows.append({"exact_match": MetricValue.of(
                False, reason=f"predicted SQL does not parse: {str(exc).splitlines()[0]}")})
            continue
        rows.append({"exact_match": MetricValue.of(pred == gold, gold=gold, predicted=pred)})
    return rows
