"""One JSON request to an OpenAI-compatible endpoint, under a deadline and a byte cap, whose
errors name the endpoint and never the key.

The ``openai`` judge backend sends its requests here, over the HTTP library the openai SDK is
built on (``httpx`` for openai 1.x and 2.x, ``httpx2`` for 3.x), reached through the SDK's
public :data:`openai.DefaultAsyncHttpxClient` — the same library, connection pools, proxies
and TLS set-up as the SDK, without its per-request machinery (request options copied and
validated, its auth and retry layers: with its pools, 40–55% of the judge's CPU per request
at a concurrency of 64), nor its reading of every answer whole:

* ``timeout_s`` is a deadline for the **whole** request — connecting, sending, and reading
  the answer to its last byte — not a limit per read that every byte starts again;
* an answer's body is counted as it arrives and refused past a cap (a ``Content-Length`` over
  the cap before any of it is read), so a runaway answer costs at most the cap in memory;
* a failure is an :class:`EndpointError` named like the SDK's exception classes
  (``APIConnectionError``, ``APITimeoutError``, ``RateLimitError`` …) whose text names the URL
  (without credentials or query), with what to check.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import openai

import evalharness.jsonlimits as jsonlimits
from evalharness.redaction import redact

ERROR_BODY_BYTES = 65_536
"""Most bytes read of an answer with an error status (4xx, 5xx): its message is quoted from
them; the rest is not read."""

POOL_SIZE = 2
"""Requests in flight per connection pool (each request goes to the least busy pool). The
HTTP library scans a whole pool on every request — httpcore 1.x (openai 1.x, 2.x) checks the
socket of every idle connection — so small pools are cheaper: at a judge concurrency of 64,
a request cost 1.8 ms of CPU with pools of 16 under openai 2.54 and 0.8 ms with pools of 2;
0.7–0.8 ms either way under openai 3.63 (httpcore2)."""

_STATUS_KINDS = {400: "BadRequestError", 401: "AuthenticationError",
                 403: "PermissionDeniedError", 404: "NotFoundError", 409: "ConflictError",
                 422: "UnprocessableEntityError", 429: "RateLimitError"}


def _http_library() -> Any:
    """The HTTP library the installed openai SDK is built on, found through its public
    ``DefaultAsyncHttpxClient`` (a subclass of that library's ``AsyncClient``).

    >>> _http_library().__name__ in ("httpx", "httpx2")
    True
    """
    for klass in getattr(openai, "DefaultAsyncHttpxClient", object).__mro__:
        if klass.__name__ == "AsyncClient":
            module = sys.modules.get(klass.__module__.partition(".")[0])
            if module is not None and hasattr(module, "Request"):
                return module
    raise ImportError(f"openai {openai.__version__} has no DefaultAsyncHttpxClient built on "
                      "httpx or httpx2; the openai judge backend supports openai>=1.40,<4")


HTTP = _http_library()
"""The HTTP library: ``httpx`` or ``httpx2`` (they share their API)."""


class EndpointError(Exception):
    """A failed attempt: its kind (named like the openai SDK's exception classes), whether a
    retry may help, whether the endpoint received anything, and the wait it asked for.

    >>> str(EndpointError("RateLimitError", "slow down", status=429, where="http://h/v1/x"))
    'RateLimitError (HTTP 429) from http://h/v1/x: slow down'
    """

    def __init__(self, kind: str, message: str, *, status: int | None = None,
                 where: str | None = None, retryable: bool = False, never_sent: bool = False,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.kind, self.message, self.status, self.where = kind, message, status, where
        self.retryable, self.never_sent, self.retry_after = retryable, never_sent, retry_after

    def __str__(self) -> str:
        """The error text: kind, status and URL, message (secrets redacted)."""
        status = f" (HTTP {self.status})" if self.status is not None else ""
        source = f" from {self.where}" if self.status is not None and self.where else ""
        return redact(f"{self.kind}{status}{source}: {self.message}")


@dataclass
class Answer:
    """An answer read whole (within its cap): status, content type and body."""

    status_code: int
    content_type: str
    content: bytes
    where: str
    """The URL it came from, for error texts (:func:`display_url`)."""
    setting: str = "judge.base_url"
    """The scenario field that sets that URL, for the advice in error texts."""

    @property
    def text(self) -> str:
        """The body as text (undecodable bytes replaced)."""
        return self.content.decode("utf-8", "replace")


class Endpoint:
    """POSTs JSON to one base URL: each request under a deadline of ``timeout_s``, its answer
    under a byte cap, spread over one connection pool per :data:`POOL_SIZE` requests of
    ``concurrency``."""

    def __init__(self, base_url: str, key: str, *, timeout_s: float, concurrency: int,
                 setting: str = "judge.base_url") -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.setting = setting
        """The scenario field that sets this URL, for the advice in error texts."""
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json",
                   "Accept": "application/json",
                   "User-Agent": f"evalharness (openai-python {openai.__version__})"}
        # as the SDK does: the organisation and project from the environment, when set
        for name, header in (("OPENAI_ORG_ID", "OpenAI-Organization"),
                             ("OPENAI_PROJECT_ID", "OpenAI-Project")):
            if os.environ.get(name):
                headers[header] = os.environ[name]
        self._headers = HTTP.Headers(headers)
        self._urls: dict[str, tuple[Any, str]] = {}  # path -> (URL, as error texts show it)
        pools = max(1, -(-concurrency // POOL_SIZE))
        # one TLS context for every pool (each would load the certificates again: ~40 ms)
        tls = {"verify": HTTP.create_ssl_context()} if hasattr(HTTP, "create_ssl_context") \
            else {}
        self._clients = [openai.DefaultAsyncHttpxClient(**tls) for _ in range(pools)]
        self._busy = [0] * pools  # requests in flight per pool

    def url(self, path: str) -> str:
        """The URL of ``path`` under the base URL, as error texts show it."""
        return display_url(f"{self.base_url}/{path.lstrip('/')}")

    async def post(self, path: str, body: dict[str, Any], cap: int, cap_says: str) -> Answer:
        """POST ``body`` as JSON to ``path``; the answer, read whole within ``cap`` bytes
        (``cap_says``: where the cap comes from), or :class:`EndpointError`."""
        known = self._urls.get(path)
        if known is None:
            known = self._urls[path] = (HTTP.URL(f"{self.base_url}/{path.lstrip('/')}"),
                                        self.url(path))
        url, where = known
        request = HTTP.Request("POST", url, headers=self._headers,
                               content=json.dumps(body).encode())
        busy = self._busy
        pool = busy.index(min(busy))  # the least busy: each pool stays near POOL_SIZE
        busy[pool] += 1
        try:
            async with asyncio.timeout(self.timeout_s):
                response = await self._clients[pool].send(request, stream=True)
                try:
                    status = response.status_code
                    content = await _read(response, cap if status < 400 else ERROR_BODY_BYTES,
                                          strict=status < 400, where=where, says=cap_says)
                finally:
                    await response.aclose()
        except TimeoutError:
            raise self._deadline(where) from None
        except HTTP.TimeoutException:  # the library's own limits, should they come first
            raise self._deadline(where) from None
        except HTTP.ConnectError as exc:
            raise EndpointError("APIConnectionError", f"could not connect to {where} "
                                f"({_cause(exc)}); is the server running? check "
                                f"`{self.setting}`", retryable=True, never_sent=True) from None
        except HTTP.RequestError as exc:
            raise EndpointError("APIConnectionError", f"the connection to {where} failed "
                                f"({_cause(exc)}); check `{self.setting}`",
                                retryable=True) from None
        finally:
            busy[pool] -= 1
        content_type = (response.headers.get("content-type") or "").split(";")[0].strip()
        if status >= 400:
            raise _status_error(status, response.headers.get("retry-after"), content, where)
        return Answer(status, content_type, content, where, self.setting)

    def _deadline(self, where: str) -> EndpointError:
        """The error of a request past its deadline."""
        return EndpointError("APITimeoutError", f"no complete answer from {where} within "
                             f"judge.timeout_s = {self.timeout_s:g} s (the deadline of the "
                             "whole request: connecting, sending and reading the answer)",
                             retryable=True)

    async def aclose(self) -> None:
        """Close the connection pools."""
        await asyncio.gather(*(c.aclose() for c in self._clients), return_exceptions=True)


class ResponseTooLarge(EndpointError):
    """An answer larger than its cap: refused as it arrived, the rest never read. Not
    retried (asking again would read as much again)."""


async def _read(response: Any, cap: int, *, strict: bool, where: str, says: str) -> bytes:
    """The body of ``response``, counted as it arrives. Past ``cap`` bytes: with ``strict``,
    :class:`ResponseTooLarge` (at once when the ``Content-Length`` says so); without, the
    first ``cap`` bytes (an error answer's message)."""
    length = response.headers.get("content-length") or ""
    if strict and length.isdigit() and int(length) > cap:
        raise _too_large(cap, says, where, f"it announced {int(length):,} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > cap:
            if strict:
                raise _too_large(cap, says, where, "the rest was not read")
            chunks.append(chunk[:len(chunk) - (size - cap)])
            break
        chunks.append(chunk)
        if size == cap and not strict:  # the message is all there is room for
            break
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _too_large(cap: int, says: str, where: str, detail: str) -> ResponseTooLarge:
    """The error of an answer over its cap.

    >>> str(_too_large(1_000_000, "the option", "http://h/v1/x", "it announced 2 MB"))
    'ResponseTooLarge: the answer from http://h/v1/x is larger than its cap of 1,000,000 \
bytes (the option; it announced 2 MB)'
    """
    return ResponseTooLarge("ResponseTooLarge", f"the answer from {where} is larger than its "
                            f"cap of {cap:,} bytes ({says}; {detail})")


def _status_error(status: int, retry_after: str | None, content: bytes,
                  where: str) -> EndpointError:
    """The error of an answer with an error status, quoting its message.

    >>> body = b'{"error": {"message": "Incorrect API key"}}'
    >>> str(_status_error(401, None, body, "http://h/v1/x"))
    'AuthenticationError (HTTP 401) from http://h/v1/x: Incorrect API key'
    >>> e = _status_error(503, "2", b"<html>busy</html>", "http://h/v1/x")
    >>> e.kind, e.retryable, e.retry_after, e.message
    ('InternalServerError', True, 2.0, '<html>busy</html>')
    """
    kind = _STATUS_KINDS.get(status) or ("InternalServerError" if status >= 500
                                         else "APIStatusError")
    text = " ".join(content.decode("utf-8", "replace").split())
    try:
        data = jsonlimits.loads(content)
        error = data.get("error", data) if isinstance(data, dict) else data
        message = error.get("message") if isinstance(error, dict) else None
        text = message if isinstance(message, str) and message else text
    except ValueError:
        pass
    try:
        wait = float(retry_after) if retry_after else None
    except ValueError:
        wait = None
    return EndpointError(kind, (text or "(no message)")[:300], status=status, where=where,
                         retryable=status == 429 or status >= 500, retry_after=wait)


def _cause(exc: BaseException) -> str:
    """The HTTP library's exception, for an error text: its class and message.

    >>> _cause(HTTP.ConnectError("[Errno 111] Connection refused"))
    'ConnectError: [Errno 111] Connection refused'
    """
    message = str(exc).strip() or repr(exc.__cause__ or exc.__context__ or "")
    return f"{type(exc).__name__}: {message}"


def display_url(url: str) -> str:
    """``url`` as error texts show it: without credentials, query or fragment (where a key
    may hide).

    >>> display_url("https://me:sk-secret@gw.example.com:8443/v1/chat/completions?api-key=k")
    'https://gw.example.com:8443/v1/chat/completions'
    >>> display_url("http://[::1]:8000/v1/embeddings")
    'http://[::1]:8000/v1/embeddings'
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    return redact(urlunsplit((parts.scheme, host + port, parts.path, "", "")))
