"""The records of a JSON trace file, one at a time and never the whole file: JSON Lines,
values concatenated or pretty-printed one after another, one top-level array, or objects
holding their records in named lists (``{"data": [...]}``, ``{"resourceSpans": [...]}``) —
plain or gzip-compressed.

Every trace reader with a JSON format reads through :func:`records`. A value that ends
within a read buffer (about a megabyte) of where it starts is decoded at once; an object
that goes on past it is read member by member and its named lists element by element, at
any depth. So a 1 GB export of JSON lines, one 1 GB line of ``{"data": [...]}`` or one
pretty-printed OTLP request of 1 GB costs what its largest record costs, not the file.

Two limits hold whatever the file: no value nests arrays and objects more than
:data:`evalharness.jsonlimits.MAX_DEPTH` deep (counted from the top of the file, streamed
levels included), and the text of the value at hand never takes more than :data:`MAX_VALUE`
bytes of memory — checked a chunk at a time as it is read (decompressed), before it is
joined into the buffer, so a small gzip file holding one huge string is refused at the cap.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import sys
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import evalharness.jsonlimits as jsonlimits
from evalharness.errors import InputError

CHUNK = 1 << 20
"""Characters read at a time; a value longer than this is streamed, or the buffer grows."""
MAX_VALUE = 256 << 20
"""The most bytes of memory the text of one JSON value decoded at once (a record, or a member
of a streamed one) may take: 1, 2 or 4 bytes a character, as Python holds a string at the
width of its widest character."""
SNIFF_UNPACKED = 1 << 20
"""The most bytes :func:`unpacked` gunzips from the start of a file, for ``sniff``."""
GZIP_MAGIC = b"\x1f\x8b"

Lists = Mapping[str, "Lists"]
"""Which lists hold records: a key of an object, mapped to the lists of its elements."""
NONE: Lists = {}

_BLANK = re.compile(r"[ \t\r\n]*")
_NUMBER_TAIL = re.compile(r"[0-9.eE+-]*")
_BASE = {w: sys.getsizeof(c * 8) - 8 * w for w, c in ((1, "\xff"), (2, "\u0100"),
                                                      (4, "\U00010000"))}
"""A string's size without its characters, by bytes a character (not ASCII)."""


def width(text: str) -> int:
    """Bytes each character of ``text`` takes in memory: 1, 2 or 4 (CPython stores a string
    at the width of its widest character); told from its size, without reading it.

    >>> width("abc"), width("caf\u00e9"), width("\u0101"), width("a\U0001f600")
    (1, 1, 2, 4)
    """
    if text.isascii():
        return 1
    size = sys.getsizeof(text)
    return next((w for w, base in _BASE.items() if size == base + len(text) * w), 4)


def anywhere(*keys: str) -> Lists:
    """Lists named ``keys`` at any depth: an element of one may hold any of them again.

    >>> spec = anywhere("runs", "child_runs")
    >>> spec["runs"]["child_runs"] is spec
    True
    """
    spec: dict[str, Any] = {}
    for key in keys:
        spec[key] = spec
    return spec


@dataclass(slots=True)
class Item:
    """One record and where it was read."""

    value: Any
    line: int
    """The line its record starts on: the top-level value's, or that of the element of a
    top-level list (the array's, or a list of the top-level object) it is part of."""
    index: int | None = None
    """Its 1-based position in the list it was read from (``None``: a top-level value)."""
    key: str | None = None
    """The list it came from (``data``, ``spans``…); ``None`` for the top level."""
    parent: Item | None = None
    """The object that holds that list, without its lists (members that follow a list too
    long for the read buffer are not in it yet when the list's elements are read)."""

    @property
    def owner(self) -> Any:
        """The ``id`` of :attr:`parent` (a trace for its ``observations``), if it has one."""
        held = self.parent.value if self.parent is not None else None
        return held.get("id") if isinstance(held, dict) else None

    @property
    def field(self) -> str:
        """Its path from the top-level value, for messages: ``resourceSpans[0].spans[2]``."""
        steps = []
        item: Item | None = self
        while item is not None and item.key is not None:
            steps.append(f"{item.key}[{item.index - 1}]" if item.index else item.key)
            item = item.parent
        return ".".join(reversed(steps))

    def where(self, path: Path | str) -> str:
        """``file, line N`` (and ``, record K`` for a record of a list), for messages."""
        at = f"{path}, line {self.line}"
        return at if self.index is None else f"{at}, record {self.index}"


