"""How fast, and in how much memory, a large OTLP JSON export is read and grouped into traces.

Generates (once per size, cached in ``--work``) an export of about ``--size-mb`` megabytes as
the Collector's file exporter writes it: JSON lines of up to 512 spans (the Python SDK's batch
size), the spans of about 50 concurrent requests interleaved in the order they end. Each
request is an OpenInference LangChain RAG trace: a chain, a router, a retriever with five
documents, a reranker, a stuffing chain, a chat model call (one in ten retried after a rate
limit), an HTTP client span under it, and one in four a SQL tool call.

Then, in a fresh interpreter, ``OtlpJsonReader().read`` + ``group_traces`` consume the whole
file; printed: wall time, spans/s, MB/s and the child's peak RSS (``ru_maxrss``) against the
target of 500 MB for a 1 GB export.

    python benchmarks/trace_import.py                    # 1 GB
    python benchmarks/trace_import.py --size-mb 200
    python benchmarks/trace_import.py --size-mb 200 --memory-spans 10000
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

TARGET_MB = 500
BATCH = 512
CONCURRENT = 50
T0 = 1_714_564_800_000_000_000
WORDS = ("shoe", "size", "return", "order", "price", "delivery", "colour", "warranty", "red",
         "blue", "leather", "sole", "refund", "store", "week", "invoice", "customer", "policy")


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def _kv(key: str, value) -> dict:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    return {"key": key, "value": {"stringValue": value}}


def _documents(prefix: str, docs) -> list[dict]:
    out = []
    for i, (doc_id, content, score) in enumerate(docs):
        out += [_kv(f"{prefix}.{i}.document.id", doc_id),
                _kv(f"{prefix}.{i}.document.content", content),
                _kv(f"{prefix}.{i}.document.score", score),
                _kv(f"{prefix}.{i}.document.metadata", json.dumps({"source": "catalog",
                                                                    "page": i}))]
    return out


def rag_trace(rng: random.Random, number: int) -> list[dict]:
    """The spans of one request, in the order they end, as OTLP JSON span objects."""
    trace_id = f"{rng.getrandbits(128):032x}"
    ids = iter(f"{rng.getrandbits(64):016x}" for _ in range(16))
    base = T0 + number * 40_000_000
    question = _text(rng, 12) + "?"
    docs = [(f"doc-{rng.randrange(10_000)}", _text(rng, 60), round(rng.random(), 4))
            for _ in range(5)]
    context = "\n\n".join(d[1] for d in docs[:3])
    answer = _text(rng, 40)
    spans: list[dict] = []

    def span(name: str, parent: str | None, start: int, end: int, attributes: list[dict],
             kind: int = 1, code: int = 1, events: list | None = None,
             span_id: str | None = None) -> None:
        record = {"traceId": trace_id, "spanId": span_id or next(ids), "name": name,
                  "kind": kind, "startTimeUnixNano": str(base + start * 1_000_000),
                  "endTimeUnixNano": str(base + end * 1_000_000),
                  "attributes": attributes, "status": {"code": code} if code else {}}
        if parent:
            record["parentSpanId"] = parent
        if events:
            record["events"] = events
        spans.append(record)

    root, stuff, llm = next(ids), next(ids), next(ids)  # parents end after their children
    oi = "openinference.span.kind"
    span("router", root, 2, 30, [_kv(oi, "CHAIN"), _kv("input.value", question),
                                 _kv("output.value", "documents")])
    span("VectorStoreRetriever", root, 31, 120,
         [_kv(oi, "RETRIEVER"), _kv("input.value", question)]
         + _documents("retrieval.documents", docs))
    span("CohereRerank", root, 121, 200,
         [_kv(oi, "RERANKER"), _kv("reranker.query", question), _kv("reranker.top_k", 3),
          _kv("reranker.model_name", "rerank-v3")]
         + _documents("reranker.input_documents", docs)
         + _documents("reranker.output_documents", docs[:3]))
    if number % 4 == 0:
        sql = f"SELECT COUNT(*) FROM orders WHERE customer_id = {rng.randrange(1000)}"
        span("sql_query", root, 201, 260,
             [_kv(oi, "TOOL"), _kv("tool.name", "sql_query"),
              _kv("tool.parameters", json.dumps({"query": sql})), _kv("input.value", sql),
              _kv("output.value", json.dumps([[rng.randrange(100)]])),
              _kv("output.mime_type", "application/json")])
    messages = [("system", "Answer from the context.\n\n" + context), ("user", question)]
    prompt = [_kv(oi, "LLM"), _kv("llm.model_name", "gpt-4o-mini"),
              _kv("llm.invocation_parameters", json.dumps({"temperature": 0}))]
    for i, (role, content) in enumerate(messages):
        prompt += [_kv(f"llm.input_messages.{i}.message.role", role),
                   _kv(f"llm.input_messages.{i}.message.content", content)]
    start = 270
    if number % 10 == 0:  # a rate limit, then the retry
        span("ChatOpenAI", stuff, start, start + 300, prompt, code=2, events=[
            {"timeUnixNano": str(base + (start + 300) * 1_000_000), "name": "exception",
             "attributes": [_kv("exception.type", "openai.RateLimitError"),
                            _kv("exception.message", "429 Too Many Requests")]}])
        start += 320
    span("POST", llm, start + 5, start + 790,
         [_kv("http.request.method", "POST"), _kv("url.full", "https://api.invalid/v1/chat"),
          _kv("http.response.status_code", 200)], kind=3, code=0)
    span("ChatOpenAI", stuff, start, start + 800, prompt + [
        _kv("llm.output_messages.0.message.role", "assistant"),
        _kv("llm.output_messages.0.message.content", answer), _kv("output.value", answer),
        _kv("llm.token_count.prompt", 900), _kv("llm.token_count.completion", 40),
        _kv("llm.token_count.total", 940)], span_id=llm)
    span("StuffDocumentsChain", root, 265, start + 810,
         [_kv(oi, "CHAIN"), _kv("input.value", json.dumps({"question": question})),
          _kv("input.mime_type", "application/json"), _kv("output.value", answer)],
         span_id=stuff)
    span("RetrievalQA", None, 0, start + 820,
         [_kv(oi, "CHAIN"), _kv("input.value", json.dumps({"query": question})),
          _kv("input.mime_type", "application/json"), _kv("output.value", answer),
          _kv("session.id", f"s-{number % 997}"), _kv("metadata", json.dumps({"n": number}))],
         span_id=root)
    return spans


def generate(path: Path, size_mb: int, seed: int = 7) -> None:
    """Write an OTLP JSON export of about ``size_mb`` MB to ``path``."""
    rng = random.Random(seed)
    target = size_mb * 1_000_000
    resource_block = {"attributes": [_kv("service.name", "shop-assistant"),
                                     _kv("telemetry.sdk.language", "python")]}
    scope = {"name": "openinference.instrumentation.langchain", "version": "0.1.30"}
    pending: list[list[dict]] = []
    number = 0
    written = 0
    batch: list[dict] = []
    tmp = path.with_suffix(".part")
    with open(tmp, "w") as fh:
        while written < target:
            while len(pending) < CONCURRENT:
                pending.append(rag_trace(rng, number))
                number += 1
            spans = pending[rng.randrange(len(pending))]
            batch.append(spans.pop(0))
            if not spans:
                pending.remove(spans)
            if len(batch) == BATCH:
                line = json.dumps({"resourceSpans": [{"resource": resource_block, "scopeSpans": [
                    {"scope": scope, "spans": batch}]}]}, separators=(",", ":"))
                fh.write(line + "\n")
                written += len(line) + 1
                batch = []
    tmp.rename(path)


def child(path: Path, memory_spans: int) -> None:
    """Read and group ``path``; print one JSON line of figures."""
    from evalharness.spans.group import group_traces
    from evalharness.spans.readers.otlp_json import OtlpJsonReader

    began = time.perf_counter()
    spans = traces = 0
    for group in group_traces(OtlpJsonReader().read(path), memory_spans=memory_spans):
        traces += 1
        spans += len(group)
    seconds = time.perf_counter() - began
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": seconds, "spans": spans, "traces": traces,
                      "peak_mb": peak_kb / 1024, "memory_spans": memory_spans}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=1000)
    parser.add_argument("--memory-spans", type=int, default=None,
                        help="group_traces' memory_spans (default: its own default)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/evalharness-trace-import"))
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        from evalharness.spans.group import MEMORY_SPANS
        child(args.child, args.memory_spans or MEMORY_SPANS)
        return
    args.work.mkdir(parents=True, exist_ok=True)
    path = args.work / f"otlp-{args.size_mb}mb.jsonl"
    if not path.exists():
        began = time.perf_counter()
        generate(path, args.size_mb)
        print(f"generated {path} in {time.perf_counter() - began:.0f} s")
    size_mb = path.stat().st_size / 1e6
    command = [sys.executable, __file__, "--child", str(path)]
    if args.memory_spans:
        command += ["--memory-spans", str(args.memory_spans)]
    result = json.loads(subprocess.run(command, check=True, capture_output=True,
                                       text=True).stdout.strip().splitlines()[-1])
    seconds = result["seconds"]
    print(f"{size_mb:.0f} MB, {result['spans']} spans in {result['traces']} traces "
          f"(memory_spans={result['memory_spans']}): "
          f"{seconds:.1f} s, {result['spans'] / seconds:,.0f} spans/s, "
          f"{size_mb / seconds:.1f} MB/s; peak RSS {result['peak_mb']:.0f} MB "
          f"(target for 1 GB: under {TARGET_MB} MB: "
          f"{'met' if result['peak_mb'] < TARGET_MB else 'NOT met'})")


if __name__ == "__main__":
    main()
