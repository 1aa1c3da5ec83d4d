"""Fault injection: options that degrade exactly one component, for the fault-injected
variants ``scenarios/shop-fault-*.yaml`` (:data:`FAULTS`), and production incidents of the
instrumented shop's live traffic (:data:`LIVE_FAULTS`)."""

from __future__ import annotations

import math
import re
import sqlite3
import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from evalharness.models import (
    GeneratorStep,
    RetrieverStep,
    RouterStep,
)

from .data import Catalog, Corpus
from .retriever import TOP_K, expand_query, top_k
from .text import approx_tokens

if TYPE_CHECKING:  # text2sql applies the text2sql fault: imported for annotations only
    from .text2sql import Slots

FAULTS = ("router", "text2sql", "retriever", "generator")
"""Valid values of ``answer(case, fault=...)``; each degrades only the component it names."""

LIVE_FAULTS = ("schema_migration",)
"""Faults of the instrumented shop's live traffic only (``scenarios/shop/traced.py --fault``),
not scenario variants: production incidents whose reference-free verdict fails *upstream* of
the generator, so a monitor sees the failed traces' root cause move (the four of
:data:`FAULTS` all leave the generator the root cause of nearly every failed trace, the
only reference-free verdict they break). ``schema_migration`` (text2sql): a migration renamed
a column the text-to-SQL prompt's schema still names (:func:`migrated_catalog`), so every
query that reads it fails in the database and the step records the error."""


def single_route(step: RouterStep) -> RouterStep:
    """The ``router`` fault: single-label routing. Only the most likely route is kept, so a
    question that needs the catalog *and* the blog goes to one branch only."""
    if len(step.routes) <= 1:
        return step
    scores = step.scores or {}
    top = max(step.routes, key=lambda r: (scores.get(r, 0.0), r))
    confidence = math.prod(
        (v if r == top else 1.0 - v) for r, v in scores.items()
    ) if scores else None
    return step.model_copy(
        update={
            "routes": [top],
            "confidence": None if confidence is None else round(confidence, 4),
        }
    )


# The slot whose WHERE condition the ``text2sql`` fault forgets: the first filled one in this
# order (the most specific constraints first, the category last).
_DROPPABLE_SLOTS = (
    "colour", "material", "material_like", "gender", "size", "max_price", "min_price",
    "brand", "country", "status", "month", "year", "since", "product", "category",
)


def drop_one_filter(slots: Slots) -> Slots:
    """The ``text2sql`` fault: the query loses one WHERE filter (the first filled slot of
    :data:`_DROPPABLE_SLOTS`), as an LLM that forgets a constraint of the question would."""
    for name in _DROPPABLE_SLOTS:
        if getattr(slots, name) is not None:
            return replace(slots, **{name: None})
    return slots


WEAK_VOCAB = 75
"""Terms the ``retriever`` fault's embedding knows: the corpus's most frequent ones."""

_WEAK_INDEX: tuple[int, np.ndarray, np.ndarray] | None = None
_WEAK_LOCK = threading.Lock()


def _weak_index(corp: Corpus) -> tuple[np.ndarray, np.ndarray]:
    """(term mask, chunk matrix) of the truncated vocabulary, built once per corpus: only the
    :data:`WEAK_VOCAB` terms in most chunks (ties by term) keep their weight; rows renormalised."""
    global _WEAK_INDEX
    with _WEAK_LOCK:
        if _WEAK_INDEX is None or _WEAK_INDEX[0] != id(corp):
            df = (corp.matrix > 0).sum(axis=0)
            terms = sorted(corp.vocab, key=lambda t: (-int(df[corp.vocab[t]]), t))
            mask = np.zeros(len(corp.vocab))
            mask[[corp.vocab[t] for t in terms[:WEAK_VOCAB]]] = 1.0
            matrix = corp.matrix * mask
            norms = np.linalg.norm(matrix, axis=1, keepdims=True)
            _WEAK_INDEX = (id(corp), mask, matrix / np.where(norms > 0, norms, 1.0))
        return _WEAK_INDEX[1], _WEAK_INDEX[2]


