"""Judges: identity, the sync batch API evaluators call, concurrency, caching and accounting.

A judge answers judgment tasks (:mod:`evalharness.judge.tasks`) and embeds texts. Backends
implement two coroutines, :meth:`Judge.complete` and :meth:`Judge.embed`; this base class runs
them on a private event loop with bounded concurrency (chat and embedding requests have
separate limits, so embeddings never wait for chat calls), consults the cache, and returns one
:class:`Judgment` per input — an output, or an error with the raw text, never an exception.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from evalharness.judge.cache import JudgeCache, default_cache_path
from evalharness.judge.tasks import JudgmentTask


class Price(BaseModel):
    """Price of a model, in currency units per million tokens."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    input: float = Field(ge=0)
    """Per million prompt tokens."""

    output: float = Field(ge=0)
    """Per million completion tokens."""


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

    concurrency: int = Field(default=8, ge=1, le=512)
    """Chat requests in flight at once."""

    embedding_concurrency: int | None = Field(default=None, ge=1, le=512)
    """Embedding requests in flight at once (default: ``concurrency``); a separate limit, so
    embeddings never wait behind chat calls."""

    timeout_s: float = Field(default=60.0, gt=0)
    """Timeout of one request, in seconds."""

    max_retries: int = Field(default=4, ge=0, le=20)
    """Retries after a 429, a 5xx, a timeout or a connection error (exponential backoff)."""

    temperature: float = Field(default=0.0, ge=0, le=2)
    """Sampling temperature (part of the cache key)."""

    cache: str | None = None
    """Cache file (SQLite), relative to the scenario file; default: ``$EVALHARNESS_CACHE_DIR``
    or the user's cache directory."""

    cache_mode: Literal["use", "off", "refresh"] = "use"
    """``use`` reads and writes the cache; ``off`` ignores it; ``refresh`` writes without
    reading (``--no-cache`` and ``--refresh-cache`` set these)."""

    prices: dict[str, Price] = Field(default_factory=dict)
    """Model name -> price, to report the cost of judging."""

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
    requests: int = 0
    """Requests sent for this judgment (retries and a re-ask included; 0 when cached)."""
    prompt_tokens: int = 0
    """Prompt tokens the requests consumed."""
    completion_tokens: int = 0
    """Completion tokens the requests consumed."""

    def record(self) -> dict[str, Any]:
        """A JSON-able record to store with the metric value it produced."""
        out = self.model_dump(mode="json", exclude={"output"})
        out["output"] = self.output.model_dump(mode="json") if self.output is not None else None
        out["kind"] = "chat"
        return out


