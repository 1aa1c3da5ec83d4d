"""The runner: obtain a trace per case, evaluate finished cases in batches, stream results.

``results.jsonl`` gets one complete line per case as soon as the case is evaluated, so an
interrupted run leaves a valid file and ``--resume`` continues it without losing or repeating a
case. The report is always computed from ``results.jsonl`` alone, in case order, so a resumed
run reports exactly what an uninterrupted one does.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import importlib.util
import inspect
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evalharness import oracle
from evalharness.context import Database, EvalContext, build_sqlite, load_corpus
from evalharness.errors import InputError, RunError, ScenarioError
from evalharness.evaluate import evaluate_batch
from evalharness.importing import import_file
from evalharness.models import Case, CaseResult, HeadroomRecord, Trace
from evalharness.scenario import Scenario

RESULTS = "results.jsonl"
MANIFEST = "run.json"


@dataclass(repr=False)
class RunOutcome:
    """What a finished (or interrupted) run leaves behind."""

    out_dir: Path
    results: list[CaseResult]
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

    def __repr__(self) -> str:
        # Short on purpose: asyncio formats the finished run's task, result included, when
        # it restores the SIGINT handler; a repr of every result took seconds and gigabytes.
        return (f"RunOutcome(out_dir={str(self.out_dir)!r}, results={len(self.results)}, "
                f"resumed={self.resumed}, interrupted={self.interrupted})")


class Progress:
    """Progress callbacks; the CLI passes one that draws a bar."""

    def start(self, total: int, done: int, label: str = "cases") -> None: ...

    def advance(self, n: int = 1) -> None: ...

    def stop(self) -> None: ...


def load_system(scenario: Scenario) -> Callable[..., Any]:
    """Import the system under test named in the scenario; errors name the scenario field."""
    spec = scenario.system
    assert spec is not None
    target, _, func_name = spec.callable.rpartition(":")
    where = f"{scenario.path}, field `system`"
    if target.endswith(".py"):
        try:
            module = import_file(scenario.base / target, "evalharness_system")
        except Exception as exc:
            raise ScenarioError(f"{where}: importing {target!r} failed: "
                                f"{type(exc).__name__}: {exc}") from exc
    else:
        base = str(scenario.base)
        if base not in sys.path:
            sys.path.insert(0, base)
        try:
            module = importlib.import_module(target)
        except Exception as exc:
            raise ScenarioError(f"{where}: cannot import module {target!r}: "
                                f"{type(exc).__name__}: {exc}. Use `package.module:function` "
                                "for an importable module or `path/file.py:function`") from exc
    func = getattr(module, func_name, None)
    if not callable(func):
        names = [n for n, v in vars(module).items() if callable(v) and not n.startswith("_")]
        raise ScenarioError(f"{where}: {target!r} has no function {func_name!r}; callables "
                            f"there: {', '.join(sorted(names)[:12]) or 'none'}")
    return func


def make_judge(scenario: Scenario):
    """The scenario's judge, from its registered backend (errors name the judge block)."""
    backend = scenario.host.judge_backend(scenario.spec.judge.backend)
    return backend.factory(scenario.spec.judge)


def prepare_context(scenario: Scenario, out_dir: Path, judge=None) -> EvalContext:
    """Build the database, load the corpus and (unless given) make the judge."""
    judge = judge if judge is not None else make_judge(scenario)
    database = None
    spec = scenario.spec.database
    if spec is not None:
        path = scenario.database_path
        if scenario.database_build is not None and (path is None or not path.is_file()):
            path = path or out_dir / "database.sqlite"
            build_sqlite(scenario.database_build, path)
        database = Database(path=path, engine=spec.engine, dialect=spec.dialect, dsn=spec.dsn)
    corpus = load_corpus(scenario.corpus_path) if scenario.corpus_path else {}
    return EvalContext(judge=judge, database=database, corpus=corpus,
                       pipeline=scenario.pipeline)


def read_results(path: Path, *, repair: bool = False) -> list[CaseResult]:
    """Read ``results.jsonl``. With ``repair``, drop a torn last line left by a kill.

    The file is streamed, never held whole in memory, and the strings of all results are
    shared: chunk texts, contexts, claims, reasons, SQL, keys repeat from case to case, and
    sharing them takes a third off the memory the results hold."""
    if not path.is_file():
        return []
    results: list[CaseResult] = []
    # No garbage collection while the results pile up: each collection would walk the objects
    # read so far (reading 10k results took five times as long), and reading creates no
    # reference cycles for it to find. Then everything goes straight to the oldest generation
    # (freeze + unfreeze), so the next young collections do not walk the results either.
    collecting = gc.isenabled()
    gc.disable()
    try:
        _read_into(results, path, repair)
    finally:
        gc.freeze()
        gc.unfreeze()
        if collecting:
            gc.enable()
    if repair:
        with open(path, "rb") as fh:
            data = fh.read()
        good_end = data.rfind(b"\n") + 1
        if good_end != len(data):
            with open(path, "r+b") as fh:
                fh.truncate(good_end)
    return results


