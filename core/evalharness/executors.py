"""The executor protocol, and the workers' side of it: where a run's cases are executed.

Every run hands its work to an executor — the same object protocol for all of them, so the
runner has one path (docs/architecture.md):

* ``local`` (:class:`evalharness.local_executor.LocalExecutor`, the default): this process —
  the system in abandonable threads, batches evaluated in worker threads as the answers come
  (:mod:`evalharness.execution`);
* ``ray`` (:mod:`evalharness.ray_executor`, ``pip install -e '.[ray]'``; docs/scale.md): a
  Ray cluster;
* any executor a plugin registers (hook ``register_executors``: Dask, a batch scheduler).

An executor has ``run(spec, work, emit, stopped) -> bool`` (called in a thread of its own) or
``async arun(spec, work, emit, stopped) -> bool`` (awaited in the driver's event loop: the
local one), and ``close()``; :func:`execute` calls whichever it has. It gets the :class:`Work`
still to do — the run's cases, then, in a second call, the oracle reruns of the failed ones —
and a :class:`WorkerSpec`, what a worker needs to load the same scenario itself (its path,
extra plugins, the judge settings after the command line's overrides, the run folder); in the
driver's own process the spec is :func:`attach`-ed to the driver's loaded scenario, system
and judge, so an in-process executor loads nothing again. It hands back, as groups finish,
their results as ``results.jsonl`` lines (``emit(group, lines)``), each made by
:func:`results_of`: the metrics (:mod:`evalharness.scoring`), then the verdicts and the
attribution (:mod:`evalharness.verdicts`) — the one place a run's results get them. Only the
driver writes the run folder (it holds the run lock), so a result is written once however
often a worker was retried, and ``--resume`` reruns exactly the cases without a line. When
the machinery fails (a worker, raylet, node or the whole cluster dies) the executor raises
:class:`~evalharness.errors.InfrastructureError`: the cases it did not finish get no line,
never an error result.

Work is split by case id: a stable hash of the id picks the group, so the same case lands in
the same group whatever the order or number of the other cases.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import json
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalharness.errors import InfrastructureError, RunError
from evalharness.judge.base import Embeddings, Judge, JudgeConfig, Judgment
from evalharness.models import Case, CaseResult, Trace
from evalharness.work import (  # noqa: F401 - the protocol's data, re-exported
    GROUP_SIZE,
    Emit,
    Work,
    WorkerSpec,
    _digests,
    group_of,
    groups_of,
    work_groups,
)

# -- the protocol ------------------------------------------------------------------------------


async def execute(executor: Any, spec: WorkerSpec, work: Sequence[Work], emit: Emit,
                  stopped: Callable[[], bool]) -> bool:
    """Have ``executor`` do ``work``: ``await arun(...)`` when it has one (it works in this
    event loop), else ``run(...)`` in a thread of its own. Returns whether it stopped early
    (``stopped()`` became true)."""
    arun = getattr(executor, "arun", None)
    if arun is not None and inspect.iscoroutinefunction(arun):
        return bool(await arun(spec, list(work), emit, stopped))
    return bool(await asyncio.to_thread(executor.run, spec, list(work), emit, stopped))


# -- the worker's side ---------------------------------------------------------------------------

_STATES: dict[str, Any] = {}
"""Per worker process: the loaded scenario, system and context of each spec (loaded once)."""


@dataclass
class _State:
    """A scenario loaded for running: its system, its context (judge, database, corpus), its
    cases by id, its verdict criteria (computed once) and the warnings already given."""

    scenario: Any
    func: Any
    context: Any
    by_id: dict[str, Case]
    criteria: Any = None
    warned: set[str] = dataclasses.field(default_factory=set)
    takes_repeat: bool = False
    """Whether the system declares a ``repeat`` parameter (docs/repeat.md)."""

    @classmethod
    def of(cls, scenario: Any, func: Any, context: Any) -> _State:
        from evalharness.prepare import REPEAT, takes_keyword
        from evalharness.verdicts import criteria_for

        return cls(scenario, func, context, {c.id: c for c in scenario.cases},
                   criteria_for(scenario), takes_repeat=takes_keyword(func, REPEAT))

    def options(self, work: Work) -> dict[str, Any]:
        """The keyword arguments the system is called with for ``work``: the scenario's
        ``system.options``, an oracle rerun's ``overrides``, and the repeat when the system
        takes it."""
        from evalharness.prepare import PARAMETER, REPEAT

        options = self.scenario.system.options
        if work.oracle:
            options = {**options, PARAMETER: work.overrides}
        if work.repeat is not None and self.takes_repeat:
            options = {**options, REPEAT: work.repeat}
        return options


_ATTACHED: dict[str, _State] = {}
"""The driver's own loaded state of each spec it runs (see :func:`attach`)."""


