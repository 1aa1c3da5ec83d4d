"""Normal forms in helper processes, so that a large run normalises SQL on a spare CPU.

Normalising a query (sqlglot's parser, qualifier and simplifier, then the rules) is pure
Python and takes milliseconds; a run of ten thousand cases has thousands of distinct queries,
and in one process they hold the interpreter lock the rest of the evaluation needs. Once the
memo of one database holds :data:`WARMUP` normal forms (small runs never get there), new
queries of a batch go to helper processes — one per spare CPU, at most :data:`MAX_HELPERS` —
while the evaluation goes on; whoever needs a normal form waits for it (see
:meth:`evalharness_sql.memo.LRU.adopt`).

A helper is ``python -c`` importing this module and calling :func:`serve`: it reads pickled
``(id, sql, dialect, database path, fingerprint)`` requests on stdin and writes pickled
``(id, normal form or exception)`` answers on stdout. Only SQLite database files are handed
over (a helper opens the file itself, and refuses if its fingerprint changed). A normal form
is a function of exactly those inputs, so it is the same wherever it is computed; anything a
helper cannot do — it died, an exception does not survive pickling — is computed in-process.

``EVALHARNESS_SQL_HELPERS``: how many helper processes (``0``: none). Default: the CPUs
minus one, at most :data:`MAX_HELPERS`.
"""

from __future__ import annotations

import atexit
import itertools
import os
import pickle
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import IO, Any

from evalharness_sql.engines import SQLiteEngine
from evalharness_sql.normalform import compute_normal_form
from evalharness_sql.pipes import receive, send

WARMUP = 256
"""Normal forms of one database computed in-process before helpers are used."""

MAX_HELPERS = 4
"""Most helper processes."""

QUEUE = 16
"""Most requests waiting at one helper (about a tenth of a second of work). The rest of a
batch's new queries are computed in-process, by whoever needs them first, so that early in a
run, when nearly every query is new, neither side waits for the other."""

ENV = "EVALHARNESS_SQL_HELPERS"

_BOOT = "from evalharness_sql.helper import main; main()"
"""What a helper process runs: :mod:`evalharness_sql.helper`, above both this module and the
cascade it runs chunks of."""


class Unavailable:
    """A helper's answer when it could not compute (or send) a normal form: compute it here."""

    def __init__(self, why: str) -> None:
        self.why = why


def helpers_wanted() -> int:
    """How many helper processes to use (:data:`ENV`, else the spare CPUs, at most
    :data:`MAX_HELPERS`).

    >>> import os; os.environ[ENV] = "0"; helpers_wanted()
    0
    >>> del os.environ[ENV]
    """
    raw = os.environ.get(ENV, "").strip()
    if raw:
        try:
            return max(0, min(int(raw), 64))
        except ValueError:
            return 0
    return max(0, min((os.cpu_count() or 1) - 1, MAX_HELPERS))


