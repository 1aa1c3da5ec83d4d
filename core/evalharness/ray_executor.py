"""The Ray executor (``--executor ray``; ``pip install 'evalharness[ray]'``; docs/scale.md):
the driver's side. It connects to a cluster (or starts a local one bound to the loopback
interface), hands the workers groups of cases as Ray tasks (each runs
:func:`evalharness.executors.run_group`), starts the run's :class:`~evalharness.executors.
JudgeService` when the workers share one LLM judge, emits each group's results as they come
back, watches the cluster, and turns any failure of its machinery into
:class:`~evalharness.errors.InfrastructureError`. The protocol every executor follows, and the
workers' side, are in :mod:`evalharness.executors`, below this module.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import importlib.util
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from evalharness.addresses import is_loopback
from evalharness.errors import InfrastructureError, UsageError
from evalharness.executors import (
    GROUP_SIZE,
    JudgeService,
    Work,
    WorkerSpec,
    packed,
    unpacked,
    work_groups,
)

# -- the driver's side ---------------------------------------------------------------------------

Emit = Callable[[list[Work], list[str]], None]
"""Take a group's results (its work, and a ``results.jsonl`` line for each; called in the
driver, one group at a time)."""


class RayExecutor:
    """Cases spread over a Ray cluster: one task per group of cases (a stable hash of the id
    picks the group), retried by Ray when its worker dies (``max_retries``). The driver
    writes each group's lines as they arrive. A group that still fails — its worker, its
    node or the cluster died, or the task itself raised — stops the run with an
    :class:`~evalharness.errors.InfrastructureError`: its cases are no results (they have no
    line, so ``--resume`` runs them), and what completed is reported.

    :meth:`start` connects before the run folder is written: an address where no cluster
    answers is a :class:`~evalharness.errors.UsageError` within seconds. A local instance
    (no address) listens on 127.0.0.1 only, and :meth:`close` leaves none of its processes
    behind."""

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
        self._owner: _Owner | None = None
        """The thread holding this executor's Ray connection (:meth:`start` began it; it may
        still be connecting after Ctrl-C or a time-out)."""
        self._processes: list[Any] = []
        """The local instance's processes (psutil), when this executor started one."""
        self._gcs: tuple[str, int] | None = None
        """Where the cluster's GCS answers, watched while the driver waits."""
        self._lost = False
        """Whether the cluster was found gone (calls into Ray would wait on it)."""
        self._service: tuple[str, Any, str] | None = None
        self.service_summary: dict[str, Any] | None = None
        """What the run's judge service reported at the end (its limits, its warnings)."""

    def start(self) -> None:
        """Connect to the cluster (``address``: ``auto``, ``HOST:PORT`` or
        ``ray://HOST:PORT``) — after checking, within seconds, that something answers there —
        or start a local Ray instance bound to 127.0.0.1. A Ray already initialised in this
        process (a test's, a notebook's) is used as it is. Ctrl-C stops it at once."""
        ray = self.ray
        if self._started or ray.is_initialized():
            return
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        if self.address is None:
            # a new local instance ("local"), never a cluster that `ray start` left
            # registered on this machine (Ray would otherwise join it, or wait for it)
            self._owner = _Owner(ray, dict(address="local", include_dashboard=False,
                                           _node_ip_address=LOOPBACK), loopback=True)
            context = self._owner.join(START_TIMEOUT_S, "a new local Ray instance")
            self._processes = _ray_processes()
        else:
            target, loopback = _reachable(self.address)
            self._owner = _Owner(ray, dict(address=target), loopback=loopback)
            context = self._owner.join(CONNECT_TIMEOUT_S, f"the Ray cluster at {target}")
        self._started = True
        gcs = getattr(context, "address_info", {}).get("gcs_address") or ""
        host, _, port = gcs.rpartition(":")
        self._gcs = (host.strip("[]"), int(port)) if host and port.isdigit() else None

    def close(self) -> None:
        """Stop the judge service and leave the cluster; a local instance is shut down, and
        its processes that outlive Ray's own shutdown (its agents linger a minute) are
        ended."""
        if self._lost:  # nothing to ask a cluster that is gone; leave without waiting on it
            self._service = None
            atexit.unregister(self.ray.shutdown)  # Ray's own, at exit, would wait too
        self._stop_service()
        if self._owner is not None:
            ours = self._processes + _ray_processes()  # the workers started since
            owner, self._owner, self._started, self._processes = self._owner, None, False, []
            owner.release(within=2.0 if self._lost else SHUTDOWN_TIMEOUT_S)
            if owner.joined or self.address is not None:
                _end(ours)
            else:  # a local start abandoned half-way (Ctrl-C): it may still be starting some
                _sweep()

    def run(self, spec: WorkerSpec, work: Sequence[Work], emit: Emit,
            stopped: Callable[[], bool]) -> bool:
        """Run ``work`` (the run's cases, or its oracle reruns) on the cluster; ``emit`` each
        group's lines as it finishes. Returns whether a stop was requested (the groups not
        finished are cancelled; ``--resume`` runs their cases). Raises
        :class:`~evalharness.errors.InfrastructureError` when a group fails for good or the
        cluster stops answering, after cancelling the other groups: what was emitted stands."""
        ray = self.ray
        self.start()
        unit = "oracle reruns" if any(w.oracle for w in work) else "cases"
        done = 0
        pending: dict[Any, list[Work]] = {}
        watch = _Watch(self)

        def call(fn: Callable[[], Any]) -> Any:
            try:
                return self._call(fn, watch)
            except InfrastructureError as exc:
                raise failed(str(exc)) from None
            except Exception as exc:  # noqa: BLE001 - Ray's machinery, not the cases
                raise failed(_reason(exc)) from None

        def cancel() -> None:
            if not self._lost:  # a cluster that is gone would keep the calls waiting
                with contextlib.suppress(Exception):
                    self._call(lambda: [ray.cancel(ref, force=True) for ref in pending],
                               watch)

        def failed(what: str) -> InfrastructureError:
            cancel()
            rest = len(work) - done
            return InfrastructureError(
                f"{what}; {done} of {len(work)} {unit} completed and are written, {rest} did "
                "not")

        judge = None
        try:
            task = ray.remote(max_retries=self.max_retries, retry_exceptions=False)(packed)
            if spec.shared_judge:
                judge, service_id = call(lambda: self.judge_service(spec))
                spec = dataclasses.replace(spec, judge_service=service_id)
            for group in work_groups(work, self.group_size):
                pending[call(lambda g=group: task.remote(spec, g, judge))] = group
            while pending:
                if stopped():
                    cancel()
                    return True
                ready, _ = call(lambda: ray.wait(list(pending), num_returns=1, timeout=0.5))
                if not ready:
                    call(watch.check)
                    continue
                ref = ready[0]
                group = pending.pop(ref)
                lines = unpacked(call(lambda r=ref: ray.get(r, timeout=GET_TIMEOUT_S)))
                emit(group, lines)
                done += len(group)
                watch.progressed()
            return False
        finally:
            if judge is not None and not self._lost:
                self.service_summary = _summary(ray, judge)

    def _call(self, fn: Callable[[], Any], watch: _Watch) -> Any:
        """``fn()`` (a call into Ray) in a thread of its own, while this one watches the
        cluster: Ray's calls block in its C++ core when the cluster has vanished (until it
        ends the process, a minute later, without a report). A cluster found gone raises
        :class:`~evalharness.errors.InfrastructureError`, the call abandoned."""
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["value"] = fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the watching thread
                box["error"] = exc

        thread = threading.Thread(target=target, name="evalharness-ray-call", daemon=True)
        thread.start()
        while True:
            thread.join(0.5)
            if not thread.is_alive():
                break
            try:
                watch.check()
            except InfrastructureError:
                self._lost = True
                raise
        if "error" in box:
            raise box["error"]
        return box["value"]

    def judge_service(self, spec: WorkerSpec) -> tuple[Any, str]:
        """The run's :class:`JudgeService` and its id, started on this (the driver's) node at
        its first use and kept until :meth:`close`: the run and its oracle reruns share one
        judge, so one cost ceiling, as in a local run."""
        if self._service is not None and self._service[0] == spec.key():
            return self._service[1], self._service[2]
        self._stop_service()
        ray = self.ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(),
                                              soft=False)
        service = ray.remote(JudgeService).options(
            num_cpus=0, max_concurrency=1000, scheduling_strategy=here).remote(spec)
        # fails here, with the judge's error, if it must
        ray.get(service.identity.remote(), timeout=START_TIMEOUT_S)
        self._service = (spec.key(), service, uuid.uuid4().hex)
        return service, self._service[2]

    def _stop_service(self) -> None:
        if self._service is not None:
            service, self._service = self._service[1], None
            with contextlib.suppress(Exception):
                self.ray.get(service.close.remote(), timeout=10)
            with contextlib.suppress(Exception):
                self.ray.kill(service)


