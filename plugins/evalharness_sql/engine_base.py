"""What every database engine shares: the :class:`Engine` base class (the interface the
cascade uses to connect to a database, read its schema and rows, and build test databases)
and the helpers more than one engine uses. Each engine is in its own module
(``engine_sqlite.py``, ``engine_duckdb.py``, ``engine_postgres.py``); :func:`open_engine`,
which picks one, is in ``engines.py``.
"""

from __future__ import annotations

from typing import Any

from evalharness_sql.sandbox import Limits
from evalharness_sql.schema import Schema

__all__ = ["Engine"]


class Engine:
    """A database the cascade executes queries on. Subclasses implement one engine each."""

    name = "engine"
    dialect = "sqlite"
    supports_test_suite = False

    def connect(self, limits: Limits | None = None) -> Any:
        """A sandboxed, read-only connection to the database (the caller closes it), made for
        queries held to ``limits`` (:class:`~evalharness_sql.sandbox.Limits`)."""
        raise NotImplementedError

    _schema: Schema | None = None
    _rows: dict[tuple[str, int], list[tuple[Any, ...]]]

    def schema(self) -> Schema:
        """The database's schema, read once (through :meth:`_reader`, by default)."""
        if self._schema is None:
            conn = self._reader()
            try:
                self._schema = self._read_schema(conn)
            finally:
                conn.close()
        return self._schema

    def rows(self, table: str, limit: int) -> list[tuple[Any, ...]]:
        """Up to ``limit`` rows of a base table, in storage order (read once per table and
        limit, through :meth:`_reader`, by default)."""
        key = (table.lower(), limit)
        if key not in self._rows:
            t = self.schema().table(table)
            if t is None or t.is_view:
                return []
            conn = self._reader()
            try:
                cols = ", ".join(_quote(c.name) for c in t.columns)
                self._rows[key] = [tuple(r) for r in conn.execute(
                    f"SELECT {cols} FROM {_quote(t.name)} LIMIT {int(limit)}").fetchall()]
            finally:
                conn.close()
        return self._rows[key]

    def _reader(self) -> Any:
        """A trusted read-only connection (the caller closes it), for an engine whose
        database this process opens itself (SQLite, DuckDB); an engine that reads otherwise
        overrides :meth:`schema` and :meth:`rows`."""
        raise NotImplementedError

    def _read_schema(self, conn: Any) -> Schema:
        raise NotImplementedError

    def build(self, data: dict[str, list[tuple[Any, ...]]], limits: Limits | None = None) -> Any:
        """A sandboxed connection to a new in-memory database with this schema holding
        ``data`` (``{table: rows}``, values in column order; missing tables stay empty)."""
        raise NotImplementedError(f"{self.name} cannot build test databases")

    def describe(self) -> str:
        return self.name

    def fingerprint(self) -> str:
        return self.describe()


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _number(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        return float(text)
