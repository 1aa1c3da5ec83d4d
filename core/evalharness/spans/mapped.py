"""What mapping a trace produced, and why: the :class:`Mapped` record and :func:`explain`.

:func:`evalharness.spans.mapper.map_trace` returns a :class:`Mapped` per trace: the
:class:`~evalharness.models.Trace` it built, the question and join key it found, and per
component the span it chose, the selector that matched, the other candidates, the values it
extracted and where each came from, and what was missing, ambiguous or redacted.
:func:`explain` renders that for ``evalharness traces explain``.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from evalharness.models import Trace
from evalharness.spans.model import Span


class _Out(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True)


class SpanRef(_Out):
    """A span, as an explanation names it."""

    span_id: str
    """The span's id."""
    name: str
    """The span's name."""
    kind: str | None = None
    """The span's kind, as its format says it."""
    status: str | None = None
    """``OK``, ``ERROR``, ``UNSET`` or ``null``."""
    duration_ms: float | None = None
    """End minus start, when both are recorded."""
    source: str = ""
    """Where the span was read (file, line)."""

    @classmethod
    def of(cls, span: Span) -> SpanRef:
        return cls(span_id=span.span_id, name=span.name, kind=span.kind, status=span.status,
                   duration_ms=span.duration_ms, source=span.source)

    def label(self) -> str:
        parts = [f"`{self.name}`"]
        if self.kind:
            parts.append(self.kind)
        parts.append(self.span_id[:16])
        if self.status == "ERROR":
            parts.append("status ERROR")
        if self.source:
            parts.append(f"({self.source})")
        return " ".join(parts)


class Problem(_Out):
    """Something a reader of the mapped step should know."""

    kind: Literal["missing", "ambiguous", "redacted", "capture_off", "invalid", "error",
                  "note"]
    """``missing``: a value is not in the trace; ``ambiguous``: several spans or values, and
    the one chosen could be the wrong one; ``redacted``: hidden (all or part) when recorded;
    ``capture_off``: a chosen span records none of the component's output; ``invalid``: a
    value of the wrong type, or one the pipeline does not know (a route); ``error``: the span
    or the application failed; ``note``: how something was decided by a rule (what
    ``traces explain`` shows; nothing a score could be wrong by)."""
    field: str | None = None
    """The step field concerned (``answer``, ``ids``…), if one is."""
    message: str
    """The sentence a reader sees."""


class ValueSource(_Out):
    """Where one extracted value came from."""

    span: SpanRef
    """The span it was read from."""
    extractor: str
    """The field and path that found it."""


class ComponentExplanation(_Out):
    """How one component was found in the trace."""

    component: str
    """The component's name in the pipeline."""
    kind: str
    """Its kind."""
    status: Literal["mapped", "not_run", "error", "unmapped"]
    """``mapped``: a step was built (it may carry an error); ``not_run``: no span matched;
    ``error``: a span was required and none matched; ``unmapped``: no selector at all."""
    selector: str = ""
    """The selector, as it applied (compact YAML)."""
    origin: str = ""
    """Where the block comes from (a preset, a mapping file and line)."""
    chosen: list[SpanRef] = Field(default_factory=list)
    """The span(s) the step was built from."""
    candidates: int = 0
    """How many spans matched the selector (after dropping nested matches)."""
    others: list[SpanRef] = Field(default_factory=list)
    """Matching spans that were not chosen."""
    nested_dropped: int = 0
    """Matches dropped because they are inside another match (``outermost``)."""
    why: str = ""
    """Why the chosen span(s): the pick rule and the candidates."""
    ambiguous: bool = False
    """Whether the choice among the candidates could be wrong (an ``ambiguous`` problem says
    why): a declared ``pick`` landed on a span without the component's value while another
    candidate has it, or the default ``pick`` chose among candidates that carry different
    values. A declared ``pick`` whose span has the value is not ambiguous, however many
    candidates there were."""
    values: dict[str, Any] = Field(default_factory=dict)
    """The step's values as extracted (and ``first_stage`` of a reranked retriever)."""
    sources: dict[str, ValueSource] = Field(default_factory=dict)
    """Step field -> where its value was read."""
    problems: list[Problem] = Field(default_factory=list)
    """What was missing, ambiguous, redacted or decided."""


