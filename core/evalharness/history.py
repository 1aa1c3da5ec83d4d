"""Run history: many run folders in start order, each metric over the runs, and the runs where
something changed significantly — by ``compare``'s paired statistics between consecutive runs.

A nightly job leaves one run folder a night; one report.html per night cannot show when a
metric moved. :func:`build_history` reads the folders (``compare.load_run`` checks each),
orders them by the start time in their ``run.json``, groups them by scenario name (or keeps
them together), and compares every run with the one before it through
:func:`evalharness.compare.compare_runs` — the same pairing by case id, paired bootstrap CI
and paired permutation test as ``evalharness compare``, so a mark here is exactly a
significant row there. Runs that share no case are not tested (a mean over other cases is
not a paired change). The page, the Markdown and the terminal table are in
:mod:`evalharness.history_render`; the format of history.json is :class:`History`. See
docs/history.md.
"""

from __future__ import annotations

import json
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from evalharness.compare import (
    RUN_HELP,
    Correction,
    MetricComparison,
    Run,
    compare_runs,
    direction_of,
    load_run,
)
from evalharness.errors import InputError
from evalharness.scenario import parse_criterion, parse_gate
from evalharness.stats import PERMUTATIONS, RESAMPLES

HISTORY_SCHEMA_VERSION = "1"
"""Version of the ``history.json`` format."""

SIGNIFICANT = ("improved", "regressed", "changed")
"""The statuses of :class:`~evalharness.compare.MetricComparison` that mark a run."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class Point(_Model):
    """One metric in one run, as the run's report.json summarises it."""

    mean: float | None
    """Mean over the run's cases with a computed value."""

    ci95: list[float] | None
    """The report's 95% bootstrap CI of the mean; ``null`` when it has none."""

    n: int
    """Cases with a computed value."""

    errors: int
    """Cases where the metric failed."""


class Threshold(_Model):
    """A line on a metric's chart: a gate of the scenario or a verdict criterion."""

    kind: Literal["gate", "verdict"]
    """``gate``: the scenario's ``gates:`` (what CI fails on); ``verdict``: the component's
    per-case pass criterion behind the bottleneck ranking."""

    op: str
    """Comparison operator, e.g. ``>=``."""

    threshold: float
    """The number the metric is compared with."""

    text: str
    """The criterion as written."""


class MetricSeries(_Model):
    """One component metric over the group's runs."""

    component: str
    """Component name."""

    metric: str
    """Metric name."""

    direction: Literal["higher", "lower", "neutral"]
    """Which way is better, as the metric's plugin declares it."""

    scope: Literal["case", "run"]
    """``run``: one value per run (e.g. a macro-F1), shown but never tested."""

    points: list[Point | None]
    """One entry per run of the group, in run order; ``null`` where the run lacks the metric."""

    thresholds: list[Threshold] = Field(default_factory=list)
    """Gates and verdict criteria on this metric in the group's last run."""

    tested: bool = True
    """Whether it is tested between runs: ``false`` for a metric ``--metric`` / ``--exclude``
    leave out (still drawn) and for a per-run metric."""

    marked: list[int] = Field(default_factory=list)
    """Indexes of the runs where this metric changed significantly from the run before."""


class Share(_Model):
    """A component's share of a run's end-to-end failures."""

    share: float | None
    """Fraction of the failed cases attributed to it."""

    ci95: list[float] | None
    """95% CI of the share."""

    failures: float | None
    """Failed cases attributed to it (a case shared between parallel branches counts half)."""


class RunEntry(_Model):
    """One run of a group."""

    index: int
    """Position in the group, from 0, in start order."""

    label: str
    """The run's short name on the charts: ``#1``, ``#2``…"""

    path: str
    """The run folder, as given."""

    scenario: str | None
    """Scenario name."""

    started_at: str
    """Start time from run.json (ISO 8601)."""

    cases: int
    """Cases in its results.jsonl."""

    judge: str
    """The judge's label or backend."""

    end_to_end: dict[str, Any] | None
    """``{"pass_rate", "ci95", "cases", "failed"}`` from its bottleneck block."""

    bottleneck: str | None
    """The top of its bottleneck ranking; ``null`` without one."""

    shares: dict[str, Share] = Field(default_factory=dict)
    """Component (and ``unattributed``) → its share of the failed cases."""

    gates_failed: list[str] = Field(default_factory=list)
    """Gates that failed in this run."""

    marked: bool = False
    """Whether some metric changed significantly from the run before."""


