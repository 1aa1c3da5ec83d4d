"""The evaluation context handed to every evaluator hook: judge, database, corpus, pipeline."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

import evalharness.jsonlimits as jsonlimits
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
        return file_sha256(self.path) if self.path else None


def file_sha256(path: str | Path) -> str:
    """The sha256 of a file's bytes, read in blocks (a large file is never held whole).

    >>> file_sha256("/dev/null")[:16]
    'e3b0c44298fc1c14'
    """
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


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

MAX_LINE_BYTES = 256 << 20
"""Longest line of a JSONL input, in bytes (its newline not counted; the span readers' cap on
one value): a longer line is an error naming the file and the line, raised once this many
bytes are read, before the line is held whole."""

NOT_REGULAR_HINT = ("give a file saved on disk (write what the pipe or device gives to a "
                    "file first): an input is read more than once")
"""What to give instead of a named pipe or a device."""

NOT_REGULAR = "not a regular file"
"""How :func:`not_a_file` ends what it says of a pipe, a device or a socket."""

_KINDS = ((stat.S_ISFIFO, "is a named pipe (FIFO)"), (stat.S_ISCHR, "is a character device"),
          (stat.S_ISBLK, "is a block device"), (stat.S_ISSOCK, "is a socket"))


def not_a_file(path: str | Path) -> str | None:
    """Why ``path`` cannot be read as an input file (``does not exist``, ``is a directory``,
    ``is a named pipe (FIFO), not a regular file``, ``is a character device, not a regular
    file`` ..., ``cannot be read (...)``), or ``None`` for a regular file (a symbolic link is
    followed). Nothing is opened: opening a pipe blocks until a writer comes, and a device
    like ``/dev/zero`` never ends.

    >>> not_a_file("/dev/null"), not_a_file("/no/such/file"), not_a_file("/")
    ('is a character device, not a regular file', 'does not exist', 'is a directory')
    """
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return "does not exist"
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    return _kind(mode)


def file_hint(problem: str) -> str:
    """What to give instead, for what :func:`not_a_file` said.

    >>> file_hint(not_a_file("/dev/null")) == NOT_REGULAR_HINT
    True
    """
    if problem.endswith(NOT_REGULAR):
        return NOT_REGULAR_HINT
    return "give a file this process may read"


def _kind(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a directory"
    kind = next((what for test, what in _KINDS if test(mode)), None)
    return f"{kind}, {NOT_REGULAR}" if kind else f"is {NOT_REGULAR}"


def open_regular(path: Path, what: str):
    """``path`` opened for binary reading, or :class:`InputError` when it is not a regular
    file (``what`` says what to give). A named pipe is opened without blocking and refused,
    so a path swapped for one after it was checked cannot hang the run either."""
    problem = not_a_file(path)
    if problem is None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            problem = "does not exist"
        else:
            problem = _kind(os.fstat(fd).st_mode)
            if problem is None:
                os.set_blocking(fd, True)
                return os.fdopen(fd, "rb")
            os.close(fd)
    if problem == "is a directory":
        raise InputError(f"{path} is a directory; give {what}")
    if problem == "does not exist":
        raise InputError(f"{path} does not exist; give {what}")
    raise InputError(f"{path} {problem}; {file_hint(problem)}")


def read_jsonl(path: Path, *, tolerate_torn_tail: bool = False,
               reject_surrogates: bool = False) -> Iterator[tuple[int, dict]]:
    """Yield ``(line number, object)`` for each non-blank line; errors name file and line.

    The file is read line by line, each line at most :data:`MAX_LINE_BYTES`; it must be a
    regular file (a named pipe or a device is an error saying so). It must be UTF-8 (a UTF-8
    byte-order mark is skipped); UTF-16 or other bytes are an error naming the line and the
    byte. Values nested deeper than :data:`evalharness.jsonlimits.MAX_DEPTH` are an error
    naming the line and the field. With ``tolerate_torn_tail``, an unparsable *last* line
    without its newline (a write cut short by a kill) is skipped instead of raising.
    """
    path = Path(path)
    with open_regular(path, "a JSONL file (one JSON object per line)") as fh:
        lineno = 0
        while True:
            cap = MAX_LINE_BYTES
            raw = fh.readline(cap + 1)
            if not raw:
                return
            lineno += 1
            ended = raw.endswith(b"\n")  # only the last line can lack its newline
            if not ended and len(raw) > cap:
                raise InputError(f"{path}, line {lineno}: longer than {cap:,} bytes (the "
                                 "limit of one line); a case, chunk or trace is far smaller: "
                                 "is this the right file?")
            if lineno == 1:
                raw = _skip_bom(path, raw)
            record = _parse_line(path, lineno, raw, torn=tolerate_torn_tail and not ended)
            if record is _TORN:
                return
            if record is None:
                continue
            if reject_surrogates and b"\\u" in raw:
                where = surrogate_at(record)
                if where is not None:
                    raise InputError(f"{path}, line {lineno}, field `{where}`: the text holds "
                                     "an unpaired surrogate escape (\\ud800-\\udfff), which "
                                     "is not valid Unicode; write the character itself or "
                                     "remove it")
            yield lineno, record


_TORN = object()


def _skip_bom(path: Path, raw: bytes) -> bytes:
    """The first line without a UTF-8 byte-order mark; an error for a UTF-16 or UTF-32 one."""
    head = raw[:4]
    for bom, name in _BOMS.items():
        if head.startswith(bom):
            raise InputError(f"{path}: the file is {name} text (it starts with a {name} "
                             "byte-order mark); save it as UTF-8")
    return raw[3:] if head.startswith(b"\xef\xbb\xbf") else raw


def _parse_line(path: Path, lineno: int, raw: bytes, *, torn: bool) -> Any:
    """One line's object; ``None`` for a blank line, ``_TORN`` for an unparsable line that
    ``torn`` allows to skip; an error naming the line otherwise."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        hint = " (it looks like UTF-16: save it as UTF-8)" if b"\x00" in raw else ""
        raise InputError(f"{path}, line {lineno}: not UTF-8 text (byte 0x{raw[exc.start]:02x} "
                         f"at column {exc.start + 1}){hint}; save the file as UTF-8") from None
    if not line.strip():
        return None
    try:
        record = jsonlimits.loads(line)
    except jsonlimits.TooDeep as exc:
        if torn:
            return _TORN
        raise InputError(
            f"{path}, line {lineno}, field `{json_field_at(line, exc.pos)}`: arrays and "
            f"objects nested more than {exc.max_depth} deep (the limit; at column "
            f"{exc.colno}); a case, chunk or trace nests a handful of levels") from None
    except json.JSONDecodeError as exc:
        if torn:
            return _TORN
        raise InputError(
            f"{path}, line {lineno}: not valid JSON ({exc.msg} at column {exc.colno}); "
            "each line must be one JSON object"
        ) from None
    if not isinstance(record, dict):
        raise InputError(f"{path}, line {lineno}: expected a JSON object, got "
                         f"{type(record).__name__}")
    return record


