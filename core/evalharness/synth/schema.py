"""What the SQL case generator knows of a database: its tables, their columns and declared
types, keys and foreign keys, row counts, and how to name each in plain English.

Read from SQLite's catalogue (``PRAGMA table_info`` / ``foreign_key_list`` / ``index_list``)
over a read-only connection; nothing is assumed about the schema beyond what it declares.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field

from evalharness.context import sqlite_affinity

_ID_NAME = re.compile(r"(^id$|_id$|^id_|uuid|guid)", re.IGNORECASE)
_LABEL_NAMES = ("name", "title", "label", "full_name", "display_name")
_DATE_NAME = re.compile(r"(_at$|_on$|date|time|^created|^updated|day$)", re.IGNORECASE)
_CATEGORICAL_MAX = 30
"""A text column with at most this many distinct values (and values repeating) is treated as a
category a question can filter on."""


@dataclass
class Column:
    name: str
    declared: str
    """The declared type, as written (``VARCHAR(20)``, ``REAL``, empty)."""
    pk: bool = False
    not_null: bool = False
    unique: bool = False
    distinct: int = 0
    nulls: int = 0

    @property
    def affinity(self) -> str:
        """SQLite's type affinity of the declared type, lower case: ``integer``, ``text``,
        ``real``, ``numeric`` or ``blob``."""
        return sqlite_affinity(self.declared).lower()

    @property
    def is_id(self) -> bool:
        return self.pk or bool(_ID_NAME.search(self.name))

    @property
    def is_date(self) -> bool:
        return bool(_DATE_NAME.search(self.name)) or "DATE" in self.declared.upper()

    @property
    def words(self) -> str:
        return humanise(self.name)


@dataclass
class ForeignKey:
    column: str
    table: str
    """The referenced (parent) table."""
    ref: str
    """The referenced column."""


@dataclass
class Table:
    name: str
    columns: list[Column]
    rows: int
    foreign_keys: list[ForeignKey] = field(default_factory=list)

    def column(self, name: str) -> Column:
        return next(c for c in self.columns if c.name == name)

    @property
    def pk(self) -> list[Column]:
        return [c for c in self.columns if c.pk]

    @property
    def label(self) -> Column | None:
        """The column that names a row in an answer: ``name``/``title``-like text first, then
        the text column with the most distinct values; ``None`` if the table has none."""
        texts = [c for c in self.columns if c.affinity == "text" and not c.is_id
                 and not c.is_date]
        for wanted in _LABEL_NAMES:
            for c in texts:
                if c.name.lower() == wanted or c.name.lower().endswith("_" + wanted):
                    return c
        texts = [c for c in texts if c.distinct >= max(2, self.rows // 2)]
        return max(texts, key=lambda c: c.distinct, default=None)

    @property
    def measures(self) -> list[Column]:
        """Numeric columns worth aggregating (not keys, not dates)."""
        fk = {f.column for f in self.foreign_keys}
        return [c for c in self.columns if c.affinity in ("integer", "real", "numeric")
                and not c.is_id and c.name not in fk and not c.is_date and c.distinct > 1]

    @property
    def categories(self) -> list[Column]:
        """Text columns whose values repeat: what a question filters or groups on."""
        label = self.label
        return [c for c in self.columns if c.affinity == "text" and not c.is_id
                and not c.is_date and c is not label
                and 2 <= c.distinct <= _CATEGORICAL_MAX and c.distinct < self.rows - c.nulls]

    @property
    def nullable(self) -> list[Column]:
        """Columns that hold at least one NULL (and at least one value)."""
        return [c for c in self.columns if 0 < c.nulls < self.rows and not c.is_id]

    @property
    def words(self) -> str:
        return humanise(self.name)

    @property
    def noun(self) -> str:
        """One row of the table, in words: ``order_items`` -> ``order item``."""
        return singular(self.words)


@dataclass
class Schema:
    tables: dict[str, Table]

    def skip(self, names) -> None:
        """Leave tables out: no question reads them, and no join goes through them."""
        for name in names:
            self.tables.pop(name, None)
        for table in self.tables.values():
            table.foreign_keys = [fk for fk in table.foreign_keys if fk.table in self.tables]

    def children(self, parent: str) -> list[tuple[Table, ForeignKey]]:
        """Tables with a foreign key into ``parent``, with that key."""
        return [(t, fk) for t in self.tables.values() for fk in t.foreign_keys
                if fk.table == parent]


def quote(name: str) -> str:
    """A SQL identifier, quoted only when it needs to be."""
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) and name.upper() not in _RESERVED:
        return name
    return '"' + name.replace('"', '""') + '"'


_RESERVED = frozenset("""SELECT FROM WHERE GROUP ORDER BY LIMIT JOIN ON AS AND OR NOT NULL IN IS
TABLE INDEX KEY PRIMARY FOREIGN REFERENCES VALUES INSERT UPDATE DELETE CASE WHEN THEN ELSE END
HAVING UNION ALL DISTINCT LIKE BETWEEN EXISTS CHECK DEFAULT CREATE DROP ALTER""".split())


def humanise(identifier: str) -> str:
    """``productSizes`` / ``product_sizes`` -> ``product sizes``."""
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", identifier).replace("_", " ").replace("-", " ")
    return " ".join(words.lower().split())


def singular(words: str) -> str:
    """The last word made singular, by the common English endings (``categories`` ->
    ``category``, ``boxes`` -> ``box``, ``status`` stays)."""
    head, _, last = words.rpartition(" ")
    if last.endswith("ies") and len(last) > 4:
        last = last[:-3] + "y"
    elif last.endswith(("sses", "xes", "ches", "shes")):
        last = last[:-2]
    elif last.endswith("s") and not last.endswith(("ss", "us", "is")):
        last = last[:-1]
    return f"{head} {last}".strip()


def plural(words: str) -> str:
    """The last word made plural (``category`` -> ``categories``, ``status`` ->
    ``statuses``)."""
    head, _, last = words.rpartition(" ")
    if last.endswith("y") and last[-2:-1] not in "aeiou":
        last = last[:-1] + "ies"
    elif last.endswith(("s", "x", "ch", "sh")):
        last = last + "es"
    else:
        last = last + "s"
    return f"{head} {last}".strip()


def read_schema(conn: sqlite3.Connection) -> Schema:
    """The schema of a SQLite database, with per-column distinct and NULL counts."""
    names = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "ORDER BY name")]
    tables: dict[str, Table] = {}
    for name in names:
        q = quote(name)
        unique: set[str] = set()
        for index in conn.execute(f"PRAGMA index_list({q})").fetchall():
            if index[2]:  # unique
                cols = [r[2] for r in conn.execute(f"PRAGMA index_info({quote(index[1])})")]
                if len(cols) == 1:
                    unique.add(cols[0])
        info = conn.execute(f"PRAGMA table_info({q})").fetchall()
        pk_count = sum(1 for r in info if r[5])
        columns = [Column(name=r[1], declared=r[2] or "", pk=bool(r[5]), not_null=bool(r[3]),
                          unique=r[1] in unique or (bool(r[5]) and pk_count == 1))
                   for r in info]
        rows = conn.execute(f"SELECT COUNT(*) FROM {q}").fetchone()[0]
        if columns and rows:
            parts = ", ".join(f"COUNT(DISTINCT {quote(c.name)}), "
                              f"SUM({quote(c.name)} IS NULL)" for c in columns)
            counts = conn.execute(f"SELECT {parts} FROM {q}").fetchone()
            for i, c in enumerate(columns):
                c.distinct, c.nulls = int(counts[2 * i] or 0), int(counts[2 * i + 1] or 0)
        fks = [ForeignKey(column=r[3], table=r[2], ref=r[4] or "")
               for r in conn.execute(f"PRAGMA foreign_key_list({q})").fetchall()]
        tables[name] = Table(name=name, columns=columns, rows=rows, foreign_keys=fks)
    for table in tables.values():  # `REFERENCES parent` without a column: the parent's key
        for fk in table.foreign_keys:
            parent = tables.get(fk.table)
            if not fk.ref and parent is not None and len(parent.pk) == 1:
                fk.ref = parent.pk[0].name
        table.foreign_keys = [fk for fk in table.foreign_keys
                              if fk.table in tables and fk.ref]
    return Schema(tables)
