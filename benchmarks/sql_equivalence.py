"""Benchmark of the SQL equivalence cascade on labelled (gold, predicted) pairs.

Usage::

    python benchmarks/sql_equivalence.py            # the whole cascade, K = 32
    python benchmarks/sql_equivalence.py --k 8 --show-errors
    python benchmarks/sql_equivalence.py --check    # exit 1 unless the targets are met

The pairs are the JSONL files in ``benchmarks/sql_pairs/pairs/`` (see the README there): gold
queries from the Spider development set (CC BY-SA 4.0; databases copied into
``benchmarks/sql_pairs/spider/``) and from the shop scenario, each with a predicted query and
an ``equivalent`` label. The shop database is built from ``scenarios/shop/catalog.sql`` at run
time. Nothing is sent to a judge: pairs the deterministic stages leave undecided count as
disagreements.

Printed: agreement with the labels, verdicts per stage (with how many were wrong), false
"equivalent" and false "not equivalent" counts, and pairs per second; and, for comparison,
the agreement of executing both queries on the given database alone.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sqlite3
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from evalharness_sql import Options, workers
from evalharness_sql.parallel import check_databases

ROOT = Path(__file__).resolve().parent.parent
PAIRS = ROOT / "benchmarks" / "sql_pairs"
SHOP_SCRIPT = ROOT / "scenarios" / "shop" / "catalog.sql"


def load_pairs(directory: Path) -> list[dict]:
    pairs = []
    for path in sorted((directory / "pairs").glob("*.jsonl")):
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                record = json.loads(line)
                record.setdefault("source", f"{path.name}:{lineno}")
                pairs.append(record)
    return pairs


def database_path(db: str, workdir: Path, pairs: Path = PAIRS) -> Path:
    """The SQLite file of a pair's ``db``: a Spider database, or one built at run time from a
    script (``shop``: the scenario's catalogue; else ``schemas/<db>.sql``, written for this
    benchmark)."""
    script = SHOP_SCRIPT if db == "shop" else pairs / "schemas" / f"{db}.sql"
    if script.exists():
        target = workdir / f"{db}.sqlite"
        if not target.exists():
            conn = sqlite3.connect(target)
            conn.executescript(script.read_text(encoding="utf-8"))
            conn.commit()
            conn.close()
        return target
    return pairs / "spider" / f"{db}.sqlite"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run(pairs: list[dict], workdir: Path, options: Options) -> tuple[list, float]:
    """The verdicts of the pairs (no judge), and the seconds they took: every database's
    pairs in one batch, spread over this process and the SQL helper processes."""
    by_db: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(pairs):
        by_db[p["db"]].append(i)
    paths = {db: database_path(db, workdir) for db in by_db}
    before = {db: sha256(path) for db, path in paths.items()}
    start = time.perf_counter()
    out = check_databases([(paths[db], [(pairs[i]["gold"], pairs[i]["predicted"])
                                        for i in indices])
                           for db, indices in sorted(by_db.items())], "sqlite", options=options)
    seconds = time.perf_counter() - start
    verdicts: list = [None] * len(pairs)
    for (db, indices), found in zip(sorted(by_db.items()), out, strict=True):
        if sha256(paths[db]) != before[db]:
            raise SystemExit(f"the database {paths[db]} changed during the run")
        for i, verdict in zip(indices, found, strict=True):
            verdicts[i] = verdict
    return verdicts, seconds


def summarise(pairs: list[dict], verdicts: list) -> dict:
    agree = sum(v.equivalent is p["equivalent"] for p, v in zip(pairs, verdicts, strict=True))
    stages: dict[str, Counter] = defaultdict(Counter)
    false_eq: Counter = Counter()
    false_neq: Counter = Counter()
    undecided = 0
    for p, v in zip(pairs, verdicts, strict=True):
        decided = {True: "equivalent", False: "not equivalent", None: "undecided"}[v.equivalent]
        stages[v.stage][decided] += 1
        if v.equivalent is None:
            undecided += 1
        elif v.equivalent != p["equivalent"]:
            stages[v.stage]["wrong"] += 1
            (false_eq if v.equivalent else false_neq)[v.stage] += 1
    n_neq = sum(not p["equivalent"] for p in pairs)
    return {"n": len(pairs), "agree": agree, "stages": stages, "false_eq": false_eq,
            "false_neq": false_neq, "undecided": undecided, "n_neq": n_neq}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=32, help="test-suite databases per pair")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pairs", type=Path, default=PAIRS)
    parser.add_argument("--db", action="append", help="only these databases")
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip the execution-only comparison run")
    parser.add_argument("--show-errors", action="store_true",
                        help="print every pair the cascade gets wrong")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 unless agreement >= 98%% and normalise is never wrong")
    args = parser.parse_args(argv)

    pairs = load_pairs(args.pairs)
    if args.db:
        pairs = [p for p in pairs if p["db"] in args.db]
    if not pairs:
        print("no pairs found", file=sys.stderr)
        return 2
    helpers = workers.warm()  # started before the clock: a long run keeps them warm
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        verdicts, seconds = run(pairs, workdir, Options(test_suite_size=args.k, seed=args.seed))
        s = summarise(pairs, verdicts)
        n_eq = s["n"] - s["n_neq"]
        dbs = len({p["db"] for p in pairs})
        print(f"SQL equivalence benchmark: {s['n']} labelled pairs on {dbs} databases "
              f"({n_eq} equivalent, {s['n_neq']} not equivalent); test suite K = {args.k}")
        print(f"  agreement with the labels   {s['agree']}/{s['n']} = "
              f"{100 * s['agree'] / s['n']:.1f}%")
        print(f"  false 'equivalent'          {sum(s['false_eq'].values())} "
              f"({100 * sum(s['false_eq'].values()) / max(1, s['n_neq']):.1f}% of the "
              f"non-equivalent pairs)" + _by_stage(s["false_eq"]))
        print(f"  false 'not equivalent'      {sum(s['false_neq'].values())}"
              + _by_stage(s["false_neq"]))
        print(f"  undecided                   {s['undecided']}")
        tried = sum(v.details.get("databases", 0) for v in verdicts)
        rejected = sum(v.details.get("databases_rejected", 0) for v in verdicts)
        minimal = [v.counterexample["minimal"] for v in verdicts
                   if v.counterexample and "minimal" in v.counterexample]
        print(f"  test databases              {tried} used, {rejected} rejected by the "
              "contract check")
        if minimal:
            before = sorted(m["rows_before"] for m in minimal)
            after = sorted(m["rows"] for m in minimal)
            runs = sorted(m["runs"] for m in minimal)
            print(f"  counterexamples shrunk      {len(minimal)}: median {before[len(before) // 2]}"
                  f" rows -> {after[len(after) // 2]} (at most {after[-1]}), median "
                  f"{runs[len(runs) // 2]} tries")
        print(f"  speed                       {s['n'] / seconds:.1f} pairs/s "
              f"({seconds:.1f}s in all; this process and {helpers} helper process"
              f"{'es' * (helpers != 1)}, {workers.ENV}={os.environ.get(workers.ENV, 'unset')})")
        print("  verdicts per stage:")
        order = ["parse", "normalise", "execute", "test_suite", "judge", "undecided"]
        for stage in sorted(s["stages"], key=lambda x: order.index(x) if x in order else 99):
            c = s["stages"][stage]
            print(f"    {stage:<11} {c['equivalent']:>4} equivalent  {c['not equivalent']:>4} "
                  f"not equivalent  {c['undecided']:>4} undecided  {c['wrong']:>3} wrong")
        if not args.no_baseline:
            base, _ = run(pairs, workdir, Options(test_suite_size=0,
                                                  stages=("parse", "execute")))
            agree = fe = 0
            for p, v in zip(pairs, base, strict=True):
                # no difference on the given database counts as "equivalent"
                said = v.equivalent is not False
                agree += said is p["equivalent"]
                fe += said and not p["equivalent"]
            print(f"  baseline (execution on the given database only): agreement "
                  f"{100 * agree / s['n']:.1f}%, false 'equivalent' {fe} "
                  f"({100 * fe / max(1, s['n_neq']):.1f}% of the non-equivalent pairs)")
        if args.show_errors:
            for p, v in zip(pairs, verdicts, strict=True):
                if v.equivalent is not p["equivalent"]:
                    print(f"\n[{p['id']}] label={p['equivalent']} verdict={v.equivalent} "
                          f"stage={v.stage} ({p.get('kind', '')})\n  gold: {p['gold']}\n"
                          f"  pred: {p['predicted']}\n  why:  {v.reason}")
        ok = s["agree"] / s["n"] >= 0.98 and not s["false_eq"].get("normalise")
        return 0 if ok or not args.check else 1


def _by_stage(counter: Counter) -> str:
    if not counter:
        return ""
    return "  (" + ", ".join(f"{k}: {v}" for k, v in sorted(counter.items())) + ")"


if __name__ == "__main__":
    sys.exit(main())
