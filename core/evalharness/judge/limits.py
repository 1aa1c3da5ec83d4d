"""What a judge may spend: requests and tokens per minute (per model, as OpenAI, Azure and most
hosted endpoints meter them) and a cost ceiling for the run (``judge.requests_per_minute``,
``judge.tokens_per_minute``, ``judge.max_cost``).

Every request a backend is asked for goes through :meth:`Limits.permit` first: it waits until
the last 60 seconds leave room for one more request and for its estimated tokens, and refuses
(:class:`CeilingReached`) when its estimated cost would take the run past ``max_cost``. The
estimate — sized on the largest the model's answers so far — is reserved while the request
is in flight, so ``concurrency`` requests started at once cannot overshoot together, and is
replaced by what the backend reports it used (retries and re-asks included) when it answers.

One :class:`Limits` per judge; the Ray executor sends every worker's requests through one judge
(:class:`evalharness.executors.JudgeService`), so the limits hold for the whole cluster.
"""

from __future__ import annotations

import asyncio
import collections
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

WINDOW_S = 60.0
FIRST_TOKENS_PER_CHAR = 1 / 3
"""A prompt's tokens, estimated before it is sent, before any answer has been seen: its
characters ÷ 3 (English prose is about ÷ 4 with OpenAI's tokenizers; the judges' JSON prompts,
full of punctuation, nearer ÷ 3). From then on the most tokens per character any answer of
that model reported, so the estimate errs high: a ceiling is reached a little early rather
than passed."""
FIRST_COMPLETION_GUESS = 256
"""Completion tokens expected of a chat request before any answer has been seen; then the
most any answer of that model used."""


class CeilingReached(Exception):  # noqa: N818 - named for what happened
    """The request would take the judge's spending past ``judge.max_cost``; it is not sent."""


@dataclass
class _Entry:
    at: float
    amount: float


@dataclass
class Window:
    """How much of a per-minute allowance the last 60 seconds used.

    >>> w = Window(limit=10, clock=lambda: 0.0)
    >>> w.take(6).amount, w.delay(4), w.delay(5) > 0
    (6, 0.0, True)
    >>> w.clock = lambda: 60.5  # the first entry has left the window
    >>> w.delay(10)
    0.0
    """

    limit: float
    clock: Callable[[], float] = time.monotonic
    entries: collections.deque = field(default_factory=collections.deque)
    used: float = 0.0

    def _expire(self, now: float) -> None:
        while self.entries and self.entries[0].at <= now - WINDOW_S:
            self.used -= self.entries.popleft().amount

    def delay(self, amount: float) -> float:
        """Seconds until ``amount`` more fits (0: now). An amount larger than the whole limit
        fits once the window is empty, so it is not refused for ever."""
        now = self.clock()
        self._expire(now)
        if self.used + amount <= self.limit or not self.entries:
            return 0.0
        room = self.limit - amount
        running = self.used
        for entry in self.entries:  # oldest first: when enough of them will have left
            running -= entry.amount
            if running <= room:
                return max(0.0, entry.at + WINDOW_S - now)
        return max(0.0, self.entries[-1].at + WINDOW_S - now)

    def take(self, amount: float) -> _Entry:
        entry = _Entry(self.clock(), amount)
        self.entries.append(entry)
        self.used += amount
        return entry

    def settle(self, entry: _Entry, amount: float) -> None:
        """Replace a reservation by what was used (the entry keeps its time)."""
        if entry in self.entries:
            self.used += amount - entry.amount
        entry.amount = amount


class Permit:
    """One request's reservation; :meth:`settle` with what the answer says it used."""

    def __init__(self, limits: Limits, model: str, request, tokens, cost: float,
                 chars: int = 0) -> None:
        self._limits, self._model = limits, model
        self._request, self._tokens, self._cost = request, tokens, cost
        self._chars = chars
        self._settled = False

    @property
    def held(self) -> tuple[int, int, int]:
        """What the reservation assumed — settled with when no answer says otherwise (the
        backend raised: the request may have gone out)."""
        tokens = self._tokens.amount if self._tokens is not None else 0
        return 1, int(tokens), 0

    def settle(self, requests: int, prompt_tokens: int, completion_tokens: int) -> None:
        if self._settled:
            return
        self._settled = True
        self._limits._settle(self, requests, prompt_tokens, completion_tokens)


