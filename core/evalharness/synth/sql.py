"""SQL seeds from a database's schema: question facts + a gold query, across a difficulty
ladder, each gold query parsed, executed read-only and kept only if its result is non-empty
and non-degenerate.

The ladder (``shape``, difficulty):

* ``filter`` (1): one table, one condition — a category value, or a numeric bound;
* ``aggregate`` (2): COUNT / AVG / MIN / MAX / SUM, with or without a condition;
* ``order_limit`` (2): the top 1 or top 3 by a numeric column, only where no tie falls on
  the cut (so the gold set is the only right one);
* ``null`` (2): rows where a nullable column is missing;
* ``group_by`` (3) and ``having`` (3): counts per category; categories above a count;
* ``join`` (3): rows of a table whose parent (a declared foreign key) has a value;
* ``ties`` (3): every row sharing the maximum — asked in the plural, since several tie;
* ``nested`` (4): above the table's average; parents with no children.

Accepted only if the result has 1 to :data:`MAX_ROWS` rows, is not all NULL, is not every
row of the table the question is about, and a count is not 0.
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Iterator
from typing import Any

import sqlglot

from evalharness.synth.schema import Schema, Table, plural, quote
from evalharness.synth.seeds import SQL, Seed

MAX_ROWS = 20
"""Largest result a synthetic question may have (a longer list is no question to ask)."""

TIME_LIMIT_S = 2.0
"""Longest a candidate gold query may run before it is dropped."""


def lit(value: Any) -> str:
    """A SQL literal of a value read from the database."""
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value) if isinstance(value, float) else str(value)


def _values(conn: sqlite3.Connection, table: Table, column: str) -> list[tuple[Any, int]]:
    """(value, rows) of a column, most frequent first, NULL left out."""
    q = quote(column)
    return [(r[0], r[1]) for r in conn.execute(
        f"SELECT {q}, COUNT(*) FROM {quote(table.name)} WHERE {q} IS NOT NULL "
        f"GROUP BY {q} ORDER BY COUNT(*) DESC, {q}")]


def _candidates(conn: sqlite3.Connection, schema: Schema, rng: random.Random
                ) -> Iterator[Seed]:
    """Every candidate seed, shape by shape (not yet executed)."""
    for table in schema.tables.values():
        if table.rows < 3:
            continue
        # a table without a label column (no names to list) still gets counts and aggregates
        label = table.label
        t = quote(table.name)
        lab = quote(label.name) if label is not None else None
        nouns = {"noun": table.noun, "nouns": plural(table.noun),
                 "label": label.words if label is not None else None, "table": table.name}
        for cat in table.categories:
            values = _values(conn, table, cat.name)
            c = quote(cat.name)
            for value, _ in values[:8]:
                facts = {**nouns, "column": cat.words, "value": value}
                if lab is not None:
                    yield Seed(SQL, "filter", 1, facts, tables=[table.name],
                               sql=f"SELECT {lab} FROM {t} WHERE {c} = {lit(value)} "
                                   f"ORDER BY {lab}")
                yield Seed(SQL, "aggregate", 2, {**facts, "agg": "count"}, tables=[table.name],
                           sql=f"SELECT COUNT(*) FROM {t} WHERE {c} = {lit(value)}")
                for m in table.measures[:2] if lab is not None else []:
                    mq = quote(m.name)
                    yield Seed(SQL, "nested", 4, {**facts, "measure": m.words},
                               tables=[table.name],
                               sql=f"SELECT {lab} FROM {t} WHERE {c} = {lit(value)} AND {mq} > "
                                   f"(SELECT AVG({mq}) FROM {t} WHERE {c} = {lit(value)}) "
                                   f"ORDER BY {lab}")
                for m in table.measures[:3]:
                    agg = rng.choice(["avg", "max", "min"])
                    fn = {"avg": "ROUND(AVG({}), 2)", "max": "MAX({})", "min": "MIN({})"}[agg]
                    yield Seed(SQL, "aggregate", 2, {**facts, "agg": agg, "measure": m.words},
                               tables=[table.name],
                               sql=f"SELECT {fn.format(quote(m.name))} FROM {t} "
                                   f"WHERE {c} = {lit(value)}")
            yield Seed(SQL, "group_by", 3, {**nouns, "column": cat.words,
                                            "columns": plural(cat.words)},
                       tables=[table.name],
                       sql=f"SELECT {c}, COUNT(*) FROM {t} WHERE {c} IS NOT NULL "
                           f"GROUP BY {c} ORDER BY {c}")
            counts = sorted({n for _, n in values})
            for k in counts[len(counts) // 2: len(counts) // 2 + 1]:  # the median group size
                yield Seed(SQL, "having", 3, {**nouns, "column": cat.words,
                                              "columns": plural(cat.words), "k": k,
                                              "_groups": cat.distinct},
                           tables=[table.name],
                           sql=f"SELECT {c} FROM {t} GROUP BY {c} HAVING COUNT(*) > {k} "
                               f"ORDER BY {c}")
        for m in table.measures[:4]:
            mq = quote(m.name)
            facts = {**nouns, "measure": m.words}
            bound = conn.execute(f"SELECT {mq} FROM {t} WHERE {mq} IS NOT NULL ORDER BY {mq} "
                                 f"LIMIT 1 OFFSET {max(0, table.rows // 5)}").fetchone()
            if lab is not None and bound is not None and isinstance(bound[0], int | float):
                b = bound[0]
                yield Seed(SQL, "filter", 1, {**facts, "bound": b, "op": "below"},
                           tables=[table.name],
                           sql=f"SELECT {lab} FROM {t} WHERE {mq} < {lit(b)} ORDER BY {lab}")
            for agg, fn in (("avg", "ROUND(AVG({}), 2)"), ("max", "MAX({})"),
                            ("sum", "SUM({})")):
                yield Seed(SQL, "aggregate", 2, {**facts, "agg": agg}, tables=[table.name],
                           sql=f"SELECT {fn.format(mq)} FROM {t}")
            if lab is None:
                continue  # the rest name rows
            for top, direction in ((1, "DESC"), (1, "ASC"), (3, "DESC"), (3, "ASC")):
                probe = (f"SELECT {mq} FROM {t} WHERE {mq} IS NOT NULL "
                         f"ORDER BY {mq} {direction}, {lab} LIMIT {top + 1}")
                yield Seed(SQL, "order_limit", 2,
                           {**facts, "top": top, "highest": direction == "DESC",
                            "_probe": probe},
                           tables=[table.name],
                           sql=f"SELECT {lab} FROM {t} WHERE {mq} IS NOT NULL "
                               f"ORDER BY {mq} {direction}, {lab} LIMIT {top}")
            yield Seed(SQL, "ties", 3, {**facts, "highest": True}, tables=[table.name],
                       sql=f"SELECT {lab} FROM {t} WHERE {mq} = (SELECT MAX({mq}) FROM {t}) "
                           f"ORDER BY {lab}")
            yield Seed(SQL, "ties", 3, {**facts, "highest": False}, tables=[table.name],
                       sql=f"SELECT {lab} FROM {t} WHERE {mq} = (SELECT MIN({mq}) FROM {t}) "
                           f"ORDER BY {lab}")
            yield Seed(SQL, "nested", 4, facts, tables=[table.name],
                       sql=f"SELECT {lab} FROM {t} WHERE {mq} > (SELECT AVG({mq}) FROM {t}) "
                           f"ORDER BY {lab}")
        for col in table.nullable[:2]:
            facts = {**nouns, "column": col.words}
            cq = quote(col.name)
            yield Seed(SQL, "null", 2, {**facts, "agg": "count"}, tables=[table.name],
                       sql=f"SELECT COUNT(*) FROM {t} WHERE {cq} IS NULL")
            if lab is not None:
                yield Seed(SQL, "null", 2, facts, tables=[table.name],
                           sql=f"SELECT {lab} FROM {t} WHERE {cq} IS NULL ORDER BY {lab}")
        for fk in table.foreign_keys:
            parent = schema.tables[fk.table]
            plabel = parent.label
            if plabel is None:
                continue
            p, pl = quote(parent.name), quote(plabel.name)
            on = f"c.{quote(fk.column)} = p.{quote(fk.ref)}"
            pfacts = {**nouns, "parent": parent.noun, "parents": plural(parent.noun),
                      "parent_label": plabel.words}
            for value, _ in _values(conn, parent, plabel.name)[:6]:
                if lab is not None:
                    yield Seed(SQL, "join", 3, {**pfacts, "parent_value": value},
                               tables=[table.name, parent.name],
                               sql=f"SELECT c.{lab} FROM {t} c JOIN {p} p ON {on} "
                                   f"WHERE p.{pl} = {lit(value)} ORDER BY c.{lab}")
                yield Seed(SQL, "join", 3, {**pfacts, "parent_value": value, "agg": "count"},
                           tables=[table.name, parent.name],
                           sql=f"SELECT COUNT(*) FROM {t} c JOIN {p} p ON {on} "
                               f"WHERE p.{pl} = {lit(value)}")
            for cat in parent.categories[:2] if lab is not None else []:
                for value, _ in _values(conn, parent, cat.name)[:4]:
                    yield Seed(SQL, "join", 3, {**pfacts, "parent_column": cat.words,
                                                "parent_value": value},
                               tables=[table.name, parent.name],
                               sql=f"SELECT c.{lab} FROM {t} c JOIN {p} p ON {on} "
                                   f"WHERE p.{quote(cat.name)} = {lit(value)} ORDER BY c.{lab}")
            yield Seed(SQL, "nested", 4, pfacts, tables=[parent.name, table.name],
                       sql=f"SELECT {pl} FROM {p} WHERE {quote(fk.ref)} NOT IN (SELECT "
                           f"{quote(fk.column)} FROM {t} WHERE {quote(fk.column)} IS NOT NULL) "
                           f"ORDER BY {pl}")


def _run(conn: sqlite3.Connection, sql: str) -> tuple[list[str], list[list[Any]]] | None:
    """Execute under a time limit; ``None`` when it fails or takes too long."""
    deadline = time.monotonic() + TIME_LIMIT_S
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        cursor = conn.execute(sql)
        rows = cursor.fetchmany(MAX_ROWS + 1)
        columns = [d[0] for d in cursor.description or []]
    except sqlite3.Error:
        return None
    finally:
        conn.set_progress_handler(None, 0)
    return columns, [list(r) for r in rows]


def problem(seed: Seed, schema: Schema, result: tuple[list[str], list[list[Any]]] | None
            ) -> str | None:
    """Why an executed seed is not a case (``None``: it is). The reasons are counted in the
    summary."""
    if result is None:
        return "sql_failed"
    _, rows = result
    if not rows:
        return "sql_empty"
    if len(rows) > MAX_ROWS:
        return "sql_too_many_rows"
    if all(v is None for row in rows for v in row):
        return "sql_all_null"
    if seed.facts.get("agg") == "count" and rows[0][0] == 0:
        return "sql_empty"
    main = schema.tables[seed.tables[0]]
    if seed.shape in ("filter", "join", "nested", "null", "ties") and len(rows) >= main.rows:
        return "sql_whole_table"
    if seed.shape == "having" and len(rows) >= seed.facts["_groups"]:
        return "sql_whole_table"  # every group is above the count
    if seed.shape == "ties" and len(rows) < 2:
        return "sql_no_tie"  # one row at the top: that is an order_limit question
    return None


def _tie_at_cut(conn: sqlite3.Connection, seed: Seed) -> bool:
    """Whether the row after the cut of a top-N query ties with the last row kept (then the
    gold set would be one engine's tie order, not the answer)."""
    result = _run(conn, seed.facts["_probe"])
    if result is None:
        return True
    values = [r[0] for r in result[1]]
    return len(values) > seed.facts["top"] and values[-1] == values[-2]


def sql_seeds(conn: sqlite3.Connection, schema: Schema, rng: random.Random,
              rejected: dict[str, int]) -> dict[str, list[Seed]]:
    """Accepted SQL seeds by shape, each with its rows; why the others were dropped is
    counted into ``rejected``."""
    out: dict[str, list[Seed]] = {}
    seen: set[str] = set()
    for seed in _candidates(conn, schema, rng):
        if seed.sql in seen:
            continue
        seen.add(seed.sql)
        try:
            sqlglot.parse_one(seed.sql, read="sqlite")
        except sqlglot.errors.ParseError:
            rejected["sql_unparsable"] = rejected.get("sql_unparsable", 0) + 1
            continue
        result = _run(conn, seed.sql)
        why = problem(seed, schema, result)
        if why is None and seed.shape == "order_limit" and _tie_at_cut(conn, seed):
            why = "sql_tie_at_limit"
        if why is not None:
            rejected[why] = rejected.get(why, 0) + 1
            continue
        seed.columns, seed.rows = result
        out.setdefault(seed.shape, []).append(seed)
    return out