@contextlib.contextmanager
def attach(spec: WorkerSpec, scenario: Any, func: Any, context: Any) -> Iterator[_State]:
    """While the block lasts, ``spec`` means the driver's loaded ``scenario``, system and
    context in this process: an executor working here (the local one, or a plugin's
    in-process executor calling :func:`run_group`) uses them instead of loading the scenario
    again. Workers in other processes load their own."""
    key = spec.key()
    state = _ATTACHED[key] = _State.of(scenario, func, context)
    try:
        yield state
    finally:
        _ATTACHED.pop(key, None)


def attached(spec: WorkerSpec) -> _State | None:
    """The driver's state :func:`attach`-ed to ``spec``, if this process is the driver."""
    return _ATTACHED.get(spec.key())


def _load(spec: WorkerSpec):
    """The driver's scenario, loaded here (checked to be made of the same files)."""
    from evalharness.judge.base import JudgeConfig
    from evalharness.scenario import load_scenario

    judge = JudgeConfig.model_validate(spec.judge)  # nested values as models (prices)
    if spec.monitor is not None:  # a monitor's queue: its scenario, with its evaluators
        from evalharness.monitor.config import load_monitor

        scenario = load_monitor(Path(spec.monitor)).scenario
    else:
        scenario = load_scenario(spec.path, extra_plugins=list(spec.plugins),
                                 judge_overrides={k: getattr(judge, k) for k in spec.judge})
    if spec.repeat is not None:  # the driver's --repeat
        from evalharness.scenario import with_repeat

        scenario = with_repeat(scenario, *spec.repeat)
    if _digests(scenario) != spec.inputs:
        raise RunError(f"{spec.path}: this worker sees other inputs than the driver "
                       "(the scenario, its data or the system's code differ on this "
                       "machine); every worker must see the same files")
    return scenario


MAX_STATES = 4
"""Scenarios a worker process keeps loaded (the most recent first out): a long-lived cluster
serves many runs."""


def _state(spec: WorkerSpec, judge: Any = None) -> _State:
    """The loaded scenario, system and context of ``spec`` in this process (loaded once per
    spec and judge service). ``judge``: the run's :class:`JudgeService`, when the workers
    share one."""
    key = spec.key()
    if key in _ATTACHED:
        return _ATTACHED[key]
    if key not in _STATES:
        from evalharness.prepare import load_system, prepare_context

        scenario = _load(spec)
        if spec.database is not None and scenario.spec.database is not None:
            if not Path(spec.database).is_file():
                raise RunError(f"{spec.database}: the driver's database is not reachable "
                               "from this worker; put the run folder (--out) on storage "
                               "every node mounts at the same path, or give the scenario a "
                               "`database.path` they all can read")
            scenario = dataclasses.replace(scenario, database_path=Path(spec.database))
        func = load_system(scenario) if scenario.system is not None else None
        shared = ClusterJudge(scenario.spec.judge, judge) if judge is not None else None
        context = prepare_context(scenario, Path(spec.out_dir), shared)
        while len(_STATES) >= MAX_STATES:
            _STATES.pop(next(iter(_STATES))).context.judge.close()
        _STATES[key] = _State.of(scenario, func, context)
    return _STATES[key]


def run_group(spec: WorkerSpec, group: Sequence[str | Work], judge: Any = None) -> list[str]:
    """Run the system and the per-case evaluators on a group of cases (their ids, or
    :class:`Work` items — oracle reruns among them) in this process, and return their results
    as ``results.jsonl`` lines, in the group's order. What a worker task does; the local
    executor's guarantees hold inside it (the system under its time limit, in abandonable
    threads; ``sys.exit()`` a case's error). ``judge``: the run's :class:`JudgeService` (a
    Ray actor) when the workers share one judge."""
    state = _state(spec, judge)
    items = [w if isinstance(w, Work) else Work(w) for w in group]
    if any(w.trace is not None for w in items):  # a monitor's queued traces
        return [r.to_line() for r in monitor_results(state, items)]
    cases = cases_of(state, items, spec.path)
    if state.func is None:
        traces = [recorded(state, case) for case in cases]
    else:
        calls = [(n, case, state.options(w))
                 for n, (w, case) in enumerate(zip(items, cases, strict=True))]
        traces = asyncio.run(_answer(state, calls, spec.concurrency))
    results = results_of(state, items, cases, traces, warned=set())
    lost = getattr(state.context.judge, "lost", None)
    if lost is not None:  # not the judgments' fault: the group fails, --resume reruns it
        _STATES.pop(spec.key(), None)
        raise InfrastructureError(lost)
    return [result.to_line() for result in results]


