"""The sandbox where untrusted SQL runs: one read-only statement, a time limit, size and memory caps.

Predicted SQL is untrusted. Every query the cascade executes (gold and predicted, on the
scenario's database and on the test-suite databases) goes through :func:`run`, which

1. refuses anything but a single ``SELECT`` / ``WITH`` / ``VALUES`` statement
   (:func:`refusal`), and functions that reach outside the database;
2. executes on a connection the engine opened read-only (SQLite: ``mode=ro``, ``query_only``
   and an authorizer that denies every write, ``ATTACH``, ``PRAGMA`` and extension loading;
   DuckDB: ``read_only`` with external access and extension loading off, in a child process;
   PostgreSQL: a read-only transaction with ``statement_timeout``);
3. stops the query when its time limit is reached (SQLite's progress handler, DuckDB's
   ``interrupt()`` and then killing its process, PostgreSQL's ``statement_timeout`` and a
   cancel request), and holds it to the :class:`Limits`: rows, bytes of one value, bytes of
   the whole result, and memory.

It never raises for a bad query: the :class:`Result` says what happened.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import pickle
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

STATUSES = ("ok", "error", "timeout", "refused", "too_many_rows", "too_large")
"""What :attr:`Result.status` can be (the cascade adds ``budget``: see
:func:`evalharness_sql.stages.execute.run_query`)."""

DENIED_FUNCTIONS = frozenset({
    # SQLite
    "load_extension", "readfile", "writefile", "edit", "fts3_tokenizer", "sqlite_offset",
    # PostgreSQL
    "pg_sleep", "pg_sleep_for", "pg_sleep_until", "pg_read_file", "pg_read_binary_file",
    "pg_ls_dir", "pg_stat_file", "lo_import", "lo_export", "lo_unlink", "dblink", "dblink_exec",
    "dblink_connect", "set_config", "pg_terminate_backend", "pg_cancel_backend",
    "pg_reload_conf", "pg_rotate_logfile", "pg_advisory_lock", "pg_advisory_xact_lock",
    "pg_notify", "txid_current", "nextval", "setval", "query_to_xml",
    # DuckDB
    "read_csv", "read_csv_auto", "read_parquet", "read_json", "read_json_auto", "read_text",
    "read_blob", "glob", "parquet_scan", "sniff_csv", "getenv",
})
"""Functions a query may not call: they read or write outside the database, sleep, or change
settings. (Each engine's own protections stop them too; this is a second lock.)"""

_FORBIDDEN_NODES: tuple[type[exp.Expression], ...] = (
    exp.Insert, exp.Update, exp.Delete, exp.Merge, exp.Create, exp.Drop, exp.Alter,
    exp.Command, exp.Pragma, exp.Attach, exp.Detach, exp.Transaction, exp.Commit, exp.Rollback,
    exp.Set, exp.Use, exp.LoadData, exp.Copy, exp.Into, exp.Analyze, exp.TruncateTable,
    exp.Grant, exp.Revoke, exp.Lock, exp.Install, exp.Cache, exp.Uncache, exp.Refresh,
    exp.Export, exp.Kill, exp.Describe, exp.Show, exp.Summarize,
)


@dataclass(frozen=True)
class Limits:
    """How much one query may return and use. A query past a cap is stopped with status
    ``too_large`` (``too_many_rows`` for the row cap) and an error naming the cap.

    >>> Limits().max_value_bytes, human_bytes(Limits().max_result_bytes)
    (10000000, '100 MB')
    """

    max_rows: int = 100_000
    """Rows of one result (``max_rows + 1`` are fetched at most)."""
    max_value_bytes: int = 10_000_000
    """Bytes of one value: SQLite stops at once (``SQLITE_LIMIT_LENGTH``, lowered for a wide
    result so that one row fits :attr:`max_result_bytes`); DuckDB and PostgreSQL values are
    checked as they are fetched."""
    max_result_bytes: int = 100_000_000
    """Bytes of a whole fetched result (the size of its pickle: about the lengths of its strings
    and blobs plus a few bytes per number), counted while fetching in chunks that cannot
    overshoot it."""
    max_memory_bytes: int = 2_000_000_000
    """Memory of one DuckDB query (``memory_limit``, and the address-space limit of the
    process it runs in, above that process's start-up size); for PostgreSQL, the most
    ``work_mem`` and ``temp_file_limit`` are set to (never raised above the server's)."""

    def describe(self, limit: str, **about: Any) -> str:
        """The words for a query that passed ``limit`` (a field name), after "the query's".

        >>> Limits().describe("max_value_bytes")
        'value exceeds the 10 MB value cap (max_value_bytes)'
        >>> Limits().describe("max_rows")
        'result exceeds the row cap of 100000 rows (max_rows)'
        """
        if limit == "max_rows":
            return f"result exceeds the row cap of {self.max_rows} rows (max_rows)"
        if limit == "max_result_bytes":
            return (f"result exceeds the {human_bytes(self.max_result_bytes)} result cap "
                    "(max_result_bytes)")
        if limit == "max_memory_bytes":
            return (f"memory use exceeds the {human_bytes(self.max_memory_bytes)} memory cap "
                    "(max_memory_bytes)")
        cap = about.get("cap", self.max_value_bytes)
        if cap < self.max_value_bytes:
            return (f"value exceeds the {human_bytes(cap)} value cap (max_value_bytes "
                    f"{human_bytes(self.max_value_bytes)}, lowered to max_result_bytes / "
                    f"{about.get('columns')} columns so that one row fits the result cap)")
        return f"value exceeds the {human_bytes(cap)} value cap (max_value_bytes)"


def human_bytes(n: int) -> str:
    """A byte count in words, in decimal units.

    >>> human_bytes(10_000_000), human_bytes(2_000_000_000), human_bytes(195_312), human_bytes(12)
    ('10 MB', '2 GB', '195 kB', '12 bytes')
    """
    for unit, size in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} bytes"


