"""Database engines: SQLite (stdlib, the default), DuckDB and PostgreSQL (optional extras).

An :class:`Engine` opens sandboxed connections to the scenario's database, describes its
schema (columns, types, keys) and, for the test-suite stage, builds small in-memory databases
with the same schema from rows the cascade generates. :func:`open_engine` picks the engine
from what the caller has: a path to a SQLite file, a ``duckdb:`` path or a ``.duckdb`` file, a
``postgresql://`` DSN, or the scenario's ``context.database``.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalharness.context import sqlite_affinity
from evalharness_sql.sandbox import Limits, SandboxedSQLite, lock_sqlite, open_sqlite_readonly


@dataclass(frozen=True)
class Column:
    """One column: its declared type, and whether it can hold NULL.

    ``notnull`` is true for ``NOT NULL`` and ``PRIMARY KEY`` columns (the SQL standard's
    reading; SQLite tolerates NULL in a non-INTEGER primary key only for backwards
    compatibility, and we do not consider such databases).
    """

    name: str
    type: str
    notnull: bool = False
    pk: bool = False
    allowed: tuple[Any, ...] | None = None
    """The only values a ``CHECK (column IN (...))`` constraint lets in, when it has one."""

    @property
    def affinity(self) -> str:
        """SQLite's type affinity rules (section 3.1 of "Datatypes In SQLite").

        >>> [Column("c", t).affinity for t in ("INT", "varchar(20)", "", "DOUBLE", "date")]
        ['INTEGER', 'TEXT', 'BLOB', 'REAL', 'NUMERIC']
        """
        return sqlite_affinity(self.type)

    @property
    def kind(self) -> str:
        """What kind of values to generate: ``int``, ``real``, ``text``, ``date``, ``bool``.

        >>> [Column(n, t).kind for n, t in (("id", "INTEGER"), ("joined_at", "TEXT"),
        ...                                  ("price", "REAL"), ("x", "BOOLEAN"), ("d", "DATE"))]
        ['int', 'date', 'real', 'bool', 'date']
        """
        t, name = self.type.upper(), self.name.lower()
        if "BOOL" in t:
            return "bool"
        if "DATE" in t or "TIME" in t or name.endswith(("_at", "_date", "date", "_time")):
            return "date"
        if any(k in t for k in ("INT", "SERIAL")):
            return "int"
        if any(k in t for k in ("REAL", "FLOA", "DOUB", "NUMERIC", "DECIMAL", "NUMBER")):
            return "real"
        return "text"


@dataclass(frozen=True)
class ForeignKey:
    columns: tuple[str, ...]
    table: str
    ref_columns: tuple[str, ...]


@dataclass
class Table:
    """One table or view of the schema."""

    name: str
    columns: list[Column]
    primary_key: tuple[str, ...] = ()
    foreign_keys: list[ForeignKey] = field(default_factory=list)
    unique: list[tuple[str, ...]] = field(default_factory=list)
    is_view: bool = False

    def column(self, name: str) -> Column | None:
        low = name.lower()
        return next((c for c in self.columns if c.name.lower() == low), None)


@dataclass
class Schema:
    """Tables by lower-cased name; ``ddl`` is the schema as SQL (what an LLM judge reads)."""

    tables: dict[str, Table]
    ddl: str = ""

    def table(self, name: str | None) -> Table | None:
        return self.tables.get((name or "").lower())

    def column(self, table: str | None, column: str) -> Column | None:
        t = self.table(table)
        return t.column(column) if t is not None else None

    def mapping(self) -> dict[str, dict[str, str]]:
        """``{table: {column: type}}``, the form sqlglot's optimizer takes."""
        return {t.name: {c.name: (c.type or "TEXT") for c in t.columns}
                for t in self.tables.values()}

    def order(self) -> list[str]:
        """Base tables, parents before children where foreign keys allow (cycles broken)."""
        names = [k for k, t in self.tables.items() if not t.is_view]
        done: list[str] = []
        visiting: set[str] = set()

        def visit(name: str) -> None:
            if name in done or name in visiting:
                return
            visiting.add(name)
            for fk in self.tables[name].foreign_keys:
                parent = fk.table.lower()
                if parent in self.tables and parent != name:
                    visit(parent)
            visiting.discard(name)
            done.append(name)

        for name in sorted(names):
            visit(name)
        return done


