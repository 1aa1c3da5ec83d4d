"""Every hook: documented in its docstring and in docs/hooks.md, and exercised by a test here."""

from __future__ import annotations

import asyncio
import inspect
import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from pydantic import BaseModel

from conftest import ROOT
from evalharness import MetricValue, hookimpl, hookspecs
from evalharness.judge import Judge
from evalharness.plugins import load_plugins
from evalharness.registry import ComponentKind, Evaluator, JudgeBackend, ReportSection
from evalharness.report import build_report, render_markdown
from evalharness.runner import run
from evalharness.scenario import load_scenario

HOOKS = {
    name: fn for name, fn in vars(hookspecs).items()
    if callable(fn) and hasattr(fn, "evalharness_spec")
}


def test_there_are_hooks():
    assert {"register_evaluators", "evaluate_retriever", "report_sections"} <= set(HOOKS)


@pytest.mark.parametrize("name", sorted(HOOKS))
def test_hook_is_documented_and_tested(name):
    fn = HOOKS[name]
    doc = inspect.getdoc(fn) or ""
    args = list(inspect.signature(fn).parameters)
    for arg in args:
        assert f":param {arg}:" in doc, f"{name}: docstring lacks :param {arg}:"
    assert ":returns:" in doc and "Example" in doc and "Called" in doc, name
    docs = (ROOT / "docs" / "hooks.md").read_text()
    heading = f"## `{name}({', '.join(args)})`"
    assert heading in docs.splitlines(), f"docs/hooks.md lacks the heading {heading}"
    tests = "".join(p.read_text() for p in (ROOT / "tests").glob("test_*.py"))
    assert f"def test_hook_{name}(" in tests, f"no test_hook_{name}"


# --------------------------------------------------------------------------------------------
# Running a small scenario in-process with extra plugin objects.
# --------------------------------------------------------------------------------------------


def run_with(plugins: list, small: Path, extra_yaml: str = "", replace: dict | None = None):
    text = small.read_text()
    for old, new in (replace or {}).items():
        assert old in text
        text = text.replace(old, new)
    small.write_text(text + extra_yaml)
    host = load_plugins(modules=plugins)
    scenario = load_scenario(small, host=host)
    outcome = asyncio.run(run(scenario, small.parent / "out"))
    return scenario, outcome, build_report(scenario, outcome)


def test_hook_register_evaluators(small):
    class Depth:
        @hookimpl
        def register_evaluators(self, register):
            register(Evaluator(name="depth", component="retriever", metrics=["depth"]))

        @hookimpl
        def evaluate_retriever(self, evaluator, batch):
            return [{"depth": MetricValue.of(len(step.ids))} for _, step in batch]

    _, _, report = run_with([Depth()], small, replace={
        "    - ranking: {k: [1, 2]}": "    - ranking: {k: [1, 2]}\n    - depth"})
    depth = report.components["retriever"].metrics["depth"]
    assert depth.mean == 2.5 and depth.n == 2 and depth.evaluator == "depth"
    assert report.components["retriever"].evaluators[-1].plugin == "Depth"


def test_hook_evaluate_router(small):
    class Abstain:
        @hookimpl
        def register_evaluators(self, register):
            register(Evaluator(name="abstention", component="router", metrics=["abstained"]))

        @hookimpl
        def evaluate_router(self, evaluator, batch, settings, context):
            assert evaluator == "abstention" and context.component == "router"
            return [{"abstained": MetricValue.of(not step.routes)} for _, step in batch]

    _, _, report = run_with([Abstain()], small,
                            replace={"[route_accuracy]": "[route_accuracy, abstention]"})
    assert report.components["router"].metrics["abstained"].mean == 0.0
    assert report.components["router"].metrics["route_accuracy"].n == 3


def test_hook_evaluate_text2sql(small):
    class Rows:
        @hookimpl
        def register_evaluators(self, register):
            register(Evaluator(name="returned_rows", component="text2sql",
                               metrics=["returned_rows"], needs_database=True))

        @hookimpl
        def evaluate_text2sql(self, evaluator, batch, context):
            assert context.database is not None and context.database.path.is_file()
            out = []
            for _, step in batch:
                if step.rows is None:
                    out.append({"returned_rows": MetricValue.failed("the step has no rows")})
                else:
                    out.append({"returned_rows": MetricValue.of(len(step.rows))})
            return out

    _, _, report = run_with([Rows()], small,
                            replace={"[exact_match]": "[exact_match, returned_rows]"})
    summary = report.components["text2sql"].metrics["returned_rows"]
    assert (summary.mean, summary.n, summary.errors) == (1.0, 1, 1)
    assert summary.error_reasons == {"the step has no rows": 1}


