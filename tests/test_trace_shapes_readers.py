"""Trace readers for the export shapes teams really produce (issue 31, "Formats"): LangSmith
run-ingest bodies (``/runs/batch``, ``/runs/multipart``), the OpenTelemetry SDK's span JSON
however it was saved, Phoenix 20's REST pages and its spans dataframe in SQLite — each
fixture (tests/data/traces/shapes/, its README says what each imitates) converted through
``evalharness traces convert`` to the question, the final answer and every component's values;
then the merging, id and cell rules one by one, and the errors."""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalharness.cli import cli
from evalharness.errors import InputError
from evalharness.spans.readers import READERS, SNIFF_BYTES, _multipart, detect, reader
from evalharness.spans.readers import langsmith as langsmith_reader
from evalharness.spans.readers.langsmith import LangSmithReader
from evalharness.spans.readers.otlp_json import ConsoleReader, any_value
from evalharness.spans.readers.phoenix import PhoenixReader

SHAPES = Path(__file__).resolve().parent / "data" / "traces" / "shapes"

# -- what every fixture of one recording must convert to

QUESTION_1 = "What is the refund window for opened items?"
QUESTION_2 = "How many orders were placed last week?"
SQL_2 = "SELECT COUNT(*) FROM orders WHERE placed_at >= date('now', '-7 days')"
RAG = {  # otelsdk_make.plan(), as the SDK and Phoenix wrote it
    "shape-1": {"question": QUESTION_1, "router.routes": ["docs"],
                "retriever.ids": ["returns-3", "returns-1", "shipping-2"],
                "generator.answer": "Opened items can be returned within 14 days of delivery.",
                "generator.usage": {"prompt_tokens": 61, "completion_tokens": 12}},
    "shape-2": {"question": QUESTION_2, "router.routes": ["sql"], "text2sql.sql": SQL_2,
                "text2sql.rows": [[412]],
                "generator.answer": "412 orders were placed last week."},
}
RUNS = {  # langsmith_make.py, as the SDK sent it
    "q101": {"question": QUESTION_1, "retriever.ids": ["returns-3", "returns-1"],
             "generator.answer": "Opened items can be returned within 14 days of delivery.",
             "generator.usage": {"prompt_tokens": 412, "completion_tokens": 18}},
    "q102": {"question": "Do you ship to Norway?", "retriever.ids": ["shipping-7"],
             "generator.answer": "Yes, we ship to Norway in 5-7 business days."},
}
FIXTURES = {  # file: (format, expected cases)
    "langsmith_batch_payload.json": ("langsmith", RUNS),
    "langsmith_batch_payloads.jsonl": ("langsmith", RUNS),
    "langsmith_multipart.txt": ("langsmith", RUNS),
    "otelsdk_spans.jsonl": ("otel-console", RAG),
    "otelsdk_spans_array.json": ("otel-console", RAG),
    "otelsdk_agent_dump.json": ("otel-console", RAG),
    "phoenix_rest_spans_pages.jsonl": ("phoenix", RAG),
    "phoenix_rest_otlpv1_pages.jsonl": ("phoenix", RAG),
    "phoenix_spans_dataframe.parquet": ("phoenix", RAG),
    "phoenix_spans_astype_str.db": ("phoenix", RAG),
    "phoenix_spans_json.db": ("phoenix", RAG),
}
ONE_PAGE = ["phoenix_rest_spans_page1.json", "phoenix_rest_otlpv1_page1.json"]
MINE = sorted(p.name for p in SHAPES.iterdir()
              if p.name.startswith(("langsmith_", "otelsdk_", "phoenix_")) and p.suffix != ".py")


def convert(path: Path, tmp_path: Path) -> tuple[dict[str, dict], dict[str, str], str]:
    """``evalharness traces convert`` of ``path``: the traces by case id, the questions by
    case id, and what it printed."""
    out, cases = tmp_path / "traces.jsonl", tmp_path / "cases.jsonl"
    result = CliRunner().invoke(cli, ["traces", "convert", str(path), "--out", str(out),
                                      "--cases", str(cases)])
    assert result.exit_code == 0, result.output
    traces = {t["case_id"]: t for t in map(json.loads, out.read_text().splitlines())}
    questions = {c["id"]: c["question"] for c in map(json.loads, cases.read_text().splitlines())}
    return traces, questions, result.output


