"""A finished run read back from its folder (:func:`load_run`): what ``evalharness.load_run``,
``evalharness review`` and ``evalharness agreement`` read. Below the API and the report, so
both can use it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import evalharness.jsonlimits as jsonlimits
from evalharness.errors import RunError
from evalharness.models import CaseResult, Report
from evalharness.outcomes import Outcome, outcomes
from evalharness.results import Results
from evalharness.runner import MANIFEST, RESULTS


@dataclass
class RunFolder:
    """A finished run, read back from its folder (:func:`load_run`)."""

    path: Path
    report: Report
    results: Sequence[CaseResult] = field(repr=False)
    """Every case result, in file order, read from results.jsonl when asked."""
    manifest: dict[str, Any] = field(default_factory=dict)
    """run.json: the scenario and input digests, the selection, the start time."""

    def outcomes(self) -> Iterator[Outcome]:
        """Every case's component (and end-to-end) verdicts, in results.jsonl's order (the
        order cases finished), then every gate, as test outcomes
        (:mod:`evalharness.outcomes`)."""
        return outcomes(self.report, self.results)

    def result(self, case_id: str, repeat: int | None = None) -> CaseResult:
        """The result of one case — in a run with repeats, of its ``repeat`` (default: its
        first) — ``KeyError`` when the run has none."""
        for result in self.results:
            if result.case.id == case_id and (repeat is None or result.repeat == repeat):
                return result
        raise KeyError(case_id if repeat is None else (case_id, repeat))

    def repeats_of(self, case_id: str) -> list[CaseResult]:
        """Every result of one case: one per repeat (one in a run without repeats)."""
        return [r for r in self.results if r.case.id == case_id]

    @property
    def failed(self) -> list[str]:
        """Ids of the cases that failed end to end — in a run with repeats, in any repeat —
        once each, in order (what ``--rerun-failed`` reruns)."""
        return list(dict.fromkeys(r.case.id for r in self.results if r.failed))

    @property
    def flaky(self) -> list[str]:
        """Ids of the cases whose end-to-end verdict flips between repeats (docs/repeat.md);
        empty in a run without repeats."""
        repeats = self.report.repeats
        return [f.case for f in repeats.flaky if f.component == "end_to_end"] if repeats \
            else []

    def records(self) -> list[dict[str, Any]]:
        """One dict per case, component and metric (:data:`RECORD_COLUMNS`): what
        :meth:`to_pandas`, :meth:`to_arrow` and :meth:`to_polars` hold."""
        out = []
        for result in self.results:
            end = result.end_to_end.status if result.end_to_end is not None else None
            cause = result.attribution.root_causes if result.attribution is not None else []
            for component, comp in result.components.items():
                verdict = result.verdicts.get(component)
                for metric, value in comp.metrics.items():
                    out.append({
                        "case_id": result.case.id, "repeat": result.repeat,
                        "question": result.case.question,
                        "component": component, "metric": metric, "value": value.value,
                        "error": value.error, "evaluator": comp.evaluators.get(metric),
                        "verdict": verdict.status if verdict is not None else None,
                        "end_to_end": end, "root_cause": ", ".join(cause) or None})
        return out

    def to_pandas(self) -> Any:
        """:meth:`records` as a pandas DataFrame (one row per case and metric; a metric that
        could not be computed has ``value`` NaN and its ``error``)."""
        pandas = _need("pandas", "to_pandas")
        return pandas.DataFrame(self.records(), columns=list(RECORD_COLUMNS))

    def to_arrow(self) -> Any:
        """:meth:`records` as a pyarrow Table."""
        pyarrow = _need("pyarrow", "to_arrow")
        records = self.records()
        return pyarrow.table({c: [r[c] for r in records] for c in RECORD_COLUMNS})

    def to_polars(self) -> Any:
        """:meth:`records` as a polars DataFrame."""
        polars = _need("polars", "to_polars")
        records = self.records()
        return polars.DataFrame({c: [r[c] for r in records] for c in RECORD_COLUMNS},
                                strict=False)


RECORD_COLUMNS = ("case_id", "repeat", "question", "component", "metric", "value", "error",
                  "evaluator", "verdict", "end_to_end", "root_cause")
"""The columns of :meth:`RunFolder.records`: the case and its repeat (``None`` in a run
without repeats; docs/repeat.md), the component and metric, its value
(``None`` when it could not be computed) and error, the evaluator that computed it, the
component's verdict on the case (``pass``, ``fail``, ``not_applicable``, ``error``), the
case's end-to-end verdict and its root cause(s)."""


def _need(module: str, method: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        extra = {"pandas": "notebook", "polars": "notebook", "pyarrow": "notebook"}[module]
        raise ImportError(f"RunFolder.{method}() needs {module}: pip install {module} (or "
                          f"pip install 'evalharness[{extra}]')") from None


RUN_HELP = ("give the --out folder of an `evalharness scenario` run (it holds results.jsonl "
            "and report.json)")


def load_run(folder: str | Path) -> RunFolder:
    """Read a finished run's folder: report.json, run.json and a lazily-read view of
    results.jsonl. Errors name the file and what is missing."""
    path = Path(folder)
    if not path.is_dir():
        raise RunError(f"{path}: {'no such run folder' if not path.exists() else 'not a folder'}"
                       f"; {RUN_HELP}")
    report_path = path / "report.json"
    if not (path / RESULTS).is_file():
        raise RunError(f"{path} has no {RESULTS}, so it is not a run folder; {RUN_HELP}")
    if not report_path.is_file():
        raise RunError(f"{path} has {RESULTS} but no report.json: the run did not finish; "
                       "continue it with `evalharness scenario SCENARIO --out "
                       f"{path} --resume`")
    try:
        report = Report.model_validate_json(report_path.read_bytes())
    except ValueError as exc:
        raise RunError(f"{report_path} is not a report written by evalharness: "
                       f"{str(exc).splitlines()[0]}") from None
    manifest: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        manifest = jsonlimits.loads((path / MANIFEST).read_text(encoding="utf-8"))
    return RunFolder(path=path, report=report, results=Results.open(path / RESULTS),
                     manifest=manifest)
