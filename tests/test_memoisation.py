"""Memoised work gives exactly what computing it afresh gives (benchmarks/scale.py's fixes).

Each memo is checked against the computation it stands for: the SQL normal forms (in-process
and in a helper process), whole cascade outcomes of repeated pairs, gold plans, clause items,
the heuristic judge's answers and embeddings and its text caches, the shop assistant's
sentence vectors, and results.jsonl read back with shared strings.
"""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import pytest
import sqlglot
from sqlglot.errors import SqlglotError

from evalharness.context import Database, EvalContext, build_sqlite
from evalharness.errors import InputError
from evalharness.judge import heuristic as H
from evalharness.judge.base import JudgeConfig
from evalharness.judge.tasks import (
    CLAIM_SUPPORT,
    CLAIMS,
    QUESTIONS,
    ClaimsInput,
    ClaimSupportInput,
    QuestionsInput,
)
from evalharness.models import Case, CaseResult, Text2SQLStep, Trace
from evalharness.runner import read_results
from evalharness_sql import EquivalenceSettings, evaluate_text2sql, normal_form, workers
from evalharness_sql.clauses import clause_items
from evalharness_sql.engines import SQLiteEngine
from evalharness_sql.memo import LRU, normal_form_entry
from evalharness_sql.rules import normalize
from evalharness_sql.sandbox import parse_statements
from evalharness_sql.stages.execute import _plan, gold_plan
from evalharness_sql.stages.parse import parse
from evalharness_sql.verdict import Pair

ROOT = Path(__file__).resolve().parent.parent
SHOP = ROOT / "scenarios" / "shop"


@pytest.fixture(scope="module")
def shop_db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("shop") / "catalog.sqlite"
    build_sqlite(SHOP / "catalog.sql", path)
    return path


def shop_queries() -> list[str]:
    cases = [json.loads(line) for line in (SHOP / "cases.jsonl").read_text().splitlines()]
    return [c["gold"]["sql"] for c in cases if c["gold"]["sql"]]


def tree_signature(tree):
    return [(type(n).__name__, n.sql(), n.arg_key, n.index) for n in tree.walk()]


# -- SQL: normal forms ------------------------------------------------------------------------


def test_memoised_normal_forms_equal_fresh_ones(shop_db):
    engine = SQLiteEngine(shop_db)
    schema = engine.schema()
    for sql in shop_queries() + ["select NAME from products p where p.price<10"]:
        fresh_tree = normalize(parse_statements(sql, "sqlite")[0], schema=schema,
                               dialect="sqlite", state=(state := {}))
        first = normal_form_entry(sql, "sqlite", engine)
        again = normal_form_entry(sql, "sqlite", engine)
        assert again is first  # remembered
        assert first.sql == normal_form(sql, "sqlite", schema) == fresh_tree.sql(
            dialect="sqlite", comments=False)
        assert first.qualified == bool(state["qualified"])
        assert first.tree is not first.tree  # every caller gets its own tree
        assert tree_signature(first.tree) == tree_signature(fresh_tree)
        assert first.clauses("sqlite") == clause_items(fresh_tree, "sqlite")


def test_a_memoised_failure_is_raised_again_every_time(shop_db):
    engine = SQLiteEngine(shop_db)
    for bad in ("SELEC name FRM products", "SELECT 1; SELECT 2"):
        with pytest.raises(SqlglotError) as fresh:
            normal_form(bad, "sqlite", engine.schema())
        for _ in range(2):
            with pytest.raises(SqlglotError) as memoised:
                normal_form_entry(bad, "sqlite", engine)
            assert str(memoised.value) == str(fresh.value)


def test_gold_plans_are_memoised_per_query_and_copied(shop_db):
    for sql in shop_queries():
        first, second = Pair(sql, "SELECT 1"), Pair(sql, "SELECT 2")
        parse(first), parse(second)
        a, b = gold_plan(first), gold_plan(second)
        assert a == b == _plan(first.gold_tree, sql, "sqlite")
        assert a is not b and (a.keys is None or a.keys is not b.keys)


# -- SQL: whole pairs -------------------------------------------------------------------------


