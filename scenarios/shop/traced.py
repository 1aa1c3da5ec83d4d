"""The shop assistant instrumented with the OpenTelemetry SDK: its spans to a file or over OTLP/HTTP,
for every case once or as live traffic.

The round trip of docs/traces-roundtrip.md: record what the ``assistant`` package does as an
instrumented application would, import the export with a mapping, and score it.
``instrument()`` wraps the assistant's four component functions (``route``, ``text_to_sql``,
``retrieve``, ``generate``) the way an auto-instrumentor does, each call a span of its own
under one span per question; two conventions:

* ``openinference``: ``openinference.span.kind`` CHAIN (the question, the router, the
  text-to-SQL chain), RETRIEVER (``retrieval.documents.N.document.id/content/score``) and LLM
  (``llm.input_messages``/``llm.output_messages``, ``llm.token_count.*``, the prompt's
  variables in ``llm.prompt_template.variables``); ``input.value``/``output.value`` with
  their mime types; the case id in the root's ``metadata``.
* ``genai``: OpenTelemetry GenAI — ``invoke_agent`` at the root, ``execute_tool`` for the
  router and text-to-SQL (``gen_ai.tool.call.arguments``/``result``; a database client span
  with ``db.query.text`` under it), ``retrieval`` (``gen_ai.retrieval.documents`` ``[{id,
  score, content}]``) and ``chat`` (``gen_ai.input.messages``/``output.messages``,
  ``gen_ai.usage.input_tokens``/``output_tokens``); the case id in ``shop.case_id``.

The assistant has no model: the tokens it reports (an approximation) are recorded on the
text-to-SQL and generator spans themselves. Spans go through a ``BatchSpanProcessor`` to
:class:`OTLPJsonLinesExporter`, which writes what the Collector's file exporter writes (one
``ExportTraceServiceRequest`` a line, hex ids), or with ``--otlp-endpoint`` to the SDK's own
OTLP/HTTP exporter (protobuf; the Python exporter sends no JSON). Run it::

    python scenarios/shop/traced.py --convention genai --out spans.jsonl [--cases FILE]

and import the file with ``traces: {path: spans.jsonl, mapping: shop/traces-genai.yaml}``.
``--fault NAME`` degrades one component as ``scenarios/shop-fault-*.yaml`` do (from question
``--fault-after K`` + 1 on). ``--traffic N`` makes it live traffic (:func:`traffic`): N
questions drawn from the cases (a few rephrased) by simulated users, ``--rate`` a second,
each root span with ``user.id`` and ``session.id``; the trace id is what the app gives the
user, and ``--feedback FILE`` writes some users' thumbs, scores and comments keyed by it::

    python scenarios/shop/traced.py --otlp-endpoint http://127.0.0.1:4318 --traffic 500 \
        --rate 5 --fault generator --fault-after 250 --feedback feedback.jsonl

``--fault`` also takes the assistant's ``LIVE_FAULTS``, production incidents of live traffic
only (``schema_migration``: a renamed column breaks the text-to-SQL queries that read it).
``--simulated-start WHEN --per-day N`` gives the traffic a simulated schedule *as it is sent*:
question i arrives at the i-th time of a seeded Poisson process (:func:`arrivals`), N a day on
average from WHEN, and its spans are started and ended at that time plus their real offsets
from the question's start (so they keep their durations and order), and so are the feedback's
``at``. A few seconds of traffic then hold days of it, as drift checks' windows need, with no
file rewritten afterwards::

    python scenarios/shop/traced.py --otlp-endpoint http://127.0.0.1:4318 --traffic 160 \
        --simulated-start 2026-11-01 --per-day 40 --fault schema_migration --fault-after 80
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any, Literal
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer

from evalharness.importing import import_file
from evalharness.models import Case
from evalharness.testing.otlp import collector_line

HERE = Path(__file__).resolve().parent
CASES = HERE / "cases.jsonl"
SCOPE = ("shop.assistant", "1.0.0")
"""The instrumentation scope: our own tracer, not a framework's (no preset is guessed from
it; the mappings name theirs)."""

Convention = Literal["openinference", "genai"]
CONVENTIONS: tuple[str, ...] = ("openinference", "genai")
COMPONENTS = ("route", "text_to_sql", "retrieve", "generate")
"""The assistant's component functions that :func:`instrument` wraps."""

SYSTEM_PROMPT = "Answer the question from the context only."
OTLP_PATH = "/v1/traces"


def load_assistant() -> ModuleType:
    """The ``assistant`` package as a copy of its own, under a private name: :func:`instrument`
    patches its functions, which a scenario that runs ``shop.assistant:answer`` in the same
    process must not see."""
    return import_file(HERE / "assistant", "shop_traced")


# --- the exporter ----------------------------------------------------------------------------


