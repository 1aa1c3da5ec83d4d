"""benchmarks/scale.py: its generated cases are deterministic, valid and labelled correctly,
its scenario is the shop's, and its table says whether the target is met. (No timing here.)"""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from evalharness.models import Case
from evalharness.scenario import load_scenario

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def scale():
    spec = importlib.util.spec_from_file_location("scale_benchmark",
                                                  ROOT / "benchmarks" / "scale.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_cases_are_deterministic_valid_and_shop_like(scale):
    cases = scale.generate_cases(900, seed=3)
    assert cases == scale.generate_cases(900, seed=3)
    assert cases != scale.generate_cases(900, seed=4)
    assert len({c["id"] for c in cases}) == 900
    synthetic = [c["question"] for c in cases if "original" not in c["tags"]]
    assert len(set(synthetic)) == len(synthetic)  # repeats are reworded, each differently
    for c in cases:
        Case.model_validate(c)
    routes = Counter(tuple(c["gold"]["routes"]) for c in cases)
    assert set(routes) == {("sql",), ("blog",), ("sql", "blog"), ()}
    conn = sqlite3.connect(":memory:")
    conn.executescript((ROOT / "scenarios" / "shop" / "catalog.sql").read_text())
    corpus_ids = {json.loads(line)["id"] for line in
                  (ROOT / "scenarios" / "shop" / "blog_chunks.jsonl").read_text().splitlines()
                  if line.strip()}
    for c in cases:
        gold = c["gold"]
        assert ("sql" in gold["routes"]) == bool(gold.get("sql"))
        assert ("blog" in gold["routes"]) == bool(gold.get("relevant"))
        if gold.get("sql"):
            conn.execute(gold["sql"]).fetchall()  # every gold query runs
        if gold.get("relevant"):
            assert set(gold["relevant"]) <= corpus_ids
        assert gold["answer"]


def test_past_the_shop_cases_they_are_synths_cycled_with_rewording(scale):
    """The generator is `evalharness synth`'s (no second one here): the cases after the shop's
    51 are its pool in order, a repeat only reworded (a greeting or a thank-you)."""
    pool = scale.synthetic_pool(0)
    cases = scale.generate_cases(51 + 2 * len(pool), seed=0)
    first, second = cases[51:51 + len(pool)], cases[51 + len(pool):]
    assert [c["question"] for c in first] == [c["question"] for c in pool]
    assert all("synthetic" in c["tags"] and "original" not in c["tags"] for c in first)
    for again, once in zip(second, first, strict=True):
        assert again["gold"] == once["gold"] and "reworded" in again["tags"]
        core = once["question"][1:-1]
        assert core in again["question"] or core[1:] in again["question"]


def test_the_scenario_is_the_shops_with_absolute_paths(scale, tmp_path):
    path = scale.write_scenario(tmp_path / "s", 60)
    spec = yaml.safe_load(path.read_text())
    shop = yaml.safe_load((ROOT / "scenarios" / "shop.yaml").read_text())
    assert spec["evaluators"] == shop["evaluators"] and spec["gates"] == shop["gates"]
    assert spec["judge"] == {"backend": "heuristic"}
    system = Path(spec["system"].rpartition(":")[0])
    assert system.is_absolute() and (system / "__init__.py").is_file()  # the package folder
    scenario = load_scenario(path)
    assert len(scenario.cases) == 60


def test_the_table_reports_growth_and_the_target(scale, capsys):
    M = scale.Measurement
    assert scale.print_table([M(1000, 5.0, 5.0, 200.0, 0), M(10000, 40.0, 41.0, 600.0, 1)])
    out = capsys.readouterr().out
    assert "time x8.00" in out and "memory x3.00" in out and "target met: yes" in out
    assert not scale.print_table([M(1000, 5.0, 5.0, 200.0, 0), M(10000, 70.0, 70.0, 600.0, 0)])
    assert "target met: NO" in capsys.readouterr().out
    assert not scale.print_table([M(1000, 5.0, 5.0, 100.0, 0), M(10000, 50.0, 50.0, 1500.0, 0)])
