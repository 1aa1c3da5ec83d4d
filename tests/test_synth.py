"""`evalharness synth`: labelled cases from the corpus and the database (docs/synth.md)."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from conftest import ROOT, run_cli, write, write_jsonl
from evalharness.context import load_corpus
from evalharness.judge.base import JudgeConfig
from evalharness.judge.heuristic import names, numbers
from evalharness.plugins import load_plugins
from evalharness.synth import synthesize, write_cases
from evalharness.synth.filters import DUPLICATE_JACCARD, Duplicates, leaks, missing_facts
from evalharness.synth.schema import humanise, plural, read_schema, singular

SHOP = ROOT / "scenarios" / "shop"
SHIPPED = SHOP / "cases.synthetic.jsonl"


def shop_db() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.executescript((SHOP / "catalog.sql").read_text(encoding="utf-8"))
    return conn


def heuristic_judge():
    return load_plugins([]).judge_backend("heuristic").factory(JudgeConfig(cache_mode="off"))


@pytest.fixture(scope="module")
def shop_synth():
    judge = heuristic_judge()
    try:
        return synthesize(n=200, seed=0, corpus=load_corpus(SHOP / "blog_chunks.jsonl"),
                          database=shop_db(), judge=judge, skip_tables=["customers"])
    finally:
        judge.close()


def by_source(result, source):
    return [c for c in result.cases if c.metadata["synth"]["source"] == source]


# -- the shop: what the "done when" asks --------------------------------------------


def test_the_shop_gives_at_least_150_of_200_cases_every_one_tagged_with_provenance(shop_synth):
    cases = shop_synth.cases
    assert len(cases) >= 150
    assert len({c.id for c in cases}) == len(cases)
    for c in cases:
        assert c.tags[0] == "synthetic"
        meta = c.metadata["synth"]
        assert meta["writer"] == {"name": "offline", "version": "1"} and meta["seed"] == 0
        assert meta["shape"] and 1 <= meta["difficulty"] <= 4
        assert meta.get("tables") or meta.get("chunks") or meta["source"] == "unanswerable"
    assert shop_synth.summary["written"] == len(cases)


def test_every_sql_gold_runs_and_returns_the_stored_non_empty_rows(shop_synth):
    conn = shop_db()
    sql_cases = [c for c in shop_synth.cases if c.gold.sql]
    assert len(sql_cases) >= 60
    for c in sql_cases:
        rows = [list(r) for r in conn.execute(c.gold.sql).fetchall()]
        assert rows and rows == c.metadata["synth"]["rows"], c.id
        assert not all(v is None for r in rows for v in r)


def test_the_sql_ladder_covers_every_rung_the_shop_allows(shop_synth):
    shapes = {c.metadata["synth"]["shape"] for c in by_source(shop_synth, "sql")}
    assert {"filter", "aggregate", "group_by", "having", "join", "nested", "order_limit",
            "null", "ties"} <= shapes
    joins = [c for c in by_source(shop_synth, "sql") if c.metadata["synth"]["shape"] == "join"]
    assert all(" JOIN " in c.gold.sql for c in joins)


def test_every_number_and_name_of_a_corpus_answer_is_in_its_gold_chunks(shop_synth):
    chunks = load_corpus(SHOP / "blog_chunks.jsonl")
    corpus_cases = by_source(shop_synth, "corpus")
    assert len(corpus_cases) >= 50
    for c in corpus_cases:
        context = " ".join(f"{chunks[i].title} {chunks[i].text}" for i in c.gold.relevant)
        assert numbers(c.gold.answer) <= numbers(context), c.id
        assert names(c.gold.answer) <= names(context), c.id
        # the reference answer is the gold chunks' own sentences
        for sentence in c.gold.answer.split(": ", 1)[-1].split(". "):
            assert sentence.rstrip(".") in context, (c.id, sentence)


def test_router_gold_follows_where_the_answer_lives(shop_synth):
    want = {"sql": ["sql"], "corpus": ["blog"], "mixed": ["sql", "blog"], "unanswerable": []}
    seen = set()
    for c in shop_synth.cases:
        source = c.metadata["synth"]["source"]
        seen.add(source)
        assert c.gold.routes == want[source], c.id
        if source == "unanswerable":
            assert c.gold.relevant == {} and c.gold.sql is None
            if "refusal" in type(c.gold).model_fields:
                assert c.gold.refusal is True
        if source == "mixed":
            assert c.gold.sql and c.gold.relevant and " Also, " in c.question
    assert seen == set(want)


def test_multi_hop_and_comparison_cases_need_two_chunks(shop_synth):
    for c in by_source(shop_synth, "corpus"):
        shape = c.metadata["synth"]["shape"]
        if shape in ("multi_hop", "comparison"):
            assert len(c.gold.relevant) == 2, c.id
    shapes = {c.metadata["synth"]["shape"] for c in by_source(shop_synth, "corpus")}
    assert shapes == {"single", "multi_hop", "comparison", "which_of"}


def test_multi_hop_terms_are_mentioned_by_their_two_chunks_only(shop_synth):
    chunks = load_corpus(SHOP / "blog_chunks.jsonl")
    for c in by_source(shop_synth, "corpus"):
        if c.metadata["synth"]["shape"] != "multi_hop":
            continue
        term = c.question.split(" about ", 1)[1].split(",")[0].rstrip(".?").lower()
        word = re.compile(rf"(?<!\w){re.escape(term)}(?!\w)")  # not "womenswear"
        having = {cid for cid, ch in chunks.items()
                  if word.search(f"{ch.title} {ch.text} {' '.join(ch.tags)}".lower())}
        assert having == set(c.gold.relevant), (c.id, term, having)


def test_no_two_cases_are_near_duplicates_and_none_leaks_its_answer(shop_synth):
    seen = Duplicates()
    for c in shop_synth.cases:
        assert not seen.is_duplicate(c.question), c.question
        seen.add(c.question)
        if c.metadata["synth"]["source"] != "unanswerable":
            assert not leaks(c.question, c.gold.answer, c.metadata["synth"].get("rows"))


def test_the_summary_counts_sources_routes_and_coverage(shop_synth):
    s = shop_synth.summary
    assert sum(s["by_source"].values()) == s["written"]
    assert sum(s["by_route"].values()) == s["written"]
    assert s["chunks"]["total"] == 70 and 30 <= s["chunks"]["covered"] <= 70
    assert set(s["tables"]) == {"brands", "categories", "order_items", "orders",
                                "product_sizes", "products"}  # customers: skipped
    assert s["seeds_dropped"].get("sql_too_many_rows", 0) > 0  # long lists are not questions


def test_the_same_seed_gives_byte_identical_cases_and_another_seed_others(tmp_path):
    chunks = load_corpus(SHOP / "blog_chunks.jsonl")

    def run(seed: int, name: str) -> bytes:
        result = synthesize(n=60, seed=seed, corpus=chunks, database=shop_db())
        write_cases(tmp_path / name, result.cases)
        return (tmp_path / name).read_bytes()

    assert run(3, "a.jsonl") == run(3, "b.jsonl")
    assert run(4, "c.jsonl") != run(3, "a.jsonl")


# -- the command line ---------------------------------------------------------------------


def test_the_shipped_synthetic_cases_are_what_synth_writes(tmp_path):
    """scenarios/shop/cases.synthetic.jsonl is `synth scenarios/shop.yaml --n 200
    --skip-table customers` (seed 0): regenerated through the command line, byte for byte;
    no question reads the customers' personal data."""
    out = tmp_path / "cases.jsonl"
    res = run_cli("synth", ROOT / "scenarios" / "shop.yaml", "--out", out, "--n", "200",
                  "--skip-table", "customers")
    assert res.code == 0, res
    assert out.read_bytes() == SHIPPED.read_bytes()
    assert "written / requested" in res.out and "200 / 200" in res.out
    cases = [json.loads(line) for line in out.read_text().splitlines()]
    assert not any("customers" in c["gold"].get("sql", "") for c in cases)
    bad = run_cli("synth", ROOT / "scenarios" / "shop.yaml", "--preview", "--skip-table",
                  "clients")
    assert bad.code == 2 and "no such table" in bad.err and "customers" in bad.err


