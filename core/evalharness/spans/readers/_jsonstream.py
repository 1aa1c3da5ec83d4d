"""The JSON values of a file, one at a time and never the whole file: JSON lines, values
concatenated or pretty-printed one after another, or the elements of one top-level array.

Every trace reader with a JSON format reads through :func:`values`. It holds one value (plus a
read buffer of about a megabyte) at a time, so a 1 GB export of JSON lines, or a stream of
pretty-printed objects such as the OpenTelemetry ``ConsoleSpanExporter`` prints, costs what its
largest value costs. A file that is one single JSON object (a pretty-printed OTLP request) is
that one value: it is held whole while it is parsed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalharness.errors import InputError

CHUNK = 1 << 20
"""Characters read at a time (the buffer grows past it only while one value is longer)."""

_SPACE = re.compile(r"[ \t\r\n]*")
_DECODER = json.JSONDecoder()


def values(path: Path, *, skip_text: bool = False) -> Iterator[tuple[int, Any]]:
    """``(line, value)`` for each top-level JSON value of ``path`` (``line``: where it starts,
    1-based); the elements of a top-level array are yielded one by one.

    ``skip_text``: lines between values that are not JSON (an application's own prints in a
    captured stdout) are skipped rather than an error.

    >>> import tempfile, os
    >>> with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
    ...     _ = f.write('{"a": 1}\\n{\\n  "b": [1,\\n 2]\\n}\\n[{"c": 3}, {"d": 4}]\\n')
    >>> list(values(Path(f.name)))
    [(1, {'a': 1}), (2, {'b': [1, 2]}), (6, {'c': 3}), (6, {'d': 4})]
    >>> os.unlink(f.name)
    """
    stream = _Stream(path)
    with stream:
        depth = 0  # 1 inside a top-level array
        while True:
            if not stream.skip_space():
                if depth:
                    raise stream.error("the file ends inside a JSON array (no closing ']')")
                return
            char = stream.buf[stream.pos]
            if depth:
                if char == "]":
                    stream.advance(stream.pos + 1)
                    depth = 0
                    continue
                if char == ",":
                    stream.advance(stream.pos + 1)
                    if not stream.skip_space():
                        raise stream.error("the file ends inside a JSON array (no closing ']')")
                    char = stream.buf[stream.pos]
            elif char == "[":
                stream.advance(stream.pos + 1)
                depth = 1
                continue
            elif char != "{":
                if skip_text:
                    stream.skip_line()
                    continue
                raise stream.error(f"not JSON: expected '{{' or '[' but found {_show(stream)}")
            line = stream.line
            yield line, stream.value()
            if depth and stream.skip_space() and stream.buf[stream.pos] not in ",]":
                raise stream.error(f"expected ',' or ']' between array elements but found "
                                   f"{_show(stream)}")


def _show(stream: _Stream) -> str:
    return repr(stream.buf[stream.pos:stream.pos + 20].split("\n", 1)[0])


class _Stream:
    """A read buffer over a text file that knows the line number of its position."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.buf = ""
        self.pos = 0
        self.line = 1
        self.eof = False

    def __enter__(self) -> _Stream:
        try:
            self.fh = open(self.path, encoding="utf-8-sig")  # noqa: SIM115 - closed in __exit__
        except OSError as exc:
            raise InputError(f"{self.path}: cannot be read: {exc.strerror or exc}") from exc
        return self

    def __exit__(self, *exc: object) -> None:
        self.fh.close()

    def error(self, message: str, line: int | None = None) -> InputError:
        return InputError(f"{self.path}, line {line or self.line}: {message}")

    def fill(self) -> bool:
        """Read more (at least as much again as the unconsumed part, so that one long value
        costs linear time); False at the end of the file."""
        if self.eof:
            return False
        try:
            chunk = self.fh.read(max(CHUNK, len(self.buf) - self.pos))
        except UnicodeDecodeError as exc:
            raise self.error(f"not UTF-8 text ({exc.reason} near byte {exc.start} of a read "
                             f"block)") from exc
        if not chunk:
            self.eof = True
            return False
        self.buf = self.buf[self.pos:] + chunk
        self.pos = 0
        return True

    def advance(self, to: int) -> None:
        self.line += self.buf.count("\n", self.pos, to)
        self.pos = to

    def skip_space(self) -> bool:
        """Move past whitespace; False at the end of the file."""
        while True:
            self.advance(_SPACE.match(self.buf, self.pos).end())
            if self.pos < len(self.buf) or not self.fill():
                return self.pos < len(self.buf)

    def skip_line(self) -> None:
        while (end := self.buf.find("\n", self.pos)) < 0:
            self.pos = len(self.buf)
            if not self.fill():
                return
        self.advance(end + 1)

    def value(self) -> Any:
        """The JSON value starting at the position (more is read while it is incomplete)."""
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if _truncated(self.buf, exc) and self.fill():
                    continue
                at = self.line + self.buf.count("\n", self.pos, exc.pos)
                column = exc.pos - self.buf.rfind("\n", 0, exc.pos)
                raise self.error(f"not valid JSON: {exc.msg} (line {at}, column {column})"
                                 ) from None
            self.advance(end)
            return value


def _truncated(buf: str, exc: json.JSONDecodeError) -> bool:
    """Whether a decoding error may only mean that the value goes on past the buffer: the
    decoder stopped at its end, or in a string that no line break ends (a JSON string never
    holds one), rather than at a character that is wrong wherever the value ends."""
    if exc.pos >= len(buf) - 8:
        return True
    return exc.msg.startswith("Unterminated string") and buf.find("\n", exc.pos) < 0