class Mapped(_Out):
    """One trace, mapped: the :class:`Trace` and everything said about how."""

    trace: Trace
    """The steps. ``case_id`` is the join key (else the trace id) until the caller sets it."""
    trace_id: str
    """The trace's id in its source."""
    question: str | None = None
    """The user's question, as the mapping's ``question`` found it."""
    join_key: str | None = None
    """The mapping's ``join`` value (a case id, a session id…), as text."""
    preset: str | None = None
    """The preset the mapping built on."""
    preset_reason: str | None = None
    """Why that preset: named, given, or guessed (from what)."""
    question_source: ValueSource | None = None
    """Where the question was read."""
    join_source: ValueSource | None = None
    """Where the join key was read."""
    components: dict[str, ComponentExplanation] = Field(default_factory=dict)
    """Component name -> how it was mapped, in pipeline order."""
    problems: list[Problem] = Field(default_factory=list)
    """Trace-level problems (question, join key, the application's own error)."""
    error: str | None = None
    """Why the trace could not be mapped at all (``trace.error`` says the same)."""


def _shorten(value: Any, limit: int = 160) -> str:
    if isinstance(value, list) and len(value) > 8:
        text = json.dumps(value[:8], ensure_ascii=False, default=str)[:-1] + \
            f", … {len(value) - 8} more]"
    else:
        text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def explain(mapped: Mapped) -> str:
    """A readable account of how a trace was mapped (``evalharness traces explain``)."""
    out: list[str] = []
    head = f"trace {mapped.trace_id}"
    if mapped.preset:
        head += f" — preset {mapped.preset}"
        if mapped.preset_reason:
            head += f" ({mapped.preset_reason})"
    out.append(head)
    if mapped.error:
        out.append(f"UNMAPPABLE: {mapped.error}")
    q = mapped.question
    out.append(f"question: {_shorten(q) if q is not None else '(not found)'}"
               + (f"   ← {_source_text(mapped.question_source)}" if mapped.question_source
                  else ""))
    out.append(f"join key: {mapped.join_key if mapped.join_key is not None else '(none)'}"
               + (f"   ← {_source_text(mapped.join_source)}" if mapped.join_source else ""))
    for p in mapped.problems:
        out.append(f"  ! {p.kind}: {p.message}")
    for name, ex in mapped.components.items():
        out.append("")
        out.append(f"{name} ({ex.kind}) — {ex.status.replace('_', ' ')}")
        if ex.selector:
            out.append(f"  selector: {ex.selector}   [{ex.origin}]")
        for ref in ex.chosen:
            dur = f", {ref.duration_ms:.1f} ms" if ref.duration_ms is not None else ""
            out.append(f"  span: {ref.label()}{dur}")
        if ex.why:
            out.append(f"  why: {ex.why}")
        if ex.others:
            out.append("  not chosen: " + "; ".join(r.label() for r in ex.others))
        for key, value in ex.values.items():
            if key == "usage_from":
                continue
            line = f"  {key}: {_shorten(value)}"
            if key in ex.sources:
                line += f"   ← {_source_text(ex.sources[key])}"
            if key == "usage" and "usage_from" in ex.values:
                line += f"   ← {ex.values['usage_from']}"
            out.append(line)
        for p in ex.problems:
            out.append(f"  ! {p.kind}: {p.message}")
    return "\n".join(out) + "\n"


def _source_text(src: ValueSource | None) -> str:
    if src is None:
        return ""
    return f"{src.extractor} of {src.span.label()}"

