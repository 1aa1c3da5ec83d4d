"""Router evaluators: does the router choose the routes the question needs?

Three evaluators (see docs/metrics/router.md):

- ``route_accuracy``: ``route_accuracy``, exact match of the chosen route set with the gold set.
- ``route_confidence``: the router's own confidence in its choice (no gold: for
  ``evalharness monitor``).
- ``routing``: per case ``route_jaccard``, ``abstention`` and ``brier``; and, for the run, a
  report section with per-route precision/recall/F1, macro- and micro-F1, the confusion matrix
  (single-route) or per-route 2×2 tables (multi-route), the abstention rate and the
  calibration of the router's confidence (``ece@<bins>bins``, reliability bins).

Per-case values are averaged by the core; the run-level numbers are not means of per-case
values, so they live in the report section (``report.json``: ``sections[].data``).
"""

from __future__ import annotations

from evalharness import Evaluator, Init, LabelGold, Metric, MetricValue, Oracle, hookimpl
from evalharness.errors import NoOracle
from evalharness.registry import run_evaluator
from evalharness_router.metrics import (
    brier_from_confidence,
    brier_from_scores,
    jaccard,
)
from evalharness_router.run import run_metric_names, run_metrics
from evalharness_router.section import routing_sections
from evalharness_router.settings import RoutingSettings

__version__ = "0.2.0"

NO_GOLD = "the case has no gold route set (gold.routes)"
NO_CONFIDENCE = "the router reports neither scores nor a confidence"


def route_match(predicted: list[str], gold: list[str]) -> bool:
    """Exact set match: order and repetition do not matter.

    >>> route_match(["blog", "sql"], ["sql", "blog"]), route_match(["sql"], ["sql", "blog"])
    (True, False)
    """
    return set(predicted) == set(gold)


ROUTING_METRICS = ["route_jaccard", "abstention", "brier"]

METRICS = {
    "route_accuracy": Metric(
        "route_accuracy", verdict=">= 1", description="the exact set of routes the case needs",
        question="Is the route right for this question?",
        gold=LabelGold(field="routes", step="routes")),
    "route_jaccard": Metric(
        "route_jaccard", description="Jaccard similarity of the chosen and gold route sets"),
    "abstention": Metric(
        "abstention", reference_free=True, direction="lower",
        description="1 when the router chose no route, or only fallback routes"),
    "route_confidence": Metric(
        "route_confidence", reference_free=True,
        description="the router's own confidence in the routes it chose (no gold needed)"),
    "brier": Metric(
        "brier", direction="lower",
        description="Brier score of the router's probabilities against the gold routes"),
}
"""The per-case metrics' declarations."""

RUN_METRICS = [
    Metric("macro_f1", scope="run", description="mean of the routes' F1"),
    Metric("micro_f1", scope="run", description="F1 over every route decision"),
    Metric("ece@{bins}bins", scope="run", direction="lower",
           description="expected calibration error of the router's confidence"),
]
"""The run-level metrics' declarations."""


def route_accuracy(batch):
    """The ``route_accuracy`` evaluator."""
    return [_accuracy_row(case, step) for case, step in batch]


def route_confidence(batch):
    """The ``route_confidence`` evaluator: the confidence the router reports, else the score
    of the least likely route it chose, else an error saying it reports neither."""
    rows = []
    for _, step in batch:
        chosen = [step.scores[r] for r in step.routes if step.scores and r in step.scores]
        if step.confidence is not None:
            rows.append({"route_confidence": MetricValue.of(step.confidence, source="confidence")})
        elif chosen and all(0.0 <= v <= 1.0 for v in chosen):
            rows.append({"route_confidence": MetricValue.of(min(chosen), source="scores")})
        else:
            rows.append({"route_confidence": MetricValue.failed(NO_CONFIDENCE)})
    return rows


def routing(batch, settings, context):
    """The ``routing`` evaluator; the route universe comes from the pipeline's routers."""
    return routing_rows(batch, settings, _pipeline_routes(context))


@hookimpl
def register_evaluators(register):
    register(Evaluator(
        name="route_accuracy", component="router", metrics=[METRICS["route_accuracy"]],
        evaluate=route_accuracy, init=Init(entry="route_accuracy", gate=">= 0.9"),
        description="1 when the chosen route set equals the gold route set, else 0"))
    register(Evaluator(
        name="route_confidence", component="router", metrics=[METRICS["route_confidence"]],
        evaluate=route_confidence,
        description="the router's own confidence in its routes (its `confidence`, else the "
                    "lowest score of the routes it chose); no gold needed"))
    register(Evaluator(
        name="routing", component="router", metrics=[METRICS[m] for m in ROUTING_METRICS],
        settings=RoutingSettings, evaluate=routing,
        run_metrics=RUN_METRICS, run_names=run_metric_names, evaluate_run=run_metrics,
        description="per case: Jaccard of chosen and gold route sets, abstention (no route or "
                    "only fallback routes), Brier score of the router's probabilities; per "
                    "run: macro-F1, micro-F1 and ECE (gateable, with bootstrap CIs) and a "
                    "report section with per-route precision/recall/F1, the confusion matrix "
                    "or per-route 2x2 tables, abstention rate, reliability table"))

def evaluate_router(evaluator, batch, settings=None, context=None):
    """Run one of this plugin's evaluators by name on a batch of ``(case, step)`` pairs (for
    notebooks and tests; a run calls each evaluator's ``evaluate`` itself); ``None`` for a
    name it does not have."""
    return run_evaluator(register_evaluators, evaluator, batch, settings, context)


evaluate_router_routing = evaluate_router
"""The same (evalharness 0.1 had two functions)."""


def routing_rows(batch, settings: RoutingSettings | None = None, routes=()
                 ) -> list[dict[str, MetricValue]]:
    """The ``routing`` metrics of a batch of ``(case, RouterStep)`` pairs; ``routes`` are the
    pipeline's route names (the Brier score over per-route scores covers them all)."""
    settings = settings if settings is not None else RoutingSettings()
    return [_routing_row(case, step, settings, list(routes)) for case, step in batch]


@hookimpl
def report_sections(report, results):
    return routing_sections(report, results) or None


def perfect_router(case):
    """A perfect router chooses the gold routes (for oracle headroom)."""
    if case.gold.routes is None:
        raise NoOracle("the case has no gold routes (gold.routes)")
    return {"routes": list(case.gold.routes)}


@hookimpl
def register_oracles(register):
    register(Oracle(kind="router", output=perfect_router,
                    description="the gold routes (gold.routes)"))


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
