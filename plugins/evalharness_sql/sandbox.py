"""The sandbox where untrusted SQL runs: one read-only statement, a time limit that interrupts, a row cap.

Predicted SQL is untrusted. Every query the cascade executes (gold and predicted, on the
scenario's database and on the test-suite databases) goes through :func:`run`, which

1. refuses anything but a single ``SELECT`` / ``WITH`` / ``VALUES`` statement
   (:func:`refusal`), and functions that reach outside the database;
2. executes on a connection the engine opened read-only (SQLite: ``mode=ro``, ``query_only``
   and an authorizer that denies every write, ``ATTACH``, ``PRAGMA`` and extension loading;
   DuckDB: ``read_only`` with external access and extension loading off; PostgreSQL: a
   read-only transaction with ``statement_timeout``);
3. stops the query when its time limit is reached (SQLite's progress handler, DuckDB's
   ``interrupt()``, PostgreSQL's ``statement_timeout``) and fetches at most ``max_rows + 1``
   rows.

It never raises for a bad query: the :class:`Result` says what happened.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

STATUSES = ("ok", "error", "timeout", "refused", "too_many_rows")

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


@dataclass
class Result:
    """What running one query returned, or why it did not.

    ``status`` is one of ``ok``, ``error`` (the engine rejected or failed the query),
    ``timeout``, ``refused`` (the sandbox would not run it) and ``too_many_rows``.
    """

    status: str
    columns: list[str] = field(default_factory=list)
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    error: str | None = None
    elapsed_s: float = 0.0

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

    >>> [type(s).__name__ for s in parse_statements("SELECT 1; DROP TABLE t;", "sqlite")]
    ['Select', 'Drop']
    """
    with quiet_sqlglot():
        return [s for s in sqlglot.parse(sql, read=dialect) if s is not None]


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


def lock_sqlite(conn: sqlite3.Connection) -> sqlite3.Connection:
    """Make a SQLite connection read-only for good: ``query_only``, no ``ATTACH``, no
    extension loading, and an authorizer that allows reading and nothing else.

    >>> conn = lock_sqlite(sqlite3.connect(":memory:"))
    >>> run(conn, "CREATE TABLE t (x INT)").status
    'refused'
    >>> run(conn, "SELECT 1 + 1").rows
    [(2,)]
    """
    conn.execute("PRAGMA query_only = 1")
    conn.execute("PRAGMA trusted_schema = 0")
    if hasattr(conn, "enable_load_extension"):
        conn.enable_load_extension(False)
    conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    conn.set_authorizer(_sqlite_authorizer)
    return conn


