"""The openai judge backend with the real openai SDK over real HTTP, against the fake server."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import run_cli, write, write_jsonl
from evalharness.judge import CLAIM_SUPPORT, CLAIMS, ClaimsInput, ClaimSupportInput
from evalharness.judge.base import JudgeConfig
from evalharness.judge.cache import JudgeCache
from evalharness.judge.heuristic import answer as heuristic_answer
from evalharness.judge.openai_compat import OpenAIJudge
from evalharness.testing.fake_openai import FakeOpenAI

SECRET = "sk-test-DO-NOT-LEAK-4242"


@pytest.fixture
def server():
    with FakeOpenAI() as s:
        yield s


def judge_for(server, tmp_path, **kw) -> OpenAIJudge:
    config = JudgeConfig(**{"backend": "openai", "model": "judge-1",
                            "base_url": server.base_url,
                            "cache": str(tmp_path / "cache.sqlite"), **kw})
    return OpenAIJudge(config)


INPUT = ClaimsInput(question="Is the navy coat in stock?",
                    answer="The Navy Wool Coat costs 129.00 euros. Three are in stock in M.")


def test_structured_outputs(server, tmp_path):
    judge = judge_for(server, tmp_path)
    (j,) = judge.run_many(CLAIMS, [INPUT])
    judge.close()
    assert j.error is None and j.output == heuristic_answer(CLAIMS, INPUT)
    assert j.requests == 1 and j.prompt_tokens > 0 and j.completion_tokens > 0
    assert (j.task, j.rubric_version, j.backend, j.model) == ("claims", "1", "openai", "judge-1")
    assert server.counts["chat"] == 1


def test_json_mode_fallback(server, tmp_path):
    server.structured = False
    judge = judge_for(server, tmp_path, cache_mode="off")
    first, second = judge.run_many(CLAIMS, [INPUT, INPUT.model_copy(update={"answer": "Hi."})])
    third = judge.run_many(CLAIMS, [INPUT])[0]
    judge.close()
    assert first.output is not None and second.output is not None
    assert third.requests == 1, "after the first refusal, JSON mode is used directly"
    assert server.counts["chat"] <= 5


def test_429_then_success(server, tmp_path):
    server.fail_429 = 2
    judge = judge_for(server, tmp_path, cache_mode="off")
    (j,) = judge.run_many(CLAIMS, [INPUT])
    judge.close()
    assert j.error is None and j.requests == 3


def test_429_forever_is_an_error(server, tmp_path):
    server.fail_429 = 100
    judge = judge_for(server, tmp_path, cache_mode="off", max_retries=2)
    (j,) = judge.run_many(CLAIMS, [INPUT])
    judge.close()
    assert j.output is None and "RateLimitError" in j.error and j.requests == 3


def test_a_judge_that_is_down_is_told_apart_from_one_that_answers_wrongly(server, tmp_path):
    """`unavailable` (what the monitor retries later) is set when the endpoint was down — 429
    or 5xx after the retries, no connection — and not for an answer it refused (HTTP 401)
    or one that is no JSON; the record carries it only when set."""
    server.fail_429 = 100
    judge = judge_for(server, tmp_path, cache_mode="off", max_retries=0)
    (busy,) = judge.run_many(CLAIMS, [INPUT])
    server.fail_429, server.fail_500 = 0, 100
    (failing,) = judge.run_many(CLAIMS, [INPUT])
    server.fail_500, server.fail_401 = 0, 100
    (refused,) = judge.run_many(CLAIMS, [INPUT])
    server.fail_401, server.garbage = 0, 100
    (garbage,) = judge.run_many(CLAIMS, [INPUT])
    judge.close()
    assert busy.unavailable and failing.unavailable
    assert busy.record()["unavailable"] is True
    assert refused.error and not refused.unavailable
    assert garbage.error and not garbage.unavailable and "unavailable" not in garbage.record()
    closed = FakeOpenAI()
    port = closed.httpd.server_address[1]
    closed.httpd.server_close()  # nothing listens there
    config = JudgeConfig(backend="openai", model="judge-1", max_retries=0, cache_mode="off",
                         base_url=f"http://127.0.0.1:{port}/v1", embedding_model="e-1")
    down = OpenAIJudge(config)
    (j,) = down.run_many(CLAIMS, [INPUT])
    (vectors,) = down.embed_many([["a text"]])
    down.close()
    assert j.unavailable and "could not connect" in j.error
    assert vectors.unavailable and vectors.record()["unavailable"] is True


def test_timeout(server, tmp_path):
    server.hang_s = 1.5
    judge = judge_for(server, tmp_path, cache_mode="off", timeout_s=0.3, max_retries=1)
    (j,) = judge.run_many(CLAIMS, [INPUT])
    judge.close()
    assert j.output is None and "Timeout" in j.error and j.requests == 2


def test_garbage_is_reasked_once(server, tmp_path):
    server.garbage = 1
    judge = judge_for(server, tmp_path, cache_mode="off")
    (j,) = judge.run_many(CLAIMS, [INPUT])
    assert j.error is None and j.requests == 2
    server.garbage = 2
    (j,) = judge.run_many(CLAIMS, [INPUT])
    judge.close()
    assert j.output is None and j.requests == 2
    assert "unparsable judge answer after one re-ask" in j.error
    assert j.raw == "Sure! Here is my verdict: yes, mostly."


def test_embeddings(server, tmp_path):
    judge = judge_for(server, tmp_path, cache_mode="off")
    (emb,) = judge.embed_many([["navy coat", "navy wool coat", "washing linen"]])
    judge.close()
    assert emb.error is None and emb.vectors.shape[0] == 3 and emb.requests == 1
    sims = emb.vectors @ emb.vectors[0]
    assert sims[1] > sims[2]


def test_embeddings_in_base64_as_openai_sends_them(server, tmp_path):
    """The client asks for base64 (as the openai SDK does, a quarter of the bytes) and reads
    either that or JSON numbers: the same vectors, to float32 precision."""
    from evalharness.judge.heuristic import embed_texts

    texts = ["navy coat", "navy wool coat", "washing linen"]
    server.base64 = True
    judge = judge_for(server, tmp_path, cache_mode="off")
    (packed,) = judge.embed_many([texts])
    server.base64 = False
    (numbers,) = judge.embed_many([texts])
    judge.close()
    assert packed.error is None and numbers.error is None
    np.testing.assert_allclose(packed.vectors, embed_texts(texts), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(packed.vectors, numbers.vectors, rtol=1e-6, atol=1e-7)


def test_cache_makes_a_rerun_free(server, tmp_path):
    judge = judge_for(server, tmp_path)
    inputs = [ClaimSupportInput(context="The coat costs 129 euros.", claims=["It costs 129."])]
    first = judge.run_many(CLAIM_SUPPORT, inputs)
    judge.embed_many([["a", "b"]])
    before = dict(server.counts)
    again = judge.run_many(CLAIM_SUPPORT, inputs)
    (emb,) = judge.embed_many([["a", "b"]])
    judge.close()
    assert dict(server.counts) == before
    assert again[0].cached and again[0].requests == 0 and again[0].output == first[0].output
    assert emb.cached
    assert len(JudgeCache(tmp_path / "cache.sqlite")) == 3  # a judgment and two texts


def test_refresh_cache_asks_again(server, tmp_path):
    judge_for(server, tmp_path).run_many(CLAIMS, [INPUT])
    judge = judge_for(server, tmp_path, cache_mode="refresh")
    (j,) = judge.run_many(CLAIMS, [INPUT])
    judge.close()
    assert not j.cached and server.counts["chat"] == 2


def test_concurrency_is_bounded(server, tmp_path):
    server.latency_s = 0.05
    judge = judge_for(server, tmp_path, cache_mode="off", concurrency=3)
    inputs = [INPUT.model_copy(update={"answer": f"Claim number {i} is here."})
              for i in range(12)]
    judgments = judge.run_many(CLAIMS, inputs)
    judge.close()
    assert all(j.output is not None for j in judgments)
    assert server.max_in_flight["chat"] == 3


# -- through the CLI ---------------------------------------------------------------------------

CASES = [
    {"id": "a", "question": "How much is the navy coat?",
     "gold": {"answer": "The navy coat costs 129 euros."}},
    {"id": "b", "question": "How do I wash wool?",
     "gold": {"answer": "Hand wash wool at 30 degrees."}},
]
TRACES = [
    {"case_id": "a", "generator": {"answer": "The navy coat costs 129 euros. It is warm.",
                                   "contexts": ["name: Navy Coat, price: 129"]}},
    {"case_id": "b", "generator": {"answer": "Hand wash wool at 30 degrees.",
                                   "contexts": ["Wool: hand wash at 30 degrees, dry flat."]}},
]


def judged_scenario(tmp_path, base_url):
    write_jsonl(tmp_path / "cases.jsonl", CASES)
    write_jsonl(tmp_path / "traces.jsonl", TRACES)
    return write(tmp_path / "j.yaml", f"""
        name: judged
        cases: cases.jsonl
        traces: traces.jsonl
        pipeline: {{generator: {{}}}}
        judge: {{backend: openai, model: judge-1, base_url: "{base_url}", cache: cache.sqlite,
                 max_retries: 1, timeout_s: 5}}
        evaluators:
          generator: [faithfulness, answer_relevancy, answer_correctness, numeric_consistency]
    """)


def test_scenario_with_the_openai_judge_then_a_free_rerun(server, tmp_path):
    scenario = judged_scenario(tmp_path, server.base_url)
    env = {"OPENAI_API_KEY": SECRET}
    res = run_cli("scenario", scenario, "--out", tmp_path / "one", env=env)
    assert res.code == 0, res
    report = json.loads((tmp_path / "one" / "report.json").read_text())
    gen = report["components"]["generator"]
    # The fake server answers with the heuristic judge: the same metrics, the same values.
    offline = run_cli("scenario", scenario, "--out", tmp_path / "offline", "--judge",
                      "heuristic")
    assert offline.code == 0, offline
    heuristic = json.loads((tmp_path / "offline" / "report.json").read_text())
    for metric, summary in heuristic["components"]["generator"]["metrics"].items():
        assert gen["metrics"][metric]["mean"] == pytest.approx(summary["mean"]), metric
        assert gen["metrics"][metric]["n"] == summary["n"] == 2, metric
    assert heuristic["judge"]["usage"]["requests"] == 0
    assert gen["metrics"]["faithfulness"]["judge"]["requests"] == 4  # 2 per case
    # 1 chat request per case, and the embeddings of both cases in one request
    assert gen["metrics"]["answer_relevancy"]["judge"]["requests"] == 3
    assert report["judge"]["backend"] == "openai" and report["judge"]["llm"] is True
    first_requests = sum(server.counts.values())
    assert report["judge"]["usage"]["requests"] == first_requests
    assert all(h == f"Bearer {SECRET}" for h in server.auth_headers)
    res = run_cli("scenario", scenario, "--out", tmp_path / "two", env=env)
    assert res.code == 0, res
    assert sum(server.counts.values()) == first_requests, "the rerun sent no request"
    again = json.loads((tmp_path / "two" / "report.json").read_text())
    assert again["judge"]["usage"]["requests"] == 0
    assert again["judge"]["usage"]["cache_hits"] == report["judge"]["usage"]["judgments"]
    assert again["components"]["generator"]["metrics"] == {
        m: {**s, "judge": again["components"]["generator"]["metrics"][m]["judge"]}
        for m, s in report["components"]["generator"]["metrics"].items()}
    for path in [*(tmp_path / "one").iterdir(), *(tmp_path / "two").iterdir(),
                 tmp_path / "cache.sqlite"]:
        assert SECRET not in path.read_bytes().decode("utf-8", "replace"), path
    assert SECRET not in res.out + res.err


def test_server_down_every_case_records_an_error(tmp_path):
    with FakeOpenAI() as s:
        url = s.base_url
    scenario = judged_scenario(tmp_path, url)
    res = run_cli("scenario", scenario, "--out", tmp_path / "o", "--no-cache",
                  env={"OPENAI_API_KEY": SECRET})
    assert res.code == 3, res  # the run could not do its work (docs/ci.md, "Exit codes")
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert "could not connect to" in report["infrastructure"][0]
    metrics = report["components"]["generator"]["metrics"]
    assert metrics["faithfulness"]["errors"] == 2 and metrics["faithfulness"]["mean"] is None
    reason = next(iter(metrics["faithfulness"]["error_reasons"]))
    assert f"APIConnectionError: could not connect to {url}/chat/completions" in reason
    assert SECRET not in (tmp_path / "o" / "report.json").read_text()
    assert metrics["numeric_consistency"]["n"] == 2, "unjudged metrics are unaffected"
    assert report["judge"]["usage"]["errors"] >= 2


def test_openai_backend_needs_a_model(tmp_path):
    scenario = judged_scenario(tmp_path, "http://127.0.0.1:9/v1")
    scenario.write_text(scenario.read_text().replace("model: judge-1, ", ""))
    res = run_cli("scenario", scenario, "--out", tmp_path / "o")
    assert res.code == 2 and "needs `judge.model`" in res.err
    assert not (tmp_path / "o").exists()


def test_cache_options_through_the_cli(server, tmp_path):
    scenario = judged_scenario(tmp_path, server.base_url)
    env = {"OPENAI_API_KEY": SECRET}
    res = run_cli("scenario", scenario, "--no-cache", "--refresh-cache", env=env)
    assert res.code == 2 and "exclude each other" in res.err
    assert run_cli("scenario", scenario, "--out", tmp_path / "a", "-q", env=env).code == 0
    sent = sum(server.counts.values())
    assert run_cli("scenario", scenario, "--out", tmp_path / "b", "-q", "--refresh-cache",
                   "--judge-concurrency", "2", env=env).code == 0
    refreshed = sum(server.counts.values()) - sent
    report = json.loads((tmp_path / "b" / "report.json").read_text())
    assert not any(r["cached"] for r in stored_records(tmp_path / "b")), \
        "--refresh-cache reads nothing"
    assert refreshed == report["judge"]["usage"]["requests"] > 0
    assert server.max_in_flight["chat"] <= 8
    assert run_cli("scenario", scenario, "--out", tmp_path / "c", "-q", "--no-cache",
                   env=env).code == 0
    report = json.loads((tmp_path / "c" / "report.json").read_text())
    assert not any(r["cached"] for r in stored_records(tmp_path / "c")), "--no-cache reads nothing"
    assert sum(server.counts.values()) - sent - refreshed == report["judge"]["usage"]["requests"]


def stored_records(out) -> list[dict]:
    """Every judgment record stored in a run's results.jsonl."""
    lines = (out / "results.jsonl").read_text().splitlines()
    return [r for line in lines for comp in json.loads(line)["components"].values()
            for value in comp.get("metrics", {}).values()
            for r in value.get("details", {}).get("judgments", [])]


