"""A run as test outcomes: one per case and component verdict (plus end to end), one per gate.

What a test runner shows — the pytest plugin's items, ``--junit-xml`` test cases — comes from
here, so both say the same thing: a case's component passes, fails, errs or is skipped (not on
the case's gold path) exactly as its verdict in ``results.jsonl`` says, and the message of a
failure is the verdict's reason followed by what the evaluator saw (the unsupported claims, the
SQL counterexample, the relevant chunks that were not retrieved).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from evalharness.attribution import _describe
from evalharness.exitcodes import run_status
from evalharness.models import CaseResult, GateResult, Report, Verdict
from evalharness.scenario import END_TO_END

Status = Literal["passed", "failed", "error", "skipped"]

_STATUS: dict[str, Status] = {"pass": "passed", "fail": "failed", "error": "error",
                              "not_applicable": "skipped"}

DETAIL_LIMIT = 4000
"""Characters of evidence kept in one outcome's ``detail``."""


@dataclass(frozen=True)
class Outcome:
    """One verdict as a test result."""

    case: str | None
    """The case id; ``None`` for a gate."""
    name: str
    """The component (or ``end_to_end``) for a case, the gate's text for a gate."""
    status: Status
    message: str = ""
    """One line: the verdict's reason (the criteria that failed with their values)."""
    detail: str = ""
    """The evidence behind it, several lines; empty when the verdict passed."""
    seconds: float = 0.0
    """The component step's latency for this case (0 for end to end and gates)."""

    @property
    def test_name(self) -> str:
        """``q001::retriever``, ``gate::router.route_accuracy >= 0.6``."""
        return f"{self.case}::{self.name}" if self.case is not None else f"gate::{self.name}"


def case_outcomes(result: CaseResult, *, limit: int = DETAIL_LIMIT) -> list[Outcome]:
    """The outcomes of one case: each component verdict in pipeline order, then end to end."""
    out = []
    for component, verdict in result.verdicts.items():
        out.append(_outcome(result, component, verdict, limit))
    if result.end_to_end is not None:
        out.append(_outcome(result, END_TO_END, result.end_to_end, limit))
    return out


def gate_outcome(gate: GateResult) -> Outcome:
    """A gate as an outcome: it fails on its threshold or on too many errors."""
    if gate.passed:
        return Outcome(case=None, name=gate.name, status="passed")
    value = "no value" if gate.value is None else f"value {gate.value:.4g}"
    return Outcome(case=None, name=gate.name, status="failed",
                   message=f"{gate.name}: {value}; {gate.reason or 'failed'}",
                   detail=f"{gate.errors} of {gate.n} values are errors"
                          + (f", {gate.missing} of them missing (no value for a case the gate's "
                             "component should have handled)" if gate.missing else "")
                          + f" (at most {gate.max_error_rate:.0%} allowed)")


RUN = "run"
"""The name of the run-level outcome: present only for a run that could not do its work."""


def run_outcome(report: Report) -> Outcome | None:
    """The run itself as an ``error`` outcome when it could not do its work (exit code 3 or
    4, :func:`~evalharness.exitcodes.run_status`); ``None`` for a run that did (exit 0 or 1:
    its gates say the rest)."""
    status = run_status(report)
    if status.did_its_work:
        return None
    return Outcome(case=None, name=RUN, status="error",
                   message=f"{status.reason} (exit code {status.code})",
                   detail=f"{report.cases.get('evaluated', 0)} of "
                          f"{report.cases.get('total', 0)} cases have a result")


def outcomes(report: Report, results: Iterable[CaseResult], *,
             limit: int = DETAIL_LIMIT) -> Iterator[Outcome]:
    """Every case's outcomes in case order, then every gate's, then the run's when it could
    not do its work (:func:`run_outcome`)."""
    for result in results:
        yield from case_outcomes(result, limit=limit)
    for gate in report.gates:
        yield gate_outcome(gate)
    run = run_outcome(report)
    if run is not None:
        yield run


def _outcome(result: CaseResult, component: str, verdict: Verdict, limit: int) -> Outcome:
    status = _STATUS[verdict.status]
    step = result.trace.step(component) if component != END_TO_END else None
    latency = _get(step, "latency_ms")
    seconds = latency / 1000 if isinstance(latency, int | float) else 0.0
    if status == "passed":
        return Outcome(result.case.id, component, status, seconds=seconds)
    message = verdict.reason or verdict.status
    detail = "" if status == "skipped" else explain(result, component, verdict)
    if len(detail) > limit:
        detail = detail[: limit - 1] + "…"
    return Outcome(result.case.id, component, status, message=message, detail=detail,
                   seconds=seconds)


