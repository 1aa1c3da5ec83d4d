"""`evalharness history` over eight nightly-like runs of the shop — clean, clean, generator
fault, generator fault, clean, text2sql fault, clean, clean — marks the runs where each fault
appeared and disappeared, naming the component, and nothing between unchanged runs; its JSON;
its errors; and history.html in headless Chromium.

The browser test needs Debian's ``chromium`` and ``chromium-driver``; without them it is
skipped, except under CI (``$CI`` set), where it fails — as tests/test_review_browser.py.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from conftest import ROOT, headless_chromium, run_cli
from evalharness.history import Group, History, MetricSeries, RunEntry, Step

NIGHTS = ["clean", "clean", "generator", "generator", "clean", "text2sql", "clean", "clean"]
"""The system each night: the shop, or the shop with one injected fault
(scenarios/shop-fault-*.yaml)."""

TIMING = ["--exclude", "*.latency_ms", "--exclude", "*.exec_time_ratio"]
"""Timing metrics measure the machine too (a busy test worker makes them move): not tested
here, as docs/history.md advises on a shared machine."""


def scenario_of(night: str) -> Path:
    return ROOT / "scenarios" / ("shop.yaml" if night == "clean" else f"shop-fault-{night}.yaml")


@pytest.fixture(scope="module")
def nights(tmp_path_factory) -> list[Path]:
    """The eight runs (every case, no oracle reruns), each dated 02:00 UTC on consecutive
    nights in its run.json, as a nightly job's would be. The shop is deterministic, so a
    night of a system run before is a copy of that run (its timing metrics, which differ
    between real reruns, are not tested here: ``TIMING``): three runs, not eight."""
    base = tmp_path_factory.mktemp("nightly")
    out = []
    first: dict[str, Path] = {}
    for day, night in enumerate(NIGHTS, start=1):
        folder = base / f"night-{day:02d}-{night}"
        if night in first:
            shutil.copytree(first[night], folder)
        else:
            result = run_cli("scenario", scenario_of(night), "--out", folder, "--no-headroom",
                             "-q")
            assert result.code == 0, result
            first[night] = folder
        meta = json.loads((folder / "run.json").read_text(encoding="utf-8"))
        meta["started_at"] = f"2026-11-{day:02d}T02:00:00+00:00"
        (folder / "run.json").write_text(json.dumps(meta), encoding="utf-8")
        out.append(folder)
    return out


@pytest.fixture(scope="module")
def together(nights, tmp_path_factory) -> tuple[object, Path]:
    """``history`` of the eight runs, given in a shuffled order, all in one group."""
    shuffled = list(nights)
    random.Random(3).shuffle(shuffled)
    out = tmp_path_factory.mktemp("history")
    result = run_cli("history", *shuffled, "--out", out, "--all-together", *TIMING)
    assert result.code == 0, result
    return result, out


def load(out: Path) -> dict:
    return json.loads((out / "history.json").read_text(encoding="utf-8"))


def test_the_runs_where_each_fault_appeared_and_disappeared_are_marked(together, nights):
    result, out = together
    group, = load(out)["groups"]
    assert [r["path"] for r in group["runs"]] == [str(p) for p in nights]  # by start time
    steps = {s["after"]: s for s in group["steps"]}
    expected = {2: ("generator", "worse"), 4: ("generator", "better"),
                5: ("text2sql", "worse"), 6: ("text2sql", "better")}
    for after, (component, direction) in expected.items():
        step = steps[after]
        assert (step["first"], step["direction"]) == (component, direction), step
        statuses = {c["status"] for c in step["changes"] if c["component"] == component
                    and c["direction"] != "neutral"}
        assert statuses == {"regressed" if direction == "worse" else "improved"}
        assert all(c["p_value"] < 0.05 and c["n_paired"] > 0 for c in step["changes"])
    for after in (1, 3, 7):  # the same system as the night before: nothing marked
        assert steps[after]["tested"] and steps[after]["changes"] == [], steps[after]
        assert steps[after]["tests"] > 30
    assert [r["index"] for r in group["runs"] if r["marked"]] == [2, 4, 5, 6]
    # where it starts: text2sql's own metrics, and downstream the answers built on its rows
    assert steps[5]["components"] == ["text2sql", "generator"]
    assert {c["metric"] for c in steps[5]["changes"]} >= {"execution_accuracy"}
    assert steps[2]["components"] == ["generator"]
    assert {c["metric"] for c in steps[2]["changes"]} >= {"faithfulness",
                                                         "numeric_consistency"}
    assert steps[2]["bottleneck_moved"] is True
    assert [r["bottleneck"] for r in group["runs"]][2:4] == ["generator", "generator"]
    # each metric knows the runs where it moved; the timing metrics are drawn, not tested
    series = {(m["component"], m["metric"]): m for m in group["metrics"]}
    assert series[("text2sql", "execution_accuracy")]["marked"] == [5, 6]
    assert series[("generator", "faithfulness")]["marked"] == [2, 4]
    assert series[("router", "route_accuracy")]["marked"] == []
    assert series[("generator", "latency_ms")]["tested"] is False
    assert {"kind": "gate", "op": ">=", "threshold": 0.7, "text": "retriever.ndcg@5 >= 0.7"} \
        in series[("retriever", "ndcg@5")]["thresholds"]
    assert all(p is not None and p["ci95"] for p in series[("retriever", "ndcg@5")]["points"])
    # the terminal says it too
    assert "#3 vs #2: worse, starting at generator" in result.out
    assert "#6 vs #5: worse, starting at text2sql" in result.out
    assert "#2 vs #1: no significant change" in result.out
    md = (out / "history.md").read_text(encoding="utf-8")
    assert "#7 vs #6: better, starting at text2sql" in md and "| #8 |" in md


def test_the_output_docs_history_md_shows_is_what_history_prints(together):
    result, _ = together
    text = (ROOT / "docs" / "history.md").read_text(encoding="utf-8")
    shown = [line for line in text.splitlines() if line.startswith("#") and " vs #" in line]
    assert len(shown) == 7
    for line in shown:
        assert line in result.out


def test_runs_are_grouped_by_scenario_name(nights, tmp_path):
    result = run_cli("history", *nights, "--out", tmp_path, *TIMING, "-q")
    assert result.code == 0, result
    groups = {g["name"]: g for g in load(tmp_path)["groups"]}
    assert list(groups) == ["shop", "shop-fault-generator", "shop-fault-text2sql"]
    assert len(groups["shop"]["runs"]) == 5
    assert not any(s["changes"] for g in groups.values() for s in g["steps"])
    assert groups["shop-fault-text2sql"]["steps"] == []
    assert load(tmp_path)["grouped_by"] == "scenario"


def test_runs_that_share_no_case_are_not_tested(nights, tmp_path):
    other = Path(shutil.copytree(nights[0], tmp_path / "renamed"))
    lines = [json.loads(x) for x in (other / "results.jsonl").read_text().splitlines()]
    for line in lines:
        line["case"]["id"] = "other-" + line["case"]["id"]
    (other / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    meta = json.loads((other / "run.json").read_text())
    meta["started_at"] = "2026-12-01T02:00:00+00:00"
    (other / "run.json").write_text(json.dumps(meta))
    result = run_cli("history", nights[2], other, "--out", tmp_path / "h", "-q",
                     "--all-together")
    assert result.code == 0, result
    step, = load(tmp_path / "h")["groups"][0]["steps"]
    assert step["tested"] is False and step["changes"] == [] and step["shared_cases"] == 0
    assert "shares no case" in step["note"] and "no paired test" in step["note"]


def documented_keys() -> set[str]:
    text = (ROOT / "docs" / "history.md").read_text(encoding="utf-8")
    return {k for k in text.split("`")[1::2]}


@pytest.mark.parametrize("model", [History, Group, RunEntry, MetricSeries, Step])
def test_every_key_of_history_json_is_written_and_documented(together, model):
    _, out = together
    data = load(out)
    group = data["groups"][0]
    record = {History: data, Group: group, RunEntry: group["runs"][0],
              MetricSeries: group["metrics"][0], Step: group["steps"][0]}[model]
    assert set(record) == set(model.model_fields)
    missing = set(model.model_fields) - documented_keys()
    assert not missing, f"docs/history.md does not describe {sorted(missing)}"


def test_bad_input_is_one_paragraph_naming_the_path(nights, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run_cli("history", nights[0], empty, "--out", tmp_path / "h")
    assert result.code == 2 and "Traceback" not in result.err
    assert f"{empty} has no results.jsonl, so it is not a run folder" in result.err
    assert "--out folder of an `evalharness scenario` run" in result.err

    broken = Path(shutil.copytree(nights[0], tmp_path / "broken"))
    (broken / "report.json").write_text("{not json", encoding="utf-8")
    result = run_cli("history", nights[0], broken, "--out", tmp_path / "h")
    assert result.code == 2 and f"{broken / 'report.json'}, line 1" in result.err
    assert "not valid JSON" in result.err

    undated = Path(shutil.copytree(nights[0], tmp_path / "undated"))
    (undated / "run.json").write_text("[", encoding="utf-8")
    result = run_cli("history", undated, "--out", tmp_path / "h")
    assert result.code == 2 and f"{undated / 'run.json'}: cannot be read as JSON" in result.err

    result = run_cli("history", nights[0], "--out", tmp_path / "h", "--exclude", "latency")
    assert result.code == 2 and "write COMPONENT.METRIC" in result.err
    assert not (tmp_path / "h").exists()


def test_the_page_is_well_formed_and_escapes_what_runs_name(nights, tmp_path):
    from test_html import assert_balanced

    hostile = "<script>alert(1)</script>"
    odd = Path(shutil.copytree(nights[2], tmp_path / "<img src=x onerror=alert(2)>"))
    report = json.loads((odd / "report.json").read_text(encoding="utf-8"))
    report["scenario"]["name"] = hostile
    (odd / "report.json").write_text(json.dumps(report), encoding="utf-8")
    result = run_cli("history", nights[1], odd, "--out", tmp_path / "h", "-q")
    assert result.code == 0, result
    page = (tmp_path / "h" / "history.html").read_text(encoding="utf-8")
    assert_balanced(page)
    assert hostile not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(2)&gt;" in page
    assert "http://" not in page and "https://" not in page  # nothing loads from a network
    md = (tmp_path / "h" / "history.md").read_text(encoding="utf-8")
    assert hostile not in md and "## &lt;script&gt;" in md


# --------------------------------------------------------------------------------------------
# history.html in a browser
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def driver():
    """One headless Chromium for the module's browser test."""
    with headless_chromium("the history page's browser test needs it") as drv:
        yield drv


