"""The OpenTelemetry-family trace readers (OTLP JSON and protobuf, the console exporter,
Phoenix) against fixtures written by the real SDK (tests/data/traces/otel/make_fixtures.py),
their sniffing, their errors, and the grouping of spans into traces."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

from evalharness.errors import InputError
from evalharness.spans.group import group_traces
from evalharness.spans.model import Span
from evalharness.spans.readers import READERS, _jsonstream, detect, reader

DATA = Path(__file__).parent / "data" / "traces" / "otel"
EXPECTED = json.loads((DATA / "expected.json").read_text())
T0 = 1_714_564_800_000_000_000
MS = 1_000_000

FIXTURES = [  # file, format, how many of the expected spans it holds, what it needs
    ("otlp.jsonl", "otlp-json", 14, None),
    ("otlp-snake.jsonl", "otlp-json", 14, None),
    ("otlp-protojson.json", "otlp-json", 5, None),
    ("console.txt", "otel-console", 14, None),
    ("otlp.pb", "otlp-proto", 14, "opentelemetry.proto"),
    ("otlp-varint.pb", "otlp-proto", 14, "opentelemetry.proto"),
    ("otlp-request.pb", "otlp-proto", 14, "opentelemetry.proto"),
    ("phoenix.jsonl", "phoenix", 14, None),
    ("phoenix-array.json", "phoenix", 4, None),
    ("phoenix.parquet", "phoenix", 14, "pyarrow"),
]


def _read(name: str, fmt: str, needs: str | None = None) -> list[Span]:
    if needs:
        pytest.importorskip(needs)
    return list(reader(fmt).read(DATA / name))


def _decoded(value):
    if isinstance(value, str) and value[:1] in "{[":
        return json.loads(value)
    return list(value) if isinstance(value, tuple) else value


def _expected_kind(record: dict, fmt: str) -> str | None:
    attributes = record["attributes"]
    if "openinference.span.kind" in attributes:
        return attributes["openinference.span.kind"]
    if "gen_ai.operation.name" in attributes:
        return attributes["gen_ai.operation.name"]
    return None if fmt == "phoenix" else record["otel_kind"]  # Phoenix: UNKNOWN


# --- every reader against the SDK's own spans --------------------------------------------------


@pytest.mark.parametrize(("name", "fmt", "count", "needs"), FIXTURES)
def test_reader_gives_the_recorded_spans(name, fmt, count, needs):
    spans = _read(name, fmt, needs)
    by_id = {span.span_id: span for span in spans}
    assert len(spans) == len(by_id) == count
    for record in EXPECTED[:count] if count < len(EXPECTED) else EXPECTED:
        span = by_id[record["span_id"]]
        assert span.trace_id == record["trace_id"]
        assert span.parent_id == record["parent_id"]
        assert span.name == record["name"]
        assert span.kind == _expected_kind(record, fmt)
        assert (span.start_ns, span.end_ns) == (record["start_ns"], record["end_ns"])
        assert span.attributes == {k: _decoded(v) for k, v in record["attributes"].items()}
        assert span.status == record["status"]
        assert span.status_message == record["status_message"]
        assert [[e.name, e.time_ns, e.attributes] for e in span.events] == record["events"]
        if fmt in ("otlp-json", "otlp-proto"):
            assert (span.scope, span.scope_version) == (record["scope"], record["scope_version"])
        if fmt != "phoenix":
            assert span.resource["service.name"] == "shop-assistant"
        assert span.source.startswith(f"{DATA / name}, ")


def test_otlp_json_spans_in_detail():
    spans = _read("otlp.jsonl", "otlp-json")
    by_name: dict[str, list[Span]] = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)
    root_a = next(s for s in by_name["RAGChain"] if s.start_ns == T0)
    assert root_a.parent_id is None and root_a.kind == "CHAIN"
    assert root_a.attributes["input.value"] == {"question": "How much are the red running shoes?"}
    assert root_a.attributes["metadata"] == {"user": "u-1", "case": "c-7"}
    assert root_a.attributes["tag.tags"] == ["prod", "v2"]
    assert root_a.resource == {"service.name": "shop-assistant", "service.version": "2.3.0",
                               "deployment.environment.name": "staging",
                               "telemetry.sdk.language": "python"}

    [rerank] = by_name["CohereRerank"]
    assert rerank.kind == "RERANKER" and rerank.parent_id == root_a.span_id
    assert rerank.attributes["reranker.top_k"] == 2
    assert rerank.attributes["reranker.output_documents.1.document.id"] == "doc-88"
    assert rerank.attributes["reranker.output_documents.0.document.score"] == 0.82
    assert rerank.attributes["reranker.input_documents.2.document.metadata"] == {"source": "faq"}

    first, retry = sorted((s for s in by_name["ChatOpenAI"] if s.trace_id == root_a.trace_id),
                          key=lambda s: s.start_ns)
    assert (first.status, first.status_message) == ("ERROR", "RateLimitError: 429 Too Many "
                                                              "Requests")
    [exception] = first.events
    assert exception.name == "exception" and exception.time_ns == T0 + 899 * MS
    assert exception.attributes["exception.type"] == "openai.RateLimitError"
    assert retry.status == "OK" and retry.kind == "LLM"
    assert retry.attributes["llm.invocation_parameters"] == {"model": "gpt-4o-mini",
                                                             "temperature": 0}
    assert retry.attributes["llm.output_messages.0.message.content"] == "They cost 89 EUR."
    assert retry.attributes["llm.token_count.total"] == 68
    assert retry.duration_ms == 900.0

    [http] = by_name["POST"]  # noise: an HTTP client span under the LLM call
    assert http.kind == "CLIENT" and http.parent_id == retry.span_id
    assert http.scope == "opentelemetry.instrumentation.httpx" and http.status == "UNSET"

    [sql] = by_name["sql_query"]
    assert sql.kind == "TOOL"
    assert sql.attributes["tool.parameters"] == {"query": sql.attributes["input.value"]}
    assert sql.attributes["input.value"].startswith("SELECT COUNT(*) FROM orders")
    assert sql.attributes["output.value"] == [[412]]

    redacted = next(s for s in by_name["ChatOpenAI"] if s.trace_id == sql.trace_id)
    assert redacted.attributes["llm.input_messages.1.message.content"] == "__REDACTED__"

    assert by_name["chat gpt-4o"][0].kind == "chat"  # OTel GenAI only
    assert by_name["execute_tool get_weather"][0].kind == "execute_tool"
    assert by_name["GET /healthz"][0].kind == "SERVER"
    assert [s.source.rsplit(" ", 1)[1] for s in spans] == ["1"] * 5 + ["2"] * 5 + ["3"] * 4


def test_console_source_lines_skip_the_applications_prints():
    spans = _read("console.txt", "otel-console")
    lines = (DATA / "console.txt").read_text().splitlines()
    for span in spans:
        number = int(span.source.rsplit(" ", 1)[1])
        assert lines[number - 1] == "{" and lines[number].strip() == f'"name": "{span.name}",'
    assert spans[0].scope is None  # the console exporter does not print the scope


# --- lenient variants ------------------------------------------------------------------------


def test_otlp_json_lenient_variants(tmp_path):
    request = {"resource_spans": [{"resource": {"attributes": []},
                                   "instrumentationLibrarySpans": [{
        "instrumentationLibrary": {"name": "old.lib"},
        "spans": [{
            "trace_id": "0x5B8EFFF798038103D269B633813FC60C", "span_id": "7uGbfsPBsXQ=",
            "parent_span_id": "", "name": "lookup", "kind": "SPAN_KIND_CLIENT",
            "start_time_unix_nano": 1700000000000000000, "end_time_unix_nano": "1700000000500000000",
            "status": {"code": "STATUS_CODE_ERROR", "message": "boom"},
            "attributes": [
                {"key": "n", "value": {"int_value": 3}},
                {"key": "x", "value": {"doubleValue": "NaN"}},
                {"key": "ok", "value": {"boolValue": True}},
                {"key": "raw", "value": {"bytesValue": "AAE="}},
                {"key": "ids", "value": {"arrayValue": {"values": [{"intValue": "1"},
                                                                  {"intValue": "2"}]}}},
                {"key": "llm", "value": {"kvlistValue": {"values": [
                    {"key": "model_name", "value": {"stringValue": "m"}}]}}},
                {"key": "empty", "value": {}},
            ]}]}]}]}
    path = tmp_path / "export.json"
    path.write_text(json.dumps([request, {"resourceMetrics": []}], indent=2))
    [span] = reader("otlp-json").read(path)
    assert span.trace_id == "5b8efff798038103d269b633813fc60c" and span.span_id == "eee19b7ec3c1b174"
    assert span.parent_id is None and span.kind == "CLIENT" and span.scope == "old.lib"
    assert (span.status, span.status_message) == ("ERROR", "boom")
    assert span.duration_ms == 500.0
    x = span.attributes.pop("x")
    assert x != x  # NaN
    assert span.attributes == {"n": 3, "ok": True, "raw": "AAE=", "ids": [1, 2],
                               "llm.model_name": "m"}
    assert detect(path).name == "otlp-json"


def test_otlp_json_request_body_and_empty_records(tmp_path):
    path = tmp_path / "body.json"
    path.write_text('\ufeff\n\n{"resourceSpans": []}\n{}\n')
    assert list(reader("otlp-json").read(path)) == []


# --- sniffing --------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "fmt", "count", "needs"), FIXTURES)
def test_each_fixture_is_detected_as_its_format_only(name, fmt, count, needs):
    assert detect(DATA / name).name == fmt
    head = (DATA / name).read_bytes()[:64 * 1024]
    for other in READERS:
        if other == fmt:
            continue
        try:
            candidate = reader(other)
        except ImportError:
            continue
        assert not candidate.sniff(head), f"{name} also sniffed as {other}"


def test_sniffing_needs_no_optional_package(monkeypatch):
    for module in ("opentelemetry.proto.trace.v1", "pyarrow", "pyarrow.parquet"):
        monkeypatch.setitem(sys.modules, module, None)
    assert detect(DATA / "otlp.pb").name == "otlp-proto"
    assert detect(DATA / "phoenix.parquet").name == "phoenix"


def test_a_missing_extra_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "opentelemetry.proto.trace.v1", None)
    with pytest.raises(InputError, match=r"otlp\.pb: .*pip install 'evalharness\[otlp\]'"):
        list(reader("otlp-proto").read(DATA / "otlp.pb"))
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(InputError, match=r"pip install 'evalharness\[phoenix\]'"):
        list(reader("phoenix").read(DATA / "phoenix.parquet"))


# --- malformed input -------------------------------------------------------------------------


def _otlp_line(**span) -> str:
    base = {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174",
            "name": "x", "kind": 1, "startTimeUnixNano": "1", "endTimeUnixNano": "2"}
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [base, {**base, **span}]}]}]})


@pytest.mark.parametrize(("line", "message"), [
    (_otlp_line(traceId="5b8e"), r"line 3, field resourceSpans\[0\]\.scopeSpans\[0\]\.spans\[1\]"
                                 r"\.traceId: not a hex id"),
    (_otlp_line(spanId=None), r"line 3, field resourceSpans\[0\].+\.spans\[1\]\.spanId: missing"),
    (_otlp_line(kind=9), r"line 3, field .+\.spans\[1\]\.kind: not a span kind"),
    (_otlp_line(startTimeUnixNano="soon"), r"line 3, field .+\.startTimeUnixNano: not an integer"),
    (_otlp_line(attributes=[{"key": "a", "value": {"intValue": "x"}}]),
     r"line 3, field .+\.attributes\[0\]\.value\.intValue: not a valid intValue"),
    (_otlp_line(status={"code": 7}), r"line 3, field .+\.status\.code: not a status code"),
    (_otlp_line(events="none"), r"line 3, field .+\.events: expected a list"),
    ('{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": ', r"line 3: not valid JSON"),
    ('{"resourceSpans": [}', r"line 3: not valid JSON \(Expecting value at column 20\)"),
    ('{"spans": []}', r"line 3, field resourceSpans: missing: not an OTLP traces record"),
])
def test_malformed_otlp_json_names_file_line_and_field(tmp_path, line, message):
    path = tmp_path / "spans.json"
    good = _otlp_line()
    path.write_text(f"{good}\n{good}\n{line}\n{good}\n")
    with pytest.raises(InputError, match=f"spans.json, {message}"):
        list(reader("otlp-json").read(path))


def test_a_broken_line_is_reported_without_reading_on(tmp_path, monkeypatch):
    monkeypatch.setattr(_jsonstream, "CHUNK", 64)
    path = tmp_path / "spans.jsonl"
    path.write_text('{"a": 1}\n{"b": [1,, 2]}\n' + '{"c": 3}\n' * 10_000)
    reads = []
    real = _jsonstream._Stream._read
    monkeypatch.setattr(_jsonstream._Stream, "_read",
                        lambda self, size: reads.append(1) or real(self, size))
    with pytest.raises(InputError, match=r"spans.jsonl, line 2: not valid JSON"):
        list(_jsonstream.records(path))
    assert len(reads) < 5


def _values(path, lists=_jsonstream.NONE, **options):
    return [(item.line, item.value) for item in _jsonstream.records(path, lists, **options)]


def test_values_across_small_reads(tmp_path, monkeypatch):
    monkeypatch.setattr(_jsonstream, "CHUNK", 7)
    path = tmp_path / "v.json"
    path.write_text('[\n {"a": "long string value"},\n {"b": {"c": [1, 2, 3]}}\n]\n'
                    'print output\n{"d": 4}\n')
    with pytest.raises(InputError, match=r"v.json, line 5: not valid JSON \(Expecting value"):
        _values(path)
    assert _values(path, skip_text=True) == [
        (2, {"a": "long string value"}), (3, {"b": {"c": [1, 2, 3]}}), (6, {"d": 4})]
    path.write_text('[{"a": 1}, {"b": 2}')
    with pytest.raises(InputError, match=r"line 1: not valid JSON \(the file ends inside"):
        _values(path)
    path.write_text('{"a": 1}\n{"b": "unterminated')
    with pytest.raises(InputError, match=r"line 2: not valid JSON \(Unterminated string"):
        _values(path)
    path.write_text('{"a": 1,\n "b": }\n')
    with pytest.raises(InputError, match=r"line 1: not valid JSON \(Expecting value at line 2, "
                                         r"column 7\)"):
        _values(path)


def test_skipped_text_may_start_with_a_bracket(tmp_path):
    """A captured stdout's own prints (``[INFO] ...``) between the console exporter's spans."""
    path = tmp_path / "out.txt"
    path.write_text('[INFO] starting\n{\n "a": 1\n}\n[ 2024-05-01 ] done\n[]\n[\n {"b": 2}\n]\n')
    assert _values(path, skip_text=True) == [(2, {"a": 1}), (8, {"b": 2})]


@pytest.mark.parametrize("chunk", [7, 64, 1 << 20])
def test_lists_are_streamed_at_any_depth_whatever_the_buffer(tmp_path, monkeypatch, chunk):
    """The same records, lines and fields whether a value fits the read buffer or not."""
    monkeypatch.setattr(_jsonstream, "CHUNK", chunk)
    path = tmp_path / "v.json"
    document = {"id": "top", "outer": [{"id": "o1", "inner": [1, {"x": "y" * 40}]},
                                       {"name": "o2", "inner": []}], "meta": 3}
    path.write_text(json.dumps(document, indent=1) + "\n" + json.dumps(document) + "\n"
                    + json.dumps([document], indent=1))
    lists = {"outer": {"inner": {}}}
    got = [(i.line, i.field, i.value, i.owner) for i in _jsonstream.records(path, lists)]
    # an element of a list of the top-level object starts a record (line 4); the top-level
    # object, and the same on one line or in a top-level array, each have one line
    one = [("outer[0].inner[0]", 1, "o1"), ("outer[0].inner[1]", {"x": "y" * 40}, "o1"),
           ("outer[0]", {"id": "o1"}, "top"), ("", {"id": "top", "meta": 3}, None)]
    assert got == ([(4, *one[0]), (4, *one[1]), (4, *one[2]), (1, *one[3])]
                   + [(20, *x) for x in one] + [(22, *x) for x in one])


def test_gzipped_otlp_json_is_detected_and_read_alike(tmp_path):
    import gzip

    for name in ("otlp.jsonl", "otlp-protojson.json"):
        packed = tmp_path / (name + ".gz")
        packed.write_bytes(gzip.compress((DATA / name).read_bytes()))
        assert detect(packed).name == "otlp-json"
        spans = list(reader("otlp-json").read(packed))
        assert spans and spans[0].source.startswith(f"{packed}, line ")
        for span in spans:
            span.source = span.source.replace(str(packed), str(DATA / name))
        assert spans == list(reader("otlp-json").read(DATA / name))
    for name, fmt in (("console.txt", "otel-console"), ("phoenix.jsonl", "phoenix")):
        packed = tmp_path / (name + ".gz")
        packed.write_bytes(gzip.compress((DATA / name).read_bytes()))
        assert detect(packed).name == fmt
        assert len(list(reader(fmt).read(packed))) == 14


def _request(spans: int) -> dict:
    base = json.loads(_otlp_line())["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    return {"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]},
        "scopeSpans": [{"scope": {"name": "lib", "version": "1"},
                        "spans": [{**base, "spanId": f"{n + 1:016x}", "name": f"op{n}"}
                                  for n in range(spans)]}]}]}


def test_one_pretty_printed_request_is_read_a_span_at_a_time(tmp_path, monkeypatch):
    """An OTLP/HTTP request body of many spans: the buffer holds about one span, never the
    whole request, and the spans are the ones a whole read gives."""
    path = tmp_path / "request.json"
    path.write_text(json.dumps(_request(2000), indent=2))
    spans = list(reader("otlp-json").read(path))
    assert len(spans) == 2000 and {s.resource["service.name"] for s in spans} == {"svc"}
    assert {(s.scope, s.scope_version) for s in spans} == {("lib", "1")}
    whole = [s.to_json() for s in spans]
    monkeypatch.setattr(_jsonstream, "CHUNK", 4096)
    seen = []  # the most the buffer holds after each read
    real = _jsonstream._Stream._read
    monkeypatch.setattr(_jsonstream._Stream, "_read", lambda self, size: seen.append(
        len(self.buf) - self.pos + size) or real(self, size))
    assert [s.to_json() for s in reader("otlp-json").read(path)] == whole
    assert path.stat().st_size > 50 * max(seen) and max(seen) < 3 * 4096


def test_a_streamed_request_names_the_span_field(tmp_path, monkeypatch):
    monkeypatch.setattr(_jsonstream, "CHUNK", 256)
    request = _request(40)
    request["resourceSpans"][0]["scopeSpans"][0]["spans"][33]["kind"] = 9
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request, indent=2))
    with pytest.raises(InputError, match=r"request.json, line 3, field resourceSpans\[0\]"
                                         r"\.scopeSpans\[0\]\.spans\[33\]\.kind: not a span kind"):
        list(reader("otlp-json").read(path))


@pytest.mark.parametrize(("name", "fmt", "count", "needs"),
                         [f for f in FIXTURES if f[0].endswith((".json", ".jsonl", ".txt"))])
def test_a_tiny_read_buffer_reads_the_same(name, fmt, count, needs, monkeypatch):
    whole = [s.to_json() for s in _read(name, fmt)]
    monkeypatch.setattr(_jsonstream, "CHUNK", 7)
    assert [s.to_json() for s in _read(name, fmt)] == whole


def test_malformed_console_and_phoenix_records(tmp_path):
    console = tmp_path / "console.txt"
    console.write_text('{\n "name": "a",\n "context": {"span_id": "0x0000000000000001"},\n'
                       ' "kind": "SpanKind.INTERNAL"\n}\n')
    with pytest.raises(InputError, match=r"console.txt, line 1, field context.trace_id: missing"):
        list(reader("otel-console").read(console))
    phoenix = tmp_path / "spans.jsonl"
    record = json.loads((DATA / "phoenix.jsonl").read_text().splitlines()[0])
    phoenix.write_text(json.dumps(record) + "\n" + json.dumps({**record, "start_time": "noon"}))
    with pytest.raises(InputError, match=r"spans.jsonl, line 2, field start_time: not an ISO"):
        list(reader("phoenix").read(phoenix))
    phoenix.write_text(json.dumps({**record, "status_code": "FINE"}))
    with pytest.raises(InputError, match=r"line 1, field status_code: not a status code"):
        list(reader("phoenix").read(phoenix))


def test_malformed_protobuf(tmp_path):
    pytest.importorskip("opentelemetry.proto")
    data = (DATA / "otlp.pb").read_bytes()
    path = tmp_path / "cut.pb"
    path.write_bytes(data[:-10])
    with pytest.raises(InputError, match=r"cut.pb, byte \d+: the file ends inside a message"):
        list(reader("otlp-proto").read(path))
    size = int.from_bytes(data[:4], "big")
    broken = bytearray(data)
    broken[4 + size + 4:4 + size + 8] = b"\xff\xff\xff\xff"  # garbage inside message 2
    path.write_bytes(bytes(broken))
    with pytest.raises(InputError, match=rf"cut.pb, message 2 \(byte {4 + size}\)"):
        list(reader("otlp-proto").read(path))


def test_parquet_without_the_phoenix_columns(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "other.parquet"
    pq.write_table(pa.table({"id": [1], "name": ["x"]}), path)
    with pytest.raises(InputError, match=r"other.parquet: not a Phoenix spans table: no column "
                                         r"context.trace_id, context.span_id"):
        list(reader("phoenix").read(path))


# --- grouping --------------------------------------------------------------------------------


def test_grouping_interleaved_traces_in_memory_and_on_disk(tmp_path):
    spans = _read("otlp.jsonl", "otlp-json")
    in_memory = list(group_traces(spans))
    spilled = list(group_traces(spans, memory_spans=10, spill_dir=tmp_path))
    assert spilled == in_memory
    assert list(tmp_path.iterdir()) == []  # the spill file is gone
    assert [len(group) for group in in_memory] == [7, 4, 2, 1]  # traces by first span read
    for group in in_memory:
        assert len({s.trace_id for s in group}) == 1
        assert [s.start_ns for s in group] == sorted(s.start_ns for s in group)
    assert [s.name for s in in_memory[0]] == ["RAGChain", "router", "VectorStoreRetriever",
                                              "CohereRerank", "ChatOpenAI", "ChatOpenAI", "POST"]
    shuffled = spans[:]
    random.Random(3).shuffle(shuffled)
    again = list(group_traces(shuffled, memory_spans=3))
    assert sorted(map(_ids, again)) == sorted(map(_ids, in_memory))


def _ids(group: list[Span]) -> list[str]:
    return [s.span_id for s in group]


def test_grouping_ties_and_missing_start_times_keep_file_order():
    spans = [Span("t", "a", None, "a", start_ns=None), Span("t", "b", None, "b", start_ns=5),
             Span("u", "c", None, "c", start_ns=1), Span("t", "d", None, "d", start_ns=5),
             Span("t", "e", None, "e", start_ns=1)]
    expected = [["e", "b", "d", "a"], ["c"]]
    for memory in (100, 2, 0):
        assert [[s.span_id for s in g] for g in group_traces(spans, memory_spans=memory)] == \
            expected


def test_grouping_all_readers_agree():
    pytest.importorskip("opentelemetry.proto")
    reference = [_ids(g) for g in group_traces(_read("otlp.jsonl", "otlp-json"))]
    for name, fmt in [("console.txt", "otel-console"), ("otlp.pb", "otlp-proto"),
                      ("phoenix.jsonl", "phoenix")]:
        assert [_ids(g) for g in group_traces(_read(name, fmt), memory_spans=5)] == reference


def test_closing_the_groups_early_removes_the_spill_file(tmp_path):
    spans = _read("otlp.jsonl", "otlp-json")
    groups = group_traces(spans, memory_spans=2, spill_dir=tmp_path)
    next(groups)
    assert len(list(tmp_path.iterdir())) == 1
    groups.close()
    assert list(tmp_path.iterdir()) == []