def value(trace: dict, dotted: str):
    component, _, name = dotted.partition(".")
    assert component in trace, f"{component} not mapped: {trace}"
    assert "error" not in trace[component], trace[component]
    return trace[component][name]


@pytest.mark.parametrize("name", FIXTURES)
def test_each_shape_converts_to_its_questions_answers_and_components(name, tmp_path):
    fmt, expected = FIXTURES[name]
    traces, questions, printed = convert(SHAPES / name, tmp_path)
    assert f"({fmt})" in printed
    assert sorted(traces) == sorted(expected)
    for case_id, want in expected.items():
        assert questions[case_id] == want["question"]
        for dotted, wanted in want.items():
            if dotted != "question":
                assert value(traces[case_id], dotted) == wanted, (case_id, dotted)


@pytest.mark.parametrize("name", ONE_PAGE)
def test_one_rest_page_a_file_reads_the_spans_it_holds(name, tmp_path):
    """A page of 5 spans: the SQL trace whole, the other cut by the page's end (its spans
    are on page 2); pages concatenated into one file read whole (above)."""
    traces, questions, _ = convert(SHAPES / name, tmp_path)
    assert value(traces["shape-2"], "text2sql.sql") == SQL_2
    assert value(traces["shape-2"], "generator.answer") == "412 orders were placed last week."
    assert questions["shape-2"] == QUESTION_2
    assert "no component of the pipeline could be mapped" in traces["shape-1"]["error"]
    pages = b"".join((SHAPES / n).read_bytes() for n in (name, name))  # `cat page*.json`
    (tmp_path / "pages.json").write_bytes(pages)
    assert len(list(reader("phoenix").read(tmp_path / "pages.json"))) == 10


@pytest.mark.parametrize("name", MINE)
def test_each_fixture_is_detected_as_its_format_only(name):
    fmt = FIXTURES.get(name, ("phoenix",) if name.startswith("phoenix_") else ("otel-console",))[0]
    assert detect(SHAPES / name).name == fmt
    head = (SHAPES / name).read_bytes()[:SNIFF_BYTES]
    for other in READERS:
        if other != fmt:
            assert not reader(other).sniff(head), f"{name} also sniffed as {other}"


def test_gzipped_payloads_read_alike(tmp_path):
    for name in ("langsmith_batch_payloads.jsonl", "langsmith_multipart.txt"):
        packed = tmp_path / (name + ".gz")
        packed.write_bytes(gzip.compress((SHAPES / name).read_bytes()))
        assert detect(packed).name == "langsmith"
        assert [s.attributes for s in LangSmithReader().read(packed)] == [
            s.attributes for s in LangSmithReader().read(SHAPES / name)]


def test_fixtures_stay_small():
    assert all((SHAPES / name).stat().st_size < 25_000 for name in MINE)


# -- LangSmith run-ingest bodies

RUN = "0196e4c1-000a-7000-8000-00000000000a"
CHILD = "0196e4c1-000b-7000-8000-00000000000b"
ORDER = "20250603T091402118000Z" + RUN
CHILD_ORDER = ORDER + ".20250603T091402130000Z" + CHILD


def _post(run_id=RUN, order=ORDER, **fields):
    return {"id": run_id, "trace_id": RUN, "dotted_order": order, "name": "RunnableSequence",
            "run_type": "chain", "start_time": "2025-06-03T09:14:02.118000+00:00",
            "inputs": {"question": "Q?"}, "outputs": {}, "extra": {"metadata": {"case_id": "c"}},
            **fields}


def _patch(run_id=RUN, order=ORDER, **fields):
    return {"id": run_id, "trace_id": RUN, "dotted_order": order, "name": None,
            "run_type": None, "parent_run_id": None, "end_time": "2025-06-03T09:14:04.118Z",
            "outputs": {"output": "A."}, **fields}


