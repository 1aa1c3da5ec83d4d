"""A small OpenAI-compatible server on loopback, for tests, benchmarks and trying the judge.

It speaks the two endpoints the ``openai`` judge backend uses — ``POST /v1/chat/completions``
and ``POST /v1/embeddings`` — and answers judgment tasks with the heuristic judge, so answers
are realistic and deterministic. ``GET /v1/stats`` returns the request counts, the most
requests in flight at once, and the wall-clock times (``time.time()``) of the first request's
arrival and of the last response (``?reset=1`` starts the counts afresh after answering;
``?spans=1`` adds when each request arrived and was answered).

Faults are switched on per server, most as "the next N requests": added latency, structured
outputs unsupported (HTTP 400, as some local servers answer, or 500, as llama-cpp-python's
does), JSON mode unsupported too, 429 and 500 answers, 401 answers that
echo the key they were sent (as some proxies do), HTTP 200 answers with an HTML page or an
empty body (a proxy in the way), garbage chat answers, embeddings with NaN values, with a
vector of the wrong length or all zero, answers slower than the client's timeout, answers
whose body trickles in (the headers at once, then the body spread over seconds) and answers
padded to megabytes. Every request is counted, with the ``Authorization`` headers it carried
(so tests can check where a key goes).

``canned=True`` (``--canned``) answers every task with a minimal JSON object that fits the
task's output schema — one verdict per claim or chunk it was given, so values stay usable —
and every embedding with the same small vector: no per-answer work, for benchmarks that
measure the judge machinery rather than the heuristic judge.

The server reads a task's inputs back from the user message: JSON, or for a task that shows
its inputs its own way (``JudgmentTask.user``: CLAIM_SUPPORT's Markdown tables of rows), that
rendering parsed back.

Run one by hand::

    python -m evalharness.testing.fake_openai --port 8000 --latency-ms 200 [--canned]
"""

from __future__ import annotations

import _thread
import argparse
import base64
import hashlib
import itertools
import json
import math
import re
import struct
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pydantic import BaseModel

from evalharness.judge.tasks import (
    TASKS,
    ClaimSupportInput,
    JudgmentTask,
    RowTable,
    claim_support_prompt,
)

_WORDS = re.compile(r"\w+|[^\w\s]")

PROXY_PAGE = ("<html><head><title>Sign in</title></head><body><h1>Corporate proxy</h1>"
              "<p>Please sign in to continue.</p></body></html>")
"""The body of the ``html`` fault: a proxy's page, answered with HTTP 200."""

CANNED_DIM = 8
"""Length of the canned mode's embedding vectors."""

SPANS = 100_000
"""How many requests' arrival and answer times the server keeps (for ``/v1/stats?spans=1``)."""


class _Server(ThreadingHTTPServer):
    """Accepts as many waiting connections as a real server would (the standard library's
    backlog of 5 refuses connections at a judge concurrency of 64), as fast as one would."""

    request_queue_size = 1024
    daemon_threads = True

    def process_request(self, request: Any, client_address: Any) -> None:
        # A thread per connection, started without waiting for it to run: `Thread.start`
        # waits, and the new thread kept the interpreter lock while it parsed its first
        # request, so 64 connections opened at once were accepted one after the other over
        # ~110 ms — a delay of this stub's, not of the client it measures.
        _thread.start_new_thread(self.process_request_thread, (request, client_address))