class OTLPJsonLinesExporter(SpanExporter):
    """Each exported batch as one line of OTLP JSON, like the Collector's ``file`` exporter
    (``format: json``): no collector needed."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.write_text("")
        self.written = 0
        """Spans written so far."""
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        line = collector_line(spans)
        with self._lock, self.path.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            self.written += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


# --- the two conventions ---------------------------------------------------------------------


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _router_output(step: Any) -> dict[str, Any]:
    return {"routes": step.routes, "scores": step.scores, "confidence": step.confidence}


def _sql_output(step: Any) -> dict[str, Any]:
    return {"sql": step.sql, "columns": step.columns, "rows": step.rows}


def _usage(step: Any, convention: Convention) -> dict[str, int]:
    usage = step.usage
    if usage is None:
        return {}
    if convention == "openinference":
        return {"llm.token_count.prompt": usage.prompt_tokens,
                "llm.token_count.completion": usage.completion_tokens,
                "llm.token_count.total": usage.prompt_tokens + usage.completion_tokens}
    return {"gen_ai.usage.input_tokens": usage.prompt_tokens,
            "gen_ai.usage.output_tokens": usage.completion_tokens}


def _fail(span: trace.Span, error: str | None, at: int | None = None) -> None:
    """A component that reports an error: the span's status and an exception event (at
    ``at``, nanoseconds since the epoch; None: now)."""
    if error:
        kind, _, message = error.partition(": ")
        span.add_event("exception", {"exception.type": kind, "exception.message": message},
                       timestamp=at)
        span.set_status(Status(StatusCode.ERROR, error))


def _ns(when: datetime) -> int:
    """``when`` (aware, or naive UTC) in nanoseconds since the epoch, as spans' times are."""
    return (_aware(when) - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1) * 1000


