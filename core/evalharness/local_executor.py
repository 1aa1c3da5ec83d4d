"""The ``local`` executor (the default): a run's work done in this process.

It implements the executor protocol of :mod:`evalharness.executors` as Ray's executor does —
the runner cannot tell them apart — with the guarantees of :mod:`evalharness.execution`: the
system is called in abandonable threads under its time limit, at most ``concurrency`` cases at
once; the answers are evaluated in batches of ``batch_size`` (or whatever arrived after a
quiet second) in worker threads, several at once when they wait on an LLM judge; each batch's
lines are handed back as soon as it is done. A stop (``stopped()`` true: the first Ctrl-C)
starts nothing new and evaluates what the system has already answered. A scenario without a
system replays its recorded traces.

It works in the driver's event loop (``arun``) on the driver's loaded scenario, system and
judge (the spec is :func:`~evalharness.executors.attach`-ed to them): nothing is loaded again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence

from evalharness.errors import RunError
from evalharness.execution import (
    END,
    STOP,
    batches_in_flight,
    call_system,
    evaluate_stream,
)
from evalharness.executors import (
    Emit,
    Work,
    WorkerSpec,
    attached,
    cases_of,
    recorded,
    results_of,
)

POLL_S = 0.05
"""How often ``stopped()`` is asked while work is under way."""


class LocalExecutor:
    """This process: threads for the system, batches evaluated in worker threads."""

    def __init__(self, address: str | None = None, *, flush_seconds: float = 1.0) -> None:
        self.flush_seconds = flush_seconds

    async def arun(self, spec: WorkerSpec, work: Sequence[Work], emit: Emit,
                   stopped: Callable[[], bool]) -> bool:
        """Do ``work`` in this event loop; ``emit(items, lines)`` per evaluated batch. Returns
        whether a stop was requested."""
        state = attached(spec)
        if state is None:
            raise RunError(f"{spec.path}: the local executor runs in the driver's process, "
                           "on the scenario the driver loaded (evalharness.executors.attach)")
        scenario = state.scenario
        items = list(work)
        cases = cases_of(state, items, spec.path)
        queue: asyncio.Queue = asyncio.Queue()
        producer = None
        if state.func is None:
            for n, case in enumerate(cases):
                queue.put_nowait((n, case, recorded(state, case)))
            queue.put_nowait(END)
        else:
            calls = [(n, case, state.options(w))
                     for n, (w, case) in enumerate(zip(items, cases, strict=True))]
            producer = asyncio.create_task(call_system(
                state.func, calls, spec.concurrency, queue,
                timeout_s=scenario.system.timeout_s))

        def evaluate(batch: list) -> list[str]:
            done = [items[n] for n, _, _ in batch]
            results = results_of(state, done, [case for _, case, _ in batch],
                                 [trace for _, _, trace in batch], warned=state.warned)
            return [result.to_line() for result in results]

        def write(batch: list, lines: list[str]) -> None:
            emit([items[n] for n, _, _ in batch], lines)

        watcher = asyncio.create_task(_watch(stopped, queue))
        try:
            stopped_early = await evaluate_stream(
                queue, evaluate=evaluate, write=write, batch_size=scenario.spec.batch_size,
                flush_seconds=self.flush_seconds, drain_on_stop=state.func is not None,
                in_flight=batches_in_flight(state.context.judge, scenario.spec.batch_size))
        finally:
            for task in (watcher, producer):
                if task is not None and not task.done():
                    task.cancel()
                    with contextlib.suppress(BaseException):
                        await task
        if producer is not None and producer.done() and not producer.cancelled() \
                and producer.exception() is not None:
            raise producer.exception()
        return stopped_early

    def run(self, spec: WorkerSpec, work: Sequence[Work], emit: Emit,
            stopped: Callable[[], bool]) -> bool:
        """:meth:`arun` for a caller with no event loop running in its thread."""
        return asyncio.run(self.arun(spec, work, emit, stopped))

    def close(self) -> None:
        """Nothing to end: the threads it used are daemons that end when idle."""


async def _watch(stopped: Callable[[], bool], queue: asyncio.Queue) -> None:
    """Put :data:`~evalharness.execution.STOP` on ``queue`` once ``stopped()`` is true."""
    while not stopped():
        await asyncio.sleep(POLL_S)
    queue.put_nowait(STOP)
