"""The round trip of issue 12: the shop assistant instrumented with the OpenTelemetry SDK
(scenarios/shop/traced.py), its spans exported as OTLP JSON lines, imported with a mapping and
scored — every per-case metric equals the direct run's, timings aside (docs/traces-roundtrip.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("opentelemetry.exporter.otlp.proto.common")

import evalharness  # noqa: E402
from conftest import traced_shop  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SHOP_YAML = ROOT / "scenarios" / "shop.yaml"
SHOP = ROOT / "scenarios" / "shop"

TIMINGS = {("text2sql", "exec_time_ratio"), ("generator", "latency_ms")}
"""Metrics measured with a clock: the evaluator's own timing of the gold and predicted queries
(different on every run, direct or not) and the generator's latency (the span's duration
includes the instrumentation's own work)."""

STEP_FIELDS = {
    "router": ("routes", "scores", "confidence", "error"),
    "text2sql": ("sql", "columns", "rows", "error", "usage"),
    "retriever": ("ids", "texts", "scores", "error"),
    "generator": ("answer", "contexts", "error", "usage"),
}


def _results(run: Path) -> dict[str, dict]:
    lines = (run / "results.jsonl").read_text(encoding="utf-8").splitlines()
    return {r["case"]["id"]: r for r in map(json.loads, lines)}


def _metrics(result: dict) -> dict[tuple[str, str], tuple]:
    return {(comp, name): (m["value"], m["error"])
            for comp, c in result["components"].items()
            for name, m in c["metrics"].items()}


@pytest.fixture(scope="module")
def direct(tmp_path_factory) -> dict[str, dict]:
    """Every shop case run directly through the assistant (no oracle reruns)."""
    out = tmp_path_factory.mktemp("roundtrip") / "direct"
    evalharness.run_scenario(SHOP_YAML, out=out, headroom=False)
    return _results(out)


def _span_scenario(tmp_path: Path, spans: Path, mapping: str) -> Path:
    """shop.yaml with the export in place of the system: same cases, database, corpus,
    pipeline, evaluators."""
    scenario = yaml.safe_load(SHOP_YAML.read_text(encoding="utf-8"))
    del scenario["system"]
    scenario["name"] = "shop-from-spans"
    scenario["cases"] = str(SHOP / "cases.jsonl")
    scenario["database"]["build"] = str(SHOP / "catalog.sql")
    scenario["corpus"] = str(SHOP / "blog_chunks.jsonl")
    scenario["traces"] = {"path": str(spans), "format": "otlp-json", "mapping": mapping}
    path = tmp_path / "from-spans.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False), encoding="utf-8")
    return path


@pytest.mark.parametrize(("convention", "mapping", "preset"), [
    ("openinference", "traces-openinference.yaml", "langchain-openinference"),
    ("genai", "traces-genai.yaml", "otel-genai"),
])
def test_the_imported_export_scores_like_the_direct_run(direct, tmp_path, convention, mapping,
                                                        preset):
    spans = tmp_path / "spans.jsonl"
    written = traced_shop().record(SHOP / "cases.jsonl", spans, convention)
    assert written > 4 * len(direct)  # a root and at least three components a case
    first = json.loads(spans.read_text(encoding="utf-8").splitlines()[0])
    assert first["resourceSpans"][0]["scopeSpans"][0]["scope"]["name"] == "shop.assistant"

    out = tmp_path / "run"
    report = evalharness.run_scenario(_span_scenario(tmp_path, spans, str(SHOP / mapping)),
                                      out=out, headroom=False)
    source = report.model_dump()["trace_source"]
    assert source["preset"] == preset and source["join"] == "key"
    assert (source["traces"], source["matched"], source["without_case"],
            source["cases_without_trace"]) == (len(direct), len(direct), 0, 0)

    imported = _results(out)
    assert set(imported) == set(direct)
    compared = 0
    for case_id, want in direct.items():
        got = imported[case_id]
        assert got["trace"]["error"] == want["trace"]["error"], case_id
        for component, fields in STEP_FIELDS.items():
            a, b = want["trace"].get(component), got["trace"].get(component)
            assert (a is None) == (b is None), (case_id, component)
            for f in fields if a else ():
                assert b.get(f) == a.get(f), (case_id, component, f)
        want_m, got_m = _metrics(want), _metrics(got)
        assert set(got_m) == set(want_m), case_id
        for key, value in want_m.items():
            if key not in TIMINGS:
                assert got_m[key] == value, (case_id, key)
                compared += 1
        for key in TIMINGS & set(want_m):  # timed: a value on both sides, or on neither
            assert (got_m[key][0] is None) == (want_m[key][0] is None), (case_id, key)
    assert compared > 20 * len(direct)
