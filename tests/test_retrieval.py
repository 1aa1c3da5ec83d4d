"""Retrieval plugin: trec_eval-exact measures (against pytrec_eval and by hand), the `ranking`
evaluator, context precision and recall from labels and from the judge."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
import pytrec_eval

import evalharness_retrieval
import evalharness_retrieval.kernel as kernel
from conftest import run_cli
from evalharness.context import Chunk, EvalContext
from evalharness.judge import (
    CHUNK_USEFULNESS,
    CLAIM_SUPPORT,
    CLAIMS,
    ChunkUsefulnessOutput,
    ClaimsOutput,
    ClaimSupportOutput,
    Judgment,
)
from evalharness.models import Case, GeneratorStep, RetrieverStep, Trace
from evalharness_retrieval import (
    ContextPrecisionSettings,
    ContextRecallSettings,
    RankingSettings,
    RunError,
    evaluate,
    evaluate_retriever,
    evaluate_retriever_with_context,
    ranking_metrics,
)
from evalharness_retrieval.measures import parse_measures
from evalharness_retrieval.ranking import trec_order

TOL = 1e-9
# Every trec_eval measure the plugin has, at cutoffs below, at and beyond the run depths.
TREC_MEASURES = ["P_1", "P_3", "P_5", "P_10", "P_100", "recall_1", "recall_5", "recall_10",
                 "recall_100", "map", "map_cut_1", "map_cut_5", "map_cut_10", "map_cut_100",
                 "recip_rank", "ndcg_cut_1", "ndcg_cut_3", "ndcg_cut_10", "ndcg_cut_100",
                 "Rprec", "success_1", "success_5", "success_10", "num_ret", "num_rel",
                 "num_rel_ret"]
SEED_RANKING = ["c7", "c3", "c9", "c1", "c5"]
SEED_GRADES = {"c1": 0, "c3": 3, "c5": 2, "c7": 0, "c9": 1}


def case(id: str = "x", question: str = "q", **gold) -> Case:
    return Case(id=id, question=question, gold=gold)


def trec_families(measures) -> set[str]:
    """pytrec_eval's measure specification: ``P.1,5`` for P_1 and P_5."""
    cuts: dict[str, list[str]] = {}
    for m in measures:
        family, _, k = m.rpartition("_")
        if k.isdigit() and not m.startswith("num_"):
            cuts.setdefault(family, []).append(k)
        else:
            cuts.setdefault(m, [])
    return {f"{f}.{','.join(ks)}" if ks else f for f, ks in cuts.items()}


def pytrec(qrels, run, measures, level=1):
    out = pytrec_eval.RelevanceEvaluator(qrels, trec_families(measures),
                                         relevance_level=level).evaluate(run)
    return {q: {m: v[m] for m in measures} for q, v in out.items()}


def random_collection(seed: int, queries: int = 80):
    """Graded qrels (-1..4, some queries with nothing relevant, some with no judgment at all)
    and a scored run with many ties, empty rankings, unjudged and non-ASCII docids, queries
    missing from either side."""
    rng = random.Random(seed)
    pool = [f"d{i}" for i in range(rng.choice([6, 40, 300]))] + ["é1", "Z", "a-b", "d1"]
    pool = sorted(set(pool))
    qrels, run = {}, {}
    for q in range(queries):
        qid = f"q{q:03d}"
        if rng.random() < 0.9:
            judged = rng.sample(pool, rng.randint(1, min(len(pool), 15)))
            nothing = rng.random() < 0.15
            qrels[qid] = {d: (rng.choice([-1, 0]) if nothing else rng.choice([-1, 0, 0, 1, 2, 3, 4]))
                          for d in judged}
        if rng.random() < 0.9:
            depth = rng.choice([0, 1, rng.randint(0, len(pool))])
            docs = rng.sample(pool, depth)
            style = rng.random()
            run[qid] = {d: float(rng.randint(0, 3)) if style < 0.5 else
                        round(rng.random(), 1) if style < 0.8 else rng.random() for d in docs}
    return qrels, run


