"""What the readers of hosted tracing platforms (Langfuse, LangSmith) share: their records
streamed out of an export, ISO 8601 times, token counts and costs, JSON held in strings.

An export is JSON Lines (a record, or a page of records, per line), one JSON array of records,
or one object holding its records in a list (``{"data": [...], "meta": ...}``, ``{"runs":
[...]}``, a trace with its ``observations``) — pretty-printed or one 1 GB line, plain or
gzip-compressed. :func:`records` reads any of them a record at a time: a record is decoded
whole, the file never is, not even when it is one object (unlike
:mod:`~evalharness.spans.readers._jsonstream`, which holds a top-level object whole).
"""

from __future__ import annotations

import gzip
import io
import json
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import IO, Any

from evalharness.errors import InputError

CHUNK = 1 << 20
"""Characters read at a time."""
MAX_VALUE = 256 << 20
"""The largest single JSON value (a record, or one field of a huge top-level object) read."""
GZIP_MAGIC = b"\x1f\x8b"

_DECODER = json.JSONDecoder()
_BLANK = re.compile(r"[ \t\r\n]*")
_NUMBER_TAIL = re.compile(r"[0-9.eE+-]*")


@dataclass(slots=True)
class Item:
    """One record and where it was read."""

    value: Any
    line: int
    """The line the record starts on."""
    index: int | None = None
    """Its 1-based position in the list it was streamed from (``None``: a record of its own,
    a JSON Lines line)."""
    key: str | None = None
    """The list it came from (``data``, ``runs``, ``observations``…); ``None`` at top level."""
    owner: Any = None
    """The ``id`` of the record that held that list, when it has one (a trace for its
    ``observations``, a run for its ``child_runs``)."""

    def where(self, path: Path | str) -> str:
        """``file, line N`` (and ``, record K`` for a record of a list), for messages."""
        at = f"{path}, line {self.line}"
        return at if self.index is None else f"{at}, record {self.index}"


def head_text(head: bytes) -> str:
    """The start of a file as text, for ``sniff``: gunzipped when gzip-compressed, a byte-order
    mark dropped, a multi-byte character cut at the end tolerated.

    >>> head_text(b'\\xef\\xbb\\xbf{"id": 1}')
    '{"id": 1}'
    >>> head_text(gzip.compress(b'{"id": 1}\\n{"id": 2}')[:30]).startswith('{"id"')
    True
    """
    if head.startswith(GZIP_MAGIC):
        try:
            head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head)
        except zlib.error:
            return ""
    return head.decode("utf-8", errors="replace").removeprefix("\ufeff")


def records(path: Path, lists: tuple[str, ...]) -> Iterator[Item]:
    """Every record of a JSON or JSON Lines export, in file order.

    A top-level array yields its elements. An object whose key in ``lists`` holds an array
    yields that array's elements (recursively: a page of traces, each with its
    observations), and then the object itself without those arrays if it has an ``id`` (a
    trace holding its observations is a record too; a page envelope is not). Any other value
    is yielded as it is, for the reader to judge.
    """
    try:
        fh = _open(path)
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    with fh:
        yield from _Stream(fh, path, lists).top()


def _open(path: Path) -> IO[str]:
    with open(path, "rb") as raw:
        compressed = raw.read(2) == GZIP_MAGIC
    binary = gzip.open(path, "rb") if compressed else open(path, "rb")  # noqa: SIM115
    return io.TextIOWrapper(binary, encoding="utf-8-sig", errors="strict")