def test_append_adds_without_repeating_and_an_existing_file_is_not_overwritten(tmp_path):
    out = tmp_path / "cases.jsonl"
    first = run_cli("synth", "--corpus", SHOP / "blog_chunks.jsonl", "--out", out, "--n", "20")
    assert first.code == 0, first
    again = run_cli("synth", "--corpus", SHOP / "blog_chunks.jsonl", "--out", out, "--n", "5")
    assert again.code == 2 and "already exists" in again.err and "--append" in again.err
    more = run_cli("synth", "--corpus", SHOP / "blog_chunks.jsonl", "--out", out, "--n", "20",
                   "--append", "--seed", "1")
    assert more.code == 0, more
    cases = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(cases) == 40
    assert len({c["id"] for c in cases}) == 40
    seen = Duplicates()
    for c in cases:
        assert not seen.is_duplicate(c["question"]), c["question"]
        seen.add(c["question"])


def test_a_scenario_without_cases_or_system_is_valid_for_synth_only(tmp_path):
    scenario = write(tmp_path / "new.yaml", f"""
        name: new
        database: {{build: {SHOP / 'catalog.sql'}}}
    """)
    res = run_cli("synth", scenario, "--out", tmp_path / "c.jsonl", "--n", "15", "--json")
    assert res.code == 0, res
    summary = json.loads(res.out)
    assert summary["written"] == 15 and set(summary["by_source"]) == {"sql"}
    run = run_cli("scenario", scenario, "--out", tmp_path / "run")
    assert run.code == 2 and "field `cases`" in run.err and "evalharness synth" in run.err


