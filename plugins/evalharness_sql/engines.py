"""Choosing a database engine: :func:`open_engine` picks one from what the caller has — a path
to a SQLite file, a ``duckdb:`` path or a ``.duckdb`` file, a ``postgresql://`` DSN, or the
scenario's ``context.database`` — and caches it per database file version.

This is also the face of the engines, which the rest of the plugin imports from here: the
:class:`Engine` base class (``engine_base.py``), one engine a module — SQLite (stdlib, the
default; ``engine_sqlite.py``), DuckDB and PostgreSQL (optional extras; ``engine_duckdb.py``,
``engine_postgres.py``) — and the schema as plain data (``schema.py``). An engine opens
sandboxed connections to the scenario's database, describes its schema (columns, types, keys)
and, for the test-suite stage, builds small databases with the same schema from rows the
cascade generates.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from evalharness_sql.engine_base import Engine
from evalharness_sql.engine_duckdb import DuckDBEngine
from evalharness_sql.engine_postgres import PostgresEngine
from evalharness_sql.engine_sqlite import SQLiteEngine
from evalharness_sql.schema import Column, ForeignKey, Schema, Table

__all__ = ["Column", "DuckDBEngine", "Engine", "ForeignKey", "PostgresEngine", "SQLiteEngine",
           "Schema", "Table", "open_engine"]


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
