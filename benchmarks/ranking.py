"""Ranking measures: evalharness_retrieval against pytrec_eval and ranx, on the same dict input.

    python benchmarks/ranking.py                              # 100,000 queries x 100 documents
    python benchmarks/ranking.py --queries 20000 --depth 50   # a quicker look

The workload is synthetic and deterministic (seeded): every query retrieves ``depth``
distinct documents from a corpus of 1,000,003 ids (``d123456``), in descending score order;
scores are uniform in [0, 1) rounded to 3 decimals, so at depth 100 about 9% of the documents
share their score with another document of the same query, and almost every query has such a
tie (only the docid order can break it). Each query has 3 or 4 relevant documents (grades
1-3) and 2 judged non-relevant ones (grade 0); about 9% of the judged documents were not
retrieved.

Each library runs in its own subprocess (``--worker NAME``), so that its peak RSS is its own:
the worker builds the workload, notes its RSS and resets the peak (Linux ``VmHWM``, through
``/proc/self/clear_refs``), imports the library (timed), evaluates once (the first call:
caches, JIT compilation), then three more times (best of 3 reported), and saves its
per-query values. Peak RSS is the process's peak during the import and the timed calls, the
workload included; "over data" subtracts the RSS of the workload alone. Converting the dicts
into whatever the library needs is part of every timed call, for every library. A library
that is not installed is skipped with a message.

Measures: each library computes, in one call, every measure of the issue that it has. Ours:
P@5, P@10, R@5, R@10, F1@10, hit@10, RR, RR@10, AP, AP@10, R-precision, nDCG@10 and DCG@10
with both gains (15). pytrec_eval: the trec_eval measures among them, one pass (10: no F1, no
RR@10, hit is trec_eval's success, linear gain only). ranx: its equivalents (13: no DCG). The
values of every measure two libraries share are compared query by query.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CORPUS = 1_000_003  # a prime: a query's documents are an arithmetic progression modulo it
SEED = 20261130
REPEATS = 3

# Our measure name -> (pytrec_eval name, ranx name); None where the library lacks it.
MEASURES = {
    "P_5": ("P_5", "precision@5"),
    "P_10": ("P_10", "precision@10"),
    "recall_5": ("recall_5", "recall@5"),
    "recall_10": ("recall_10", "recall@10"),
    "F1_10": (None, "f1@10"),
    "hit_10": ("success_10", "hit_rate@10"),
    "recip_rank": ("recip_rank", "mrr"),
    "recip_rank_cut_10": (None, "mrr@10"),
    "map": ("map", "map"),
    "map_cut_10": ("map_cut_10", "map@10"),
    "Rprec": ("Rprec", "r-precision"),
    "ndcg_cut_10": ("ndcg_cut_10", "ndcg@10"),
    "ndcg_exp2_cut_10": (None, "ndcg_burges@10"),
    "dcg_cut_10": (None, None),
    "dcg_exp2_cut_10": (None, None),
}
LIBRARIES = ("evalharness_retrieval", "pytrec_eval", "ranx")


# -- the workload ------------------------------------------------------------------------------


def workload(queries: int, depth: int) -> tuple[dict, dict]:
    """``(qrels, run)`` as ``{qid: {docid: grade}}`` and ``{qid: {docid: score}}``."""
    rng = np.random.default_rng(SEED)
    start = rng.integers(0, CORPUS, queries)
    step = rng.integers(1, CORPUS, queries)
    extra = 10  # judged documents may sit just beyond the retrieved depth
    ids = (start[:, None] + np.arange(depth + extra)[None, :] * step[:, None]) % CORPUS
    names = np.array(list(map("d{}".format, ids.ravel().tolist())), dtype=object)
    names = names.reshape(queries, depth + extra)
    scores = -np.sort(-np.round(rng.random((queries, depth)), 3), axis=1)
    qids = [f"q{i}" for i in range(queries)]
    flat_names = names[:, :depth].ravel().tolist()
    flat_scores = scores.ravel().tolist()
    run = {q: dict(zip(flat_names[i * depth:(i + 1) * depth],
                       flat_scores[i * depth:(i + 1) * depth], strict=True))
           for i, q in enumerate(qids)}
    # Six distinct judged positions per query: 3-4 relevant (grade 1-3), then 2 non-relevant.
    judged = np.argsort(rng.random((queries, depth + extra)), axis=1)[:, :6]
    n_rel = rng.integers(3, 5, queries)
    grades = rng.integers(1, 4, (queries, 6))
    grades[np.arange(6)[None, :] >= n_rel[:, None]] = 0
    grades[:, 5] = 0
    docs = np.take_along_axis(names, judged, axis=1).tolist()
    qrels = {q: dict(zip(d, g, strict=True)) for q, d, g in zip(qids, docs, grades.tolist(),
                                                                strict=True)}
    return qrels, run


# -- one library, in its own process ------------------------------------------------------------


def _status_mb(field: str) -> float | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _reset_peak() -> bool:
    """Reset the peak RSS (Linux: VmHWM), so that building the workload does not count."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _peak_mb() -> float:
    hwm = _status_mb("VmHWM")
    return hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker(name: str, queries: int, depth: int, out: Path) -> dict:
    qrels, run = workload(queries, depth)
    gc.collect()
    if not _reset_peak():
        print("warning: cannot reset the peak RSS; it includes building the workload",
              file=sys.stderr)
    data_mb = _status_mb("VmRSS") or _peak_mb()
    t0 = time.perf_counter()
    try:
        if name == "evalharness_retrieval":
            import evalharness_retrieval as lib
            version = lib.__version__
            measures = list(MEASURES)

            def call():
                return lib.evaluate(qrels, run, measures, per_query=False)

            def per_query():
                values = lib.evaluate(qrels, run, measures, per_query=True)
                return {m: [values[q][m] for q in run] for m in measures}
        elif name == "pytrec_eval":
            from importlib.metadata import version as dist_version

            import pytrec_eval as lib
            version = dist_version("pytrec-eval-terrier")
            measures = {p for p, _ in MEASURES.values() if p}
            last = {}

            def call():
                last["v"] = lib.RelevanceEvaluator(qrels, measures).evaluate(run)
                return last["v"]

            def per_query():
                values = last["v"]
                return {ours: [values[q][p] for q in run]
                        for ours, (p, _) in MEASURES.items() if p}
        elif name == "ranx":
            import warnings
            from importlib.metadata import version as dist_version

            import ranx as lib
            warnings.filterwarnings("ignore")  # numba's type-safety warnings
            version = dist_version("ranx")
            measures = [r for _, r in MEASURES.values() if r]
            last = {}

            def call():
                ranx_run = lib.Run(run)
                lib.evaluate(lib.Qrels(qrels), ranx_run, measures)
                last["run"] = ranx_run
                return ranx_run

            def per_query():
                scores = last["run"].scores
                return {ours: [float(scores[r][q]) for q in run]
                        for ours, (_, r) in MEASURES.items() if r}
        else:
            raise SystemExit(f"unknown library {name!r}; known: {', '.join(LIBRARIES)}")
    except ImportError:
        return {"library": name, "skipped": f"{name} is not installed (pip install "
                                            f"{'pytrec-eval-terrier' if name == 'pytrec_eval' else name})"}
    import_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    call()
    first_s = time.perf_counter() - t0
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    peak = _peak_mb()
    values = per_query()
    if name == "evalharness_retrieval":  # which queries have equal scores (docid order matters)
        values["_tied"] = [float(len(set(r.values())) < len(r)) for r in run.values()]
    np.savez(out, **{m: np.asarray(v, dtype=np.float64) for m, v in values.items()})
    return {"library": name, "version": version, "import_s": import_s, "first_s": first_s,
            "best_s": min(times), "times": times, "peak_mb": peak, "data_mb": data_mb,
            "measures": len(measures)}


