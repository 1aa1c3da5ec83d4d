"""Identifier case and quoting: sqlglot's ``normalize_identifiers``, then needless quotes dropped."""

from __future__ import annotations

import re

from sqlglot import exp
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def identifiers(tree: exp.Expression, dialect: str) -> exp.Expression:
    """Case-fold identifiers the way the dialect resolves them (SQLite: case-insensitive),
    then unquote the quoted ones that mean the same unquoted (``"name"`` is ``name``; in a
    case-sensitive dialect ``"Name"`` keeps its quotes).

    >>> import sqlglot
    >>> identifiers(sqlglot.parse_one('SELECT "NAME" FROM Singer'), "sqlite").sql()
    'SELECT name FROM singer'
    >>> identifiers(sqlglot.parse_one('SELECT "Name" FROM t', read="postgres"), "postgres").sql()
    'SELECT "Name" FROM t'
    """
    tree = normalize_identifiers(tree, dialect=dialect)
    for ident in tree.find_all(exp.Identifier):
        if ident.quoted and _PLAIN.match(ident.name):
            bare = normalize_identifiers(exp.to_identifier(ident.name, quoted=False),
                                         dialect=dialect)
            if bare.name == ident.name:
                ident.set("quoted", False)
    return tree
