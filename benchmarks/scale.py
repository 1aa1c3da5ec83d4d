"""How evalharness scales: a shop-like scenario of 1k and 10k cases, run offline end to end.

For each size, a scenario is generated next to its cases: the shop's system (the reference
assistant, ``shop.assistant:answer``), database, corpus, heuristic judge, and
every evaluator and gate of ``scenarios/shop.yaml`` (read from that file, paths made
absolute). It is run in a fresh subprocess::

    python -m evalharness.cli scenario <generated>.yaml --quiet --out <folder>

(with ``--no-headroom`` unless ``--headroom`` is given: the oracle reruns of failed cases
are an extra phase, measured separately) and that subprocess's wall time and peak resident
memory (``os.wait4``'s ``ru_maxrss``) are
measured. Printed: one row per size (cases, wall s, CPU s, peak RSS MB, cases/s, whether
the gates passed), then the growth
factors of the largest size over the smallest, and whether the target is met.

    python benchmarks/scale.py                      # --sizes 1000 10000
    python benchmarks/scale.py --sizes 1000 --keep  # keep the generated scenarios and runs
    python benchmarks/scale.py --headroom           # also the oracle reruns of failed cases
    python benchmarks/scale.py --executor ray       # + the same runs on Ray, 1 and 2 workers

``--executor ray`` (the ``ray`` extra) runs each size again on a Ray cluster started on this
machine (``ray start --head --num-cpus K --block``, K = 1 and 2 worker CPUs, stopped after
each run) and prints each run's wall time as a ratio to the local executor's in the same
invocation; then an I/O-bound system — the shop assistant behind a 200 ms sleep per case, as
a remote model would be — at the same total concurrency: local ``--concurrency 8`` against 2
Ray workers with ``--concurrency 4`` each (``--io-cases``, default 1000); then the scenario
judged by an LLM (the fake OpenAI server, 200 ms a request) locally and on 2 Ray workers that
share the run's judge service, fresh and warm cache (``--judge-cases``, default 300).

Target on the reference machine: 10k cases in under 60 s and under 1 GB, growing linearly
(time and memory growing no faster than the number of cases, with 20 % slack).

The cases (:func:`generate_cases`, deterministic for a seed) are shop-like, not copies: the
shop's 51 labelled cases verbatim (with new ids; the hard cases stay in), then the cases
``evalharness synth`` writes from the shop's catalog and blog (SQL up a difficulty ladder,
one- and two-chunk blog questions, both at once, off-topic ones; docs/synth.md), cycled, each
repeat with a greeting or a thank-you so that no two questions are the same text.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
SHOP_YAML = ROOT / "scenarios" / "shop.yaml"
SHOP = ROOT / "scenarios" / "shop"

TARGET_SECONDS = 60.0
TARGET_MB = 1024.0
LINEAR_SLACK = 1.2
"""Growth counts as linear when time (and memory) grow at most 1.2 times as fast as cases."""

# ---------------------------------------------------------------------------------------------
# Case generation
# ---------------------------------------------------------------------------------------------

POOL = 400
"""Distinct synthetic cases drawn from the shop's data (``evalharness synth``), cycled with
light rewording to reach a size."""

PREFIXES = ["", "Quick question: ", "Hi! ", "Hello, ", "Hey there, ", "Hi there, ",
            "Good morning! ", "Sorry to bother you, "]
SUFFIXES = ["", " Thanks!", " Thank you.", " Cheers!", " Thanks a lot.", " Many thanks!",
            " Thanks in advance."]
REWORDINGS = [(p, s) for p in PREFIXES for s in SUFFIXES][1:]
"""55 greeting/thank-you pairs: the n-th repeat of a case gets the n-th, so no two questions
of a run of up to 55 x the pool are the same text."""


def _vary(question: str, repeat: int) -> str:
    """A light, meaning-preserving change of wording (the ``repeat``-th of
    :data:`REWORDINGS`): a greeting, a thank-you or both."""
    prefix, suffix = REWORDINGS[(repeat - 1) % len(REWORDINGS)]
    if prefix.endswith(", ") and not question.startswith(("I ", "I'")):
        question = question[0].lower() + question[1:]
    return f"{prefix}{question}{suffix}"


@functools.cache
def synthetic_pool(seed: int = 0) -> list[dict[str, Any]]:
    """:data:`POOL` cases from the shop's catalog and blog, written by ``evalharness synth``'s
    offline writer (the customers table left out, as for the shipped synthetic cases)."""
    from evalharness.context import load_corpus
    from evalharness.synth import synthesize

    conn = sqlite3.connect(":memory:")
    conn.executescript((SHOP / "catalog.sql").read_text(encoding="utf-8"))
    result = synthesize(n=POOL, seed=seed, corpus=load_corpus(SHOP / "blog_chunks.jsonl"),
                        database=conn, skip_tables=["customers"])
    conn.close()
    return [c.model_dump(mode="json", exclude_none=True) for c in result.cases]


def generate_cases(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` shop-like cases, the same for the same ``n`` and seed: the shop's labelled cases
    verbatim (new ids, tag ``original``), then ``evalharness synth``'s cases from the shop's
    data, cycled; every repeat of a synthetic case gets a greeting or a thank-you (tag
    ``reworded``), so no two questions of a run are the same text."""
    base = [json.loads(line) for line in (SHOP / "cases.jsonl").read_text().splitlines()
            if line.strip()]
    pool = synthetic_pool(seed)
    cases: list[dict[str, Any]] = []
    for i in range(n):
        case_id = f"c{i:06d}"
        if i < len(base):
            case = json.loads(json.dumps(base[i]))
            case["id"] = case_id
            case["tags"] = [*case.get("tags", []), "original"]
            cases.append(case)
            continue
        k = i - len(base)
        case = json.loads(json.dumps(pool[k % len(pool)]))
        case["id"] = case_id
        if k >= len(pool):
            case["question"] = _vary(case["question"], k // len(pool))
            case["tags"] = [*case["tags"], "reworded"]
        cases.append(case)
    return cases


SLOW = '''"""The shop assistant behind a fixed delay per case: an I/O-bound system."""
import sys
import time

sys.path.insert(0, {scenarios!r})
from shop.assistant import answer as shop_answer  # noqa: E402


def answer(case, *, overrides=None, delay=0.2):
    time.sleep(delay)
    return shop_answer(case, overrides=overrides)
'''


def write_scenario(folder: Path, n: int, seed: int = 0, delay: float | None = None) -> Path:
    """``cases.jsonl`` and ``scale.yaml`` for ``n`` cases in ``folder``; the scenario's path.
    With ``delay``, the system sleeps that long per case (an I/O-bound system)."""
    from evalharness.importing import is_path

    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "cases.jsonl", "w", encoding="utf-8") as fh:
        for case in generate_cases(n, seed):
            fh.write(json.dumps(case, ensure_ascii=False) + "\n")
    shop = yaml.safe_load(SHOP_YAML.read_text(encoding="utf-8"))
    base = SHOP_YAML.parent

    def absolute(rel: str) -> str:
        return str((base / rel).resolve())

    target, _, func = shop["system"].rpartition(":")
    # a module name (`shop.assistant`) is found from the scenario's folder: as an absolute
    # path, it is the package folder
    system_file = target if is_path(target) else target.replace(".", "/")
    spec = {
        "name": f"shop-scale-{n}",
        "description": f"{n} shop-like cases generated by benchmarks/scale.py (seed {seed})",
        "cases": str((folder / "cases.jsonl").resolve()),
        "system": f"{absolute(system_file)}:{func}",
        "database": {**shop["database"], "build": absolute(shop["database"]["build"])},
        "corpus": absolute(shop["corpus"]),
        "judge": {"backend": "heuristic"},
        "pipeline": shop["pipeline"],
        "evaluators": shop["evaluators"],
        "gates": shop["gates"],
        "concurrency": shop.get("concurrency", 4),
    }
    if delay is not None:
        slow = folder / "slow.py"
        slow.write_text(SLOW.format(scenarios=str(SHOP.parent)), encoding="utf-8")
        spec["system"] = {"callable": f"{slow}:answer", "options": {"delay": delay}}
    path = folder / "scale.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------------------------