@dataclass
class Result:
    """What running one query returned, or why it did not.

    ``status`` is one of ``ok``, ``error`` (the engine rejected or failed the query),
    ``timeout``, ``refused`` (the sandbox would not run it), ``too_many_rows`` and
    ``too_large`` (a value, the result or the query's memory passed its cap: ``limit`` names
    the :class:`Limits` field). ``error`` is never empty when the status is not ``ok``.
    """

    status: str
    columns: list[str] = field(default_factory=list)
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    error: str | None = None
    elapsed_s: float = 0.0
    limit: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def summary(self) -> str:
        if self.ok:
            return f"{len(self.rows)} rows"
        return f"{self.status}: {self.error}" if self.error else self.status


@contextlib.contextmanager
def quiet_sqlglot() -> Iterator[None]:
    """Silence sqlglot's "falling back to Command" warnings while parsing untrusted SQL."""
    logger = logging.getLogger("sqlglot")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def parse_statements(sql: str, dialect: str) -> list[exp.Expression]:
    """Every statement in ``sql`` (empty ones dropped); raises ``SqlglotError`` if it does not parse.
    The caller owns the trees: they are copies of the ones parsed once per text (the cascade
    reads a query's text several times, and a copy costs a third of a parse).

    >>> [type(s).__name__ for s in parse_statements("SELECT 1; DROP TABLE t;", "sqlite")]
    ['Select', 'Drop']
    """
    parsed = _parsed(sql, dialect)
    if isinstance(parsed, BaseException):
        raise parsed
    return pickle.loads(parsed)


@functools.lru_cache(maxsize=4096)
def _parsed(sql: str, dialect: str) -> bytes | BaseException:
    """The statements of a text, pickled (unpickling is the cheapest copy of a tree)."""
    try:
        with quiet_sqlglot():
            trees = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except (SqlglotError, ValueError, RecursionError) as exc:
        return exc
    try:
        return pickle.dumps(trees, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, RecursionError, TypeError) as exc:
        return SqlglotError(f"the parse tree cannot be copied: {exc}")


