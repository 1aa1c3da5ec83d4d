"""DuckDB queries in a child process, where a memory cap and a hard time limit can hold them.

One call of a DuckDB function can allocate gigabytes and run for many seconds without looking
at DuckDB's interrupt flag or its ``memory_limit``: ``len(generate_series(1, 60000000))`` builds
a 60-million-element list in one vector (~15 s, ~4 GB). Nothing inside the evaluator's process
can stop that. So every sandboxed DuckDB connection lives in a child process:

* the child's address space is capped (``RLIMIT_AS``: its size after start-up plus
  ``max_memory_bytes`` and :data:`HEADROOM_BYTES`), so an allocation past it fails at once —
  DuckDB answers "Out of Memory Error" and the query ends with status ``too_large``;
* its connections have DuckDB's ``memory_limit`` (``max_memory_bytes``), ``threads = 1`` and
  ``max_temp_directory_size = 0`` (nothing spills to disk), then ``lock_configuration``;
* the child interrupts a query at its time limit (as in-process); if the query does not
  answer within :data:`KILL_GRACE_S` more, the parent kills the child, and the query ends
  with status ``timeout``;
* rows are fetched in the child under the value and result caps, so at most
  ``max_result_bytes`` ever comes back.

A :class:`Connection` remembers how it was made — a file opened read-only, or a test database
built from rows — and is made again in a fresh child after a kill. One child per memory cap
serves every connection (requests take turns); it retires itself when its address space has
grown by half its cap (DuckDB's allocator keeps what it once mapped).

The child is ``python -c`` importing this module and calling :func:`serve`; requests and
answers are length-prefixed pickles on its stdin and stdout, as for the normal-form helpers
(:mod:`evalharness_sql.workers`).
"""

from __future__ import annotations

import atexit
import itertools
import os
import pickle
import select
import signal
import subprocess
import sys
import threading
import time
from typing import IO, Any

from evalharness_sql.pipes import HEADER, receive, send
from evalharness_sql.sandbox import Limits, Result, _run_duckdb

KILL_GRACE_S = 0.5
"""Seconds past a query's time limit before its process is killed (DuckDB's own interrupt
usually stops a query within milliseconds)."""

START_TIMEOUT_S = 60.0
"""Seconds a child may take to start, or to open or build a database."""

HEADROOM_BYTES = 256_000_000
"""Address space a child may use beyond its start-up size and ``max_memory_bytes``: Python's
copies of fetched rows (at most ``max_result_bytes``) and DuckDB's own bookkeeping."""

CONFIG = {"enable_external_access": False, "autoinstall_known_extensions": False,
          "autoload_known_extensions": False, "allow_unsigned_extensions": False,
          "threads": 1, "max_temp_directory_size": "0B"}
"""DuckDB configuration of every sandboxed connection (with ``memory_limit``)."""

_BOOT = "from evalharness_sql.duckproc import serve; serve({memory})"


class Unavailable(RuntimeError):
    """The child process cannot be used (it died or was killed); the message says why."""


