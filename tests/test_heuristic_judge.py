"""The offline heuristic judge: hand-checked examples per task, the backend through the judge's
sync API, deterministic embeddings, and the agreement benchmark's own arithmetic."""

from __future__ import annotations

import asyncio
import doctest
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from evalharness.judge import (
    CHUNK_USEFULNESS,
    CLAIM_SUPPORT,
    CLAIMS,
    QUESTIONS,
    SQL_EQUIVALENCE,
    ChunkUsefulnessInput,
    ClaimsInput,
    ClaimSupportInput,
    JudgeConfig,
    QuestionsInput,
    SQLEquivalenceInput,
)
from evalharness.judge import heuristic as H
from evalharness.judge.heuristic import HeuristicCannotJudge, HeuristicJudge

ROOT = Path(__file__).resolve().parent.parent
BENCHMARK = ROOT / "benchmarks" / "judge_agreement.py"


@pytest.fixture
def judge():
    j = HeuristicJudge(JudgeConfig())
    yield j
    j.close()


def supported(context: str, claim: str) -> bool:
    return H.verify_claims(context, [claim]).verdicts[0].supported


# -- CLAIMS ------------------------------------------------------------------------------------


def test_claims_drop_greetings_questions_and_offers_of_help():
    claims = H.split_claims(
        "Do you have the Alba coat?",
        "Hi there! The Alba Knit coat costs €179.00. Would you like another colour? "
        "Hope this helps, and let me know if you need anything else!")
    assert claims == ["The Alba Knit coat costs €179.00."]


def test_claims_are_sentences_with_numbers_units_and_names_verbatim():
    claims = H.split_claims("", "The Hollis & Reed Slim Chino costs €49.90; there are 4 "
                                "in size M, and it is 98% cotton. It is navy.")
    assert claims == ["The Hollis & Reed Slim Chino costs €49.90; there are 4 in size M, and "
                      "it is 98% cotton.", "It is navy."]
    assert "9,000 years ago" in H.split_claims("", "Corn was domesticated 9,000 years ago.")[0]


def test_fragments_split_clauses_and_adjuncts():
    assert H.fragments("The Hollis & Reed Slim Chino costs €49.90; there are 4 in size M, and "
                       "it is 98% cotton.") == [
        "The Hollis & Reed Slim Chino costs €49.90", "there are 4", "in size M",
        "and it is 98% cotton."]


def test_detached_clitics_are_reattached():
    assert H.tokens("it 's wool , is n't it") == H.tokens("it's wool, isn't it")


def test_claims_without_content_are_dropped():
    assert H.split_claims("", "Oh wow! Yes. Sure thing!") == []
    assert H.split_claims("", "") == []


def test_statement_before_a_tag_question_is_kept():
    assert H.split_claims("", "Goldendoodles are designer dogs, do you like them?") == [
        "Goldendoodles are designer dogs"]


# -- CLAIM_SUPPORT -----------------------------------------------------------------------------

CONTEXT = ("Hollis & Reed Slim Chino | navy | €49.90 | sizes S, M, L | 98% cotton, 2% elastane. "
           "Raw denim made from 100% cotton stretches with wear, typically by up to an inch "
           "in the waist over the first few weeks.")


@pytest.mark.parametrize("claim", [
    "The navy Slim Chino: 49.9 EUR",                 # 49.90 = 49.9, € = EUR
    "the Hollis & Reed Slim Chino is navy",
    "Raw denim stretches as it is worn",             # inflected paraphrase, same words
    "raw cotton denim stretches in the waist",        # reordered, same content
    "sizes S, M",
])
def test_supported_claims(claim):
    assert supported(CONTEXT, claim), H.check_claim(claim, CONTEXT)


@pytest.mark.parametrize("claim, missing", [
    ("The Slim Chino costs €59.90", "numbers 59.9"),      # a number the context lacks
    ("The Slim Chino comes in size XL", "sizes XL"),        # a size the context lacks
    ("The Slim Chino is made by Levi", "names levi"),       # a name the context lacks
    ("Raw denim never stretches", "negation"),              # a negation the context lacks
    ("Raw denim shrinks when washed hot", "words"),          # content that is absent
    ("I love this raw denim", "first-person"),               # the speaker, not the context
    ("Raw denim is awesome", "opinion awesome"),             # an opinion the context lacks
])
def test_unsupported_claims_say_what_is_missing(claim, missing):
    verdict = H.verify_claims(CONTEXT, [claim]).verdicts[0]
    assert not verdict.supported
    assert missing in verdict.reason
    assert verdict.claim == claim