class Step(_Model):
    """A run against the one before it: ``evalharness compare`` of the two."""

    before: int
    """Index of the earlier run."""

    after: int
    """Index of the later run (the one a change marks)."""

    shared_cases: int
    """Cases (by id) in both runs."""

    tested: bool
    """Whether the paired tests ran: only when the runs share cases."""

    note: str = ""
    """Why not, when not tested."""

    changes: list[MetricComparison] = Field(default_factory=list)
    """The metrics that changed significantly (``improved``, ``regressed`` or ``changed``), in
    pipeline order: compare's rows, with delta, its CI, p and the pairs."""

    tests: int = 0
    """How many metrics were tested (paired and chosen)."""

    components: list[str] = Field(default_factory=list)
    """Components with a change, in pipeline order."""

    first: str | None = None
    """The first of them on the pipeline: where the change starts (later components may move
    only because their input did)."""

    direction: Literal["worse", "better", "mixed", "changed"] | None = None
    """``worse``: only regressions; ``better``: only improvements; ``mixed``: both;
    ``changed``: only neutral metrics moved; ``null`` without changes."""

    bottleneck_moved: bool | None = None
    """Whether the top of the bottleneck ranking differs; ``null`` when a run has none."""

    warnings: list[str] = Field(default_factory=list)
    """compare's warnings about the pair (different scenarios, judges, cases...)."""


class Group(_Model):
    """Runs of one scenario (or every run, with ``--all-together``)."""

    name: str
    """The scenario name, or ``all`` with ``--all-together``."""

    runs: list[RunEntry]
    """In start order."""

    metrics: list[MetricSeries]
    """Every metric of any run, in pipeline order."""

    steps: list[Step]
    """Each run against the one before it."""

    components: list[str]
    """Components in pipeline order (for colours and order)."""


class History(_Model):
    """``history.json``: run folders over time, grouped, with significant changes marked."""

    schema_version: str = HISTORY_SCHEMA_VERSION
    """Format version of this record."""

    grouped_by: Literal["scenario", "all"]
    """How runs were grouped: by scenario name, or all together."""

    alpha: float
    """Significance level: a change counts when its q-value (``correction: bh``) is at most
    ``alpha``, or its p-value below it (``correction: none``)."""

    correction: Literal["bh", "none"] = "none"
    """How each step's many metrics were tested: ``bh``, Benjamini–Hochberg over the step's
    tests (``compare``'s default); ``none``, each at ``alpha`` on its own (histories written
    before the correction existed)."""

    resamples: int
    """Bootstrap resamples behind each CI of a change."""

    permutations: int
    """Random sign patterns behind each Monte Carlo p-value (above 16 pairs)."""

    metric_patterns: list[str] = Field(default_factory=list)
    """``--metric``: only these metrics were tested (empty: all)."""

    excluded: list[str] = Field(default_factory=list)
    """``--exclude``: these metrics were not tested (e.g. timing metrics on a busy machine)."""

    groups: list[Group]
    """One per scenario name, in order of their first run."""

    warnings: list[str] = Field(default_factory=list)
    """Problems with the input that did not stop the history (a folder given twice)."""


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


def started_at(path: Path, report: dict[str, Any]) -> str:
    """A run's start time: ``started_at`` of its run.json, else of report.json's ``run``
    block; an :class:`InputError` naming the file when neither has one."""
    meta = path / "run.json"
    if meta.is_file():
        try:
            data = json.loads(meta.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"{meta}: cannot be read as JSON ({exc}); run.json is written "
                             "by `evalharness scenario` when a run starts") from None
        if isinstance(data, dict) and isinstance(data.get("started_at"), str):
            return data["started_at"]
    found = (report.get("run") or {}).get("started_at")
    if isinstance(found, str):
        return found
    raise InputError(f"{path}: neither run.json nor report.json (`run.started_at`) says when "
                     f"the run started, so it cannot be placed in a history; {RUN_HELP}")


def _read(paths: list[Path]) -> tuple[list[tuple[Path, Run, str]], list[str]]:
    """Every run folder read and checked, in start order (ties: the order given)."""
    seen: dict[Path, Path] = {}
    warnings = []
    runs = []
    if not paths:
        raise InputError(f"no run folder given; {RUN_HELP}, two or more of them")
    for path in paths:
        run = load_run(Path(path))
        key = run.path.resolve()
        if key in seen:
            warnings.append(f"{path} was given twice (as {seen[key]}): read once")
            continue
        seen[key] = Path(path)
        runs.append((Path(path), run, started_at(run.path, run.report)))
    order = sorted(range(len(runs)), key=lambda i: (runs[i][2], i))
    return [runs[i] for i in order], warnings


