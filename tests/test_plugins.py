"""Plugin loading: entry points, local files, EVALHARNESS_LOAD_PLUGINS, misspelt hooks."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli, write
from evalharness import hookimpl
from evalharness.errors import PluginError
from evalharness.plugins import load_plugins
from evalharness.registry import Evaluator

BUILTINS = {"evalharness_router", "evalharness_sql", "evalharness_retrieval",
            "evalharness_generation"}

RETRIEVER_PLUGIN = '''
"""A local plugin: share of retrieved chunks whose id starts with "d1"."""
from evalharness import MetricValue, hookimpl
from evalharness.registry import Evaluator

__version__ = "2.5"

@hookimpl
def register_evaluators(register):
    register(Evaluator(name="d1_share", component="retriever", metrics=["d1_share"]))

@hookimpl
def evaluate_retriever(evaluator, batch):
    return [{"d1_share": MetricValue.of(sum(i == "d1" for i in s.ids) / len(s.ids))}
            for _, s in batch]
'''


def test_builtins_are_loaded_through_entry_points():
    res = run_cli("plugins", "--json")
    assert res.code == 0, res
    plugins = {p["name"]: p for p in json.loads(res.out)}
    assert BUILTINS <= set(plugins)
    for name in BUILTINS:
        assert plugins[name]["source"] == "entry point"
        assert plugins[name]["version"]
        assert "register_evaluators" in plugins[name]["hooks"]
        assert plugins[name]["evaluators"], name
    assert plugins["evalharness"]["source"] == "core"
    assert plugins["evalharness"]["component_kinds"] == ["generator", "retriever", "router",
                                                         "text2sql"]
    evaluators = {e["name"]: e for e in plugins["evalharness_retrieval"]["evaluators"]}
    assert {"ranking", "context_precision", "context_recall"} <= set(evaluators)
    ranking = evaluators["ranking"]
    assert ranking["component"] == "retriever"
    assert ranking["metrics"] == ["recall@5", "recall@10", "mrr"]
    assert set(ranking["settings"]) == {"k", "relevance_level", "gain", "measures"}


def test_plugins_table_is_readable():
    res = run_cli("plugins")
    assert res.code == 0
    assert "evalharness_router" in res.out and "route_accuracy" in res.out


def test_load_plugins_env_limits_entry_points():
    res = run_cli("plugins", "--json", env={"EVALHARNESS_LOAD_PLUGINS": "evalharness_router"})
    names = {p["name"] for p in json.loads(res.out)}
    assert names == {"evalharness", "evalharness_router"}
    res = run_cli("plugins", "--json", env={"EVALHARNESS_LOAD_PLUGINS": ""})
    assert {p["name"] for p in json.loads(res.out)} == {"evalharness"}
    assert "No evaluator plugins are installed" in run_cli(
        "plugins", env={"EVALHARNESS_LOAD_PLUGINS": ""}).err


def test_without_plugins_a_scenario_says_how_to_get_them(small, tmp_path):
    res = run_cli("scenario", small, "--out", tmp_path / "o",
                  env={"EVALHARNESS_LOAD_PLUGINS": ""})
    assert res.code == 2
    assert "No evaluator plugins are loaded" in res.err and "pip install" in res.err


def test_plugin_file_adds_a_retriever_metric_to_the_report(small, tmp_path):
    plugin = write(tmp_path / "checks.py", RETRIEVER_PLUGIN)
    small.write_text(small.read_text().replace(
        "    - ranking: {k: [1, 2]}", "    - ranking: {k: [1, 2]}\n    - d1_share"))
    res = run_cli("scenario", small, "--out", tmp_path / "o", "--quiet", "--plugin", plugin)
    assert res.code == 0, res
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    metric = report["components"]["retriever"]["metrics"]["d1_share"]
    assert metric["mean"] == pytest.approx((1 / 3 + 1 / 2) / 2) and metric["n"] == 2
    assert report["versions"]["checks"] == "2.5"
    listed = json.loads(run_cli("plugins", "--json", "--plugin", plugin).out)
    assert [p for p in listed if p["name"] == "checks"][0]["evaluators"][0]["name"] == "d1_share"


def test_plugin_file_named_in_the_scenario(small, tmp_path):
    write(tmp_path / "checks.py", RETRIEVER_PLUGIN)
    small.write_text(small.read_text().replace(
        "    - ranking: {k: [1, 2]}", "    - d1_share") + "plugins: [./checks.py]\n")
    res = run_cli("scenario", small, "--out", tmp_path / "o", "--quiet")
    assert res.code == 0, res
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert list(report["components"]["retriever"]["metrics"]) == ["d1_share"]


def test_misspelt_hook_names_plugin_and_hook(small, tmp_path):
    plugin = write(tmp_path / "typo.py", RETRIEVER_PLUGIN.replace(
        "def evaluate_retriever", "def evaluate_retreiver"))
    res = run_cli("scenario", small, "--out", tmp_path / "o", "--plugin", plugin)
    assert res.code == 2 and "Traceback" not in res.err
    assert "plugin 'typo' implements hook 'evaluate_retreiver', which does not exist" in res.err
    assert "did you mean 'evaluate_retriever'" in res.err


def test_plugin_file_that_fails_to_import(small, tmp_path):
    plugin = write(tmp_path / "bad.py", "import does_not_exist_anywhere\n")
    res = run_cli("scenario", small, "--out", tmp_path / "o", "--plugin", plugin)
    assert res.code == 2
    assert "bad.py" in res.err and "ModuleNotFoundError" in res.err
    assert "Traceback" not in res.err


def test_missing_plugin_file_in_scenario(small, tmp_path):
    small.write_text(small.read_text() + "plugins: [./nope.py]\n")
    res = run_cli("scenario", small, "--out", tmp_path / "o")
    assert res.code == 2 and "field `plugins[0]`" in res.err and "nope.py" in res.err


def test_hook_with_unknown_argument_is_rejected():
    class Wrong:
        @hookimpl
        def evaluate_router(self, evaluator, batch, colour):
            return None

    with pytest.raises(PluginError, match="plugin 'Wrong'.*colour"):
        load_plugins(modules=[Wrong()], entry_points=False)


def test_two_plugins_registering_the_same_evaluator():
    class One:
        @hookimpl
        def register_evaluators(self, register):
            register(Evaluator(name="route_accuracy", component="router", metrics=["x"]))

    with pytest.raises(PluginError, match="already registered"):
        load_plugins(modules=[One()])


def test_evaluator_for_an_unknown_kind():
    class Odd:
        @hookimpl
        def register_evaluators(self, register):
            register(Evaluator(name="e", component="reranker", metrics=["x"]))

    with pytest.raises(PluginError, match="component kind 'reranker', which no plugin defines"):
        load_plugins(modules=[Odd()], entry_points=False)


def test_evaluator_hook_is_called_only_on_the_registering_plugin(small):
    """Another plugin's evaluate_router is never asked about route_accuracy: the core calls
    the registered evaluator's own `evaluate`."""
    calls = []

    class Nosy:
        @hookimpl
        def evaluate_router(self, evaluator, batch):
            calls.append(evaluator)
            return [{"route_accuracy": 0.0} for _ in batch]

    from evalharness.context import EvalContext
    from evalharness.models import Case, RouterStep, Trace
    from evalharness.scenario import load_scenario
    from evalharness.scoring import evaluate_batch

    scenario = load_scenario(small, host=load_plugins(modules=[Nosy()]))
    case = Case(id="a", question="q", gold={"routes": ["sql"]})
    [result] = evaluate_batch(scenario, EvalContext(pipeline=scenario.pipeline),
                              [(case, Trace(case_id="a", router=RouterStep(routes=["sql"])))])
    assert result.components["router"].metrics["route_accuracy"].value == 1.0 and calls == []
