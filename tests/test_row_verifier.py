"""The row verifier (issue 30): claims about rows a query returned are checked against the typed
rows, each verdict with its evidence; the generator's contexts are linked to the same trace's
rows; ``faithfulness_all`` fails an answer on one unsupported claim.

Every expected verdict here is worked out by hand from the rows shown."""

from __future__ import annotations

import sys

import pytest

from conftest import ROOT
from evalharness.context import EvalContext
from evalharness.judge import JudgeConfig
from evalharness.judge.heuristic import HeuristicJudge, verify_with_rows
from evalharness.judge.rows import matches, settle_claims
from evalharness.judge.tasks import CLAIM_SUPPORT, ClaimSupportInput, RowTable
from evalharness.models import Case, GeneratorStep, RetrieverStep, Text2SQLStep, Trace
from evalharness.registry import run_evaluator
from evalharness_generation import register_evaluators
from evalharness_generation.sources import generator_evidence, parse_rows

PRODUCT = RowTable(columns=["name", "brand", "colour", "price", "size", "stock"],
                   rows=[["Slim Chino", "Hollis & Reed", "navy", 49.9, "M", 4]])
SOLD_OUT = RowTable(columns=["name", "brand", "colour", "price", "size", "stock"],
                    rows=[["Slim Chino", "Hollis & Reed", "navy", 49.9, "S", 0]])
LIST = RowTable(columns=["name", "brand", "price"],
                rows=[["Canvas Low Top", "Stride Lab", 59.9], ["Court Sneaker", "Stride Lab", 119.0],
                      ["Knit Runner", "Verde Studio", 89.0]])
COUNTS = RowTable(columns=["n", "avg_price"], rows=[[14, 61.3]])
EMPTY = RowTable(columns=["name", "price"], rows=[])


def verdict(table: RowTable, claim: str, question: str = "", context: str = ""):
    [v] = verify_with_rows(context, [table], [claim], question).verdicts
    return v


@pytest.mark.parametrize("table, claim", [
    (PRODUCT, "I found 1 matching product: the navy Slim Chino by Hollis & Reed (49.90 €, "
              "4 in stock in that size)."),
    (PRODUCT, "The Slim Chino costs just under €50."),
    (PRODUCT, "It is about 50 euros."),
    (PRODUCT, "We have four in medium."),
    (PRODUCT, "Yes, size M is in stock."),
    (SOLD_OUT, "Sorry, the Slim Chino is sold out in S."),
    (SOLD_OUT, "Unfortunately we have none left in S."),
    (LIST, "Three products match your search."),
    (LIST, "The cheapest is the Canvas Low Top at €59.90."),
    (LIST, "The Court Sneaker by Stride Lab is the most expensive."),
    (LIST, "Together they cost 267.90 €."),
    (LIST, "Prices range from €59.90 to €119.00."),
    (LIST, "The Knit Runner costs 29.10 € more than the Canvas Low Top."),
    (LIST, "The Canvas Low Top is cheaper than the Knit Runner."),
    (LIST, "We found the Canvas Low Top (59.90 €), the Court Sneaker (119.00 €) and 1 more."),
    (LIST, "Brands: Stride Lab, Verde Studio."),
    (COUNTS, "We have 14 of them, at 61.30 € on average."),
    (EMPTY, "Nothing matched your search."),
    (EMPTY, "Sorry, we don't carry anything like that."),
])
def test_a_correct_claim_is_supported_with_its_evidence(table, claim):
    v = verdict(table, claim, question="Do you have navy chinos in size M?")
    assert v.supported, (v.reason, v.evidence)
    assert v.confidence == 0.95
    assert v.evidence and all(e.startswith("✓") for e in v.evidence)