def unpacked(head: bytes) -> bytes:
    """The start of a file, gunzipped when gzip-compressed (as far as it goes), for ``sniff``.

    >>> unpacked(gzip.compress(b'{"id": 1}\\n{"id": 2}')[:30]).startswith(b'{"id"')
    True
    """
    if head.startswith(GZIP_MAGIC):
        try:  # at most SNIFF_UNPACKED bytes: a little gzip can hold a thousand times more
            return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, SNIFF_UNPACKED)
        except zlib.error:
            return b""
    return head


def head_text(head: bytes) -> str:
    """The start of a file as text, for ``sniff``: gunzipped, a byte-order mark dropped, a
    multi-byte character cut at the end tolerated.

    >>> head_text(b'\\xef\\xbb\\xbf{"id": 1}')
    '{"id": 1}'
    """
    return unpacked(head).decode("utf-8", errors="replace").removeprefix("\ufeff")


def records(path: Path, lists: Lists = NONE, *, skip_text: bool = False) -> Iterator[Item]:
    """Every record of a JSON or JSON Lines file, in file order.

    A top-level array yields its elements. An object with a key of ``lists`` holding an
    array yields that array's elements (each with the lists ``lists[key]`` names inside
    it), and then itself without those arrays if it has an ``id`` (a trace holding its
    observations is a record too; a page envelope is not). Anything else is yielded as it
    is, for the reader to judge.

    ``skip_text``: lines between values that are not JSON (an application's own prints in
    a captured stdout) are skipped rather than an error.

    >>> import tempfile, os
    >>> with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
    ...     _ = f.write('{"a": 1}\\n{\\n  "b": [1,\\n 2]\\n}\\n[{"c": 3}, {"d": 4}]\\n')
    >>> [(i.line, i.value) for i in records(Path(f.name))]
    [(1, {'a': 1}), (2, {'b': [1, 2]}), (6, {'c': 3}), (6, {'d': 4})]
    >>> [(i.field, i.value) for i in records(Path(f.name), {"b": {}})]
    [('', {'a': 1}), ('b[0]', 1), ('b[1]', 2), ('', {'c': 3}), ('', {'d': 4})]
    >>> os.unlink(f.name)
    """
    try:
        fh = _open(path)
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    with fh:
        yield from _Stream(fh, path, lists, skip_text).top()


def _open(path: Path) -> IO[str]:
    with open(path, "rb") as raw:
        compressed = raw.read(2) == GZIP_MAGIC
    binary = gzip.open(path, "rb") if compressed else open(path, "rb")  # noqa: SIM115
    return io.TextIOWrapper(binary, encoding="utf-8-sig", errors="strict")


class _Cut(Exception):
    """The value at hand goes on past the read buffer."""


