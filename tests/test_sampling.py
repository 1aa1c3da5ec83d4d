"""The case sampler (``evalharness.sampling``): seeded stratified samples, ``--filter`` terms,
``--limit``, ``--rerun-failed`` and the order in which they apply."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest

from conftest import ROOT, SHOP
from evalharness.errors import EvalHarnessError
from evalharness.models import Case, CaseResult, Verdict
from evalharness.oracle import sample_failed
from evalharness.sampling import (
    FILTER_KEYS,
    Selection,
    SelectionError,
    failed_ids,
    parse_filter,
    select,
    stratified,
    stratum,
)
from evalharness.scenario import load_scenario

SEEDS = range(30)


@pytest.fixture(scope="module")
def shop() -> list[Case]:
    return load_scenario(SHOP).cases


@pytest.fixture(scope="module")
def raw() -> list[dict]:
    """The shop's cases as plain JSON, to compute what a selection should be independently."""
    path = ROOT / "scenarios" / "shop" / "cases.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def case(case_id: str, routes: list[str] | None, tags: tuple[str, ...] = ()) -> Case:
    gold = {} if routes is None else {"routes": routes}
    return Case(id=case_id, question=f"question {case_id}", gold=gold, tags=list(tags))


def mixed() -> list[Case]:
    """Five strata of very different sizes, interleaved: sql 20, blog 9, blog+sql 5, none 2,
    unlabelled 1."""
    sizes = {("sql",): 20, ("blog",): 9, ("sql", "blog"): 5, (): 2, None: 1}
    out = []
    for routes, size in sizes.items():
        for i in range(size):
            name = "u" if routes is None else "-".join(routes) or "none"
            out.append(case(f"{name}{i:02d}", None if routes is None else list(routes)))
    random.Random(7).shuffle(out)
    return out


def ids(cases) -> list[str]:
    return [c.id for c in cases]


def strata_of(cases) -> Counter:
    return Counter(stratum(c) for c in cases)


# -- reproducible by seed -----------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 5, 12, 30])
def test_the_same_seed_gives_the_same_cases(shop, n):
    for seed in (0, 1, 12345):
        first = select(shop, Selection(sample=n, seed=seed))
        again = select(list(shop), Selection(sample=n, seed=seed))
        assert ids(first.cases) == ids(again.cases)
        assert first.record() == again.record()


def test_different_seeds_give_different_samples_of_the_shop(shop):
    samples = {tuple(ids(select(shop, Selection(sample=12, seed=s)).cases)) for s in range(20)}
    assert len(samples) == 20


def test_a_sample_is_the_same_in_another_process(shop):
    """The rank of a case is a hash of seed and id that does not change with Python's hash
    randomisation: another process with another PYTHONHASHSEED takes the same cases."""
    code = ("from evalharness.sampling import Selection, select\n"
            "from evalharness.scenario import load_scenario\n"
            f"print(' '.join(c.id for c in select(load_scenario({str(SHOP)!r}).cases, "
            "Selection(sample=9, seed=4)).cases))")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=True)
    assert proc.stdout.split() == ids(select(shop, Selection(sample=9, seed=4)).cases)


@pytest.mark.parametrize("n", [3, 7, 12, 25])
def test_a_sample_does_not_depend_on_the_order_of_the_file(shop, n):
    for seed in (0, 3, 99):
        expected = ids(stratified(shop, n, seed))
        for shuffle in range(5):
            cases = list(shop)
            random.Random(shuffle).shuffle(cases)
            picked = stratified(cases, n, seed)
            assert sorted(ids(picked)) == sorted(expected)
            assert ids(picked) == [c.id for c in cases if c.id in set(expected)], \
                "the sample keeps the order of the cases given"


def test_a_bigger_quota_extends_a_stratum_s_picks():
    """Within a stratum the picks follow one seeded ranking of the ids: taking more cases
    from a stratum adds to the cases it took, never swaps them."""
    cases = mixed()
    for seed in SEEDS:
        per_n = []
        for n in range(1, len(cases)):
            picked = stratified(cases, n, seed)
            per_n.append({s: {c.id for c in picked if stratum(c) == s}
                          for s in strata_of(cases)})
        for s in strata_of(cases):
            sets = sorted((p[s] for p in per_n), key=len)
            for smaller, larger in zip(sets, sets[1:], strict=False):
                assert smaller <= larger, (seed, s)