@pytest.mark.parametrize("table, claim, why", [
    (PRODUCT, "The Slim Chino costs €59.90.", "'€59.90' is in no cell"),
    (PRODUCT, "It is about 80 euros.", "'80 euros' (about) is in no cell"),
    (PRODUCT, "The Slim Chino by Verde Studio costs €49.90.", "nothing in the rows says Verde"),
    (PRODUCT, "We have it in large.", "'large' is L, but row 1 size = M"),
    (SOLD_OUT, "Yes, size S is in stock.", "row 1 stock = 0: 'in stock' needs more than 0"),
    (PRODUCT, "Sorry, it is sold out in M.", "row 1 stock = 4: 'sold out' needs 0"),
    (LIST, "Five products match your search.", "'Five' is in no cell of 3 rows"),
    (LIST, "The cheapest is the Court Sneaker.", "the minimum of price over 3 rows is row 1 price = 59.9"),
    (LIST, "Together they cost 300.00 €.", "nor their sum or mean"),
    (LIST, "The Canvas Low Top by Verde Studio costs 59.90 €.",
     "'Verde Studio' is a value of row 3, not of row 1"),
    (LIST, "We found the Canvas Low Top (119.00 €), the Court Sneaker (59.90 €).",
     "'119.00 €' is in no cell of row 1"),
    (LIST, "The Knit Runner is cheaper than the Canvas Low Top.", "'cheaper than'"),
    (LIST, "Prices range from €49.90 to €119.00.", "is not the range of price"),
    (EMPTY, "Yes, we have two matching products.", "has no rows, but the claim states 'two'"),
    (LIST, "Nothing matched your search.", "has 3 rows, so something matched"),
])
def test_a_wrong_claim_is_contradicted_and_says_where(table, claim, why):
    v = verdict(table, claim, question="Which ones do you have?")
    assert not v.supported, (v.reason, v.evidence)
    assert v.confidence <= 0.2
    assert any(why in e for e in v.evidence), v.evidence


def test_hedges_follow_the_documented_policy():
    from evalharness.judge.rows import _figures
    [unhedged] = _figures("It costs €50.")
    assert matches(49.9, unhedged) and matches(50.0, unhedged) and not matches(49.4, unhedged)
    [exact] = _figures("It costs 49.95 €.")
    assert not matches(49.9, exact)
    [about] = _figures("about €50")
    assert matches(45.0, about) and matches(55.0, about) and not matches(44.0, about)
    [under] = _figures("just under €50")
    assert matches(45.5, under) and not matches(50.0, under) and not matches(44.0, under)
    [bound] = _figures("under €200")
    assert matches(49.9, bound) and not matches(200.0, bound)
    [least] = _figures("at least 3")
    assert matches(3.0, least) and not matches(2.0, least)


def test_availability_uses_the_declared_column_else_the_named_else_the_only_whole_numbers():
    table = RowTable(columns=["name", "size", "reserved", "on_hand"],
                     rows=[["Slim Chino", "M", 5, 0]])
    # undeclared: two columns of whole numbers and the claim names neither: nothing settles
    # which one says "available", so the claim is not supported by a wrong column
    undeclared = verify_with_rows("", [table], ["The Slim Chino is available in M."]).verdicts[0]
    declared = verify_with_rows("", [table.model_copy(update={"quantity_columns": ["on_hand"]})],
                                ["The Slim Chino is available in M."]).verdicts[0]
    assert not declared.supported
    assert "on_hand = 0" in declared.evidence[0]
    assert undeclared.evidence != declared.evidence


def test_words_nothing_explains_are_unsupported_unless_the_text_supports_them():
    claim = "The navy Slim Chino is machine washable."
    alone = verdict(PRODUCT, claim)
    assert not alone.supported and alone.confidence == 0.04
    assert any(e.startswith("? nothing in the rows says") for e in alone.evidence)
    helped = verdict(PRODUCT, claim, context="The navy Slim Chino is machine washable at 30.")
    assert helped.supported and "the text does" in helped.reason


def test_a_claim_about_the_text_is_not_contradicted_by_the_rows():
    v = verdict(PRODUCT, "Wash raw denim at 30 degrees.",
                context="Wash raw denim at 30 degrees, inside out.")
    assert v.supported and "names no row" in v.reason


