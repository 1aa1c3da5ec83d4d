"""How fast, and in how much memory, spans sent over OTLP/HTTP are taken and stored:
``evalharness traces receive`` against Arize Phoenix's own OTLP intake, on this machine.

Generates ``--spans`` OpenInference LangChain RAG spans (``trace_import.rag_trace``: a chain,
a router, a retriever with five documents, a reranker, a chat model call…), encodes them as
OTLP/HTTP requests of ``--batch`` spans — binary protobuf, and OTLP JSON — and sends them
from ``--senders`` concurrent keep-alive connections (a 429/503 is retried after its
``Retry-After``, as the SDK exporters do). Each server runs in a process of its own, started
for the run on 127.0.0.1 and stopped after it. Printed for each:

* **accepted spans/s**: spans over the time from the first request to the last 200;
* **stored spans/s**: spans over the time until every span is stored — for ours, written to
  the span files (a request is answered 200 only once written; the files are then read back
  and counted after the receiver stops); for Phoenix, which stores behind its answer, until
  its database (``PHOENIX_WORKING_DIR/phoenix.db``, polled read-only) holds them all;
* **peak RSS**: the largest resident memory of the server's process tree, sampled every
  50 ms from its start to its end;
* the ratios ours / Phoenix (the issue's target: at least 10 times Phoenix's stored spans/s
  at no more than 25% of its peak memory). Phoenix answers OTLP JSON with 415: our JSON is
  then compared with Phoenix's protobuf, and the table says so.

Phoenix is run from its own environment (``--phoenix-python``; without it, it is skipped
with a message). It listens on 127.0.0.1 only: ``PHOENIX_HOST`` binds its HTTP server, and
its gRPC receiver — which Phoenix 20.x binds to every interface whatever ``PHOENIX_HOST``
says (``phoenix/server/grpc_server.py``: ``[::]:PORT``; no setting in ``phoenix/config.py``
changes it but ``--read-only``, which also stops its HTTP intake) — is bound to 127.0.0.1 by
a launcher that rewrites that address before Phoenix starts.

    python benchmarks/otlp_intake.py
    python benchmarks/otlp_intake.py --phoenix-python /work/phoenix-venv/bin/python
    python benchmarks/otlp_intake.py --spans 10000 --senders 8 --json
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trace_import import rag_trace  # noqa: E402

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
SCOPE = {"name": "openinference.instrumentation.langchain", "version": "0.1.30"}
RESOURCE = {"attributes": [{"key": "service.name", "value": {"stringValue": "shop-assistant"}},
                           {"key": "telemetry.sdk.language",
                            "value": {"stringValue": "python"}}]}
PHOENIX_LAUNCHER = """
import sys
import grpc.aio
_server = grpc.aio.server
def server(*args, **kwargs):  # Phoenix binds gRPC to [::]: bind it to this machine only
    made = _server(*args, **kwargs)
    add = made.add_insecure_port
    made.add_insecure_port = lambda address: add(address.replace("[::]:", "127.0.0.1:", 1))
    return made
