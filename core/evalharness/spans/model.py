"""The one span model every trace reader produces (docs/traces.md).

OpenTelemetry/OpenInference spans, OTel GenAI spans, Langfuse observations and LangSmith runs
all become :class:`Span`: ids, parent, name, kind, times, attributes (flat, dotted keys, JSON
strings decoded), events and status, with where it was read from for error messages. The
mapping (:mod:`evalharness.spans.mapping`) then picks spans per pipeline component and
extracts each component's step from them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol


@dataclass(slots=True)
class SpanEvent:
    """A timestamped event on a span (an exception, a streamed token, a log)."""

    name: str
    time_ns: int | None = None
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Span:
    """One unit of work of a recorded run, whatever format it came from."""

    trace_id: str
    """The trace (one request of the application); lowercase hex for OTel formats, the
    source's own id otherwise (a Langfuse trace id, a LangSmith root run's trace_id)."""
    span_id: str
    parent_id: str | None
    """``None`` for a root span."""
    name: str
    kind: str | None = None
    """What the source says the span is: OpenInference ``openinference.span.kind`` (``LLM``,
    ``RETRIEVER``, ``CHAIN``, ``TOOL``, ``RERANKER``, ``EMBEDDING``, ``AGENT``), OTel
    GenAI's operation (``chat``, ``retrieval``, ``execute_tool``…), a Langfuse observation
    type (``GENERATION``, ``SPAN``, ``RETRIEVER``…; ``TRACE`` for a Langfuse trace record,
    the root of its observations), a LangSmith ``run_type`` (``llm``, ``retriever``,
    ``chain``, ``tool``…). ``None`` when the source says nothing."""
    start_ns: int | None = None
    end_ns: int | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
    """Flat, dotted keys (``llm.input_messages.0.message.content``); OTLP ``AnyValue`` unions
    unwrapped; values that are JSON texts of objects or arrays decoded (``input.value``).
    Formats with nested records keep them as nested values under their own top-level keys
    (Langfuse: ``input``, ``output``, ``metadata``, ``usage``…; LangSmith: ``inputs``,
    ``outputs``, ``metadata``, ``usage``…)."""
    events: list[SpanEvent] = field(default_factory=list)
    status: str | None = None
    """``OK``, ``ERROR`` or ``UNSET`` (``None``: not recorded)."""
    status_message: str | None = None
    resource: dict[str, Any] = field(default_factory=dict)
    """Resource attributes (``service.name``…), flat like ``attributes``."""
    scope: str | None = None
    """The instrumentation scope (library) name, e.g. ``openinference.instrumentation.
    langchain``; the SDK name for Langfuse/LangSmith records."""
    scope_version: str | None = None
    source: str = ""
    """Where the span was read: ``file, line N`` (for error messages)."""

    @property
    def duration_ms(self) -> float | None:
        """End minus start; ``None`` when a time is missing or the span ends before it
        starts (never a made-up 0)."""
        if self.start_ns is None or self.end_ns is None or self.end_ns < self.start_ns:
            return None
        return (self.end_ns - self.start_ns) / 1e6

    def to_json(self) -> str:
        """One line, for the on-disk trace index (:meth:`from_jsons` reads lines back)."""
        return json.dumps({
            "t": self.trace_id, "s": self.span_id, "p": self.parent_id, "n": self.name,
            "k": self.kind, "b": self.start_ns, "e": self.end_ns, "a": self.attributes,
            "ev": [[x.name, x.time_ns, x.attributes] for x in self.events],
            "st": self.status, "sm": self.status_message, "r": self.resource,
            "sc": self.scope, "sv": self.scope_version, "src": self.source},
            ensure_ascii=False, default=str, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> Span:
        """The span of one :meth:`to_json` line."""
        return cls._of(json.loads(text))

    @classmethod
    def from_jsons(cls, texts: list[str]) -> list[Span]:
        """The spans of several :meth:`to_json` lines, decoded at once so that they share
        their attribute keys (the decoder keeps one string per distinct key in a call; spans
        decoded one by one take twice the memory); their names, kinds, statuses and scopes
        share strings too, and consecutive equal resources are one dict, as a reader gives
        them.

        >>> a, b = Span.from_jsons([Span("t", "a", None, "x", resource={"r": 1}).to_json(),
        ...                         Span("t", "b", "a", "y", resource={"r": 1}).to_json()])
        >>> (b.span_id, b.parent_id, a.resource is b.resource)
        ('b', 'a', True)
        """
        spans = []
        resource: dict[str, Any] | None = None
        words: dict[str, str] = {}
        for d in json.loads("[" + ",".join(texts) + "]"):
            if d["r"] == resource:
                d["r"] = resource
            resource = d["r"]
            for key in ("n", "k", "st", "sc", "sv"):
                if d[key] is not None:
                    d[key] = words.setdefault(d[key], d[key])
            spans.append(cls._of(d))
        return spans

    @classmethod
    def _of(cls, d: dict[str, Any]) -> Span:
        return cls(trace_id=d["t"], span_id=d["s"], parent_id=d["p"], name=d["n"], kind=d["k"],
                   start_ns=d["b"], end_ns=d["e"], attributes=d["a"],
                   events=[SpanEvent(n, t, a) for n, t, a in d["ev"]], status=d["st"],
                   status_message=d["sm"], resource=d["r"], scope=d["sc"],
                   scope_version=d["sv"], source=d["src"])


class Reader(Protocol):
    """A trace format: ``sniff`` recognises it from the first bytes of a file, ``read``
    streams its spans (in file order; spans of several traces may interleave). A malformed
    record raises :class:`~evalharness.errors.InputError` naming the file, the line and the
    field."""

    name: str
    """The ``format:`` value that selects it, e.g. ``otlp-json``."""
    written_against: str
    """The SDK / semantic-convention versions the reader was written against."""
    expects: str
    """What the start of such a file holds, for the error on a file no reader recognises. A
    reader may also define ``near(text) -> (offset, what is missing) | None`` to say where a
    file that half-matches its format stops matching (see ``readers.detect``)."""

    def sniff(self, head: bytes) -> bool: ...

    def read(self, path: Path) -> Iterator[Span]: ...
