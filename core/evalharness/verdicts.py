"""Per-case verdicts: pass, fail, not applicable or error, per component and end to end.

A component's verdict comes from its criteria — ``metric OP number``, all of which must hold
— read on the case's own metric values. The criteria are the scenario's ``verdicts:`` entry
for the component, else a default for the component's kind built from the metrics that are
configured (:func:`default_criteria`). The end-to-end verdict compares the answer with the
reference answer when there is one, else it is the final component's verdict.

An unanswerable case (``gold.refusal: true``) is judged by whether the answer declines: its
default criterion for a generator with the ``refusal`` metric, and its default end-to-end
criterion, is ``refusal >= 1`` (:func:`refusal_criteria`); a ``verdicts:`` entry still wins.
See docs/bottleneck.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from evalharness.attribution import attribute, gold_path, upstream
from evalharness.models import Case, CaseResult, CriteriaReport, MetricValue, Verdict
from evalharness.pipeline import Pipeline
from evalharness.scenario import (
    END_TO_END,
    REFUSAL,
    Gate,
    Scenario,
    parse_criterion,
    parse_gate,
)

E2E_DEFAULT_METRIC = "correctness_f1"
"""The metric of the default end-to-end criterion (on the final component)."""

E2E_DEFAULT_THRESHOLD = 0.5
"""The threshold of the default end-to-end criterion."""

_RECALL_AT = re.compile(r"recall@(\d+)")


@dataclass(frozen=True)
class ComponentCriteria:
    """The criteria of one component's (or the end-to-end) verdict, and where they come from."""

    criteria: list[Gate]
    source: str  # "scenario", "default" or "none"
    note: str | None = None
    refusal: list[Gate] | None = None
    """The criteria of the cases with ``gold.refusal: true`` when they are not ``criteria``
    (the default for unanswerable cases, ``refusal >= 1``); ``None``: the same."""

    def for_case(self, case: Case) -> list[Gate]:
        """The criteria that judge ``case`` (empty: it gets no verdict here)."""
        if self.refusal is not None and case.gold.refusal is True:
            return self.refusal
        return self.criteria

    def all(self) -> list[Gate]:
        """Every criterion any case may be judged by."""
        return [*self.criteria, *(self.refusal or [])]

    def report(self, *, listed: bool = False) -> CriteriaReport:
        """``listed``: a component judged on unanswerable cases only lists their criteria."""
        shown = self.criteria or (self.refusal or [] if listed else [])
        return CriteriaReport(criteria=[c.name for c in shown], source=self.source,
                              note=self.note)


@dataclass(frozen=True)
class Criteria:
    """Every verdict criterion of a scenario, defaults filled in."""

    components: dict[str, ComponentCriteria]
    end_to_end: ComponentCriteria
    final: str | None
    pipeline: Pipeline = field(repr=False)

    def report(self) -> dict[str, CriteriaReport]:
        """For report.json's ``verdict_criteria``: components in pipeline order, then
        ``end_to_end``."""
        out = {name: c.report(listed=True) for name, c in self.components.items()}
        out[END_TO_END] = self.end_to_end.report()
        return out

    def judged(self) -> list[str]:
        """Components that get a verdict (on some cases at least), in pipeline order."""
        return [name for name, c in self.components.items() if c.all()]

    def needed(self) -> set[tuple[str, str]]:
        """(component, metric) of every criterion: what the verdicts read, and all that the
        oracle reruns evaluate."""
        gates = [g for c in self.components.values() for g in c.all()]
        return {(g.component, g.metric) for g in [*gates, *self.end_to_end.all()]}


