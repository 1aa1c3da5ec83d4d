"""The ``openai`` judge backend: any OpenAI-compatible endpoint through the openai SDK.

Structured outputs (``response_format: json_schema``) from the task's pydantic schema, falling
back to JSON mode for servers that lack them; timeouts; retries with exponential backoff on
429, 5xx, timeouts, connection errors and HTTP answers that are not the expected JSON (a
proxy's HTML page, an empty body); one re-ask on an unparsable answer, then an error that
keeps the raw text. The API key is read from the environment variable the scenario names
(``OPENAI_API_KEY`` by default), is never written anywhere, and is redacted from every error
text; :attr:`Judge.warnings` says when it goes somewhere surprising.
"""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
import json
import os
import sys
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import openai
from pydantic import BaseModel, ValidationError

from evalharness.judge.base import Embeddings, Judge, JudgeConfig, Judgment
from evalharness.judge.tasks import JudgmentTask
from evalharness.redaction import add_secret, redact


class OddResponse(Exception):
    """The endpoint answered, but not with the JSON expected (a proxy's page, an empty body,
    JSON of another shape): a transient failure of that request, retried like a 5xx."""


RETRYABLE = (openai.RateLimitError, openai.InternalServerError, openai.APITimeoutError,
             openai.APIConnectionError, OddResponse)
DEFAULT_EMBEDDING_MODEL = "text-embedding-3-small"
LOCAL_PLACEHOLDER_KEY = "not-needed"  # local servers (vLLM, Ollama, llama.cpp) ignore the key
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
OPENAI_HOST = "api.openai.com"
OPENAI_URL = f"https://{OPENAI_HOST}/v1"


