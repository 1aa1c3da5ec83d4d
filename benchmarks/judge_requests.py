"""How many judge requests the judged metrics cost, and how close the judge phase comes to its
floor, against a server that answers every request in a fixed time.

N shop cases (the shop's cases, repeated with new ids) are answered once by the reference
assistant; then the judged metrics — faithfulness, answer relevancy and context precision
(from the judge, labels ignored) — are evaluated through the ``openai`` judge backend against
the fake OpenAI-compatible server, once per judge concurrency C, each time with a fresh cache
(every judgment is a request), and once more from the cache (a rerun must make zero requests). Every case is distinct (see :func:`build_inputs`).

The server's *canned* mode answers every request after exactly ``--latency-ms`` with a minimal
JSON object that fits the task's schema and does no work per answer, so the judge phase is the
client's doing. It is measured at the server, from the first request's arrival to the last
response, and compared with its floor:

    floor = max(total request time / C, the longest chain of dependent requests of one case)

(``total request time`` = requests × latency; the chain of a case is, per metric, the number of
its judgments, which the judged metrics make one after the other: claims then their
verification; questions then their embeddings; one chunk-usefulness request.)

Beside each cold run, the same number of requests is sent at the same concurrency by a bare
client — raw HTTP/1.1 on asyncio, no work of its own, no dependencies between requests — and
timed the same way (column ``stub``: its phase over its floor, ``requests × latency / C``):
what the fake server and this machine allow in the same run, so a ratio near it is the
server's, not the judge client's.

    python benchmarks/judge_requests.py                      # N=100, 200 ms, C = 8, 32, 64
    python benchmarks/judge_requests.py --concurrency 16 --heuristic-server

Target (issues 10 and 25): judge phase ≤ 1.25 × floor at C = 8, 32 and 64; requests per case
for the three metrics ≤ 4.5.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
SHOP = ROOT / "scenarios" / "shop"
RETRIEVER_EVALUATOR = "context_precision"  # from evalharness_retrieval


def start_server(latency_ms: float, canned: bool) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "evalharness.testing.fake_openai", "--port", "0",
         "--latency-ms", str(latency_ms), *(["--canned"] if canned else [])],
        stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    return proc, line.rsplit(" ", 1)[-1].strip()


def stats(base_url: str, reset: bool = False) -> dict:
    with urllib.request.urlopen(f"{base_url}/stats{'?reset=1' if reset else ''}") as response:
        return json.load(response)


def bare_phase(base_url: str, requests: int, concurrency: int) -> float:
    """The phase, timed at the server, of ``requests`` chat requests sent over ``concurrency``
    keep-alive connections by a client that does nothing else (raw HTTP/1.1 on asyncio)."""
    parts = urlsplit(base_url)
    body = json.dumps({"model": "bare", "messages": [{"role": "user", "content": "{}"}],
                       "response_format": {"type": "json_schema",
                                           "json_schema": {"name": "claims", "schema": {}}}})
    request = (f"POST {parts.path}/chat/completions HTTP/1.1\r\nHost: {parts.netloc}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
               f"{body}").encode()
    left = [requests]

    async def connection() -> None:
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        while left[0] > 0:
            left[0] -= 1
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            await reader.readexactly(length)
        writer.close()

    async def send_all() -> None:
        await asyncio.gather(*(connection() for _ in range(concurrency)))

    stats(base_url, reset=True)
    asyncio.run(send_all())
    after = stats(base_url)
    return after["last_response_at"] - after["first_request_at"]


def build_inputs(folder: Path, n: int) -> None:
    """Cases and the reference assistant's traces for ``n`` cases. Copies of a shop case get
    a numbered sentence in their answer and reference answer, so that no judgment repeats
    (a repeated one would be a cache hit or share a request in flight)."""
    from evalharness.importing import import_file
    from evalharness.models import Case

    assistant = import_file(SHOP / "assistant", "bench_shop")

    base = [json.loads(line) for line in (SHOP / "cases.jsonl").read_text().splitlines()]
    cases, traces = [], []
    for i in range(n):
        record = json.loads(json.dumps(base[i % len(base)]))
        record["id"] = f"{record['id']}-{i // len(base)}"
        note = f" This is answer number {i}."
        if record.get("gold", {}).get("answer"):
            record["gold"]["answer"] += note
        case = Case.model_validate(record)
        trace = assistant.answer(case)
        if trace.generator is not None and trace.generator.answer:
            trace.generator.answer += note
        cases.append(record)
        traces.append(trace.model_dump(mode="json"))
    (folder / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    (folder / "traces.jsonl").write_text("".join(json.dumps(t) + "\n" for t in traces))


SCENARIO = """
name: judge-requests
cases: cases.jsonl
traces: traces.jsonl
corpus: {corpus}
pipeline: {{retriever: {{}}, generator: {{after: [retriever]}}}}
judge: {{backend: openai, model: fake-judge, base_url: "{base_url}", cache: {cache},
         concurrency: {concurrency}}}