def test_hook_evaluate_retriever(small):
    class Settings(BaseModel):
        top: int = 1

    class Top:
        @hookimpl
        def register_evaluators(self, register):
            register(Evaluator(name="top_is", component="retriever",
                               metrics=lambda s: [f"top{s.top}_is_d2"], settings=Settings))

        @hookimpl
        def evaluate_retriever(self, evaluator, batch, settings):
            return [{f"top{settings.top}_is_d2": MetricValue.of("d2" in step.ids[: settings.top])}
                    for _, step in batch]

    _, _, report = run_with([Top()], small, replace={
        "    - ranking: {k: [1, 2]}": "    - ranking: {k: [1, 2]}\n    - top_is: {top: 2}"})
    assert report.components["retriever"].metrics["top2_is_d2"].mean == 1.0


def test_hook_evaluate_generator(small):
    class Polite:
        @hookimpl
        def register_evaluators(self, register):
            register(Evaluator(name="polite", component="generator", metrics=["says_coat"],
                               needs_judge=True))

        @hookimpl
        def evaluate_generator(self, evaluator, batch, context):
            assert context.judge.backend == "heuristic"
            return [{"says_coat": MetricValue.of("coat" in (s.answer or "").lower())}
                    for _, s in batch]

    _, _, report = run_with([Polite()], small,
                            replace={"[answer_present]": "[answer_present, polite]"})
    assert report.components["generator"].metrics["says_coat"].mean == pytest.approx(2 / 3)


class RerankerStep(BaseModel):
    ids: list[str]
    latency_ms: float | None = None


class RerankerSpecs:
    @hookspecs.hookspec(firstresult=True)
    def evaluate_reranker(self, evaluator, batch, settings, context):
        """Score a reranker."""


def test_hook_register_component_kinds(small, tmp_path):
    class Reranker:
        @hookimpl
        def register_component_kinds(self, register):
            register(ComponentKind("reranker", RerankerStep, "evaluate_reranker",
                                   hookspecs=RerankerSpecs))

        @hookimpl
        def register_evaluators(self, register):
            register(Evaluator(name="moved_up", component="reranker", metrics=["first_is_d2"]))

        @hookimpl
        def evaluate_reranker(self, evaluator, batch):
            return [{"first_is_d2": MetricValue.of(step.ids[:1] == ["d2"])} for _, step in batch]

    traces = tmp_path / "traces.jsonl"
    records = [json.loads(line) for line in traces.read_text().splitlines()]
    for record in records:
        if "retriever" in record:
            record["steps"] = {"reranker": {"ids": record["retriever"]["ids"][1:],
                                            "latency_ms": 1.5}}
    traces.write_text("".join(json.dumps(r) + "\n" for r in records))
    _, outcome, report = run_with([Reranker()], small, extra_yaml="""
pipeline:
  router: {routes: {sql: [text2sql], blog: [retriever]}}
  text2sql: {after: [router]}
  retriever: {after: [router]}
  reranker: {after: [retriever]}
  generator: {after: [text2sql, reranker]}
""", replace={"  generator: [answer_present]": "  reranker: [moved_up]"})
    assert list(report.components) == ["router", "text2sql", "retriever", "reranker",
                                       "generator"]
    rr = report.components["reranker"]
    assert rr.kind == "reranker" and rr.metrics["first_is_d2"].mean == 0.5
    assert rr.cost.latency_ms["p50"] == 1.5 and rr.cases["not_run"] == 1


def test_plugin_kind_step_that_does_not_validate_is_an_error_not_a_crash(small, tmp_path):
    class Reranker:
        @hookimpl
        def register_component_kinds(self, register):
            register(ComponentKind("reranker", RerankerStep, "evaluate_reranker",
                                   hookspecs=RerankerSpecs))

    traces = tmp_path / "traces.jsonl"
    records = [json.loads(line) for line in traces.read_text().splitlines()]
    records[0]["steps"] = {"reranker": {"ids": "not a list"}}
    traces.write_text("".join(json.dumps(r) + "\n" for r in records))
    _, outcome, report = run_with([Reranker()], small, extra_yaml="""
pipeline:
  router: {}
  text2sql: {after: [router]}
  retriever: {after: [router]}
  reranker: {after: [retriever]}
  generator: {after: [text2sql, reranker]}
""")
    first = outcome.results[0].components["reranker"]
    assert first.status == "error" and "field `ids`" in first.reason
    assert report.components["reranker"].cases == {"evaluated": 0, "not_run": 2, "error": 1,
                                                   "missing": 2}


class ConstantJudge(Judge):
    backend = "constant"
    is_llm = False


def test_hook_register_judge_backends(small):
    class Backends:
        @hookimpl
        def register_judge_backends(self, register):
            register(JudgeBackend("constant", ConstantJudge, description="for tests"))

    _, outcome, report = run_with([Backends()], small,
                                  extra_yaml="judge: {backend: constant, model: m1}\n")
    assert isinstance(outcome.context.judge, ConstantJudge)
    assert report.judge["backend"] == "constant" and report.judge["model"] == "m1"


