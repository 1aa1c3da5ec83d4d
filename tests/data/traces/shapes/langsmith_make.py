"""Writes the ``langsmith_*`` fixtures of tests/test_trace_shapes_readers.py: the request
bodies the real langsmith Python SDK sends to ``POST /runs/batch`` and ``POST
/runs/multipart`` while it traces two LangChain-style RAG runs, caught by a stand-in server on
loopback (nothing leaves the machine).

The runs are posted and patched the way a long chain is traced: the root run is posted when
it starts and patched when it ends, in a later flush; a child that ends within one flush is
posted once, ended (the SDK folds its patch into the post); the LLM run is posted, then
patched after a flush. Ids and times are fixed, so every run writes the same files (the
SDK's runtime metadata aside, which is replaced by fixed values). Regenerate with

    pip install 'langsmith==0.15.1'
    python tests/data/traces/shapes/langsmith_make.py

The README next to this file says what each file imitates.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
T0 = datetime(2025, 6, 3, 9, 14, 2, 118000, tzinfo=UTC)
RUNTIME = {"sdk": "langsmith-py", "sdk_version": "0.15.1", "library": "langsmith",
           "platform": "Linux", "runtime": "python", "runtime_version": "3.11.7"}


def _id(n: int) -> uuid.UUID:
    return uuid.UUID(f"0196e4c1-{n:04x}-7000-8000-{n:012x}")


class _Capture(BaseHTTPRequestHandler):
    bodies: list[tuple[str, str, bytes]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.bodies.append((self.path, self.headers.get("Content-Type", ""), body))
        self.send_response(202)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args) -> None:
        pass


def _trace(client, case: str, question: str, docs: list[tuple[str, str]], answer: str,
           start: datetime) -> None:
    from langsmith.run_trees import RunTree

    n = 10 if case == "q101" else 20
    at = [start + timedelta(milliseconds=ms) for ms in (0, 12, 240, 260, 1900, 1950, 2000)]
    root = RunTree(id=_id(n), name="RunnableSequence", run_type="chain", client=client,
                   inputs={"question": question}, start_time=at[0], project_name="support-bot",
                   extra={"metadata": {"case_id": case}}, tags=["rag", "prod"])
    root.post()
    client.flush()
    retriever = root.create_child("VectorStoreRetriever", "retriever", run_id=_id(n + 1),
                                  inputs={"query": question}, start_time=at[1],
                                  extra={"metadata": {"ls_retriever_name": "vectorstore"}})
    retriever.post()
    retriever.end(end_time=at[2], outputs={"documents": [
        {"id": doc_id, "page_content": text, "metadata": {"source": "policies.md"},
         "type": "Document"} for doc_id, text in docs]})
    retriever.patch()
    llm = root.create_child("ChatOpenAI", "llm", run_id=_id(n + 2), start_time=at[3],
                            inputs={"messages": [[{"role": "user", "content": question}]]},
                            extra={"metadata": {"ls_provider": "openai",
                                                "ls_model_name": "gpt-4o-mini"}})
    llm.post()
    client.flush()
    llm.end(end_time=at[4], outputs={
        "generations": [[{"text": answer, "type": "ChatGeneration", "message": {
            "lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages",
                                                   "AIMessage"],
            "kwargs": {"content": answer, "type": "ai", "usage_metadata": {
                "input_tokens": 412, "output_tokens": 18, "total_tokens": 430}}}}]],
        "llm_output": {"model_name": "gpt-4o-mini"}})
    llm.patch()
    client.flush()
    root.end(end_time=at[6], outputs={"output": answer})
    root.patch()
    client.flush()


def _runs(multipart: bool) -> list[tuple[str, str, bytes]]:
    from langsmith import Client

    os.environ["LANGSMITH_DISABLE_RUN_COMPRESSION"] = "true"
    _Capture.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Capture)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = Client(api_url=f"http://127.0.0.1:{server.server_port}", api_key="ls-fixture",
                        info={"version": "0.11.0", "batch_ingest_config": {
                            "use_multipart_endpoint": multipart, "size_limit": 100,
                            "size_limit_bytes": None, "scale_up_nthreads_limit": 16,
                            "scale_up_qsize_trigger": 1000,
                            "scale_down_nempty_trigger": 4}},
                        omit_traced_runtime_info=True)
        _trace(client, "q101", "What is the refund window for opened items?",
               [("returns-3", "Opened items may be returned within 14 days."),
                ("returns-1", "Unopened items may be returned within 30 days.")],
               "Opened items can be returned within 14 days of delivery.", T0)
        _trace(client, "q102", "Do you ship to Norway?",
               [("shipping-7", "We ship to Norway in 5-7 business days.")],
               "Yes, we ship to Norway in 5-7 business days.", T0 + timedelta(seconds=5))
        client.flush()
    finally:
        server.shutdown()
    return list(_Capture.bodies)


def main() -> None:
    batch = _runs(multipart=False)
    assert {path for path, *_ in batch} == {"/runs/batch"}, batch
    payloads = [json.loads(body) for *_, body in batch]
    # several payloads, one a line, as a proxy or a test double logs each request body
    (HERE / "langsmith_batch_payloads.jsonl").write_text(
        "".join(json.dumps(p) + "\n" for p in payloads))
    # one body holding the post and the patch of the same runs (what a client that does not
    # fold patches into posts sends; the API takes both lists in one body), pretty-printed
    one = {"post": [r for p in payloads for r in p.get("post", [])],
           "patch": [r for p in payloads for r in p.get("patch", [])]}
    (HERE / "langsmith_batch_payload.json").write_text(json.dumps(one, indent=2) + "\n")
    multi = _runs(multipart=True)
    assert {path for path, *_ in multi} == {"/runs/multipart"}, multi
    # the multipart bodies as sent, one after another (each ends with its closing boundary)
    (HERE / "langsmith_multipart.txt").write_bytes(b"".join(body for *_, body in multi))


if __name__ == "__main__":
    main()
