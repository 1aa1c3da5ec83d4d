"""``evalharness review serve``: a small local web page over a run folder (the standard
library's threading HTTP server; no front-end build, nothing fetched from anywhere).

The page writes files, so it is guarded three ways: it binds to 127.0.0.1 unless told
otherwise; every request carries a random token (in the URL the command prints, and in a
header of every write); and the ``Host`` header must name the address it is bound to (a web
page on another site cannot reach it through DNS rebinding). Writes also must be
``application/json``, which a cross-site form cannot send. Bound to every interface
(``0.0.0.0``, ``::``), the Host check accepts this machine's names and any IP address: an
attacker can point a name at this machine (DNS rebinding) but not make a browser send another
site's page to an IP address it names itself (:class:`Hosts`).

A connection that sends nothing for :data:`REQUEST_TIMEOUT` seconds (an idle one, headers
that never end) is closed, so idle connections cannot hold the server's threads.

Routes: ``GET /?t=TOKEN&i=N&r=NAME`` the N-th sampled case for reviewer NAME;
``POST /label`` one label (JSON), appended to ``review/labels.jsonl`` before the answer;
``GET /labels?t=TOKEN&r=NAME`` the reviewer's labels in force, as JSON. With ``--pairwise``
the page shows the same case's two answers side by side, in an order that is random per case
and never named, and the preference is stored in run A's ``review/pairwise.jsonl`` with both
runs' ids.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import ipaddress
import json
import re
import secrets
import socket
import sys
import threading
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from pydantic import ValidationError

import evalharness.jsonlimits as jsonlimits
from evalharness.errors import EvalHarnessError
from evalharness.review import labels as L
from evalharness.review.page import render_pairwise, render_review
from evalharness.review.session import Review, case_view

MAX_BODY = 64_000
REQUEST_TIMEOUT = 5.0
"""Seconds a connection may stay silent (request line, headers, body) before it is closed."""
WILDCARDS = ("", "0.0.0.0", "::")
"""Addresses that bind every interface."""
_PORT = re.compile(r"[0-9]{1,5}")


def split_host(header: str) -> tuple[str, int | None] | None:
    """The name (lower case; an IPv6 address without its brackets) and port of a ``Host``
    header; ``None`` when it is malformed.

    >>> split_host("LocalHost:8080"), split_host("[::1]:80"), split_host("example.org")
    (('localhost', 8080), ('::1', 80), ('example.org', None))
    >>> split_host("[::1"), split_host("a:b"), split_host("::1:80")
    (None, None, None)
    """
    header = header.strip().lower()
    if header.startswith("["):
        name, bracket, rest = header[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return None
        port = rest[1:] if rest else None
    else:
        name, colon, port = header.partition(":")
        port = port if colon else None
    if port is not None and not _PORT.fullmatch(port):
        return None
    return name, None if port is None else int(port)


def canonical(name: str) -> str:
    """An IP address in its one spelling (other names as they are).

    >>> canonical("0:0:0:0:0:0:0:1"), canonical("127.0.0.1"), canonical("vm")
    ('::1', '127.0.0.1', 'vm')
    """
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name


def is_address(name: str) -> bool:
    """Whether ``name`` is an IP address (not a DNS name).

    >>> is_address("10.0.0.7"), is_address("fe80::1"), is_address("10.0.0.7.evil.example")
    (True, True, False)
    """
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def machine_names() -> set[str]:
    """This machine's names, as a browser on the network may call it: its host name, the
    host name's first label, that with ``.local`` (mDNS), and its fully qualified name."""
    names: set[str] = set()
    with contextlib.suppress(OSError):
        host = socket.gethostname().lower()
        short = host.split(".")[0]
        names |= {host, short, f"{short}.local"}
    with contextlib.suppress(OSError):
        names.add(socket.getfqdn().lower())
    return {n for n in names if n}


