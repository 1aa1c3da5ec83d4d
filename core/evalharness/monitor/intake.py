"""Intake: the monitor's sources → traces not yet in the store, mapped onto the pipeline, each
with what sampling and the store need (times, route, user, attributes), and the sampling
decision (docs/monitor.md, "Sampling").

The sources are read as a scenario's ``traces:`` reads them (:mod:`evalharness.spans`: each
file's reader, spans grouped by trace across files, the scenario's mapping); a trace id
already stored is skipped before it is mapped. In a source that may grow (a folder, a glob),
a trace whose root span has not arrived yet is left for the next pass (counted as pending).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evalharness.errors import InputError
from evalharness.models import BUILTIN_STEPS, Trace
from evalharness.monitor.config import Monitor, Rule, Sampling
from evalharness.spans.group import GroupStats
from evalharness.spans.importer import TraceMapper, read_groups
from evalharness.spans.mapped import Mapped
from evalharness.spans.mapping import MappingError
from evalharness.spans.model import Span
from evalharness.spans.paths import trace_files

USER_ATTRIBUTES = ("user.id", "enduser.id", "session.user_id", "langfuse.user.id")
"""Trace attributes a user id is read from (OpenInference, OpenTelemetry, Langfuse), the first
found on the root span."""

ATTRIBUTE_BYTES = 4_000
"""Root-span attributes kept for feedback keys: scalars only, at most this many bytes."""


@dataclass
class Incoming:
    """One trace read from the sources, not yet in the store."""

    trace_id: str
    spans: list[Span]
    source: str
    mapped: Mapped | None = None
    start: datetime | None = None
    end: datetime | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
    user_id: str | None = None
    error: str | None = None
    """Why the trace could not be mapped (then it is stored ``unmappable``)."""

    @property
    def trace(self) -> Trace | None:
        return self.mapped.trace if self.mapped is not None else None

    @property
    def routes(self) -> list[str] | None:
        """The router's routes, when the trace has a router step."""
        trace = self.trace
        router = getattr(trace, "router", None) if trace is not None else None
        return list(router.routes) if router is not None else None

    @property
    def route(self) -> str | None:
        """The routes joined with ``+`` (``sql+blog``); ``None`` without a router step."""
        routes = self.routes
        return "+".join(sorted(routes)) if routes is not None else None

    @property
    def failed(self) -> bool:
        """The application recorded an error on the trace or one of its steps."""
        trace = self.trace
        if self.error or trace is None or trace.error:
            return True
        steps = [getattr(trace, n, None) for n in BUILTIN_STEPS] + list(trace.steps.values())
        return any(isinstance(getattr(s, "error", None), str) and s.error for s in steps)


@dataclass
class Pass:
    """What one pass over the sources found."""

    files: list[Path] = field(default_factory=list)
    seen: int = 0
    """Traces in the sources."""
    known: int = 0
    """Of those, already in the store (skipped)."""
    pending: int = 0
    """Left for the next pass: their root span has not arrived."""
    too_old: int = 0
    """Skipped: they started before the store's retention (stored, they would be deleted at
    the next pass and read again)."""
    held_back: int = 0
    """Left in the sources, not mapped: the queue was full (back-pressure)."""
    pending_files: set[Path] = field(default_factory=set)
    """Files holding spans of a pending trace (not done: read again next pass)."""
    stats: GroupStats = field(default_factory=GroupStats)


def files_of(monitor: Monitor, source: Path) -> list[Path]:
    """The complete files of one source; none yet is no error for a source that may grow
    (a receiver's folder before its first file, a glob that matches nothing yet)."""
    try:
        return trace_files(source, what="monitor source")
    except InputError:
        if monitor.growing(source) and (source.is_dir() or not source.exists()):
            return []
        raise


def source_files(monitor: Monitor) -> list[Path]:
    """Every complete file of every source, each once, in the sources' order."""
    out: dict[Path, None] = {}
    for source in monitor.sources:
        for p in files_of(monitor, source):
            out.setdefault(p.resolve(), None)
    return list(out)


def _time(ns: int | None) -> datetime | None:
    return datetime.fromtimestamp(ns / 1e9, UTC).replace(tzinfo=None) if ns else None


