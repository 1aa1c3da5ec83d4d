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

    def result(self, case_id: str) -> CaseResult:
        """The result of one case (``KeyError`` when the run has none)."""
        for result in self.results:
            if result.case.id == case_id:
                return result
        raise KeyError(case_id)

    @property
    def failed(self) -> list[str]:
        """Ids of the cases that failed end to end (what ``--rerun-failed`` reruns)."""
        return [r.case.id for r in self.results if r.failed]


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
