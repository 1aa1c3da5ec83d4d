"""Writes the OpenTelemetry-family trace fixtures of tests/test_trace_readers_otel.py.

The spans are recorded with the real OpenTelemetry Python SDK and written by its real
exporters and encoders, so the fixtures are what those tools write; the Phoenix files follow
Phoenix's span JSON and spans dataframe (docs/traces-formats.md says how). Ids come from a
seeded generator and every time is a whole millisecond, so the files are the same on every run
and every format carries exactly the same times. Regenerate with

    pip install opentelemetry-sdk opentelemetry-exporter-otlp-proto-common pandas pyarrow
    python tests/data/traces/otel/make_fixtures.py

Four traces interleave: a document question (router, retriever, reranker, an LLM call that
fails with a rate limit and its retry, an HTTP client span underneath: noise), a SQL question
(a SQL tool call, a redacted chat message), a chat that only OTel GenAI conventions describe,
and a health check (noise). ``expected.json`` is the ground truth, taken from the SDK's own
span objects, that every reader's output is compared with.
"""

from __future__ import annotations

import base64
import io
import json
import random
import struct
from datetime import UTC, datetime
from pathlib import Path

from evalharness.testing.otlp import collector_json

HERE = Path(__file__).resolve().parent
T0 = 1_714_564_800_000_000_000  # 2024-05-01T12:00:00Z
MS = 1_000_000
LANGCHAIN = ("openinference.instrumentation.langchain", "0.1.30")
HTTPX = ("opentelemetry.instrumentation.httpx", "0.54b0")
GENAI = ("opentelemetry.instrumentation.openai_v2", "2.1b0")
ASGI = ("opentelemetry.instrumentation.asgi", "0.54b0")
BATCH = 5
"""Spans per exported batch (one JSON line, one protobuf frame), in the order they end."""

DOCS = [
    ("doc-17", "Red running shoes, size 42, cost 89 EUR.", 0.82, {"source": "catalog"}),
    ("doc-03", "Blue sandals cost 25 EUR.", 0.41, {"source": "catalog"}),
    ("doc-88", "Returns are free within 30 days.", 0.37, {"source": "faq"}),
]


def oi(kind: str, **attributes):
    return {"openinference.span.kind": kind, **attributes}


def documents(prefix: str, docs) -> dict:
    out = {}
    for i, (doc_id, content, score, metadata) in enumerate(docs):
        out[f"{prefix}.{i}.document.id"] = doc_id
        out[f"{prefix}.{i}.document.content"] = content
        out[f"{prefix}.{i}.document.score"] = score
        out[f"{prefix}.{i}.document.metadata"] = json.dumps(metadata)
    return out


def messages(prefix: str, pairs) -> dict:
    out = {}
    for i, (role, content) in enumerate(pairs):
        out[f"{prefix}.{i}.message.role"] = role
        out[f"{prefix}.{i}.message.content"] = content
    return out


