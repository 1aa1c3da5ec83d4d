"""Judged criteria written in the scenario (``judged``, :mod:`evalharness.rubrics`): first-class
metrics on any component — declared, verdicts, gates, review and agreement, compare — judged by
the LLM judge (here the fake OpenAI-compatible server, which answers a rubric from its schema),
versioned by content, refused with the offline heuristic, and bad settings are exit 2 naming
file, line and field."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import ROOT, run_cli, write
from evalharness.rubrics import RubricSettings, declare, task_for, version_of
from evalharness.testing.fake_openai import FakeOpenAI

RUBRICS = ROOT / "scenarios" / "shop-rubrics.yaml"
EDITED = ("criterion: >\n          The answer promises nothing the shop cannot know",
          "criterion: >\n          The answer makes no promise the shop cannot keep")
FEW = "q00*"


def scenario_text(server: FakeOpenAI, cache: Path, *, edit: bool = False,
                  backend: str = "openai") -> str:
    """shop-rubrics.yaml pointed at the fake server, kept outside ``scenarios/``."""
    text = RUBRICS.read_text(encoding="utf-8")
    text = text.replace("  # base_url: http://127.0.0.1:8080/v1   # a local server (no key "
                        "needed)", f"  base_url: {server.base_url}\n  cache: {cache}")
    text = text.replace("  backend: openai\n", f"  backend: {backend}\n")
    text = text.replace("system: shop.assistant:answer", "system: shop/assistant:answer")
    text = text.replace(" shop/", f" {RUBRICS.parent}/shop/")
    text = text.replace("gates:\n", "gates:\n  - generator.no_false_promises >= 0.1\n")
    if edit:
        assert EDITED[0] in text
        text = text.replace(*EDITED)
    assert f"base_url: {server.base_url}" in text
    return text


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Three runs against one fake server and one judge cache: A, A again (B), and C with the
    generator's rubric edited. Returns their folders and the server's chat counts after each."""
    tmp = tmp_path_factory.mktemp("rubrics")
    cache = tmp / "cache.sqlite"
    with FakeOpenAI() as server:
        counts = []
        folders = {}
        for name, edit in (("a", False), ("b", False), ("c", True)):
            path = write(tmp / f"{name}.yaml", scenario_text(server, cache, edit=edit))
            out = tmp / name
            result = run_cli("scenario", path, "--out", out, "--filter", FEW, "--no-headroom",
                             "-q", env={"OPENAI_API_KEY": "sk-test"})
            assert result.code in (0, 1), result
            folders[name] = out
            counts.append(server.counts["chat"])
    return folders, counts


def report(folder: Path) -> dict:
    return json.loads((folder / "report.json").read_text())


def test_two_rubrics_are_metrics_with_declarations_verdicts_and_gates(runs):
    folders, _ = runs
    rep = report(folders["a"])
    gen = rep["components"]["generator"]["metrics"]["no_false_promises"]
    sql = rep["components"]["text2sql"]["metrics"]["reads_sizes_right"]
    assert gen["n"] > 0 and gen["errors"] == 0 and 0 <= gen["mean"] <= 1
    assert sql["n"] > 0 and sql["errors"] == 0 and 1 <= sql["mean"] <= 5
    assert gen["evaluator"] == sql["evaluator"] == "judged"
    assert gen["declaration"]["range"] == [0.0, 1.0] and sql["declaration"]["range"] == [1, 5]
    assert gen["declaration"]["verdict"] == ">= 1" and gen["declaration"]["review"] is True
    assert gen["declaration"]["question"].startswith('Does this hold here: "The answer')
    # the generator's rubric joins its default criteria; text2sql's is written in verdicts:
    criteria = rep["verdict_criteria"]
    assert "no_false_promises >= 1" in criteria["generator"]["criteria"]
    assert "faithfulness >= 0.5" in criteria["generator"]["criteria"]
    assert criteria["text2sql"]["criteria"] == ["execution_accuracy >= 1",
                                                "reads_sizes_right >= 4"]
    gate = next(g for g in rep["gates"] if g["name"] == "generator.no_false_promises >= 0.1")
    assert gate["value"] == pytest.approx(gen["mean"])
    for page in ("report.md", "report.html"):  # in every report
        text = (folders["a"] / page).read_text()
        assert "no_false_promises" in text and "reads_sizes_right" in text, page
    # every judged value carries its rubric (task id and version) and the raw judgment
    lines = [json.loads(x) for x in (folders["a"] / "results.jsonl").read_text().splitlines()]
    version = gen["declaration"]["version"]
    for line in lines:
        value = line["components"]["generator"]["metrics"]["no_false_promises"]
        assert value["details"]["rubric"] == {"task": "judged:no_false_promises",
                                              "version": version}
        [record] = value["details"]["judgments"]
        assert record["task"] == "judged:no_false_promises"
        assert record["rubric_version"] == version and record["output"]["reason"]
        assert value["value"] == (1.0 if record["output"]["holds"] else 0.0)
        verdict = line["verdicts"]["generator"]
        assert "no_false_promises" in verdict["values"]


