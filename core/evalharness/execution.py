"""Where cases run: the system under a time limit in abandonable threads, finished cases
evaluated in batches (several at once when they wait on an LLM judge), and the stop signal.

The runner and the oracle reruns share this machinery, so both get the same guarantees:

* a call into user code (the system, an evaluator) runs in a *daemon* thread, so a call that
  hangs can be abandoned and never keeps the process alive; ``sys.exit()`` in user code is
  recorded as that case's error (:class:`~evalharness.errors.Escaped`), never the run's end;
* the system gets ``timeout_s`` per case (``system.timeout_s``); past it, the case's trace is
  an error and the run goes on;
* batches are evaluated in worker threads, at most ``in_flight`` at once, and each batch's
  results are written by the event loop's thread as soon as it completes;
* the first Ctrl-C (or SIGTERM) stops starting anything new: the batches being evaluated and
  the cases the system has already answered are evaluated and saved; the second ends the
  process at once (exit 130). Either way ``--resume`` continues.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import inspect
import math
import os
import queue
import signal
import threading
from collections.abc import Callable, Sequence
from typing import Any

from evalharness.errors import USER_CODE_ERRORS, Escaped, describe, user_traceback
from evalharness.exitcodes import INTERRUPTED as EXIT_INTERRUPTED
from evalharness.models import Case, Trace

# --------------------------------------------------------------------------------------------
# Abandonable threads
# --------------------------------------------------------------------------------------------


def start_daemon(func: Callable[..., Any], /, *args: Any, **kwargs: Any
                 ) -> concurrent.futures.Future:
    """Run ``func(*args, **kwargs)`` in a daemon thread (with the caller's context
    variables) and return its future. A ``BaseException`` that is not an ``Exception``
    (``sys.exit()``) comes back as :class:`Escaped`.

    Unlike ``ThreadPoolExecutor`` (whose threads are joined at exit), a daemon thread never
    keeps the process alive: a call that hangs can be abandoned. Idle threads are reused (a
    new thread per call cost about a millisecond of a run's time per case); a thread stuck in
    an abandoned call simply stays busy, and another serves the next call.

    >>> start_daemon(sum, [1, 2, 3]).result()
    6
    >>> import sys
    >>> start_daemon(sys.exit, 3).exception()
    Escaped('SystemExit: the code called sys.exit(3)')
    """
    future: concurrent.futures.Future = concurrent.futures.Future()
    _JOBS.put((future, contextvars.copy_context(), func, args, kwargs))
    if not _IDLE.acquire(blocking=False):  # no idle thread took the job: start one
        threading.Thread(target=_worker, name="evalharness-worker", daemon=True).start()
    return future


_JOBS: queue.SimpleQueue = queue.SimpleQueue()
_IDLE = threading.Semaphore(0)
"""One token per idle worker thread (as ``ThreadPoolExecutor`` counts them)."""
IDLE_EXIT_S = 30.0
"""Seconds an idle worker thread waits for work before it ends."""


def _worker() -> None:
    while True:
        try:
            future, context, func, args, kwargs = _JOBS.get(timeout=IDLE_EXIT_S)
        except queue.Empty:
            if _IDLE.acquire(blocking=False):  # nobody counts on this thread: end it
                return
            continue
        if future.set_running_or_notify_cancel():
            try:
                result = context.run(func, *args, **kwargs)
            except Exception as exc:
                future.set_exception(exc)
            except BaseException as exc:  # noqa: BLE001 - carried to the caller as an error
                future.set_exception(Escaped(exc))
            else:
                future.set_result(result)
        del future, context, func, args, kwargs
        _IDLE.release()


async def in_thread(func: Callable[..., Any], /, *args: Any, timeout_s: float | None = None,
                    **kwargs: Any) -> Any:
    """Await ``func(*args, **kwargs)`` run in a daemon thread; past ``timeout_s`` raise
    :class:`CallTimeout` and abandon the thread (it finishes, or not, on its own)."""
    future = asyncio.wrap_future(start_daemon(func, *args, **kwargs))
    try:
        done, _ = await asyncio.wait({future}, timeout=timeout_s)
        if not done:
            raise CallTimeout(timeout_s)
        return future.result()
    finally:
        if not future.done():
            future.cancel()  # detach: the thread's late result is dropped, not delivered


class CallTimeout(Exception):  # noqa: N818 - named for what happened
    """A call into user code did not return within its time limit and was abandoned."""

    def __init__(self, seconds: float | None) -> None:
        super().__init__(f"no answer within {seconds:g} s")
        self.seconds = seconds


# --------------------------------------------------------------------------------------------
# The system under test
# --------------------------------------------------------------------------------------------


async def call_system(func: Callable[..., Any], calls: Sequence[tuple[Any, Case, dict]],
                      concurrency: int, queue: asyncio.Queue, *,
                      timeout_s: float | None = None) -> None:
    """Call the system on each ``(tag, case, keyword arguments)``, at most ``concurrency`` at
    once, and put ``(tag, case, trace)`` on ``queue`` as each finishes: an exception, a
    ``sys.exit()`` or a call past ``timeout_s`` becomes the trace's ``error``. Then put
    :data:`END` (also when cancelled), which ends :func:`evaluate_stream`."""
    semaphore = asyncio.Semaphore(concurrency)
    is_async = inspect.iscoroutinefunction(func)

    async def one(tag: Any, case: Case, kwargs: dict[str, Any]) -> None:
        async with semaphore:
            trace = await answer(func, case, kwargs, is_async=is_async, timeout_s=timeout_s)
            await queue.put((tag, case, trace))

    try:
        await asyncio.gather(*(one(*c) for c in calls))
    finally:
        queue.put_nowait(END)


async def answer(func: Callable[..., Any], case: Case, kwargs: dict[str, Any], *,
                 is_async: bool, timeout_s: float | None) -> Trace:
    """The system's trace for one case; never raises for anything the system does."""
    try:
        if is_async:
            limit = asyncio.timeout(timeout_s)
            try:
                async with limit:
                    out = await func(case, **kwargs)
            except TimeoutError:
                if not limit.expired():
                    raise
                raise CallTimeout(timeout_s) from None
        else:
            out = await in_thread(func, case, timeout_s=timeout_s, **kwargs)
    except CallTimeout:
        return Trace(case_id=case.id, error=f"TimeoutError: the system did not answer within "
                     f"system.timeout_s = {timeout_s:g} s; the call was abandoned")
    except (KeyboardInterrupt, asyncio.CancelledError):
        raise
    except USER_CODE_ERRORS as exc:
        return Trace(case_id=case.id, error=describe(exc), traceback=user_traceback(exc))
    try:
        return as_trace(out, case)
    except USER_CODE_ERRORS as exc:  # what it returned is no trace: the message says why
        return Trace(case_id=case.id, error=describe(exc))


def as_trace(out: Any, case: Case) -> Trace:
    """What the system returned, as the case's :class:`Trace` (a dict is validated)."""
    if isinstance(out, dict):
        out = Trace.model_validate({"case_id": case.id, **out})
    if not isinstance(out, Trace):
        return Trace(case_id=case.id, error=f"the system returned {type(out).__name__}, "
                     "not a Trace (or a dict of one)")
    if out.case_id != case.id:
        return Trace(case_id=case.id, error=f"the system returned a trace for case "
                     f"{out.case_id!r} while answering {case.id!r}")
    return out


# --------------------------------------------------------------------------------------------
# Batches in flight
# --------------------------------------------------------------------------------------------

END = object()
"""Put on the queue when the source of traces is exhausted."""
STOP = object()
"""Put on the queue when a stop was requested."""


def batches_in_flight(judge: Any, batch_size: int) -> int:
    """How many batches are evaluated at once: one when nothing waits on an LLM judge (the
    work is CPU-bound and threads would only contend), else enough that the judge's
    concurrency stays filled while a batch's last judgments finish — about twice the judge's
    concurrency in cases, and never fewer than two batches.

    >>> class Llm: is_llm = True; config = type("C", (), {"concurrency": 64})
    >>> batches_in_flight(None, 32), batches_in_flight(Llm, 32), batches_in_flight(Llm, 512)
    (1, 5, 2)
    """
    if judge is None or not getattr(judge, "is_llm", False):
        return 1
    concurrency = getattr(getattr(judge, "config", None), "concurrency", 8)
    return max(2, math.ceil(2 * concurrency / batch_size) + 1)


async def evaluate_stream(queue: asyncio.Queue, *, evaluate: Callable[[list], list],
                          write: Callable[[list, list], None], batch_size: int,
                          flush_seconds: float, in_flight: int, drain_on_stop: bool) -> bool:
    """Gather ``(tag, case, trace)`` items from ``queue`` into batches of ``batch_size`` (or
    whatever arrived after ``flush_seconds`` without a new one), evaluate each batch with
    ``evaluate(batch)`` in a daemon thread — at most ``in_flight`` at once — and hand
    ``(batch, results)`` to ``write`` in the loop's thread as each completes.

    Ends at :data:`END`, or at :data:`STOP` (then returns ``True``): the batches in flight
    finish; with ``drain_on_stop`` the items already queued (answers the system has already
    paid for) are evaluated too. An exception from ``evaluate`` or ``write`` ends the stream
    and is raised once the other batches in flight have finished."""
    slots = asyncio.Semaphore(in_flight)
    tasks: set[asyncio.Task] = set()
    failures: list[BaseException] = []
    buffer: list = []

    async def run_batch(batch: list) -> None:
        try:
            results = await in_thread(evaluate, batch)
            write(batch, results)
        except BaseException as exc:  # noqa: BLE001 - raised by the stream below
            failures.append(exc)
            queue.put_nowait(STOP)
        finally:
            slots.release()

    async def dispatch() -> None:
        nonlocal buffer
        if not buffer or failures:
            return
        batch, buffer = buffer, []
        await slots.acquire()
        task = asyncio.create_task(run_batch(batch))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    stopped = False
    try:
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), timeout=flush_seconds)
            except TimeoutError:
                await dispatch()
                continue
            if item is END:
                break
            if item is STOP:
                stopped = True
                while drain_on_stop and not failures:
                    try:
                        more = queue.get_nowait()
                    except asyncio.QueueEmpty:
                        break
                    if more is not END and more is not STOP:
                        buffer.append(more)
                break
            buffer.append(item)
            if len(buffer) >= batch_size:
                await dispatch()
        left, buffer = buffer, []
        for start in range(0, len(left), batch_size):
            buffer = left[start:start + batch_size]
            await dispatch()
    finally:
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
    if failures:
        raise failures[0]
    return stopped


