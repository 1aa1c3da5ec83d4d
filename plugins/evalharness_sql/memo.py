"""Memoisation of identical work: normal forms and whole cascade outcomes, per database.

A run of thousands of cases repeats itself: the same gold query under many paraphrases, the
same predicted query for questions a system reads alike. Everything the cascade computes is a
function of the two SQL texts, the dialects, the settings and the database, so identical
inputs are computed once:

* :func:`normal_form_entry` — a query's normal form (tree, whether it was qualified against
  the schema, SQL text, clause items), shared by ``exact_match``, the normalise stage,
  ``clause_f1`` and the error taxonomy; a failure is remembered and raised again, so callers
  see exactly what a fresh computation raises. Past a warm-up, new queries are normalised in
  helper processes (:func:`prefetch_normal_forms`, :mod:`evalharness_sql.workers`);
* the ``equivalence`` evaluator keeps each pair's metric values under
  :func:`~evalharness_sql.pair_key`, and hands out deep copies.

The memos live on the :class:`~evalharness_sql.engines.Engine` (one per database file version,
so a changed file starts afresh; the file's fingerprint is part of every key too) or, without
a database, in this module. Each is a bounded LRU, safe to share between threads.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import evalharness.memo
from evalharness_sql import workers
from evalharness_sql.clauses import clause_items
from evalharness_sql.normalform import NormalForm, compute_normal_form

if TYPE_CHECKING:
    from evalharness_sql.engines import Engine
    from evalharness_sql.verdict import Pair

MISSING = evalharness.memo.MISSING


class LRU(evalharness.memo.LRU):
    """The core's bounded memo (:class:`evalharness.memo.LRU`), which also knows the values
    being computed — here or in a helper process — so that no value is computed twice.

    >>> memo = LRU(maxsize=2)
    >>> memo.put("a", 1); memo.put("b", 2); memo.get("a"); memo.put("c", 3)
    1
    >>> memo.get("b", None) is None, len(memo)
    (True, 2)
    """

    def __init__(self, maxsize: int = 8192) -> None:
        super().__init__(maxsize)
        self._pending: dict[Hashable, Future] = {}

    def peek(self, key: Hashable) -> bool:
        """Whether ``key`` is known or being computed."""
        with self._lock:
            return key in self._data or key in self._pending

    def get_or_compute(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The remembered value, else ``compute()``, remembered. A thread asking for a key
        that is being computed — by another thread, or by a helper process
        (:meth:`adopt`) — waits for that value instead of computing it again (``exact_match``
        and the cascade ask for the same normal forms side by side). ``compute`` should
        return its failures rather than raise them; if a helper fails, ``compute`` runs here.

        >>> memo = LRU()
        >>> memo.get_or_compute("k", lambda: 42), memo.get_or_compute("k", lambda: 0)
        (42, 42)
        """
        with self._lock:
            try:
                value = self._data[key]
            except KeyError:
                pending = self._pending.get(key)
                owner = pending is None
                if owner:
                    pending = self._pending[key] = Future()
                self.misses += 1
            else:
                self._data.move_to_end(key)
                self.hits += 1
                return value
        if not owner:
            try:
                return pending.result()
            except Exception:  # noqa: BLE001 - a helper failed: compute it here
                self._settle(key, pending)
                return self.get_or_compute(key, compute)
        try:
            value = compute()
        except BaseException as exc:
            self._settle(key, pending)
            pending.set_exception(exc)
            raise
        self.put(key, value)
        self._settle(key, pending)
        pending.set_result(value)
        return value

    def adopt(self, key: Hashable, start: Callable[[], Future]) -> bool:
        """Unless ``key`` is known or being computed, let ``start()`` compute it elsewhere:
        the future it returns stands for the pending value (remembered when it succeeds; if
        it fails, whoever asks computes the value itself). Whether it was started.

        >>> from concurrent.futures import Future
        >>> memo, elsewhere = LRU(), Future()
        >>> memo.adopt("k", lambda: elsewhere), memo.adopt("k", lambda: elsewhere)
        (True, False)
        >>> elsewhere.set_result(7); memo.get_or_compute("k", lambda: 0)
        7
        """
        with self._lock:
            if key in self._data or key in self._pending:
                return False
            proxy = self._pending[key] = Future()
        try:  # outside the lock: ``start`` may take locks of its own
            future = start()
        except Exception as exc:  # noqa: BLE001 - the askers compute it themselves
            self._settle(key, proxy)
            proxy.set_exception(exc)
            return False

        def done(f: Future) -> None:
            problem = f.exception() if not f.cancelled() else RuntimeError("cancelled")
            if problem is None:
                value = f.result()
                self.put(key, value)
                self._settle(key, proxy)
                proxy.set_result(value)
            else:
                self._settle(key, proxy)
                proxy.set_exception(problem)

        future.add_done_callback(done)
        return True

    def _settle(self, key: Hashable, future: Future) -> None:
        with self._lock:
            if self._pending.get(key) is future:
                del self._pending[key]



