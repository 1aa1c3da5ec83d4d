"""The results view (``evalharness.results.Results``): a sequence over results.jsonl that keeps
a few numbers per case and reads each case from its line when asked; and the report built
through it — the same report as from every result in memory, without ever holding them all."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import sys
import weakref
from collections.abc import Sequence

import pytest

from conftest import ROOT
from evalharness import html
from evalharness import results as results_module
from evalharness.errors import InputError
from evalharness.html import render_html
from evalharness.judge.base import judge_usage
from evalharness.models import Case, CaseResult, Trace
from evalharness.report import build_report, render_markdown, write_reports
from evalharness.results import Results, read_results
from evalharness.runner import RunOutcome, prepare_context, run
from evalharness.scenario import load_scenario


def line(case_id: str, question: str = "q") -> str:
    return CaseResult(case=Case(id=case_id, question=question),
                      trace=Trace(case_id=case_id)).to_line()


# -- the view -----------------------------------------------------------------------------------


def test_the_view_is_a_sequence_in_case_order(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text("".join(line(i, f"about {i}") + "\n" for i in ["c3", "c1", "gone", "c2"])
                    + "\n")
    view = Results.open(path, order=["c1", "c2", "c3", "c4"])
    assert isinstance(view, Sequence) and len(view) == 3
    assert list(view.case_ids) == ["c1", "c2", "c3"]  # no line read for that
    assert [r.case.id for r in view] == ["c1", "c2", "c3"]  # a case no longer there: left out
    assert view[0].case.id == "c1" and view[-1].case.question == "about c3"
    assert isinstance(view[1:], Results) and [r.case.id for r in view[1:]] == ["c2", "c3"]
    assert next(r for r in view if r.case.id == "c2").case.question == "about c2"
    with pytest.raises(IndexError):
        view[3]
    # without an order, the file's order; no file, no results
    assert [r.case.id for r in Results.open(path)] == ["c3", "c1", "gone", "c2"]
    assert len(Results.open(tmp_path / "nothing.jsonl")) == 0


def test_a_repeated_case_counts_once_from_its_first_line(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text("\n".join([line("c1", "first"), line("c2"), line("c1", "second"),
                               line("gone"), line("gone")]) + "\n")
    warnings: list[str] = []
    view = Results.open(path, order=["c1", "c2"], warnings=warnings)
    assert [(r.case.id, r.case.question) for r in view] == [("c1", "first"), ("c2", "q")]
    assert len(warnings) == 1
    assert "repeats 2 cases (e.g. 'c1' on lines 1 and 3); each case counts once" in warnings[0]


def test_a_torn_last_line_is_dropped_on_resume_and_an_error_otherwise(tmp_path):
    path = tmp_path / "results.jsonl"
    whole = line("c1") + "\n" + line("c2") + "\n"
    path.write_text(whole + line("c3")[:50])  # the id can be read, the JSON is cut short
    view = Results.open(path)
    assert len(view) == 3
    with pytest.raises(InputError, match=r"results.jsonl, line 3: not valid JSON"):
        list(view)
    assert list(Results.open(path, repair=True).case_ids) == ["c1", "c2"]
    assert path.read_text() == whole  # the torn line is cut from the file
    path.write_text(whole + line("c3"))  # whole but for its newline: kept, and mended
    assert list(Results.open(path, repair=True).case_ids) == ["c1", "c2", "c3"]
    assert path.read_text() == whole + line("c3") + "\n"


def test_errors_name_the_file_and_the_line(tmp_path):
    path = tmp_path / "results.jsonl"
    # a line as evalharness writes it is checked when it is read...
    path.write_text(line("c1") + "\n" + line("c2").replace('"question":"q"', '"question":5')
                    + "\n")
    view = Results.open(path)
    assert view[0].case.id == "c1"
    with pytest.raises(InputError, match=r"results.jsonl, line 2: not a result record"):
        list(view)
    # ...any other line when the file is indexed
    path.write_text(line("c1") + "\n" + '{"case": 1}\n')
    with pytest.raises(InputError, match=r"results.jsonl, line 2: not a result record"):
        Results.open(path)
    path.write_text(line("c1") + "\n[1]\n")
    with pytest.raises(InputError, match="line 2: expected a JSON object"):
        Results.open(path)


def test_the_view_reads_each_case_again_and_keeps_none(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text("".join(line(i, f"question {i}") + "\n" for i in ["c1", "c2", "c3"]))
    view = Results.open(path)
    first, again = list(view), list(view)
    assert [r.model_dump() for r in first] == [r.model_dump() for r in again]
    assert all(a is not b for a, b in zip(first, again, strict=True))
    # what the file says now is what is read (same length: the offsets still hold)
    path.write_bytes(path.read_bytes().replace(b"question c2", b"QUESTION C2"))
    assert view[1].case.question == "QUESTION C2"
    assert [r.case.question for r in view] == ["question c1", "QUESTION C2", "question c3"]
    # a file rewritten under the view is an error, never another case's result
    path.write_text("".join(line(i, f"question {i}") + "\n" for i in ["c2", "c1", "c3"]))
    with pytest.raises(InputError, match="line 1: holds case 'c2' where case 'c1' was"):
        view[0]


def test_read_results_is_the_view_in_a_list(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text("".join(line(i) + "\n" for i in ["b", "a", "b"]))
    warnings: list[str] = []
    listed = read_results(path, warnings=warnings)
    assert [r.model_dump() for r in listed] == [r.model_dump() for r in Results.open(path)]
    assert [r.case.id for r in listed] == ["b", "a"] and "repeats 1 case" in warnings[0]


# -- the report through the view ------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """The shop scenario (with its oracle reruns) and one fault variant, run in-process."""
    out = {}
    for name, headroom in (("shop", True), ("shop-fault-retriever", False)):
        scenario = load_scenario(ROOT / "scenarios" / f"{name}.yaml")
        outcome = asyncio.run(run(scenario, tmp_path_factory.mktemp(name), headroom=headroom))
        out[name] = scenario, outcome
    return out


def _without_run(report) -> dict:
    data = report.model_dump(mode="json")
    data.pop("run")
    return data


@pytest.mark.parametrize("name", ["shop", "shop-fault-retriever"])
def test_the_report_from_the_view_equals_the_report_from_every_result_in_memory(runs, name):
    scenario, outcome = runs[name]
    assert isinstance(outcome.results, Results)
    order = {c.id: i for i, c in enumerate(scenario.cases)}
    listed = sorted(read_results(outcome.out_dir / "results.jsonl"),
                    key=lambda r: order[r.case.id])
    in_memory = build_report(scenario, dataclasses.replace(outcome, results=listed))
    streamed = build_report(scenario, outcome)
    assert _without_run(streamed) == _without_run(in_memory)
    assert render_markdown(streamed) == render_markdown(in_memory)
    assert render_html(streamed, outcome.results) == render_html(in_memory, listed)
    if name == "shop":
        assert streamed.bottleneck.headroom, "the oracle reruns were planned through the view"
    # judge usage is summed case by case; each record id counted once in the whole run
    # (judge_usage over every record at once) gives the same
    prices = scenario.spec.judge.prices

    def records(component=None, metric=None):
        return [x for r in listed for c, comp in r.components.items()
                if component in (None, c) for m, v in comp.metrics.items()
                if metric in (None, m) for x in v.details.get("judgments") or ()]

    assert records(), "the shop's judged metrics keep their judgments' records"
    assert streamed.judge["usage"] == judge_usage(records(), prices)
    for component, block in streamed.components.items():
        if block.judge is not None:
            assert block.judge == judge_usage(records(component), prices)
        for metric, summary in block.metrics.items():
            if summary.judge is not None:
                assert summary.judge == judge_usage(records(component, metric), prices)


def test_the_report_of_a_large_run_never_holds_every_case_result(runs, tmp_path, monkeypatch):
    """Every CaseResult the report reads is counted while it lives (a finalizer): of a
    run of 1,200 cases, read several times over, never more than the failed cases the HTML
    page shows are alive at once."""
    spec = importlib.util.spec_from_file_location("report_memory",
                                                  ROOT / "benchmarks" / "report_memory.py")
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench
    spec.loader.exec_module(bench)
    n = 1200
    path = bench.write_run(runs["shop"][1].out_dir, tmp_path / "big", n)
    scenario = load_scenario(path)
    counts = {"read": 0, "alive": 0, "peak": 0}
    parse = results_module.parse_line

    def gone():
        counts["alive"] -= 1

    def counted(*args, **kwargs):
        result = parse(*args, **kwargs)
        weakref.finalize(result, gone)
        counts["read"] += 1
        counts["alive"] += 1
        counts["peak"] = max(counts["peak"], counts["alive"])
        return result

    monkeypatch.setattr(results_module, "parse_line", counted)
    out = tmp_path / "out"
    out.mkdir()
    context = prepare_context(scenario, out)
    outcome = RunOutcome(out_dir=out, results=Results.open(
        path.parent / "results.jsonl", order=[c.id for c in scenario.cases]),
        context=context, started_at="", duration_s=0.0)
    try:
        report = build_report(scenario, outcome)
        write_reports(report, out, outcome.results)
    finally:
        context.judge.close()
    assert report.cases["evaluated"] == n and report.bottleneck.end_to_end.failed > html.MAX_CASES
    assert counts["read"] >= 4 * n  # the report, the plugins and the page each read them all
    assert counts["peak"] <= html.MAX_CASES + 1, counts
    assert f"Showing the first {html.MAX_CASES} of" in (out / "report.html").read_text()
