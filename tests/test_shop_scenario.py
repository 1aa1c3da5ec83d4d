"""The shop scenario end to end through the CLI, and the integrity of its shipped data."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter

import pytest

from conftest import ROOT, SHOP, run_cli
from evalharness.context import load_corpus
from evalharness.scenario import load_cases

DATA = ROOT / "scenarios" / "shop"


@pytest.fixture
def shop_run(shop_cli_run):
    return shop_cli_run  # the session's one CLI run of the shop (conftest)


def test_shop_scenario_runs_and_reports_every_component(shop_run):
    res, out = shop_run
    assert res.code == 0, res
    for name in ("results.jsonl", "report.json", "report.md"):
        assert (out / name).is_file()
    report = json.loads((out / "report.json").read_text())
    cases = load_cases(DATA / "cases.jsonl")
    assert report["cases"] == {"total": len(cases), "evaluated": len(cases), "system_errors": 0}
    assert list(report["components"]) == ["router", "text2sql", "retriever", "generator"]
    for name, component in report["components"].items():
        assert component["metrics"], name
        for metric, summary in component["metrics"].items():
            assert summary["n"] > 0, (name, metric)
            assert 0 <= summary["mean"] or metric in {"latency_ms"}
        assert component["cost"]["steps"] > 0
    at = [f"{m}@{k}" for m in ("precision", "recall", "f1", "hit_rate", "mrr", "map", "ndcg",
                               "dcg", "context_precision") for k in (3, 5)]
    assert set(report["components"]["retriever"]["metrics"]) == {
        *at, "mrr", "map", "r_precision", "context_recall"}
    assert report["judge"]["backend"] == "heuristic"
    assert all(g["passed"] for g in report["gates"])
    assert len((out / "results.jsonl").read_text().splitlines()) == len(cases)
    for word in ("router", "text2sql", "retriever", "generator", "route_accuracy", "gates"):
        assert word in res.out
    assert "heuristic" in (out / "report.md").read_text()


def test_shop_scenario_validates():
    res = run_cli("validate", SHOP)
    assert res.code == 0 and "valid" in res.out


def test_shop_cases_are_labelled_and_spread_over_routes():
    cases = load_cases(DATA / "cases.jsonl")
    assert len(cases) >= 40
    spread = Counter(tuple(sorted(c.gold.routes)) for c in cases)
    assert spread[("sql",)] >= 10 and spread[("blog",)] >= 10 and spread[("blog", "sql")] >= 10
    corpus = load_corpus(DATA / "blog_chunks.jsonl")
    assert len(corpus) >= 60
    for case in cases:
        assert case.gold.answer, case.id
        if "sql" in case.gold.routes:
            assert case.gold.sql, case.id
        if "blog" in case.gold.routes:
            assert case.gold.relevant and set(case.gold.relevant) <= set(corpus), case.id


def test_shop_gold_sql_runs_on_the_catalog():
    conn = sqlite3.connect(":memory:")
    conn.executescript((DATA / "catalog.sql").read_text())
    counts = {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in
              ("brands", "categories", "products", "product_sizes", "customers", "orders",
               "order_items")}
    assert sum(counts.values()) >= 300 and all(counts.values()), counts
    for case in load_cases(DATA / "cases.jsonl"):
        if case.gold.sql:
            assert conn.execute(case.gold.sql).fetchall(), case.id
