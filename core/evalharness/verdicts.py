"""Per-case verdicts: pass, fail, not applicable or error, per component and end to end.

A component's verdict comes from its criteria — ``metric OP number``, all of which must hold
— read on the case's own metric values. The criteria are the scenario's ``verdicts:`` entry
for the component, else the default its configured metrics declare (:func:`default_criteria`:
each metric's ``Metric.verdict``, the lowest ``precedence`` winning). The end-to-end verdict
compares the answer with the reference answer when the final component's metrics declare an
end-to-end criterion (``Metric.end_to_end``), else it is the final component's verdict.

A metric may declare its default verdict for some cases only (``Metric.cases``, e.g. the
unanswerable cases, ``{"gold.refusal": True}``): on those cases it replaces the component's
default criteria, and the end-to-end ones on the final component; a ``verdicts:`` entry still
wins. See docs/bottleneck.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalharness.attribution import attribute, gold_path, upstream
from evalharness.declarations import Metric, describe_cases, instance_order, matches
from evalharness.models import Case, CaseResult, CriteriaReport, MetricValue, Verdict
from evalharness.pipeline import Pipeline
from evalharness.scenario import (
    END_TO_END,
    Gate,
    Scenario,
    parse_criterion,
    parse_gate,
)


@dataclass(frozen=True)
class ComponentCriteria:
    """The criteria of one component's (or the end-to-end) verdict, and where they come from."""

    criteria: list[Gate]
    source: str  # "scenario", "default" or "none"
    note: str | None = None
    special: list[Gate] | None = None
    """The criteria of the cases ``where`` selects, when they are not ``criteria`` (a metric's
    default verdict for some cases only, e.g. ``refusal >= 1`` for ``gold.refusal: true``);
    ``None``: the same."""
    where: dict[str, Any] | None = None
    """The case fields that select the cases judged by ``special``."""

    def for_case(self, case: Case) -> list[Gate]:
        """The criteria that judge ``case`` (empty: it gets no verdict here)."""
        if self.special is not None and self.where is not None and matches(case, self.where):
            return self.special
        return self.criteria

    def all(self) -> list[Gate]:
        """Every criterion any case may be judged by."""
        return [*self.criteria, *(self.special or [])]

    def report(self, *, listed: bool = False) -> CriteriaReport:
        """``listed``: a component judged on some cases only lists their criteria."""
        shown = self.criteria or (self.special or [] if listed else [])
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


def _chosen(declared: Iterable[Metric], key: str) -> list[Metric]:
    """The metrics whose ``key`` criterion (``verdict`` or ``end_to_end``) makes the default:
    those of the lowest precedence, a pattern's largest instance only, in configured order."""
    usable = [m for m in declared if getattr(m, key) and m.cases is None and m.scope == "case"]
    if not usable:
        return []
    ranked = [m.precedence for m in usable if m.precedence is not None]
    best = min(ranked) if ranked else None
    chosen = [m for m in usable if m.precedence is None or m.precedence == best]
    largest: dict[str, Metric] = {}
    for m in chosen:
        if m.pattern is not None and (m.pattern not in largest or
                                      instance_order(m) > instance_order(largest[m.pattern])):
            largest[m.pattern] = m
    out: list[Metric] = []
    for m in chosen:
        pick = largest.get(m.pattern, m) if m.pattern is not None else m
        if pick not in out:
            out.append(pick)
    return out


def default_criteria(declared: Iterable[Metric]) -> list[str]:
    """The default criteria of a component, from the declarations of its configured metrics.

    >>> default_criteria([Metric("exact_match", verdict=">= 1", precedence=2),
    ...                   Metric("execution_accuracy", verdict=">= 1", precedence=1)])
    ['execution_accuracy >= 1']
    >>> recall = Metric("recall@{k}", verdict=">= 0.5")
    >>> default_criteria([recall.instance("recall@3"), recall.instance("recall@10"),
    ...                   Metric("mrr")])
    ['recall@10 >= 0.5']
    >>> default_criteria([Metric("faithfulness", verdict=">= 0.5"),
    ...                   Metric("answer_relevancy", verdict=">= 0.1"),
    ...                   Metric("answer_present", verdict=">= 1", precedence=1)])
    ['faithfulness >= 0.5', 'answer_relevancy >= 0.1']
    >>> default_criteria([Metric("latency_ms", range=(0, None), direction="lower")])
    []
    >>> default_criteria([Metric("exact_match", verdict=">= 1", precedence=2),
    ...                   Metric("execution_accuracy", verdict=">= 1", precedence=1),
    ...                   Metric("uses_returns_table", verdict=">= 1", precedence=None)])
    ['execution_accuracy >= 1', 'uses_returns_table >= 1']
    """
    return [f"{m.name} {m.verdict}" for m in _chosen(declared, "verdict")]