def test_shop_scenario_with_the_openai_backend_gives_the_offline_numbers(server, tmp_path):
    """The shop scenario, judged through the openai backend against the fake server."""
    from conftest import SHOP, shop_text_elsewhere

    text = shop_text_elsewhere()
    assert "backend: heuristic" in text
    text = text.replace("backend: heuristic", f"backend: openai\n  model: fake-judge\n"
                        f"  base_url: {server.base_url}\n  cache: {tmp_path / 'c.sqlite'}")
    scenario = write(tmp_path / "shop-openai.yaml", text)
    res = run_cli("scenario", scenario, "--out", tmp_path / "online", "-q",
                  env={"OPENAI_API_KEY": SECRET})
    assert res.code == 0, res
    offline = run_cli("scenario", SHOP, "--out", tmp_path / "offline", "-q")
    assert offline.code == 0, offline
    online = json.loads((tmp_path / "online" / "report.json").read_text())
    local = json.loads((tmp_path / "offline" / "report.json").read_text())
    for metric in ("faithfulness", "answer_relevancy", "correctness_f1"):
        a = online["components"]["generator"]["metrics"][metric]
        b = local["components"]["generator"]["metrics"][metric]
        assert a["mean"] == pytest.approx(b["mean"]) and a["n"] == b["n"] > 0, metric
    # every request is accounted for: the run's, then the oracle reruns' (headroom)
    reruns = online["judge"]["headroom_usage"]["requests"]
    assert reruns > 0
    assert online["judge"]["usage"]["requests"] + reruns == sum(server.counts.values())
    assert online["judge"]["usage"]["errors"] == 0