def test_several_tables_and_a_value_of_a_question_word():
    v = verify_with_rows("", [LIST, COUNTS], ["We have 14 sneakers."],
                         "How many sneakers are there?").verdicts[0]
    assert v.supported, v.evidence
    # a figure from the question is not evidence
    assert not verdict(PRODUCT, "It costs 60 €.", question="Anything under 60 €?").supported


def test_settlements_keep_the_evidence_apart_from_the_text_rule():
    [s] = settle_claims([SOLD_OUT], ["Size S is in stock."])
    assert s.against and not s.for_[1:] and s.named == 1


# -- the LLM's view ---------------------------------------------------------------------------


def test_the_llm_judge_reads_rows_as_a_table_not_as_prose():
    inputs = ClaimSupportInput(context="", claims=["It costs €49.90."], tables=[PRODUCT],
                               question="How much are the navy chinos?")
    prompt = CLAIM_SUPPORT.messages(inputs)[1]["content"]
    assert "| # | name | brand | colour | price | size | stock |" in prompt
    assert "| 1 | Slim Chino | Hollis & Reed | navy | 49.9 | M | 4 |" in prompt
    assert "Question the rows answer: How much are the navy chinos?" in prompt
    assert "counts" not in CLAIM_SUPPORT.rubric or "sum" in CLAIM_SUPPORT.rubric


# -- linking the generator's contexts to the trace's rows --------------------------------------


def _context(case_id: str, sql: Text2SQLStep | None, retriever=None) -> EvalContext:
    return EvalContext(traces={case_id: Trace(case_id=case_id, text2sql=sql, retriever=retriever)})


def test_contexts_that_render_the_traces_rows_become_the_typed_rows():
    sql = Text2SQLStep(sql="SELECT ...", columns=PRODUCT.columns, rows=PRODUCT.rows)
    step = GeneratorStep(answer="x", contexts=[
        "name: Slim Chino; brand: Hollis & Reed; colour: navy; price: 49.90; size: M; stock: 4",
        "Chinos are cut from cotton twill."])
    ev = generator_evidence(Case(id="c", question="q"), step, _context("c", sql), ["stock"])
    assert ev.linked == "trace"
    assert ev.prose == ["Chinos are cut from cotton twill."]
    [table] = ev.tables
    assert table.rows == [["Slim Chino", "Hollis & Reed", "navy", 49.9, "M", 4]]
    assert table.quantity_columns == ["stock"] and table.source == "text2sql"


def test_an_empty_result_is_evidence_and_unrelated_contexts_stay_text():
    empty = Text2SQLStep(sql="SELECT ...", columns=["name"], rows=[])
    ev = generator_evidence(Case(id="c", question="q"), GeneratorStep(answer="x", contexts=[
        "A blog paragraph."]), _context("c", empty))
    assert ev.tables[0].rows == [] and ev.prose == ["A blog paragraph."]
    other = Text2SQLStep(sql="SELECT ...", columns=PRODUCT.columns, rows=PRODUCT.rows)
    ev = generator_evidence(Case(id="c", question="q"), GeneratorStep(answer="x", contexts=[
        "A blog paragraph."]), _context("c", other))
    assert ev.linked == "none" and ev.tables == []  # the rows were not among its contexts


def test_rows_only_as_text_are_parsed_back_when_unambiguous():
    prose, tables = parse_rows(["name: A; price: 1.50; stock: 3", "name: B; price: 2.00; stock: 0",
                                "| name | n |\n|---|---|\n| X | 4 |", "Tip: wash it cold."])
    assert prose == ["Tip: wash it cold."]
    assert [t.rows for t in tables] == [[["A", 1.5, 3], ["B", 2.0, 0]], [["X", 4]]]


def test_without_recorded_contexts_the_traces_rows_and_chunks_are_given():
    sql = Text2SQLStep(sql="SELECT ...", columns=LIST.columns, rows=LIST.rows)
    chunks = RetrieverStep(ids=["b1"], texts=["Canvas sneakers are light."])
    ev = generator_evidence(Case(id="c", question="q"), GeneratorStep(answer="x"),
                            _context("c", sql, chunks))
    assert ev.tables[0].rows == LIST.rows and ev.prose == ["Canvas sneakers are light."]