def refusal(sql: str, dialect: str = "sqlite",
            statements: list[exp.Expression] | None = None) -> str | None:
    """Why the sandbox refuses to run ``sql``, or ``None`` when it is one read-only query.

    Only one ``SELECT``, ``WITH ... SELECT``, set operation or ``VALUES`` statement is
    allowed, and it may not call a function that reaches outside the database. SQL that
    sqlglot cannot parse is not refused here: the engine's own read-only protections still
    apply, and its error message is the better diagnosis.

    >>> refusal("SELECT name FROM singer") is None
    True
    >>> refusal("DROP TABLE singer")
    'refused: only a single SELECT query may run, got a DROP statement'
    >>> refusal("SELECT 1; DELETE FROM singer")
    'refused: 2 statements; only a single SELECT query may run'
    >>> refusal("SELECT load_extension('evil.so')")
    'refused: the query calls load_extension(), which is not allowed'
    """
    if statements is None:
        try:
            statements = parse_statements(sql, dialect)
        except SqlglotError:
            return _lexical_refusal(sql, dialect)
    if not statements:
        return "refused: the SQL is empty"
    if len(statements) > 1:
        return f"refused: {len(statements)} statements; only a single SELECT query may run"
    tree = statements[0]
    while isinstance(tree, exp.Subquery) and not tree.alias:
        tree = tree.this
    if not isinstance(tree, exp.Select | exp.SetOperation | exp.Values):
        return ("refused: only a single SELECT query may run, got a "
                f"{_statement_kind(statements[0], sql)}")
    for node in tree.walk():
        if isinstance(node, _FORBIDDEN_NODES):
            return f"refused: the query contains a {_statement_kind(node, sql)}"
        if isinstance(node, exp.Func):
            name = (node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()
            if name in DENIED_FUNCTIONS:
                return f"refused: the query calls {name}(), which is not allowed"
    return None


@functools.lru_cache(maxsize=8192)
def _text_refusal(sql: str, dialect: str) -> str | None:
    """:func:`refusal` of a query text, computed once per text: the cascade runs the same
    query many times (the gold query on every test database, a few runs for timing)."""
    return refusal(sql, dialect)


def _statement_kind(node: exp.Expression, sql: str) -> str:
    if isinstance(node, exp.Command):
        return f"{str(node.this).upper()} command"
    if isinstance(node, exp.Into):
        return "SELECT ... INTO (which creates a table)"
    key = {"drop": "DROP", "insert": "INSERT", "update": "UPDATE", "delete": "DELETE",
           "create": "CREATE", "alter": "ALTER", "attach": "ATTACH", "detach": "DETACH",
           "pragma": "PRAGMA", "transaction": "BEGIN", "set": "SET"}.get(node.key, None)
    if key:
        return f"{key} statement"
    first = sql.strip().split(None, 1)[0].upper() if sql.strip() else "empty"
    return f"{first} statement" if isinstance(node, exp.Column | exp.Alias) else \
        f"{type(node).__name__} expression"


def _lexical_refusal(sql: str, dialect: str) -> str | None:
    """For SQL sqlglot cannot parse: refuse several statements or a non-SELECT first keyword."""
    try:
        with quiet_sqlglot():
            tokens = sqlglot.Dialect.get_or_raise(dialect).tokenize(sql)
    except SqlglotError:
        return None  # the engine will say what is wrong with it
    statements: list[list[Any]] = [[]]
    for token in tokens:
        if token.token_type == sqlglot.TokenType.SEMICOLON:
            statements.append([])
        else:
            statements[-1].append(token)
    statements = [s for s in statements if s]
    if len(statements) > 1:
        return f"refused: {len(statements)} statements; only a single SELECT query may run"
    if statements:
        first = statements[0][0].text.upper()
        if first in _STATEMENT_KEYWORDS:
            return f"refused: only a single SELECT query may run, got a {first} statement"
    return None


_STATEMENT_KEYWORDS = frozenset({
    "ALTER", "ANALYZE", "ATTACH", "BEGIN", "CALL", "CHECKPOINT", "COMMIT", "COPY", "CREATE",
    "DELETE", "DETACH", "DO", "DROP", "END", "EXECUTE", "EXPLAIN", "EXPORT", "GRANT", "IMPORT",
    "INSERT", "INSTALL", "LOAD", "LOCK", "MERGE", "PRAGMA", "PREPARE", "REINDEX", "RELEASE",
    "REPLACE", "RESET", "REVOKE", "ROLLBACK", "SAVEPOINT", "SET", "TRUNCATE", "UPDATE", "UPSERT",
    "USE", "VACUUM"})


# --------------------------------------------------------------------------------------------
# SQLite
# --------------------------------------------------------------------------------------------

_SQLITE_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
                   getattr(sqlite3, "SQLITE_RECURSIVE", 33)}


