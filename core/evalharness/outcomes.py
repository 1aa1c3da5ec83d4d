"""A run as test outcomes: one per case and component verdict (plus end to end), one per gate.

What a test runner shows — the pytest plugin's items, ``--junit-xml`` test cases — comes from
here, so both say the same thing: a case's component passes, fails, errs or is skipped (not on
the case's gold path) exactly as its verdict in ``results.jsonl`` says, and the message of a
failure is the verdict's reason followed by what the evaluator saw (the unsupported claims, the
SQL counterexample, the relevant chunks that were not retrieved).

In a run with repeats (``--repeat N``, the scenario's ``repeat:``) ``results.jsonl`` holds a
line per case and repeat; a case still has ONE outcome per component (and end to end), its
repeats combined (:func:`per_case`):

- passed in every repeat → ``passed``; skipped (not on the gold path) in every one →
  ``skipped``;
- never passed: failed in some → ``failed`` (``failed in 5 of 5 repeats; repeat 1: REASON``),
  erred in all → ``error`` (``error in 5 of 5 repeats; repeat 1: REASON``);
- passed in some repeats and failed or erred in others → ``flaky``
  (``flaky: passed 3 of 5 repeats; repeat 2 failed: REASON``).

The ``detail`` of a combined outcome lists each repeat that did not pass with its reason and
evidence (repeats with the same reason and evidence on one line), and ``attempts`` holds them
one by one (what ``--junit-xml`` writes as Surefire's ``<flakyFailure>``). A run without
repeats gives exactly the outcomes it always gave.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from evalharness.attribution import _describe
from evalharness.exitcodes import run_status
from evalharness.models import CaseResult, GateResult, Report, Verdict, over_repeats
from evalharness.scenario import END_TO_END

Status = Literal["passed", "failed", "error", "skipped", "flaky"]
"""``flaky`` only in a run with repeats: passed in some repeats, failed or erred in others."""

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
    """The component step's latency for this case (0 for end to end and gates); with
    repeats, its mean over the repeats."""
    repeats: int = 0
    """In a run with repeats: how many repeats of the case have this verdict; 0 without."""
    passed_repeats: int = 0
    """In a run with repeats: how many of them passed."""
    attempts: tuple[Attempt, ...] = ()
    """In a run with repeats: each repeat that failed or erred, in repeat order."""

    @property
    def test_name(self) -> str:
        """``q001::retriever``, ``gate::router.route_accuracy >= 0.6``."""
        return f"{self.case}::{self.name}" if self.case is not None else f"gate::{self.name}"


@dataclass(frozen=True)
class Attempt:
    """One repeat of a case whose verdict did not pass (in a run with repeats)."""

    repeat: int
    status: Literal["failed", "error"]
    message: str
    """The repeat's verdict reason."""
    detail: str = ""
    """Its evidence; empty once the outcome's repeats have used :data:`DETAIL_LIMIT`
    characters of evidence between them (an evidence already kept is kept again)."""


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
    for _, found in per_case(results, limit=limit):
        yield from found
    for gate in report.gates:
        yield gate_outcome(gate)
    run = run_outcome(report)
    if run is not None:
        yield run


def per_case(results: Iterable[CaseResult], *, limit: int = DETAIL_LIMIT
             ) -> Iterator[tuple[str, list[Outcome]]]:
    """Each case's id and outcomes (:func:`case_outcomes`), in the order of ``results``; in a
    run with repeats, one outcome per component for all the repeats of a case
    (:func:`combine`).

    Streams: a case's repeats are read one after another and only their outcomes are kept
    until the case is done. They must be consecutive, as they are in every
    :class:`~evalharness.results.Results` view (a case's repeats come together, though the
    file holds them repeat by repeat).
    """
    case_id: str | None = None
    tallies: dict[str, _Tally] = {}
    for result in results:
        if result.repeat is None:
            if case_id is not None:
                yield case_id, _combined(tallies)
                case_id = None
            yield result.case.id, case_outcomes(result, limit=limit)
            continue
        if result.case.id != case_id:
            if case_id is not None:
                yield case_id, _combined(tallies)
            case_id, tallies = result.case.id, {}
        _add(tallies, result, result.repeat, limit)
    if case_id is not None:
        yield case_id, _combined(tallies)


def combine(results: Iterable[CaseResult], *, limit: int = DETAIL_LIMIT) -> list[Outcome]:
    """The outcomes of one case from the results of its repeats: one per component in
    pipeline order, then end to end (see the module's docstring for how they combine)."""
    tallies: dict[str, _Tally] = {}
    for i, result in enumerate(results, 1):
        _add(tallies, result, result.repeat or i, limit)
    return _combined(tallies)


def _add(tallies: dict[str, _Tally], result: CaseResult, repeat: int, limit: int) -> None:
    for outcome in case_outcomes(result, limit=limit):
        tally = tallies.get(outcome.name)
        if tally is None:
            tally = tallies[outcome.name] = _Tally(result.case.id, outcome.name, limit)
        tally.add(repeat, outcome)


def _combined(tallies: dict[str, _Tally]) -> list[Outcome]:
    order = [n for n in tallies if n != END_TO_END] + (
        [END_TO_END] if END_TO_END in tallies else [])
    return [tallies[name].outcome() for name in order]