def _read_into(results: list[CaseResult], path: Path, repair: bool) -> None:
    share = _Strings()
    with open(path, "rb") as fh:
        lineno = 0
        for raw in fh:
            lineno += 1
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                if repair and not raw.endswith(b"\n") and not fh.peek(1):
                    return  # a torn last line: a write cut short by a kill
                where = (f"{exc.msg} at column {exc.colno}"
                         if isinstance(exc, json.JSONDecodeError) else str(exc))
                raise InputError(f"{path}, line {lineno}: not valid JSON ({where}); each line "
                                 "must be one JSON object") from None
            if not isinstance(record, dict):
                raise InputError(f"{path}, line {lineno}: expected a JSON object, got "
                                 f"{type(record).__name__}")
            try:
                results.append(CaseResult.model_validate(share.dict(record)))
            except ValidationError as exc:
                raise InputError(f"{path}, line {lineno}: not a result record "
                                 f"({exc.error_count()} problems, first: "
                                 f"{exc.errors()[0]['msg']}); was this file written by "
                                 "evalharness?") from None


class _Strings:
    """Equal strings as one object: a JSON value rebuilt with every key and string shared.

    >>> share = _Strings()
    >>> a, b = share.dict({"text": "x" * 100}), share.dict({"text": "x" * 100})
    >>> a == b and a is not b and a["text"] is b["text"]
    True
    """

    def __init__(self) -> None:
        self._seen: dict[str, str] = {}

    def dict(self, value: dict) -> dict:
        one = self._seen.setdefault
        return {one(k, k): (one(v, v) if type(v) is str else self._any(v))
                for k, v in value.items()}

    def _any(self, value: Any) -> Any:
        kind = type(value)
        if kind is dict:
            return self.dict(value)
        if kind is list:
            one = self._seen.setdefault
            return [one(v, v) if type(v) is str else self._any(v) for v in value]
        return value


async def call_system(func, calls: list[tuple[Any, Case, dict[str, Any]]], concurrency: int,
                      queue: asyncio.Queue) -> None:
    """Call the system on each ``(tag, case, keyword arguments)``, at most ``concurrency`` at
    once, and put ``(tag, case, trace)`` on ``queue`` as each finishes (an exception becomes
    the trace's ``error``)."""
    semaphore = asyncio.Semaphore(concurrency)
    is_async = inspect.iscoroutinefunction(func)

    async def one(tag: Any, case: Case, kwargs: dict[str, Any]) -> None:
        async with semaphore:
            try:
                if is_async:
                    out = await func(case, **kwargs)
                else:
                    out = await asyncio.to_thread(func, case, **kwargs)
                trace = _as_trace(out, case)
            except Exception as exc:
                trace = Trace(case_id=case.id, error=f"{type(exc).__name__}: {exc}")
            await queue.put((tag, case, trace))

    await asyncio.gather(*(one(*c) for c in calls))


def _as_trace(out: Any, case: Case) -> Trace:
    if isinstance(out, dict):
        out = Trace.model_validate({"case_id": case.id, **out})
    if not isinstance(out, Trace):
        return Trace(case_id=case.id, error=f"the system returned {type(out).__name__}, "
                     "not a Trace (or a dict of one)")
    if out.case_id != case.id:
        return Trace(case_id=case.id, error=f"the system returned a trace for case "
                     f"{out.case_id!r} while answering {case.id!r}")
    return out


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
) -> RunOutcome:
    """Run the scenario into ``out_dir``; return every result (old and new) in case order.

    Then, with ``headroom`` (and the scenario's ``system.headroom``), when the system accepts
    ``overrides``, rerun the failed cases under each component's oracle
    (:mod:`evalharness.oracle`)."""
    with fewer_collections():
        return await _run(scenario, out_dir, concurrency=concurrency, resume=resume,
                          progress=progress, flush_seconds=flush_seconds, headroom=headroom)