def _sqlite_authorizer(action: int, arg1: str | None, arg2: str | None, *_: Any) -> int:
    if action not in _SQLITE_ALLOWED:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in DENIED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


class SandboxedSQLite(sqlite3.Connection):
    """A ``sqlite3`` connection that carries a ``scope``: connections with the same scope have
    the same schema, so the width of a query's result is looked up once per scope (see
    :func:`result_width`). Engines open their sandboxed connections with this factory."""

    scope: Any = None


def lock_sqlite(conn: sqlite3.Connection, *, scope: Any = None,
                limits: Limits | None = None) -> sqlite3.Connection:
    """Make a SQLite connection read-only for good: ``query_only``, no ``ATTACH``, no
    extension loading, an authorizer that allows reading and nothing else, and no string or
    blob longer than ``limits.max_value_bytes`` (:func:`run` sets the caps of each query).

    >>> conn = lock_sqlite(sqlite3.connect(":memory:"))
    >>> run(conn, "CREATE TABLE t (x INT)").status
    'refused'
    >>> run(conn, "SELECT 1 + 1").rows
    [(2,)]
    >>> conn.execute("SELECT zeroblob(20000000)")
    Traceback (most recent call last):
    sqlite3.DataError: string or blob too big
    """
    limits = limits or Limits()
    conn.execute("PRAGMA query_only = 1")
    conn.execute("PRAGMA trusted_schema = 0")
    if hasattr(conn, "enable_load_extension"):
        conn.enable_load_extension(False)
    conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, limits.max_value_bytes)
    conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, _sql_length(limits))
    conn.set_authorizer(_sqlite_authorizer)
    if scope is not None and isinstance(conn, SandboxedSQLite):
        conn.scope = scope
    return conn


def _sql_length(limits: Limits) -> int:
    """SQLite's cap on the length of one statement: a query text is a value too (with room
    for the ``EXPLAIN`` of :func:`result_width`)."""
    return limits.max_value_bytes + 64


