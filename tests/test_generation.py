"""Generator metrics with a scripted judge: hand-computed values, request counts, error paths."""

from __future__ import annotations

import numpy as np
import pytest

from evalharness.context import Chunk, EvalContext
from evalharness.judge import (
    CLAIM_SUPPORT,
    CLAIMS,
    ClaimsOutput,
    ClaimSupportOutput,
    QuestionsOutput,
)
from evalharness.judge.base import Embeddings, Judge, JudgeConfig, Judgment
from evalharness.models import Case, GeneratorStep, Trace
from evalharness_generation import evaluate_generator
from evalharness_generation.judged import RelevancySettings
from evalharness_generation.numbers import figures, numeric_consistency
from evalharness_generation.sources import generator_sources


class ScriptedJudge(Judge):
    """Answers from tables: claims by answer text, support by claim text, questions by answer."""

    backend = "scripted"
    is_llm = False
    cacheable = False

    def __init__(self, claims=None, supported=(), questions=None, vectors=None, fail=()):
        super().__init__(JudgeConfig(backend="scripted", model="s1"))
        self.claims = claims or {}
        self.supported = set(supported)
        self.questions = questions or {}
        self.vectors = vectors or {}
        self.fail = set(fail)
        self.calls: list[str] = []

    async def complete(self, task, inputs, key):
        self.calls.append(task.id)
        base = dict(task=task.id, rubric_version=task.version, backend=self.backend,
                    model=self.model, key=key, requests=1)
        if task.id in self.fail:
            return Judgment(**base, error="scripted failure", raw="???")
        if task is CLAIMS:
            out = ClaimsOutput(claims=self.claims.get(inputs.answer, [inputs.answer]))
        elif task is CLAIM_SUPPORT:
            out = ClaimSupportOutput(verdicts=[
                {"claim": c, "supported": c in self.supported, "reason": "scripted"}
                for c in inputs.claims])
        else:
            out = QuestionsOutput(questions=self.questions[inputs.answer][: inputs.n])
        return Judgment(**base, output=out, raw=out.model_dump_json())

    async def embed(self, texts):
        self.calls.append("embed")
        return Embeddings(np.array([self.vectors[t] for t in texts], dtype=float), requests=1,
                          backend=self.backend, model="e1")


def case(question="q?", answer=None, cid="a"):
    return Case(id=cid, question=question, gold={"answer": answer})


SEVEN = [f"claim {i}" for i in range(7)]


def test_faithfulness_seed_example():
    judge = ScriptedJudge(claims={"the answer": SEVEN}, supported=SEVEN[:6])
    batch = [(case(), GeneratorStep(answer="the answer", contexts=["ctx"]))]
    (row,) = evaluate_generator("faithfulness", batch, None, EvalContext(judge=judge))
    v = row["faithfulness"]
    assert v.value == pytest.approx(6 / 7) and round(v.value, 3) == 0.857
    assert v.details["unsupported_claims"] == ["claim 6"]
    assert [r["task"] for r in v.details["judgments"]] == ["claims", "claim_support"]
    assert v.details["judge"] == {"backend": "scripted", "model": "s1"}
    assert judge.calls == ["claims", "claim_support"], "2 requests per case"


def test_faithfulness_errors():
    judge = ScriptedJudge(claims={"Hello!": []})
    batch = [
        (case(), GeneratorStep(answer="  ", contexts=["ctx"])),
        (case(), GeneratorStep(answer="x", contexts=[])),
        (case(), GeneratorStep(answer="Hello!", contexts=["ctx"])),
    ]
    rows = evaluate_generator("faithfulness", batch, None, EvalContext(judge=judge))
    assert [r["faithfulness"].error for r in rows] == [
        "the answer is empty",
        "the generator was given no context (no contexts, SQL rows or chunks)",
        "the answer makes no claim to verify"]
    failing = ScriptedJudge(fail={"claim_support"})
    (row,) = evaluate_generator("faithfulness", [batch[0][:1] + (GeneratorStep(
        answer="x", contexts=["c"]),)], None, EvalContext(judge=failing))
    assert row["faithfulness"].error.startswith("the judge failed to verify the claims")
    assert row["faithfulness"].details["judgments"][1]["raw"] == "???"


def test_faithfulness_uses_sql_rows_and_chunks_when_contexts_are_not_recorded():
    trace = Trace(case_id="a", text2sql={"sql": "select", "columns": ["name", "price"],
                                         "rows": [["Navy Coat", 129.0]]},
                  retriever={"ids": ["b1", "b2"]})
    ctx = EvalContext(corpus={"b1": Chunk(id="b1", text="Brush wool coats.")},
                      traces={"a": trace})
    sources = generator_sources(case(), GeneratorStep(answer="x"), ctx)
    assert sources == ["name: Navy Coat, price: 129.0", "Brush wool coats."]