def retrieve_weak(question: str, corp: Corpus, k: int = TOP_K) -> RetrieverStep:
    """The ``retriever`` fault: the same ranking with a weak embedding, a vocabulary truncated
    to the corpus's :data:`WEAK_VOCAB` most frequent terms, so the distinctive words of a
    question ("cashmere", "moths") are out of vocabulary. Ties by chunk id: deterministic."""
    start = time.perf_counter()
    return top_k(weak_similarities(question, corp), corp, k, start)


def weak_similarities(question: str, corp: Corpus) -> np.ndarray:
    """Each chunk's cosine similarity to the question in the ``retriever`` fault's weak
    embedding (:func:`retrieve_weak`)."""
    mask, matrix = _weak_index(corp)
    query = corp.vector(expand_query(question)) * mask
    norm = float(np.linalg.norm(query))
    return matrix @ (query / norm if norm > 0 else query)


_FIGURE_RE = re.compile(r"(?<![\w.])(\d+)(?:\.(\d{2}))?(?!\w)")
INVENTED_CLAIMS = (
    "Good news: members get an extra 15% off this week, and delivery is free on orders over "
    "40 €.",
    "Every piece we sell also comes with a three-year guarantee and free alterations in store.",
)
"""What the ``generator`` fault adds to every answer: claims no context supports."""


def _altered_figure(m: re.Match[str]) -> str:
    whole, cents = m.group(1), m.group(2)
    if cents is not None:  # a price: marked up and "rounded" to a .99 price point
        return f"{math.ceil(float(f'{whole}.{cents}') * 1.15) - 0.01:.2f}"
    return str(int(whole) + 2)  # a count, a size, a temperature: off by two


def invent_figures(step: GeneratorStep) -> GeneratorStep:
    """The ``generator`` fault: the answer misquotes every figure of its contexts (prices marked
    up to a .99 price point, other numbers off by two) and adds an invented promotion and an
    invented guarantee (:data:`INVENTED_CLAIMS`)."""
    text = _FIGURE_RE.sub(_altered_figure, step.answer or "")
    text = " ".join([text, *INVENTED_CLAIMS]).strip()
    usage = step.usage
    if usage is not None:
        usage = usage.model_copy(update={"completion_tokens": approx_tokens(text)})
    return step.model_copy(update={"answer": text, "usage": usage})


RENAMED_COLUMN = ("products", "price", "price_eur")
"""The ``schema_migration`` fault's migration: (table, old name, new name). ``price`` is read
by most product queries (listing, cheapest, price bounds, averages) and by none about orders
or sizes, so some SQL traffic keeps working, as after a real partial breakage."""

_MIGRATED: tuple[int, Catalog] | None = None
_MIGRATED_LOCK = threading.Lock()


def migrated_catalog(cat: Catalog) -> Catalog:
    """The ``schema_migration`` fault: ``cat`` with its database migrated — a copy in which
    :data:`RENAMED_COLUMN` is renamed — and everything else as it was, its ``schema`` (what
    the text-to-SQL prompt shows) and vocabularies included: the app was deployed against the
    old schema. Built once per catalog; ``cat`` itself is untouched, so questions without the
    fault (and other scenarios in the process) read the original database."""
    global _MIGRATED
    with _MIGRATED_LOCK:
        if _MIGRATED is None or _MIGRATED[0] != id(cat):
            conn = sqlite3.connect(":memory:", check_same_thread=False)
            with cat.lock:
                cat.conn.backup(conn)
            table, old, new = RENAMED_COLUMN
            conn.execute(f"ALTER TABLE {table} RENAME COLUMN {old} TO {new}")
            _MIGRATED = (id(cat), replace(cat, conn=conn, lock=threading.Lock()))
        return _MIGRATED[1]
