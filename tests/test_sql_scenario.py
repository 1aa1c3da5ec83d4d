"""The shop scenario end to end: every text-to-SQL verdict in results.jsonl explains itself."""

from __future__ import annotations

import json

import pytest


@pytest.mark.slow
def test_every_verdict_in_results_has_stage_reason_and_counterexample(shop_cli_run):
    result, run = shop_cli_run  # the session's one CLI run of the shop (conftest)
    assert result.code == 0, result
    verdicts = 0
    for line in (run / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        text2sql = record["components"].get("text2sql")
        if not text2sql or text2sql["status"] != "evaluated":
            continue
        metrics = text2sql["metrics"]
        assert {"equivalent", "execution_accuracy", "valid_sql", "clause_f1",
                "exec_time_ratio", "exact_match"} <= set(metrics)
        value = metrics["equivalent"]
        details = value["details"]
        assert details["stage"] in ("parse", "normalise", "execute", "test_suite", "judge",
                                    "undecided")
        assert details["reason"]
        if value["value"] == 0.0:
            assert details["counterexample"] and details["category"]
        elif value["value"] is None:
            assert value["error"].startswith("undecided")
        verdicts += 1
    assert verdicts >= 30
    report = (run / "report.md").read_text()
    assert "## Text-to-SQL equivalence (text2sql)" in report