def test_answer_relevancy_by_hand():
    q = {"ans": [{"question": "g1", "noncommittal": False},
                 {"question": "g2", "noncommittal": False},
                 {"question": "g3", "noncommittal": True}]}
    vectors = {"q?": [1, 0], "g1": [1, 0], "g2": [0, 1], "g3": [1, 1]}
    judge = ScriptedJudge(questions=q, vectors=vectors)
    batch = [(case(), GeneratorStep(answer="ans"))]
    ctx = EvalContext(judge=judge)
    (strict,) = evaluate_generator("answer_relevancy", batch, RelevancySettings(), ctx)
    assert strict["answer_relevancy"].value == 0.0
    assert strict["answer_relevancy"].details["similarities"] == pytest.approx(
        [1.0, 0.0, 2 ** -0.5])
    (prop,) = evaluate_generator("answer_relevancy", batch,
                                 RelevancySettings(noncommittal="proportional"), ctx)
    mean = (1 + 0 + 2 ** -0.5) / 3
    assert prop["answer_relevancy"].value == pytest.approx(mean * 2 / 3)
    (two,) = evaluate_generator("answer_relevancy", batch, RelevancySettings(n=2), ctx)
    assert two["answer_relevancy"].value == pytest.approx(0.5)
    assert judge.calls[:2] == ["answer_questions", "embed"], "1 chat + 1 embeddings request"


def test_answer_relevancy_of_an_empty_answer_is_zero_without_asking():
    judge = ScriptedJudge()
    (row,) = evaluate_generator("answer_relevancy", [(case(), GeneratorStep(answer=""))],
                                RelevancySettings(), EvalContext(judge=judge))
    assert row["answer_relevancy"].value == 0.0 and judge.calls == []


def test_answer_correctness_by_hand():
    a_claims = ["a1", "a2", "a3", "a4"]
    r_claims = ["r1", "r2", "r3", "r4", "r5"]
    judge = ScriptedJudge(claims={"answer": a_claims, "reference": r_claims},
                          supported={"a1", "a2", "a3", "r1", "r2", "r3"})
    batch = [(case(answer="reference"), GeneratorStep(answer="answer")),
             (case(answer=None), GeneratorStep(answer="answer"))]
    rows = evaluate_generator("answer_correctness", batch, None, EvalContext(judge=judge))
    assert rows[0]["correctness_precision"].value == 0.75
    assert rows[0]["correctness_recall"].value == 0.6
    assert rows[0]["correctness_f1"].value == pytest.approx(2 / 3)
    assert rows[0]["correctness_recall"].details["missed_reference_claims"] == ["r4", "r5"]
    assert rows[1]["correctness_f1"].error == "the case has no reference answer (gold.answer)"
    assert judge.calls.count("claims") == 2 and judge.calls.count("claim_support") == 2


def test_figures_and_numeric_consistency():
    assert figures("€1,299.00 or 59.90 €, size 42 and 41.5") == ["1299", "59.9", "42", "41.5"]
    v = numeric_consistency("Under 60: the Chino at 59.90, 4 left.", ["name: Chino, price: 59.9"],
                            "Any chinos under 60?")
    assert v.value == pytest.approx(2 / 3) and v.details["mismatches"] == ["4"]
    assert numeric_consistency("Brush it.", [], "").error == "the answer states no figures to check"


def test_numeric_consistency_through_the_hook():
    batch = [(case(question="price?"), GeneratorStep(answer="It costs 129.", contexts=["129.00"]))]
    (row,) = evaluate_generator("numeric_consistency", batch, None, EvalContext())
    assert row["numeric_consistency"].value == 1.0


def test_faithfulness_uses_the_judges_confidence_when_given():
    class Confident(ScriptedJudge):
        async def complete(self, task, inputs, key):
            judgment = await super().complete(task, inputs, key)
            if task is CLAIM_SUPPORT:
                for verdict, p in zip(judgment.output.verdicts, (0.9, 0.2), strict=True):
                    verdict.confidence = p
                    verdict.supported = p >= 0.5
            return judgment

    judge = Confident(claims={"ans": ["c1", "c2"]})
    (row,) = evaluate_generator("faithfulness", [(case(), GeneratorStep(answer="ans",
                                                                      contexts=["x"]))],
                                None, EvalContext(judge=judge))
    v = row["faithfulness"]
    assert v.value == pytest.approx(0.55) and v.details["unsupported_claims"] == ["c2"]
    assert v.details["supported"] == 1


