"""The HTTP side of ``evalharness traces receive``: ``POST /v1/traces`` as the OTLP/HTTP
specification has it (https://opentelemetry.io/docs/specs/otlp/#otlphttp), with
back-pressure, an exporter's retries stored once, and a shutdown that answers every request
it took.

The standard library's ``ThreadingHTTPServer`` (a thread a connection, HTTP/1.1 keep-alive)
is enough: an exporter sends a few large requests at a time (the Python SDK: 512 spans, one
connection), the work per request is a protobuf or JSON decode, and a dependency would buy
nothing a benchmark shows (``benchmarks/otlp_intake.py``).

A request goes through: the path (404), the ``Content-Type`` (415: OTLP/HTTP has protobuf and
JSON; protobuf without the ``otlp`` extra is 415 too, saying what to install), the
``Content-Encoding`` (415), the size (413 past ``max_request_bytes``, 20 MiB as the
specification recommends, after decompression too), a byte budget shared by every request
held in memory (429 with ``Retry-After`` when it is spent: ``max_queue_bytes``), the
decoding (400 with the reason), the disk's free space (503 with ``Retry-After``); then it is
queued for the writer thread and answered 200 once written (503 if the write failed).
Errors carry a ``google.rpc.Status`` in the request's encoding.

**Retries.** An exporter sends a batch again after a 429/503, a timeout or a lost
connection; if the batch had been stored and only the answer was lost, the retry would
store it twice. A request's body (decompressed) is remembered by its SHA-256 for the last
:data:`RECENT_REQUESTS` requests: the same body again is answered 200 without being stored
(counted as a duplicate); while the first copy is still being written the retry waits for
its outcome. Beyond that memory (a retry after a restart), the readers' grouping keeps one
span per (trace id, span id) (:mod:`evalharness.spans.group`).
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from evalharness.errors import InputError
from evalharness.spans.receive.otlp import (
    INVALID_ARGUMENT,
    JSON,
    MEDIA_TYPES,
    NO_PROTOBUF,
    PROTOBUF,
    RESOURCE_EXHAUSTED,
    UNAVAILABLE,
    UNIMPLEMENTED,
    BadRequest,
    Kind,
    TooLarge,
    Unsupported,
    decode,
    decompress,
    media_type,
    protobuf_available,
    status_body,
    success,
)
from evalharness.spans.receive.writer import Completed, Pending, SpanFiles, recover_parts
from evalharness.version import __version__

PATH = "/v1/traces"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 4318
"""OTLP/HTTP's default port."""
MAX_REQUEST = 20 << 20
"""The largest request body, before and after decompression (the specification's
recommended default)."""
RECENT_REQUESTS = 16_384
"""Request bodies remembered (by digest) to recognise an exporter's retry."""
WRITE_WAIT = 60.0
"""Seconds a request waits for its record to be written before it is answered 503."""
IDLE_SECONDS = 60
"""A keep-alive connection without a request for this long is closed."""
LOCK_NAME = ".receive.lock"

_CODES = {400: INVALID_ARGUMENT, 404: UNIMPLEMENTED, 405: UNIMPLEMENTED, 411: INVALID_ARGUMENT,
          413: INVALID_ARGUMENT, 415: INVALID_ARGUMENT, 429: RESOURCE_EXHAUSTED,
          503: UNAVAILABLE}


@dataclass
class ReceiveStats:
    """What a receiver has done so far."""

    requests: int = 0
    """Requests to ``POST /v1/traces`` answered (any status)."""
    spans: int = 0
    """Spans in the requests answered 200 and stored (not counting retries stored before)."""
    spans_written: int = 0
    bytes_written: int = 0
    duplicate_requests: int = 0
    """Requests answered 200 without storing them: the same body was stored just before (an
    exporter's retry)."""
    duplicate_spans: int = 0
    rejected: dict[int, int] = field(default_factory=dict)
    """HTTP status -> how many requests got it (everything but 200)."""
    files: list[Completed] = field(default_factory=list)
    """The files completed (renamed from ``*.part``), oldest first."""
    held_bytes: int = 0
    """Bytes of the requests being read, checked or written at this moment."""
    seconds: float = 0.0
    """Since the receiver started."""
    busy_seconds: float = 0.0
    """From the first request's arrival to the last one stored (the spans/s while they came
    is ``spans / busy_seconds``)."""


