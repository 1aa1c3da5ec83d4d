"""The retriever: TF-IDF over the blog chunks' titles and texts, the query expanded with
category synonyms; cosine similarity; top 5."""

from __future__ import annotations

import time

import numpy as np

from evalharness.models import (
    RetrieverStep,
)

from .data import CATEGORY_SYNONYMS, Corpus
from .text import contains_phrase, norm_phrase

TOP_K = 5
"""Chunks retrieved per question."""

def expand_query(question: str) -> str:
    """The question plus the catalog word for any category synonym it uses (jumper -> sweater)."""
    normalised = norm_phrase(question)
    extra = [
        targets[0]
        for word, targets in CATEGORY_SYNONYMS.items()
        if contains_phrase(normalised, word) and targets[0] != word
    ]
    return " ".join([question, *extra])


def retrieve(question: str, corp: Corpus, k: int = TOP_K) -> RetrieverStep:
    """Top-k chunks by cosine similarity of TF-IDF vectors."""
    start = time.perf_counter()
    return top_k(corp.matrix @ corp.vector(expand_query(question)), corp, k, start)


def top_k(sims: np.ndarray, corp: Corpus, k: int, start: float) -> RetrieverStep:
    """The step of the ``k`` chunks with the highest similarity (ties by chunk id), timed
    from ``start``."""
    order = sorted(range(len(corp.ids)), key=lambda i: (-round(float(sims[i]), 12), corp.ids[i]))
    order = order[:k]
    return RetrieverStep(
        ids=[corp.ids[i] for i in order],
        texts=[corp.texts[i] for i in order],
        scores=[round(float(sims[i]), 6) for i in order],
        latency_ms=(time.perf_counter() - start) * 1000.0,
    )
