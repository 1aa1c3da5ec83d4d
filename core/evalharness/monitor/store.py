"""The monitor's store: one DuckDB file, or a schema of a PostgreSQL database (docs/monitor.md,
"The store").

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

Why PostgreSQL too: a team's store on a shared server, written by several monitors and read
from other machines (the optional extra ``postgresql``). One mechanism serves both:
:func:`connect` takes a target (a path, or a :class:`PostgresTarget`) and gives a connection
that takes the modules' SQL as written, in DuckDB's dialect with ``?`` placeholders
(:class:`PostgresConnection` translates it in one place, :func:`postgres_sql`) and gives the
same Python values; the few queries with no common form are written per :func:`dialect`
beside the module's other SQL (feedback's JSON and label views).
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalharness.errors import InputError

NO_ROUTE = "(no route)"
UNATTRIBUTED = "unattributed"
"""A failed trace whose root cause is NULL (no component on its path failed its verdict
although the trace failed, or a verdict was undecided)."""

SCHEMA_VERSION = 4
"""1: traces, metrics, verdicts, feedback, meta. 2: and ``alarms``. 3: and ``queue`` (sampled
traces waiting for evaluation), ``outbox`` (alerts to deliver), and the traces'
``evaluated_at``, ``judge_requests`` and ``judge_cost`` (the judge budget). 4: and
``source_files`` (files every trace of which is decided: not read again while unchanged). An
older store is upgraded when a monitor, a report or the feedback endpoint opens it to write."""

UPGRADES = {
    1: [],  # version 2 only added `alarms` (CREATE TABLE IF NOT EXISTS)
    2: ["ALTER TABLE traces ADD COLUMN IF NOT EXISTS evaluated_at TIMESTAMP",
        "ALTER TABLE traces ADD COLUMN IF NOT EXISTS judge_requests BIGINT",
        "ALTER TABLE traces ADD COLUMN IF NOT EXISTS judge_cost DOUBLE"],
    3: [],  # version 4 only added `source_files` (CREATE TABLE IF NOT EXISTS)
}
"""The statements that take a store of version N to N + 1 (after the DDL created the tables
it lacked)."""

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
    sample_reason TEXT,            -- 'rate', 'always: <rule>', 'not sampled', 'budget'
    status TEXT NOT NULL,          -- 'queued' | 'evaluated' | 'not sampled' | 'unmappable'
    error TEXT,                    -- why the trace could not be mapped or evaluated
    root_cause TEXT,               -- first component on the taken path whose verdict fails; NULL: none failed
    passed BOOLEAN,                -- every component on the taken path passed (NULL: not evaluated)
    latency_ms DOUBLE,
    total_tokens BIGINT,
    trace JSON,                    -- our Trace record (redacted as configured; NULL while queued)
    evaluated_at TIMESTAMP,        -- when its evaluation was stored (version 3)
    judge_requests BIGINT,         -- requests its evaluation sent to the judge (version 3)
    judge_cost DOUBLE              -- their cost, when the judge has prices (version 3)
);
-- sampled traces waiting for evaluation (version 3): intake writes a 'queued' traces row and
-- this row in one transaction; evaluation deletes it in the transaction that stores the
-- trace's metrics. The whole mapped trace waits here, texts included whatever `redact:`
-- says: they are gone once it is evaluated.
CREATE TABLE IF NOT EXISTS queue (
    trace_id TEXT PRIMARY KEY,
    queued_at TIMESTAMP NOT NULL,
    start_time TIMESTAMP,          -- the trace's start (evaluation takes the oldest first)
    question TEXT,
    trace JSON NOT NULL,           -- our Trace record, unredacted
    attempts INTEGER NOT NULL,     -- evaluations tried that the judge could not answer
    last_error TEXT,               -- why the last attempt was put back
    not_before TIMESTAMP           -- the next attempt waits until then (judge down: backoff)
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
-- source files every trace of which the monitor has decided (version 4): a pass does not
-- read one again while its size and modification time are unchanged
CREATE TABLE IF NOT EXISTS source_files (
    path TEXT PRIMARY KEY,         -- the file, resolved
    size BIGINT NOT NULL,
    mtime_ns BIGINT NOT NULL,
    done_at TIMESTAMP NOT NULL     -- the pass that found every trace of it decided
);
-- alerts to deliver (version 3): one row per alert and sender, written in the transaction
-- that records the alarm, marked sent once the sender took it (at least once)
CREATE TABLE IF NOT EXISTS outbox (
    id TEXT PRIMARY KEY,           -- the alarm's key, its state, when, the sender
    sender TEXT NOT NULL,          -- the name under `alerts:`
    alert JSON NOT NULL,           -- what the sender is given (Alert.to_json)
    created_at TIMESTAMP NOT NULL,
    attempts INTEGER NOT NULL,     -- deliveries tried that failed
    not_before TIMESTAMP,          -- the next try waits until then (backoff)
    last_error TEXT,
    sent_at TIMESTAMP,             -- NULL until delivered
    given_up_at TIMESTAMP          -- still failing a day after it was written
);
"""


