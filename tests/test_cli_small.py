"""End-to-end through the CLI on a small recorded-traces scenario with hand-computed metrics."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli


def test_small_scenario_metrics_by_hand(small, tmp_path):
    out = tmp_path / "out"
    res = run_cli("scenario", small, "--out", out)
    assert res.code == 0, res
    report = json.loads((out / "report.json").read_text())
    m = {c: {k: v["mean"] for k, v in comp["metrics"].items()}
         for c, comp in report["components"].items()}
    assert m["router"]["route_accuracy"] == pytest.approx(2 / 3)
    assert m["text2sql"]["exact_match"] == pytest.approx(0.5)
    assert m["retriever"] == pytest.approx({"recall@1": 0.5, "recall@2": 0.75, "mrr": 0.75})
    assert m["generator"]["answer_present"] == pytest.approx(2 / 3)
    assert report["components"]["text2sql"]["cases"] == {"evaluated": 2, "not_run": 1, "error": 0,
                                                         "missing": 0}
    assert report["components"]["text2sql"]["metrics"]["exact_match"]["n"] == 2
    assert report["gates"] == [{"name": "router.route_accuracy >= 0.5", "component": "router",
                                "metric": "route_accuracy", "op": ">=", "threshold": 0.5,
                                "value": pytest.approx(2 / 3), "passed": True, "n": 3,
                                "errors": 0, "missing": 0, "error_rate": 0.0,
                                "max_error_rate": 0.05, "reason": None}]
    assert report["judge"]["backend"] == "heuristic" and report["judge"]["llm"] is False
    assert report["schema_version"] == "1"
    assert report["scenario"]["path"].endswith("small.yaml")
    assert len(report["scenario"]["sha256"]) == 64
    assert report["cases"]["total"] == 3
    gen_cost = report["components"]["generator"]["cost"]
    assert gen_cost["latency_ms"]["p50"] == 4.0 and gen_cost["tokens"]["total"] == 37
    # shares of the whole pipeline: only the generator reports latency and tokens here
    assert gen_cost["latency_share"] == 1.0 and gen_cost["token_share"] == 1.0
    router_cost = report["components"]["router"]["cost"]
    assert router_cost["latency_share"] is None and router_cost["token_share"] == 0.0
    assert "| 100% | 30 / 7 | 100% | — |" in (out / "report.md").read_text()
    # recorded traces: no oracle headroom, and the report says why
    assert "replays recorded traces" in report["bottleneck"]["headroom_note"]
    assert report["bottleneck"]["headroom"] is None
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == 3
    assert all("trace" in json.loads(line) for line in lines)
    md = (out / "report.md").read_text()
    assert "| retriever | recall@2 | 0.750 | 0.500–1.000 | 2 | 0 | ranking |" in md
    assert report["components"]["retriever"]["metrics"]["recall@2"]["ci95"] == [0.5, 1.0]
    assert "heuristic" in md
    # The terminal table shows every component and metric.
    for word in ("router", "route_accuracy", "text2sql", "exact_match", "recall@1", "mrr"):
        assert word in res.out


def test_failing_gate_exits_1(small, tmp_path):
    text = small.read_text().replace(">= 0.5", ">= 0.9")
    small.write_text(text)
    res = run_cli("scenario", small, "--out", tmp_path / "o", "--quiet")
    assert res.code == 1, res
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert report["gates"][0]["passed"] is False


def test_rerun_of_previous_results_with_other_evaluators(small, tmp_path):
    """`traces:` may point at a previous run's results.jsonl; the system is not called."""
    first = tmp_path / "first"
    assert run_cli("scenario", small, "--out", first, "--quiet").code == 0
    again = tmp_path / "again.yaml"
    again.write_text(f"""
name: again
cases: cases.jsonl
traces: {first / 'results.jsonl'}
evaluators:
  generator: [generation_cost]
""")
    res = run_cli("scenario", again, "--out", tmp_path / "second", "--quiet")
    assert res.code == 0, res
    report = json.loads((tmp_path / "second" / "report.json").read_text())
    latency = report["components"]["generator"]["metrics"]["latency_ms"]
    assert latency["mean"] == pytest.approx(4.0) and latency["n"] == 3
    tokens = report["components"]["generator"]["metrics"]["total_tokens"]
    assert tokens["n"] == 2 and tokens["errors"] == 1
    assert tokens["error_reasons"] == {"the generator step reports no token usage": 1}


def test_existing_output_is_not_overwritten(small, tmp_path):
    out = tmp_path / "o"
    assert run_cli("scenario", small, "--out", out, "--quiet").code == 0
    before = (out / "results.jsonl").read_text()
    res = run_cli("scenario", small, "--out", out, "--quiet")
    assert res.code == 2
    assert "--resume" in res.err and "Traceback" not in res.err
    assert (out / "results.jsonl").read_text() == before


def test_validate_and_schema_commands(small, tmp_path):
    res = run_cli("validate", small)
    assert res.code == 0 and "valid" in res.out and "3 cases" in res.out
    for what in ("case", "trace"):
        res = run_cli("schema", what)
        assert res.code == 0
        schema = json.loads(res.out)
        assert schema["type"] == "object" and "properties" in schema
    trace_schema = json.loads(run_cli("schema", "trace").out)
    assert "retriever" in trace_schema["properties"]
    assert run_cli("schema", "nonsense").code == 2
