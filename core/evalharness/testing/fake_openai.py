"""A small OpenAI-compatible server on loopback, for tests, benchmarks and trying the judge.

It speaks the two endpoints the ``openai`` judge backend uses — ``POST /v1/chat/completions``
and ``POST /v1/embeddings`` — and answers judgment tasks with the heuristic judge, so answers
are realistic and deterministic; ``GET /v1/stats`` returns the request counts. Faults are switched on per server: added latency, structured
outputs unsupported (HTTP 400, as some local servers answer), a number of 429 answers, garbage
answers, answers slower than the client's timeout. Every request is counted, with the
``Authorization`` headers it carried (so tests can check where a key goes).

Run one by hand::

    python -m evalharness.testing.fake_openai --port 8000 --latency-ms 200
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from evalharness.judge.tasks import TASKS

_WORDS = re.compile(r"\w+|[^\w\s]")


class FakeOpenAI:
    """The server's state and faults; start with :meth:`start`, stop with :meth:`stop`."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, latency_s: float = 0.0,
                 structured: bool = True) -> None:
        self.latency_s = latency_s
        self.structured = structured
        self.fail_429 = 0  # answer the next N requests with 429
        self.garbage = 0  # answer the next N chat requests with text that is not JSON
        self.hang_s = 0.0  # sleep this long before answering (to trip client timeouts)
        self.counts: Counter[str] = Counter()
        self.auth_headers: list[str] = []
        self.in_flight = 0
        self.max_in_flight: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._live: Counter[str] = Counter()
        handler = type("Handler", (_Handler,), {"server_state": self})
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> FakeOpenAI:
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- bookkeeping ---------------------------------------------------------------------------

    def _enter(self, kind: str, auth: str) -> str | None:
        """Count the request; return a fault to answer with, if one is due."""
        with self._lock:
            self.counts[kind] += 1
            self.auth_headers.append(auth)
            self._live[kind] += 1
            self.max_in_flight[kind] = max(self.max_in_flight[kind], self._live[kind])
            if self.fail_429 > 0:
                self.fail_429 -= 1
                return "429"
            if kind == "chat" and self.garbage > 0:
                self.garbage -= 1
                return "garbage"
        return None

    def _leave(self, kind: str) -> None:
        with self._lock:
            self._live[kind] -= 1


class _Handler(BaseHTTPRequestHandler):
    server_state: FakeOpenAI
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        state = self.server_state
        if self.path.split("?")[0] != "/v1/stats":
            return self._send(404, {"error": {"message": f"no route {self.path}"}})
        with state._lock:
            return self._send(200, {"counts": dict(state.counts),
                                    "max_in_flight": dict(state.max_in_flight)})

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        state = self.server_state
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        kind = {"/v1/chat/completions": "chat", "/v1/embeddings": "embeddings"}.get(
            self.path.split("?")[0])
        if kind is None:
            return self._send(404, {"error": {"message": f"no route {self.path}"}})
        fault = state._enter(kind, self.headers.get("authorization", ""))
        try:
            if state.hang_s:
                time.sleep(state.hang_s)
            if state.latency_s:
                time.sleep(state.latency_s)
            if fault == "429":
                return self._send(429, {"error": {"message": "rate limited",
                                                  "type": "rate_limit"}},
                                  headers={"retry-after": "0"})
            if kind == "chat":
                return self._chat(body, garbage=fault == "garbage")
            return self._embeddings(body)
        finally:
            state._leave(kind)

    def _chat(self, body: dict, garbage: bool) -> None:
        state = self.server_state
        fmt = body.get("response_format") or {}
        if fmt.get("type") == "json_schema" and not state.structured:
            return self._send(400, {"error": {"message": "response_format json_schema is not "
                                              "supported by this server", "type":
                                              "invalid_request_error"}})
        messages = body.get("messages") or []
        task = _task_of(fmt, messages)
        prompt_tokens = sum(len(_WORDS.findall(m.get("content") or "")) for m in messages)
        if garbage:
            content = "Sure! Here is my verdict: yes, mostly."
        elif task is None:
            content = json.dumps({"error": "unknown task"})
        else:
            content = _answer(task, messages)
        return self._send(200, {
            "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "fake"),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": prompt_tokens,
                      "completion_tokens": len(_WORDS.findall(content)),
                      "total_tokens": prompt_tokens + len(_WORDS.findall(content))},
        })

    def _embeddings(self, body: dict) -> None:
        from evalharness.judge.heuristic import embed_texts

        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else list(texts or [])
        vectors = embed_texts(texts)
        tokens = sum(len(_WORDS.findall(t)) for t in texts)
        return self._send(200, {
            "object": "list", "model": body.get("model", "fake"),
            "data": [{"object": "embedding", "index": i, "embedding": v.tolist()}
                     for i, v in enumerate(vectors)],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        })

    def _send(self, status: int, payload: dict, headers: dict | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test)


def _task_of(fmt: dict, messages: list[dict]):
    name = (fmt.get("json_schema") or {}).get("name")
    if name in TASKS:
        return TASKS[name]
    system = next((m.get("content") or "" for m in messages if m.get("role") == "system"), "")
    return next((t for t in TASKS.values() if system.startswith(t.rubric)), None)


def _answer(task, messages: list[dict]) -> str:
    from evalharness.judge.heuristic import HeuristicCannotJudge, answer

    user = next(m.get("content") or "" for m in messages if m.get("role") == "user")
    inputs = task.input.model_validate_json(user)
    try:
        return answer(task, inputs).model_dump_json()
    except HeuristicCannotJudge as exc:
        return json.dumps({"error": str(exc)})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A fake OpenAI-compatible judge server.")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--no-structured", action="store_true",
                        help="refuse response_format json_schema (HTTP 400), like some servers")
    args = parser.parse_args(argv)
    server = FakeOpenAI(port=args.port, latency_s=args.latency_ms / 1000,
                        structured=not args.no_structured)
    print(f"fake OpenAI-compatible server on {server.base_url}", flush=True)
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":  # pragma: no cover
    main()
