"""`evalharness init`: rendering per component subset, the toy adapter and its first report
(init -> validate -> scenario, a bottleneck table for every subset), the refusals, and the
prompts."""

from __future__ import annotations

import inspect
import json
import re
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import run_cli, write_jsonl
from evalharness import oracle, scaffold
from evalharness.cli import cli
from evalharness.importing import import_file
from evalharness.models import Case
from evalharness.runner import check_resources, load_system
from evalharness.scaffold import COMPONENTS, EXAMPLES, Choices, render
from evalharness.scenario import load_scenario

SUBSETS = [
    COMPONENTS,
    ("router", "retriever", "generator"),
    ("router", "text2sql", "generator"),
    ("router", "text2sql"),
    ("text2sql", "retriever", "generator"),
    ("retriever", "generator"),
    ("text2sql",),
    ("retriever",),
    ("generator",),
]

ROOT_CAUSES = {
    COMPONENTS: {"sql-3": "text2sql", "sql-4": "router", "docs-3": "retriever"},
    ("router", "retriever", "generator"): {"docs-3": "retriever"},
    ("router", "text2sql", "generator"): {"sql-3": "text2sql"},
    ("router", "text2sql"): {"sql-3": "text2sql"},
    ("text2sql", "retriever", "generator"): {"both-2": "retriever", "both-3": "text2sql"},
    ("retriever", "generator"): {"docs-3": "retriever"},
    ("text2sql",): {"sql-3": "text2sql"},
    ("retriever",): {"docs-3": "retriever"},
    ("generator",): {"docs-3": "generator"},
}
"""Per subset, the example cases the toy adapter gets wrong and the component each failure
starts at (the `toy` notes of scaffold.EXAMPLES); every other case passes end to end."""


def invoke(*args: str | Path, input: str | None = None):
    return CliRunner().invoke(cli, [str(a) for a in args], input=input)