def combine_repeats(case_id: str, name: str, repeats: Iterable[tuple[int, Outcome]], *,
                    limit: int = DETAIL_LIMIT) -> Outcome:
    """One outcome from the outcomes of a case's repeats for one component, each with its
    repeat number.

    >>> fail = Outcome("q1", "router", "failed", "route_accuracy = 0 (needs >= 1)", "chose blog")
    >>> ok = Outcome("q1", "router", "passed")
    >>> flaky = combine_repeats("q1", "router", [(1, ok), (2, fail), (3, ok)])
    >>> flaky.status, flaky.message
    ('flaky', 'flaky: passed 2 of 3 repeats; repeat 2 failed: route_accuracy = 0 (needs >= 1)')
    >>> print(flaky.detail)
    repeat 2 failed: route_accuracy = 0 (needs >= 1)
    chose blog
    >>> failed = combine_repeats("q1", "router", [(1, fail), (2, fail)])
    >>> failed.status, failed.message
    ('failed', 'failed in 2 of 2 repeats; repeat 1: route_accuracy = 0 (needs >= 1)')
    >>> print(failed.detail)
    repeats 1, 2 failed: route_accuracy = 0 (needs >= 1)
    chose blog
    """
    tally = _Tally(case_id, name, limit)
    for repeat, outcome in repeats:
        tally.add(repeat, outcome)
    return tally.outcome()


class _Tally:
    """One case and component's repeats as they are read: counts, latencies, and the repeats
    that did not pass — their evidence kept while the distinct evidence stays within
    ``limit`` characters (an equal text is one string, kept once), so a case of 1,000
    repeats holds no more than one's worth of evidence."""

    def __init__(self, case_id: str, name: str, limit: int) -> None:
        self.case_id, self.name, self.limit = case_id, name, limit
        self.counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0, "flaky": 0}
        self.seconds = 0.0
        self.skipped = ""
        self.attempts: list[Attempt] = []
        self.kept: dict[str, str] = {}
        self.used = 0

    def add(self, repeat: int, outcome: Outcome) -> None:
        self.counts[outcome.status] += 1
        self.seconds += _finite(outcome.seconds)
        if outcome.status == "skipped" and self.counts["skipped"] == 1:
            self.skipped = outcome.message  # the first skipped repeat's reason
        if outcome.status not in ("failed", "error"):
            return
        message = self.kept.setdefault(outcome.message, outcome.message)
        detail = self.kept.get(outcome.detail)
        if detail is None:
            detail = ""
            if self.used + len(outcome.detail) <= self.limit:
                detail = self.kept.setdefault(outcome.detail, outcome.detail)
                self.used += len(detail)
        self.attempts.append(Attempt(repeat, outcome.status, message, detail))  # type: ignore[arg-type]

    def outcome(self) -> Outcome:
        counts = self.counts
        n = sum(counts.values())
        passed = counts["passed"]
        common = {"case": self.case_id, "name": self.name, "repeats": n,
                  "passed_repeats": passed, "seconds": self.seconds / n if n else 0.0}
        attempts = self.attempts
        over = over_repeats({"pass": passed, "fail": counts["failed"], "error": counts["error"],
                             "not_applicable": counts["skipped"]})
        if not attempts:
            if over == "not_applicable":
                return Outcome(status="skipped", message=self.skipped, **common)
            return Outcome(status="passed", **common)
        first = attempts[0]
        if over == "flaky":
            status: Status = "flaky"
            verb = "failed" if first.status == "failed" else "erred"
            message = (f"flaky: passed {passed} of {n} repeats; repeat {first.repeat} {verb}: "
                       f"{first.message}")
        elif over == "fail":
            status = "failed"
            first = next(a for a in attempts if a.status == "failed")
            errors = f" (error in {counts['error']})" if counts["error"] else ""
            message = (f"failed in {counts['failed']} of {n} repeats{errors}; "
                       f"repeat {first.repeat}: {first.message}")
        else:
            status = "error"
            message = (f"error in {counts['error']} of {n} repeats; repeat {first.repeat}: "
                       f"{first.message}")
        return Outcome(status=status, message=message, detail=_listing(attempts, self.limit),
                       attempts=tuple(attempts), **common)


def _listing(attempts: list[Attempt], limit: int) -> str:
    """Each repeat that did not pass with its reason and evidence; repeats with the same
    ones on one line (``repeats 1, 4 failed: …``); cut at ``limit`` characters."""
    same: dict[tuple[str, str, str], list[int]] = {}
    for a in attempts:
        same.setdefault((a.status, a.message, a.detail), []).append(a.repeat)
    blocks = []
    for (status, message, detail), repeats in same.items():
        verb = "failed" if status == "failed" else "erred"
        which = (f"repeat {repeats[0]}" if len(repeats) == 1
                 else f"repeats {', '.join(map(str, repeats))}")
        blocks.append(f"{which} {verb}: {message}" + (f"\n{detail}" if detail else ""))
    text = "\n\n".join(blocks)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _finite(seconds: float) -> float:
    return seconds if isinstance(seconds, int | float) and math.isfinite(seconds) else 0.0


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
