"""Failure attribution: which component a failed case starts at, and the bottleneck ranking.

For a case that fails end to end, the components the *gold* route requires are walked in
pipeline order; the root causes are the failing components none of whose upstream components
on that path fails (or has an unknown verdict). A misrouted case therefore blames the router
even though the branch it needed never ran, and two failing parallel branches share the case.
See docs/bottleneck.md.
"""

from __future__ import annotations

import bisect
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from evalharness.models import (
    Attribution,
    Bottleneck,
    CaseResult,
    EndToEndSummary,
    MetricValue,
    RankedComponent,
    Verdict,
    WorstCase,
)
from evalharness.pipeline import Pipeline
from evalharness.stats import bootstrap_ci, cluster_bootstrap_ci, seed_for

WORST_CASES = 5
"""How many cases the report lists per component."""

STATUSES = ("pass", "fail", "not_applicable", "error")


def upstream(pipeline: Pipeline) -> dict[str, set[str]]:
    """Component -> every component upstream of it (``after`` edges and router routes,
    transitively).

    >>> from evalharness.pipeline import SHOP_PIPELINE, ComponentSpec
    >>> p = Pipeline({n: ComponentSpec(**c) for n, c in SHOP_PIPELINE.items()})
    >>> sorted(upstream(p)["generator"]), sorted(upstream(p)["text2sql"])
    (['retriever', 'router', 'text2sql'], ['router'])
    """
    direct = {name: set(spec.after) for name, spec in pipeline.components.items()}
    for name, spec in pipeline.components.items():
        for targets in spec.routes.values():
            for target in targets:
                direct.setdefault(target, set()).add(name)
    out: dict[str, set[str]] = {}
    for name in pipeline.order:  # topological: a component's parents are done before it
        out[name] = set(direct.get(name, ()))
        for parent in direct.get(name, ()):
            out[name] |= out.get(parent, set())
    return out


def gold_path(pipeline: Pipeline, result: CaseResult) -> list[str]:
    """The components the case's gold route requires, in pipeline order.

    A component behind a route (a router's ``routes``) is required when one of the case's gold
    routes lists it; without gold routes, when it ran. Any other component is required when it
    has no ``after``, when one of its ``after`` components is required, or when it ran — so the
    generator after text2sql | retriever is always required, while a reranker after the
    retriever is not on a SQL-only path.
    """
    routes = pipeline.routes()
    routed = {c for targets in routes.values() for c in targets}
    gold = result.case.gold.routes
    wanted = {c for r in gold or () for c in routes.get(r, ())}
    required: dict[str, bool] = {}
    for name in pipeline.order:
        comp = result.components.get(name)
        ran = comp is not None and comp.status != "not_run"
        spec = pipeline.components[name]
        if name in routed:
            required[name] = name in wanted if gold is not None else ran
        else:
            required[name] = (not spec.after or ran
                              or any(required.get(d, False) for d in spec.after))
    return [name for name in pipeline.order if required[name]]


def attribute(pipeline: Pipeline, result: CaseResult, path: Sequence[str],
              ups: dict[str, set[str]] | None = None) -> Attribution | None:
    """Where the case's end-to-end outcome comes from; ``None`` without an end-to-end verdict.

    Reads ``result.verdicts`` and ``result.end_to_end`` (set by :mod:`evalharness.verdicts`);
    ``path`` is :func:`gold_path`, ``ups`` :func:`upstream` (computed when not given).
    """
    e2e = result.end_to_end
    if e2e is None:
        return None
    verdicts = result.verdicts
    on_path = [c for c in path if c in verdicts]
    failing = [c for c in on_path if verdicts[c].status == "fail"]
    if e2e.status == "error":
        return Attribution(kind="unknown", failing=failing, path=on_path,
                           reason=f"the end-to-end verdict is an error: {e2e.reason}")
    if e2e.status != "fail":
        if failing:
            return Attribution(kind="masked", failing=failing, path=on_path,
                               reason="passes end to end although "
                               + "; ".join(f"{c} fails ({verdicts[c].reason})" for c in failing))
        return Attribution(kind="passed", path=on_path,
                           reason="passes end to end; no component on the path fails")
    ups = ups if ups is not None else upstream(pipeline)
    bad = {c for c in on_path if verdicts[c].status in ("fail", "error")}
    first = [c for c in on_path if not (ups.get(c, set()) & bad)]
    roots = [c for c in first if verdicts[c].status == "fail"]
    unknown = [c for c in first if verdicts[c].status == "error"]
    if roots:
        share = 1 / len(roots)
        lead = (f"{roots[0]} fails first" if len(roots) == 1 else
                f"{' and '.join(roots)} fail in parallel branches (sharing the blame)")
        detail = "; ".join(f"{c}: {verdicts[c].reason}" for c in roots)
        also = (f" ({', '.join(unknown)}: verdict unknown, {verdicts[unknown[0]].reason})"
                if unknown else "")
        return Attribution(kind="attributed", root_causes=roots,
                           shares={c: share for c in roots}, failing=failing, path=on_path,
                           reason=f"{lead}: {detail}{also}")
    if unknown:
        return Attribution(kind="unknown", failing=failing, path=on_path,
                           reason="fails end to end, but where it starts is unknown: "
                           + "; ".join(f"{c}: {verdicts[c].reason}" for c in unknown))
    return Attribution(kind="unattributed", failing=failing, path=on_path,
                       reason="fails end to end although every component on the path passes "
                       "(an interaction)")