def write_files(folder: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")
    return folder / "scenario.yaml"


def init_and_run(folder: Path, *init_args: str, separate: bool = False
                 ) -> tuple[object, dict, list[dict]]:
    """`evalharness init FOLDER --no-input ARGS`, then `evalharness scenario` on what it
    wrote (``separate``: in a process of its own, as a user's next command): the run's CLI
    result, report.json and results.jsonl."""
    res = run_cli("init", folder, "--no-input", *init_args)
    assert res.code == 0, res
    assert "still run the toy example" in res.err  # validating imports system.py
    out = folder / "run"
    res = run_cli("scenario", folder / "scenario.yaml", "--out", out, "-q", separate=separate)
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    results = [json.loads(line) for line in (out / "results.jsonl").open(encoding="utf-8")]
    return res, report, results


def metric_errors(report: dict) -> list[str]:
    """Every metric of the report with an error: ``component.metric: reasons``."""
    return [f"{name}.{metric}: {value.get('error_reasons')}"
            for name, component in report["components"].items()
            for metric, value in component["metrics"].items() if value.get("errors")]


def verdict_metrics(report: dict) -> set[str]:
    """``component.metric`` of every verdict criterion (end to end: the metric it names)."""
    out = set()
    for name, entry in report["verdict_criteria"].items():
        for criterion in entry["criteria"]:
            metric = criterion.split()[0]
            out.add(metric if name == "end_to_end" else f"{name}.{metric}")
    return out


# ---- a user's application: what replaces each toy ---------------------------------------------

GOLD = {e.question: {"routes": [scaffold.ROUTE_OF[c] for c in e.needs], "sql": e.sql,
                     "ids": [e.relevant] if e.relevant else [], "answer": e.answer}
        for e in EXAMPLES.values()}
APPLICATION = f"""

# ---- the application under test (here a perfect one: it knows the example's gold) ----

GOLD = {GOLD!r}


def route(question):
    return GOLD[question]["routes"]


def text_to_sql(question):
    return GOLD[question]["sql"]


def retrieve(question):
    return GOLD[question]["ids"]


def generate(question, contexts):
    return GOLD[question]["answer"]
"""


def replace_toy(path: Path) -> None:
    """What a user does: call the application in each function, and empty TOY (here the
    appended definitions replace the toy's: `answer` looks its functions up when it runs)."""
    text, n = re.subn(r"^TOY = \[.*\]$", "TOY = []", path.read_text(encoding="utf-8"),
                      flags=re.M)
    assert n == 1
    path.write_text(text + APPLICATION, encoding="utf-8")


# ---- rendering ------------------------------------------------------------------------------


@pytest.mark.parametrize("components", SUBSETS, ids=lambda c: "+".join(c))
def test_each_subset_renders_a_valid_scenario(tmp_path, components):
    files = render(Choices(name="demo", components=components), tmp_path)
    path = write_files(tmp_path, files)
    loaded = load_scenario(path)
    check_resources(loaded)
    func = load_system(loaded)
    assert sorted(loaded.pipeline.order) == sorted(components)
    assert {e.component for e in loaded.evaluators} == set(components)
    assert len(loaded.cases) == len(scaffold.example_ids(components)) >= 3
    assert ("data/schema.sql" in files) == ("text2sql" in components)
    assert ("data/corpus.jsonl" in files) == ("retriever" in components)
    system = files["system.py"]
    for component, function in scaffold.FUNCTION_OF.items():
        assert (f"def {function}(" in system) == (component in components)
    assert system.count("# TODO: call your") == len(components)
    assert system.count("    # The toy") == len(components)
    assert "NotImplementedError" not in system
    names = ", ".join(f'"{scaffold.FUNCTION_OF[c]}"' for c in components)
    assert f"\nTOY = [{names}]\n" in system
    # honours overrides whenever a component upstream of the generator can be replaced
    assert ("overrides" in inspect.signature(func).parameters) == (components != ("generator",))
    # every case carries the gold its components need, and only that
    for case in loaded.cases:
        gold = case.gold
        assert (gold.routes is not None) == ("router" in components)
        assert (gold.answer is not None) == ("generator" in components)
        if "text2sql" not in components:
            assert gold.sql is None
        if "retriever" not in components:
            assert gold.relevant is None
    if "router" in components:  # each route covered
        routes = {r for case in loaded.cases for r in case.gold.routes}
        assert routes == set(loaded.pipeline.routes())
    elif {"text2sql", "retriever"} <= set(components):  # both run on every case
        assert all(c.gold.sql and c.gold.relevant for c in loaded.cases)
    # the verdicts are written out, and each has a gate on the same metric
    text = files["scenario.yaml"]
    rules = scaffold.criteria(components)
    for rule in rules:
        prefix = "generator." if rule.component == "end_to_end" else ""
        assert f"  {rule.component}: {prefix}{rule.metric} {rule.verdict}" in text
    gates = {f"{g.component}.{g.metric}" for g in loaded.gates}
    assert len(loaded.gates) == len(gates) == len({r.metric for r in rules})
    assert gates == {f"{'generator' if r.component == 'end_to_end' else r.component}.{r.metric}"
                     for r in rules}
    assert ("  end_to_end: generator.correctness_f1 >= 0.5" in text) == (
        "generator" in components)
    evaluators = {e.name for e in loaded.evaluators}
    assert not evaluators & {"routing", "generation_cost", "numeric_consistency"}


@pytest.mark.parametrize("name", ["2024", "null", "my-app_v1.2"])
def test_any_valid_name_reads_back_as_a_string(tmp_path, name):
    loaded = load_scenario(write_files(tmp_path, render(Choices(name=name), tmp_path)))
    assert loaded.name == name


def test_example_data_is_consistent_with_the_cases(tmp_path):
    """The gold SQL runs on the example database, and the gold chunks are in the corpus."""
    files = render(Choices(name="demo"), tmp_path)
    conn = sqlite3.connect(":memory:")
    conn.executescript(files["data/schema.sql"])
    chunks = {json.loads(line)["id"] for line in files["data/corpus.jsonl"].splitlines()}
    for example in EXAMPLES.values():
        if example.sql:
            assert conn.execute(example.sql).fetchall(), example.id
        if example.relevant:
            assert example.relevant in chunks


def test_users_data_paths_are_relative_to_the_scenario(tmp_path):
    data = tmp_path / "app" / "data"
    data.mkdir(parents=True)
    db = data / "app.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (x INTEGER)")
    corpus = write_jsonl(data / "chunks.jsonl", [{"id": "a", "text": "alpha"}])
    folder = tmp_path / "evals" / "app"
    folder.mkdir(parents=True)
    files = render(Choices(name="demo", database=db, corpus=corpus), folder)
    assert "data/schema.sql" not in files and "data/corpus.jsonl" not in files
    assert "  path: ../../app/data/app.sqlite" in files["scenario.yaml"]
    assert "corpus: ../../app/data/chunks.jsonl" in files["scenario.yaml"]
    loaded = load_scenario(write_files(folder, files))
    assert loaded.database_path == db and loaded.corpus_path == corpus
    check_resources(loaded)
    module = import_file(folder / "system.py", "test_init")
    assert module.DATABASE.resolve() == db and module.CORPUS.resolve() == corpus
    assert module.run_sql("SELECT count(*) FROM t") == (["count(*)"], [[0]])
    assert module.corpus() == {"a": "alpha"}
    assert module.retrieve("alpha and beta") == ["a"]


