"""The shop assistant's seeded noise (scenarios/shop/assistant/noise.py) and the scenario that
uses it, scenarios/shop-noisy.yaml: an LLM's sampling stood in for, for runs with repeats."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from pathlib import Path

import pytest
import yaml
from test_shop_assistant import CASES, assistant

from conftest import ROOT
from evalharness.api import execute
from evalharness.models import Trace

NOISY = ROOT / "scenarios" / "shop-noisy.yaml"


def _plain(trace: Trace) -> dict:
    data = trace.model_dump()
    for step in ("router", "text2sql", "retriever", "generator"):
        if data.get(step):
            data[step]["latency_ms"] = None
    return data


def _overrides(trace: Trace) -> dict:
    """The trace's router, text-to-SQL and retriever outputs, as the oracle gives them."""
    given: dict = {"router": {"routes": trace.router.routes}}
    if trace.text2sql is not None:
        given["text2sql"] = {"sql": trace.text2sql.sql, "columns": trace.text2sql.columns,
                             "rows": trace.text2sql.rows}
    if trace.retriever is not None:
        given["retriever"] = {"ids": trace.retriever.ids, "texts": trace.retriever.texts}
    return given


BASE = {c.id: assistant.answer(c) for c in CASES}


def test_no_noise_is_the_assistant_unchanged():
    for case in CASES:
        expected = _plain(BASE[case.id])
        assert _plain(assistant.answer(case, noise=0.0)) == expected
        assert _plain(assistant.answer(case, noise=0, noise_seed=7, repeat=3)) == expected


def test_the_same_seed_case_and_repeat_give_the_same_trace():
    for case in CASES[::5]:
        for repeat in (1, 2, 5):
            first = assistant.answer(case, noise=0.5, noise_seed=3, repeat=repeat)
            again = assistant.answer(case, noise=0.5, noise_seed=3, repeat=repeat)
            assert _plain(first) == _plain(again)
        # outside a run with repeats the harness passes no repeat: it is repeat 1
        assert _plain(assistant.answer(case, noise=0.5, noise_seed=3)) == _plain(
            assistant.answer(case, noise=0.5, noise_seed=3, repeat=1))


def test_repeats_and_seeds_are_different_draws():
    def traces(seed: int, repeat: int) -> list[dict]:
        return [_plain(assistant.answer(c, noise=0.3, noise_seed=seed, repeat=repeat))
                for c in CASES]

    one = traces(0, 1)
    for other in (traces(0, 2), traces(1, 1)):
        differ = sum(a != b for a, b in zip(one, other, strict=True))
        assert 5 <= differ < len(CASES)


def test_each_component_is_perturbed_at_about_its_rate():
    noise = 0.5
    expected = {c: assistant.noise.probability(noise, c) for c in assistant.noise.COMPONENTS}
    assert expected == {"router": 0.25, "text2sql": 0.5, "retriever": 0.5, "generator": 0.5}
    seen, changed = Counter(), Counter()
    for case in CASES:
        base = BASE[case.id]
        given = _overrides(base)
        plain_answer = assistant.answer(case, overrides=given).generator.answer
        for repeat in range(1, 6):
            trace = assistant.answer(case, noise=noise, repeat=repeat)
            seen["router"] += 1
            changed["router"] += trace.router.routes != base.router.routes
            if base.text2sql is not None and trace.text2sql is not None:
                seen["text2sql"] += 1
                changed["text2sql"] += trace.text2sql.sql != base.text2sql.sql
            if base.retriever is not None and trace.retriever is not None:
                seen["retriever"] += 1
                changed["retriever"] += trace.retriever.ids != base.retriever.ids
            # the oracle's overrides replace the upstream components, noise included: only
            # the generator is perturbed
            alone = assistant.answer(case, noise=noise, repeat=repeat, overrides=given)
            assert alone.router.routes == base.router.routes
            seen["generator"] += 1
            changed["generator"] += alone.generator.answer != plain_answer
    rates = {c: changed[c] / seen[c] for c in seen}
    # loose: a filterless query or a one-sentence answer without a price is not perturbed
    for component, rate in rates.items():
        assert 0.6 * expected[component] <= rate <= 1.4 * expected[component], (component, rates)


def test_generator_noise_drops_a_sentence_or_rounds_a_price():
    text = "The cheapest is the black tee by Nordvik (19.90 €). Wash it cold. Dry it flat."
    step = BASE["q001"].generator.model_copy(update={"answer": text})
    rng = assistant.noise.Noise(1.0, 0, "x", 1).rng("generator")
    kinds = Counter()
    for _ in range(40):
        sloppy = assistant.noise.sloppy_answer(step, rng).answer
        if "(20 €)" in sloppy:
            kinds["rounded"] += 1
            assert sloppy == text.replace("19.90", "20")
        else:
            kinds["dropped"] += 1
            assert len(re.split(r"(?<=[.!?])\s+", sloppy)) == 2
    assert kinds["rounded"] >= 5 and kinds["dropped"] >= 5
    single = step.model_copy(update={"answer": "We have 7 matching products."})
    assert assistant.noise.sloppy_answer(single, rng) == single


def test_an_override_replaces_the_component_noise_included():
    for case in CASES[:10]:
        gold = case.gold.routes
        trace = assistant.answer(case, noise=1.0, repeat=2, overrides={"router": {"routes": gold}})
        assert trace.router.routes == gold


@pytest.mark.parametrize("noise", [-0.1, 1.5, "high", math.nan, True])
def test_an_invalid_noise_is_refused(noise):
    with pytest.raises(ValueError, match="noise must be a number from 0"):
        assistant.answer(CASES[0], noise=noise)


def test_the_noisy_scenario_is_the_shop_with_noise_and_repeats():
    shop = yaml.safe_load((ROOT / "scenarios" / "shop.yaml").read_text(encoding="utf-8"))
    noisy = yaml.safe_load(NOISY.read_text(encoding="utf-8"))
    assert noisy["name"] == "shop-noisy"
    assert noisy["system"] == {"callable": "shop.assistant:answer",
                               "options": {"noise": 0.15, "noise_seed": 0}}
    assert noisy["repeat"] == 5
    same = set(shop) - {"name", "description", "system", "gates"}
    assert {k: noisy[k] for k in same} == {k: shop[k] for k in same}
    # the route flips the noise adds cost the two error-limited gates ~5 points of errors
    relaxed = [g if isinstance(g, str) else {**g, "max_error_rate": 0.1}
               for g in noisy["gates"]]
    assert relaxed == shop["gates"]


def test_a_noisy_run_has_flaky_cases(tmp_path: Path):
    execute(NOISY, out=tmp_path / "run", headroom=False)
    report = json.loads((tmp_path / "run" / "report.json").read_text(encoding="utf-8"))
    repeats = report["repeats"]
    assert repeats["n"] == 5 and repeats["cases"] == len(CASES)
    assert repeats["end_to_end"]["flaky"] >= 3
    flaky = {f["case"] for f in repeats["flaky"] if f["component"] == "end_to_end"}
    assert len(flaky) == repeats["end_to_end"]["flaky"]