class Engine:
    """A database the cascade executes queries on. Subclasses implement one engine each."""

    name = "engine"
    dialect = "sqlite"
    supports_test_suite = False

    def connect(self, limits: Limits | None = None) -> Any:
        """A sandboxed, read-only connection to the database (the caller closes it), made for
        queries held to ``limits`` (:class:`~evalharness_sql.sandbox.Limits`)."""
        raise NotImplementedError

    def schema(self) -> Schema:
        raise NotImplementedError

    def rows(self, table: str, limit: int) -> list[tuple[Any, ...]]:
        """Up to ``limit`` rows of a base table, in storage order."""
        raise NotImplementedError

    def build(self, data: dict[str, list[tuple[Any, ...]]], limits: Limits | None = None) -> Any:
        """A sandboxed connection to a new in-memory database with this schema holding
        ``data`` (``{table: rows}``, values in column order; missing tables stay empty)."""
        raise NotImplementedError(f"{self.name} cannot build test databases")

    def describe(self) -> str:
        return self.name

    def fingerprint(self) -> str:
        return self.describe()


# --------------------------------------------------------------------------------------------
# SQLite
# --------------------------------------------------------------------------------------------


class SQLiteEngine(Engine):
    """A SQLite database file (opened ``mode=ro``), or one built in memory from a DDL script.

    >>> engine = SQLiteEngine.from_ddl("CREATE TABLE t (id INTEGER PRIMARY KEY, x TEXT NOT NULL)")
    >>> [(c.name, c.notnull, c.pk) for c in engine.schema().table("t").columns]
    [('id', True, True), ('x', True, False)]
    >>> from evalharness_sql.sandbox import run
    >>> run(engine.build({"t": [(1, "a"), (2, "b")]}), "SELECT count(*) FROM t").rows
    [(2,)]
    """

    name = "sqlite"
    dialect = "sqlite"
    supports_test_suite = True

    def __init__(self, path: str | os.PathLike[str] | None = None, *,
                 memory: sqlite3.Connection | None = None, label: str | None = None) -> None:
        if (path is None) == (memory is None):
            raise ValueError("give a path or an in-memory connection")
        self.path = str(path) if path is not None else None
        self._memory = memory
        self._label = label
        self._schema: Schema | None = None
        self._rows: dict[tuple[str, int], list[tuple[Any, ...]]] = {}
        self._script: str | None = None
        self._lock = threading.Lock()
        self._scope = object()
        """Shared by every sandboxed connection to this database and its test databases (they
        have one schema): a query's result width is worked out once per scope."""

    @classmethod
    def from_ddl(cls, ddl: str) -> SQLiteEngine:
        """An empty in-memory database built from trusted ``CREATE`` statements."""
        conn = sqlite3.connect(":memory:", check_same_thread=False)
        conn.executescript(ddl)
        return cls(memory=conn, label="an empty database built from the given schema")

    def _trusted(self) -> sqlite3.Connection:
        if self._memory is not None:
            conn = sqlite3.connect(":memory:", check_same_thread=False, factory=SandboxedSQLite)
            with self._lock:
                self._memory.backup(conn)
            return conn
        return sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)

    def connect(self, limits: Limits | None = None) -> sqlite3.Connection:
        if self._memory is not None:
            return lock_sqlite(self._trusted(), scope=self._scope, limits=limits)
        return open_sqlite_readonly(self.path or "", scope=self._scope, limits=limits)

    def describe(self) -> str:
        return self._label or f"the database {self.path}"

    def fingerprint(self) -> str:
        if self.path is None:
            return f"memory:{id(self._memory)}"
        st = os.stat(self.path)
        return f"{self.path}:{st.st_size}:{st.st_mtime_ns}"

    def schema(self) -> Schema:
        if self._schema is None:
            conn = self._trusted()
            try:
                self._schema = _sqlite_schema(conn)
            finally:
                conn.close()
        return self._schema

    def rows(self, table: str, limit: int) -> list[tuple[Any, ...]]:
        key = (table.lower(), limit)
        if key not in self._rows:
            t = self.schema().table(table)
            if t is None or t.is_view:
                return []
            conn = self._trusted()
            try:
                cols = ", ".join(_quote(c.name) for c in t.columns)
                self._rows[key] = [tuple(r) for r in conn.execute(
                    f"SELECT {cols} FROM {_quote(t.name)} LIMIT {int(limit)}")]
            finally:
                conn.close()
        return self._rows[key]

    def _create_script(self) -> str:
        if self._script is None:
            conn = self._trusted()
            try:
                items = conn.execute(
                    "SELECT type, sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT "
                    "LIKE 'sqlite_%' AND type IN ('table', 'index', 'view') ORDER BY "
                    "CASE type WHEN 'table' THEN 0 WHEN 'index' THEN 1 ELSE 2 END, rowid"
                ).fetchall()
            finally:
                conn.close()
            parts = [sql for kind, sql in items
                     if kind != "index" or sql.lstrip().upper().startswith("CREATE UNIQUE")]
            self._script = ";\n".join(parts) + ";" if parts else ""
        return self._script

    def build(self, data: dict[str, list[tuple[Any, ...]]],
              limits: Limits | None = None) -> sqlite3.Connection:
        conn = sqlite3.connect(":memory:", check_same_thread=False, factory=SandboxedSQLite)
        conn.executescript(self._create_script())
        schema = self.schema()
        for name, rows in data.items():
            t = schema.table(name)
            if t is None or t.is_view or not rows:
                continue
            cols = ", ".join(_quote(c.name) for c in t.columns)
            marks = ", ".join("?" for _ in t.columns)
            conn.executemany(f"INSERT OR IGNORE INTO {_quote(t.name)} ({cols}) VALUES ({marks})",
                             rows)
        conn.commit()
        return lock_sqlite(conn, scope=self._scope, limits=limits)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _sqlite_schema(conn: sqlite3.Connection) -> Schema:
    tables: dict[str, Table] = {}
    ddl: list[str] = []
    for name, kind, sql in conn.execute(
            "SELECT name, type, sql FROM sqlite_master WHERE type IN ('table', 'view') "
            "AND name NOT LIKE 'sqlite_%' ORDER BY rowid"):
        info = conn.execute(f"PRAGMA table_info({_quote(name)})").fetchall()
        pk = tuple(r[1] for r in sorted((r for r in info if r[5]), key=lambda r: r[5]))
        checks = _check_lists(sql or "")
        columns = [Column(r[1], r[2] or "", notnull=bool(r[3]) or r[1] in pk, pk=r[1] in pk,
                          allowed=checks.get(r[1].lower())) for r in info]
        fks: dict[int, list[Any]] = {}
        for r in conn.execute(f"PRAGMA foreign_key_list({_quote(name)})"):
            fks.setdefault(r[0], []).append(r)
        foreign = []
        for rows in fks.values():
            parent = rows[0][2]
            refs = tuple(r[4] for r in rows)
            if any(ref is None for ref in refs):  # REFERENCES parent: its primary key
                parent_pk = [r[1] for r in conn.execute(
                    f"PRAGMA table_info({_quote(parent)})") if r[5]]
                refs = tuple(parent_pk[: len(rows)])
            foreign.append(ForeignKey(tuple(r[3] for r in rows), parent, refs))
        unique = []
        for idx in conn.execute(f"PRAGMA index_list({_quote(name)})").fetchall():
            if idx[2]:
                cols = tuple(r[2] for r in conn.execute(f"PRAGMA index_info({_quote(idx[1])})"))
                if cols and cols != pk and all(cols):
                    unique.append(cols)
        tables[name.lower()] = Table(name, columns, pk, foreign, unique, is_view=kind == "view")
        if sql:
            ddl.append(sql.strip() + ";")
    return Schema(tables, "\n".join(ddl))


