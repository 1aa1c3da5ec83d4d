"""`evalharness validate` checks every case's gold against the scenario: routes, chunk ids, SQL."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import SHOP, run_cli, shop_text_elsewhere, write, write_jsonl
from evalharness.goldcheck import MAX_LISTED, GoldCheck, check_gold, gold_problems
from evalharness.scenario import load_scenario

SHOP_CASES = [json.loads(line) for line in
              (SHOP.parent / "shop" / "cases.jsonl").read_text(encoding="utf-8").splitlines()
              if line.strip()]
WITH_SQL = [i for i, c in enumerate(SHOP_CASES) if c["gold"].get("sql")]
WITH_CHUNKS = [i for i, c in enumerate(SHOP_CASES) if c["gold"].get("relevant")]


def shop_with(tmp_path: Path, change) -> Path:
    """A copy of the shop scenario whose cases (a local cases.jsonl) ``change`` edits."""
    cases = json.loads(json.dumps(SHOP_CASES))
    change(cases)
    write_jsonl(tmp_path / "cases.jsonl", cases)
    text = re.sub(r"(?m)^cases: .*$", "cases: cases.jsonl", shop_text_elsewhere())
    return write(tmp_path / "shop.yaml", text)


def refused(res, *words: str) -> str:
    """The error of a validate that failed on the gold: exit 2, no traceback, naming ``words``."""
    assert res.code == 2, res
    assert "Traceback" not in res.err, res.err
    assert "do not fit the scenario" in res.err or "does not fit" in res.err, res.err
    for word in words:
        assert word in res.err, (word, res.err)
    assert "--no-gold-check" in res.err
    return res.err


def test_the_shop_scenario_validates_with_its_gold_checked():
    res = run_cli("validate", SHOP)
    assert res.code == 0, res
    assert f"gold checked: {len(SHOP_CASES)} cases" in res.out
    assert f"{len(WITH_SQL)} SQL queries ran" in res.out


def test_a_misspelt_route_names_the_case_the_field_and_the_routes(tmp_path):
    first = SHOP_CASES[0]["id"]

    def misspell(cases):
        cases[0]["gold"]["routes"] = ["sqll"]

    refused(run_cli("validate", shop_with(tmp_path, misspell)), f"case {first!r}",
            "field `gold.routes`", "'sqll'", "its routes: blog, sql", "Did you mean 'sql'?")


def test_an_unknown_chunk_id_names_the_case_how_many_and_the_nearest(tmp_path):
    i = WITH_CHUNKS[0]
    known = next(iter(SHOP_CASES[i]["gold"]["relevant"]))

    def typo(cases):
        cases[i]["gold"]["relevant"] = {known: 2, known.upper(): 1, "zzz-missing": 1}

    err = refused(run_cli("validate", shop_with(tmp_path, typo)),
                  f"case {SHOP_CASES[i]['id']!r}", "field `gold.relevant`",
                  "2 of its 3 chunk ids are not in the corpus",
                  f"nearest existing: {known.upper()!r} → {known!r}", "'zzz-missing'")
    assert f"{known!r}," not in err  # the known id is not listed as unknown


def test_gold_sql_that_does_not_parse_names_the_case_and_the_parser_error(tmp_path):
    i = WITH_SQL[0]

    def broken(cases):
        cases[i]["gold"]["sql"] = "SELEC name FROM products"

    refused(run_cli("validate", shop_with(tmp_path, broken)), f"case {SHOP_CASES[i]['id']!r}",
            "field `gold.sql`", "'SELEC name FROM products'",
            "does not parse as sqlite SQL: Invalid expression / Unexpected token at line 1")


@pytest.mark.parametrize(("sql", "error"), [
    ("SELECT name FROM product", "fails on the database: no such table: product"),
    ("SELECT nam FROM products", "fails on the database: no such column: nam"),
    ("DELETE FROM products", "is not run: refused: only a single SELECT query may run"),
])
def test_gold_sql_that_fails_on_the_database_names_the_case_and_the_error(tmp_path, sql, error):
    i = WITH_SQL[1]

    def broken(cases):
        cases[i]["gold"]["sql"] = sql

    refused(run_cli("validate", shop_with(tmp_path, broken)), f"case {SHOP_CASES[i]['id']!r}",
            "field `gold.sql`", repr(sql), error)


def test_no_gold_check_passes_what_the_check_refuses(tmp_path):
    def everything(cases):
        cases[0]["gold"]["routes"] = ["sqll"]
        cases[WITH_CHUNKS[0]]["gold"]["relevant"] = {"nope": 1}
        cases[WITH_SQL[0]]["gold"]["sql"] = "SELECT nam FROM product"

    scenario = shop_with(tmp_path, everything)
    assert run_cli("validate", scenario).code == 2
    res = run_cli("validate", scenario, "--no-gold-check")
    assert res.code == 0, res
    assert "gold not checked (--no-gold-check)" in res.out


def test_problems_alike_are_one_line_and_past_the_cap_are_counted(tmp_path):
    n = MAX_LISTED + 5

    def many(cases):
        for case in cases[:3]:
            case["gold"]["routes"] = ["sqll"]
        for k, i in enumerate(WITH_SQL[:n]):
            cases[i]["gold"]["sql"] = f"SELECT missing_{k} FROM products"

    err = refused(run_cli("validate", shop_with(tmp_path, many)))
    ids = [c["id"] for c in SHOP_CASES[:3]]
    assert f"cases {ids[0]!r}, {ids[1]!r}, {ids[2]!r}, field `gold.routes`" in err
    listed = [line for line in err.splitlines() if line.startswith("  case")]
    assert len(listed) == MAX_LISTED  # the routes line, then one line per SQL problem
    more = n - (MAX_LISTED - 1)
    assert err.splitlines()[MAX_LISTED + 1] == f"  … and {more} more"
    assert f"{3 + n} gold labels of" in err


def test_the_cheap_check_reads_neither_corpus_nor_database(tmp_path):
    def misspell(cases):
        cases[0]["gold"]["routes"] = ["blgo"]
        cases[WITH_SQL[0]]["gold"]["sql"] = "SELECT nam FROM product"

    scenario = load_scenario(shop_with(tmp_path, misspell))
    scenario.corpus_path = tmp_path / "gone.jsonl"  # would fail if it were read
    scenario.database_build = tmp_path / "gone.sql"
    problems = gold_problems(scenario, sql=False, corpus=False)
    assert [(p.case_id, p.field, p.value) for p in problems] == [
        (SHOP_CASES[0]["id"], "gold.routes", "'blgo'")]
    assert "Did you mean 'blog'?" in problems[0].reason
    known = next(iter(SHOP_CASES[WITH_CHUNKS[0]]["gold"]["relevant"]))
    problems = gold_problems(scenario, sql=False, chunk_ids={known})  # a run's loaded corpus
    assert {p.field for p in problems} == {"gold.routes", "gold.relevant"}


SMALL = """
    name: small
    cases:
      - {id: a, question: q, gold: {routes: [sql], sql: "SELECT x FROM t"}}
      - {id: b, question: q, gold: {routes: [docs], relevant: {d1: 1, d9: 1}}}
    traces: traces.jsonl
    pipeline:
      router: {routes: {sql: [text2sql], docs: [retriever]}}
      text2sql: {after: [router]}
      retriever: {after: [router]}
    evaluators:
      router: [route_accuracy]