def open_sqlite_readonly(path: str) -> sqlite3.Connection:
    """A locked, read-only connection to a SQLite file (``mode=ro``: the file is never written)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
    return lock_sqlite(conn)


def _run_sqlite(conn: sqlite3.Connection, sql: str, timeout_s: float,
                max_rows: int) -> Result:
    deadline = time.monotonic() + timeout_s
    stopped = [False]

    def progress() -> int:
        if time.monotonic() > deadline:
            stopped[0] = True
            return 1
        return 0

    conn.set_progress_handler(progress, 2000)
    start = time.perf_counter()
    try:
        cursor = conn.execute(sql)
        columns = [d[0] for d in cursor.description or ()]
        rows = _fetch(cursor.fetchmany, max_rows)
    except (sqlite3.Error, sqlite3.Warning, OverflowError, ValueError, MemoryError) as exc:
        elapsed = time.perf_counter() - start
        if stopped[0]:
            return Result("timeout", error=f"stopped after the {timeout_s:g}s time limit",
                          elapsed_s=elapsed)
        message = str(exc)
        if "not authorized" in message or "prohibited" in message:
            return Result("refused", error=f"refused by the read-only sandbox: {message}",
                          elapsed_s=elapsed)
        if "one statement at a time" in message:
            return Result("refused", error="refused: several statements; only a single "
                                           "SELECT query may run", elapsed_s=elapsed)
        return Result("error", error=message, elapsed_s=elapsed)
    finally:
        conn.set_progress_handler(None, 0)
    elapsed = time.perf_counter() - start
    if rows is None:
        return Result("too_many_rows", columns=columns,
                      error=f"more than {max_rows} rows", elapsed_s=elapsed)
    return Result("ok", columns=columns, rows=[tuple(r) for r in rows], elapsed_s=elapsed)


def _fetch(fetchmany: Callable[[int], list[Any]], max_rows: int) -> list[Any] | None:
    rows: list[Any] = []
    while True:
        chunk = fetchmany(min(1000, max_rows + 1))
        if not chunk:
            return rows
        rows.extend(chunk)
        if len(rows) > max_rows:
            return None


# --------------------------------------------------------------------------------------------
# DuckDB and PostgreSQL (optional extras)
# --------------------------------------------------------------------------------------------


def _run_duckdb(conn: Any, sql: str, timeout_s: float, max_rows: int) -> Result:
    import threading

    import duckdb

    timer = threading.Timer(timeout_s, conn.interrupt)
    start = time.perf_counter()
    timer.start()
    try:
        cursor = conn.execute(sql)
        columns = [d[0] for d in cursor.description or ()]
        rows = _fetch(cursor.fetchmany, max_rows)
    except duckdb.InterruptException:
        return Result("timeout", error=f"stopped after the {timeout_s:g}s time limit",
                      elapsed_s=time.perf_counter() - start)
    except duckdb.Error as exc:
        message = str(exc)
        status = "refused" if "disabled" in message.lower() or "read-only" in message.lower() \
            else "error"
        return Result(status, error=message, elapsed_s=time.perf_counter() - start)
    finally:
        timer.cancel()
    elapsed = time.perf_counter() - start
    if rows is None:
        return Result("too_many_rows", columns=columns, error=f"more than {max_rows} rows",
                      elapsed_s=elapsed)
    return Result("ok", columns=columns, rows=[tuple(r) for r in rows], elapsed_s=elapsed)


def _run_postgres(conn: Any, sql: str, timeout_s: float, max_rows: int) -> Result:
    import psycopg

    start = time.perf_counter()
    try:
        with conn.transaction(force_rollback=True):
            conn.execute("SET TRANSACTION READ ONLY")
            conn.execute(f"SET LOCAL statement_timeout = {max(1, int(timeout_s * 1000))}")
            cursor = conn.execute(sql, prepare=False)
            columns = [d.name for d in cursor.description or ()]
            rows = _fetch(cursor.fetchmany, max_rows)
    except psycopg.errors.QueryCanceled:
        return Result("timeout", error=f"stopped after the {timeout_s:g}s time limit",
                      elapsed_s=time.perf_counter() - start)
    except psycopg.errors.ReadOnlySqlTransaction as exc:
        return Result("refused", error=f"refused by the read-only transaction: {exc}",
                      elapsed_s=time.perf_counter() - start)
    except psycopg.Error as exc:
        return Result("error", error=str(exc).strip(), elapsed_s=time.perf_counter() - start)
    elapsed = time.perf_counter() - start
    if rows is None:
        return Result("too_many_rows", columns=columns, error=f"more than {max_rows} rows",
                      elapsed_s=elapsed)
    return Result("ok", columns=columns, rows=[tuple(r) for r in rows], elapsed_s=elapsed)


def run(conn: Any, sql: str, *, dialect: str = "sqlite", timeout_s: float = 5.0,
        max_rows: int = 100_000, statements: list[exp.Expression] | None = None) -> Result:
    """Run one untrusted query on a sandboxed connection; never raises for a bad query.

    ``conn`` is a connection opened by an engine (:mod:`evalharness_sql.engines`): a locked
    ``sqlite3`` connection, a read-only DuckDB connection or a psycopg connection.

    >>> conn = lock_sqlite(sqlite3.connect(":memory:"))
    >>> run(conn, "SELECT 1; SELECT 2").error
    'refused: 2 statements; only a single SELECT query may run'
    >>> slow = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT max(i) FROM n"
    >>> run(conn, slow, timeout_s=0.05).status
    'timeout'
    """
    reason = refusal(sql, dialect, statements) if statements is not None else \
        _text_refusal(sql, dialect)
    if reason is not None:
        return Result("refused", error=reason)
    if isinstance(conn, sqlite3.Connection):
        return _run_sqlite(conn, sql, timeout_s, max_rows)
    module = type(conn).__module__
    if module.startswith("duckdb") or module.startswith("_duckdb"):
        return _run_duckdb(conn, sql, timeout_s, max_rows)
    if module.startswith("psycopg"):
        return _run_postgres(conn, sql, timeout_s, max_rows)
    raise TypeError(f"no sandbox for connections of type {type(conn).__name__}")