LOOPBACK = "127.0.0.1"
PROBE_TIMEOUT_S = 3.0
"""How long a TCP connection to the cluster's address may take before it counts as down."""
CONNECT_TIMEOUT_S = 60.0
"""How long ``ray.init`` may take to join a cluster that accepted the connection."""
START_TIMEOUT_S = 180.0
"""How long a new local instance (or the judge service) may take to start."""
SHUTDOWN_TIMEOUT_S = 30.0
"""How long leaving the cluster may take (``ray.shutdown`` can wait on a cluster that died)."""
GET_TIMEOUT_S = 300.0
"""How long fetching a finished group's reply may take."""
WATCH_EVERY_S = 2.0
"""While no group finishes, how often the driver checks the cluster is still there."""
WATCH_MISSES = 3
"""Consecutive checks the cluster's GCS may miss before the run stops (about 6 to 15 s: Ray
itself would end the driver's process after 60 s, with no report)."""


class _Watch:
    """While the driver waits, whether the cluster is still there: the local instance's
    GCS and raylet processes alive, or the cluster's GCS accepting connections. Ray reports
    a dead worker or raylet through the tasks, but a cluster that vanished entirely leaves
    the driver waiting until Ray ends its process."""

    def __init__(self, executor: RayExecutor) -> None:
        self.executor = executor
        self.last = time.monotonic()
        self.misses = 0

    def progressed(self) -> None:
        self.last, self.misses = time.monotonic(), 0

    def check(self) -> None:
        if time.monotonic() - self.last < WATCH_EVERY_S:
            return
        self.last = time.monotonic()
        for process in self.executor._processes:
            if process.name() in ("gcs_server", "raylet") and not _running(process):
                raise InfrastructureError(f"the local Ray instance's {process.name()} "
                                          f"(process {process.pid}) died")
        gcs = self.executor._gcs
        if gcs is None:
            return
        if _answers(*gcs, timeout=PROBE_TIMEOUT_S / 2) is None:
            self.misses = 0
            return
        self.misses += 1
        if self.misses >= WATCH_MISSES:
            raise InfrastructureError(
                f"the Ray cluster stopped answering: its GCS at {gcs[0]}:{gcs[1]} refused "
                f"or timed out {self.misses} connections in a row (the head node died, or "
                "the network to it is down)")