def _check_version(con: Any, where: Any) -> None:
    """Create the tables a store lacks, write its version row or take an older store up to
    :data:`SCHEMA_VERSION` (:data:`UPGRADES`); refuse a store of another version. The same
    statements on both backends (:func:`postgres_sql` translates them).

    A store already at this version runs no DDL: the monitor's intake and evaluation threads
    connect at once, and DuckDB refuses two concurrent ``CREATE TABLE IF NOT EXISTS`` in one
    process ("Catalog write-write conflict"); the DDL itself runs under a process-wide lock."""
    has_meta = con.execute("SELECT count(*) FROM information_schema.tables WHERE "
                           "table_name = 'meta' AND table_schema = current_schema()"
                           ).fetchone()[0]
    if has_meta and (con.execute("SELECT value FROM meta WHERE key = 'schema_version'")
                     .fetchone() or ("",))[0] == str(SCHEMA_VERSION):
        return
    with _DDL_LOCK:
        _create_or_upgrade(con, where)


_DDL_LOCK = threading.Lock()


def _create_or_upgrade(con: Any, where: Any) -> None:
    con.execute(DDL)
    found = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if found is None:
        con.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
    elif int(found[0]) in UPGRADES:
        for version in range(int(found[0]), SCHEMA_VERSION):
            for statement in UPGRADES[version]:
                con.execute(statement)
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                    [str(SCHEMA_VERSION)])
    elif int(found[0]) != SCHEMA_VERSION:
        con.close()
        raise InputError(f"{where}: store schema version {found[0]}; this evalharness "
                         f"reads version {SCHEMA_VERSION} (docs/monitor.md, 'The store')")


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
        _check_version(con, path)
    return con


# --- PostgreSQL ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PostgresTarget:
    """A store on a PostgreSQL server (``store: {url: …, schema: …}``): where
    :func:`connect` goes instead of a DuckDB file. ``schema`` is created when missing, so
    several monitors (or tests) share one database, each in its schema."""

    url: str
    schema: str = "public"

    def __str__(self) -> str:
        """The URL without its password (it is shown in logs, reports and alerts)."""
        shown = re.sub(r"^([a-z]+://[^:/@]*):[^@]*@", r"\1:***@", self.url)
        return shown if self.schema == "public" else f"{shown} (schema {self.schema})"

    @property
    def parent(self) -> Path:
        """Where a DuckDB file's folder would be created: nothing to create for a server
        (callers that ``store_path.parent.mkdir()`` keep working)."""
        return Path(".")


Target = Path | PostgresTarget
"""What :func:`connect` opens: a DuckDB file or a PostgreSQL schema (MONITOR.yaml's
``store.path`` or ``store.url`` and ``store.schema``, :meth:`~evalharness.monitor.config.
StoreSpec.target`)."""

POSTGRES_EXTRA = (
    # the report orders components by when their first row was written (DuckDB's rowid)
    "ALTER TABLE metrics ADD COLUMN IF NOT EXISTS rowid BIGINT GENERATED BY DEFAULT AS IDENTITY",
    "ALTER TABLE verdicts ADD COLUMN IF NOT EXISTS rowid BIGINT GENERATED BY DEFAULT AS IDENTITY",
)
"""What a PostgreSQL store has beyond :data:`DDL`: a ``rowid`` (last, so ``INSERT INTO metrics
VALUES (…)`` of the DDL's columns still fills them)."""

LOCK_ID = 0x6576616C
"""The first key of the advisory lock a writing connection holds (the second: the schema's
hash): one writer per store at a time, as DuckDB's file lock gives."""

