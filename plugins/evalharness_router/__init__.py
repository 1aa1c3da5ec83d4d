"""Router evaluators: does the router choose the routes the question needs?

Two evaluators (see docs/metrics/router.md):

- ``route_accuracy``: ``route_accuracy``, exact match of the chosen route set with the gold set.
- ``routing``: per case ``route_jaccard``, ``abstention`` and ``brier``; and, for the run, a
  report section with per-route precision/recall/F1, macro- and micro-F1, the confusion matrix
  (single-route) or per-route 2×2 tables (multi-route), the abstention rate and the
  calibration of the router's confidence (``ece@<bins>bins``, reliability bins).

Per-case values are averaged by the core; the run-level numbers are not means of per-case
values, so they live in the report section (``report.json``: ``sections[].data``).
"""

from __future__ import annotations

from evalharness import MetricValue, hookimpl
from evalharness.errors import NoOracle
from evalharness.registry import Evaluator
from evalharness_router.metrics import (
    brier_from_confidence,
    brier_from_scores,
    jaccard,
)
from evalharness_router.run import run_metric_names, run_metrics
from evalharness_router.section import routing_sections
from evalharness_router.settings import RoutingSettings

__version__ = "0.1.0"

NO_GOLD = "the case has no gold route set (gold.routes)"
NO_CONFIDENCE = "the router reports neither scores nor a confidence"


def route_match(predicted: list[str], gold: list[str]) -> bool:
    """Exact set match: order and repetition do not matter.

    >>> route_match(["blog", "sql"], ["sql", "blog"]), route_match(["sql"], ["sql", "blog"])
    (True, False)
    """
    return set(predicted) == set(gold)


ROUTING_METRICS = ["route_jaccard", "abstention", "brier"]


@hookimpl
def register_evaluators(register):
    register(Evaluator(
        name="route_accuracy", component="router", metrics=["route_accuracy"],
        description="1 when the chosen route set equals the gold route set, else 0"))
    register(Evaluator(
        name="routing", component="router", metrics=ROUTING_METRICS, settings=RoutingSettings,
        run_metrics=run_metric_names,
        description="per case: Jaccard of chosen and gold route sets, abstention (no route or "
                    "only fallback routes), Brier score of the router's probabilities; per "
                    "run: macro-F1, micro-F1 and ECE (gateable, with bootstrap CIs) and a "
                    "report section with per-route precision/recall/F1, the confusion matrix "
                    "or per-route 2x2 tables, abstention rate, reliability table"))


@hookimpl
def evaluate_router(evaluator, batch):
    if evaluator != "route_accuracy":
        return None
    return [_accuracy_row(case, step) for case, step in batch]


@hookimpl(specname="evaluate_router")
def evaluate_router_routing(evaluator, batch, settings, context):
    """The ``routing`` evaluator; the route universe comes from the pipeline's routers."""
    if evaluator != "routing":
        return None
    return routing_rows(batch, settings, _pipeline_routes(context))


def routing_rows(batch, settings: RoutingSettings | None = None, routes=()
                 ) -> list[dict[str, MetricValue]]:
    """The ``routing`` metrics of a batch of ``(case, RouterStep)`` pairs; ``routes`` are the
    pipeline's route names (the Brier score over per-route scores covers them all)."""
    settings = settings if settings is not None else RoutingSettings()
    return [_routing_row(case, step, settings, list(routes)) for case, step in batch]


@hookimpl
def evaluate_run(evaluator, component, results, settings):
    """The ``routing`` evaluator's run-level metrics: macro-F1, micro-F1, ECE."""
    if evaluator != "routing":
        return None
    return run_metrics(component, results, settings)


@hookimpl
def report_sections(report, results):
    return routing_sections(report, results) or None


@hookimpl
def oracle_output(kind, case):
    """A perfect router chooses the gold routes (for oracle headroom)."""
    if kind != "router":
        return None
    if case.gold.routes is None:
        raise NoOracle("the case has no gold routes (gold.routes)")
    return {"routes": list(case.gold.routes)}


def _accuracy_row(case, step) -> dict[str, MetricValue]:
    gold = case.gold.routes
    if gold is None:
        return {"route_accuracy": MetricValue.failed(NO_GOLD)}
    return {"route_accuracy": MetricValue.of(
        route_match(step.routes, gold), predicted=sorted(set(step.routes)),
        gold=sorted(set(gold)))}


def _pipeline_routes(context) -> list[str]:
    pipeline = getattr(context, "pipeline", None)
    return sorted(pipeline.routes()) if pipeline is not None else []


def abstention_kind(chosen: set[str], fallback: set[str]) -> str | None:
    """``"none"`` (no route chosen), ``"fallback"`` (only fallback routes) or ``None``.

    >>> abstention_kind(set(), set()), abstention_kind({"faq"}, {"faq"}), abstention_kind({"sql"}, set())
    ('none', 'fallback', None)
    """
    if not chosen:
        return "none"
    if fallback and chosen <= fallback:
        return "fallback"
    return None


def _routing_row(case, step, settings: RoutingSettings, known: list[str]
                 ) -> dict[str, MetricValue]:
    chosen = set(step.routes)
    kind = abstention_kind(chosen, set(settings.fallback_routes))
    row = {"abstention": MetricValue.of(kind is not None, kind=kind or "routed",
                                        predicted=sorted(chosen))}
    gold = case.gold.routes
    if gold is None:
        row["route_jaccard"] = MetricValue.failed(NO_GOLD)
        row["brier"] = MetricValue.failed(NO_GOLD)
        return row
    gold_set = set(gold)
    row["route_jaccard"] = MetricValue.of(jaccard(chosen, gold_set), predicted=sorted(chosen),
                                          gold=sorted(gold_set))
    row["brier"] = _brier(step, chosen, gold_set, settings.brier, known)
    return row


def _brier(step, chosen: set[str], gold: set[str], source: str, known: list[str]
           ) -> MetricValue:
    scores = step.scores
    if source in ("auto", "scores") and scores:
        bad = {r: v for r, v in scores.items() if not 0.0 <= v <= 1.0}
        if bad:
            return MetricValue.failed("the router's scores are not probabilities in [0, 1]",
                                      scores=bad)
        routes = sorted(set(known) | set(scores) | gold | chosen)
        unscored = [r for r in routes if r not in scores]
        details = {"source": "scores", "routes": routes}
        if unscored:
            details["unscored"] = unscored
        return MetricValue.of(brier_from_scores(scores, gold, routes), **details)
    if source == "scores":
        return MetricValue.failed("the router reports no per-route scores")
    if step.confidence is None:
        return MetricValue.failed("the router reports no confidence" if source == "confidence"
                                  else NO_CONFIDENCE)
    correct = chosen == gold
    return MetricValue.of(brier_from_confidence(step.confidence, correct),
                          source="confidence", confidence=step.confidence, correct=correct)