@dataclass
class Measurement:
    cases: int
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    exit_code: int

    @property
    def rate(self) -> float:
        return self.cases / self.wall_s if self.wall_s else float("nan")


def measure(scenario: Path, out: Path, cases: int, headroom: bool = False,
            extra: tuple[str, ...] = ()) -> Measurement:
    """Run the scenario in a fresh interpreter; its wall time and peak RSS (``os.wait4``).
    Without ``headroom``, the oracle reruns of failed cases are skipped (``--no-headroom``);
    ``extra``: more options (``--executor ray --address …``)."""
    command = [sys.executable, "-m", "evalharness.cli", "scenario", str(scenario), "--quiet",
               "--out", str(out), *([] if headroom else ["--no-headroom"]), *extra]
    start = time.perf_counter()
    proc = subprocess.Popen(command, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):  # 1: a gate failed, which is a result, not a crash
        raise SystemExit(f"the run of {scenario} failed with exit code {proc.returncode}")
    rss_mb = usage.ru_maxrss / 1024  # Linux reports kilobytes
    return Measurement(cases, wall, usage.ru_utime + usage.ru_stime, rss_mb, proc.returncode)


def print_table(rows: list[Measurement]) -> bool:
    """The table, the growth factors and the verdict; whether the target is met."""
    print(f"{'cases':>8} {'wall s':>9} {'CPU s':>8} {'peak RSS MB':>12} {'cases/s':>9} "
          f"{'gates':>6}")
    for m in rows:
        gates = "pass" if m.exit_code == 0 else "fail"
        print(f"{m.cases:>8} {m.wall_s:>9.2f} {m.cpu_s:>8.2f} {m.peak_rss_mb:>12.1f} "
              f"{m.rate:>9.1f} {gates:>6}")
    small, large = rows[0], rows[-1]
    ok = True
    if len(rows) > 1 and large.cases > small.cases:
        ratio = large.cases / small.cases
        t_growth = large.wall_s / small.wall_s
        m_growth = large.peak_rss_mb / small.peak_rss_mb
        linear = t_growth <= ratio * LINEAR_SLACK and m_growth <= ratio * LINEAR_SLACK
        print(f"\ngrowth {large.cases}/{small.cases} (x{ratio:g} cases): time x{t_growth:.2f}, "
              f"memory x{m_growth:.2f} -> {'linear' if linear else 'SUPERLINEAR'} "
              f"(limit x{ratio * LINEAR_SLACK:g})")
        ok = linear
    biggest = max(rows, key=lambda m: m.cases)
    if biggest.cases >= 10_000:
        per_10k = 10_000 / biggest.cases
        fast = biggest.wall_s * per_10k < TARGET_SECONDS
        small_mem = biggest.peak_rss_mb < TARGET_MB
        print(f"target at {biggest.cases} cases: wall {biggest.wall_s:.1f} s "
              f"(< {TARGET_SECONDS:g} s: {'yes' if fast else 'NO'}), peak RSS "
              f"{biggest.peak_rss_mb:.0f} MB (< {TARGET_MB:g} MB: "
              f"{'yes' if small_mem else 'NO'})")
        ok = ok and fast and small_mem
    else:
        print("target: not checked (no size of 10000 cases or more)")
    print(f"target met: {'yes' if ok else 'NO'}")
    return ok