def test_synth_input_errors_exit_2_with_one_paragraph(tmp_path):
    from click.testing import CliRunner

    from evalharness.cli import cli

    def synth(*args):
        return CliRunner().invoke(cli, ["synth", *map(str, args)])

    bad = write(tmp_path / "bad.sqlite", "not a database")
    write(tmp_path / "shop.duckdb", "a DuckDB file")
    duck = write(tmp_path / "duck.yaml", "name: d\ndatabase: {engine: duckdb, path: shop.duckdb}\n")
    for args, needles in [
        ((duck, "--preview"), ["duck.yaml", "database.engine", "SQLite", "duckdb"]),
        (("--n", "3", "--preview"), ["--corpus"]),
        (("--corpus", SHOP / "blog_chunks.jsonl"), ["--out", "--preview"]),
        (("--database", bad, "--preview"), ["not a readable SQLite database"]),
        ((ROOT / "scenarios" / "shop.yaml", "--writer", "llm", "--preview"),
         ["needs an LLM judge", "heuristic"]),
    ]:
        res = synth(*args)
        assert res.exit_code == 2, (args, res.output)
        message = res.output.strip()
        assert message.startswith("Error: ") and "Traceback" not in message
        for needle in needles:
            assert needle in " ".join(message.split()), (needle, message)


def test_preview_prints_a_table_and_writes_nothing(tmp_path):
    res = run_cli("synth", "--database", SHOP / "catalog.sql", "--n", "8", "--preview",
                  cwd=tmp_path)
    assert res.code == 0, res
    assert "synthetic cases (a seeded sample)" in res.out and "SELECT" in res.out
    assert "preview only: nothing written" in res.err
    assert list(tmp_path.iterdir()) == []


# -- the pieces ---------------------------------------------------------------------------


def test_names_of_tables_and_columns_in_words():
    assert humanise("product_sizes") == "product sizes" and humanise("unitPrice") == "unit price"
    assert [singular(w) for w in ("categories", "boxes", "status", "order items", "brands")] \
        == ["category", "box", "status", "order item", "brand"]
    assert [plural(w) for w in ("category", "status", "product", "day")] \
        == ["categories", "statuses", "products", "days"]


def _tiny(tmp_path: Path, script: str) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.executescript(script)
    return conn


