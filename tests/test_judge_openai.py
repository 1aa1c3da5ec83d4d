"""The openai judge backend with the real openai SDK over real HTTP, against the fake server."""

from __future__ import annotations

import json

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
    config = JudgeConfig(backend="openai", model="judge-1", base_url=server.base_url,
                         cache=str(tmp_path / "cache.sqlite"), **kw)
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
    assert len(JudgeCache(tmp_path / "cache.sqlite")) == 2


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
    assert gen["metrics"]["answer_relevancy"]["judge"]["requests"] == 4  # 1 chat + 1 emb
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
    assert res.code == 0, res
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    metrics = report["components"]["generator"]["metrics"]
    assert metrics["faithfulness"]["errors"] == 2 and metrics["faithfulness"]["mean"] is None
    assert "APIConnectionError" in next(iter(metrics["faithfulness"]["error_reasons"]))
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
    assert report["judge"]["usage"]["cache_hits"] == 0, "--refresh-cache reads nothing"
    assert refreshed == report["judge"]["usage"]["requests"] >= sent
    assert server.max_in_flight["chat"] <= 8
    assert run_cli("scenario", scenario, "--out", tmp_path / "c", "-q", "--no-cache",
                   env=env).code == 0
    assert sum(server.counts.values()) == sent + 2 * refreshed, "--no-cache reads nothing"


def test_shop_scenario_with_the_openai_backend_gives_the_offline_numbers(server, tmp_path):
    """The shop scenario, judged through the openai backend against the fake server."""
    from conftest import SHOP

    text = SHOP.read_text()
    text = text.replace("shop/", f"{SHOP.parent}/shop/")
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