# -- odd HTTP answers: one judgment's error, never the batch's (issue 10) ----------------------

BATCH = [INPUT.model_copy(update={"answer": f"The coat number {i} costs {i} euros."})
         for i in range(8)]


@pytest.mark.parametrize(("fault", "says"), [
    ("html", "the endpoint answered HTTP 200 with a text/html body, not JSON: '<html>"),
    ("empty", "the endpoint answered HTTP 200 with an empty body, not JSON"),
])
def test_an_odd_http_200_fails_one_judgment_not_the_batch(server, tmp_path, fault, says):
    setattr(server, fault, 1)
    judge = judge_for(server, tmp_path, cache_mode="off", max_retries=0)
    judgments = judge.run_many(CLAIMS, BATCH)
    judge.close()
    errors = [j for j in judgments if j.output is None]
    assert len(errors) == 1 and says in errors[0].error, [j.error for j in errors]
    assert "check `judge.base_url`" in errors[0].error
    assert sum(j.requests for j in judgments) == server.counts["chat"] == len(BATCH)


@pytest.mark.parametrize("fault", ["html", "empty"])
def test_an_odd_http_200_is_retried_like_a_5xx(server, tmp_path, fault):
    setattr(server, fault, 1)
    judge = judge_for(server, tmp_path, cache_mode="off", max_retries=1)
    (j,) = judge.run_many(CLAIMS, [INPUT])
    setattr(server, fault, 1)
    (emb,) = judge.embed_many([["navy coat", "wool"]])
    judge.close()
    assert j.error is None and j.requests == 2
    assert emb.error is None and emb.requests == 2 and emb.vectors.shape[0] == 2


