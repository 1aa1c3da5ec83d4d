"""Routing metrics as plain functions of route sets, confidences and probabilities.

Everything here is pure Python over ``set[str]`` route sets, so that it can be tested by hand
and used outside a scenario. A value that is undefined (a precision with no chosen case, a
recall with no gold case) is ``None``, never NaN and never a silent 0.

A *pair* is ``(predicted, gold)``: the route set the router chose and the gold route set of
one case.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass

NONE = "(none)"
"""Label of the empty route set in confusion matrices: the router abstained, or the gold
answer is that no route applies."""

Pair = tuple[frozenset[str], frozenset[str]]


def as_pairs(pairs: Iterable[tuple[Iterable[str], Iterable[str]]]) -> list[Pair]:
    """``(predicted, gold)`` pairs as pairs of frozensets (duplicates and order dropped)."""
    return [(frozenset(p), frozenset(g)) for p, g in pairs]


# --------------------------------------------------------------------------------------------
# Per case
# --------------------------------------------------------------------------------------------


def jaccard(predicted: Iterable[str], gold: Iterable[str]) -> float:
    """|P ∩ G| / |P ∪ G|; 1 when both sets are empty.

    >>> jaccard(["sql"], ["sql", "blog"]), jaccard([], []), jaccard(["blog"], ["sql"])
    (0.5, 1.0, 0.0)
    """
    p, g = set(predicted), set(gold)
    union = p | g
    return 1.0 if not union else len(p & g) / len(union)


def brier_from_scores(scores: Mapping[str, float], gold: Iterable[str],
                      routes: Sequence[str]) -> float:
    """Σ_r (p_r − y_r)² / |routes|, over ``routes``; y_r is 1 when r is a gold route, and a
    route without a score has p_r = 0.

    >>> brier_from_scores({"sql": 0.9, "blog": 0.2}, ["sql"], ["blog", "sql"])
    0.025
    """
    if not routes:
        raise ValueError("the Brier score needs at least one route")
    g = set(gold)
    total = math.fsum((scores.get(r, 0.0) - (1.0 if r in g else 0.0)) ** 2 for r in routes)
    return round(total / len(routes), 12)


def brier_from_confidence(confidence: float, correct: bool) -> float:
    """(confidence − exact match)²: the Brier score of the chosen set as one yes/no forecast.

    >>> brier_from_confidence(0.8, True), brier_from_confidence(0.8, False)
    (0.04, 0.64)
    """
    return round((confidence - (1.0 if correct else 0.0)) ** 2, 12)


# --------------------------------------------------------------------------------------------
# Per route: one-vs-rest counts, precision, recall, F1
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RouteCounts:
    """One route's 2×2 table over the cases: was it a gold route, was it chosen."""

    tp: int
    """gold and chosen"""
    fp: int
    """chosen, not gold"""
    fn: int
    """gold, not chosen"""
    tn: int
    """neither"""

    @property
    def support(self) -> int:
        """Cases with the route in the gold set."""
        return self.tp + self.fn

    @property
    def chosen(self) -> int:
        """Cases in which the router chose the route."""
        return self.tp + self.fp

    @property
    def precision(self) -> float | None:
        """TP / (TP + FP); ``None`` when the route was never chosen."""
        return self.tp / self.chosen if self.chosen else None

    @property
    def recall(self) -> float | None:
        """TP / (TP + FN); ``None`` when the route is in no gold set."""
        return self.tp / self.support if self.support else None

    @property
    def f1(self) -> float | None:
        """2·TP / (2·TP + FP + FN); ``None`` when the route is neither gold nor chosen anywhere.

        Equal to the harmonic mean of precision and recall when both are defined, and 0 when
        one of them is undefined but the route occurs (no true positive can be found).
        """
        denominator = 2 * self.tp + self.fp + self.fn
        return 2 * self.tp / denominator if denominator else None

    def as_dict(self) -> dict:
        return asdict(self) | {"support": self.support, "chosen": self.chosen,
                               "precision": self.precision, "recall": self.recall,
                               "f1": self.f1}


def route_counts(pairs: Sequence[Pair], routes: Iterable[str]) -> dict[str, RouteCounts]:
    """Each route's 2×2 table (TP, FP, FN, TN) over the ``(predicted, gold)`` pairs.

    >>> route_counts(as_pairs([(["sql"], ["sql"]), (["sql"], ["blog"])]), ["blog", "sql"])["sql"]
    RouteCounts(tp=1, fp=1, fn=0, tn=0)
    """
    out = {}
    for r in routes:
        tp = sum(1 for p, g in pairs if r in p and r in g)
        fp = sum(1 for p, g in pairs if r in p and r not in g)
        fn = sum(1 for p, g in pairs if r not in p and r in g)
        out[r] = RouteCounts(tp, fp, fn, len(pairs) - tp - fp - fn)
    return out


