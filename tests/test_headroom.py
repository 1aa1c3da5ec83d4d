"""Oracle headroom: failed cases rerun with one component's output replaced by its gold.

A toy system with one known bug per component makes every number hand-checkable:

====  ==============  =====================================  ================================
case  gold routes     what goes wrong                        fixed by the oracle of
====  ==============  =====================================  ================================
c1    sql             text2sql flips ``<`` into ``>``        text2sql
c2    blog            the router sends it to sql             router
c3    blog            the retriever ranks a wrong chunk 1st  retriever
c4    sql             nothing (passes)                       —
c5    sql, blog       text2sql *and* the retriever           only every oracle at once
c6    sql             text2sql, and the case has no gold SQL none (no gold for text2sql)
====  ==============  =====================================  ================================

The answer is the SQL rows' values and the top chunk id joined by `` | ``; the end-to-end
verdict is an exact match with ``gold.answer`` (a local plugin's metric).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from conftest import run_cli, write, write_jsonl
from evalharness import hookimpl
from evalharness.errors import NoOracle
from evalharness.models import GeneratorStep, RetrieverStep, RouterStep, Trace
from evalharness.oracle import ignored
from evalharness.plugins import load_plugins
from evalharness.report import build_report
from evalharness.runner import run
from evalharness.scenario import load_scenario

CASES = [
    {"id": "c1", "question": "cheap coats", "gold": {
        "routes": ["sql"], "sql": "SELECT name FROM items WHERE price < 50",
        "answer": "Navy Coat"}},
    {"id": "c2", "question": "wool care", "gold": {
        "routes": ["blog"], "relevant": {"k1": 2}, "answer": "k1"}},
    {"id": "c3", "question": "linen", "gold": {
        "routes": ["blog"], "relevant": {"k2": 1}, "answer": "k2"}},
    {"id": "c4", "question": "dear coats", "gold": {
        "routes": ["sql"], "sql": "SELECT name FROM items WHERE price > 50",
        "answer": "Camel Coat"}},
    {"id": "c5", "question": "cheap coats and wool care", "gold": {
        "routes": ["sql", "blog"], "sql": "SELECT name FROM items WHERE price < 50",
        "relevant": {"k1": 1}, "answer": "Navy Coat | k1"}},
    {"id": "c6", "question": "all coats", "gold": {"routes": ["sql"], "answer":
                                                     "Camel Coat | Navy Coat"}},
]

SYSTEM = '''
import sqlite3
from pathlib import Path

from evalharness.models import GeneratorStep, RetrieverStep, RouterStep, Text2SQLStep, Trace

HERE = Path(__file__).parent
TEXTS = {"k1": "Brush wool and air it.", "k2": "Linen likes a cool wash.",
         "k3": "Sneakers age well."}
ROUTES = {"c1": ["sql"], "c2": ["sql"], "c3": ["blog"], "c4": ["sql"], "c5": ["sql", "blog"],
          "c6": ["sql"]}
SQL = {"c1": "SELECT name FROM items WHERE price > 50",      # bug: > for <
       "c2": "SELECT name FROM items WHERE price > 1000",
       "c4": "SELECT name FROM items WHERE price > 50",
       "c5": "SELECT name FROM items WHERE price > 50",      # bug
       "c6": "SELECT name FROM items WHERE price > 50"}     # bug: misses the Navy Coat
RANKING = {"c2": ["k1", "k3"], "c3": ["k3", "k2"], "c5": ["k3", "k1"]}


def _rows(sql):
    conn = sqlite3.connect(":memory:")
    conn.executescript((HERE / "items.sql").read_text())
    cur = conn.execute(sql)
    return [d[0] for d in cur.description], [list(r) for r in cur.fetchall()]


def answer(case, *, overrides=None, log=None, ignore=False):
    if log:
        with open(log, "a") as fh:
            fh.write(case.id + " " + ",".join(sorted(overrides or {})) + "\\n")
    o = {} if ignore else (overrides or {})
    routes = o["router"]["routes"] if "router" in o else ROUTES[case.id]
    trace = Trace(case_id=case.id, router=RouterStep(routes=routes))
    parts = []
    if "sql" in routes:
        if "text2sql" in o:
            step = Text2SQLStep(**o["text2sql"])
        else:
            columns, rows = _rows(SQL[case.id])
            step = Text2SQLStep(sql=SQL[case.id], columns=columns, rows=rows)
        trace.text2sql = step
        parts += sorted(str(v) for row in step.rows or [] for v in row)
    if "blog" in routes:
        if "retriever" in o:
            step = RetrieverStep(**o["retriever"])
        else:
            ids = RANKING.get(case.id, ["k3"])
            step = RetrieverStep(ids=ids, texts=[TEXTS[i] for i in ids])
        trace.retriever = step
        parts += step.ids[:1]
    text = " | ".join(parts)
    if "generator" in o:
        text = o["generator"]["answer"]
    trace.generator = GeneratorStep(answer=text, contexts=parts)
    return trace


def no_overrides(case):
    return answer(case)
'''

EXACT = '''
from evalharness import MetricValue, hookimpl
from evalharness.registry import Evaluator


@hookimpl
def register_evaluators(register):
    register(Evaluator(name="exact_answer", component="generator", metrics=["exact"]))


@hookimpl
def evaluate_generator(evaluator, batch):
    if evaluator == "exact_answer":
        return [{"exact": MetricValue.of((step.answer or "") == (case.gold.answer or ""))}
                for case, step in batch]
'''

SCENARIO = """
name: toy
cases: cases.jsonl
system: {system}
database: {{build: items.sql}}
corpus: corpus.jsonl
plugins: [exact.py]
evaluators:
  router: [route_accuracy]
  text2sql: [exact_match]
  retriever:
    - ranking: {{k: [2]}}
  generator: [exact_answer]
