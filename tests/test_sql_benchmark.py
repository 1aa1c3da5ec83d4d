"""The labelled SQL equivalence benchmark: its data, and the normalise stage's guarantee on it."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from evalharness_sql.engines import SQLiteEngine
from evalharness_sql.stages import normalise, parse
from evalharness_sql.verdict import Pair

ROOT = Path(__file__).resolve().parent.parent
PAIRS = ROOT / "benchmarks" / "sql_pairs"


def load_benchmark():
    spec = importlib.util.spec_from_file_location("sql_equivalence",
                                                  ROOT / "benchmarks" / "sql_equivalence.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench():
    return load_benchmark()


@pytest.fixture(scope="module")
def pairs(bench):
    return bench.load_pairs(PAIRS)


@pytest.fixture(scope="module")
def workdir():
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp)


def test_the_benchmark_has_at_least_300_honestly_labelled_pairs(pairs):
    assert len(pairs) >= 300
    assert len({p["id"] for p in pairs}) == len(pairs)
    counts = Counter(p["equivalent"] for p in pairs)
    assert counts[True] >= 100 and counts[False] >= 100
    for p in pairs:
        assert set(p) >= {"id", "db", "gold", "predicted", "equivalent", "kind"}
        assert p["kind"].split(":")[0] in ("rewrite", "mutation", "invalid", "refused")
        assert (p["kind"].startswith("rewrite")) == p["equivalent"]


def test_spider_data_is_copied_with_its_attribution(pairs):
    readme = (PAIRS / "README.md").read_text(encoding="utf-8")
    assert "CC BY-SA 4.0" in readme and "Spider" in readme
    used = {p["db"] for p in pairs} - {"shop"}
    for db in used:
        assert (PAIRS / "spider" / f"{db}.sqlite").exists()
    size = sum(f.stat().st_size for f in (PAIRS / "spider").iterdir())
    assert size < 3_000_000


def test_every_gold_query_runs_on_its_database(bench, pairs, workdir):
    for db in sorted({p["db"] for p in pairs}):
        conn = sqlite3.connect(f"file:{bench.database_path(db, workdir)}?mode=ro", uri=True)
        for p in pairs:
            if p["db"] == db:
                conn.execute(p["gold"]).fetchall()
        conn.close()


def test_normalise_never_calls_a_non_equivalent_pair_equivalent(bench, pairs, workdir):
    merged = wrong = 0
    engines = {}
    for p in pairs:
        db = p["db"]
        if db not in engines:
            engines[db] = SQLiteEngine(bench.database_path(db, workdir))
        pair = Pair(p["gold"], p["predicted"], engine=engines[db])
        if parse(pair) is not None:
            continue
        verdict = normalise(pair)
        if verdict is not None:
            merged += 1
            wrong += not p["equivalent"]
            assert p["equivalent"], (p["id"], verdict.details)
    assert wrong == 0 and merged >= 80


def test_the_benchmark_script_runs_on_a_subset(bench, capsys):
    assert bench.main(["--db", "poker_player", "--db", "battle_death", "--k", "8",
                       "--no-baseline"]) == 0
    out = capsys.readouterr().out
    assert "agreement with the labels" in out and "pairs/s" in out
    assert "false 'not equivalent'      0" in out
    assert json.dumps(out)  # printable
