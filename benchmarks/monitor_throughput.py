"""How fast the monitor evaluates live traffic, in how much memory, and how large its store grows.

Generates N shop traces as live traffic (``scenarios/shop/traced.py``'s ``traffic``: questions
drawn from the shop's cases, a fifth rephrased, 24 simulated users, the generator fault on for
the second half) written as OTLP JSON lines into a folder, as ``traces receive``'s files are
read. Then, each in a fresh interpreter that reports its own peak RSS (``ru_maxrss``):

1. **with evaluation**: one monitor pass over the folder — sampling rate 1.0, the shop traces
   scenario's evaluators with the offline (heuristic) judge — timed by phase (set-up, reading
   and mapping, evaluation, store writes); the store's size on disk after it, and that size
   per 100k traces;
2. **store only**: a second store that holds ``--store-traces`` traces (100k) with their
   metrics and verdicts, rows copied from the first store with new trace ids, written a batch
   of ``batch_size`` traces per transaction as the monitor writes them — so the projection per
   100k traces can be checked against a store that really holds 100k;
3. **reference**: ``evalharness scenario`` over the same spans (the shop traces scenario, a
   question-only case per trace, joined by trace id), to give the monitor's overhead as a
   ratio measured in the same run.

    python benchmarks/monitor_throughput.py                    # N = 2,000
    python benchmarks/monitor_throughput.py --n 500 --store-traces 20000
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHOP = ROOT / "scenarios" / "shop"
SCENARIO = SHOP / "monitor" / "scenario.yaml"
MAPPING = SHOP / "traces-openinference.yaml"


def _traced() -> Any:
    spec = importlib.util.spec_from_file_location("shop_traced_benchmark", SHOP / "traced.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def generate(work: Path, n: int, seed: int) -> list[dict[str, str]]:
    """N traces of live traffic as OTLP JSON lines in ``work/traffic/``; the questions asked."""
    folder = work / "traffic"
    folder.mkdir(parents=True)
    run = _traced().traffic(n, out=folder / "spans-000001.jsonl", seed=seed,
                            fault="generator", fault_after=n // 2)
    return [{"id": a.trace_id, "question": a.question} for a in run.asked]


def files(work: Path, asked: list[dict[str, str]], batch_size: int) -> tuple[Path, Path]:
    """MONITOR.yaml over the traffic, and the reference scenario over the same spans."""
    monitor = work / "monitor.yaml"
    monitor.write_text(
        f'scenario: "{SCENARIO}"\nname: bench\nsources: ["{work / "traffic"}"]\n'
        "sampling: {rate: 1.0}\n"
        f'store: {{path: "{work / "monitor.duckdb"}", retention_days: null}}\n'
        f"batch_size: {batch_size}\n", encoding="utf-8")
    # the reference: a question-only case per trace, joined by trace id (the shop's mapping
    # joins by the case id in metadata, which 2,000 draws from 51 cases repeat)
    (work / "cases.jsonl").write_text(
        "".join(json.dumps(c) + "\n" for c in asked), encoding="utf-8")
    (work / "mapping.yaml").write_text(
        MAPPING.read_text(encoding="utf-8") + "join: [trace_id]\n", encoding="utf-8")
    text = SCENARIO.read_text(encoding="utf-8")
    text = (text.replace("cases: ../cases.jsonl", f'cases: "{work / "cases.jsonl"}"')
            .replace("path: traffic/", f'path: "{work / "traffic"}"')
            .replace("mapping: ../traces-openinference.yaml",
                     f'mapping: "{work / "mapping.yaml"}"')
            .replace("join: question", "join: key")
            .replace("corpus: ../blog_chunks.jsonl", f'corpus: "{SHOP / "blog_chunks.jsonl"}"')
            .replace("name: shop-traffic", "name: bench-reference"))
    scenario = work / "reference.yaml"
    scenario.write_text(text, encoding="utf-8")
    return monitor, scenario


def measured(argv: list[str]) -> dict[str, Any]:
    """Run ``argv``; its wall time and output (each child prints its own peak RSS)."""
    began = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    out, err = proc.communicate()
    wall = time.perf_counter() - began
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{err[-3000:]}")
    return {"wall_s": wall, "stdout": out, "stderr": err}


def child_rss() -> int:
    """This process's peak RSS in bytes (Linux reports kilobytes)."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def disk_size(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, path.with_name(path.name + ".wal"))
               if p.exists())


# --- the children ------------------------------------------------------------------------------