# -- covers every gold route ------------------------------------------------------------------


def test_every_gold_route_of_the_shop_is_covered_by_any_sample_that_can(shop):
    routes = set(strata_of(shop))
    assert routes == {"sql", "blog", "blog+sql"}
    for seed in SEEDS:
        for n in range(len(routes), len(shop) + 2):
            assert set(strata_of(select(shop, Selection(sample=n, seed=seed)).cases)) == routes


def test_every_stratum_is_covered_whenever_n_reaches_the_number_of_strata():
    cases = mixed()
    sizes = strata_of(cases)
    assert sizes == {"sql": 20, "blog": 9, "blog+sql": 5, "none": 2, "unlabelled": 1}
    for seed in SEEDS:
        for n in range(1, len(cases) + 2):
            picked = stratified(cases, n, seed)
            assert len(picked) == min(n, len(cases))
            counts = strata_of(picked)
            if n >= len(sizes):
                assert set(counts) == set(sizes), (seed, n)
            else:  # fewer cases than strata: one each from the largest strata
                assert set(counts) == set(sorted(sizes, key=lambda s: -sizes[s])[:n])
                assert set(counts.values()) == {1}


def test_with_fewer_cases_than_strata_ties_in_size_go_by_name():
    cases = [case(f"{r}{i}", [r]) for r in ("sql", "faq", "blog") for i in range(3)]
    assert set(strata_of(stratified(cases, 2, seed=5))) == {"blog", "faq"}


# -- proportional allocation ------------------------------------------------------------------


def test_the_shop_sample_is_shared_in_proportion_to_the_strata(shop):
    # sql 19, blog 16, blog+sql 16 cases; one each first, then the other 17 of 20 in
    # proportion to what is left (18, 15, 15 of 48): 6.375, 5.3125, 5.3125 -> 6, 5, 5 and the
    # one left over to the largest remainder (sql)
    assert strata_of(select(shop, Selection(sample=20, seed=1)).cases) == {
        "sql": 8, "blog": 6, "blog+sql": 6}
    # 12: 9 left -> 3.375, 2.8125, 2.8125 -> 3, 2, 2 and the two left over to blog, blog+sql
    chosen = select(shop, Selection(sample=12, seed=1))
    assert strata_of(chosen.cases) == {"sql": 4, "blog": 4, "blog+sql": 4}
    assert chosen.strata == {"blog": 4, "blog+sql": 4, "sql": 4}
    assert chosen.record()["strata"] == chosen.strata


def test_allocation_is_largest_remainder_and_respects_stratum_sizes():
    """Property over many size profiles: each stratum gets one case, then its share of the
    rest in proportion to its remaining cases, rounded down or up (largest remainder); no
    stratum gets more than it has; the sample has exactly n cases."""
    rng = random.Random(11)
    names = ["a", "b", "c", "d", "e"]
    for _ in range(200):
        k = rng.randint(1, 5)
        sizes = {names[i]: rng.randint(1, 15) for i in range(k)}
        cases = [case(f"{s}{i}", [s]) for s, size in sizes.items() for i in range(size)]
        total = len(cases)
        for n in range(k, total):
            counts = strata_of(stratified(cases, n, seed=rng.randint(0, 10**6)))
            assert sum(counts.values()) == n
            left, spare = n - k, total - k
            share = {s: Fraction(left * (size - 1), spare) for s, size in sizes.items()}
            up = {}
            for s, size in sizes.items():
                assert 1 <= counts[s] <= size
                up[s] = counts[s] - 1 - math.floor(share[s])
                assert up[s] in ((0, 1) if share[s] % 1 else (0,)), (sizes, n, s)
            # the strata rounded up are those with the largest remainders
            raised = [share[s] % 1 for s in sizes if up[s]]
            kept = [share[s] % 1 for s in sizes if not up[s]]
            if raised and kept:
                assert min(raised) >= max(kept), (sizes, n)


