"""Invalid scenarios fail before anything runs: exit 2, one paragraph naming file, line, field."""

from __future__ import annotations

import pytest

from conftest import run_cli, write
from evalharness.errors import ScenarioError
from evalharness.scenario import load_scenario


def _mutate(small, old: str, new: str):
    text = small.read_text()
    assert old in text
    small.write_text(text.replace(old, new))
    return small


def _fails(small, tmp_path, *needles: str):
    out = tmp_path / "out"
    res = run_cli("scenario", small, "--out", out)
    assert res.code == 2, res
    assert "Traceback" not in res.err
    message = res.err.strip()
    assert message.startswith("Error: ")
    assert "\n" not in message, "one paragraph"
    assert any(f in message for f in ("small.yaml", "cases.jsonl", "traces.jsonl"))
    for needle in needles:
        assert needle in message, (needle, message)
    assert not out.exists(), "nothing may run or be written before validation passes"
    return message


def test_yaml_syntax_error(small, tmp_path):
    _mutate(small, "name: small", "name: [small")
    _fails(small, tmp_path, "small.yaml, line ", "field `name`", "invalid YAML")


def test_yaml_syntax_error_deep_in_the_file(small, tmp_path):
    _mutate(small, "k: [1, 2]}", "k: [1, 2}")
    _fails(small, tmp_path, "small.yaml, line 9", "field `evaluators.retriever.ranking`",
           "invalid YAML")


def test_unknown_metric_in_gate(small, tmp_path):
    _mutate(small, "router.route_accuracy >= 0.5", "retriever.recall@5 >= 0.5")
    msg = _fails(small, tmp_path, "line 12", "field `gates[0]`", "'recall@5'",
                 "recall@1, recall@2, mrr")
    assert "Did you mean" in msg


def test_missing_cases_file(small, tmp_path):
    _mutate(small, "cases: cases.jsonl", "cases: nowhere.jsonl")
    _fails(small, tmp_path, "line 2", "field `cases`", "'nowhere.jsonl' does not exist")


def test_wrong_type(small, tmp_path):
    small.write_text(small.read_text() + "concurrency: four\n")
    _fails(small, tmp_path, "line 13", "field `concurrency`", "valid integer", "'four'")


def test_wrong_type_in_evaluator_settings(small, tmp_path):
    _mutate(small, "k: [1, 2]", "k: [1, two]")
    _fails(small, tmp_path, "line 9", "field `evaluators.retriever[0].ranking.k[1]`",
           "valid integer", "settings of evaluator 'ranking': k, relevance_level")


def test_unknown_evaluator(small, tmp_path):
    _mutate(small, "[route_accuracy]", "[route_acuracy]")
    _fails(small, tmp_path, "line 6", "field `evaluators.router[0]`", "unknown evaluator",
           "Did you mean 'route_accuracy'")


def test_unknown_setting(small, tmp_path):
    _mutate(small, "k: [1, 2]", "k: [1, 2], cutof: 3")
    _fails(small, tmp_path, "field `evaluators.retriever[0].ranking.cutof`", "unknown field")


def test_unknown_top_level_key(small, tmp_path):
    small.write_text(small.read_text() + "evaluator: {}\n")
    _fails(small, tmp_path, "line 13", "field `evaluator`", "unknown field",
           "valid top-level keys")


def test_bad_gate_syntax(small, tmp_path):
    _mutate(small, "router.route_accuracy >= 0.5", "router.route_accuracy is high")
    _fails(small, tmp_path, "field `gates[0]`", "component.metric OP number")


def test_both_system_and_traces(small, tmp_path):
    small.write_text(small.read_text() + "system: x.py:answer\n")
    _fails(small, tmp_path, "exactly one of `system`")


def test_unknown_component_in_evaluators(small, tmp_path):
    _mutate(small, "  generator: [answer_present]", "  reranker: [answer_present]")
    _fails(small, tmp_path, "line 10", "field `evaluators.reranker`", "not a component")


def test_pipeline_problems(small, tmp_path):
    small.write_text(small.read_text() + "pipeline:\n  generator: {after: [retriver]}\n")
    _fails(small, tmp_path, "field `pipeline.generator.after[0]`", "'retriver'")


def test_pipeline_cycle(small, tmp_path):
    small.write_text(small.read_text().replace("evaluators:", "evaluators_x:").split(
        "evaluators_x:")[0] + "pipeline:\n  router: {after: [generator]}\n"
        "  generator: {after: [router]}\n")
    _fails(small, tmp_path, "cycle")


def test_unknown_judge_backend(small, tmp_path):
    small.write_text(small.read_text() + "judge: {backend: gpt}\n")
    _fails(small, tmp_path, "field `judge.backend`", "'gpt'", "heuristic")