@dataclass(frozen=True)
class Hosts:
    """Which ``Host`` headers a server bound to an address answers (:meth:`for_bind`): the
    names and port a browser uses to reach it, never a name someone else controls (DNS
    rebinding: a page on evil.example whose name is made to point here)."""

    names: frozenset[str]
    port: int
    any_address: bool = False
    """Bound to every interface: any IP address passes too (an address is not a name anyone
    can point elsewhere; a browser sends it only to the address it names)."""

    @classmethod
    def for_bind(cls, host: str, port: int) -> Hosts:
        """The Host check of a server bound to ``host:port``.

        >>> sorted(Hosts.for_bind("127.0.0.1", 80).names)
        ['127.0.0.1', 'localhost']
        >>> h = Hosts.for_bind("0.0.0.0", 8000)
        >>> h.allows("localhost:8000"), h.allows("192.168.1.20:8000"), h.allows("evil.example:8000")
        (True, True, False)
        """
        bound = canonical(host.strip("[]").lower())
        if bound in WILDCARDS:
            return cls(frozenset({"localhost", "127.0.0.1", "::1", *machine_names()}), port,
                       any_address=True)
        names = {bound}
        if bound == "localhost":
            names |= {"127.0.0.1", "::1"}
        elif is_address(bound) and ipaddress.ip_address(bound).is_loopback:
            names.add("localhost")
        return cls(frozenset(names), port)

    def allows(self, header: str) -> bool:
        """Whether a request with this ``Host`` header is answered: a known name, or any IP
        address when bound to every interface, with the bound port (none only for 80).

        >>> h = Hosts.for_bind("::1", 8000)
        >>> h.allows("[::1]:8000"), h.allows("localhost:8000"), h.allows("[::1]:8001")
        (True, True, False)
        """
        parsed = split_host(header)
        if parsed is None:
            return False
        name, port = parsed
        if (80 if port is None else port) != self.port:
            return False
        name = canonical(name)
        return name in self.names or (self.any_address and is_address(name))


def url_host(host: str) -> str:
    """How the URL the command prints names a server bound to ``host``.

    >>> [url_host(h) for h in ("127.0.0.1", "0.0.0.0", "::", "::1", "[::1]", "vm.lan")]
    ['localhost', 'localhost', 'localhost', '[::1]', '[::1]', 'vm.lan']
    """
    bound = host.strip("[]")
    if bound in ("127.0.0.1", *WILDCARDS):
        return "localhost"
    return f"[{bound}]" if ":" in bound else bound


@dataclass
class Pairing:
    """Two runs reviewed side by side: the cases both have, and per case which run is shown
    on the left (a hash of a secret and the case id: stable across reloads, unguessable)."""

    a: Review
    b: Review
    secret: str
    ids: list[str]

    def a_is_left(self, case_id: str) -> bool:
        return hashlib.sha256(f"{self.secret}\0{case_id}".encode()).digest()[0] % 2 == 0

    @property
    def path(self) -> Path:
        return self.a.run.path / L.PAIRWISE

    @property
    def runs(self) -> list[str]:
        return [self.a.id, self.b.id]


@dataclass
class App:
    """What the handler serves."""

    review: Review
    token: str
    hosts: Any
    """The :class:`Hosts` check; :func:`make_server` sets it for the address it binds."""
    reviewer: str = ""
    pairing: Pairing | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    warned: set[str] = field(default_factory=set)
    """Warnings already printed on the server's stderr (each is printed once)."""

    @property
    def ids(self) -> list[str]:
        if self.pairing is not None:
            return self.pairing.ids
        return [self.review.run.results[i].case.id for i in self.review.chosen]

    # -- reading and writing labels ------------------------------------------------------

    def say(self, warnings: list[str]) -> None:
        """Print each warning on the server's stderr, once."""
        with self.lock:
            new = [w for w in warnings if w not in self.warned]
            self.warned.update(new)
        for warning in new:
            print(f"warning: {warning}", file=sys.stderr, flush=True)

    def labels_of(self, reviewer: str, said: list[str] | None = None) -> list[L.Label]:
        """The reviewer's labels in force; what reading them had to say (a torn last line
        left out) goes to ``said`` and, once, to stderr."""
        path = self.pairing.path if self.pairing else self.review.labels_path
        warnings: list[str] = []
        rows = [lab for lab in L.latest(L.read(path, warnings)) if lab.reviewer == reviewer]
        self.say(warnings)
        if said is not None:
            said += warnings
        if self.pairing:
            rows = [lab for lab in rows if lab.runs == self.pairing.runs]
        return rows

    def labels_view(self, reviewer: str) -> list[dict[str, Any]]:
        """The reviewer's labels as ``GET /labels`` gives them; pairwise, only the side
        chosen (left, right, tie), never which run that was."""
        mine = self.labels_of(reviewer)
        if self.pairing is None:
            return [lab.model_dump(mode="json") for lab in mine]
        return [{"case": lab.case, "choice": self.side(lab), "note": lab.note, "at": lab.at}
                for lab in mine]

    def side(self, lab: L.Label) -> str | None:
        """A stored preference as the side of the page it was given on."""
        if lab.label == "tie":
            return "tie"
        assert self.pairing is not None
        return "left" if (lab.label == "A") == self.pairing.a_is_left(lab.case) else "right"

    def store(self, body: dict[str, Any]) -> dict[str, Any]:
        """Check and append one label; the stored label as the page needs it, with
        ``warnings`` when the labels file had to be repaired first (also printed)."""
        said: list[str] = []
        answer = self._store(body, said)
        self.say(said)
        return {**answer, "warnings": said} if said else answer

    def _store(self, body: dict[str, Any], said: list[str]) -> dict[str, Any]:
        if self.pairing is not None:
            choice = body.pop("choice", None)
            case = body.get("case")
            if case not in self.pairing.ids:
                raise EvalHarnessError(f"no case {case!r} in both runs")
            if choice not in ("left", "right", "tie", None, ""):
                raise EvalHarnessError("choice must be left, right or tie")
            left_is_a = self.pairing.a_is_left(case)
            value = {"left": "A" if left_is_a else "B", "right": "B" if left_is_a else "A",
                     "tie": "tie"}.get(choice or "")
            final = self.pairing.a.run.report.components
            component = next(reversed(final)) if final else "generator"
            lab = L.Label(case=case, component=component, metric="preference", item="",
                          label=value, reviewer=body.get("reviewer", ""),
                          note=body.get("note", ""), runs=self.pairing.runs)
            with self.lock:
                stored = L.append(self.pairing.path, [lab], said)[0]
            return {"case": case, "choice": choice or None, "at": stored.at}
        lab = L.Label.model_validate({k: v for k, v in body.items() if k in (
            "case", "component", "metric", "item", "label", "reviewer", "note",
            "correction")})
        if lab.label is not None:
            self.review.target(lab)
        else:
            self.review.targets(lab.case)  # an unknown case is an error even when clearing
        with self.lock:
            stored = L.append(self.review.labels_path, [lab], said)[0]
        return stored.model_dump(mode="json")

    # -- pages -------------------------------------------------------------------------------

    def page(self, index: int, reviewer: str, nonce: str) -> str:
        """The page of the ``index``-th case for ``reviewer``."""
        ids = self.ids
        index = max(0, min(index, len(ids) - 1))
        said: list[str] = []
        mine = self.labels_of(reviewer, said) if reviewer else []
        if self.pairing is not None:
            return render_pairwise(self, index, reviewer, mine, nonce)
        result = self.review.result(ids[index])
        return render_review(self, index, reviewer, case_view(self.review, result), mine,
                             nonce, said)


