"""Retriever evaluators: ranking quality of the retrieved chunk ids against graded labels.

First metrics (evaluator ``ranking``): ``recall@K`` for each configured cutoff and ``mrr``.
Conventions follow trec_eval: a chunk is relevant when its grade is at least
``relevance_level``; unjudged chunks are not relevant; recall divides by every relevant chunk
of the case; a case whose labels hold no relevant chunk scores 0. The ranking is the order of
``step.ids``.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from evalharness import MetricValue, hookimpl
from evalharness.registry import Evaluator

__version__ = "0.1.0"


class RankingSettings(BaseModel):
    """Settings of the ``ranking`` evaluator."""

    model_config = ConfigDict(extra="forbid")

    k: list[int] = Field(default_factory=lambda: [5, 10])
    """Cutoffs; each gives a ``recall@K`` metric."""

    relevance_level: int = Field(default=1, ge=1)
    """Minimum grade for a chunk to count as relevant."""

    @field_validator("k")
    @classmethod
    def _positive_unique(cls, value: list[int]) -> list[int]:
        if not value or any(k < 1 for k in value):
            raise ValueError("k must be a non-empty list of cutoffs >= 1, e.g. [5, 10]")
        return sorted(set(value))


def ranking_metrics(settings: RankingSettings) -> list[str]:
    """Metric names for these settings: the cutoff is part of the name.

    >>> ranking_metrics(RankingSettings(k=[10, 3]))
    ['recall@3', 'recall@10', 'mrr']
    """
    return [f"recall@{k}" for k in settings.k] + ["mrr"]


def relevance_matrix(rankings: list[list[str]], relevant: list[set[str]]) -> np.ndarray:
    """Boolean matrix: row i, column r is True when rank r+1 of ranking i is relevant.

    Shorter rankings are padded with False.

    >>> relevance_matrix([["a", "b"], ["c"]], [{"b"}, {"c", "d"}]).astype(int).tolist()
    [[0, 1], [1, 0]]
    """
    depth = max((len(r) for r in rankings), default=0)
    out = np.zeros((len(rankings), depth), dtype=bool)
    for i, (ranking, rel) in enumerate(zip(rankings, relevant, strict=True)):
        if rel:
            out[i, : len(ranking)] = [doc in rel for doc in ranking]
    return out


def recall_and_rr(hits: np.ndarray, n_relevant: np.ndarray, ks: list[int]):
    """Recall@K per row for each K, and reciprocal rank per row (0 without a hit).

    >>> hits = np.array([[0, 1, 0], [0, 0, 0]], dtype=bool)
    >>> rec, rr = recall_and_rr(hits, np.array([2, 1]), [1, 3])
    >>> rec[1].tolist(), rec[3].tolist(), rr.tolist()
    ([0.0, 0.0], [0.5, 0.0], [0.5, 0.0])
    """
    cum = np.cumsum(hits, axis=1) if hits.shape[1] else np.zeros((hits.shape[0], 1))
    safe = np.where(n_relevant > 0, n_relevant, 1)
    recall = {}
    for k in ks:
        col = min(k, cum.shape[1]) - 1
        found = cum[:, col] if col >= 0 else np.zeros(hits.shape[0])
        recall[k] = np.where(n_relevant > 0, found / safe, 0.0)
    any_hit = hits.any(axis=1) if hits.shape[1] else np.zeros(hits.shape[0], dtype=bool)
    first = hits.argmax(axis=1) if hits.shape[1] else np.zeros(hits.shape[0], dtype=int)
    rr = np.where(any_hit, 1.0 / (first + 1), 0.0)
    return recall, rr


@hookimpl
def register_evaluators(register):
    register(Evaluator(
        name="ranking", component="retriever", metrics=ranking_metrics,
        settings=RankingSettings,
        description="recall@K and mean reciprocal rank from graded relevance labels"))


@hookimpl
def evaluate_retriever(evaluator, batch, settings):
    if evaluator != "ranking":
        return None
    names = ranking_metrics(settings)
    rows: list[dict | None] = [None] * len(batch)
    rankings, relevant, index = [], [], []
    for i, (case, step) in enumerate(batch):
        labels = case.gold.relevant
        if labels is None:
            reason = "the case has no relevance labels (gold.relevant)"
            rows[i] = {m: MetricValue.failed(reason) for m in names}
            continue
        dupes = sorted(d for d, c in Counter(step.ids).items() if c > 1)
        if dupes:
            reason = f"the ranking lists chunk ids more than once: {', '.join(dupes[:5])}"
            rows[i] = {m: MetricValue.failed(reason) for m in names}
            continue
        rankings.append(step.ids)
        relevant.append({d for d, g in labels.items() if g >= settings.relevance_level})
        index.append(i)
    if index:
        hits = relevance_matrix(rankings, relevant)
        n_rel = np.array([len(r) for r in relevant])
        recall, rr = recall_and_rr(hits, n_rel, settings.k)
        for row, i in enumerate(index):
            values = {f"recall@{k}": MetricValue.of(recall[k][row]) for k in settings.k}
            first = int(hits[row].argmax()) + 1 if hits.shape[1] and hits[row].any() else None
            values["mrr"] = MetricValue.of(rr[row], first_relevant_rank=first,
                                           relevant=int(n_rel[row]))
            rows[i] = values
    return rows
