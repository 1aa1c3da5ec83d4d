"""The ``openai`` judge backend: any OpenAI-compatible endpoint, over the openai SDK's HTTP
library.

Structured outputs (``response_format: json_schema``) from the task's pydantic schema, falling
back to JSON mode, then to JSON asked for in the prompt alone, for servers that lack them (what
an endpoint accepts is remembered in the judge cache); a deadline of ``timeout_s`` for each whole
request and a byte cap on each answer (:mod:`evalharness.judge.endpoint`); retries with
exponential backoff on 429, 5xx, deadlines, connection errors and HTTP answers that are not
the expected JSON (a proxy's HTML page, an empty body); one re-ask on an unparsable answer,
then an error that keeps the raw text. Errors name the endpoint's URL. The API key is read
from the environment variable the scenario names (``OPENAI_API_KEY`` by default), is never
written anywhere, and is redacted from every error text; :attr:`Judge.warnings` says when it
goes somewhere surprising.
"""

from __future__ import annotations

import asyncio
import base64
import os
from typing import Any
from urllib.parse import urlsplit

import numpy as np
from pydantic import BaseModel, ValidationError

import evalharness.jsonlimits as jsonlimits
from evalharness.addresses import is_loopback
from evalharness.judge.base import Embeddings, Judge, JudgeConfig, Judgment
from evalharness.judge.endpoint import Answer, Endpoint, EndpointError
from evalharness.judge.tasks import JudgmentTask
from evalharness.redaction import add_secret, redact


class OddResponse(Exception):
    """The endpoint answered, but not with the JSON expected (a proxy's page, an empty body,
    JSON of another shape): a transient failure of that request, retried like a 5xx."""

    def __init__(self, message: str, raw: Answer | None = None) -> None:
        """``message``, about the answer ``raw`` (whose URL error texts name)."""
        super().__init__(message)
        self.where = raw.where if raw is not None else None
        self.setting = raw.setting if raw is not None else "judge.base_url"


DEFAULT_EMBEDDING_MODEL = "text-embedding-3-small"
LOCAL_PLACEHOLDER_KEY = "not-needed"  # local servers (vLLM, Ollama, llama.cpp) ignore the key
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
OPENAI_HOST = "api.openai.com"
OPENAI_URL = f"https://{OPENAI_HOST}/v1"

MAX_RESPONSE_BYTES = 10_000_000
"""Default cap on one answer's body (``options.max_response_bytes``). A judge's chat
completion is a few kB, and even 100,000 tokens of text are about 0.5 MB; 10 MB leaves twenty
times that, while a runaway answer (600 MB took 3.5 GB to read and parse) stops at 10 MB."""

EMBEDDING_BYTES_PER_TEXT = 131_072
"""What an embeddings answer may take per text on top of ``max_response_bytes``: a vector of
4,096 dimensions written as JSON numbers (about 24 bytes each), or 3,072 pretty-printed. The
client asks for base64 (5.4 bytes a dimension), as the openai SDK does; servers that ignore
that answer in JSON numbers. With the default batch of 256 texts: 43.6 MB."""

OPTIONS = {"json_mode_only": "ask in JSON mode from the start (servers without structured "
                             "outputs)",
           "max_response_bytes": f"the most bytes of one answer (default {MAX_RESPONSE_BYTES:,}"
                                 f"; an embeddings answer {EMBEDDING_BYTES_PER_TEXT:,} more per "
                                 "text)"}
"""The backend's ``judge.options``, and what each does."""


PROMPTED = "prompted"
FORMATS = ("json_schema", "json_object", PROMPTED)
"""How a judgment's JSON is asked for, best first: structured outputs (the task's schema),
JSON mode, or no ``response_format`` at all (the schema is in the system prompt either way)."""

_REPEATED = 1
"""The attempt at which an HTTP 500 to a ``response_format`` counts as a refusal."""


def _refusal(exc: EndpointError, attempt: int) -> bool:
    """Whether ``exc`` refuses the format asked in: HTTP 400 or 422, or a 500 for the second
    time running (once may be a passing failure).

    >>> e = lambda status: EndpointError("APIStatusError", "no", status=status)
    >>> _refusal(e(400), 0), _refusal(e(500), 0), _refusal(e(500), 1), _refusal(e(503), 1)
    (True, False, True, False)
    """
    return exc.status in (400, 422) or (exc.status == 500 and attempt >= _REPEATED)


def _is_500(exc: Exception) -> bool:
    return isinstance(exc, EndpointError) and exc.status == 500