class OpenAIJudge(Judge):
    """A judge backed by an OpenAI-compatible chat and embeddings endpoint."""

    backend = "openai"
    is_llm = True

    def __init__(self, config: JudgeConfig) -> None:
        super().__init__(config)
        if not config.model:
            from evalharness.errors import ScenarioError

            raise ScenarioError("the openai judge needs `judge.model` (e.g. gpt-4.1-mini, or the "
                                "model name your vLLM/Ollama server serves)")
        key = os.environ.get(config.api_key_env)
        if key is None and config.base_url is None:
            from evalharness.errors import ScenarioError

            raise ScenarioError(f"the openai judge needs an API key in ${config.api_key_env} "
                                "(or `judge.base_url` for a local server that needs none)")
        self._key = key or LOCAL_PLACEHOLDER_KEY
        add_secret(key)
        self._clients: dict[str, list[openai.AsyncOpenAI]] = {}
        self._turns: dict[str, Iterator[openai.AsyncOpenAI]] = {}
        self._json_mode_only = bool(config.options.get("json_mode_only", False))
        if key:
            for text in key_warnings(config.api_key_env, self._urls()):
                self.warn(text)
        # Made now, not at the first request: each client costs tens of milliseconds (its TLS
        # set-up), which would otherwise hold up the first requests of the run.
        for url in dict.fromkeys([config.base_url, config.embedding_base_url or config.base_url]):
            self._client(url)

    def _urls(self) -> list[str]:
        """Where requests go: the chat endpoint, then the embeddings one if it differs."""
        chat = self.config.base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_URL
        embeddings = self.config.embedding_base_url or chat
        return list(dict.fromkeys([chat, embeddings]))

    @property
    def embedding_model(self) -> str | None:
        return self.config.embedding_model or DEFAULT_EMBEDDING_MODEL

    def _client(self, base_url: str | None) -> openai.AsyncOpenAI:
        """A client for ``base_url``, taking turns among ⌈concurrency / 16⌉ of them: each
        keeps its own connection pool, and the HTTP library scans its whole pool on every
        request, so one pool of 64 connections cost a third more time per request than four
        of 16."""
        name = base_url or ""
        if name not in self._clients:
            # Retries are ours (with accounting), so the SDK's own are off.
            self._clients[name] = [openai.AsyncOpenAI(
                api_key=self._key, base_url=base_url, timeout=self.config.timeout_s,
                max_retries=0) for _ in range(max(1, -(-self.config.concurrency // 16)))]
            self._turns[name] = itertools.cycle(self._clients[name])
        return next(self._turns[name])

    def close(self) -> None:
        """Close the HTTP clients on the private loop, then stop it (a client collected after
        its loop closed complains on stderr)."""
        clients = [c for group in self._clients.values() for c in group]
        self._clients, self._turns = {}, {}
        if clients and self._loop is not None:
            async def close_all() -> None:
                await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)

            self._submit(close_all())
        super().close()

    # -- chat ----------------------------------------------------------------------------------

    async def complete(self, task: JudgmentTask, inputs: BaseModel, key: str) -> Judgment:
        tally = _Tally()
        messages = task.messages(inputs)
        raw, error = await self._ask(task, messages, tally)
        output = None
        if raw is not None:
            output, problem = _parse(task, raw)
            if output is None:  # one re-ask, showing the judge its answer and the problem
                retry = [*messages, {"role": "assistant", "content": raw},
                         {"role": "user", "content": f"That answer is not valid: {problem}. "
                          "Reply with only the JSON object, matching the schema exactly."}]
                raw2, error = await self._ask(task, retry, tally)
                if raw2 is not None:
                    raw = raw2
                    output, problem = _parse(task, raw2)
                if output is None and error is None:
                    error = f"unparsable judge answer after one re-ask: {problem}"
        return Judgment(task=task.id, rubric_version=task.version, backend=self.backend,
                        model=self.model, key=key, output=output,
                        error=None if output is not None else error, raw=raw,
                        requests=tally.requests, prompt_tokens=tally.prompt,
                        completion_tokens=tally.completion)

    async def _ask(self, task: JudgmentTask, messages: list[dict], tally: _Tally
                   ) -> tuple[str | None, str | None]:
        """One chat completion with retries; ``(text, None)`` or ``(None, error)``."""
        client = self._client(self.config.base_url)
        structured = {"type": "json_schema", "json_schema": {
            "name": task.id, "schema": task.schema(), "strict": False}}

        async def call(response_format: dict) -> tuple[str | None, int, int]:
            body = {"model": self.model, "messages": messages,
                    "temperature": self.config.temperature, "response_format": response_format}
            if _RESPONSE is not None:
                # The SDK's documented call for a raw request (`client.post(path, body=...,
                # cast_to=httpx.Response)`): the same client, authentication, timeouts and
                # error classes as `chat.completions.create`, without the per-call conversion
                # of the parameters and of the answer into models, which cost half the
                # client's time per request at a judge concurrency of 64.
                raw = await client.post("/chat/completions", body=body, cast_to=_RESPONSE)
                return _chat_answer_json(raw)
            raw = await client.chat.completions.with_raw_response.create(**body)
            return _chat_answer(raw)

        try:
            if self._json_mode_only:
                text, prompt, completion = await self._retrying(
                    call, {"type": "json_object"}, tally)
            else:
                try:
                    text, prompt, completion = await self._retrying(call, structured, tally)
                except (openai.BadRequestError, openai.UnprocessableEntityError):
                    # The server lacks structured outputs: JSON mode from now on.
                    self._json_mode_only = True
                    text, prompt, completion = await self._retrying(
                        call, {"type": "json_object"}, tally)
        except (openai.OpenAIError, OddResponse) as exc:
            return None, _describe(exc)
        tally.prompt += prompt
        tally.completion += completion
        if not text:
            return None, "the judge returned an empty answer"
        return text, None

    async def _retrying(self, call, argument, tally: _Tally):
        attempt = 0
        while True:
            tally.requests += 1
            try:
                return await call(argument)
            except RETRYABLE as exc:
                if _never_sent(exc):  # refused before a byte went out: no request was made
                    tally.requests -= 1
                if attempt >= self.config.max_retries:
                    raise
                await asyncio.sleep(_backoff(attempt, exc))
                attempt += 1

    # -- embeddings ----------------------------------------------------------------------------

    async def embed(self, texts: list[str]) -> Embeddings:
        tally = _Tally()
        client = self._client(self.config.embedding_base_url or self.config.base_url)

        async def call(_: Any) -> tuple[list, int]:
            raw = await client.embeddings.with_raw_response.create(
                model=self.embedding_model, input=texts)
            return _embeddings_answer(raw)

        base = {"backend": self.backend, "model": self.embedding_model}
        try:
            rows, tokens = await self._retrying(call, None, tally)
        except (openai.OpenAIError, OddResponse) as exc:
            return Embeddings(None, error=_describe(exc), requests=tally.requests, **base)
        lengths = sorted({len(r) for r in rows})
        if len(lengths) > 1:
            return Embeddings(None, error=f"the embeddings endpoint returned vectors of "
                              f"different lengths ({', '.join(map(str, lengths))}) in one "
                              "answer; not cached, so a rerun asks again — if it persists, "
                              "check the embedding model and the server",
                              requests=tally.requests, prompt_tokens=tokens, **base)
        try:
            vectors = np.asarray(rows, dtype=float).reshape(len(rows), -1 if rows else 0)
        except (TypeError, ValueError):
            return Embeddings(None, error="the embeddings endpoint returned vectors that are "
                              "not lists of numbers; check `judge.embedding_model` and the "
                              "server", requests=tally.requests, prompt_tokens=tokens, **base)
        return Embeddings(vectors, requests=tally.requests, prompt_tokens=tokens, **base)


class _Tally:
    def __init__(self) -> None:
        self.requests = 0
        self.prompt = 0
        self.completion = 0


def _httpx_response() -> type | None:
    """The ``Response`` class of the HTTP library the openai SDK is built on (``httpx``, or its
    successor), for :meth:`openai.AsyncOpenAI.post`'s ``cast_to``; ``None`` if not found."""
    for klass in getattr(openai, "DefaultAsyncHttpxClient", object).__mro__[1:]:
        if klass.__name__ == "AsyncClient":
            module = sys.modules.get(klass.__module__.partition(".")[0])
            return getattr(module, "Response", None)
    return None


_RESPONSE = _httpx_response()


def _chat_answer_json(raw: Any) -> tuple[str | None, int, int]:
    """``(text, prompt_tokens, completion_tokens)`` of a raw HTTP chat completion response,
    read as JSON, or :class:`OddResponse` when it is not one.

    >>> class R:
    ...     status_code, headers = 200, {"content-type": "application/json"}
    ...     text = ('{"choices": [{"message": {"content": "{}"}}], '
    ...             '"usage": {"prompt_tokens": 3, "completion_tokens": 1}}')
    >>> _chat_answer_json(R())
    ('{}', 3, 1)
    >>> R.text = "<html>Bad gateway</html>"
    >>> _chat_answer_json(R())
    Traceback (most recent call last):
    ...
    evalharness.judge.openai_compat.OddResponse: the endpoint answered HTTP 200 with a application/json body, not JSON: '<html>Bad gateway</html>'
    """
    try:
        data = json.loads(raw.text)
    except (ValueError, TypeError, UnicodeDecodeError):
        raise OddResponse(_odd(raw, "not JSON")) from None
    try:
        choices = data["choices"]
        text = choices[0]["message"]["content"] if choices else None
        usage = data.get("usage") or {}
        prompt = usage.get("prompt_tokens") or 0
        completion = usage.get("completion_tokens") or 0
        if text is not None and not isinstance(text, str):
            raise TypeError(type(text).__name__)
        return text, int(prompt), int(completion)
    except (AttributeError, IndexError, KeyError, TypeError, ValueError):
        raise OddResponse(_odd(raw, "JSON that is not a chat completion")) from None


def _chat_answer(raw: Any) -> tuple[str | None, int, int]:
    """``(text, prompt_tokens, completion_tokens)`` of a raw chat completion response, or
    :class:`OddResponse` when it is not one."""
    parsed = _parsed(raw)
    try:
        choices = parsed.choices
        text = choices[0].message.content if choices else None
        usage = getattr(parsed, "usage", None)
        prompt = (getattr(usage, "prompt_tokens", 0) or 0) if usage is not None else 0
        completion = (getattr(usage, "completion_tokens", 0) or 0) if usage is not None else 0
        if text is not None and not isinstance(text, str):
            raise TypeError(type(text).__name__)
        return text, int(prompt), int(completion)
    except (AttributeError, IndexError, KeyError, TypeError, ValueError):
        raise OddResponse(_odd(raw, "JSON that is not a chat completion")) from None


def _embeddings_answer(raw: Any) -> tuple[list, int]:
    """``(vectors in input order, prompt_tokens)`` of a raw embeddings response, or
    :class:`OddResponse` when it is not one."""
    parsed = _parsed(raw)
    try:
        rows = sorted(parsed.data, key=lambda d: d.index)
        vectors = [list(r.embedding) for r in rows]
        usage = getattr(parsed, "usage", None)
        tokens = (getattr(usage, "prompt_tokens", 0) or 0) if usage is not None else 0
        return vectors, int(tokens)
    except (AttributeError, IndexError, KeyError, TypeError, ValueError):
        raise OddResponse(_odd(raw, "JSON that is not an embeddings list")) from None


def _parsed(raw: Any) -> Any:
    """The SDK's model of a raw response, or :class:`OddResponse` when the body is not JSON
    (the SDK hands back the text of a non-JSON body, and raises on an empty JSON one)."""
    try:
        parsed = raw.parse()
    except Exception:  # noqa: BLE001 — whatever the SDK raises on a body that is not JSON
        parsed = None
    if parsed is None or isinstance(parsed, str | bytes):
        raise OddResponse(_odd(raw, "not JSON"))
    return parsed


def _odd(raw: Any, what: str) -> str:
    """What came back instead of the expected JSON, quoting the start of the body."""
    status = getattr(raw, "status_code", "?")
    content_type = (raw.headers.get("content-type") or "").split(";")[0].strip() \
        if getattr(raw, "headers", None) is not None else ""
    try:
        body = " ".join((raw.text or "").split())
    except Exception:  # noqa: BLE001 — an undecodable body
        body = ""
    if not body:
        return f"the endpoint answered HTTP {status} with an empty body, {what}"
    quote = body if len(body) <= 120 else body[:120] + "…"
    kind = "JSON" if what.startswith("JSON") else f"a {content_type or 'untyped'} body"
    prefix = f"the endpoint answered HTTP {status} with "
    if kind == "JSON":
        return redact(f"{prefix}{what}: {quote!r}")
    return redact(f"{prefix}{kind}, {what}: {quote!r}")


def key_warnings(key_env: str, urls: list[str]) -> list[str]:
    """Warnings about where an API key taken from ``$key_env`` is sent (never the key).

    >>> key_warnings("OPENAI_API_KEY", ["https://api.openai.com/v1"])
    []
    >>> key_warnings("OPENAI_API_KEY", ["http://10.0.0.5:8000/v1"])[1][:62]
    'the judge sends its API key over plain http to 10.0.0.5, where'
    """
    out = []
    for url in urls:
        parts = urlsplit(url)
        host = parts.hostname or url
        if key_env == DEFAULT_KEY_ENV and host != OPENAI_HOST:
            out.append(f"the API key in ${DEFAULT_KEY_ENV} is sent to {host}, which is not the "
                       f"OpenAI API ({OPENAI_HOST}); if that server needs another key or none, "
                       "set `judge.api_key_env` to the variable that holds its key (an unset "
                       "variable sends a placeholder)")
        if parts.scheme == "http" and not _loopback(host):
            out.append(f"the judge sends its API key over plain http to {host}, where anyone "
                       "on the network path can read it; use an https base_url")
    return out


def _loopback(host: str) -> bool:
    """Whether ``host`` is this machine.

    >>> _loopback("localhost"), _loopback("127.0.0.1"), _loopback("::1"), _loopback("gpu-box")
    (True, True, True, False)
    """
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _parse(task: JudgmentTask, raw: str) -> tuple[BaseModel | None, str]:
    """The task's output from the judge's text (tolerating a fenced code block)."""
    text = raw.strip()
    if text.startswith("```"):
        text = text.strip("`")
        text = text[text.find("{"):] if "{" in text else text
    try:
        return task.output.model_validate_json(text), ""
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        return None, f"{where}: {first['msg']}"


def _never_sent(exc: BaseException) -> bool:
    """Whether a failed attempt never reached the server (the connection was refused or could
    not be opened), so it is no request: the endpoint received nothing and bills nothing.

    >>> class ConnectError(Exception): ...
    >>> refused = openai.APIConnectionError(request=None)
    >>> refused.__cause__ = ConnectError("refused")
    >>> _never_sent(refused), _never_sent(openai.APITimeoutError(request=None))
    (True, False)
    """
    cause = exc.__cause__ or exc.__context__
    return (isinstance(exc, openai.APIConnectionError)
            and not isinstance(exc, openai.APITimeoutError)
            and type(cause).__name__ == "ConnectError")  # the HTTP client's, whichever it is


def _backoff(attempt: int, exc: Exception) -> float:
    """Seconds to wait before retry ``attempt`` (0-based): Retry-After when given, else 2^n/2.

    >>> [_backoff(n, Exception()) for n in range(4)]
    [0.5, 1.0, 2.0, 4.0]
    """
    response = getattr(exc, "response", None)
    header = response.headers.get("retry-after") if response is not None else None
    if header:
        try:
            return min(float(header), 60.0)
        except ValueError:
            pass
    return min(0.5 * 2 ** attempt, 30.0)


def _describe(exc: Exception) -> str:
    """The error text of a failed request, secrets redacted.

    >>> _describe(OddResponse("the endpoint answered HTTP 200 with an empty body, not JSON"))
    'the endpoint answered HTTP 200 with an empty body, not JSON; a proxy or gateway may be \
answering instead of the server: check `judge.base_url`'
    """
    if isinstance(exc, OddResponse):
        return redact(f"{exc}; a proxy or gateway may be answering instead of the server: "
                      "check `judge.base_url`")
    status = getattr(exc, "status_code", None)
    kind = type(exc).__name__
    message = (str(exc).splitlines() or [""])[0][:300]
    return redact(f"{kind}{f' (HTTP {status})' if status else ''}: {message}")