_TOKENS = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|[^'\"-]+|-")
_DDL = re.compile(r"\s*(CREATE\s+(OR\s+REPLACE\s+)?(TEMP(ORARY)?\s+)?TABLE|ALTER\s+TABLE)\b",
                  re.IGNORECASE)
_TEMP_TABLE = re.compile(r"^\s*CREATE\s+OR\s+REPLACE\s+TEMP(?:ORARY)?\s+TABLE\s+(\w+)",
                         re.IGNORECASE)


@functools.lru_cache(maxsize=512)
def postgres_sql(sql: str, with_params: bool = True) -> str:
    """``sql`` as the store's modules write it (DuckDB's dialect, portable where it can be)
    in PostgreSQL's: ``?`` placeholders to ``%s`` (and ``%`` doubled, psycopg's escape),
    ``INTERVAL n SECOND`` to ``INTERVAL 'n seconds'``, ``DOUBLE`` to ``DOUBLE PRECISION``,
    and in ``CREATE``/``ALTER TABLE`` the ``JSON`` type to ``TEXT`` (JSON is stored and read
    back as the same text on both backends); ``CREATE OR REPLACE TEMP TABLE`` to ``CREATE
    TEMP TABLE`` (:meth:`PostgresConnection.execute` drops the old one first). Strings,
    quoted names and comments are left as they are (comments dropped). Queries that have no
    common form are written per dialect by the module that owns them (:func:`dialect`).

    >>> postgres_sql("SELECT x FROM t WHERE a = ? AND b LIKE 'u-%' AND c > now() - INTERVAL 60 SECOND")
    "SELECT x FROM t WHERE a = %s AND b LIKE 'u-%%' AND c > now() - INTERVAL '60 seconds'"
    >>> postgres_sql("CREATE TABLE t (v DOUBLE, d JSON, n TEXT) -- it's JSON", False)
    'CREATE TABLE t (v DOUBLE PRECISION, d TEXT, n TEXT) '
    >>> postgres_sql("CREATE OR REPLACE TEMP TABLE e (trace JSON)", False)
    'CREATE TEMP TABLE e (trace TEXT)'
    """
    ddl = _DDL.match(sql) is not None
    out = []
    for token in _TOKENS.findall(sql):
        if token.startswith("--"):
            continue
        if token[0] not in "'\"":
            token = re.sub(r"\bINTERVAL\s+(\d+(?:\.\d+)?)\s+SECONDS?\b", r"INTERVAL '\1 seconds'",
                           token, flags=re.IGNORECASE)
            token = re.sub(r"\bDOUBLE\b(?!\s+PRECISION)", "DOUBLE PRECISION", token,
                           flags=re.IGNORECASE)
            if ddl:
                token = re.sub(r"\bJSON\b", "TEXT", token, flags=re.IGNORECASE)
            if with_params:
                token = token.replace("%", "%%").replace("?", "%s")
        elif with_params:
            token = token.replace("%", "%%")
        out.append(token)
    return _TEMP_TABLE.sub(r"CREATE TEMP TABLE \1", "".join(out))


class PostgresResult:
    """What :meth:`PostgresConnection.execute` returns: rows as DuckDB's connection gives
    them. A statement without rows (an INSERT, an UPDATE) gives ``(rows affected,)``, as
    DuckDB does."""

    def __init__(self, cursor: Any) -> None:
        self.cursor = cursor

    @property
    def description(self) -> Any:
        return self.cursor.description

    def fetchone(self) -> tuple[Any, ...] | None:
        if self.cursor.description is None:
            return (self.cursor.rowcount,)
        return self.cursor.fetchone()

    def fetchall(self) -> list[tuple[Any, ...]]:
        if self.cursor.description is None:
            return [(self.cursor.rowcount,)]
        return self.cursor.fetchall()


class PostgresConnection:
    """A connection to a PostgreSQL store that the store's modules use as they use DuckDB's:
    ``execute(sql, params)`` with ``?`` placeholders (:func:`postgres_sql`), results with
    ``fetchone``/``fetchall``, ``executemany``, explicit ``BEGIN TRANSACTION``/``COMMIT``
    (autocommit otherwise), naive UTC datetimes (the session's time zone is UTC), NUMERIC as
    ``int`` or ``float``. A writing connection holds the store's advisory lock until it is
    closed; a reading one sees one snapshot (``REPEATABLE READ``) until then, as a DuckDB
    reader sees no write while it holds the file."""

    dialect = "postgresql"

    def __init__(self, raw: Any, target: PostgresTarget) -> None:
        self.raw = raw
        self.target = target

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> PostgresResult:
        replace = _TEMP_TABLE.match(sql)
        if replace is not None:
            self.raw.execute(f"DROP TABLE IF EXISTS pg_temp.{replace.group(1)}")
        if params is None or len(params) == 0:
            return PostgresResult(self.raw.execute(postgres_sql(sql, False)))
        return PostgresResult(self.raw.execute(postgres_sql(sql), list(params)))

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self.raw.cursor() as cur:
            cur.executemany(postgres_sql(sql), [list(r) for r in rows])

    def close(self) -> None:
        self.raw.close()


def dialect(con: Any) -> str:
    """``duckdb`` or ``postgresql``: which of a query's forms to run where the two have no
    common one (``arg_max``, ``list()`` and JSON functions are DuckDB's; PostgreSQL has
    ``(array_agg(x ORDER BY …))[1]``, arrays and ``->>``)."""
    return getattr(con, "dialect", "duckdb")


def finite(column: str) -> str:
    """SQL that is true when ``column`` is a finite number (NULL when it is NULL), on both
    backends: DuckDB's ``isfinite`` is not PostgreSQL's, but both order NaN above every
    number, so NaN and the infinities fail the bound.

    >>> finite("m.value")
    'abs(m.value) <= 1.7976931348623157e308'
    """
    return f"abs({column}) <= 1.7976931348623157e308"


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:
        raise InputError("a PostgreSQL store (`store: {url: …}` in MONITOR.yaml) needs "
                         "psycopg: pip install 'evalharness[postgresql]'") from exc
    return psycopg


def connect_postgres(target: PostgresTarget, *, read_only: bool = False,
                     wait_s: float = 30.0) -> PostgresConnection:
    """A connection to the store in ``target``'s schema (the schema and the tables created
    when missing, unless ``read_only``). A writer waits up to ``wait_s`` for another writer
    of the same store (a monitor storing a batch) to close its connection."""
    psycopg = _psycopg()
    from decimal import Decimal

    from psycopg import sql as pgsql
    from psycopg.adapt import Loader

    class Numeric(Loader):
        """NUMERIC (``sum`` of BIGINT, ``avg``) as DuckDB gives it: int or float."""

        def load(self, data: Any) -> Any:
            value = Decimal(bytes(data).decode())
            return int(value) if value == value.to_integral_value() else float(value)

    try:
        raw = psycopg.connect(target.url, autocommit=True, cursor_factory=psycopg.ClientCursor,
                              connect_timeout=int(wait_s))
    except psycopg.Error as exc:
        raise InputError(f"{target}: the monitor's store cannot be opened: "
                         f"{' '.join(str(exc).split())}") from exc
    raw.adapters.register_loader("numeric", Numeric)
    con = PostgresConnection(raw, target)
    schema = pgsql.Identifier(target.schema)
    try:
        raw.execute("SET TIME ZONE 'UTC'")
        if read_only:
            raw.execute(pgsql.SQL("SET search_path TO {}").format(schema))
            if raw.execute("SELECT to_regclass('meta')").fetchone()[0] is None:
                raise InputError(f"{target}: no monitor store there (schema "
                                 f"{target.schema!r} has no table `meta`); run `evalharness "
                                 "monitor MONITOR.yaml --once` first, or check `store.url` "
                                 "and `store.schema` in MONITOR.yaml")
            raw.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            return con
        deadline = time.monotonic() + wait_s
        while not raw.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s))",
                              [LOCK_ID, target.schema]).fetchone()[0]:
            if time.monotonic() > deadline:
                raise InputError(f"{target}: the monitor's store cannot be opened: another "
                                 f"process has been writing to it for over {wait_s:g} s")
            time.sleep(0.1)
        raw.execute(pgsql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(schema))
        raw.execute(pgsql.SQL("SET search_path TO {}").format(schema))
        found = None
        if raw.execute("SELECT to_regclass('meta')").fetchone()[0] is not None:
            found = raw.execute("SELECT value FROM meta WHERE key = 'schema_version'"
                                ).fetchone()
        if found is None or found[0] != str(SCHEMA_VERSION):
            _check_version(con, target)
            for statement in POSTGRES_EXTRA:
                raw.execute(statement)
    except BaseException:
        raw.close()
        raise
    return con