class _Answer(Exception):  # noqa: N818 - it carries an answer, not a failure of ours
    def __init__(self, status: int, message: str, *, retry_after: int | None = None,
                 close: bool = False) -> None:
        super().__init__(message)
        self.status, self.message = status, message
        self.retry_after, self.close = retry_after, close


class _Budget:
    """Bytes of request bodies that may be held at once (read, decoded, queued)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._lock = threading.Lock()

    def take(self, n: int) -> bool:
        """Hold ``n`` more bytes if they fit (one request always fits when nothing is
        held, whatever its size)."""
        with self._lock:
            if self.held and self.held + n > self.limit:
                return False
            self.held += n
            return True

    def give(self, n: int) -> None:
        with self._lock:
            self.held -= n


class Receiver:
    """An OTLP/HTTP receiver writing the spans it is sent into ``folder``
    (docs/traces-receive.md). Use as a context manager, or :meth:`start` and :meth:`stop`.

    ``port`` 0 picks a free port (:attr:`url` says which). ``retry_after``: the seconds a
    429 (the byte budget is spent, or the writer is behind) and a 503 while stopping ask the
    exporter to wait; ``retry_after_disk``: those of a 503 for a nearly full disk or a failed
    write — short, because an exporter drops a batch whose wait would pass its own timeout
    (the Python SDK's: 10 s).
    """

    def __init__(self, folder: Path, *, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                 rotate_bytes: int = 64 << 20, rotate_seconds: float = 60.0,
                 max_queue_bytes: int = 64 << 20, min_free_bytes: int = 500 << 20,
                 max_request_bytes: int = MAX_REQUEST, retry_after: int = 1,
                 retry_after_disk: int = 5, max_connections: int = 128,
                 free: Any = None) -> None:
        self.folder = Path(folder)
        self.host, self.port = host, port
        self.max_request_bytes = max_request_bytes
        self.retry_after, self.retry_after_disk = retry_after, retry_after_disk
        self.max_connections = max_connections
        self.budget = _Budget(max_queue_bytes)
        self.protobuf = protobuf_available()
        self.writer = SpanFiles(self.folder, rotate_bytes=rotate_bytes,
                                rotate_seconds=rotate_seconds, min_free_bytes=min_free_bytes,
                                **({"free": free} if free is not None else {}))
        self.recovered: list[Path] = []
        """Files a killed receiver left as ``*.part``, completed at start."""
        self._recent: OrderedDict[bytes, Pending] = OrderedDict()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._in_flight = 0
        self._closing = False
        self._connections: set[socket.socket] = set()
        self._counts = Counter[str]()
        self._rejected = Counter[int]()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._lock_file: Any = None
        self._started = 0.0
        self._first = self._last = 0.0

    # -- life --------------------------------------------------------------------------------

    def __enter__(self) -> Receiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Where exporters send: ``http://HOST:PORT/v1/traces``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{PATH}"

    def start(self) -> Receiver:
        """Take the folder (one receiver a folder), complete what a killed receiver left,
        start the writer and listen. :class:`InputError` when the folder or the address
        cannot be had."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"--out {self.folder}: cannot create the folder "
                             f"({exc.strerror or exc}); give a folder this process may write"
                             ) from None
        self._lock_file = _lock_folder(self.folder)
        try:
            self.recovered = recover_parts(self.folder)
            self.writer.start()
            try:
                self._server = _Server((self.host, self.port), self)
            except OSError as exc:
                self.writer.close()
                raise InputError(f"cannot listen on {self.host}:{self.port}: "
                                 f"{exc.strerror or exc}; choose another --port (0 picks a "
                                 "free one) or stop what listens there") from None
        except BaseException:
            _unlock_folder(self._lock_file)
            raise
        self.port = self._server.server_address[1]
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.2},
                                        name="evalharness-receive-http", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = WRITE_WAIT) -> ReceiveStats:
        """Stop listening, answer the requests in flight (new ones on open connections get
        503 and the connection closes), write everything queued, complete the open files.
        The stats at the end."""
        if self._server is None:
            return self.stats()
        with self._lock:
            self._closing = True
        self._server.shutdown()
        self._server.server_close()
        with self._idle:
            self._idle.wait_for(lambda: self._in_flight == 0, timeout=timeout)
            idle = list(self._connections)
        for connection in idle:  # keep-alive connections waiting for a next request
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.writer.close()
        self._server = None
        _unlock_folder(self._lock_file)
        return self.stats()

    def stats(self) -> ReceiveStats:
        spans_written, bytes_written, files = self.writer.snapshot()
        with self._lock:
            counts, rejected = dict(self._counts), dict(self._rejected)
        return ReceiveStats(
            requests=counts.get("requests", 0), spans=counts.get("spans", 0),
            spans_written=spans_written, bytes_written=bytes_written,
            duplicate_requests=counts.get("duplicate_requests", 0),
            duplicate_spans=counts.get("duplicate_spans", 0), rejected=rejected, files=files,
            held_bytes=self.budget.held,
            seconds=time.monotonic() - self._started if self._started else 0.0,
            busy_seconds=max(0.0, self._last - self._first))

    # -- for the handler ---------------------------------------------------------------------

    def _enter(self) -> bool:
        with self._lock:
            if self._closing:
                return False
            self._in_flight += 1
            self._first = self._first or time.monotonic()
            return True

    def _leave(self) -> None:
        with self._idle:
            self._in_flight -= 1
            self._idle.notify_all()

    def _count(self, status: int, spans: int = 0, duplicate: bool = False) -> None:
        with self._lock:
            self._counts["requests"] += 1
            if status != 200:
                self._rejected[status] += 1
            elif duplicate:
                self._counts["duplicate_requests"] += 1
                self._counts["duplicate_spans"] += spans
            else:
                self._counts["spans"] += spans
                self._last = time.monotonic()

    def _store(self, kind: Kind, raw: bytes) -> tuple[int, bool]:
        """Decode ``raw`` and write it (or recognise it as a retry of a stored request):
        ``(spans, whether it was a duplicate)``; :class:`_Answer` when it cannot be."""
        try:
            decoded = decode(kind, raw)
        except BadRequest as exc:
            raise _Answer(400, str(exc)) from None
        if decoded.spans == 0:  # an empty request: success, nothing to store
            return 0, False
        digest = hashlib.sha256(raw).digest()
        while True:
            with self._lock:
                earlier = self._recent.get(digest)
                if earlier is None or (earlier.done.is_set() and not earlier.ok):
                    pending = Pending(decoded.kind, decoded.record, decoded.spans)
                    self._recent[digest] = pending
                    self._recent.move_to_end(digest)
                    if len(self._recent) > RECENT_REQUESTS:
                        self._recent.popitem(last=False)
                    break
                self._recent.move_to_end(digest)
            if not earlier.done.wait(WRITE_WAIT):
                raise _Answer(503, "the same request is still being written",
                              retry_after=self.retry_after)
            if earlier.ok:
                return decoded.spans, True
        del decoded  # the record is in `pending` now, and goes when it is written
        if self.writer.check_free():
            pending.finish("disk nearly full")
            raise _Answer(503, f"less than {self.writer.min_free_bytes >> 20} MB free on the "
                          f"disk of {self.folder} (--min-free-mb); spans are refused until "
                          "space is freed", retry_after=self.retry_after_disk)
        self.writer.submit(pending)
        if not pending.done.wait(WRITE_WAIT):
            raise _Answer(429, "the writer is behind; try again",
                          retry_after=self.retry_after)
        if not pending.ok:
            raise _Answer(503, f"not stored: {pending.error}", retry_after=self.retry_after_disk)
        return pending.spans, False


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], receiver: Receiver) -> None:
        self.receiver = receiver
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        receiver = self.receiver
        with receiver._lock:
            full = len(receiver._connections) >= receiver.max_connections
        if full:  # too many connections: answer without a thread, close
            try:
                request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n"
                                b"Content-Length: 0\r\nConnection: close\r\n\r\n")
            except OSError:
                pass
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = f"evalharness/{__version__}"
    sys_version = ""
    timeout = IDLE_SECONDS
    server: _Server

    def setup(self) -> None:
        super().setup()
        receiver = self.server.receiver
        with receiver._lock:
            receiver._connections.add(self.connection)

    def finish(self) -> None:
        receiver = self.server.receiver
        with receiver._lock:
            receiver._connections.discard(self.connection)
        try:
            super().finish()
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        """Quiet: the receiver counts requests and answers instead of logging each."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        receiver = self.server.receiver
        kind: Kind = "json" if media_type(self.headers.get("Content-Type")) == JSON else "pb"
        if urlsplit(self.path).path != PATH:
            self._drop_body(receiver.max_request_bytes)
            self._refuse(kind, _Answer(404, f"no such path {self.path!r}: OTLP/HTTP traces go "
                                            f"to POST {PATH}"), count=False)
            return
        if not receiver._enter():
            self._refuse(kind, _Answer(503, "the receiver is stopping",
                                       retry_after=receiver.retry_after, close=True))
            return
        held = 0
        try:
            try:
                held, raw = self._body(kind)
                spans, duplicate = receiver._store(kind, raw)
            except _Answer as answer:
                receiver.budget.give(held)
                self._refuse(kind, answer)
                return
            receiver.budget.give(held)  # before answering: it is written, or let go
            receiver._count(200, spans, duplicate)
            self._send(200, kind, success(kind))
        finally:
            receiver._leave()

    def _body(self, kind: Kind) -> tuple[int, bytes]:
        """``(bytes held in the budget, the decompressed body)`` of a request to
        ``/v1/traces``, or :class:`_Answer` (the body is read and dropped first, so that the
        connection stays usable and the client reads the answer)."""
        receiver = self.server.receiver
        limit = receiver.max_request_bytes
        content_type = self.headers.get("Content-Type")
        if media_type(content_type) not in MEDIA_TYPES:
            self._drop_body(limit)
            raise _Answer(415, f"Content-Type {content_type!r} is not OTLP/HTTP; send "
                               f"{PROTOBUF} (binary protobuf) or {JSON} (OTLP JSON)")
        if kind == "pb" and not receiver.protobuf:
            self._drop_body(limit)
            raise _Answer(415, NO_PROTOBUF)
        encoding = self.headers.get("Content-Encoding")
        if (encoding or "").strip().lower() not in ("", "identity", "none", "gzip", "x-gzip",
                                                    "deflate"):
            self._drop_body(limit)
            raise _Answer(415, f"Content-Encoding {encoding!r} is not supported; send gzip, "
                               "deflate or no encoding")
        chunked = "chunked" in self.headers.get("Transfer-Encoding", "").lower()
        length = self._length() if not chunked else None
        if length is not None and length > limit:
            raise _Answer(413, f"the request has {length:,} bytes, more than {limit:,} (the "
                               "limit); export smaller batches", close=True)
        if not receiver.budget.take(length or 0):
            self._drop_body(limit)
            raise _Answer(429, "too many spans waiting to be written; try again",
                          retry_after=receiver.retry_after)
        held = length or 0
        try:
            body = self._read_chunked(limit) if chunked else self.rfile.read(length)
            if len(body) < (length or 0):
                raise _Answer(400, "the connection closed before the whole body was sent",
                              close=True)
            if chunked:
                if not receiver.budget.take(len(body)):
                    raise _Answer(429, "too many spans waiting to be written; try again",
                                  retry_after=receiver.retry_after)
                held += len(body)
            try:
                raw = decompress(body, encoding, limit)
            except TooLarge as exc:
                raise _Answer(413, f"{exc}; export smaller batches") from None
            except (BadRequest, Unsupported) as exc:
                raise _Answer(400 if isinstance(exc, BadRequest) else 415, str(exc)) from None
            if raw is not body:
                if not receiver.budget.take(len(raw)):
                    raise _Answer(429, "too many spans waiting to be written; try again",
                                  retry_after=receiver.retry_after)
                held += len(raw)
                receiver.budget.give(len(body))
                held -= len(body)
            return held, raw
        except BaseException:
            receiver.budget.give(held)
            raise

    def _length(self) -> int:
        text = self.headers.get("Content-Length")
        if text is None:
            raise _Answer(411, "a request needs a Content-Length (or chunked transfer "
                               "encoding)", close=True)
        try:
            length = int(text)
        except ValueError:
            length = -1
        if length < 0:
            raise _Answer(400, f"Content-Length {text!r} is not a number of bytes", close=True)
        return length

    def _read_chunked(self, limit: int) -> bytes:
        parts = []
        size = 0
        while True:
            line = self.rfile.readline(1024)
            try:
                chunk = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise _Answer(400, "malformed chunked body", close=True) from None
            if chunk == 0:
                while self.rfile.readline(1024).strip():  # trailers
                    pass
                return b"".join(parts)
            size += chunk
            if size > limit:
                raise _Answer(413, f"the request has more than {limit:,} bytes (the limit); "
                                   "export smaller batches", close=True)
            parts.append(self.rfile.read(chunk))
            self.rfile.readline(16)

    def _drop_body(self, limit: int) -> None:
        """Read and forget the body (one that is larger than ``limit`` closes the connection
        instead)."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            try:
                self._read_chunked(limit)
            except _Answer:
                self.close_connection = True
            return
        try:
            left = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            left = -1
        if left < 0 or left > limit:
            self.close_connection = True
            return
        while left > 0:
            got = self.rfile.read(min(left, 1 << 16))
            if not got:
                break
            left -= len(got)

    def _refuse(self, kind: Kind, answer: _Answer, count: bool = True) -> None:
        if count:
            self.server.receiver._count(answer.status)
        headers = {}
        if answer.retry_after is not None:
            headers["Retry-After"] = str(answer.retry_after)
        if answer.close:
            self.close_connection = True
        self._send(answer.status, kind,
                   status_body(kind, _CODES.get(answer.status, UNAVAILABLE), answer.message),
                   headers)

    def _send(self, status: int, kind: Kind, body: bytes,
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", JSON if kind == "json" else PROTOBUF)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def _not_post(self) -> None:
        kind: Kind = "json" if media_type(self.headers.get("Content-Type")) == JSON else "pb"
        self._drop_body(self.server.receiver.max_request_bytes)
        if urlsplit(self.path).path == PATH:
            self._refuse(kind, _Answer(405, f"{PATH} takes POST (OTLP/HTTP)"), count=False)
        else:
            self._refuse(kind, _Answer(404, f"no such path {self.path!r}: OTLP/HTTP traces go "
                                            f"to POST {PATH}"), count=False)

    do_GET = do_PUT = do_DELETE = do_PATCH = _not_post  # noqa: N815


def _lock_folder(folder: Path) -> Any:
    """An exclusive lock on ``folder`` (its ``.receive.lock``): a second receiver on the same
    folder would interleave its files; it is refused, naming the first one's process."""
    path = folder / LOCK_NAME
    try:
        import fcntl
    except ImportError:  # Windows: no advisory lock; one receiver a folder is on the user
        return None
    handle = open(path, "a+")  # noqa: SIM115 - held while receiving
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        pid = handle.read().strip() or "?"
        handle.close()
        raise InputError(f"--out {folder}: another `evalharness traces receive` (process "
                         f"{pid}) writes into this folder; give each receiver its own folder"
                         ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


def _unlock_folder(handle: Any) -> None:
    if handle is not None:
        handle.close()