def default_criteria(kind: str, metrics: Iterable[str]) -> list[str]:
    """The default criteria of a component kind, from the metrics configured on it.

    >>> default_criteria("text2sql", ["exact_match", "execution_accuracy"])
    ['execution_accuracy >= 1']
    >>> default_criteria("retriever", ["recall@3", "recall@10", "mrr"])
    ['recall@10 >= 0.5']
    >>> default_criteria("generator", ["answer_present", "faithfulness"])
    ['faithfulness >= 0.5']
    >>> default_criteria("generator", ["answer_present"]), default_criteria("reranker", ["x"])
    (['answer_present >= 1'], [])
    """
    have = set(metrics)
    if kind == "router":
        return ["route_accuracy >= 1"] if "route_accuracy" in have else []
    if kind == "text2sql":
        for metric in ("equivalent", "execution_accuracy", "exact_match"):
            if metric in have:
                return [f"{metric} >= 1"]
        return []
    if kind == "retriever":
        cutoffs = sorted(int(m[1]) for m in map(_RECALL_AT.fullmatch, have) if m)
        if cutoffs:
            return [f"recall@{cutoffs[-1]} >= 0.5"]
        return ["context_recall >= 0.5"] if "context_recall" in have else []
    if kind == "generator":
        judged = [text for metric, text in (("faithfulness", "faithfulness >= 0.5"),
                                             ("answer_relevancy", "answer_relevancy >= 0.1"))
                  if metric in have]
        return judged or (["answer_present >= 1"] if "answer_present" in have else [])
    return []


def refusal_criteria(kind: str, metrics: Iterable[str]) -> list[str]:
    """The default criteria of a component kind for unanswerable cases (``gold.refusal:
    true``): the answer must decline. Empty when the kind keeps its usual default for them.

    >>> refusal_criteria("generator", ["faithfulness", "refusal"])
    ['refusal >= 1']
    >>> refusal_criteria("generator", ["faithfulness"]), refusal_criteria("router", ["refusal"])
    ([], [])
    """
    return [f"{REFUSAL} >= 1"] if kind == "generator" and REFUSAL in set(metrics) else []


def final_component(pipeline: Pipeline) -> str | None:
    """The component whose output is the answer: the last component (in pipeline order) that
    no other consumes, preferring a generator.

    >>> from evalharness.pipeline import SHOP_PIPELINE, ComponentSpec
    >>> final_component(Pipeline({n: ComponentSpec(**c) for n, c in SHOP_PIPELINE.items()}))
    'generator'
    """
    consumed = {dep for spec in pipeline.components.values() for dep in spec.after}
    consumed |= {name for name, spec in pipeline.components.items() if spec.routes}
    sinks = [c for c in pipeline.order if c not in consumed]
    generators = [c for c in sinks if pipeline.kind(c) == "generator"]
    return (generators or sinks or [None])[-1]


