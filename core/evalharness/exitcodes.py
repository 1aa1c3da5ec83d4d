"""What ``evalharness scenario`` exits with: one meaning per code (docs/ci.md, "Exit codes").

A CI job branches on the code, so each code says one thing, and the worst thing that happened
decides it: a run that could not do its work (3) says so even though its gates fail too; a
run whose every case errored (4) says so even without gates. :func:`run_status` reads only the
report, so the CLI, the JUnit file and the pytest plugin say the same thing of the same run.
"""

from __future__ import annotations

from dataclasses import dataclass

from evalharness.models import Report

OK = 0
GATE_FAILED = 1
INPUT = 2
INFRASTRUCTURE = 3
NOTHING_EVALUATED = 4
ALARM = 5
"""``evalharness monitor --once`` and ``monitor report`` only (docs/ci.md, "Exit codes of the
monitor"): a drift alarm fires; the store and the report are written first."""
INTERRUPTED = 130

MEANINGS: dict[int, str] = {
    OK: "the run did its work and every gate passed (or it has none)",
    GATE_FAILED: "a gate failed (`evalharness compare`: a gated metric regressed)",
    INPUT: "invalid input or usage: nothing ran (a bad scenario, case, option or address)",
    INFRASTRUCTURE: "the run could not do its work: a cluster's worker or node died, or the "
                    "judge gave no usable answer to any request; the report covers what completed",
    NOTHING_EVALUATED: "the system under test failed on every case: nothing was evaluated",
    INTERRUPTED: "interrupted (Ctrl-C); what completed is saved: rerun with --resume",
}
"""Every exit code and what it means, in the order docs/ci.md lists them."""


@dataclass(frozen=True)
class RunStatus:
    """A finished run's exit code and, when it is not 0, why (one paragraph)."""

    code: int
    reason: str | None = None

    @property
    def did_its_work(self) -> bool:
        """Whether the run evaluated what it was asked to (exit 0 or 1)."""
        return self.code in (OK, GATE_FAILED)


def run_status(report: Report) -> RunStatus:
    """The exit code of a finished run, from its report: 3 when something kept the run from
    doing its work (``report.infrastructure``), else 4 when the system failed on every case,
    else 1 when a gate failed, else 0.

    >>> from evalharness.models import Report
    >>> def report(**fields):
    ...     base = dict(scenario={"name": "s"}, judge={}, cases={"total": 2, "evaluated": 2,
    ...                 "system_errors": 0}, components={}, versions={}, gates=[])
    ...     return Report.model_validate(base | fields)
    >>> run_status(report())
    RunStatus(code=0, reason=None)
    >>> run_status(report(cases={"total": 2, "evaluated": 2, "system_errors": 2})).code
    4
    >>> run_status(report(infrastructure=["the Ray node died"])).reason
    'the run could not do its work: the Ray node died'
    """
    if report.infrastructure:
        return RunStatus(INFRASTRUCTURE, "the run could not do its work: "
                         + "; ".join(report.infrastructure))
    cases = report.cases
    evaluated, failed = cases.get("evaluated", 0), cases.get("system_errors", 0)
    if evaluated and failed >= evaluated:
        return RunStatus(NOTHING_EVALUATED, f"the system failed on every case ({failed} of "
                         f"{evaluated}): nothing was evaluated; see results.jsonl "
                         "(`trace.error`) and the report's system errors")
    failing = [g for g in report.gates if not g.passed]
    if failing:
        return RunStatus(GATE_FAILED, "gate failed: " + "; ".join(
            f"{g.name} ({g.reason or 'failed'})" for g in failing))
    return RunStatus(OK)