def test_equal_remainders_go_to_the_stratum_named_first():
    """blog 5, faq 2, sql 2 cases, a sample of 5: one each, then 2 to share over 4, 1, 1
    remaining cases — 4/3, 1/3, 1/3: one to blog, and the last case to the largest remainder.
    All three remainders are exactly 1/3, so the name decides: blog. (Remainders computed in
    floating point make blog's 1.333… − 1 a hair below faq's 0.333… and hand it to faq.)"""
    cases = ([case(f"b{i}", ["blog"]) for i in range(5)] + [case(f"f{i}", ["faq"]) for i in
             range(2)] + [case(f"s{i}", ["sql"]) for i in range(2)])
    assert strata_of(stratified(cases, 5, seed=0)) == {"blog": 3, "faq": 1, "sql": 1}


@pytest.mark.parametrize("extra", [0, 1, 40])
def test_a_sample_of_at_least_every_case_takes_them_all(shop, extra):
    n = len(shop) + extra
    assert ids(stratified(shop, n, seed=3)) == ids(shop)
    assert ids(select(shop, Selection(sample=n, seed=3)).cases) == ids(shop)
    assert ids(select(shop, Selection(limit=n)).cases) == ids(shop)


@pytest.mark.parametrize("selection", [Selection(sample=51), Selection(sample=80, seed=2),
                                       Selection(limit=51), Selection(limit=500)])
def test_a_limit_or_sample_that_leaves_every_case_reports_all_cases(shop, selection):
    """``--sample 80`` of 51 cases runs all 51: the report must not say "51 of 51 cases: "
    and stop there, and report.json's ``selection`` is null when every case ran."""
    chosen = select(shop, selection)
    assert len(chosen.cases) == len(shop)
    assert not chosen.how.rstrip().endswith(":"), chosen.how
    assert chosen.everything, "every case ran: report.json's selection should be null"


def test_the_headroom_sample_is_stratified_too():
    """The oracle reruns' sample of the failed cases (oracle.sample_failed) is the same
    sampler: every gold route among the failed cases is in it."""
    results = []
    for c in mixed():
        status = "pass" if c.id.endswith(("0", "2")) else "fail"
        results.append(CaseResult(case=c, trace={"case_id": c.id},
                                  end_to_end=Verdict(status=status)))
    failed = [r for r in results if r.end_to_end.status == "fail"]
    routes = {stratum(r.case) for r in failed}
    picked, count = sample_failed(results, len(routes))
    assert count == len(failed)
    assert {stratum(results[i].case) for i in picked} == routes
    assert all(results[i].end_to_end.status == "fail" for i in picked)
    assert picked == sorted(picked), "in case order"
    expected = stratified([r.case for r in failed], 7, seed=0)  # seed aside: same allocation
    picked, _ = sample_failed(results, 7)
    assert strata_of(results[i].case for i in picked) == strata_of(expected)


# -- filters ------------------------------------------------------------------------------------


def chosen_ids(shop, *filters: str) -> list[str]:
    return ids(select(shop, Selection(filters=filters)).cases)


def test_a_bare_pattern_and_id_match_ids_with_wildcards(shop, raw):
    every = [c["id"] for c in raw]
    assert chosen_ids(shop, "q00*") == [f"q00{i}" for i in range(1, 10)]
    assert chosen_ids(shop, "id:q01?") == [i for i in every if i.startswith("q01")]
    assert chosen_ids(shop, "q007") == ["q007"]
    assert chosen_ids(shop, "q0[45]0") == ["q040", "q050"]
    assert chosen_ids(shop, " ID : q007 ") == ["q007"], "key and patterns are trimmed"


def test_tag_matches_any_of_a_case_s_tags(shop, raw):
    assert chosen_ids(shop, "tag:price") == [c["id"] for c in raw if "price" in c["tags"]]
    assert chosen_ids(shop, "tag:raw*") == [c["id"] for c in raw
                                            if any(t.startswith("raw") for t in c["tags"])]
    price = next(c for c in shop if "price" in c.tags)
    assert not parse_filter("tag:Price")(price), "patterns are case-sensitive"
    assert parse_filter("TAG:price")(price), "keys are not"


