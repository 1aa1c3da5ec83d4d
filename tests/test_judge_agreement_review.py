"""benchmarks/judge_agreement_review.py: the judge's agreement with BEGIN and ALCE, measured
through `review import` and `agreement`, equals benchmarks/judge_agreement.py's on the same
items."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from evalharness.judge import JudgeConfig
from evalharness.judge.heuristic import HeuristicJudge
from evalharness.review.labels import read

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 10


def _load(name: str, file: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """The benchmark on the first LIMIT items of each subset: its work folder and output."""
    bench = _load("judge_agreement_review", "judge_agreement_review.py")
    work = tmp_path_factory.mktemp("judge-agreement") / "work"
    lines: list[str] = []
    assert bench.main(["--limit", str(LIMIT), "--out", str(work)], out=lines.append) == 0
    return bench, work, lines


def _saved_agreement(work: Path, subset: str) -> dict:
    name = subset.replace(" ", "_").replace(",", "")
    return json.loads((work / "agreement" / f"{name}.json").read_text(encoding="utf-8"))


def test_labels_went_through_review_import(quick_run):
    bench, work, lines = quick_run
    review_file = [json.loads(x) for x in
                   (work / "human_labels.jsonl").read_text(encoding="utf-8").splitlines()]
    stored = read(work / "run" / "review" / "labels.jsonl")
    assert len(stored) == len(review_file) > 0
    assert [(lab.case, lab.metric, lab.label, lab.reviewer) for lab in stored] == [
        (r["case"], r["metric"], r["label"], r["reviewer"]) for r in review_file]
    assert all(lab.at for lab in stored)  # stamped by the import, not written by hand
    assert f"imported {len(review_file)} labels by ALCE annotators, BEGIN annotators" in (
        "\n".join(lines))
    # every labelled item is a case of the run, tagged with its subset
    cases = [json.loads(x) for x in (work / "cases.jsonl").read_text().splitlines()]
    assert {r["case"] for r in review_file} <= {c["id"] for c in cases}
    assert {c["tags"][0] for c in cases} == {"begin_wow", "begin_cmu", "asqa", "eli5"}


def test_auc_and_spearman_equal_the_old_benchmark_on_the_same_items(quick_run):
    bench, work, lines = quick_run
    old = bench.jm
    labelled = {json.loads(x)["case"] for x in
                (work / "human_labels.jsonl").read_text(encoding="utf-8").splitlines()}
    judge = HeuristicJudge(JudgeConfig())
    begin = old.read_jsonl(old.GROUNDEDNESS, LIMIT)
    alce = old.read_jsonl(old.RELEVANCY, LIMIT)
    faith, _, _ = old.faithfulness_scores(judge, begin)
    relevancy = old.relevancy_scores(judge, alce)
    text = "\n".join(lines)
    checked = 0
    for name, (_, ids) in bench.subsets(begin).items():
        row = bench.row_of(_saved_agreement(work, name), "faithfulness")
        idx = [k for k, r in enumerate(begin) if r["id"] in set(ids) and r["id"] in labelled]
        assert row["n"] == len(idx) and all(faith[k] is not None for k in idx)
        expected = old.roc_auc([faith[k] for k in idx],
                               [begin[k]["label"] == "supported" for k in idx])
        assert row["auc"]["value"] == pytest.approx(expected, abs=1e-9)
        assert any(line.startswith(name + " ") and old.fmt(expected) in line
                   for line in text.splitlines())
        checked += 1
    for name, (_, ids) in bench.subsets(alce).items():
        row = bench.row_of(_saved_agreement(work, name), "answer_relevancy")
        idx = [k for k, r in enumerate(alce) if r["id"] in set(ids) and r["id"] in labelled]
        expected = old.spearman([relevancy[k] for k in idx], [alce[k]["score"] for k in idx])
        assert row["n"] == len(idx)
        assert row["spearman"]["value"] == pytest.approx(expected, abs=1e-9)
        checked += 1
    assert checked == 8  # cmu, wow, wow dev, wow test, all BEGIN; asqa, eli5, all ALCE


def test_left_out_labels_are_named_with_their_reason(quick_run):
    _, _, lines = quick_run
    text = "\n".join(lines)
    # the first 10 WoW dev items include an answer without claims (the old script skips it)
    assert "left out of the review file (begin_wow): the answer makes no claim to verify: 1" in (
        text)


def test_benchmark_doctests(quick_run):
    import doctest

    result = doctest.testmod(quick_run[0])
    assert result.attempted > 0 and result.failed == 0
