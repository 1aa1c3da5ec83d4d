"""Fault-injected shop variants (scenarios/shop-fault-*.yaml): each degrades one component of the
reference assistant, and its bottleneck report must name that component; the baseline is
unchanged by the new ``fault`` option."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_shop_assistant import assistant

from conftest import ROOT, SHOP, run_cli, shop_text_elsewhere
from evalharness.models import Case

FAULTS = ["router", "text2sql", "retriever", "generator"]

# The metric of the degraded component that a comparison with the baseline must flag as
# regressed (p < 0.05): the one its verdict reads.
DEGRADED_METRIC = {
    "router": "route_accuracy",
    "text2sql": "execution_accuracy",
    "retriever": "recall@5",
    "generator": "faithfulness",
}


def _run(scenario: Path, out: Path) -> dict:
    result = run_cli("scenario", scenario, "--quiet", "--out", out)
    assert result.code in (0, 1), result  # 1: a gate failed, which a fault may well cause
    return json.loads((out / "report.json").read_text(encoding="utf-8"))


def _means(report: dict) -> dict[tuple[str, str], float | None]:
    """Metric means, without the wall-clock ones (they differ between any two runs)."""
    return {
        (component, metric): value["mean"]
        for component, block in report["components"].items()
        for metric, value in block["metrics"].items()
        if metric not in {"latency_ms", "exec_time_ratio"}
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """One run of the baseline and of each variant, shared by the tests of this module."""
    tmp = tmp_path_factory.mktemp("fault_variants")
    outs = {"baseline": tmp / "baseline"}
    _run(SHOP, outs["baseline"])
    for fault in FAULTS:
        outs[fault] = tmp / fault
        _run(ROOT / "scenarios" / f"shop-fault-{fault}.yaml", outs[fault])
    return outs


def _report(out: Path) -> dict:
    return json.loads((out / "report.json").read_text(encoding="utf-8"))


def test_variants_differ_from_shop_yaml_only_in_name_description_and_options():
    import yaml

    base = yaml.safe_load(SHOP.read_text(encoding="utf-8"))
    for fault in FAULTS:
        variant = yaml.safe_load(
            (ROOT / "scenarios" / f"shop-fault-{fault}.yaml").read_text(encoding="utf-8"))
        assert variant["name"] == f"shop-fault-{fault}"
        assert variant["system"] == {"callable": base["system"], "options": {"fault": fault}}
        rest = {k: v for k, v in variant.items() if k not in {"name", "description", "system"}}
        assert rest == {k: v for k, v in base.items()
                        if k not in {"name", "description", "system"}}


@pytest.mark.parametrize("fault", FAULTS)
def test_variant_names_the_degraded_component_as_top_bottleneck(runs, fault):
    ranking = _report(runs[fault])["bottleneck"]["ranking"]
    assert ranking[0]["component"] == fault, ranking
    # a clear lead, not a tie with the runner-up
    assert ranking[0]["failures"] > ranking[1]["failures"], ranking


def test_baseline_is_unchanged_by_the_fault_option(runs, tmp_path):
    report = _report(runs["baseline"])
    assert report["bottleneck"]["ranking"][0]["component"] == "text2sql"
    # shop.yaml with an explicit `fault: null` runs the very same assistant (copied elsewhere,
    # it names the package by its path)
    text = shop_text_elsewhere().replace(
        f"system: {SHOP.parent}/shop/assistant:answer",
        f"system:\n  callable: {SHOP.parent}/shop/assistant:answer\n  options: {{fault: null}}")
    assert "options: {fault: null}" in text
    explicit = tmp_path / "shop-no-fault.yaml"
    explicit.write_text(text, encoding="utf-8")
    other = _run(explicit, tmp_path / "out")
    assert _means(other) == _means(report)
    assert other["bottleneck"]["ranking"] == report["bottleneck"]["ranking"]


@pytest.mark.parametrize("fault", FAULTS)
def test_compare_flags_the_degraded_component(runs, fault, tmp_path):
    result = run_cli("compare", runs["baseline"], runs[fault], "--json",
                     "--out", tmp_path / "comparison.json")
    comparison = json.loads((tmp_path / "comparison.json").read_text(encoding="utf-8"))
    # exit 1 exactly when a metric gated in the variant's scenario regressed
    assert result.code == (1 if comparison["gated_regressions"] else 0), result
    regressed = {
        (m["component"], m["metric"]): m["p_value"]
        for m in comparison["metrics"] if m["status"] == "regressed"
    }
    key = (fault, DEGRADED_METRIC[fault])
    assert key in regressed, sorted(regressed)
    assert regressed[key] < 0.05
    # no component upstream of or parallel to the degraded one regressed (the generator's
    # answer metrics follow whatever reaches it; wall-clock metrics vary between any two runs)
    others = {component for component, metric in regressed
              if component not in {fault, "generator"}
              and metric not in {"latency_ms", "exec_time_ratio"}}
    assert not others, sorted(regressed)


def test_unknown_fault_is_a_value_error_naming_the_valid_values():
    case = Case(id="x", question="How do I wash a wool jumper?")
    with pytest.raises(ValueError) as info:
        assistant.answer(case, fault="reranker")
    for fault in FAULTS:
        assert fault in str(info.value)
    assert assistant.FAULTS == tuple(FAULTS)


def test_each_fault_changes_only_its_component():
    case = Case(id="x", question="Which wool coats do you have under 200 euros, and how do I "
                                  "care for a wool coat?")
    base = assistant.answer(case)
    assert base.router.routes == ["sql", "blog"]
    for fault in FAULTS:
        trace = assistant.answer(case, fault=fault)
        changed = {
            name for name in ("router", "text2sql", "retriever", "generator")
            if getattr(trace, name) is not None and getattr(base, name) is not None
            and getattr(trace, name).model_dump(exclude={"latency_ms"})
            != getattr(base, name).model_dump(exclude={"latency_ms"})
        }
        changed |= {name for name in ("text2sql", "retriever")
                    if (getattr(trace, name) is None) != (getattr(base, name) is None)}
        assert fault in changed, fault
        # downstream components see a different input; upstream ones must be untouched
        upstream = {"router": set(), "text2sql": {"router"}, "retriever": {"router"},
                    "generator": {"router", "text2sql", "retriever"}}[fault]
        assert not changed & upstream, (fault, changed)


def _headroom(report: dict) -> dict[str, dict]:
    return {row["oracle"]: row for row in report["bottleneck"]["headroom"]}


@pytest.mark.parametrize("fault", ["router", "text2sql", "retriever"])
def test_oracle_headroom_grows_where_the_fault_is(runs, fault):
    """Replacing the degraded component by its gold repairs more cases than it does for the
    reference assistant: the counterfactual agrees with the attribution."""
    base, variant = _headroom(_report(runs["baseline"])), _headroom(_report(runs[fault]))
    assert variant[fault]["fixed"] > base[fault]["fixed"], (variant[fault], base[fault])
    assert all(row["errors"] == 0 for row in variant.values()), variant
    single = [row for row in variant.values() if len(row["components"]) == 1
              and row["gain"] is not None]
    assert variant[fault]["gain"] == max(row["gain"] for row in single), single


def test_upstream_oracles_cannot_rescue_an_inventing_generator(runs):
    """With every upstream component perfect at once, the generator fault's assistant passes
    fewer cases than the reference assistant does with no oracle at all: what limits it is
    downstream of every oracle."""
    variant, base = _report(runs["generator"]), _report(runs["baseline"])
    every = _headroom(variant)["router+text2sql+retriever"]
    assert every["errors"] == 0 and every["pass_rate"] is not None
    assert every["pass_rate"] < base["bottleneck"]["end_to_end"]["pass_rate"], every
    assert _headroom(variant)["generator"]["gain"] is None  # no plugin has a generator oracle
