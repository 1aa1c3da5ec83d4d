"""``evalharness review serve``: a small local web page over a run folder (the standard
library's threading HTTP server; no front-end build, nothing fetched from anywhere).

The page writes files, so it is guarded three ways: it binds to 127.0.0.1 unless told
otherwise; every request carries a random token (in the URL the command prints, and in a
header of every write); and the ``Host`` header must name the address it is bound to (a web
page on another site cannot reach it through DNS rebinding). Writes also must be
``application/json``, which a cross-site form cannot send.

Routes: ``GET /?t=TOKEN&i=N&r=NAME`` the N-th sampled case for reviewer NAME;
``POST /label`` one label (JSON), appended to ``review/labels.jsonl`` before the answer;
``GET /labels?t=TOKEN&r=NAME`` the reviewer's labels in force, as JSON. With ``--pairwise``
the page shows the same case's two answers side by side, in an order that is random per case
and never named, and the preference is stored in run A's ``review/pairwise.jsonl`` with both
runs' ids.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from pydantic import ValidationError

from evalharness.errors import EvalHarnessError
from evalharness.review import labels as L
from evalharness.review.page import render_pairwise, render_review
from evalharness.review.session import Review, case_view

MAX_BODY = 64_000


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
    hosts: set[str]
    reviewer: str = ""
    pairing: Pairing | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def ids(self) -> list[str]:
        if self.pairing is not None:
            return self.pairing.ids
        return [self.review.run.results[i].case.id for i in self.review.chosen]

    # -- reading and writing labels ------------------------------------------------------

    def labels_of(self, reviewer: str) -> list[L.Label]:
        path = self.pairing.path if self.pairing else self.review.labels_path
        rows = [lab for lab in L.latest(L.read(path)) if lab.reviewer == reviewer]
        if self.pairing:
            rows = [lab for lab in rows if lab.runs == self.pairing.runs]
        return rows

    def labels_view(self, reviewer: str) -> list[dict[str, Any]]:
        """The reviewer's labels as ``GET /labels`` gives them; pairwise, only the side
        chosen (left, right, tie), never which run that was."""
        mine = self.labels_of(reviewer)
        if self.pairing is None:
            return [json.loads(lab.line()) for lab in mine]
        return [{"case": lab.case, "choice": self.side(lab), "note": lab.note, "at": lab.at}
                for lab in mine]

    def side(self, lab: L.Label) -> str | None:
        """A stored preference as the side of the page it was given on."""
        if lab.label == "tie":
            return "tie"
        assert self.pairing is not None
        return "left" if (lab.label == "A") == self.pairing.a_is_left(lab.case) else "right"

    def store(self, body: dict[str, Any]) -> dict[str, Any]:
        """Check and append one label; the stored label as the page needs it."""
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
                stored = L.append(self.pairing.path, [lab])[0]
            return {"case": case, "choice": choice or None, "at": stored.at}
        lab = L.Label.model_validate({k: v for k, v in body.items() if k in (
            "case", "component", "metric", "item", "label", "reviewer", "note",
            "correction")})
        if lab.label is not None:
            self.review.target(lab)
        else:
            self.review.targets(lab.case)  # an unknown case is an error even when clearing
        with self.lock:
            stored = L.append(self.review.labels_path, [lab])[0]
        return json.loads(stored.line())

    # -- pages -------------------------------------------------------------------------------

    def page(self, index: int, reviewer: str, nonce: str) -> str:
        ids = self.ids
        index = max(0, min(index, len(ids) - 1))
        mine = self.labels_of(reviewer) if reviewer else []
        if self.pairing is not None:
            return render_pairwise(self, index, reviewer, mine, nonce)
        result = self.review.result(ids[index])
        return render_review(self, index, reviewer, case_view(self.review, result), mine,
                             nonce)


class Handler(BaseHTTPRequestHandler):
    """One request; the :class:`App` is the server's ``app``."""

    server_version = "evalharness-review"
    protocol_version = "HTTP/1.1"

    @property
    def app(self) -> App:
        return self.server.app  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib's name
        if getattr(self.server, "verbose", False):
            super().log_message(format, *args)

    def _allowed(self, token: str | None) -> bool:
        host = (self.headers.get("Host") or "").lower()
        if host not in self.app.hosts:
            self._send(HTTPStatus.FORBIDDEN, "text/plain",
                       b"this page answers only at the address it was started on\n")
            return False
        if not token or not hmac.compare_digest(token, self.app.token):
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
        reviewer = query.get("r", self.app.reviewer).strip()[:80]
        if url.path == "/labels":
            self._json(HTTPStatus.OK, self.app.labels_view(reviewer))
            return
        if url.path != "/":
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
            body = json.loads(self.rfile.read(length) or b"{}")
            if not isinstance(body, dict):
                raise ValueError("not an object")
            stored = self.app.store(body)
        except ValidationError as exc:
            self._json(HTTPStatus.BAD_REQUEST, {"error": L.describe(exc)})
            return
        except (EvalHarnessError, ValueError) as exc:
            self._json(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
            return
        self._json(HTTPStatus.OK, stored)


class Server(ThreadingHTTPServer):
    """The threading server, quiet about a browser that hangs up mid-answer."""

    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def make_server(app: App, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """A server for ``app`` bound to ``host:port`` (0: a free port); ``app.hosts`` is set to
    the names the Host header may carry."""
    server = Server((host, port), Handler)
    bound = server.server_address[1]
    names = {host, "localhost", "127.0.0.1"} if host in ("127.0.0.1", "localhost") else {host}
    app.hosts = {f"{n}:{bound}" for n in names}
    server.app = app  # type: ignore[attr-defined]
    return server


def new_token() -> str:
    return secrets.token_urlsafe(24)
