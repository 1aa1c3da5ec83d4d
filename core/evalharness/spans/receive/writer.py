"""The span files of a receive folder: one writer thread appends what the HTTP side queued,
rotates by size and age, and never leaves a file half-written under a name a reader reads.

Layout (docs/traces-receive.md): ``spans-<UTC time opened>-<sequence>.pb`` holds protobuf
requests, each a ``TracesData`` after its length as a varint (protobuf's delimited form,
``writeDelimitedTo``: ``otlp-proto``; a 4-byte length, as the Collector writes, could not be
recognised in front of a message of 16 MB or more); ``….jsonl`` holds JSON requests, one a
line (as the Collector's file exporter writes them: ``otlp-json``). A file is written as ``<name>.part``; when it is rotated (its size
or age reached) or the receiver stops, it is flushed, ``fsync``-ed and renamed to ``<name>``,
and the folder is ``fsync``-ed: a name without ``.part`` is always a complete file, and
readers skip ``*.part``. A request is answered 200 only once its record has been written to
the file (``write`` returned: it survives the receiver being killed, not a power cut before
the rotation's ``fsync``); a ``.part`` left by a receiver that was killed is cut after its
last whole record and renamed when the next receiver starts on the folder
(:func:`recover_parts`).
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from evalharness.spans.paths import PART
from evalharness.spans.receive.otlp import Kind, varint

SUFFIX: dict[Kind, str] = {"pb": ".pb", "json": ".jsonl"}
"""The file name suffix of each kind of record."""

_NAME = re.compile(r"spans-\d{8}T\d{6}Z-(\d+)\.(pb|jsonl)(\.part)?$")
_BATCH = 256
"""Queued requests written with one ``write`` call at most."""
_FREE_CHECK_SECONDS = 0.5


@dataclass(slots=True, eq=False)
class Pending:
    """One request waiting for its record to be written; the HTTP side waits on ``done``."""

    kind: Kind
    record: bytes
    spans: int
    done: threading.Event = field(default_factory=threading.Event)
    ok: bool = False
    error: str | None = None
    """Why it was not written (the answer is then 503: the exporter retries)."""

    def finish(self, error: str | None = None) -> None:
        """Written (``error`` None) or refused; the record is let go either way (a pending
        request is remembered a while to recognise retries)."""
        self.ok, self.error = error is None, error
        self.record = b""
        self.done.set()


@dataclass
class _Open:
    """A ``.part`` file being appended to."""

    path: Path
    fd: int
    opened: float
    size: int = 0
    spans: int = 0


@dataclass(frozen=True)
class Completed:
    """A file that has been renamed complete."""

    path: Path
    size: int
    spans: int


class SpanFiles:
    """Appends queued records to rotated files in ``folder`` from one thread.

    ``rotate_bytes``/``rotate_seconds``: a file is completed once it holds that many bytes
    (checked after each write: a request is never split) or was opened that long ago.
    ``min_free_bytes``: records are refused (their requests answered 503) while the folder's
    file system has less free space than this; ``free`` tells the free bytes (replaceable in
    tests)."""

    def __init__(self, folder: Path, *, rotate_bytes: int, rotate_seconds: float,
                 min_free_bytes: int,
                 free: Callable[[Path], int] = lambda p: shutil.disk_usage(p).free) -> None:
        self.folder = folder
        self.rotate_bytes = rotate_bytes
        self.rotate_seconds = rotate_seconds
        self.min_free_bytes = min_free_bytes
        self.free = free
        self.queue: queue.SimpleQueue[Pending | None] = queue.SimpleQueue()
        self.open: dict[Kind, _Open] = {}
        self.completed: list[Completed] = []
        self.spans_written = 0
        self.bytes_written = 0
        self.disk_low = False
        """Whether the last look at the free space found less than ``min_free_bytes``."""
        self.last_free = 0
        self._checked = 0.0
        self._sequence = 0
        self._lock = threading.Lock()  # guards `completed` and the counters for readers
        self._thread = threading.Thread(target=self._run, name="evalharness-receive-writer",
                                        daemon=True)

    # -- the HTTP side ---------------------------------------------------------------------

    def start(self) -> None:
        """Start the thread (the folder exists; file numbers go on after its last file)."""
        self._sequence = _last_sequence(self.folder)
        self.check_free(force=True)
        self._thread.start()

    def submit(self, item: Pending) -> None:
        """Queue ``item``; its ``done`` is set once it is written or refused."""
        self.queue.put(item)

    def close(self) -> None:
        """Write everything queued, complete the open files, stop the thread."""
        self.queue.put(None)
        self._thread.join()

    def snapshot(self) -> tuple[int, int, list[Completed]]:
        """``(spans written, bytes written, completed files)`` at this moment."""
        with self._lock:
            return self.spans_written, self.bytes_written, list(self.completed)

    def check_free(self, force: bool = False) -> bool:
        """Whether the free space is below ``min_free_bytes`` (looked at again at most every
        half second unless ``force``)."""
        now = time.monotonic()
        if force or now - self._checked >= _FREE_CHECK_SECONDS:
            self._checked = now
            try:
                self.last_free = self.free(self.folder)
            except OSError:
                self.last_free = 0
            self.disk_low = self.last_free < self.min_free_bytes
        return self.disk_low

    # -- the writer thread -----------------------------------------------------------------

    def _run(self) -> None:
        stopping = False
        while not stopping:
            try:
                item = self.queue.get(timeout=self._wait())
            except queue.Empty:
                self._rotate_aged()
                self.check_free()
                continue
            batch: list[Pending] = []
            while True:
                if item is None:
                    stopping = True
                else:
                    batch.append(item)
                if len(batch) >= _BATCH:
                    break
                try:
                    item = self.queue.get_nowait()
                except queue.Empty:
                    break
            if batch:
                self._write(batch)
            self._rotate_aged()
        for opened in list(self.open.values()):
            self._complete(opened)

    def _wait(self) -> float:
        """Seconds until the oldest open file is due to rotate (at most one)."""
        if not self.open:
            return 1.0
        due = min(o.opened for o in self.open.values()) + self.rotate_seconds
        return max(0.01, min(1.0, due - time.monotonic()))

    def _write(self, batch: list[Pending]) -> None:
        size = sum(len(p.record) for p in batch)
        if self.check_free(force=True) or self.last_free - size < self.min_free_bytes:
            for pending in batch:
                pending.finish(f"less than {self.min_free_bytes >> 20} MB free on the disk "
                               f"of {self.folder} (the --min-free-mb limit)")
            return
        for kind in SUFFIX:
            items = [p for p in batch if p.kind == kind]
            if items:
                self._append(kind, items)

    def _append(self, kind: Kind, items: list[Pending]) -> None:
        opened = self.open.get(kind)
        try:
            if opened is None:
                opened = self.open[kind] = self._new(kind)
            if kind == "pb":
                data = b"".join(varint(len(p.record)) + p.record for p in items)
            else:
                data = b"".join(p.record + b"\n" for p in items)
            _write_all(opened.fd, data)  # to the OS: it survives the receiver's death
        except OSError as exc:
            self._abandon_write(kind, opened, exc)
            for pending in items:
                pending.finish(f"writing {opened.path if opened else self.folder} failed: "
                               f"{exc.strerror or exc}")
            return
        spans = sum(p.spans for p in items)
        opened.size += len(data)
        opened.spans += spans
        with self._lock:
            self.spans_written += spans
            self.bytes_written += len(data)
        for pending in items:
            pending.finish()
        if opened.size >= self.rotate_bytes:
            self._complete(opened)

    def _abandon_write(self, kind: Kind, opened: _Open | None, exc: OSError) -> None:
        """After a failed write: cut the file back to its last whole record (or give it up,
        completing what it holds)."""
        if opened is None:
            return
        try:
            os.ftruncate(opened.fd, opened.size)
            os.lseek(opened.fd, opened.size, os.SEEK_SET)
        except OSError:
            self._complete(opened)

    def _new(self, kind: Kind) -> _Open:
        self._sequence += 1
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        path = self.folder / f"spans-{stamp}-{self._sequence:06d}{SUFFIX[kind]}{PART}"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                     0o644)
        return _Open(path, fd, time.monotonic())

    def _rotate_aged(self) -> None:
        now = time.monotonic()
        for opened in list(self.open.values()):
            if now - opened.opened >= self.rotate_seconds:
                self._complete(opened)

    def _complete(self, opened: _Open) -> None:
        """Flush, fsync, close and rename a ``.part`` file (an empty one is removed)."""
        for kind, current in list(self.open.items()):
            if current is opened:
                del self.open[kind]
        final = opened.path.with_name(opened.path.name.removesuffix(PART))
        try:
            os.fsync(opened.fd)
        except OSError:
            pass  # renamed anyway: what was written is there
        finally:
            os.close(opened.fd)
        if opened.size == 0:
            opened.path.unlink(missing_ok=True)
            return
        os.replace(opened.path, final)
        _sync_folder(self.folder)
        with self._lock:
            self.completed.append(Completed(final, opened.size, opened.spans))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _sync_folder(folder: Path) -> None:
    """``fsync`` a folder, so that a rename in it is durable (a no-op where folders cannot be
    opened, as on Windows)."""
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)


def _last_sequence(folder: Path) -> int:
    """The highest sequence number of the span files in ``folder`` (0 when none)."""
    numbers = [int(m.group(1)) for p in folder.iterdir() if (m := _NAME.match(p.name))]
    return max(numbers, default=0)


def recover_parts(folder: Path) -> list[Path]:
    """Complete the ``.part`` files a killed receiver left in ``folder``: each is cut after its
    last whole record (a request being written when it was killed was never answered 200, so
    its exporter sends it again) and renamed; an empty one is removed. The files completed.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "spans-20261201T000000Z-000001.jsonl.part").write_bytes(b'{"a": 1}\\n{"b"')
    >>> [p.name for p in recover_parts(folder)]
    ['spans-20261201T000000Z-000001.jsonl']
    >>> (folder / "spans-20261201T000000Z-000001.jsonl").read_bytes()
    b'{"a": 1}\\n'
    >>> import shutil; shutil.rmtree(folder)
    """
    done = []
    for part in sorted(folder.glob(f"spans-*{PART}")):
        if not _NAME.match(part.name):
            continue
        with open(part, "r+b") as fh:
            keep = _whole_records(fh, part.name.endswith(f".pb{PART}"))
            if keep < os.fstat(fh.fileno()).st_size:
                fh.truncate(keep)
                os.fsync(fh.fileno())
        final = part.with_name(part.name.removesuffix(PART))
        if keep == 0:
            part.unlink()
            continue
        os.replace(part, final)
        done.append(final)
    if done:
        _sync_folder(folder)
    return done


def _whole_records(fh: BinaryIO, protobuf: bool) -> int:
    """How many leading bytes of the file ``fh`` are whole records (read a length or a chunk
    at a time, never whole).

    >>> import io
    >>> _whole_records(io.BytesIO(b"\\x02ab\\x05abc"), True)
    3
    >>> _whole_records(io.BytesIO(b'{"a": 1}\\n{"b"'), False)
    9
    """
    total = fh.seek(0, os.SEEK_END)
    if not protobuf:  # after the last line break
        end = total
        while end > 0:
            start = max(0, end - (1 << 16))
            fh.seek(start)
            found = fh.read(end - start).rfind(b"\n")
            if found >= 0:
                return start + found + 1
            end = start
        return 0
    offset = 0
    while offset < total:
        fh.seek(offset)
        head = fh.read(10)
        size = shift = used = 0
        for byte in head:
            used += 1
            size |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        else:
            break  # the file ends inside a length
        if offset + used + size > total:
            break
        offset += used + size
    return offset