class Limits:
    """The requests/tokens-per-minute windows (per model) and the cost ceiling of one judge.

    ``prices``: model -> its :class:`~evalharness.models.Price` (``input``, ``output`` per
    million tokens); with ``max_cost`` every model the judge calls must have one
    (:meth:`missing_prices`)."""

    def __init__(self, *, requests_per_minute: int | None = None,
                 tokens_per_minute: int | None = None, max_cost: float | None = None,
                 prices: dict[str, Any] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], object] = asyncio.sleep) -> None:
        self.rpm, self.tpm, self.max_cost = requests_per_minute, tokens_per_minute, max_cost
        self.prices = prices or {}
        self.clock, self.sleep = clock, sleep
        self._windows: dict[tuple[str, str], Window] = {}
        self.spent = 0.0
        """Cost of the answers so far (reported usage × price)."""
        self.reserved = 0.0
        """Estimated cost of the requests in flight."""
        self.refused = 0
        """Requests not sent because of ``max_cost``."""
        self.waited_s = 0.0
        """Seconds requests spent waiting for the per-minute limits."""
        self._seen: dict[str, tuple[float, int]] = {}
        """Per model: the most prompt tokens per character and completion tokens seen."""
        self._turn: asyncio.Lock | None = None

    def add_spent(self, amount: float) -> None:
        """Count ``amount`` as already spent (what a resumed run's earlier part paid)."""
        self.spent += amount

    def detach(self) -> None:
        """Forget the event loop (the judge's loop was closed; the windows and the money
        spent stay)."""
        self._turn = None

    @property
    def active(self) -> bool:
        return bool(self.rpm or self.tpm or self.max_cost is not None)

    def missing_prices(self, models: list[str]) -> list[str]:
        """The models without a price, when a cost ceiling needs one for each."""
        if self.max_cost is None:
            return []
        return [m for m in models if m not in self.prices]

    def estimate(self, model: str, prompt_chars: int, *, chat: bool) -> tuple[int, int]:
        """``(prompt tokens, completion tokens)`` expected of a request to ``model`` not yet
        sent, from the answers of that model so far (high rather than low)."""
        ratio, completion = self._seen.get(model, (FIRST_TOKENS_PER_CHAR,
                                                   FIRST_COMPLETION_GUESS))
        return max(1, math.ceil(prompt_chars * ratio)), (completion if chat else 0)

    def _window(self, model: str, what: str, limit: int) -> Window:
        key = (model, what)
        if key not in self._windows:
            self._windows[key] = Window(limit, clock=self.clock)
        return self._windows[key]

    def cost(self, model: str, prompt: int, completion: int) -> float:
        price = self.prices.get(model)
        if price is None:
            return 0.0
        return (prompt * price.input + completion * price.output) / 1e6

    async def permit(self, model: str, prompt_tokens: int, completion_tokens: int = 0, *,
                     chars: int = 0) -> Permit:
        """Wait until a request of about this many tokens fits the per-minute limits of
        ``model``, then reserve it; raise :class:`CeilingReached` when its cost would take the
        run past ``max_cost``. Requests are admitted in the order they asked."""
        if self._turn is None:
            self._turn = asyncio.Lock()
        tokens = prompt_tokens + completion_tokens
        async with self._turn:  # one at a time: no request overtakes one that waits
            while True:
                cost = self.cost(model, prompt_tokens, completion_tokens)
                if self.max_cost is not None and (
                        self.refused or self.spent + self.reserved + cost > self.max_cost):
                    self.refused += 1
                    raise CeilingReached(self._ceiling_message())
                wait = 0.0
                if self.rpm:
                    wait = max(wait, self._window(model, "requests", self.rpm).delay(1))
                if self.tpm:
                    wait = max(wait, self._window(model, "tokens", self.tpm).delay(tokens))
                if wait <= 0:
                    break
                self.waited_s += wait
                await self.sleep(wait)
            request = self._window(model, "requests", self.rpm).take(1) if self.rpm else None
            held = self._window(model, "tokens", self.tpm).take(tokens) if self.tpm else None
            self.reserved += cost
            return Permit(self, model, request, held, cost, chars)

    def _settle(self, permit: Permit, requests: int, prompt: int, completion: int) -> None:
        model = permit._model
        if permit._request is not None:
            self._window(model, "requests", self.rpm).settle(permit._request, requests)
        if permit._tokens is not None:
            self._window(model, "tokens", self.tpm).settle(permit._tokens, prompt + completion)
        self.reserved -= permit._cost
        self.spent += self.cost(model, prompt, completion)
        if requests and prompt and permit._chars:  # an answer: learn the model's sizes
            ratio, most = self._seen.get(model, (0.0, 0))
            self._seen[model] = (max(ratio, prompt / requests / permit._chars),
                                 max(most, -(-completion // requests)))

    def _ceiling_message(self) -> str:
        return (f"not requested: judge.max_cost = {self.max_cost:g} reached (spent "
                f"{self.spent:.4f}, {self.reserved:.4f} more in flight); raise the ceiling "
                "and rerun: the answers already paid for come from the cache")

    def summary(self) -> dict[str, float | int]:
        """What the limits did this run: cost spent, requests refused, seconds waited."""
        out: dict[str, float | int] = {"spent": round(self.spent, 10),
                                       "waited_s": round(self.waited_s, 3)}
        if self.max_cost is not None:
            out["max_cost"] = self.max_cost
            out["refused"] = self.refused
        return out