def test_repeated_pairs_get_the_values_of_a_fresh_evaluation(shop_db, tmp_path):
    """A batch with every pair three times (memo hits within the batch and across batches)
    equals each pair evaluated alone on a database nobody evaluated on before."""
    golds = shop_queries()[:8]
    preds = [golds[1], golds[0]] + [g.replace("ORDER BY", "ORDER  BY") for g in golds[2:5]] + \
        ["SELECT name FROM products", "SELEC x", "SELECT nope FROM products"]
    pairs = list(zip(golds, preds, strict=True))
    settings = EquivalenceSettings(test_suite_size=4)
    judge = H.HeuristicJudge(JudgeConfig())

    def rows(batch_pairs, db_path):
        batch = [(Case(id=f"c{i}", question="q", gold={"sql": g}), Text2SQLStep(sql=p))
                 for i, (g, p) in enumerate(batch_pairs)]
        ctx = EvalContext(judge=judge, database=Database(path=db_path))
        return evaluate_text2sql(evaluator="equivalence", batch=batch, settings=settings,
                                 context=ctx)

    def comparable(row):
        out = {}
        for name, value in row.items():
            if name == "exec_time_ratio":
                continue
            out[name] = value.model_dump(mode="json")
        return out

    repeated = rows(pairs * 3, shop_db) + rows(pairs, shop_db)
    for i, pair in enumerate(pairs):
        alone = tmp_path / f"fresh-{i}.sqlite"
        shutil.copy(shop_db, alone)
        expected = comparable(rows([pair], alone)[0])
        # the database path appears in reasons: compare against the same path's wording
        for row in (repeated[i], repeated[i + len(pairs)], repeated[i + 2 * len(pairs)],
                    repeated[i + 3 * len(pairs)]):
            got = json.loads(json.dumps(comparable(row)).replace(str(shop_db), str(alone)))
            assert got == expected
    judge.close()


def test_an_llm_judge_turns_the_pair_memo_off(shop_db):
    class LLMJudge:
        backend, model, is_llm = "fake", "m", True

        def __init__(self):
            self.asked = 0

        def run_many(self, task, inputs, *, metric="", rounds_after=0):
            self.asked += len(inputs)
            return [FakeJudgment() for _ in inputs]

    class FakeJudgment:
        error, backend, model = "cannot", "fake", "m"
        output = None

        def record(self):
            return {"backend": "fake"}

    judge = LLMJudge()
    gold = "SELECT name FROM products WHERE price > 100"
    pred = "SELECT name FROM products WHERE price > 100.5"  # same rows here: undecided
    batch = [(Case(id=f"c{i}", question="q", gold={"sql": gold}), Text2SQLStep(sql=pred))
             for i in range(3)]
    ctx = EvalContext(judge=judge, database=Database(path=shop_db))
    evaluate_text2sql(evaluator="equivalence", batch=batch,
                      settings=EquivalenceSettings(test_suite_size=0), context=ctx)
    assert judge.asked == 3  # every case asks the judge itself


# -- SQL: helper processes --------------------------------------------------------------------


def test_a_helper_process_computes_the_same_normal_forms(shop_db):
    engine = SQLiteEngine(shop_db)
    helper = workers.Helper()
    try:
        queries = shop_queries()[:6] + ["SELEC broken", "SELECT 1; SELECT 2"]
        futures = [helper.submit(i, (sql, "sqlite", str(shop_db), engine.fingerprint()))
                   for i, sql in enumerate(queries)]
        for sql, future in zip(queries, futures, strict=True):
            got = future.result(timeout=60)
            try:
                here = normal_form_entry(sql, "sqlite", engine)
            except SqlglotError as exc:
                assert type(got) is type(exc) and str(got) == str(exc)
                continue
            assert (got.sql, got.qualified) == (here.sql, here.qualified)
            assert tree_signature(got.tree) == tree_signature(here.tree)
            assert got.clauses("sqlite") == here.clauses("sqlite")
        stale = helper.submit(99, ("SELECT 1", "sqlite", str(shop_db), "changed"))
        with pytest.raises(RuntimeError, match="changed"):
            stale.result(timeout=60)
    finally:
        helper.close()
    after = helper.submit(100, ("SELECT 1", "sqlite", str(shop_db), engine.fingerprint()))
    with pytest.raises(RuntimeError):
        after.result(timeout=5)


def test_helpers_can_be_turned_off(monkeypatch):
    monkeypatch.setenv(workers.ENV, "0")
    assert workers.helpers_wanted() == 0
    monkeypatch.setenv(workers.ENV, "2")
    assert workers.helpers_wanted() == 2


def test_a_failed_helper_means_computing_in_process():
    from concurrent.futures import Future

    memo, elsewhere = LRU(), Future()
    assert memo.adopt("k", lambda: elsewhere)
    elsewhere.set_exception(RuntimeError("helper died"))
    assert memo.get_or_compute("k", lambda: 42) == 42
    assert memo.get("k") == 42


# -- the heuristic judge ----------------------------------------------------------------------