class _Stream:
    """A buffered text reader with JSON tokens on top: ``raw_decode`` on the buffer, reading
    more (geometrically) while the value at hand may be cut off at the buffer's end."""

    def __init__(self, fh: IO[str], path: Path, lists: tuple[str, ...]) -> None:
        self.fh, self.path, self.lists = fh, path, lists
        self.buf, self.pos, self.line, self.eof = "", 0, 1, False

    # -- reading

    def _read(self, size: int) -> bool:
        """Append up to ``size`` more characters (dropping what was consumed); False at EOF."""
        if self.eof:
            return False
        try:
            chunk = self.fh.read(size)
        except UnicodeDecodeError as exc:
            raise InputError(f"{self.path}, line {self.line}: not UTF-8 text ({exc.reason}); "
                             f"save the export as UTF-8") from exc
        except (OSError, EOFError, zlib.error) as exc:  # a truncated or corrupt .gz
            raise InputError(f"{self.path}: cannot be read past line {self.line} ({exc})") from exc
        if not chunk:
            self.eof = True
            return False
        self.buf = self.buf[self.pos:] + chunk
        self.pos = 0
        return True

    def _advance(self, to: int) -> None:
        self.line += self.buf.count("\n", self.pos, to)
        self.pos = to

    def _peek(self) -> str:
        """The next non-blank character (consumed up to it), ``""`` at the end of the file."""
        while True:
            self._advance(_BLANK.match(self.buf, self.pos).end())
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._read(CHUNK):
                return ""

    def _value(self) -> Any:
        """The JSON value at the current position (after blanks), consumed."""
        self._peek()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if self._maybe_cut(exc) and self._grow():
                    continue
                raise self._syntax(exc.msg, exc.pos) from None
            if (isinstance(value, int | float) and not self.eof
                    and _NUMBER_TAIL.fullmatch(self.buf, end) and self._grow()):
                continue  # a number at the buffer's end may go on (``3`` of ``3e-05``)
            self._advance(end)
            return value

    def _maybe_cut(self, exc: json.JSONDecodeError) -> bool:
        """Whether the error may only mean the value goes on past the buffer: the decoder
        stopped at its end, or in a string no line break ends (JSON strings hold none)."""
        if self.eof:
            return False
        return exc.pos >= len(self.buf) - 8 or (exc.msg.startswith("Unterminated string")
                                                 and self.buf.find("\n", exc.pos) < 0)

    def _grow(self) -> bool:
        pending = len(self.buf) - self.pos
        if pending > MAX_VALUE:
            raise InputError(f"{self.path}, line {self.line}: a JSON value of more than "
                             f"{MAX_VALUE >> 20} MB, or a string that never ends; a record "
                             f"this large is not a trace record")
        return self._read(max(CHUNK, pending))

    def _syntax(self, msg: str, pos: int) -> InputError:
        line = self.line + self.buf.count("\n", self.pos, pos)
        column = pos - (self.buf.rfind("\n", 0, pos) + 1) + 1
        return InputError(f"{self.path}, line {line}: not valid JSON ({msg} at column "
                          f"{column}); an export is JSON Lines, a JSON array or a JSON object "
                          f"holding its records under {' or '.join(self.lists)}")

    def _expect(self, chars: str, what: str) -> str:
        c = self._peek()
        if not c:
            raise self._syntax(f"the file ends inside a JSON value (expected {what})", self.pos)
        if c not in chars:
            raise self._syntax(f"expected {what}", self.pos)
        self._advance(self.pos + 1)
        return c

    # -- structure

    def top(self) -> Iterator[Item]:
        while c := self._peek():
            line = self.line
            if c == "[":
                yield from self._array(None, None)
            elif c == "{" and not self._one_line_value():
                yield from self._object(line)
            else:
                yield from _expand(self._value(), line, None, None, None, self.lists)

    def _one_line_value(self) -> bool:
        """Whether the object at hand looks like a JSON Lines record — its line, in the
        buffer, ends with ``}`` — to decode at once; otherwise (pretty-printed, or one line
        larger than the buffer) it is streamed member by member."""
        end = self.buf.find("\n", self.pos)
        if end < 0 and self._read(CHUNK):
            end = self.buf.find("\n", self.pos)
        if end < 0:
            if not self.eof:
                return False
            end = len(self.buf)
        last = end - 1
        while last > self.pos and self.buf[last] in " \t\r":
            last -= 1
        return self.buf[last] == "}"

    def _object(self, line: int) -> Iterator[Item]:
        """A top-level object too large (or too spread out) to decode at once."""
        self._advance(self.pos + 1)
        rest: dict[str, Any] = {}
        streamed = False
        if self._peek() == "}":
            self._advance(self.pos + 1)
        else:
            while True:
                if self._peek() != '"':
                    raise self._syntax("expected a property name in double quotes", self.pos)
                key = self._value()
                self._expect(":", "':'")
                if key in self.lists and self._peek() == "[":
                    streamed = True
                    yield from self._array(key, rest.get("id"))
                else:
                    rest[key] = self._value()
                if self._expect(",}", "',' or '}'") == "}":
                    break
        if not streamed or "id" in rest:
            yield from _expand(rest, line, None, None, None, self.lists)

    def _array(self, key: str | None, owner: Any) -> Iterator[Item]:
        self._advance(self.pos + 1)
        if self._peek() == "]":
            self._advance(self.pos + 1)
            return
        index = 0
        while True:
            index += 1
            self._peek()
            line = self.line
            yield from _expand(self._value(), line, index, key, owner, self.lists)
            if self._expect(",]", "',' or ']'") == "]":
                return