verdicts:
  text2sql: exact_match >= 1
  retriever: recall@2 >= 1
  generator: exact >= 1
  end_to_end: generator.exact >= 1
"""


@pytest.fixture
def toy(tmp_path: Path):
    """Write the toy scenario; returns a function giving its YAML path for a system spec."""
    write_jsonl(tmp_path / "cases.jsonl", CASES)
    write_jsonl(tmp_path / "corpus.jsonl", [
        {"id": "k1", "text": "Brush wool and air it."},
        {"id": "k2", "text": "Linen likes a cool wash."},
        {"id": "k3", "text": "Sneakers age well."}])
    write(tmp_path / "items.sql", """
        CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, price REAL);
        INSERT INTO items VALUES (1, 'Navy Coat', 40), (2, 'Camel Coat', 120);
    """)
    write(tmp_path / "toy_system.py", SYSTEM)
    write(tmp_path / "exact.py", EXACT)

    def scenario(system: str = "toy_system.py:answer", name: str = "toy.yaml") -> Path:
        return write(tmp_path / name, SCENARIO.format(system=system))

    return scenario


def headroom(out: Path) -> dict[str, dict]:
    report = json.loads((out / "report.json").read_text())
    return {row["oracle"]: row for row in report["bottleneck"]["headroom"]}


def records(out: Path) -> dict[tuple[str, str], dict]:
    lines = (out / "headroom.jsonl").read_text().splitlines()
    return {(r["oracle"], r["case_id"]): r for r in map(json.loads, lines)}


def test_each_oracle_fixes_exactly_the_cases_its_component_breaks(toy, tmp_path):
    out = tmp_path / "out"
    result = run_cli("scenario", toy(), "--out", out)
    assert result.code == 0, result
    rows = headroom(out)
    assert list(rows) == ["router", "text2sql", "retriever", "generator",
                          "router+text2sql+retriever"]
    # 1 of 6 cases passes; 5 fail
    expected = {  # oracle: (fixed, still_fails, no_oracle)
        "router": (1, 4, 0),                     # c2; every failed case has gold routes
        "text2sql": (1, 1, 3),                   # c1; c5 still (retriever); c2, c3, c6 no SQL
        "retriever": (1, 2, 2),                  # c3; c2 misrouted, c5 (text2sql); c1, c6
        "router+text2sql+retriever": (4, 1, 0),  # c1, c2, c3, c5; c6 lacks gold SQL
    }
    for oracle, (fixed, still, none) in expected.items():
        row = rows[oracle]
        assert (row["fixed"], row["still_fails"], row["no_oracle"], row["errors"]) == (
            fixed, still, none, 0), (oracle, row)
        assert row["gain"] == pytest.approx(fixed / 6)
        assert row["pass_rate"] == pytest.approx(1 / 6 + fixed / 6)
        assert row["ci95"][0] <= row["gain"] <= row["ci95"][1]
    gen = rows["generator"]
    assert gen["gain"] is None and gen["no_oracle"] == 5
    assert "no plugin provides an oracle output for generator" in gen["reason"]
    recs = records(out)
    assert recs[("text2sql", "c1")]["status"] == "fixed"
    assert recs[("retriever", "c2")]["status"] == "still_fails"
    assert "router fails first" in recs[("retriever", "c2")]["reason"]
    assert recs[("text2sql", "c6")]["status"] == "no_oracle"
    assert "no gold SQL" in recs[("text2sql", "c6")]["reason"]
    # the terminal's bottleneck table and report.md show it beside the attribution
    assert "headroom (95% CI)" in result.out and "+17% (" in result.out
    row = next(line for line in result.out.splitlines() if "every oracle at once" in line)
    assert "+67% (" in row
    md = (out / "report.md").read_text()
    assert "oracle headroom (95% CI)" in md and "| — (no oracle) |" in md
    html = (out / "report.html").read_text()
    assert 'id="headroom-chart"' in html and 'data-oracle="text2sql"' in html


def test_the_oracle_outputs_the_system_receives(toy, tmp_path):
    log = tmp_path / "calls.log"
    path = toy(system=f"{{callable: toy_system.py:answer, options: {{log: '{log}'}}}}")
    assert run_cli("scenario", path, "--out", tmp_path / "out", "-q").code == 0
    calls = log.read_text().splitlines()
    first, reruns = calls[:6], calls[6:]
    assert sorted(first) == [f"c{i} " for i in range(1, 7)]  # the run: no overrides
    # router: 5 failed cases; text2sql: c1, c5; retriever: c3, c2, c5; all at once: 5
    assert len(reruns) == 5 + 2 + 3 + 5
    assert sorted(reruns) == sorted([  # c6's "all at once" is its router oracle alone
        "c1 router", "c2 router", "c3 router", "c5 router", "c6 router",
        "c1 text2sql", "c5 text2sql",
        "c2 retriever", "c3 retriever", "c5 retriever",
        "c1 router,text2sql", "c2 retriever,router", "c3 retriever,router",
        "c5 retriever,router,text2sql", "c6 router"])


def test_resume_does_not_rerun_what_headroom_jsonl_holds(toy, tmp_path):
    log = tmp_path / "calls.log"
    path = toy(system=f"{{callable: toy_system.py:answer, options: {{log: '{log}'}}}}")
    out = tmp_path / "out"
    assert run_cli("scenario", path, "--out", out, "-q").code == 0
    before = headroom(out)
    n = len(log.read_text().splitlines())
    # a torn last line, as a kill would leave it, and one record lost
    lines = (out / "headroom.jsonl").read_text().splitlines()
    lost = json.loads(lines[-1])
    (out / "headroom.jsonl").write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:20])
    assert run_cli("scenario", path, "--out", out, "--resume", "-q").code == 0
    calls = log.read_text().splitlines()[n:]
    assert len(calls) == 1 and calls[0].startswith(f"{lost['case_id']} "), calls
    assert headroom(out) == before


def test_a_system_without_overrides_gets_no_headroom_and_is_told_why(toy, tmp_path):
    out = tmp_path / "out"
    result = run_cli("scenario", toy(system="toy_system.py:no_overrides"), "--out", out)
    assert result.code == 0, result
    report = json.loads((out / "report.json").read_text())
    b = report["bottleneck"]
    assert b["headroom"] is None and "no `overrides` parameter" in b["headroom_note"]
    assert "Oracle headroom: the system" in result.out
    assert not (out / "headroom.jsonl").exists()


def test_no_headroom_flag_and_scenario_switch(toy, tmp_path):
    out = tmp_path / "flag"
    assert run_cli("scenario", toy(), "--out", out, "--no-headroom", "-q").code == 0
    b = json.loads((out / "report.json").read_text())["bottleneck"]
    assert b["headroom"] is None and "--no-headroom" in b["headroom_note"]
    path = toy(system="{callable: toy_system.py:answer, headroom: false}", name="off.yaml")
    out = tmp_path / "switch"
    assert run_cli("scenario", path, "--out", out, "-q").code == 0
    b = json.loads((out / "report.json").read_text())["bottleneck"]
    assert b["headroom"] is None and "system.headroom: false" in b["headroom_note"]


def test_a_system_that_ignores_the_overrides_is_an_error_not_zero_headroom(toy, tmp_path):
    path = toy(system="{callable: toy_system.py:answer, options: {ignore: true}}")
    out = tmp_path / "out"
    assert run_cli("scenario", path, "--out", out, "-q").code == 0
    rows = headroom(out)
    # only where the override differs from what the system did anyway can it show: c2's
    # routes; c1's and c5's SQL
    assert (rows["router"]["errors"], rows["router"]["still_fails"]) == (1, 4)
    assert (rows["text2sql"]["errors"], rows["text2sql"]["fixed"]) == (2, 0)
    rec = records(out)[("router", "c2")]
    assert rec["status"] == "error" and "did not apply the router override" in rec["reason"]


def test_ignored_compares_what_the_trace_records():
    trace = Trace(case_id="x", router=RouterStep(routes=["blog"]),
                  retriever=RetrieverStep(ids=["a"]))
    assert ignored(trace, {"router": {"routes": ["blog"]}}) is None
    assert "routes" in ignored(trace, {"router": {"routes": ["sql"]}})
    assert ignored(trace, {"text2sql": {"sql": "SELECT 1"}}) is None  # did not run: fine
    assert "ids" in ignored(trace, {"retriever": {"ids": ["b"]}})


class GeneratorOracle:
    """A plugin giving the generator kind an oracle: the reference answer."""

    @hookimpl
    def oracle_output(self, kind, case):
        if kind != "generator":
            return None
        if case.gold.answer is None:
            raise NoOracle("the case has no reference answer (gold.answer)")
        return {"answer": case.gold.answer}


class BrokenOracle:
    @hookimpl
    def oracle_output(self, kind):
        if kind == "generator":
            raise RuntimeError("boom")


def _run_in_process(path: Path, plugins: list) -> tuple:
    host = load_plugins([path.parent / "exact.py"], modules=plugins)
    scenario = load_scenario(path, host=host)
    outcome = asyncio.run(run(scenario, path.parent / "out"))
    return outcome, build_report(scenario, outcome)


def test_hook_oracle_output(toy):
    outcome, report = _run_in_process(toy(), [GeneratorOracle()])
    rows = {r.oracle: r for r in report.bottleneck.headroom}
    # the reference answer as the generator's output fixes every failed case
    assert rows["generator"].fixed == 5 and rows["generator"].gain == pytest.approx(5 / 6)
    assert "router+text2sql+retriever+generator" in rows
    assert rows["router"].fixed == 1  # the built-in oracles still answer for their kinds
    assert all(r.case_id for r in outcome.headroom)


def test_a_failing_oracle_plugin_is_an_error_per_case_and_the_run_goes_on(toy):
    _, report = _run_in_process(toy(), [BrokenOracle()])
    rows = {r.oracle: r for r in report.bottleneck.headroom}
    assert rows["generator"].errors == 5 and rows["generator"].gain is None
    assert rows["router"].fixed == 1


def test_the_shop_assistant_applies_each_override():
    from test_shop_assistant import assistant

    from evalharness.models import Case

    case = Case(id="x", question="How do I wash a wool jumper?")
    trace = assistant.answer(case, overrides={
        "router": {"routes": ["sql", "blog"]},
        "text2sql": {"sql": "SELECT 1 AS n", "columns": ["n"], "rows": [[1]]},
        "retriever": {"ids": ["b01"], "texts": ["Wash wool cold, by hand."]}})
    assert trace.router.routes == ["sql", "blog"]
    assert trace.text2sql.sql == "SELECT 1 AS n" and trace.text2sql.rows == [[1]]
    assert trace.retriever.ids == ["b01"]
    assert "Wash wool cold, by hand." in trace.generator.contexts
    assert ignored(trace, {"router": {"routes": ["sql", "blog"]},
                           "retriever": {"ids": ["b01"]}}) is None
    with pytest.raises(ValueError, match="cannot override generator"):
        assistant.answer(case, overrides={"generator": {"answer": "x"}})
    assert isinstance(trace.generator, GeneratorStep)


def test_a_sample_of_the_failed_cases_estimates_the_gain(toy, tmp_path):
    """`system.headroom: N` reruns a seeded sample of N failed cases; each fixed case then
    stands for failed/N of them."""
    log = tmp_path / "calls.log"
    path = toy(system=f"{{callable: toy_system.py:answer, headroom: 2, "
                      f"options: {{log: '{log}'}}}}")
    out = tmp_path / "out"
    result = run_cli("scenario", path, "--out", out)
    assert result.code == 0, result
    rows = headroom(out)
    recs = records(out)
    sampled = {case for _, case in recs}
    assert len(sampled) == 2 and sampled <= {"c1", "c2", "c3", "c5", "c6"}
    for row in rows.values():
        assert row["sampled"] == 2
        assert row["fixed"] + row["still_fails"] + row["no_oracle"] + row["errors"] == 2
        if row["gain"] is not None:
            assert row["gain"] == pytest.approx(row["fixed"] * (5 / 2) / 6)
        assert "stratified by gold route) of 2 of the 5 failed cases" in row["reason"]
    assert ("estimated from a sample (stratified by gold route) of 2 of the 5 failed"
            in " ".join(result.out.split()))
    # the same sample every time
    out2 = tmp_path / "again"
    assert run_cli("scenario", path, "--out", out2, "-q").code == 0
    assert {case for _, case in records(out2)} == sampled
    bad = toy(system="{callable: toy_system.py:answer, headroom: -3}", name="bad.yaml")
    res = run_cli("scenario", bad, "--out", tmp_path / "bad")
    assert res.code == 2 and "system.headroom" in res.err, res


def test_the_reruns_go_through_the_runs_executor(toy, tmp_path):
    """One machinery: the oracle reruns are the executor's work as the run's cases are (an
    executor that records what it is given, wrapping the local one), with the same records
    as a plain run."""
    from evalharness.local_executor import LocalExecutor

    class Recording(LocalExecutor):
        def __init__(self):
            super().__init__()
            self.calls = []

        async def arun(self, spec, work, emit, stopped):
            self.calls.append([(w.case_id, w.oracle) for w in work])
            return await super().arun(spec, work, emit, stopped)

    scenario = load_scenario(toy())
    recording = Recording()
    asyncio.run(run(scenario, tmp_path / "a", executor=recording))
    assert asyncio.run(run(scenario, tmp_path / "b")).headroom
    cases, reruns = recording.calls
    assert sorted(c for c, o in cases) == [f"c{i}" for i in range(1, 7)]
    assert {o for _, o in cases} == {None}
    assert {o for _, o in reruns} == {"router", "text2sql", "retriever",
                                      "router+text2sql+retriever"}
    assert records(tmp_path / "a") == records(tmp_path / "b")