# --------------------------------------------------------------------------------------------
# The run's bottleneck
# --------------------------------------------------------------------------------------------


def _ci(values: Sequence[float], *names: str, groups: Sequence[int] | None = None
        ) -> list[float] | None:
    """The seeded bootstrap interval of the mean of ``values``; with ``groups`` (a run's
    repeats: each value's case) whole cases are resampled."""
    seed = seed_for("bottleneck", *names)
    ci = (bootstrap_ci(values, seed=seed) if groups is None
          else cluster_bootstrap_ci(values, groups, seed=seed))
    return None if ci is None else [ci[0], ci[1]]


def summarise(results: Iterable[CaseResult], components: Sequence[str]) -> Bottleneck | None:
    """The bottleneck of a run: end-to-end pass rate, components ranked by their share of the
    end-to-end failures (with seeded bootstrap CIs over the failing cases), unattributed,
    unknown and masked cases, verdict counts and the worst cases per component.

    ``components``: those with a verdict, in pipeline order. ``None`` when no case has an
    end-to-end verdict. One pass over ``results`` (see :class:`BottleneckTally`).
    """
    tally = BottleneckTally(components)
    for result in results:
        tally.add(result)
    return tally.summary()


class BottleneckTally:
    """What :func:`summarise` needs, gathered case by case (in case order) without keeping the
    cases: counters, one float per case for each bootstrap (0/1 per decided case; per failed
    case, each component's share and whether it is unattributed), and per component the
    ``limit`` worst cases so far."""

    def __init__(self, components: Sequence[str], limit: int = WORST_CASES) -> None:
        self.components = list(components)
        self.limit = limit
        self.judged = 0
        self.outcome: Counter[str] = Counter()
        self.decided = array("d")
        self.shares = {c: array("d") for c in self.components}
        self.unattributed = array("d")
        self.kinds: Counter[str] = Counter()
        self.masked_by: Counter[str] = Counter()
        self.verdicts = {c: dict.fromkeys(STATUSES, 0) for c in self.components}
        self.worst: dict[str, list[tuple[tuple, int, CaseResult]]] = {
            c: [] for c in self.components}
        self._seen = 0
        self.decided_groups: array | None = None
        self.failed_groups: array | None = None
        self.decided_cases: Counter[str] = Counter()
        """With repeats: per case, its results with a decided end-to-end verdict (the oracle
        headroom's interval resamples cases)."""
        """With repeats: the case of each value of ``decided`` and of the failed cases' arrays
        (their intervals resample whole cases)."""

    def add(self, r: CaseResult, group: int | None = None) -> None:
        """Count one case (cases must come in case order: worst-case ties go to the first);
        ``group``: its case, counted from 0, in a run with repeats (one result per repeat)."""
        position = self._seen
        self._seen += 1
        if group is not None and self.decided_groups is None:
            self.decided_groups, self.failed_groups = array("q"), array("q")
        a = r.attribution
        for c, v in r.verdicts.items():
            if c in self.verdicts:
                self.verdicts[c][v.status] += 1
        if a is not None and a.root_causes:
            for c in a.root_causes:
                if c in self.worst:
                    self._keep_worst(c, r, position)
        e2e = r.end_to_end
        if e2e is None:
            return
        self.judged += 1
        self.outcome[e2e.status] += 1
        if e2e.status in ("pass", "fail"):
            self.decided.append(1.0 if e2e.status == "pass" else 0.0)
            if group is not None:
                self.decided_groups.append(group)
                self.decided_cases[r.case.id] += 1
        if a is not None:
            self.kinds[a.kind] += 1
            if a.kind == "masked":
                self.masked_by.update(a.failing)
        if e2e.status == "fail":
            for c, shares in self.shares.items():
                shares.append(a.shares.get(c, 0.0) if a else 0.0)
            self.unattributed.append(1.0 if a and a.kind == "unattributed" else 0.0)
            if group is not None:
                self.failed_groups.append(group)

    def _keep_worst(self, component: str, r: CaseResult, position: int) -> None:
        """Keep ``r`` if it is among the ``limit`` lowest by :func:`_worst_key`, ties in case
        order."""
        kept = self.worst[component]
        entry = (_worst_key(r, component), position, r)
        if len(kept) < self.limit or entry[:2] < kept[-1][:2]:
            bisect.insort(kept, entry, key=lambda e: e[:2])
            del kept[self.limit:]

    def summary(self) -> Bottleneck | None:
        """The bottleneck of the cases added (``None`` without an end-to-end verdict)."""
        if not self.judged:
            return None
        outcome, decided = self.outcome, self.decided
        n_failed = outcome["fail"]
        end_to_end = EndToEndSummary(
            cases=self.judged, passed=outcome["pass"], failed=outcome["fail"],
            errors=outcome["error"],
            pass_rate=sum(decided) / len(decided) if decided else None,
            ci95=_ci(decided, "end_to_end", groups=self.decided_groups))
        ranking = []
        for component, shares in self.shares.items():
            total = sum(shares)
            ranking.append(RankedComponent(
                component=component, share=total / n_failed if n_failed else None,
                ci95=_ci(shares, component, groups=self.failed_groups),
                failures=round(total, 6)))
        order = {c: i for i, c in enumerate(self.components)}
        ranking.sort(key=lambda row: (-(row.share or 0.0), order[row.component]))
        kinds, masked_by = self.kinds, self.masked_by
        return Bottleneck(
            end_to_end=end_to_end, ranking=ranking,
            unattributed=kinds["unattributed"],
            unattributed_share=kinds["unattributed"] / n_failed if n_failed else None,
            unattributed_ci95=_ci(self.unattributed, "unattributed",
                                  groups=self.failed_groups),
            unknown=kinds["unknown"], masked=kinds["masked"],
            masked_by={c: masked_by[c] for c in self.components if masked_by[c]},
            verdicts=self.verdicts,
            worst_cases={c: self.worst_cases(c) for c in self.components})

    def worst_cases(self, component: str) -> list[WorstCase]:
        """The worst cases attributed to ``component`` (see :func:`worst_cases`)."""
        return [_worst_case(r, component) for _, _, r in self.worst[component]]