def plan():
    """(key, trace, parent key, name, scope, OTel kind, start ms, end ms, attributes,
    status, events) of every span; times in ms after T0."""
    question_a = "How much are the red running shoes?"
    llm_params = json.dumps({"model": "gpt-4o-mini", "temperature": 0})
    prompt = [("system", "Answer from the context."), ("user", question_a)]
    answer = "They cost 89 EUR."
    question_b = "How many orders were placed last week?"
    sql = "SELECT COUNT(*) FROM orders WHERE placed_at >= date('now', '-7 days')"
    return [
        ("a.root", "A", None, "RAGChain", LANGCHAIN, "INTERNAL", 0, 1900,
         oi("CHAIN", **{"input.value": json.dumps({"question": question_a}),
                        "input.mime_type": "application/json", "output.value": answer,
                        "session.id": "s-1", "tag.tags": ["prod", "v2"],
                        "metadata": json.dumps({"user": "u-1", "case": "c-7"})}), "OK", []),
        ("a.router", "A", "a.root", "router", LANGCHAIN, "INTERNAL", 5, 40,
         oi("CHAIN", **{"input.value": question_a, "output.value": "documents"}), "OK", []),
        ("a.retriever", "A", "a.root", "VectorStoreRetriever", LANGCHAIN, "INTERNAL", 45, 160,
         oi("RETRIEVER", **{"input.value": question_a},
            **documents("retrieval.documents", DOCS)), "OK", []),
        ("a.rerank", "A", "a.root", "CohereRerank", LANGCHAIN, "INTERNAL", 165, 260,
         oi("RERANKER", **{"reranker.query": question_a, "reranker.model_name": "rerank-v3",
                           "reranker.top_k": 2},
            **documents("reranker.input_documents", DOCS),
            **documents("reranker.output_documents", [DOCS[0], DOCS[2]])), "OK", []),
        ("a.llm1", "A", "a.root", "ChatOpenAI", LANGCHAIN, "INTERNAL", 270, 900,
         oi("LLM", **{"llm.model_name": "gpt-4o-mini", "llm.invocation_parameters": llm_params},
            **messages("llm.input_messages", prompt)),
         ("ERROR", "RateLimitError: 429 Too Many Requests"),
         [("exception", 899, {"exception.type": "openai.RateLimitError",
                              "exception.message": "429 Too Many Requests",
                              "exception.escaped": False})]),
        ("a.llm2", "A", "a.root", "ChatOpenAI", LANGCHAIN, "INTERNAL", 950, 1850,
         oi("LLM", **{"llm.model_name": "gpt-4o-mini", "llm.invocation_parameters": llm_params,
                      "llm.token_count.prompt": 61, "llm.token_count.completion": 7,
                      "llm.token_count.total": 68, "output.value": answer},
            **messages("llm.input_messages", prompt),
            **messages("llm.output_messages", [("assistant", answer)])), "OK",
         [("first_token", 1400, {})]),
        ("a.http", "A", "a.llm2", "POST", HTTPX, "CLIENT", 960, 1840,
         {"http.request.method": "POST", "url.full": "https://api.example.invalid/v1/chat",
          "http.response.status_code": 200}, "UNSET", []),
        ("b.root", "B", None, "RAGChain", LANGCHAIN, "INTERNAL", 300, 1500,
         oi("CHAIN", **{"input.value": json.dumps({"question": question_b}),
                        "input.mime_type": "application/json", "output.value": "412 orders."}),
         "OK", []),
        ("b.router", "B", "b.root", "router", LANGCHAIN, "INTERNAL", 310, 350,
         oi("CHAIN", **{"input.value": question_b, "output.value": "sql"}), "OK", []),
        ("b.sql", "B", "b.root", "sql_query", LANGCHAIN, "INTERNAL", 360, 700,
         oi("TOOL", **{"tool.name": "sql_query", "tool.description": "Runs one SQL query.",
                       "tool.parameters": json.dumps({"query": sql}), "input.value": sql,
                       "output.value": json.dumps([[412]]),
                       "output.mime_type": "application/json"}), "OK", []),
        ("b.llm", "B", "b.root", "ChatOpenAI", LANGCHAIN, "INTERNAL", 710, 1450,
         oi("LLM", **{"llm.model_name": "gpt-4o-mini", "output.value": "412 orders."},
            **messages("llm.input_messages", [("system", "Answer from the rows."),
                                              ("user", "__REDACTED__")])), "OK", []),
        ("c.chat", "C", None, "chat gpt-4o", GENAI, "CLIENT", 1000, 1600,
         {"gen_ai.operation.name": "chat", "gen_ai.system": "openai",
          "gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": 20,
          "gen_ai.usage.output_tokens": 5}, "UNSET", []),
        ("c.tool", "C", "c.chat", "execute_tool get_weather", GENAI, "INTERNAL", 1100, 1200,
         {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather"},
         "UNSET", []),
        ("d.health", "D", None, "GET /healthz", ASGI, "SERVER", 1210, 1215,
         {"http.request.method": "GET", "http.route": "/healthz",
          "http.response.status_code": 200}, "UNSET", []),
    ]


def record():
    """The planned spans recorded by the SDK: ReadableSpans in the order they ended."""
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
    from opentelemetry.sdk.trace.id_generator import IdGenerator
    from opentelemetry.trace import SpanKind, Status, StatusCode

    rng = random.Random(12)

    class Seeded(IdGenerator):
        def generate_span_id(self) -> int:
            return rng.getrandbits(64)

        def generate_trace_id(self) -> int:
            return rng.getrandbits(128)

    class Keep(SpanExporter):
        def __init__(self) -> None:
            self.spans = []

        def export(self, spans):
            self.spans.extend(spans)

    keep = Keep()
    resource = Resource({"service.name": "shop-assistant", "service.version": "2.3.0",
                         "deployment.environment.name": "staging",
                         "telemetry.sdk.language": "python"})
    provider = TracerProvider(resource=resource, id_generator=Seeded())
    provider.add_span_processor(SimpleSpanProcessor(keep))
    steps = plan()
    live = {}
    for key, _, parent, name, scope, kind, start, _end, attributes, *_ in steps:
        tracer = provider.get_tracer(*scope)
        context = trace.set_span_in_context(live[parent]) if parent else None
        live[key] = tracer.start_span(name, context=context, kind=SpanKind[kind],
                                      attributes=attributes, start_time=T0 + start * MS)
    for key, *_, end, _, state, events in sorted(steps, key=lambda s: s[7]):
        span = live[key]
        for event, at, attributes in events:
            span.add_event(event, attributes, timestamp=T0 + at * MS)
        code, message = state if isinstance(state, tuple) else (state, None)
        if code != "UNSET":
            span.set_status(Status(StatusCode[code], message))
        span.end(end_time=T0 + end * MS)
    return keep.spans, resource


def batches(spans):
    return [spans[i:i + BATCH] for i in range(0, len(spans), BATCH)]


def expected(spans) -> list[dict]:
    """Ground truth from the SDK's spans, in the order they ended (file order)."""
    out = []
    for span in spans:
        parent = span.parent.span_id if span.parent else None
        out.append({
            "trace_id": f"{span.context.trace_id:032x}",
            "span_id": f"{span.context.span_id:016x}",
            "parent_id": f"{parent:016x}" if parent else None,
            "name": span.name,
            "otel_kind": span.kind.name,
            "start_ns": span.start_time,
            "end_ns": span.end_time,
            "status": span.status.status_code.name,
            "status_message": span.status.description,
            "attributes": dict(span.attributes),
            "events": [[e.name, e.timestamp, dict(e.attributes)] for e in span.events],
            "scope": span.instrumentation_scope.name,
            "scope_version": span.instrumentation_scope.version,
        })
    return out


# --- OTLP ------------------------------------------------------------------------------------


def _snake_0x(node):
    if isinstance(node, list):
        return [_snake_0x(item) for item in node]
    if not isinstance(node, dict):
        return node
    return {key: ("0x" + base64.b64decode(value).hex().upper()
                  if key in ("trace_id", "span_id", "parent_span_id") else _snake_0x(value))
            for key, value in node.items()}


def write_otlp(spans) -> None:
    from google.protobuf.json_format import MessageToDict, MessageToJson
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

    requests = [encode_spans(batch) for batch in batches(spans)]
    # The Collector's file exporter, format json: one request per line, hex ids, enum numbers.
    with open(HERE / "otlp.jsonl", "w") as fh:
        for request in requests:
            fh.write(json.dumps(collector_json(MessageToDict(request)), separators=(",", ":")) + "\n")
    # The protobuf JSON mapping, pretty-printed, one document (an OTLP/HTTP request body) of
    # the first spans (kept small).
    (HERE / "otlp-protojson.json").write_text(
        MessageToJson(encode_spans(spans[:BATCH]), indent=2) + "\n")
    # Lenient: snake_case field names and 0x-prefixed upper-case hex ids, JSON lines.
    with open(HERE / "otlp-snake.jsonl", "w") as fh:
        for request in requests:
            record = MessageToDict(request, preserving_proto_field_name=True)
            fh.write(json.dumps(_snake_0x(record), separators=(",", ":")) + "\n")
    # The Collector's file exporter, format proto: TracesData, each after its length in 4 bytes.
    frames = [TracesData(resource_spans=r.resource_spans).SerializeToString() for r in requests]
    (HERE / "otlp.pb").write_bytes(b"".join(struct.pack(">I", len(f)) + f for f in frames))
    # writeDelimitedTo: each TracesData after its length as a varint.
    (HERE / "otlp-varint.pb").write_bytes(b"".join(_varint(len(f)) + f for f in frames))
    # One ExportTraceServiceRequest, as an OTLP/HTTP protobuf request body.
    (HERE / "otlp-request.pb").write_bytes(encode_spans(spans).SerializeToString())


def _varint(number: int) -> bytes:
    out = bytearray()
    while True:
        byte = number & 0x7F
        number >>= 7
        out.append(byte | (0x80 if number else 0))
        if not number:
            return bytes(out)


# --- the console exporter --------------------------------------------------------------------


def write_console(spans) -> None:
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    out = io.StringIO()
    exporter = ConsoleSpanExporter(out=out)
    for i, span in enumerate(spans):
        if i == 3:  # the application prints on the same stdout
            out.write("INFO answering: How many orders were placed last week?\n")
        exporter.export([span])
    (HERE / "console.txt").write_text(out.getvalue())


# --- Phoenix ---------------------------------------------------------------------------------

JSON_OBJECTS = ("metadata", "document.metadata", "llm.prompt_template.variables",
                "tool.parameters")
"""Attributes Phoenix decodes from JSON text when it ingests a span."""


def _iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC).isoformat()