class _Child:
    """One child process, and the turn-taking lock of its requests."""

    def __init__(self, memory: int) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        self.memory = memory
        self.proc = subprocess.Popen([sys.executable, "-c", _BOOT.format(memory=int(memory))],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.lock = threading.Lock()
        self.alive = True
        self.closing: list[int] = []
        self.ids = itertools.count(1)
        hello = self._answer(START_TIMEOUT_S)
        if hello is None or hello[0] != "ready":
            self.kill()
            raise Unavailable("the DuckDB sandbox process did not start"
                              + (f": {hello[1]}" if hello else ""))

    def request(self, message: tuple, timeout_s: float) -> tuple:
        """Send one request and wait for its answer; on no answer within ``timeout_s`` the
        child is killed and :class:`Unavailable` raised (with ``timed_out`` set)."""
        if not self.alive:
            raise Unavailable("the DuckDB sandbox process has stopped")
        closing, self.closing = self.closing, []
        try:
            send(self.proc.stdin, pickle.dumps((closing, message)))
        except (OSError, ValueError) as exc:
            self.kill()
            raise Unavailable(f"the DuckDB sandbox process has stopped ({exc})") from None
        answer = self._answer(timeout_s)
        if answer is None:
            timed_out = self.proc.poll() is None
            self.kill()
            exc = Unavailable("no answer in time" if timed_out else self._death())
            exc.timed_out = timed_out  # type: ignore[attr-defined]
            raise exc
        if answer[-1] == "retiring":
            self.alive = False  # it exits by itself; the next request starts another child
        return answer

    def _answer(self, timeout_s: float) -> tuple | None:
        stream = self.proc.stdout
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([stream], [], [], left)
            if ready:
                break
        try:
            payload = receive(stream)
        except (OSError, ValueError):
            return None
        return None if payload is None else pickle.loads(payload)

    def _death(self) -> str:
        try:
            code = self.proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            return "the DuckDB sandbox process stopped answering"
        if code < 0:
            name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ \
                else str(-code)
            return f"the DuckDB sandbox process died during the query (signal {name})"
        return f"the DuckDB sandbox process died during the query (exit code {code})"

    def kill(self) -> None:
        self.alive = False
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass

    def close(self) -> None:
        self.alive = False
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()


_CHILDREN: dict[int, _Child] = {}
_LOCK = threading.Lock()


def _child(memory: int) -> _Child:
    """The live child for this memory cap, started if need be."""
    with _LOCK:
        child = _CHILDREN.get(memory)
        if child is None or not child.alive:
            if child is not None:
                child.close()
            if not _CHILDREN:
                atexit.register(close_all)
            child = _CHILDREN[memory] = _Child(memory)
        return child


def close_all() -> None:
    """Stop every child process (at exit)."""
    with _LOCK:
        children = list(_CHILDREN.values())
        _CHILDREN.clear()
    for child in children:
        child.close()


class Connection:
    """A sandboxed DuckDB connection in a child process; :func:`evalharness_sql.sandbox.run`
    runs queries on it (through its ``run``: it says so with ``sandboxed``). ``recipe`` is how to make it: ``("open", path)`` (read-only) or
    ``("build", tables, views, data)`` (an in-memory test database)."""

    sandboxed = True
    """What :func:`evalharness_sql.sandbox.run` looks for: run queries through :meth:`run`."""

    def __init__(self, recipe: tuple, limits: Limits | None = None) -> None:
        self.recipe = recipe
        self.closed = False
        self._child: _Child | None = None
        self._id = 0
        self._make((limits or Limits()).max_memory_bytes)

    def _make(self, memory: int) -> _Child:
        """The child holding this connection, making it there first if need be."""
        child = _child(memory)
        if self._child is child and child.alive:
            return child
        with child.lock:
            handle = next(child.ids)
            try:
                answer = child.request(("make", handle, self.recipe), START_TIMEOUT_S)
            except Unavailable as exc:
                raise RuntimeError(f"cannot open the DuckDB database: {exc}") from None
        if answer[0] != "ok":
            raise RuntimeError(answer[1])
        self._child, self._id = child, handle
        return child

    def run(self, sql: str, timeout_s: float, limits: Limits) -> Result:
        """Run one query (already past the sandbox's statement check) in the child."""
        if self.closed:
            return Result("error", error="the DuckDB connection is closed")
        start = time.perf_counter()
        try:
            child = self._make(limits.max_memory_bytes)
        except (RuntimeError, Unavailable) as exc:
            return Result("error", error=str(exc), elapsed_s=time.perf_counter() - start)
        with child.lock:
            if not child.alive:  # killed by another connection's query meanwhile
                return self.run(sql, timeout_s, limits)
            try:
                answer = child.request(("run", self._id, sql, timeout_s, limits),
                                       timeout_s + KILL_GRACE_S)
            except Unavailable as exc:
                elapsed = time.perf_counter() - start
                if getattr(exc, "timed_out", False):
                    return Result("timeout", error=f"stopped after the {timeout_s:g}s time "
                                  "limit (the query did not answer DuckDB's interrupt; its "
                                  "sandbox process was stopped)", elapsed_s=elapsed)
                return Result("error", error=str(exc), elapsed_s=elapsed)
        if answer[0] != "ok":
            return Result("error", error=str(answer[1]), elapsed_s=time.perf_counter() - start)
        return answer[1]

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        child = self._child
        if child is not None and child.alive:
            child.closing.append(self._id)  # sent with the child's next request

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ---------------------------------------------------------------------------------------------
# The child's side
# ---------------------------------------------------------------------------------------------


def serve(memory: int, stdin: IO[bytes] | None = None, stdout: IO[bytes] | None = None) -> None:
    """Answer requests until stdin closes (what a child process runs)."""
    import duckdb

    if stdout is None:  # a child process
        stdout = os.fdopen(os.dup(1), "wb")
        os.dup2(2, 1)  # anything printed goes to stderr, never into the answers
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    stdin = stdin if stdin is not None else sys.stdin.buffer
    config = {**CONFIG, "memory_limit": f"{int(memory)}B"}
    duckdb.connect(":memory:", config=dict(config)).execute("SELECT 1").fetchall()
    start_size = _address_space()
    _cap_address_space(start_size + memory + HEADROOM_BYTES)
    send(stdout, pickle.dumps(("ready",)))
    connections: dict[int, Any] = {}
    while True:
        message = receive(stdin)
        if message is None:
            return
        closing, request = pickle.loads(message)
        for handle in closing:
            conn = connections.pop(handle, None)
            if conn is not None:
                conn.close()
        answer = _answer(request, connections, config)
        retiring = _address_space() > start_size + memory // 2
        try:
            data = pickle.dumps((*answer, "retiring" if retiring else ""))
        except Exception as exc:  # noqa: BLE001 - e.g. MemoryError under the address-space cap
            data = pickle.dumps(("error", f"the answer could not be sent back: "
                                          f"{type(exc).__name__}: {exc}", "retiring"))
            retiring = True
        send(stdout, data)
        if retiring:
            return


def _answer(request: tuple, connections: dict[int, Any], config: dict) -> tuple:
    kind = request[0]
    try:
        if kind == "make":
            _, handle, recipe = request
            connections[handle] = _make(recipe, config)
            return ("ok", None)
        if kind == "run":
            _, handle, sql, timeout_s, limits = request
            conn = connections.get(handle)
            if conn is None:
                return ("error", "the DuckDB connection is closed")
            return ("ok", _run_duckdb(conn, sql, timeout_s, limits))
    except Exception as exc:  # noqa: BLE001 - a request must never end the child
        return ("error", f"{type(exc).__name__}: {exc}")
    return ("error", f"unknown request {kind!r}")


def _make(recipe: tuple, config: dict) -> Any:
    import duckdb

    if recipe[0] == "open":
        conn = duckdb.connect(recipe[1], read_only=True, config=dict(config))
    else:
        _, tables, views, data = recipe
        conn = duckdb.connect(":memory:", config=dict(config))
        for name, create, insert in tables:
            conn.execute(create)
            rows = data.get(name)
            if rows:
                conn.executemany(insert, [list(r) for r in rows])
        for sql in views:
            conn.execute(sql)
    conn.execute("SET lock_configuration = true")
    return conn


def _address_space() -> int:
    """This process's virtual memory size, in bytes (0 where /proc is not available)."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _cap_address_space(limit: int) -> None:
    try:
        import resource

        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ImportError, OSError, ValueError):
        pass  # no address-space limit here: DuckDB's memory_limit and the time limit remain


assert HEADER.size == 4  # the framing of evalharness_sql.pipes