def end_to_end_criteria(declared: Iterable[Metric]) -> list[str]:
    """The default end-to-end criteria the final component's metrics declare.

    >>> end_to_end_criteria([Metric("correctness_f1", end_to_end=">= 0.5"), Metric("x")])
    ['correctness_f1 >= 0.5']
    """
    return [f"{m.name} {m.end_to_end}" for m in _chosen(declared, "end_to_end")]


def special_criteria(declared: Iterable[Metric]) -> tuple[dict[str, Any] | None, list[str]]:
    """The case filter and criteria of the metrics whose default verdict is for some cases
    only (the first filter declared; its metrics' criteria all hold).

    >>> special_criteria([Metric("refusal", verdict=">= 1", cases={"gold.refusal": True})])
    ({'gold.refusal': True}, ['refusal >= 1'])
    >>> special_criteria([Metric("faithfulness", verdict=">= 0.5")])
    (None, [])
    """
    special = [m for m in declared if m.verdict and m.cases]
    if not special:
        return None, []
    where = special[0].cases
    return where, [f"{m.name} {m.verdict}" for m in special if m.cases == where]


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


def declared_on(scenario: Scenario, component: str) -> list[Metric]:
    """The declarations of the per-case metrics configured on ``component``, in order."""
    return [e.declaration(m) for e in scenario.evaluators_on(component) for m in e.metrics]


def criteria_for(scenario: Scenario) -> Criteria:
    """The scenario's criteria, with defaults for every component and end to end."""
    pipeline = scenario.pipeline
    components: dict[str, ComponentCriteria] = {}
    for name in pipeline.order:
        kind = pipeline.kind(name)
        declared = declared_on(scenario, name)
        where, texts = special_criteria(declared)
        special = [parse_criterion(t, name) for t in texts]
        if name in scenario.verdicts:
            written = scenario.verdicts[name]
            components[name] = ComponentCriteria(
                written, "scenario" if written else "none", _special_note(
                    scenario, name, None if written else "`verdicts:` gives it no criterion",
                    special, where, written=True))
            continue
        defaults = [parse_criterion(t, name) for t in default_criteria(declared)]
        if defaults:
            components[name] = ComponentCriteria(
                defaults, "default", _special_note(scenario, name, None, special, where),
                special or None, where if special else None)
        elif special:
            components[name] = ComponentCriteria(
                [], "default", _special_note(
                    scenario, name, f"the other cases get no verdict: no default for kind "
                    f"{kind!r} with its configured metrics, and no `verdicts:` entry", special,
                    where), special, where)
        else:
            components[name] = ComponentCriteria([], "none", _special_note(
                scenario, name, f"no default for kind {kind!r} with its configured metrics, "
                "and no `verdicts:` entry", special, where))
    final = final_component(pipeline)
    fallback = (f"cases without a reference answer (gold.answer) whose criterion cannot be "
                f"computed: the verdict of {final}" if final and components[final].criteria
                else None)
    final_declared = declared_on(scenario, final) if final else []
    where, texts = special_criteria(final_declared)
    special = [parse_gate(f"{final}.{t}") for t in texts]
    for_special = (f"cases with {describe_cases(where)}: "
                   f"{' and '.join(f'`{g.name}`' for g in special)}") if special else None
    own = [parse_gate(f"{final}.{t}") for t in end_to_end_criteria(final_declared)]
    if END_TO_END in scenario.verdicts:
        written = scenario.verdicts[END_TO_END]
        too = (f"cases with {describe_cases(where)} too (a `verdicts:` entry wins over their "
               f"default `{special[0].name}`)") if special else None
        e2e = (ComponentCriteria(written, "scenario", _join(fallback, too)) if written else
               ComponentCriteria([], "none", "`verdicts:` gives it no criterion"))
    elif own:
        e2e = ComponentCriteria(own, "default", _join(
            fallback, for_special and f"{for_special} instead"), special or None,
            where if special else None)
    elif fallback:
        e2e = ComponentCriteria([], "default", _join(
            for_special, f"the verdict of {final} for every {'other ' if special else ''}case"),
            special or None, where if special else None)
    elif special:
        e2e = ComponentCriteria([], "default", _join(
            for_special, f"the other cases get none: {final} has no verdict for them"),
            special, where)
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


def _special_note(scenario: Scenario, component: str, note: str | None, special: list[Gate],
                  where: dict[str, Any] | None, *, written: bool = False) -> str | None:
    """``note``, with what judges the cases a metric's default verdict is for (``where``) on
    this component, and which evaluators the core added."""
    if special and written:
        case = (f"cases with {describe_cases(where)} too (a `verdicts:` entry wins over their "
                f"default `{special[0].name}`)")
    elif special:
        case = (f"cases with {describe_cases(where)}: "
                f"{' and '.join(f'`{g.name}`' for g in special)}"
                + ("" if note else " instead"))
    else:
        case = None
    added = [f"the `{e.name}` evaluator was {e.added}"
             for e in scenario.evaluators_on(component) if e.added]
    return _join(case, note, *added) if special and not written else _join(note, case, *added)


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