class _Stream:
    """A buffered text reader with JSON on top: ``raw_decode`` on the buffer, and objects
    too long for it read member by member."""

    def __init__(self, fh: IO[str], path: Path, lists: Lists, skip_text: bool) -> None:
        self.fh, self.path, self.lists, self.skip_text = fh, path, lists, skip_text
        self.buf, self.pos, self.line, self.eof = "", 0, 1, False
        self.depth = 0
        """Arrays and objects open around the position (those being read member by member
        or element by element)."""

    # -- reading

    def _read(self, size: int) -> bool:
        """Append up to ``size`` more characters, a chunk at a time, dropping what was
        consumed; False at EOF. The text at hand never takes more than :data:`MAX_VALUE`
        bytes: a read stops at the cap, and more wanted past it is an error — before the
        chunk that would pass it is joined."""
        if self.eof:
            return False
        held = self.buf[self.pos:]
        self.buf, self.pos = held, 0
        wide = width(held)
        pieces: list[str] = []
        got = 0
        while got < size:
            room = MAX_VALUE // wide - len(held) - got  # characters that still fit
            if room <= 0:
                raise self._too_large()
            try:
                piece = self.fh.read(min(CHUNK, size - got, room))
            except UnicodeDecodeError as exc:
                raise InputError(f"{self.path}, line {self.line}: not UTF-8 text "
                                 f"({exc.reason}); save the file as UTF-8") from exc
            except (OSError, EOFError, zlib.error) as exc:  # a truncated or corrupt .gz
                raise InputError(f"{self.path}: cannot be read past line {self.line} "
                                 f"({exc})") from exc
            if not piece:
                self.eof = True
                break
            pieces.append(piece)
            got += len(piece)
            wide = max(wide, width(piece))
        if (len(held) + got) * wide > MAX_VALUE:
            raise self._too_large()
        if not pieces:
            return False
        self.buf = "".join([held, *pieces])
        return True

    def _too_large(self) -> InputError:
        return InputError(f"{self.path}, line {self.line}: a JSON value of more than "
                          f"{MAX_VALUE >> 20} MB as text (the limit), or a string that never "
                          f"ends; a value this large is not a trace record")

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

    def _after(self, offset: int) -> str:
        """The first non-blank character ``offset`` characters on, not consumed; ``""`` at
        the end of the file or past a chunk of blanks (nothing is consumed, so the buffer
        would grow with them)."""
        while True:
            at = _BLANK.match(self.buf, self.pos + offset).end()
            if at < len(self.buf):
                return self.buf[at]
            if at - self.pos > CHUNK or not self._read(CHUNK):
                return ""

    def _value(self, stream: bool = False) -> Any:
        """The JSON value at the current position (after blanks), consumed; with ``stream``,
        :class:`_Cut` (nothing consumed) when it does not end within a buffer's length."""
        self._peek()
        start = self.line
        while True:
            try:
                value, end = jsonlimits.raw_decode(
                    self.buf, self.pos, max_depth=jsonlimits.MAX_DEPTH - self.depth)
            except jsonlimits.TooDeep as exc:
                raise self._too_deep(exc.pos, start) from None
            except json.JSONDecodeError as exc:
                if self._maybe_cut(exc):
                    if len(self.buf) - self.pos < CHUNK and self._read(CHUNK):
                        continue
                    if stream:
                        raise _Cut from None
                    if self._grow():
                        continue
                raise self._syntax(exc.msg, exc.pos, start) from None
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
        """Read as much again as the value at hand holds so far (up to the cap)."""
        return self._read(max(CHUNK, len(self.buf) - self.pos))

    def _at(self, pos: int, start: int | None) -> tuple[int, str]:
        """The line where the value at hand starts, and ``column C`` (``line L, column C``
        when elsewhere) of ``pos`` in the buffer."""
        line = self.line + self.buf.count("\n", self.pos, pos)
        column = pos - (self.buf.rfind("\n", 0, pos) + 1) + 1
        at = f"column {column}" if start in (None, line) else f"line {line}, column {column}"
        return start or line, at

    def _syntax(self, msg: str, pos: int, start: int | None = None) -> InputError:
        line, at = self._at(pos, start)
        under = f", or objects holding them under {' or '.join(self.lists)}" if self.lists else ""
        return InputError(f"{self.path}, line {line}: not valid JSON ({msg} at {at}); "
                          f"expected JSON Lines, JSON values one after another, or a JSON "
                          f"array of records{under}")

    def _too_deep(self, pos: int, start: int | None = None) -> InputError:
        line, at = self._at(pos, start)
        return InputError(f"{self.path}, line {line}: arrays and objects nested more than "
                          f"{jsonlimits.MAX_DEPTH} deep (the limit; counted from the top of "
                          f"the file) at {at}; a trace record nests a handful of levels")

    def _enter(self) -> None:
        """One more array or object read a piece at a time; past the nesting limit, an
        error (the streaming reader recurses once per level)."""
        self.depth += 1
        if self.depth > jsonlimits.MAX_DEPTH:
            raise self._too_deep(self.pos)

    def _expect(self, chars: str, what: str) -> str:
        c = self._peek()
        if not c:
            raise self._syntax(f"the file ends inside a JSON value, expecting {what},",
                               self.pos)
        if c not in chars:
            raise self._syntax(f"expected {what}", self.pos)
        self._advance(self.pos + 1)
        return c

    def _skip_line(self) -> None:
        while (end := self.buf.find("\n", self.pos)) < 0:
            self.pos = len(self.buf)
            if not self._read(CHUNK):
                return
        self._advance(end + 1)

    # -- structure

    def top(self) -> Iterator[Item]:
        while c := self._peek():
            if self.skip_text and not (c == "{" or c == "[" and self._after(1) in ("{", "[", "]")):
                self._skip_line()
            elif c == "[":
                yield from self._array(None, None, self.lists, None)
            elif c == "{" and self.lists and not self._one_line():
                yield from self._object(None, None, self.lists, None, self.line)
            else:
                yield from self._record(None, None, self.lists, None, None)

    def _one_line(self) -> bool:
        """Whether the object at hand looks like a JSON Lines record — its line, in the
        buffer, ends with ``}`` — to decode at once; otherwise (pretty-printed, so that its
        lists' elements each have a line of their own) it is read member by member."""
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

    def _record(self, index: int | None, key: str | None, lists: Lists, parent: Item | None,
                line: int | None) -> Iterable[Item]:
        """The value at hand as records: decoded at once, or an object streamed (``line``:
        its record's; ``None``: its own)."""
        stream = self._peek() == "{" and bool(lists)
        line = line or self.line
        try:
            value = self._value(stream)
        except _Cut:
            return self._object(index, key, lists, parent, line)
        if stream:
            return _expand(value, line, index, key, lists, parent)
        return (Item(value, line, index, key, parent),)

    def _object(self, index: int | None, key: str | None, lists: Lists, parent: Item | None,
                line: int) -> Iterator[Item]:
        """An object too long to decode at once, member by member."""
        self._enter()
        self._advance(self.pos + 1)
        item = Item({}, line, index, key, parent)
        streamed = False
        if self._peek() == "}":
            self._advance(self.pos + 1)
        else:
            while True:
                if self._peek() != '"':
                    raise self._syntax("expected a property name in double quotes", self.pos)
                name = self._value()
                self._expect(":", "':'")
                if name in lists and self._peek() == "[":
                    streamed = True
                    top = key is None and index is None  # its elements: a line each
                    yield from self._array(name, item, lists[name], None if top else line)
                else:
                    item.value[name] = self._value()
                if self._expect(",}", "',' or '}'") == "}":
                    break
        self.depth -= 1
        if not streamed or "id" in item.value:
            yield item

    def _array(self, key: str | None, parent: Item | None, lists: Lists,
               line: int | None) -> Iterator[Item]:
        """A list's elements (``line``: their record's; ``None``: each its own)."""
        self._enter()
        self._advance(self.pos + 1)
        if self._peek() == "]":
            self._advance(self.pos + 1)
            self.depth -= 1
            return
        index = 0
        while True:
            index += 1
            yield from self._record(index, key, lists, parent, line)
            if self._expect(",]", "',' or ']'") == "]":
                self.depth -= 1
                return


def _expand(value: Any, line: int, index: int | None, key: str | None, lists: Lists,
            parent: Item | None) -> Iterator[Item]:
    """A decoded value as records: its ``lists`` arrays' elements, then itself (see
    :func:`records`)."""
    if isinstance(value, dict) and lists:
        held = [k for k in lists if isinstance(value.get(k), list)]
        if len(held) > 1:
            held.sort(key=list(value).index)  # in file order, as a streamed object's
        if held:
            item = Item({k: v for k, v in value.items() if k not in held}, line, index, key,
                        parent)
            for k in held:
                inner = lists[k]
                for i, element in enumerate(value[k], 1):
                    if inner and isinstance(element, dict):
                        yield from _expand(element, line, i, k, inner, item)
                    else:
                        yield Item(element, line, i, k, item)
            if "id" in item.value:
                yield item
            return
    yield Item(value, line, index, key, parent)