def criteria_for(scenario: Scenario) -> Criteria:
    """The scenario's criteria, with defaults for every component and end to end."""
    pipeline = scenario.pipeline
    components: dict[str, ComponentCriteria] = {}
    for name in pipeline.order:
        kind = pipeline.kind(name)
        metrics = [m for e in scenario.evaluators_on(name) for m in e.metrics]
        refusal = [parse_criterion(t, name) for t in refusal_criteria(kind, metrics)]
        if name in scenario.verdicts:
            written = scenario.verdicts[name]
            components[name] = ComponentCriteria(
                written, "scenario" if written else "none", _refusal_note(
                    scenario, name, None if written else "`verdicts:` gives it no criterion",
                    refusal, written=True))
            continue
        defaults = [parse_criterion(t, name) for t in default_criteria(kind, metrics)]
        if defaults:
            components[name] = ComponentCriteria(
                defaults, "default", _refusal_note(scenario, name, None, refusal),
                refusal or None)
        elif refusal:
            components[name] = ComponentCriteria(
                [], "default", _refusal_note(
                    scenario, name, f"the other cases get no verdict: no default for kind "
                    f"{kind!r} with its configured metrics, and no `verdicts:` entry", refusal),
                refusal)
        else:
            components[name] = ComponentCriteria([], "none", _refusal_note(
                scenario, name, f"no default for kind {kind!r} with its configured metrics, "
                "and no `verdicts:` entry", refusal))
    final = final_component(pipeline)
    fallback = (f"cases without a reference answer (gold.answer) whose criterion cannot be "
                f"computed: the verdict of {final}" if final and components[final].criteria
                else None)
    final_metrics = [m for e in scenario.evaluators_on(final) for m in e.metrics] if final \
        else []
    refusal = [parse_gate(f"{final}.{t}")
               for t in refusal_criteria(pipeline.kind(final), final_metrics)] if final else []
    for_refusals = (f"cases with gold.refusal: true: "
                    f"{' and '.join(f'`{g.name}`' for g in refusal)}") if refusal else None
    if END_TO_END in scenario.verdicts:
        written = scenario.verdicts[END_TO_END]
        too = (f"cases with gold.refusal: true too (a `verdicts:` entry wins over their default "
               f"`{refusal[0].name}`)") if refusal else None
        e2e = (ComponentCriteria(written, "scenario", _join(fallback, too)) if written else
               ComponentCriteria([], "none", "`verdicts:` gives it no criterion"))
    elif E2E_DEFAULT_METRIC in final_metrics:
        e2e = ComponentCriteria(
            [parse_gate(f"{final}.{E2E_DEFAULT_METRIC} >= {E2E_DEFAULT_THRESHOLD}")],
            "default", _join(fallback, for_refusals and f"{for_refusals} instead"),
            refusal or None)
    elif fallback:
        e2e = ComponentCriteria([], "default", _join(
            for_refusals, f"the verdict of {final} for every {'other ' if refusal else ''}case"),
            refusal or None)
    elif refusal:
        e2e = ComponentCriteria([], "default", _join(
            for_refusals, f"the other cases get none: {final} has no verdict for them"), refusal)
    else:
        e2e = ComponentCriteria([], "none", "no end-to-end criterion, and the final "
                                "component has no verdict")
    return Criteria(components, e2e, final, pipeline)


def _join(*notes: str | None) -> str | None:
    """Notes joined with ``; ``, those that are ``None`` left out.

    >>> _join("a", None, "b"), _join(None)
    ('a; b', None)
    """
    return "; ".join(n for n in notes if n) or None


def _refusal_note(scenario: Scenario, component: str, note: str | None, refusal: list[Gate],
                  *, written: bool = False) -> str | None:
    """``note``, with what judges the unanswerable cases (``gold.refusal: true``) on this
    component, and whether the core added the ``refusal`` evaluator."""
    if refusal and written:
        case = (f"cases with gold.refusal: true too (a `verdicts:` entry wins over their default "
                f"`{refusal[0].name}`)")
    elif refusal:
        case = (f"cases with gold.refusal: true: "
                f"{' and '.join(f'`{g.name}`' for g in refusal)}"
                + ("" if note else " instead"))
    elif scenario.pipeline.kind(component) == "generator" and any(
            c.gold.refusal is True for c in scenario.cases):
        case = (f"cases with gold.refusal: true are judged like the others: no `{REFUSAL}` "
                "evaluator is registered (is the evalharness_generation plugin loaded?)")
    else:
        case = None
    added = [f"the `{e.name}` evaluator was {e.added}"
             for e in scenario.evaluators_on(component) if e.added]
    return _join(case, note, *added) if refusal and not written else _join(note, case, *added)


def _num(value: float) -> str:
    """A metric value in a reason.

    >>> _num(0.33333), _num(1.0), _num(12.5)
    ('0.333', '1', '12.5')
    """
    return f"{value:.3g}"