def _said(fmt: str) -> str:
    """A format as the warnings say it."""
    return "JSON asked for in the prompt" if fmt == PROMPTED else f"response_format {fmt}"


class OpenAIJudge(Judge):
    """A judge backed by an OpenAI-compatible chat and embeddings endpoint."""

    backend = "openai"
    is_llm = True

    def __init__(self, config: JudgeConfig) -> None:
        super().__init__(config)
        from evalharness.errors import ScenarioError

        if not config.model:
            raise ScenarioError("the openai judge needs `judge.model` (e.g. gpt-4.1-mini, or the "
                                "model name your vLLM/Ollama server serves)")
        key = os.environ.get(config.api_key_env)
        if key is None and config.base_url is None:
            raise ScenarioError(f"the openai judge needs an API key in ${config.api_key_env} "
                                "(or `judge.base_url` for a local server that needs none)")
        problem = options_problem(config.options)
        if problem:
            raise ScenarioError(problem)
        self._key = key or LOCAL_PLACEHOLDER_KEY
        add_secret(key)
        self._json_mode_only = bool(config.options.get("json_mode_only", False))
        self._format: str | None = None
        """The format asked in (:data:`FORMATS`), once known (:meth:`_format_now`)."""
        self.max_response_bytes = int(config.options.get("max_response_bytes",
                                                         MAX_RESPONSE_BYTES))
        """The cap on one chat answer's body; an embeddings answer may take
        :data:`EMBEDDING_BYTES_PER_TEXT` more per text."""
        if key:
            for text in key_warnings(config.api_key_env, self._urls()):
                self.warn(text)
        self._endpoints: tuple[Endpoint, Endpoint] | None = None
        self._connect()  # now, not at the first request, which it would hold up (TLS set-up)

    def _connect(self) -> tuple[Endpoint, Endpoint]:
        """The chat and the embeddings endpoint (the same one when their URLs are), made
        afresh after :meth:`close`."""
        if self._endpoints is None:
            config = self.config
            chat, embeddings = self._urls()[0], self._urls()[-1]
            setting = "judge.base_url" if config.base_url else \
                "judge.base_url (or $OPENAI_BASE_URL)"
            first = Endpoint(chat, self._key, timeout_s=config.timeout_s,
                             concurrency=config.concurrency, setting=setting)
            second = first if embeddings == chat else Endpoint(
                embeddings, self._key, timeout_s=config.timeout_s,
                concurrency=config.embedding_concurrency or config.concurrency,
                setting="judge.embedding_base_url")
            self._endpoints = (first, second)
        return self._endpoints

    def _urls(self) -> list[str]:
        """Where requests go: the chat endpoint, then the embeddings one if it differs."""
        chat = self.config.base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_URL
        embeddings = self.config.embedding_base_url or chat
        return list(dict.fromkeys([chat, embeddings]))

    @property
    def embedding_model(self) -> str | None:
        return self.config.embedding_model or DEFAULT_EMBEDDING_MODEL

    def close(self) -> None:
        """Close the connection pools on the private loop, then stop it (a client collected
        after its loop closed complains on stderr); they are made afresh if used again."""
        endpoints = list(dict.fromkeys(self._endpoints or ()))
        self._endpoints = None
        if endpoints and self._loop is not None:
            async def close_all() -> None:
                await asyncio.gather(*(e.aclose() for e in endpoints), return_exceptions=True)

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
                    if tally.cut:
                        limit = (f"judge.max_tokens = {self.config.max_tokens}"
                                 if self.config.max_tokens is not None
                                 else "the server's own limit")
                        error = (f"the judge's answer was cut at its token limit ({limit}; "
                                 "finish_reason: length) before its JSON ended, twice: raise "
                                 "judge.max_tokens, or judge with a model that answers "
                                 f"briefly ({problem})")
        return Judgment(task=task.id, rubric_version=task.version, backend=self.backend,
                        model=self.model, key=key, output=output,
                        error=None if output is not None else error, raw=raw,
                        requests=tally.requests, prompt_tokens=tally.prompt,
                        completion_tokens=tally.completion,
                        unavailable=output is None and tally.unavailable)

    async def _ask(self, task: JudgmentTask, messages: list[dict], tally: _Tally
                   ) -> tuple[str | None, str | None]:
        """One chat completion with retries; ``(text, None)`` or ``(None, error)``."""
        endpoint = self._connect()[0]
        formats = {"json_schema": {"type": "json_schema", "json_schema": {
            "name": task.id, "schema": task.schema(), "strict": False}},
            "json_object": {"type": "json_object"}}

        async def call(fmt: str) -> tuple[str | None, int, int, bool]:
            body = {"model": self.model, "messages": messages,
                    "temperature": self.config.temperature}
            if self.config.max_tokens is not None:
                body["max_tokens"] = self.config.max_tokens
            if fmt in formats:  # "prompted": the schema is in the system prompt only
                body["response_format"] = formats[fmt]
            answer = await endpoint.post("chat/completions", body, self.max_response_bytes,
                                         "options.max_response_bytes")
            return _chat_answer(answer)

        try:
            text, prompt, completion, cut = await self._negotiated(call, tally)
        except (EndpointError, OddResponse) as exc:
            tally.unavailable = _down(exc)
            return None, _describe(exc)
        tally.prompt += prompt
        tally.completion += completion
        tally.cut = cut
        if not text:
            return None, "the judge returned an empty answer"
        return text, None

    async def _negotiated(self, call, tally: _Tally):
        """``call`` in the best format the endpoint accepts (:data:`FORMATS`), starting from
        the one it accepted last (remembered in the judge cache across runs). An answer that
        refuses a format — HTTP 400 or 422, or 500 twice running (llama-cpp-python's server
        answers ``json_schema`` so) — has the next formats tried once each; the first that
        works is used from then on. A server that fails whatever it is asked is retried in
        the format it was asked in, as any failure."""
        fmt = self._format_now()
        try:
            return await self._retrying(call, fmt, tally, give_up=_refusal if
                                        fmt != PROMPTED else None)
        except EndpointError as exc:
            if fmt == PROMPTED or not _refusal(exc, _REPEATED):
                raise
            refused = exc
        for lower in FORMATS[FORMATS.index(fmt) + 1:]:
            tally.requests += 1
            try:
                result = await call(lower)
            except EndpointError as probe:
                if probe.never_sent:
                    tally.requests -= 1
                if _refusal(probe, _REPEATED):
                    continue  # refused this one too: the next
                break  # failing, not refusing
            except OddResponse:
                break
            self._learned(fmt, lower, refused)
            return result
        if refused.status in (400, 422):
            raise refused
        return await self._retrying(call, fmt, tally)  # a failing server: retried as any

    def _format_now(self) -> str:
        """The format to ask in: the one this judge learned, else the one remembered for this
        endpoint and model (read once), else ``json_schema`` (``json_object`` with
        ``options.json_mode_only``)."""
        if self._format is None:
            self._format = "json_object" if self._json_mode_only else "json_schema"
            cache = self.cache if self.config.cache_mode == "use" else None
            remembered = cache.recall(self._format_key()) if cache is not None else None
            if remembered in FORMATS and FORMATS.index(remembered) > FORMATS.index(
                    self._format):
                self._format = remembered
                self.warn(f"{self._urls()[0]}: asking {self.model} with "
                          f"{_said(remembered)}, as this endpoint refused the better formats "
                          "before (remembered in the judge cache; --refresh-cache asks afresh)")
        return self._format

    def _learned(self, refused: str, works: str, exc: EndpointError) -> None:
        """``works`` from now on, for this judge and — in the judge cache — later runs."""
        self._format = works
        status = f"HTTP {exc.status}" if exc.status is not None else exc.kind
        self.warn(f"{self._urls()[0]}: the server refused response_format {refused} "
                  f"({status}); asking {self.model} with {_said(works)} from now on "
                  "(remembered for this endpoint and model in the judge cache)")
        cache = self.cache
        if cache is not None:
            cache.remember(self._format_key(), works)

    def _format_key(self) -> str:
        return f"response_format\0{self._urls()[0]}\0{self.model}"

    async def _retrying(self, call, argument, tally: _Tally, give_up=None):
        """``call(argument)``, again after a retryable failure, up to ``max_retries`` times
        with backoff; every attempt the endpoint received counts in ``tally.requests``.
        ``give_up(exc, attempt)``: raise at once when true (a refused format)."""
        attempt = 0
        while True:
            tally.requests += 1
            try:
                return await call(argument)
            except (EndpointError, OddResponse) as exc:
                if getattr(exc, "never_sent", False):  # refused before a byte went out
                    tally.requests -= 1
                if give_up is not None and isinstance(exc, EndpointError) \
                        and give_up(exc, attempt):
                    raise
                if not getattr(exc, "retryable", True) or attempt >= self.config.max_retries:
                    raise
                quick = give_up is not None and _is_500(exc) and not attempt  # refusal?
                await asyncio.sleep(0.0 if quick else _backoff(attempt, exc))
                attempt += 1

    # -- embeddings ----------------------------------------------------------------------------

    async def embed(self, texts: list[str]) -> Embeddings:
        tally = _Tally()
        endpoint = self._connect()[1]
        cap = self.max_response_bytes + EMBEDDING_BYTES_PER_TEXT * len(texts)
        says = (f"options.max_response_bytes + {EMBEDDING_BYTES_PER_TEXT:,} bytes per text, "
                f"for {len(texts)} text{'s' if len(texts) != 1 else ''}")
        body = {"model": self.embedding_model, "input": texts, "encoding_format": "base64"}

        async def call(_: Any) -> tuple[list, int]:
            return _embeddings_answer(await endpoint.post("embeddings", body, cap, says))

        base = {"backend": self.backend, "model": self.embedding_model}
        try:
            rows, tokens = await self._retrying(call, None, tally)
        except (EndpointError, OddResponse) as exc:
            return Embeddings(None, error=_describe(exc), requests=tally.requests,
                              unavailable=_down(exc), **base)
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
    """What one judgment's requests cost: requests the endpoint received, tokens."""

    def __init__(self) -> None:
        self.requests = 0
        self.prompt = 0
        self.completion = 0
        self.cut = False
        """Whether the last answer ended at its token limit."""
        self.unavailable = False
        """Whether the last request failed in a way a retry later may mend (connection,
        deadline, HTTP 429 or 5xx) after the retries: the judge was down, not wrong."""


