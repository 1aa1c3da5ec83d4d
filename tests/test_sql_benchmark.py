"""The labelled SQL equivalence benchmark: its data, and the normalise stage's guarantee on it."""

from __future__ import annotations

import importlib.util
import itertools
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
    own = {path.stem for path in (PAIRS / "schemas").glob("*.sql")}
    assert own >= {"clinic", "payroll", "library", "league"}
    used = {p["db"] for p in pairs} - {"shop"} - own
    for db in used:
        assert (PAIRS / "spider" / f"{db}.sqlite").exists()
    assert "written for this benchmark" in readme
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


# --------------------------------------------------------------------------------------------
# Every counterexample is a database of the schema on which the queries differ
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def benchmark_run(bench, pairs, workdir):
    """The whole benchmark, once (K = 32, as documented): its pairs and their verdicts."""
    verdicts, _ = bench.run(pairs, workdir, bench.Options())
    return list(zip(pairs, verdicts, strict=True))


def load_counterexample(schema_sql: str, tables: dict, schema, path: Path) -> None:
    """A SQLite file with the schema, foreign keys enforced, holding the counterexample's rows
    and, for the tables the queries do not read, the parent rows its foreign keys need (their
    other columns NULL, or a value of their type where NOT NULL)."""
    from evalharness_sql.contract import family

    conn = sqlite3.connect(path)
    conn.executescript(schema_sql)
    conn.execute("PRAGMA foreign_keys = ON")
    data = {name.lower(): [tuple(r) for r in t["rows"]] for name, t in tables.items()}
    needed: dict[str, set] = {}

    def need(table_key: str, rows: list[tuple]) -> None:
        table = schema.tables[table_key]
        names = [c.name.lower() for c in table.columns]
        for fk in table.foreign_keys:
            parent = fk.table.lower()
            if parent in data or len(fk.columns) != 1:
                continue
            j = names.index(fk.columns[0].lower())
            values = {r[j] for r in rows if r[j] is not None} - needed.setdefault(parent, set())
            if values:
                needed[parent] |= values
                pnames = [c.name.lower() for c in schema.tables[parent].columns]
                ref = (fk.ref_columns[0] or "").lower()
                made = []
                for v in sorted(values, key=repr):
                    row = []
                    for c in schema.tables[parent].columns:
                        if c.name.lower() == ref:
                            row.append(v)
                        elif c.notnull and c.allowed:
                            row.append(c.allowed[0])
                        elif c.notnull:  # distinct per row, for UNIQUE columns
                            filler = next(fillers)
                            row.append({"integer": filler, "real": float(filler),
                                        "boolean": 0}.get(family(c), f"filler {filler}"))
                        else:
                            row.append(None)
                    made.append(tuple(row))
                assert ref in pnames
                added.setdefault(parent, []).extend(made)
                need(parent, made)

    added: dict[str, list[tuple]] = {}
    fillers = itertools.count(100_000)
    for key, rows in data.items():
        need(key, rows)
    for key in [t for t in schema.order() if t in data or t in added]:
        rows = data.get(key, []) + added.get(key, [])
        table = schema.tables[key]
        marks = ", ".join("?" for _ in table.columns)
        conn.executemany(f'INSERT INTO "{table.name}" VALUES ({marks})', rows)
    conn.commit()
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    conn.close()


def test_every_counterexample_is_valid_and_separates_the_queries(bench, benchmark_run, workdir,
                                                                 tmp_path):
    from evalharness_sql import Options, check_equivalence
    from evalharness_sql.contract import violations

    checked = 0
    for n, (p, verdict) in enumerate(benchmark_run):
        minimal = (verdict.counterexample or {}).get("minimal")
        if verdict.equivalent is not False or minimal is None:
            continue
        engine = SQLiteEngine(bench.database_path(p["db"], workdir))
        schema = engine.schema()
        tables = minimal["tables"]
        data = {name.lower(): [tuple(r) for r in t["rows"]] for name, t in tables.items()}
        assert all("rows_total" not in t for t in tables.values()), p["id"]
        assert violations(schema, data) == [], p["id"]
        path = tmp_path / f"{n}.sqlite"
        load_counterexample(engine._create_script(), tables, schema, path)
        again = check_equivalence(p["gold"], p["predicted"], path,
                                  options=Options(test_suite_size=0))
        assert again.equivalent is False and again.stage in ("execute", "parse"), (
            p["id"], again.reason)
        # the minimal database shows both results, and they differ
        assert minimal["rows"] <= minimal["rows_before"]
        checked += 1
    assert checked >= 100


def test_the_benchmark_agrees_with_its_labels(benchmark_run):
    agree = sum(v.equivalent is p["equivalent"] for p, v in benchmark_run)
    undecided = sum(v.equivalent is None for _, v in benchmark_run)
    false_eq = sum(v.equivalent is True and not p["equivalent"] for p, v in benchmark_run)
    non_equivalent = sum(not p["equivalent"] for p, _ in benchmark_run)
    assert agree / len(benchmark_run) >= 0.97
    assert false_eq / non_equivalent <= 0.03
    assert undecided / len(benchmark_run) <= 0.01


def test_verdicts_are_the_same_in_one_process_and_spread_over_helpers(bench, benchmark_run,
                                                                       workdir):
    """The benchmark spreads its pairs over the helper processes; a verdict depends only on
    its pair, so one process alone gives the same ones."""
    from evalharness_sql import workers
    from evalharness_sql.cascade import check_many as in_process

    if not workers.helpers():
        pytest.skip("no SQL helper process on this machine (one CPU, or "
                    "EVALHARNESS_SQL_HELPERS=0): nothing was spread")
    for db in ("payroll", "concert_singer", "shop"):
        chosen = [(p, v) for p, v in benchmark_run if p["db"] == db][:24]
        here = in_process([(p["gold"], p["predicted"]) for p, _ in chosen],
                          bench.database_path(db, workdir))
        for (p, spread), alone in zip(chosen, here, strict=True):
            assert spread.to_dict() == alone.to_dict(), p["id"]


def test_a_chunk_a_helper_cannot_do_is_done_here(bench, benchmark_run, workdir, monkeypatch):
    """A helper that fails (it died, the database changed under it) loses no pair: its chunk
    is computed in this process, with the same verdicts."""
    from concurrent.futures import Future

    from evalharness_sql import parallel, workers

    if not workers.helpers():
        pytest.skip("no SQL helper process on this machine: nothing to fail")
    path = bench.database_path("shop", workdir)
    # the helper's own check: a database whose fingerprint changed is refused
    refused = workers.submit_chunk(workers.helpers()[0], [("SELECT 1", "SELECT 1")], str(path),
                                   "not-the-fingerprint", "sqlite", None, parallel.Options())
    with pytest.raises(RuntimeError, match="changed"):
        refused.result(timeout=60)
    asked = []

    def failing(helper, chunk, *args):
        asked.append(len(chunk))
        future: Future = Future()
        future.set_exception(RuntimeError("the SQL helper process has stopped"))
        return future

    monkeypatch.setattr(workers, "submit_chunk", failing)
    chosen = [(p, v) for p, v in benchmark_run if p["db"] == "shop"][:24]
    (found,) = parallel.check_databases([(path, [(p["gold"], p["predicted"])
                                                 for p, _ in chosen])])
    assert asked  # a helper was asked, and failed
    assert [v.to_dict() for v in found] == [v.to_dict() for _, v in chosen]
