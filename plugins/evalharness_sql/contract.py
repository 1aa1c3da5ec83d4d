"""What "a database of the schema" means, checked in Python on the rows the test suite made.

docs/metrics/sql.md promises that two queries are equivalent when they agree on every database
of the schema, and that a counterexample is such a database. A database the contract forbids
proves nothing (text in an INTEGER column, two rows under one primary key, a child without its
parent), so every test database is checked here before use — on the generated rows, the same
way for every engine (SQLite would store the wrong value silently, DuckDB and PostgreSQL would
refuse it or the whole database) — and one that fails is counted and skipped, not used.

The rules, per column: a value of the declared type (:func:`accepts`), no NULL where ``NOT
NULL`` or the primary key forbids it, a value of the ``CHECK (column IN (...))`` list; per
table: primary keys and ``UNIQUE`` column sets unique (NULLs never collide in a UNIQUE set);
foreign keys into the tables of ``data`` (the tables the queries read) pointing at an existing
parent, unless a column of the key is NULL. Foreign keys into tables the queries do not read
are not checked: such parents cannot change a result, and a loader adds them (see
``tests/test_sql_benchmark.py``).
"""

from __future__ import annotations

import math
import re
from typing import Any

from evalharness_sql.engines import Column, Schema

MAX_REPORTED = 20
"""Violations listed per database, at most (the first ones)."""


def family(column: Column) -> str:
    """What values a column's declared type lets in: ``integer``, ``real``, ``boolean``,
    ``date`` (text), ``text``, or ``any`` (a BLOB or untyped column).

    >>> [family(Column("c", t)) for t in ("INT", "number", "varchar(9)", "DATE", "", "BOOL")]
    ['integer', 'real', 'text', 'date', 'any', 'boolean']
    """
    declared = column.type.upper()
    if "BOOL" in declared:
        return "boolean"
    if "DATE" in declared or "TIME" in declared:
        return "date"
    affinity = column.affinity
    if affinity == "INTEGER":
        return "integer"
    if affinity in ("REAL", "NUMERIC"):
        return "real"
    if affinity == "TEXT":
        return "text"
    return "any"


def _accepts(kind: str, value: Any) -> bool:
    if kind == "any":
        return True
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "real":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":  # SQLite has no boolean: 0 and 1, or a boolean spelt as text
        return (value in (0, 1) and not isinstance(value, float)) or isinstance(value, str)
    return isinstance(value, str)


def accepts(column: Column, value: Any) -> bool:
    """Whether a non-NULL value is one of the column's declared type.

    >>> c = Column("year", "INTEGER")
    >>> accepts(c, 2014), accepts(c, "2014"), accepts(c, 2014.0), accepts(c, True)
    (True, False, False, False)
    >>> accepts(Column("price", "REAL"), 3), accepts(Column("flag", "BOOLEAN"), 2)
    (True, False)
    >>> accepts(Column("is_male", "bool"), "T")  # as Spider's databases spell it
    True
    """
    return _accepts(family(column), value)