def _answers(host: str, port: int, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """``None`` when a TCP connection to ``host:port`` opens within ``timeout``, else why
    not (a refusal, a time-out, a name that does not resolve)."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except TimeoutError:
        return f"no answer within {timeout:g} s"
    except OSError as exc:
        return exc.strerror or type(exc).__name__


def _running(process: Any) -> bool:
    import psutil

    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _reachable(address: str) -> tuple[str, bool]:
    """The address to hand ``ray.init``, once something answers there, and whether the
    cluster listens on this machine's loopback only (Ray would otherwise swap 127.0.0.1 for
    the machine's address and wait forever). An address where nothing answers is a
    :class:`UsageError` naming it — before anything of the run is written."""
    import ray._private.services as services
    from ray._private.utils import get_ray_address_file

    given = address
    where = ""
    if address == "auto":
        env = os.environ.get("RAY_ADDRESS")
        note = Path(get_ray_address_file(None))
        if env:
            address, where = env, " (from RAY_ADDRESS)"
        elif note.is_file():
            address, where = note.read_text(encoding="utf-8").strip(), f" (noted in {note})"
        else:
            running = sorted(services.find_gcs_addresses())
            if not running:
                raise UsageError("--address auto: no Ray cluster runs on this machine (no "
                                 "`ray start` noted one); start it (docs/scale.md), give "
                                 "its address, or leave --address out for a local instance")
            address, where = running[0], " (a GCS process of this machine)"
    rest = address
    if address.startswith("ray://"):
        if importlib.util.find_spec("grpc") is None:
            raise UsageError(f"--address {given}{where}: ray:// addresses need Ray Client "
                             "(pip install -e '.[ray]', which installs ray[client])")
        rest = address[len("ray://"):]
    target = address
    host, _, port = rest.split("/", 1)[0].rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit():
        raise UsageError(f"--address {given}{where}: expected auto, HOST:PORT or "
                         "ray://HOST:PORT")
    down = _answers(host, int(port))
    if down is not None:
        stale = (": the note of a cluster that has stopped; start it again, or give the "
                 "address of a running one" if where.startswith(" (noted") else
                 "; start the cluster (docs/scale.md: `ray start --head ...`), or check "
                 "the address")
        raise UsageError(f"--executor ray --address {given}: no Ray cluster answers at "
                         f"{host}:{port}{where} — {down}{stale}; nothing was run")
    if address.startswith("ray://") or not is_loopback(host):
        return target, False
    # 127.0.0.1 answers; Ray connects to the machine's own address instead: does it too?
    own = services.resolve_ip_for_localhost(host)
    return target, own != host and _answers(own, int(port)) is not None


class _Owner:
    """The thread that joins Ray (``ray.init``) and, at :meth:`release`, leaves it
    (``ray.shutdown``). It lives as long as the connection: Ray's driver loses its object
    store connection when the thread that called ``ray.init`` ends. Waiting for it here, not
    in Ray's call, lets Ctrl-C stop the wait at once and bounds a handshake that never ends;
    ``loopback``: keep 127.0.0.1 as the node's address (:func:`loopback_only`)."""

    def __init__(self, ray: Any, options: dict[str, Any], *, loopback: bool) -> None:
        self.ray, self.options, self.loopback = ray, options, loopback
        self.context: Any = None
        self.error: BaseException | None = None
        self._joined, self._leave = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._own, name="evalharness-ray", daemon=True)

    def _own(self) -> None:
        try:
            self.context = self.ray.init(**self.options, log_to_driver=False,
                                         ignore_reinit_error=True)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            self.error = exc
            return
        finally:
            self._joined.set()
        self._leave.wait()
        self.ray.shutdown()

    def join(self, within: float, what: str) -> Any:
        """Start the thread and wait for ``ray.init`` (at most ``within`` seconds): its
        context, or an error naming ``what`` could not be joined."""
        local = self.options["address"] == "local"
        with loopback_only() if self.loopback else contextlib.nullcontext():
            self._thread.start()
            self._joined.wait(within)
        if not self._joined.is_set():
            raise (InfrastructureError if local else UsageError)(
                f"--executor ray: {what} did not complete Ray's handshake within {within:g} s")
        if self.error is not None:
            text = str(self.error).strip().splitlines()
            why = f"{type(self.error).__name__}: {text[0] if text else ''}"[:300]
            if local:
                raise InfrastructureError(f"--executor ray: could not start {what} ({why})")
            raise UsageError(f"--executor ray: cannot join {what} ({why}); check the address "
                             "and that the cluster runs the same Ray version")
        return self.context

    @property
    def joined(self) -> bool:
        """Whether ``ray.init`` returned (or failed): the thread no longer connects."""
        return self._joined.is_set()

    def release(self, within: float = SHUTDOWN_TIMEOUT_S) -> None:
        """Leave Ray (``ray.shutdown`` in the owning thread), waiting at most ``within``
        seconds: a shutdown can wait on a cluster that died."""
        self._leave.set()
        if not self._joined.is_set():  # still joining (Ctrl-C, a time-out): left behind,
            atexit.unregister(self.ray.shutdown)  # and Ray's exit hook would wait on it
            return
        if self._thread.is_alive():
            self._thread.join(within)