# -- the faithfulness evaluator ------------------------------------------------------------------


def _faithfulness(answer: str, table: RowTable, settings=None):
    judge = HeuristicJudge(JudgeConfig(cache_mode="off"))
    from evalharness_generation.sources import render_rows
    step = GeneratorStep(answer=answer, contexts=render_rows(table.columns, table.rows))
    trace = Trace(case_id="c", text2sql=Text2SQLStep(sql="SELECT ...", columns=table.columns,
                                                      rows=table.rows), generator=step)
    [row] = run_evaluator(register_evaluators, "faithfulness",
                          [(Case(id="c", question="Which sneakers?"), step)], settings,
                          context=EvalContext(judge=judge, traces={"c": trace}))
    judge.close()
    return row


def test_faithfulness_all_fails_a_list_with_one_invented_line():
    answer = ("Here they are:\n- Canvas Low Top by Stride Lab: 59.90 €\n- Court Sneaker by "
              "Stride Lab: 119.00 €\n- Knit Runner by Verde Studio: 89.00 €\n- Cloud Racer by "
              "Stride Lab: 79.00 €")
    row = _faithfulness(answer, LIST)
    assert row["faithfulness"].value == pytest.approx((3 * 0.95 + 0.02) / 4)
    assert row["faithfulness"].value >= 0.5  # the mean passes ...
    assert row["faithfulness_all"].value == 0.02  # ... all-claims does not
    assert "Cloud Racer" in row["faithfulness_all"].details["weakest_claim"]
    assert row["faithfulness"].details["rows"] == [3]


def test_rows_text_is_the_judge_before_the_verifier():
    answer = "Three products match your search."
    assert _faithfulness(answer, LIST)["faithfulness"].value == 0.95
    before = _faithfulness(answer, LIST, {"rows": "text"})["faithfulness"]
    assert before.value < 0.5 and "rows" not in before.details


def test_a_bad_setting_is_an_error_naming_it():
    with pytest.raises(Exception, match="rows"):
        _faithfulness("x", LIST, {"rows": "tables"})


def test_the_shops_first_answer_is_faithful_with_row_evidence():
    """q001 scored 0.02 before the verifier (issue 30)."""
    answer = ("I found 1 matching product: the navy Slim Chino by Hollis & Reed (49.90 €, 4 in "
              "stock in that size).")
    table = RowTable(columns=["name", "brand", "colour", "price", "stock"],
                     rows=[["Slim Chino", "Hollis & Reed", "navy", 49.9, 4]])
    row = _faithfulness(answer, table, {"availability": ["stock"]})
    assert row["faithfulness"].value == 0.95
    [record] = [j for j in row["faithfulness"].details["judgments"]
                if j["task"] == "claim_support"]
    evidence = record["output"]["verdicts"][0]["evidence"]
    assert "✓ row 1 price = 49.9: '49.90 €'" in evidence
    assert "✓ row 1 stock = 4: '4'" in evidence
    assert "✓ row 1 stock = 4: 'in stock' needs more than 0" in evidence


def test_the_benchmark_prints_both_judges_side_by_side(capsys):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import row_claims

    items = row_claims.build(per_kind=1)
    row_claims.report("A", items, by_kind=True)
    out = capsys.readouterr().out
    assert "rows as text" in out and "row verifier" in out and "faithfulness_all" in out
    now = row_claims.measure(items, row_claims.scores(items)["faithfulness"])
    before = row_claims.measure(items, row_claims.scores(items, rows="text")["faithfulness"])
    assert now["auc"] > before["auc"]