def as_target(value: Target | str) -> Target:
    """A target from what callers pass: a target, a DuckDB path, or a ``postgresql://`` URL
    (schema ``public``)."""
    if isinstance(value, PostgresTarget):
        return value
    if isinstance(value, str) and re.match(r"postgres(ql)?://", value):
        return PostgresTarget(value)
    return Path(value)


@contextlib.contextmanager
def connect(target: Target | str, *, read_only: bool = False) -> Iterator[Any]:
    """A short-lived connection (closed on exit) to the store at ``target``: a DuckDB file
    (:func:`connect_duckdb`) or a PostgreSQL schema (:func:`connect_postgres`); both take
    the same SQL and give the same Python values."""
    target = as_target(target)
    con = (connect_postgres(target, read_only=read_only)
           if isinstance(target, PostgresTarget) else connect_duckdb(target,
                                                                     read_only=read_only))
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
        n = con.execute(f"SELECT count(*) FROM ({old}) AS old").fetchone()[0]
        if n:
            for table in ("metrics", "verdicts", "feedback", "queue"):
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
                 "total_tokens", "trace", "evaluated_at", "judge_requests", "judge_cost")


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
                after_insert: Any = None, queued: Sequence[Sequence[Any]] = ()) -> None:
    """One batch in one transaction: ``traces`` (dicts of :data:`TRACE_COLUMNS`), their
    ``metrics`` rows ``(trace_id, component, metric, value, error, judge, details)`` and
    ``verdicts`` rows ``(trace_id, component, passed, criterion, reason)``; ``queued``: rows
    of :data:`QUEUE_COLUMNS` for the traces intake queued. Trace ids in
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
        _insert(con, f"INSERT INTO queue ({', '.join(QUEUE_COLUMNS)})", list(queued))
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


# --- the queue between intake and evaluation (version 3) -----------------------------------

QUEUE_COLUMNS = ("trace_id", "queued_at", "start_time", "question", "trace", "attempts",
                 "last_error", "not_before")


def queue_size(con: Any) -> int:
    """Sampled traces waiting for evaluation."""
    return int(con.execute("SELECT count(*) FROM queue").fetchone()[0])


def take_queue(con: Any, n: int, now: Any) -> list[tuple[Any, ...]]:
    """Up to ``n`` queued traces due by ``now`` (not waiting out a backoff), the oldest
    first: ``(trace_id, question, trace JSON, attempts)``."""
    return con.execute(
        "SELECT trace_id, question, trace, attempts FROM queue "
        "WHERE not_before IS NULL OR not_before <= ? "
        "ORDER BY start_time NULLS FIRST, trace_id LIMIT ?", [now, n]).fetchall()


def next_due(con: Any) -> Any:
    """When the earliest queued trace may be tried (``None``: the queue is empty; a time in
    the past: now)."""
    row = con.execute("SELECT min(coalesce(not_before, queued_at)) FROM queue").fetchone()
    return row[0] if row else None


def put_back(con: Any, ids: Sequence[str], error: str, not_before: Any) -> None:
    """Queued traces whose evaluation could not be done now (the judge was down): tried
    again from ``not_before``, with the reason kept."""
    if not ids:
        return
    marks = ", ".join("?" for _ in ids)
    con.execute(f"UPDATE queue SET attempts = attempts + 1, last_error = ?, not_before = ? "
                f"WHERE trace_id IN ({marks})", [error, not_before, *ids])


EVALUATED_COLUMNS = ("trace_id", "root_cause", "passed", "latency_ms", "total_tokens", "trace",
                     "evaluated_at", "judge_requests", "judge_cost")
EVALUATED_DDL = """CREATE TEMPORARY TABLE IF NOT EXISTS evaluated_now (
    trace_id TEXT, root_cause TEXT, passed BOOLEAN, latency_ms DOUBLE, total_tokens BIGINT,
    trace JSON, evaluated_at TIMESTAMP, judge_requests BIGINT, judge_cost DOUBLE)"""
"""What :func:`store_evaluated` sets on a batch's ``traces`` rows, staged per connection."""