grpc.aio.server = server
from phoenix.server.main import main
sys.argv = ["phoenix", "serve", "--no-internet"]
main()
"""


# -- the requests --------------------------------------------------------------------------


def json_batches(spans: int, batch: int, seed: int = 7) -> list[list[dict]]:
    """``spans`` OTLP JSON span objects of RAG traces, ``batch`` at a time."""
    rng = random.Random(seed)
    made: list[dict] = []
    number = 0
    while len(made) < spans:
        made += rag_trace(rng, number)
        number += 1
    made = made[:spans]
    return [made[i:i + batch] for i in range(0, spans, batch)]


def json_body(batch: list[dict]) -> bytes:
    return json.dumps({"resourceSpans": [{"resource": RESOURCE, "scopeSpans": [
        {"scope": SCOPE, "spans": batch}]}]}, separators=(",", ":")).encode()


def protobuf_body(batch: list[dict]) -> bytes:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    block = request.resource_spans.add()
    for kv in RESOURCE["attributes"]:
        _key_value(block.resource.attributes.add(), kv)
    scope = block.scope_spans.add()
    scope.scope.name, scope.scope.version = SCOPE["name"], SCOPE["version"]
    for raw in batch:
        span = scope.spans.add()
        span.trace_id = bytes.fromhex(raw["traceId"])
        span.span_id = bytes.fromhex(raw["spanId"])
        if raw.get("parentSpanId"):
            span.parent_span_id = bytes.fromhex(raw["parentSpanId"])
        span.name, span.kind = raw["name"], raw["kind"]
        span.start_time_unix_nano = int(raw["startTimeUnixNano"])
        span.end_time_unix_nano = int(raw["endTimeUnixNano"])
        for kv in raw["attributes"]:
            _key_value(span.attributes.add(), kv)
        for event in raw.get("events", []):
            made = span.events.add()
            made.name, made.time_unix_nano = event["name"], int(event["timeUnixNano"])
            for kv in event["attributes"]:
                _key_value(made.attributes.add(), kv)
        if raw.get("status", {}).get("code"):
            span.status.code = raw["status"]["code"]
    return request.SerializeToString()


def _key_value(target, kv: dict) -> None:
    target.key = kv["key"]
    (kind, value), = kv["value"].items()
    if kind == "stringValue":
        target.value.string_value = value
    elif kind == "intValue":
        target.value.int_value = int(value)
    elif kind == "doubleValue":
        target.value.double_value = value
    else:
        target.value.bool_value = value


# -- processes -----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and every process under it."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    fields = fh.read().rsplit(b")", 1)[1].split()
                parents[int(entry)] = int(fields[1])
            except (OSError, IndexError, ValueError):
                continue
    tree = {pid}
    grown = True
    while grown:
        grown = False
        for child, parent in parents.items():
            if parent in tree and child not in tree:
                tree.add(child)
                grown = True
    total = 0
    for member in tree:
        try:
            with open(f"/proc/{member}/status") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


class Sampler:
    """The peak RSS of a process tree, sampled every 50 ms in a thread."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak = pid, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_rss(self.pid))
            self._stop.wait(0.05)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def wait_listening(port: int, proc: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {seconds:.0f} s")


def end(proc: subprocess.Popen, grace: float = 30) -> None:
    """SIGTERM to the process group the server was started in, then SIGKILL after
    ``grace`` seconds."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


# -- sending -------------------------------------------------------------------------------


def send_all(port: int, bodies: list[tuple[bytes, int]], content_type: str,
             senders: int) -> dict:
    """Send every ``(body, spans)`` from ``senders`` threads; ``{"seconds": from the first
    request to the last 200, "retried": 429/503 answers, "refused": the first other answer
    (the run stops there)}``."""
    lock = threading.Lock()
    state = {"next": 0, "retried": 0, "refused": None, "last": 0.0}

    def sender() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while True:
            with lock:
                if state["next"] >= len(bodies) or state["refused"]:
                    break
                body, _ = bodies[state["next"]]
                state["next"] += 1
            while True:
                try:
                    connection.request("POST", "/v1/traces", body=body,
                                       headers={"Content-Type": content_type})
                    response = connection.getresponse()
                    answer = response.read()
                except (OSError, http.client.HTTPException):
                    connection.close()
                    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                    time.sleep(0.2)
                    continue
                if response.status == 200:
                    with lock:
                        state["last"] = time.monotonic()
                    break
                if response.status in (429, 502, 503, 504):
                    with lock:
                        state["retried"] += 1
                    time.sleep(float(response.getheader("Retry-After") or 0.5))
                    continue
                with lock:
                    state["refused"] = state["refused"] or (
                        f"{response.status} {answer[:120].decode('utf-8', 'replace')}")
                return
        connection.close()

    began = time.monotonic()
    threads = [threading.Thread(target=sender) for _ in range(senders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"began": began, "seconds": state["last"] - began, "retried": state["retried"],
            "refused": state["refused"]}


# -- the two servers -------------------------------------------------------------------------


def run_ours(bodies: list[tuple[bytes, int]], content_type: str, senders: int,
             work: Path) -> dict:
    out = work / f"received-{'pb' if content_type == PROTOBUF else 'json'}"
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "evalharness.cli", "traces", "receive", "--out", str(out),
         "--host", "127.0.0.1", "--port", str(port), "--quiet", "--min-free-mb", "50"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        start_new_session=True, text=True)
    try:
        wait_listening(port, proc)
        sampler = Sampler(proc.pid)
        sent = send_all(port, bodies, content_type, senders)
        stopping = time.monotonic()
        os.killpg(proc.pid, signal.SIGTERM)  # writes what it took, completes the files
        err = proc.communicate(timeout=120)[1]
        complete = time.monotonic() - stopping
        peak = sampler.stop()
    finally:
        end(proc)
    from evalharness.spans.paths import trace_files
    from evalharness.spans.readers import detect

    stored = sum(1 for f in trace_files(out) for _ in detect(f).read(f))
    spans = sum(n for _, n in bodies)
    if stored != spans:
        raise RuntimeError(f"{stored} spans in the files, {spans} sent; receiver said: {err}")
    return {"accepted": spans / sent["seconds"], "stored": spans / sent["seconds"],
            "peak_mb": peak / 2**20, "retried": sent["retried"], "refused": sent["refused"],
            "files_complete_s": complete, "files": len(trace_files(out))}


def run_phoenix(python: str, bodies: list[tuple[bytes, int]], content_type: str,
                senders: int, work: Path, timeout: float) -> dict:
    port, grpc_port = free_port(), free_port()
    working = Path(tempfile.mkdtemp(prefix="phoenix-", dir=work))
    env = {**os.environ, "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(port),
           "PHOENIX_GRPC_PORT": str(grpc_port), "PHOENIX_WORKING_DIR": str(working),
           "PHOENIX_TELEMETRY_ENABLED": "false", "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false"}
    log = open(work / "phoenix.log", "a")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([python, "-c", PHOENIX_LAUNCHER], env=env, stdin=subprocess.DEVNULL,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        sampler = Sampler(proc.pid)
        wait_listening(port, proc)
        _wait_ready(port)
        _only_loopback(proc.pid, (port, grpc_port))
        sent = send_all(port, bodies, content_type, senders)
        if sent["refused"]:
            return {"refused": sent["refused"], "peak_mb": sampler.stop() / 2**20}
        spans = sum(n for _, n in bodies)
        stored_at = _wait_stored(working / "phoenix.db", spans, timeout)
        peak = sampler.stop()
    finally:
        end(proc)
        log.close()
    return {"accepted": spans / sent["seconds"], "stored": spans / (stored_at - sent["began"]),
            "peak_mb": peak / 2**20, "retried": sent["retried"], "refused": None}


def _wait_ready(port: int, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("GET", "/healthz")
            if connection.getresponse().status == 200:
                return
        except (OSError, http.client.HTTPException):
            pass
        time.sleep(0.2)
    raise RuntimeError("Phoenix did not answer /healthz")


def _only_loopback(pid: int, ports: tuple[int, ...]) -> None:
    """Refuse to go on when one of Phoenix's ports listens beyond 127.0.0.1."""
    listening = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True).stdout
    for line in listening.splitlines():
        local = line.split()[3]
        if any(local.endswith(f":{p}") for p in ports) and "127.0.0.1" not in local:
            raise RuntimeError(f"Phoenix (process {pid}) listens on {local}: not only this "
                               "machine; stopping")