@dataclass
class Embeddings:
    """Embeddings of some texts: an array (one row per text), or an error."""

    vectors: np.ndarray | None
    error: str | None = None
    cached: bool = False
    requests: int = 0
    prompt_tokens: int = 0
    backend: str = ""
    model: str | None = None

    def record(self) -> dict[str, Any]:
        return {"kind": "embeddings", "backend": self.backend, "model": self.model,
                "error": self.error, "cached": self.cached, "requests": self.requests,
                "prompt_tokens": self.prompt_tokens, "completion_tokens": 0}


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

    def __init__(self, config: JudgeConfig) -> None:
        self.config = config
        self._cache: JudgeCache | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._start = threading.Lock()
        self._chat: asyncio.Semaphore | None = None
        self._emb: asyncio.Semaphore | None = None

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

    # -- what a backend implements -------------------------------------------------------------

    async def complete(self, task: JudgmentTask, inputs: BaseModel, key: str) -> Judgment:
        """Answer one task for one input (no cache). Errors are returned, never raised."""
        raise NotImplementedError

    async def embed(self, texts: list[str]) -> Embeddings:
        """Embed texts (no cache). Errors are returned, never raised."""
        raise NotImplementedError

    # -- the API evaluators use ----------------------------------------------------------------

    def run_many(self, task: JudgmentTask, inputs: Sequence[BaseModel], *, metric: str = ""
                 ) -> list[Judgment]:
        """Answer ``task`` for every input, concurrently; one judgment per input, in order.

        ``metric`` names what the judgments are for (informational). Store
        ``judgment.record()`` in the details of the metric value it produced: the report sums
        requests, cache hits and tokens from those records.
        """
        return self._submit(self.arun_many(task, inputs))

    def embed_many(self, groups: Sequence[Sequence[str]], *, metric: str = ""
                   ) -> list[Embeddings]:
        """Embed each group of texts with one request per group, groups concurrently."""
        return self._submit(self.aembed_many(groups))

    async def arun_many(self, task: JudgmentTask, inputs: Sequence[BaseModel]
                        ) -> list[Judgment]:
        return list(await asyncio.gather(*(self._one(task, i) for i in inputs)))

    async def aembed_many(self, groups: Sequence[Sequence[str]]) -> list[Embeddings]:
        return list(await asyncio.gather(*(self._embed_group(list(g)) for g in groups)))

    @property
    def cache(self) -> JudgeCache | None:
        """The cache this judge reads and writes (``None`` when off or not cacheable)."""
        if not self.cacheable or self.config.cache_mode == "off":
            return None
        if self._cache is None:
            self._cache = JudgeCache(Path(self.config.cache) if self.config.cache
                                     else default_cache_path())
        return self._cache

    def key(self, task: JudgmentTask, inputs: BaseModel) -> str:
        return content_key(self.backend, self.model, task.id, task.version,
                           inputs.model_dump(mode="json"), {"temperature": self.config.temperature})

    async def _one(self, task: JudgmentTask, inputs: BaseModel) -> Judgment:
        key = self.key(task, inputs)
        use_cache = self.cache is not None
        if use_cache and self.config.cache_mode == "use":
            hit = self.cache.get(key)
            if hit is not None:
                try:
                    output = task.output.model_validate(hit["output"])
                except ValueError:
                    output = None
                if output is not None:
                    return Judgment(task=task.id, rubric_version=task.version,
                                    backend=self.backend, model=self.model, key=key,
                                    output=output, raw=hit.get("raw"), cached=True)
        async with self._chat_slot():
            judgment = await self.complete(task, inputs, key)
        if use_cache and judgment.output is not None:
            self.cache.put(key, {"output": judgment.output.model_dump(mode="json"),
                                 "raw": judgment.raw})
        return judgment

    async def _embed_group(self, texts: list[str]) -> Embeddings:
        key = content_key(self.backend, "embeddings", self.embedding_model, texts)
        use_cache = self.cache is not None
        if use_cache and self.config.cache_mode == "use":
            hit = self.cache.get(key)
            if hit is not None:
                return Embeddings(np.asarray(hit["vectors"], dtype=float), cached=True,
                                  backend=self.backend, model=self.embedding_model)
        async with self._emb_slot():
            result = await self.embed(texts)
        if use_cache and result.vectors is not None:
            self.cache.put(key, {"vectors": result.vectors.tolist()})
        return result

    # -- the private loop ----------------------------------------------------------------------

    def _chat_slot(self) -> asyncio.Semaphore:
        if self._chat is None:
            self._chat = asyncio.Semaphore(self.config.concurrency)
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
        """Stop the private loop and close the cache."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
            self._loop.close()
            self._loop = None
        if self._cache is not None:
            self._cache.close()
            self._cache = None


def judge_usage(records: Sequence[dict[str, Any]], prices: dict[str, Price] | None = None
                ) -> dict[str, Any]:
    """Sum judgment/embedding records: requests, cache hits, tokens, errors, cost.

    >>> judge_usage([{"requests": 2, "cached": False, "prompt_tokens": 10,
    ...               "completion_tokens": 5, "error": None, "model": "m"},
    ...              {"requests": 0, "cached": True, "prompt_tokens": 0,
    ...               "completion_tokens": 0, "error": None, "model": "m"}],
    ...             {"m": Price(input=1.0, output=2.0)})["cost"]
    2e-05
    """
    out = {"judgments": len(records), "requests": 0, "cache_hits": 0, "prompt_tokens": 0,
           "completion_tokens": 0, "errors": 0}
    cost = 0.0
    priced = False
    for r in records:
        out["requests"] += int(r.get("requests", 0))
        out["cache_hits"] += bool(r.get("cached"))
        out["prompt_tokens"] += int(r.get("prompt_tokens", 0))
        out["completion_tokens"] += int(r.get("completion_tokens", 0))
        out["errors"] += r.get("error") is not None
        price = (prices or {}).get(r.get("model") or "")
        if price is not None:
            priced = True
            cost += (r.get("prompt_tokens", 0) * price.input
                     + r.get("completion_tokens", 0) * price.output) / 1e6
    if priced:
        out["cost"] = round(cost, 10)
    return out
