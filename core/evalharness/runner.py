"""The runner: hand a run's cases to its executor, stream their results, then the oracle reruns.

Every run goes one way: the cases still to run go to an executor (:mod:`evalharness.executors`:
the local one in this process by default, Ray's, a plugin's — one protocol), which hands back
each case's result, metrics then verdicts, as ``results.jsonl`` lines; the runner writes them.
After the run, the failed cases' oracle reruns (:mod:`evalharness.oracle` plans them and reads
their records) go to the same executor.

``results.jsonl`` gets one complete line per case as soon as the case is evaluated, so an
interrupted run leaves a valid file and ``--resume`` continues it without losing or repeating a
case. The report is always computed from ``results.jsonl`` alone, in case order, so a resumed
run reports exactly what an uninterrupted one does.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import evalharness.jsonlimits as jsonlimits
from evalharness import oracle
from evalharness.context import EvalContext
from evalharness.errors import (
    InfrastructureError,
    RunError,
)
from evalharness.execution import StopSignal
from evalharness.executors import attach, execute
from evalharness.local_executor import LocalExecutor
from evalharness.lock import RunLock
from evalharness.models import CaseResult, HeadroomRecord
from evalharness.prepare import (  # re-exported: their home was here
    check_resources as check_resources,
)
from evalharness.prepare import load_system as load_system
from evalharness.prepare import make_judge as make_judge
from evalharness.prepare import prepare_context as prepare_context
from evalharness.results import Results, append_lines
from evalharness.results import read_results as read_results  # for small uses, e.g. tests
from evalharness.scenario import Scenario
from evalharness.work import Emit, Work, WorkerSpec

RESULTS = "results.jsonl"
MANIFEST = "run.json"


@dataclass(repr=False)
class RunOutcome:
    """What a finished (or interrupted) run leaves behind."""

    out_dir: Path
    results: Sequence[CaseResult]
    """Every result, in case order: a :class:`~evalharness.results.Results` view that reads
    each from ``results.jsonl`` when asked (``len``, indexing, iteration)."""
    context: EvalContext
    started_at: str
    duration_s: float
    resumed: int = 0
    interrupted: bool = False
    stats: dict[str, Any] = field(default_factory=dict)
    headroom: list[HeadroomRecord] | None = None
    """Oracle reruns (``headroom.jsonl``); ``None`` when headroom was not computed."""
    oracles: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    """The oracles of ``headroom``: (label, components)."""
    headroom_note: str | None = None
    """Why headroom was not computed."""
    warnings: list[str] = field(default_factory=list)
    """What the run noticed that the report should show (see ``Report.warnings``)."""
    infrastructure: list[str] = field(default_factory=list)
    """Why the run could not do all its work (:class:`~evalharness.errors.InfrastructureError`:
    a cluster's worker died); its cases that did not complete have no result line."""

    def __repr__(self) -> str:
        # Short on purpose: asyncio formats the finished run's task, result included, when
        # it restores the SIGINT handler (a repr of every result took seconds and gigabytes).
        return (f"RunOutcome(out_dir={str(self.out_dir)!r}, results={len(self.results)}, "
                f"resumed={self.resumed}, interrupted={self.interrupted})")


class Progress:
    """Progress callbacks; the CLI passes one that draws a bar."""

    def start(self, total: int, done: int, label: str = "cases") -> None: ...

    def advance(self, n: int = 1) -> None: ...

    def stop(self) -> None: ...


@contextlib.contextmanager
def fewer_collections(young: int = 50_000):
    """Collect the youngest generation every ``young`` allocations instead of every 700
    while a run lasts (the thresholds are restored after). A run allocates millions of
    short-lived objects per batch; with the default, the survivors of frequent young
    collections were promoted and full collections walked them again and again — a quarter
    of a 10k-case run's time. Nothing is left uncollected: it is collected later."""
    old = gc.get_threshold()
    if old[0] == 0:  # automatic collection is off: leave it off
        yield
        return
    gc.set_threshold(max(old[0], young), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)


async def run(
    scenario: Scenario,
    out_dir: Path,
    *,
    concurrency: int | None = None,
    resume: bool = False,
    progress: Progress | None = None,
    flush_seconds: float = 1.0,
    headroom: bool = True,
    executor: Any = None,
) -> RunOutcome:
    """Run the scenario into ``out_dir``; return every result (old and new) in case order, as
    a :class:`~evalharness.results.Results` view of ``results.jsonl``.

    Then, with ``headroom`` (and the scenario's ``system.headroom``), when the system accepts
    ``overrides``, rerun the failed cases under each component's oracle
    (:mod:`evalharness.oracle`).

    ``executor``: where the cases run (an executor of :mod:`evalharness.executors`, e.g.
    Ray's); ``None``: this process (:class:`~evalharness.local_executor.LocalExecutor`).
    The results are written here either way."""
    with fewer_collections():
        return await _run(scenario, out_dir, concurrency=concurrency, resume=resume,
                          progress=progress, flush_seconds=flush_seconds, headroom=headroom,
                          executor=executor)


async def _run(scenario: Scenario, out_dir: Path, *, concurrency: int | None, resume: bool,
               progress: Progress | None, flush_seconds: float, headroom: bool,
               executor: Any = None) -> RunOutcome:
    progress = progress or Progress()
    results_path = out_dir / RESULTS
    manifest_path = out_dir / MANIFEST
    func = load_system(scenario) if scenario.system is not None else None
    judge = make_judge(scenario)  # a judge misconfiguration fails before anything is written
    for warning in getattr(judge, "warnings", []):
        print(f"warning: {warning}", file=sys.stderr)
    try:
        with RunLock(out_dir):
            return await _locked_run(scenario, out_dir, func, judge, concurrency=concurrency,
                                     resume=resume, progress=progress,
                                     flush_seconds=flush_seconds, headroom=headroom,
                                     results_path=results_path, manifest_path=manifest_path,
                                     executor=executor)
    finally:
        judge.close()


async def _locked_run(scenario: Scenario, out_dir: Path, func: Any, judge: Any, *,
                      concurrency: int | None, resume: bool, progress: Progress,
                      flush_seconds: float, headroom: bool, results_path: Path,
                      manifest_path: Path, executor: Any = None) -> RunOutcome:
    if not resume and results_path.is_file() and results_path.stat().st_size:
        raise RunError(f"{out_dir} already holds results ({RESULTS}); pass --resume to "
                       "continue that run, or choose another --out")
    context = prepare_context(scenario, out_dir, judge)
    warnings: list[str] = []
    order = [c.id for c in scenario.cases]
    done: set[tuple[str, int | None]] = set()
    if resume:
        if not manifest_path.is_file():
            raise RunError(f"{out_dir}: nothing to resume (no {MANIFEST}); run without "
                           "--resume to start")
        try:
            manifest = jsonlimits.loads(manifest_path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError, TooDeep
            raise RunError(f"{manifest_path}: not the record of a run ({exc}); it is written "
                           "by `evalharness scenario`: run without --resume into a new --out"
                           ) from None
        if not isinstance(manifest, dict):
            raise RunError(f"{manifest_path}: not the record of a run (not a JSON object); "
                           "run without --resume into a new --out")
        if manifest.get("inputs_sha256") != scenario.inputs_sha256:
            raise RunError(f"{out_dir} holds a run of a different version of the scenario "
                           f"({manifest.get('scenario')}): {_changed(manifest, scenario)} "
                           "since. --resume continues only an unchanged scenario; choose "
                           "another --out to start afresh")
        _same_selection(manifest, scenario, out_dir)
        _same_repeats(manifest, scenario, out_dir)
        previous = Results.open(results_path, order=order, repair=True, warnings=warnings)
        done = set(previous.keys)
        _count_earlier_spending(judge, previous)
        started_at = manifest.get("started_at")
    else:
        started_at = datetime.now(UTC).isoformat(timespec="seconds")
        manifest_path.write_text(json.dumps({
            "scenario": str(scenario.path), "scenario_sha256": scenario.sha256,
            "inputs_sha256": scenario.inputs_sha256, "inputs": scenario.input_digests,
            "selection": _selection_of(scenario), "started_at": started_at}
            | ({"repeat": scenario.spec.repeat.model_dump()} if scenario.repeated else {}),
            indent=2))
        results_path.write_text("")

    pending = [w for w in work_of(scenario) if (w.case_id, w.repeat) not in done]
    progress.start(len(scenario.cases) * scenario.repeats, len(done),
                   label=f"cases × {scenario.repeats} repeats" if scenario.repeated else "cases")
    t0 = time.perf_counter()
    hint = (f"; continue with: evalharness scenario {scenario.path} --out {out_dir} "
            "--resume" + (" and the same case-choosing options" if scenario.selection else ""))
    executor = executor if executor is not None else LocalExecutor(flush_seconds=flush_seconds)
    spec = worker_spec(scenario, context, out_dir, concurrency)
    with attach(spec, scenario, func, context), \
            open(results_path, "a", encoding="utf-8") as sink, StopSignal(hint) as stop:

        def stopped() -> bool:
            return stop.requested

        def emit(group: list, lines: list[str]) -> None:
            append_lines(sink, lines)
            progress.advance(len(lines))

        infrastructure: list[str] = []
        try:
            interrupted = await execute(executor, spec, pending, emit, stopped)
        except InfrastructureError as exc:  # what completed is written; the report says
            interrupted = False             # what did not, --resume runs it
            infrastructure.append(str(exc))
        except asyncio.CancelledError:
            interrupted = True
        finally:
            progress.stop()
        _service_warnings(executor)

        # never every result in memory: a view reads each from its line when asked
        results = Results.open(results_path, order=order, warnings=warnings)
        del order
        outcome = RunOutcome(out_dir=out_dir, results=results, context=context,
                             started_at=started_at, duration_s=time.perf_counter() - t0,
                             resumed=len(done), interrupted=interrupted, warnings=warnings,
                             infrastructure=infrastructure)
        outcome.headroom_note = _no_headroom(scenario, func, headroom, interrupted,
                                             infrastructure)
        if outcome.headroom_note is None:

            async def rerun(work: list, emit: Emit) -> bool:
                """The oracle reruns, by the same executor as the run's cases."""
                return await execute(executor, spec, work, emit, stopped)

            try:
                outcome.oracles, outcome.headroom = await oracle.run_headroom(
                    scenario, context, results, out_dir, rerun=rerun, progress=progress,
                    limit=oracle.limit_of(scenario.system.headroom))
            except asyncio.CancelledError:
                outcome.interrupted = True
            except InfrastructureError as exc:  # the run's results stand; the reruns did not
                outcome.oracles, outcome.headroom = [], None
                outcome.infrastructure.append(f"the oracle reruns could not finish: {exc}")
                outcome.headroom_note = ("the oracle reruns could not finish (see the "
                                         "infrastructure problem above); the run's own "
                                         "results are complete")
            except Exception as exc:  # the run's results stand; the report says what failed
                outcome.oracles, outcome.headroom = [], None
                outcome.headroom_note = (f"the oracle reruns failed ({type(exc).__name__}: "
                                         f"{exc}); the run's own results are complete")
                print(f"warning: {outcome.headroom_note}", file=sys.stderr)
            if stop.requested:
                outcome.interrupted = True
            if outcome.interrupted:
                outcome.headroom_note = ("interrupted while rerunning failed cases with "
                                         "oracles; --resume continues")
    outcome.duration_s = time.perf_counter() - t0
    return outcome


def work_of(scenario: Scenario) -> list[Work]:
    """A run's work: each case once; with repeats, every case's first repeat, then every
    case's second, … (so an interrupted run has whole repeats first, and a batch holds
    distinct cases).

    >>> from types import SimpleNamespace as S
    >>> two = S(cases=[S(id="a"), S(id="b")], repeated=True, repeats=2)
    >>> [w.key for w in work_of(two)]
    ['a#1', 'b#1', 'a#2', 'b#2']
    """
    if not scenario.repeated:
        return [Work(c.id) for c in scenario.cases]
    return [Work(c.id, repeat=r) for r in range(1, scenario.repeats + 1)
            for c in scenario.cases]


def _same_repeats(manifest: dict[str, Any], scenario: Scenario, out_dir: Path) -> None:
    """``--resume`` continues a run with the repeats it began with."""
    old = manifest.get("repeat")
    new = scenario.spec.repeat.model_dump() if scenario.repeated else None
    if old != new:
        def said(r: Any) -> str:
            return (f"--repeat {r.get('n')} (judge {r.get('judge')})" if isinstance(r, dict)
                    else "no repeats")

        raise RunError(f"{out_dir} holds a run with {said(old)}, not {said(new)}: --resume "
                       "continues a run as it began, so pass the same --repeat (and "
                       "--repeat-judge), or choose another --out")


def _count_earlier_spending(judge: Any, previous: Results) -> None:
    """A resumed run's cost ceiling (``judge.max_cost``) counts what the run's earlier part
    paid for: the cost of the judgments recorded with its results."""
    limits = getattr(judge, "limits", None) if getattr(judge, "is_llm", False) else None
    if limits is None or limits.max_cost is None:
        return
    from evalharness.judge.base import Usage

    usage = Usage(judge.config.prices)
    for result in previous:
        usage.add(result.judgment_records())
    limits.add_spent(usage.summary().get("cost", 0.0))


def worker_spec(scenario: Scenario, context: EvalContext, out_dir: Path,
                concurrency: int | None) -> WorkerSpec:
    """What an executor's workers need to load this run's scenario themselves."""
    database = context.database.path if context.database is not None else None
    limits = getattr(context.judge, "limits", None)
    return WorkerSpec.of(scenario, out_dir, concurrency, database if database and
                         Path(database).is_file() else None,
                         shared_judge=bool(getattr(context.judge, "is_llm", False)),
                         spent=limits.spent if limits is not None else 0.0)


def _service_warnings(executor: Any) -> None:
    """What a cluster's judge noticed (its cache, its limits), once its work is done."""
    summary = getattr(executor, "service_summary", None) or {}
    for warning in summary.get("warnings", []):
        print(f"warning: {warning}", file=sys.stderr)


def _selection_of(scenario: Scenario) -> dict[str, Any]:
    """The scenario's selection record, or one meaning "every case" (part of run.json's
    fingerprint)."""
    if scenario.selection:
        return scenario.selection
    return {"how": f"all {len(scenario.cases)} cases", "everything": True}


def _same_selection(manifest: dict[str, Any], scenario: Scenario, out_dir: Path) -> None:
    """``--resume`` continues the cases the run began with, never another selection."""
    old = manifest.get("selection") or {"how": "all cases", "everything": True}
    new = _selection_of(scenario)
    if old.get("everything") and new.get("everything"):
        return
    if old.get("ids_sha256") != new.get("ids_sha256"):
        raise RunError(f"{out_dir} holds a run of other cases ({old.get('how')}) than these "
                       f"options choose ({new.get('how')}): --resume continues the same "
                       "selection, so pass the same --limit/--sample/--seed/--filter/"
                       "--rerun-failed, or choose another --out")


def _changed(manifest: dict[str, Any], scenario: Scenario) -> str:
    """What changed since the run began, from the digests run.json keeps."""
    old = manifest.get("inputs")
    if not isinstance(old, dict):
        return ("the scenario file or a file it names (cases, traces, corpus, database "
                "script, system, plugins) changed")
    new = scenario.input_digests
    changed = [f for f in new if f in old and old[f] != new[f]]
    added = [f for f in new if f not in old]
    removed = [f for f in old if f not in new]
    parts = ([f"{f} changed" for f in changed] + [f"{f} is new" for f in added]
             + [f"{f} is no longer named" for f in removed])
    return ", ".join(parts[:4]) + (f" and {len(parts) - 4} more" if len(parts) > 4 else "") \
        if parts else "the inputs changed"


def _no_headroom(scenario: Scenario, func: Any, wanted: bool, interrupted: bool,
                 infrastructure: Sequence[str] = ()) -> str | None:
    """Why the run gets no oracle headroom, or ``None`` when it does."""
    if interrupted:
        return "the run was interrupted before every case was evaluated"
    if infrastructure:
        return ("the run could not evaluate every case (an infrastructure problem, see "
                "above); --resume continues")
    if func is None:
        return ("the scenario replays recorded traces: oracle headroom needs a system callable "
                "that accepts `overrides`")
    if not wanted:
        return "not computed (--no-headroom)"
    if not scenario.system.headroom:
        return "not computed (the scenario sets `system.headroom: false`)"
    if not oracle.accepts_overrides(func):
        return (f"the system {scenario.system.callable} has no `overrides` parameter, so "
                "its components cannot be replaced by their gold (see docs/bottleneck.md, "
                "\"Oracle headroom\")")
    return None