def _scalars(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The root span's scalar attributes, up to :data:`ATTRIBUTE_BYTES`."""
    out: dict[str, Any] = {}
    size = 0
    for key, value in attributes.items():
        if isinstance(value, (str, int, bool)) or (isinstance(value, float)
                                                   and math.isfinite(value)):
            size += len(key) + len(str(value))
            if size > ATTRIBUTE_BYTES:
                break
            out[key] = value
    return out


def read_pass(monitor: Monitor, known: set[str], step_models: Mapping[str, Any] | None = None,
              *, summary: Pass | None = None,
              older_than: datetime | None = None,
              hold: Callable[[], bool] | None = None,
              files: list[Path] | None = None) -> Iterator[Incoming]:
    """Every trace of the sources whose id is not in ``known``, mapped, in the order the
    sources hold them; ``summary`` counts what was seen, skipped and left pending. A trace
    that started before ``older_than`` (naive UTC: the retention's cut-off) is skipped; while
    ``hold()`` is true (the queue is full) new traces are counted and left, unmapped.
    ``files``: read only these (default: every file of the sources)."""
    summary = summary if summary is not None else Pass()
    files = source_files(monitor) if files is None else files
    summary.files = files
    growing = {p.resolve() for source in monitor.sources if monitor.growing(source)
               for p in files_of(monitor, source)}
    _, groups = read_groups(files, fmt=monitor.traces.format, stats=summary.stats)
    mapper = TraceMapper(monitor.mapping, monitor.scenario.pipeline, step_models)
    for group in groups:
        summary.seen += 1
        trace_id = group[0].trace_id
        if trace_id in known:
            summary.known += 1
            continue
        roots = [s for s in group if s.parent_id is None]
        source = (group[0].source or "").split(", ")[0]  # "FILE, line N": the file
        if not roots and Path(source).resolve() in growing:
            summary.pending += 1
            summary.pending_files |= {Path((s.source or "").split(", ")[0]).resolve()
                                      for s in group}
            continue
        root = roots[0] if roots else group[0]
        starts = [s.start_ns for s in group if s.start_ns]
        ends = [s.end_ns for s in group if s.end_ns]
        start = _time(min(starts) if starts else None)
        if older_than is not None and start is not None and start < older_than:
            summary.too_old += 1
            continue
        if hold is not None and hold():
            summary.held_back += 1
            continue
        attributes = _scalars(root.attributes)
        user = next((str(attributes[a]) for a in USER_ATTRIBUTES if a in attributes), None)
        incoming = Incoming(trace_id=trace_id, spans=group, source=source,
                            start=start,
                            end=_time(max(ends) if ends else None),
                            attributes=attributes, user_id=user)
        try:  # the mapping is resolved from the first trace, as a scenario's is
            incoming.mapped = mapper(group)
            if incoming.mapped.error:
                incoming.error = incoming.mapped.error
        except MappingError:
            raise
        except Exception as exc:  # noqa: BLE001 - one bad trace is stored unmappable
            incoming.error = f"{type(exc).__name__}: {exc}"
        yield incoming


# --- sampling ---------------------------------------------------------------------------------


def rank(seed: int, trace_id: str) -> float:
    """The trace's place in ``[0, 1)``: a hash of the seed and its id, so every pass (and a
    restart) decides the same.

    >>> rank(0, "abc") == rank(0, "abc"), rank(0, "abc") == rank(1, "abc")
    (True, False)
    >>> 0 <= rank(0, "abc") < 1
    True
    """
    digest = hashlib.sha256(f"{seed}\0{trace_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def matches(rule: Rule, incoming: Incoming, thumbs: int | None) -> bool:
    """Whether ``incoming`` (with the user's ``thumbs``: 1 up, -1 down) matches every key of
    ``rule``."""
    if rule.feedback is not None and thumbs != (-1 if rule.feedback == "down" else 1):
        return False
    if rule.error is not None and incoming.failed != rule.error:
        return False
    return not (rule.route is not None and rule.route not in (incoming.routes or []))


class Sampler:
    """Decides, trace by trace, whether it is evaluated: an always-rule, else the rate (per
    route stratum when ``by: route``: a stratum whose evaluated share falls below the rate
    catches up). ``counts`` (stratum -> [seen, sampled]) come from the store at the start of a
    pass, so a restart decides as the killed process would have."""

    def __init__(self, sampling: Sampling, counts: dict[str | None, list[int]] | None = None,
                 factor: Callable[[], float] | None = None) -> None:
        self.sampling = sampling
        self.counts = counts if counts is not None else {}
        self.factor = factor
        """The judge budget's factor on the rate, asked at each decision (``None``: 1)."""

    def decide(self, incoming: Incoming, thumbs: int | None = None) -> tuple[bool, str]:
        """``(evaluated, reason)``: ``always: RULE``, ``rate``, ``budget`` (the rate would
        have taken it, the judge's budget did not) or ``not sampled``."""
        s = self.sampling
        stratum = incoming.route if s.by == "route" else None
        seen_sampled = self.counts.setdefault(stratum, [0, 0])
        seen_sampled[0] += 1
        for rule in s.always:
            if matches(rule, incoming, thumbs):
                seen_sampled[1] += 1
                return True, f"always: {rule.label()}"
        rate = s.rate * (self.factor() if self.factor is not None else 1.0)
        place = rank(s.seed, incoming.trace_id)
        take = place < rate
        if not take and s.by == "route" and rate > 0:
            take = seen_sampled[1] < math.ceil(rate * seen_sampled[0] - 1e-9)
            if take:
                seen_sampled[1] += 1
                return True, "rate (route catching up)"
        if take:
            seen_sampled[1] += 1
            return True, "rate"
        return False, "budget" if place < s.rate else "not sampled"


def thumbs_of(rows: Iterable[tuple[str | None, str | None, str | None, int | None]],
              key: str) -> dict[str, int]:
    """Feedback rows ``(trace_id, key_attribute, key_value, thumbs)`` → the latest thumbs per
    trace id or per attribute value (``key:value``)."""
    out: dict[str, int] = {}
    for trace_id, attribute, value, thumbs in rows:
        if thumbs is None:
            continue
        if trace_id or attribute == "trace_id":
            out[trace_id or value] = thumbs
        elif attribute and value is not None:
            out[f"{attribute}:{value}"] = thumbs
    return out


def thumbs_for(incoming: Incoming, thumbs: Mapping[str, int], key: str) -> int | None:
    """The user's thumbs on ``incoming``, by trace id or by the attribute ``key``."""
    if incoming.trace_id in thumbs:
        return thumbs[incoming.trace_id]
    if key != "trace_id" and key in incoming.attributes:
        return thumbs.get(f"{key}:{incoming.attributes[key]}")
    return None


def attributes_json(incoming: Incoming) -> str:
    return json.dumps(incoming.attributes, ensure_ascii=False, default=str)
