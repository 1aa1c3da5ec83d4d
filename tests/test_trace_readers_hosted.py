"""The Langfuse and LangSmith trace readers on exports shaped like the real ones
(tests/data/traces/hosted): spans, their tree, times, attributes, usage and status; format
detection; streaming; and errors that name the file, line and field."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from evalharness.errors import InputError
from evalharness.spans.readers import SNIFF_BYTES, _hosted, _jsonstream, detect
from evalharness.spans.readers.langfuse import LangfuseReader
from evalharness.spans.readers.langsmith import LangSmithReader

DATA = Path(__file__).resolve().parent / "data" / "traces" / "hosted"
NS = 1_000_000_000
FIXTURES = {
    "langfuse_observations.json": "langfuse",  # GET /api/public/observations page
    "langfuse_trace.json": "langfuse",  # GET /api/public/traces/{id}
    "langfuse_blob_export.jsonl": "langfuse",  # blob storage export, traces + observations
    "langfuse_v2_pages.jsonl": "langfuse",  # GET /api/public/v2/observations, a page a line
    "langsmith_rag_runs.jsonl": "langsmith",  # runs as JSON Lines
    "langsmith_graph_runs.json": "langsmith",  # POST /runs/query: {"runs": [...]}
}
READERS = {"langfuse": LangfuseReader, "langsmith": LangSmithReader}


def read(name: str | Path):
    path = name if isinstance(name, Path) else DATA / name
    return list(READERS[FIXTURES[path.name]]().read(path))


def by_name(spans, name: str, trace: str | None = None):
    found = [s for s in spans if s.name == name and trace in (None, s.trace_id)]
    assert found, f"no span {name!r}"
    return found


def one(spans, name: str, trace: str | None = None):
    found = by_name(spans, name, trace)
    assert len(found) == 1, f"{len(found)} spans {name!r}"
    return found[0]


def ns(iso: str) -> int:
    return _hosted.iso_ns(iso)


# -- detection


@pytest.mark.parametrize("name", FIXTURES)
def test_detect_picks_the_format(name):
    assert detect(DATA / name).name == FIXTURES[name]


@pytest.mark.parametrize("name", FIXTURES)
def test_gzipped_exports_are_detected_and_read_alike(name, tmp_path):
    packed = tmp_path / (name + ".gz")
    packed.write_bytes(gzip.compress((DATA / name).read_bytes()))
    reader = detect(packed)
    assert reader.name == FIXTURES[name]
    assert [s.to_json().replace(str(packed), "F") for s in reader.read(packed)] == [
        s.to_json().replace(str(DATA / name), "F") for s in read(name)]


OTLP_JSON = json.dumps({"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{
    "scope": {"name": "openinference.instrumentation.langchain"}, "spans": [{
        "traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "spanId": "00f067aa0ba902b7",
        "name": "ChatOpenAI", "kind": 1, "startTimeUnixNano": "1748942042118000000",
        "endTimeUnixNano": "1748942043118000000", "attributes": [
            {"key": "openinference.span.kind", "value": {"stringValue": "LLM"}}]}]}]}]})
PHOENIX_JSON = json.dumps({"name": "ChatOpenAI", "context": {
    "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7"},
    "span_kind": "LLM", "parent_id": None, "start_time": "2025-06-03T09:14:02.118000+00:00",
    "end_time": "2025-06-03T09:14:03.118000+00:00", "status_code": "OK",
    "attributes": {"openinference": {"span": {"kind": "LLM"}}}})


@pytest.mark.parametrize("text", [OTLP_JSON, PHOENIX_JSON, "time,name\n1,x\n", ""])
def test_sniffers_leave_other_formats_alone(text):
    head = text.encode()
    assert not LangfuseReader().sniff(head)
    assert not LangSmithReader().sniff(head)


def test_each_sniffer_claims_only_its_own_exports():
    for name, fmt in FIXTURES.items():
        head = (DATA / name).read_bytes()[:SNIFF_BYTES]
        assert LangfuseReader().sniff(head) is (fmt == "langfuse"), name
        assert LangSmithReader().sniff(head) is (fmt == "langsmith"), name
    others = [p for p in (DATA.parent).rglob("*") if p.is_file() and DATA not in p.parents]
    for path in others:  # the OpenTelemetry-family fixtures, when present
        if "langfuse" in path.name or "langsmith" in path.name:
            continue  # a hosted export elsewhere (tests/data/traces/shapes/), named so
        head = path.read_bytes()[:SNIFF_BYTES]
        assert not LangfuseReader().sniff(head) and not LangSmithReader().sniff(head), path


# -- Langfuse


RAG_A, RAG_B = "6513270e269e0d37f2a74de452e6b438", "3d9c172411e20b8f6b0d549b6f03675a"
GRAPH = "a170b33839263059f28c105d1fb17c23"


def test_langfuse_api_page_of_a_rag_chain():
    spans = read("langfuse_observations.json")
    assert len(spans) == 10
    assert [s.trace_id for s in spans].count(RAG_B) == 3  # two traces, interleaved
    assert {s.scope for s in spans} == {"langfuse"}

    root = one(spans, "RunnableSequence", RAG_A)
    assert (root.span_id, root.parent_id, root.kind) == ("0c5c7fd0a6a3a450", RAG_A, "CHAIN")
    assert root.start_ns == ns("2025-06-03T09:14:02.118Z")
    assert root.end_ns == ns("2025-06-03T09:14:05.318Z")
    assert root.duration_ms == 3200
    assert root.attributes["input"] == {"question": "What is the refund window for opened items?"}
    assert root.attributes["output"] == "Opened items can be returned within 14 days of delivery."
    assert all(s.parent_id == root.span_id for s in spans if s.trace_id == RAG_A and s is not root)

    retriever = one(spans, "VectorStoreRetriever", RAG_A)
    assert retriever.kind == "RETRIEVER"
    assert [d["metadata"]["doc_id"] for d in retriever.attributes["output"]] == [
        "returns-3", "returns-1", "shipping-2"]
    assert retriever.attributes["metadata"]["ls_vector_store_provider"] == "Chroma"
    rerank = one(spans, "rerank", RAG_A)
    assert rerank.kind == "SPAN"
    assert rerank.attributes["output"][0] == {"doc_id": "returns-3", "relevance_score": 0.91}
    assert {one(spans, n, RAG_A).kind for n in ("ChatPromptTemplate", "StrOutputParser")} == {
        "CHAIN"}

    failed, answered = sorted(by_name(spans, "ChatOpenAI", RAG_A), key=lambda s: s.start_ns)
    assert (failed.status, failed.attributes["level"]) == ("ERROR", "ERROR")
    assert failed.status_message.startswith("Error code: 429")
    assert "usage" not in failed.attributes  # the API's zeros: no tokens were used
    assert answered.status is None and answered.attributes["level"] == "DEFAULT"
    assert answered.kind == "GENERATION"
    assert answered.attributes["model"] == "gpt-4o-mini-2024-07-18"
    assert answered.attributes["usage"] == {"input": 412, "output": 18, "total": 430}
    assert answered.attributes["cost_details"]["total"] == pytest.approx(7.26e-05)
    assert answered.attributes["model_parameters"] == {"temperature": "0", "max_tokens": 256}
    assert answered.attributes["completion_start_ns"] == answered.start_ns + 600_000_000
    assert answered.attributes["input"][1] == {
        "role": "user", "content": "What is the refund window for opened items?"}
    assert answered.source.endswith("langfuse_observations.json, line 32, record 2")


def test_langfuse_trace_with_its_observations_is_a_tree_under_the_trace():
    spans = read("langfuse_trace.json")
    trace = spans[-1]  # a record holding others comes after them
    assert (trace.kind, trace.span_id, trace.parent_id, trace.trace_id) == (
        "TRACE", GRAPH, None, GRAPH)
    assert trace.name == "support-graph"
    assert trace.start_ns == ns("2025-06-03T10:02:44.500Z")
    assert trace.end_ns == trace.start_ns + round(2.41 * NS)  # its latency
    question = "How many orders did customer 42 place in March 2025?"
    assert trace.attributes["input"] == {"messages": [{"role": "user", "content": question}]}
    assert trace.attributes["session_id"] == "sess-0193"
    assert trace.attributes["user_id"] == "user-42"
    assert trace.attributes["tags"] == ["router-v2", "prod"]
    assert trace.attributes["metadata"] == {"case_id": "q017", "thread_id": "t-8812"}
    assert trace.attributes["scores"][0]["name"] == "user-feedback"

    graph = one(spans, "LangGraph")
    assert graph.parent_id == GRAPH  # a top-level observation hangs under the trace
    ids = {s.span_id: s for s in spans}
    assert all(s.parent_id in ids for s in spans if s is not trace)
    for node in ("router", "sql_agent", "answer"):
        span = one(spans, node)
        assert span.parent_id == graph.span_id
        assert span.attributes["metadata"]["langgraph_node"] == node
    assert one(spans, "sql_agent").kind == "AGENT"
    edge = one(spans, "route_question")
    assert (edge.parent_id, edge.attributes["output"]) == (one(spans, "router").span_id,
                                                           "sql_agent")

    tool = one(spans, "sql_db_query")
    assert (tool.kind, tool.parent_id) == ("TOOL", one(spans, "sql_agent").span_id)
    assert tool.attributes["input"]["query"].startswith("SELECT COUNT(*) FROM orders")
    assert tool.attributes["output"] == "[(7,)]"
    router_llm = [s for s in by_name(spans, "ChatOpenAI")
                  if s.parent_id == one(spans, "router").span_id][0]
    assert router_llm.attributes["input"] == "__REDACTED__"  # masked by the app, kept as is
    assert router_llm.attributes["usage"] == {"input": 188, "output": 3, "total": 191}
    event = one(spans, "cache-miss")
    assert (event.kind, event.start_ns) == ("EVENT", event.end_ns)


def test_langfuse_blob_export_reads_like_the_api():
    blob = read("langfuse_blob_export.jsonl")
    api = {s.span_id: s for s in read("langfuse_trace.json")}
    trace = blob[0]
    assert (trace.kind, trace.span_id, trace.parent_id) == ("TRACE", GRAPH, None)
    assert trace.end_ns is None  # the blob export's traces carry no latency
    for key in ("input", "output", "session_id", "user_id", "tags", "metadata", "release"):
        assert trace.attributes[key] == api[GRAPH].attributes[key], key
    assert trace.start_ns == api[GRAPH].start_ns
    assert [s.source.rsplit(", ", 1)[1] for s in blob] == [f"line {n}" for n in range(1, 7)]

    for span in blob[1:]:
        same = api[span.span_id]
        assert (span.trace_id, span.parent_id, span.kind, span.name) == (
            same.trace_id, same.parent_id, same.kind, same.name)
        assert (span.start_ns, span.end_ns) == (same.start_ns, same.end_ns)
        for key in ("input", "output", "usage", "usage_details", "model", "model_parameters",
                    "level", "completion_start_ns"):
            assert span.attributes.get(key) == same.attributes.get(key), (span.name, key)
    router = one(blob, "router")
    # ClickHouse's metadata map holds strings: JSON texts decoded, the rest as written
    assert router.attributes["metadata"]["langgraph_triggers"] == ["branch:to:router"]
    assert router.attributes["metadata"]["langgraph_step"] == "1"


def test_langfuse_v2_pages_decode_the_raw_input_and_output():
    v2 = read("langfuse_v2_pages.jsonl")
    v1 = {s.span_id: s for s in read("langfuse_observations.json")}
    assert [s.source.rsplit("/", 1)[1] for s in v2] == [
        "langfuse_v2_pages.jsonl, line 1, record 1", "langfuse_v2_pages.jsonl, line 1, record 2",
        "langfuse_v2_pages.jsonl, line 2, record 1"]
    for span in v2:
        same = v1[span.span_id]
        assert (span.parent_id, span.kind, span.start_ns, span.end_ns) == (
            same.parent_id, same.kind, same.start_ns, same.end_ns)
        assert span.attributes["input"] == same.attributes["input"]
        assert span.attributes.get("output") == same.attributes.get("output")
        assert span.attributes.get("usage") == same.attributes.get("usage")
        assert (span.attributes["session_id"], span.attributes["trace_name"]) == ("sess-0107",
                                                                                 "rag")
    assert one(v2, "ChatOpenAI").attributes["model"] == "gpt-4o-mini-2024-07-18"


# -- LangSmith


LS_A, LS_B = "87751d4c-a850-4e2c-84dc-da6a797d76de", "35d30d74-e7ed-4867-96f5-47ab298a59f8"


def test_langsmith_runs_of_a_rag_chain():
    spans = read("langsmith_rag_runs.jsonl")
    assert [s.trace_id for s in spans] == [LS_A, LS_A, LS_B, LS_A, LS_B, LS_A, LS_A, LS_B, LS_A,
                                           LS_A]  # interleaved
    assert {s.scope for s in spans} == {"langsmith"}
    root = one(spans, "RunnableSequence", LS_A)
    assert (root.span_id, root.parent_id, root.kind, root.status) == (LS_A, None, "chain", "OK")
    assert root.start_ns == ns("2025-06-03T09:14:02.118Z")
    assert root.attributes["inputs"] == {"question": "What is the refund window for opened items?"}
    assert root.attributes["metadata"] == {"case_id": "q007"}
    assert root.attributes["tags"] == ["rag", "prod"]
    # on a chain, LangSmith's sum over the LLM runs below it
    assert root.attributes["usage"] == {"input": 412, "output": 18, "total": 430}
    assert "usage" not in one(spans, "VectorStoreRetriever", LS_A).attributes  # zeros
    assert all(s.parent_id == LS_A for s in spans if s.trace_id == LS_A and s is not root)

    kinds = {s.name: s.kind for s in spans if s.trace_id == LS_A}
    assert kinds == {"RunnableSequence": "chain", "VectorStoreRetriever": "retriever",
                     "rerank": "chain", "ChatPromptTemplate": "prompt", "ChatOpenAI": "llm",
                     "StrOutputParser": "parser"}
    prompt = one(spans, "ChatPromptTemplate")  # no parent_run_id: its dotted_order gives it
    assert prompt.parent_id == LS_A
    parser = one(spans, "StrOutputParser")  # times without a Z are UTC
    assert parser.start_ns == ns("2025-06-03T09:14:05.165Z")
    docs = one(spans, "VectorStoreRetriever", LS_A).attributes["outputs"]["documents"]
    assert [d["metadata"]["doc_id"] for d in docs] == ["returns-3", "returns-1", "shipping-2"]
    assert one(spans, "rerank").attributes["outputs"]["output"][0]["relevance_score"] == 0.91

    failed, answered = sorted(by_name(spans, "ChatOpenAI", LS_A), key=lambda s: s.start_ns)
    assert failed.status == "ERROR"
    assert failed.status_message.startswith('RateLimitError("Error code: 429')
    assert "Traceback" in failed.attributes["error"] and "Traceback" not in failed.status_message
    assert failed.attributes["outputs"] is None and "usage" not in failed.attributes
    assert [(e.name, e.time_ns) for e in failed.events] == [("start", failed.start_ns),
                                                            ("error", failed.end_ns)]
    assert answered.status == "OK"
    assert answered.attributes["usage"] == {"input": 412, "output": 18, "total": 430}
    assert answered.attributes["cost"]["total"] == pytest.approx(7.26e-05)
    assert answered.attributes["model"] == "gpt-4o-mini"
    assert answered.attributes["metadata"]["ls_provider"] == "openai"
    assert answered.attributes["invocation_params"]["temperature"] == 0.0
    assert answered.attributes["first_token_ns"] == answered.start_ns + 610_000_000
    assert answered.source.endswith("langsmith_rag_runs.jsonl, line 9")


def test_langsmith_preset_maps_ids_kept_in_metadata_and_a_reranking_lambda():
    """The documents' ids are in `metadata.doc_id`, the reranker is a lambda whose output is
    a list of records; before, the retriever was an error ("records no document ids")."""
    from evalharness.pipeline import ComponentSpec, Pipeline
    from evalharness.spans.importer import read_mapped

    pipeline = Pipeline({"retriever": ComponentSpec(kind="retriever"),
                         "generator": ComponentSpec(kind="generator")})
    _, mapped = read_mapped(DATA / "langsmith_rag_runs.jsonl", fmt=None, mapping=None,
                            pipeline=pipeline)
    steps = {m.trace_id[:8]: m.trace.retriever for m in mapped}
    reranked, plain = steps["87751d4c"], steps["35d30d74"]
    assert reranked.error is None
    assert reranked.ids == ["shipping-2", "returns-1", "returns-3"]
    assert reranked.scores == [0.91, 0.42, 0.07]
    assert plain.ids == ["shipping-4", "shipping-2", "returns-1"]


def test_langsmith_langgraph_router_and_sql_agent():
    spans = read("langsmith_graph_runs.json")
    assert len(spans) == 9 and len({s.trace_id for s in spans}) == 1
    graph = one(spans, "LangGraph")
    assert graph.parent_id is None and graph.trace_id == graph.span_id
    for node in ("router", "sql_agent", "answer"):
        span = one(spans, node)
        assert (span.kind, span.parent_id) == ("chain", graph.span_id)
        assert span.attributes["metadata"]["langgraph_node"] == node
    agent = one(spans, "sql_agent")
    tool = one(spans, "sql_db_query")
    assert (tool.kind, tool.parent_id) == ("tool", agent.span_id)
    assert tool.attributes["inputs"]["query"] == (
        "SELECT COUNT(*) FROM orders WHERE customer_id = 42 AND order_date >= '2025-03-01' "
        "AND order_date < '2025-04-01'")
    assert tool.attributes["outputs"] == {"output": "[(7,)]"}
    assert tool.attributes["extra"] == {"color": "green"}

    llms = {s.parent_id: s for s in by_name(spans, "ChatOpenAI")}
    router_llm = llms[one(spans, "router").span_id]
    content = router_llm.attributes["inputs"]["messages"][0][1]["kwargs"]["content"]
    assert content.startswith("Customer __REDACTED__ asks")  # an anonymiser's mark, kept
    # no token fields on the run: usage from the message's usage_metadata / the outputs'
    sql_llm = llms[agent.span_id]
    assert sql_llm.attributes["usage"] == {"input": 301, "output": 41, "total": 342}
    answer_llm = llms[one(spans, "answer").span_id]
    assert answer_llm.attributes["usage"] == {"input": 152, "output": 8, "total": 160}
    # that run has neither trace_id nor parent_run_id: its dotted_order gives both
    assert answer_llm.trace_id == graph.span_id
    assert answer_llm.source.endswith("line 564, record 9")


def test_langsmith_child_runs_nested_by_read_run(tmp_path):
    root_id, child_id, grandchild_id = (f"00000000-0000-4000-8000-00000000000{n}"
                                        for n in (1, 2, 3))
    grandchild = {"id": grandchild_id, "name": "sql_db_query", "run_type": "tool",
                  "start_time": "2025-06-03T10:00:00.300", "trace_id": root_id,
                  "inputs": {"query": "SELECT 1"}, "outputs": {"output": "[(1,)]"}}
    child = {"id": child_id, "name": "sql_agent", "run_type": "chain", "trace_id": root_id,
             "start_time": "2025-06-03T10:00:00.200", "child_runs": [grandchild]}
    root = {"id": root_id, "name": "LangGraph", "run_type": "chain",
            "start_time": "2025-06-03T10:00:00.100", "end_time": "2025-06-03T10:00:01.100",
            "child_runs": [child]}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(root, indent=2))
    spans = list(LangSmithReader().read(path))
    assert [(s.name, s.parent_id, s.trace_id) for s in spans] == [
        ("sql_db_query", child_id, root_id), ("sql_agent", root_id, root_id),
        ("LangGraph", None, root_id)]
    assert spans[0].status is None and spans[2].status == "OK"  # no end time: still running


# -- streaming


@pytest.mark.parametrize("name", FIXTURES)
def test_a_tiny_read_buffer_reads_the_same(name, monkeypatch):
    """Every value is cut at buffer ends many times over: the reader must read on."""
    whole = [s.to_json() for s in read(name)]
    monkeypatch.setattr(_jsonstream, "CHUNK", 7)
    assert [s.to_json() for s in read(name)] == whole


def test_one_huge_line_is_streamed_a_record_at_a_time(tmp_path, monkeypatch):
    """A UI or API export as one line of ``{"data": [...]}``: the buffer holds about one
    record, never the file."""
    page = json.loads((DATA / "langfuse_observations.json").read_text())
    records = [dict(o, id=f"{n:016x}") for n in range(1000) for o in page["data"][:1]]
    path = tmp_path / "observations.json"
    path.write_text(json.dumps({"data": records, "meta": page["meta"]}))
    largest = max(len(json.dumps(r)) for r in records)
    monkeypatch.setattr(_jsonstream, "CHUNK", 4096)
    seen = []
    original = _jsonstream._Stream._read

    def spy(self, size):
        more = original(self, size)
        seen.append(len(self.buf))
        return more

    monkeypatch.setattr(_jsonstream._Stream, "_read", spy)
    spans = list(LangfuseReader().read(path))
    assert [s.span_id for s in spans] == [r["id"] for r in records]
    assert path.stat().st_size > 50 * max(seen)
    assert max(seen) < 2 * (4096 + largest)


# -- errors


def fails(reader, tmp_path, name: str, lines: list, match: str) -> None:
    path = tmp_path / name
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    with pytest.raises(InputError) as caught:
        list(reader().read(path))
    assert f"{path}, " in str(caught.value)
    assert match in str(caught.value), str(caught.value)


def runs():
    return [json.loads(line) for line in (DATA / "langsmith_rag_runs.jsonl").open()]


def observations():
    return [json.loads(line) for line in (DATA / "langfuse_blob_export.jsonl").open()]


@pytest.mark.parametrize("change, match", [
    ({"start_time": "03/06/2025 09:14"},
     "line 4, field start_time: not an ISO 8601 time ('03/06/2025 09:14')"),
    ({"start_time": None}, "line 4, field start_time: missing"),
    ({"end_time": "2025-06-03T25:00:00Z"}, "line 4, field end_time: not an ISO 8601 time"),
    ({"id": None}, "line 4, field id: missing"),
    ({"dotted_order": "20250603T091402118000Z87751d4c"},
     "line 4, field dotted_order: segment 1"),
    ({"parent_run_id": "35d30d74-e7ed-4867-96f5-47ab298a59f8"},
     "line 4, field dotted_order: puts the run under 87751d4c-a850-4e2c-84dc-da6a797d76de, "
     "but parent_run_id is 35d30d74"),
    ({"trace_id": "35d30d74-e7ed-4867-96f5-47ab298a59f8"},
     "line 4, field dotted_order: starts with run 87751d4c"),
    ({"dotted_order": None, "trace_id": None}, "line 4, field trace_id: missing"),
    ({"prompt_tokens": "many"}, "line 4, field prompt_tokens: not a token count ('many')"),
    ({"events": [{"name": "start", "time": "soon"}]},
     "line 4, field events[0].time: not an ISO 8601 time"),
    ({"tags": "prod"}, "line 4, field tags: expected a list of strings"),
    ({"extra": ["metadata"]}, "line 4, field extra: expected an object"),
])
def test_langsmith_malformed_run(tmp_path, change, match):
    lines = runs()
    lines[3].update(change)
    fails(LangSmithReader, tmp_path, "runs.jsonl", lines, "runs.jsonl, " + match)


@pytest.mark.parametrize("change, match", [
    ({"start_time": "yesterday"}, "line 3, field start_time: not an ISO 8601 time"),
    ({"trace_id": None}, "line 3, field trace_id: missing"),
    ({"type": "WORKFLOW"}, "line 3, field type: 'WORKFLOW' is not a Langfuse observation type"),
    ({"level": "FATAL"}, "line 3, field level: 'FATAL' is not one of"),
    ({"usage_details": {"input": "12.5"}}, "line 3, field usage_details.input: not a count"),
    ({"cost_details": {"total": "free"}}, "line 3, field cost_details.total: not a cost"),
    ({"tags": "prod"}, "line 3, field tags: expected a list of strings"),
])
def test_langfuse_malformed_observation(tmp_path, change, match):
    lines = observations()
    lines[2].update(change)
    fails(LangfuseReader, tmp_path, "observations.jsonl", lines, "observations.jsonl, " + match)


def test_langfuse_malformed_records_in_an_api_page(tmp_path):
    page = json.loads((DATA / "langfuse_observations.json").read_text())
    page["data"][2]["usageDetails"] = {"input": -3}
    fails(LangfuseReader, tmp_path, "page.json", [page],
          "page.json, line 1, record 3, field usageDetails.input: not a count (-3)")
    page["data"][2] = {"id": "x", "timestamp": "2025-06-03T09:14:02Z", "value": 1,
                       "dataType": "NUMERIC", "traceId": RAG_A}
    fails(LangfuseReader, tmp_path, "page.json", [page], "record 3: a score, not an "
                                                         "observation or a trace")
    page["data"][2] = {"id": "x", "name": "orphan"}
    fails(LangfuseReader, tmp_path, "page.json", [page],
          "record 3, field startTime: missing — the record is neither")
    trace = json.loads((DATA / "langfuse_trace.json").read_text())
    trace["timestamp"] = "2025-06-03"
    fails(LangfuseReader, tmp_path, "trace.json", [trace],
          "trace.json, line 1, field timestamp: not an ISO 8601 time")


@pytest.mark.parametrize("reader", [LangfuseReader, LangSmithReader])
def test_invalid_json_names_the_line(tmp_path, reader):
    good = json.dumps(runs()[0] if reader is LangSmithReader else observations()[1])
    fails(reader, tmp_path, "export.jsonl", [good, good, '{"id": "x", "name": }', good],
          "export.jsonl, line 3: not valid JSON (Expecting value at column 21)")
    fails(reader, tmp_path, "export.jsonl", [good, "[1, 2]"],
          "export.jsonl, line 2, record 1: expected a JSON object")
    fails(reader, tmp_path, "export.json", ["[" + good + ",", good],
          "export.json, line 3: not valid JSON (the file ends inside a JSON value")


def test_not_utf8_and_missing_files(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_bytes(json.dumps(runs()[0]).encode() + b'\n{"name": "caf\xe9"}\n')
    with pytest.raises(InputError, match="not UTF-8 text"):
        list(LangSmithReader().read(path))
    with pytest.raises(InputError, match="cannot be read"):
        list(LangSmithReader().read(tmp_path / "nowhere.jsonl"))


def test_fixtures_stay_small():
    assert all((DATA / name).stat().st_size < 20_000 for name in FIXTURES)