def _wait_stored(db: Path, spans: int, timeout: float) -> float:
    """The moment Phoenix's database holds ``spans`` spans (polled every 0.2 s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as connection:
                count = connection.execute("SELECT COUNT(*) FROM spans").fetchone()[0]
            connection.close()
        except sqlite3.Error:
            count = 0
        if count >= spans:
            return time.monotonic()
        time.sleep(0.2)
    raise RuntimeError(f"Phoenix stored fewer than {spans} spans in {timeout:.0f} s")


def _phoenix_version(python: str) -> str | None:
    found = subprocess.run([python, "-c", "import phoenix; print(phoenix.__version__)"],
                           capture_output=True, text=True)
    return found.stdout.strip() if found.returncode == 0 else None


# -- the report ------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--senders", type=int, default=4)
    parser.add_argument("--phoenix-python", metavar="PYTHON",
                        help="the python of an environment with arize-phoenix (default: "
                             "Phoenix is skipped)")
    parser.add_argument("--phoenix-timeout", type=float, default=900,
                        help="seconds to wait for Phoenix to store every span")
    parser.add_argument("--work", type=Path, default=None,
                        help="folder for the span files and Phoenix's database (default: a "
                             "temporary one, removed afterwards)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    batches = json_batches(args.spans, args.batch)
    bodies = {JSON: [(json_body(b), len(b)) for b in batches],
              PROTOBUF: [(protobuf_body(b), len(b)) for b in batches]}
    print(f"{args.spans:,} spans in {len(batches)} requests of {args.batch}; {args.senders} "
          f"senders; protobuf {sum(len(b) for b, _ in bodies[PROTOBUF]) / 2**20:.0f} MB, "
          f"JSON {sum(len(b) for b, _ in bodies[JSON]) / 2**20:.0f} MB; "
          f"{os.cpu_count()} CPUs", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="otlp-intake-") as temporary:
        work = args.work or Path(temporary)
        work.mkdir(parents=True, exist_ok=True)
        results: dict[str, dict] = {}
        for name, content_type in (("ours, protobuf", PROTOBUF), ("ours, OTLP JSON", JSON)):
            print(f"running {name}…", file=sys.stderr)
            results[name] = run_ours(bodies[content_type], content_type, args.senders, work)
        version = _phoenix_version(args.phoenix_python) if args.phoenix_python else None
        if args.phoenix_python is None:
            print("Phoenix skipped: give --phoenix-python PYTHON, the python of an environment "
                  "where arize-phoenix is installed", file=sys.stderr)
        elif version is None:
            print(f"Phoenix skipped: {args.phoenix_python} cannot import phoenix",
                  file=sys.stderr)
        else:
            for name, content_type in ((f"Phoenix {version}, protobuf", PROTOBUF),
                                       (f"Phoenix {version}, OTLP JSON", JSON)):
                print(f"running {name}…", file=sys.stderr)
                results[name] = run_phoenix(args.phoenix_python, bodies[content_type],
                                            content_type, args.senders, work,
                                            args.phoenix_timeout)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    _print(results)


def _print(results: dict[str, dict]) -> None:
    print(f"{'':32} {'accepted spans/s':>17} {'stored spans/s':>15} {'peak RSS':>10}")
    for name, r in results.items():
        if r.get("refused"):
            print(f"{name:32} refused: {r['refused'][:70]}")
            continue
        print(f"{name:32} {r['accepted']:>17,.0f} {r['stored']:>15,.0f} "
              f"{r['peak_mb']:>7,.0f} MB" + (f"  ({r['retried']} answers 429/503, retried)"
                                            if r["retried"] else ""))
    for name, r in results.items():
        if "files_complete_s" in r:
            print(f"{name}: {r['files']} files, every one complete (renamed from *.part) "
                  f"{r['files_complete_s']:.1f} s after the last 200 (the receiver's stop)")
    phoenix = {k.rsplit(", ", 1)[1]: v for k, v in results.items() if k.startswith("Phoenix")}
    pb = phoenix.get("protobuf")
    if not pb or pb.get("refused"):
        return
    for encoding, ours in (("protobuf", results["ours, protobuf"]),
                           ("OTLP JSON", results["ours, OTLP JSON"])):
        against = phoenix.get(encoding)
        said = ""
        if against is None or against.get("refused"):
            against, said = pb, " (against Phoenix's protobuf: Phoenix refuses OTLP JSON)"
        speed = ours["stored"] / against["stored"]
        memory = ours["peak_mb"] / against["peak_mb"]
        verdict = "meets" if speed >= 10 and memory <= 0.25 else "misses"
        print(f"ours/Phoenix, {encoding}{said}: stored spans/s ×{speed:,.1f}, peak memory "
              f"{memory:.0%} — {verdict} the target (×10 at ≤ 25%)")


if __name__ == "__main__":
    main()
