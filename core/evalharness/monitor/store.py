"""The monitor's store: one DuckDB file (docs/monitor.md, "The store").

This schema is the contract between the monitor's modules: intake and evaluation write
``traces``, ``metrics`` and ``verdicts`` (one transaction per batch, so a monitor killed at any
moment has stored each trace whole or not at all, and a restart skips the trace ids present);
feedback writes ``feedback``; the report reads them all. Times are UTC ``TIMESTAMP``s.

Why DuckDB: the report's queries are analytical (per window, route and component: means,
rates, shares over months of traffic), which a column store answers from compressed columns
without a server; one file, ACID transactions that survive a SIGKILL (its write-ahead log is
replayed on open), wheels for every platform. It is the optional extra ``monitor``.
A process holds the file only while it reads or writes a batch (:func:`connect` is short-lived),
so ``monitor report`` can read while a monitor runs.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from evalharness.errors import InputError

NO_ROUTE = "(no route)"
UNATTRIBUTED = "unattributed"
"""A failed trace whose root cause is NULL (no component on its path failed its verdict
although the trace failed, or a verdict was undecided)."""

SCHEMA_VERSION = 2
"""1: traces, metrics, verdicts, feedback, meta. 2: and ``alarms`` (a version-1 store is
upgraded when a monitor, a report or the feedback endpoint opens it to write)."""

DDL = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT
);
-- one row per trace the monitor has decided about (evaluated, or left out by sampling)
CREATE TABLE IF NOT EXISTS traces (
    trace_id TEXT PRIMARY KEY,
    start_time TIMESTAMP,          -- the trace's first span's start (UTC)
    end_time TIMESTAMP,
    stored_at TIMESTAMP NOT NULL,  -- when this row was written
    source TEXT,                   -- the file it was read from
    route TEXT,                    -- the router's routes joined with '+'; NULL without a router step
    question TEXT,                 -- NULL when redacted
    answer TEXT,                   -- NULL when redacted
    user_id TEXT,                  -- as recorded, or its salted hash (redaction), or NULL
    join_key TEXT,                 -- the mapping's join key (a feedback key), when recorded
    attributes JSON,               -- the trace attributes feedback may be keyed by
    sampled BOOLEAN NOT NULL,      -- evaluated (TRUE) or left out by sampling (FALSE)
    sample_reason TEXT,            -- 'rate', 'always: <rule>', 'not sampled'
    status TEXT NOT NULL,          -- 'evaluated' | 'not sampled' | 'unmappable'
    error TEXT,                    -- why the trace could not be mapped or evaluated
    root_cause TEXT,               -- first component on the taken path whose verdict fails; NULL: none failed
    passed BOOLEAN,                -- every component on the taken path passed (NULL: not evaluated)
    latency_ms DOUBLE,
    total_tokens BIGINT,
    trace JSON                     -- our Trace record (redacted as configured)
);
-- one row per evaluated trace, component and metric (a metric that could not be computed
-- has value NULL and its error)
CREATE TABLE IF NOT EXISTS metrics (
    trace_id TEXT NOT NULL,
    component TEXT NOT NULL,
    metric TEXT NOT NULL,
    value DOUBLE,
    error TEXT,
    judge TEXT,                    -- judge identity for a judged value, else NULL
    details JSON,                  -- rubric, raw verdicts, evidence
    PRIMARY KEY (trace_id, component, metric)
);
-- one row per evaluated trace and component on its taken path
CREATE TABLE IF NOT EXISTS verdicts (
    trace_id TEXT NOT NULL,
    component TEXT NOT NULL,
    passed BOOLEAN,                -- NULL: undecided (a metric it needs was an error)
    criterion TEXT,                -- e.g. 'faithfulness >= 0.5'
    reason TEXT,
    PRIMARY KEY (trace_id, component)
);
-- users' feedback: thumbs, 1-5 scores, quick labels, comments; keyed by trace id or by a
-- trace attribute's value (trace_id resolved when the trace is stored)
CREATE TABLE IF NOT EXISTS feedback (
    feedback_id TEXT PRIMARY KEY,  -- given by the sender, or a digest of the record (idempotent)
    trace_id TEXT,                 -- NULL until a stored trace matches key_attribute/key_value
    key_attribute TEXT,            -- 'trace_id' or the attribute the record names
    key_value TEXT,
    received_at TIMESTAMP NOT NULL,
    thumbs SMALLINT,               -- 1 up, -1 down, NULL none
    score DOUBLE,                  -- 1..5, NULL none
    labels JSON,                   -- list of quick labels
    comment TEXT,
    user_id TEXT,
    source TEXT                    -- 'http' or the file and line
);
-- drift alarms (version 2): one row per thing an alarm is about, open while it fires
CREATE TABLE IF NOT EXISTS alarms (
    key TEXT PRIMARY KEY,          -- kind/component/metric/route
    kind TEXT NOT NULL,            -- 'metric' | 'verdict' | 'end_to_end' | 'root_cause_share'
    component TEXT,
    metric TEXT,
    route TEXT NOT NULL,           -- 'all' or a route
    opened_at TIMESTAMP NOT NULL,  -- the check that raised it (UTC)
    last_seen TIMESTAMP NOT NULL,  -- the last check that found it
    closed_at TIMESTAMP,           -- the check that found it resolved; NULL while it fires
    message TEXT,                  -- the last finding, one line
    details JSON                   -- the last finding's test: windows, effect, CI, p, q
);
"""