def test_bad_case_line_names_file_line_and_field(small, tmp_path):
    cases = tmp_path / "cases.jsonl"
    lines = cases.read_text().splitlines()
    lines[1] = lines[1].replace('"d1": 2', '"d1": "high"')
    cases.write_text("\n".join(lines) + "\n")
    _fails(small, tmp_path, "cases.jsonl, line 2", "field `gold.relevant.d1`", "valid integer")


def test_invalid_json_in_cases(small, tmp_path):
    cases = tmp_path / "cases.jsonl"
    cases.write_text(cases.read_text() + "{not json\n")
    _fails(small, tmp_path, "cases.jsonl, line 4", "not valid JSON")


def test_duplicate_case_ids(small, tmp_path):
    cases = tmp_path / "cases.jsonl"
    first = cases.read_text().splitlines()[0]
    cases.write_text(cases.read_text() + first + "\n")
    _fails(small, tmp_path, "line 4", "duplicate id 'c1'", "first on line 1")


def test_bad_trace_line(small, tmp_path):
    traces = tmp_path / "traces.jsonl"
    traces.write_text(traces.read_text().replace('"ids": ["d9", "d2", "d1"]', '"ids": "d9"'))
    _fails(small, tmp_path, "traces.jsonl, line 2", "field `retriever.ids`")


def test_missing_system_file(tmp_path):
    scenario = write(tmp_path / "s.yaml", """
        name: s
        cases: [{id: a, question: q}]
        system: nowhere.py:answer
    """)
    res = run_cli("scenario", scenario, "--out", tmp_path / "o")
    assert res.code == 2 and "field `system`" in res.err and "nowhere.py" in res.err


def test_system_function_missing(tmp_path):
    write(tmp_path / "sys.py", "def answer(case):\n    return {}\n")
    scenario = write(tmp_path / "s.yaml", """
        name: s
        cases: [{id: a, question: q}]
        system: sys.py:answr
    """)
    res = run_cli("scenario", scenario, "--out", tmp_path / "o")
    assert res.code == 2, res
    assert "no function 'answr'" in res.err and "answer" in res.err


def test_missing_scenario_file(tmp_path):
    res = run_cli("scenario", tmp_path / "nope.yaml")
    assert res.code == 2 and "does not exist" in res.err


def test_not_a_mapping(tmp_path):
    scenario = write(tmp_path / "s.yaml", "- just\n- a list\n")
    with pytest.raises(ScenarioError, match="must be a YAML mapping"):
        load_scenario(scenario)


def test_yaml_is_loaded_safely(tmp_path):
    scenario = write(tmp_path / "s.yaml", "name: !!python/object/apply:os.system ['true']\n")
    with pytest.raises(ScenarioError, match="invalid YAML"):
        load_scenario(scenario)


def test_judge_option_overrides_and_is_validated(small, tmp_path):
    res = run_cli("scenario", small, "--out", tmp_path / "o", "--judge", "gpt")
    assert res.code == 2 and "--judge 'gpt': unknown judge backend" in res.err
    assert "heuristic" in res.err
    res = run_cli("scenario", small, "--out", tmp_path / "o", "--judge", "heuristic", "-q")
    assert res.code == 0, res


def test_unknown_key_in_a_nested_block_lists_the_valid_keys(small, tmp_path):
    small.write_text(small.read_text() + "judge: {backend: heuristic, modle: x}\n")
    _fails(small, tmp_path, "field `judge.modle`", "unknown field",
           "valid keys of `judge`: backend, model, base_url, api_key_env")


def test_evaluator_that_needs_a_database(small, tmp_path):
    plugin = write(tmp_path / "dbcheck.py", """
        from evalharness import hookimpl
        from evalharness.registry import Evaluator

        @hookimpl
        def register_evaluators(register):
            register(Evaluator(name="runs", component="text2sql", metrics=["runs"],
                               needs_database=True))
    """)
    _mutate(small, "database: {build: items.sql}\n", "")
    _mutate(small, "[exact_match]", "[exact_match, runs]")
    res = run_cli("scenario", small, "--out", tmp_path / "o", "--plugin", plugin)
    assert res.code == 2, res
    assert "field `evaluators.text2sql[1]`" in res.err and "'runs' needs a database" in res.err


def test_validate_imports_the_system(tmp_path):
    write(tmp_path / "sys.py", "def answer(case):\n    return {}\n")
    scenario = write(tmp_path / "s.yaml", """
        name: s
        cases: [{id: a, question: q}]
        system: sys.py:answr
    """)
    res = run_cli("validate", scenario)
    assert res.code == 2 and "no function 'answr'" in res.err