def store_evaluated(con: Any, rows: list[dict[str, Any]], metrics: list[tuple[Any, ...]],
                    verdicts: list[tuple[Any, ...]]) -> None:
    """Queued traces, evaluated, in one transaction: each ``traces`` row completed (status
    ``evaluated``, root cause, verdict, usage, the redacted trace), their metrics and verdicts
    stored, and they leave the queue. ``rows``: dicts with ``trace_id`` and the columns to
    set (``latency_ms`` kept as intake measured it when evaluation has none)."""
    ids = [r["trace_id"] for r in rows]
    if not ids:
        return
    con.execute("BEGIN TRANSACTION")
    try:
        marks = ", ".join("?" for _ in ids)
        for table in ("metrics", "verdicts"):  # a trace evaluated before, re-queued
            con.execute(f"DELETE FROM {table} WHERE trace_id IN ({marks})", ids)
        # one UPDATE for the batch, from a temporary table filled by multi-row INSERTs (an
        # UPDATE a row takes about as long as an INSERT a row did: benchmarks/monitor_throughput)
        con.execute(EVALUATED_DDL)
        con.execute("DELETE FROM evaluated_now")
        _insert(con, f"INSERT INTO evaluated_now ({', '.join(EVALUATED_COLUMNS)})",
                [[r[c] for c in EVALUATED_COLUMNS] for r in rows])
        con.execute(
            "UPDATE traces SET status = 'evaluated', root_cause = e.root_cause, "
            "passed = e.passed, latency_ms = coalesce(e.latency_ms, traces.latency_ms), "
            "total_tokens = e.total_tokens, trace = e.trace, evaluated_at = e.evaluated_at, "
            "judge_requests = e.judge_requests, judge_cost = e.judge_cost "
            "FROM evaluated_now e WHERE traces.trace_id = e.trace_id")
        _insert(con, "INSERT INTO metrics", metrics)
        _insert(con, "INSERT INTO verdicts", verdicts)
        con.execute(f"DELETE FROM queue WHERE trace_id IN ({marks})", ids)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def judge_spend(con: Any, since: Any) -> tuple[int, float]:
    """``(judge requests, judge cost)`` of the traces evaluated since ``since``."""
    row = con.execute("SELECT coalesce(sum(judge_requests), 0), coalesce(sum(judge_cost), 0) "
                      "FROM traces WHERE evaluated_at >= ?", [since]).fetchone()
    return int(row[0]), float(row[1])


