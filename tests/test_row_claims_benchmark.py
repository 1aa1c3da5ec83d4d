"""The row-grounded answers set (benchmarks/row_claims.py): what the script builds is what is
shipped, balanced, from the catalog, and the benchmark measures the offline judge on it."""

from __future__ import annotations

import json
import sys
from collections import Counter

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import row_claims  # noqa: E402


def test_the_shipped_set_is_what_the_script_builds_and_is_balanced():
    built = row_claims.build()
    shipped = [json.loads(x) for x in row_claims.OUT.read_text(encoding="utf-8").splitlines()]
    assert shipped == json.loads(json.dumps(built)), "rerun: benchmarks/row_claims.py --write"
    assert len(built) >= 200
    labels = Counter(i["supported"] for i in built)
    assert labels[True] == labels[False]
    kinds = Counter(i["kind"] for i in built)
    assert len(kinds) >= 12
    for item in built:
        assert item["contexts"] == row_claims.render_rows(item["columns"], item["rows"])
        assert (item["error"] is None) == item["supported"]
    for kind in kinds:  # a planted error is never a correct answer of its own kind
        mine = [i for i in built if i["kind"] == kind]
        right = {(i["question"], i["answer"]) for i in mine if i["supported"]}
        assert not right & {(i["question"], i["answer"]) for i in mine if not i["supported"]}


def test_the_benchmark_measures_the_offline_judge():
    items = row_claims.build(per_kind=2)
    result = row_claims.measure(items, row_claims.scores(items)["faithfulness"])
    assert 0.0 <= result["auc"] <= 1.0 and 0.0 <= result["accuracy"] <= 1.0
    assert result["scored"] == result["items"]  # rows linked: even empty results are scored
    assert set(result["kinds"]) >= {"price", "empty", "count_rows"}


def test_set_b_is_shipped_balanced_and_from_the_catalog():
    """Set B, written independently of the verifier (benchmarks/row_claims_b.py)."""
    import row_claims_b

    shipped = row_claims.load("B")
    assert shipped == json.loads(json.dumps(row_claims_b.build())), \
        "rerun: python benchmarks/row_claims_b.py"
    assert len(shipped) >= 300
    assert Counter(i["supported"] for i in shipped)[True] == len(shipped) // 2
    assert len({i["kind"] for i in shipped}) >= 30