def test_confidence_is_a_probability_that_decides_the_verdict():
    claims = ["The Slim Chino costs €49.90", "The Slim Chino costs €59.90",
              "Raw denim stretches in the waist", "I think raw denim is the best, honestly",
              "Linen wrinkles easily"]
    for v in H.verify_claims(CONTEXT, claims).verdicts:
        assert v.confidence is not None and 0.0 <= v.confidence <= 1.0
        assert v.supported == (v.confidence >= 0.5)
        assert f"confidence {v.confidence:.2f}" in v.reason


def test_confidence_falls_as_a_claim_departs_from_the_context():
    def confidence(claim):
        return H.verify_claims(CONTEXT, [claim]).verdicts[0].confidence
    copied = confidence("Raw denim made from 100% cotton stretches with wear")
    one_new_word = confidence("Raw denim made from 100% cotton stretches with heavy wear")
    wrong_number = confidence("Raw denim made from 80% cotton stretches with wear")
    unrelated = confidence("Linen shirts wrinkle easily in summer heat")
    assert copied > one_new_word > unrelated
    assert copied > wrong_number > unrelated
    assert copied >= 0.8 and unrelated < 0.1


def test_signals_are_in_the_documented_order_and_ranges():
    signals = H.claim_signals("I love raw denim, it never shrinks", CONTEXT)
    assert list(signals) == list(H.SIGNALS) == list(H.SUPPORT_WEIGHTS)
    assert signals["first_person"] == 1.0 and signals["negation"] == 1.0
    assert 0.0 <= signals["coverage"] <= 1.0 and 0.0 <= signals["novel_words"] <= 1.0
    # structural function words are not novel even when a terse context lacks them
    assert H.claim_signals("The chino is navy", "chino: navy")["novel_words"] == 0.0


def test_number_normalisation():
    assert H.numbers("€129") == H.numbers("129 €") == H.numbers("129.00") == {"129"}
    assert H.numbers("1,281 goals") == {"1281"}
    assert H.numbers("49,90 EUR") == {"49.9"}
    assert H.numbers("three sizes") == {"3"}
    assert H.sizes("Sizes S, M and XL") == {"S", "M", "XL"}


def test_claim_support_is_deterministic_and_in_order():
    claims = ["The Slim Chino costs €49.90", "It costs €59", "It is 98% cotton"]
    first = H.verify_claims(CONTEXT, claims)
    assert first == H.verify_claims(CONTEXT, claims)
    assert [v.claim for v in first.verdicts] == claims
    assert [v.supported for v in first.verdicts] == [True, False, True]


# -- QUESTIONS ---------------------------------------------------------------------------------


@pytest.mark.parametrize("answer", [
    "I don't know.",
    "I'm not sure, it depends on the brand.",
    "I couldn't find any information about that.",
    "Sorry, I am unable to answer that.",
    "There is no information about returns in the documents.",
])
def test_noncommittal_answers_are_flagged(answer):
    out = H.pseudo_questions(answer, 3)
    assert out.questions and all(q.noncommittal for q in out.questions)


def test_specific_answer_gives_committal_pseudo_questions_from_its_statements():
    out = H.pseudo_questions("The Alba coat is grey boiled wool. It costs €179. Thanks!", 3)
    assert [q.question for q in out.questions] == [
        "Is it true that the Alba coat is grey boiled wool?", "Is it true that it costs €179?"]
    assert not any(q.noncommittal for q in out.questions)
    assert len(H.pseudo_questions("Coats are warm. Jeans are blue. Scarves are soft.", 2
                                  ).questions) == 2


# -- CHUNK_USEFULNESS --------------------------------------------------------------------------


def test_chunk_usefulness():
    out = H.judge_chunks(
        "How should I wash raw denim?",
        "Wash raw denim inside out in cold water, and hang it to dry.",
        ["To wash raw denim, turn it inside out and soak it in cold water.",
         "Hang jeans to dry; never tumble dry them.",
         "Wool coats should be brushed after wearing."])
    assert [v.useful for v in out.verdicts] == [True, True, False]
    assert all(v.reason for v in out.verdicts)


# -- embeddings --------------------------------------------------------------------------------