def test_the_heuristic_judge_memo_returns_what_answer_returns():
    judge = H.HeuristicJudge(JudgeConfig())
    claims = ClaimsInput(question="Price?", answer="It costs €49.90. It is navy. Thanks!")
    support = ClaimSupportInput(context="The Slim Chino costs €49.90; 4 left in size M.",
                                claims=["The Slim Chino costs €49.90", "It costs €59."])
    questions = QuestionsInput(answer="Raw denim should rarely be washed.", n=3)
    for task, inputs in ((CLAIMS, claims), (CLAIM_SUPPORT, support), (QUESTIONS, questions)):
        expected = H.answer(task, inputs)
        first, second = judge.run_many(task, [inputs, inputs])
        assert first.output == second.output == expected
        assert first.output is not second.output  # each judgment owns its output
        assert first.key == second.key and first.id != second.id  # each judgment counts once
        assert {**first.record(), "id": None} == {**second.record(), "id": None}
    texts = [["How do I wash raw denim?", "washing raw denim", "wool coats"],
             ["wool coats", "How do I wash raw denim?"]]
    for group, emb in zip(texts, judge.embed_many(texts), strict=True):
        assert (emb.vectors == H.embed_texts(group)).all()
    judge.close()


def test_the_heuristic_text_caches_change_nothing():
    text = "Don't pay €129.00 for Pelé's 2 shirts!  It’s 10–12 €"
    uncached = [H.fold.__wrapped__(t).replace("’", "'") for t in H._WORD_RE.findall(
        H._DETACHED_CLITIC.sub("", H.normalise.__wrapped__(text)))]
    first = H.tokens(text)
    assert first == uncached
    first.append("mutated")  # a caller's list is its own
    assert H.tokens(text) == uncached
    assert H.normalise(text) == H.normalise.__wrapped__(text)
    assert H.fold("Pelé") == H.fold.__wrapped__("Pelé") == "pele"
    context = "The Slim Chino costs €49.90; 4 left in size M."
    assert H.verify_claims(context, ["4 in size M"]) == H.verify_claims(context, ["4 in size M"])
    assert H._prepared(context) is H._prepared(context)
    assert vars(H._prepared(context)) == vars(H._Context(context))


# -- the shop assistant -----------------------------------------------------------------------


def test_the_assistants_sentence_vectors_are_the_corpus_vectors():
    from evalharness.importing import import_file

    assistant = import_file(SHOP / "assistant", "test_memo_shop")
    corpus = assistant.corpus()
    for sentence in ("Raw denim should rarely be washed.", "Wool coats keep their shape."):
        cached = assistant.sentence_vector(corpus, sentence)
        assert (cached == corpus.vector(sentence)).all()
        assert assistant.sentence_vector(corpus, sentence) is cached


# -- the runner -------------------------------------------------------------------------------


def test_results_read_with_shared_strings_equal_each_line_read_alone(tmp_path):
    context = "A long chunk of text that many cases retrieve. " * 5
    lines = []
    for i in range(3):
        result = CaseResult(case=Case(id=f"c{i}", question="Which coat?"),
                            trace=Trace(case_id=f"c{i}", retriever={"ids": ["b1"],
                                                                   "texts": [context]}))
        lines.append(result.model_dump_json())
    path = tmp_path / "results.jsonl"
    path.write_text("\n".join(lines) + "\n\n")
    read = read_results(path)
    assert [r.model_dump() for r in read] == [CaseResult.model_validate_json(x).model_dump()
                                              for x in lines]
    assert read[0].trace.retriever.texts[0] is read[2].trace.retriever.texts[0]


def test_reading_results_keeps_its_errors_and_torn_line_repair(tmp_path):
    good = CaseResult(case=Case(id="c1", question="q"), trace=Trace(case_id="c1"))
    path = tmp_path / "results.jsonl"
    path.write_text(good.model_dump_json() + "\n" + '{"case": {"id"')
    with pytest.raises(InputError, match="line 2: not valid JSON"):
        read_results(path)
    assert [r.case.id for r in read_results(path, repair=True)] == ["c1"]
    assert path.read_text().endswith("\n")  # the torn line is gone
    path.write_text(good.model_dump_json() + "\n[1]\n")
    with pytest.raises(InputError, match="line 2: expected a JSON object"):
        read_results(path)
    path.write_text('{"case": 1}\n')
    with pytest.raises(InputError, match="line 1: not a result record"):
        read_results(path)


def test_pickled_normal_form_trees_survive_the_round_trip():
    tree = sqlglot.parse_one("SELECT a FROM t WHERE b IN (2, 1) ORDER BY a")
    assert tree_signature(pickle.loads(pickle.dumps(tree))) == tree_signature(tree)