def key_value(value: Any) -> Any:
    """How a key compares: ``2`` and ``2.0`` are one key."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def parent_value(parent: Column, value: Any) -> Any:
    """A child's foreign-key value as its parent key compares it: SQLite applies the parent
    column's affinity to the child's value (``'3'`` in a TEXT column refers to ``3`` in an
    INTEGER key).

    >>> parent_value(Column("id", "INT"), "3"), parent_value(Column("id", "TEXT"), 3)
    (3, '3')
    """
    affinity = parent.affinity
    if isinstance(value, str) and affinity in ("INTEGER", "REAL", "NUMERIC"):
        text = value.strip()
        if re.fullmatch(r"[-+]?\d+", text):
            return int(text)
        try:
            number = float(text)
        except ValueError:
            return value
        return key_value(number) if math.isfinite(number) else value
    if isinstance(value, int | float) and not isinstance(value, bool) and affinity == "TEXT":
        return str(value)
    return key_value(value)


def violations(schema: Schema, data: dict[str, list[tuple[Any, ...]]]) -> list[str]:
    """What makes ``data`` (``{lower-cased table: rows}``) not a database of the schema, in
    words; empty when it is one.

    >>> from evalharness_sql.engines import SQLiteEngine
    >>> schema = SQLiteEngine.from_ddl(
    ...     "CREATE TABLE p (id INTEGER PRIMARY KEY, name TEXT NOT NULL);"
    ...     "CREATE TABLE c (id INTEGER PRIMARY KEY, p_id INT REFERENCES p(id))").schema()
    >>> violations(schema, {"p": [(1, "a")], "c": [(1, 1), (2, None)]})
    []
    >>> violations(schema, {"p": [(1, None), (1, "b")], "c": [(1, 7), (2, "x")]})
    ... # doctest: +NORMALIZE_WHITESPACE
    ['p.name is NULL in row 1, but the column is NOT NULL',
     'p: rows 1 and 2 share the primary key (id) = (1)',
     "c.p_id holds 'x' in row 2, not a value of its type INT",
     'c row 1: (p_id) = (7) has no parent row in p',
     "c row 2: (p_id) = ('x') has no parent row in p"]
    """
    out: list[str] = []
    if all(_valid(schema, key, rows, data) for key, rows in data.items()):
        return out  # the common case, checked column by column; the words only when needed
    for key, rows in data.items():
        table = schema.tables.get(key)
        if table is None or table.is_view or not rows:
            continue
        names = [c.name.lower() for c in table.columns]
        kinds = [family(c) for c in table.columns]
        for n, row in enumerate(rows, 1):
            for column, kind, value in zip(table.columns, kinds, row, strict=False):
                if value is None:
                    if column.notnull:
                        out.append(f"{table.name}.{column.name} is NULL in row {n}, but the "
                                   f"column is {'part of the primary key' if column.pk else 'NOT NULL'}")
                    continue
                if not _accepts(kind, value):
                    out.append(f"{table.name}.{column.name} holds {value!r} in row {n}, not a "
                               f"value of its type {column.type or 'ANY'}")
                elif column.allowed is not None and value not in column.allowed:
                    out.append(f"{table.name}.{column.name} holds {value!r} in row {n}, outside "
                               f"its CHECK list {list(column.allowed)!r}")
        keys = [("primary key", table.primary_key)] if table.primary_key else []
        keys += [("UNIQUE", u) for u in table.unique]
        for label, cols in keys:
            idx = [names.index(c.lower()) for c in cols if c.lower() in names]
            if len(idx) != len(cols):
                continue
            seen: dict[tuple[Any, ...], int] = {}
            for n, row in enumerate(rows, 1):
                values = tuple(key_value(row[i]) for i in idx)
                if None in values:
                    continue
                if values in seen:
                    out.append(f"{table.name}: rows {seen[values]} and {n} share the {label} "
                               f"({', '.join(cols)}) = ({', '.join(map(repr, values))})")
                else:
                    seen[values] = n
        for fk, idx, pcols, present in _parents(schema, table, names, data):
            for n, row in enumerate(rows, 1):
                values = tuple(parent_value(c, row[i]) for c, i in zip(pcols, idx, strict=True))
                if None in values or values in present:
                    continue
                out.append(f"{table.name} row {n}: ({', '.join(fk.columns)}) = "
                           f"({', '.join(map(repr, values))}) has no parent row in "
                           f"{schema.tables[fk.table.lower()].name}")
        if len(out) >= MAX_REPORTED:
            break
    return out[:MAX_REPORTED]


def coerce(column: Column, value: Any) -> tuple[bool, Any]:
    """``(True, value)`` converted to the column's declared type when that keeps its meaning
    (``'42'`` or ``42.0`` for an INTEGER column, ``'2.5'`` for a REAL one, a number for a TEXT
    one), else ``(False, None)``.

    >>> c = Column("year", "INTEGER")
    >>> coerce(c, " 2014 "), coerce(c, 2014.0), coerce(c, "a"), coerce(c, 2.5)
    ((True, 2014), (True, 2014), (False, None), (False, None))
    """
    if value is None or accepts(column, value):
        return True, value
    kind = family(column)
    if kind in ("integer", "boolean"):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        elif isinstance(value, str) and re.fullmatch(r"\s*[-+]?\d+\s*", value):
            value = int(value)
    elif kind == "real" and isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return False, None
        if not math.isfinite(value):
            return False, None
    elif kind in ("text", "date") and isinstance(value, int | float) and \
            not isinstance(value, bool):
        value = str(value)
    return (True, value) if accepts(column, value) else (False, None)


def conform(schema: Schema, order: list[str],
            data: dict[str, list[tuple[Any, ...]]]) -> int:
    """Make ``data`` a database of the schema in place (see :func:`_conform_once`), pass
    after pass until nothing changes: a row dropped can leave a child behind in its own table
    (``employee.mgr_id``). Returns how many values and rows were changed."""
    changed = 0
    for _ in range(1 + sum(len(rows) for rows in data.values())):
        once = _conform_once(schema, order, data)
        changed += once
        if not once:
            break
    return changed


def _valid(schema: Schema, key: str, rows: list[tuple[Any, ...]],
           data: dict[str, list[tuple[Any, ...]]]) -> bool:
    """:func:`_valid_table` for one table of ``data``, with its foreign keys into ``data``."""
    table = schema.tables.get(key)
    if table is None or table.is_view or not rows:
        return True
    names = [c.name.lower() for c in table.columns]
    keys = ([table.primary_key] if table.primary_key else []) + list(table.unique)
    return _valid_table(table, [family(c) for c in table.columns], rows, names, keys,
                        _parents(schema, table, names, data))


def _parents(schema: Schema, table: Any, names: list[str],
             data: dict[str, list[tuple[Any, ...]]]) -> list[Any]:
    """The table's foreign keys into ``data`` (a parent the queries do not read is not
    checked): ``(foreign key, child columns, parent key columns, the parents' keys
    present)``."""
    parents = []
    for fk in table.foreign_keys:
        parent = schema.tables.get(fk.table.lower())
        if parent is None or fk.table.lower() not in data:
            continue
        pnames = [c.name.lower() for c in parent.columns]
        if all(c.lower() in names for c in fk.columns) and \
                all(r and r.lower() in pnames for r in fk.ref_columns):
            pidx = [pnames.index(r.lower()) for r in fk.ref_columns]
            parents.append((fk, [names.index(c.lower()) for c in fk.columns],
                            [parent.columns[i] for i in pidx],
                            {tuple(key_value(r[i]) for i in pidx)
                             for r in data[fk.table.lower()]}))
    return parents


_TYPES: dict[str, set[type]] = {
    "integer": {int, type(None)}, "real": {int, float, type(None)},
    "text": {str, type(None)}, "date": {str, type(None)}, "boolean": {int, str, type(None)}}


def _valid_table(table: Any, kinds: list[str], rows: list[tuple[Any, ...]], names: list[str],
                 keys: list[tuple[str, ...]], parents: list[Any]) -> bool:
    """Whether a table's rows already respect the schema (a fast check over whole columns;
    False sends the table through the row-by-row repair)."""
    if any(len(r) != len(table.columns) for r in rows):
        return False
    columns = list(zip(*rows, strict=True))
    for i, column in enumerate(table.columns):
        values = columns[i]
        types = set(map(type, values))
        if kinds[i] != "any" and not types <= _TYPES[kinds[i]]:
            return False
        if kinds[i] == "boolean" and int in types and \
                not {v for v in values if type(v) is int} <= {0, 1}:
            return False
        if column.notnull and type(None) in types:
            return False
        if column.allowed is not None and not {v for v in values if v is not None} <= \
                set(column.allowed):
            return False
    for cols in keys:
        idx = [names.index(c.lower()) for c in cols if c.lower() in names]
        marks = [m for m in (tuple(key_value(r[i]) for i in idx) for r in rows) if None not in m]
        if len(set(marks)) != len(marks):
            return False
    for _, idx, pcols, present in parents:
        for r in rows:
            ref = tuple(parent_value(c, r[i]) for c, i in zip(pcols, idx, strict=True))
            if None not in ref and ref not in present:
                return False
    return True


def _conform_once(schema: Schema, order: list[str],
                  data: dict[str, list[tuple[Any, ...]]]) -> int:
    """Make ``data`` a database of the schema in place, parents (``order``) before children:
    values converted to their column's type where that keeps their meaning, else NULL where
    the column allows it, else the row dropped; rows that repeat a key or lose their parent
    dropped. Returns how many values and rows were changed (0 for rows the generators made,
    which respect the schema; the real rows a perturbed copy samples may not).

    >>> from evalharness_sql.engines import SQLiteEngine
    >>> schema = SQLiteEngine.from_ddl(
    ...     "CREATE TABLE p (id INTEGER PRIMARY KEY, n INT);"
    ...     "CREATE TABLE c (id INTEGER PRIMARY KEY, p_id INT NOT NULL REFERENCES p(id))"
    ... ).schema()
    >>> data = {"p": [(1, "2 "), (1, 3), (2, "a")], "c": [(1, 2), (2, 9)]}
    >>> _conform_once(schema, ["p", "c"], data), data
    (4, {'p': [(1, 2), (2, None)], 'c': [(1, 2)]})
    """
    changed = 0
    for key in order:
        rows = data.get(key)
        table = schema.tables.get(key)
        if not rows or table is None:
            continue
        names = [c.name.lower() for c in table.columns]
        kinds = [family(c) for c in table.columns]
        kept: list[tuple[Any, ...]] = []
        keys = [table.primary_key] if table.primary_key else []
        keys += list(table.unique)
        seen: list[set[tuple[Any, ...]]] = [set() for _ in keys]
        parents = _parents(schema, table, names, data)
        if _valid_table(table, kinds, rows, names, keys, parents):
            continue  # the common case, checked column by column
        for row in rows:
            values = list(row)
            ok = True
            for i, column in enumerate(table.columns):
                value = values[i]
                if value is not None and _accepts(kinds[i], value) and column.allowed is None:
                    continue  # the common case
                fits, value = coerce(column, value)
                if fits and value is not None and column.allowed is not None and \
                        value not in column.allowed:
                    fits = False
                if not fits:
                    value = None
                if value is not values[i]:
                    changed += 1
                if value is None and column.notnull:
                    ok = False
                values[i] = value
            for _, idx, pcols, present in parents:
                if ok:
                    ref = tuple(parent_value(c, values[i]) for c, i in zip(pcols, idx,
                                                                           strict=True))
                    ok = None in ref or ref in present
            marks = []
            for n, cols in enumerate(keys):
                if not ok:
                    break
                mark = tuple(key_value(values[names.index(c.lower())]) for c in cols
                             if c.lower() in names)
                if None in mark:
                    continue
                ok = mark not in seen[n]
                marks.append((n, mark))
            if not ok:
                changed += 1
                continue
            for n, mark in marks:
                seen[n].add(mark)
            kept.append(tuple(values))
        data[key] = kept
    return changed
