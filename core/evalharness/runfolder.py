"""A finished run read back from its folder (:func:`load_run`): what ``evalharness.load_run``,
``evalharness review`` and ``evalharness agreement`` read. Below the API and the report, so
both can use it."""

from __future__ import annotations

import contextlib
import math
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import evalharness.jsonlimits as jsonlimits
from evalharness.errors import RunError
from evalharness.models import CaseResult, Report, over_repeats
from evalharness.outcomes import Outcome, outcomes
from evalharness.results import Results
from evalharness.runner import MANIFEST, RESULTS
from evalharness.stats import reduce_repeats


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

    def case_records(self) -> list[dict[str, Any]]:
        """One dict per case, component and metric (:data:`CASE_COLUMNS`), a case's repeats
        reduced to one value by the metric's reducer, with their spread and how its verdict
        came out over them (docs/repeat.md); in a run without repeats, a case's one value."""
        out: list[dict[str, Any]] = []
        case: CaseResult | None = None
        values: dict[tuple[str, str], list[float]] = {}
        errors: dict[tuple[str, str], int] = {}
        evaluators: dict[tuple[str, str], str | None] = {}
        statuses: dict[str, Counter[str]] = {}

        def close() -> None:
            if case is None:
                return
            for key in evaluators:
                got = values.get(key, [])
                value, var = reduce_repeats(got, self.reducer(*key))
                verdicts = statuses.get(key[0], Counter())
                out.append({
                    "case_id": case.case.id, "question": case.case.question,
                    "component": key[0], "metric": key[1], "reducer": self.reducer(*key),
                    "value": value, "sd": math.sqrt(var) if var is not None else None,
                    "min": min(got) if got else None, "max": max(got) if got else None,
                    "repeats": len(got), "errors": errors.get(key, 0),
                    "evaluator": evaluators[key], "passed": verdicts["pass"],
                    "failed": verdicts["fail"] + verdicts["error"],
                    "verdict": over_repeats(verdicts)})

        for result in self.results:
            if case is None or result.case.id != case.case.id:
                close()
                case, values, errors, evaluators, statuses = result, {}, {}, {}, {}
            for component, comp in result.components.items():
                for metric, value in comp.metrics.items():
                    key = (component, metric)
                    evaluators.setdefault(key, comp.evaluators.get(metric))
                    if value.error is None:
                        values.setdefault(key, []).append(value.value)
                    else:
                        errors[key] = errors.get(key, 0) + 1
            for component, verdict in result.verdicts.items():
                statuses.setdefault(component, Counter())[verdict.status] += 1
        close()
        return out

    def reducer(self, component: str, metric: str) -> str:
        """How the run reduces a metric's repeats: its declared ``reducer`` as the report
        stores it, else ``mean``."""
        comp = self.report.components.get(component)
        summary = comp.metrics.get(metric) if comp is not None else None
        if summary is not None and summary.repeats is not None:
            return summary.repeats.reducer
        if summary is not None and summary.declaration is not None:
            return summary.declaration.reducer
        return "mean"

    def _rows(self, reduced: bool) -> tuple[list[dict[str, Any]], tuple[str, ...]]:
        return ((self.case_records(), CASE_COLUMNS) if reduced
                else (self.records(), RECORD_COLUMNS))

    def to_pandas(self, *, reduced: bool = False) -> Any:
        """:meth:`records` as a pandas DataFrame (one row per case and metric — per repeat in
        a run with repeats; a metric that could not be computed has ``value`` NaN and its
        ``error``); ``reduced=True``: :meth:`case_records`, one row per case and metric."""
        pandas = _need("pandas", "to_pandas")
        rows, columns = self._rows(reduced)
        return pandas.DataFrame(rows, columns=list(columns))

    def to_arrow(self, *, reduced: bool = False) -> Any:
        """:meth:`records` (or, ``reduced``, :meth:`case_records`) as a pyarrow Table."""
        pyarrow = _need("pyarrow", "to_arrow")
        rows, columns = self._rows(reduced)
        return pyarrow.table({c: [r[c] for r in rows] for c in columns})

    def to_polars(self, *, reduced: bool = False) -> Any:
        """:meth:`records` (or, ``reduced``, :meth:`case_records`) as a polars DataFrame."""
        polars = _need("polars", "to_polars")
        rows, columns = self._rows(reduced)
        return polars.DataFrame({c: [r[c] for r in rows] for c in columns}, strict=False)


CASE_COLUMNS = ("case_id", "question", "component", "metric", "reducer", "value", "sd", "min",
                "max", "repeats", "errors", "evaluator", "passed", "failed", "verdict")
"""The columns of :meth:`RunFolder.case_records`: the case, the component and metric, the
metric's reducer, the case's value reduced over its repeats (``None`` when no repeat computed
it), the standard deviation (``None`` below two values), the lowest and highest value, how
many repeats computed it and how many could not, the evaluator, how many repeats the
component's verdict passed and failed (or erred), and that verdict over the repeats:
``pass``, ``fail``, ``error``, ``not_applicable`` or ``flaky``."""

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