class _Spans:
    """Span names, kinds and attributes of one convention, per component call."""

    def __init__(self, tracer: Tracer, convention: Convention) -> None:
        self.tracer = tracer
        self.convention = convention
        self.shift: int | None = None
        """Nanoseconds added to the real clock for the spans of the question being answered
        at a simulated time (:meth:`root`'s ``at``); None: the SDK's own clock."""

    def now(self) -> int | None:
        """The time a span starts or ends at, or an event happens: the real clock moved by
        :attr:`shift`; None (the SDK's clock) without one."""
        return None if self.shift is None else time.time_ns() + self.shift

    @contextmanager
    def _span(self, name: str, *, start: int | None = None, **kw: Any) -> Iterator[trace.Span]:
        """``tracer.start_as_current_span(name, **kw)``, started at ``start`` (default
        :meth:`now`) and ended at :meth:`now`: explicit times when the question has a
        simulated one, else the SDK's, as before (the span ends even if the call raises)."""
        if self.shift is None:
            with self.tracer.start_as_current_span(name, **kw) as span:
                yield span
            return
        span = None
        try:
            with self.tracer.start_as_current_span(
                    name, start_time=self.now() if start is None else start,
                    end_on_exit=False, **kw) as span:
                yield span
        finally:
            if span is not None:
                span.end(end_time=self.now())

    @contextmanager
    def root(self, case: Case, extra: Mapping[str, Any] | None = None,
             at: datetime | None = None) -> Iterator[tuple[Callable[[Any], None], str]]:
        """The question's span; yields ``(done, trace id)``: ``done(result)`` records the
        answer and the error, the trace id (32 hex digits) is what the app gives the user.
        ``at``: the question's simulated arrival, where the root span starts; every span of
        the question is then moved by the same amount (:attr:`shift`), keeping its real
        offset from the question's start and its real duration."""
        q = case.question
        if self.convention == "openinference":
            attrs = {"openinference.span.kind": "CHAIN", "input.value": _json({"question": q}),
                     "input.mime_type": "application/json",
                     "metadata": _json({"case_id": case.id})}
            name = "shop_assistant"
        else:
            attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "shop",
                     "shop.case_id": case.id}
            name = "invoke_agent shop"
        attrs.update(extra or {})
        start = None
        if at is not None:
            start = _ns(at)
            self.shift = start - time.time_ns()
        try:
            with self._span(name, start=start, attributes=attrs) as span:
                def done(result: Any) -> None:
                    answer = result.generator.answer if result.generator else None
                    if self.convention == "openinference" and answer is not None:
                        span.set_attributes({"output.value": answer,
                                             "output.mime_type": "text/plain"})
                    if result.error:
                        _fail(span, result.error, self.now())
                yield done, format(span.get_span_context().trace_id, "032x")
        finally:
            self.shift = None

    def route(self, call: Callable[..., Any], question: str, *args: Any, **kw: Any) -> Any:
        if self.convention == "openinference":
            name, attrs = "route", {"openinference.span.kind": "CHAIN", "input.value": question,
                                    "input.mime_type": "text/plain"}
        else:
            name, attrs = "execute_tool route", {
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "route",
                "gen_ai.tool.type": "function",
                "gen_ai.tool.call.arguments": _json({"question": question})}
        with self._span(name, attributes=attrs) as span:
            step = call(question, *args, **kw)
            out = _json(_router_output(step))
            if self.convention == "openinference":
                span.set_attributes({"output.value": out,
                                     "output.mime_type": "application/json"})
            else:
                span.set_attribute("gen_ai.tool.call.result", out)
            return step

    def text_to_sql(self, call: Callable[..., Any], question: str, *args: Any,
                    **kw: Any) -> Any:
        if self.convention == "openinference":
            name, attrs = "text_to_sql", {"openinference.span.kind": "CHAIN",
                                          "input.value": question,
                                          "input.mime_type": "text/plain"}
        else:
            name, attrs = "execute_tool text_to_sql", {
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "text_to_sql",
                "gen_ai.tool.type": "function",
                "gen_ai.tool.call.arguments": _json({"question": question})}
        with self._span(name, attributes=attrs) as span:
            step, slots = call(question, *args, **kw)
            if self.convention == "genai":
                # the query as the database client instrumentation records it
                with self._span(
                        "SELECT shop", kind=SpanKind.CLIENT,
                        attributes={"db.system.name": "sqlite", "db.operation.name": "SELECT",
                                    "db.query.text": step.sql}) as db:
                    _fail(db, step.error, self.now())
            out = _json(_sql_output(step))
            if self.convention == "openinference":
                span.set_attributes({"output.value": out,
                                     "output.mime_type": "application/json"})
            else:
                span.set_attribute("gen_ai.tool.call.result", out)
            span.set_attributes(_usage(step, self.convention))
            _fail(span, step.error, self.now())
            return step, slots

    def retrieve(self, call: Callable[..., Any], question: str, *args: Any, **kw: Any) -> Any:
        if self.convention == "openinference":
            name, attrs = "retrieve", {"openinference.span.kind": "RETRIEVER",
                                       "input.value": question,
                                       "input.mime_type": "text/plain"}
        else:
            name, attrs = "retrieval", {"gen_ai.operation.name": "retrieval",
                                        "gen_ai.data_source.id": "shop-blog",
                                        "gen_ai.retrieval.query.text": question}
        with self._span(name, attributes=attrs) as span:
            step = call(question, *args, **kw)
            docs = list(zip(step.ids, step.texts or [], step.scores or [], strict=True))
            if self.convention == "openinference":
                for i, (doc_id, text, score) in enumerate(docs):
                    span.set_attributes({f"retrieval.documents.{i}.document.id": doc_id,
                                         f"retrieval.documents.{i}.document.content": text,
                                         f"retrieval.documents.{i}.document.score": score})
            else:
                span.set_attribute("gen_ai.retrieval.documents", _json(
                    [{"id": d, "score": s, "content": t} for d, t, s in docs]))
            return step

    def generate(self, call: Callable[..., Any], question: str, *args: Any,
                 **kw: Any) -> Any:
        # the prompt is known only once the step says which contexts it was given
        if self.convention == "openinference":
            name, attrs = "generate", {"openinference.span.kind": "LLM",
                                       "llm.model_name": "shop-extractive",
                                       "llm.provider": "shop"}
        else:
            name, attrs = "chat shop-extractive", {
                "gen_ai.operation.name": "chat", "gen_ai.provider.name": "shop",
                "gen_ai.request.model": "shop-extractive"}
        kind = SpanKind.CLIENT if self.convention == "genai" else SpanKind.INTERNAL
        with self._span(name, kind=kind, attributes=attrs) as span:
            step = call(question, *args, **kw)
            contexts = step.contexts or []
            if self.convention == "openinference":
                variables = {"question": question, "contexts": contexts}
                span.set_attributes({
                    "input.value": _json(variables), "input.mime_type": "application/json",
                    "llm.prompt_template.template": SYSTEM_PROMPT + "\n\n{contexts}\n\n{question}",
                    "llm.prompt_template.variables": _json(variables),
                    "llm.input_messages.0.message.role": "system",
                    "llm.input_messages.0.message.content": "\n\n".join(
                        [SYSTEM_PROMPT, *contexts]),
                    "llm.input_messages.1.message.role": "user",
                    "llm.input_messages.1.message.content": question,
                    "llm.output_messages.0.message.role": "assistant",
                    "llm.output_messages.0.message.content": step.answer,
                    "output.value": step.answer, "output.mime_type": "text/plain"})
            else:
                span.set_attributes({
                    "gen_ai.system_instructions": _json(
                        [{"type": "text", "content": SYSTEM_PROMPT}]),
                    # the contexts as a system message, one part each; then the question
                    "gen_ai.input.messages": _json([
                        {"role": "system",
                         "parts": [{"type": "text", "content": c} for c in contexts]},
                        {"role": "user", "parts": [{"type": "text", "content": question}]}]),
                    "gen_ai.output.messages": _json([
                        {"role": "assistant", "finish_reason": "stop",
                         "parts": [{"type": "text", "content": step.answer}]}]),
                    "gen_ai.response.finish_reasons": ["stop"]})
            span.set_attributes(_usage(step, self.convention))
            _fail(span, step.error, self.now())
            return step


