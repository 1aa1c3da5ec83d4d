"""Minimal counterexamples: delta debugging over the rows of a separating test database.

A test database that separates two queries holds a few dozen rows, most of them beside the
point. :func:`shrink` removes rows while the database still separates the queries and is still
a database of the schema, until no single row can go (Zeller and Hildebrandt's *ddmin*, 2002:
remove halves, then quarters, ... then single rows; each pass removes every part that can go),
within a budget of query runs. A row whose
parent is removed goes with it (a foreign key must point at an existing row), so every
candidate is valid by construction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evalharness_sql.contract import conform
from evalharness_sql.engines import Schema

Data = dict[str, list[tuple[Any, ...]]]

MAX_RUNS = 200
"""Most candidate databases tried while shrinking one (each runs both queries once)."""


def rows_in(data: Data) -> int:
    return sum(len(rows) for rows in data.values())


def shrink(schema: Schema, order: list[str], data: Data, separates: Callable[[Data], bool],
           *, max_runs: int = MAX_RUNS) -> tuple[Data, int]:
    """The smallest sub-database of ``data`` found on which ``separates`` still holds, and how
    many candidates were tried. ``order`` lists the tables parents first.

    >>> from evalharness_sql.engines import SQLiteEngine
    >>> schema = SQLiteEngine.from_ddl(
    ...     "CREATE TABLE p (id INTEGER PRIMARY KEY);"
    ...     "CREATE TABLE c (id INTEGER PRIMARY KEY, p_id INT REFERENCES p(id), x INT)").schema()
    >>> data = {"p": [(1,), (2,), (3,)], "c": [(i, 1 + i % 3, i) for i in range(1, 13)]}
    >>> # the queries differ as soon as one child has x = 7
    >>> small, runs = shrink(schema, ["p", "c"], data, lambda d: any(r[2] == 7 for r in d["c"]))
    >>> small, runs <= 40
    ({'p': [(2,)], 'c': [(7, 2, 7)]}, True)
    """
    items = [(t, i) for t in order for i in range(len(data.get(t, [])))]
    runs = 0

    def build(chosen: list[tuple[str, int]]) -> Data:
        keep: dict[str, set[int]] = {}
        for t, i in chosen:
            keep.setdefault(t, set()).add(i)
        candidate = {t: [r for i, r in enumerate(data.get(t, [])) if i in keep.get(t, ())]
                     for t in order}
        conform(schema, order, candidate)  # children of removed parents go too
        return candidate

    def closed(chosen: list[tuple[str, int]]) -> tuple[list[tuple[str, int]], Data]:
        candidate = build(chosen)
        present = {t: {r for r in rows} for t, rows in candidate.items()}
        kept = [(t, i) for t, i in chosen if data[t][i] in present.get(t, set())]
        return kept, candidate

    def test(chosen: list[tuple[str, int]]) -> tuple[bool, list[tuple[str, int]], Data]:
        nonlocal runs
        kept, candidate = closed(chosen)
        runs += 1
        return separates(candidate), kept, candidate

    best = data
    n = 2
    while len(items) >= 2 and runs < max_runs:
        size = -(-len(items) // n)
        chunks = [items[i:i + size] for i in range(0, len(items), size)]
        removed = False
        for chunk in chunks:  # one pass: every chunk that can go, goes
            if runs >= max_runs:
                break
            gone = set(chunk)
            chosen = [x for x in items if x not in gone]
            if not chosen or len(chosen) == len(items):
                continue
            ok, kept, candidate = test(chosen)
            if ok:
                items, best = kept, candidate
                removed = True
        if removed:
            n = max(n - 1, 2)
        elif n >= len(items):
            break
        else:
            n = min(len(items), n * 2)
    return {t: rows for t, rows in best.items() if t in data}, runs