def explain(result: CaseResult, component: str, verdict: Verdict) -> str:
    """What the evaluators saw behind a verdict that did not pass, one fact per line.

    For each metric the verdict read: its ``reason`` detail (the SQL cascade's counterexample),
    its unsupported claims, the relevant chunks a ranked list missed; then the reasons of the
    other metrics of the same evaluators (the cascade explains ``execution_accuracy`` under
    ``equivalent``).
    """
    if result.trace.error:
        return f"the system failed for this case: {result.trace.error}"
    if component == END_TO_END:
        lines = []
        for key in verdict.failed or list(verdict.values):
            name, _, metric = key.partition(".")
            lines += _metric_lines(result, name, metric)
            answer = _get(result.trace.step(name), "answer")
            if isinstance(answer, str):
                lines.append(f"answer: {answer}")
        if result.case.gold.answer:
            lines.append(f"reference answer: {result.case.gold.answer}")
        return "\n".join(dict.fromkeys(lines))
    comp = result.components.get(component)
    if comp is None or comp.status != "evaluated":
        return comp.reason or "" if comp is not None else ""
    read = verdict.failed or list(verdict.values)
    lines = []
    for metric in read:
        lines += _metric_lines(result, component, metric)
    evaluators = {comp.evaluators.get(m) for m in read}
    for metric, evaluator in comp.evaluators.items():
        if evaluator in evaluators and metric not in read:
            mv = comp.metrics.get(metric)
            reason = mv.details.get("reason") if mv is not None else None
            if isinstance(reason, str) and reason:
                lines.append(f"{metric}: {reason}")
    missed = _missed_chunks(result, component, read)
    if missed:
        lines.append(missed)
    return "\n".join(dict.fromkeys(lines))  # once each, in order


def _metric_lines(result: CaseResult, component: str, metric: str) -> list[str]:
    comp = result.components.get(component)
    mv = comp.metrics.get(metric) if comp is not None else None
    if mv is None:
        return []
    if mv.error is not None:
        return [f"{metric}: could not be computed: {mv.error}"]
    details = mv.details
    lines = []
    claims = details.get("unsupported_claims")
    if isinstance(claims, list) and claims:
        lines.append(f"{metric}: unsupported claims:")
        lines += [f"  - {c}" for c in claims[:20]]
    reason = details.get("reason")
    if isinstance(reason, str) and reason:
        lines.append(f"{metric}: {reason}")
    counterexample = details.get("counterexample")
    if isinstance(counterexample, dict):
        shown = {k: v for k, v in counterexample.items() if k in (
            "database", "only_in_gold", "only_in_predicted", "gold_columns",
            "predicted_columns")}
        if shown:
            lines.append(f"{metric}: counterexample: {json.dumps(shown, default=str)[:1500]}")
    if not lines:
        text = _describe(details)
        if text:
            lines.append(f"{metric}: {text}")
    return lines


def _missed_chunks(result: CaseResult, component: str, metrics: list[str]) -> str:
    """The relevant chunks (by the case's gold) a ranked list did not return within the cutoff
    of the metrics read (``recall@5`` → the top 5), when the step is a ranked list."""
    relevant = result.case.gold.relevant
    ids = _get(result.trace.step(component), "ids")
    if not relevant or not isinstance(ids, list):
        return ""
    cutoffs = [int(m.rpartition("@")[2]) for m in metrics
               if "@" in m and m.rpartition("@")[2].isdigit()]
    k = min(cutoffs) if cutoffs else len(ids)
    top = ids[:k]
    missed = [f"{cid} (grade {grade})" for cid, grade in relevant.items()
              if grade > 0 and cid not in top]
    if not missed:
        return ""
    return (f"relevant chunks not in the top {k}: {', '.join(missed)}; retrieved: "
            f"{', '.join(map(str, top)) or 'nothing'}")


def _get(step: Any, key: str) -> Any:
    if step is None:
        return None
    return step.get(key) if isinstance(step, dict) else getattr(step, key, None)