# -- accounting: each judgment record attached to exactly one metric value (issue 10) ----------


def _attached(rows) -> list[dict]:
    return [r for row in rows for value in row.values()
            for r in value.details.get("judgments", [])]


def test_answer_correctness_records_sit_on_precision_only():
    """The 4 judgments of a case sit on correctness_precision alone — also when it fails."""
    claims = {"answer": ["a1"], "reference": ["r1"], "silent": []}
    batch = [(case(answer="reference", cid="ok"), GeneratorStep(answer="answer")),
             (case(answer="silent", cid="no-claims"), GeneratorStep(answer="answer"))]
    rows = evaluate_generator("answer_correctness", batch, None,
                              EvalContext(judge=ScriptedJudge(claims=claims, supported={"a1"})))
    failing = evaluate_generator("answer_correctness", batch[:1], None,
                                 EvalContext(judge=ScriptedJudge(claims=claims,
                                                                 fail={"claim_support"})))
    no_split = evaluate_generator("answer_correctness", batch[:1], None,
                                  EvalContext(judge=ScriptedJudge(fail={"claims"})))
    for row, count in [(rows[0], 4), (rows[1], 2), (failing[0], 4), (no_split[0], 2)]:
        assert len(row["correctness_precision"].details["judgments"]) == count
        assert "judgments" not in row["correctness_recall"].details
        assert "judgments" not in row["correctness_f1"].details
    assert failing[0]["correctness_f1"].error.startswith("the judge failed to verify")
    assert no_split[0]["correctness_recall"].error.startswith("the judge failed to split")


def test_every_judgment_record_is_attached_once_per_batch():
    """Across every judged evaluator of both plugins, no record id appears twice."""
    from evalharness.models import RetrieverStep
    from evalharness_retrieval.contexts import (
        ContextPrecisionSettings,
        ContextRecallSettings,
        context_precision,
        context_recall,
    )

    q = {"ans": [{"question": "g1", "noncommittal": False}]}
    judge = ScriptedJudge(claims={"ans": ["c1", "c2"], "ref": ["c1"]}, supported={"c1"},
                          questions=q, vectors={"q?": [1, 0], "g1": [1, 1]})

    async def chunks(task, inputs, key):  # one verdict per chunk for context precision
        from evalharness.judge import CHUNK_USEFULNESS, ChunkUsefulnessOutput
        if task is CHUNK_USEFULNESS:
            out = ChunkUsefulnessOutput(verdicts=[{"useful": True, "reason": "s"}
                                                  for _ in inputs.chunks])
            return Judgment(task=task.id, rubric_version=task.version, backend="scripted",
                            model="s1", key=key, output=out, requests=1)
        return await ScriptedJudge.complete(judge, task, inputs, key)

    judge.complete = chunks
    ctx = EvalContext(judge=judge, corpus={"d1": Chunk(id="d1", text="c1"),
                                           "d2": Chunk(id="d2", text="c2")})
    gen = [(case(answer="ref", cid=f"g{i}"), GeneratorStep(answer="ans", contexts=["c1"]))
           for i in range(3)]
    ret = [(case(answer="ref", cid=f"r{i}"), RetrieverStep(ids=["d1", "d2"]))
           for i in range(3)]
    rows = [*evaluate_generator("faithfulness", gen, None, ctx),
            *evaluate_generator("answer_relevancy", gen, RelevancySettings(), ctx),
            *evaluate_generator("answer_correctness", gen, None, ctx),
            *context_precision(ret, ContextPrecisionSettings(k=[1, 2], source="judge"), ctx),
            *context_recall(ret, ContextRecallSettings(source="judge"), ctx)]
    ids = [r["id"] for r in _attached(rows)]
    assert len(ids) == len(set(ids)) == 3 * (2 + 2 + 4 + 1 + 2)


def test_a_zero_embedding_fails_answer_relevancy_instead_of_scoring_0():
    q = {"ans": [{"question": "g1", "noncommittal": False}]}
    judge = ScriptedJudge(questions=q, vectors={"q?": [0, 0], "g1": [1, 0]})
    (row,) = evaluate_generator("answer_relevancy", [(case(), GeneratorStep(answer="ans"))],
                                RelevancySettings(), EvalContext(judge=judge))
    value = row["answer_relevancy"]
    assert value.value is None and "zero vector" in value.error and "'q?'" in value.error
    assert len(value.details["judgments"]) == 2
