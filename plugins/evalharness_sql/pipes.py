"""The pipe protocol between the SQL plugin and its helper processes (the normal-form helpers
of :mod:`evalharness_sql.workers`, the sandboxed DuckDB of :mod:`evalharness_sql.duckproc`):
each message is a 4-byte big-endian length, then that many bytes.
"""

from __future__ import annotations

import struct
from typing import IO

HEADER = struct.Struct(">I")
"""A message's length prefix."""


def send(stream: IO[bytes], payload: bytes) -> None:
    """Write one message and flush it."""
    stream.write(HEADER.pack(len(payload)) + payload)
    stream.flush()


def receive(stream: IO[bytes]) -> bytes | None:
    """Read one message; ``None`` when the stream ends before a whole one.

    >>> import io
    >>> pipe = io.BytesIO(); send(pipe, b"hi"); _ = pipe.seek(0); receive(pipe), receive(pipe)
    (b'hi', None)
    """
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    (size,) = HEADER.unpack(header)
    payload = stream.read(size)
    return payload if len(payload) == size else None