def test_embeddings_are_normalised_and_similar_texts_are_closer():
    v = H.embed_texts(["How do I wash raw denim jeans?", "washing raw denim jeans",
                       "What does the wool coat cost?", ""])
    assert v.shape == (4, H.EMBED_DIM)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0)
    assert v[0] @ v[1] > 0.5 > v[0] @ v[2]
    assert np.array_equal(v, H.embed_texts(["How do I wash raw denim jeans?",
                                            "washing raw denim jeans",
                                            "What does the wool coat cost?", ""]))


def test_embeddings_are_the_same_in_another_process():
    texts = ["How do I wash raw denim jeans?", "Alba coat €179"]
    code = ("import json; from evalharness.judge.heuristic import embed_texts; "
            f"print(json.dumps(embed_texts({texts!r}).tolist()))")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, check=True)
    assert np.array_equal(np.asarray(json.loads(proc.stdout)), H.embed_texts(texts))


# -- the backend -------------------------------------------------------------------------------


def test_identity(judge):
    assert judge.identity() == {
        "backend": "heuristic", "model": "heuristic-v3", "embedding_model": "hashing-512-v1",
        "llm": False, "label": "heuristic (offline, deterministic; not an LLM)"}
    assert judge.cacheable is False


def test_run_many_and_embed_many(judge):
    judgments = judge.run_many(CLAIMS, [
        ClaimsInput(question="Price?", answer="The coat costs €179. Hope this helps!"),
        ClaimsInput(question="Hi", answer="Hello!")], metric="faithfulness")
    assert [j.output.claims for j in judgments] == [["The coat costs €179."], []]
    first = judgments[0]
    assert (first.task, first.rubric_version, first.backend, first.model) == (
        "claims", CLAIMS.version, "heuristic", "heuristic-v3")
    assert first.error is None and first.raw is None and first.requests == 0
    assert first.key == judge.key(CLAIMS, ClaimsInput(question="Price?", answer=(
        "The coat costs €179. Hope this helps!")))
    assert first.record()["output"] == {"claims": ["The coat costs €179."]}

    [support] = judge.run_many(CLAIM_SUPPORT, [ClaimSupportInput(
        context="Alba coat: €179", claims=["The Alba coat costs €179", "It costs €99"])])
    assert [v.supported for v in support.output.verdicts] == [True, False]

    [questions] = judge.run_many(QUESTIONS, [QuestionsInput(answer="It is wool.", n=2)])
    assert len(questions.output.questions) == 1

    [chunks] = judge.run_many(CHUNK_USEFULNESS, [ChunkUsefulnessInput(
        question="q", answer="The Alba coat costs €179.", chunks=["Alba coat €179", "x"])])
    assert [v.useful for v in chunks.output.verdicts] == [True, False]

    [emb] = judge.embed_many([["wool coat", "raw denim", "wool coats"]])
    assert emb.error is None and emb.backend == "heuristic" and emb.model == "hashing-512-v1"
    assert emb.vectors.shape == (3, H.EMBED_DIM)
    assert emb.vectors[0] @ emb.vectors[2] > emb.vectors[0] @ emb.vectors[1]


def test_sql_equivalence_is_an_error_not_an_exception(judge):
    inputs = SQLEquivalenceInput(schema_sql="CREATE TABLE t (a INT)", dialect="sqlite",
                                 gold="SELECT a FROM t", predicted="SELECT a FROM t")
    [j] = judge.run_many(SQL_EQUIVALENCE, [inputs])
    assert j.output is None
    assert j.error == "the heuristic judge cannot decide SQL equivalence; configure an LLM judge"
    with pytest.raises(HeuristicCannotJudge):
        H.answer(SQL_EQUIVALENCE, inputs)


def test_async_methods_directly(judge):
    inputs = ClaimsInput(question="q", answer="The coat is grey.")
    j = asyncio.run(judge.complete(CLAIMS, inputs, "k"))
    assert j.key == "k" and j.output.claims == ["The coat is grey."]
    e = asyncio.run(judge.embed(["a", "b"]))
    assert e.vectors.shape == (2, H.EMBED_DIM)


def test_answer_is_pure():
    inputs = ClaimSupportInput(context="Alba coat: €179", claims=["It costs €179"])
    before = inputs.model_dump()
    assert H.answer(CLAIM_SUPPORT, inputs) == H.answer(CLAIM_SUPPORT, inputs)
    assert inputs.model_dump() == before