def assert_same(ours, reference, measures):
    assert set(ours) == set(reference), set(ours) ^ set(reference)
    for q, values in reference.items():
        for m in measures:
            assert abs(ours[q][m] - values[m]) <= TOL, (q, m, ours[q][m], values[m])


# -- the kernel against trec_eval (pytrec_eval) -----------------------------------------------


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("level", [1, 2, 3])
def test_random_runs_equal_pytrec_eval(seed, level):
    qrels, run = random_collection(seed)
    reference = pytrec(qrels, run, TREC_MEASURES, level)
    ours = evaluate(qrels, run, TREC_MEASURES, level, per_query=True)
    assert_same(ours, reference, TREC_MEASURES)
    summary = evaluate(qrels, run, TREC_MEASURES, level)
    for m in TREC_MEASURES:
        values = [v[m] for v in reference.values()]
        expected = sum(values) if m.startswith("num_") else (
            sum(values) / len(values) if values else 0.0)
        assert summary[m] == pytest.approx(expected, abs=TOL)


@pytest.mark.parametrize("block", [3, 64])
def test_block_sizes_do_not_change_values(monkeypatch, block):
    """The length buckets and the tie comparisons work in blocks; tiny blocks, same values."""
    monkeypatch.setattr(kernel, "_BLOCK", block)
    qrels, run = random_collection(99, queries=150)
    assert_same(evaluate(qrels, run, TREC_MEASURES, per_query=True),
                pytrec(qrels, run, TREC_MEASURES), TREC_MEASURES)


@pytest.mark.parametrize("seed", range(6))
def test_exp2_ndcg_equals_pytrec_eval_on_relabelled_grades(seed):
    """ndcg_exp2_cut_K on grades g is trec_eval's ndcg_cut_K on grades 2^g - 1."""
    qrels, run = random_collection(seed)
    relabelled = {q: {d: (2 ** g - 1 if g > 0 else g) for d, g in j.items()}
                  for q, j in qrels.items()}
    ks = [1, 3, 10, 100]
    reference = pytrec(relabelled, run, [f"ndcg_cut_{k}" for k in ks])
    ours = evaluate(qrels, run, [f"ndcg_exp2_cut_{k}" for k in ks], per_query=True)
    assert set(ours) == set(reference)
    for q in reference:
        for k in ks:
            assert abs(ours[q][f"ndcg_exp2_cut_{k}"] - reference[q][f"ndcg_cut_{k}"]) <= TOL


@pytest.mark.parametrize("seed", range(4))
def test_ranked_lists_equal_scored_runs_in_trec_order(seed):
    qrels, run = random_collection(seed)
    lists = {q: trec_order(list(r), list(r.values())) for q, r in run.items()}
    measures = parse_measures(["all"])
    names = [m.name for m in measures]
    by_scores = evaluate(qrels, run, names, per_query=True)
    by_lists = evaluate(qrels, lists, names, per_query=True)
    assert by_lists == by_scores


def test_query_selection_follows_trec_eval():
    qrels = {"a": {"x": 1}, "b": {}, "c": {"x": 0}, "d": {"x": 2}}
    run = {"a": {}, "b": {"x": 1.0}, "c": {"x": 1.0}, "z": {"x": 1.0}}
    # evaluated: in the run and judged (an empty judgment set is no judgment)
    assert list(evaluate(qrels, run, ["map"], per_query=True)) == ["a", "c"]
    assert evaluate(qrels, run, ["num_q", "num_rel"]) == {"num_q": 2.0, "num_rel": 1.0}
    # -c: every judged query; the ones missing from the run count as empty rankings
    full = evaluate(qrels, run, ["num_q", "num_rel", "P_5"], per_query=True, complete=True)
    assert list(full) == ["a", "c", "d"] and full["d"] == {"num_q": 1.0, "num_rel": 1.0,
                                                           "P_5": 0.0}
    assert evaluate({}, {}, ["map", "num_q"]) == {"map": 0.0, "num_q": 0.0}


# -- by hand ------------------------------------------------------------------------------------