class Instrumented:
    """The assistant under one root span per question: ``answer(case)`` as the assistant's
    ``answer`` (the :class:`Trace`), :meth:`ask` with the trace id too.

    A fault is applied *inside* its component's span, so the span records what the faulty
    component did: ``answer(case, fault=...)`` applies the router and generator faults to a
    step after the component's call, and calls ``retrieve_weak`` in place of ``retrieve``
    (no span at all); here the component function itself is swapped for the faulty one while
    the question is answered (``text2sql``'s fault is an argument of its call already). The
    trace is the same as ``answer(case, fault=...)``'s (tests/test_traced_shop.py).

    The assistant's ``LIVE_FAULTS``, which ``answer`` does not take, are applied here only:
    ``schema_migration`` runs ``text_to_sql`` on the migrated catalog (``faults.
    migrated_catalog``)."""

    def __init__(self, assistant: ModuleType, spans: _Spans,
                 originals: Mapping[str, Callable[..., Any]]) -> None:
        self.assistant, self.spans, self.originals = assistant, spans, originals
        self.fault: str | None = None
        """The fault of the question being answered."""

    def component(self, name: str, *args: Any, **kw: Any) -> Any:
        """Call component ``name`` (one of :data:`COMPONENTS`) in its span, faulty if the
        question's fault is its."""
        return getattr(self.spans, name)(self._faulty(name), *args, **kw)

    def _faulty(self, name: str) -> Callable[..., Any]:
        original, faults = self.originals[name], self.assistant.faults
        if (self.fault, name) == ("router", "route"):
            return lambda *args, **kw: faults.single_route(original(*args, **kw))
        if (self.fault, name) == ("retriever", "retrieve"):
            return faults.retrieve_weak
        if (self.fault, name) == ("generator", "generate"):
            return lambda *args, **kw: faults.invent_figures(original(*args, **kw))
        if (self.fault, name) == ("schema_migration", "text_to_sql"):
            return lambda question, cat, *args, **kw: original(
                question, faults.migrated_catalog(cat), *args, **kw)
        return original

    def ask(self, case: Case, *, fault: str | None = None,
            attributes: Mapping[str, Any] | None = None,
            at: datetime | None = None) -> tuple[Any, str]:
        """The assistant's trace for ``case`` (``fault``: one of its ``FAULTS`` or
        ``LIVE_FAULTS``, or None) and the OTel trace id, in hex; ``attributes`` go on the root
        span (``user.id``…). ``at``: the question's simulated arrival (aware, or naive UTC),
        where its spans start (:meth:`_Spans.root`); None: now, by the SDK's clock."""
        valid = faults_of(self.assistant)
        if fault is not None and fault not in valid:
            raise ValueError(f"unknown fault {fault!r}; valid values: "
                             f"{', '.join(valid)} (or none)")
        self.fault = fault
        try:
            with self.spans.root(case, attributes, at) as (done, trace_id):
                result = self.assistant.answer(
                    case, fault=fault if fault == "text2sql" else None)
                done(result)
                return result, trace_id
        finally:
            self.fault = None

    def __call__(self, case: Case, *, fault: str | None = None,
                 attributes: Mapping[str, Any] | None = None) -> Any:
        return self.ask(case, fault=fault, attributes=attributes)[0]


def faults_of(assistant: ModuleType) -> tuple[str, ...]:
    """The faults :meth:`Instrumented.ask` takes: the assistant's ``FAULTS`` (its scenario
    variants') and ``LIVE_FAULTS`` (live traffic's only)."""
    return (*assistant.FAULTS, *assistant.faults.LIVE_FAULTS)


