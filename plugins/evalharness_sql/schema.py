"""A database's schema as the SQL plugin sees it: tables, columns with their declared types
and nullability, keys and foreign keys, and the DDL an LLM judge reads. Plain data, below the
engines that read it from a database and the normalisation rules that qualify columns with
it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evalharness.context import sqlite_affinity


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
        ...                                  ("price", "REAL"), ("x", "BOOLEAN"), ("d", "DATE"),
        ...                                  ("start_date", "INT"))]
        ['int', 'date', 'real', 'bool', 'date', 'int']
        """
        t, name = self.type.upper(), self.name.lower()
        if "BOOL" in t:
            return "bool"
        if "DATE" in t or "TIME" in t:
            return "date"
        if any(k in t for k in ("INT", "SERIAL")):
            return "int"  # the declared type first: an INTEGER `start_date` holds integers
        if any(k in t for k in ("REAL", "FLOA", "DOUB", "NUMERIC", "DECIMAL", "NUMBER")):
            return "real"
        if name.endswith(("_at", "_date", "date", "_time")):
            return "date"
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