# -- the agreement benchmark -------------------------------------------------------------------


def _benchmark_module():
    spec = importlib.util.spec_from_file_location("judge_agreement", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_benchmark_statistics_doctests():
    module = _benchmark_module()
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0


def test_benchmark_statistics_against_brute_force():
    module = _benchmark_module()
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 4, 40).astype(float)
    labels = rng.integers(0, 2, 40).astype(bool)
    pos, neg = scores[labels], scores[~labels]
    brute = np.mean([(p > n) + 0.5 * (p == n) for p in pos for n in neg])
    assert module.roc_auc(scores, labels) == pytest.approx(brute)
    x, y = rng.normal(size=30), rng.normal(size=30)
    ranks = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
    assert module.spearman(x, y) == pytest.approx(np.corrcoef(*ranks)[0, 1])


def test_benchmark_quick_run_prints_both_tables():
    lines: list[str] = []
    assert _benchmark_module().main(["--limit", "15"], out=lines.append) == 0
    text = "\n".join(lines)
    for expected in ("Groundedness vs BEGIN", "begin_wow test", "begin_cmu", "AUC naive",
                     "Answer relevancy vs ALCE", "asqa", "eli5", "rho word overlap"):
        assert expected in text


def test_benchmark_measures_an_openai_compatible_judge_the_same_way(monkeypatch, tmp_path):
    fake_openai = pytest.importorskip("evalharness.testing.fake_openai")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    # a fresh judge cache: answers cached from another version of the heuristic must not count
    monkeypatch.setenv("EVALHARNESS_CACHE_DIR", str(tmp_path))
    module = _benchmark_module()
    heuristic_lines: list[str] = []
    module.main(["--limit", "8"], out=heuristic_lines.append)
    with fake_openai.FakeOpenAI() as server:  # answers with the heuristic judge's `answer`
        lines: list[str] = []
        assert module.main(["--backend", "openai", "--model", "fake", "--base-url",
                            server.base_url, "--limit", "8"], out=lines.append) == 0

    def numbers_only(text_lines):
        return [line for line in text_lines if "judge:" not in line]
    assert "judge: openai:fake" in "\n".join(lines)
    assert numbers_only(lines) == numbers_only(heuristic_lines)


def test_benchmark_faithfulness_is_the_plugins_mean_of_confidences(judge):
    module = _benchmark_module()
    items = [{"question": "q", "context": CONTEXT,
              "answer": "The Slim Chino costs €49.90. It is 80% linen. Hope this helps!"},
             {"question": "q", "context": CONTEXT, "answer": "Hello!"}]
    scores, binary, skipped = module.faithfulness_scores(judge, items)
    verdicts = H.verify_claims(CONTEXT, H.split_claims("q", items[0]["answer"])).verdicts
    assert len(verdicts) == 2
    assert scores[0] == pytest.approx(sum(v.confidence for v in verdicts) / 2)
    assert binary[0] == sum(v.supported for v in verdicts) / 2
    assert (scores[1], skipped[1]) == (None, "no claims")


def test_hard_coded_support_weights_are_the_benchmarks_fit():
    lines: list[str] = []
    w = _benchmark_module().fit_report(lines.append)
    assert "n = 421" in lines[0]
    assert w[0] == pytest.approx(H.SUPPORT_BIAS, abs=0.011)
    assert w[1:] == pytest.approx([H.SUPPORT_WEIGHTS[k] for k in H.SIGNALS], abs=0.011)
    for name, weight in H.FIXED_SUPPORT_WEIGHTS.items():
        assert H.SUPPORT_WEIGHTS[name] == weight


def test_a_wrong_number_or_name_sinks_an_otherwise_copied_claim():
    context = "The Alba coat by Hollis & Reed costs 179 euros and is made of boiled wool."
    copied = H.check_claim("The Alba coat costs 179 euros", context).confidence
    wrong_number = H.check_claim("The Alba coat costs 199 euros", context)
    wrong_name = H.check_claim("The Alba coat by Levi costs 179 euros", context)
    assert copied > 0.8
    assert not wrong_number.supported and wrong_number.confidence < 0.25
    assert not wrong_name.supported and wrong_name.confidence < 0.25


def test_benchmark_openai_backend_needs_a_model():
    with pytest.raises(SystemExit, match="needs --model"):
        _benchmark_module().main(["--backend", "openai", "--limit", "1"])