# -- the parent: run every library, compare, print -----------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--only", choices=LIBRARIES, action="append",
                        help="run only this library (repeatable)")
    parser.add_argument("--worker", choices=LIBRARIES, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.queries < 1 or not 1 <= args.depth < CORPUS - 10:
        parser.error("--queries must be >= 1 and --depth between 1 and 1,000,000")
    if args.worker:
        print(json.dumps(worker(args.worker, args.queries, args.depth, args.out)))
        return 0

    libraries = args.only or list(LIBRARIES)
    print(f"workload: {args.queries:,} queries x {args.depth} documents = "
          f"{args.queries * args.depth:,} run entries (seed {SEED}); each library in its own "
          f"process; best of {REPEATS} after a first call", flush=True)
    results, values = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in libraries:
            out = Path(tmp) / f"{name}.npz"
            env = dict(os.environ, PYTHONHASHSEED="0")
            proc = subprocess.run(
                [sys.executable, __file__, "--worker", name, "--queries", str(args.queries),
                 "--depth", str(args.depth), "--out", str(out)],
                capture_output=True, text=True, env=env)
            if proc.returncode != 0:
                print(f"{name}: failed (exit {proc.returncode}):\n{proc.stderr}", file=sys.stderr)
                return 1
            result = json.loads(proc.stdout.strip().splitlines()[-1])
            results.append(result)
            if "skipped" in result:
                print(f"skipped {name}: {result['skipped']}", flush=True)
                continue
            with np.load(out) as npz:
                values[name] = {m: npz[m] for m in npz.files}
            print(f"  {name} done: best {result['best_s']:.2f} s", flush=True)
    ran = [r for r in results if "skipped" not in r]
    print()
    print(f"{'library':<32}{'import s':>9}{'first call s':>14}{'best of 3 s':>13}"
          f"{'peak RSS MB':>13}{'over data MB':>14}{'measures':>10}")
    for r in ran:
        print(f"{r['library'] + ' ' + r['version']:<32}{r['import_s']:>9.2f}{r['first_s']:>14.2f}"
              f"{r['best_s']:>13.2f}{r['peak_mb']:>13,.0f}{r['peak_mb'] - r['data_mb']:>14,.0f}"
              f"{r['measures']:>10}")
    ours = next((r for r in ran if r["library"] == "evalharness_retrieval"), None)
    others = [r for r in ran if r["library"] != "evalharness_retrieval"]
    if ours and others:
        fastest = min(others, key=lambda r: r["best_s"])
        print(f"\nratio: {fastest['library']} (the faster reference) best of 3 / ours = "
              f"{fastest['best_s'] / ours['best_s']:.2f}x; first call: "
              f"{min(o['first_s'] for o in others) / ours['first_s']:.2f}x; peak RSS: ours "
              f"{ours['peak_mb']:,.0f} MB vs {min(o['peak_mb'] for o in others):,.0f} MB")
    if "evalharness_retrieval" in values:
        _compare(values)
    return 0


def _compare(values: dict[str, dict[str, np.ndarray]]) -> None:
    ours = values["evalharness_retrieval"]
    print("\nvalues, query by query: max |ours - theirs| (queries that differ by more than 1e-9)")
    print(f"{'measure':<20}" + "".join(f"{n:>26}" for n in values if n != "evalharness_retrieval"))
    differ = {n: np.zeros(ours["_tied"].size, dtype=bool) for n in values
              if n != "evalharness_retrieval"}
    for m in MEASURES:
        cells = []
        for name, theirs in values.items():
            if name == "evalharness_retrieval":
                continue
            if m not in theirs:
                cells.append("—")
                continue
            diff = np.abs(ours[m] - theirs[m])
            cells.append(f"{diff.max():.1e} ({int((diff > 1e-9).sum()):,})")
            differ[name] |= diff > 1e-9
        print(f"{m:<20}" + "".join(f"{c:>26}" for c in cells))
    tied = ours["_tied"] > 0
    for name, mask in differ.items():
        print(f"{name}: {int(mask.sum()):,} queries differ in some measure; "
              f"{int((mask & ~tied).sum()):,} of them have no tied scores "
              f"({int(tied.sum()):,} of {tied.size:,} queries have ties)")


if __name__ == "__main__":
    sys.exit(main())