def _nest(flat: dict) -> dict:
    """Flat dotted attributes nested the way Phoenix's span JSON holds them: a segment of
    digits followed by more segments is a list index; JSON-object attributes decoded."""
    root: dict = {}
    for key, value in flat.items():
        if key.endswith(JSON_OBJECTS) and isinstance(value, str):
            value = json.loads(value)
        parts = key.split(".")
        node = root
        for i, part in enumerate(parts[:-1]):
            following = parts[i + 1]
            if isinstance(node, list):
                while len(node) <= int(part):
                    node.append({})
                node = node[int(part)]
                continue
            if following.isdigit() and i + 2 < len(parts):
                node = node.setdefault(part, [])
            else:
                node = node.setdefault(part, {})
        node[parts[-1]] = list(value) if isinstance(value, tuple) else value
    return root


def _phoenix_kind(attributes: dict) -> str:
    return attributes.get("openinference.span.kind") or "UNKNOWN"


def phoenix_records(spans) -> list[dict]:
    records = []
    for span in spans:
        parent = span.parent.span_id if span.parent else None
        attributes = dict(span.attributes)
        records.append({
            "name": span.name,
            "context": {"trace_id": f"{span.context.trace_id:032x}",
                        "span_id": f"{span.context.span_id:016x}"},
            "span_kind": _phoenix_kind(attributes),
            "parent_id": f"{parent:016x}" if parent else None,
            "start_time": _iso(span.start_time),
            "end_time": _iso(span.end_time),
            "status_code": span.status.status_code.name,
            "status_message": span.status.description or "",
            "attributes": _nest(attributes),
            "events": [{"name": e.name, "attributes": dict(e.attributes),
                        "timestamp": _iso(e.timestamp)} for e in span.events],
            "conversation": None,
        })
    return records