_LOCK = threading.Lock()
_WITHOUT_ENGINE: dict[str, LRU] = {}


def memo_for(engine: Engine | None, name: str, maxsize: int = 8192) -> LRU:
    """The memo called ``name`` of ``engine`` (or of this module, without an engine)."""
    with _LOCK:
        if engine is None:
            table = _WITHOUT_ENGINE
        else:
            table = engine.__dict__.get("_memos")
            if table is None:
                table = engine.__dict__["_memos"] = {}
        memo = table.get(name)
        if memo is None:
            memo = table[name] = LRU(maxsize)
        return memo


def engine_key(engine: Engine | None) -> Any:
    """What identifies the database's content in a key: the file's fingerprint (path, size,
    modification time) for files, else the engine object itself (which owns the memo)."""
    if engine is None:
        return None
    if getattr(engine, "path", None) is not None or getattr(engine, "dsn", None) is not None:
        return engine.fingerprint()
    return id(engine)


def pair_clauses(pair: Pair) -> tuple[dict[str, Counter], dict[str, Counter]]:
    """The clause items of what :func:`~evalharness_sql.taxonomy.categorize` and the
    ``clause_f1`` metric compare — the pair's normal forms when the normalise stage made
    them, else its parse trees — the normal forms' computed once per query text."""
    forms = pair.normal_forms
    if forms is not None:
        return forms[0].clauses(pair.dialect), forms[1].clauses(pair.dialect)
    gold = pair.gold_normal or pair.gold_tree
    pred = pair.predicted_normal or pair.predicted_tree
    return clause_items(gold, pair.dialect), clause_items(pred, pair.dialect)


def normal_form_entry(sql: str, dialect: str, engine: Engine | None) -> NormalForm:
    """The normal form of the single statement ``sql`` (qualified against the engine's
    schema when there is one), computed once per (SQL, dialect, database). Raises what the
    computation raises (``SqlglotError`` when it does not parse or holds several statements;
    whatever a rule raises), every time.

    >>> a = normal_form_entry("select NAME from T where x in (2, 1)", "sqlite", None)
    >>> a.sql, a is normal_form_entry("select NAME from T where x in (2, 1)", "sqlite", None)
    ('SELECT name FROM t WHERE x IN (1, 2)', True)
    """
    memo = memo_for(engine, "normal_form", maxsize=16384)

    def compute() -> NormalForm | Exception:
        try:
            return compute_normal_form(sql, dialect, engine)
        except Exception as exc:  # noqa: BLE001 - remembered, and raised again below
            return exc

    entry = memo.get_or_compute((sql, dialect, engine_key(engine)), compute)
    if isinstance(entry, BaseException):
        raise entry
    return entry


def prefetch_normal_forms(texts: Iterable[str | None], dialect: str,
                          engine: Engine | None) -> None:
    """Hand the normal forms a batch is about to need to helper processes
    (:mod:`evalharness_sql.workers`) — when the database is a SQLite file and its memo is past
    the warm-up — so they are computed on another CPU while the evaluation goes on."""
    path = getattr(engine, "path", None)
    if engine is None or path is None or getattr(engine, "name", None) != "sqlite":
        return
    memo = memo_for(engine, "normal_form", maxsize=16384)
    if len(memo) < workers.WARMUP or not workers.helpers():
        return
    fingerprint = engine.fingerprint()
    owner = engine_key(engine)
    # The last queries of the batch go to the helpers (as many as they queue); the first are
    # computed here when the evaluators reach them, while the helpers work on the rest.
    for sql in reversed(list(dict.fromkeys(t for t in texts if t))):
        key = (sql, dialect, owner)
        if memo.peek(key):
            continue
        if not memo.adopt(key, lambda sql=sql: _elsewhere(
                workers.submit(sql, dialect, path, fingerprint))) and not memo.peek(key):
            break  # every helper is busy


def _elsewhere(future: Future | None) -> Future:
    if future is None:
        raise RuntimeError("no SQL helper process is free")
    return future
