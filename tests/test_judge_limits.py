"""What a judge may spend (``judge.requests_per_minute``, ``tokens_per_minute``, ``max_cost``;
:mod:`evalharness.judge.limits`): the sliding windows against hand-computed delays on a fake
clock, the OpenAI backend against the fake server under those limits, and the cost ceiling
through a scenario — refused judgments are errors that say why, and a rerun with a higher
ceiling asks only for what was refused."""

from __future__ import annotations

import asyncio
import json

import pytest

from conftest import run_cli, write, write_jsonl
from evalharness.judge import CLAIMS, ClaimsInput, JudgeConfig
from evalharness.judge.base import Price, judge_usage
from evalharness.judge.limits import CeilingReached, Limits, Window
from evalharness.judge.openai_compat import OpenAIJudge
from evalharness.testing.fake_openai import FakeOpenAI


class Clock:
    """A clock that only moves when someone sleeps on it."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


def inputs(n: int) -> list[ClaimsInput]:
    return [ClaimsInput(question=f"q{i}", answer=f"The coat number {i} costs {i} euros.")
            for i in range(n)]


# -- the windows, by hand ------------------------------------------------------------------------


def test_window_delay_is_when_enough_old_entries_leave():
    clock = Clock()
    w = Window(limit=10, clock=clock)
    w.take(4)          # t=0
    clock.now = 20
    w.take(5)          # t=20, 9 used
    assert w.delay(1) == 0.0
    # 6 more needs 5 freed: the t=0 entry (4) is not enough, t=20's too -> at t=80
    assert w.delay(6) == pytest.approx(60.0)
    assert w.delay(2) == pytest.approx(40.0)  # the t=0 entry leaves at 60
    clock.now = 60
    assert w.delay(2) == 0.0 and w.used == 5
    big = Window(limit=10, clock=clock)
    assert big.delay(50) == 0.0, "a request above the whole limit goes when the window is empty"
    entry = big.take(50)
    assert big.delay(1) == pytest.approx(60.0)
    big.settle(entry, 3)   # the answer used less than reserved
    assert big.used == 3 and big.delay(7) == 0.0


def test_requests_per_minute_spaces_requests_in_order():
    clock = Clock()
    limits = Limits(requests_per_minute=3, clock=clock, sleep=clock.sleep)

    async def main():
        times = []
        for _ in range(7):
            permit = await limits.permit("m", 10)
            times.append(clock.now)
            permit.settle(1, 10, 0)
        return times

    assert asyncio.run(main()) == [0, 0, 0, 60, 60, 60, 120]
    assert limits.waited_s == pytest.approx(120)


def test_tokens_per_minute_counts_the_reported_usage_not_the_estimate():
    clock = Clock()
    limits = Limits(tokens_per_minute=1000, clock=clock, sleep=clock.sleep)

    async def main():
        first = await limits.permit("m", 900)     # reserves 900
        assert limits._window("m", "tokens", 1000).delay(200) == pytest.approx(60)
        first.settle(1, 100, 0)                   # the answer says it used 100
        second = await limits.permit("m", 800)    # fits at once now: 100 + 800
        return clock.now, second

    now, _ = asyncio.run(main())
    assert now == 0


def test_estimates_grow_to_the_largest_answer_the_model_gave():
    limits = Limits(tokens_per_minute=10**6)
    assert limits.estimate("m", 300, chat=True) == (100, 256)     # before any answer
    assert limits.estimate("e", 300, chat=False) == (100, 0)

    async def main():
        for chars, prompt, completion in ((400, 100, 30), (100, 50, 10)):
            permit = await limits.permit("m", 1, chars=chars)
            permit.settle(1, prompt, completion)

    asyncio.run(main())
    # 0.5 tokens per character (the larger ratio), 30 completion tokens (the larger answer)
    assert limits.estimate("m", 300, chat=True) == (150, 30)
    assert limits.estimate("other", 300, chat=True) == (100, 256)


def test_the_ceiling_reserves_requests_in_flight_and_refuses_past_it():
    limits = Limits(max_cost=1.0, prices={"m": Price(input=100_000.0, output=0.0)})
    # each request: 3 prompt tokens at 0.1 per token = 0.3
    async def main():
        held = [await limits.permit("m", 3) for _ in range(3)]   # 0.9 reserved
        with pytest.raises(CeilingReached, match=r"judge.max_cost = 1 reached"):
            await limits.permit("m", 3)                          # 1.2 > 1.0
        for p in held:
            p.settle(1, 3, 0)
        with pytest.raises(CeilingReached):  # once refused, the rest are refused too
            await limits.permit("m", 1)
        return limits.summary()

    summary = asyncio.run(main())
    assert summary == {"spent": pytest.approx(0.9), "waited_s": 0.0, "max_cost": 1.0,
                       "refused": 2}
    assert limits.missing_prices(["m", "emb"]) == ["emb"]


# -- the openai backend under the limits -----------------------------------------------------------


def test_openai_judge_requests_wait_for_the_per_minute_limit():
    clock = Clock()
    with FakeOpenAI() as server:
        judge = OpenAIJudge(JudgeConfig(backend="openai", model="j", base_url=server.base_url,
                                        cache_mode="off", requests_per_minute=4,
                                        concurrency=8))
        judge._limits = Limits(requests_per_minute=4, clock=clock, sleep=clock.sleep)
        sent = []
        complete = judge.complete

        async def timed(task, inp, key):
            sent.append(clock.now)
            return await complete(task, inp, key)

        judge.complete = timed
        out = judge.run_many(CLAIMS, inputs(10))
        judge.close()
    assert all(j.output is not None for j in out) and server.counts["chat"] == 10
    assert sorted(sent) == [0] * 4 + [60] * 4 + [120] * 2


def test_openai_judge_stops_at_the_ceiling_without_overshooting():
    with FakeOpenAI(latency_s=0.02) as server:
        probe = OpenAIJudge(JudgeConfig(backend="openai", model="j", base_url=server.base_url,
                                        cache_mode="off"))
        one = probe.run_many(CLAIMS, inputs(1))[0]
        probe.close()
        per_request = one.prompt_tokens + one.completion_tokens
        each = Price(input=1e6 / per_request, output=1e6 / per_request)  # ~1 a request
        prices = {"j": each, "e": each}
        judge = OpenAIJudge(JudgeConfig(backend="openai", model="j", embedding_model="e",
                                        base_url=server.base_url,
                                        cache_mode="off", concurrency=8, max_cost=4.5,
                                        prices=prices))
        judge.check_limits()
        out = judge.run_many(CLAIMS, inputs(12))
        summary = judge.limits.summary()
        judge.close()
    usage = judge_usage([j.record() for j in out], prices)
    refused = [j for j in out if j.refused]
    assert usage["cost"] <= 4.5 + 1e-9, "eight requests in flight at once did not overshoot"
    assert 0 < len(refused) < 12 and usage["refused"] == len(refused)
    assert server.counts["chat"] == 1 + 12 - len(refused)
    assert all(j.error.startswith("not requested: judge.max_cost = 4.5 reached") and
               j.requests == 0 for j in refused)
    assert summary["spent"] == pytest.approx(usage["cost"])


# -- through a scenario ----------------------------------------------------------------------------

CASES = [{"id": f"g{i}", "question": f"How much is coat {i}?",
          "gold": {"answer": f"Coat {i} costs {10 + i} euros."}} for i in range(6)]
TRACES = [{"case_id": f"g{i}", "generator": {
    "answer": f"Coat {i} costs {10 + i} euros.",
    "contexts": [f"Coat {i}: {10 + i} euros, wool."]}} for i in range(6)]


def ceiling_scenario(tmp_path, base_url: str, max_cost: float | None, price: str = "j-1"):
    write_jsonl(tmp_path / "cases.jsonl", CASES)
    write_jsonl(tmp_path / "traces.jsonl", TRACES)
    ceiling = f", max_cost: {max_cost}" if max_cost is not None else ""
    return write(tmp_path / "c.yaml", f"""
        name: ceiling
        cases: cases.jsonl
        traces: traces.jsonl
        pipeline: {{generator: {{}}}}
        judge: {{backend: openai, model: j-1, embedding_model: e-1, base_url: "{base_url}",
                 cache: cache.sqlite, max_retries: 0, concurrency: 1,
                 prices: {{{price}: {{input: 1000, output: 1000}}, e-1: {{input: 1, output: 0}}}}
                 {ceiling}}}
        evaluators:
          generator: [faithfulness]
    """)


def test_a_run_past_its_ceiling_completes_says_so_and_a_rerun_asks_only_for_the_rest(tmp_path):
    env = {"OPENAI_API_KEY": "sk-test"}
    with FakeOpenAI() as server:
        free = ceiling_scenario(tmp_path, server.base_url, None)
        assert run_cli("scenario", free, "--out", tmp_path / "probe", "--no-cache",
                       env=env).code in (0, 1)
        full = json.loads((tmp_path / "probe" / "report.json").read_text())["judge"]["usage"]
        server.counts.clear()
        ceiling = round(full["cost"] / 2, 6)
        scenario = ceiling_scenario(tmp_path, server.base_url, ceiling)
        res = run_cli("scenario", scenario, "--out", tmp_path / "one", env=env)
        assert res.code in (0, 1), res
        usage = json.loads((tmp_path / "one" / "report.json").read_text())["judge"]["usage"]
        first = sum(server.counts.values())
        assert usage["cost"] <= ceiling and usage["refused"] > 0
        assert "not requested: judge.max_cost was reached" in " ".join(res.out.split())
        assert "not requested" in (tmp_path / "one" / "report.md").read_text()
        lines = [json.loads(x) for x in (tmp_path / "one" / "results.jsonl").read_text()
                 .splitlines()]
        errors = [v["error"] for r in lines
                  for v in r["components"]["generator"]["metrics"].values() if v.get("error")]
        assert errors and all("judge.max_cost" in e for e in errors)
        # raise the ceiling: what was paid for comes from the cache, the rest is asked
        scenario = ceiling_scenario(tmp_path, server.base_url, full["cost"] * 2)
        res = run_cli("scenario", scenario, "--out", tmp_path / "two", env=env)
        again = json.loads((tmp_path / "two" / "report.json").read_text())["judge"]["usage"]
        assert "refused" not in again and again["errors"] == 0
        assert sum(server.counts.values()) - first == again["requests"] == \
            full["requests"] - usage["requests"]


def test_a_ceiling_needs_a_price_for_every_model(tmp_path):
    scenario = ceiling_scenario(tmp_path, "http://127.0.0.1:9/v1", 1.0, price="other")
    res = run_cli("scenario", scenario, "--out", tmp_path / "o", env={"OPENAI_API_KEY": "k"})
    assert res.code == 2
    assert "judge" in res.err and "max_cost needs a price" in res.err and "'j-1'" in res.err
    assert not (tmp_path / "o" / "results.jsonl").exists()


def test_limits_on_the_heuristic_judge_are_said_to_do_nothing(tmp_path):
    write_jsonl(tmp_path / "cases.jsonl", CASES[:2])
    write_jsonl(tmp_path / "traces.jsonl", TRACES[:2])
    scenario = write(tmp_path / "h.yaml", """
        name: h
        cases: cases.jsonl
        traces: traces.jsonl
        pipeline: {generator: {}}
        judge: {backend: heuristic, requests_per_minute: 10}
        evaluators:
          generator: [faithfulness]
    """)
    res = run_cli("scenario", scenario, "--out", tmp_path / "o")
    assert res.code in (0, 1) and "have no effect" in res.err


def test_a_resumed_run_counts_what_its_earlier_part_spent(tmp_path, monkeypatch):
    """The ceiling is the run's, not the invocation's: a resume starts from the cost of the
    judgments its earlier part recorded."""
    import evalharness
    from evalharness.scenario import load_scenario

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeOpenAI() as server:
        path = ceiling_scenario(tmp_path, server.base_url, 1e9)
        out = tmp_path / "run"
        full = evalharness.run_scenario(path, out=out, cache="off", headroom=False)
        cost = full.judge["usage"]["cost"]
        lines = (out / "results.jsonl").read_text().splitlines(keepends=True)
        (out / "results.jsonl").write_text("".join(lines[:3]))  # as if stopped half-way
        (out / "report.json").unlink()

        def resume(ceiling: float):
            scenario = load_scenario(path, judge_overrides={"max_cost": ceiling,
                                                            "cache_mode": "off"})
            return evalharness.run_scenario(scenario, out=out, resume=True, headroom=False)

        # the second half alone costs about half: under 0.8 of the whole it would all fit
        report = resume(round(cost * 0.8, 6))
    usage = report.judge["usage"]
    assert usage["refused"] > 0 and usage["cost"] <= cost * 0.8
