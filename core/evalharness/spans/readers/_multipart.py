"""The parts of ``multipart/form-data`` request bodies saved to a file (one body, or several
one after another), read a part at a time and never the whole file.

A body is what RFC 7578 describes and HTTP clients send: ``--BOUNDARY`` lines between parts,
each part's headers (``Content-Disposition: form-data; name="..."``, ``Content-Type``,
``Content-Length``), a blank line, its bytes, and ``--BOUNDARY--`` at the end. The boundary is
taken from the body's first line, so bodies with different boundaries may follow each other.
A part whose ``Content-Length`` is given is read by its length; otherwise up to the next
boundary. A part over :data:`~evalharness.spans.readers._jsonstream.MAX_VALUE` bytes, or one
the caller does not want (an attachment), is skipped without being held.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from evalharness.errors import InputError
from evalharness.spans.readers._jsonstream import GZIP_MAGIC, MAX_VALUE

CHUNK = 1 << 20
MAX_HEADER_LINE = 64 * 1024
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_NAME = re.compile(rb'''(?i)\bname\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;\s]+))''')


@dataclass(slots=True)
class Part:
    """One part of a body."""

    name: str
    """The form field's name (``Content-Disposition``'s ``name``)."""
    data: bytes | None
    """Its bytes; ``None`` when skipped (not wanted)."""
    line: int
    """The line of the file its headers start on."""
    content_type: str | None = None


def parts(path: Path, want: Callable[[str], bool] = lambda name: True) -> Iterator[Part]:
    """Every part of the multipart bodies in ``path``, in file order; the bytes of those
    ``want`` refuses are skipped unread (``data`` is ``None``)."""
    try:
        fh = _open(path)
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    with fh:
        yield from _Body(fh, path).parts(want)


def _open(path: Path) -> IO[bytes]:
    with open(path, "rb") as raw:
        magic = raw.read(4)
    if magic.startswith(ZSTD_MAGIC):
        raise InputError(f"{path}: zstd-compressed (as the LangSmith SDK compresses multipart "
                         f"bodies); decompress it first (`zstd -d {path.name}`)")
    if magic.startswith(GZIP_MAGIC):
        return gzip.open(path, "rb")
    return open(path, "rb")  # noqa: SIM115 (closed by the caller's `with`)


class _Body:
    """A buffered binary reader that counts lines."""

    def __init__(self, fh: IO[bytes], path: Path) -> None:
        self.fh, self.path = fh, path
        self.buf, self.pos, self.line, self.eof = b"", 0, 1, False

    def _fill(self) -> bool:
        if self.eof:
            return False
        try:
            chunk = self.fh.read(CHUNK)
        except (OSError, EOFError) as exc:  # a truncated .gz
            raise InputError(f"{self.path}: cannot be read past line {self.line} "
                             f"({exc})") from exc
        if not chunk:
            self.eof = True
            return False
        self.buf = self.buf[self.pos:] + chunk
        self.pos = 0
        return True

    def _take(self, end: int) -> bytes:
        data = self.buf[self.pos:end]
        self.line += data.count(b"\n")
        self.pos = end
        return data

    def _readline(self) -> bytes:
        """The next line with its line break; ``b""`` at the end of the file."""
        while (end := self.buf.find(b"\n", self.pos)) < 0:
            if len(self.buf) - self.pos > MAX_HEADER_LINE:
                raise self._error("a line of more than 64 KB where a boundary or a header "
                                  "was expected")
            if not self._fill():
                return self._take(len(self.buf))
        return self._take(end + 1)

    def _read(self, size: int, keep: bool) -> bytes:
        """``size`` bytes (held only when ``keep``); an error when the file ends first."""
        pieces, left = [], size
        while left:
            if self.pos >= len(self.buf) and not self._fill():
                raise self._error(f"the file ends inside a part ({left} of its {size} bytes "
                                  f"missing)")
            piece = self._take(min(len(self.buf), self.pos + left))
            left -= len(piece)
            if keep:
                pieces.append(piece)
        return b"".join(pieces)

    def _read_to(self, delimiter: bytes, keep: bool) -> bytes:
        """The bytes up to ``delimiter`` (not consumed; held only when ``keep``)."""
        pieces, size, start = [], 0, self.line
        while (end := self.buf.find(delimiter, self.pos)) < 0:
            safe = max(self.pos, len(self.buf) - len(delimiter))  # it may start in the tail
            piece = self._take(safe)
            size += len(piece)
            if keep:
                if size > MAX_VALUE:
                    raise self._too_large(start, "", size)
                pieces.append(piece)
            if not self._fill():
                raise self._error("the file ends inside a part (no boundary after it)")
        pieces.append(self._take(end))
        return b"".join(pieces) if keep else b""

    def _error(self, why: str) -> InputError:
        return InputError(f"{self.path}, line {self.line}: {why}; expected multipart/form-data "
                          f"bodies as sent (--BOUNDARY lines between parts, each with its "
                          f"Content-Disposition header)")

    def parts(self, want: Callable[[str], bool]) -> Iterator[Part]:
        boundary: bytes | None = None
        while line := self._readline():
            text = line.rstrip(b"\r\n")
            if not text:
                continue  # between bodies
            if not text.startswith(b"--"):
                raise self._error(f"expected a boundary line (--…), found {text[:40]!r}")
            if boundary is not None and text == b"--" + boundary + b"--":
                boundary = None  # the body's end; another may follow
                continue
            boundary = text[2:]
            start = self.line
            headers = self._headers()
            disposition = headers.get(b"content-disposition", b"")
            named = _NAME.search(disposition)
            if named is None:
                raise InputError(f"{self.path}, line {start}: a part without a name (its "
                                 f"Content-Disposition is {disposition[:80]!r})")
            name = (named[1] if named[1] is not None else named[2]).decode("utf-8", "replace")
            keep = want(name)
            length = headers.get(b"content-length")
            if length is not None and length.strip().isdigit():
                size = int(length)
                if keep and size > MAX_VALUE:
                    raise self._too_large(start, name, size)
                data = self._read(size, keep)
                if self._readline().strip():
                    raise self._error(f"part {name!r} goes on past its Content-Length")
            else:
                data = self._read_to(b"\r\n--" + boundary, keep)
                self._read(2, False)  # the CRLF before the boundary
            content_type = headers.get(b"content-type")
            yield Part(name, data if keep else None, start,
                       content_type.decode("latin-1") if content_type else None)

    def _headers(self) -> dict[bytes, bytes]:
        headers: dict[bytes, bytes] = {}
        while True:
            line = self._readline()
            if not line:
                raise self._error("the file ends inside a part's headers")
            text = line.rstrip(b"\r\n")
            if not text:
                return headers
            key, colon, value = text.partition(b":")
            if not colon:
                raise self._error(f"expected a header (Name: value), found {text[:40]!r}")
            headers[key.strip().lower()] = value.strip()

    def _too_large(self, line: int, name: str, size: int) -> InputError:
        what = f"part {name!r}" if name else "a part"
        return InputError(f"{self.path}, line {line}: {what} has {size:,} bytes or more, over "
                          f"{MAX_VALUE >> 20} MB (the limit); a run's record is not this large")