def ray_comparison(work: Path, local: dict[int, tuple[Path, Measurement]], seed: int,
                   io_cases: int) -> None:
    """The local executor against Ray with 1 and 2 worker CPUs (CPU-bound), then an
    I/O-bound system at equal total concurrency; wall time ratios to local, same run."""
    from evalharness.testing.ray_cluster import ENV, localhost_cluster

    os.environ.update(ENV)  # the runs are drivers of clusters of this machine only
    print("\nlocal executor vs Ray (a cluster on this machine), wall time; ratio = Ray / local")
    print(f"{'system':>10} {'cases':>7} {'executor':>22} {'wall s':>8} {'cases/s':>8} "
          f"{'ratio':>6}")
    for n, (scenario, base) in sorted(local.items()):
        rows = [("local", base)]  # the run of the table above, in this same invocation
        for cpus in (1, 2):
            with localhost_cluster([cpus]) as address:
                rows.append((f"ray, {cpus} worker CPU{'s' * (cpus > 1)}", measure(
                    scenario, work / f"ray-{cpus}-{n}", n,
                    extra=("--executor", "ray", "--address", address))))
        for name, m in rows:
            print(f"{'CPU-bound':>10} {n:>7} {name:>22} {m.wall_s:>8.2f} {m.rate:>8.1f} "
                  f"{m.wall_s / base.wall_s:>6.2f}")
    if not io_cases:
        return
    scenario = write_scenario(work / "io-scenario", io_cases, seed, delay=0.2)
    base = measure(scenario, work / "io-local", io_cases, extra=("--concurrency", "8"))
    with localhost_cluster([2]) as address:
        ray_m = measure(scenario, work / "io-ray", io_cases,
                        extra=("--executor", "ray", "--address", address,
                               "--concurrency", "4"))
    for name, m in (("local, concurrency 8", base), ("ray, 2 x concurrency 4", ray_m)):
        print(f"{'200 ms/case':>10} {io_cases:>7} {name:>22} {m.wall_s:>8.2f} "
              f"{m.rate:>8.1f} {m.wall_s / base.wall_s:>6.2f}")


