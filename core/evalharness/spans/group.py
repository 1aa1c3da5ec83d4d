"""Spans grouped into their traces, however an export interleaves them, in bounded memory.

An exporter writes spans as they end, in batches that mix the traces of concurrent requests,
so the spans of one trace can be anywhere in a file: no trace is known to be complete until
the whole file has been read. :func:`group_traces` therefore reads all of it first, holding
the spans in memory while there are few, and in a temporary SQLite file (one
:meth:`Span.to_json` line per span, keyed by trace) once there are more than
``memory_spans`` — so a 1 GB export is grouped in a few hundred MB
(``benchmarks/trace_import.py``). One trace is read back whole, however large: an export that
is all one trace costs about twice its size (``benchmarks/trace_memory.py``).

A span read twice — the same (trace id, span id), as when an exporter retried a batch that
had been stored but whose answer was lost, or when two exports overlap — is kept once (the
first read) and counted in :class:`GroupStats`, never silently.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from evalharness.spans.model import Span

MEMORY_SPANS = 20_000
"""Spans held in memory before they go to disk: OpenInference RAG spans take about 4 KB of
Python objects each, so some 90 MB (``benchmarks/trace_import.py``, a 200 MB export: its
87,040 spans all held in memory peak at 434 MB in 8.8 s; spilled beyond 20,000, at 185 MB in
9.2 s)."""

_NO_START = (1 << 63) - 1
"""The sort key of a span without a start time: after every span that has one."""
_INSERT_ROWS = 5_000
_DECODE_ROWS = 512
"""Spans read back from disk decoded at once (:meth:`Span.from_jsons`)."""


DUPLICATE_EXAMPLES = 10
"""Duplicate spans named in :attr:`GroupStats.examples` (all are counted)."""


@dataclass
class GroupStats:
    """What grouping dropped: spans read more than once."""

    duplicate_spans: int = 0
    """Spans dropped because a span with the same trace and span id was read before."""
    examples: list[str] = field(default_factory=list)
    """The first few, as ``trace T span S: SOURCE (kept: SOURCE)``."""


def _start(span: Span) -> int:
    return _NO_START if span.start_ns is None else span.start_ns


def _unique(group: list[Span], stats: GroupStats | None) -> list[Span]:
    """``group`` without the spans whose id came before in it (the first one read is kept).

    >>> spans = [Span("t", "a", None, "x", source="f, line 1"), Span("t", "b", "a", "y"),
    ...          Span("t", "a", None, "x", source="f, line 9")]
    >>> stats = GroupStats()
    >>> [s.span_id for s in _unique(spans, stats)], stats.duplicate_spans, stats.examples
    (['a', 'b'], 1, ['trace t span a: f, line 9 (kept: f, line 1)'])
    """
    if len({span.span_id for span in group}) == len(group):
        return group
    first: dict[str, Span] = {}
    kept = []
    for span in group:
        earlier = first.setdefault(span.span_id, span)
        if earlier is span and len(first) > len(kept):
            kept.append(span)
            continue
        if stats is not None:
            stats.duplicate_spans += 1
            if len(stats.examples) < DUPLICATE_EXAMPLES:
                stats.examples.append(f"trace {span.trace_id} span {span.span_id}: "
                                      f"{span.source or '?'} (kept: {earlier.source or '?'})")
    return kept


def group_traces(spans: Iterable[Span], *, memory_spans: int = MEMORY_SPANS,
                 spill_dir: Path | None = None, stats: GroupStats | None = None
                 ) -> Iterator[list[Span]]:
    """The spans of each trace together, ordered by start time, then by their order in
    ``spans`` (a span without a start time last); the traces in the order their first span
    comes. Nothing is yielded before ``spans`` is exhausted. A span whose trace and span id
    were read before is dropped (the first one read is kept) and counted in ``stats``.

    Up to ``memory_spans`` spans are held in memory; beyond, every span goes to a temporary
    SQLite file in ``spill_dir`` (default: the system's temporary folder; it needs about as
    much space as the spans' JSON), deleted when the groups have been read or the generator is
    closed. The groups are the same either way.

    >>> from evalharness.spans.model import Span
    >>> spans = [Span("t1", "b", "a", "retrieve", start_ns=20), Span("t2", "x", None, "ask",
    ...          start_ns=5), Span("t1", "a", None, "answer", start_ns=10)]
    >>> [[s.name for s in trace] for trace in group_traces(spans)]
    [['answer', 'retrieve'], ['ask']]
    >>> [[s.name for s in trace] for trace in group_traces(spans, memory_spans=1)]
    [['answer', 'retrieve'], ['ask']]
    >>> stats = GroupStats()
    >>> [len(trace) for trace in group_traces(spans + spans[:1], stats=stats)]
    [2, 1]
    >>> stats.duplicate_spans
    1
    """
    order: dict[str, int] = {}
    held: list[list[Span]] = []
    count = 0
    spill: _Spill | None = None
    try:
        for span in spans:
            trace = order.setdefault(span.trace_id, len(order))
            if spill is not None:
                spill.add(trace, span)
                continue
            if trace == len(held):
                held.append([])
            held[trace].append(span)
            count += 1
            if count > memory_spans:
                spill = _Spill(spill_dir)
                spill.add_all(held)
                held = []  # the only reference left: the spans held so far are freed
        if spill is None:
            for group in held:
                group.sort(key=_start)  # stable: file order among equal start times
                yield _unique(group, stats)
            return
        for group in spill.groups():
            yield _unique(group, stats)
    finally:
        if spill is not None:
            spill.close()


class _Spill:
    """A temporary SQLite file of spans keyed by (trace number, start, order read)."""

    def __init__(self, folder: Path | None) -> None:
        handle, name = tempfile.mkstemp(prefix="evalharness-traces-", suffix=".sqlite",
                                        dir=folder)
        os.close(handle)
        self.path = Path(name)
        # the groups may be read in another thread than the one that made them
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        for pragma in ("journal_mode=OFF", "synchronous=OFF", "locking_mode=EXCLUSIVE",
                       "temp_store=FILE", "cache_size=-32768"):
            self.db.execute(f"PRAGMA {pragma}")
        self.db.execute("CREATE TABLE spans (trace INTEGER, start INTEGER, seq INTEGER, "
                        "span TEXT)")
        self.rows: list[tuple[int, int, int, str]] = []
        self.seq = 0

    def add_all(self, groups: list[list[Span]]) -> None:
        """Every span of ``groups`` (the spans of trace number N in ``groups[N]``)."""
        for number, group in enumerate(groups):
            for span in group:
                self.add(number, span)

    def add(self, trace: int, span: Span) -> None:
        self.rows.append((trace, _start(span), self.seq, span.to_json()))
        self.seq += 1
        if len(self.rows) >= _INSERT_ROWS:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            self.db.execute("BEGIN")
            self.db.executemany("INSERT INTO spans VALUES (?, ?, ?, ?)", self.rows)
            self.db.execute("COMMIT")
            self.rows = []

    def groups(self) -> Iterator[list[Span]]:
        self.flush()
        self.db.execute("CREATE INDEX by_trace ON spans (trace, start, seq)")
        group: list[Span] = []
        texts: list[str] = []
        current = None
        for trace, text in self.db.execute(
                "SELECT trace, span FROM spans ORDER BY trace, start, seq"):
            if trace != current or len(texts) == _DECODE_ROWS:
                group += Span.from_jsons(texts) if texts else []
                texts = []
                if trace != current and group:
                    yield group
                    group = []
            current = trace
            texts.append(text)
        group += Span.from_jsons(texts) if texts else []
        if group:
            yield group

    def close(self) -> None:
        self.db.close()
        try:
            self.path.unlink()
        except OSError:
            pass