def test_an_odd_http_200_on_embeddings_is_an_error(server, tmp_path):
    server.html = 1
    judge = judge_for(server, tmp_path, cache_mode="off", max_retries=0)
    (emb,) = judge.embed_many([["navy coat"]])
    judge.close()
    assert emb.vectors is None and "text/html body, not JSON" in emb.error


# -- embeddings: batched across groups, cached per text (issue 10) -----------------------------


def test_embeddings_are_batched_across_groups(server, tmp_path):
    from evalharness.judge.heuristic import embed_texts

    groups = [[f"question {g}", f"generated {g} a", f"generated {g} b"] for g in range(6)]
    judge = judge_for(server, tmp_path, cache_mode="off", embedding_batch_size=8)
    results = judge.embed_many(groups)
    judge.close()
    assert server.counts["embeddings"] == 3  # 18 texts in requests of at most 8
    assert sum(e.requests for e in results) == 3
    assert [e.requests for e in results][0] == 1, "a request is accounted on its first group"
    for group, emb in zip(groups, results, strict=True):
        assert emb.error is None
        np.testing.assert_allclose(emb.vectors, embed_texts(group))
    tokens = sum(e.prompt_tokens for e in results)
    assert tokens == sum(len(t.split()) for g in groups for t in g)


def test_embeddings_are_cached_per_text(server, tmp_path):
    judge = judge_for(server, tmp_path)
    judge.embed_many([["a coat", "a scarf"]])
    second, third = judge.embed_many([["a scarf", "a hat"], ["a coat"]])
    judge.close()
    assert server.counts["embeddings"] == 2
    assert second.requests == 1 and not second.cached and second.cached_texts == 1
    assert third.cached and third.requests == 0