evaluators:
  retriever: [{{{retriever}: {{source: judge, k: [5]}}}}]
  generator: [faithfulness, answer_relevancy]
{batch}
"""


def run_once(scenario_path: Path, out: Path) -> tuple[float, dict, list]:
    from evalharness.report import build_report
    from evalharness.runner import run
    from evalharness.scenario import load_scenario

    scenario = load_scenario(scenario_path)
    t0 = time.perf_counter()
    outcome = asyncio.run(run(scenario, out))
    wall = time.perf_counter() - t0
    return wall, build_report(scenario, outcome).model_dump(mode="json"), outcome.results


def longest_chain(results: list) -> int:
    """The most judge requests one case waits for one after the other: per metric value,
    the number of its judgment records (the judged metrics make them in sequence)."""
    longest = 0
    for result in results:
        for component in result.components.values():
            for value in component.metrics.values():
                records = value.details.get("judgments") or []
                longest = max(longest, sum(1 for r in records if not r.get("cached")))
    return longest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--concurrency", default="8,32,64",
                        help="judge concurrencies to measure, comma-separated")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="the scenario's batch_size (default: the scenario default, 32)")
    parser.add_argument("--heuristic-server", action="store_true",
                        help="the server answers with the heuristic judge (real work per "
                             "answer) instead of canned JSON")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    latency = args.latency_ms / 1000

    proc, base_url = start_server(args.latency_ms, canned=not args.heuristic_server)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            build_inputs(folder, args.cases)
            for c in levels:
                scenario = folder / f"bench-{c}.yaml"
                scenario.write_text(SCENARIO.format(
                    corpus=SHOP / "blog_chunks.jsonl", base_url=base_url, concurrency=c,
                    cache=f"cache-{c}.sqlite", retriever=RETRIEVER_EVALUATOR,
                    batch="" if args.batch_size is None else f"batch_size: {args.batch_size}"))
                runs = [("cold", folder / f"cold-{c}")]
                if c == levels[0]:
                    runs.append(("rerun", folder / f"rerun-{c}"))
                for label, out in runs:
                    stats(base_url, reset=True)
                    wall, report, results = run_once(scenario, out)
                    after = stats(base_url)
                    sent = {k: after["counts"].get(k, 0) for k in ("chat", "embeddings")}
                    phase = ((after["last_response_at"] - after["first_request_at"])
                             if after["first_request_at"] else 0.0)
                    total = sent["chat"] + sent["embeddings"]
                    bare = bare_phase(base_url, total, c) if label == "cold" and total else None
                    rows.append((c, label, wall, phase, report, sent, after["max_in_flight"],
                                 longest_chain(results), bare))
    finally:
        proc.terminate()
        proc.wait()

    mode = "heuristic answers" if args.heuristic_server else "canned answers, no work per answer"
    print(f"judged metrics over {args.cases} shop cases; fake server: {args.latency_ms:.0f} ms "
          f"per request, {mode}\n")
    print(f"{'C':>3s} {'run':5s} {'requests':>8s} {'req/case':>8s} {'reported':>8s} "
          f"{'chain':>5s} {'phase s':>8s} {'floor s':>8s} {'phase/floor':>11s} {'stub':>5s} "
          f"{'peak':>5s} {'wall s':>7s}")
    for c, label, wall, phase, report, sent, peak, chain, bare in rows:
        total = sent["chat"] + sent["embeddings"]
        reported = report["judge"]["usage"]["requests"] if report["judge"].get("usage") else 0
        floor = max(total * latency / c, chain * latency) if total else 0.0
        ratio = f"{phase / floor:11.2f}" if floor else f"{'—':>11s}"
        stub = f"{bare / (total * latency / c):5.2f}" if bare else f"{'—':>5s}"
        print(f"{c:3d} {label:5s} {total:8d} {total / args.cases:8.2f} {reported:8d} "
              f"{chain:5d} {phase:8.2f} {floor:8.2f} {ratio} {stub} "
              f"{sum(peak.values()):5d} {wall:7.2f}")
    first = next(r for r in rows if r[1] == "cold")
    print("\nper metric, first cold run: requests per case, judgments per case (a judgment "
          "answered from the cache or\nby an identical request in flight costs no request: "
          "the canned claims repeat, so some verifications do), errors")
    judgments = 0
    for name, comp in first[4]["components"].items():
        for metric, summary in comp["metrics"].items():
            usage = summary.get("judge")
            if usage:
                judgments += usage["judgments"]
                print(f"   {name + '.' + metric:38s} {usage['requests'] / args.cases:6.2f} "
                      f"{usage['judgments'] / args.cases:6.2f} {usage['errors']:6d}")
    print(f"   {'all judged metrics':38s} {first[5]['chat'] / args.cases + first[5]['embeddings'] / args.cases:6.2f} "
          f"{judgments / args.cases:6.2f}")
    print("\nstub: a bare client's phase over its floor, the same requests at the same C in "
          "the same run (what the fake\nserver and this machine allow)")
    print("target: phase/floor <= 1.25 at every C; requests per case <= 4.5; "
          "reported == requests; the rerun sends 0")


if __name__ == "__main__":
    main()
