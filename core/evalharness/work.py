"""What an executor is given and hands back (the data of the executor protocol of
:mod:`evalharness.executors`): the :class:`Work` to do, the :class:`WorkerSpec` a worker loads
the run's scenario from, ``emit``, and the stable grouping of work by case id.

Below the executors and the oracle planning alike: a rerun is planned as :class:`Work` here
without reaching the machinery that does it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from evalharness.models import Case

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
    trace: str | None = None
    """A trace recorded elsewhere, as JSON (a monitor's queue): evaluated — reference-free
    metrics only — for a question-only case ``case_id`` asking ``question``, instead of the
    scenario's case and trace (docs/monitor.md, "A backlog on a Ray cluster")."""
    question: str | None = None
    repeat: int | None = None
    """Which repeat of the case (1, 2, …) in a run with ``--repeat N`` (docs/repeat.md): the
    system is called with it when it takes a ``repeat`` parameter, and the result records it."""

    @property
    def key(self) -> str:
        """Unique among a run's work: the case id, or ``oracle/case id`` for a rerun; then
        ``#repeat`` in a run with repeats."""
        key = self.case_id if self.oracle is None else f"{self.oracle}/{self.case_id}"
        return key if self.repeat is None else f"{key}#{self.repeat}"


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
    monitor: str | None = None
    """A MONITOR.yaml: the worker loads its scenario (with the monitor's ``evaluators:``)
    instead of ``path``'s, to evaluate the monitor's queued traces."""
    repeat: tuple[int, str] | None = None
    """The run's repeats, ``(n, judge)``, as the driver's scenario has them after the command
    line's ``--repeat``: a worker's evaluation of a repeat asks a ``fresh`` judge anew."""

    @classmethod
    def of(cls, scenario, out_dir: Path, concurrency: int | None,
           database: Path | None = None, shared_judge: bool = False,
           spent: float = 0.0, monitor: Path | None = None) -> WorkerSpec:
        extra = [str(p) for p in scenario.plugin_files[len(scenario.spec.plugins):]]
        return cls(str(Path(scenario.path).resolve()), tuple(extra),
                   scenario.spec.judge.model_dump(mode="json"), str(Path(out_dir).resolve()),
                   _digests(scenario), concurrency or scenario.spec.concurrency,
                   str(Path(database).resolve()) if database is not None else None,
                   shared_judge, spent,
                   monitor=str(Path(monitor).resolve()) if monitor is not None else None,
                   repeat=(scenario.spec.repeat.n, scenario.spec.repeat.judge)
                   if getattr(scenario.spec, "repeat", None) is not None else None)

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


Emit = Callable[[list, list[str]], None]
"""``emit(group, lines)``: a group of work done, and its ``results.jsonl`` lines."""