_CLUSTERS = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
"""Ray's switch for multi-machine clusters: off, a node keeps 127.0.0.1 as its address."""


@contextlib.contextmanager
def loopback_only() -> Iterator[None]:
    """While a Ray node starts (or a driver joins one) in this block, 127.0.0.1 stays its
    address, so its servers listen on the loopback interface only. Ray otherwise replaces
    127.0.0.1 by the machine's address, and its GCS, raylet and workers listen on every
    interface; only a node whose address is 127.0.0.1 binds them to it. The switch is Ray's
    own for machines without multi-machine clusters (read once at import, so set here on its
    constants too); the processes the node starts inherit it."""
    from ray._private import ray_constants

    saved = ray_constants.ENABLE_RAY_CLUSTER, os.environ.get(_CLUSTERS)
    ray_constants.ENABLE_RAY_CLUSTER = False
    os.environ[_CLUSTERS] = "0"
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved[0]
        if saved[1] is None:
            os.environ.pop(_CLUSTERS, None)
        else:
            os.environ[_CLUSTERS] = saved[1]


def _ray_processes() -> list[Any]:
    """The Ray processes this process started (a local instance's GCS, raylet, agents and
    workers): its descendants that are Ray's, by executable or process title."""
    import psutil

    here = str(Path(__import__("ray").__file__).parent)
    found = []
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process().children(recursive=True):
            try:
                name, command = child.name(), " ".join(child.cmdline())
            except psutil.Error:
                continue
            if name in ("gcs_server", "raylet") or name.startswith("ray::") or \
                    command.startswith("ray::") or here in command:
                found.append(child)
    return found