class Handler(BaseHTTPRequestHandler):
    """One request; the :class:`App` is the server's ``app``."""

    server_version = "evalharness-review"
    protocol_version = "HTTP/1.1"

    @property
    def app(self) -> App:
        return self.server.app  # type: ignore[attr-defined]

    def setup(self) -> None:
        """Every read and write of the connection times out (:data:`REQUEST_TIMEOUT`): an
        idle connection is closed instead of holding a thread."""
        self.timeout = getattr(self.server, "request_timeout", REQUEST_TIMEOUT)
        super().setup()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib's name
        if getattr(self.server, "verbose", False):
            super().log_message(format, *args)

    def _allowed(self, token: str | None) -> bool:
        if not self.app.hosts.allows(self.headers.get("Host") or ""):
            self._send(HTTPStatus.FORBIDDEN, "text/plain",
                       b"this page answers only at the address it was started on\n")
            return False
        given = (token or "").encode("utf-8", "surrogatepass")  # any text: never a TypeError
        if not given or not hmac.compare_digest(given, self.app.token.encode()):
            self._send(HTTPStatus.FORBIDDEN, "text/plain",
                       b"missing or wrong token: open the URL `evalharness review serve` "
                       b"printed\n")
            return False
        return True

    def _send(self, status: HTTPStatus, ctype: str, body: bytes,
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", f"{ctype}; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("X-Frame-Options", "DENY")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: HTTPStatus, data: Any) -> None:
        self._send(status, "application/json", json.dumps(data, ensure_ascii=False).encode())

    def do_GET(self) -> None:  # noqa: N802 - stdlib's name
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        if not self._allowed(query.get("t")):
            return
        try:
            self._get(url.path, query)
        except EvalHarnessError as exc:  # e.g. a labels file with a bad line: say which
            self.app.say([str(exc)])
            self._send(HTTPStatus.INTERNAL_SERVER_ERROR, "text/plain",
                       f"cannot show the page: {exc}\n".encode())

    def _get(self, path: str, query: dict[str, str]) -> None:
        """Answer an allowed GET of ``path``."""
        reviewer = query.get("r", self.app.reviewer).strip()[:80]
        if path == "/labels":
            self._json(HTTPStatus.OK, self.app.labels_view(reviewer))
            return
        if path != "/":
            self._send(HTTPStatus.NOT_FOUND, "text/plain", b"not found\n")
            return
        try:
            index = int(query.get("i", "0"))
        except ValueError:
            index = 0
        nonce = secrets.token_urlsafe(16)
        page = self.app.page(index, reviewer, nonce).encode()
        csp = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
               f"script-src 'nonce-{nonce}'; connect-src 'self'; form-action 'none'; "
               "base-uri 'none'; frame-ancestors 'none'")
        self._send(HTTPStatus.OK, "text/html", page, {"Content-Security-Policy": csp})

    def do_POST(self) -> None:  # noqa: N802 - stdlib's name
        url = urlsplit(self.path)
        if not self._allowed(self.headers.get("X-Review-Token")):
            return
        if url.path != "/label":
            self._send(HTTPStatus.NOT_FOUND, "text/plain", b"not found\n")
            return
        if not (self.headers.get("Content-Type") or "").startswith("application/json"):
            self._json(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, {"error": "send application/json"})
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:
            self._json(HTTPStatus.BAD_REQUEST, {"error": "a bad Content-Length"})
            return
        if length > MAX_BODY:
            self._json(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, {"error": "label too large"})
            return
        try:
            body = jsonlimits.loads(self.rfile.read(length) or b"{}")
            if not isinstance(body, dict):
                raise ValueError("not an object")
            stored = self.app.store(body)
        except json.JSONDecodeError as exc:  # TooDeep too: nested past jsonlimits.MAX_DEPTH
            self._json(HTTPStatus.BAD_REQUEST, {"error": f"the body is not a JSON object: "
                                                         f"{exc.msg} (column {exc.colno})"})
            return
        except ValidationError as exc:
            self._json(HTTPStatus.BAD_REQUEST, {"error": L.describe(exc)})
            return
        except (EvalHarnessError, ValueError) as exc:
            self._json(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
            return
        except OSError as exc:  # the disk is full, the folder read-only: not saved
            if isinstance(exc, ConnectionError | TimeoutError):
                raise  # the connection itself: nothing to answer on
            self.app.say([f"a label was not saved: {exc}"])
            self._json(HTTPStatus.INTERNAL_SERVER_ERROR,
                       {"error": f"cannot save it: {exc.strerror or exc}"})
            return
        self._json(HTTPStatus.OK, stored)


class Server(ThreadingHTTPServer):
    """The threading server (IPv4), quiet about a browser that hangs up mid-answer or a
    connection that timed out."""

    daemon_threads = True
    request_timeout = REQUEST_TIMEOUT

    def handle_error(self, request, client_address) -> None:
        """Print a handler's traceback, unless the connection broke or timed out."""
        if isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            return
        super().handle_error(request, client_address)


class Server6(Server):
    """The same server on IPv6; bound to ``::`` it takes IPv4 connections too where the
    system allows it."""

    address_family = socket.AF_INET6

    def server_bind(self) -> None:
        """Bind; on ``::``, to IPv4 too (dual stack) when the system allows it."""
        if self.server_address[0] == "::":
            with contextlib.suppress(OSError, AttributeError):
                self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()


def make_server(app: App, host: str = "127.0.0.1", port: int = 0, *,
                request_timeout: float = REQUEST_TIMEOUT,
                handler: type[Handler] | None = None) -> ThreadingHTTPServer:
    """A server for ``app`` bound to ``host:port`` (0: a free port; an IPv6 address with or
    without brackets); ``app.hosts`` is set to the :class:`Hosts` check of that address.
    A connection silent for ``request_timeout`` seconds is closed. ``handler``: a
    :class:`Handler` subclass serving another app on the same guards (the monitor's feedback
    endpoint)."""
    bind = host.strip("[]")
    server = (Server6 if ":" in bind else Server)((bind, port), handler or Handler)
    server.request_timeout = request_timeout
    app.hosts = Hosts.for_bind(bind, server.server_address[1])
    server.app = app  # type: ignore[attr-defined]
    return server


def bind_problem(host: str, port: int, exc: OSError) -> str:
    """Why ``review serve`` cannot listen, and what to change: the port when it is taken or
    privileged, the address otherwise.

    >>> bind_problem("::1", 80, OSError(errno.EACCES, "Permission denied"))
    'cannot listen on [::1]:80 (Permission denied); choose another --port'
    >>> print(bind_problem("192.0.2.1", 0, OSError(errno.EADDRNOTAVAIL, "Cannot assign")))
    ... # doctest: +NORMALIZE_WHITESPACE
    cannot listen on 192.0.2.1:0 (Cannot assign): 192.0.2.1 is not an address of this
    machine; give --host one of its addresses (127.0.0.1, ::1, or 0.0.0.0 for every interface)
    """
    bound = host.strip("[]")
    where = f"[{bound}]:{port}" if ":" in bound else f"{bound}:{port}"
    reason = exc.strerror or str(exc)
    if exc.errno in (errno.EADDRINUSE, errno.EACCES):
        return f"cannot listen on {where} ({reason}); choose another --port"
    return (f"cannot listen on {where} ({reason}): {bound} is not an address of this "
            "machine; give --host one of its addresses (127.0.0.1, ::1, or 0.0.0.0 for every "
            "interface)")


def new_token() -> str:
    return secrets.token_urlsafe(24)