def test_seed_example():
    """ranking [c7, c3, c9, c1, c5], grades {c1:0, c3:3, c5:2, c7:0, c9:1}."""
    out = evaluate({"q": SEED_GRADES}, {"q": SEED_RANKING},
                   ["P_3", "recall_3", "recip_rank", "ndcg_exp2_cut_3", "ndcg_cut_3"])
    assert round(out["P_3"], 3) == 0.667 and out["P_3"] == 2 / 3
    assert round(out["recall_3"], 3) == 0.667 and out["recall_3"] == 2 / 3
    assert out["recip_rank"] == 0.5
    assert round(out["ndcg_exp2_cut_3"], 3) == 0.523
    assert round(out["ndcg_cut_3"], 3) == 0.502
    # the same numbers by their formulas
    dcg_exp2 = 7 / math.log2(3) + 1 / math.log2(4)
    idcg_exp2 = 7 + 3 / math.log2(3) + 1 / math.log2(4)
    assert out["ndcg_exp2_cut_3"] == pytest.approx(dcg_exp2 / idcg_exp2, abs=1e-15)
    dcg = 3 / math.log2(3) + 1 / math.log2(4)
    assert out["ndcg_cut_3"] == pytest.approx(dcg / (3 + 2 / math.log2(3) + 1 / math.log2(4)),
                                              abs=1e-15)


def test_our_measures_by_hand():
    names = ["F1_3", "hit_1", "hit_3", "recip_rank_cut_1", "recip_rank_cut_2", "dcg_cut_3",
             "dcg_exp2_cut_3", "context_precision_3", "context_precision_5", "map_cut_3",
             "Rprec", "map"]
    out = evaluate({"q": SEED_GRADES}, {"q": SEED_RANKING}, names)
    p, r = 2 / 3, 2 / 3
    assert out["F1_3"] == pytest.approx(2 * p * r / (p + r))
    assert (out["hit_1"], out["hit_3"]) == (0.0, 1.0)
    assert (out["recip_rank_cut_1"], out["recip_rank_cut_2"]) == (0.0, 0.5)
    assert out["dcg_cut_3"] == pytest.approx(3 / math.log2(3) + 1 / 2)
    assert out["dcg_exp2_cut_3"] == pytest.approx(7 / math.log2(3) + 1 / 2)
    # relevant at ranks 2, 3, 5: precision there 1/2, 2/3, 3/5
    assert out["context_precision_3"] == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert out["context_precision_5"] == pytest.approx((1 / 2 + 2 / 3 + 3 / 5) / 3)
    assert out["map_cut_3"] == pytest.approx((1 / 2 + 2 / 3) / 3)
    assert out["map"] == pytest.approx((1 / 2 + 2 / 3 + 3 / 5) / 3)
    assert out["Rprec"] == pytest.approx(2 / 3)


def test_ties_are_broken_by_docid_descending():
    qrels = {"q": {"a": 1}}
    # b and a tie at 1.0: trec_eval ranks b (greater docid) first, so a is at rank 3
    out = evaluate(qrels, {"q": {"a": 1.0, "c": 2.0, "b": 1.0}}, ["recip_rank"])
    assert out["recip_rank"] == pytest.approx(1 / 3)
    out = evaluate(qrels, {"q": {"a": 1.0, "c": 2.0, "B": 1.0}}, ["recip_rank"])
    assert out["recip_rank"] == pytest.approx(1 / 2)  # "B" < "a"


def test_cutoffs_beyond_the_ranking_and_empty_rankings():
    out = evaluate({"q": {"a": 1, "b": 1}}, {"q": ["a"]}, ["P_10", "recall_10", "map_cut_10"])
    assert out == {"P_10": 0.1, "recall_10": 0.5, "map_cut_10": 0.5}
    out = evaluate({"q": {"a": 1}}, {"q": []}, parse_and_names("all"))
    assert all(v == 0.0 for k, v in out.items() if k not in ("num_q", "num_rel"))


def parse_and_names(spec):
    return [m.name for m in parse_measures([spec])]