def averages(counts: Mapping[str, RouteCounts]) -> dict[str, float | None]:
    """Macro-F1 (mean of the routes' F1, over the routes whose F1 is defined) and micro
    precision, recall and F1 (TP, FP, FN pooled over the routes first).

    >>> averages({"a": RouteCounts(1, 0, 1, 2), "b": RouteCounts(3, 1, 0, 0)})
    {'macro_f1': 0.7619047619047619, 'micro_precision': 0.8, 'micro_recall': 0.8, 'micro_f1': 0.8}
    """
    f1s = [c.f1 for c in counts.values() if c.f1 is not None]
    pooled = RouteCounts(sum(c.tp for c in counts.values()), sum(c.fp for c in counts.values()),
                         sum(c.fn for c in counts.values()), 0)
    return {"macro_f1": math.fsum(f1s) / len(f1s) if f1s else None,
            "micro_precision": pooled.precision, "micro_recall": pooled.recall,
            "micro_f1": pooled.f1}


# --------------------------------------------------------------------------------------------
# Confusion matrices
# --------------------------------------------------------------------------------------------


def is_single_route(pairs: Sequence[Pair]) -> bool:
    """True when every gold and every chosen set has at most one route."""
    return all(len(p) <= 1 and len(g) <= 1 for p, g in pairs)


def set_label(routes: Iterable[str]) -> str:
    """``"blog+sql"`` for a route set, ``"(none)"`` for the empty set."""
    return "+".join(sorted(routes)) or NONE


def confusion_matrix(pairs: Sequence[Pair], labels: Sequence[str]) -> list[list[int]]:
    """Counts of cases by (gold label, predicted label): rows = gold, columns = predicted, in
    ``labels`` order; a label is a route set's :func:`set_label`. Every pair's labels must be
    in ``labels``.

    >>> confusion_matrix(as_pairs([(["sql"], ["sql"]), ([], ["blog"])]), ["blog", "sql", NONE])
    [[0, 0, 1], [0, 1, 0], [0, 0, 0]]
    """
    index = {label: i for i, label in enumerate(labels)}
    matrix = [[0] * len(labels) for _ in labels]
    for p, g in pairs:
        matrix[index[set_label(g)]][index[set_label(p)]] += 1
    return matrix


def matrix_labels(pairs: Sequence[Pair], routes: Sequence[str] | None = None) -> list[str]:
    """Labels for :func:`confusion_matrix`: single routes first (sorted, or ``routes``), then
    route combinations by size, then ``(none)`` if any gold or chosen set is empty."""
    sets = {s for pair in pairs for s in pair}
    singles = list(routes) if routes is not None else sorted(
        {r for s in sets for r in s})
    combos = sorted({set_label(s) for s in sets if len(s) > 1},
                    key=lambda label: (label.count("+"), label))
    return singles + combos + ([NONE] if frozenset() in sets else [])


# --------------------------------------------------------------------------------------------
# Calibration
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CalibrationBin:
    """One equal-width confidence bin: [lower, upper), the last one closed at 1."""

    lower: float
    upper: float
    n: int
    confidence: float
    """mean confidence of the bin's cases"""
    accuracy: float
    """share of the bin's cases whose chosen route set was exactly right"""

    @property
    def gap(self) -> float:
        return abs(self.accuracy - self.confidence)


def calibration_bins(confidences: Sequence[float], correct: Sequence[bool],
                     bins: int = 10) -> list[CalibrationBin]:
    """The non-empty bins of ``bins`` equal-width bins over [0, 1].

    Bin k holds the confidences c with k/bins ≤ c < (k+1)/bins; the last bin also holds 1.0.
    A confidence written as a bin edge (0.3 with 10 bins) falls in the bin that starts there.
    """
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    if len(confidences) != len(correct):
        raise ValueError("confidences and correct must have the same length")
    edges = [k / bins for k in range(1, bins)]
    members: dict[int, list[int]] = {}
    for i, c in enumerate(confidences):
        if not 0.0 <= c <= 1.0:
            raise ValueError(f"confidence {c!r} is outside [0, 1]")
        members.setdefault(bisect_right(edges, c), []).append(i)
    out = []
    for k in sorted(members):
        idx = members[k]
        out.append(CalibrationBin(
            lower=k / bins, upper=(k + 1) / bins, n=len(idx),
            confidence=math.fsum(confidences[i] for i in idx) / len(idx),
            accuracy=sum(1 for i in idx if correct[i]) / len(idx)))
    return out


def expected_calibration_error(confidences: Sequence[float], correct: Sequence[bool],
                               bins: int = 10) -> float | None:
    """ECE = Σ_b (n_b / N) · |accuracy_b − confidence_b| over equal-width bins; ``None``
    without any confidence.

    >>> expected_calibration_error([0.9, 0.9, 0.3], [True, False, False], bins=10)
    0.36666666666666664
    """
    found = calibration_bins(confidences, correct, bins)
    total = sum(b.n for b in found)
    if not total:
        return None
    return math.fsum(b.n / total * b.gap for b in found)