# ---- the toy adapter --------------------------------------------------------------------------


def test_toy_adapter_works_and_honours_overrides(tmp_path, capsys):
    """The toy works on the example data, says it is a toy when imported, and takes part in
    oracle headroom: it uses and records each override (what `oracle.ignored` checks)."""
    write_files(tmp_path, render(Choices(name="demo"), tmp_path))
    module = import_file(tmp_path / "system.py", "test_init_toy")
    assert "route, text_to_sql, retrieve, generate still run the toy" in capsys.readouterr().err
    assert module.route("Do you sell a wool scarf?") == ["docs"]  # none of its words: the last
    assert module.text_to_sql("What is the cheapest bag over 50 euros?") == (
        "SELECT name, price FROM products WHERE category = 'bags' ORDER BY price LIMIT 1")
    assert module.retrieve("When will my order arrive?") == ["returns"]
    assert module.generate("?", ["name: Rain Jacket, price: 89.0", "A b. C d."]) == (
        "Rain Jacket, 89.0. A b.")
    case = Case(id="x", question="How much is the Rain Jacket, and how do I keep it waterproof?")
    plain = module.answer(case)
    assert plain.router.routes == ["sql", "docs"]
    assert plain.text2sql.rows == [["Rain Jacket", 89.0]]
    assert plain.retriever.ids == ["waterproofing"]
    given = {"router": {"routes": ["docs"]},
             "retriever": {"ids": ["returns"], "texts": ["Returns within 30 days."]}}
    trace = module.answer(case, overrides=given)
    assert oracle.ignored(trace, given) is None
    assert trace.text2sql is None and trace.generator.contexts == ["Returns within 30 days."]
    sql = {"text2sql": {"sql": "SELECT 1", "columns": ["1"], "rows": [[1]]}}
    trace = module.answer(case, overrides=sql)
    assert oracle.ignored(trace, sql) is None and "1: 1" in trace.generator.contexts
    with pytest.raises(ValueError, match="cannot override generator"):
        module.answer(case, overrides={"generator": {"answer": "x"}})


# ---- init -> validate -> scenario: the first report ----------------------------------------------


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    """`evalharness init DIR --no-input`, then its first `evalharness scenario` run."""
    folder = tmp_path_factory.mktemp("first") / "evals"
    return (folder, *init_and_run(folder, separate=True))


def test_first_report_has_a_bottleneck(first_run):
    folder, res, report, results = first_run
    assert res.code == 1, res  # the toy fails gates
    assert "still run the toy example, not your application" in res.err
    bottleneck = report["bottleneck"]
    ends = bottleneck["end_to_end"]
    assert (ends["cases"], ends["passed"], ends["failed"], ends["errors"]) == (8, 5, 3, 0)
    failing = {r["component"]: r["failures"] for r in bottleneck["ranking"] if r["failures"]}
    assert failing == {"router": 1, "text2sql": 1, "retriever": 1}
    assert bottleneck["unattributed"] == 0 and bottleneck["masked"] == 0
    causes = {r["case"]["id"]: r["attribution"]["root_causes"] for r in results
              if r["end_to_end"]["status"] == "fail"}
    assert causes == {case: [c] for case, c in ROOT_CAUSES[COMPONENTS].items()}
    # each designed failure is fixed by its component's oracle
    fixed = {row["oracle"]: row["fixed"] for row in bottleneck["headroom"]
             if row["oracle"] in ("router", "text2sql", "retriever")}
    assert fixed == {"router": 1, "text2sql": 1, "retriever": 1}