def test_reruns_of_one_case_in_one_batch_each_see_their_own_trace(tmp_path):
    """Bug: an oracle rerun batch holds several traces of the same case, and every evaluator's
    ``context.traces`` was keyed by case id, so the generator of one rerun was judged against
    another rerun's SQL rows (the Ray and local runs of the shop disagreed on q047)."""
    from conftest import small_scenario
    from evalharness.plugins import load_plugins
    from evalharness.scenario import load_scenario
    from evalharness.scoring import evaluate_batch

    path = small_scenario(tmp_path)
    path.write_text(path.read_text().replace("generator: [answer_present]",
                                             "generator: [faithfulness]"))
    scenario = load_scenario(path, host=load_plugins())
    case = Case(id="a", question="How much is it?")

    def trace(name: str, price: float) -> Trace:
        return Trace(case_id="a", text2sql=Text2SQLStep(sql="SELECT ...", columns=["name", "price"],
                                                         rows=[[name, price]]),
                     generator=GeneratorStep(answer=f"The {name} costs {price:.2f} €."))

    judge = HeuristicJudge(JudgeConfig(cache_mode="off"))
    results = evaluate_batch(scenario, EvalContext(judge=judge, pipeline=scenario.pipeline),
                             [(case, trace("Navy Coat", 40.0)), (case, trace("Camel Coat", 120.0))])
    judge.close()
    values = [r.components["generator"].metrics["faithfulness"].value for r in results]
    assert values == [0.95, 0.95]


ORDERS = RowTable(columns=["order_id", "ordered_at", "status"],
                  rows=[[57, "2026-11-08 07:08:05", "delivered"], [58, "2026-11-09 10:00:00",
                                                                   "returned"]])
ITEMS = RowTable(columns=["name", "quantity", "unit_price"],
                 rows=[["Merino Tee", 1, 59.0], ["Court Sneaker", 2, 169.0]])
SIZES = RowTable(columns=["size", "stock"], rows=[["S", 4], ["M", 7], ["L", 0]])


@pytest.mark.parametrize("table, claim, supported", [
    (ORDERS, "Order 57 was placed on 8 November 2026 and was delivered.", True),
    (ORDERS, "Order 57 was placed on 9 November 2026.", False),
    (ORDERS, "Order 57: status returned.", False),
    (ORDERS, "The newest order is order 58.", True),
    (ORDERS, "The newest order is order 57.", False),
    (ITEMS, "The order comes to €397 in total.", True),  # 1 × 59 + 2 × 169
    (ITEMS, "The order comes to €228 in total.", False),  # the prices without quantities
    (ITEMS, "1 × €59 + 2 × €169 = €397.", True),
    (ITEMS, "1 × €59 + 2 × €169 = €387.", False),
    (SIZES, "It's in stock in small and medium; large is sold out.", True),
    (SIZES, "It's available in every size: S, M and L.", False),
    (SIZES, "Only L is sold out - every other size is available.", True),
])
def test_dates_totals_arithmetic_and_availability_clause_by_clause(table, claim, supported):
    v = verdict(table, claim, question="What about it?")
    assert v.supported is supported, v.evidence


def test_an_ordered_list_is_one_claim_and_its_order_is_checked():
    from evalharness.judge.heuristic import split_claims

    right = "Sorted by price, cheapest first:\n1. Canvas Low Top (€59.90)\n2. Knit Runner (€89)"
    wrong = "Sorted by price, cheapest first:\n1. Knit Runner (€89)\n2. Canvas Low Top (€59.90)"
    [claim] = split_claims("q", right)
    assert verdict(LIST, claim).supported
    [claim] = split_claims("q", wrong)
    bad = verdict(LIST, claim)
    assert not bad.supported and "not ascending" in bad.evidence[0]


def test_greetings_signatures_and_emoji_are_not_claims():
    from evalharness.judge.heuristic import split_claims

    answer = ("Hello, and thanks for getting in touch!\n\nThe Slim Chino costs €49.90 💸 Happy "
              "reading!\n\nKind regards,\nPriya – Customer Care")
    assert split_claims("q", answer) == ["The Slim Chino costs €49.90"]
    assert split_claims("q", "15.") == ["15."]  # a bare figure is an answer, not a list's "15."
