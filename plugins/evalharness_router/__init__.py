"""Router evaluators: does the router choose the routes the question needs?

First metric: ``route_accuracy``, exact match of the chosen route set with the gold set.
"""

from __future__ import annotations

from evalharness import MetricValue, hookimpl
from evalharness.registry import Evaluator

__version__ = "0.1.0"


def route_match(predicted: list[str], gold: list[str]) -> bool:
    """Exact set match: order and repetition do not matter.

    >>> route_match(["blog", "sql"], ["sql", "blog"]), route_match(["sql"], ["sql", "blog"])
    (True, False)
    """
    return set(predicted) == set(gold)


@hookimpl
def register_evaluators(register):
    register(Evaluator(
        name="route_accuracy", component="router", metrics=["route_accuracy"],
        description="1 when the chosen route set equals the gold route set, else 0"))


@hookimpl
def evaluate_router(evaluator, batch):
    if evaluator != "route_accuracy":
        return None
    rows = []
    for case, step in batch:
        gold = case.gold.routes
        if gold is None:
            rows.append({"route_accuracy": MetricValue.failed(
                "the case has no gold route set (gold.routes)")})
            continue
        rows.append({"route_accuracy": MetricValue.of(
            route_match(step.routes, gold), predicted=sorted(set(step.routes)),
            gold=sorted(set(gold)))})
    return rows
