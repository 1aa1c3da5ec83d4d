"""The Python API: what the command line does, as functions (docs/api.md).

>>> import evalharness
>>> report = evalharness.run_scenario("scenarios/shop.yaml", out="runs/try", sample=20, seed=1)
... # doctest: +SKIP
>>> run = evalharness.load_run("runs/try")                                    # doctest: +SKIP
>>> [o.test_name for o in run.outcomes() if o.status == "failed"][:3]          # doctest: +SKIP

``evalharness scenario`` is a thin layer over :func:`execute` (the CLI adds the progress bar,
the terminal tables and the exit codes); :func:`run_scenario` is the same call returning the
:class:`~evalharness.models.Report`. Both work where an event loop is already running (a
Jupyter notebook): the run then gets its own loop in a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TypeVar

from evalharness.ci import write_ci_outputs
from evalharness.compare import Comparison
from evalharness.compare import compare_runs as _compare_runs
from evalharness.errors import EvalHarnessError
from evalharness.goldcheck import require_gold
from evalharness.junit import check_writable
from evalharness.lock import RunLock
from evalharness.models import CaseResult, Report
from evalharness.report import build_report, write_reports
from evalharness.runfolder import RUN_HELP as RUN_HELP  # re-exported: the public API
from evalharness.runfolder import RunFolder as RunFolder
from evalharness.runfolder import load_run as load_run
from evalharness.runner import RESULTS, Progress, run
from evalharness.sampling import Chosen, Selection, select
from evalharness.scenario import Scenario, load_scenario, with_repeat

T = TypeVar("T")

Cache = Literal["on", "off", "refresh"]


class RunInterrupted(EvalHarnessError):
    """The run was stopped (Ctrl-C, SIGTERM) before every case was evaluated. What was
    evaluated is saved in ``out_dir``; rerun with ``resume=True`` to continue."""

    def __init__(self, out_dir: Path, saved: int | None, total: int, *,
                 began: bool = True) -> None:
        self.out_dir, self.saved, self.total = out_dir, saved, total
        self.began = began
        """Whether the run had begun (its folder written): without, there is nothing to
        resume."""
        done = "some" if saved is None else str(saved)
        super().__init__(f"interrupted: {done} of {total} cases are saved in "
                         f"{out_dir / RESULTS}; continue with resume=True (--resume)" if began
                         else "interrupted before the run began: nothing was written")


@dataclass
class Executed:
    """What :func:`execute` leaves: the report, the files written, and the run."""

    report: Report
    out_dir: Path
    paths: dict[str, Path]
    results: Sequence[CaseResult] = field(repr=False)
    chosen: Chosen = field(repr=False)


def load(scenario: str | Path | Scenario, *, plugins: Sequence[str | Path] = (),
         judge: str | None = None, judge_concurrency: int | None = None,
         cache: Cache = "on") -> Scenario:
    """Load a scenario file (or pass a loaded :class:`Scenario` through, when no option
    would change how it loads)."""
    if cache not in ("on", "off", "refresh"):
        raise EvalHarnessError(f"cache={cache!r}: expected 'on', 'off' (neither read nor "
                               "write the judge cache) or 'refresh' (ask again, overwrite)")
    if isinstance(scenario, Scenario):
        if plugins or judge or judge_concurrency or cache != "on":
            raise EvalHarnessError("plugins, judge, judge_concurrency and cache apply when a "
                                   "scenario is loaded: pass its path, not a loaded Scenario")
        return scenario
    overrides: dict[str, Any] = {}
    if judge_concurrency:
        overrides["concurrency"] = judge_concurrency
    if cache != "on":
        overrides["cache_mode"] = cache
    return load_scenario(scenario, extra_plugins=list(plugins), judge_backend=judge,
                         judge_overrides=overrides)


def choose(loaded: Scenario, selection: Selection) -> tuple[Scenario, Chosen]:
    """The scenario narrowed to the cases ``selection`` takes (see
    :mod:`evalharness.sampling`); the choice is recorded on it for run.json and the report."""
    chosen = select(loaded.cases, selection, source=str(loaded.path))
    if chosen.everything:
        return loaded, chosen
    return replace(loaded, cases=chosen.cases, selection=chosen.record()), chosen


def execute(scenario: str | Path | Scenario, *, out: str | Path | None = None,
            resume: bool = False, concurrency: int | None = None,
            plugins: Sequence[str | Path] = (), judge: str | None = None,
            judge_concurrency: int | None = None, cache: Cache = "on", headroom: bool = True,
            selection: Selection | None = None, junit_xml: str | Path | None = None,
            progress: Progress | None = None, executor: str = "local",
            address: str | None = None, repeat: int | None = None,
            repeat_judge: str | None = None) -> Executed:
    """Run a scenario into ``out`` and write its reports (see :func:`run_scenario`)."""
    loaded = load(scenario, plugins=plugins, judge=judge,
                  judge_concurrency=judge_concurrency, cache=cache)
    loaded = with_repeat(loaded, repeat, repeat_judge)
    where = make_executor(loaded, executor, address)
    loaded, chosen = choose(loaded, selection or Selection())
    # a gold route the pipeline does not have would score a silent 0: refused before the run
    # (the cheap check; `evalharness validate` also checks chunk ids and runs the gold SQL)
    require_gold(loaded, sql=False, corpus=False,
                 hint="\nFix these gold routes, or the pipeline's `routes:`; `evalharness "
                      "validate` checks the chunk ids and the gold SQL too.")
    if resume and out is None:
        raise EvalHarnessError("resume needs out: the folder of the run to continue "
                               "(--resume needs --out)")
    out_dir = Path(out) if out is not None else default_out(loaded)
    if junit_xml is not None:
        junit_xml = Path(junit_xml)
        check_writable(junit_xml)  # before the run, not after it
    try:  # join the cluster (or refuse its address) before anything of the run is written
        getattr(where, "start", lambda: None)()
    except BaseException as exc:
        where.close()
        if isinstance(exc, KeyboardInterrupt):
            raise RunInterrupted(out_dir, 0, len(loaded.cases), began=False) from None
        raise
    existed = out_dir.exists()
    try:
        with RunLock(out_dir):  # held until the reports are written
            try:
                outcome = run_coroutine(run(loaded, out_dir, concurrency=concurrency,
                                            resume=resume, progress=progress,
                                            headroom=headroom, executor=where))
            finally:
                if where is not None:
                    where.close()
            if outcome.interrupted:
                raise RunInterrupted(out_dir, len(outcome.results),
                                     len(loaded.cases) * loaded.repeats)
            report = build_report(loaded, outcome)
            paths = write_reports(report, out_dir, outcome.results)
            paths.update(write_ci_outputs(report, outcome.results, out_dir, junit_xml))
    except RunInterrupted:
        raise
    except KeyboardInterrupt:
        raise RunInterrupted(out_dir, None, len(loaded.cases)) from None
    except EvalHarnessError:
        if not existed:  # refused before anything was written: leave no empty folder behind
            with contextlib.suppress(OSError):
                out_dir.rmdir()
        raise
    return Executed(report=report, out_dir=out_dir, paths=paths, results=outcome.results,
                    chosen=chosen)


def make_executor(scenario: Scenario, name: str, address: str | None) -> Any:
    """The executor registered as ``name`` (``local``: this process); a name no plugin
    registers, or ``--address`` with ``local``, is a usage error."""
    found = scenario.host.executor(name)
    if found is None:
        known = ", ".join(sorted(scenario.host.registry.executors))
        raise EvalHarnessError(f"--executor {name!r}: no such executor; registered: {known}")
    if name == "local" and address:
        raise EvalHarnessError("--address names a cluster: give it with --executor ray (or "
                               "another cluster executor), not with the local one")
    return found.factory(address)


def run_scenario(scenario: str | Path | Scenario, *, out: str | Path | None = None,
                 resume: bool = False, concurrency: int | None = None,
                 plugins: Sequence[str | Path] = (), judge: str | None = None,
                 judge_concurrency: int | None = None, cache: Cache = "on",
                 headroom: bool = True, limit: int | None = None, sample: int | None = None,
                 seed: int = 0, filters: Sequence[str] = (),
                 rerun_failed: str | Path | None = None, ids: Sequence[str] | None = None,
                 junit_xml: str | Path | None = None,
                 progress: Progress | None = None, executor: str = "local",
                 address: str | None = None, repeat: int | None = None,
                 repeat_judge: str | None = None) -> Report:
    """Run the scenario (a path, or a loaded :class:`Scenario`) and write results.jsonl,
    report.json, report.md and report.html into ``out`` (default
    ``runs/<name>-<timestamp>``); return the report.

    The options are the command line's: ``concurrency`` (system calls at once), ``plugins``
    (local plugin files), ``judge`` (backend), ``judge_concurrency``, ``cache`` (``"off"``,
    ``"refresh"``), ``headroom`` (oracle reruns of failed cases), ``resume`` (continue the run
    in ``out``), ``junit_xml`` (also write a JUnit file), ``repeat`` (run each case N times;
    ``repeat_judge``: ``"fresh"`` to ask the judge anew each time; docs/repeat.md),
    ``executor`` (``"ray"``: spread the
    cases over a Ray cluster at ``address``; docs/scale.md). Which cases run: ``limit`` (the
    first N), ``sample`` + ``seed`` (stratified by gold route), ``filters`` (``--filter``
    terms, all must hold), ``rerun_failed`` (a run folder: its failed cases), ``ids``.

    Raises :class:`~evalharness.errors.EvalHarnessError` for bad input (its message names the
    file and field) and :class:`RunInterrupted` when stopped before the end. A failed gate is
    not an exception: read ``report.gates``.
    """
    if isinstance(filters, str):  # one filter, not one per character
        filters = (filters,)
    if isinstance(ids, str):
        ids = (ids,)
    selection = Selection(limit=limit, sample=sample, seed=seed, filters=tuple(filters),
                          rerun_failed=Path(rerun_failed) if rerun_failed else None,
                          ids=tuple(ids) if ids is not None else None)
    return execute(scenario, out=out, resume=resume, concurrency=concurrency,
                   plugins=plugins, judge=judge, judge_concurrency=judge_concurrency,
                   cache=cache, headroom=headroom, selection=selection,
                   junit_xml=junit_xml, progress=progress, executor=executor,
                   address=address, repeat=repeat, repeat_judge=repeat_judge).report


def default_out(scenario: Scenario) -> Path:
    """``runs/<scenario name>-<timestamp>``."""
    return Path("runs") / f"{scenario.name}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"


def run_coroutine(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to its end from synchronous code: with ``asyncio.run``, or — when this
    thread already runs an event loop (Jupyter) — on a fresh loop in a worker thread.

    Jupyter's "interrupt the kernel" raises ``KeyboardInterrupt`` in this thread wherever it
    is, even the instant after the worker started: the run is then cancelled (at its next
    ``await``, or as it starts) and waited for before the interrupt goes on, so no run carries
    on in the background of the next one."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        in_loop = False  # the run starts outside this `except`: it is no exception's context
    else:
        in_loop = True
    if not in_loop:
        return asyncio.run(coro)
    guard = threading.Lock()
    state: dict[str, Any] = {"stop": False}
    outcome: dict[str, Any] = {}

    async def main() -> T:
        with guard:
            state["loop"], state["task"] = asyncio.get_running_loop(), asyncio.current_task()
            stop = state["stop"]
        if stop:  # interrupted before this task existed to be cancelled
            coro.close()
            raise asyncio.CancelledError
        return await coro

    def work() -> None:
        try:
            outcome["value"] = asyncio.run(main())
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            outcome["error"] = exc

    worker = threading.Thread(target=work, name="evalharness-run", daemon=True)
    try:
        worker.start()
        worker.join()
    except KeyboardInterrupt:
        with guard:
            state["stop"] = True
            if "task" in state:
                with contextlib.suppress(RuntimeError):  # the loop has ended already
                    state["loop"].call_soon_threadsafe(state["task"].cancel)
        while worker.is_alive():  # a second interrupt does not leave the run running
            with contextlib.suppress(KeyboardInterrupt):
                worker.join()
        raise
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def compare_runs(a: str | Path, b: str | Path, *, alpha: float = 0.05,
                 metrics: Sequence[str] = (), resamples: int | None = None,
                 permutations: int | None = None, judge_pairwise: str | None = None,
                 judge: str | None = None, correction: str = "bh") -> Comparison:
    """Compare run B with run A, metric by metric, paired by case (docs/compare.md); returns
    a :class:`~evalharness.compare.Comparison` whose ``gated_regressions`` lists the gated
    metrics that regressed significantly. ``correction``: ``"bh"`` (Benjamini–Hochberg over
    the metrics compared, the default) or ``"none"`` (each metric at ``alpha`` on its own).
    Runs with repeats are compared on each case's reduced values (docs/repeat.md).
    ``judge_pairwise``: also judge, per case and in both orders, which run's output better
    meets that criterion (``judge``: another judge backend than B's scenario's)."""
    kwargs: dict[str, Any] = {}
    if resamples is not None:
        kwargs["resamples"] = resamples
    if permutations is not None:
        kwargs["permutations"] = permutations
    return _compare_runs(Path(a), Path(b), alpha=alpha, metrics=list(metrics),
                         judge_pairwise=judge_pairwise, judge=judge, correction=correction,
                         **kwargs)