def _sweep(within: float = 5.0) -> None:
    """End the Ray processes of this process as they appear, until none has for a second
    (at most ``within`` seconds): what a local start abandoned half-way left behind, and what
    it still starts (the raylet starts its agents)."""
    import psutil

    deadline, quiet = time.monotonic() + within, time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - quiet < 1.0:
        found = _ray_processes()
        if found:
            quiet = time.monotonic()
        for process in found:
            with contextlib.suppress(psutil.Error):
                process.kill()
        psutil.wait_procs(found, timeout=0.5)
        time.sleep(0.1)


def _end(processes: list[Any], grace: float = 2.0) -> None:
    """Wait ``grace`` seconds for ``processes`` to exit after Ray's shutdown, then end the
    rest (SIGTERM, then SIGKILL): a local instance's agents otherwise outlive the run by
    about a minute. psutil checks each is still the process it was (no reused pid)."""
    import psutil

    _, alive = psutil.wait_procs(processes, timeout=grace)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.terminate()
    _, alive = psutil.wait_procs(alive, timeout=3)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(alive, timeout=3)


def _summary(ray: Any, service: Any) -> dict[str, Any] | None:
    try:
        return ray.get(service.summary.remote(), timeout=10)
    except Exception:  # noqa: BLE001 - a summary is a nicety; the results are written
        return None


def _reason(exc: BaseException) -> str:
    """What failed, as one line, from the exception Ray raised: what died (a worker, the
    raylet, a node, the judge service, the cluster), or the task's own exception when Ray
    wraps one.

    >>> from ray.exceptions import LocalRayletDiedError
    >>> _reason(LocalRayletDiedError())
    "this machine's Ray raylet died (LocalRayletDiedError)"
    """
    import ray.exceptions as rx

    cause = getattr(exc, "cause", None) if isinstance(exc, rx.RayTaskError) else None
    shown = cause if isinstance(cause, BaseException) else exc
    text = str(shown).strip().splitlines()
    last = text[-1].strip() if text else ""
    kinds: tuple[tuple[type | tuple[type, ...], str], ...] = (
        (rx.WorkerCrashedError, "a worker process died on every try of a group of cases "
                                "(Ray retried its task)"),
        (rx.LocalRayletDiedError, "this machine's Ray raylet died"),
        (rx.NodeDiedError, "a Ray node died"),
        (rx.RayActorError, "the run's judge service (a Ray actor) died"),
        (rx.ObjectLostError, "a group's results were lost with the node that held them"),
        (rx.RuntimeEnvSetupError, "Ray could not set up a worker's runtime environment"),
        (rx.OutOfMemoryError, "Ray killed a worker: its node ran out of memory"),
        (rx.TaskCancelledError, "a group's task was cancelled outside this run"),
        ((rx.GetTimeoutError, TimeoutError), "the cluster did not answer in time"),
        (ConnectionError, "the connection to the Ray cluster was lost"),
        (rx.RaySystemError, "Ray failed"),
    )
    if isinstance(shown, InfrastructureError):  # a worker's own account (the judge service)
        return last[:500]
    for kind, what in kinds:
        if isinstance(shown, kind):
            return f"{what} ({type(shown).__name__})"
    if shown is not exc:  # the task itself raised: the worker's own exception
        return (f"a worker failed on a group of cases: {type(shown).__name__}: "
                f"{last}")[:500]
    return f"Ray failed: {type(shown).__name__}: {last}"[:500]