def options_problem(options: dict[str, Any]) -> str | None:
    """What is wrong with the backend's ``judge.options``, or ``None``.

    >>> options_problem({"json_mode_only": True, "max_response_bytes": 1_000_000}) is None
    True
    >>> options_problem({"max_response_bytes": 0})
    'judge.options.max_response_bytes must be a whole number of bytes above 0, not 0'
    >>> options_problem({"max_bytes": 5})[:62]
    "judge.options: the openai judge has no option 'max_bytes'; it "
    """
    for name in options:
        if name not in OPTIONS:
            known = "; ".join(f"{k}: {v}" for k, v in OPTIONS.items())
            return f"judge.options: the openai judge has no option {name!r}; it has {known}"
    cap = options.get("max_response_bytes", MAX_RESPONSE_BYTES)
    if isinstance(cap, bool) or not isinstance(cap, int) or cap <= 0:
        return ("judge.options.max_response_bytes must be a whole number of bytes above 0, "
                f"not {cap!r}")
    return None


def _json(raw: Answer) -> Any:
    """The body of an answer as JSON, or :class:`OddResponse` quoting it.

    >>> _json(Answer(200, "application/json", b'{"a": 1}', "u"))
    {'a': 1}
    """
    try:
        return jsonlimits.loads(raw.content)
    except (ValueError, UnicodeDecodeError):
        raise OddResponse(_odd(raw, "not JSON"), raw) from None