def test_hook_register_executors(small):
    """A plugin's executor: it gets the work to run and hands back its result lines; here
    each group runs through the public worker entry point, last group first."""
    from evalharness.api import make_executor
    from evalharness.executors import groups_of, run_group, work_groups
    from evalharness.registry import Executor

    class Backwards:
        def __init__(self, address):
            self.address = address
            self.groups = 0

        def run(self, spec, work, emit, stopped):
            for group in reversed(work_groups(work, size=1)):
                emit(group, run_group(spec, group))
                self.groups += 1
            return False

        def close(self):
            pass

    class Executors:
        @hookimpl
        def register_executors(self, register):
            register(Executor("backwards", Backwards, description="for tests"))

    scenario, local, _ = run_with([Executors()], small)
    found = make_executor(scenario, "backwards", "here")
    assert isinstance(found, Backwards) and found.address == "here"
    elsewhere = asyncio.run(run(scenario, small.parent / "elsewhere", executor=found))
    assert found.groups == len(groups_of(scenario.cases, size=1)) >= 2
    by_id = {r.case.id: r for r in local.results}
    for result in elsewhere.results:  # in case order, whatever order they were written in
        mine = by_id[result.case.id]
        assert result.components == mine.components and result.verdicts == mine.verdicts


def test_hook_report_sections(small):
    class Section:
        @hookimpl
        def report_sections(self, report, results):
            empty = [r.case.id for r in results if r.trace.generator and
                     not r.trace.generator.answer]
            return [ReportSection(title="Empty answers", markdown=", ".join(empty),
                                  data={"empty": empty})]

    _, _, report = run_with([Section()], small)
    assert report.sections == [{"plugin": "Section", "title": "Empty answers",
                                "markdown": "c2", "data": {"empty": ["c2"]}}]
    assert "## Empty answers\n\nc2" in render_markdown(report)


class Coverage:
    """An evaluator with a run-level metric: the share of cases whose generator answered."""

    @hookimpl
    def register_evaluators(self, register):
        register(Evaluator(name="coverage", component="generator", metrics=["answered"],
                           run_metrics=["coverage"]))

    @hookimpl
    def evaluate_generator(self, evaluator, batch):
        return [{"answered": MetricValue.of(bool(step.answer))} for _, step in batch]

    @hookimpl
    def evaluate_run(self, evaluator, component, results):
        answered = [r.components[component].metrics["answered"].value for r in results]
        return {"coverage": MetricValue.of(sum(answered) / len(answered), n=len(answered),
                                           ci95=[0.25, 1.0], note="hand-made interval")}


def test_hook_evaluate_run(small):
    _, _, report = run_with([Coverage()], small, extra_yaml="  - generator.coverage >= 0.9\n",
                            replace={"  generator: [answer_present]": "  generator: [coverage]"})
    s = report.components["generator"].metrics["coverage"]
    assert (s.mean, s.n, s.ci95, s.scope, s.errors) == (2 / 3, 3, [0.25, 1.0], "run", 0)
    assert s.details == {"note": "hand-made interval"}
    assert report.components["generator"].metrics["answered"].scope == "case"
    gate = next(g for g in report.gates if g.metric == "coverage")
    assert gate.value == 2 / 3 and not gate.passed  # gated like any metric
    assert "| generator | coverage *(per run)* | 0.667 |" in render_markdown(report)


def test_a_failing_run_metric_is_an_error_with_its_reason(small, capfd):
    class Broken(Coverage):
        @hookimpl
        def evaluate_run(self, evaluator, component, results):
            raise RuntimeError("boom")

    _, _, report = run_with([Broken()], small,
                            replace={"  generator: [answer_present]": "  generator: [coverage]"})
    s = report.components["generator"].metrics["coverage"]
    assert s.mean is None and s.errors == 1 and s.scope == "run"
    assert "evaluate_run raised RuntimeError: boom" in next(iter(s.error_reasons))
    assert "warning:" in capfd.readouterr().err


def test_a_run_metric_cannot_be_a_verdict_criterion(small):
    from evalharness.errors import ScenarioError

    with pytest.raises(ScenarioError, match="'coverage' is a run-level metric"):
        run_with([Coverage()], small, extra_yaml="verdicts:\n  generator: coverage >= 0.5\n",
                 replace={"  generator: [answer_present]": "  generator: [coverage]"})


