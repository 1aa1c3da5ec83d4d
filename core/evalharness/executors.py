"""Where a run's cases are executed: in this process (``local``, the default: the system in
abandonable threads, batches evaluated in worker threads; see :mod:`evalharness.execution`),
or spread over a Ray cluster (``ray``, ``pip install -e '.[ray]'``; docs/scale.md).

An executor is a registry entry like a judge backend (hook ``register_executors``), so a third
party can add another (Dask, a batch scheduler). A non-local executor gets the cases still to
run and a :class:`WorkerSpec` — what a worker needs to load the same scenario itself (its
path, extra plugins, the judge settings after the command line's overrides, the run folder) —
and hands back, as groups of cases finish, their results as ``results.jsonl`` lines. Only the
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
import dataclasses
import hashlib
import json
import zlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from evalharness.errors import InfrastructureError, RunError
from evalharness.judge.base import Embeddings, Judge, JudgeConfig, Judgment
from evalharness.models import Case, Trace

GROUP_SIZE = 16
"""Cases per task, on average: enough to pay a task's overhead, few enough to spread."""


@dataclass(frozen=True)
class Work:
    """One thing a worker runs: a case of the run, or — with ``oracle`` — an oracle rerun of
    a failed case, the system called with ``overrides`` (docs/bottleneck.md, "Oracle
    headroom") and only the evaluators the verdicts read."""

    case_id: str
    oracle: str | None = None
    overrides: dict[str, Any] | None = None

    @property
    def key(self) -> str:
        """Unique among a run's work: the case id, or ``oracle/case id`` for a rerun."""
        return self.case_id if self.oracle is None else f"{self.oracle}/{self.case_id}"


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
    shared_judge: bool = False
    """Whether the workers send their judge requests to one judge for the whole run (an LLM
    judge: one cache, one single flight, one concurrency, one set of per-minute limits and one
    cost ceiling) instead of judging on their own (the offline heuristic, CPU-bound, which is
    what the workers are for)."""
    spent: float = 0.0
    """What the run's judge had spent when the workers started (a resumed run's earlier
    part): the judge service counts it against ``max_cost``."""
    judge_service: str | None = None
    """The id of that judge's :class:`JudgeService`, set by the executor that started it: a
    worker loads the scenario again for another service (another run)."""

    @classmethod
    def of(cls, scenario, out_dir: Path, concurrency: int | None,
           database: Path | None = None, shared_judge: bool = False,
           spent: float = 0.0) -> WorkerSpec:
        extra = [str(p) for p in scenario.plugin_files[len(scenario.spec.plugins):]]
        return cls(str(Path(scenario.path).resolve()), tuple(extra),
                   scenario.spec.judge.model_dump(mode="json"), str(Path(out_dir).resolve()),
                   _digests(scenario), concurrency or scenario.spec.concurrency,
                   str(Path(database).resolve()) if database is not None else None,
                   shared_judge, spent)

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


def groups_of(items: Sequence[Case | Work], size: int = GROUP_SIZE) -> list[list[str]]:
    """The keys of ``items`` (a case's id, a :class:`Work`'s key) in groups of about
    ``size``, by :func:`group_of`; empty groups dropped, keys in the items' order within a
    group."""
    n = max(1, -(-len(items) // size))
    out: list[list[str]] = [[] for _ in range(n)]
    for item in items:
        key = item.id if isinstance(item, Case) else item.key
        out[group_of(key, n)].append(key)
    return [g for g in out if g]


def work_groups(work: Sequence[Work], size: int = GROUP_SIZE) -> list[list[Work]]:
    """``work`` in the groups of :func:`groups_of`, as :class:`Work` items."""
    by_key = {w.key: w for w in work}
    return [[by_key[k] for k in keys] for keys in groups_of(work, size)]


# -- the worker's side ---------------------------------------------------------------------------

_STATES: dict[str, Any] = {}
"""Per worker process: the loaded scenario, system and context of each spec (loaded once)."""


@dataclass
class _State:
    scenario: Any
    func: Any
    context: Any
    by_id: dict[str, Case]


def _load(spec: WorkerSpec):
    """The driver's scenario, loaded here (checked to be made of the same files)."""
    from evalharness.judge.base import JudgeConfig
    from evalharness.scenario import load_scenario

    judge = JudgeConfig.model_validate(spec.judge)  # nested values as models (prices)
    scenario = load_scenario(spec.path, extra_plugins=list(spec.plugins),
                             judge_overrides={k: getattr(judge, k) for k in spec.judge})
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
        _STATES[key] = _State(scenario, func, context, {c.id: c for c in scenario.cases})
    return _STATES[key]


def run_group(spec: WorkerSpec, group: Sequence[str | Work], judge: Any = None) -> list[str]:
    """Run the system and the per-case evaluators on a group of cases (their ids, or
    :class:`Work` items — oracle reruns among them) in this process, and return their results
    as ``results.jsonl`` lines, in the group's order. What a worker task does; the local
    executor's guarantees hold inside it (the system under its time limit, in abandonable
    threads; ``sys.exit()`` a case's error). ``judge``: the run's :class:`JudgeService` (a
    Ray actor) when the workers share one judge."""
    from evalharness.evaluate import evaluate_batch
    from evalharness.prepare import PARAMETER
    from evalharness.verdicts import criteria_for

    state = _state(spec, judge)
    items = [w if isinstance(w, Work) else Work(w) for w in group]
    missing = [w.case_id for w in items if w.case_id not in state.by_id]
    if missing:
        raise RunError(f"{spec.path}: no case {missing[0]!r} in the scenario on this worker")
    cases = [state.by_id[w.case_id] for w in items]
    if state.func is None:
        none = "no recorded trace for this case in the traces file"
        traces = [state.scenario.traces.get(c.id) or Trace(case_id=c.id, error=none)
                  for c in cases]
    else:
        options = state.scenario.system.options
        calls = [(n, case, {**options, PARAMETER: w.overrides} if w.oracle else options)
                 for n, (w, case) in enumerate(zip(items, cases, strict=True))]
        traces = asyncio.run(_answer(state, calls, spec.concurrency))
    # an oracle rerun needs only what the verdicts read (as in a local run)
    only = criteria_for(state.scenario).needed() if any(w.oracle for w in items) else None
    results = evaluate_batch(state.scenario, state.context, list(zip(cases, traces,
                                                                      strict=True)),
                             warned=set(), only=only)
    lost = getattr(state.context.judge, "lost", None)
    if lost is not None:  # not the judgments' fault: the group fails, --resume reruns it
        _STATES.pop(spec.key(), None)
        raise InfrastructureError(lost)
    for result in results:
        result.warnings.extend(state.scenario.trace_notes.get(result.case.id, ()))
    return [result.to_line() for result in results]


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

    async def run_many(self, task, inputs: list, rounds_after: int = 0) -> list[Judgment]:
        return await self.judge.arun_many(task, inputs, rounds_after)

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

    async def arun_many(self, task, inputs, rounds_after: int = 0) -> list[Judgment]:
        inputs = list(inputs)
        try:
            return await self._service.run_many.remote(task, inputs, rounds_after)
        except Exception as exc:  # noqa: BLE001 - the judgments are errors, the group fails
            error = self.lost = self.lost or _service_error(exc)
            return [Judgment(task=task.id, rubric_version=task.version, backend=self.backend,
                             model=self.model, key=self.key(task, i), error=error)
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