"""


def test_only_what_the_scenario_has_is_checked(tmp_path):
    write_jsonl(tmp_path / "traces.jsonl", [{"case_id": "a"}])
    check = check_gold(load_scenario(write(tmp_path / "s.yaml", SMALL)))
    assert check.problems == []
    assert check.summary() == ("gold checked: 2 cases (routes of 2), 1 SQL queries parsed (SQL "
                               "not run: the scenario has no database)")
    assert "chunk ids: the scenario has no corpus" in check.skipped


def test_without_a_plugin_to_run_it_gold_sql_is_parsed_and_not_run(tmp_path, monkeypatch):
    write_jsonl(tmp_path / "traces.jsonl", [{"case_id": "a"}])
    write(tmp_path / "t.sql", "CREATE TABLE t (x INTEGER);")
    write_jsonl(tmp_path / "corpus.jsonl", [{"id": "d1", "text": "one"}])
    text = SMALL + "    database: {build: t.sql}\n    corpus: corpus.jsonl\n"
    monkeypatch.setenv("EVALHARNESS_LOAD_PLUGINS", "evalharness_router")
    check = check_gold(load_scenario(write(tmp_path / "s.yaml", text)))
    assert check.sql_ran == 0 and check.sql_parsed == 1
    assert any("no plugin provides text2sql's oracle" in s for s in check.skipped)
    assert [(p.case_id, p.field, p.value) for p in check.problems] == [
        ("b", "gold.relevant", "'d9'")]
    monkeypatch.delenv("EVALHARNESS_LOAD_PLUGINS")
    check = check_gold(load_scenario(tmp_path / "s.yaml"))
    assert check.sql_ran == 1 and isinstance(check, GoldCheck)


def test_an_unknown_dialect_is_a_scenario_error_naming_the_field(tmp_path):
    write_jsonl(tmp_path / "traces.jsonl", [{"case_id": "a"}])
    write(tmp_path / "t.sql", "CREATE TABLE t (x INTEGER);")
    text = SMALL + "    database: {build: t.sql, dialect: sqlitex}\n"
    res = run_cli("validate", write(tmp_path / "s.yaml", text))
    assert res.code == 2, res
    assert "field `database.dialect`" in res.err and "Unknown dialect 'sqlitex'" in res.err


def test_a_run_refuses_a_gold_route_the_pipeline_lacks_before_writing(tmp_path):
    """Was: `evalharness scenario` ran, and the case scored a silent route_accuracy 0."""

    def misspell(cases):
        cases[WITH_SQL[0]]["gold"]["routes"] = ["sqll"]

    scenario = shop_with(tmp_path, misspell)
    res = run_cli("scenario", scenario, "--out", tmp_path / "run", "-q")
    assert res.code == 2, res
    assert f"case '{SHOP_CASES[WITH_SQL[0]]['id']}', field `gold.routes`, 'sqll': not a route " \
           "of the pipeline; its routes: blog, sql. Did you mean 'sql'?" in res.err
    assert "`evalharness validate` checks the chunk ids and the gold SQL too" in res.err
    assert not (tmp_path / "run").exists()