def test_answer_relevancy_costs_one_embeddings_request_for_a_batch(server, tmp_path):
    from evalharness.context import EvalContext
    from evalharness.models import Case, GeneratorStep
    from evalharness_generation import evaluate_generator
    from evalharness_generation.judged import RelevancySettings

    batch = [(Case(id=f"c{i}", question=f"How much is coat {i}?"),
              GeneratorStep(answer=f"Coat {i} costs {100 + i} euros. It is navy."))
             for i in range(10)]
    judge = judge_for(server, tmp_path, cache_mode="off")
    rows = evaluate_generator("answer_relevancy", batch, RelevancySettings(),
                              EvalContext(judge=judge))
    judge.close()
    assert all(r["answer_relevancy"].error is None for r in rows)
    assert dict(server.counts) == {"chat": 10, "embeddings": 1}


# -- embeddings that are not usable (issue 10) --------------------------------------------------


def test_nan_embeddings_are_an_error_and_never_cached(server, tmp_path):
    server.nan_embeddings = 1
    judge = judge_for(server, tmp_path)
    (bad,) = judge.embed_many([["navy coat", "wool"]])
    (good,) = judge.embed_many([["navy coat", "wool"]])
    judge.close()
    assert bad.vectors is None and "not finite" in bad.error and bad.requests == 1
    assert good.error is None and not good.cached, "the failure was not cached: asked again"
    assert server.counts["embeddings"] == 2


