"""The openai judge client against an endpoint that drips, floods or is gone (issue 25): a
deadline for the whole request, a byte cap on every answer, errors that name the endpoint and
never the key. Each test reproduced its finding before the fix; sizes and times are scaled
down (a 2 s drip against a 1 s deadline, 2 MB against a 1 MB cap)."""

from __future__ import annotations

import asyncio
import time

import pytest

from evalharness.judge import CLAIMS, ClaimsInput
from evalharness.judge.base import JudgeConfig
from evalharness.judge.openai_compat import OpenAIJudge
from evalharness.testing.fake_openai import FakeOpenAI

SECRET = "sk-test-DO-NOT-LEAK-2525"

INPUT = ClaimsInput(question="Is the navy coat in stock?",
                    answer="The Navy Wool Coat costs 129.00 euros. Three are in stock in M.")
BATCH = [INPUT.model_copy(update={"answer": f"The coat number {i} costs {i} euros."})
         for i in range(4)]


@pytest.fixture
def server():
    with FakeOpenAI() as s:
        yield s


def judge_for(base_url: str, tmp_path, **kw) -> OpenAIJudge:
    return OpenAIJudge(JudgeConfig(backend="openai", model="judge-1", base_url=base_url,
                                   cache=str(tmp_path / "cache.sqlite"), cache_mode="off",
                                   **kw))


# -- finding 2: a deadline for the whole request ------------------------------------------------


def test_a_dripping_answer_meets_the_whole_request_deadline(server, tmp_path):
    """Was: an endpoint that answered HTTP 200 and then sent its body a little at a time held
    the run for hours — `timeout_s` bounded each read, and every piece started it again. Now
    `timeout_s` is the deadline of the whole request: a body dripped over 2 s against 1 s is a
    timeout error naming the deadline and the endpoint, retried per `max_retries`."""
    server.drip_s = 2.0
    judge = judge_for(server.base_url, tmp_path, timeout_s=1, max_retries=1)
    (j,) = judge.run_many(CLAIMS, [INPUT])
    (emb,) = judge.embed_many([["navy coat", "wool"]])
    server.drip_s = 0.0
    (after,) = judge.run_many(CLAIMS, [INPUT])
    judge.close()
    assert j.output is None and emb.vectors is None
    for error, path in ((j.error, "chat/completions"), (emb.error, "embeddings")):
        assert error.startswith("APITimeoutError"), error
        assert "judge.timeout_s = 1 s" in error and f"{server.base_url}/{path}" in error
    assert j.requests == 2 and emb.requests == 2, "a deadline is retried like a timeout"
    assert server.counts["embeddings"] == 2
    assert after.error is None and after.requests == 1, "the abandoned connections are gone"
    assert server.counts["chat"] == 3


# -- finding 3: a byte cap on every answer ------------------------------------------------------


@pytest.mark.parametrize("announced", [False, True], ids=["chunked", "content-length"])
def test_an_answer_over_the_byte_cap_fails_its_judgment_only(server, tmp_path, announced):
    """Was: a 600 MB answer was read whole and parsed (3.5 GB). Now the body is counted as it
    arrives (and a Content-Length over the cap is refused before reading): 2 MB against a 1 MB
    cap is that judgment's error naming the cap, not retried; the batch's other judgments
    stand."""
    server.oversize, server.oversize_bytes = 1, 2_000_000
    server.oversize_announced = announced
    judge = judge_for(server.base_url, tmp_path, max_retries=2,
                      options={"max_response_bytes": 1_000_000})
    judgments = judge.run_many(CLAIMS, BATCH)
    judge.close()
    failed = [j for j in judgments if j.output is None]
    assert len(failed) == 1, [j.error for j in judgments]
    assert "1,000,000 bytes" in failed[0].error and "max_response_bytes" in failed[0].error
    assert f"{server.base_url}/chat/completions" in failed[0].error
    assert failed[0].requests == 1, "not retried: asking again would only read another MB"
    assert sum(j.requests for j in judgments) == server.counts["chat"] == len(BATCH)


def test_an_embeddings_answer_is_capped_by_its_number_of_texts(server, tmp_path):
    """An embeddings answer may be `max_response_bytes` plus 128 kB per text: 2 MB for two
    texts against a 1 MB base is refused; the same texts answered normally pass."""
    server.oversize, server.oversize_bytes = 1, 2_000_000
    judge = judge_for(server.base_url, tmp_path, max_retries=0,
                      options={"max_response_bytes": 1_000_000})
    (big,) = judge.embed_many([["navy coat", "wool"]])
    (fine,) = judge.embed_many([["navy coat", "wool"]])
    judge.close()
    assert big.vectors is None and "1,262,144 bytes" in big.error, big.error
    assert "2 texts" in big.error and big.requests == 1
    assert fine.error is None and fine.vectors.shape[0] == 2