@contextmanager
def instrument(assistant: ModuleType, tracer: Tracer,
               convention: Convention) -> Iterator[Instrumented]:
    """Wrap the assistant's component functions in spans (restored on exit) and give
    ``answer(case)`` that runs the assistant under one root span per case (an
    :class:`Instrumented`). Not thread-safe: one case at a time while instrumented."""
    if convention not in CONVENTIONS:
        raise ValueError(f"unknown convention {convention!r}; use one of "
                         f"{', '.join(CONVENTIONS)}")
    originals = {name: getattr(assistant, name) for name in COMPONENTS}
    app = Instrumented(assistant, _Spans(tracer, convention), originals)

    def wrap(name: str) -> Callable[..., Any]:
        return lambda *args, **kw: app.component(name, *args, **kw)

    for name in COMPONENTS:
        setattr(assistant, name, wrap(name))
    try:
        yield app
    finally:
        for name, original in originals.items():
            setattr(assistant, name, original)


def read_cases(path: str | Path) -> list[Case]:
    with open(path, encoding="utf-8") as fh:
        return [Case.model_validate_json(line) for line in fh if line.strip()]


# --- where the spans go ----------------------------------------------------------------------


class CountingExporter(SpanExporter):
    """Another exporter, counting the spans it took and those it dropped (an OTLP exporter
    gives a batch up after its retries)."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.exported = 0
        self.dropped = 0
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self.inner.export(spans)
        with self._lock:
            if result is SpanExportResult.SUCCESS:
                self.exported += len(spans)
            else:
                self.dropped += len(spans)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.inner.force_flush(timeout_millis)


def otlp_url(endpoint: str) -> str:
    """Where spans are POSTed: ``endpoint`` as given, or with ``/v1/traces`` added when it
    names no path (as the SDK does with ``OTEL_EXPORTER_OTLP_ENDPOINT``).

    >>> otlp_url("http://127.0.0.1:4318")
    'http://127.0.0.1:4318/v1/traces'
    >>> otlp_url("http://collector:4318/v1/traces")
    'http://collector:4318/v1/traces'
    """
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"--otlp-endpoint {endpoint!r}: not an http(s) URL; give e.g. "
                         "http://127.0.0.1:4318 (what `evalharness traces receive` prints)")
    return endpoint if parts.path.strip("/") else endpoint.rstrip("/") + OTLP_PATH


def span_exporter(out: str | Path | None = None, endpoint: str | None = None,
                  timeout: float = 10.0) -> CountingExporter:
    """The OTLP JSON lines file ``out``, or the SDK's OTLP/HTTP exporter (protobuf) sending
    to ``endpoint``; exactly one of them."""
    if (out is None) == (endpoint is None):
        raise ValueError("give either a file (--out) or an OTLP/HTTP endpoint "
                         "(--otlp-endpoint), not both or neither")
    if out is not None:
        return CountingExporter(OTLPJsonLinesExporter(out))
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        raise ImportError("--otlp-endpoint needs the OpenTelemetry OTLP/HTTP exporter: pip "
                          "install opentelemetry-exporter-otlp-proto-http (or "
                          "'evalharness[instrumented]')") from None
    return CountingExporter(OTLPSpanExporter(endpoint=otlp_url(str(endpoint)),
                                             timeout=timeout))


class SeededIds(IdGenerator):
    """Trace and span ids drawn from a seeded generator: a seeded run makes the same ids
    again (two runs into one receiver folder need two seeds: a reader keeps a span once)."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(f"{seed}:ids")

    def generate_span_id(self) -> int:
        return self._rng.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self._rng.getrandbits(128) or 1


def _provider(exporter: SpanExporter, seed: int | None) -> TracerProvider:
    provider = TracerProvider(resource=Resource({"service.name": "shop-assistant",
                                                 "service.version": "1.0.0"}),
                              **({"id_generator": SeededIds(seed)} if seed is not None else {}))
    provider.add_span_processor(BatchSpanProcessor(exporter, max_export_batch_size=64))
    return provider


def _aware(when: datetime) -> datetime:
    """``when`` with a time zone (naive: UTC)."""
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _fault_of(index: int, fault: str | None, fault_after: int) -> str | None:
    """The fault of question ``index`` (from 0): on from question ``fault_after`` on.

    >>> [_fault_of(i, "generator", 2) for i in range(4)]
    [None, None, 'generator', 'generator']
    """
    return fault if fault is not None and index >= fault_after else None


def record(cases_path: str | Path, out_path: str | Path | None = None,
           convention: Convention = "openinference", *, endpoint: str | None = None,
           fault: str | None = None, fault_after: int = 0) -> int:
    """Run the instrumented assistant on every case of ``cases_path`` and write the spans to
    ``out_path`` as OTLP JSON lines, or send them to the OTLP/HTTP ``endpoint``; returns the
    number of spans exported. ``fault`` (one of the assistant's ``FAULTS``) is on from the
    ``fault_after``-th case on (0: all)."""
    exporter = span_exporter(out_path, endpoint)
    provider = _provider(exporter, None)
    tracer = provider.get_tracer(*SCOPE)
    try:
        with instrument(load_assistant(), tracer, convention) as answer:
            for i, case in enumerate(read_cases(cases_path)):
                answer(case, fault=_fault_of(i, fault, fault_after))
    finally:
        provider.shutdown()  # flushes the batch processor
    return exporter.exported