def monitor_results(state: _State, items: Sequence[Work]) -> list[CaseResult]:
    """Work carrying recorded traces (a monitor's queue): evaluated as the monitor evaluates
    in its own process (:func:`evalharness.monitor.evaluate.results_for`)."""
    from evalharness.monitor.evaluate import results_for

    if any(w.trace is None for w in items):
        raise RunError("a group mixes a monitor's traces with a scenario's cases")
    return results_for(state.scenario, state.context,
                       [(w.case_id, Trace.model_validate_json(w.trace), w.question)
                        for w in items], warned=state.warned)


def cases_of(state: _State, items: Sequence[Work], path: str) -> list[Case]:
    """The cases of ``items`` (a :class:`~evalharness.errors.RunError` for an unknown id)."""
    missing = [w.case_id for w in items if w.case_id not in state.by_id]
    if missing:
        raise RunError(f"{path}: no case {missing[0]!r} in the scenario on this worker")
    return [state.by_id[w.case_id] for w in items]


NO_TRACE = "no recorded trace for this case in the traces file"


def recorded(state: _State, case: Case) -> Trace:
    """The recorded trace of ``case`` (a scenario without a system), or an error trace."""
    return state.scenario.traces.get(case.id) or Trace(case_id=case.id, error=NO_TRACE)


def results_of(state: _State, items: Sequence[Work], cases: Sequence[Case],
               traces: Sequence[Trace], *, warned: set[str]) -> list[CaseResult]:
    """The results of finished work, as every executor makes them: the metrics
    (:func:`~evalharness.scoring.evaluate_batch`; for oracle reruns only those the verdicts
    read, the rest would cost judge requests for nothing), then each case's verdicts and
    attribution (:func:`~evalharness.verdicts.apply`, with the criteria computed once per
    run) — the one place a run's results get them — and how recorded spans were mapped,
    where it was not plain."""
    from evalharness import verdicts
    from evalharness.judge.base import SALT
    from evalharness.scoring import evaluate_batch

    only = state.criteria.needed() if any(w.oracle for w in items) else None
    repeat = state.scenario.spec.repeat
    fresh = repeat is not None and repeat.judge == "fresh"
    pairs = list(zip(cases, traces, strict=True))
    # a fresh judge per repeat: each repeat's judgments evaluated under its own cache salt
    parts = ([[i for i, w in enumerate(items) if w.repeat == r]
              for r in dict.fromkeys(w.repeat for w in items)] if fresh
             else [list(range(len(items)))])
    results: list[CaseResult | None] = [None] * len(items)
    for part in parts:
        salt = f"repeat {items[part[0]].repeat}" if fresh else None
        token = SALT.set(salt)
        try:
            done = evaluate_batch(state.scenario, state.context, [pairs[i] for i in part],
                                  warned=warned, only=only)
        finally:
            SALT.reset(token)
        for i, result in zip(part, done, strict=True):
            result.repeat = items[i].repeat
            results[i] = result
    finished: list[CaseResult] = results  # type: ignore[assignment]
    verdicts.apply(None, finished, state.criteria)
    for result in finished:
        result.warnings.extend(state.scenario.trace_notes.get(result.case.id, ()))
    return finished


def packed(spec: WorkerSpec, group: Sequence[str | Work], judge: Any = None) -> bytes:
    """:func:`run_group`'s lines, compressed: what a Ray task returns. Small enough to come
    back inline with the task's reply rather than through the object store — the driver then
    never uses its node's object store, whose loss (the raylet dying) makes Ray end the
    driver's process at its next use, with no report. The spec comes the same way, not
    ``ray.put``."""
    return zlib.compress(json.dumps(run_group(spec, group, judge)).encode("utf-8"), 1)


def unpacked(packed: bytes) -> list[str]:
    """
    >>> unpacked(zlib.compress(json.dumps(["{}"]).encode()))
    ['{}']
    """
    return json.loads(zlib.decompress(packed).decode("utf-8"))


async def _answer(state: _State, calls: list[tuple[int, Case, dict]], concurrency: int
                  ) -> list[Trace]:
    from evalharness.execution import END, call_system

    queue: asyncio.Queue = asyncio.Queue()
    await call_system(state.func, calls, concurrency, queue,
                      timeout_s=state.scenario.system.timeout_s)
    traces: list[Trace | None] = [None] * len(calls)
    while True:
        item = queue.get_nowait()
        if item is END:
            break
        traces[item[0]] = item[2]
    return traces  # type: ignore[return-value]