def _expand(value: Any, line: int, index: int | None, key: str | None, owner: Any,
            lists: tuple[str, ...]) -> Iterator[Item]:
    """A decoded value as records: its ``lists`` arrays' elements, then itself (see
    :func:`records`)."""
    if isinstance(value, dict):
        held = [k for k in lists if isinstance(value.get(k), list)]
        if held:
            rest = {k: v for k, v in value.items() if k not in held}
            for k in held:
                for i, element in enumerate(value[k], 1):
                    yield from _expand(element, line, i, k, rest.get("id"), lists)
            if "id" in rest:
                yield Item(rest, line, index, key, owner)
            return
    yield Item(value, line, index, key, owner)


# -- field parsers shared by the readers

_ISO = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9})\d*)?"
    r" ?(?:([Zz])|([+-])(\d{2})(?::?(\d{2}))?)?")
_EPOCH = date(1970, 1, 1).toordinal()


def iso_ns(text: Any) -> int:
    """Nanoseconds since the epoch of an ISO 8601 time; one without an offset is UTC (as
    Langfuse's blob export and LangSmith's API write them), ``+00`` is accepted (DuckDB's
    JSON of a Parquet export). ``ValueError`` otherwise.

    >>> iso_ns("1970-01-01T00:00:01.5Z")
    1500000000
    >>> iso_ns("2024-05-02 17:34:08.468") == iso_ns("2024-05-02T19:34:08.468+02:00")
    True
    >>> iso_ns("2024-05-02 17:34:08.468+00") == iso_ns("2024-05-02T17:34:08.468Z")
    True
    >>> iso_ns("2024-05-02T17:34:08.123456789Z") % 1_000_000_000
    123456789
    """
    m = _ISO.fullmatch(text.strip()) if isinstance(text, str) else None
    if m is None:
        raise ValueError("not an ISO 8601 time")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    if hour > 23 or minute > 59 or second > 60:
        raise ValueError("not an ISO 8601 time")
    days = date(year, month, day).toordinal() - _EPOCH  # ValueError on 2024-02-30
    offset = 0
    if m[9]:
        offset = (int(m[10]) * 60 + int(m[11] or 0)) * 60 * (1 if m[9] == "+" else -1)
    seconds = days * 86400 + hour * 3600 + minute * 60 + second - offset
    return seconds * 1_000_000_000 + int((m[7] or "").ljust(9, "0"))


def count(value: Any) -> int:
    """A token count: a non-negative int, an integral float, or digits in a string
    (ClickHouse quotes 64-bit integers in JSON). ``ValueError`` otherwise.

    >>> count("120"), count(7.0)
    (120, 7)
    """
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    raise ValueError("not a count")


def amount(value: Any) -> float:
    """A cost: a number, or a number in a string (decimals are often quoted)."""
    if isinstance(value, bool):
        raise ValueError("not a number")
    return float(value)


def decoded(value: Any) -> Any:
    """A JSON text of an object or array decoded; anything else as it is.

    >>> decoded('{"q": "hi"}'), decoded("hi"), decoded("[1")
    ({'q': 'hi'}, 'hi', '[1')
    """
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in ("{", "[") and text[-1:] in ("}", "]"):
            try:
                return json.loads(text)
            except ValueError:
                return value
    return value


def usage(input_: Any, output: Any, total: Any) -> dict[str, int]:
    """Token usage normalised to ``{input, output, total}``: absent counts left out, the
    total computed when both parts are known, nothing when every count is 0 (the API's
    zeros on a span that called no model). ``ValueError`` names the bad count.

    >>> usage("12", 5, None)
    {'input': 12, 'output': 5, 'total': 17}
    >>> usage(0, 0, 0)
    {}
    """
    out: dict[str, int] = {}
    for name, value in (("input", input_), ("output", output), ("total", total)):
        if value is not None:
            try:
                out[name] = count(value)
            except ValueError:
                raise ValueError(f"{name}: not a token count ({value!r})") from None
    if "total" not in out and "input" in out and "output" in out:
        out["total"] = out["input"] + out["output"]
    return out if any(out.values()) else {}
