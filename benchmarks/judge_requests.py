"""How many judge requests the judged metrics cost, and how long they take, against a slow server.

N shop cases (the shop's cases, repeated with new ids) are answered once by the reference
assistant; then the judged metrics — faithfulness, answer relevancy and context precision
(from the judge, labels ignored) — are evaluated twice through the ``openai`` judge backend
against the fake OpenAI-compatible server with added latency per request: a cold run, and a
rerun that must make zero requests (the cache).

    python benchmarks/judge_requests.py --cases 100 --latency-ms 200 --concurrency 16

Printed: requests per case per metric, wall time, effective concurrency (requests × latency
÷ wall time), the ideal wall time (requests × latency ÷ concurrency) and the ratio to it.
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

ROOT = Path(__file__).resolve().parent.parent
SHOP = ROOT / "scenarios" / "shop"
RETRIEVER_EVALUATOR = "context_precision"  # from evalharness_retrieval


def start_server(latency_ms: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "evalharness.testing.fake_openai", "--port", "0",
         "--latency-ms", str(latency_ms)], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    return proc, line.rsplit(" ", 1)[-1].strip()


def stats(base_url: str) -> dict:
    with urllib.request.urlopen(f"{base_url}/stats") as response:
        return json.load(response)


def build_inputs(folder: Path, n: int) -> None:
    """Cases and the reference assistant's traces for ``n`` cases."""
    from evalharness.importing import import_file
    from evalharness.models import Case

    assistant = import_file(SHOP / "assistant.py", "bench_shop")

    base = [json.loads(line) for line in (SHOP / "cases.jsonl").read_text().splitlines()]
    cases, traces = [], []
    for i in range(n):
        record = dict(base[i % len(base)])
        record["id"] = f"{record['id']}-{i // len(base)}"
        case = Case.model_validate(record)
        trace = assistant.answer(case)
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
judge: {{backend: openai, model: fake-judge, base_url: "{base_url}", cache: cache.sqlite,
         concurrency: {concurrency}}}
evaluators:
  retriever: [{{{retriever}: {{source: judge, k: [5]}}}}]
  generator: [faithfulness, answer_relevancy]
batch_size: {batch}
"""


def run_once(scenario_path: Path, out: Path) -> tuple[float, dict]:
    from evalharness.report import build_report
    from evalharness.runner import run
    from evalharness.scenario import load_scenario

    scenario = load_scenario(scenario_path)
    t0 = time.perf_counter()
    outcome = asyncio.run(run(scenario, out))
    wall = time.perf_counter() - t0
    return wall, build_report(scenario, outcome).model_dump(mode="json")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=100)
    args = parser.parse_args()

    proc, base_url = start_server(args.latency_ms)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            build_inputs(folder, args.cases)
            scenario = folder / "bench.yaml"
            scenario.write_text(SCENARIO.format(
                corpus=SHOP / "blog_chunks.jsonl", base_url=base_url,
                concurrency=args.concurrency, retriever=RETRIEVER_EVALUATOR,
                batch=args.batch_size))
            rows = []
            for label in ("cold", "rerun"):
                before = stats(base_url)["counts"]
                wall, report = run_once(scenario, folder / label)
                after = stats(base_url)
                sent = {k: after["counts"].get(k, 0) - before.get(k, 0)
                        for k in ("chat", "embeddings")}
                rows.append((label, wall, report, sent, after["max_in_flight"]))
    finally:
        proc.terminate()
        proc.wait()

    latency = args.latency_ms / 1000
    print(f"judged metrics over {args.cases} shop cases; fake server with "
          f"{args.latency_ms:.0f} ms per request; judge concurrency {args.concurrency}\n")
    for label, wall, report, sent, peak in rows:
        total = sent["chat"] + sent["embeddings"]
        print(f"== {label} run: {total} requests ({sent['chat']} chat, {sent['embeddings']} "
              f"embeddings), wall {wall:.2f} s")
        print(f"   {'metric':38s} {'requests/case':>13s} {'cache hits':>10s} {'errors':>7s}")
        for name, comp in report["components"].items():
            for metric, summary in comp["metrics"].items():
                usage = summary.get("judge")
                if usage:
                    print(f"   {name + '.' + metric:38s} {usage['requests'] / args.cases:13.2f} "
                          f"{usage['cache_hits']:10d} {usage['errors']:7d}")
        print(f"   requests per case, all judged metrics: {total / args.cases:.2f}")
        if total:
            ideal = total * latency / args.concurrency
            effective = total * latency / wall
            print(f"   effective concurrency {effective:.1f} of {args.concurrency}; ideal wall "
                  f"{ideal:.2f} s; wall / ideal = {wall / ideal:.2f} (target <= 1.5)")
            print(f"   peak requests in flight at the server: {peak}")
        print()


if __name__ == "__main__":
    main()
