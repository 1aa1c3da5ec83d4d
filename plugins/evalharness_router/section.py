"""The run-level routing report section: per-route P/R/F1, macro/micro-F1, confusion matrix
or per-route 2×2 tables, abstention rate, calibration (ECE over equal-width bins).

Computed from the run's case results (``case.gold.routes`` and the router step), for each
component of kind ``router`` on which the ``routing`` evaluator ran.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from evalharness import RouterStep
from evalharness.registry import ReportSection
from evalharness_router.metrics import (
    NONE,
    Pair,
    RouteCounts,
    averages,
    calibration_bins,
    confusion_matrix,
    expected_calibration_error,
    is_single_route,
    jaccard,
    matrix_labels,
    route_counts,
)
from evalharness_router.settings import RoutingSettings

EVALUATOR = "routing"
UNDEFINED = "—"


def fmt(value: float | None, digits: int = 3) -> str:
    """A number for a table; ``—`` when it is undefined.

    >>> fmt(0.5), fmt(None)
    ('0.500', '—')
    """
    return UNDEFINED if value is None else f"{value:.{digits}f}"


def ece_name(bins: int) -> str:
    """The ECE's name carries its bin count, like ``recall@5`` carries its cutoff.

    >>> ece_name(10)
    'ece@10bins'
    """
    return f"ece@{bins}bins"


def routing_sections(report, results: Sequence[Any]) -> list[ReportSection]:
    """One section per router component on which the ``routing`` evaluator ran."""
    sections = []
    components = getattr(report, "components", None) or {}
    for name, component in components.items():
        if component.kind != "router":
            continue
        runs = [ev for ev in component.evaluators if ev.name == EVALUATOR]
        if not runs:
            continue
        settings = RoutingSettings.model_validate(runs[0].settings)
        brier = component.metrics.get("brier")
        sections.append(routing_section(
            name, results, bins=settings.ece_bins, fallback_routes=settings.fallback_routes,
            brier_mean=brier.mean if brier is not None else None))
    return sections


def labelled(component: str, results: Iterable[Any]
             ) -> tuple[list[Pair], list[float], list[bool]]:
    """What every run-level number of a router is computed from: the ``(chosen, gold)`` route
    sets of the evaluated cases with gold routes, and, for those whose router reports a
    confidence, the confidence and whether the chosen set was exactly right. One pass over
    ``results``."""
    labels = labels_of(component, results)
    return labels.pairs, labels.confidences, labels.correct


def labels_of(component: str, results: Iterable[Any]) -> _Labels:
    """:func:`labelled`'s labels, with the case of each (``cases``, ``confidence_cases``): in
    a run with repeats a case has a label per repeat, and intervals resample cases."""
    labels = _Labels()
    for result in results:
        step = _router_step(result, component)
        if step is not None:
            labels.add(result, step)
    return labels


class _Labels:
    """:func:`labelled`, case by case. Equal pairs are one object: a run has few distinct
    route sets, so a pair costs a pointer per case."""

    def __init__(self) -> None:
        self.pairs: list[Pair] = []
        self.confidences: list[float] = []
        self.correct: list[bool] = []
        self.cases: list[str] = []
        """The case of each pair."""
        self.confidence_cases: list[str] = []
        """The case of each confidence."""
        self.repeated = False
        """Whether the results are repeats of their cases (a run with ``--repeat``)."""
        self._same: dict[Pair, Pair] = {}

    def add(self, result: Any, step: RouterStep) -> None:
        """Count one evaluated case's router step."""
        if result.case.gold.routes is None:
            return
        chosen, gold = frozenset(step.routes), frozenset(result.case.gold.routes)
        pair = self._same.setdefault((chosen, gold), (chosen, gold))
        self.pairs.append(pair)
        self.cases.append(result.case.id)
        self.repeated = self.repeated or getattr(result, "repeat", None) is not None
        if step.confidence is not None:
            self.confidences.append(step.confidence)
            self.correct.append(chosen == gold)
            self.confidence_cases.append(result.case.id)