def test_measure_names():
    assert parse_and_names("P.5,10") == ["P_5", "P_10"]
    assert parse_and_names("success") == ["success_1", "success_5", "success_10"]
    assert parse_and_names("ndcg_exp2_cut_7") == ["ndcg_exp2_cut_7"]
    assert {"map", "Rprec", "recip_rank", "F1_5", "hit_10", "dcg_exp2_cut_1000"} <= set(
        parse_and_names("all"))
    with pytest.raises(ValueError, match="unknown measure 'ndcg'.*ndcg_cut_K"):
        parse_measures(["ndcg"])
    with pytest.raises(ValueError, match="measure 'P_0': the cutoff must be at least 1"):
        parse_measures(["P_0"])
    with pytest.raises(ValueError, match="at least one measure"):
        evaluate({}, {}, [])


def test_input_errors_name_the_query():
    with pytest.raises(RunError, match=r"query 'q2': the ranking lists 'a' more than once"):
        evaluate({"q2": {"a": 1}}, {"q1": ["a"], "q2": ["b", "a", "a"]}, ["map"])
    with pytest.raises(RunError, match=r"query 'q1', docid 'b': the score is NaN"):
        evaluate({"q1": {"a": 1}}, {"q1": {"a": 1.0, "b": float("nan")}}, ["map"])
    with pytest.raises(RunError, match=r"query 'q1', docid 'b': the score 'high' is not a"):
        evaluate({"q1": {"a": 1}}, {"q1": {"a": 1.0, "b": "high"}}, ["map"])
    with pytest.raises(RunError, match=r"query 'q1': relevance grades must be integers"):
        evaluate({"q1": {"a": 1.5}}, {"q1": ["a"]}, ["map"])
    with pytest.raises(RunError, match="mixes"):
        evaluate({"a": {"x": 1}, "b": {"x": 1}}, {"a": ["x"], "b": {"x": 1.0}}, ["map"])
    with pytest.raises(RunError, match="relevance_level must be an integer >= 0"):
        evaluate({"a": {"x": 1}}, {"a": ["x"]}, ["map"], relevance_level=-1)


def test_relevance_level_zero_counts_judged_non_relevant():
    out = evaluate({"q": {"a": 0, "b": -1}}, {"q": ["z", "b", "a"]}, ["recip_rank", "num_rel"],
                   relevance_level=0)
    assert out == {"recip_rank": 1 / 3, "num_rel": 1.0}


# -- the `ranking` evaluator ---------------------------------------------------------------------


def test_ranking_defaults_keep_the_first_version():
    assert ranking_metrics(RankingSettings()) == ["recall@5", "recall@10", "mrr"]


def test_ranking_reports_every_measure_of_the_seed_example():
    batch = [(case(relevant=SEED_GRADES), RetrieverStep(ids=SEED_RANKING))]
    rows = evaluate_retriever("ranking", batch, RankingSettings(k=[3], measures="all"))
    values = {m: round(v.value, 3) for m, v in rows[0].items()}
    assert values == {"precision@3": 0.667, "recall@3": 0.667, "f1@3": 0.667,
                      "hit_rate@3": 1.0, "mrr": 0.5, "mrr@3": 0.5, "map": 0.589,
                      "map@3": 0.389, "r_precision": 0.667, "ndcg@3": 0.523,
                      "dcg@3": round(7 / math.log2(3) + 0.5, 3)}
    linear = evaluate_retriever("ranking", batch, RankingSettings(k=[3], gain="linear",
                                                                  measures=["ndcg", "dcg"]))
    assert round(linear[0]["ndcg@3"].value, 3) == 0.502
    assert set(linear[0]) == {"ndcg@3", "dcg@3"}


def test_ranking_orders_by_scores_as_trec_eval():
    labels = {"a": 1}
    steps = [RetrieverStep(ids=["a", "b", "c"], scores=[1.0, 1.0, 2.0]),  # c, b, a
             RetrieverStep(ids=["a", "b", "c"])]  # rank order
    rows = evaluate_retriever("ranking", [(case(relevant=labels), s) for s in steps],
                              RankingSettings(k=[1]))
    assert rows[0]["mrr"].value == pytest.approx(1 / 3)
    assert rows[0]["mrr"].details == {"first_relevant_rank": 3, "relevant": 1}
    assert rows[1]["mrr"].value == 1.0