def _scenario(run: Run) -> str:
    return str((run.report.get("scenario") or {}).get("name") or "(unnamed scenario)")


# --------------------------------------------------------------------------------------------
# Building
# --------------------------------------------------------------------------------------------


def chosen(component: str, metric: str, patterns: list[str], excluded: list[str]) -> bool:
    """Whether ``component.metric`` is tested: it matches a ``--metric`` pattern (any, when
    none is given) and no ``--exclude`` pattern (shell wildcards).

    >>> chosen("generator", "latency_ms", [], ["*.latency_ms"])
    False
    >>> chosen("retriever", "mrr", ["retriever.*"], [])
    True
    """
    name = f"{component}.{metric}"
    return (not patterns or any(fnmatchcase(name, p) for p in patterns)) and \
        not any(fnmatchcase(name, p) for p in excluded)


def _point(summary: dict[str, Any]) -> Point | None:
    mean = summary.get("mean")
    if not summary or (mean is not None and not isinstance(mean, int | float)):
        return None
    ci = summary.get("ci95")
    return Point(mean=mean, ci95=list(ci) if isinstance(ci, list) and len(ci) == 2 else None,
                 n=int(summary.get("n") or 0), errors=int(summary.get("errors") or 0))


def _thresholds(report: dict[str, Any]) -> dict[tuple[str, str], list[Threshold]]:
    """The scenario's gates and the verdict criteria of a run, per (component, metric)."""
    out: dict[tuple[str, str], list[Threshold]] = {}
    for gate in report.get("gates") or []:
        if isinstance(gate, dict) and isinstance(gate.get("threshold"), int | float) \
                and gate.get("component") and gate.get("metric"):
            out.setdefault((gate["component"], gate["metric"]), []).append(Threshold(
                kind="gate", op=str(gate.get("op")), threshold=gate["threshold"],
                text=str(gate.get("name"))))
    for comp, block in (report.get("verdict_criteria") or {}).items():
        texts = block.get("criteria") if isinstance(block, dict) else None
        for text in texts if isinstance(texts, list) else []:
            for part in str(text).split(" and "):
                found = parse_gate(part.strip()) if comp == "end_to_end" else \
                    parse_criterion(part, comp)
                if found is not None:
                    out.setdefault((found.component, found.metric), []).append(Threshold(
                        kind="verdict", op=found.op, threshold=found.threshold,
                        text=part.strip() if comp != "end_to_end" else f"end to end: {part}"))
    return out


def _run_entry(index: int, path: Path, run: Run, start: str) -> RunEntry:
    report = run.report
    bottleneck = report.get("bottleneck") if isinstance(report.get("bottleneck"), dict) else {}
    e2e = bottleneck.get("end_to_end") if isinstance(bottleneck.get("end_to_end"), dict) \
        else None
    shares = {}
    for entry in bottleneck.get("ranking") or []:
        if isinstance(entry, dict) and "component" in entry:
            shares[str(entry["component"])] = Share(
                share=entry.get("share"), ci95=entry.get("ci95"),
                failures=entry.get("failures"))
    if bottleneck.get("unattributed_share") is not None:
        shares["unattributed"] = Share(share=bottleneck.get("unattributed_share"),
                                       ci95=bottleneck.get("unattributed_ci95"),
                                       failures=bottleneck.get("unattributed"))
    ranking = [e for e in bottleneck.get("ranking") or [] if isinstance(e, dict)]
    judge = report.get("judge") or {}
    return RunEntry(
        index=index, label=f"#{index + 1}", path=str(path), scenario=_scenario(run),
        started_at=start, cases=len(run.cases),
        judge=str(judge.get("label") or judge.get("backend") or "no judge"),
        end_to_end=None if e2e is None else {k: e2e.get(k) for k in
                                            ("pass_rate", "ci95", "cases", "failed")},
        bottleneck=str(ranking[0]["component"]) if ranking else None, shares=shares,
        gates_failed=[str(g.get("name")) for g in report.get("gates") or []
                      if isinstance(g, dict) and g.get("passed") is False])