def test_route_matches_a_gold_route_or_the_whole_route_set(shop, raw):
    def routes(c):
        return set(c["gold"]["routes"])

    assert chosen_ids(shop, "route:sql") == [c["id"] for c in raw if "sql" in routes(c)]
    assert chosen_ids(shop, "route:blog+sql") == [c["id"] for c in raw
                                                  if routes(c) == {"sql", "blog"}]
    assert chosen_ids(shop, "!route:blog") == [c["id"] for c in raw if routes(c) == {"sql"}]


def test_route_none_and_unlabelled():
    cases = [case("a", ["sql"]), case("b", []), case("c", None), case("d", ["blog", "sql"])]
    assert ids(select(cases, Selection(filters=("route:none",))).cases) == ["b"]
    assert ids(select(cases, Selection(filters=("route:unlabelled",))).cases) == ["c"]
    assert ids(select(cases, Selection(filters=("route:none,unlabelled",))).cases) == ["b", "c"]
    assert ids(select(cases, Selection(filters=("!route:unlabelled",))).cases) == ["a", "b", "d"]
    assert ids(select(cases, Selection(filters=("route:sql",))).cases) == ["a", "d"]


def test_patterns_of_one_term_are_alternatives(shop, raw):
    either = [c["id"] for c in raw if {"price", "brand"} & set(c["tags"])]
    assert chosen_ids(shop, "tag:price,brand") == either
    assert chosen_ids(shop, "tag:price, brand") == either
    assert chosen_ids(shop, "q001,q002,q05*") == ["q001", "q002", "q050", "q051"]


def test_a_leading_bang_negates_a_term(shop, raw):
    assert chosen_ids(shop, "!q00*") == [c["id"] for c in raw if not c["id"].startswith("q00")]
    assert chosen_ids(shop, "!tag:price,care") == [
        c["id"] for c in raw if not {"price", "care"} & set(c["tags"])]
    assert chosen_ids(shop, "! tag:price") == chosen_ids(shop, "!tag:price")


def test_several_filters_must_all_hold(shop, raw):
    both = [c["id"] for c in raw if "sql" in c["gold"]["routes"] and "size" in c["tags"]]
    assert both
    assert chosen_ids(shop, "route:sql", "tag:size") == both
    assert chosen_ids(shop, "tag:size", "route:sql") == both
    assert chosen_ids(shop, "route:sql", "!route:blog", "tag:size") == [
        c["id"] for c in raw if c["gold"]["routes"] == ["sql"] and "size" in c["tags"]]


@pytest.mark.parametrize("expr", ["colour:navy", "tag:", "", "!", "route: , ", "ids:q001"])
def test_a_bad_filter_names_the_valid_keys(expr):
    with pytest.raises(SelectionError) as err:
        parse_filter(expr)
    message = str(err.value)
    assert repr(expr) in message
    for key in FILTER_KEYS:
        assert key in message
    with pytest.raises(SelectionError):
        Selection(filters=("tag:price", expr))  # refused before any case is chosen


def test_a_selection_error_is_an_input_error_of_the_harness():
    assert issubclass(SelectionError, EvalHarnessError)


# -- limit, sample, ids, and what is left -------------------------------------------------------


def test_limit_takes_the_first_cases_in_file_order(shop):
    chosen = select(shop, Selection(limit=4))
    assert ids(chosen.cases) == ["q001", "q002", "q003", "q004"]
    assert chosen.how == "4 of 51 cases: the first 4 in file order"
    assert not chosen.everything and chosen.total == 51


def test_limit_and_sample_exclude_each_other():
    with pytest.raises(SelectionError, match="--limit and --sample exclude each other"):
        Selection(limit=5, sample=5)


@pytest.mark.parametrize("field", ["limit", "sample"])
@pytest.mark.parametrize("value", [0, -3, True, 2.5, "3"])
def test_limit_and_sample_are_whole_numbers_of_cases(field, value):
    with pytest.raises(SelectionError, match=f"--{field} must be a whole number"):
        Selection(**{field: value})