def test_embeddings_of_different_lengths_are_an_error(server, tmp_path):
    server.ragged_embeddings = 1
    judge = judge_for(server, tmp_path, cache_mode="off")
    (bad,) = judge.embed_many([["navy coat", "wool"]])
    judge.close()
    assert bad.vectors is None and "different lengths" in bad.error


def test_a_zero_embedding_fails_answer_relevancy_over_http(server, tmp_path):
    from evalharness.context import EvalContext
    from evalharness.models import Case, GeneratorStep
    from evalharness_generation import evaluate_generator
    from evalharness_generation.judged import RelevancySettings

    server.zero_embeddings = 1
    judge = judge_for(server, tmp_path)
    batch = [(Case(id="c", question="How much?"), GeneratorStep(answer="It costs 129 euros."))]
    (row,) = evaluate_generator("answer_relevancy", batch, RelevancySettings(),
                                EvalContext(judge=judge))
    (again,) = evaluate_generator("answer_relevancy", batch, RelevancySettings(),
                                  EvalContext(judge=judge))
    judge.close()
    assert row["answer_relevancy"].value is None
    assert "is a zero vector" in row["answer_relevancy"].error
    assert again["answer_relevancy"].error is None, "zero vectors are not cached either"


# -- secrets (issue 10) -----------------------------------------------------------------------


