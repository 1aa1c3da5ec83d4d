"""The agreement section of a run's reports: report.json's ``agreement``, a section in
report.md and report.html, and the ``agreement.COMPONENT.METRIC.STAT`` gates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evalharness.models import GateResult, Report
from evalharness.review.agreement import value_of
from evalharness.review.names import split_gate_metric
from evalharness.review.render import TITLE, markdown

PLUGIN = "evalharness.review"
"""The ``plugin`` of the section (the core's, not a plugin's)."""


def section(agreement: dict[str, Any]) -> dict[str, Any]:
    """The report section of an agreement result."""
    return {"plugin": PLUGIN, "title": TITLE, "markdown": markdown(agreement),
            "data": {"rows": len(agreement.get("rows", [])), "labels": agreement.get("labels")}}


def attach(report: Report, agreement: dict[str, Any]) -> None:
    """Put ``agreement`` into ``report`` (replacing an earlier one)."""
    report.agreement = agreement
    report.sections = [s for s in report.sections if s.get("plugin") != PLUGIN]
    report.sections.append(section(agreement))


def gate_results(gates: Sequence[Any], agreement: dict[str, Any] | None) -> list[GateResult]:
    """The outcome of every ``agreement.`` gate; a gate whose statistic could not be computed
    (no labels for it, one class only) fails with the reason."""
    out = []
    for gate in gates:
        component, metric, stat = split_gate_metric(gate.metric)
        value, n = value_of(agreement or {}, component, metric, stat)
        reason = None
        if value is None:
            reason = (f"no {stat} for {component}.{metric}: "
                      + ("no labels of it" if n == 0 else "it could not be computed"))
        passed = value is not None and gate.check(value)
        if value is not None and not passed:
            reason = f"{gate.metric} = {value:.3g} (needs {gate.op} {gate.threshold:g})"
        out.append(GateResult(name=gate.name, component="agreement", metric=gate.metric,
                              op=gate.op, threshold=gate.threshold, value=value,
                              passed=passed, n=n, errors=0, error_rate=None,
                              max_error_rate=gate.max_error_rate, reason=reason))
    return out