def connect_duckdb(path: Path, *, read_only: bool = False, wait_s: float = 30.0) -> Any:
    """A connection to the store at ``path`` (created with the schema when missing). Another
    process holding the file (a monitor writing a batch) is waited for up to ``wait_s``."""
    try:
        import duckdb
    except ImportError as exc:
        raise InputError("the monitor's store needs DuckDB: pip install 'evalharness[monitor]'"
                         ) from exc
    deadline = time.monotonic() + wait_s
    while True:
        try:
            con = duckdb.connect(str(path), read_only=read_only)
            break
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower() or time.monotonic() > deadline:
                raise InputError(f"{path}: the monitor's store cannot be opened: {exc}") from exc
            time.sleep(0.1)
    if not read_only:
        con.execute(DDL)
        found = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if found is None:
            con.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
        elif int(found[0]) == 1:  # version 2 only added `alarms`, created above
            con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                        [str(SCHEMA_VERSION)])
        elif int(found[0]) != SCHEMA_VERSION:
            con.close()
            raise InputError(f"{path}: store schema version {found[0]}; this evalharness "
                             f"reads version {SCHEMA_VERSION} (docs/monitor.md, 'The store')")
    return con


@contextlib.contextmanager
def connect(path: Path, *, read_only: bool = False) -> Iterator[Any]:
    """A short-lived connection (closed on exit), see :func:`connect_duckdb`."""
    con = connect_duckdb(path, read_only=read_only)
    try:
        yield con
    finally:
        con.close()


# --- what the monitor's passes read and write (intake and evaluation) --------------------------


def stored_ids(con: Any) -> set[str]:
    """Every trace id the store has decided about."""
    return {row[0] for row in con.execute("SELECT trace_id FROM traces").fetchall()}


def reconsidered_ids(con: Any) -> set[str]:
    """Traces left out by sampling that a user has since given a thumbs-down: evaluated on the
    next pass when an always-rule asks for ``{feedback: down}``."""
    return {row[0] for row in con.execute(
        "SELECT DISTINCT t.trace_id FROM traces t JOIN feedback f ON f.trace_id = t.trace_id "
        "WHERE NOT t.sampled AND f.thumbs = -1").fetchall()}


def feedback_thumbs(con: Any) -> list[tuple[Any, ...]]:
    """``(trace_id, key_attribute, key_value, thumbs)`` of every feedback record, oldest
    first."""
    return con.execute("SELECT trace_id, key_attribute, key_value, thumbs FROM feedback "
                       "ORDER BY received_at").fetchall()


def sampling_counts(con: Any) -> dict[str | None, list[int]]:
    """Route -> ``[traces decided, traces evaluated]`` (mappable traces only)."""
    rows = con.execute("SELECT route, count(*), sum(CASE WHEN sampled THEN 1 ELSE 0 END) "
                       "FROM traces WHERE status <> 'unmappable' GROUP BY route").fetchall()
    return {route: [int(n), int(s or 0)] for route, n, s in rows}


def apply_retention(con: Any, days: float | None) -> int:
    """Delete traces older than ``days`` (by start time, else by when stored) with their
    metrics, verdicts and feedback, and feedback joined to no trace given before then, in one
    transaction; the number of traces deleted."""
    if days is None:
        return 0
    cutoff = f"(now()::TIMESTAMP - INTERVAL {float(days) * 86400:.0f} SECOND)"
    old = f"SELECT trace_id FROM traces WHERE coalesce(start_time, stored_at) < {cutoff}"
    con.execute("BEGIN TRANSACTION")
    try:
        n = con.execute(f"SELECT count(*) FROM ({old})").fetchone()[0]
        if n:
            for table in ("metrics", "verdicts", "feedback"):
                con.execute(f"DELETE FROM {table} WHERE trace_id IN ({old})")
            con.execute(f"DELETE FROM traces WHERE trace_id IN ({old})")
        con.execute(f"DELETE FROM feedback WHERE trace_id IS NULL AND received_at < {cutoff}")
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return int(n)


