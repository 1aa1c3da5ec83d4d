"""CLAIM_SUPPORT's user message (rows as Markdown tables), read back by the fake server."""

from __future__ import annotations

import pytest
from test_judge_openai import judge_for

from evalharness.judge import CLAIM_SUPPORT, ClaimSupportInput
from evalharness.judge.heuristic import answer as heuristic_answer
from evalharness.judge.tasks import RowTable, claim_support_prompt
from evalharness.testing.fake_openai import FakeOpenAI, _claim_support_from_prompt

COATS = RowTable(columns=["name", "price", "stock"], source="text2sql",
                 rows=[["Navy Wool Coat", 129.0, 3], ["Grey Parka", 89.5, 0]])
NOTHING = RowTable(columns=["name", "size"], rows=[])
INPUTS = ClaimSupportInput(
    context="Wool coats are warm.\n\nThe shop ships in two days.",
    claims=["The Navy Wool Coat costs 129 euros.", "Three are in stock.",
            "No coat comes in XXL."],
    tables=[COATS, NOTHING])


@pytest.fixture
def server():
    with FakeOpenAI() as s:
        yield s


def test_the_prompt_shows_tables_and_numbered_claims():
    prompt = claim_support_prompt(INPUTS)
    assert prompt.startswith("Context:\nWool coats are warm.\n\nThe shop ships in two days.")
    assert ("Rows 1 (from text2sql): 2 rows:\n"
            "| # | name | price | stock |\n"
            "|---|---|---|---|\n"
            "| 1 | Navy Wool Coat | 129.0 | 3 |\n"
            "| 2 | Grey Parka | 89.5 | 0 |") in prompt
    assert "Rows 2: 0 rows — the query matched nothing (columns: name, size)" in prompt
    assert prompt.endswith("Claims:\n1. The Navy Wool Coat costs 129 euros.\n"
                           "2. Three are in stock.\n3. No coat comes in XXL.")
    assert CLAIM_SUPPORT.messages(INPUTS)[1]["content"] == prompt


def test_no_tables_no_rows_section():
    prompt = claim_support_prompt(ClaimSupportInput(context="Coats are warm.",
                                                    claims=["Coats are warm."], tables=[]))
    assert "Rows" not in prompt
    assert prompt == "Context:\nCoats are warm.\n\nClaims:\n1. Coats are warm."


ROUND_TRIPS = [
    INPUTS,
    ClaimSupportInput(context="", claims=[]),
    ClaimSupportInput(context="Only text.", claims=["one", "a claim\nover two lines", ""]),
    ClaimSupportInput(context="", claims=["It is 1.5 kg."], question="How heavy?", tables=[
        RowTable(columns=["a|b", "n", "note"], rows=[["x|y", -2, None], ["", 1.5, "007"],
                                                     ["NULL?", 0, "1.50"]],
                 quantity_columns=["n", "note"], source="sql (replica)"),
        RowTable(columns=["n"], rows=[], quantity_columns=["n"], source="text2sql")]),
    # a context that holds what looks like a table section and a claims section
    ClaimSupportInput(context="Rows 1: 0 rows — the query matched nothing (columns: x)\n\n"
                              "More text.\n\nClaims:\n1. not a claim",
                      claims=["real"], tables=[NOTHING]),
]


@pytest.mark.parametrize("inputs", ROUND_TRIPS)
def test_the_prompt_reads_back_as_the_inputs(inputs):
    assert _claim_support_from_prompt(claim_support_prompt(inputs)) == inputs


def test_reading_back_types_values_and_drops_rows_past_the_limit():
    table = RowTable(columns=["n", "label"], rows=[[i, f"row {i}"] for i in range(205)])
    prompt = claim_support_prompt(ClaimSupportInput(context="  padded  ", claims=["c"],
                                                    tables=[table]))
    assert "(and 5 more rows)" in prompt
    back = _claim_support_from_prompt(prompt)
    assert back.context == "padded"
    assert back.tables[0].rows == table.rows[:200]
    assert back.tables[0].rows[3] == [3, "row 3"]


def test_the_fake_server_answers_claim_support_with_tables(server, tmp_path):
    other = INPUTS.model_copy(update={"tables": [COATS], "claims": ["Grey Parka: 89.5."]})
    judge = judge_for(server, tmp_path)
    judgments = judge.run_many(CLAIM_SUPPORT, [INPUTS, other])
    judge.close()
    for j, inputs in zip(judgments, [INPUTS, other], strict=True):
        assert j.error is None, j.error
        assert j.output == heuristic_answer(CLAIM_SUPPORT, inputs)
        assert [v.claim for v in j.output.verdicts] == inputs.claims
    assert server.counts["chat"] == 2


def test_the_canned_server_gives_one_verdict_per_claim(tmp_path):
    with FakeOpenAI(canned=True) as server:
        judge = judge_for(server, tmp_path, cache_mode="off")
        (j,) = judge.run_many(CLAIM_SUPPORT, [INPUTS])
        judge.close()
    assert j.error is None and len(j.output.verdicts) == len(INPUTS.claims)


def test_the_cache_key_holds_the_tables(server, tmp_path):
    judge = judge_for(server, tmp_path)
    more = COATS.model_copy(update={"rows": COATS.rows[:1]})
    keys = {judge.key(CLAIM_SUPPORT, INPUTS.model_copy(update={"tables": tables}))
            for tables in ([COATS, NOTHING], [COATS], [more, NOTHING], [])}
    judge.close()
    assert len(keys) == 4