def _check_lists(ddl: str) -> dict[str, tuple[Any, ...]]:
    """``{column: allowed values}`` from ``CHECK (column IN (...))`` constraints of a table.

    >>> _check_lists("CREATE TABLE t (g TEXT CHECK (g IN ('a', 'b')), n INT)")
    {'g': ('a', 'b')}
    """
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    from evalharness_sql.sandbox import quiet_sqlglot

    try:
        with quiet_sqlglot():
            tree = sqlglot.parse_one(ddl, read="sqlite")
    except (SqlglotError, ValueError):
        return {}
    out: dict[str, tuple[Any, ...]] = {}
    for check in tree.find_all(exp.CheckColumnConstraint):
        node = check.this
        if isinstance(node, exp.In) and isinstance(node.this, exp.Column) and \
                not node.args.get("query") and all(isinstance(e, exp.Literal)
                                                   for e in node.expressions):
            values = tuple(e.name if e.is_string else _number(e.name) for e in node.expressions)
            out[node.this.name.lower()] = values
    return out


def _number(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        return float(text)


# --------------------------------------------------------------------------------------------
# DuckDB (optional: pip install duckdb)
# --------------------------------------------------------------------------------------------

_DUCKDB_CONFIG = {"enable_external_access": False, "autoinstall_known_extensions": False,
                  "autoload_known_extensions": False, "allow_unsigned_extensions": False}


class DuckDBEngine(Engine):
    """A DuckDB database file, opened ``read_only`` with external access and extension
    loading switched off and the configuration locked — for untrusted queries, in a sandbox
    process with a memory cap (:mod:`evalharness_sql.duckproc`)."""

    name = "duckdb"
    dialect = "duckdb"
    supports_test_suite = True

    def __init__(self, path: str | os.PathLike[str]) -> None:
        import duckdb  # noqa: F401  (fail early, with the import error, when it is missing)

        self.path = str(path)
        self._schema: Schema | None = None
        self._rows: dict[tuple[str, int], list[tuple[Any, ...]]] = {}

    def _open(self, path: str, read_only: bool) -> Any:
        import duckdb

        return duckdb.connect(path, read_only=read_only, config=dict(_DUCKDB_CONFIG))

    def connect(self, limits: Limits | None = None) -> Any:
        """A read-only connection in a sandbox process (:mod:`evalharness_sql.duckproc`)."""
        from evalharness_sql.duckproc import Connection

        return Connection(("open", self.path), limits)

    def describe(self) -> str:
        return f"the DuckDB database {self.path}"

    def fingerprint(self) -> str:
        st = os.stat(self.path)
        return f"duckdb:{self.path}:{st.st_size}:{st.st_mtime_ns}"

    def schema(self) -> Schema:
        if self._schema is None:
            conn = self._open(self.path, True)
            try:
                self._schema = _duckdb_schema(conn)
            finally:
                conn.close()
        return self._schema

    def rows(self, table: str, limit: int) -> list[tuple[Any, ...]]:
        key = (table.lower(), limit)
        if key not in self._rows:
            t = self.schema().table(table)
            if t is None or t.is_view:
                return []
            conn = self._open(self.path, True)
            try:
                cols = ", ".join(_quote(c.name) for c in t.columns)
                self._rows[key] = [tuple(r) for r in conn.execute(
                    f"SELECT {cols} FROM {_quote(t.name)} LIMIT {int(limit)}").fetchall()]
            finally:
                conn.close()
        return self._rows[key]

    def build(self, data: dict[str, list[tuple[Any, ...]]], limits: Limits | None = None) -> Any:
        """A test database in a sandbox process (:mod:`evalharness_sql.duckproc`): the base
        tables with their columns' types (no constraints), ``data``, then the views."""
        from evalharness_sql.duckproc import Connection

        schema = self.schema()
        tables = []
        rows: dict[str, list[tuple[Any, ...]]] = {}
        for key in schema.order():
            t = schema.tables[key]
            cols = ", ".join(f"{_quote(c.name)} {c.type or 'VARCHAR'}" for c in t.columns)
            marks = ", ".join("?" for _ in t.columns)
            tables.append((t.name, f"CREATE TABLE {_quote(t.name)} ({cols})",
                           f"INSERT INTO {_quote(t.name)} VALUES ({marks})"))
            rows[t.name] = list(data.get(key) or data.get(t.name) or [])
        views = [sql.rstrip(";") for sql in schema.ddl.split(";\n")
                 if sql.strip().upper().startswith("CREATE VIEW")]
        return Connection(("build", tables, views, rows), limits)


def _duckdb_schema(conn: Any) -> Schema:
    tables: dict[str, Table] = {}
    types: dict[str, list[tuple[str, str, bool]]] = {}
    for table, column, dtype, nullable in conn.execute(
            "SELECT table_name, column_name, data_type, is_nullable FROM "
            "information_schema.columns WHERE table_schema = 'main' "
            "ORDER BY table_name, ordinal_position").fetchall():
        types.setdefault(table, []).append((column, dtype, nullable == "NO"))
    views = {r[0] for r in conn.execute(
        "SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
    constraints = conn.execute(
        "SELECT table_name, constraint_type, constraint_column_names, referenced_table, "
        "referenced_column_names FROM duckdb_constraints() WHERE schema_name = 'main'"
    ).fetchall()
    ddl: list[str] = []
    for table, cols in types.items():
        pk: tuple[str, ...] = ()
        unique, foreign = [], []
        for t, kind, names, ref_table, ref_cols in constraints:
            if t != table:
                continue
            if kind == "PRIMARY KEY":
                pk = tuple(names)
            elif kind == "UNIQUE":
                unique.append(tuple(names))
            elif kind == "FOREIGN KEY":
                foreign.append(ForeignKey(tuple(names), ref_table, tuple(ref_cols)))
        columns = [Column(n, d, notnull=nn or n in pk, pk=n in pk) for n, d, nn in cols]
        tables[table.lower()] = Table(table, columns, pk, foreign, unique,
                                      is_view=table in views)
        ddl.append(f"CREATE TABLE {table} ({', '.join(f'{n} {d}' for n, d, _ in cols)});")
    for (sql,) in conn.execute("SELECT sql FROM duckdb_views() WHERE NOT internal").fetchall():
        ddl.append(sql.strip().rstrip(";") + ";")
    return Schema(tables, "\n".join(ddl))


# --------------------------------------------------------------------------------------------
# PostgreSQL (optional: pip install "psycopg[binary]")
# --------------------------------------------------------------------------------------------


class PostgresEngine(Engine):
    """A PostgreSQL database by DSN. Every query runs in a read-only transaction with a
    ``statement_timeout``, rolled back afterwards. The test-suite stage is not available (it
    would need to create tables); pairs that execution cannot separate stay for the judge."""

    name = "postgresql"
    dialect = "postgres"
    supports_test_suite = False

    def __init__(self, dsn: str) -> None:
        import psycopg  # noqa: F401

        self.dsn = dsn
        self._schema: Schema | None = None

    def connect(self, limits: Limits | None = None) -> Any:
        import psycopg

        conn = psycopg.connect(self.dsn, autocommit=False,
                               options="-c default_transaction_read_only=on")
        return conn

    def describe(self) -> str:
        host = self.dsn.split("@")[-1]
        return f"the PostgreSQL database {host}"

    def fingerprint(self) -> str:
        return "postgresql:" + hashlib.sha256(self.dsn.encode()).hexdigest()[:16]

    def schema(self) -> Schema:
        if self._schema is None:
            conn = self.connect()
            try:
                with conn.transaction(force_rollback=True):
                    self._schema = _postgres_schema(conn)
            finally:
                conn.close()
        return self._schema

    def rows(self, table: str, limit: int) -> list[tuple[Any, ...]]:
        return []


def _postgres_schema(conn: Any) -> Schema:
    tables: dict[str, Table] = {}
    cols: dict[str, list[tuple[str, str, bool]]] = {}
    for table, column, dtype, nullable in conn.execute(
            "SELECT table_name, column_name, data_type, is_nullable FROM "
            "information_schema.columns WHERE table_schema = current_schema() "
            "ORDER BY table_name, ordinal_position").fetchall():
        cols.setdefault(table, []).append((column, dtype, nullable == "NO"))
    pks: dict[str, tuple[str, ...]] = {}
    for table, column in conn.execute(
            "SELECT tc.table_name, kcu.column_name FROM information_schema.table_constraints tc "
            "JOIN information_schema.key_column_usage kcu ON tc.constraint_name = "
            "kcu.constraint_name AND tc.table_schema = kcu.table_schema WHERE "
            "tc.constraint_type = 'PRIMARY KEY' AND tc.table_schema = current_schema() "
            "ORDER BY kcu.ordinal_position").fetchall():
        pks[table] = (*pks.get(table, ()), column)
    ddl = []
    for table, columns in cols.items():
        pk = pks.get(table, ())
        tables[table.lower()] = Table(
            table, [Column(n, d, notnull=nn or n in pk, pk=n in pk) for n, d, nn in columns], pk)
        ddl.append(f"CREATE TABLE {table} ({', '.join(f'{n} {d}' for n, d, _ in columns)});")
    return Schema(tables, "\n".join(ddl))


# --------------------------------------------------------------------------------------------
# Choosing an engine
# --------------------------------------------------------------------------------------------

_CACHE: dict[str, Engine] = {}
_CACHE_LOCK = threading.Lock()


def open_engine(database: Any, *, schema: str | None = None) -> Engine | None:
    """The engine for ``database``: a path to a SQLite file (the default), ``duckdb:PATH`` or
    a ``.duckdb``/``.ddb`` file, a ``postgresql://`` DSN, an :class:`Engine`, or the
    scenario's ``context.database`` (``path``, ``engine``, and ``dsn`` when it has one).
    Without a database, ``schema`` (``CREATE TABLE`` statements) gives an empty SQLite
    database with that schema; with neither, ``None``.

    Engines are cached per file (path, size, modification time), so the schema and the rows
    the test suite samples are read once per run.

    >>> open_engine(None) is None
    True
    >>> open_engine(None, schema="CREATE TABLE t (x INT)").schema().mapping()
    {'t': {'x': 'INT'}}
    """
    if isinstance(database, Engine):
        return database
    if database is None:
        return SQLiteEngine.from_ddl(schema) if schema else None
    kind = getattr(database, "engine", None)
    dsn = getattr(database, "dsn", None)
    path = getattr(database, "path", None)
    if kind is None:
        text = str(database)
        if text.startswith(("postgresql://", "postgres://")):
            kind, dsn = "postgresql", text
        elif text.startswith("duckdb:"):
            kind, path = "duckdb", text[len("duckdb:"):]
        elif text.endswith((".duckdb", ".ddb")):
            kind, path = "duckdb", text
        else:
            kind, path = "sqlite", text
    if kind in ("postgresql", "postgres"):
        if not dsn:
            raise ValueError("a PostgreSQL database needs a DSN (postgresql://user@host/db)")
        return PostgresEngine(dsn)
    if path is None or not Path(path).exists():
        raise FileNotFoundError(f"no database file at {path}")
    st = os.stat(path)
    key = f"{kind}:{Path(path).resolve()}:{st.st_size}:{st.st_mtime_ns}"
    with _CACHE_LOCK:
        engine = _CACHE.get(key)
        if engine is None:
            if kind == "duckdb":
                engine = DuckDBEngine(path)
            elif kind == "sqlite":
                engine = SQLiteEngine(path)
            else:
                raise ValueError(f"unknown database engine {kind!r}; use sqlite, duckdb or "
                                 "postgresql")
            if len(_CACHE) > 64:
                _CACHE.clear()
            _CACHE[key] = engine
    return engine
