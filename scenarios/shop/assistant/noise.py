"""Seeded noise: ``answer(case, noise=p, noise_seed=s)`` perturbs the pipeline at random, as an
LLM version of it sampled at a temperature above 0 would, so that ``--repeat N`` has a
variance to measure (docs/repeat.md; ``scenarios/shop-noisy.yaml``).

Each component is perturbed independently, with probability ``noise`` times its
:data:`WEIGHTS` entry, in a way its own metrics see:

- **router** - a borderline decision flips: of two routes the less likely one is dropped
  (the ``router`` fault's single-label routing), a single route gains the other one;
- **text2sql** - the query forgets a WHERE filter (the ``text2sql`` fault's ``drop_filter``);
  a question without filters is unaffected;
- **retriever** - one time in three the weak embedding of the ``retriever`` fault ranks the
  chunks, otherwise the similarities are jittered (each multiplied by ``exp(N(0, 0.35))``)
  before the top 5 are taken, so close chunks swap places and the fifth may drop out;
- **generator** - the answer drops one of its sentences (when it has two or more) or rounds a
  price to whole euros (when it quotes one), one of the two at random; a one-sentence answer
  without a price is unaffected.

The draws are deterministic given ``(noise_seed, case id, repeat, component)``: a
:class:`random.Random` per component, seeded from a blake2b hash of the four (never Python's
salted ``hash``). So a run done twice gives the same traces, runs with different
``noise_seed`` are independent draws of the same system, the repeats of a case differ, and
whether one component is perturbed does not change another's draws (an oracle rerun that
replaces one component sees the others perturbed as in the run).
"""

from __future__ import annotations

import hashlib
import math
import random
import re
import time

import numpy as np

from evalharness.models import GeneratorStep, RetrieverStep, RouterStep

from .data import Corpus
from .faults import retrieve_weak, single_route, weak_similarities
from .retriever import TOP_K, expand_query, top_k
from .text import approx_tokens

COMPONENTS = ("router", "text2sql", "retriever", "generator")

WEIGHTS: dict[str, float] = {"router": 0.5, "text2sql": 1.0, "retriever": 1.0, "generator": 1.0}
"""A component's chance of a perturbation is ``noise * WEIGHTS[component]`` (at most 1). The
router's is halved: a route flip changes which components run at all, the largest change."""

WEAK_SHARE = 1 / 3
"""Of the retriever's perturbations, the share that uses the weak embedding (the rest jitter)."""

JITTER_SIGMA = 0.35
"""The standard deviation of the log-normal factor on each similarity (retriever jitter)."""


def check_noise(noise: object) -> float:
    """``noise`` as a float in [0, 1], or a ValueError that says what is wrong."""
    if isinstance(noise, bool) or not isinstance(noise, int | float) or not 0 <= noise <= 1:
        raise ValueError(
            f"noise must be a number from 0 (no noise) to 1 (every component perturbed on "
            f"every call); got {noise!r}"
        )
    return float(noise)


def probability(noise: float, component: str) -> float:
    """The chance that ``component`` is perturbed on a call at ``noise``."""
    return min(1.0, noise * WEIGHTS[component])


class Noise:
    """The noise of one call: ``draw(component)`` is that component's random generator when it
    is perturbed on this call, else None."""

    def __init__(self, noise: float, seed: object, case_id: str, repeat: int | None) -> None:
        self.noise = noise
        self.key = (str(seed), str(case_id), str(1 if repeat is None else repeat))

    def rng(self, component: str) -> random.Random:
        """The component's generator, seeded from a stable hash of (seed, case, repeat,
        component)."""
        text = "\x1f".join((*self.key, component)).encode("utf-8")
        digest = hashlib.blake2b(text, digest_size=8).digest()
        return random.Random(int.from_bytes(digest, "big"))

    def draw(self, component: str) -> random.Random | None:
        if self.noise <= 0:
            return None
        rng = self.rng(component)
        return rng if rng.random() < probability(self.noise, component) else None


def flip_route(step: RouterStep) -> RouterStep:
    """The router's perturbation: two routes lose the less likely one; one gains the other."""
    if len(step.routes) > 1:
        return single_route(step)
    routes = ["sql", "blog"]
    scores = step.scores or {}
    confidence = math.prod(
        (v if r in routes else 1.0 - v) for r, v in scores.items()
    ) if scores else None
    return step.model_copy(update={
        "routes": routes,
        "confidence": None if confidence is None else round(confidence, 4),
    })


def noisy_retrieve(question: str, corp: Corpus, rng: random.Random, *, weak: bool = False,
                   k: int = TOP_K) -> RetrieverStep:
    """The retriever's perturbation: the weak embedding (:data:`WEAK_SHARE` of the time), or
    the similarities (of the weak embedding too, under the ``retriever`` fault) jittered."""
    if rng.random() < WEAK_SHARE:
        return retrieve_weak(question, corp, k)
    start = time.perf_counter()
    sims = (weak_similarities(question, corp) if weak
            else corp.matrix @ corp.vector(expand_query(question)))
    factors = np.array([math.exp(rng.gauss(0.0, JITTER_SIGMA)) for _ in corp.ids])
    return top_k(sims * factors, corp, k, start)


_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+")
_PRICE_RE = re.compile(r"(?<![\w.])(\d+)\.(\d{2})(?!\w)")


def _round_price(text: str, rng: random.Random) -> str:
    prices = list(_PRICE_RE.finditer(text))
    odd = [m for m in prices if m.group(2) != "00"] or prices
    m = rng.choice(odd)
    rounded = str(math.floor(float(m.group(0)) + 0.5))
    return text[:m.start()] + rounded + text[m.end():]


def sloppy_answer(step: GeneratorStep, rng: random.Random) -> GeneratorStep:
    """The generator's perturbation: one sentence dropped, or one price rounded to whole euros
    (one of the two that apply, at random)."""
    text = step.answer or ""
    sentences = _SENTENCE_RE.split(text.strip())
    options = (["drop"] if len(sentences) > 1 else []) + (
        ["round"] if _PRICE_RE.search(text) else [])
    if not options:
        return step
    if rng.choice(options) == "drop":
        del sentences[rng.randrange(len(sentences))]
        text = " ".join(sentences)
    else:
        text = _round_price(text, rng)
    usage = step.usage
    if usage is not None:
        usage = usage.model_copy(update={"completion_tokens": approx_tokens(text)})
    return step.model_copy(update={"answer": text, "usage": usage})
