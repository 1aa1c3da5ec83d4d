"""The span that holds the answer (issue 31): OTel GenAI ``parts`` messages, tool-call-only LLM
calls passed over, ``pick: last`` by end time, the answer of an enclosing span when the LLM
calls record none, and an ``ambiguous`` warning only where the choice could be wrong.

The fixtures under tests/data/traces/shapes/ (README.md there) have the shapes of the real
exports: Microsoft Agent Framework over OTLP and through Langfuse, the older GenAI forms, a
BeeAI agent in Langfuse, a LlamaIndex RouterQueryEngine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from evalharness.models import Case
from evalharness.pipeline import ComponentSpec, Pipeline
from evalharness.spans.importer import import_traces, read_mapped
from evalharness.spans.mapped import Mapped, explain
from evalharness.spans.mapper import map_trace
from evalharness.spans.mapping import MappingError, parse_mapping, resolve_mapping
from evalharness.spans.model import Span
from evalharness.spans.readers import detect

SHAPES = Path(__file__).resolve().parent / "data" / "traces" / "shapes"
GENERATOR = Pipeline({"generator": ComponentSpec()})
ROUTER_APP = Pipeline({name: ComponentSpec(**spec) for name, spec in {
    "router": {"routes": {"sql": ["text2sql"], "blog": ["retriever"]}},
    "text2sql": {"after": ["router"]}, "retriever": {"after": ["router"]},
    "generator": {"after": ["text2sql", "retriever"]}}.items()})

AF = {  # question -> (answer, the answer's chat span, the tool-call chat span)
    "What does the blue scarf cost?": ("The blue scarf costs 19.99 EUR.",
                                       "e400a7c3e9f1b2d4", "c200a7c3e9f1b2d4"),
    "Is the red raincoat in stock?": ("Yes, 4 red raincoats are in stock.",
                                      "e401a7c3e9f1b2d4", "c201a7c3e9f1b2d4"),
    "How long does delivery to Oslo take?": ("Delivery to Oslo takes 5 to 7 days.",
                                             "e402a7c3e9f1b2d4", "c202a7c3e9f1b2d4"),
}


def mapped_of(name: str, mapping=None, pipeline: Pipeline = GENERATOR) -> list[Mapped]:
    _, traces = read_mapped(SHAPES / name, fmt=None, mapping=mapping, pipeline=pipeline)
    return list(traces)


def imported(name: str, questions, mapping=None, pipeline: Pipeline = GENERATOR):
    cases = [Case(id=f"c{i}", question=q) for i, q in enumerate(questions)]
    return import_traces(SHAPES / name, fmt=None, mapping=mapping, join="question",
                         pipeline=pipeline, cases=cases), {c.question: c.id for c in cases}


def spans_of(name: str) -> dict[str, list[Span]]:
    path = SHAPES / name
    out: dict[str, list[Span]] = {}
    for s in detect(path).read(path):
        out.setdefault(s.trace_id, []).append(s)
    return out


def spec(text: str):
    import yaml
    return parse_mapping(yaml.safe_load(text), source="m.yaml")


# --------------------------------------------------------------------------------------------
# 1. OTel GenAI parts: the span that holds the answer, not the tool call
# --------------------------------------------------------------------------------------------


def test_agent_framework_otlp_the_answer_span_wins_over_the_tool_call():
    """Two `chat` spans: the first's output parts hold only a tool_call; the answer's span
    ends last. In the first trace the two overlap (the answer's span starts first): the last
    to *start* was the tool call, and the answer came out empty."""
    result, ids = imported("genai_parts_agentframework.jsonl", list(AF)[:2])
    for question in list(AF)[:2]:
        answer, _, _ = AF[question]
        step = result.traces[ids[question]].generator
        assert step.answer == answer and step.error is None
        assert (step.usage.prompt_tokens, step.usage.completion_tokens) == (236, 14)
    for m in mapped_of("genai_parts_agentframework.jsonl"):
        _, answer_span, call_span = AF[m.question]
        gen = m.components["generator"]
        assert m.preset == "otel-genai"
        assert gen.chosen[0].span_id == answer_span and gen.candidates == 2
        assert "the last of 2 matching spans to end (pick: last)" in gen.why
        assert not gen.ambiguous  # the preset declares `pick: last`; its span has the answer
        assert [r.span_id for r in gen.others] == [call_span]  # explain lists every candidate
        assert f"not chosen: `chat gpt-4o-mini` chat {call_span}" in explain(m)


def test_a_tool_call_span_that_ends_last_is_passed_over():
    """A streamed span closed late: the tool-call `chat` span ends after the answer's. It
    records no text, only a tool call (`pass_over`), so the answer's span is chosen."""
    spans = spans_of("genai_parts_agentframework.jsonl")["4bf92f3577b34da6a3ce929d0e0e4701"]
    call = next(s for s in spans if s.span_id == "c201a7c3e9f1b2d4")
    call.end_ns = max(s.end_ns for s in spans) + 5_000_000
    m = map_trace(spans, None, GENERATOR)
    gen = m.components["generator"]
    assert gen.chosen[0].span_id == "e401a7c3e9f1b2d4"
    assert m.trace.generator.answer == "Yes, 4 red raincoats are in stock."
    assert "passed over `chat gpt-4o-mini` chat c201a7c3e9f1b2d4" in gen.why
    assert "`pass_over`" in gen.why and not gen.ambiguous
    # every call only asked for tools: the last is chosen, and the error says no answer
    # was recorded on it — then the agent span around it gives the answer
    only_calls = [s for s in spans if s.span_id != "e401a7c3e9f1b2d4"]
    m = map_trace(only_calls, None, GENERATOR)
    assert m.components["generator"].chosen[0].span_id == "c201a7c3e9f1b2d4"
    assert m.trace.generator.answer == "Yes, 4 red raincoats are in stock."
    assert m.components["generator"].sources["answer"].span.name == "invoke_agent ShopAssistant"


@pytest.mark.parametrize("name", ["agentframework_langfuse_trace.json",
                                  "agentframework_langfuse_observations.json"])
def test_agent_framework_through_langfuse(name):
    """The same agent ingested by Langfuse from OTLP: `chat` spans are GENERATIONs whose
    input/output are the gen_ai messages with parts (parsed, or the v2 API's JSON texts);
    the question is the first user text part."""
    ms = mapped_of(name)
    assert ms and all(m.preset == "langfuse" for m in ms)
    for m in ms:
        question = list(AF)[int(m.trace_id[-2:])]
        answer, answer_span, call_span = AF[question]
        gen = m.components["generator"]
        assert m.trace.generator.answer == answer and m.trace.generator.error is None
        assert m.question == question
        assert gen.chosen[0].span_id == answer_span and not gen.ambiguous
        assert m.trace.generator.usage.prompt_tokens == 236
        assert gen.sources["answer"].extractor == (
            "attributes.output $[-1].parts[?type==text].content")
    result, ids = imported(name, [list(AF)[int(m.trace_id[-2:])] for m in ms])
    assert {q: result.traces[ids[q]].generator.answer for q in ids} == {
        q: AF[q][0] for q in ids}


def test_older_genai_forms_keep_working():
    """1.28-1.36 events (`gen_ai.user.message`, `gen_ai.choice`), 1.27 content events of
    JSON texts, and flat `gen_ai.prompt.N.*` / `gen_ai.completion.N.*` attributes: the
    question and the answer of each, the tool-call call before it not chosen."""
    expected = {
        "Which colours does the wool hat come in?": "The wool hat comes in grey and navy.",
        "Can I return opened socks?": "Opened socks can be returned within 14 days.",
        "What sizes does the parka come in?": "The parka comes in S, M, L and XL.",
    }
    ms = mapped_of("genai_parts_older_forms.jsonl")
    assert {m.question: m.trace.generator.answer for m in ms} == expected
    assert not any(m.components["generator"].ambiguous for m in ms)
    # the flat form under OpenLLMetry's preset too
    flat = [m for m in mapped_of("genai_parts_older_forms.jsonl", mapping=spec(
        "preset: openllmetry")) if m.trace.generator.answer == expected[
        "What sizes does the parka come in?"]]
    assert len(flat) == 1


@pytest.mark.parametrize("trace_id", ["0af7651916cd43dd8448eb211c8031a0",
                                      "5b8efff798038103d269b633813fc60c",
                                      "9c1f8e4a7d2b4c6e8f0a1b2c3d4e5f60"])
def test_older_forms_tool_call_closed_last_is_passed_over(trace_id):
    """Each form's own sign of a tool call (not `gen_ai.response.finish_reasons`, dropped)."""
    spans = spans_of("genai_parts_older_forms.jsonl")[trace_id]
    for s in spans:
        s.attributes.pop("gen_ai.response.finish_reasons", None)
    chats = sorted((s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"),
                   key=lambda s: s.start_ns)
    chats[0].end_ns = chats[1].end_ns + 1_000_000  # the tool-call call now ends last
    m = map_trace(spans, resolve_mapping(spec("preset: otel-genai")), GENERATOR)
    gen = m.components["generator"]
    assert gen.chosen[0].span_id == chats[1].span_id, gen.why
    assert "passed over" in gen.why and m.trace.generator.error is None


# --------------------------------------------------------------------------------------------
# 2. The answer on an enclosing span (BeeAI in Langfuse)
# --------------------------------------------------------------------------------------------


BEE = {"Which rain jacket is the lightest?":
       "The Featherlite shell is the lightest rain jacket at 180 g.",
       "Do you sell merino socks?": "Yes, merino socks come in packs of three for 24 EUR."}


@pytest.mark.parametrize("name", ["beeai_langfuse_trace.json", "beeai_langfuse_blob.jsonl"])
def test_beeai_answer_from_the_agent_run_span(name):
    """Every GENERATION's output is null; the agent's run span (and the trace) hold the
    answer: it is read from the nearest enclosing observation that records one (the
    iteration span around the LLM calls records none), and explain says so."""
    [m] = mapped_of(name)
    gen = m.components["generator"]
    assert m.trace.generator.answer == BEE[m.question] and m.trace.generator.error is None
    assert gen.chosen[0].kind == "GENERATION"
    assert gen.sources["answer"].span.name == "RequirementAgent.run"
    assert m.trace.generator.usage.prompt_tokens == 455  # still the LLM call's tokens
    assert not gen.ambiguous  # no candidate records an answer: nothing to choose wrongly
    text = explain(m)
    assert "(enclosing span) of `RequirementAgent.run` SPAN" in text
    assert "the chosen span records no `answer`; it is read from the enclosing span " \
           "`RequirementAgent.run`" in text
    result, ids = imported(name, [m.question])
    assert result.traces[ids[m.question]].generator.answer == BEE[m.question]


def test_beeai_answer_from_the_trace_when_no_observation_records_it():
    spans = next(iter(spans_of("beeai_langfuse_trace.json").values()))
    run = next(s for s in spans if s.name == "RequirementAgent.run")
    del run.attributes["output"]
    m = map_trace(spans, None, GENERATOR)
    assert m.trace.generator.answer == BEE["Which rain jacket is the lightest?"]
    assert m.components["generator"].sources["answer"].span.kind == "TRACE"


def test_no_fallback_past_a_failed_llm_call():
    spans = next(iter(spans_of("beeai_langfuse_trace.json").values()))
    last = max((s for s in spans if s.kind == "GENERATION"), key=lambda s: s.end_ns)
    last.status, last.status_message = "ERROR", "APIConnectionError: connection reset"
    step = map_trace(spans, None, GENERATOR).trace.generator
    assert step.answer is None and "APIConnectionError" in step.error


def test_up_and_from_together_are_refused():
    with pytest.raises(MappingError, match="give `from`.*or `up`"):
        spec("components: {generator: {select: {kind: LLM}, "
             "answer: {field: attributes.output.value, from: {kind: LLM}, up: {}}}}")


# --------------------------------------------------------------------------------------------
# 3. A warning only where the choice could be wrong
# --------------------------------------------------------------------------------------------


LLAMA_MAP = "preset: llamaindex-openinference\ncomponents: {router: {routes: {map: {'0': sql, '1': blog}}}}"


def test_router_app_the_last_llm_call_is_no_warning():
    """Every RouterQueryEngine case had "generator: N candidate spans; chose …" although the
    last LLM call (the answer's synthesis) is right: the preset declares `pick: last` and
    the span it takes holds the answer."""
    ms = mapped_of("llamaindex_router_openinference.jsonl", mapping=spec(LLAMA_MAP),
                   pipeline=ROUTER_APP)
    routed = {m.question: m for m in ms[:2]}
    blog = routed["How do I wash raw denim?"]
    sql = routed["Which scarves cost under 30?"]
    assert blog.trace.router.routes == ["blog"] and sql.trace.router.routes == ["sql"]
    assert blog.trace.generator.answer == "Soak it inside out in cold water."
    assert sql.trace.generator.answer == "The Blue scarf costs 19.99."
    for m in (blog, sql):
        gen = m.components["generator"]
        assert gen.candidates >= 2 and not gen.ambiguous
        assert not [p for c in m.components.values() for p in c.problems
                    if p.kind == "ambiguous"]
        assert "! ambiguous" not in explain(m)


def test_a_declared_pick_on_a_span_without_the_value_is_a_warning():
    """The synthesis call's output is not recorded (a streamed response) while the
    text-to-SQL LLM call records text: `pick: last` may have taken the wrong span — the
    warning names the span chosen, why, and the candidates that have a value."""
    m = mapped_of("llamaindex_router_openinference.jsonl", mapping=spec(LLAMA_MAP),
                  pipeline=ROUTER_APP)[2]
    gen = m.components["generator"]
    assert gen.ambiguous
    [doubt] = [p for p in gen.problems if p.kind == "ambiguous"]
    assert doubt.message.startswith(f"the chosen span `OpenAI.chat` LLM {gen.chosen[0].span_id}")
    assert "records no answer, but 1 other candidate does" in doubt.message
    assert "SQLQuery: SELECT name" in doubt.message  # the text-to-SQL call's text
    assert "chosen by the declared `pick: last`" in doubt.message
    assert "(the last to end of 3 candidates)" in doubt.message
    # the answer itself comes from the query engine's response around the call
    assert m.trace.generator.answer == "The Blue scarf, at 19.99."
    assert gen.sources["answer"].span.name == "NLSQLTableQueryEngine._query"


def two_retrievers(second_ids: list[str]) -> list[Span]:
    def docs(ids):
        return {f"retrieval.documents.{i}.document.id": d for i, d in enumerate(ids)}
    ms = 1_000_000
    return [
        Span("t", "root", None, "chain", kind="CHAIN", start_ns=0, end_ns=100 * ms,
             attributes={"input.value": "q"}),
        Span("t", "r1", "root", "retrieve", kind="RETRIEVER", start_ns=1 * ms, end_ns=20 * ms,
             attributes=docs(["a", "b"])),
        Span("t", "r2", "root", "retrieve", kind="RETRIEVER", start_ns=30 * ms,
             end_ns=50 * ms, attributes=docs(second_ids)),
    ]


@pytest.mark.parametrize(("pick", "second", "warned"), [
    (None, ["a", "b"], False),   # the default pick, the candidates agree: nothing to doubt
    (None, ["c"], True),         # the default pick, they differ: could be wrong
    ("last", ["c"], False),      # declared, and the chosen span has ids
    ("first", ["c"], False),
])
def test_the_default_pick_is_doubted_only_when_candidates_differ(pick, second, warned):
    block = "select: {kind: RETRIEVER}, ids: {field: attributes.retrieval.documents, " \
            "path: '$[*].document.id'}" + (f", pick: {pick}" if pick else "")
    mapping = spec(f"preset: none\ncomponents: {{retriever: {{{block}}}}}")
    m = map_trace(two_retrievers(second), mapping, Pipeline({"retriever": ComponentSpec()}))
    ret = m.components["retriever"]
    assert ret.candidates == 2 and ret.ambiguous is warned
    if warned:
        [doubt] = [p for p in ret.problems if p.kind == "ambiguous"]
        assert "2 candidate spans record 2 different ids values" in doubt.message
        assert "by the default `pick: last` (the last to end)" in doubt.message
        assert "not chosen: `retrieve` RETRIEVER r1 (['a', 'b'])" in doubt.message


def test_case_notes_only_where_the_choice_could_be_wrong():
    questions = ["How do I wash raw denim?", "Which scarves cost under 30?",
                 "Which scarf is the cheapest?"]
    result, ids = imported("llamaindex_router_openinference.jsonl", questions,
                           mapping=spec(LLAMA_MAP), pipeline=ROUTER_APP)
    for question in questions[:2]:
        notes = result.notes.get(ids[question], [])
        assert not [n for n in notes if "candidate" in n], notes
    [doubt] = [n for n in result.notes[ids[questions[2]]] if "candidate" in n]
    assert doubt.startswith("trace mapping, generator: the chosen span `OpenAI.chat` LLM")