def _chat_answer(raw: Answer) -> tuple[str | None, int, int, bool]:
    """``(text, prompt_tokens, completion_tokens, cut)`` of a chat completion answer (``cut``:
    it ended at its token limit, ``finish_reason: length``), or :class:`OddResponse` when it
    is not one.

    >>> ok = (b'{"choices": [{"message": {"content": "{}"}}], '
    ...       b'"usage": {"prompt_tokens": 3, "completion_tokens": 1}}')
    >>> _chat_answer(Answer(200, "application/json", ok, "http://h/v1/chat/completions"))
    ('{}', 3, 1, False)
    >>> try:
    ...     _chat_answer(Answer(200, "text/html", b"<p>Bad gateway</p>", "http://h/v1/x"))
    ... except OddResponse as exc:
    ...     print(exc)
    the endpoint answered HTTP 200 with a text/html body, not JSON: '<p>Bad gateway</p>'
    """
    data = _json(raw)
    try:
        choices = data["choices"]
        text = choices[0]["message"]["content"] if choices else None
        cut = bool(choices) and choices[0].get("finish_reason") == "length"
        usage = data.get("usage") or {}
        prompt = usage.get("prompt_tokens") or 0
        completion = usage.get("completion_tokens") or 0
        if text is not None and not isinstance(text, str):
            raise TypeError(type(text).__name__)
        return text, int(prompt), int(completion), cut
    except (AttributeError, IndexError, KeyError, TypeError, ValueError):
        raise OddResponse(_odd(raw, "JSON that is not a chat completion"), raw) from None


