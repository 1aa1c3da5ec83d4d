"""Qualify every column with its table and expand ``*``, against the schema (sqlglot's ``qualify``)."""

from __future__ import annotations

from typing import Any

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.qualify import qualify

from evalharness_sql.schema import Schema

SAFE_TYPES = {"INTEGER": "INT", "TEXT": "TEXT", "REAL": "DOUBLE", "NUMERIC": "DECIMAL",
              "BLOB": "TEXT"}


def qualify_columns(tree: exp.Expression, schema: Schema | None, dialect: str,
                    state: dict[str, Any]) -> exp.Expression:
    """Qualify columns, alias every table and projection, expand stars. A column that the
    schema does not have, or that is ambiguous, stops qualification (``state["qualified"]``
    stays false, and the rules that need qualified columns do nothing): it is never guessed.

    >>> import sqlglot
    >>> from evalharness_sql.engines import SQLiteEngine
    >>> schema = SQLiteEngine.from_ddl("CREATE TABLE singer (id INT, name TEXT)").schema()
    >>> state = {}
    >>> qualify_columns(sqlglot.parse_one("SELECT name FROM singer"), schema, "sqlite",
    ...                 state).sql(), state["qualified"]
    ('SELECT singer.name AS name FROM singer AS singer', True)
    >>> state = {}
    >>> qualify_columns(sqlglot.parse_one("SELECT nme FROM singer"), schema, "sqlite",
    ...                 state).sql(), state["qualified"]
    ('SELECT nme FROM singer', False)
    """
    state["qualified"] = False
    if schema is None:
        return tree
    mapping = {t.name: {c.name: _type(c.type, c.affinity, dialect) for c in t.columns}
               for t in schema.tables.values()}
    try:
        qualified = qualify(tree.copy(), schema=mapping, dialect=dialect,
                            quote_identifiers=False, validate_qualify_columns=True,
                            identify=False)
    except (SqlglotError, KeyError, ValueError, TypeError, AttributeError, AssertionError,
            RecursionError):
        return tree
    state["qualified"] = True
    return qualified


def _type(declared: str, affinity: str, dialect: str) -> str:
    if dialect == "sqlite":
        return SAFE_TYPES[affinity]
    try:
        exp.DataType.build(declared or "TEXT", dialect=dialect)
        return declared or "TEXT"
    except (SqlglotError, ValueError):
        return "TEXT"
