"""Many pairs at once: :func:`check_many` spreads a batch over the helper processes.

The cascade is pure Python and CPU-bound: parsing, normalising, generating and shrinking test
databases. A batch of pairs on one SQLite file is cut into chunks of :data:`CHUNK` pairs;
this process and every helper process (:mod:`evalharness_sql.workers`, started once and kept
warm) take chunks from one queue until none is left, and the verdicts are put back in the
batch's order. A verdict depends only on its pair (the test databases are seeded by the pair),
so it is the same wherever it is computed. A chunk a helper cannot do (it died, an answer
does not unpickle) is done here.

What stays in this process: a batch with a judge (its requests, accounting and cache are
the caller's), a database that is not a SQLite file, and small batches.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
from collections.abc import Sequence
from typing import Any

from evalharness_sql import workers
from evalharness_sql.cascade import check_many as check_here
from evalharness_sql.engines import SQLiteEngine, open_engine
from evalharness_sql.verdict import Options, Verdict

CHUNK = 4
"""Pairs handed out at a time (small, so that no process waits long for the last chunk)."""

MIN_PAIRS = 2 * CHUNK
"""Smallest batch worth spreading."""


def check_many(pairs: Sequence[tuple[str, str]], database: Any = None, dialect: str = "sqlite",
               *, predicted_dialect: str | None = None, judge: Any = None,
               schema: str | None = None, options: Options | None = None,
               budget_s: float | None = None) -> list[Verdict]:
    """:func:`~evalharness_sql.cascade.check_equivalence` for many ``(gold, predicted)``
    pairs on one database, in this process and the helper processes together; the verdicts
    in the pairs' order. ``budget_s`` is each pair's own budget.

    >>> check_many([("SELECT 1", "SELECT 1")])[0].stage
    'normalise'
    """
    pairs = list(pairs)
    engine = open_engine(database, schema=schema) if database is not None else None
    if (judge is not None or (options is not None and options.judge is not None)
            or len(pairs) < MIN_PAIRS or not _spreadable(engine)):
        return check_here(pairs, engine if engine is not None else database, dialect,
                          predicted_dialect=predicted_dialect, judge=judge, schema=schema,
                          options=options, budget_s=budget_s)
    return check_databases([(engine, pairs)], dialect, predicted_dialect=predicted_dialect,
                           options=options, budget_s=budget_s)[0]


def check_databases(batches: Sequence[tuple[Any, Sequence[tuple[str, str]]]],
                    dialect: str = "sqlite", *, predicted_dialect: str | None = None,
                    options: Options | None = None, budget_s: float | None = None
                    ) -> list[list[Verdict]]:
    """:func:`check_many` for several databases at once — ``[(database, pairs), ...]``, the
    verdicts per database in the same order — with one queue of chunks for all of them, so
    that no process waits at the end of each database. No judge: what stays undecided is
    undecided.

    >>> [[v.stage for v in vs] for vs in check_databases([(None, [("SELECT 1", "SELECT 1")])])]
    [['normalise']]
    """
    opts = dataclasses.replace(options) if options is not None else Options()
    opts.judge = None
    if budget_s is not None:
        opts.budget_s = budget_s
    jobs: list[tuple[Any, list[tuple[str, str]]]] = []
    owner: list[int] = []
    for n, (database, pairs) in enumerate(batches):
        engine = open_engine(database)
        pairs = list(pairs)
        for i in range(0, len(pairs), CHUNK):
            jobs.append((engine, pairs[i:i + CHUNK]))
            owner.append(n)
    done: list[list[Verdict] | None] = [None] * len(jobs)

    def here(i: int) -> None:
        engine, chunk = jobs[i]
        done[i] = check_here(chunk, engine, dialect, predicted_dialect=predicted_dialect,
                             options=opts)

    todo: queue.Queue[int] = queue.Queue()
    for i in range(len(jobs)):
        todo.put(i)

    def helper_loop(helper: workers.Helper) -> None:
        while True:
            try:
                i = todo.get_nowait()
            except queue.Empty:
                return
            engine, chunk = jobs[i]
            if not _spreadable(engine):
                here(i)
                continue
            future = workers.submit_chunk(helper, chunk, engine.path, engine.fingerprint(),
                                          dialect, predicted_dialect, opts)
            try:
                verdicts = future.result()
            except Exception:  # noqa: BLE001 - the helper could not: do it here
                here(i)
                return
            if not (isinstance(verdicts, list) and len(verdicts) == len(chunk)):
                here(i)
                return
            done[i] = verdicts

    spread = any(_spreadable(engine) for engine, _ in jobs) and len(jobs) > 1
    threads = [threading.Thread(target=helper_loop, args=(h,), daemon=True,
                                name="evalharness-sql-chunks")
               for h in (workers.helpers() if spread else [])]
    for t in threads:
        t.start()
    while True:
        try:
            i = todo.get_nowait()
        except queue.Empty:
            break
        here(i)
    for t in threads:
        t.join()
    out: list[list[Verdict]] = [[] for _ in batches]
    for i, verdicts in enumerate(done):
        if verdicts is None:
            here(i)
            verdicts = done[i]
        assert verdicts is not None
        out[owner[i]].extend(verdicts)
    return out


def _spreadable(engine: Any) -> bool:
    """Whether a helper process can open the database itself: a SQLite file."""
    return isinstance(engine, SQLiteEngine) and engine.path is not None


def check_chunk(pairs: list[tuple[str, str]], path: str, fingerprint: str, dialect: str,
                predicted_dialect: str | None, options: Options) -> list[Verdict]:
    """What a helper process runs for one chunk (see :func:`evalharness_sql.workers.serve`)."""
    engine = open_engine(path)
    if engine is None or engine.fingerprint() != fingerprint:
        raise RuntimeError(f"{path} changed")
    return check_here(pairs, engine, dialect, predicted_dialect=predicted_dialect,
                      options=options)