def judge_comparison(work: Path, seed: int, cases: int, concurrency: int = 16) -> None:
    """An LLM judge on the cluster: the scale scenario judged through the openai backend
    against the fake OpenAI server on this machine (canned answers, 200 ms each), locally and
    on 2 Ray workers (which send every judgment to the run's one judge service), each with a
    fresh judge cache; then Ray again on the warm cache. Requests as the server counted them,
    the most in flight at once (the judge's ``concurrency`` is the cluster's limit), wall
    time as a ratio to local."""
    from evalharness.testing.fake_openai import FakeOpenAI
    from evalharness.testing.ray_cluster import localhost_cluster

    print(f"\nLLM judge (fake server, 200 ms a request, judge concurrency {concurrency}): "
          "local vs Ray's shared judge; ratio = wall / local")
    print(f"{'run':>28} {'cases':>6} {'chat req':>9} {'emb req':>8} {'max in flight':>14} "
          f"{'wall s':>8} {'ratio':>6}")
    with FakeOpenAI(latency_s=0.2, canned=True) as server:
        def scenario(cache: str) -> Path:
            path = write_scenario(work / f"judged-{cache}", cases, seed)
            spec = yaml.safe_load(path.read_text(encoding="utf-8"))
            spec["judge"] = {"backend": "openai", "model": "fake", "embedding_model": "fake-e",
                             "base_url": server.base_url, "concurrency": concurrency,
                             "cache": str(work / f"judge-{cache}.sqlite")}
            path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
            return path

        def one(name: str, path: Path, out: str, extra: tuple[str, ...] = (),
                base: float | None = None) -> float:
            server.stats(reset=True)
            m = measure(path, work / out, cases, extra=extra)
            stats = server.stats()
            counts = stats["counts"]
            most = stats["max_in_flight"].get("chat", 0)
            print(f"{name:>28} {cases:>6} {counts.get('chat', 0):>9} "
                  f"{counts.get('embeddings', 0):>8} {most:>14} {m.wall_s:>8.2f} "
                  f"{m.wall_s / (base or m.wall_s):>6.2f}")
            return m.wall_s

        base = one("local, fresh cache", scenario("local"), "judged-local")
        shared = scenario("ray")
        with localhost_cluster([2]) as address:
            ray = ("--executor", "ray", "--address", address)
            one("ray 2 workers, fresh cache", shared, "judged-ray", ray, base)
            one("ray 2 workers, warm cache", shared, "judged-ray-again", ray, base)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000],
                        help="Numbers of cases to run (default: 1000 10000).")
    parser.add_argument("--seed", type=int, default=0, help="Seed of the case generator.")
    parser.add_argument("--headroom", action="store_true",
                        help="Also rerun the failed cases with oracles (oracle headroom; "
                             "off by default: the target is for the evaluation itself).")
    parser.add_argument("--executor", choices=["local", "ray"], default="local",
                        help="ray: also run each size on a Ray cluster on this machine (1 and "
                             "2 worker CPUs) and an I/O-bound system, beside the local "
                             "executor.")
    parser.add_argument("--io-cases", type=int, default=1000,
                        help="Cases of the I/O-bound comparison (--executor ray; 0: skip).")
    parser.add_argument("--judge-cases", type=int, default=300,
                        help="Cases of the LLM-judge comparison (--executor ray; 0: skip).")
    parser.add_argument("--keep", action="store_true",
                        help="Keep the generated scenarios and output folders (printed).")
    args = parser.parse_args(argv)
    if args.executor == "ray" and args.headroom:
        parser.error("--executor ray compares runs without --headroom")
    work = Path(tempfile.mkdtemp(prefix="evalharness-scale-"))
    rows = []
    scenarios = {}
    try:
        for n in sorted(args.sizes):
            scenario = write_scenario(work / f"scenario-{n}", n, args.seed)
            rows.append(measure(scenario, work / f"run-{n}", n, args.headroom))
            scenarios[n] = (scenario, rows[-1])
        print(f"shop-like scenario, heuristic judge, every evaluator of {SHOP_YAML.name}; "
              f"oracle headroom {'on' if args.headroom else 'off (--headroom to include)'}; "
              f"{os.cpu_count()} CPUs; python {sys.version.split()[0]}\n")
        ok = print_table(rows)
        if args.executor == "ray":
            ray_comparison(work, scenarios, args.seed, args.io_cases)
            if args.judge_cases:
                judge_comparison(work, args.seed, args.judge_cases)
    finally:
        if args.keep:
            print(f"\nkept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
