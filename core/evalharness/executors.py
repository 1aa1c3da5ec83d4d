"""Where a run's cases are executed: in this process (``local``, the default: the system in
abandonable threads, batches evaluated in worker threads; see :mod:`evalharness.execution`),
or spread over a Ray cluster (``ray``, ``pip install -e '.[ray]'``; docs/scale.md).

An executor is a registry entry like a judge backend (hook ``register_executors``), so a third
party can add another (Dask, a batch scheduler). A non-local executor gets the cases still to
run and a :class:`WorkerSpec` — what a worker needs to load the same scenario itself (its
path, extra plugins, the judge settings after the command line's overrides, the run folder) —
and hands back, as groups of cases finish, their results as ``results.jsonl`` lines. Only the
driver writes the run folder (it holds the run lock), so a result is written once however
often a worker was retried, and ``--resume`` reruns exactly the cases without a line.

Work is split by case id: a stable hash of the id picks the group, so the same case lands in
the same group whatever the order or number of the other cases.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from evalharness.errors import RunError, UsageError
from evalharness.models import Case, CaseResult, Trace

GROUP_SIZE = 16
"""Cases per task, on average: enough to pay a task's overhead, few enough to spread."""


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker needs to load the driver's scenario on its own."""

    path: str
    plugins: tuple[str, ...]
    judge: dict[str, Any]
    out_dir: str
    inputs: tuple[str, ...]
    """The digests of every input file (the scenario, its data, the system's code), sorted:
    a worker that sees other files refuses to run."""
    concurrency: int
    database: str | None = None
    """The SQLite file the driver built or opened: workers read it, never build their own
    (several workers building one file at once would corrupt it)."""

    @classmethod
    def of(cls, scenario, out_dir: Path, concurrency: int | None,
           database: Path | None = None) -> WorkerSpec:
        extra = [str(p) for p in scenario.plugin_files[len(scenario.spec.plugins):]]
        return cls(str(Path(scenario.path).resolve()), tuple(extra),
                   scenario.spec.judge.model_dump(mode="json"), str(Path(out_dir).resolve()),
                   _digests(scenario), concurrency or scenario.spec.concurrency,
                   str(Path(database).resolve()) if database is not None else None)

    def key(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def _digests(scenario) -> tuple[str, ...]:
    # the values only: the keys are paths as given, relative to the driver's directory
    return tuple(sorted(str(v) for v in scenario.input_digests.values()))


def group_of(case_id: str, groups: int) -> int:
    """The group of a case: a stable hash of its id (not Python's salted ``hash``).

    >>> group_of("q001", 4) == group_of("q001", 4), 0 <= group_of("q001", 4) < 4
    (True, True)
    """
    digest = hashlib.sha256(case_id.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "little") % groups


def groups_of(cases: Sequence[Case], size: int = GROUP_SIZE) -> list[list[str]]:
    """The ids of ``cases`` in groups of about ``size``, by :func:`group_of`; empty groups
    dropped, ids in case order within a group."""
    n = max(1, -(-len(cases) // size))
    out: list[list[str]] = [[] for _ in range(n)]
    for case in cases:
        out[group_of(case.id, n)].append(case.id)
    return [g for g in out if g]


# -- the worker's side ---------------------------------------------------------------------------

_STATES: dict[str, Any] = {}
"""Per worker process: the loaded scenario, system and context of each spec (loaded once)."""


@dataclass
class _State:
    scenario: Any
    func: Any
    context: Any
    by_id: dict[str, Case]


def _state(spec: WorkerSpec) -> _State:
    key = spec.key()
    if key not in _STATES:
        from evalharness.judge.base import JudgeConfig
        from evalharness.runner import load_system, prepare_context
        from evalharness.scenario import load_scenario

        judge = JudgeConfig.model_validate(spec.judge)  # nested values as models (prices)
        scenario = load_scenario(spec.path, extra_plugins=list(spec.plugins),
                                 judge_overrides={k: getattr(judge, k) for k in spec.judge})
        if _digests(scenario) != spec.inputs:
            raise RunError(f"{spec.path}: this worker sees other inputs than the driver "
                           "(the scenario, its data or the system's code differ on this "
                           "machine); every worker must see the same files")
        if spec.database is not None and scenario.spec.database is not None:
            if not Path(spec.database).is_file():
                raise RunError(f"{spec.database}: the driver's database is not reachable "
                               "from this worker; put the run folder (--out) on storage "
                               "every node mounts at the same path, or give the scenario a "
                               "`database.path` they all can read")
            scenario = dataclasses.replace(scenario, database_path=Path(spec.database))
        func = load_system(scenario) if scenario.system is not None else None
        context = prepare_context(scenario, Path(spec.out_dir))
        _STATES[key] = _State(scenario, func, context, {c.id: c for c in scenario.cases})
    return _STATES[key]


def run_group(spec: WorkerSpec, ids: Sequence[str]) -> list[str]:
    """Run the system and the per-case evaluators on the cases ``ids`` (in this process),
    and return their results as ``results.jsonl`` lines, in the order of ``ids``. What a
    worker task does; the local executor's guarantees hold inside it (the system under its
    time limit, in abandonable threads; ``sys.exit()`` a case's error)."""
    from evalharness.evaluate import evaluate_batch

    state = _state(spec)
    missing = [i for i in ids if i not in state.by_id]
    if missing:
        raise RunError(f"{spec.path}: no case {missing[0]!r} in the scenario on this worker")
    cases = [state.by_id[i] for i in ids]
    if state.func is None:
        none = "no recorded trace for this case in the traces file"
        traces = [state.scenario.traces.get(c.id) or Trace(case_id=c.id, error=none)
                  for c in cases]
    else:
        traces = asyncio.run(_answer(state, cases, spec.concurrency))
    results = evaluate_batch(state.scenario, state.context, list(zip(cases, traces,
                                                                      strict=True)),
                             warned=set())
    for result in results:
        result.warnings.extend(state.scenario.trace_notes.get(result.case.id, ()))
    return [result.to_line() for result in results]


async def _answer(state: _State, cases: list[Case], concurrency: int) -> list[Trace]:
    from evalharness.execution import END, call_system

    queue: asyncio.Queue = asyncio.Queue()
    system = state.scenario.system
    await call_system(state.func, [(i, case, system.options) for i, case in enumerate(cases)],
                      concurrency, queue, timeout_s=system.timeout_s)
    traces: list[Trace | None] = [None] * len(cases)
    while True:
        item = queue.get_nowait()
        if item is END:
            break
        traces[item[0]] = item[2]
    return traces  # type: ignore[return-value]


# -- the driver's side ---------------------------------------------------------------------------

Emit = Callable[[list[str]], None]
"""Write these results.jsonl lines (called in the driver, one group at a time)."""
Failed = Callable[[list[str], str], list[str]]
"""The result lines of cases whose group failed for good (the reason as their error)."""


class RayExecutor:
    """Cases spread over a Ray cluster: one task per group of cases (a stable hash of the id
    picks the group), retried by Ray when its worker dies (``max_retries``); a group that
    still fails has each of its cases recorded as an error with the reason. The driver writes
    each group's lines as they arrive."""

    name = "ray"

    def __init__(self, address: str | None = None, *, group_size: int = GROUP_SIZE,
                 max_retries: int = 3) -> None:
        try:
            import ray
        except ImportError:
            raise UsageError("--executor ray needs Ray: pip install -e '.[ray]' (or "
                             "pip install 'evalharness[ray]')") from None
        self.ray = ray
        self.address = address
        self.group_size = group_size
        self.max_retries = max_retries
        self._started = False

    def start(self) -> None:
        """Connect to the cluster (``address``), or start a local Ray instance; a Ray
        already initialised in this process (a test's, a notebook's) is used as it is."""
        ray = self.ray
        if ray.is_initialized():
            return
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        try:
            # no address: a new local instance ("local"), never a cluster that `ray start`
            # left registered on this machine (Ray would otherwise join it, or wait for it)
            ray.init(address=self.address or "local", include_dashboard=False,
                     log_to_driver=False, ignore_reinit_error=True)
        except Exception as exc:  # a wrong address, a cluster that is down
            raise UsageError(f"--executor ray: cannot reach the Ray cluster at "
                             f"{self.address or 'a new local instance'} "
                             f"({type(exc).__name__}: {str(exc).splitlines()[0]}); start it "
                             "with `ray start --head`, or give --address auto / "
                             "ray://HOST:PORT") from None
        self._started = True

    def close(self) -> None:
        if self._started:
            self.ray.shutdown()
            self._started = False

    def run(self, spec: WorkerSpec, cases: Sequence[Case], emit: Emit, failed: Failed,
            stopped: Callable[[], bool]) -> bool:
        """Run ``cases`` on the cluster; ``emit`` each group's lines as it finishes. Returns
        whether a stop was requested (the groups not finished are cancelled; ``--resume``
        runs their cases)."""
        ray = self.ray
        self.start()
        task = ray.remote(max_retries=self.max_retries, retry_exceptions=False)(run_group)
        spec_ref = ray.put(spec)
        pending = {task.remote(spec_ref, ids): ids for ids in groups_of(cases, self.group_size)}
        while pending:
            if stopped():
                for ref in pending:
                    ray.cancel(ref, force=True)
                return True
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
            for ref in ready:
                ids = pending.pop(ref)
                try:
                    lines = ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - the cases are errors, the run goes on
                    lines = failed(ids, _reason(exc))
                emit(lines)
        return False


def _reason(exc: BaseException) -> str:
    """A failed task as one line: the worker's own exception when Ray wraps it."""
    cause = getattr(exc, "cause", None)
    shown = cause if isinstance(cause, BaseException) else exc
    text = str(shown).strip().splitlines()
    return (f"the worker failed on this case's group: {type(shown).__name__}: "
            f"{text[-1] if text else ''}")[:500]


def local_failures(scenario, context, ids: list[str], reason: str) -> list[str]:
    """Result lines of cases whose group failed for good: each an error case (its trace's
    error says why), evaluated in the driver as a system failure is."""
    from evalharness.evaluate import evaluate_batch

    by_id = {c.id: c for c in scenario.cases}
    pairs = [(by_id[i], Trace(case_id=i, error=reason)) for i in ids]
    results: list[CaseResult] = evaluate_batch(scenario, context, pairs, warned=set())
    return [r.to_line() for r in results]