def open_sqlite_readonly(path: str, *, scope: Any = None,
                         limits: Limits | None = None) -> sqlite3.Connection:
    """A locked, read-only connection to a SQLite file (``mode=ro``: the file is never written).
    ``scope``: see :class:`SandboxedSQLite` (an engine passes its own; none: no sharing)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False,
                           factory=SandboxedSQLite)
    return lock_sqlite(conn, scope=scope, limits=limits)


_WIDTHS: dict[tuple[Any, str], int | None] = {}
_WIDTHS_LOCK = threading.Lock()


def result_width(conn: sqlite3.Connection, sql: str) -> int | None:
    """How many columns ``sql`` returns, from its compiled program (``EXPLAIN``; nothing is
    run), or ``None`` when it does not compile. Remembered per connection scope.

    >>> result_width(lock_sqlite(sqlite3.connect(":memory:")), "SELECT 1, 2 UNION SELECT 3, 4")
    2
    """
    scope = getattr(conn, "scope", None)
    key = (scope, sql)
    if scope is not None:
        with _WIDTHS_LOCK:
            if key in _WIDTHS:
                return _WIDTHS[key]
    width: int | None = None
    try:
        for row in conn.execute("EXPLAIN " + sql):
            if row[1] == "ResultRow":
                width = max(width or 0, int(row[3]))
    except (sqlite3.Error, sqlite3.Warning, OverflowError, ValueError, MemoryError):
        width = None
    if scope is not None:
        with _WIDTHS_LOCK:
            if len(_WIDTHS) > 8192:
                _WIDTHS.clear()
            _WIDTHS[key] = width
    return width


def _run_sqlite(conn: sqlite3.Connection, sql: str, timeout_s: float,
                limits: Limits | int) -> Result:
    if isinstance(limits, int):  # the old signature: a row cap
        limits = Limits(max_rows=limits)
    # One row holds at most width × cap bytes: the value cap is lowered for a wide result so
    # that one row can never pass the result cap (SQLite builds a whole row before Python
    # sees any of it).
    conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, _sql_length(limits))
    width = result_width(conn, sql)
    cap = limits.max_value_bytes
    if width:
        cap = max(1, min(cap, limits.max_result_bytes // width))
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, cap)
    deadline = time.monotonic() + timeout_s
    stopped = [False]

    def progress() -> int:
        if time.monotonic() > deadline:
            stopped[0] = True
            return 1
        return 0

    conn.set_progress_handler(progress, 2000)
    start = time.perf_counter()
    columns: list[str] = []
    try:
        cursor = conn.execute(sql)
        columns = [d[0] for d in cursor.description or ()]
        rows, stop = _fetch(cursor.fetchmany, limits, row_bytes=max(1, len(columns)) * cap,
                            check_values=False)
    except (sqlite3.Error, sqlite3.Warning, OverflowError, ValueError, MemoryError) as exc:
        elapsed = time.perf_counter() - start
        if stopped[0]:
            return Result("timeout", error=f"stopped after the {timeout_s:g}s time limit",
                          elapsed_s=elapsed)
        message = str(exc)
        if isinstance(exc, MemoryError) or "out of memory" in message:
            return Result("too_large", error=_OUT_OF_MEMORY, elapsed_s=elapsed)
        if "too big" in message:
            return Result("too_large", error=limits.describe("max_value_bytes", cap=cap,
                                                             columns=width),
                          elapsed_s=elapsed, limit="max_value_bytes")
        if "query string is too large" in message or "statement too long" in message:
            return Result("too_large", error=f"SQL text is longer than the "
                          f"{human_bytes(limits.max_value_bytes)} cap (max_value_bytes)",
                          elapsed_s=elapsed, limit="max_value_bytes")
        if "not authorized" in message or "prohibited" in message:
            return Result("refused", error=f"refused by the read-only sandbox: {message}",
                          elapsed_s=elapsed)
        if "one statement at a time" in message:
            return Result("refused", error="refused: several statements; only a single "
                                           "SELECT query may run", elapsed_s=elapsed)
        return Result("error", error=message or _no_message(exc, "SQLite"), elapsed_s=elapsed)
    finally:
        conn.set_progress_handler(None, 0)
    return _finished(rows, stop, columns, time.perf_counter() - start)


_OUT_OF_MEMORY = ("memory ran out while running or fetching the query (MemoryError); lower "
                  "max_result_bytes or max_value_bytes")


def _no_message(exc: BaseException, engine: str) -> str:
    return f"{engine} raised {type(exc).__name__} without a message"


def _finished(rows: list[Any] | None, stop: tuple[str, str, str] | None, columns: list[str],
              elapsed: float) -> Result:
    if stop is not None:
        status, limit, error = stop
        return Result(status, columns=columns, error=error, elapsed_s=elapsed, limit=limit)
    return Result("ok", columns=columns, rows=[tuple(r) for r in rows or ()], elapsed_s=elapsed)


def _fetch(fetchmany: Callable[[int], list[Any]], limits: Limits | int, *, row_bytes: int = 1,
           check_values: bool = True) -> tuple[list[Any] | None, tuple[str, str, str] | None]:
    """Fetch rows in chunks until the result ends or passes a cap: ``(rows, None)``, or
    ``(None, (status, limit, error))``. A chunk holds at most as many rows as fit in the room
    left under the result cap when each row has ``row_bytes`` (its worst case), so the bytes
    held never pass the cap by more than one row. ``check_values``: also check each value
    against the value cap (for engines that have none of their own).

    >>> rows = iter([[(1, "a" * 40)]] * 30 + [[]])
    >>> _fetch(lambda n: next(rows), Limits(max_result_bytes=1000))[1][:2]
    ('too_large', 'max_result_bytes')
    """
    if isinstance(limits, int):
        limits = Limits(max_rows=limits)
    rows: list[Any] = []
    used = 0
    while True:
        room = limits.max_result_bytes - used
        n = max(1, min(1000, room // max(1, row_bytes), limits.max_rows + 1 - len(rows)))
        chunk = fetchmany(n)
        if not chunk:
            return rows, None
        size = _bytes(chunk)
        if check_values and size > limits.max_value_bytes and \
                _largest_value(chunk) > limits.max_value_bytes:
            return None, ("too_large", "max_value_bytes", limits.describe("max_value_bytes"))
        used += size
        rows.extend(chunk)
        if used > limits.max_result_bytes:
            return None, ("too_large", "max_result_bytes", limits.describe("max_result_bytes"))
        if len(rows) > limits.max_rows:
            return None, ("too_many_rows", "max_rows", limits.describe("max_rows"))


def _bytes(values: Any) -> int:
    """The size of ``values`` as a pickle: about the lengths of its strings and blobs plus a
    few bytes per number (and six times faster than adding them up in Python).

    >>> 1000 < _bytes([(1, "x" * 1000)]) < 1100
    True
    """
    try:
        return len(pickle.dumps(values, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:  # noqa: BLE001 - a value that does not pickle: count what we can
        total = 0
        for row in values:
            for v in row:
                total += len(v) if isinstance(v, str | bytes | bytearray) else 16
        return total


def _largest_value(rows: list[Any]) -> int:
    return max((len(v) if isinstance(v, str | bytes | bytearray) else
                _bytes([(v,)]) if isinstance(v, list | tuple | dict) else 16
                for row in rows for v in row), default=0)


# --------------------------------------------------------------------------------------------
# DuckDB and PostgreSQL (optional extras)
# --------------------------------------------------------------------------------------------


def _run_duckdb(conn: Any, sql: str, timeout_s: float, limits: Limits | int) -> Result:
    """Run on a DuckDB connection in this process. The sandboxed connections of
    :class:`~evalharness_sql.engines.DuckDBEngine` live in a child process
    (:mod:`evalharness_sql.duckproc`), which calls this; only there are the memory cap and
    the time limit hard."""
    import duckdb

    if isinstance(limits, int):
        limits = Limits(max_rows=limits)
    timer = threading.Timer(timeout_s, conn.interrupt)
    start = time.perf_counter()
    timer.start()
    columns: list[str] = []
    try:
        cursor = conn.execute(sql)
        columns = [d[0] for d in cursor.description or ()]
        rows, stop = _fetch(cursor.fetchmany, limits,
                            row_bytes=max(1, len(columns)) * limits.max_value_bytes)
    except duckdb.InterruptException:
        return Result("timeout", error=f"stopped after the {timeout_s:g}s time limit",
                      elapsed_s=time.perf_counter() - start)
    except (duckdb.OutOfMemoryException, MemoryError):
        return Result("too_large", error=limits.describe("max_memory_bytes"),
                      elapsed_s=time.perf_counter() - start, limit="max_memory_bytes")
    except duckdb.Error as exc:
        message = str(exc) or _no_message(exc, "DuckDB")
        status = "refused" if "disabled" in message.lower() or "read-only" in message.lower() \
            else "error"
        return Result(status, error=message, elapsed_s=time.perf_counter() - start)
    finally:
        timer.cancel()
    return _finished(rows, stop, columns, time.perf_counter() - start)


_PG_SETTINGS: weakref.WeakKeyDictionary[Any, dict[int, list[str]]] = weakref.WeakKeyDictionary()
_PG_LOCK = threading.Lock()


def _postgres_settings(conn: Any, limits: Limits) -> list[str]:
    """``SET LOCAL`` statements that hold one query to ``max_memory_bytes``: ``work_mem``
    lowered to it (never raised above the server's), ``temp_file_limit`` too where this role
    may set it (a superuser, or ``GRANT SET ON PARAMETER``), and the planner told the whole
    result is wanted (the rows are fetched through a cursor). Worked out once per connection."""
    with _PG_LOCK:
        known = _PG_SETTINGS.get(conn, {}).get(limits.max_memory_bytes)
    if known is not None:
        return known
    kb = max(64, limits.max_memory_bytes // 1024)
    out = ["SET LOCAL cursor_tuple_fraction = 1"]
    with conn.transaction(force_rollback=True):
        rows = dict(conn.execute(
            "SELECT name, setting FROM pg_settings WHERE name IN ('work_mem', "
            "'temp_file_limit', 'is_superuser', 'server_version_num')").fetchall())
        work_mem = int(rows.get("work_mem", kb))
        out.append(f"SET LOCAL work_mem = '{min(work_mem, kb)}kB'")
        allowed = rows.get("is_superuser") == "on"
        if not allowed and int(rows.get("server_version_num", 0)) >= 150000:
            allowed = bool(conn.execute("SELECT has_parameter_privilege('temp_file_limit', "
                                        "'SET')").fetchone()[0])
        if allowed:
            current = int(rows.get("temp_file_limit", -1))
            out.append(f"SET LOCAL temp_file_limit = '{kb if current < 0 else min(current, kb)}kB'")
    with _PG_LOCK:
        _PG_SETTINGS.setdefault(conn, {})[limits.max_memory_bytes] = out
    return out


def _run_postgres(conn: Any, sql: str, timeout_s: float, limits: Limits | int) -> Result:
    import psycopg

    if isinstance(limits, int):
        limits = Limits(max_rows=limits)
    start = time.perf_counter()
    cancel = getattr(conn, "cancel_safe", None) or conn.cancel
    timer = threading.Timer(timeout_s, cancel)
    columns: list[str] = []
    try:
        settings = _postgres_settings(conn, limits)
        timer.start()
        with conn.transaction(force_rollback=True):
            conn.execute("SET TRANSACTION READ ONLY")
            conn.execute(f"SET LOCAL statement_timeout = {max(1, int(timeout_s * 1000))}")
            for statement in settings:
                conn.execute(statement)
            # a server-side cursor: rows arrive chunk by chunk, never the whole result at once
            with conn.cursor(name="evalharness_sandbox") as cursor:
                cursor.execute(sql)
                columns = [d.name for d in cursor.description or ()]
                rows, stop = _fetch(cursor.fetchmany, limits,
                                    row_bytes=max(1, len(columns)) * limits.max_value_bytes)
    except psycopg.errors.QueryCanceled:
        return Result("timeout", error=f"stopped after the {timeout_s:g}s time limit",
                      elapsed_s=time.perf_counter() - start)
    except psycopg.errors.ReadOnlySqlTransaction as exc:
        return Result("refused", error=f"refused by the read-only transaction: {exc}",
                      elapsed_s=time.perf_counter() - start)
    except (psycopg.errors.OutOfMemory, psycopg.errors.ConfigurationLimitExceeded,
            MemoryError) as exc:
        return Result("too_large", error=f"{limits.describe('max_memory_bytes')}: "
                      f"{str(exc).strip() or type(exc).__name__}",
                      elapsed_s=time.perf_counter() - start, limit="max_memory_bytes")
    except psycopg.Error as exc:
        return Result("error", error=str(exc).strip() or _no_message(exc, "PostgreSQL"),
                      elapsed_s=time.perf_counter() - start)
    finally:
        timer.cancel()
    return _finished(rows, stop, columns, time.perf_counter() - start)


def run(conn: Any, sql: str, *, dialect: str = "sqlite", timeout_s: float = 5.0,
        max_rows: int | None = None, limits: Limits | None = None,
        statements: list[exp.Expression] | None = None) -> Result:
    """Run one untrusted query on a sandboxed connection; never raises for a bad query.

    ``conn`` is a connection opened by an engine (:mod:`evalharness_sql.engines`): a locked
    ``sqlite3`` connection, a DuckDB connection in its sandbox process, or a psycopg
    connection. ``limits`` are the caps (:class:`Limits`; ``max_rows`` overrides its row cap).

    >>> conn = lock_sqlite(sqlite3.connect(":memory:"))
    >>> run(conn, "SELECT 1; SELECT 2").error
    'refused: 2 statements; only a single SELECT query may run'
    >>> slow = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT max(i) FROM n"
    >>> run(conn, slow, timeout_s=0.05).status
    'timeout'
    >>> run(conn, "SELECT zeroblob(2000000)", limits=Limits(max_value_bytes=1_000_000)).error
    'value exceeds the 1 MB value cap (max_value_bytes)'
    """
    limits = limits or Limits()
    if max_rows is not None:
        limits = replace(limits, max_rows=max_rows)
    reason = refusal(sql, dialect, statements) if statements is not None else \
        _text_refusal(sql, dialect)
    if reason is not None:
        return Result("refused", error=reason)
    if isinstance(conn, sqlite3.Connection):
        return _run_sqlite(conn, sql, timeout_s, limits)
    if getattr(conn, "sandboxed", False):  # a duckproc.Connection: its child runs the query
        return conn.run(sql, timeout_s, limits)
    module = type(conn).__module__
    if module.startswith("duckdb") or module.startswith("_duckdb"):
        return _run_duckdb(conn, sql, timeout_s, limits)
    if module.startswith("psycopg"):
        return _run_postgres(conn, sql, timeout_s, limits)
    raise TypeError(f"no sandbox for connections of type {type(conn).__name__}")