def test_ranking_matches_pytrec_eval_per_case():
    qrels, run = random_collection(5, queries=120)
    settings = RankingSettings(k=[1, 3, 10], measures="all", gain="linear")
    batch, expected_ids = [], []
    for qid, ranking in run.items():
        use_scores = len(batch) % 2 == 0
        step = (RetrieverStep(ids=list(ranking), scores=list(ranking.values())) if use_scores
                else RetrieverStep(ids=trec_order(list(ranking), list(ranking.values()))))
        labels = qrels.get(qid)  # cases hold grades >= 0: -1 (unjudged) and 0 act the same
        batch.append((case(id=qid, relevant=labels and {d: max(g, 0) for d, g in
                                                          labels.items()}), step))
        expected_ids.append(qid)
    rows = evaluate_retriever("ranking", batch, settings)
    names = {"precision@{k}": "P_{k}", "recall@{k}": "recall_{k}", "hit_rate@{k}": "success_{k}",
             "map@{k}": "map_cut_{k}", "ndcg@{k}": "ndcg_cut_{k}"}
    trec = [v.format(k=k) for v in names.values() for k in settings.k]
    reference = pytrec({q: j for q, j in qrels.items() if j}, run,
                       trec + ["map", "recip_rank", "Rprec"])
    for (c, _), row in zip(batch, rows, strict=True):
        assert set(row) == set(ranking_metrics(settings))
        if c.gold.relevant is None:
            assert all(v.error == "the case has no relevance labels (gold.relevant)"
                       for v in row.values())
            continue
        assert all(v.error is None and math.isfinite(v.value) for v in row.values())
        ref = reference.get(c.id)
        if ref is None:  # labelled but without judgments: trec_eval skips it; we score 0
            assert all(v.value == 0 for v in row.values())
            continue
        for ours, theirs in names.items():
            for k in settings.k:
                assert abs(row[ours.format(k=k)].value - ref[theirs.format(k=k)]) <= TOL
        assert abs(row["map"].value - ref["map"]) <= TOL
        assert abs(row["mrr"].value - ref["recip_rank"]) <= TOL
        assert abs(row["r_precision"].value - ref["Rprec"]) <= TOL


def test_ranking_failures_are_errors_with_reasons():
    settings = RankingSettings(k=[2], measures="all")
    batch = [(case(), RetrieverStep(ids=["a"])),
             (case(relevant={"a": 1}), RetrieverStep(ids=["a", "b", "a"])),
             (case(relevant={"a": 1}), RetrieverStep(ids=["a", "b"], scores=[1.0, math.nan])),
             (case(relevant={}), RetrieverStep(ids=["a"]))]
    rows = evaluate_retriever("ranking", batch, settings)
    assert {v.error for v in rows[0].values()} == {
        "the case has no relevance labels (gold.relevant)"}
    assert {v.error for v in rows[1].values()} == {
        "the ranking lists chunk ids more than once: a"}
    assert "NaN" in rows[2]["map"].error
    assert all(v.value == 0.0 for v in rows[3].values())  # judged, nothing relevant
    assert evaluate_retriever("no_such_evaluator", batch, settings) is None


def test_ranking_settings_are_validated():
    with pytest.raises(ValueError, match="cutoffs >= 1"):
        RankingSettings(k=[0, 5])
    with pytest.raises(ValueError, match="unknown measure 'ndcg@k'; choose from precision"):
        RankingSettings(measures=["ndcg@k"])
    with pytest.raises(ValueError):
        RankingSettings(gain="log")
    assert RankingSettings(measures=["MRR", "precision"]).measures == ["precision", "mrr"]


# -- context precision and recall ------------------------------------------------------------------


