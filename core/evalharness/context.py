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
from evalharness.models import SURROGATES

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


def sqlite_affinity(declared: str) -> str:
    """SQLite's type affinity of a declared column type (section 3.1 of "Datatypes In
    SQLite"): ``INTEGER``, ``TEXT``, ``BLOB``, ``REAL`` or ``NUMERIC``.

    >>> [sqlite_affinity(t) for t in ("INT", "varchar(20)", "", "DOUBLE", "date")]
    ['INTEGER', 'TEXT', 'BLOB', 'REAL', 'NUMERIC']
    """
    t = declared.upper()
    if "INT" in t:
        return "INTEGER"
    if any(k in t for k in ("CHAR", "CLOB", "TEXT", "STRING")):
        return "TEXT"
    if not t or "BLOB" in t:
        return "BLOB"
    if any(k in t for k in ("REAL", "FLOA", "DOUB")):
        return "REAL"
    return "NUMERIC"


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
                 example: str, select: Callable[[dict], dict] = lambda r: r,
                 reject_surrogates: bool = False) -> dict[str, M]:
    """Validate each line of a JSONL file as ``model``, keyed by ``key``; ids must be unique.

    ``select`` picks the part of each line to validate. Errors name the file, the line and
    the field, and show a valid line. With ``reject_surrogates``, a string holding an unpaired
    surrogate (``"\\ud800"``: valid JSON, not valid Unicode) is an error too.
    """
    out: dict[str, M] = {}
    first_line: dict[str, int] = {}
    for lineno, record in read_jsonl(path, reject_surrogates=reject_surrogates):
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


_BOMS = {b"\xff\xfe\x00\x00": "UTF-32", b"\x00\x00\xfe\xff": "UTF-32",
         b"\xff\xfe": "UTF-16", b"\xfe\xff": "UTF-16"}


def read_jsonl(path: Path, *, tolerate_torn_tail: bool = False, reject_surrogates: bool = False):
    """Yield ``(line number, object)`` for each non-blank line; errors name file and line.

    The file must be UTF-8 (a UTF-8 byte-order mark is skipped); UTF-16 or other bytes are an
    error naming the line and the byte. With ``tolerate_torn_tail``, an unparsable *last*
    line (a write cut short by a kill) is skipped instead of raising.
    """
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path} is a directory; give a JSONL file (one JSON object per line)")
    with open(path, "rb") as fh:
        lines = fh.read().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
        ended = True
    else:
        ended = False
    if lines:
        head = lines[0][:4]
        for bom, name in _BOMS.items():
            if head.startswith(bom):
                raise InputError(f"{path}: the file is {name} text (it starts with a {name} "
                                 "byte-order mark); save it as UTF-8")
        if head.startswith(b"\xef\xbb\xbf"):
            lines[0] = lines[0][3:]
    for lineno, raw in enumerate(lines, 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            hint = " (it looks like UTF-16: save it as UTF-8)" if b"\x00" in raw else ""
            raise InputError(f"{path}, line {lineno}: not UTF-8 text (byte 0x{raw[exc.start]:02x} "
                             f"at column {exc.start + 1}){hint}; save the file as UTF-8") from None
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if tolerate_torn_tail and lineno == len(lines) and not ended:
                return
            raise InputError(
                f"{path}, line {lineno}: not valid JSON ({exc.msg} at column {exc.colno}); "
                "each line must be one JSON object"
            ) from None
        if not isinstance(record, dict):
            raise InputError(f"{path}, line {lineno}: expected a JSON object, got "
                             f"{type(record).__name__}")
        if reject_surrogates and "\\u" in line:
            where = surrogate_at(record)
            if where is not None:
                raise InputError(f"{path}, line {lineno}, field `{where}`: the text holds an "
                                 "unpaired surrogate escape (\\ud800-\\udfff), which is not "
                                 "valid Unicode; write the character itself or remove it")
        yield lineno, record


def surrogate_at(value: Any, path: str = "") -> str | None:
    """The path of the first string in ``value`` holding an unpaired surrogate, or ``None``.

    >>> surrogate_at({"id": "a", "gold": {"answer": "caf\\ud800"}})
    'gold.answer'
    >>> surrogate_at({"question": "café"}) is None
    True
    """
    if isinstance(value, str):
        return (path or "(top level)") if SURROGATES.search(value) else None
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = ((f"[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    for k, v in items:
        sub = path + k if isinstance(k, str) and k.startswith("[") else \
            (f"{path}.{k}" if path else str(k))
        found = surrogate_at(k, sub) if isinstance(k, str) and SURROGATES.search(k) else None
        found = found or surrogate_at(v, sub)
        if found:
            return found
    return None


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

    budget_s: float | None = None
    """Seconds the evaluator being called may spend on each case of the batch (its
    ``budget_s`` setting in the scenario); ``None``: no budget. An evaluator that can stop
    early honours it per case and returns ``MetricValue.failed(reason)`` for a case whose
    budget ran out; the core's backstop abandons a call that overruns the whole batch's
    budget (``budget_s`` × batch size) and records every case of it as an error."""