def test_a_selection_that_leaves_no_case_says_so(shop):
    with pytest.raises(SelectionError) as err:
        select(shop, Selection(filters=("route:sql", "tag:nothing-has-this")),
               source="scenarios/shop.yaml")
    message = str(err.value)
    assert "leaves no case of the 51 in scenarios/shop.yaml" in message
    assert "'tag:nothing-has-this'" in message and "loosen --filter" in message


def test_ids_take_exactly_those_cases_in_file_order(shop):
    chosen = select(shop, Selection(ids=("q010", "q002", "q003")))
    assert ids(chosen.cases) == ["q002", "q003", "q010"]
    assert "3 named by id" in chosen.how


def test_an_unknown_id_is_an_error_naming_it(shop):
    with pytest.raises(SelectionError, match="no case with id 'q999' in the scenario"):
        select(shop, Selection(ids=("q001", "q999")))


def test_the_options_apply_in_order_failed_ids_filters_sample_limit(shop, raw, shop_sample):
    failed = failed_ids(shop_sample)
    # the filter applies before the limit: the first 3 sql-only cases, not the sql-only cases
    # among the first 3
    assert ids(select(shop, Selection(filters=("route:sql", "!route:blog"), limit=3)).cases) \
        == [c["id"] for c in raw if c["gold"]["routes"] == ["sql"]][:3] == ["q001", "q004", "q006"]
    # and before the sample: the sample is drawn from what the filter leaves
    picked = select(shop, Selection(filters=("route:blog",), sample=5, seed=2)).cases
    assert len(picked) == 5 and {stratum(c) for c in picked} == {"blog", "blog+sql"}
    # ids narrow the failed cases, filters narrow further, then the sample
    some = sorted({*sorted(failed)[:6], "q001", "q002"})
    chosen = select(shop, Selection(rerun_failed=shop_sample, ids=tuple(some),
                                    filters=("!tag:size",), sample=2, seed=0))
    allowed = {c.id for c in shop if c.id in failed and c.id in some
               and "size" not in c.tags}
    assert len(chosen.cases) == min(2, len(allowed)) and set(ids(chosen.cases)) <= allowed
    steps = chosen.how.split(": ", 1)[1].split("; then ")
    assert steps[0].startswith(f"the {len(failed)} that failed in {shop_sample}")
    assert steps[1] == f"{len(some)} named by id"
    assert steps[2] == "--filter '!tag:size'"


def test_the_record_names_the_chosen_cases_by_digest(shop):
    a = select(shop, Selection(sample=10, seed=1)).record()
    assert a == select(shop, Selection(sample=10, seed=1)).record()
    assert a["ids_sha256"] != select(shop, Selection(sample=10, seed=2)).record()["ids_sha256"]
    assert a["chosen"] == 10 and a["total"] == 51 and a["everything"] is False
    assert "stratified by gold route" in a["how"] and "seed 1" in a["how"]


def test_every_case_when_nothing_is_asked(shop):
    chosen = select(shop, Selection())
    assert chosen.everything and ids(chosen.cases) == ids(shop)
    assert chosen.how == "all 51 cases"


# -- failed cases of an earlier run -----------------------------------------------------------


def test_failed_ids_are_the_cases_whose_end_to_end_verdict_failed_or_erred(shop_sample):
    lines = (shop_sample / "results.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    expected = {r["case"]["id"] for r in records
                if (r.get("end_to_end") or {}).get("status") in ("fail", "error")}
    assert len(records) == 12 and 0 < len(expected) < 12, "a run with passes and failures"
    assert failed_ids(shop_sample) == expected
    assert failed_ids(str(shop_sample)) == expected


def test_rerun_failed_chooses_the_failed_cases_in_file_order(shop, shop_sample):
    failed = failed_ids(shop_sample)
    chosen = select(shop, Selection(rerun_failed=shop_sample), source="scenarios/shop.yaml")
    assert ids(chosen.cases) == [c.id for c in shop if c.id in failed]
    assert chosen.how == (f"{len(failed)} of 51 cases: the {len(failed)} that failed in "
                          f"{shop_sample}")


