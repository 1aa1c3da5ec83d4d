"""Recorded traces in a scenario: every source counts and names traces without a case and
cases without a trace (never dropped silently); span formats go through a mapping."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import CASES, SMALL_SCENARIO, TRACES, run_cli, write, write_jsonl


def _small(tmp_path: Path, cases: list[dict], traces: list[dict]) -> Path:
    write_jsonl(tmp_path / "cases.jsonl", cases)
    write_jsonl(tmp_path / "traces.jsonl", traces)
    write(tmp_path / "items.sql", "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, "
                                  "price REAL);\n")
    return write(tmp_path / "small.yaml", SMALL_SCENARIO)


def test_traces_without_a_case_are_counted_and_named_not_dropped(tmp_path):
    stray = {"case_id": "zz9", "router": {"routes": ["sql"]}}
    scenario = _small(tmp_path, CASES[:2], [*TRACES, stray])
    result = run_cli("scenario", scenario, "--out", tmp_path / "out")
    assert result.code == 0, result
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    src = report["trace_source"]
    assert src["format"] == "evalharness"
    assert (src["traces"], src["matched"], src["without_case"]) == (4, 2, 2)
    assert src["without_case_ids"] == ["c3", "zz9"] and src["cases_without_trace"] == 0
    text = " ".join(result.out.split())
    assert "2 of the 4 recorded traces" in text and "c3, zz9" in text
    md = (tmp_path / "out" / "report.md").read_text()
    assert "4 traces, 2 matched a case, 2 without a case, 0 cases without a trace" in md
    assert 'id="trace-source"' in (tmp_path / "out" / "report.html").read_text()


def test_cases_without_a_trace_are_counted_and_each_is_a_system_error(tmp_path):
    scenario = _small(tmp_path, CASES, TRACES[:1])
    result = run_cli("scenario", scenario, "--out", tmp_path / "out", "-q")
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["trace_source"]["cases_without_trace"] == 2
    assert report["cases"]["system_errors"] == 2
    assert any("no recorded trace for this case" in w for w in report["warnings"]), result


def test_a_mapping_for_our_own_format_is_refused_naming_the_field(tmp_path):
    scenario = _small(tmp_path, CASES, TRACES)
    text = scenario.read_text().replace("traces: traces.jsonl",
                                        "traces: {path: traces.jsonl, mapping: x.yaml}")
    scenario.write_text(text)
    result = run_cli("validate", scenario)
    assert result.code == 2
    assert "small.yaml, line 3, field `traces.mapping`" in result.err
    assert "needs no mapping" in result.err


HOSTED = Path(__file__).resolve().parent / "data" / "traces" / "hosted"
OTEL = Path(__file__).resolve().parent / "data" / "traces" / "otel"

SPAN_SCENARIO = """
name: recorded
cases: cases.jsonl
traces: {{path: {path}}}
pipeline:
  retriever: {{}}
  generator: {{after: [retriever]}}
evaluators:
  retriever: [context_precision]
  generator: [answer_present, faithfulness]
