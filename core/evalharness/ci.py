"""What a run leaves for a CI job after its reports: the ``--junit-xml`` file, and report.md in
the GitHub Actions job summary when ``$GITHUB_STEP_SUMMARY`` names one."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from evalharness.junit import write_junit
from evalharness.models import CaseResult, Report

STEP_SUMMARY = "GITHUB_STEP_SUMMARY"
"""The variable GitHub Actions sets to the file a step appends its Markdown summary to."""

SUMMARY_LIMIT = 1024 * 1024
"""Bytes GitHub accepts in one step's summary; a longer one is dropped whole, so report.md is
cut (at a line) to fit what the step has not used yet."""


def write_ci_outputs(report: Report, results: Iterable[CaseResult], out_dir: Path,
                     junit_xml: Path | None = None, *,
                     env: Mapping[str, str] | None = None) -> dict[str, Path]:
    """After ``write_reports``: the JUnit XML when ``junit_xml`` is given, then
    ``out_dir/report.md`` appended to ``$GITHUB_STEP_SUMMARY`` when it is set. Returns what was
    written (``junit``, ``step_summary``).

    A JUnit path that cannot be written is an :class:`~evalharness.errors.OutputError`; a
    summary that cannot be written is only a warning on stderr (the run's outcome does not
    depend on it).
    """
    written: dict[str, Path] = {}
    if junit_xml is not None:
        written["junit"] = write_junit(junit_xml, report, results)
    summary = append_step_summary(Path(out_dir) / "report.md", env=env)
    if summary is not None:
        written["step_summary"] = summary
    return written


def append_step_summary(report_md: Path, *, env: Mapping[str, str] | None = None
                        ) -> Path | None:
    """Append ``report_md`` to the file ``$GITHUB_STEP_SUMMARY`` names (after a blank line when
    the file already has text); returns that file, or ``None`` when the variable is unset or
    empty, or the summary could not be written — which is a warning on stderr, never an
    error.

    >>> append_step_summary(Path("report.md"), env={}) is None
    True
    """
    target = (os.environ if env is None else env).get(STEP_SUMMARY)
    if not target:
        return None
    summary = Path(target)
    try:
        text = Path(report_md).read_text(encoding="utf-8")
    except OSError as exc:
        return _warn(f"cannot read {report_md} for the job summary: {exc.strerror or exc}")
    try:
        used = summary.stat().st_size if summary.is_file() else 0
        separator = "\n" if used else ""
        text = _fit(text, SUMMARY_LIMIT - used - len(separator), report_md)
        if text is None:
            return _warn(f"${STEP_SUMMARY} ({summary}) is full ({used} bytes); report.md "
                         "was not added to the job summary")
        with open(summary, "a", encoding="utf-8") as fh:
            fh.write(separator + text + ("" if text.endswith("\n") else "\n"))
    except OSError as exc:
        return _warn(f"cannot append {report_md} to ${STEP_SUMMARY} ({summary}): "
                     f"{exc.strerror or exc}")
    return summary


def _fit(text: str, room: int, source: Path) -> str | None:
    """``text``, or its first lines and a note, within ``room`` UTF-8 bytes (``None``: no
    room even for the note).

    >>> _fit("a\\nb\\n", 100, Path("report.md"))
    'a\\nb\\n'
    >>> print(_fit("line one\\n" + "x" * 100 + "\\n", 90, Path("run/report.md")), end="")
    line one
    <BLANKLINE>
    *report.md is cut here to fit the job summary: see run/report.md for the rest.*
    """
    data = text.encode("utf-8")
    if len(data) <= room:
        return text
    note = f"\n*{source.name} is cut here to fit the job summary: see {source} for the rest.*\n"
    keep = room - len(note.encode("utf-8"))
    if keep < 0:
        return None
    head = data[:keep].decode("utf-8", errors="ignore")
    head = head[: head.rfind("\n") + 1]
    return head + note


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)
    return None