def _read_lines(tmp_path, *payloads, name="runs.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(p) + "\n" for p in payloads))
    return list(detect(path).read(path))


def test_a_run_ingest_payload_is_read_not_refused_for_a_missing_id(tmp_path):
    """The bug: ``{"post": [...], "patch": [...]}`` was refused with "line 1, field id:
    missing" (read as one run). Post and patch of one id are one run."""
    spans = _read_lines(tmp_path, {"post": [_post()], "patch": [_patch()]})
    assert len(spans) == 1
    run = spans[0]
    assert (run.span_id, run.name, run.kind, run.status) == (RUN, "RunnableSequence", "chain",
                                                             "OK")
    assert run.attributes["inputs"] == {"question": "Q?"}  # the post's, kept
    assert run.attributes["outputs"] == {"output": "A."}  # the patch's, over the post's {}
    assert run.end_ns - run.start_ns == 2_000_000_000
    assert run.source.endswith("runs.jsonl, line 1, post[0] (patched at line 1, patch[0])")


def test_patch_fields_win_where_set_in_any_order_across_payloads(tmp_path):
    child = _post(CHILD, CHILD_ORDER, name="retrieve", run_type="retriever", parent_run_id=RUN,
                  start_time="2025-06-03T09:14:02.130000+00:00")
    spans = _read_lines(
        tmp_path,
        {"patch": [_patch(error="ValueError: boom\nTraceback…", outputs=None)]},  # before its post
        {"post": [_post(tags=["a"])]},
        {"post": [child], "patch": [_patch(CHILD, CHILD_ORDER, outputs={"documents": []})]},
        {"patch": [_patch(extra={"metadata": {"case_id": "c2"}})]})
    by_id = {s.span_id: s for s in spans}
    assert [s.span_id for s in spans] == [CHILD, RUN]  # each as its last part is read
    root = by_id[RUN]
    assert root.status == "ERROR" and root.status_message == "ValueError: boom"
    assert root.attributes["outputs"] == {"output": "A."}  # the later patch's
    assert root.attributes["metadata"] == {"case_id": "c2"}  # a patch's extra replaces
    assert root.attributes["tags"] == ["a"] and root.name == "RunnableSequence"
    assert by_id[CHILD].parent_id == RUN and by_id[CHILD].attributes["outputs"] == {
        "documents": []}


def test_a_run_only_patched_in_the_file_starts_at_its_dotted_order(tmp_path):
    spans = _read_lines(tmp_path, {"patch": [_patch(CHILD, CHILD_ORDER, name="retrieve",
                                                    run_type="retriever")]})
    assert spans[0].start_ns == 1748942042130000000 and spans[0].parent_id == RUN
    assert spans[0].name == "retrieve"


def test_exported_runs_are_still_read_in_one_pass(tmp_path, monkeypatch):
    passes = []
    entries = langsmith_reader._entries
    monkeypatch.setattr(langsmith_reader, "_entries",
                        lambda *a: passes.append(a) or entries(*a))
    spans = _read_lines(tmp_path, {**_post(), "end_time": "2025-06-03T09:14:04Z"})
    assert len(spans) == 1 and len(passes) == 1
    _read_lines(tmp_path, {"post": [_post()]})
    assert len(passes) == 3  # run-ingest bodies: a pass to count, a pass to merge


@pytest.mark.parametrize(("payload", "message"), [
    ({"post": [{**_post(), "id": None}]}, "runs.jsonl, line 1, post[0], field id: missing"),
    ({"post": ["run"]}, "runs.jsonl, line 1, post[0]: expected a JSON object (a run)"),
    ({"post": [_post(start_time="soon")]},
     "runs.jsonl, line 1, post[0], field start_time: not an ISO 8601 time ('soon')"),
    ({"post": [_post()], "patch": [_patch(end_time="later")]},
     "runs.jsonl, line 1, post[0] (patched at line 1, patch[0]), field end_time: not an ISO"),
    ({"patch": [_patch(dotted_order="nonsense")]},
     "runs.jsonl, line 1, patch[0], field start_time: missing"),
])
def test_malformed_payloads_name_the_file_line_and_field(tmp_path, payload, message):
    path = tmp_path / "runs.jsonl"
    path.write_text(json.dumps(payload) + "\n")
    with pytest.raises(InputError) as caught:
        list(LangSmithReader().read(path))
    assert message in str(caught.value), str(caught.value)


def _multipart_body(parts: list[tuple[str, bytes]], boundary: str = "b0undary",
                    lengths: bool = True) -> bytes:
    out = b""
    for name, data in parts:
        out += (f"--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n"
                f"Content-Type: application/json\r\n").encode()
        if lengths:
            out += f"Content-Length: {len(data)}\r\n".encode()
        out += b"\r\n" + data + b"\r\n"
    return out + f"--{boundary}--\r\n".encode()


def _parts_of(run_id: str, operation: str, record: dict) -> list[tuple[str, bytes]]:
    record = dict(record)
    fields = {k: record.pop(k) for k in ("inputs", "outputs", "extra") if k in record}
    return [(f"{operation}.{run_id}", json.dumps(record).encode()),
            *((f"{operation}.{run_id}.{k}", json.dumps(v).encode()) for k, v in fields.items())]


@pytest.mark.parametrize("lengths", [True, False])
def test_multipart_bodies_with_or_without_lengths_and_other_parts(tmp_path, monkeypatch,
                                                                  lengths):
    """Parts found by Content-Length or by the next boundary (read a few bytes at a time);
    feedback and attachments skipped; bodies with other boundaries one after another."""
    monkeypatch.setattr(_multipart, "CHUNK", 7)
    first = _multipart_body([*_parts_of(RUN, "post", _post()),
                             (f"attachment.{RUN}.image", b"\x89PNG\r\n--b0und"),
                             (f"feedback.{RUN}", b'{"key": "ok"}')], lengths=lengths)
    second = _multipart_body(_parts_of(RUN, "patch", _patch()), boundary="xyz",
                             lengths=lengths)
    path = tmp_path / "ingest.txt"
    path.write_bytes(first + second)
    assert detect(path).name == "langsmith"
    (run,) = LangSmithReader().read(path)
    assert run.attributes["outputs"] == {"output": "A."}
    assert run.attributes["inputs"] == {"question": "Q?"} and run.end_ns is not None
    patched = 40 if lengths else 34  # the patch part's Content-Disposition line
    assert run.source == f"{path}, line 2, part post.{RUN} (patched at line {patched}, part " \
                         f"patch.{RUN})"


@pytest.mark.parametrize(("body", "message"), [
    (_multipart_body([(f"post.{RUN}", b"{not json")]),
     f"line 2, part post.{RUN}: not valid JSON"),
    (_multipart_body([(f"post.{RUN}", b"[1]")]), f"line 2, part post.{RUN}: expected a JSON object"),
    (_multipart_body([(f"post.{RUN}", json.dumps({**_post(), "id": CHILD}).encode())]),
     f"part post.{RUN}, field id: '{CHILD}', but the part is named for run {RUN}"),
    (_multipart_body([(f"post.{RUN}", json.dumps(_post()).encode())])[:180],
     "the file ends inside a part"),
    (b"--b0undary\r\nContent-Type: application/json\r\n\r\n{}\r\n--b0undary--\r\n",
     "line 2: a part without a name"),
])
def test_malformed_multipart_bodies_name_the_file_and_line(tmp_path, body, message):
    path = tmp_path / "ingest.txt"
    path.write_bytes(body)
    with pytest.raises(InputError) as caught:
        list(LangSmithReader().read(path))
    assert f"{path}" in str(caught.value) and message in str(caught.value), str(caught.value)


# -- the OpenTelemetry SDK's span JSON


def test_integer_ids_become_hex_of_32_and_16_digits():
    spans = list(ConsoleReader().read(SHAPES / "otelsdk_agent_dump.json"))
    hexed = list(ConsoleReader().read(SHAPES / "otelsdk_spans.jsonl"))
    assert [(s.trace_id, s.span_id, s.parent_id) for s in spans] == [
        (s.trace_id, s.span_id, s.parent_id) for s in hexed]
    assert all(len(s.trace_id) == 32 and len(s.span_id) == 16 for s in spans)
    assert spans[0].span_id == "0b13a023af11bab1"  # 798157634096183985, leading zero kept
    assert spans[0].source.endswith("otelsdk_agent_dump.json, line 10, record 1")


@pytest.mark.parametrize(("change", "message"), [
    ({"context": {"trace_id": 1 << 128, "span_id": 1}},
     "field context.trace_id: not an id (340282366920938463463374607431768211456 does not fit"),
    ({"context": {"trace_id": 5, "span_id": -1}}, "field context.span_id: not an id (-1"),
    ({"parent_id": "0xzz"}, "field parent_id: not a hex id"),
])
def test_bad_sdk_ids_name_the_field(tmp_path, change, message):
    span = json.loads((SHAPES / "otelsdk_one_span.json").read_text())
    path = tmp_path / "spans.json"
    path.write_text(json.dumps({"spans": [span, {**span, **change}]}))
    with pytest.raises(InputError, match="spans.json, line 1, record 2, " + message[:30]):
        list(ConsoleReader().read(path))


def test_sdk_span_json_zero_parent_and_other_keys(tmp_path):
    span = json.loads((SHAPES / "otelsdk_one_span.json").read_text())
    span.update(parent_id=0, links=[{"context": {"trace_id": "0x1", "span_id": "0x2"}}])
    path = tmp_path / "dump.json"
    path.write_text(json.dumps({"id": "run-1", "final_output": {"spans": "not these"},
                                "spans": [span]}, indent=1))
    (read,) = ConsoleReader().read(path)
    assert read.parent_id is None and read.kind == "LLM" and read.resource == {
        "service.name": "shop-assistant"}


# -- Phoenix


def test_otlpv1_null_union_members_are_skipped_not_read_as_empty_lists():
    """The bug: Phoenix's ``/spans/otlpv1`` writes every AnyValue member, null ones too, and
    the first (``array_value: null``) was read as ``[]`` — every attribute an empty list."""
    nulls = dict.fromkeys(("array_value", "bool_value", "bytes_value", "double_value",
                           "int_value", "kvlist_value"))
    assert any_value({**nulls, "string_value": "CHAIN"}, "f", "v") == "CHAIN"
    assert any_value({**nulls, "string_value": None}, "f", "v") is None  # a dict attribute
    spans = list(PhoenixReader().read(SHAPES / "phoenix_rest_otlpv1_page1.json"))
    root = next(s for s in spans if s.parent_id is None)
    assert root.kind == "CHAIN" and root.attributes["input.value"] == {"question": QUESTION_2}
    assert root.attributes["metadata.case_id"] == "shape-2"


def test_rest_pages_of_both_kinds_give_the_same_spans():
    own = {s.span_id: s for s in PhoenixReader().read(SHAPES / "phoenix_rest_spans_pages.jsonl")}
    otlp = {s.span_id: s for s in PhoenixReader().read(SHAPES / "phoenix_rest_otlpv1_pages.jsonl")}
    assert own.keys() == otlp.keys() and len(own) == 8
    for span_id, span in own.items():
        other = otlp[span_id]
        assert (span.trace_id, span.parent_id, span.name, span.kind, span.status) == (
            other.trace_id, other.parent_id, other.name, other.kind, other.status)
        # otlpv1's times went through a float in Phoenix: within a microsecond
        assert abs(span.start_ns - other.start_ns) < 1_000
        kept = {k: v for k, v in other.attributes.items() if k != "openinference.span.kind"}
        assert span.attributes == kept


def test_sqlite_frames_read_like_the_parquet_one():
    parquet = pytest.importorskip("pyarrow") and list(
        PhoenixReader().read(SHAPES / "phoenix_spans_dataframe.parquet"))
    for name in ("phoenix_spans_json.db", "phoenix_spans_astype_str.db"):
        spans = list(PhoenixReader().read(SHAPES / name))
        assert [(s.span_id, s.parent_id, s.start_ns, s.end_ns, s.kind, s.status)
                for s in spans] == [(s.span_id, s.parent_id, s.start_ns, s.end_ns, s.kind,
                                     s.status) for s in parquet]
        assert [s.attributes for s in spans] == [s.attributes for s in parquet], name
        assert spans[0].source.endswith(f"{name}, table spans, row 1")


def _db(tmp_path: Path, table: str, columns: dict[str, list]) -> Path:
    path = tmp_path / "spans.db"
    with sqlite3.connect(path) as db:
        names = ", ".join(f'"{c}"' for c in columns)
        db.execute(f'CREATE TABLE "{table}" ({names})')
        rows = list(zip(*columns.values(), strict=True))
        db.executemany(f'INSERT INTO "{table}" VALUES ({", ".join("?" * len(columns))})', rows)
    return path


def test_sqlite_cells_reprs_markers_and_no_code(tmp_path):
    path = _db(tmp_path, "frame", {
        "context.span_id": ["a1", "b2"], "context.trace_id": ["t" * 32, "t" * 32],
        "name": ["root", "llm"], "parent_id": ["nan", "a1"], "span_kind": ["CHAIN", "LLM"],
        "start_time": ["2025-06-03 09:14:02.118000+00:00", "2025-06-03 09:14:02.5+00:00"],
        "end_time": ["NaT", None], "status_code": ["OK", "OK"], "events": ["[]", "None"],
        "attributes.llm.output_messages": [
            "None", "[{'message.role': 'assistant', 'message.content': 'Hi (x)'}]"],
        "attributes.tag.tags": ["['a', 'b']", "nan"],
        "attributes.output.value": ["__import__('os').system('true')", "[(412,)]"],
        "attributes.input.value": ["{'query': 'x'}", '{"query": "y"}'],
        "attributes.metadata": ["{'case_id': 'c1'}", '{"case_id": "c2"}'],
        "attributes.llm.token_count.prompt": [None, "12.0"]})
    assert detect(path).name == "phoenix"
    root, llm = PhoenixReader().read(path)
    assert root.parent_id is None and root.end_ns is None and root.events == []
    assert root.attributes == {"tag.tags": ["a", "b"], "metadata": {"case_id": "c1"},
                               "output.value": "__import__('os').system('true')",
                               "input.value": "{'query': 'x'}"}  # a string cell stays one
    assert llm.attributes == {"llm.output_messages.0.message.role": "assistant",
                              "llm.output_messages.0.message.content": "Hi (x)",
                              "output.value": "[(412,)]", "input.value": {"query": "y"},
                              "metadata": {"case_id": "c2"}, "llm.token_count.prompt": 12}
    assert llm.source == f"{path}, table frame, row 2"


@pytest.mark.parametrize(("tables", "message"), [
    ({"spans": {"name": ["x"], "context.trace_id": ["t"]}},
     "table spans is not a Phoenix spans dataframe: it has no column context.span_id (a frame "
     "whose span ids are only its index, as before Phoenix 20, loses them to "
     "`to_sql(..., index=False)`)"),
    ({"cases": {"id": ["c1"]}}, "table cases is not a Phoenix spans dataframe: it has no "
                                "column context.trace_id, context.span_id, name"),
])
def test_an_unreadable_table_is_refused_saying_how_to_save_parquet(tmp_path, tables, message):
    ((table, columns),) = tables.items()
    path = _db(tmp_path, table, columns)
    with pytest.raises(InputError) as caught:
        list(PhoenixReader().read(path))
    text = str(caught.value)
    assert text.startswith(f"{path}: ") and message in text, text
    assert 'df.to_parquet("spans.parquet")' in text and "get_spans_dataframe" in text
    assert "\n" not in text


# -- recognising a file, and what is said when it is not recognised


def test_a_half_match_names_the_file_line_closest_format_and_every_format_tried(tmp_path):
    path = tmp_path / "spans.json"
    span = json.loads((SHAPES / "otelsdk_one_span.json").read_text())
    del span["kind"]
    path.write_text("\n\n" + json.dumps(span, indent=2))
    with pytest.raises(InputError) as caught:
        detect(path)
    text = str(caught.value)
    assert text.startswith(f"{path}, line 5: not a trace format evalharness recognises from "
                           f"its first 64 KB — it looks like otel-console: it has \"context\"")
    for name in READERS:
        assert f"{name} (" in text
    assert '"resourceSpans"' in text and "/runs/batch" in text and "\n" not in text


def test_an_error_on_the_first_record_says_which_format_it_was_taken_for(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_text(json.dumps({"post": [{**_post(), "trace_id": None, "dotted_order": None,
                                          "parent_run_id": "p"}]}) + "\n")
    with pytest.raises(InputError) as caught:
        list(detect(path).read(path))
    text = str(caught.value)
    assert text.startswith(f"{path}, line 1, post[0], field trace_id: missing")
    assert "(the file was read as langsmith, recognised from its first 64 KB" in text
    assert "the formats tried before it: otlp-json (" in text and "phoenix (" in text


def test_zstd_files_are_told_to_be_decompressed(tmp_path):
    path = tmp_path / "spans.jsonl.zst"
    path.write_bytes(b"\x28\xb5\x2f\xfd" + b"\x01" * 20)
    with pytest.raises(InputError, match=r"spans\.jsonl\.zst, line 1: zstd-compressed; "
                                         r"decompress it first \(`zstd -d spans\.jsonl\.zst`\)"):
        detect(path)


def test_json_after_blank_lines_is_not_taken_for_protobuf(tmp_path):
    """The bug: ``\\n\\n{`` read as a ResourceSpans tag (0x0A) and a varint length, so a
    pretty-printed span after blank lines was "OTLP protobuf, varint-delimited"."""
    path = tmp_path / "spans.json"
    path.write_text("\n\n" + (SHAPES / "otelsdk_one_span.json").read_text())
    assert not reader("otlp-proto").sniff(path.read_bytes())
    assert detect(path).name == "otel-console"