class Helper:
    """One helper process, its pending requests, and the thread that reads its answers."""

    def __init__(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        self.proc = subprocess.Popen([sys.executable, "-c", _BOOT], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env)
        self.lock = threading.Lock()
        self.pending: dict[int, Future] = {}
        self.alive = True
        self.reader = threading.Thread(target=self._read, name="evalharness-sql-helper",
                                       daemon=True)
        self.reader.start()

    def submit(self, request_id: int, request: tuple) -> Future:
        future: Future = Future()
        with self.lock:
            if not self.alive:
                future.set_exception(RuntimeError("the SQL helper process has stopped"))
                return future
            self.pending[request_id] = future
            try:
                send(self.proc.stdin, pickle.dumps((request_id, request)))
            except (OSError, ValueError) as exc:
                self.pending.pop(request_id, None)
                self._stop(f"cannot write to the SQL helper process: {exc}")
                future.set_exception(RuntimeError("the SQL helper process has stopped"))
        return future

    def _read(self) -> None:
        why = "the SQL helper process exited"
        try:
            while True:
                message = receive(self.proc.stdout)
                if message is None:
                    break
                request_id, answer = pickle.loads(message)
                with self.lock:
                    future = self.pending.pop(request_id, None)
                if future is None:
                    continue
                try:
                    value = pickle.loads(answer)
                except Exception as exc:  # noqa: BLE001 - an answer that does not unpickle
                    value = Unavailable(f"{type(exc).__name__}: {exc}")
                if isinstance(value, Unavailable):
                    future.set_exception(RuntimeError(value.why))
                else:
                    future.set_result(value)
        except Exception as exc:  # noqa: BLE001 - a broken pipe ends the helper
            why = f"reading from the SQL helper process failed: {exc}"
        with self.lock:
            self._stop(why)

    def _stop(self, why: str) -> None:
        """Fail what is pending (it is computed in-process instead); called with the lock."""
        self.alive = False
        for future in self.pending.values():
            future.set_exception(RuntimeError(why))
        self.pending.clear()

    def close(self) -> None:
        with self.lock:
            self.alive = False
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_HELPERS: list[Helper] = []
_STARTED = False
_LOCK = threading.Lock()
_IDS = itertools.count()
_TURN = itertools.count()


def helpers() -> list[Helper]:
    """The running helper processes (started on first call; none when not wanted)."""
    global _STARTED
    with _LOCK:
        if not _STARTED:
            _STARTED = True
            wanted = helpers_wanted()
            for _ in range(wanted):
                try:
                    _HELPERS.append(Helper())
                except OSError:
                    break
            if _HELPERS:
                atexit.register(close_all)
        return [h for h in _HELPERS if h.alive]


def submit(sql: str, dialect: str, path: str, fingerprint: str) -> Future | None:
    """Ask a helper for the normal form of ``sql`` on the SQLite file ``path``; ``None``
    when there is no helper, or each has :data:`QUEUE` requests waiting."""
    running = [h for h in helpers() if len(h.pending) < QUEUE]
    if not running:
        return None
    helper = running[next(_TURN) % len(running)]
    return helper.submit(next(_IDS), (sql, dialect, path, fingerprint))


def warm() -> int:
    """Start the helper processes and wait until each has answered once (its imports done):
    what a benchmark does before it starts the clock. Returns how many are running."""
    running = helpers()
    futures = [h.submit(next(_IDS), ("SELECT 1", "sqlite", "", "")) for h in running]
    for future in futures:
        try:
            future.result(timeout=60)
        except Exception:  # noqa: BLE001 - an answer of any kind means the helper is up
            pass
    return len(helpers())


def submit_chunk(helper: Helper, pairs: list[tuple[str, str]], path: str, fingerprint: str,
                 dialect: str, predicted_dialect: str | None, options: Any) -> Future:
    """Ask ``helper`` for the verdicts of a chunk of pairs on the SQLite file ``path``
    (:func:`evalharness_sql.parallel.check_chunk`)."""
    return helper.submit(next(_IDS), ("chunk", pairs, path, fingerprint, dialect,
                                      predicted_dialect, options))


def close_all() -> None:
    """Stop the helper processes (at exit; a later :func:`submit` starts none)."""
    with _LOCK:
        stopping = list(_HELPERS)
        _HELPERS.clear()
    for helper in stopping:
        helper.close()


# ---------------------------------------------------------------------------------------------
# The helper's side
# ---------------------------------------------------------------------------------------------


def serve(stdin: IO[bytes] | None = None, stdout: IO[bytes] | None = None,
          chunk: Callable[..., Any] | None = None) -> None:
    """Answer requests until stdin closes (what a helper process runs, through
    :func:`evalharness_sql.helper.main`). ``chunk`` checks a chunk of pairs (the cascade's
    :func:`evalharness_sql.parallel.check_chunk`); without it a chunk request is answered
    :class:`Unavailable` and the caller checks the chunk itself."""
    if stdout is None:  # a helper process
        stdout = os.fdopen(os.dup(1), "wb")
        os.dup2(2, 1)  # anything printed goes to stderr, never into the answers
        # Ctrl-C reaches the whole process group: the run decides, the helper ends with stdin
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    stdin = stdin if stdin is not None else sys.stdin.buffer
    engines: dict[str, Any] = {}
    while True:
        message = receive(stdin)
        if message is None:
            return
        request_id, request = pickle.loads(message)
        if request[0] == "chunk":
            answer = _chunk(chunk, *request[1:])
        else:
            sql, dialect, path, fingerprint = request
            answer = _answer(sql, dialect, path, fingerprint, engines)
        send(stdout, pickle.dumps((request_id, answer)))


def _chunk(check: Callable[..., Any] | None, *args: Any) -> bytes:
    """The verdicts of a chunk of pairs (a whole cascade, run by ``check``)."""
    if check is None:
        return pickle.dumps(Unavailable("this helper checks no chunks"))
    try:
        return pickle.dumps(check(*args))
    except Exception as exc:  # noqa: BLE001 - the caller does the chunk itself
        return pickle.dumps(Unavailable(f"{type(exc).__name__}: {exc}"))


def _answer(sql: str, dialect: str, path: str, fingerprint: str,
            engines: dict[str, Any]) -> bytes:
    try:
        engine = engines.get(path)
        if engine is None:
            engine = engines[path] = SQLiteEngine(path)
        if engine.fingerprint() != fingerprint:
            return pickle.dumps(Unavailable(f"{path} changed"))
        value: Any = compute_normal_form(sql, dialect, engine)
    except Exception as exc:  # noqa: BLE001 - the caller re-raises it, as in-process
        value = exc
    try:
        data = pickle.dumps(value)
        back = pickle.loads(data)
    except Exception as exc:  # noqa: BLE001
        return pickle.dumps(Unavailable(f"the answer does not pickle: {exc}"))
    if isinstance(value, BaseException) and (type(back) is not type(value)
                                             or str(back) != str(value)):
        return pickle.dumps(Unavailable("the exception does not survive pickling"))
    return data