def test_the_schema_reader_finds_labels_measures_categories_and_foreign_keys(tmp_path):
    conn = _tiny(tmp_path, """
        CREATE TABLE team (team_id INTEGER PRIMARY KEY, title TEXT UNIQUE, city TEXT);
        CREATE TABLE player (id INTEGER PRIMARY KEY, name TEXT, position TEXT, goals INTEGER,
                             nickname TEXT, team_id INTEGER REFERENCES team);
        INSERT INTO team VALUES (1, 'Reds', 'Leeds'), (2, 'Blues', 'Leeds'), (3, 'Greens', 'York');
        INSERT INTO player VALUES (1, 'Ann', 'forward', 9, NULL, 1), (2, 'Bo', 'keeper', 0, 'B', 1),
            (3, 'Cy', 'forward', 4, NULL, 2), (4, 'Di', 'defender', 1, 'D', 2);
    """)
    schema = read_schema(conn)
    team, player = schema.tables["team"], schema.tables["player"]
    assert team.label.name == "title" and player.label.name == "name"
    assert [c.name for c in player.measures] == ["goals"]
    assert [c.name for c in player.categories] == ["position"]
    assert [c.name for c in player.nullable] == ["nickname"]
    assert [(f.column, f.table, f.ref) for f in player.foreign_keys] == [
        ("team_id", "team", "team_id")]  # `REFERENCES team` without a column: its key
    assert team.column("title").unique and not team.column("city").unique


def test_degenerate_gold_queries_are_dropped_and_counted(tmp_path):
    """A result that is the whole table, a tie at a LIMIT cut, a count of 0 and a 'ties'
    question with one row at the top never become cases."""
    conn = _tiny(tmp_path, """
        CREATE TABLE maker (maker_id INTEGER PRIMARY KEY, name TEXT);
        CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT, kind TEXT, price REAL,
                           maker_id INTEGER REFERENCES maker(maker_id));
        INSERT INTO maker VALUES (1, 'M1'), (2, 'M2'), (3, 'M3');
        INSERT INTO item VALUES (1, 'a', 'x', 5.0, 1), (2, 'b', 'x', 5.0, 1),
            (3, 'c', 'y', 7.0, 1), (4, 'd', 'y', 9.0, 1), (5, 'e', 'x', 9.0, 1);
    """)  # every item is M1's: "which items does M1 make" is the whole table
    result = synthesize(n=200, seed=0, database=conn)
    dropped = result.summary["seeds_dropped"]
    assert dropped.get("sql_tie_at_limit", 0) >= 2  # top 1 by price: d, e tie; bottom: a, b
    assert dropped.get("sql_whole_table", 0) >= 1
    for c in result.cases:
        rows = c.metadata["synth"]["rows"]
        assert 0 < len(rows) < 5 or c.metadata["synth"]["shape"] in ("aggregate", "group_by")
        if c.metadata["synth"]["shape"] == "order_limit":  # no clean cut at 1 either way
            assert c.gold.sql.endswith("LIMIT 3") and len(rows) == 3
    ties = [c for c in result.cases if c.metadata["synth"]["shape"] == "ties"]
    assert ties and all(len(c.metadata["synth"]["rows"]) >= 2 for c in ties)


def test_filters_near_duplicates_leaks_and_missing_facts():
    seen = Duplicates(["How many red dresses do you have?"])
    assert seen.is_duplicate("how many RED dresses do you have")
    assert seen.is_duplicate("How many red dresses have you?")
    assert not seen.is_duplicate("How many blue dresses do you have?")
    assert 0 < DUPLICATE_JACCARD < 1
    assert leaks("Is the Wool Coat the most expensive coat at 349?", "The Wool Coat at 349 is.")
    assert leaks("Are there 15 black products?", "15.", rows=[[15]])
    assert not leaks("How many black products are there?", "There are 15.", rows=[[15]])
    assert missing_facts("Wash at 30°C with Woolite.", "Wash cold at 30°C.") == ["woolit"]
    assert missing_facts("It shrinks 5%.", "It shrinks about 5%.") == []


def test_an_answer_the_judge_finds_unsupported_is_dropped_and_counted():
    """Corpus answers are checked against their gold chunks by the judge; a writer whose
    answer adds a claim the chunks do not make loses that candidate."""
    from evalharness.synth.writers import OfflineWriter, Written

    class Embellishing(OfflineWriter):
        def write(self, seed, rng):
            w = super().write(seed, rng)
            if seed.source == "corpus" and seed.chunks[0] == "b013":
                return Written(w.question, w.answer + " Cashmere never needs washing at all.")
            return w

    chunks = load_corpus(SHOP / "blog_chunks.jsonl")
    judge = heuristic_judge()
    try:
        result = synthesize(n=120, seed=0, corpus=chunks, writer=Embellishing(), judge=judge)
    finally:
        judge.close()
    assert result.summary["filtered"].get("unsupported_answer", 0) >= 1
    assert any(r["reason"].startswith("unsupported_answer") and "b013" not in r["reason"]
               for r in result.rejected)
    assert not any("never needs washing" in (c.gold.answer or "") for c in result.cases)