# --- live traffic ----------------------------------------------------------------------------

USERS = 24
"""Simulated users of the traffic loop: ``u001``…"""
NEW_SESSION = 0.3
"""The chance that a user's question starts a new session."""
REPHRASE = 0.2
"""The share of questions asked in other words (:data:`REPHRASINGS`)."""
REPHRASINGS = ("Hi! {q}", "{q} Thanks!", "Quick question: {lq}", "Hello, {lq}",
               "{q} Thank you.")
FEEDBACK_RATE = {False: 0.25, True: 0.5}
"""The chance that a user leaves feedback, by whether the answer was wrong."""
THUMBS_DOWN = {False: 0.1, True: 0.8}
"""The chance that feedback is a thumbs-down, by whether the answer was wrong."""
COMMENTS = {
    "down": (None, "That's not right.", "The price is wrong.", "Not what I asked.",
             "Is that offer real?", "Too vague."),
    "up": (None, None, "Thanks!", "Helpful.", "Just what I needed."),
}


def arrivals(n: int, per_day: float, *, start: datetime, seed: int) -> list[datetime]:
    """``n`` simulated arrival times, in order: a seeded Poisson process of ``per_day``
    questions a day on average after ``start`` (aware, or naive UTC: the times are alike),
    the first one gap after it. What ``traffic(at=...)`` takes for a schedule of days.

    >>> times = arrivals(3, 24.0, start=datetime(2026, 11, 1), seed=0)
    >>> times == sorted(times) and times[0] > datetime(2026, 11, 1)
    True
    """
    if n < 0 or per_day <= 0:
        raise ValueError("arrivals need n >= 0 and per_day > 0")
    draw = random.Random(f"{seed}:arrivals")
    hours, out = 0.0, []
    for _ in range(n):
        hours += draw.expovariate(per_day / 24.0)
        out.append(start + timedelta(hours=hours))
    return out


def rephrase(question: str, template: str) -> str:
    """``question`` in other words, by a template of :data:`REPHRASINGS` (``{q}`` the question,
    ``{lq}`` it with its first letter lower-cased).

    >>> rephrase("Which wool coats do you have?", "Quick question: {lq}")
    'Quick question: which wool coats do you have?'
    """
    return template.format(q=question, lq=question[:1].lower() + question[1:])


_FIGURE = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?!\w)")
_WORD = re.compile(r"[a-z0-9]+")


def is_wrong(answer: str | None, gold: str | None, question: str = "") -> bool | None:
    """Whether a simulated user finds ``answer`` wrong, from the case's reference answer: the
    words overlap little (token F1 below 0.3), or it misses at least half the reference's
    figures (those not in the question). None without a reference.

    >>> gold = "The Alba wool coat costs 179.00 EUR."
    >>> is_wrong("The Alba wool coat costs 179.00 EUR, in grey.", gold)
    False
    >>> is_wrong("The Alba wool coat costs 205.99 EUR. Members get 15% off.", gold)
    True
    """
    if not gold:
        return None
    got, want = _WORD.findall((answer or "").lower()), _WORD.findall(gold.lower())
    common = sum((Counter(got) & Counter(want)).values())
    f1 = 2 * common / (len(got) + len(want)) if common else 0.0
    figures = {float(f) for f in _FIGURE.findall(gold)} - {
        float(f) for f in _FIGURE.findall(question)}
    said = {float(f) for f in _FIGURE.findall(answer or "")}
    missed = len(figures - said) / len(figures) if figures else 0.0
    return f1 < 0.3 or missed >= 0.5


@dataclass(frozen=True)
class Asked:
    """One question of the traffic loop, as the app saw it."""

    index: int
    """Its place in the traffic, from 0."""
    trace_id: str
    """The OTel trace id (32 hex digits): what the app gives the user to key feedback."""
    case_id: str
    """The shop case it was drawn from (in the root span's ``metadata`` or ``shop.case_id``)."""
    question: str
    """As asked: the case's question, or a rephrasing of it."""
    user_id: str
    """The simulated user (``user.id`` on the root span): ``u001``…"""
    session_id: str
    """The user's session (``session.id``)."""
    fault: str | None
    """The fault that was on for it."""
    answer: str | None
    wrong: bool | None
    """:func:`is_wrong` of the answer against the case's reference answer."""
    at: datetime | None = None
    """Its simulated arrival, where its root span starts (``traffic(at=...)``); None: it was
    asked in real time."""


@dataclass
class Traffic:
    """What a traffic run did."""

    asked: list[Asked] = field(default_factory=list)
    spans: int = 0
    """Spans exported."""
    dropped: int = 0
    """Spans the exporter gave up on."""
    feedback: int = 0
    """Feedback lines written."""


