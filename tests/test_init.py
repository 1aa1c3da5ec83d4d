"""`evalharness init`: rendering per component subset, the init -> validate -> scenario path, the
refusals, and the prompts."""

from __future__ import annotations

import inspect
import json
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


def invoke(*args: str | Path, input: str | None = None):
    return CliRunner().invoke(cli, [str(a) for a in args], input=input)


def write_files(folder: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")
    return folder / "scenario.yaml"


# ---- a filled-in adapter: what a user writes in place of each `raise not_implemented(...)` ----

FILLED = {
    'raise not_implemented("route", "router")':
        "return [r for r in ROUTES if set(ROUTE_WORDS[r]) & set(tokens(question))]",
    'raise not_implemented("text_to_sql", "text-to-SQL component")':
        "return SQL_FOR[question]",
    'raise not_implemented("retrieve", "retriever")':
        "return sorted(corpus(), key=lambda i: -len(set(tokens(question)) & "
        "set(tokens(corpus()[i]))))",
    'raise not_implemented("generate", "generator")':
        'return " ".join(contexts) or "I do not know."',
}
HELPERS = f'''

import re


def tokens(text):
    return re.findall(r"[a-z]+", text.lower())


ROUTE_WORDS = {{"sql": ["products", "much", "cheapest", "many", "cost"],
               "docs": ["return", "waterproof", "wash", "shipping"]}}
SQL_FOR = {json.dumps({e.question: e.sql for e in EXAMPLES.values() if e.sql})}
'''


def fill_adapter(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    for marker, body in FILLED.items():
        text = text.replace(marker, body)
    assert "raise not_implemented(" not in text
    path.write_text(text + HELPERS, encoding="utf-8")


# ---- rendering ------------------------------------------------------------------------------


@pytest.mark.parametrize("components", SUBSETS, ids=lambda c: "+".join(c))
def test_each_subset_renders_a_valid_scenario(tmp_path, components):
    files = render(Choices(name="demo", components=components), tmp_path)
    path = write_files(tmp_path, files)
    loaded = load_scenario(path)
    check_resources(loaded)
    func = load_system(loaded)
    assert sorted(loaded.pipeline.order) == sorted(components)
    assert len(loaded.gates) == len(components)
    assert {e.component for e in loaded.evaluators} == set(components)
    assert len(loaded.cases) == 3
    assert ("data/schema.sql" in files) == ("text2sql" in components)
    assert ("data/corpus.jsonl" in files) == ("retriever" in components)
    system = files["system.py"]
    for component, function in scaffold.FUNCTION_OF.items():
        assert (f"def {function}(" in system) == (component in components)
    assert system.count("# TODO: call your") == len(components)
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
    if "router" in components:  # one example per route, each route covered
        routes = {r for case in loaded.cases for r in case.gold.routes}
        assert routes == set(loaded.pipeline.routes())
    elif {"text2sql", "retriever"} <= set(components):  # both run on every case
        assert all(c.gold.sql and c.gold.relevant for c in loaded.cases)


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


def test_filled_adapter_honours_overrides(tmp_path):
    """Once filled in, the adapter takes part in oracle headroom: it uses and records each
    override (what the harness checks with `oracle.ignored`)."""
    path = write_files(tmp_path, render(Choices(name="demo"), tmp_path))
    fill_adapter(tmp_path / "system.py")
    module = import_file(tmp_path / "system.py", "test_init")
    case = Case(id="x", question="How much is the Rain Jacket, and how do I keep it waterproof?")
    plain = module.answer(case)
    assert plain.router.routes == ["sql", "docs"]
    assert plain.text2sql.rows == [[89.0]] and plain.retriever.ids[0] == "waterproofing"
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
    assert load_scenario(path).system.callable == "system.py:answer"


# ---- init -> validate -> scenario -------------------------------------------------------------


def test_init_validate_scenario_in_a_fresh_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = invoke("init", "evals", "--no-input")
    assert res.exit_code == 0, res.output
    for rel in ("scenario.yaml", "system.py", "cases.jsonl", "data/schema.sql",
                "data/corpus.jsonl"):
        assert f"wrote {Path('evals') / rel}" in res.output
    assert "evals/scenario.yaml: valid — 3 cases, 4 components" in res.output
    assert "evalharness validate evals/scenario.yaml" in res.output
    assert "evalharness scenario evals/scenario.yaml" in res.output
    assert "name: evals" in (tmp_path / "evals" / "scenario.yaml").read_text()

    res = invoke("validate", "evals/scenario.yaml")
    assert res.exit_code == 0, res.output

    res = invoke("scenario", "evals/scenario.yaml", "--out", "run1")
    assert res.exit_code == 1, res.output
    assert "3 of 3 cases failed in the system under test" in res.output
    results = [json.loads(line) for line in (tmp_path / "run1" / "results.jsonl").open()]
    assert len(results) == 3
    for r in results:
        error = r["trace"]["error"]
        assert error.startswith("NotImplementedError: route() in ")
        assert "system.py is not implemented yet" in error
    report = json.loads((tmp_path / "run1" / "report.json").read_text())
    assert report["gates"] and not any(g["passed"] for g in report["gates"])

    # Fill in the adapter: the same scenario, unchanged, now passes (a fresh process, as a
    # user's next run is: the unfilled module stays imported in this one).
    fill_adapter(tmp_path / "evals" / "system.py")
    res = run_cli("scenario", "evals/scenario.yaml", "--out", "run2", "--quiet", cwd=tmp_path)
    assert res.code == 0, res
    report = json.loads((tmp_path / "run2" / "report.json").read_text())
    assert [g["passed"] for g in report["gates"]] == [True] * 4
    assert report["cases"]["system_errors"] == 0
    metrics = report["components"]
    assert metrics["router"]["metrics"]["route_accuracy"]["mean"] == 1.0
    assert metrics["text2sql"]["metrics"]["execution_accuracy"]["mean"] == 1.0
    assert metrics["retriever"]["metrics"]["recall@1"]["mean"] == 1.0


@pytest.mark.parametrize("components", ["retriever,generator", "text2sql"])
def test_unfilled_subset_fails_its_gates(tmp_path, components):
    res = invoke("init", tmp_path / "e", "--no-input", "--components", components)
    assert res.exit_code == 0, res.output
    res = invoke("scenario", tmp_path / "e" / "scenario.yaml", "--out", tmp_path / "r", "-q")
    assert res.exit_code == 1, res.output
    first = components.split(",")[0]
    function = scaffold.FUNCTION_OF[first]
    for line in (tmp_path / "r" / "results.jsonl").open():
        assert f"{function}() in " in json.loads(line)["trace"]["error"]
        assert "not implemented" in json.loads(line)["trace"]["error"]


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