def test_rerun_failed_counts_failed_cases_no_longer_in_the_scenario(shop, shop_sample):
    failed = sorted(failed_ids(shop_sample))
    fewer = [c for c in shop if c.id != failed[0]]
    chosen = select(fewer, Selection(rerun_failed=shop_sample), source="shop.yaml")
    assert len(chosen.cases) == len(failed) - 1
    assert "(1 no longer in shop.yaml)" in chosen.how


def test_rerun_failed_of_a_folder_without_results_says_what_to_give(tmp_path):
    with pytest.raises(SelectionError, match="no results.jsonl there; give the --out folder"):
        failed_ids(tmp_path)
    with pytest.raises(SelectionError, match="no results.jsonl"):
        select([case("a", ["sql"])], Selection(rerun_failed=tmp_path / "missing"))


def test_rerun_failed_of_a_run_where_nothing_failed_leaves_no_case(tmp_path):
    c = case("a", ["sql"])
    line = CaseResult(case=c, trace={"case_id": "a"}, end_to_end=Verdict(status="pass"))
    (tmp_path / "results.jsonl").write_text(line.to_line() + "\n")
    with pytest.raises(SelectionError, match="leaves no case"):
        select([c], Selection(rerun_failed=tmp_path))


def test_without_an_end_to_end_verdict_a_component_failure_or_system_error_counts(tmp_path):
    results = [
        CaseResult(case=case("ok", ["sql"]), trace={"case_id": "ok"},
                   verdicts={"router": Verdict(status="pass")}),
        CaseResult(case=case("bad", ["sql"]), trace={"case_id": "bad"},
                   verdicts={"router": Verdict(status="pass"), "text2sql":
                             Verdict(status="fail")}),
        CaseResult(case=case("crashed", ["sql"]), trace={"case_id": "crashed", "error": "boom"}),
        CaseResult(case=case("e2e-ok", ["sql"]), trace={"case_id": "e2e-ok"},
                   verdicts={"text2sql": Verdict(status="fail")},
                   end_to_end=Verdict(status="pass")),
    ]
    Path(tmp_path / "results.jsonl").write_text("".join(r.to_line() + "\n" for r in results))
    assert failed_ids(tmp_path) == {"bad", "crashed"}


# -- "a failed case", defined once ---------------------------------------------------------------

OUTCOMES = [  # (end to end, component verdicts, system error) -> outcome
    ("pass", {"retriever": "fail"}, None, "pass"),
    ("fail", {"retriever": "pass"}, None, "fail"),
    ("error", {}, None, "error"),
    (None, {"retriever": "pass", "router": "error"}, None, "error"),
    (None, {"retriever": "error", "router": "fail"}, None, "fail"),
    (None, {"retriever": "not_applicable"}, None, None),
    (None, {}, "boom", "error"),
    (None, {}, None, None),
]


def _result(n: int, e2e, verdicts, error) -> CaseResult:
    return CaseResult(case=Case(id=f"c{n}", question="q"),
                      trace={"case_id": f"c{n}", "error": error},
                      verdicts={c: Verdict(status=s) for c, s in verdicts.items()},
                      end_to_end=Verdict(status=e2e) if e2e else None)


def test_a_failed_case_is_defined_once_and_every_reader_agrees(tmp_path):
    """CaseResult.outcome/failed is the one definition: --rerun-failed, RunFolder.failed and
    the report page's list read it (the page adds cases that pass with a failing component),
    and the oracle reruns take its end-to-end failures."""
    from evalharness.html import _is_failure
    from evalharness.runfolder import RunFolder

    results = [_result(n, *row[:3]) for n, row in enumerate(OUTCOMES)]
    assert [r.outcome for r in results] == [row[3] for row in OUTCOMES]
    failed = {r.case.id for r in results if r.failed}
    assert failed == {"c1", "c2", "c3", "c4", "c6"}
    (tmp_path / "results.jsonl").write_text("".join(r.to_line() + "\n" for r in results))
    assert failed_ids(tmp_path) == failed
    assert set(RunFolder(path=tmp_path, report=None, results=results).failed) == failed
    shown = {r.case.id for r in results if _is_failure(r, False)}
    assert shown == failed | {"c0"}  # c0 passes end to end, its retriever fails
    picked, count = sample_failed(results, 100)
    assert {results[i].case.id for i in picked} == {"c1"} and count == 1