def test_first_report_judges_answers_and_gates_on_the_verdict_metrics(first_run):
    folder, res, report, results = first_run
    criteria = report["verdict_criteria"]
    assert criteria["end_to_end"]["criteria"] == ["generator.correctness_f1 >= 0.5"]
    assert criteria["generator"]["criteria"] == ["faithfulness >= 0.5"]
    assert criteria["text2sql"]["criteria"] == ["equivalent >= 1"]
    assert all(entry["source"] == "scenario" for entry in criteria.values())
    gates = {f"{g['component']}.{g['metric']}" for g in report["gates"]}
    assert gates == verdict_metrics(report) | {"generator.correctness_f1"}
    assert metric_errors(report) == []
    assert report["cases"]["system_errors"] == 0
    # the heuristic judge's correctness tells the toy's right answers from its wrong ones
    f1 = {r["case"]["id"]: r["components"]["generator"]["metrics"]["correctness_f1"]["value"]
          for r in results}
    wrong = set(ROOT_CAUSES[COMPONENTS])
    assert max(f1[c] for c in wrong) < 0.1
    assert min(f1[c] for c in f1 if c not in wrong) > 0.6


def test_the_same_scenario_passes_once_the_toy_is_replaced(first_run, tmp_path):
    """Replace every toy by (here, a perfect) application: the scenario, unchanged, passes
    its gates, and no note says toy."""
    folder = first_run[0]
    res = invoke("validate", folder / "scenario.yaml")
    assert res.exit_code == 0, res.output
    replace_toy(folder / "system.py")
    res = run_cli("scenario", folder / "scenario.yaml", "--out", tmp_path / "run2", "-q")
    assert res.code == 0, res
    assert "toy" not in res.err
    report = json.loads((tmp_path / "run2" / "report.json").read_text())
    assert [g["passed"] for g in report["gates"]] == [True] * 5
    assert report["bottleneck"]["end_to_end"]["failed"] == 0
    assert metric_errors(report) == []


def test_init_in_a_fresh_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = invoke("init", "evals", "--no-input")
    assert res.exit_code == 0, res.output
    for rel in ("scenario.yaml", "system.py", "cases.jsonl", "data/schema.sql",
                "data/corpus.jsonl"):
        assert f"wrote {Path('evals') / rel}" in res.output
    assert "evals/scenario.yaml: valid — 8 cases, 4 components" in res.output
    assert "evals/system.py runs a toy over the example data, not your application" in (
        res.output)
    assert "1. evalharness scenario evals/scenario.yaml" in res.output
    assert "evalharness validate evals/scenario.yaml" in res.output
    assert "name: evals" in (tmp_path / "evals" / "scenario.yaml").read_text()


@pytest.mark.parametrize("components", SUBSETS[1:], ids=lambda c: "+".join(c))
def test_each_subset_first_report_has_a_bottleneck(tmp_path, components):
    """Every other combination init accepts runs with no metric error, and its bottleneck
    table attributes the cases the toy gets wrong to the components designed to fail them."""
    res, report, results = init_and_run(tmp_path / "e", "--components", ",".join(components))
    assert res.code == 1, res
    assert metric_errors(report) == []
    gates = {f"{g['component']}.{g['metric']}" for g in report["gates"]}
    assert gates == verdict_metrics(report) | (
        {"generator.correctness_f1"} if "generator" in components else set())
    expected = ROOT_CAUSES[components]
    causes = {r["case"]["id"]: r["attribution"]["root_causes"] for r in results
              if r["end_to_end"]["status"] == "fail"}
    assert causes == {case: [c] for case, c in expected.items()}
    failing = {r["component"] for r in report["bottleneck"]["ranking"] if r["failures"]}
    assert failing == set(expected.values())


# ---- refusals -------------------------------------------------------------------------------


def test_refuses_to_overwrite_without_force(tmp_path):
    assert invoke("init", tmp_path, "--no-input").exit_code == 0
    (tmp_path / "system.py").write_text("# mine\n")
    res = invoke("init", tmp_path, "--no-input")
    assert res.exit_code == 2
    assert f"{tmp_path / 'scenario.yaml'} already exists" in res.output
    assert "--force" in res.output
    assert (tmp_path / "system.py").read_text() == "# mine\n"
    res = invoke("init", tmp_path, "--no-input", "--force")
    assert res.exit_code == 0, res.output
    assert "def route(" in (tmp_path / "system.py").read_text()


def test_refuses_to_overwrite_example_data(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "corpus.jsonl").write_text("")
    res = invoke("init", tmp_path, "--no-input")
    assert res.exit_code == 2
    assert f"{tmp_path / 'data' / 'corpus.jsonl'} already exists" in res.output
    assert not (tmp_path / "scenario.yaml").exists()


