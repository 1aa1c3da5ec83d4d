"""The ``openai`` judge backend: any OpenAI-compatible endpoint through the openai SDK.

Structured outputs (``response_format: json_schema``) from the task's pydantic schema, falling
back to JSON mode for servers that lack them; timeouts; retries with exponential backoff on
429, 5xx, timeouts and connection errors; one re-ask on an unparsable answer, then an error
that keeps the raw text. The API key is read from the environment variable the scenario names
(``OPENAI_API_KEY`` by default) and is never written anywhere.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import numpy as np
import openai
from pydantic import BaseModel, ValidationError

from evalharness.judge.base import Embeddings, Judge, JudgeConfig, Judgment
from evalharness.judge.tasks import JudgmentTask

RETRYABLE = (openai.RateLimitError, openai.InternalServerError, openai.APITimeoutError,
             openai.APIConnectionError)
DEFAULT_EMBEDDING_MODEL = "text-embedding-3-small"
LOCAL_PLACEHOLDER_KEY = "not-needed"  # local servers (vLLM, Ollama, llama.cpp) ignore the key


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
        self._clients: dict[str, openai.AsyncOpenAI] = {}
        self._json_mode_only = bool(config.options.get("json_mode_only", False))

    @property
    def embedding_model(self) -> str | None:
        return self.config.embedding_model or DEFAULT_EMBEDDING_MODEL

    def _client(self, base_url: str | None) -> openai.AsyncOpenAI:
        name = base_url or ""
        if name not in self._clients:
            # Retries are ours (with accounting), so the SDK's own are off.
            self._clients[name] = openai.AsyncOpenAI(
                api_key=self._key, base_url=base_url, timeout=self.config.timeout_s,
                max_retries=0)
        return self._clients[name]

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

        async def call(response_format: dict) -> Any:
            return await client.chat.completions.create(
                model=self.model, messages=messages, temperature=self.config.temperature,
                response_format=response_format)

        try:
            if self._json_mode_only:
                response = await self._retrying(call, {"type": "json_object"}, tally)
            else:
                try:
                    response = await self._retrying(call, structured, tally)
                except (openai.BadRequestError, openai.UnprocessableEntityError):
                    # The server lacks structured outputs: JSON mode from now on.
                    self._json_mode_only = True
                    response = await self._retrying(call, {"type": "json_object"}, tally)
        except openai.OpenAIError as exc:
            return None, _describe(exc)
        if response.usage is not None:
            tally.prompt += response.usage.prompt_tokens or 0
            tally.completion += response.usage.completion_tokens or 0
        text = response.choices[0].message.content if response.choices else None
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
                if attempt >= self.config.max_retries:
                    raise
                await asyncio.sleep(_backoff(attempt, exc))
                attempt += 1

    # -- embeddings ----------------------------------------------------------------------------

    async def embed(self, texts: list[str]) -> Embeddings:
        tally = _Tally()
        client = self._client(self.config.embedding_base_url or self.config.base_url)

        async def call(_: Any) -> Any:
            return await client.embeddings.create(model=self.embedding_model, input=texts)

        try:
            response = await self._retrying(call, None, tally)
        except openai.OpenAIError as exc:
            return Embeddings(None, error=_describe(exc), requests=tally.requests,
                              backend=self.backend, model=self.embedding_model)
        rows = sorted(response.data, key=lambda d: d.index)
        vectors = np.asarray([r.embedding for r in rows], dtype=float)
        if vectors.shape[0] != len(texts):
            return Embeddings(None, error=f"the embeddings endpoint returned {vectors.shape[0]} "
                              f"vectors for {len(texts)} texts", requests=tally.requests,
                              backend=self.backend, model=self.embedding_model)
        usage = getattr(response, "usage", None)
        return Embeddings(vectors, requests=tally.requests,
                          prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                          backend=self.backend, model=self.embedding_model)


class _Tally:
    def __init__(self) -> None:
        self.requests = 0
        self.prompt = 0
        self.completion = 0


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
    status = getattr(exc, "status_code", None)
    kind = type(exc).__name__
    message = str(exc).splitlines()[0][:300]
    return f"{kind}{f' (HTTP {status})' if status else ''}: {message}"