# -- the LLM writer -----------------------------------------------------------------------


def _openai_judge(server, tmp_path, concurrency=4):
    config = JudgeConfig(backend="openai", model="fake-writer", base_url=server.base_url,
                         cache=str(tmp_path / "cache"), concurrency=concurrency)
    return load_plugins([]).judge_backend("openai").factory(config)


def test_the_llm_writer_asks_the_model_caches_and_records_the_prompt(tmp_path):
    from evalharness.synth.llm import LLMWriter
    from evalharness.testing.fake_openai import FakeOpenAI

    chunks = load_corpus(SHOP / "blog_chunks.jsonl")
    offline = synthesize(n=20, seed=2, corpus=chunks, database=shop_db())
    with FakeOpenAI() as server:
        judge = _openai_judge(server, tmp_path)
        try:
            first = synthesize(n=20, seed=2, corpus=chunks, database=shop_db(),
                               writer=LLMWriter(judge, chunks), judge=judge)
            asked = server.stats()["counts"].get("chat", 0)
            again = synthesize(n=20, seed=2, corpus=chunks, database=shop_db(),
                               writer=LLMWriter(judge, chunks), judge=judge)
            assert server.stats()["counts"].get("chat", 0) == asked  # all from the cache
        finally:
            judge.close()
    assert asked >= 20
    # the fake server's model returns the drafts it was given: the offline writer's text
    assert [(c.question, c.gold.answer) for c in first.cases] == [
        (c.question, c.gold.answer) for c in offline.cases]
    assert [c.model_dump() for c in again.cases] == [c.model_dump() for c in first.cases]
    meta = first.cases[0].metadata["synth"]
    assert meta["writer"]["name"] == "llm" and meta["writer"]["model"] == "fake-writer"
    assert meta["writer"]["task"] == "synth_case" and len(meta["prompt_sha256"]) == 64


def test_a_garbage_model_answer_is_asked_again_then_a_counted_rejection(tmp_path):
    from evalharness.synth.llm import LLMWriter
    from evalharness.testing.fake_openai import FakeOpenAI

    chunks = load_corpus(SHOP / "blog_chunks.jsonl")
    with FakeOpenAI() as server:
        server.garbage = 2  # the first request and its re-ask
        judge = _openai_judge(server, tmp_path, concurrency=1)
        try:
            result = synthesize(n=6, seed=0, corpus=chunks, writer=LLMWriter(judge, chunks))
        finally:
            judge.close()
    assert result.summary["filtered"] == {"writer_error": 1}
    assert "unparsable judge answer after one re-ask" in result.rejected[0]["reason"]
    assert len(result.cases) == 6  # the next candidate took its place


def test_llm_writer_through_the_command_line(tmp_path):
    from evalharness.testing.fake_openai import FakeOpenAI

    with FakeOpenAI() as server:
        scenario = write(tmp_path / "s.yaml", f"""
            name: llm-synth
            corpus: {SHOP / 'blog_chunks.jsonl'}
            judge: {{backend: openai, model: fake-writer, base_url: "{server.base_url}",
                     cache: {tmp_path / 'cache'}}}
        """)
        res = run_cli("synth", scenario, "--writer", "llm", "--out", tmp_path / "c.jsonl",
                      "--n", "10")
    assert res.code == 0, res
    cases = [json.loads(line) for line in (tmp_path / "c.jsonl").read_text().splitlines()]
    assert len(cases) == 10
    assert all(c["metadata"]["synth"]["writer"]["name"] == "llm" for c in cases)


def test_a_sample_of_the_shipped_cases_is_what_docs_synth_md_reviews():
    """docs/synth.md's hand check names 30 case ids of the shipped file; each exists."""
    ids = {json.loads(line)["id"] for line in SHIPPED.read_text().splitlines()}
    text = (ROOT / "docs" / "synth.md").read_text()
    reviewed = set(re.findall(r"`(syn-[0-9a-f]{10})`", text))
    assert len(reviewed) >= 30 and reviewed <= ids