def child_monitor(monitor_file: Path) -> None:
    """One monitor pass, timed by phase; one JSON line."""
    began = time.perf_counter()
    from evalharness.monitor import intake, passes, store
    from evalharness.monitor.config import load_monitor
    from evalharness.monitor.evaluate import ReferenceFree

    spent = {"evaluate_s": 0.0, "write_s": 0.0}

    def timed(key: str, call: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                spent[key] += time.perf_counter() - t
        return wrapper

    store.write_batch = timed("write_s", store.write_batch)  # intake's batches (the queue)
    store.store_evaluated = timed("write_s", store.store_evaluated)  # evaluation's
    ReferenceFree.evaluate = timed("evaluate_s", ReferenceFree.evaluate)
    assert passes.read_pass is intake.read_pass
    imported = time.perf_counter()
    config = load_monitor(monitor_file)
    run = passes.MonitorRun(config)
    ready = time.perf_counter()
    try:
        summary = run.run_pass()
    finally:
        run.close()
    done = time.perf_counter()
    pass_s = done - ready
    print(json.dumps({
        "import_s": imported - began, "setup_s": ready - imported, "pass_s": pass_s,
        "read_map_sample_s": pass_s - spent["evaluate_s"] - spent["write_s"], **spent,
        "stored": summary.stored, "evaluated": summary.evaluated,
        "root_causes": summary.root_causes, "rss": child_rss()}))


def insert(con: Any, table: str, rows: list[tuple], chunk: int = 200) -> None:
    """``rows`` into ``table``, a multi-row ``INSERT`` per ``chunk`` rows: the rows the
    monitor's ``store.write_batch`` writes, without its ``executemany`` (about 1.4 ms a row
    with DuckDB 2.0: half an hour for 100k traces' metrics)."""
    for start in range(0, len(rows), chunk):
        part = rows[start:start + chunk]
        marks = "(" + ", ".join("?" * len(part[0])) + ")"
        con.execute(f"INSERT INTO {table} VALUES {', '.join([marks] * len(part))}",
                    [v for row in part for v in row])


def child_store(template: Path, target: Path, traces: int, batch: int) -> None:
    """``traces`` traces with their metrics and verdicts, copied round-robin from the
    evaluated traces of ``template`` under new ids, a transaction per ``batch`` traces (the
    same rows and transactions as the monitor's, inserted by :func:`insert`)."""
    from evalharness.monitor import store

    with store.connect(template, read_only=True) as con:
        rows = con.execute(f"SELECT {', '.join(store.TRACE_COLUMNS)} FROM traces "
                           "WHERE status = 'evaluated' ORDER BY trace_id").fetchall()
        metrics = con.execute("SELECT * FROM metrics").fetchall()
        verdicts = con.execute("SELECT * FROM verdicts").fetchall()
    by_metric: dict[str, list[tuple]] = {}
    for m in metrics:
        by_metric.setdefault(m[0], []).append(m)
    by_verdict: dict[str, list[tuple]] = {}
    for v in verdicts:
        by_verdict.setdefault(v[0], []).append(v)
    templates = [dict(zip(store.TRACE_COLUMNS, r, strict=True)) for r in rows]
    began = time.perf_counter()
    written = {"traces": 0, "metrics": 0, "verdicts": 0}
    columns = ", ".join(store.TRACE_COLUMNS)
    with store.connect(target) as con:
        for start in range(0, traces, batch):
            t_rows, m_rows, v_rows = [], [], []
            for i in range(start, min(start + batch, traces)):
                t = templates[i % len(templates)]
                new = f"{i:032x}"
                t_rows.append(tuple(new if c == "trace_id" else t[c]
                                    for c in store.TRACE_COLUMNS))
                m_rows += [(new, *m[1:]) for m in by_metric.get(t["trace_id"], [])]
                v_rows += [(new, *v[1:]) for v in by_verdict.get(t["trace_id"], [])]
            con.execute("BEGIN TRANSACTION")
            insert(con, f"traces ({columns})", t_rows)
            insert(con, "metrics", m_rows)
            insert(con, "verdicts", v_rows)
            con.execute("COMMIT")
            written["traces"] += len(t_rows)
            written["metrics"] += len(m_rows)
            written["verdicts"] += len(v_rows)
        con.execute("CHECKPOINT")
    print(json.dumps({**written, "seconds": time.perf_counter() - began, "rss": child_rss()}))


# --- the benchmark -----------------------------------------------------------------------------


def mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="traces of traffic (2,000)")
    parser.add_argument("--store-traces", type=int, default=100_000,
                        help="traces in the store-only measurement (100,000)")
    parser.add_argument("--batch-size", type=int, default=50,
                        help="traces per transaction, as MONITOR.yaml's batch_size (50)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--work", type=Path, default=None,
                        help="keep the files here (default: a temporary folder, removed)")
    parser.add_argument("--child", choices=("monitor", "store"), help=argparse.SUPPRESS)
    parser.add_argument("args", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "monitor":
        child_monitor(Path(args.args[0]))
        return
    if args.child == "store":
        child_store(Path(args.args[0]), Path(args.args[1]), args.store_traces,
                    args.batch_size)
        return

    work = args.work or Path(tempfile.mkdtemp(prefix="monitor-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        t = time.perf_counter()
        asked = generate(work, args.n, args.seed)
        generated = time.perf_counter() - t
        spans = work / "traffic" / "spans-000001.jsonl"
        monitor, scenario = files(work, asked, args.batch_size)
        me = [sys.executable, str(Path(__file__).resolve())]

        mon = measured([*me, "--child", "monitor", str(monitor)])
        m = json.loads(mon["stdout"].strip().splitlines()[-1])
        size = disk_size(work / "monitor.duckdb")

        st = measured([*me, "--child", "store", "--store-traces", str(args.store_traces),
                       "--batch-size", str(args.batch_size), str(work / "monitor.duckdb"),
                       str(work / "store-only.duckdb")])
        s = json.loads(st["stdout"].strip().splitlines()[-1])
        size_only = disk_size(work / "store-only.duckdb")

        ref, ref_rss = reference(work, scenario)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)

    per_100k = 100_000 / m["stored"]
    print(f"traffic: {args.n} traces, {len(asked)} questions ({spans.name}: "
          f"{mb(spans.stat().st_size) if spans.exists() else 'removed'}), generated in "
          f"{generated:.1f} s; generator fault on for the second half")
    print()
    print("with evaluation (one monitor pass, rate 1.0, heuristic judge, batch "
          f"{args.batch_size}):")
    print(f"  traces evaluated/s   {m['evaluated'] / m['pass_s']:8.1f}   ({m['evaluated']} in "
          f"{m['pass_s']:.1f} s: read+map+sample {m['read_map_sample_s']:.1f} s, evaluate "
          f"{m['evaluate_s']:.1f} s, store writes {m['write_s']:.1f} s)")
    print(f"  whole process        {mon['wall_s']:8.1f} s (imports {m['import_s']:.1f} s, "
          f"set-up {m['setup_s']:.1f} s)")
    print(f"  peak RSS             {mb(m['rss']):>10}")
    print(f"  store on disk        {mb(size):>10}   ({size / m['stored'] / 1e3:.1f} kB a trace)"
          f" -> per 100k traces {mb(size * per_100k)}")
    print(f"  root causes          {m['root_causes']}")
    print()
    print(f"store only ({s['traces']:,} traces, {s['metrics']:,} metrics, {s['verdicts']:,} "
          f"verdicts, written {args.batch_size} traces a transaction):")
    print(f"  store on disk        {mb(size_only):>10}   -> per 100k traces "
          f"{mb(size_only * 100_000 / s['traces'])}")
    print(f"  written in           {s['seconds']:8.1f} s ({s['traces'] / s['seconds']:,.0f} "
          f"traces/s), peak RSS {mb(s['rss'])}")
    print()
    print("reference: evalharness scenario over the same spans (the shop traces scenario, "
          "--no-headroom):")
    print(f"  whole process        {ref['wall_s']:8.1f} s, peak RSS "
          f"{mb(ref_rss) if ref_rss else 'n/a'}")
    ratio = f", {m['rss'] / ref_rss:.2f} x peak RSS" if ref_rss else ""
    print(f"  monitor / scenario   {mon['wall_s'] / ref['wall_s']:8.2f} x wall time (whole "
          f"processes){ratio}")


def reference(work: Path, scenario: Path) -> tuple[dict[str, Any], int | None]:
    """``evalharness scenario`` over the same spans, under a wrapper that prints its peak RSS
    when the command is done; the run and that RSS."""
    code = ("import resource, sys, runpy\n"
            "sys.argv = ['evalharness', *sys.argv[1:]]\n"
            "try:\n    runpy.run_module('evalharness.cli', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "print('RSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "
            "file=sys.stderr)\n")
    done = measured([sys.executable, "-c", code, "scenario", str(scenario), "--out",
                     str(work / "reference-run"), "--no-headroom"])
    found = [line for line in done["stderr"].splitlines() if line.startswith("RSS ")]
    return done, (int(found[-1].split()[1]) if found else None)


if __name__ == "__main__":
    main()