class FakeJudge:
    """The judge interface the evaluators use: ``run_many`` answering from a function."""

    backend, model = "fake", "fake-1"

    def __init__(self, answer):
        self.answer = answer
        self.calls = []

    def run_many(self, task, inputs, *, metric="", rounds_after=0):
        self.calls.append((task.id, list(inputs), metric))
        out = []
        for item in inputs:
            result = self.answer(task, item)
            fields = dict(task=task.id, rubric_version=task.version, backend=self.backend,
                          model=self.model, key=f"k{len(out)}")
            out.append(Judgment(**fields, error=result) if isinstance(result, str)
                       else Judgment(**fields, output=result))
        return out


def usefulness(useful_words):
    def answer(task, item):
        assert task.id == CHUNK_USEFULNESS.id
        return ChunkUsefulnessOutput(verdicts=[
            {"useful": any(w in chunk for w in useful_words), "reason": "r"}
            for chunk in item.chunks])
    return answer


CORPUS = {f"c{i}": Chunk(id=f"c{i}", text=f"text of c{i}") for i in range(10)}


def test_context_precision_from_labels():
    batch = [(case(relevant=SEED_GRADES), RetrieverStep(ids=SEED_RANKING)),
             (case(relevant={"c1": 1}), RetrieverStep(ids=["c2"]))]
    rows = evaluate_retriever_with_context("context_precision", batch,
                                           ContextPrecisionSettings(k=[3, 5]), EvalContext())
    assert rows[0]["context_precision@3"].value == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert rows[0]["context_precision@5"].value == pytest.approx((1 / 2 + 2 / 3 + 3 / 5) / 3)
    assert rows[0]["context_precision@3"].details == {"source": "labels"}
    assert rows[1]["context_precision@3"].value == 0.0


def test_context_precision_from_the_judge_one_request_per_case():
    judge = FakeJudge(usefulness(["c3", "c9", "c5", "here"]))
    batch = [(case(id="a", answer="the reference"), RetrieverStep(ids=SEED_RANKING)),
             (case(id="b"), RetrieverStep(ids=["c1", "c2"], texts=["own text", "c2 here"])),
             (case(id="c"), RetrieverStep(ids=[])),
             (case(id="d"), RetrieverStep(ids=["c1"]))]
    traces = {"b": Trace(case_id="b", generator=GeneratorStep(answer="generated answer"))}
    ctx = EvalContext(judge=judge, corpus=CORPUS, traces=traces)
    settings = ContextPrecisionSettings(k=[3, 5])
    rows = evaluate_retriever_with_context("context_precision", batch, settings, ctx)
    assert len(judge.calls) == 1 and judge.calls[0][0] == "chunk_usefulness"
    inputs = judge.calls[0][1]
    assert [i.answer for i in inputs] == ["the reference", "generated answer"]
    assert inputs[0].chunks == [f"text of {c}" for c in SEED_RANKING]
    assert inputs[1].chunks == ["own text", "c2 here"]  # the step's texts come first
    a = rows[0]
    assert a["context_precision@3"].value == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert a["context_precision@5"].value == pytest.approx((1 / 2 + 2 / 3 + 3 / 5) / 3)
    assert a["context_precision@3"].details["useful"] == ["c3", "c9", "c5"]
    assert len(a["context_precision@3"].details["judgments"]) == 1  # stored once per case
    assert "judgments" not in a["context_precision@5"].details
    assert rows[1]["context_precision@3"].value == pytest.approx(1 / 2)
    assert rows[1]["context_precision@3"].details["judged_against"] == "generator"
    assert rows[2]["context_precision@3"].value == 0.0  # nothing retrieved, nothing asked
    assert "no reference answer" in rows[3]["context_precision@5"].error


def test_context_precision_judge_failures():
    def broken(task, item):
        if item.question == "err":
            return "the model said no"
        return ChunkUsefulnessOutput(verdicts=[{"useful": True, "reason": "r"}])
    batch = [(case(question="err", answer="x"), RetrieverStep(ids=["c1"])),
             (case(question="short", answer="x"), RetrieverStep(ids=["c1", "c2"])),
             (case(answer="x"), RetrieverStep(ids=["nope"]))]
    rows = evaluate_retriever_with_context(
        "context_precision", batch, ContextPrecisionSettings(k=[2]),
        EvalContext(judge=FakeJudge(broken), corpus=CORPUS))
    assert rows[0]["context_precision@2"].error == ("the judge failed to judge the chunks: "
                                                    "the model said no")
    assert rows[0]["context_precision@2"].details["judgments"][0]["error"]
    assert rows[1]["context_precision@2"].error == "the judge returned 1 verdicts for 2 chunks"
    assert rows[2]["context_precision@2"].error.startswith("no text for chunk 'nope'")


