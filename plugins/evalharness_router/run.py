"""The ``routing`` evaluator's run-level metrics: macro-F1, micro-F1 and the ECE, gateable.

They are the numbers of the routing report section, computed from the same cases (those with
gold routes; for the ECE, those whose router reports a confidence), each with a seeded
percentile-bootstrap 95% interval over the cases: the statistic is a function of sums over
cases (per-route TP/FP/FN; per-bin confidence and correctness), so the resampled sums give its
bootstrap distribution directly (:func:`evalharness.stats.bootstrap_sums`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from evalharness import MetricValue
from evalharness.stats import bootstrap_sums, percentile_ci, seed_for
from evalharness_router.metrics import (
    averages,
    calibration_bins,
    expected_calibration_error,
    route_counts,
)
from evalharness_router.section import ece_name, labels_of
from evalharness_router.settings import RoutingSettings

NO_GOLD = "no case has gold routes (gold.routes)"
NO_CONFIDENCE = "the router reports no confidence for any case with gold routes"


def run_metric_names(settings: RoutingSettings) -> list[str]:
    """``macro_f1``, ``micro_f1`` and ``ece@<bins>bins``.

    >>> run_metric_names(RoutingSettings(ece_bins=15))
    ['macro_f1', 'micro_f1', 'ece@15bins']
    """
    return ["macro_f1", "micro_f1", ece_name(settings.ece_bins)]


def run_metrics(component: str, results: Sequence[Any],
                settings: RoutingSettings) -> dict[str, MetricValue]:
    """The run-level metrics of the router ``component`` over ``results``."""
    labels = labels_of(component, results)
    pairs, confidences, correct = labels.pairs, labels.confidences, labels.correct
    ece = ece_name(settings.ece_bins)
    if not pairs:
        return {"macro_f1": MetricValue.failed(NO_GOLD), "micro_f1": MetricValue.failed(NO_GOLD),
                ece: MetricValue.failed(NO_GOLD)}
    # with repeats, a case's repeats are resampled together (the cluster bootstrap)
    out = _f1s(component, pairs, labels.cases if labels.repeated else None)
    if confidences:
        out[ece] = _ece(component, ece, confidences, correct, settings.ece_bins,
                        labels.confidence_cases if labels.repeated else None)
    else:
        out[ece] = MetricValue.failed(NO_CONFIDENCE)
    return out


def _f1s(component: str, pairs: list[tuple[frozenset, frozenset]],
         cases: list[str] | None = None) -> dict[str, MetricValue]:
    routes = sorted({r for p, g in pairs for r in p | g})
    avg = averages(route_counts(pairs, routes))
    # per case and route: TP, FP, FN indicators; the F1s are functions of their sums
    rows = np.zeros((len(pairs), 3 * len(routes)))
    for i, (p, g) in enumerate(pairs):
        for j, r in enumerate(routes):
            rows[i, 3 * j] = r in p and r in g
            rows[i, 3 * j + 1] = r in p and r not in g
            rows[i, 3 * j + 2] = r not in p and r in g
    sums = bootstrap_sums(rows, seed=seed_for("run", component, "routes"), clusters=cases)
    tp, fp, fn = sums[:, 0::3], sums[:, 1::3], sums[:, 2::3]
    with np.errstate(invalid="ignore", divide="ignore"):
        per_route = np.where(2 * tp + fp + fn > 0, 2 * tp / (2 * tp + fp + fn), np.nan)
        defined = ~np.isnan(per_route)
        macro = np.where(defined.any(axis=1),
                         np.nansum(per_route, axis=1) / np.maximum(defined.sum(axis=1), 1),
                         np.nan)
        pooled = 2 * tp.sum(axis=1) + fp.sum(axis=1) + fn.sum(axis=1)
        micro = np.where(pooled > 0, 2 * tp.sum(axis=1) / pooled, np.nan)
    out = {}
    for name, value, samples in (("macro_f1", avg["macro_f1"], macro),
                                 ("micro_f1", avg["micro_f1"], micro)):
        if value is None:
            out[name] = MetricValue.failed(f"{name} is undefined: no route was chosen or gold "
                                           f"in {len(pairs)} cases")
            continue
        ci = percentile_ci(samples) if len(set(cases or range(len(pairs)))) > 1 else None
        out[name] = MetricValue.of(value, n=len(pairs), routes=routes,
                                   ci95=list(ci) if ci is not None else None)
    return out


def _ece(component: str, name: str, confidences: list[float], correct: list[bool],
         bins: int, cases: list[str] | None = None) -> MetricValue:
    value = expected_calibration_error(confidences, correct, bins)
    # per case: its confidence and correctness in its bin's columns; ECE = Σ_bins |Σ correct −
    # Σ confidence| / N, a function of the per-bin sums
    found = calibration_bins(confidences, correct, bins)
    edges = np.arange(1, bins) / bins
    which = np.searchsorted(edges, np.asarray(confidences), side="right")
    # a last column of ones counts a resample's results (with repeats, whole cases are drawn,
    # so their number varies)
    rows = np.zeros((len(confidences), 2 * bins + 1))
    rows[np.arange(len(confidences)), 2 * which] = confidences
    rows[np.arange(len(confidences)), 2 * which + 1] = correct
    rows[:, -1] = 1.0
    sums = bootstrap_sums(rows, seed=seed_for("run", component, name), clusters=cases)
    samples = np.abs(sums[:, 1:-1:2] - sums[:, 0:-1:2]).sum(axis=1) / sums[:, -1]
    ci = percentile_ci(samples) if len(set(cases or range(len(confidences)))) > 1 else None
    return MetricValue.of(value, n=len(confidences), bins=bins, occupied_bins=len(found),
                          ci95=list(ci) if ci is not None else None)
