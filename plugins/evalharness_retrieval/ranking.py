"""The ``ranking`` evaluator: trec_eval's ranking measures per case, from graded labels.

The whole batch goes through the vectorised kernel at once. A case's ranking is the order
trec_eval would use: by the retriever's scores (descending, equal scores by chunk id
descending) when the step has them, else the order of ``step.ids``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from evalharness import MetricValue
from evalharness_retrieval.kernel import Hits, compute, hits_from_lists, hits_from_scores
from evalharness_retrieval.measures import FAMILIES, Measure, report_measures

NO_LABELS = "the case has no relevance labels (gold.relevant)"

NOTHING_RELEVANT = ("no chunk is relevant for this case (gold.relevant labels none at "
                    "relevance_level): trec_eval's convention scores every measure 0")
"""The note on each value of a case whose labels mark nothing relevant (``{}``, or only
grades below ``relevance_level``): recall, AP, nDCG are undefined there, and the 0 says so."""


class RankingSettings(BaseModel):
    """Settings of the ``ranking`` evaluator."""

    model_config = ConfigDict(extra="forbid")

    k: list[int] = Field(default_factory=lambda: [5, 10])
    """Cutoffs; each measure with a cutoff gives one metric per K (``recall@5``, ...)."""

    relevance_level: int = Field(default=1, ge=1)
    """Minimum grade for a chunk to count as relevant (binary measures; nDCG and DCG use the
    grades themselves)."""

    gain: Literal["exp2", "linear"] = "exp2"
    """Gain of a grade g in ``ndcg@K`` and ``dcg@K``: ``exp2`` = 2^g - 1, ``linear`` = g
    (trec_eval's ndcg_cut)."""

    measures: list[str] = Field(default_factory=lambda: ["recall", "mrr"])
    """Which measures to report, from: precision, recall, f1, hit_rate, mrr, mrr@k, map,
    map@k, r_precision, ndcg, dcg; or ``all``."""

    @field_validator("k")
    @classmethod
    def _positive_unique(cls, value: list[int]) -> list[int]:
        if not value or any(k < 1 for k in value):
            raise ValueError("k must be a non-empty list of cutoffs >= 1, e.g. [5, 10]")
        return sorted(set(value))

    @field_validator("measures", mode="before")
    @classmethod
    def _known(cls, value):
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            return value
        names = [str(v).strip().lower() for v in value]
        if "all" in names:
            return list(FAMILIES)
        unknown = [n for n in names if n not in FAMILIES]
        if unknown or not names:
            what = f"unknown measure {unknown[0]!r}" if unknown else "no measure"
            raise ValueError(f"{what}; choose from {', '.join(FAMILIES)}, or all")
        return [f for f in FAMILIES if f in names]


def ranking_metrics(settings: RankingSettings) -> list[str]:
    """Metric names for these settings: the cutoff is part of the name.

    >>> ranking_metrics(RankingSettings(k=[10, 3]))
    ['recall@3', 'recall@10', 'mrr']
    >>> ranking_metrics(RankingSettings(k=[5], measures=["ndcg", "precision", "map@k"]))
    ['precision@5', 'map@5', 'ndcg@5']
    """
    return [name for name, _ in report_measures(settings.measures, settings.k, settings.gain)]


def trec_order(ids: Sequence[str], scores: Sequence[float] | None) -> list[str]:
    """The ranking trec_eval evaluates: by score descending, equal scores by id descending;
    the given order when there are no scores.

    >>> trec_order(["a", "b", "c"], [1.0, 2.0, 1.0])
    ['b', 'c', 'a']
    >>> trec_order(["a", "b"], None)
    ['a', 'b']
    """
    if scores is None:
        return list(ids)
    return [d for _, d in sorted(zip(scores, ids, strict=True), reverse=True)]


def ranking_problem(ids: Sequence[str], scores: Sequence[float] | None) -> str | None:
    """Why a retriever step cannot be ranked (a duplicate id, a NaN score), or ``None``."""
    dupes = sorted(d for d, c in Counter(ids).items() if c > 1)
    if dupes:
        return f"the ranking lists chunk ids more than once: {', '.join(dupes[:5])}"
    if scores is not None and any(math.isnan(s) for s in scores):
        return "the retriever's scores include NaN; give every chunk a number, or no scores"
    return None


def case_hits(steps: Sequence[tuple[Sequence[str], Sequence[float] | None]],
              labels: Sequence[dict[str, int]], level: int) -> list[tuple[list[int], Hits]]:
    """Kernel input for rankable cases: those with scores and those without, each as one run.

    Returns ``(positions in the input, hits)`` for each non-empty group.
    """
    groups = []
    scored = [i for i, (_, s) in enumerate(steps) if s is not None]
    plain = [i for i, (_, s) in enumerate(steps) if s is None]
    if scored:
        runs = [dict(zip(steps[i][0], steps[i][1], strict=True)) for i in scored]
        groups.append((scored, hits_from_scores(runs, [labels[i] for i in scored], level,
                                                [str(i) for i in scored])))
    if plain:
        groups.append((plain, hits_from_lists([steps[i][0] for i in plain],
                                              [labels[i] for i in plain], level,
                                              [str(i) for i in plain])))
    return groups


def first_relevant_rank(h: Hits) -> np.ndarray:
    """Per query: the rank of the first relevant document, 0 when none is retrieved."""
    rel = h.grade >= h.level
    q, r = h.q[rel], h.rank[rel]
    first = np.searchsorted(q, q, side="left") == np.arange(q.size)  # hits sorted by (q, rank)
    out = np.zeros(h.n, dtype=np.int64)
    out[q[first]] = r[first]
    return out


def kernel_values(steps, labels, level: int, measures: Sequence[Measure]):
    """Per input position: ``{kernel measure name: value}``, plus the first relevant rank and
    the number of relevant chunks (for details)."""
    values: list[dict | None] = [None] * len(steps)
    first: list[int] = [0] * len(steps)
    relevant: list[int] = [0] * len(steps)
    for positions, hits in case_hits(steps, labels, level):
        computed = compute(hits, measures)
        columns = {name: v.tolist() for name, v in computed.items()}
        firsts = first_relevant_rank(hits).tolist()
        rels = hits.num_rel.tolist()
        for row, i in enumerate(positions):
            values[i] = {name: col[row] for name, col in columns.items()}
            first[i], relevant[i] = firsts[row], rels[row]
    return values, first, relevant


def evaluate_ranking(batch, settings: RankingSettings) -> list[dict[str, MetricValue]]:
    """One ``{metric: MetricValue}`` per case: every configured measure at every cutoff."""
    pairs = report_measures(settings.measures, settings.k, settings.gain)
    rows: list[dict | None] = [None] * len(batch)
    todo, steps, labels = [], [], []
    for i, (case, step) in enumerate(batch):
        problem = NO_LABELS if case.gold.relevant is None else ranking_problem(step.ids,
                                                                               step.scores)
        if problem is not None:
            rows[i] = {name: MetricValue.failed(problem) for name, _ in pairs}
            continue
        todo.append(i)
        steps.append((step.ids, step.scores))
        labels.append(case.gold.relevant)
    values, first, relevant = kernel_values(steps, labels, settings.relevance_level,
                                            [m for _, m in pairs])
    for j, i in enumerate(todo):
        row = {}
        note = {"note": NOTHING_RELEVANT} if not relevant[j] else {}
        for name, measure in pairs:
            if name == "mrr":
                row[name] = MetricValue.of(values[j][measure.name],
                                           first_relevant_rank=first[j] or None,
                                           relevant=relevant[j], **note)
            else:
                row[name] = MetricValue.of(values[j][measure.name],
                                           **({"relevant": 0} | note if note else {}))
        rows[i] = row
    return rows
