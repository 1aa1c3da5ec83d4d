"""Judge accounting: record ids, the ledger, single flight, a backend that raises, redaction,
and the shop's judged metrics counted against the fake server's own request count."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from conftest import SHOP
from evalharness.judge import (
    CLAIMS,
    LEDGER,
    ClaimsInput,
    ClaimsOutput,
    Judge,
    JudgeConfig,
    Judgment,
    redact,
)
from evalharness.judge.base import Embeddings, judge_usage
from evalharness.judge.heuristic import HeuristicJudge
from evalharness.judge.openai_compat import OpenAIJudge
from evalharness.testing.fake_openai import FakeOpenAI

INPUT = ClaimsInput(question="Is the navy coat in stock?",
                    answer="The Navy Wool Coat costs 129.00 euros. Three are in stock in M.")


class Gated(Judge):
    """A backend that answers only once released, counting what it was asked."""

    backend = "gated"

    def __init__(self, **kw) -> None:
        super().__init__(JudgeConfig(backend="gated", model="g1", cache_mode="off", **kw))
        self.release = threading.Event()
        self.sent: list[str] = []
        self.raise_for: set[str] = set()

    async def complete(self, task, inputs, key):
        self.sent.append(inputs.answer)
        if inputs.answer in self.raise_for:
            raise RuntimeError(f"backend bug on {inputs.answer!r}")
        while not self.release.is_set():
            await asyncio.sleep(0.002)
        return Judgment(task=task.id, rubric_version=task.version, backend=self.backend,
                        model=self.model, key=key, output=ClaimsOutput(claims=["c"]),
                        raw='{"claims": ["c"]}', requests=1, prompt_tokens=3)

    async def embed(self, texts):
        self.sent.extend(texts)
        if any(t in self.raise_for for t in texts):
            raise RuntimeError("embedding backend bug")
        while not self.release.is_set():
            await asyncio.sleep(0.002)
        return Embeddings(np.ones((len(texts), 2)), requests=1, backend=self.backend,
                          model="e1")


def wait_for(condition, what: str) -> None:
    for _ in range(5000):
        if condition():
            return
        time.sleep(0.002)
    raise AssertionError(f"timed out waiting for {what}")


# -- record ids and usage ----------------------------------------------------------------------


def test_every_record_has_a_fixed_unique_id():
    judge = HeuristicJudge(JudgeConfig())
    a, b = judge.run_many(CLAIMS, [INPUT, INPUT])
    (emb,) = judge.embed_many([["navy coat"]])
    judge.close()
    ids = [a.record()["id"], b.record()["id"], emb.record()["id"]]
    assert len(set(ids)) == 3 and all(len(i) >= 17 and int(i, 16) >= 0 for i in ids)
    assert a.record()["id"] == a.record()["id"] == a.id
    assert emb.record()["id"] == emb.record()["id"] == emb.id


def test_judge_usage_counts_each_id_once():
    one = {"id": "x", "requests": 2, "prompt_tokens": 10, "completion_tokens": 5,
           "cached": False, "error": None, "model": "m"}
    shared = {"id": "y", "requests": 0, "shared": True, "error": None}
    old = {"requests": 1, "error": "boom"}  # results written before ids existed
    usage = judge_usage([one, one, shared, shared, old, old])
    assert usage == {"judgments": 4, "requests": 4, "cache_hits": 1, "prompt_tokens": 10,
                     "completion_tokens": 5, "errors": 2}


# -- the ledger --------------------------------------------------------------------------------


def test_the_ledger_collects_what_each_callers_calls_produced():
    judge = HeuristicJudge(JudgeConfig())
    assert LEDGER.get() is None
    judge.run_many(CLAIMS, [INPUT])  # no ledger set: nothing collected anywhere

    def collect(n: int) -> tuple[list, list]:
        ledger: list = []
        token = LEDGER.set(ledger)
        try:
            produced = judge.run_many(CLAIMS, [INPUT] * n)
            produced += judge.embed_many([["a"], ["b", "c"]][:n])
        finally:
            LEDGER.reset(token)
        return ledger, produced

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(collect, [1, 2]))
    judge.close()
    for ledger, produced in results:
        assert [id(x) for x in ledger] == [id(x) for x in produced]
    assert len(results[0][0]) == 2 and len(results[1][0]) == 4


# -- single flight -----------------------------------------------------------------------------


def test_identical_requests_in_flight_are_sent_once_over_http(tmp_path):
    with FakeOpenAI(latency_s=0.05) as server:
        judge = OpenAIJudge(JudgeConfig(backend="openai", model="j", base_url=server.base_url,
                                        cache_mode="off"))
        first, second = judge.run_many(CLAIMS, [INPUT, INPUT])
        judge.close()
    assert server.counts["chat"] == 1
    assert sorted([first.requests, second.requests]) == [0, 1]
    follower = first if first.requests == 0 else second
    assert follower.shared and not follower.cached and follower.output == first.output
    assert follower.id != (second if follower is first else first).id
    assert judge_usage([first.record(), second.record()])["cache_hits"] == 1


def test_single_flight_across_threads():
    judge = Gated()
    with ThreadPoolExecutor(2) as pool:
        try:
            leader = pool.submit(judge.run_many, CLAIMS, [INPUT])
            wait_for(lambda: judge.sent, "the first request")
            follower = pool.submit(judge.run_many, CLAIMS, [INPUT])
            wait_for(lambda: judge.waiting() == 1, "the second caller to wait")
        finally:
            judge.release.set()  # never leave a thread hanging, even when failing
        (a,), (b,) = leader.result(), follower.result()
    judge.close()
    assert judge.sent == [INPUT.answer]
    assert (a.requests, a.shared, b.requests, b.shared) == (1, False, 0, True)
    assert b.output == a.output and b.output is not a.output


def test_single_flight_of_embedded_texts_across_threads():
    judge = Gated()
    with ThreadPoolExecutor(2) as pool:
        try:
            leader = pool.submit(judge.embed_many, [["a", "b"]])
            wait_for(lambda: judge.sent, "the first request")
            follower = pool.submit(judge.embed_many, [["b", "c"]])
            wait_for(lambda: judge.waiting() == 1, "the second caller to wait")
        finally:
            judge.release.set()  # never leave a thread hanging, even when failing
        (a,), (b,) = leader.result(), follower.result()
    judge.close()
    assert judge.sent == ["a", "b", "c"], "b was embedded once"
    assert a.requests == 1 and b.requests == 1 and b.vectors.shape == (2, 2)


# -- a backend that raises ---------------------------------------------------------------------


def test_a_backend_that_raises_fails_one_judgment_not_the_batch():
    judge = Gated(embedding_batch_size=2)  # "worse" goes in a request of its own
    judge.release.set()
    judge.raise_for = {"bad", "worse"}
    inputs = [INPUT.model_copy(update={"answer": a}) for a in ("ok", "bad", "fine")]
    judgments = judge.run_many(CLAIMS, inputs)
    good, bad = judge.embed_many([["x", "y"], ["worse"]])
    judge.close()
    assert [j.output is not None for j in judgments] == [True, False, True]
    assert "raised RuntimeError: backend bug on 'bad'" in judgments[1].error
    assert good.error is None and "raised RuntimeError: embedding backend bug" in bad.error


# -- redaction ---------------------------------------------------------------------------------


def test_error_texts_and_raw_answers_are_redacted():
    class Leaky(Gated):
        async def complete(self, task, inputs, key):
            return Judgment(task=task.id, rubric_version=task.version, backend=self.backend,
                            model=self.model, key=key, requests=1,
                            error="denied for Bearer abc.DEF-123_456",
                            raw="your key sk-proj-0123456789abcdefXYZ is invalid")

    (j,) = Leaky().run_many(CLAIMS, [INPUT])
    assert j.error == "denied for Bearer ***" and j.raw == "your key *** is invalid"
    assert redact("nothing secret here") == "nothing secret here"


def test_redact_removes_a_configured_keys_exact_value(monkeypatch):
    key = "plain-key-without-a-prefix-77"
    monkeypatch.setenv("MY_JUDGE_KEY", key)
    OpenAIJudge(JudgeConfig(backend="openai", model="m", api_key_env="MY_JUDGE_KEY",
                            base_url="https://judge.example.com/v1"))
    assert redact(f"rejected {key}!") == "rejected ***!"


# -- the shop, counted against the server ------------------------------------------------------


@pytest.fixture(scope="module")
def shop_batches():
    """The shop's cases and the reference assistant's traces; the corpus."""
    from evalharness.context import load_corpus
    from evalharness.importing import import_file
    from evalharness.models import Case

    assistant = import_file(SHOP.parent / "shop" / "assistant", "accounting_shop")
    cases = [Case.model_validate(json.loads(line)) for line in
             (SHOP.parent / "shop" / "cases.jsonl").read_text().splitlines() if line.strip()]
    traces = {c.id: assistant.answer(c) for c in cases}
    return cases, traces, load_corpus(SHOP.parent / "shop" / "blog_chunks.jsonl")


def test_shop_judged_metrics_count_exactly_what_the_server_received(shop_batches):
    """Faithfulness, answer relevancy, answer correctness, context precision and recall from
    the openai judge (cache off), side by side in threads as the core runs them: the requests
    of every record attached to a value, each id counted once, equal the server's count."""
    from evalharness.context import EvalContext
    from evalharness_generation import evaluate_generator
    from evalharness_generation.judged import RelevancySettings
    from evalharness_retrieval.contexts import (
        ContextPrecisionSettings,
        ContextRecallSettings,
        context_precision,
        context_recall,
    )

    cases, traces, corpus = shop_batches
    gen = [(c, traces[c.id].generator) for c in cases if traces[c.id].generator is not None]
    ret = [(c, traces[c.id].retriever) for c in cases if traces[c.id].retriever is not None]
    with FakeOpenAI() as server:
        judge = OpenAIJudge(JudgeConfig(backend="openai", model="fake", base_url=server.base_url,
                                        cache_mode="off", concurrency=16, max_retries=0))
        ctx = EvalContext(judge=judge, corpus=corpus, traces=traces)
        calls = [
            lambda: evaluate_generator("faithfulness", gen, None, ctx),
            lambda: evaluate_generator("answer_relevancy", gen, RelevancySettings(), ctx),
            lambda: evaluate_generator("answer_correctness", gen, None, ctx),
            lambda: context_precision(ret, ContextPrecisionSettings(k=[3, 5], source="judge"),
                                      ctx),
            lambda: context_recall(ret, ContextRecallSettings(source="judge"), ctx),
        ]

        def run(call):
            ledger: list = []
            token = LEDGER.set(ledger)
            try:
                return call(), ledger
            finally:
                LEDGER.reset(token)

        with ThreadPoolExecutor(len(calls)) as pool:
            outputs = list(pool.map(run, calls))
        judge.close()
        received = dict(server.counts)
    records = [r for rows, _ in outputs for row in rows for value in row.values()
               for r in value.details.get("judgments", [])]
    ids = [r["id"] for r in records]
    assert len(ids) == len(set(ids)), "each record is attached to one value only"
    produced = {x.id for _, ledger in outputs for x in ledger}
    assert produced == set(ids), "every judgment produced is attached to some value"
    by_kind = {k: sum(r["requests"] for r in records if r["kind"] == k)
               for k in ("chat", "embeddings")}
    assert by_kind == {"chat": received["chat"], "embeddings": received["embeddings"]}
    assert judge_usage(records + records)["requests"] == sum(received.values())
    assert received["embeddings"] == 1, "answer relevancy's embeddings go in one request"
    assert judge_usage(records)["errors"] == 0