SALT_KEY = "redaction.salt"
"""The ``meta`` row holding the store's salt for hashed user ids: one salt for traces and
feedback, so one user's traces and feedback carry the same hash."""


def user_salt(con: Any) -> str:
    """The store's salt for hashing user ids (made once, kept in ``meta``)."""
    import secrets

    found = con.execute("SELECT value FROM meta WHERE key = ?", [SALT_KEY]).fetchone()
    if found is not None:
        return found[0]
    con.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT DO NOTHING",
                [SALT_KEY, secrets.token_hex(16)])
    return con.execute("SELECT value FROM meta WHERE key = ?", [SALT_KEY]).fetchone()[0]


def hash_user_id(user_id: str, salt: str) -> str:
    """A user id's salted hash, as traces and feedback store it (``redact: {user_ids: hash}``).

    >>> hash_user_id("ana@example.org", "s1")
    'u-f7beca1ce988d1b5'
    """
    import hashlib

    return "u-" + hashlib.sha256(f"{salt}\0{user_id}".encode()).hexdigest()[:16]


TRACE_COLUMNS = ("trace_id", "start_time", "end_time", "stored_at", "source", "route",
                 "question", "answer", "user_id", "join_key", "attributes", "sampled",
                 "sample_reason", "status", "error", "root_cause", "passed", "latency_ms",
                 "total_tokens", "trace")


INSERT_ROWS = 200
"""Rows per multi-row INSERT: DuckDB's ``executemany`` runs a statement per row (about 1.4 ms
each, most of a pass's time: benchmarks/monitor_throughput.py); one statement of 200 rows
takes about what one row did."""


def _insert(con: Any, head: str, rows: Sequence[Sequence[Any]]) -> None:
    """``head VALUES (…), (…), …`` for ``rows``, :data:`INSERT_ROWS` a statement."""
    for start in range(0, len(rows), INSERT_ROWS):
        part = rows[start:start + INSERT_ROWS]
        marks = "(" + ", ".join("?" * len(part[0])) + ")"
        con.execute(f"{head} VALUES {', '.join([marks] * len(part))}",
                    [value for row in part for value in row])


def write_batch(con: Any, traces: list[dict[str, Any]], metrics: list[tuple[Any, ...]],
                verdicts: list[tuple[Any, ...]], *, replace: set[str] = frozenset(),
                feedback_key: str = "trace_id", resolve: Any = None,
                after_insert: Any = None) -> None:
    """One batch in one transaction: ``traces`` (dicts of :data:`TRACE_COLUMNS`), their
    ``metrics`` rows ``(trace_id, component, metric, value, error, judge, details)`` and
    ``verdicts`` rows ``(trace_id, component, passed, criterion, reason)``. Trace ids in
    ``replace`` (a left-out trace now evaluated) lose their earlier rows first. Feedback keyed
    by these traces' ids (or by ``feedback_key``'s attribute value) gets its ``trace_id``:
    ``resolve(con)`` does it when given (the feedback module's rules), else the plain match.
    ``after_insert`` (tests) is called inside the transaction, before the commit."""
    import json as _json

    con.execute("BEGIN TRANSACTION")
    try:
        ids = [t["trace_id"] for t in traces]
        gone = [i for i in ids if i in replace]
        if gone:
            marks = ", ".join("?" for _ in gone)
            for table in ("metrics", "verdicts", "traces"):
                con.execute(f"DELETE FROM {table} WHERE trace_id IN ({marks})", gone)
        _insert(con, f"INSERT INTO traces ({', '.join(TRACE_COLUMNS)})",
                [[t.get(c) for c in TRACE_COLUMNS] for t in traces])
        _insert(con, "INSERT INTO metrics", metrics)
        _insert(con, "INSERT INTO verdicts", verdicts)
        if resolve is not None:
            resolve(con)
        elif ids:
            marks = ", ".join("?" for _ in ids)
            con.execute("UPDATE feedback SET trace_id = key_value WHERE trace_id IS NULL AND "
                        f"key_attribute = 'trace_id' AND key_value IN ({marks})", ids)
        if resolve is None and feedback_key != "trace_id":
            for t in traces:
                value = _json.loads(t.get("attributes") or "{}").get(feedback_key)
                if value is not None:
                    con.execute("UPDATE feedback SET trace_id = ? WHERE trace_id IS NULL AND "
                                "key_attribute = ? AND key_value = ?",
                                [t["trace_id"], feedback_key, str(value)])
        if after_insert is not None:
            after_insert()
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