def test_hook_register_commands(monkeypatch):
    from evalharness import cli as cli_module

    class Hello:
        @hookimpl
        def register_commands(self, cli):
            @cli.command()
            def hello():
                """Say hello."""
                click.echo("hello from a plugin")

    real = cli_module.load_plugins
    original = cli_module.cli
    monkeypatch.setattr(cli_module, "load_plugins", lambda: real(modules=[Hello()]))
    monkeypatch.setattr(cli_module, "cli", click.Group(commands=dict(cli_module.cli.commands)))
    monkeypatch.setattr("sys.argv", ["evalharness", "hello"])
    with pytest.raises(SystemExit) as exit_info:
        cli_module.main()
    assert exit_info.value.code == 0
    result = CliRunner().invoke(cli_module.cli, ["hello"])
    assert result.output == "hello from a plugin\n"
    assert "hello" not in original.commands


def test_evaluator_exception_is_recorded_per_metric_and_the_run_goes_on(small, capfd):
    class Broken:
        @hookimpl
        def register_evaluators(self, register):
            register(Evaluator(name="broken", component="generator", metrics=["x"]))

        @hookimpl
        def evaluate_generator(self, evaluator, batch):
            raise ZeroDivisionError("oops")

    _, _, report = run_with([Broken()], small,
                            replace={"[answer_present]": "[answer_present, broken]"})
    x = report.components["generator"].metrics["x"]
    assert x.mean is None and x.errors == 3
    assert "raised ZeroDivisionError: oops" in next(iter(x.error_reasons))
    assert report.components["generator"].metrics["answer_present"].n == 3
    assert "warning:" in capfd.readouterr().err


@pytest.mark.parametrize("bad, message", [
    ("return None", "returned nothing from hook 'evaluate_generator' for a batch of 3"),
    ("return 'fine'", "returned a str from hook 'evaluate_generator' for a batch of 3"),
    ("return [{'x': 1.0}]", "returned 1 rows from hook 'evaluate_generator' for a batch of 3"),
    ("return [{'y': 1.0} for _ in batch]", "returned metrics ['y'] for case 'c1'"),
    ("return [{'x': 'high'} for _ in batch]", "returned str as a metric value"),
    ("import numpy\n    return [{'x': MetricValue.of(1, rank=numpy.int64(2))} for _ in batch]",
     "details['rank'] of x for case 'c1' holds a numpy.int64"),
    ("import sys\n    sys.exit(0)", "raised SystemExit: the code called sys.exit(0)"),
])
def test_malformed_evaluator_results_are_errors_naming_the_plugin(small, bad, message, capfd):
    """Issue 10: a result of the wrong shape (or a sys.exit) stopped the whole run; now it is
    the evaluator's error on the batch's cases, like a plugin that raises, and the run goes
    on with every other evaluator's values."""
    namespace: dict = {"MetricValue": MetricValue}
    exec(f"def evaluate_generator(evaluator, batch):\n    {bad}\n", namespace)

    class Sloppy:
        @hookimpl
        def register_evaluators(self, register):
            register(Evaluator(name="sloppy", component="generator", metrics=["x"]))

    Sloppy.evaluate_generator = staticmethod(hookimpl(namespace["evaluate_generator"]))
    _, outcome, report = run_with([Sloppy()], small,
                                  replace={"[answer_present]": "[answer_present, sloppy]"})
    x = report.components["generator"].metrics["x"]
    assert x.mean is None and x.errors == 3
    reason = next(iter(x.error_reasons))
    assert "evaluator 'sloppy' of plugin 'Sloppy'" in reason and message in reason, reason
    assert report.components["generator"].metrics["answer_present"].n == 3
    assert len(outcome.results) == 3
    assert "warning:" in capfd.readouterr().err


def test_nan_from_an_evaluator_becomes_an_error_with_reason(small):
    class Nan:
        @hookimpl
        def register_evaluators(self, register):
            register(Evaluator(name="nan", component="generator", metrics=["x"]))

        @hookimpl
        def evaluate_generator(self, evaluator, batch):
            return [{"x": float("nan")} for _ in batch]

    _, _, report = run_with([Nan()], small, replace={"[answer_present]": "[answer_present, nan]"})
    x = report.components["generator"].metrics["x"]
    assert x.mean is None and x.errors == 3 and "not a finite number" in next(iter(x.error_reasons))


def test_failing_report_section_is_shown_not_fatal(small, capfd):
    class Bad:
        @hookimpl
        def report_sections(self):
            raise RuntimeError("no data")

    _, _, report = run_with([Bad()], small)
    assert report.sections[0]["title"] == "Bad: section failed"
    assert "raised RuntimeError: no data" in report.sections[0]["markdown"]
    assert "warning:" in capfd.readouterr().err


def test_failing_registration_names_plugin_and_hook():
    from evalharness.errors import PluginError

    class Bad:
        @hookimpl
        def register_evaluators(self, register):
            register("not an evaluator")

    with pytest.raises(PluginError, match="plugin 'Bad' failed in hook 'register_evaluators'"):
        load_plugins(modules=[Bad()], entry_points=False)
