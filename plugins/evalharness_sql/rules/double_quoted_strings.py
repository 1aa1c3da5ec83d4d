"""SQLite reads a double-quoted word that names no column as a string literal; so do we."""

from __future__ import annotations

from sqlglot import exp

from evalharness_sql.schema import Schema


def double_quoted_strings(tree: exp.Expression, schema: Schema | None,
                          dialect: str) -> exp.Expression:
    """Turn ``"France"`` into ``'France'`` where SQLite would (no column of a table the query
    reads, and no output alias, has that name).

    Spider's gold queries often write ``WHERE country = "France"``; without this rule they
    would not qualify against the schema.

    >>> import sqlglot
    >>> from evalharness_sql.engines import SQLiteEngine
    >>> schema = SQLiteEngine.from_ddl("CREATE TABLE singer (name TEXT, country TEXT)").schema()
    >>> tree = sqlglot.parse_one('SELECT "name" FROM singer WHERE country = "France"')
    >>> double_quoted_strings(tree, schema, "sqlite").sql()
    'SELECT "name" FROM singer WHERE country = \\'France\\''
    """
    if dialect != "sqlite" or schema is None:
        return tree
    names: set[str] = set()
    for table in tree.find_all(exp.Table):
        t = schema.table(table.name)
        if t is not None:
            names.update(c.name.lower() for c in t.columns)
    for select in tree.find_all(exp.Select):
        names.update(e.alias.lower() for e in select.expressions if e.alias)
    for column in list(tree.find_all(exp.Column)):
        ident = column.this
        if (isinstance(ident, exp.Identifier) and ident.quoted and not column.table
                and ident.name.lower() not in names):
            column.replace(exp.Literal.string(ident.name))
    return tree
