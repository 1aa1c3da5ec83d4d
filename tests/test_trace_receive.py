"""`evalharness traces receive`: an OTLP/HTTP endpoint that stores what an exporter sends in
files our readers read, answering as the OTLP specification asks (200, 400, 404, 413, 415,
429/503 with Retry-After), storing an exporter's retried batch once; and `traces.path` over
a folder or a glob of such files."""

from __future__ import annotations

import gzip
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import run_cli, write, write_jsonl
from evalharness.errors import InputError
from evalharness.spans.group import GroupStats
from evalharness.spans.importer import import_traces, read_mapped
from evalharness.spans.paths import trace_files
from evalharness.spans.readers import detect
from evalharness.spans.receive import server as server_module
from evalharness.spans.receive.join import join_received
from evalharness.spans.receive.server import Receiver
from evalharness.spans.receive.writer import recover_parts

OTEL = Path(__file__).resolve().parent / "data" / "traces" / "otel"
JSON_LINES = (OTEL / "otlp.jsonl").read_bytes().splitlines()  # 3 requests, 14 spans, 4 traces
SPANS_PER_LINE = [sum(len(scope["spans"]) for block in json.loads(line)["resourceSpans"]
                      for scope in block["scopeSpans"]) for line in JSON_LINES]
PROTOBUF = "application/x-protobuf"


@pytest.fixture
def receiver(tmp_path):
    """A receiver on a free port of 127.0.0.1, writing into tmp_path/received; stopped after
    the test whatever happens."""
    made = []

    def make(**options) -> Receiver:
        options = {"port": 0, "retry_after": 0, "retry_after_disk": 0, "min_free_bytes": 0,
                   **options}
        started = Receiver(tmp_path / "received", **options).start()
        made.append(started)
        return started

    yield make
    for started in made:
        started.stop(timeout=5)


def post(receiver: Receiver, body: bytes, content_type: str = PROTOBUF,
         path: str = "/v1/traces", method: str = "POST", **headers: str):
    """``(status, headers, body)`` of one request."""
    connection = http.client.HTTPConnection("127.0.0.1", receiver.port, timeout=10)
    try:
        connection.request(method, path, body=body,
                           headers={"Content-Type": content_type,
                                    **{k.replace("_", "-"): v for k, v in headers.items()}})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def stored_spans(folder: Path) -> list[tuple[str, str]]:
    """(trace id, span id) of every span in the complete files of ``folder``, as read (no
    grouping: a span stored twice is there twice)."""
    return [(s.trace_id, s.span_id) for f in trace_files(folder)
            for s in detect(f).read(f)]


def test_protobuf_json_and_gzip_requests_are_stored_and_read_back(receiver):
    pytest.importorskip("opentelemetry.proto")
    rx = receiver()
    status, headers, body = post(rx, (OTEL / "otlp-request.pb").read_bytes())
    assert (status, headers["Content-Type"], body) == (200, PROTOBUF, b"")
    status, headers, body = post(rx, JSON_LINES[0], "application/json")
    assert (status, headers["Content-Type"], body) == (200, "application/json", b"{}")
    pretty = json.dumps(json.loads(JSON_LINES[1]), indent=2).encode()  # line breaks inside
    status, _, _ = post(rx, gzip.compress(pretty), "application/json; charset=utf-8",
                        Content_Encoding="gzip")
    assert status == 200
    stats = rx.stop()
    assert stats.spans == 14 + SPANS_PER_LINE[0] + SPANS_PER_LINE[1]
    names = sorted(p.name for p in rx.folder.iterdir())
    assert [n.rsplit(".", 1)[1] for n in names[1:]] == ["pb", "jsonl"]  # .receive.lock first
    assert not any(n.endswith(".part") for n in names)
    files = trace_files(rx.folder)
    assert [detect(f).name for f in files] == ["otlp-proto", "otlp-json"]
    assert len(stored_spans(rx.folder)) == stats.spans
    # the folder reads as the export the requests came from
    _, mapped = read_mapped(rx.folder, fmt=None, mapping=None, pipeline=_pipeline())
    _, reference = read_mapped(OTEL / "otlp.jsonl", fmt=None, mapping=None,
                               pipeline=_pipeline())
    assert sorted(m.trace_id for m in mapped) == sorted(m.trace_id for m in reference)