def test_context_sources_can_be_forced():
    labelled = (case(relevant={"c1": 1}, answer="r"), RetrieverStep(ids=["c1"]))
    unlabelled = (case(answer="r"), RetrieverStep(ids=["c1"]))
    judge = FakeJudge(usefulness([]))
    ctx = EvalContext(judge=judge, corpus=CORPUS)
    rows = evaluate_retriever_with_context(
        "context_precision", [labelled, unlabelled],
        ContextPrecisionSettings(k=[1], source="labels"), ctx)
    assert rows[0]["context_precision@1"].value == 1.0
    assert rows[1]["context_precision@1"].error == "the case has no relevance labels (gold.relevant)"
    rows = evaluate_retriever_with_context(
        "context_precision", [labelled], ContextPrecisionSettings(k=[1], source="judge"), ctx)
    assert rows[0]["context_precision@1"].value == 0.0  # the judge found nothing useful
    assert rows[0]["context_precision@1"].details["source"] == "judge"


def test_context_recall_from_labels():
    batch = [(case(relevant={"c1": 2, "c2": 1, "c3": 0}), RetrieverStep(ids=["c2", "c9"])),
             (case(relevant={}), RetrieverStep(ids=["c2"])),
             (case(relevant={"c1": 1}), RetrieverStep(ids=["c1", "c1"]))]
    rows = evaluate_retriever_with_context("context_recall", batch, ContextRecallSettings(),
                                           EvalContext())
    assert rows[0]["context_recall"].value == 0.5
    assert rows[0]["context_recall"].details == {"source": "labels", "relevant": 2,
                                                 "retrieved_relevant": 1}
    assert rows[1]["context_recall"].value == 0.0
    assert "more than once" in rows[2]["context_recall"].error


def test_context_recall_from_the_judge():
    def answer(task, item):
        if task.id == CLAIMS.id:
            if item.answer == "none":
                return ClaimsOutput(claims=[])
            return ClaimsOutput(claims=["wool felts", "dry flat", "use cold water"])
        assert task.id == CLAIM_SUPPORT.id
        return ClaimSupportOutput(verdicts=[
            {"claim": c, "supported": c.split()[0] in item.context, "reason": "r"}
            for c in item.claims])
    judge = FakeJudge(answer)
    corpus = {"w": Chunk(id="w", text="wool felts in hot water"),
              "d": Chunk(id="d", text="always dry flat")}
    batch = [(case(answer="ref"), RetrieverStep(ids=["w", "d"])),
             (case(answer="none"), RetrieverStep(ids=["w"])),
             (case(), RetrieverStep(ids=["w"])),
             (case(answer="ref"), RetrieverStep(ids=[]))]
    rows = evaluate_retriever_with_context("context_recall", batch, ContextRecallSettings(),
                                           EvalContext(judge=judge, corpus=corpus))
    first = rows[0]["context_recall"]
    assert first.value == pytest.approx(2 / 3)
    assert first.details["unsupported_claims"] == ["use cold water"]
    assert len(first.details["judgments"]) == 2
    assert [c[0] for c in judge.calls] == ["claims", "claim_support"]
    assert judge.calls[1][1][0].context == "wool felts in hot water\n\nalways dry flat"
    assert rows[1]["context_recall"].error == "the reference answer makes no claim to check"
    assert "neither relevance labels" in rows[2]["context_recall"].error
    assert rows[3]["context_recall"].value == 0.0