def check(criteria: Sequence[Gate], metrics: dict[str, MetricValue], *,
          qualified: bool = False) -> Verdict:
    """The verdict of ``criteria`` on one case's metric values (keyed ``component.metric`` when
    ``qualified``): ``fail`` if any criterion fails, else ``error`` if any metric is missing or
    an error, else ``pass``."""
    values: dict[str, float | None] = {}
    failed: list[str] = []
    reasons: list[str] = []
    errors: list[str] = []
    for c in criteria:
        key = f"{c.component}.{c.metric}" if qualified else c.metric
        mv = metrics.get(key)
        if mv is None or mv.error is not None:
            values[key] = None
            errors.append(f"{key}: {mv.error if mv is not None else 'not computed'}")
            continue
        values[key] = mv.value
        if not c.check(mv.value):
            failed.append(key)
            reasons.append(f"{key} = {_num(mv.value)} (needs {c.op} {_num(c.threshold)})")
    if failed:
        return Verdict(status="fail", reason="; ".join(reasons), values=values, failed=failed)
    if errors:
        return Verdict(status="error", reason="; ".join(errors), values=values)
    return Verdict(status="pass", values=values)


def component_verdict(result: CaseResult, component: str, criteria: Sequence[Gate],
                      required: bool) -> Verdict:
    """One component's verdict for one case (see the module docstring)."""
    values = {c.metric: None for c in criteria}
    if result.trace.error:
        return Verdict(status="error", reason=f"the system failed for this case: "
                       f"{result.trace.error}", values=values)
    comp = result.components.get(component)
    if comp is None or comp.status == "not_run":
        if required:
            return Verdict(status="fail", reason="did not run: the gold route needs it",
                           values=values)
        return Verdict(status="not_applicable",
                       reason="did not run, and the gold route does not need it", values=values)
    if comp.status == "error":
        return Verdict(status="error", reason=comp.reason, values=values)
    return check(criteria, comp.metrics)


def end_to_end_verdict(result: CaseResult, criteria: Criteria,
                       verdicts: dict[str, Verdict]) -> Verdict | None:
    """The end-to-end verdict of one case; ``None`` when no criterion applies."""
    fallback = verdicts.get(criteria.final) if criteria.final else None
    if fallback is not None and fallback.status == "not_applicable":
        fallback = None
    if criteria.end_to_end.source == "none":
        return None
    if result.trace.error:
        return Verdict(status="error", reason=f"the system failed for this case: "
                       f"{result.trace.error}")
    own = criteria.end_to_end.for_case(result.case)
    if not own:
        return _relabel(fallback, criteria.final, None) if fallback else None
    metrics = {f"{name}.{m}": v for name, comp in result.components.items()
               for m, v in comp.metrics.items()}
    verdict = check(own, metrics, qualified=True)
    if verdict.status == "error" and result.case.gold.answer is None and fallback is not None:
        return _relabel(fallback, criteria.final, "no reference answer")
    return verdict


def _relabel(verdict: Verdict, component: str, why: str | None) -> Verdict:
    """A component's verdict used as the end-to-end one: values keyed ``component.metric``."""
    lead = f"{why}: " if why else ""
    reason = f"{lead}{component}'s verdict" + (f": {verdict.reason}" if verdict.reason else "")
    return Verdict(status=verdict.status,
                   reason=reason if (why or verdict.reason) else None,
                   values={f"{component}.{k}": v for k, v in verdict.values.items()},
                   failed=[f"{component}.{m}" for m in verdict.failed])


def apply(scenario: Scenario | None, results: Sequence[CaseResult],
          criteria: Criteria | None = None) -> list[CaseResult]:
    """Fill in ``verdicts``, ``end_to_end`` and ``attribution`` of every result (in place; the
    results are returned for convenience). ``criteria`` defaults to the scenario's."""
    if criteria is None:
        criteria = criteria_for(scenario)
    judged = criteria.judged()
    ups = upstream(criteria.pipeline)
    for result in results:
        path = gold_path(criteria.pipeline, result)
        own = {name: criteria.components[name].for_case(result.case) for name in judged}
        result.verdicts = {name: component_verdict(result, name, own[name], name in path)
                           for name in judged if own[name]}
        result.end_to_end = end_to_end_verdict(result, criteria, result.verdicts)
        result.attribution = attribute(criteria.pipeline, result, path, ups)
    return list(results)
