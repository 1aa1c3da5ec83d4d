"""Tests of the shop scenario's reference assistant (the package scenarios/shop/assistant/)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from evalharness.importing import import_file
from evalharness.models import Case, Trace

SHOP = Path(__file__).resolve().parent.parent / "scenarios" / "shop"
CASES_FILE = SHOP / "cases.jsonl"


assistant = import_file(SHOP / "assistant", "shop_assistant_under_test")


def _cases() -> list[Case]:
    lines = CASES_FILE.read_text(encoding="utf-8").splitlines()
    return [Case.model_validate(json.loads(line)) for line in lines if line.strip()]


CASES = _cases()


def _without_latency(trace: Trace) -> dict:
    data = trace.model_dump()
    for step in ("router", "text2sql", "retriever", "generator"):
        if data.get(step):
            data[step]["latency_ms"] = None
    return data


def _ask(question: str, case_id: str = "t") -> Trace:
    return assistant.answer(Case(id=case_id, question=question))


# ------------------------------------------------------------------------------------------
# Every labelled case
# ------------------------------------------------------------------------------------------


def test_every_case_gives_a_valid_trace() -> None:
    for case in CASES:
        trace = assistant.answer(case)
        Trace.model_validate(trace.model_dump())
        assert trace.case_id == case.id
        assert trace.router is not None and trace.router.routes
        assert trace.generator is not None and trace.generator.answer
        assert (trace.text2sql is not None) == ("sql" in trace.router.routes)
        assert (trace.retriever is not None) == ("blog" in trace.router.routes)
        if trace.retriever is not None:
            assert 0 < len(trace.retriever.ids) <= 5
        if trace.text2sql is not None and trace.text2sql.rows is not None:
            assert len(trace.text2sql.rows) <= 50
        for step in (trace.router, trace.text2sql, trace.retriever, trace.generator):
            if step is not None:
                assert step.latency_ms is not None and step.latency_ms >= 0


def test_gold_is_never_needed() -> None:
    """The answer depends on the question only: stripping gold and tags changes nothing."""
    for case in CASES[:15]:
        bare = Case(id=case.id, question=case.question)
        assert _without_latency(assistant.answer(bare)) == _without_latency(assistant.answer(case))


def test_answers_are_deterministic() -> None:
    first = [_without_latency(assistant.answer(c)) for c in CASES]
    second = [_without_latency(assistant.answer(c)) for c in CASES]
    assert first == second


def test_thread_safe() -> None:
    sequential = [_without_latency(assistant.answer(c)) for c in CASES]
    with ThreadPoolExecutor(max_workers=8) as pool:
        parallel = [_without_latency(t) for t in pool.map(assistant.answer, CASES)]
    assert parallel == sequential


def test_sql_mostly_executes() -> None:
    steps = [t.text2sql for t in map(assistant.answer, CASES) if t.text2sql is not None]
    assert steps, "no case was routed to sql"
    ok = sum(1 for s in steps if s.error is None and s.sql)
    assert ok / len(steps) >= 0.9


def test_usage_reported_only_for_model_like_steps() -> None:
    for trace in map(assistant.answer, CASES[:20]):
        assert trace.router is not None and trace.router.usage is None
        if trace.retriever is not None:
            assert trace.retriever.usage is None
        assert trace.generator is not None and trace.generator.usage is not None
        assert trace.generator.usage.completion_tokens > 0
        if trace.text2sql is not None:
            assert trace.text2sql.usage is not None and trace.text2sql.usage.prompt_tokens > 0


# ------------------------------------------------------------------------------------------
# Hand-written questions
# ------------------------------------------------------------------------------------------


def _slots(question: str):
    return assistant.extract_slots(question, assistant.catalog())


def test_slots_price_upper_bound() -> None:
    s = _slots("Show me dresses under 60 euros")
    assert s.max_price == 60 and s.min_price is None
    assert s.category == "dresses"


def test_slots_price_less_than() -> None:
    assert _slots("Any jackets for less than 100 €?").max_price == 100


def test_slots_price_range() -> None:
    s = _slots("Which sweaters cost between 50 and 80 euros?")
    assert (s.min_price, s.max_price) == (50, 80)


def test_slots_colour_and_size() -> None:
    s = _slots("Do you have black jeans in size 30?")
    assert s.colour == "black"
    assert s.size == "30"
    assert s.category == "jeans"


def test_slots_letter_size() -> None:
    assert _slots("Is the Merino Tee available in XL?").size == "XL"


def test_slots_synonym_category() -> None:
    assert _slots("What is the cheapest pair of trainers?").category == "sneakers"
    assert _slots("Show me grey pants").category == "trousers"


def test_slots_brand_and_intent() -> None:
    s = _slots("What is the most expensive bag from Casa Olivo?")
    assert s.brand == "Casa Olivo" and s.category == "bags" and s.intent == "most_expensive"


def test_intents() -> None:
    assert assistant.detect_intent("How many coats do you sell?") == "count"
    assert assistant.detect_intent("What's the average price of a scarf?") == "average_price"
    assert assistant.detect_intent("Cheapest white sneaker?") == "cheapest"
    assert assistant.detect_intent("How many orders were cancelled in June?") == "count_orders"


def test_routes_of_clear_questions() -> None:
    assert _ask("How do I wash a cashmere sweater?").router.routes == ["blog"]
    assert _ask("How many dresses under 100 euros do you have?").router.routes == ["sql"]


def test_cheapest_answer_mentions_the_product() -> None:
    trace = _ask("What is the cheapest pair of sneakers?")
    assert trace.text2sql is not None and trace.text2sql.error is None
    assert trace.text2sql.columns[:4] == ["name", "brand", "colour", "price"]
    name, _brand, _colour, price = trace.text2sql.rows[0]
    assert trace.generator is not None
    assert name in trace.generator.answer and f"{price:.2f}" in trace.generator.answer
    assert any(name in c for c in trace.generator.contexts)


def test_retriever_finds_the_obvious_chunk() -> None:
    trace = _ask("How should I wash my jeans?")
    assert trace.retriever is not None
    assert set(trace.retriever.ids) & {"b011", "b012"}
    assert trace.retriever.scores == sorted(trace.retriever.scores, reverse=True)


def test_slots_spelled_out_numbers_and_size_words() -> None:
    s = _slots("Any women's trousers in a small for less than a hundred euros?")
    assert s.max_price == 100 and s.size == "S" and s.gender == "women"
    assert _slots("Show me everything under thirty euros").max_price == 30
    assert _slots("I wear a thirty-two waist, any jeans?").size == "32"


def test_slots_dates_and_status() -> None:
    s = _slots("What was the revenue from delivered orders in September 2026?")
    assert s.intent == "revenue" and s.status == "delivered"
    assert s.month == "2026-09" and s.since is None
    s = _slots("What's new since the start of October 2026?")
    assert s.since == "2026-10-01" and s.month is None
    assert _slots("Which products get sent back the most?").status == "returned"


def test_product_name_keeps_distinguishing_colour() -> None:
    s = _slots("Which sizes can I still get the black Chelsea boots in?")
    assert s.intent == "sizes" and s.product == "Chelsea Boot" and s.colour == "black"
    assert s.category is None