class FakeOpenAI:
    """The server's state and faults; start with :meth:`start`, stop with :meth:`stop`."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, latency_s: float = 0.0,
                 structured: bool = True, canned: bool = False) -> None:
        self.latency_s = latency_s
        self.structured = structured
        self.schema_refusal = 400  # the status refusing json_schema (llama-cpp-python: 500)
        self.json_mode = True  # False: refuse response_format json_object too (HTTP 400)
        self.formats: Counter[str] = Counter()  # response_format types asked for ("none")
        self.fail_500 = 0  # answer the next N requests with 500 (a server error)
        self.base64 = False  # answer embeddings in base64 when asked to, as OpenAI does
        self.canned = canned  # minimal schema-fitting answers, no per-answer work
        self.fail_429 = 0  # answer the next N requests with 429
        self.fail_401 = 0  # answer the next N requests with 401, echoing the key sent
        self.html = 0  # answer the next N requests with HTTP 200 and an HTML page
        self.empty = 0  # answer the next N requests with HTTP 200 and an empty body
        self.garbage = 0  # answer the next N chat requests with text that is not JSON
        self.nan_embeddings = 0  # the next N embeddings answers hold NaN and infinity
        self.ragged_embeddings = 0  # ... have one vector of the wrong length
        self.zero_embeddings = 0  # ... are all-zero vectors
        self.hang_s = 0.0  # sleep this long before answering (to trip client timeouts)
        self.drip_s = 0.0  # send the headers at once, then the body in pieces over this long
        self.oversize = 0  # pad the next N answers to `oversize_bytes`, sent chunked
        self.oversize_bytes = 2_000_000
        self.oversize_announced = False  # ... with a Content-Length instead of chunks
        self.cut_short = 0  # padded answers the client stopped reading before their end
        self.counts: Counter[str] = Counter()
        self.auth_headers: list[str] = []
        self.max_in_flight: Counter[str] = Counter()
        self.first_request_at: float | None = None  # time.time() of the first arrival
        self.last_response_at: float | None = None  # time.time() of the last response sent
        # (kind, arrived, answered) of the last SPANS requests
        self.spans: deque[tuple[str, float, float]] = deque(maxlen=SPANS)
        self._lock = threading.Lock()
        self._live: Counter[str] = Counter()
        handler = type("Handler", (_Handler,), {"server_state": self})
        self.httpd = _Server((host, port), handler)
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

    def stats(self, reset: bool = False, spans: bool = False) -> dict[str, Any]:
        """What ``GET /v1/stats`` answers; ``reset`` starts the counts and times afresh;
        ``spans`` adds ``[kind, arrived, answered]`` (``time.time()``) of every request."""
        with self._lock:
            out = {"counts": dict(self.counts), "max_in_flight": dict(self.max_in_flight),
                   "in_flight": dict(self._live), "first_request_at": self.first_request_at,
                   "last_response_at": self.last_response_at}
            if spans:
                out["spans"] = [list(span) for span in self.spans]
            if reset:
                self.counts.clear()
                self.max_in_flight.clear()
                self.spans.clear()
                self.first_request_at = self.last_response_at = None
        return out

    def _enter(self, kind: str, auth: str, arrived: float | None = None) -> str | None:
        """Count the request (arrived at ``arrived``); return a fault to answer with, if one
        is due."""
        with self._lock:
            if self.first_request_at is None:
                self.first_request_at = arrived if arrived is not None else time.time()
            self.counts[kind] += 1
            self.auth_headers.append(auth)
            self._live[kind] += 1
            self.max_in_flight[kind] = max(self.max_in_flight[kind], self._live[kind])
            faults = ["fail_429", "fail_500", "fail_401", "html", "empty", "oversize"]
            faults += ["garbage"] if kind == "chat" else [
                "nan_embeddings", "ragged_embeddings", "zero_embeddings"]
            for fault in faults:
                if getattr(self, fault) > 0:
                    setattr(self, fault, getattr(self, fault) - 1)
                    return fault
        return None

    def _leave(self, kind: str, arrived: float) -> None:
        with self._lock:
            self._live[kind] -= 1
            self.last_response_at = time.time()
            self.spans.append((kind, arrived, self.last_response_at))


class _Handler(BaseHTTPRequestHandler):
    server_state: FakeOpenAI
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as real servers set it: the headers and the body go out in two writes, and
    # with Nagle's algorithm the second waits for the client's delayed ACK (~40 ms a request).
    disable_nagle_algorithm = True

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        state = self.server_state
        self._fault = None  # a handler serves every request of its connection
        if self.path.split("?")[0] != "/v1/stats":
            return self._send(404, {"error": {"message": f"no route {self.path}"}})
        return self._send(200, state.stats(reset="reset=1" in self.path,
                                           spans="spans=1" in self.path))

    def parse_request(self) -> bool:
        # The request line has just been read: the request has arrived. The latency runs from
        # here, not from after this thread got through parsing the headers and the body: with
        # 64 requests at once, the server's own parsing queued behind its interpreter lock and
        # added to every answer's time (a real server's latency runs from the request's
        # arrival too).
        self._arrived = time.time()
        return super().parse_request()

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        arrived = self._arrived
        state = self.server_state
        self._fault = None
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        kind = {"/v1/chat/completions": "chat", "/v1/embeddings": "embeddings"}.get(
            self.path.split("?")[0])
        if kind is None:
            return self._send(404, {"error": {"message": f"no route {self.path}"}})
        fault = state._enter(kind, self.headers.get("authorization", ""), arrived)
        self._fault = fault
        try:
            if state.hang_s:
                time.sleep(state.hang_s)
            if state.latency_s:
                time.sleep(max(0.0, arrived + state.latency_s - time.time()))
            if fault == "fail_429":
                return self._send(429, {"error": {"message": "rate limited",
                                                  "type": "rate_limit"}},
                                  headers={"retry-after": "0"})
            if fault == "fail_500":
                return self._send(500, {"error": {"message": "internal error", "type":
                                                  "server_error"}})
            if fault == "fail_401":
                key = self.headers.get("authorization", "").removeprefix("Bearer ")
                return self._send(401, {"error": {
                    "message": f"Incorrect API key provided: {key}. Header was: Bearer {key}",
                    "type": "invalid_request_error", "code": "invalid_api_key"}})
            if fault == "html":
                return self._send_raw(200, PROXY_PAGE.encode(), "text/html; charset=utf-8")
            if fault == "empty":
                return self._send_raw(200, b"", "application/json")
            if kind == "chat":
                return self._chat(body, garbage=fault == "garbage")
            return self._embeddings(body, fault)
        finally:
            state._leave(kind, arrived)

    def _chat(self, body: dict, garbage: bool) -> None:
        state = self.server_state
        fmt = body.get("response_format") or {}
        with state._lock:
            state.formats[fmt.get("type") or "none"] += 1
        if fmt.get("type") == "json_schema" and not state.structured:
            return self._send(state.schema_refusal, {"error": {
                "message": "response_format json_schema is not supported by this server",
                "type": "invalid_request_error" if state.schema_refusal < 500 else
                "server_error"}})
        if fmt.get("type") == "json_object" and not state.json_mode:
            return self._send(400, {"error": {"message": "response_format json_object is not "
                                              "supported by this server", "type":
                                              "invalid_request_error"}})
        messages = body.get("messages") or []
        task = _task_of(fmt, messages)
        count = _rough_tokens if state.canned else _tokens
        prompt_tokens = sum(count(m.get("content") or "") for m in messages)
        if garbage:
            content = "Sure! Here is my verdict: yes, mostly."
        elif task is None:  # a task of the scenario's (a `judged` rubric): from its schema
            schema = _schema_of(fmt, messages)
            content = json.dumps(_from_schema(schema, _seed(messages)) if schema is not None
                                 else {"error": "unknown task"})
        elif state.canned:
            content = _canned(task, messages)
        else:
            content = _answer(task, messages)
        completion_tokens = count(content)
        finish = "stop"
        cap = body.get("max_tokens")
        if isinstance(cap, int) and 0 < cap < completion_tokens:  # cut, as a real server does
            content = content[:max(1, len(content) * cap // completion_tokens)]
            completion_tokens, finish = cap, "length"
        return self._send(200, {
            "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "fake"),
            "choices": [{"index": 0, "finish_reason": finish,
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        })

    def _embeddings(self, body: dict, fault: str | None) -> None:
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else list(texts or [])
        if self.server_state.canned:
            vectors = [[1.0] + [0.0] * (CANNED_DIM - 1) for _ in texts]
            tokens = sum(_rough_tokens(t) for t in texts)
        else:
            from evalharness.judge.heuristic import embed_texts

            vectors = [v.tolist() for v in embed_texts(texts)]
            tokens = sum(_tokens(t) for t in texts)
        if fault == "nan_embeddings":
            for v in vectors:
                v[0], v[-1] = float("nan"), float("inf")
        elif fault == "ragged_embeddings" and vectors:
            vectors[-1] = vectors[-1][: max(1, len(vectors[-1]) // 2)]
        elif fault == "zero_embeddings":
            vectors = [[0.0] * len(v) for v in vectors]
        if self.server_state.base64 and body.get("encoding_format") == "base64":
            vectors = [base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode()
                       for v in vectors]
        return self._send(200, {
            "object": "list", "model": body.get("model", "fake"),
            "data": [{"object": "embedding", "index": i, "embedding": v}
                     for i, v in enumerate(vectors)],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        })

    def _send(self, status: int, payload: dict, headers: dict | None = None) -> None:
        # NaN and infinity are written as the bare words Python's json module reads back.
        self._send_raw(status, json.dumps(payload).encode(), "application/json", headers)

    def _send_raw(self, status: int, data: bytes, content_type: str,
                  headers: dict | None = None) -> None:
        state = self.server_state
        oversize = status == 200 and getattr(self, "_fault", None) == "oversize"
        # the same answer, padded with whitespace to `oversize_bytes`: still valid JSON
        padding = max(0, state.oversize_bytes - len(data)) if oversize else 0
        chunked = oversize and not state.oversize_announced
        self.send_response(status)
        self.send_header("content-type", content_type)
        if chunked:
            self.send_header("transfer-encoding", "chunked")
        else:
            self.send_header("content-length", str(len(data) + padding))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        try:
            if oversize:
                spaces = memoryview(b" " * 65536)
                pieces = itertools.chain([data], (spaces[:min(65536, padding - i)]
                                                  for i in range(0, padding, 65536)))
                for piece in pieces:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked
                                     else piece)
                if chunked:
                    self.wfile.write(b"0\r\n\r\n")
            elif state.drip_s and self.command == "POST" and data:
                self.wfile.flush()
                pieces = 20
                step = -(-len(data) // pieces)
                for i in range(0, len(data), step):
                    time.sleep(state.drip_s / pieces)
                    self.wfile.write(data[i:i + step])
                    self.wfile.flush()
            else:
                self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up
            if oversize:
                with state._lock:
                    state.cut_short += 1


def _task_of(fmt: dict, messages: list[dict]):
    name = (fmt.get("json_schema") or {}).get("name")
    if name in TASKS:
        return TASKS[name]
    system = next((m.get("content") or "" for m in messages if m.get("role") == "system"), "")
    return next((t for t in TASKS.values() if system.startswith(t.rubric)), None)


_SCHEMA_MARK = "matches this JSON Schema:\n"


def _schema_of(fmt: dict, messages: list[dict]) -> dict | None:
    """The output schema a request asks for: its ``json_schema``, else the one the system
    prompt ends with."""
    schema = (fmt.get("json_schema") or {}).get("schema")
    if isinstance(schema, dict):
        return schema
    system = next((m.get("content") or "" for m in messages if m.get("role") == "system"), "")
    if _SCHEMA_MARK in system:
        try:
            return json.loads(system.rsplit(_SCHEMA_MARK, 1)[1])
        except ValueError:
            return None
    return None


def _seed(messages: list[dict]) -> int:
    text = json.dumps(messages, sort_keys=True)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


def _from_schema(schema: dict, seed: int) -> Any:
    """A value fitting ``schema`` (objects, booleans, bounded numbers, strings, arrays),
    chosen deterministically from ``seed``: the same request, the same answer; different
    requests, different booleans and scores.

    >>> _from_schema({"type": "object", "properties": {"ok": {"type": "boolean"},
    ...   "score": {"type": "integer", "minimum": 1, "maximum": 5}}}, 7)
    {'ok': True, 'score': 4}
    """
    kind = schema.get("type")
    if schema.get("enum"):
        return schema["enum"][seed % len(schema["enum"])]
    if kind == "object":
        props = schema.get("properties") or {}
        return {name: _from_schema(sub, seed // (n + 2) + n)
                for n, (name, sub) in enumerate(props.items())}
    if kind == "boolean":
        return bool(seed % 2)
    if kind in ("integer", "number"):
        low, high = schema.get("minimum", 0), schema.get("maximum", 1)
        if kind == "integer":
            return int(low) + seed % (int(high) - int(low) + 1)
        return round(low + (seed % 101) / 100 * (high - low), 2)
    if kind == "array":
        return []
    return "a fake judge's reason"


def _tokens(text: str) -> int:
    """Word and punctuation tokens, the server's stand-in for a tokenizer.

    >>> _tokens("The coat costs 129.")
    5
    """
    return len(_WORDS.findall(text))


def _rough_tokens(text: str) -> int:
    """A cheaper stand-in for the canned mode: about four characters a token.

    >>> _rough_tokens("The coat costs 129.")
    5
    """
    return len(text) // 4 + 1


def _canned(task: JudgmentTask, messages: list[dict]) -> str:
    """A minimal answer that fits ``task``'s output schema: one verdict per claim or chunk
    given, one question, everything supported, equivalent or useful.

    >>> from evalharness.judge.tasks import CLAIM_SUPPORT, ClaimSupportInput
    >>> _canned(CLAIM_SUPPORT, CLAIM_SUPPORT.messages(ClaimSupportInput(context="c",
    ...                                                                 claims=["a", "b"])))
    '{"verdicts": [{"claim": "", "supported": true, "reason": "canned"}, {"claim": "", \
"supported": true, "reason": "canned"}]}'
    """
    def given(field: str) -> int:
        try:
            return len(getattr(_inputs(task, messages), field) or [])
        except (ValueError, AttributeError, TypeError):
            return 0

    if task.id == "claims":
        answer: dict[str, Any] = {"claims": ["The answer states a fact."]}
    elif task.id == "claim_support":
        answer = {"verdicts": [{"claim": "", "supported": True, "reason": "canned"}]
                  * given("claims")}
    elif task.id == "answer_questions":
        answer = {"questions": [{"question": "What does the shop sell?", "noncommittal": False}]}
    elif task.id == "chunk_usefulness":
        answer = {"verdicts": [{"useful": True, "reason": "canned"}] * given("chunks")}
    elif task.id == "sql_equivalence":
        answer = {"equivalent": True, "reason": "canned"}
    elif task.id == "synth_case":
        answer = {"question": "What does the shop sell?", "answer": "Clothes."}
    else:
        answer = {"error": f"the canned mode does not know the task {task.id!r}"}
    return json.dumps(answer)


def _answer(task: JudgmentTask, messages: list[dict]) -> str:
    from evalharness.judge.heuristic import HeuristicCannotJudge, answer

    try:
        inputs = _inputs(task, messages)
    except ValueError as exc:  # a pydantic ValidationError too
        return json.dumps({"error": f"cannot read the {task.id} inputs: {exc}"})
    try:
        return answer(task, inputs).model_dump_json()
    except HeuristicCannotJudge as exc:
        return json.dumps({"error": str(exc)})


# -- the inputs a judge is shown, read back from its user message ----------------------------


def _inputs(task: JudgmentTask, messages: list[dict]) -> BaseModel:
    """The inputs a request shows its judge, read back from its user message: JSON, or for a
    task that renders its inputs its own way (``task.user``), that rendering parsed back."""
    user = next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")
    if task.user is None:
        return task.input.model_validate_json(user)
    parse = _FROM_PROMPT.get(task.user)
    if parse is None:
        raise ValueError(f"the fake server cannot read the {task.id} user message back")
    return parse(user)


_QUESTION = "Question the rows answer: "
_CONTEXT = "Context:\n"
_CLAIMS = "\n\nClaims:\n"
_NO_TEXT = "(no text)"
_HEAD = re.compile(
    r"Rows (?P<n>\d+)(?: \(from (?P<source>.*)\))?: (?P<count>\d+) rows?"
    r"(?:; availability: (?P<quantity>.*?))?"
    r"(?::|(?P<empty> — the query matched nothing \(columns: (?P<columns>.*)\)))")
"""The head line of one table in :func:`claim_support_prompt`."""
_PIPE = re.compile(r"(?<!\\)\|")
"""A cell boundary in a Markdown table row: a ``|`` not escaped."""


def _claim_support_from_prompt(text: str) -> ClaimSupportInput:
    r""":func:`claim_support_prompt` read back: the question, the context (stripped; ``""``
    for ``(no text)``), each table's columns, shown rows, source and availability columns, and
    the claims. Cells come back as strings, but ``NULL`` (``None``) and numbers that print as
    written (``"3"``: 3, ``"1.5"``: 1.5); rows past the prompt's limit are not shown, so
    not read back. Raises ``ValueError`` for text of another shape.

    >>> from evalharness.judge.tasks import RowTable
    >>> inputs = ClaimSupportInput(context="Warm.", claims=["a", "b\nc"], question="Q?", tables=[
    ...     RowTable(columns=["name", "n"], rows=[["A|B", 3], [None, 1.5]], source="sql"),
    ...     RowTable(columns=["n"], rows=[], quantity_columns=["n"])])
    >>> _claim_support_from_prompt(claim_support_prompt(inputs)) == inputs
    True
    """
    question = None
    if text.startswith(_QUESTION):
        question, found, text = text[len(_QUESTION):].partition("\n\n" + _CONTEXT)
        text = _CONTEXT + text if found else ""
    if not text.startswith(_CONTEXT):
        raise ValueError(f"a claim_support prompt starts with {_CONTEXT!r}")
    body, claims = _split_claims(text[len(_CONTEXT):])
    context, tables = _split_tables(body)
    return ClaimSupportInput(context="" if context == _NO_TEXT else context,
                             claims=_numbered(claims), tables=tables, question=question)


def _split_claims(text: str) -> tuple[str, str]:
    """``text`` cut at its last ``Claims:`` section (followed by claim 1, or by nothing)."""
    end = len(text)
    while (at := text.rfind(_CLAIMS, 0, end)) >= 0:
        rest = text[at + len(_CLAIMS):]
        if not rest or rest.startswith("1. ") or rest.split("\n", 1)[0] == "1.":
            return text[:at], rest
        end = at + len(_CLAIMS) - 1
    raise ValueError("a claim_support prompt ends with its numbered claims")


def _numbered(text: str) -> list[str]:
    """The items of a numbered list (``1. a``); an item runs on until the next number's
    line, its lines joined with newlines."""
    items: list[list[str]] = []
    for line in text.split("\n") if text else []:
        number = f"{len(items) + 1}."
        if line.startswith(number + " ") or line == number:
            items.append([line[len(number) + 1:]])
        elif items:
            items[-1].append(line)
        else:
            raise ValueError(f"the claims start with claim 1, not {line!r}")
    return ["\n".join(lines) for lines in items]


def _split_tables(body: str) -> tuple[str, list[RowTable]]:
    """The context text and the tables after it: cut at the first ``Rows 1`` paragraph from
    which the rest reads as tables 1, 2, … (a context may hold such a paragraph)."""
    for m in re.finditer(r"\n\nRows 1\b", body):
        tables = _tables(body[m.start() + 2:])
        if tables is not None:
            return body[:m.start()], tables
    return body, []


def _tables(text: str) -> list[RowTable] | None:
    """Tables 1, 2, … one a paragraph; ``None`` when a paragraph is not the next table."""
    tables = []
    for n, paragraph in enumerate(text.split("\n\n"), 1):
        table = _table(n, paragraph)
        if table is None:
            return None
        tables.append(table)
    return tables


def _table(n: int, paragraph: str) -> RowTable | None:
    """Table ``n`` from its paragraph: the head line, then the Markdown table (or the
    columns of a table without rows); ``None`` for any other paragraph."""
    head, *lines = paragraph.split("\n")
    m = _HEAD.fullmatch(head)
    if m is None or int(m["n"]) != n or bool(m["empty"]) != (m["count"] == "0"):
        return None
    quantity = m["quantity"].split(", ") if m["quantity"] else None
    if m["empty"]:
        columns = m["columns"].split(", ") if m["columns"] else []
        return None if lines else RowTable(columns=columns, rows=[],
                                           quantity_columns=quantity, source=m["source"])
    if lines and re.fullmatch(r"\(and \d+ more rows\)", lines[-1]):
        lines = lines[:-1]
    if len(lines) < 3:
        return None
    header, *rows = [_cells(line) or [] for line in lines[:1] + lines[2:]]
    if not header or lines[1] != "|---|" + "---|" * (len(header) - 1):
        return None
    if any(not row or row[0] != str(i) for i, row in enumerate(rows, 1)):
        return None
    return RowTable(columns=header[1:], rows=[list(map(_value, row[1:])) for row in rows],
                    quantity_columns=quantity, source=m["source"])


def _cells(line: str) -> list[str] | None:
    r"""The cells of one Markdown table line (``|`` unescaped); ``None`` for another line.

    >>> _cells(r"| 1 | A\|B |  | 3 |")
    ['1', 'A|B', '', '3']
    """
    if not (line.startswith("| ") and line.endswith(" |")):
        return None
    return [part[1:-1].replace("\\|", "|") for part in _PIPE.split(line)[1:-1]]


def _value(cell: str) -> Any:
    """A cell's value: ``None`` for ``NULL``, a number for a number written as Python prints
    it, else the text.

    >>> [_value(c) for c in ["3", "1.5", "-2", "NULL", "007", "1.50", "nan", "X"]]
    [3, 1.5, -2, None, '007', '1.50', 'nan', 'X']
    """
    if cell == "NULL":
        return None
    for kind in (int, float):
        try:
            number = kind(cell)
        except ValueError:
            continue
        if str(number) == cell and math.isfinite(number):
            return number
    return cell


_FROM_PROMPT: dict[Callable[[Any], str], Callable[[str], BaseModel]] = {
    claim_support_prompt: _claim_support_from_prompt,
}
"""The inverse of each task's ``user`` rendering the server can read back."""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A fake OpenAI-compatible judge server.")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--no-structured", action="store_true",
                        help="refuse response_format json_schema (HTTP 400), like some servers")
    parser.add_argument("--canned", action="store_true",
                        help="answer every task with a minimal schema-fitting JSON (benchmarks)")
    args = parser.parse_args(argv)
    server = FakeOpenAI(port=args.port, latency_s=args.latency_ms / 1000,
                        structured=not args.no_structured, canned=args.canned)
    print(f"fake OpenAI-compatible server on {server.base_url}", flush=True)
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":  # pragma: no cover
    main()