def test_bad_requests_are_answered_as_otlp_http_says(receiver):
    pytest.importorskip("opentelemetry.proto")
    rx = receiver(max_request_bytes=16_384)
    status, headers, body = post(rx, b"\xff\x01garbage")
    assert status == 400 and headers["Content-Type"] == PROTOBUF
    assert body[:2] == b"\x08\x03" and b"not a valid OTLP ExportTraceServiceRequest" in body
    document = json.loads(JSON_LINES[0])
    document["resourceSpans"][0]["scopeSpans"][0]["spans"][1]["spanId"] = "83760"
    bad_id = json.dumps(document).encode()
    status, headers, body = post(rx, bad_id, "application/json")
    assert status == 400 and headers["Content-Type"] == "application/json"
    message = json.loads(body)["message"]
    assert message.startswith("field resourceSpans[0].scopeSpans[0].spans[1].spanId: not a "
                              "hex id ('83760'; expected 16 hex digits)"), message
    status, _, body = post(rx, b"{", "application/json")
    assert status == 400 and b"not valid JSON" in body
    status, _, body = post(rx, b"{}", "text/plain")
    assert status == 415 and b"application/x-protobuf" in body
    status, _, body = post(rx, b"{}", "application/json", Content_Encoding="br")
    assert status == 415 and b"Content-Encoding 'br'" in body
    assert post(rx, b"{}", "application/json", path="/v1/metrics")[0] == 404
    assert post(rx, b"", method="GET")[0] == 405
    status, _, body = post(rx, gzip.compress(b" " * 20_000), "application/json",
                           Content_Encoding="gzip")
    assert status == 413 and b"decompresses to more than 16,384 bytes" in body
    assert post(rx, b"x" * 20_000, "application/json")[0] == 413
    status, _, body = post(rx, b"{}", "application/json")
    assert (status, body) == (200, b"{}")  # an empty request: success, nothing stored
    assert rx.stop().rejected == {400: 3, 413: 2, 415: 2}
    assert not list(rx.folder.glob("spans-*"))


def test_protobuf_without_the_otlp_extra_is_415_naming_the_install_and_json_works(receiver):
    rx = receiver()
    rx.protobuf = False  # what a receiver without opentelemetry-proto sees
    status, _, body = post(rx, (OTEL / "otlp-request.pb").read_bytes())
    assert status == 415 and b"pip install 'evalharness[otlp]'" in body
    assert post(rx, JSON_LINES[0], "application/json")[0] == 200


def test_a_full_queue_is_429_and_a_full_disk_503_both_with_retry_after(receiver):
    rx = receiver(max_queue_bytes=len(JSON_LINES[0]) + 10, retry_after=2)
    gate = threading.Event()
    append = rx.writer._append

    def slow(kind, items):
        gate.wait(10)
        append(kind, items)

    rx.writer._append = slow
    first: list = []
    sender = threading.Thread(target=lambda: first.append(
        post(rx, JSON_LINES[0], "application/json")))
    sender.start()
    deadline = time.monotonic() + 5
    while rx.budget.held == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    status, headers, body = post(rx, JSON_LINES[1], "application/json")
    assert (status, headers["Retry-After"]) == (429, "2"), body
    assert json.loads(body)["code"] == 8  # RESOURCE_EXHAUSTED
    gate.set()
    sender.join(10)
    assert first[0][0] == 200
    rx.writer.free = lambda folder: 0  # the disk fills up
    rx.writer.min_free_bytes = 1 << 20
    rx.retry_after_disk = 30
    rx.writer.check_free(force=True)
    status, headers, body = post(rx, JSON_LINES[1], "application/json")
    assert (status, headers["Retry-After"]) == (503, "30")
    assert "less than 1 MB free" in json.loads(body)["message"]
    assert len(stored_spans_after_stop(rx)) == SPANS_PER_LINE[0]