def test_context_metrics_with_the_heuristic_judge():
    from evalharness.judge import JudgeConfig
    from evalharness.judge.heuristic import HeuristicJudge

    judge = HeuristicJudge(JudgeConfig())
    corpus = {"p": Chunk(id="p", text="The Slim Chino costs 49.90 euros in navy."),
              "w": Chunk(id="w", text="Wash raw denim rarely, inside out, in cold water.")}
    batch = [(case(question="How much is the chino?", answer="The Slim Chino costs 49.90 "
                   "euros."), RetrieverStep(ids=["w", "p"]))]
    ctx = EvalContext(judge=judge, corpus=corpus)
    try:
        cp = evaluate_retriever_with_context("context_precision", batch,
                                             ContextPrecisionSettings(k=[2]), ctx)
        cr = evaluate_retriever_with_context("context_recall", batch,
                                             ContextRecallSettings(), ctx)
    finally:
        judge.close()
    assert cp[0]["context_precision@2"].value == pytest.approx(0.5)  # useful chunk at rank 2
    assert cp[0]["context_precision@2"].details["useful"] == ["p"]
    assert cr[0]["context_recall"].value == 1.0


def test_every_declared_metric_for_every_case_never_nan():
    rng = np.random.default_rng(3)
    batch = []
    for i in range(60):
        ids = [f"c{j}" for j in rng.permutation(10)[: rng.integers(0, 8)]]
        scores = rng.integers(0, 3, len(ids)).astype(float).tolist() if i % 3 else None
        labels = None if i % 7 == 0 else {f"c{j}": int(rng.integers(0, 4))
                                          for j in rng.permutation(10)[: rng.integers(0, 5)]}
        batch.append((case(id=f"x{i}", relevant=labels, answer="text of c1"),
                      RetrieverStep(ids=ids, scores=scores)))
    ctx = EvalContext(judge=FakeJudge(usefulness(["c1", "c4"])), corpus=CORPUS)
    for name, settings, declared in [
            ("ranking", RankingSettings(k=[1, 5], measures="all"), None),
            ("context_precision", ContextPrecisionSettings(k=[2, 4]), None),
            ("context_recall", ContextRecallSettings(source="labels"), ["context_recall"])]:
        rows = (evaluate_retriever(name, batch, settings) if name == "ranking" else
                evaluate_retriever_with_context(name, batch, settings, ctx))
        declared = declared or (ranking_metrics(settings) if name == "ranking" else
                                [f"context_precision@{k}" for k in settings.k])
        assert len(rows) == len(batch)
        for row in rows:
            assert list(row) == declared
            for v in row.values():
                assert (v.error is not None) or (0.0 <= v.value and math.isfinite(v.value))


def test_public_api():
    assert evalharness_retrieval.evaluate is evaluate
    assert evalharness_retrieval.__version__


# -- end to end through a scenario -----------------------------------------------------------------


def test_scenario_reports_ranking_and_context_metrics(small, tmp_path):
    text = small.read_text().replace(
        "    - ranking: {k: [1, 2]}",
        "    - ranking: {k: [2], measures: all}\n    - context_precision: {k: [2]}\n"
        "    - context_recall")
    small.write_text(text + "  - retriever.ndcg@2 >= 0.5\n")
    res = run_cli("scenario", small, "--out", tmp_path / "run", "-q")
    assert res.code == 0, res
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    metrics = report["components"]["retriever"]["metrics"]
    # c2 ranks d9, d2, d1 with grades {d1: 2, d2: 1}; c3 ranks d2, d1 with {d2: 2}
    ndcg_c2 = (1 / math.log2(3)) / (3 + 1 / math.log2(3))
    expected = {"precision@2": 0.5, "recall@2": 0.75, "mrr": 0.75, "ndcg@2": (ndcg_c2 + 1) / 2,
                "context_precision@2": 0.75, "context_recall": 1.0}
    for name, value in expected.items():
        assert metrics[name]["mean"] == pytest.approx(value), name
        assert metrics[name]["n"] == 2
    assert list(metrics) == [*ranking_metrics(RankingSettings(k=[2], measures="all")),
                             "context_precision@2", "context_recall"]
    settings = {e["name"]: e["settings"] for e in report["components"]["retriever"]["evaluators"]}
    assert settings["ranking"]["gain"] == "exp2"
    assert report["gates"][-1]["passed"]