def test_a_401_echoing_the_key_is_redacted(server, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    server.fail_401 = 2
    judge = judge_for(server, tmp_path, cache_mode="off")
    (j,) = judge.run_many(CLAIMS, [INPUT])
    (emb,) = judge.embed_many([["coat"]])
    judge.close()
    assert server.auth_headers == [f"Bearer {SECRET}"] * 2
    for error in (j.error, emb.error):
        assert "AuthenticationError (HTTP 401)" in error and "***" in error
        assert SECRET not in error and "DO-NOT-LEAK" not in error
    assert SECRET not in json.dumps(j.record()) + json.dumps(emb.record())


@pytest.mark.parametrize(("env", "kw", "expect"), [
    ({"OPENAI_API_KEY": SECRET}, {"base_url": "http://127.0.0.1:8000/v1"},
     ["$OPENAI_API_KEY is sent to 127.0.0.1"]),
    ({"OPENAI_API_KEY": SECRET}, {"base_url": "https://proxy.example.com/v1"},
     ["$OPENAI_API_KEY is sent to proxy.example.com"]),
    ({"OPENAI_API_KEY": SECRET}, {"embedding_base_url": "https://emb.example.com/v1"},
     ["$OPENAI_API_KEY is sent to emb.example.com"]),
    ({"MY_KEY": SECRET}, {"base_url": "http://10.1.2.3:8000/v1", "api_key_env": "MY_KEY"},
     ["over plain http to 10.1.2.3"]),
    ({"OPENAI_API_KEY": SECRET}, {"base_url": "http://gpu-box:8000/v1"},
     ["$OPENAI_API_KEY is sent to gpu-box", "over plain http to gpu-box"]),
    ({"OPENAI_API_KEY": SECRET}, {}, []),
    ({"OPENAI_API_KEY": SECRET}, {"base_url": "https://api.openai.com/v1"}, []),
    ({"MY_KEY": SECRET}, {"base_url": "https://x.openai.azure.com/openai/v1",
                          "api_key_env": "MY_KEY"}, []),
    ({"MY_KEY": SECRET}, {"base_url": "http://localhost:8000/v1", "api_key_env": "MY_KEY"}, []),
    ({}, {"base_url": "http://10.1.2.3:8000/v1"}, []),
])
def test_warnings_say_where_a_key_goes(monkeypatch, env, kw, expect):
    for name in ("OPENAI_API_KEY", "MY_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    judge = OpenAIJudge(JudgeConfig(backend="openai", model="m", **kw))
    assert len(judge.warnings) == len(expect), judge.warnings
    for warning, text in zip(judge.warnings, expect, strict=True):
        assert text in warning and SECRET not in warning


# -- the canned mode and the server's clock (issue 10) ------------------------------------------


def test_canned_answers_fit_every_task_and_count_claims(tmp_path):
    from evalharness.judge import (
        CHUNK_USEFULNESS,
        QUESTIONS,
        ChunkUsefulnessInput,
        QuestionsInput,
    )

    with FakeOpenAI(canned=True) as server:
        judge = judge_for(server, tmp_path, cache_mode="off")
        (claims,) = judge.run_many(CLAIMS, [INPUT])
        (support,) = judge.run_many(CLAIM_SUPPORT, [ClaimSupportInput(
            context="c", claims=["one", "two", "three"])])
        (questions,) = judge.run_many(QUESTIONS, [QuestionsInput(answer="a", n=3)])
        (chunks,) = judge.run_many(CHUNK_USEFULNESS, [ChunkUsefulnessInput(
            question="q", answer="a", chunks=["x", "y"])])
        (emb,) = judge.embed_many([["a", "b"]])
        judge.close()
        stats = server.stats(reset=True)
        after = server.stats()
    assert len(claims.output.claims) == 1
    assert [v.supported for v in support.output.verdicts] == [True, True, True]
    assert len(questions.output.questions) == 1 and len(chunks.output.verdicts) == 2
    assert emb.vectors.shape == (2, 8)
    assert stats["counts"] == {"chat": 4, "embeddings": 1}
    assert stats["first_request_at"] <= stats["last_response_at"]
    assert stats["max_in_flight"] == {"chat": 1, "embeddings": 1}
    assert after["counts"] == {} and after["first_request_at"] is None


def test_stats_over_http(server):
    import urllib.request

    with urllib.request.urlopen(f"{server.base_url}/stats") as response:
        stats = json.load(response)
    assert stats["first_request_at"] is None and stats["counts"] == {}


# -- what an endpoint accepts: structured outputs, JSON mode, or JSON asked for in the prompt --


def test_a_500_to_structured_outputs_falls_back_to_json_mode(server, tmp_path):
    """llama-cpp-python's server answers response_format json_schema with HTTP 500: once
    again (it may be a passing failure), then JSON mode — which works — for good."""
    server.structured, server.schema_refusal = False, 500
    judge = judge_for(server, tmp_path, cache_mode="off", max_retries=4)
    (first,) = judge.run_many(CLAIMS, [INPUT])
    (second,) = judge.run_many(CLAIMS, [INPUT.model_copy(update={"answer": "Hi there."})])
    judge.close()
    assert first.error is None and first.output == heuristic_answer(CLAIMS, INPUT)
    assert first.requests == 3  # json_schema, json_schema again, json_object
    assert second.error is None and second.requests == 1
    assert server.formats == {"json_schema": 2, "json_object": 2}
    assert any("json_object" in w and "HTTP 500" in w for w in judge.warnings), judge.warnings


def test_prompted_json_when_json_mode_is_refused_too(server, tmp_path):
    server.structured, server.json_mode = False, False
    judge = judge_for(server, tmp_path, cache_mode="off")
    (first,) = judge.run_many(CLAIMS, [INPUT])
    (second,) = judge.run_many(CLAIMS, [INPUT.model_copy(update={"answer": "Hi there."})])
    judge.close()
    assert first.error is None and first.output == heuristic_answer(CLAIMS, INPUT)
    assert second.requests == 1
    assert server.formats == {"json_schema": 1, "json_object": 1, "none": 2}


def test_a_passing_500_does_not_give_up_structured_outputs(server, tmp_path):
    server.fail_500 = 1
    judge = judge_for(server, tmp_path, cache_mode="off")
    (j,) = judge.run_many(CLAIMS, [INPUT])
    judge.close()
    assert j.error is None and j.requests == 2
    assert server.formats == {"json_schema": 1}  # the 500 came before the format was read
    assert not judge.warnings


def test_a_server_failing_on_every_format_is_retried_as_before(server, tmp_path):
    server.fail_500 = 100
    judge = judge_for(server, tmp_path, cache_mode="off", max_retries=2)
    (j,) = judge.run_many(CLAIMS, [INPUT])
    judge.close()
    assert j.output is None and "HTTP 500" in j.error
    assert not judge.warnings, "a failing server is no reason to ask in another format"


def test_what_an_endpoint_accepts_is_remembered_across_runs(server, tmp_path):
    server.structured = False
    first = judge_for(server, tmp_path)
    assert first.run_many(CLAIMS, [INPUT])[0].error is None
    first.close()
    server.formats.clear()
    again = judge_for(server, tmp_path)  # a later run: same cache file, same endpoint and model
    (j,) = again.run_many(CLAIMS, [INPUT.model_copy(update={"answer": "Hi there."})])
    again.close()
    assert j.error is None and j.requests == 1
    assert server.formats == {"json_object": 1}
    assert any("remembered" in w for w in again.warnings), again.warnings
    other = judge_for(server, tmp_path, model="judge-2")  # another model: asked afresh
    other.run_many(CLAIMS, [INPUT])
    other.close()
    assert server.formats["json_schema"] == 1
    refreshed = judge_for(server, tmp_path, cache_mode="refresh")  # --refresh-cache forgets
    server.formats.clear()
    refreshed.run_many(CLAIMS, [INPUT.model_copy(update={"answer": "Bye."})])
    refreshed.close()
    assert server.formats["json_schema"] == 1


def test_max_tokens_is_sent_is_in_the_cache_key_and_a_cut_answer_says_so(server, tmp_path):
    judge = judge_for(server, tmp_path, max_tokens=3)
    (j,) = judge.run_many(CLAIMS, [INPUT])
    plain = judge_for(server, tmp_path)
    assert judge.key(CLAIMS, INPUT) != plain.key(CLAIMS, INPUT)
    judge.close()
    plain.close()
    assert j.output is None and j.requests == 2 and j.completion_tokens == 6
    assert "cut at its token limit (judge.max_tokens = 3; finish_reason: length)" in j.error