def stored_spans_after_stop(rx: Receiver):
    rx.stop()
    return stored_spans(rx.folder)


def test_files_rotate_by_size_and_by_age_and_a_part_file_is_never_read(receiver):
    rx = receiver(rotate_bytes=1, rotate_seconds=3600)  # every request completes its file
    for line in JSON_LINES:
        assert post(rx, line, "application/json")[0] == 200
    assert [f.spans for f in rx.stop().files] == SPANS_PER_LINE
    aged = receiver(rotate_bytes=1 << 30, rotate_seconds=0.3)
    assert post(aged, JSON_LINES[0], "application/json")[0] == 200
    part = [p for p in aged.folder.iterdir() if p.name.endswith(".jsonl.part")]
    assert len(part) == 1  # being written: readers skip it
    assert len(trace_files(aged.folder)) == 3
    deadline = time.monotonic() + 5
    while part[0].exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not part[0].exists() and len(trace_files(aged.folder)) == 4
    names = [p.name for p in trace_files(aged.folder)]
    assert names == sorted(names) and [n[-12:-6] for n in names] == \
        ["000001", "000002", "000003", "000004"]  # numbering goes on across receivers


def test_a_killed_receivers_part_file_is_cut_to_whole_records_and_completed(tmp_path,
                                                                           receiver):
    folder = tmp_path / "received"
    folder.mkdir()
    torn = JSON_LINES[0] + b"\n" + JSON_LINES[1][:100]
    (folder / "spans-20261201T000000Z-000007.jsonl.part").write_bytes(torn)
    (folder / "spans-20261201T000000Z-000008.pb.part").write_bytes(b"\x80\x02abc")
    rx = receiver()
    assert [p.name for p in rx.recovered] == ["spans-20261201T000000Z-000007.jsonl"]
    assert rx.recovered[0].read_bytes() == JSON_LINES[0] + b"\n"
    assert not list(folder.glob("*.part"))  # the empty one is gone
    assert post(rx, JSON_LINES[1], "application/json")[0] == 200
    rx.stop()
    assert trace_files(folder)[-1].name.endswith("-000008.jsonl")
    assert recover_parts(folder) == []


def test_a_second_receiver_on_the_same_folder_is_refused(receiver, tmp_path):
    first = receiver()
    with pytest.raises(InputError, match=f"process {os.getpid()}"):
        Receiver(first.folder, port=0).start()


def test_the_sdk_exporter_retrying_stores_every_span_exactly_once(receiver, monkeypatch):
    """The real OTLP/HTTP exporter against the receiver: its first attempts get 503, one
    batch is stored but its answer is lost (the connection drops): the exporter sends it
    again. Every span the SDK made is stored, and stored once."""
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    rx = receiver()
    refused = {"left": 3}
    submit = rx.writer.submit

    def flaky(pending):  # the first three attempts find the disk unwritable: 503
        if refused["left"]:
            refused["left"] -= 1
            pending.finish("forced for the test")
            return
        submit(pending)

    rx.writer.submit = flaky
    lost = {"left": 1}
    send = server_module._Handler._send

    def lose_answer(self, status, kind, body, headers=None):
        if status == 200 and lost["left"]:  # stored, but the answer never arrives
            lost["left"] -= 1
            self.close_connection = True
            self.connection.shutdown(2)
            return
        send(self, status, kind, body, headers)

    monkeypatch.setattr(server_module._Handler, "_send", lose_answer)
    made = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(made))
    provider.add_span_processor(BatchSpanProcessor(
        OTLPSpanExporter(endpoint=rx.url, timeout=5), max_export_batch_size=40,
        schedule_delay_millis=20))
    tracer = provider.get_tracer("test")
    for i in range(200):
        with tracer.start_as_current_span(f"ask {i}"), tracer.start_as_current_span("retrieve"):
            pass
    assert provider.force_flush(20_000)
    provider.shutdown()
    stats = rx.stop()
    expected = sorted((f"{s.context.trace_id:032x}", f"{s.context.span_id:016x}")
                      for s in made.get_finished_spans())
    assert len(expected) == 400
    assert sorted(stored_spans(rx.folder)) == expected  # none lost, none twice
    assert stats.rejected == {503: 3} and stats.duplicate_requests == 1


