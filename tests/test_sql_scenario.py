"""The shop scenario end to end: every text-to-SQL verdict in results.jsonl explains itself."""

from __future__ import annotations

import json

import pytest

from conftest import SHOP


@pytest.mark.slow
def test_every_verdict_in_results_has_stage_reason_and_counterexample(cli, tmp_path):
    result = cli("scenario", SHOP, "--out", tmp_path / "run")
    assert result.code == 0, result
    verdicts = 0
    for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines():
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
    report = (tmp_path / "run" / "report.md").read_text()
    assert "## Text-to-SQL equivalence (text2sql)" in report
