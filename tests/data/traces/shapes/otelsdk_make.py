"""Writes the ``otelsdk_*`` fixtures of tests/test_trace_shapes_readers.py with the real
OpenTelemetry Python SDK (``ReadableSpan.to_json()``), and holds the span plan that
``phoenix_make.py`` sends to a real Phoenix.

Two OpenInference LangChain-style traces — a document question (router, retriever, LLM) and a
SQL question (router, ``sql_db_query`` tool, LLM) — recorded by the SDK with seeded ids and
whole-millisecond times, so every run writes the same files. Regenerate with

    pip install 'opentelemetry-sdk>=1.45,<2'
    python tests/data/traces/shapes/otelsdk_make.py

The README next to this file says what each file imitates.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
T0 = 1_748_942_042_000_000_000  # 2025-06-03T09:14:02Z
MS = 1_000_000
SCOPE = ("openinference.instrumentation.langchain", "0.1.30")

QUESTION_A = "What is the refund window for opened items?"
ANSWER_A = "Opened items can be returned within 14 days of delivery."
DOCS_A = [("returns-3", "Opened items may be returned within 14 days.", 0.82),
          ("returns-1", "Unopened items may be returned within 30 days.", 0.61),
          ("shipping-2", "Orders ship within 2 business days.", 0.33)]
QUESTION_B = "How many orders were placed last week?"
SQL_B = "SELECT COUNT(*) FROM orders WHERE placed_at >= date('now', '-7 days')"
ANSWER_B = "412 orders were placed last week."


def _oi(kind: str, **attributes) -> dict:
    return {"openinference.span.kind": kind, **attributes}


def _messages(prefix: str, pairs) -> dict:
    out = {}
    for i, (role, content) in enumerate(pairs):
        out[f"{prefix}.{i}.message.role"] = role
        out[f"{prefix}.{i}.message.content"] = content
    return out


def plan() -> list[tuple]:
    """(key, parent key, name, start ms, end ms, attributes, status) of every span, times
    in ms after :data:`T0`."""
    docs = {}
    for i, (doc_id, content, score) in enumerate(DOCS_A):
        docs[f"retrieval.documents.{i}.document.id"] = doc_id
        docs[f"retrieval.documents.{i}.document.content"] = content
        docs[f"retrieval.documents.{i}.document.score"] = score
    return [
        ("a.root", None, "RAGChain", 0, 1900,
         _oi("CHAIN", **{"input.value": json.dumps({"question": QUESTION_A}),
                         "input.mime_type": "application/json", "output.value": ANSWER_A,
                         "metadata": json.dumps({"case_id": "shape-1"}),
                         "tag.tags": ["prod", "rag"]}), "OK"),
        ("a.router", "a.root", "router", 5, 40,
         _oi("CHAIN", **{"input.value": QUESTION_A, "output.value": "docs"}), "OK"),
        ("a.retriever", "a.root", "VectorStoreRetriever", 45, 160,
         _oi("RETRIEVER", **{"input.value": QUESTION_A}, **docs), "OK"),
        ("a.llm", "a.root", "ChatOpenAI", 170, 1850,
         _oi("LLM", **{"llm.model_name": "gpt-4o-mini", "llm.token_count.prompt": 61,
                       "llm.token_count.completion": 12, "llm.token_count.total": 73,
                       "output.value": ANSWER_A},
             **_messages("llm.input_messages", [("system", "Answer from the context."),
                                                ("user", QUESTION_A)]),
             **_messages("llm.output_messages", [("assistant", ANSWER_A)])), "OK"),
        ("b.root", None, "RAGChain", 2000, 3500,
         _oi("CHAIN", **{"input.value": json.dumps({"question": QUESTION_B}),
                         "input.mime_type": "application/json", "output.value": ANSWER_B,
                         "metadata": json.dumps({"case_id": "shape-2"})}), "OK"),
        ("b.router", "b.root", "router", 2005, 2040,
         _oi("CHAIN", **{"input.value": QUESTION_B, "output.value": "sql"}), "OK"),
        ("b.sql", "b.root", "sql_db_query", 2050, 2400,
         _oi("TOOL", **{"tool.name": "sql_db_query",
                        "input.value": json.dumps({"query": SQL_B}),
                        "input.mime_type": "application/json", "output.value": "[(412,)]"}),
         "OK"),
        ("b.llm", "b.root", "ChatOpenAI", 2410, 3450,
         _oi("LLM", **{"llm.model_name": "gpt-4o-mini", "output.value": ANSWER_B},
             **_messages("llm.input_messages", [("system", "Answer from the rows."),
                                                ("user", QUESTION_B)]),
             **_messages("llm.output_messages", [("assistant", ANSWER_B)])), "OK"),
    ]


def record(exporter, resource_attributes: dict | None = None, seed: int = 31) -> None:
    """Record :func:`plan` with the SDK, handing the spans to ``exporter`` as they end."""
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.id_generator import IdGenerator
    from opentelemetry.trace import Status, StatusCode

    rng = random.Random(seed)

    class Seeded(IdGenerator):
        def generate_span_id(self) -> int:
            return rng.getrandbits(64)

        def generate_trace_id(self) -> int:
            return rng.getrandbits(128)

    resource = Resource({"service.name": "shop-assistant", **(resource_attributes or {})})
    provider = TracerProvider(resource=resource, id_generator=Seeded())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer(*SCOPE)
    live = {}
    steps = plan()
    for key, parent, name, start, _end, attributes, _status in steps:
        context = trace.set_span_in_context(live[parent]) if parent else None
        live[key] = tracer.start_span(name, context=context, attributes=attributes,
                                      start_time=T0 + start * MS)
    for key, *_, end, _attributes, status in sorted(steps, key=lambda s: s[4]):
        live[key].set_status(Status(StatusCode[status]))
        live[key].end(end_time=T0 + end * MS)
    provider.shutdown()


def _as_integers(span: dict) -> dict:
    """A ``to_json`` object with its ids as JSON integers, as some agent frameworks dump
    ``span.context.trace_id`` / ``span_id`` unformatted."""
    span = dict(span)
    span["context"] = {**span["context"],
                       "trace_id": int(span["context"]["trace_id"], 16),
                       "span_id": int(span["context"]["span_id"], 16)}
    if span["parent_id"] is not None:
        span["parent_id"] = int(span["parent_id"], 16)
    return span


def main() -> None:
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class Keep(SpanExporter):
        def __init__(self) -> None:
            self.spans = []

        def export(self, spans):
            self.spans.extend(spans)
            return SpanExportResult.SUCCESS

    keep = Keep()
    record(keep)
    objects = [json.loads(s.to_json()) for s in keep.spans]
    # JSON lines: `to_json(indent=None)`, one span a line, as a span processor logging them does
    (HERE / "otelsdk_spans.jsonl").write_text(
        "".join(s.to_json(indent=None) + "\n" for s in keep.spans))
    # a JSON array of them, as `json.dump([json.loads(s.to_json()) for s in spans], f)` writes
    (HERE / "otelsdk_spans_array.json").write_text(json.dumps(objects, indent=2) + "\n")
    # one object: `to_json()` as it is (indent 4), of the first trace's LLM span
    llm = next(s for s in keep.spans if s.name == "ChatOpenAI")
    (HERE / "otelsdk_one_span.json").write_text(llm.to_json() + "\n")
    # an agent framework's run dump: spans with integer ids beside the run's other fields
    dump = {"run_id": "run-0007", "workflow": "shop-assistant",
            "final_output": objects[-1]["attributes"]["output.value"],
            "usage": {"input_tokens": 61, "output_tokens": 12},
            "spans": [_as_integers(o) for o in objects]}
    (HERE / "otelsdk_agent_dump.json").write_text(json.dumps(dump, indent=2) + "\n")


if __name__ == "__main__":
    main()