def test_a_rerun_is_free_and_an_edited_rubric_asks_again_for_its_metric_only(runs):
    folders, counts = runs
    assert counts[0] > 0 and counts[1] == counts[0], "B: every judgment from the cache"
    rep_c = report(folders["c"])
    asked = {(c, m): s["judge"]["requests"] for c, comp in rep_c["components"].items()
             for m, s in comp["metrics"].items() if s.get("judge")}
    assert asked.pop(("generator", "no_false_promises")) > 0
    assert set(asked.values()) == {0}, asked
    assert counts[2] - counts[1] == report(folders["a"])["components"]["generator"][
        "metrics"]["no_false_promises"]["judge"]["requests"]


def test_compare_treats_an_edited_rubric_as_another_metric(runs):
    folders, _ = runs
    result = run_cli("compare", folders["a"], folders["c"], "--json")
    assert result.code in (0, 1), result
    cmp = json.loads(result.out)
    compared = {f"{m['component']}.{m['metric']}" for m in cmp["metrics"]}
    assert "text2sql.reads_sizes_right" in compared
    assert "generator.no_false_promises" not in compared
    assert "generator.no_false_promises" in cmp["only_in_a"] and \
        "generator.no_false_promises" in cmp["only_in_b"]
    assert any("no_false_promises measures something else in each run" in w and
               "its rubric changed" in w for w in cmp["warnings"])


def test_people_label_a_rubric_and_agreement_reads_it(runs, tmp_path):
    folders, _ = runs
    run = folders["b"]
    lines = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    labels = [{"case": r["case"]["id"], "component": "generator",
               "metric": "no_false_promises",
               "label": "yes" if n % 3 else "no"} for n, r in enumerate(lines)]
    file = write(tmp_path / "labels.jsonl", "".join(json.dumps(x) + "\n" for x in labels))
    result = run_cli("review", "import", run, file, "--reviewer", "ana")
    assert result.code == 0 and f"imported {len(labels)} labels" in result.out, result
    result = run_cli("agreement", run, "--json", "--no-report")
    assert result.code == 0, result
    rows = [r for r in json.loads(result.out)["rows"]
            if (r["component"], r["metric"]) == ("generator", "no_false_promises")]
    assert rows and rows[0]["n"] == len(labels)


# -- the heuristic judge cannot judge words: refused before anything runs --------------------


def test_the_offline_judge_is_refused_before_anything_runs(tmp_path):
    with FakeOpenAI() as server:
        path = write(tmp_path / "s.yaml", scenario_text(server, tmp_path / "c.sqlite",
                                                          backend="heuristic"))
    for args in (("validate", path), ("scenario", path, "--out", tmp_path / "out")):
        result = run_cli(*args)
        assert result.code == 2, result
        assert re.search(r"s\.yaml, line \d+, field `evaluators\.generator\[6\]\.judged`: "
                         r"evaluator 'judged' \(no_false_promises\) on 'generator' needs a "
                         r"language model", result.err), result.err
        assert "judge.backend: openai" in result.err
    assert not (tmp_path / "out").exists()


# -- bad settings: exit 2 naming file, line and field ---------------------------------------

SMALL = """\
name: rubric-errors
cases: [{{id: c1, question: "Where is my order?", gold: {{answer: "It ships today."}}}}]
traces: traces.jsonl
judge: {{backend: openai, model: m, base_url: "http://127.0.0.1:9/v1"}}
pipeline: {{generator: {{}}}}
evaluators:
  generator:
    - judged:
{settings}
"""