"""


def test_spans_are_mapped_joined_by_key_and_evaluated(tmp_path):
    """LangSmith runs → the preset guessed from their SDK → joined to cases by the
    `case_id` metadata; a case without a trace and a trace without a case are counted."""
    write_jsonl(tmp_path / "cases.jsonl", [
        {"id": "q007", "question": "What is the refund window for opened items?"},
        {"id": "q008", "question": "Do you ship to Norway?"},
        {"id": "q999", "question": "Not in the export"}])
    scenario = write(tmp_path / "s.yaml", SPAN_SCENARIO.format(
        path=HOSTED / "langsmith_rag_runs.jsonl"))
    result = run_cli("scenario", scenario, "--out", tmp_path / "out", "-q")
    assert result.code == 0, result
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    src = report["trace_source"]
    assert src["format"] == "langsmith" and src["preset"] == "langchain-langsmith"
    assert (src["traces"], src["matched"], src["cases_without_trace"]) == (2, 2, 1)
    assert src["join"] == "key"
    results = {json.loads(x)["case"]["id"]: json.loads(x)
               for x in (tmp_path / "out" / "results.jsonl").read_text().splitlines()}
    assert results["q999"]["trace"]["error"].startswith("no recorded trace")
    answered = results["q008"]["components"]["generator"]["metrics"]["answer_present"]
    assert answered["value"] == 1.0
    assert results["q008"]["trace"]["generator"]["latency_ms"] > 0  # span timings feed cost


def test_spans_join_by_question_when_the_trace_has_no_key(tmp_path):
    write_jsonl(tmp_path / "cases.jsonl", [
        {"id": "a", "question": "how much are the red running shoes"},
        {"id": "b", "question": "How many orders were placed last week?"}])
    scenario = write(tmp_path / "s.yaml", SPAN_SCENARIO.format(path=OTEL / "otlp.jsonl"))
    result = run_cli("validate", scenario)
    assert result.code == 0, result
    from evalharness.scenario import load_scenario

    loaded = load_scenario(scenario)
    assert set(loaded.traces) == {"a", "b"}
    src = loaded.trace_source
    assert src["join"] == "question" and src["without_case"] == 2
    assert len(src["without_case_ids"]) == 2


def test_an_unknown_format_is_refused_naming_the_field(tmp_path):
    write_jsonl(tmp_path / "cases.jsonl", [{"id": "a", "question": "q"}])
    scenario = write(tmp_path / "s.yaml", """
        name: x
        cases: cases.jsonl
        traces: {path: spans.jsonl, format: otlp-jsn}
    """)
    (tmp_path / "spans.jsonl").write_text("{}\n")
    result = run_cli("validate", scenario)
    assert result.code == 2
    assert "field `traces.format`" in result.err and "otlp-json" in result.err


def test_traces_explain_and_convert(tmp_path):
    from click.testing import CliRunner

    from evalharness.cli import cli

    runner = CliRunner()
    res = runner.invoke(cli, ["traces", "explain", str(OTEL / "otlp.jsonl"), "--trace",
                              "006d"])
    assert res.exit_code == 0, res.output
    assert "preset langchain-openinference" in res.output
    assert "text2sql (text2sql) — mapped" in res.output and "capture_off" in res.output
    out, cases = tmp_path / "t.jsonl", tmp_path / "c.jsonl"
    res = runner.invoke(cli, ["traces", "convert", str(HOSTED / "langsmith_rag_runs.jsonl"),
                              "--out", str(out), "--cases", str(cases)])
    assert res.exit_code == 0, res.output
    written = [json.loads(x) for x in cases.read_text().splitlines()]
    assert [c["id"] for c in written] == ["q007", "q008"]
    assert written[0]["question"] == "What is the refund window for opened items?"
    assert [json.loads(x)["case_id"] for x in out.read_text().splitlines()] == ["q007", "q008"]
    # the converted pair is a scenario of its own: reference-free metrics run at once
    scenario = write(tmp_path / "s.yaml", f"""
        name: converted
        cases: {cases}
        traces: {out}
        pipeline:
          retriever: {{}}
          generator: {{after: [retriever]}}
        evaluators:
          generator: [answer_present, faithfulness]
    """)
    result = run_cli("scenario", scenario, "--out", tmp_path / "run", "-q")
    assert result.code == 0, result
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["components"]["generator"]["metrics"]["answer_present"]["n"] == 2


def _runs(tmp_path: Path, lines: list[dict]) -> Path:
    return write_jsonl(tmp_path / "runs.jsonl", lines)


ROOT_RUN = {"id": "11111111-1111-4111-8111-111111111111",
            "trace_id": "11111111-1111-4111-8111-111111111111", "parent_run_id": None,
            "dotted_order": "20250603T091400000000Z11111111-1111-4111-8111-111111111111",
            "run_type": "chain", "name": "RunnableSequence",
            "inputs": {"question": "Anything?"}, "outputs": {"output": "ok"},
            "extra": {"metadata": {"case_id": "u1"}},
            "start_time": "2025-06-03T09:14:00.000000", "end_time": "2025-06-03T09:14:01.000000"}


def test_an_unmappable_trace_is_that_cases_error_with_the_reason(tmp_path):
    parser = {**ROOT_RUN, "id": "22222222-2222-4222-8222-222222222222",
              "parent_run_id": ROOT_RUN["id"], "run_type": "parser",
              "name": "StrOutputParser", "extra": {},
              "dotted_order": ROOT_RUN["dotted_order"] + ".20250603T091400500000Z"
                              "22222222-2222-4222-8222-222222222222"}
    runs = _runs(tmp_path, [ROOT_RUN, parser])
    write_jsonl(tmp_path / "cases.jsonl", [{"id": "u1", "question": "Anything?"}])
    scenario = write(tmp_path / "s.yaml", SPAN_SCENARIO.format(path=runs))
    result = run_cli("scenario", scenario, "--out", tmp_path / "out", "-q")
    (line,) = (tmp_path / "out" / "results.jsonl").read_text().splitlines()
    error = json.loads(line)["trace"]["error"]
    assert "could be mapped" in error and "retriever" in error, result


def test_a_malformed_span_record_is_exit_2_naming_file_line_and_field(tmp_path):
    bad = {**ROOT_RUN, "start_time": "03/06/2025 09:14"}
    runs = _runs(tmp_path, [ROOT_RUN, bad])
    write_jsonl(tmp_path / "cases.jsonl", [{"id": "u1", "question": "Anything?"}])
    scenario = write(tmp_path / "s.yaml", SPAN_SCENARIO.format(path=runs))
    result = run_cli("validate", scenario)
    assert result.code == 2, result
    assert "runs.jsonl, line 2, field start_time" in result.err
    assert "Traceback" not in result.err