# -- one judge for the whole cluster ------------------------------------------------------------


class JudgeService:
    """The run's LLM judge, for every worker of the cluster: a Ray actor (async, on the
    driver's node, so it reads and writes the same judge cache file as a local run) holding
    the HTTP clients. Every worker's requests go through it, so one judge's machinery holds
    for the whole run: the content-addressed cache (a rerun, local or on the cluster, makes
    no request), single flight (two workers asking the same judgment at once pay once), the
    ``concurrency`` limit, the per-minute limits and the ``max_cost`` ceiling
    (:mod:`evalharness.judge.limits`).

    One actor, not several: its event loop only waits on the endpoint, and one actor keeps
    one cache handle, one table of requests in flight and one set of limits without a
    protocol between actors. ``benchmarks/scale.py --executor ray --judge-cases N`` measures
    what it serves."""

    def __init__(self, spec: WorkerSpec) -> None:
        from evalharness.prepare import make_judge

        self.judge = make_judge(_load(spec))
        self.judge.limits.add_spent(spec.spent)

    def identity(self) -> dict[str, Any]:
        return {**self.judge.identity(), "cacheable": self.judge.cacheable}

    async def run_many(self, task, inputs: list, rounds_after: int = 0,
                       salt: str | None = None) -> list[Judgment]:
        return await self.judge.arun_many(task, inputs, rounds_after, salt=salt)

    async def embed_many(self, groups: list[list[str]]) -> list[Embeddings]:
        return await self.judge.aembed_many(groups)

    def summary(self) -> dict[str, Any]:
        """What the limits did (cost spent, requests refused, seconds waited) and the judge's
        warnings."""
        return {"limits": self.judge.limits.summary(), "warnings": list(self.judge.warnings)}

    def close(self) -> None:
        self.judge.close()


class ClusterJudge(Judge):
    """A worker's judge when the run has a :class:`JudgeService`: the same identity as the
    driver's judge; every judgment and embedding is asked of the service. The service's own
    answers (an endpoint's error among them) are the judgments; a service that cannot be
    reached (its actor died) makes the judgments errors and sets :attr:`lost`, and
    :func:`run_group` then fails the group instead of returning results that say so."""

    def __init__(self, config: JudgeConfig, service: Any) -> None:
        super().__init__(config.model_copy(update={"cache_mode": "off"}))  # the service's
        self._service = service
        self.lost: str | None = None
        """Why the service could not be reached, once it could not."""
        self._identity = _get(service.identity.remote())
        self.backend = self._identity["backend"]
        self.is_llm = bool(self._identity["llm"])
        self.cacheable = False  # cached and single-flighted by the service, not here

    @property
    def model(self) -> str | None:
        return self._identity["model"]

    @property
    def embedding_model(self) -> str | None:
        return self._identity["embedding_model"]

    def identity(self) -> dict[str, Any]:
        return {k: v for k, v in self._identity.items() if k != "cacheable"}

    def label(self) -> str:
        return self._identity["label"]

    async def arun_many(self, task, inputs, rounds_after: int = 0,
                        salt: str | None = None) -> list[Judgment]:
        inputs = list(inputs)
        try:
            return await self._service.run_many.remote(task, inputs, rounds_after, salt)
        except Exception as exc:  # noqa: BLE001 - the judgments are errors, the group fails
            error = self.lost = self.lost or _service_error(exc)
            return [Judgment(task=task.id, rubric_version=task.version, backend=self.backend,
                             model=self.model, key=self.key(task, i, salt), error=error)
                    for i in inputs]

    async def aembed_many(self, groups) -> list[Embeddings]:
        groups = [list(g) for g in groups]
        try:
            return await self._service.embed_many.remote(groups)
        except Exception as exc:  # noqa: BLE001 - the embeddings are errors, the group fails
            error = self.lost = self.lost or _service_error(exc)
            return [Embeddings(None, error=error, backend=self.backend,
                               model=self.embedding_model, texts=len(g)) for g in groups]


def _get(ref: Any) -> Any:
    import ray

    return ray.get(ref)


def _service_error(exc: BaseException) -> str:
    return (f"the run's judge service (a Ray actor on the driver's node) could not be reached "
            f"({type(exc).__name__}: "
            f"{str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}); the judgments "
            "already made come from the cache when the run continues")[:500]