def _router_step(result, component: str) -> RouterStep | None:
    status = result.components.get(component)
    if status is None or status.status != "evaluated":
        return None
    step = result.trace.step(component)
    if step is None or isinstance(step, RouterStep):
        return step
    return RouterStep.model_validate(step)


def routing_section(component: str, results: Sequence[Any], *, bins: int = 10,
                    fallback_routes: Sequence[str] = (), brier_mean: float | None = None
                    ) -> ReportSection:
    """The section for one router component, from the run's case results (one pass)."""
    fallback = set(fallback_routes)
    evaluated = no_gold = abstain_none = abstain_fallback = 0
    labels = _Labels()
    for result in results:
        step = _router_step(result, component)
        if step is None:
            continue
        labels.add(result, step)
        evaluated += 1
        chosen = frozenset(step.routes)
        if not chosen:
            abstain_none += 1
        elif fallback and chosen <= fallback:
            abstain_fallback += 1
        no_gold += result.case.gold.routes is None
    pairs, confidences, correct = labels.pairs, labels.confidences, labels.correct

    routes = sorted({r for p, g in pairs for r in p | g})
    counts = route_counts(pairs, routes)
    avg = averages(counts)
    single = is_single_route(pairs)
    labels = matrix_labels(pairs, routes if single else None)
    matrix = confusion_matrix(pairs, labels)
    abstained = abstain_none + abstain_fallback
    accuracy = sum(p == g for p, g in pairs) / len(pairs) if pairs else None
    mean_jaccard = sum(jaccard(p, g) for p, g in pairs) / len(pairs) if pairs else None
    notes = _undefined_notes(counts)

    calibration = None
    if confidences:
        found = calibration_bins(confidences, correct, bins)
        ece = expected_calibration_error(confidences, correct, bins)
        calibration = {
            "metric": ece_name(bins), ece_name(bins): ece, "bins": bins,
            "cases": len(confidences), "without_confidence": len(pairs) - len(confidences),
            "brier": brier_mean,
            "reliability": [{"lower": b.lower, "upper": b.upper, "cases": b.n,
                             "confidence": b.confidence, "accuracy": b.accuracy,
                             "gap": b.gap} for b in found],
        }

    data = {
        "component": component, "evaluator": EVALUATOR,
        "cases": {"evaluated": evaluated, "with_gold": len(pairs), "without_gold": no_gold},
        "routes": routes, "mode": "single-route" if single else "multi-route",
        "accuracy": accuracy, "jaccard": mean_jaccard,
        "per_route": {r: c.as_dict() for r, c in counts.items()},
        **avg,
        "confusion_matrix": {"of": "route" if single else "route set", "rows": "gold",
                             "columns": "predicted", "labels": labels, "counts": matrix},
        "abstention": {"cases": abstained, "of": evaluated,
                       "rate": abstained / evaluated if evaluated else None,
                       "no_route": abstain_none, "fallback_only": abstain_fallback,
                       "fallback_routes": sorted(fallback)},
        "calibration": calibration,
        "undefined": notes,
    }
    markdown = _markdown(data, counts, single, calibration, bins)
    title = "Routing" if component == "router" else f"Routing ({component})"
    return ReportSection(title=title, markdown=markdown, data=data, view="routing")


def _undefined_notes(counts: dict[str, RouteCounts]) -> list[str]:
    notes = []
    for route, c in counts.items():
        if c.precision is None:
            notes.append(f"precision of `{route}` is undefined: the router never chose it")
        if c.recall is None:
            notes.append(f"recall of `{route}` is undefined: no case has it in its gold set")
    return notes