def test_reading_keeps_one_copy_of_a_span_stored_twice(tmp_path):
    """A retry the receiver could not recognise (it was restarted in between) stores a batch
    twice: grouping keeps the first copy of each span and counts the others."""
    folder = tmp_path / "received"
    folder.mkdir()
    for name, line in (("spans-1.jsonl", JSON_LINES[0]), ("spans-2.jsonl", JSON_LINES[1]),
                       ("spans-3.jsonl", JSON_LINES[0])):
        (folder / name).write_bytes(line + b"\n")
    stats = GroupStats()
    _, mapped = read_mapped(folder, fmt=None, mapping=None, pipeline=_pipeline(), stats=stats)
    assert len(list(mapped)) == 4
    assert stats.duplicate_spans == SPANS_PER_LINE[0]
    assert "spans-3.jsonl, line 1 (kept: " in stats.examples[0]
    imported = import_traces(folder, fmt=None, mapping=None, join=None, pipeline=_pipeline(),
                             cases=[])
    assert imported.info["duplicate_spans"] == SPANS_PER_LINE[0]
    assert imported.info["files"] == 3


SCENARIO = """
name: received
cases: cases.jsonl
traces: {{path: "{path}"}}
pipeline:
  retriever: {{}}
  generator: {{after: [retriever]}}
evaluators:
  generator: [answer_present]
"""


def test_a_scenario_reads_a_folder_or_a_glob_of_span_files(tmp_path):
    folder = tmp_path / "received"
    folder.mkdir()
    (folder / "spans-1.jsonl").write_bytes(JSON_LINES[0] + b"\n" + JSON_LINES[1] + b"\n")
    shutil.copy(OTEL / "otlp.pb", folder / "spans-2.pb")  # the same spans again, in protobuf
    (folder / "spans-3.jsonl.part").write_bytes(b"{half a record")  # being written: skipped
    (folder / ".receive.lock").write_text("1")
    write_jsonl(tmp_path / "cases.jsonl", [
        {"id": "a", "question": "how much are the red running shoes"},
        {"id": "b", "question": "How many orders were placed last week?"}])
    from evalharness.scenario import load_scenario

    for path, files in (("received/", 2), ("received/*.jsonl", 1), ("received/spans-2.pb", 1)):
        scenario = write(tmp_path / "s.yaml", SCENARIO.format(path=path))
        loaded = load_scenario(scenario)
        src = loaded.trace_source
        assert set(loaded.traces) == {"a", "b"}, path
        assert src.get("files", 1) == files and src["path"] == str((tmp_path / path).resolve())
        assert (src.get("duplicate_spans", 0) > 0) == (files == 2)  # the pb repeats line 1, 2
        assert str(folder / "spans-2.pb") in loaded.input_digests or path.endswith("jsonl")
    for path, said in (("empty/", "holds no complete trace file"),
                       ("received/*.txt", "matches no complete trace file"),
                       ("missing/", "does not exist")):
        (tmp_path / "empty").mkdir(exist_ok=True)
        scenario = write(tmp_path / "s.yaml", SCENARIO.format(path=path))
        result = run_cli("validate", scenario)
        assert result.code == 2 and "field `traces.path`" in result.err, result
        assert said in " ".join(result.err.split()), result


