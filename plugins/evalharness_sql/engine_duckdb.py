"""The DuckDB engine (optional: ``pip install duckdb``): :class:`DuckDBEngine`, a database
file opened read-only with external access and extension loading off, whose queries and test
databases run in a sandbox process (:mod:`evalharness_sql.duckproc`), and its schema reader."""

from __future__ import annotations

import os
from typing import Any

from evalharness_sql.engine_base import Engine, _quote
from evalharness_sql.sandbox import Limits
from evalharness_sql.schema import Column, ForeignKey, Schema, Table

__all__ = ["DuckDBEngine"]

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

    def _reader(self) -> Any:
        return self._open(self.path, True)

    def _read_schema(self, conn: Any) -> Schema:
        return _duckdb_schema(conn)

    def connect(self, limits: Limits | None = None) -> Any:
        """A read-only connection in a sandbox process (:mod:`evalharness_sql.duckproc`)."""
        from evalharness_sql.duckproc import Connection

        return Connection(("open", self.path), limits)

    def describe(self) -> str:
        return f"the DuckDB database {self.path}"

    def fingerprint(self) -> str:
        st = os.stat(self.path)
        return f"duckdb:{self.path}:{st.st_size}:{st.st_mtime_ns}"

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