@pytest.mark.parametrize("value, expected", [
    ("router,retreiver", "unknown component 'retreiver' (did you mean 'retriever'?); valid "
                         "components: router, text2sql, retriever, generator"),
    ("", "no component given; valid components: router, text2sql, retriever, generator"),
    ("router,generator", "a router needs something to route to"),
])
def test_bad_components(tmp_path, value, expected):
    res = invoke("init", tmp_path, "--no-input", "--components", value)
    assert res.exit_code == 2
    assert expected in res.output
    assert not (tmp_path / "scenario.yaml").exists()


@pytest.mark.parametrize("args, expected", [
    (["--database", "missing.sqlite"], "--database: missing.sqlite does not exist"),
    (["--database", "cases.txt"], "is not a readable SQLite database"),
    (["--corpus", "cases.txt"], "--corpus: cases.txt, line 1: not valid JSON"),
    (["--components", "retriever", "--database", "x.sqlite"],
     "--database is for the text2sql component"),
    (["--name", "my app"], "--name 'my app': use letters, digits"),
])
def test_bad_flags(tmp_path, monkeypatch, args, expected):
    monkeypatch.chdir(tmp_path)
    Path("cases.txt").write_text("not json or sqlite\n")
    res = invoke("init", "e", "--no-input", *args)
    assert res.exit_code == 2, res.output
    assert expected in res.output
    assert not Path("e/scenario.yaml").exists()


def test_users_database_and_corpus_by_flag(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("app").mkdir()
    with sqlite3.connect("app/app.sqlite") as conn:
        conn.execute("CREATE TABLE t (x INTEGER)")
    write_jsonl(Path("app/chunks.jsonl"), [{"id": "a", "text": "alpha"}])
    res = invoke("init", "evals", "--no-input", "--database", "app/app.sqlite", "--corpus",
                 "app/chunks.jsonl", "--name", "mine")
    assert res.exit_code == 0, res.output
    text = Path("evals/scenario.yaml").read_text()
    assert "path: ../app/app.sqlite" in text and "corpus: ../app/chunks.jsonl" in text
    assert "are about the example data, not yours" in res.output
    assert not Path("evals/data").exists()


# ---- prompts ----------------------------------------------------------------------------------


def test_prompts_on_a_terminal(tmp_path, monkeypatch):
    monkeypatch.setattr(scaffold, "is_interactive", lambda: True)
    monkeypatch.chdir(tmp_path)
    write_jsonl(Path("chunks.jsonl"), [{"id": "a", "text": "alpha"}])
    # router? yes; text2sql? no; retriever? yes; generator? yes; corpus: a wrong path, then
    # a right one; name: the default
    answers = "y\nn\ny\ny\nnope.jsonl\nchunks.jsonl\n\n"
    res = invoke("init", "shop-evals", input=answers)
    assert res.exit_code == 0, res.output
    assert "Does your application have a router" in res.output
    assert "Error: nope.jsonl does not exist" in res.output
    assert "Your SQLite database" not in res.output  # no text2sql: not asked
    text = Path("shop-evals/scenario.yaml").read_text()
    assert "name: shop-evals" in text and "corpus: ../chunks.jsonl" in text
    assert "router: {routes: {docs: [retriever]}}" in text
    assert "text2sql" not in text


def test_prompts_only_for_what_flags_do_not_give(tmp_path, monkeypatch):
    monkeypatch.setattr(scaffold, "is_interactive", lambda: True)
    res = invoke("init", tmp_path / "a", "--components", "text2sql,generator", "--name", "x",
                 input="\n")  # the database: empty, scaffold an example
    assert res.exit_code == 0, res.output
    assert "Does your application" not in res.output and "Scenario name" not in res.output
    assert "Your SQLite database" in res.output
    assert (tmp_path / "a" / "data" / "schema.sql").is_file()
    res = invoke("init", tmp_path / "b", "--no-input")  # --no-input: never asks
    assert res.exit_code == 0, res.output
    assert "?" not in res.output.split("wrote")[0]


def test_no_prompt_without_a_terminal(tmp_path):
    """CliRunner's stdin is not a terminal: the defaults, no question (input would run out)."""
    res = invoke("init", tmp_path)
    assert res.exit_code == 0, res.output
    assert "Does your application" not in res.output
    assert "4 components" in res.output