def judge_per_trace(con: Any, last: int = 200) -> tuple[float, float] | None:
    """The mean ``(judge requests, judge cost)`` of the last ``last`` evaluated traces (what
    a queued trace will likely cost), ``None`` before any was evaluated."""
    row = con.execute(
        "SELECT count(*), avg(judge_requests), avg(coalesce(judge_cost, 0)) FROM ("
        "SELECT judge_requests, judge_cost FROM traces WHERE evaluated_at IS NOT NULL "
        "AND judge_requests IS NOT NULL ORDER BY evaluated_at DESC LIMIT ?) AS recent",
        [last]).fetchone()
    if not row or not row[0]:
        return None
    return float(row[1] or 0.0), float(row[2] or 0.0)


# --- source files already read whole (version 4) ------------------------------------------


def done_files(con: Any) -> dict[str, tuple[int, int]]:
    """Path -> ``(size, mtime_ns)`` of every source file whose traces were all decided."""
    return {path: (int(size), int(mtime)) for path, size, mtime in con.execute(
        "SELECT path, size, mtime_ns FROM source_files").fetchall()}


def mark_files_done(con: Any, files: Sequence[tuple[str, int, int]], now: Any) -> None:
    """Record ``(path, size, mtime_ns)`` of files every trace of which is now decided."""
    for path, size, mtime in files:
        con.execute("INSERT INTO source_files VALUES (?, ?, ?, ?) ON CONFLICT (path) DO UPDATE "
                    "SET size = excluded.size, mtime_ns = excluded.mtime_ns, "
                    "done_at = excluded.done_at", [path, size, mtime, now])


def sources_of(con: Any, ids: set[str]) -> set[str]:
    """The files the given traces were read from (``traces.source``)."""
    if not ids:
        return set()
    listed = sorted(ids)
    out: set[str] = set()
    for start in range(0, len(listed), 500):
        part = listed[start:start + 500]
        marks = ", ".join("?" for _ in part)
        out |= {row[0] for row in con.execute(
            f"SELECT DISTINCT source FROM traces WHERE trace_id IN ({marks})", part).fetchall()
            if row[0]}
    return out