def worst_cases(results: Iterable[CaseResult], component: str,
                limit: int = WORST_CASES) -> list[WorstCase]:
    """Up to ``limit`` cases attributed to ``component``, lowest criterion values first (by
    the first criterion's value, then the next; a value that is missing counts as lowest), ties
    in case order."""
    tally = BottleneckTally([component], limit)
    for result in results:
        tally.add(result)
    return tally.worst_cases(component)


def _worst_key(r: CaseResult, component: str) -> tuple:
    """The order of the worst cases: the verdict's criterion values (a missing one lowest)."""
    values = r.verdicts[component].values.values()
    return tuple(float("-inf") if v is None else v for v in values)


def _worst_case(r: CaseResult, component: str) -> WorstCase:
    """How the report lists a worst case: its id, values and reason, with the evidence."""
    verdict = r.verdicts[component]
    evidence = _evidence(r, component, verdict)
    reason = verdict.reason or verdict.status
    return WorstCase(case=r.case.id, values=dict(verdict.values),
                     reason=f"{reason} — {evidence}" if evidence else reason)


def _evidence(result: CaseResult, component: str, verdict: Verdict, limit: int = 300) -> str:
    """What the evaluator says about the first failing metric of the verdict: its ``reason``
    detail, else its small details (e.g. the router's predicted and gold routes), else the
    ``reason`` of another metric of the same evaluator (the SQL cascade explains
    ``execution_accuracy`` under ``equivalent``)."""
    comp = result.components.get(component)
    if comp is None or comp.status != "evaluated":
        return ""
    read = verdict.failed or list(verdict.values)
    evaluators = {comp.evaluators.get(m) for m in read}
    siblings = [m for m, e in comp.evaluators.items() if e in evaluators and m not in read]
    candidates = [(m, False) for m in read] + [(m, True) for m in siblings]
    for metric, reason_only in candidates:
        mv: MetricValue | None = comp.metrics.get(metric)
        if mv is None or mv.error is not None:
            continue
        text = _describe(mv.details, reason_only=reason_only)
        if text:
            text = text if not reason_only else f"{metric}: {text}"
            return text if len(text) <= limit else text[: limit - 1] + "…"
    return ""


def _describe(details: dict[str, Any], *, reason_only: bool = False) -> str:
    """A short text from a metric's details.

    >>> _describe({"predicted": ["blog"], "gold": ["blog", "sql"], "judge": {"x": 1}})
    "predicted ['blog'], gold ['blog', 'sql']"
    >>> _describe({"reason": "different rows", "stage": "execute"})
    'different rows'
    """
    reason = details.get("reason")
    if isinstance(reason, str) and reason:
        return reason
    if reason_only:
        return ""
    parts = []
    for key, value in details.items():
        if key in ("judge", "judgments"):
            continue
        if isinstance(value, (str, int, float, bool)) or (
                isinstance(value, list) and all(isinstance(x, (str, int, float)) for x in value)):
            text = repr(value)
            if len(text) <= 80:
                parts.append(f"{key} {text}")
    return ", ".join(parts)