_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{},:]', re.S)


def json_field_at(text: str, pos: int, parts: int = 5) -> str:
    """The field path (``a.b[1]``) of the value that starts at ``pos`` in the JSON text
    ``text``, read from the brackets, keys and commas before it; past ``parts`` parts, the
    rest is ``…``.

    >>> text = '{"a": {"b": [1, [2, [3]]]}, "c": 4}'
    >>> json_field_at(text, text.index("[3]")), json_field_at(text, text.index("4"))
    ('a.b[1][1]', 'c')
    >>> json_field_at("[" * 10, 9, parts=3)
    '[0][0][0]…'
    """
    from evalharness.locate import short_path

    path: list[str | int | None] = []  # per open container: its key (None: not yet) or index
    key_next = False
    for m in _JSON_TOKEN.finditer(text, 0, pos):
        token = m.group()
        if token in "{[":
            path.append(None if token == "{" else 0)
            key_next = token == "{"
        elif token in "}]":
            if path:
                path.pop()
        elif token == ",":
            if path and isinstance(path[-1], int):
                path[-1] += 1
            key_next = bool(path) and not isinstance(path[-1], int)
        elif token == ":":
            key_next = False
        elif key_next and path:
            path[-1] = json.loads(token)
    return short_path([p for p in path if p is not None], parts)


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
