"""Judges: identity, the sync batch API evaluators call, concurrency, caching and accounting.

A judge answers judgment tasks (:mod:`evalharness.judge.tasks`) and embeds texts. Backends
implement two coroutines, :meth:`Judge.complete` and :meth:`Judge.embed`; this base class runs
them on a private event loop with bounded concurrency (chat and embedding requests have
separate limits, so embeddings never wait for chat calls), consults the cache, sends identical
requests in flight at once only once ("single flight"), batches the texts of many embedding
groups into few requests, and returns one :class:`Judgment` per input — an output, or an
error with the raw text, never an exception. Every judgment and embeddings result carries a
unique id, so the report counts each request once however many values show its record, and
:data:`LEDGER` collects what a caller's calls produced.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import heapq
import itertools
import json
import os
import threading
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from evalharness.judge.cache import JudgeCache, default_cache_path
from evalharness.judge.limits import CeilingReached, Limits
from evalharness.judge.tasks import JudgmentTask
from evalharness.models import Price
from evalharness.redaction import redact

SALT: ContextVar[str | None] = ContextVar("evalharness_judge_salt", default=None)
"""Set while the core evaluates a repeat of a run whose repeats each ask the judge anew
(``repeat: {judge: fresh}``, docs/repeat.md): :meth:`Judge.run_many` puts it in the cache key
of every judgment it asks, so a repeat reuses no other repeat's judgment. Embeddings are not
salted (an embedding model is deterministic)."""

LEDGER: ContextVar[list | None] = ContextVar("evalharness_judge_ledger", default=None)
"""When the caller of :meth:`Judge.run_many` / :meth:`Judge.embed_many` has this set to a
list, every :class:`Judgment` / :class:`Embeddings` the call returns is appended to it, in the
caller's thread, once the results are back. The core sets it around each evaluator hook call,
so the judgments of an evaluator that raised are still counted. A context variable is not
inherited by threads an evaluator starts itself: set it there too, or use
``contextvars.copy_context().run``."""


def new_id() -> str:
    """A fresh record id: this process's random 16-hex-digit prefix and a counter — unique
    across processes and runs like a uuid4, without a system call per judgment (a uuid4 each
    took a twentieth of a heuristic run's time).

    >>> a, b = new_id(), new_id()
    >>> len(a) >= 17, a != b, a[:16] == b[:16]
    (True, True, True)
    """
    return f"{_ID_PREFIX}{next(_ID_COUNTER):x}"


def _new_prefix() -> None:
    global _ID_PREFIX, _ID_COUNTER
    _ID_PREFIX, _ID_COUNTER = uuid.uuid4().hex[:16], itertools.count()


_new_prefix()
os.register_at_fork(after_in_child=_new_prefix)  # a forked worker must not repeat our ids


class JudgeConfig(BaseModel):
    """The scenario's ``judge:`` block."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    backend: str = "heuristic"
    """Name of a registered judge backend: ``heuristic`` (default, offline) or ``openai``."""

    model: str | None = None
    """Chat model, for backends that call one."""

    base_url: str | None = None
    """Endpoint of an OpenAI-compatible server (OpenAI, Azure, vLLM, Ollama, llama.cpp ...)."""

    api_key_env: str = "OPENAI_API_KEY"
    """Name of the environment variable holding the API key (the key itself is never written
    to any file)."""

    embedding_model: str | None = None
    """Embedding model; default: the backend's choice."""

    embedding_base_url: str | None = None
    """Endpoint for embeddings when it differs from ``base_url``."""

    concurrency: int = Field(default=16, ge=1, le=512, strict=True)
    """Chat requests in flight at once. The judge phase takes about (requests × latency) ÷
    this, down to the longest chain of one case (benchmarks/judge_requests.py: 8.1 s at 8,
    2.1 s at 32, 1.1–1.2 s at 64 for 100 cases at 200 ms a request). The default, 16, halves the
    time of 8 and keeps a tier-1 OpenAI account (500 requests a minute) under its limit at
    two seconds a judgment; raise it for a local server (vLLM, llama.cpp) that serves more
    at once."""

    embedding_concurrency: int | None = Field(default=None, ge=1, le=512)
    """Embedding requests in flight at once (default: ``concurrency``); a separate limit, so
    embeddings never wait behind chat calls."""

    timeout_s: float = Field(default=60.0, gt=0)
    """Deadline of one request, in seconds: connecting, sending and reading the whole answer
    (an endpoint that trickles its answer byte by byte is stopped there, not reset by every
    byte). A request past it is retried like a timeout; then the judgment's error names the
    deadline and the endpoint."""

    max_retries: int = Field(default=4, ge=0, le=20)
    """Retries after a 429, a 5xx, a timeout, a connection error or an answer that is not the
    expected JSON, e.g. a proxy's HTML page (exponential backoff)."""

    embedding_batch_size: int = Field(default=256, ge=1, le=2048)
    """Most texts in one embeddings request: the texts of all cases of a batch are sent
    together in requests of at most this many (the OpenAI API accepts up to 2048 inputs; some
    local servers want fewer)."""

    temperature: float = Field(default=0.0, ge=0, le=2)
    """Sampling temperature (part of the cache key)."""

    cache: str | None = None
    """Cache file (SQLite), relative to the scenario file; default: ``$EVALHARNESS_CACHE_DIR``
    or the user's cache directory."""

    cache_mode: Literal["use", "off", "refresh"] = "use"
    """``use`` reads and writes the cache; ``off`` ignores it; ``refresh`` writes without
    reading (``--no-cache`` and ``--refresh-cache`` set these)."""

    prices: dict[str, Price] = Field(default_factory=dict)
    """Model name -> price, to report the cost of judging (and to enforce ``max_cost``)."""

    requests_per_minute: int | None = Field(default=None, ge=1)
    """Most requests sent in any 60 seconds, per model (chat and embeddings models are
    metered apart, as OpenAI and Azure do): requests wait for room instead of meeting 429s.
    Retries and re-asks count. Default: no limit but ``concurrency``."""

    tokens_per_minute: int | None = Field(default=None, ge=1)
    """Most tokens (prompt + completion) in any 60 seconds, per model. A request reserves an
    estimate (sized on the model's largest answers so far) until its answer says what it
    used."""

    max_cost: float | None = Field(default=None, gt=0)
    """Cost ceiling of the run (a resumed run counts its earlier part), in the currency of
    ``prices`` (which must then price every model the judge calls). A request whose
    estimated cost would pass it is not sent: its judgment is an error that says so
    (``refused`` in the records), the run completes, and a rerun judges the rest — what was
    paid for comes from the cache."""

    max_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    """The most tokens of one judge answer (sent as ``max_tokens``; part of the cache key).
    Unset: the server's own limit. A small local model may repeat itself until that limit:
    a cap keeps such an answer short, and an answer cut by it is an error that says so."""

    domain: str | None = Field(default=None, min_length=1, max_length=300)
    """What the application under evaluation is, in a phrase the judge reads (e.g. "a bank's
    customer-support assistant", "a hospital's guide for patients"): the rubrics that need to
    know who asks (answer relevancy writes the questions such a user would ask, a rubric
    written in the scenario) are given it. Unset, they speak of any user of the application;
    no rubric assumes a domain of its own."""

    options: dict[str, Any] = Field(default_factory=dict)
    """Backend-specific settings."""


class Judgment(BaseModel):
    """One task answered for one input: its output, or an error with the raw text."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    task: str
    """Task (rubric) id."""
    rubric_version: str
    """Rubric version."""
    backend: str
    """Judge backend."""
    model: str | None
    """Judge model."""
    key: str
    """Content address: the cache key of this task and input."""
    output: Any = None
    """An instance of the task's output model, or ``None`` on error."""
    error: str | None = None
    """Why there is no output."""
    raw: str | None = None
    """The judge's raw answer text, when there was one."""
    cached: bool = False
    """Whether the answer came from the cache."""
    shared: bool = False
    """Whether the answer came from an identical request in flight at the same time (single
    flight): no request of its own; counted like a cache hit."""
    refused: bool = False
    """Not requested: the judge's cost ceiling (``judge.max_cost``) was reached."""
    unavailable: bool = False
    """No answer because the endpoint was down (no connection, deadlines, HTTP 429 or 5xx
    after the retries), not because it answered wrongly: asking later may succeed."""
    requests: int = 0
    """Requests sent for this judgment (retries and a re-ask included; 0 when cached or
    shared)."""
    prompt_tokens: int = 0
    """Prompt tokens the requests consumed."""
    completion_tokens: int = 0
    """Completion tokens the requests consumed."""
    id: str = Field(default_factory=new_id)
    """Unique id of this judgment (:func:`new_id`), fixed for the object: the report counts a
    record once per id, however many metric values show it."""

    def record(self) -> dict[str, Any]:
        """A JSON-able record to store with the metric value it produced (same ``id`` on every
        call)."""
        out = self.model_dump(mode="json", exclude={"output"})
        if not self.refused:
            del out["refused"]  # records as before the ceiling existed
        if not self.unavailable:
            del out["unavailable"]
        out["output"] = self.output.model_dump(mode="json") if self.output is not None else None
        out["kind"] = "chat"
        return out


@dataclass
class Embeddings:
    """Embeddings of a group of texts: an array (one row per text), or an error.

    The requests (and their tokens) of a batch shared by several groups are accounted on the
    record of the first group that used it; the other groups show 0."""

    vectors: np.ndarray | None
    error: str | None = None
    cached: bool = False
    """Every text of the group came from the cache."""
    requests: int = 0
    prompt_tokens: int = 0
    backend: str = ""
    model: str | None = None
    texts: int = 0
    """Texts in the group."""
    cached_texts: int = 0
    """Texts of the group whose vectors came from the cache."""
    shared: bool = False
    """Vectors came from another call's request in flight, none from a request of its own."""
    refused: bool = False
    """Not requested: the judge's cost ceiling (``judge.max_cost``) was reached."""
    unavailable: bool = False
    """No vectors because the endpoint was down (see :attr:`Judgment.unavailable`)."""
    id: str = field(default_factory=new_id)
    """Unique id (see :func:`new_id`), fixed for the object."""

    def record(self) -> dict[str, Any]:
        """A JSON-able record to store with the metric value it produced."""
        return {"kind": "embeddings", "id": self.id, "backend": self.backend,
                "model": self.model, "error": self.error, "cached": self.cached,
                "shared": self.shared, "requests": self.requests,
                "prompt_tokens": self.prompt_tokens, "completion_tokens": 0,
                "texts": self.texts, "cached_texts": self.cached_texts,
                **({"refused": True} if self.refused else {}),
                **({"unavailable": True} if self.unavailable else {})}


def vector_problem(vectors: Any, n: int) -> str | None:
    """Why an embeddings answer for ``n`` texts is unusable, or ``None``.

    >>> vector_problem(np.ones((2, 3)), 2) is None
    True
    >>> vector_problem(np.ones((1, 3)), 2)
    'the embeddings endpoint returned 1 vectors for 2 texts; rerun to ask again'
    >>> vector_problem(np.array([[1.0, float("nan")], [1.0, 0.0]]), 2)[:87]
    'the embeddings endpoint returned values that are not finite (NaN or infinity) in 1 of 2'
    """
    arr = vectors if isinstance(vectors, np.ndarray) else None
    if arr is None or arr.ndim != 2 or arr.dtype.kind not in "fiu":
        return ("the embeddings endpoint returned something that is not a table of numbers; "
                "check `judge.embedding_model` and the server")
    if arr.shape[0] != n:
        return f"the embeddings endpoint returned {arr.shape[0]} vectors for {n} texts; " \
               "rerun to ask again"
    if n and arr.shape[1] == 0:
        return "the embeddings endpoint returned empty vectors; check `judge.embedding_model`"
    bad = int((~np.isfinite(arr)).any(axis=1).sum()) if arr.size else 0
    if bad:
        return (f"the embeddings endpoint returned values that are not finite (NaN or "
                f"infinity) in {bad} of {n} vectors; they are not cached, so a rerun asks "
                "again — if it persists, check the embedding model and the server")
    return None


class Slots:
    """A semaphore whose waiters are served by priority (highest first), then in arrival
    order: the judge's chat concurrency, where a request with more rounds after it goes first.

    >>> async def demo():
    ...     slots, order = Slots(1), []
    ...     async def use(name, priority):
    ...         async with slots.slot(priority):
    ...             order.append(name)
    ...             await asyncio.sleep(0)
    ...     await asyncio.gather(use("first", 0), use("low", 0), use("high", 1))
    ...     return order
    >>> asyncio.run(demo())
    ['first', 'high', 'low']
    """

    def __init__(self, n: int) -> None:
        self._free = n
        self._waiters: list[tuple[int, int, asyncio.Future]] = []
        self._arrivals = 0

    @contextlib.asynccontextmanager
    async def slot(self, priority: int = 0):
        await self._acquire(priority)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, priority: int) -> None:
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return
        future = asyncio.get_running_loop().create_future()
        self._arrivals += 1
        heapq.heappush(self._waiters, (-priority, self._arrivals, future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self._release()  # granted just as it was cancelled: pass the slot on
            raise

    def _release(self) -> None:
        while self._waiters:
            _, _, future = heapq.heappop(self._waiters)
            if not future.done():
                future.set_result(None)
                return
        self._free += 1


class _Flight:
    """A request in flight that identical requests wait for instead of sending their own."""

    __slots__ = ("future", "waiters")

    def __init__(self, future: asyncio.Future) -> None:
        self.future = future
        self.waiters = 0


def content_key(*parts: Any) -> str:
    """A stable sha256 of JSON-able parts.

    >>> content_key("a", {"b": 1}) == content_key("a", {"b": 1}) != content_key("a", {"b": 2})
    True
    """
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


class Judge:
    """Base class of judges. Subclasses implement :meth:`complete` and :meth:`embed`."""

    backend: str = "judge"
    is_llm: bool = True
    cacheable: bool = True
    """Whether answers are a function of their cache key: they go through the cache, and
    identical requests in flight at once are sent once (single flight)."""

    def __init__(self, config: JudgeConfig) -> None:
        self.config = config
        self.warnings: list[str] = []
        """Things the user should know, e.g. where the API key is sent (no secret in them);
        the core shows them."""
        self._cache: JudgeCache | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._start = threading.Lock()
        self._chat: Slots | None = None
        self._emb: asyncio.Semaphore | None = None
        self._flights: dict[str, _Flight] = {}
        self._limits: Limits | None = None

    # -- identity ----------------------------------------------------------------------------

    @property
    def model(self) -> str | None:
        return self.config.model

    @property
    def embedding_model(self) -> str | None:
        return self.config.embedding_model

    def identity(self) -> dict[str, Any]:
        """What the report prints about this judge."""
        return {"backend": self.backend, "model": self.model,
                "embedding_model": self.embedding_model, "llm": self.is_llm,
                "label": self.label()}

    def label(self) -> str:
        return f"{self.backend}:{self.model}" if self.model else self.backend

    def warn(self, message: str) -> None:
        """Add a warning for the user, once (redacted: never a secret)."""
        message = redact(message)
        if message not in self.warnings:
            self.warnings.append(message)

    # -- what a backend implements -------------------------------------------------------------

    async def complete(self, task: JudgmentTask, inputs: BaseModel, key: str) -> Judgment:
        """Answer one task for one input (no cache). Errors are returned, never raised."""
        raise NotImplementedError

    async def embed(self, texts: list[str]) -> Embeddings:
        """Embed texts (no cache), at most ``config.embedding_batch_size`` at once. Errors are
        returned, never raised."""
        raise NotImplementedError

    # -- the API evaluators use ----------------------------------------------------------------

    def run_many(self, task: JudgmentTask, inputs: Sequence[BaseModel], *, metric: str = "",
                 rounds_after: int = 0) -> list[Judgment]:
        """Answer ``task`` for every input, concurrently; one judgment per input, in order.

        Never raises for a judge failure: a failed input gets a judgment with an error.
        ``metric`` names what the judgments are for (informational). Store
        ``judgment.record()`` in the details of exactly one metric value: the report sums
        requests, cache hits and tokens from those records (once per record id). With
        :data:`LEDGER` set, the judgments are also appended to it.

        ``rounds_after``: how many more rounds of requests the caller will make from these
        answers (1 for claims that are verified next). When requests queue for the judge's
        concurrency, those with more rounds after them go first — the critical path — so the
        last rounds do not all wait at the end of the run.
        """
        salt = SALT.get()
        if salt is None:  # the signature every backend has had since 0.1
            return _log(self._submit(self.arun_many(task, inputs, rounds_after)))
        return _log(self._submit(self.arun_many(task, inputs, rounds_after, salt=salt)))

    def embed_many(self, groups: Sequence[Sequence[str]], *, metric: str = ""
                   ) -> list[Embeddings]:
        """Embed each group of texts; one :class:`Embeddings` per group, in order.

        The distinct texts of all groups that are neither cached nor in flight are sent
        together, in requests of at most ``config.embedding_batch_size`` texts; each request is
        accounted on the record of the first group that used it. With :data:`LEDGER` set, the
        results are also appended to it."""
        return _log(self._submit(self.aembed_many(groups)))

    def waiting(self) -> int:
        """How many callers are waiting for an identical request in flight (single flight)."""
        return sum(f.waiters for f in list(self._flights.values()))

    async def arun_many(self, task: JudgmentTask, inputs: Sequence[BaseModel],
                        rounds_after: int = 0, salt: str | None = None) -> list[Judgment]:
        return list(await asyncio.gather(*(self._one(task, i, rounds_after, salt)
                                           for i in inputs)))

    async def aembed_many(self, groups: Sequence[Sequence[str]]) -> list[Embeddings]:
        groups = [list(g) for g in groups]
        try:
            return await self._embed_groups(groups)
        except Exception as exc:  # an embedding is vectors or an error, never an exception
            error = self._crash(exc)
            return [Embeddings(None, error=error, backend=self.backend,
                               model=self.embedding_model, texts=len(g)) for g in groups]

    @property
    def cache(self) -> JudgeCache | None:
        """The cache this judge reads and writes (``None`` when off or not cacheable)."""
        if not self.cacheable or self.config.cache_mode == "off":
            return None
        if self._cache is None:
            self._cache = JudgeCache(Path(self.config.cache) if self.config.cache
                                     else default_cache_path())
        return self._cache

    @property
    def limits(self) -> Limits:
        """This judge's per-minute limits and cost ceiling (:mod:`evalharness.judge.limits`);
        they apply to the requests of an LLM backend, not to the offline heuristic."""
        if self._limits is None:
            c = self.config
            self._limits = Limits(requests_per_minute=c.requests_per_minute,
                                  tokens_per_minute=c.tokens_per_minute,
                                  max_cost=c.max_cost, prices=c.prices)
        return self._limits

    def check_limits(self) -> None:
        """Raise ``ValueError`` when ``max_cost`` cannot be enforced: a model the judge calls
        has no price. Warn when the limits cannot apply (a backend that sends no request)."""
        limits = self.limits
        if not limits.active:
            return
        if not self.is_llm:
            self.warn(f"judge.requests_per_minute, tokens_per_minute and max_cost apply to "
                      f"an LLM judge's requests; the {self.backend} judge sends none, so they "
                      "have no effect")
            return
        models = [m for m in (self.model, self.embedding_model) if m]
        missing = limits.missing_prices(models)
        if missing:
            raise ValueError(f"max_cost needs a price for every model the judge calls; "
                             f"`prices` has none for {', '.join(map(repr, missing))} — add "
                             f"e.g. prices: {{{missing[0]}: {{input: 0.15, output: 0.6}}}} "
                             "(per million tokens)")

    def key(self, task: JudgmentTask, inputs: BaseModel, salt: str | None = None) -> str:
        """The content address of a judgment: backend, model, task and its version, inputs,
        sampling; and ``salt`` when given (a repeat of a run whose repeats each ask the judge
        anew, docs/repeat.md)."""
        sampling: dict[str, Any] = {"temperature": self.config.temperature}
        if self.config.max_tokens is not None:  # unset: the keys of earlier runs hold
            sampling["max_tokens"] = self.config.max_tokens
        if salt is not None:
            sampling["salt"] = salt
        return content_key(self.backend, self.model, task.id, task.version,
                           inputs.model_dump(mode="json"), sampling)

    def text_key(self, text: str) -> str:
        """Content address of one text's embedding: backend, embedding model, text."""
        return content_key(self.backend, "embedding", self.embedding_model, text)

    # -- chat: cache, single flight, the backend -----------------------------------------------

    async def _one(self, task: JudgmentTask, inputs: BaseModel, rounds_after: int = 0,
                   salt: str | None = None) -> Judgment:
        """One judgment; any exception (but cancellation) becomes its error."""
        key = ""
        try:
            key = self.key(task, inputs, salt)
            judgment = self._cached_judgment(task, key)
            if judgment is None:
                judgment, shared = await self._single_flight(
                    key, lambda: self._ask_backend(task, inputs, key, rounds_after))
                if shared:
                    judgment = judgment.model_copy(deep=True, update={
                        "id": new_id(), "shared": True, "cached": False, "requests": 0,
                        "prompt_tokens": 0, "completion_tokens": 0})
        except Exception as exc:
            judgment = Judgment(task=task.id, rubric_version=task.version, backend=self.backend,
                                model=self.model, key=key, error=self._crash(exc))
        if judgment.error is not None:
            judgment.error = redact(judgment.error)
            judgment.raw = redact(judgment.raw) if judgment.raw else judgment.raw
        return judgment

    def _cached_judgment(self, task: JudgmentTask, key: str) -> Judgment | None:
        cache = self.cache
        if cache is None or self.config.cache_mode != "use":
            return None
        hit = cache.get(key)
        if hit is None:
            return None
        try:
            output = task.output.model_validate(hit["output"])
        except (ValueError, KeyError, TypeError):
            return None
        return Judgment(task=task.id, rubric_version=task.version, backend=self.backend,
                        model=self.model, key=key, output=output, raw=hit.get("raw"),
                        cached=True)

    async def _ask_backend(self, task: JudgmentTask, inputs: BaseModel, key: str,
                           rounds_after: int = 0) -> Judgment:
        """The backend's answer (an exception becomes the error), stored in the cache."""
        try:
            async with self._chat_slot().slot(rounds_after):
                judgment = await self._metered(
                    self.model, lambda: sum(len(m["content"]) for m in task.messages(inputs)),
                    lambda: self.complete(task, inputs, key), chat=True)
        except CeilingReached as exc:
            return Judgment(task=task.id, rubric_version=task.version, backend=self.backend,
                            model=self.model, key=key, error=str(exc), refused=True)
        except Exception as exc:
            judgment = Judgment(task=task.id, rubric_version=task.version, backend=self.backend,
                                model=self.model, key=key, error=self._crash(exc))
        cache = self.cache if judgment.output is not None else None
        if cache is not None:
            try:
                cache.put(key, {"output": judgment.output.model_dump(mode="json"),
                                "raw": judgment.raw})
            except Exception as exc:  # the answer is paid for: keep it, say the cache failed
                self.warn(f"the judge cache {cache.path} could not be written "
                          f"({type(exc).__name__}: {exc}); answers are not cached this run — "
                          "check the disk, or run with --no-cache")
        return judgment

    async def _metered(self, model: str | None, chars: Callable[[], int],
                       call: Callable[[], Awaitable[Any]], *, chat: bool) -> Any:
        """``call()`` under a permit of :attr:`limits` when any apply (an LLM backend): it
        waits for the per-minute limits, raises :class:`CeilingReached` past ``max_cost``,
        and the answer's reported usage replaces the estimate (``chars``: the request's
        size, for the estimate)."""
        if not (self.is_llm and self.limits.active):
            return await call()
        size = chars()
        permit = await self.limits.permit(model or "",
                                          *self.limits.estimate(model or "", size, chat=chat),
                                          chars=size)
        answer = None
        try:
            answer = await call()
            return answer
        finally:
            permit.settle(*(_usage(answer) if answer is not None else permit.held))

    async def _single_flight(self, key: str, produce: Callable[[], Awaitable[Any]]
                             ) -> tuple[Any, bool]:
        """``(result, shared)``: ``produce()``'s result, or — when an identical request is in
        flight — that request's result with ``shared=True``. Off for backends that are not
        cacheable (their answers are not a function of the key)."""
        if not self.cacheable:
            return await produce(), False
        while (flight := self._flights.get(key)) is not None:
            flight.waiters += 1
            try:
                result = await asyncio.shield(flight.future)
            finally:
                flight.waiters -= 1
            if result is not None:
                return result, True
            # the request we waited for was cancelled: look again, or send our own
        flight = self._flights[key] = _Flight(asyncio.get_running_loop().create_future())
        result = None
        try:
            result = await produce()
            return result, False
        finally:
            del self._flights[key]
            flight.future.set_result(result)

    def _crash(self, exc: BaseException) -> str:
        return redact(f"the {self.backend} judge backend raised {type(exc).__name__}: {exc} — "
                      "a bug in the backend, not a judgment; this value is an error and the run "
                      "goes on (report the message to the backend's authors)")

    # -- embeddings: per-text cache, single flight, batches across groups -----------------------

    async def _embed_groups(self, groups: list[list[str]]) -> list[Embeddings]:
        unique = list(dict.fromkeys(t for g in groups for t in g))
        keys = {t: self.text_key(t) for t in unique}
        found: dict[str, np.ndarray] = {}
        failed: dict[str, str] = {}
        from_cache: set[str] = set()
        cache = self.cache
        if cache is not None and self.config.cache_mode == "use":
            for text in unique:
                vector = _cached_vector(cache.get(keys[text]))
                if vector is not None:
                    found[text] = vector
                    from_cache.add(text)
        waits: dict[str, _Flight] = {}  # texts another call is embedding right now
        mine: list[str] = []
        for text in unique:
            if text in found:
                continue
            flight = self._flights.get(keys[text]) if self.cacheable else None
            if flight is not None:
                waits[text] = flight
                flight.waiters += 1
            else:
                mine.append(text)
        from_flight: set[str] = set()
        batch_of: dict[str, int] = {}
        outcomes: list[Embeddings] = []
        try:
            outcomes = await self._embed_mine(mine, keys, found, failed, batch_of)
            for text, flight in waits.items():
                result = await asyncio.shield(flight.future)
                if result is None:
                    failed[text] = "the request embedding this text was cancelled; rerun"
                elif result[0] is not None:
                    found[text] = result[0]
                    from_flight.add(text)
                else:
                    failed[text] = result[1]
        finally:
            for flight in waits.values():
                flight.waiters -= 1
        first_user: dict[int, int] = {}
        for g, texts in enumerate(groups):
            for text in texts:
                if text in batch_of:
                    first_user.setdefault(batch_of[text], g)
        return [self._group_result(texts, found, failed, from_cache, from_flight,
                                   [outcomes[b] for b, u in first_user.items() if u == g])
                for g, texts in enumerate(groups)]

    async def _embed_mine(self, mine: list[str], keys: dict[str, str],
                          found: dict[str, np.ndarray], failed: dict[str, str],
                          batch_of: dict[str, int]) -> list[Embeddings]:
        """Embed ``mine`` in batches of ``embedding_batch_size``, as the flight identical
        requests wait for; fill ``found``/``failed``/``batch_of``; cache usable vectors."""
        size = self.config.embedding_batch_size
        batches = [mine[i:i + size] for i in range(0, len(mine), size)]
        flights: dict[str, _Flight] = {}
        if self.cacheable:
            loop = asyncio.get_running_loop()
            for text in mine:
                flights[text] = self._flights[keys[text]] = _Flight(loop.create_future())
        try:
            outcomes = list(await asyncio.gather(*(self._embed_batch(b) for b in batches)))
            fresh: dict[str, list[float]] = {}
            for b, (texts, out) in enumerate(zip(batches, outcomes, strict=True)):
                for row, text in enumerate(texts):
                    batch_of[text] = b
                    if out.vectors is None:
                        failed[text] = out.error or "the embeddings request failed"
                        continue
                    found[text] = out.vectors[row]
                    if np.linalg.norm(found[text]) > 0:  # a zero vector is suspect: not kept
                        fresh[keys[text]] = found[text].tolist()
            cache = self.cache
            if cache is not None and fresh:
                self._cache_vectors(cache, fresh)
            return outcomes
        finally:
            for text, flight in flights.items():
                del self._flights[keys[text]]
                done = text in found or text in failed
                flight.future.set_result((found.get(text), failed.get(text)) if done else None)

    def _group_result(self, texts: list[str], found: dict[str, np.ndarray],
                      failed: dict[str, str], from_cache: set[str], from_flight: set[str],
                      paid: list[Embeddings]) -> Embeddings:
        requests = sum(o.requests for o in paid)
        base = {"backend": self.backend, "model": self.embedding_model, "texts": len(texts),
                "cached_texts": sum(t in from_cache for t in texts), "requests": requests,
                "prompt_tokens": sum(o.prompt_tokens for o in paid)}
        error = next((failed[t] for t in texts if t in failed), None)
        if error is not None:
            return Embeddings(None, error=redact(error),
                              unavailable=any(o.unavailable for o in paid), **base)
        vectors = [found[t] for t in texts]
        lengths = sorted({len(v) for v in vectors})
        if len(lengths) > 1:
            return Embeddings(None, error=f"the embeddings of this group have different lengths "
                              f"({', '.join(map(str, lengths))}): the embedding model changed "
                              "between requests? Rerun with --refresh-cache", **base)
        cached = bool(texts) and all(t in from_cache for t in texts)
        shared = not cached and requests == 0 and any(t in from_flight for t in texts)
        array = np.vstack(vectors) if vectors else np.empty((0, 0))
        return Embeddings(array, cached=cached, shared=shared, **base)

    async def _embed_batch(self, texts: list[str]) -> Embeddings:
        """One request's worth of texts; every problem becomes the result's error."""
        try:
            async with self._emb_slot():
                out = await self._metered(self.embedding_model, lambda: sum(map(len, texts)),
                                          lambda: self.embed(texts), chat=False)
        except CeilingReached as exc:
            return Embeddings(None, error=str(exc), refused=True, backend=self.backend,
                              model=self.embedding_model)
        except Exception as exc:
            return Embeddings(None, error=self._crash(exc))
        if out.vectors is not None:
            problem = vector_problem(out.vectors, len(texts))
            if problem is not None:
                out.vectors, out.error = None, problem
        return out

    def _cache_vectors(self, cache: JudgeCache, vectors: dict[str, list[float]]) -> None:
        try:
            cache.put_many({key: {"vector": vector} for key, vector in vectors.items()})
        except Exception as exc:
            self.warn(f"the judge cache {cache.path} could not be written "
                      f"({type(exc).__name__}: {exc}); embeddings are not cached this run — "
                      "check the disk, or run with --no-cache")

    # -- the private loop ----------------------------------------------------------------------

    def _chat_slot(self) -> Slots:
        if self._chat is None:
            self._chat = Slots(self.config.concurrency)
        return self._chat

    def _emb_slot(self) -> asyncio.Semaphore:
        if self._emb is None:
            self._emb = asyncio.Semaphore(self.config.embedding_concurrency
                                          or self.config.concurrency)
        return self._emb

    def _submit(self, coro: Coroutine) -> Any:
        with self._start:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=self._loop.run_forever,
                                                name="evalharness-judge", daemon=True)
                self._thread.start()
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def close(self) -> None:
        """Stop the private loop and close the cache (the judge starts afresh if used again)."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
            self._loop.close()
            self._loop = None
            self._chat = self._emb = None  # bound to the loop that is gone
            self._flights.clear()
            if self._limits is not None:
                self._limits.detach()
        if self._cache is not None:
            self._cache.close()
            self._cache = None


def _usage(answer: Judgment | Embeddings) -> tuple[int, int, int]:
    """``(requests, prompt tokens, completion tokens)`` an answer reports."""
    return (answer.requests, answer.prompt_tokens,
            getattr(answer, "completion_tokens", 0))


def _log(results: list) -> list:
    """Append ``results`` to the caller's :data:`LEDGER`, when it has one; return them."""
    ledger = LEDGER.get()
    if ledger is not None:
        ledger.extend(results)
    return results


def _cached_vector(hit: dict[str, Any] | None) -> np.ndarray | None:
    """A usable vector from a cache entry, else ``None`` (then the text is embedded again).

    >>> _cached_vector({"vector": [0.6, 0.8]})
    array([0.6, 0.8])
    >>> _cached_vector({"vector": [float("nan")]}), _cached_vector({"vectors": [[1.0]]})
    (None, None)
    """
    try:
        vector = np.asarray(hit["vector"], dtype=float)
    except (TypeError, KeyError, ValueError):
        return None
    ok = vector.ndim == 1 and vector.size > 0 and bool(np.isfinite(vector).all())
    return vector if ok else None


def judge_usage(records: Sequence[dict[str, Any]], prices: dict[str, Price] | None = None
                ) -> dict[str, Any]:
    """Sum judgment/embedding records: requests, cache hits, tokens, errors, cost.

    A record is counted once per ``id`` (the same judgment shown by several values, or listed
    twice, is one request); records without an id (results written before ids existed) each
    count. ``cache_hits`` counts answers that needed no request of their own: from the cache,
    or shared with an identical request in flight.

    >>> judge_usage([{"id": "a", "requests": 2, "cached": False, "prompt_tokens": 10,
    ...               "completion_tokens": 5, "error": None, "model": "m"},
    ...              {"id": "b", "requests": 0, "cached": True, "prompt_tokens": 0,
    ...               "completion_tokens": 0, "error": None, "model": "m"}],
    ...             {"m": Price(input=1.0, output=2.0)})["cost"]
    2e-05
    >>> judge_usage([{"id": "a", "requests": 1}] * 3)["requests"]
    1
    """
    usage = Usage(prices)
    usage.add(records)
    return usage.summary()


class Usage:
    """Judge usage summed as records arrive, for a run too large to hold them: :meth:`add`
    takes the records of one case at a time and counts each ``id`` once among them, and
    :meth:`summary` is what :func:`judge_usage` gives for all of them at once.

    That is exact because a record belongs to one case: a judgment's record is stored with
    the value it produced (an evaluator's unstored judgments with its batch's first case, by
    ``evaluate._account``), and every judgment, cache hit or shared answer has its own id.
    The sums (and the cost, a float) are added in the order the records come.

    >>> usage = Usage()
    >>> usage.add([{"id": "a", "requests": 1}, {"id": "a", "requests": 1}])
    >>> usage.add([{"id": "b", "requests": 2, "cached": True}])
    >>> usage.summary()["requests"], usage.summary()["judgments"], usage.summary()["cache_hits"]
    (3, 2, 1)
    """

    def __init__(self, prices: dict[str, Price] | None = None) -> None:
        self.prices = prices or {}
        self.counted = False
        """Whether any record was added."""
        self._out = {"judgments": 0, "requests": 0, "cache_hits": 0, "prompt_tokens": 0,
                     "completion_tokens": 0, "errors": 0}
        self._cost = 0.0
        self._priced = False
        self._refused = 0

    def add(self, records: Sequence[dict[str, Any]]) -> None:
        """Count the records of one case (each id once among them)."""
        seen: set[str] = set()
        out, prices = self._out, self.prices
        for r in records:
            self.counted = True
            rid = r.get("id")
            if rid is not None:
                if rid in seen:
                    continue
                seen.add(rid)
            out["judgments"] += 1
            out["requests"] += int(r.get("requests", 0))
            out["cache_hits"] += bool(r.get("cached")) or bool(r.get("shared"))
            out["prompt_tokens"] += int(r.get("prompt_tokens", 0))
            out["completion_tokens"] += int(r.get("completion_tokens", 0))
            out["errors"] += r.get("error") is not None
            self._refused += bool(r.get("refused"))
            price = prices.get(r.get("model") or "")
            if price is not None:
                self._priced = True
                self._cost += (r.get("prompt_tokens", 0) * price.input
                               + r.get("completion_tokens", 0) * price.output) / 1e6

    def summary(self) -> dict[str, Any]:
        """Requests, cache hits, tokens, errors (and the cost, when a record has a price; the
        judgments not requested because of ``judge.max_cost``, when there are any)."""
        out = dict(self._out)
        if self._priced:
            out["cost"] = round(self._cost, 10)
        if self._refused:
            out["refused"] = self._refused  # not requested: judge.max_cost was reached
        return out