# --------------------------------------------------------------------------------------------
# Ctrl-C and SIGTERM
# --------------------------------------------------------------------------------------------


class StopSignal:
    """Ctrl-C and SIGTERM while a run lasts: the first asks the run to stop (see the module's
    docstring), the second ends the process at once with exit code 130.

    Installed only in the main thread (signal handlers live there); elsewhere it is inert and
    an interrupt is whatever the host program makes of it."""

    def __init__(self, hint: str = "") -> None:
        self.requested = False
        self.hint = hint
        self._callbacks: list[Callable[[], None]] = []
        self._previous: dict[int, Any] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def on_request(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` in the event loop's thread when a stop is requested (at once if
        it already was)."""
        self._callbacks.append(callback)
        if self.requested and self._loop is not None:
            self._loop.call_soon_threadsafe(callback)

    def __enter__(self) -> StopSignal:
        if threading.current_thread() is threading.main_thread():
            self._loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.getsignal(sig)
                signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            os.write(2, (f"\nstopped at once: every case evaluated so far is saved in "
                         f"results.jsonl{self.hint}\n").encode())
            os._exit(EXIT_INTERRUPTED)
        self.requested = True
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        os.write(2, (f"\n{name}: no new case starts; the cases already answered are being "
                     "evaluated and saved. Press Ctrl-C again to stop at once.\n").encode())
        if self._loop is not None:
            for callback in self._callbacks:
                self._loop.call_soon_threadsafe(callback)