def test_the_rest_of_an_answer_over_the_cap_is_never_read(server, tmp_path):
    """The client stops reading at the cap and drops the connection: of a 64 MB answer (far
    more than the sockets' buffers hold) the server cannot send the rest."""
    server.oversize, server.oversize_bytes = 1, 64_000_000
    judge = judge_for(server.base_url, tmp_path, max_retries=0,
                      options={"max_response_bytes": 1_000_000})
    (j,) = judge.run_many(CLAIMS, [INPUT])
    judge.close()
    assert j.output is None and "1,000,000 bytes" in j.error
    for _ in range(500):  # the server's thread notices the closed connection on its own
        if server.cut_short:
            break
        time.sleep(0.01)
    assert server.cut_short == 1


class _Streamed:
    """A response whose body arrives in ``chunks`` pieces of 64 kB, counting those read."""

    def __init__(self, chunks: int, length: bool = False) -> None:
        self.headers = {"content-length": str(chunks * 65536)} if length else {}
        self.chunks, self.read = chunks, 0

    async def aiter_bytes(self):
        for _ in range(self.chunks):
            self.read += 1
            yield b"x" * 65536


def test_an_error_answer_is_read_only_as_far_as_its_message_cap():
    """An error status's body (4xx, 5xx) is read to 64 kB for its message, then left: a 2 MB
    one costs 64 kB. A 2 MB success against a 1 MB cap stops at the chunk past the cap, and
    one that announces its length is refused before any chunk is read."""
    from evalharness.judge.endpoint import ERROR_BODY_BYTES, ResponseTooLarge, _read

    async def read(response, cap, strict):
        return await _read(response, cap, strict=strict, where="http://h/v1/x", says="test")

    error = _Streamed(32)
    assert len(asyncio.run(read(error, ERROR_BODY_BYTES, False))) == ERROR_BODY_BYTES
    assert error.read == 1
    streamed, announced = _Streamed(32), _Streamed(32, length=True)
    for response, read_before_refusal in ((streamed, 16), (announced, 0)):
        with pytest.raises(ResponseTooLarge, match="cap of 1,000,000 bytes"):
            asyncio.run(read(response, 1_000_000, True))
        assert response.read == read_before_refusal


@pytest.mark.parametrize("value", [0, -5, "big", 1.5, True])
def test_a_byte_cap_that_is_not_a_positive_integer_is_refused(tmp_path, value):
    from evalharness.errors import ScenarioError

    with pytest.raises(ScenarioError, match="max_response_bytes"):
        judge_for("http://127.0.0.1:9/v1", tmp_path, options={"max_response_bytes": value})


# -- finding 4: errors name the endpoint, never the key ----------------------------------------


def test_a_dead_endpoint_is_named_in_every_error_and_costs_no_request(tmp_path, monkeypatch):
    """Was: every judged metric said `APIConnectionError: Connection error.` — which endpoint?
    Now the error names the URL it could not reach (never the key), and a refused connection
    is no request."""
    with FakeOpenAI() as gone:
        url = gone.base_url  # nobody listens there any more
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    judge = judge_for(url, tmp_path, max_retries=1)
    (j,) = judge.run_many(CLAIMS, [INPUT])
    (emb,) = judge.embed_many([["navy coat"]])
    judge.close()
    for error, path in ((j.error, "chat/completions"), (emb.error, "embeddings")):
        assert error.startswith("APIConnectionError: could not connect to "
                                f"{url}/{path}"), error
        assert "check `judge.base_url`" in error
        assert SECRET not in error and "DO-NOT-LEAK" not in error
    assert j.requests == 0 and emb.requests == 0


def test_status_errors_name_the_endpoint(server, tmp_path):
    server.fail_429 = 1
    judge = judge_for(server.base_url, tmp_path, max_retries=0)
    (j,) = judge.run_many(CLAIMS, [INPUT])
    judge.close()
    assert j.error.startswith(f"RateLimitError (HTTP 429) from {server.base_url}/chat/"
                              "completions: rate limited"), j.error


def test_an_answer_nested_too_deep_is_an_odd_answer_not_a_recursion_error():
    """A 200 or an error status whose JSON nests thousands deep (well within the byte cap)
    fails that judgment like any answer that is not the expected JSON."""
    from evalharness.judge.endpoint import Answer, _status_error
    from evalharness.judge.openai_compat import OddResponse, _json

    deep = b"[" * 50_000 + b"]" * 50_000
    with pytest.raises(OddResponse, match="not JSON"):
        _json(Answer(200, "application/json", deep, "http://127.0.0.1:9/v1/chat/completions"))
    error = _status_error(400, None, b'{"error": ' + deep + b"}", "http://h/v1/x")
    assert error.status == 400 and error.message.startswith('{"error": [[[')