def test_write_cases_appends_after_a_file_without_a_final_newline(tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [{"id": "a", "question": "q"}])
    path.write_text(path.read_text().rstrip("\n"))
    result = synthesize(n=2, seed=0, corpus=load_corpus(SHOP / "blog_chunks.jsonl"))
    write_cases(path, result.cases, append=True)
    lines = path.read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(line) for line in lines)


def test_the_shop_synthetic_scenario_runs_end_to_end(tmp_path):
    """scenarios/shop-synthetic.yaml: the shop assistant on a route-stratified sample of the
    shipped synthetic cases, through the command line; unanswerable cases are scored by the
    refusal metric, and the assistant (which never declines) fails them."""
    out = tmp_path / "run"
    res = run_cli("scenario", ROOT / "scenarios" / "shop-synthetic.yaml", "--sample", "30",
                  "--out", out, "--quiet", "--no-headroom")
    assert res.code in (0, 1), res
    report = json.loads((out / "report.json").read_text())
    assert report["cases"]["evaluated"] == 30
    generator = report["components"]["generator"]["metrics"]
    assert "refusal" in generator and generator["refusal"]["n"] == 30
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    declined = [r for r in results if r["case"]["gold"].get("refusal")]
    assert declined, "the stratified sample has an unanswerable case"
    for r in declined:
        assert r["components"]["generator"]["metrics"]["refusal"]["value"] == 0.0


def test_difficulty_narrows_the_ladder_and_llm_options_reach_the_prompt():
    from types import SimpleNamespace

    from evalharness.synth.llm import LLMWriter

    chunks = load_corpus(SHOP / "blog_chunks.jsonl")
    hard = synthesize(n=15, seed=0, corpus=chunks, database=shop_db(), difficulties=[4])
    assert hard.cases and {c.metadata["synth"]["difficulty"] for c in hard.cases} == {4}

    seen = []

    class StubJudge:  # answers every synth_case with its drafts, as the fake server does
        is_llm = True

        def identity(self):
            return {"backend": "stub", "model": "m"}

        def run_many(self, task, inputs, metric=""):
            seen.extend(inputs)
            return [SimpleNamespace(error=None, raw="{}", output=SimpleNamespace(
                question=i.draft_question, answer=i.draft_answer)) for i in inputs]

    writer = LLMWriter(StubJudge(), chunks, personas=["a tailor"], styles=["terse"])
    result = synthesize(n=8, seed=0, corpus=chunks, writer=writer)
    assert len(result.cases) == 8 and seen
    assert {i.persona for i in seen} == {"a tailor"} and {i.style for i in seen} == {"terse"}
    assert all(i.material for i in seen)  # the gold chunks (or the unanswerable topic)
    res = run_cli("synth", "--corpus", SHOP / "blog_chunks.jsonl", "--preview",
                  "--persona", "a tailor")
    assert res.code == 2 and "--writer llm" in res.err


def test_asking_for_as_many_cases_as_the_data_gives_gets_them_all():
    """Candidates written past a quota stay in their pool for the shares filled later (they
    were dropped uncounted: asking for all 199 corpus cases the shop blog gives got 143)."""
    chunks = load_corpus(SHOP / "blog_chunks.jsonl")
    everything = synthesize(n=10_000, seed=0, corpus=chunks).summary["written"]
    assert everything > 150
    exact = synthesize(n=everything, seed=0, corpus=chunks)
    assert exact.summary["written"] == everything
    counted = sum(exact.summary["filtered"].values())
    assert counted == len(exact.rejected)  # every drop counted once


def test_rejected_writes_every_dropped_candidate_with_its_reason(tmp_path):
    """`--rejected FILE`: one JSON line per candidate the filters dropped, as many as the
    summary counts."""
    rejected = tmp_path / "rejected.jsonl"
    res = run_cli("synth", ROOT / "scenarios" / "shop.yaml", "--n", "200", "--json",
                  "--skip-table", "customers", "--out", tmp_path / "c.jsonl",
                  "--rejected", rejected)
    assert res.code == 0, res
    summary = json.loads(res.out)
    lines = [json.loads(line) for line in rejected.read_text().splitlines()]
    assert lines and len(lines) == sum(summary["filtered"].values())
    assert all(r["reason"] and r["question"] and r["shape"] for r in lines)