def _embeddings_answer(raw: Answer) -> tuple[list, int]:
    """``(vectors in input order, prompt_tokens)`` of an embeddings answer — each vector
    base64 of little-endian float32 (as asked) or a list of numbers (servers that ignore the
    encoding asked for) — or :class:`OddResponse` when it is not one.

    >>> import json
    >>> vector = base64.b64encode(np.array([0.5, -1.0], dtype="<f4").tobytes()).decode()
    >>> body = {"data": [{"index": 1, "embedding": [3, 4]}, {"index": 0, "embedding": vector}],
    ...         "usage": {"prompt_tokens": 7}}
    >>> rows, tokens = _embeddings_answer(Answer(200, "", json.dumps(body).encode(), "u"))
    >>> [list(map(float, r)) for r in rows], tokens
    ([[0.5, -1.0], [3.0, 4.0]], 7)
    """
    data = _json(raw)
    try:
        rows = [row for _, _, row in sorted(  # by index; in the order given without one
            (r.get("index", i), i, r) for i, r in enumerate(data["data"]))]
        vectors = [_vector(r["embedding"]) for r in rows]
        usage = data.get("usage") or {}
        return vectors, int(usage.get("prompt_tokens") or 0)
    except (AttributeError, IndexError, KeyError, TypeError, ValueError):
        raise OddResponse(_odd(raw, "JSON that is not an embeddings list"), raw) from None


def _vector(embedding: Any) -> Any:
    """One embedding as sent: base64 of float32 values decoded to an array; a list as is.

    >>> _vector("AAAAPwAAgL8="), _vector([1, 2])
    (array([ 0.5, -1. ], dtype=float32), [1, 2])
    """
    if isinstance(embedding, str):
        return np.frombuffer(base64.b64decode(embedding, validate=True), dtype="<f4")
    if not isinstance(embedding, list):
        raise TypeError(type(embedding).__name__)
    return embedding


def _odd(raw: Answer, what: str) -> str:
    """What came back instead of the expected JSON, quoting the start of the body.

    >>> _odd(Answer(200, "text/html", b"<p>Sign in</p>", "u"), "not JSON")
    "the endpoint answered HTTP 200 with a text/html body, not JSON: '<p>Sign in</p>'"
    """
    body = " ".join(raw.text.split())
    status = raw.status_code
    if not body:
        return f"the endpoint answered HTTP {status} with an empty body, {what}"
    quote = body if len(body) <= 120 else body[:120] + "…"
    kind = "JSON" if what.startswith("JSON") else f"a {raw.content_type or 'untyped'} body"
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
        if parts.scheme == "http" and not is_loopback(host):
            out.append(f"the judge sends its API key over plain http to {host}, where anyone "
                       "on the network path can read it; use an https base_url")
    return out


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


def _backoff(attempt: int, exc: Exception) -> float:
    """Seconds to wait before retry ``attempt`` (0-based): Retry-After when given, else 2^n/2.

    >>> [_backoff(n, Exception()) for n in range(4)]
    [0.5, 1.0, 2.0, 4.0]
    >>> _backoff(0, EndpointError("RateLimitError", "slow down", status=429, retry_after=3))
    3.0
    """
    wait = getattr(exc, "retry_after", None)
    if wait is not None:
        return min(float(wait), 60.0)
    return min(0.5 * 2 ** attempt, 30.0)


def _down(exc: Exception) -> bool:
    """Whether a request's final failure says the endpoint is down rather than wrong: a
    failure retries are for (no connection, a deadline, HTTP 429 or 5xx) — a monitor keeps
    such a trace to evaluate later instead of storing the error.

    >>> _down(EndpointError("APIConnectionError", "refused", retryable=True))
    True
    >>> _down(EndpointError("BadRequestError", "no", status=400))
    False
    """
    return isinstance(exc, EndpointError) and exc.retryable


def _describe(exc: Exception) -> str:
    """The error text of a failed request, secrets redacted.

    >>> _describe(OddResponse("the endpoint answered HTTP 200 with an empty body, not JSON",
    ...                       Answer(200, "", b"", "http://h/v1/embeddings", "judge.base_url")))
    'the endpoint answered HTTP 200 with an empty body, not JSON; a proxy or gateway may be \
answering instead of the server at http://h/v1/embeddings: check `judge.base_url`'
    """
    if isinstance(exc, OddResponse):
        at = f" at {exc.where}" if exc.where else ""
        return redact(f"{exc}; a proxy or gateway may be answering instead of the server{at}: "
                      f"check `{exc.setting}`")
    return redact(str(exc))
