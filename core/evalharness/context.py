"""The evaluation context handed to every evaluator hook: judge, database, corpus, pipeline."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evalharness.errors import InputError, ScenarioError

if TYPE_CHECKING:
    from evalharness.judge import Judge
    from evalharness.models import Trace
    from evalharness.pipeline import Pipeline


M = TypeVar("M", bound=BaseModel)


class Chunk(BaseModel):
    """One corpus record (a line of the corpus JSONL)."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(min_length=1)
    """Chunk id, as retrievers return it and cases label it."""

    text: str
    """The chunk's text."""

    title: str | None = None
    """Optional title."""


@dataclass
class Database:
    """The scenario's database: a SQLite or DuckDB file (``path``) or a PostgreSQL ``dsn``.

    :meth:`connect` and :meth:`schema` serve SQLite; evaluators that support other engines
    open them from ``engine``, ``path`` and ``dsn``.
    """

    path: Path | None
    engine: str = "sqlite"
    dialect: str = "sqlite"
    dsn: str | None = None

    def connect(self) -> sqlite3.Connection:
        """A read-only SQLite connection (``mode=ro``)."""
        if self.engine != "sqlite" or self.path is None:
            raise InputError(f"connect() opens SQLite databases; this one is {self.engine}")
        return sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)

    def schema(self) -> dict[str, dict[str, str]] | None:
        """``{table: {column: type}}`` of a SQLite database, the form sqlglot's optimizer
        takes; ``None`` for other engines."""
        if self.engine != "sqlite":
            return None
        with self.connect() as conn:
            tables = [r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table','view') "
                "AND name NOT LIKE 'sqlite_%' ORDER BY name")]
            return {
                t: {row[1]: (row[2] or "TEXT") for row in conn.execute(f'PRAGMA table_info("{t}")')}
                for t in tables
            }

    def sha256(self) -> str | None:
        """Checksum of the database file (``None`` for a server database)."""
        return hashlib.sha256(self.path.read_bytes()).hexdigest() if self.path else None


def build_sqlite(script: Path, target: Path) -> None:
    """Build a SQLite database at ``target`` from a SQL script (replacing any old file)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(target.suffix + ".building")
    tmp.unlink(missing_ok=True)
    conn = sqlite3.connect(tmp)
    try:
        conn.executescript(script.read_text(encoding="utf-8"))
        conn.commit()
    except sqlite3.Error as exc:
        conn.close()
        tmp.unlink(missing_ok=True)
        raise ScenarioError(
            f"{script}: the database build script failed: {exc}. Fix the script so that "
            "`sqlite3 new.db < script` runs without errors"
        ) from None
    conn.close()
    tmp.replace(target)


def load_corpus(path: Path) -> dict[str, Chunk]:
    """Read a corpus JSONL file; errors name the file and line."""
    return read_records(path, Chunk, key=lambda c: c.id, what="a corpus chunk",
                        example='{"id": "b001", "text": "..."}')


def read_records(path: Path, model: type[M], *, key: Callable[[M], str], what: str,
                 example: str, select: Callable[[dict], dict] = lambda r: r) -> dict[str, M]:
    """Validate each line of a JSONL file as ``model``, keyed by ``key``; ids must be unique.

    ``select`` picks the part of each line to validate. Errors name the file, the line and
    the field, and show a valid line.
    """
    out: dict[str, M] = {}
    first_line: dict[str, int] = {}
    for lineno, record in read_jsonl(path):
        body = select(record)
        try:
            item = model.model_validate(body)
        except ValidationError as exc:
            raise InputError(jsonl_error(path, lineno, exc, body, what, example)) from None
        k = key(item)
        if k in out:
            raise InputError(f"{path}, line {lineno}: duplicate id {k!r} (first on line "
                             f"{first_line[k]}); each {what.split()[-1]} must appear once")
        out[k] = item
        first_line[k] = lineno
    return out


def read_jsonl(path: Path, *, tolerate_torn_tail: bool = False):
    """Yield ``(line number, object)`` for each non-blank line; errors name file and line.

    With ``tolerate_torn_tail``, an unparsable *last* line (a write cut short by a kill) is
    skipped instead of raising.
    """
    with open(path, encoding="utf-8") as fh:
        lines = fh.readlines()
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if tolerate_torn_tail and lineno == len(lines) and not line.endswith("\n"):
                return
            raise InputError(
                f"{path}, line {lineno}: not valid JSON ({exc.msg} at column {exc.colno}); "
                "each line must be one JSON object"
            ) from None
        if not isinstance(record, dict):
            raise InputError(f"{path}, line {lineno}: expected a JSON object, got "
                             f"{type(record).__name__}")
        yield lineno, record


def jsonl_error(path: Path, lineno: int, exc: ValidationError, record: Any, what: str,
                example: str) -> str:
    from evalharness.locate import best_error, format_path, short

    loc, message, value = best_error(exc, record)
    got = "" if message == "required field is missing" else f" (got {short(value)})"
    return (f"{path}, line {lineno}, field `{format_path(loc)}`: {message}{got}. Each line "
            f"must be {what}, e.g. {example}; `evalharness schema` prints the full format")


@dataclass
class EvalContext:
    """What an evaluator may use besides the batch and its settings."""

    judge: Judge | None = None
    """The scenario's judge (``heuristic`` by default)."""

    database: Database | None = None
    """The scenario's database, if it has one."""

    corpus: dict[str, Chunk] = field(default_factory=dict)
    """Chunk id -> chunk, if the scenario has a corpus."""

    pipeline: Pipeline | None = None
    """The pipeline graph the components sit in."""

    component: str = ""
    """Name of the component being evaluated."""

    traces: dict[str, Trace] = field(default_factory=dict)
    """Case id -> the case's whole trace, for the cases of the batch (an evaluator of one
    component may need another's output, e.g. the generator's answer for context precision)."""

    extras: dict[str, Any] = field(default_factory=dict)
    """Room for plugins to share run-wide state."""