async def _run(scenario: Scenario, out_dir: Path, *, concurrency: int | None, resume: bool,
               progress: Progress | None, flush_seconds: float, headroom: bool) -> RunOutcome:
    progress = progress or Progress()
    results_path = out_dir / RESULTS
    manifest_path = out_dir / MANIFEST
    func = load_system(scenario) if scenario.system is not None else None
    if not resume and results_path.is_file() and results_path.stat().st_size:
        raise RunError(f"{out_dir} already holds results ({RESULTS}); pass --resume to "
                       "continue that run, or choose another --out")
    judge = make_judge(scenario)  # a judge misconfiguration fails before anything is written
    out_dir.mkdir(parents=True, exist_ok=True)
    context = prepare_context(scenario, out_dir, judge)

    previous: list[CaseResult] = []
    if resume:
        if not manifest_path.is_file():
            raise RunError(f"{out_dir}: nothing to resume (no {MANIFEST}); run without "
                           "--resume to start")
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("inputs_sha256") != scenario.inputs_sha256:
            raise RunError(f"{out_dir} holds a run of a different version of the scenario "
                           f"({manifest.get('scenario')}): the scenario file or a file it names "
                           "(cases, traces, corpus, database script, system, plugins) changed "
                           "since. --resume continues only an unchanged scenario; choose another "
                           "--out to start afresh")
        previous = read_results(results_path, repair=True)
        started_at = manifest.get("started_at")
    else:
        started_at = datetime.now(UTC).isoformat(timespec="seconds")
        manifest_path.write_text(json.dumps({
            "scenario": str(scenario.path), "scenario_sha256": scenario.sha256,
            "inputs_sha256": scenario.inputs_sha256, "started_at": started_at}, indent=2))
        results_path.write_text("")

    known = {c.id for c in scenario.cases}
    done = {r.case.id for r in previous if r.case.id in known}
    pending = [c for c in scenario.cases if c.id not in done]
    progress.start(len(scenario.cases), len(done))
    t0 = time.perf_counter()
    interrupted = False
    warned: set[str] = set()

    queue: asyncio.Queue = asyncio.Queue()
    with open(results_path, "a", encoding="utf-8") as sink:

        def flush(buffer: list[tuple[Case, Trace]]) -> None:
            for result in evaluate_batch(scenario, context, buffer, warned=warned):
                sink.write(result.model_dump_json() + "\n")
            sink.flush()
            os.fsync(sink.fileno())
            progress.advance(len(buffer))
            buffer.clear()

        async def consume(expected: int) -> None:
            buffer: list[tuple[Case, Trace]] = []
            received = 0
            while received < expected:
                try:
                    item = await asyncio.wait_for(queue.get(), timeout=flush_seconds)
                except TimeoutError:
                    if buffer:
                        flush(buffer)
                    continue
                buffer.append(item[1:])
                received += 1
                if len(buffer) >= scenario.spec.batch_size:
                    flush(buffer)
            if buffer:
                flush(buffer)

        if func is None:
            missing = "no recorded trace for this case in the traces file"
            for case in pending:
                trace = scenario.traces.get(case.id) or Trace(case_id=case.id, error=missing)
                queue.put_nowait((None, case, trace))
            producer = None
        else:
            options = scenario.system.options
            producer = asyncio.create_task(call_system(
                func, [(None, case, options) for case in pending],
                concurrency or scenario.spec.concurrency, queue))
        try:
            await consume(len(pending))
            if producer is not None:
                await producer
        except (KeyboardInterrupt, asyncio.CancelledError):
            interrupted = True
            if producer is not None:
                producer.cancel()
                with contextlib.suppress(BaseException):
                    await producer
        finally:
            progress.stop()

    results = read_results(results_path)
    order = {c.id: i for i, c in enumerate(scenario.cases)}
    results = sorted((r for r in results if r.case.id in order), key=lambda r: order[r.case.id])
    outcome = RunOutcome(out_dir=out_dir, results=results, context=context,
                         started_at=started_at, duration_s=time.perf_counter() - t0,
                         resumed=len(done), interrupted=interrupted)
    try:
        outcome.headroom_note = _no_headroom(scenario, func, headroom, interrupted)
        if outcome.headroom_note is None:
            try:
                outcome.oracles, outcome.headroom = await oracle.run_headroom(
                    scenario, context, func, results, out_dir,
                    concurrency=concurrency or scenario.spec.concurrency, progress=progress,
                    call_system=call_system, limit=oracle.limit_of(scenario.system.headroom))
            except (KeyboardInterrupt, asyncio.CancelledError):
                outcome.interrupted = True
                outcome.headroom_note = ("interrupted while rerunning failed cases with "
                                         "oracles; --resume continues")
            except Exception as exc:  # the run's results stand; the report says what failed
                outcome.oracles, outcome.headroom = [], None
                outcome.headroom_note = (f"the oracle reruns failed ({type(exc).__name__}: "
                                         f"{exc}); the run's own results are complete")
                print(f"warning: {outcome.headroom_note}", file=sys.stderr)
    finally:
        if context.judge is not None:
            context.judge.close()
    outcome.duration_s = time.perf_counter() - t0
    return outcome


def _no_headroom(scenario: Scenario, func: Any, wanted: bool, interrupted: bool) -> str | None:
    """Why the run gets no oracle headroom, or ``None`` when it does."""
    if interrupted:
        return "the run was interrupted before every case was evaluated"
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