SEMCONV_LISTS = ("llm.input_messages", "llm.output_messages", "retrieval.documents",
                 "reranker.input_documents", "reranker.output_documents")


def _dataframe_row(record: dict, span) -> dict:
    """One row of Phoenix's spans dataframe (``get_spans_dataframe``): the semantic
    conventions become ``attributes.<convention>`` columns, lists of messages or documents
    lists of records keyed by the inner convention (``message.role``)."""
    row = {"name": record["name"], "span_kind": record["span_kind"],
           "parent_id": record["parent_id"],
           "start_time": datetime.fromtimestamp(span.start_time / 1e9, tz=UTC),
           "end_time": datetime.fromtimestamp(span.end_time / 1e9, tz=UTC),
           "status_code": record["status_code"], "status_message": record["status_message"],
           "events": record["events"],
           "context.span_id": record["context"]["span_id"],
           "context.trace_id": record["context"]["trace_id"]}
    for key, value in span.attributes.items():
        if key.endswith(JSON_OBJECTS):
            value = json.loads(value)
        elif isinstance(value, tuple):
            value = list(value)
        for prefix in SEMCONV_LISTS:
            if key.startswith(prefix + "."):
                index, inner = key[len(prefix) + 1:].split(".", 1)
                items = row.setdefault(f"attributes.{prefix}", [])
                while len(items) <= int(index):
                    items.append({})
                items[int(index)][inner] = value
                break
        else:
            row[f"attributes.{key}"] = value
    return row


def write_phoenix(spans) -> None:
    import pandas as pd

    records = phoenix_records(spans)
    with open(HERE / "phoenix.jsonl", "w") as fh:  # span_to_json, one per line
        for record in records:
            fh.write(json.dumps(record) + "\n")
    (HERE / "phoenix-array.json").write_text(json.dumps(records[:4], indent=1) + "\n")
    frame = pd.DataFrame([_dataframe_row(r, s) for r, s in zip(records, spans, strict=True)])
    frame = frame.set_index("context.span_id", drop=False).rename_axis(None)
    # without statistics and the Arrow schema copy, to keep the file small
    frame.to_parquet(HERE / "phoenix.parquet", compression="zstd", write_statistics=False,
                     store_schema=False)


def main() -> None:
    spans, _ = record()
    (HERE / "expected.json").write_text(json.dumps(expected(spans), indent=1) + "\n")
    write_otlp(spans)
    write_console(spans)
    write_phoenix(spans)
    for path in sorted(HERE.iterdir()):
        if path.suffix != ".py":
            print(f"{path.stat().st_size:>8}  {path.name}")


if __name__ == "__main__":
    main()