@pytest.mark.parametrize(("settings", "field", "said"), [
    ("        metric: polite\n        criterion: Polite.\n        sees: [question, answr]",
     "evaluators.generator[0].judged.sees",
     "unknown field 'answr': the judge can see question, reference, answer, contexts, "
     "latency_ms, usage, error (the fields of generator's step)"),
    ("        metric: polite\n        criterion: Polite.\n        sees: [answer]\n"
     "        scale: 1-5\n        threshold: 7",
     "evaluators.generator[0].judged", "threshold 7 is outside the 1-5 scale (1 to 5)"),
    ("        metric: polite\n        sees: [answer]",
     "evaluators.generator[0].judged.criterion", "required field is missing"),
    ("        metric: polite\n        criterion: '  '\n        sees: [answer]",
     "evaluators.generator[0].judged.criterion", "must be text, not blank"),
    ("        metric: polite\n        criterion: Polite.\n        sees: [answer]\n"
     "        scale: 1-5\n        levels: {1: bad, 5: good}",
     "evaluators.generator[0].judged", "levels must give every level from 1 to 5"),
    ("        metric: Polite Answers\n        criterion: Polite.\n        sees: [answer]",
     "evaluators.generator[0].judged.metric", "string should match pattern"),
])
def test_bad_rubric_settings_are_exit_2_naming_file_line_and_field(tmp_path, settings, field,
                                                                  said):
    write(tmp_path / "traces.jsonl", json.dumps(
        {"case_id": "c1", "generator": {"answer": "It ships today."}}) + "\n")
    path = write(tmp_path / "s.yaml", SMALL.format(settings=settings))
    result = run_cli("validate", path)
    assert result.code == 2, result
    assert "s.yaml, line " in result.err and f"field `{field}`" in result.err, result.err
    assert said.lower() in result.err.lower(), result.err


def test_a_step_field_of_a_plugin_kind_is_seen(tmp_path):
    """`sees` is checked against the step model of the component's kind, whatever plugin
    defines it; outside a scenario (no kind) any plain name passes."""
    from pydantic import BaseModel, ValidationError

    class RerankerStep(BaseModel):
        reranked: list[str]

    ok = RubricSettings.model_validate(
        {"metric": "m", "criterion": "C.", "sees": ["question", "reranked"]},
        context={"step": RerankerStep, "component": "reranker"})
    assert ok.sees == ["question", "reranked"]
    with pytest.raises(ValidationError, match="the fields of reranker's step"):
        RubricSettings.model_validate({"metric": "m", "criterion": "C.", "sees": ["answer"]},
                                      context={"step": RerankerStep, "component": "reranker"})


def test_the_declaration_and_the_task_follow_the_settings():
    s = RubricSettings(metric="polite", criterion="The answer is polite.", sees=["answer"],
                       scale="1-5", threshold=4,
                       levels={1: "rude", 2: "curt", 3: "plain", 4: "kind", 5: "warm"})
    [metric] = declare(s)
    assert (metric.name, metric.range, metric.verdict, metric.precedence) == (
        "polite", (1.0, 5.0), ">= 4", None)
    task = task_for(s)
    assert (task.id, task.version) == ("judged:polite", version_of(s)) == (
        "judged:polite", metric.version)
    assert "5: warm" in task.rubric and "Criterion: The answer is polite." in task.rubric
    assert task.schema()["properties"]["score"]["maximum"] == 5


def test_rubric_try_shows_what_the_judge_says_before_a_run(tmp_path):
    with FakeOpenAI() as server:
        path = write(tmp_path / "s.yaml", scenario_text(server, tmp_path / "c.sqlite"))
        env = {"OPENAI_API_KEY": "sk-test"}
        first = run_cli("rubric", "try", path, "reads_sizes_right", "--cases", "q001,q004",
                        "--json", env=env)
        assert first.code == 0, first
        again = run_cli("rubric", "try", path, "reads_sizes_right", "--cases", "q001,q004",
                        env=env)
        asked = server.counts["chat"]
        missing = run_cli("rubric", "try", path, "politeness", env=env)
        no_case = run_cli("rubric", "try", path, "reads_sizes_right", "--cases", "q999",
                          env=env)
    said = json.loads(first.out)
    assert said["component"] == "text2sql" and said["verdict"] == ">= 4"
    assert [r["case"] for r in said["cases"]] == ["q001", "q004"]
    assert all(1 <= r["value"] <= 5 and r["reason"] for r in said["cases"])
    assert asked == sum(r["requests"] for r in said["cases"]) == 2, "the second try: cached"
    assert again.code == 0 and "(from the cache)" in again.out and "q004" in again.out
    assert f"rubric {said['version']}" in again.out
    assert missing.code == 2 and "no metric 'politeness' is configured" in missing.err
    assert no_case.code == 2 and "--cases: no case 'q999'" in no_case.err, no_case
    assert not list(tmp_path.glob("*/results.jsonl")), "nothing written but the cache"