def test_traces_convert_and_explain_take_folders_and_globs(tmp_path):
    from click.testing import CliRunner

    from evalharness.cli import cli

    folder = tmp_path / "received"
    folder.mkdir()
    for n, line in enumerate(JSON_LINES):
        (folder / f"spans-{n}.jsonl").write_bytes(line + b"\n")
    runner = CliRunner()
    res = runner.invoke(cli, ["traces", "explain", str(folder), "--trace", "006d"])
    assert res.exit_code == 0, res.output
    assert "preset langchain-openinference" in res.output
    out = tmp_path / "t.jsonl"
    res = runner.invoke(cli, ["traces", "convert", str(folder / "*.jsonl"), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "3 files): 4 traces" in res.output
    res = runner.invoke(cli, ["traces", "convert", str(tmp_path / "nothing"), "--out",
                              str(out)])
    assert res.exit_code == 2 and "does not exist" in res.output


def test_joining_received_traces_to_cases(tmp_path):
    folder = tmp_path / "received"
    folder.mkdir()
    (folder / "spans-1.jsonl").write_bytes(b"\n".join(JSON_LINES) + b"\n")
    from evalharness.models import Case

    cases = [Case(id="b", question="How many orders were placed last week?"),
             Case(id="z", question="Not asked")]
    done = join_received(folder, folder / "joined", cases=cases, mapping=None,
                         pipeline=_pipeline())
    assert (done.traces, done.matched, done.new_cases, done.no_question) == (4, 1, 1, 2)
    traces = [json.loads(x) for x in (folder / "joined" / "traces.jsonl").read_text()
              .splitlines()]
    written = [json.loads(x) for x in (folder / "joined" / "cases.jsonl").read_text()
               .splitlines()]
    assert [c["id"] for c in written[:2]] == ["b", "z"]
    assert len(traces) == 4  # the two without a question too, under their trace id
    assert {t["case_id"] for t in traces} >= {c["id"] for c in written} - {"z"}
    assert all(c["tags"] == ["from-traces"] for c in written[2:])
    assert any(c["question"] == "How much are the red running shoes?" for c in written)
    assert not list((folder / "joined").glob("*.part"))


@pytest.mark.slow
def test_the_command_receives_until_sigterm_then_writes_and_joins(tmp_path):
    """End to end in a process of its own: start on a free port, send, SIGTERM; exit 0,
    every file complete, the summary and the join on stderr."""
    write_jsonl(tmp_path / "cases.jsonl",
                [{"id": "b", "question": "How many orders were placed last week?"}])
    env = {k: v for k, v in os.environ.items() if k != "EVALHARNESS_LOAD_PLUGINS"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "evalharness.cli", "traces", "receive", "--out",
         str(tmp_path / "received"), "--port", "0", "--cases", str(tmp_path / "cases.jsonl")],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True,
        env=env)
    try:
        banner = proc.stderr.readline()
        assert "receiving OTLP/HTTP traces" in banner, banner
        port = int(banner.split("127.0.0.1:")[1].split("/")[0])
        for line in JSON_LINES:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            connection.request("POST", "/v1/traces", body=line,
                               headers={"Content-Type": "application/json"})
            assert connection.getresponse().status == 200
            connection.close()
        proc.send_signal(signal.SIGTERM)
        err = proc.stderr.read()
        assert proc.wait(30) == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "received 14 spans in 3 requests" in err
    assert "joined 4 traces from 1 files" in err and "1 matched a case" in err
    folder = tmp_path / "received"
    assert not list(folder.glob("*.part")) and len(stored_spans(folder)) == 14
    assert (folder / "joined" / "cases.jsonl").read_text().count("\n") == 2


def _pipeline():
    from evalharness.pipeline import SHOP_PIPELINE, ComponentSpec, Pipeline

    return Pipeline({n: ComponentSpec.model_validate(c) for n, c in SHOP_PIPELINE.items()})