def feedback_line(asked: Asked, rng: random.Random,
                  at: datetime | None = None) -> dict[str, Any] | None:
    """The simulated user's feedback on ``asked``, or None (most users leave none):
    thumbs-down far more likely when the answer is wrong (:data:`THUMBS_DOWN`), a 1–5 score
    that agrees with the thumbs, sometimes a comment; given ``at`` (the answer's simulated
    time), else now."""
    wrong = bool(asked.wrong)
    if rng.random() >= FEEDBACK_RATE[wrong]:
        return None
    thumbs = "down" if rng.random() < THUMBS_DOWN[wrong] else "up"
    score = rng.choice((1, 1, 2, 2, 3) if thumbs == "down" else (3, 4, 4, 5, 5))
    return {"trace_id": asked.trace_id, "thumbs": thumbs, "score": score,
            "comment": rng.choice(COMMENTS[thumbs]), "user_id": asked.user_id,
            "at": (at or datetime.now(UTC)).isoformat(timespec="milliseconds")}


def traffic(n: int, *, out: str | Path | None = None, endpoint: str | None = None,
            convention: Convention = "openinference", cases_path: str | Path = CASES,
            seed: int = 0, rate: float = 0.0, fault: str | None = None, fault_after: int = 0,
            feedback: str | Path | None = None,
            at: Sequence[datetime] | None = None) -> Traffic:
    """Ask the instrumented assistant ``n`` questions drawn from the cases of ``cases_path``
    (with replacement; :data:`REPHRASE` of them rephrased) by simulated users, ``rate`` a
    second (0: as fast as it answers), exporting the spans to the file ``out`` or the OTLP/HTTP
    ``endpoint``. ``fault`` is on from question ``fault_after`` (from 0) on. Each root span
    carries ``user.id`` and ``session.id``; with ``feedback``, some users' feedback is written
    there, a JSON line each. Everything drawn — questions, users, sessions, feedback, trace
    and span ids — follows ``seed``: a run with the same seed repeats (times aside).

    ``at``: each question's simulated arrival (``n`` times in order, e.g. :func:`arrivals`;
    aware or naive UTC). Its spans are then started and ended at that time plus their real
    offsets from the question's start, as they are sent — they keep their real durations —
    and its feedback's ``at`` is the answer's simulated time: seconds of traffic that hold
    days of it, for windows of hours and days. ``rate`` still paces the real sending."""
    if n < 1 or rate < 0 or fault_after < 0:
        raise ValueError("the traffic needs n >= 1, rate >= 0 and fault_after >= 0")
    if at is not None and len(at) != n:
        raise ValueError(f"the traffic has {n} questions but {len(at)} arrival times")
    cases = read_cases(cases_path)
    draw, react = random.Random(f"{seed}:traffic"), random.Random(f"{seed}:feedback")
    sessions: dict[str, str] = {}
    exporter = span_exporter(out, endpoint)
    provider = _provider(exporter, seed)
    tracer = provider.get_tracer(*SCOPE)
    run = Traffic()
    sink = open(feedback, "w", encoding="utf-8") if feedback is not None else None  # noqa: SIM115
    start = time.monotonic()
    try:
        with instrument(load_assistant(), tracer, convention) as app:
            for i in range(n):
                if rate > 0:
                    time.sleep(max(0.0, start + i / rate - time.monotonic()))
                case = draw.choice(cases)
                question = case.question
                if draw.random() < REPHRASE:
                    question = rephrase(question, draw.choice(REPHRASINGS))
                user = f"u{draw.randrange(USERS) + 1:03d}"
                if user not in sessions or draw.random() < NEW_SESSION:
                    sessions[user] = f"s-{draw.getrandbits(48):012x}"
                on = _fault_of(i, fault, fault_after)
                when = at[i] if at is not None else None
                began = time.time_ns()
                result, trace_id = app.ask(
                    case.model_copy(update={"question": question}), fault=on,
                    attributes={"user.id": user, "session.id": sessions[user]}, at=when)
                answer = result.generator.answer if result.generator else None
                asked = Asked(i, trace_id, case.id, question, user, sessions[user], on,
                              answer, is_wrong(answer, case.gold.answer, question), when)
                run.asked.append(asked)
                answered = None if when is None else _aware(when) + timedelta(
                    microseconds=(time.time_ns() - began) // 1000)
                line = feedback_line(asked, react, answered) if sink is not None else None
                if line is not None and sink is not None:
                    sink.write(json.dumps(line, ensure_ascii=False) + "\n")
                    sink.flush()
                    run.feedback += 1
    finally:
        provider.shutdown()  # flushes the batch processor
        if sink is not None:
            sink.close()
    run.spans, run.dropped = exporter.exported, exporter.dropped
    return run


# --- the command -----------------------------------------------------------------------------


def _when(text: str) -> datetime:
    """``--simulated-start``: an ISO 8601 date or time, UTC when it has no offset."""
    try:
        return _aware(datetime.fromisoformat(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is no ISO 8601 date or time (e.g. 2026-11-01 or "
            "2026-11-01T08:00:00Z)") from None


def main(argv: Sequence[str] | None = None) -> int:
    faults = faults_of(load_assistant())
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--convention", choices=CONVENTIONS, default="openinference")
    parser.add_argument("--cases", default=str(CASES))
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", help="write the spans to this file, as OTLP JSON lines")
    where.add_argument("--otlp-endpoint", metavar="URL",
                       help="send the spans to this OTLP/HTTP endpoint (e.g. "
                            "http://127.0.0.1:4318, `evalharness traces receive`) with the "
                            "SDK's exporter; protobuf: the Python exporter sends no JSON")
    parser.add_argument("--fault", choices=faults,
                        help="degrade one component, as scenarios/shop-fault-*.yaml do "
                             "(schema_migration, live traffic's: a renamed column breaks the "
                             "text-to-SQL queries that read it)")
    parser.add_argument("--fault-after", type=int, default=0, metavar="K",
                        help="switch the fault on after K questions (default 0: from the "
                             "first)")
    parser.add_argument("--traffic", type=int, metavar="N",
                        help="ask N questions drawn from the cases by simulated users, "
                             "instead of every case once")
    parser.add_argument("--rate", type=float, default=0.0, metavar="R",
                        help="with --traffic: questions a second (default 0: as fast as "
                             "possible)")
    parser.add_argument("--seed", type=int,
                        help="with --traffic: the seed of everything drawn (default: a "
                             "random one, printed)")
    parser.add_argument("--feedback", metavar="FILE",
                        help="with --traffic: write simulated users' feedback here, a JSON "
                             "line each")
    parser.add_argument("--simulated-start", type=_when, metavar="WHEN",
                        help="with --traffic: give each question a simulated arrival time "
                             "after WHEN (ISO 8601; without an offset, UTC), a seeded Poisson "
                             "process of --per-day a day; spans are sent with those times")
    parser.add_argument("--per-day", type=float, default=40.0, metavar="N",
                        help="with --simulated-start: questions a simulated day, on average "
                             "(default 40)")
    args = parser.parse_args(argv)
    if args.fault_after and args.fault is None:
        parser.error("--fault-after needs --fault")
    if args.fault_after < 0:
        parser.error("--fault-after must be 0 or more")
    if args.traffic is None:
        extra = [name for name, value in (("--rate", args.rate), ("--seed", args.seed),
                                          ("--feedback", args.feedback),
                                          ("--simulated-start", args.simulated_start))
                 if value]
        if extra:
            parser.error(f"{', '.join(extra)} need --traffic N")
    elif args.traffic < 1 or args.rate < 0:
        parser.error("--traffic must be 1 or more and --rate 0 or more")
    if args.per_day <= 0:
        parser.error("--per-day must be more than 0")
    target = args.out or otlp_url(args.otlp_endpoint)
    fault = f", fault {args.fault} from question {args.fault_after + 1}" if args.fault else ""
    if args.traffic is None:
        n = record(args.cases, args.out, args.convention, endpoint=args.otlp_endpoint,
                   fault=args.fault, fault_after=args.fault_after)
        print(f"{n} spans written to {target} ({args.convention}{fault})")
        return 0
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    at = None if args.simulated_start is None else arrivals(
        args.traffic, args.per_day, start=args.simulated_start, seed=seed)
    run = traffic(args.traffic, out=args.out, endpoint=args.otlp_endpoint,
                  convention=args.convention, cases_path=args.cases, seed=seed,
                  rate=args.rate, fault=args.fault, fault_after=args.fault_after,
                  feedback=args.feedback, at=at)
    wrong = sum(1 for a in run.asked if a.wrong)
    print(f"{len(run.asked)} questions from {len({a.user_id for a in run.asked})} users "
          f"({args.convention}{fault}; seed {seed}): {run.spans} spans sent to {target}; "
          f"{wrong} answers wrong by the cases' reference answers")
    if at:
        print(f"simulated arrivals from {at[0].isoformat(timespec='seconds')} to "
              f"{at[-1].isoformat(timespec='seconds')} ({args.per_day:g} a day on average)")
    if args.feedback:
        print(f"{run.feedback} feedback lines written to {args.feedback}")
    if run.dropped:
        print(f"{run.dropped} spans dropped: the exporter could not deliver them "
              "(is the receiver running?)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