def _step(before: int, after: int, a: tuple[Path, Run, str], b: tuple[Path, Run, str], *,
          alpha: float, resamples: int, permutations: int, patterns: list[str],
          excluded: list[str], correction: Correction = "none") -> Step:
    shared = len(set(a[1].cases) & set(b[1].cases))
    if not shared:
        return Step(before=before, after=after, shared_cases=0, tested=False,
                    note=f"{b[0]} shares no case (by id) with {a[0]}: their means are over "
                         "different cases, so no paired test was made")
    cmp = compare_runs(a[0], b[0], alpha=alpha, resamples=resamples, permutations=permutations,
                       correction=correction)
    rows = [r for r in cmp.metrics if chosen(r.component, r.metric, patterns, excluded)]
    changes = [r for r in rows if r.status in SIGNIFICANT]
    components = list(dict.fromkeys(r.component for r in changes))
    statuses = {r.status for r in changes}
    direction = None if not changes else "mixed" if {"improved", "regressed"} <= statuses \
        else "worse" if "regressed" in statuses else "better" if "improved" in statuses \
        else "changed"
    return Step(before=before, after=after, shared_cases=shared, tested=True, changes=changes,
                tests=sum(1 for r in rows if r.status not in ("run_level", "no_pairs")),
                components=components, first=components[0] if components else None,
                direction=direction,
                bottleneck_moved=cmp.bottleneck.moved if cmp.bottleneck.available else None,
                warnings=cmp.warnings)


def _group(name: str, runs: list[tuple[Path, Run, str]], **options: Any) -> Group:
    entries = [_run_entry(i, *r) for i, r in enumerate(runs)]
    keys = list(dict.fromkeys(k for _, run, _ in runs for k in run.metric_keys()))
    components = list(dict.fromkeys(c for c, _ in keys))
    for _, run, _ in runs:
        ranked = (run.report.get("bottleneck") or {}).get("ranking") or []
        components += [str(e["component"]) for e in ranked if isinstance(e, dict)
                       and "component" in e and e["component"] not in components]
    steps = [_step(i - 1, i, runs[i - 1], runs[i], **options) for i in range(1, len(runs))]
    marked: dict[tuple[str, str], list[int]] = {}
    for step in steps:
        for row in step.changes:
            marked.setdefault((row.component, row.metric), []).append(step.after)
        entries[step.after].marked = bool(step.changes)
    lines = _thresholds(runs[-1][1].report)
    series = []
    for component, metric in keys:
        summaries = [run.summary(component, metric) for _, run, _ in runs]
        kind = next((run.kind(component) for _, run, _ in runs if run.kind(component)), None)
        series.append(MetricSeries(
            component=component, metric=metric,
            direction=direction_of([{**s, "metric": metric} for s in reversed(summaries) if s],
                                   kind),
            scope="run" if any(s.get("scope") == "run" for s in summaries) else "case",
            points=[_point(s) for s in summaries], thresholds=lines.get((component, metric), []),
            tested=not any(s.get("scope") == "run" for s in summaries) and chosen(
                component, metric, options["patterns"], options["excluded"]),
            marked=marked.get((component, metric), [])))
    return Group(name=name, runs=entries, metrics=series, steps=steps, components=components)


def build_history(paths: list[Path], *, all_together: bool = False, alpha: float = 0.05,
                  metrics: list[str] | None = None, exclude: list[str] | None = None,
                  resamples: int = RESAMPLES, permutations: int = PERMUTATIONS,
                  correction: Correction = "bh") -> History:
    """The history of the run folders ``paths``: grouped by scenario name (or all in one group),
    each group's runs in start order, each run compared with the one before it (``compare``'s
    tests: by default ``bh``, Benjamini–Hochberg over each step's metrics, as ``evalharness
    compare`` does; ``none``: each metric at ``alpha`` on its own). Bad input
    (not a run folder, an unreadable report or run.json) is an :class:`InputError` naming the
    path and what would be valid."""
    runs, warnings = _read([Path(p) for p in paths])
    groups: dict[str, list[tuple[Path, Run, str]]] = {}
    for entry in runs:
        groups.setdefault("all" if all_together else _scenario(entry[1]), []).append(entry)
    options = dict(alpha=alpha, resamples=resamples, permutations=permutations,
                   patterns=list(metrics or []), excluded=list(exclude or []),
                   correction=correction)
    for pattern in [*(metrics or []), *(exclude or [])]:
        if "." not in pattern:
            raise InputError(f"metric pattern {pattern!r}: write COMPONENT.METRIC, e.g. "
                             "retriever.recall@5 or '*.latency_ms'")
    return History(grouped_by="all" if all_together else "scenario", alpha=alpha,
                   correction=correction,
                   resamples=resamples, permutations=permutations,
                   metric_patterns=list(metrics or []), excluded=list(exclude or []),
                   groups=[_group(name, members, **options) for name, members in
                           groups.items()],
                   warnings=warnings)