def test_the_page_shows_the_charts_and_the_marked_runs(together, driver):
    from selenium.webdriver.common.by import By

    _, out = together
    data = load(out)
    driver.get((out / "history.html").as_uri())
    find = driver.find_elements
    assert driver.find_element(By.ID, "console-errors").get_attribute("textContent") == ""
    charts = find(By.CSS_SELECTOR, "div.chart-box.metric svg.window-metric")
    assert len(charts) == len(data["groups"][0]["metrics"])
    assert all(c.is_displayed() for c in charts[:3])
    assert len(find(By.CSS_SELECTOR, "svg#root-causes-run rect[data-cause]")) >= 8
    assert find(By.CSS_SELECTOR, "svg.window-metric g.gate[data-kind='gate']")
    marked = [int(r.get_attribute("data-run")) for r in find(By.CSS_SELECTOR, "tr.marked")]
    assert marked == [2, 4, 5, 6]
    assert all(r.is_displayed() for r in find(By.CSS_SELECTOR, "tr.marked"))
    box = driver.find_element(By.CSS_SELECTOR, "div.chart-box[data-component='text2sql']"
                                               "[data-metric='execution_accuracy']")
    rings = box.find_elements(By.CSS_SELECTOR, "circle.change-ring")
    assert sorted(int(r.get_attribute("data-index")) for r in rings) == [5, 6]
    assert "regressed" not in rings[0].get_attribute("textContent")  # tooltip: ▼, Δ, p
    assert "#6: execution_accuracy ▼" in " ".join(r.get_attribute("textContent")
                                                   for r in rings)
    steps = {int(s.get_attribute("data-after")): s for s in find(By.CSS_SELECTOR, "li.step")}
    assert steps[5].get_attribute("data-first") == "text2sql"
    assert "worse, starting at text2sql" in steps[5].text
    assert steps[1].get_attribute("class").split() == ["step", "quiet"]


def test_without_the_correction_each_metric_is_tested_on_its_own(nights, tmp_path):
    """--correction none: the marks of compare's uncorrected tests — one more generator metric
    (correctness_recall, p about 0.01) counts at the text2sql fault than under
    Benjamini-Hochberg."""
    corrected = run_cli("history", *nights, "--out", tmp_path / "bh", "--all-together",
                        *TIMING)
    plain = run_cli("history", *nights, "--out", tmp_path / "none", "--all-together",
                    "--correction", "none", *TIMING)
    assert corrected.code == plain.code == 0, (corrected, plain)
    assert "text2sql 2 regressed; generator 3 regressed" in corrected.out
    assert "text2sql 2 regressed; generator 4 regressed" in plain.out
    assert load(tmp_path / "none")["correction"] == "none"
    assert load(tmp_path / "bh")["correction"] == "bh"
    assert "p < 0.05, each metric on its own" in plain.out
