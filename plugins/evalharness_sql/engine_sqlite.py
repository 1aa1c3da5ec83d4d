"""The SQLite engine (stdlib, the default): :class:`SQLiteEngine`, a database file opened
read-only or one built in memory from a DDL script, and its schema reader."""

from __future__ import annotations

import os
import sqlite3
import threading
from typing import Any

from evalharness_sql.engine_base import Engine, _number, _quote
from evalharness_sql.sandbox import Limits, SandboxedSQLite, lock_sqlite, open_sqlite_readonly
from evalharness_sql.schema import Column, ForeignKey, Schema, Table

__all__ = ["SQLiteEngine"]


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
        self._empty: sqlite3.Connection | None = None
        """An empty database with the schema, copied by :meth:`build`."""
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

    _reader = _trusted

    def _read_schema(self, conn: Any) -> Schema:
        return _sqlite_schema(conn)

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
        script = self._create_script()  # (outside the lock, which _trusted() takes)
        with self._lock:  # copying an empty database is ten times faster than creating it
            if self._empty is None:
                self._empty = sqlite3.connect(":memory:", check_same_thread=False)
                self._empty.executescript(script)
            self._empty.backup(conn)
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
