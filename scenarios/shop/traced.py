"""The shop assistant instrumented with the OpenTelemetry SDK, its spans exported to a file.

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
``ExportTraceServiceRequest`` a line, hex ids). Run it::

    python scenarios/shop/traced.py --convention genai --out spans.jsonl [--cases FILE]

and import the file with ``traces: {path: spans.jsonl, mapping: shop/traces-genai.yaml}``.
"""

from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
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


def _fail(span: trace.Span, error: str | None) -> None:
    """A component that reports an error: the span's status and an exception event."""
    if error:
        kind, _, message = error.partition(": ")
        span.add_event("exception", {"exception.type": kind, "exception.message": message})
        span.set_status(Status(StatusCode.ERROR, error))


class _Spans:
    """Span names, kinds and attributes of one convention, per component call."""

    def __init__(self, tracer: Tracer, convention: Convention) -> None:
        self.tracer = tracer
        self.convention = convention

    @contextmanager
    def root(self, case: Case) -> Iterator[Callable[[Any], None]]:
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
        with self.tracer.start_as_current_span(name, attributes=attrs) as span:
            def done(result: Any) -> None:
                answer = result.generator.answer if result.generator else None
                if self.convention == "openinference" and answer is not None:
                    span.set_attributes({"output.value": answer,
                                         "output.mime_type": "text/plain"})
                if result.error:
                    _fail(span, result.error)
            yield done

    def route(self, call: Callable[..., Any], question: str, *args: Any, **kw: Any) -> Any:
        if self.convention == "openinference":
            name, attrs = "route", {"openinference.span.kind": "CHAIN", "input.value": question,
                                    "input.mime_type": "text/plain"}
        else:
            name, attrs = "execute_tool route", {
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "route",
                "gen_ai.tool.type": "function",
                "gen_ai.tool.call.arguments": _json({"question": question})}
        with self.tracer.start_as_current_span(name, attributes=attrs) as span:
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
        with self.tracer.start_as_current_span(name, attributes=attrs) as span:
            step, slots = call(question, *args, **kw)
            if self.convention == "genai":
                # the query as the database client instrumentation records it
                with self.tracer.start_as_current_span(
                        "SELECT shop", kind=SpanKind.CLIENT,
                        attributes={"db.system.name": "sqlite", "db.operation.name": "SELECT",
                                    "db.query.text": step.sql}) as db:
                    _fail(db, step.error)
            out = _json(_sql_output(step))
            if self.convention == "openinference":
                span.set_attributes({"output.value": out,
                                     "output.mime_type": "application/json"})
            else:
                span.set_attribute("gen_ai.tool.call.result", out)
            span.set_attributes(_usage(step, self.convention))
            _fail(span, step.error)
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
        with self.tracer.start_as_current_span(name, attributes=attrs) as span:
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
        with self.tracer.start_as_current_span(name, kind=kind, attributes=attrs) as span:
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
            _fail(span, step.error)
            return step


@contextmanager
def instrument(assistant: ModuleType, tracer: Tracer,
               convention: Convention) -> Iterator[Callable[[Case], Any]]:
    """Wrap the assistant's component functions in spans (restored on exit) and give
    ``answer(case)`` that runs the assistant under one root span per case. Not thread-safe:
    one case at a time while instrumented."""
    if convention not in CONVENTIONS:
        raise ValueError(f"unknown convention {convention!r}; use one of "
                         f"{', '.join(CONVENTIONS)}")
    spans = _Spans(tracer, convention)
    originals = {name: getattr(assistant, name) for name in COMPONENTS}

    def wrap(name: str) -> Callable[..., Any]:
        original, around = originals[name], getattr(spans, name)
        return lambda *args, **kw: around(original, *args, **kw)

    def answer(case: Case) -> Any:
        with spans.root(case) as done:
            result = assistant.answer(case)
            done(result)
            return result

    for name in COMPONENTS:
        setattr(assistant, name, wrap(name))
    try:
        yield answer
    finally:
        for name, original in originals.items():
            setattr(assistant, name, original)


def read_cases(path: str | Path) -> list[Case]:
    with open(path, encoding="utf-8") as fh:
        return [Case.model_validate_json(line) for line in fh if line.strip()]


def record(cases_path: str | Path, out_path: str | Path,
           convention: Convention = "openinference") -> int:
    """Run the instrumented assistant on every case of ``cases_path`` and write the spans to
    ``out_path`` as OTLP JSON lines; returns the number of spans written."""
    exporter = OTLPJsonLinesExporter(out_path)
    provider = TracerProvider(resource=Resource({"service.name": "shop-assistant",
                                                 "service.version": "1.0.0"}))
    provider.add_span_processor(BatchSpanProcessor(exporter, max_export_batch_size=64))
    tracer = provider.get_tracer(*SCOPE)
    try:
        with instrument(load_assistant(), tracer, convention) as answer:
            for case in read_cases(cases_path):
                answer(case)
    finally:
        provider.shutdown()  # flushes the batch processor
    return exporter.written


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--convention", choices=CONVENTIONS, default="openinference")
    parser.add_argument("--cases", default=str(CASES))
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    n = record(args.cases, args.out, args.convention)
    print(f"{n} spans written to {args.out} ({args.convention})")


if __name__ == "__main__":
    main()