def _table(header: list[str], rows: list[list[str]], align_first_left: bool = True) -> list[str]:
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join(["---" if align_first_left else "---:"]
                            + ["---:"] * (len(header) - 1)) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _markdown(data: dict, counts: dict[str, RouteCounts], single: bool,
              calibration: dict | None, bins: int) -> str:
    cases = data["cases"]
    if not cases["evaluated"]:
        return "No case has a router step that was evaluated."
    left_out = (f"; {cases['without_gold']} without `gold.routes` left out"
                if cases["without_gold"] else "")
    lines = [f"{cases['with_gold']} of {cases['evaluated']} evaluated cases have gold routes"
             f"{left_out}. Routes: " + (", ".join(f"`{r}`" for r in data["routes"]) or "none")
             + "."]
    if cases["with_gold"]:
        lines[-1] += (f" Exact route-set accuracy {fmt(data['accuracy'])}, mean Jaccard "
                      f"{fmt(data['jaccard'])}.")
        lines += ["", *_table(
            ["route", "precision", "recall", "F1", "gold (TP+FN)", "chosen (TP+FP)"],
            [[f"`{r}`", fmt(c.precision), fmt(c.recall), fmt(c.f1), str(c.support),
              str(c.chosen)] for r, c in counts.items()])]
        n_f1 = sum(1 for c in counts.values() if c.f1 is not None)
        lines += ["", f"Macro-F1 **{fmt(data['macro_f1'])}** (mean of the {n_f1} routes' F1) · "
                  f"micro-F1 **{fmt(data['micro_f1'])}** (TP, FP, FN pooled over the routes: "
                  f"precision {fmt(data['micro_precision'])}, recall "
                  f"{fmt(data['micro_recall'])})."]
        if data["undefined"]:
            lines += ["", f"{UNDEFINED} = undefined, not 0: "
                      + "; ".join(data["undefined"]) + "."]
        cm = data["confusion_matrix"]
        none = f"; `{NONE}` = no route" if NONE in cm["labels"] else ""
        if single:
            lines += ["", "Confusion matrix (rows = gold route, columns = chosen route; the "
                      f"diagonal counts correct cases{none}):", ""]
        else:
            lines += ["", "Some cases have several gold or chosen routes, so each route has "
                      "its own 2×2 table (rows = gold, columns = chosen):"]
            for r, c in counts.items():
                lines += ["", *_table([f"`{r}`", "chosen", "not chosen"],
                                      [["**gold**", f"{c.tp} (TP)", f"{c.fn} (FN)"],
                                       ["**not gold**", f"{c.fp} (FP)", f"{c.tn} (TN)"]])]
            lines += ["", "Route sets (rows = gold set, columns = chosen set; the diagonal "
                      f"counts exact matches{none}):", ""]
        lines += _table(["gold \\ chosen", *cm["labels"]],
                        [[f"**{label}**", *map(str, row)]
                         for label, row in zip(cm["labels"], cm["counts"], strict=True)])
    ab = data["abstention"]
    fallback = (f", only fallback routes ({', '.join(ab['fallback_routes'])}) "
                f"{ab['fallback_only']}" if ab["fallback_routes"] else "")
    lines += ["", f"Abstention: {ab['cases']} of {ab['of']} cases ({fmt(ab['rate'])}): no route "
              f"{ab['no_route']}{fallback}."]
    if calibration is None:
        lines += ["", "Calibration: the router reports no confidence for any case with gold "
                  "routes, so there is no ECE."]
    else:
        missing = (f"; {calibration['without_confidence']} without a confidence left out"
                   if calibration["without_confidence"] else "")
        brier = (f"; mean Brier score (`brier`) {fmt(calibration['brier'])}"
                 if calibration["brier"] is not None else "")
        lines += ["", f"Calibration of the chosen route set's confidence over "
                  f"{calibration['cases']} cases{missing}: `{ece_name(bins)}` = "
                  f"**{fmt(calibration[ece_name(bins)])}** ({bins} equal-width bins){brier}.",
                  ""]
        lines += _table(["confidence bin", "cases", "mean confidence", "accuracy", "gap"],
                        [[f"[{b['lower']:.2f}, {b['upper']:.2f}"
                          + ("]" if b["upper"] >= 1 else ")"), str(b["cases"]),
                          fmt(b["confidence"]), fmt(b["accuracy"]), fmt(b["gap"])]
                         for b in calibration["reliability"]])
    return "\n".join(lines)
