"""Mapping recorded spans onto pipeline components: presets, selectors, extractors, problems.

Each trace here is built the way its instrumentation records it (span names, kinds, attribute
keys, JSON texts already decoded as the readers decode them) — with nested chains, retries,
noise spans, rerankers, redaction and content capture off.
"""

from __future__ import annotations

import json

import pytest

from evalharness.errors import ScenarioError
from evalharness.locate import load_yaml_with_lines
from evalharness.pipeline import SHOP_PIPELINE, ComponentSpec, Pipeline
from evalharness.spans.mapped import explain
from evalharness.spans.mapper import map_trace, span_usage
from evalharness.spans.mapping import (
    PRESETS,
    MappingError,
    check_mapping,
    guess_preset,
    load_mapping,
    load_preset,
    mapping_spec,
    parse_mapping,
    resolve_mapping,
)
from evalharness.spans.model import Span, SpanEvent

SHOP = Pipeline({name: ComponentSpec(**spec) for name, spec in SHOP_PIPELINE.items()})
OI_LANGCHAIN = "openinference.instrumentation.langchain"
OI_LLAMA = "openinference.instrumentation.llama_index"


def pipeline(**components: dict) -> Pipeline:
    return Pipeline({name: ComponentSpec(**spec) for name, spec in components.items()})


def span(sid: str, parent: str | None, name: str, kind: str | None = None, at=(0, 1),
         attrs: dict | None = None, *, scope: str | None = None, status: str | None = None,
         events: list[SpanEvent] | None = None, trace: str = "t1") -> Span:
    """A span from ``at[0]`` to ``at[1]`` milliseconds."""
    return Span(trace_id=trace, span_id=sid, parent_id=parent, name=name, kind=kind,
                start_ns=int(at[0] * 1e6), end_ns=int(at[1] * 1e6), attributes=attrs or {},
                scope=scope, status=status, events=events or [], source=f"test.jsonl, {sid}")


def mapping(yaml_text: str = "", **kw):
    data, lines = load_yaml_with_lines(yaml_text) if yaml_text else ({}, {})
    return parse_mapping(data or {}, source="m.yaml", lines=lines, **kw)


def oi_llm(sid, parent, at, text=None, *, prompt=10, completion=5, status=None, extra=None,
           scope=OI_LANGCHAIN, name="ChatOpenAI"):
    attrs = {"openinference.span.kind": "LLM", "llm.token_count.prompt": prompt,
             "llm.token_count.completion": completion,
             "llm.input_messages.0.message.role": "user",
             "llm.input_messages.0.message.content": "…prompt…"}
    if text is not None:
        attrs["llm.output_messages.0.message.role"] = "assistant"
        attrs["llm.output_messages.0.message.content"] = text
    attrs.update(extra or {})
    events = []
    if status == "ERROR":
        events = [SpanEvent("exception", attributes={"exception.type": "RateLimitError",
                                                     "exception.message": "429 slow down"})]
    return span(sid, parent, name, "LLM", at, attrs, scope=scope, status=status or "OK",
                events=events)


# --------------------------------------------------------------------------------------------
# LangChain with OpenInference: a router chain, a SQL agent, a retry, noise
# --------------------------------------------------------------------------------------------


def langchain_sql_agent_trace() -> list[Span]:
    sc = OI_LANGCHAIN
    tool_call = {
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "sql_db_query",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments":
            '{"query": "SELECT name, price FROM products WHERE price < 30"}',
    }
    return [
        span("root", None, "RunnableSequence", "CHAIN", (0, 900), {
            "input.value": {"question": "Which scarves cost under 30?"},
            "output.value": "The Blue scarf costs 19.99.",
            "metadata": {"case_id": "q7"}}, scope=sc, status="OK"),
        span("prompt", "root", "ChatPromptTemplate", "CHAIN", (1, 2), {}, scope=sc),  # noise
        span("route", "root", "route", "CHAIN", (2, 100), {
            "input.value": {"question": "Which scarves cost under 30?"},
            "output.value": {"destination": "products", "confidence": 0.9},
            "metadata": {"case_id": "q7"}}, scope=sc),
        oi_llm("route-llm", "route", (3, 95), '{"destination": "products"}', prompt=40,
               completion=6),
        span("agent", "root", "SQL Agent Executor", "AGENT", (100, 600), {
            "input.value": {"input": "Which scarves cost under 30?"},
            "output.value": {"output": "Blue scarf, 19.99"}}, scope=sc),
        oi_llm("agent-llm1", "agent", (101, 200), None, prompt=100, completion=20,
               extra=tool_call),
        span("tool", "agent", "sql_db_query", "TOOL", (201, 260), {
            "input.value": "{'query': 'SELECT name, price FROM products WHERE price < 30'}",
            "output.value": "[('Blue scarf', 19.99)]", "tool.name": "sql_db_query"}, scope=sc),
        oi_llm("agent-llm2", "agent", (261, 590), "Blue scarf, 19.99", prompt=150,
               completion=10),
        span("embed", "root", "OpenAIEmbeddings", "EMBEDDING", (600, 610), {}, scope=sc),
        # the generator: a first attempt fails, the retry succeeds
        oi_llm("gen1", "root", (610, 700), None, prompt=300, completion=0, status="ERROR"),
        oi_llm("gen2", "root", (700, 890), "The Blue scarf costs 19.99.", prompt=300,
               completion=12),
    ]


def test_langchain_openinference_router_sql_agent_and_retry():
    spec = mapping("""
preset: langchain-openinference
components:
  router:
    routes: {map: {products: sql, blog: blog}}
""")
    mapped = map_trace(langchain_sql_agent_trace(), spec, SHOP)
    trace = mapped.trace
    assert mapped.question == "Which scarves cost under 30?"
    assert mapped.join_key == "q7" and trace.case_id == "q7"
    assert trace.router.routes == ["sql"]
    assert trace.router.confidence == 0.9
    assert trace.router.usage.prompt_tokens == 40  # its LLM child, counted once
    assert trace.router.latency_ms == pytest.approx(98.0)
    # the query sits in the agent LLM's tool call; the rows in the TOOL span's output
    assert trace.text2sql.sql == "SELECT name, price FROM products WHERE price < 30"
    assert trace.text2sql.rows == [["Blue scarf", 19.99]]
    assert trace.text2sql.usage.prompt_tokens == 250 and trace.text2sql.usage.completion_tokens == 30
    assert trace.retriever is None  # not routed there, no retriever span
    assert mapped.components["retriever"].status == "not_run"
    # the retry: the last LLM span succeeded and is the generator
    assert trace.generator.answer == "The Blue scarf costs 19.99."
    assert trace.generator.error is None
    assert trace.generator.usage.prompt_tokens == 300
    assert trace.generator.contexts == ["Blue scarf; 19.99"]
    gen = mapped.components["generator"]
    assert gen.chosen[0].span_id == "gen2"
    assert "the last of 5 matching spans to end (pick: last)" in gen.why
    # the preset declares `pick: last` and the span it took has the answer: not ambiguous
    # (issue 31: a warning only where the choice could be wrong)
    assert not gen.ambiguous and not any(p.kind == "ambiguous" for p in gen.problems)
    text = explain(mapped)
    assert "preset langchain-openinference (named in the mapping)" in text
    assert "router (router) — mapped" in text and "`route` CHAIN" in text
    assert "tool_call.function.arguments" in text  # where the SQL came from


def test_sql_from_tool_input_when_the_llm_output_is_hidden():
    spans = [s for s in langchain_sql_agent_trace() if s.span_id != "agent-llm1"]
    mapped = map_trace(spans, mapping("preset: langchain-openinference"), SHOP)
    assert mapped.trace.text2sql.sql == "SELECT name, price FROM products WHERE price < 30"
    assert mapped.components["text2sql"].sources["sql"].span.span_id == "tool"


def test_a_branch_condition_named_for_sql_is_not_the_text2sql_step():
    """Found with a real LangChain app (tests/test_instrumented.py): a RunnableBranch condition
    `is_sql` is a CHAIN span whose name holds `sql`; on a blog question it became a text2sql
    step with an error blaming content capture."""
    spans = [s for s in langchain_sql_agent_trace()
             if s.span_id not in {"agent", "agent-llm1", "tool", "agent-llm2"}]
    spans.append(span("cond", "root", "is_sql", "CHAIN", (100, 101),
                      {"input.value": "Which scarves cost under 30?", "output.value": "false"},
                      scope=OI_LANGCHAIN))
    mapped = map_trace(spans, mapping("preset: langchain-openinference"), SHOP)
    assert mapped.trace.text2sql is None
    assert mapped.components["text2sql"].candidates == 0


def test_the_last_attempt_failing_is_the_generators_error():
    spans = [s for s in langchain_sql_agent_trace() if s.span_id != "gen2"]
    mapped = map_trace(spans, mapping("preset: langchain-openinference"), SHOP)
    step = mapped.trace.generator
    assert step.answer is None
    assert "RateLimitError: 429 slow down" in step.error


def test_redacted_answer_is_an_error_never_an_empty_answer():
    spans = langchain_sql_agent_trace()
    gen2 = next(s for s in spans if s.span_id == "gen2")
    del gen2.attributes["llm.output_messages.0.message.content"]
    del gen2.attributes["llm.output_messages.0.message.role"]
    gen2.attributes["output.value"] = "__REDACTED__"
    mapped = map_trace(spans, mapping("preset: langchain-openinference"), SHOP)
    step = mapped.trace.generator
    assert step.answer is None
    assert step.error.startswith("the answer is redacted in the trace ('__REDACTED__'")
    assert any(p.kind == "redacted" for p in mapped.components["generator"].problems)


def test_content_capture_off_is_an_error_that_says_so():
    spans = langchain_sql_agent_trace()
    gen2 = next(s for s in spans if s.span_id == "gen2")
    for key in [k for k in gen2.attributes if k.startswith("llm.output_messages")]:
        del gen2.attributes[key]
    # OPENINFERENCE_HIDE_OUTPUTS hides every span's output: the chain around the LLM call
    # records none either (with it, the answer would be read from there; issue 31)
    del spans[0].attributes["output.value"]
    mapped = map_trace(spans, mapping("preset: langchain-openinference"), SHOP)
    step = mapped.trace.generator
    assert step.answer is None
    assert "the answer is not recorded in the trace" in step.error
    assert "and no span enclosing it has attributes.output.value" in step.error
    assert "content capture was probably off" in step.error
    assert "OPENINFERENCE_HIDE_OUTPUTS" in step.error
    assert step.usage.prompt_tokens == 300  # timings and tokens are still there
    assert step.latency_ms == pytest.approx(190.0)


def test_required_when_routed():
    spans = [s for s in langchain_sql_agent_trace()
             if s.span_id not in ("agent", "agent-llm1", "tool", "agent-llm2")]
    spec = mapping("""
preset: langchain-openinference
components:
  router: {routes: {map: {products: sql}}}
""")
    mapped = map_trace(spans, spec, SHOP)
    assert mapped.trace.text2sql.error.startswith("no span in the trace matches the selector")
    assert "the router chose a route that runs it" in mapped.trace.text2sql.error
    assert mapped.components["text2sql"].status == "error"
    # not routed: simply did not run
    assert mapped.trace.retriever is None


def test_application_error_on_the_root_span():
    spans = langchain_sql_agent_trace()
    spans[0].status = "ERROR"
    spans[0].status_message = "ValueError: bad input"
    mapped = map_trace(spans, mapping("preset: langchain-openinference"), SHOP)
    assert mapped.trace.error == "ValueError: bad input"


# --------------------------------------------------------------------------------------------
# Retrievers: two candidates, pick rules, a reranker
# --------------------------------------------------------------------------------------------


def oi_docs(prefix: str, docs: list[tuple[str, float, str]], *, ids_in_metadata=False) -> dict:
    attrs = {}
    for i, (doc_id, score, text) in enumerate(docs):
        if ids_in_metadata:
            attrs[f"{prefix}.{i}.document.metadata"] = {"id": doc_id, "source": "blog"}
        else:
            attrs[f"{prefix}.{i}.document.id"] = doc_id
        attrs[f"{prefix}.{i}.document.score"] = score
        attrs[f"{prefix}.{i}.document.content"] = text
    return attrs


def two_retrievers_trace() -> list[Span]:
    sc = OI_LANGCHAIN
    return [
        span("root", None, "RunnableSequence", "CHAIN", (0, 500),
             {"input.value": "How do I wash raw denim?"}, scope=sc),
        span("r1", "root", "VectorStoreRetriever", "RETRIEVER", (10, 60), oi_docs(
            "retrieval.documents", [("b1", 0.9, "Wash inside out."), ("b2", 0.7, "Cold.")],
            ids_in_metadata=True), scope=sc),
        span("r2", "root", "VectorStoreRetriever", "RETRIEVER", (60, 90), oi_docs(
            "retrieval.documents", [("b3", 0.95, "Soak it."), ("b1", 0.5, "Wash inside out.")],
            ids_in_metadata=True), scope=sc),
        oi_llm("gen", "root", (100, 400), "Soak it, then wash inside out."),
    ]


def test_two_retriever_candidates_last_by_default_and_why():
    mapped = map_trace(two_retrievers_trace(), mapping("preset: langchain-openinference"),
                       SHOP)
    step = mapped.trace.retriever
    assert step.ids == ["b3", "b1"] and step.scores == [0.95, 0.5]
    assert step.texts == ["Soak it.", "Wash inside out."]
    ex = mapped.components["retriever"]
    assert ex.candidates == 2 and ex.chosen[0].span_id == "r2"
    assert "the last of 2 matching spans to end (pick: last)" in ex.why
    # no preset declares the retriever's pick and the two rankings differ: could be wrong
    assert ex.ambiguous and "2 candidate spans record 2 different ids values" in explain(mapped)
    assert ex.others[0].span_id == "r1"
    assert mapped.trace.generator.contexts == ["Soak it.", "Wash inside out."]
    text = explain(mapped)
    assert "not chosen: `VectorStoreRetriever` RETRIEVER r1" in text


@pytest.mark.parametrize(("pick", "ids"), [
    ("first", ["b1", "b2"]),
    ("all", ["b1", "b2", "b3", "b1"]),
    ("{max: {field: attributes.retrieval.documents, path: '$[0].document.score'}}",
     ["b3", "b1"]),
    ("{min: {field: attributes.retrieval.documents, path: '$[0].document.score'}}",
     ["b1", "b2"]),
])
def test_pick_rules(pick, ids):
    spec = mapping(f"""
preset: langchain-openinference
components:
  retriever: {{pick: {pick}}}
""")
    mapped = map_trace(two_retrievers_trace(), spec, SHOP)
    assert mapped.trace.retriever.ids == ids
    if pick == "all":
        assert mapped.trace.retriever.latency_ms == pytest.approx(80.0)  # union of intervals


def llamaindex_router_rerank_trace() -> list[Span]:
    sc = OI_LLAMA
    return [
        span("q", None, "RouterQueryEngine.query", "CHAIN", (0, 1000),
             {"input.value": "How do I wash raw denim?", "output.value": "Soak it."}, scope=sc),
        span("q_", "q", "RouterQueryEngine._query", "CHAIN", (1, 999), {}, scope=sc),
        span("sel", "q_", "LLMSingleSelector.select", "CHAIN", (2, 100), {
            "output.value": {"selections": [{"index": 1, "reason": "about care"}]}}, scope=sc),
        span("sel_", "sel", "LLMSingleSelector._select", "CHAIN", (3, 99), {
            "output.value": {"selections": [{"index": 1, "reason": "about care"}]}}, scope=sc),
        oi_llm("sel-llm", "sel_", (4, 98), '[{"choice": 2}]', prompt=80, completion=4,
               scope=sc, name="OpenAI.chat"),
        span("engine", "q_", "RetrieverQueryEngine.query", "CHAIN", (100, 990), {}, scope=sc),
        span("ret", "engine", "VectorIndexRetriever.retrieve", "RETRIEVER", (101, 150), oi_docs(
            "retrieval.documents", [("n1", 0.8, "Cold wash."), ("n2", 0.7, "Dry flat."),
                                    ("n3", 0.6, "Soak it.")]), scope=sc),
        span("ret_", "ret", "VectorIndexRetriever._retrieve", "RETRIEVER", (102, 149), {},
             scope=sc),
        span("rr", "engine", "SentenceTransformerRerank.postprocess_nodes", "RERANKER",
             (150, 200), {"reranker.top_k": 2, **oi_docs(
                 "reranker.input_documents", [("n1", 0.8, "Cold wash."), ("n2", 0.7, "Dry flat."),
                                              ("n3", 0.6, "Soak it.")]),
              **oi_docs("reranker.output_documents", [("n3", 4.2, "Soak it."),
                                                      ("n1", 1.1, "Cold wash.")])}, scope=sc),
        span("synth", "engine", "CompactAndRefine.synthesize", "CHAIN", (200, 980), {},
             scope=sc),
        oi_llm("synth-llm", "synth", (210, 970), "Soak it, then a cold wash.", prompt=500,
               completion=20, scope=sc, name="OpenAI.chat"),
    ]


LLAMA_MAP = """
preset: llamaindex-openinference
components:
  router: {routes: {map: {"0": sql, "1": blog}}}
"""


def test_llamaindex_router_query_engine_and_reranker_as_final_ranking():
    mapped = map_trace(llamaindex_router_rerank_trace(), mapping(LLAMA_MAP), SHOP)
    trace = mapped.trace
    assert mapped.question == "How do I wash raw denim?"
    assert trace.router.routes == ["blog"]
    assert mapped.components["router"].chosen[0].span_id == "sel"  # outermost of the two
    assert mapped.components["router"].nested_dropped == 1
    # no reranker component: the reranker's output is the retriever's final ranking
    assert trace.retriever.ids == ["n3", "n1"]
    assert trace.retriever.scores == [4.2, 1.1]
    assert trace.retriever.latency_ms == pytest.approx(99.0)  # retrieval + reranking
    note = " ".join(p.message for p in mapped.components["retriever"].problems)
    assert "reranker's output" in note and "rerank: false" in note
    assert mapped.components["retriever"].values["first_stage"]["ids"] == ["n1", "n2", "n3"]
    assert trace.text2sql is None
    assert trace.generator.answer == "Soak it, then a cold wash."
    assert "reranker's output (span `SentenceTransformerRerank" in explain(mapped)


def test_rerank_false_keeps_the_first_stage_ranking():
    spec = mapping(LLAMA_MAP + "  retriever: {rerank: false}\n")
    mapped = map_trace(llamaindex_router_rerank_trace(), spec, SHOP)
    assert mapped.trace.retriever.ids == ["n1", "n2", "n3"]


def test_a_reranker_component_gets_the_reranker_span():
    pipe = pipeline(router={"routes": {"sql": ["text2sql"], "blog": ["retriever"]}},
                    text2sql={"after": ["router"]}, retriever={"after": ["router"]},
                    rerank={"kind": "reranker", "after": ["retriever"]},
                    generator={"after": ["text2sql", "rerank"]})
    mapped = map_trace(llamaindex_router_rerank_trace(), mapping(LLAMA_MAP), pipe)
    assert mapped.trace.retriever.ids == ["n1", "n2", "n3"]
    assert mapped.trace.steps["rerank"]["ids"] == ["n3", "n1"]
    assert mapped.trace.steps["rerank"]["scores"] == [4.2, 1.1]
    assert mapped.trace.generator.contexts == ["Soak it.", "Cold wash."]
    notes = " ".join(p.message for p in mapped.components["retriever"].problems)
    assert "reranker component (rerank)" in notes


def test_plugin_step_model_keeps_its_own_fields():
    from evalharness.models import Step

    class RerankerStep(Step):
        ids: list[str] = []

    pipe = pipeline(retriever={}, rerank={"kind": "reranker", "after": ["retriever"]},
                    generator={"after": ["rerank"]})
    mapped = map_trace(llamaindex_router_rerank_trace(), mapping(LLAMA_MAP.split("\n")[1]),
                       pipe, step_models={"reranker": RerankerStep})
    step = mapped.trace.steps["rerank"]
    assert step["ids"] == ["n3", "n1"] and "scores" not in step
    RerankerStep.model_validate(step)


def test_llamaindex_nl_to_sql():
    sc = OI_LLAMA
    sql = "SELECT name, price FROM products WHERE price < 30"
    spans = [
        span("q", None, "NLSQLTableQueryEngine.query", "CHAIN", (0, 900),
             {"input.value": "Which scarves cost under 30?",
              "output.value": "The Blue scarf costs 19.99."}, scope=sc),
        span("q_", "q", "NLSQLTableQueryEngine._query", "CHAIN", (1, 899), {
            "output.value": {"response": "The Blue scarf costs 19.99.", "source_nodes": [],
                             "metadata": {"sql_query": sql, "result": [["Blue scarf", 19.99]],
                                          "col_keys": ["name", "price"]}}}, scope=sc),
        span("nlret", "q_", "NLSQLRetriever.retrieve", "RETRIEVER", (2, 400), {
            "retrieval.documents.0.document.id": "node-1",
            "retrieval.documents.0.document.content": "[('Blue scarf', 19.99)]",
            "retrieval.documents.0.document.metadata": {
                "sql_query": sql, "result": [["Blue scarf", 19.99]], "col_keys": ["name", "price"]},
        }, scope=sc),
        oi_llm("sql-llm", "nlret", (3, 300), f"SQLQuery: {sql}\nSQLResult:", prompt=200,
               completion=30, scope=sc, name="OpenAI.chat"),
        oi_llm("synth", "q_", (400, 890), "The Blue scarf costs 19.99.", prompt=120,
               completion=10, scope=sc, name="OpenAI.chat"),
    ]
    mapped = map_trace(spans, None, SHOP)  # the preset is guessed from the scope
    assert mapped.preset == "llamaindex-openinference"
    assert "scope `openinference.instrumentation.llama_index`" in mapped.preset_reason
    trace = mapped.trace
    assert trace.text2sql.sql == sql
    assert trace.text2sql.rows == [["Blue scarf", 19.99]]
    assert trace.text2sql.columns == ["name", "price"]
    # its own work: the NLSQLRetriever span (the SQL LLM call and the query), not the
    # answer-synthesis LLM call that `_query` also holds (the generator's) — issue 31
    assert trace.text2sql.usage.prompt_tokens == 200 and trace.text2sql.usage.completion_tokens == 30
    assert trace.text2sql.latency_ms == pytest.approx(398.0)
    assert "NLSQLRetriever.retrieve" in mapped.components["text2sql"].values["own_work"]
    assert trace.retriever is None  # the NLSQLRetriever is not the document retriever
    assert trace.router is None
    assert trace.generator.contexts == ["name: Blue scarf; price: 19.99"]
    # without the response metadata, the SQL is read from the text-to-SQL LLM call
    del spans[1].attributes["output.value"]
    del spans[2].attributes["retrieval.documents.0.document.metadata"]
    spans[2].attributes["retrieval.documents.0.document.metadata"] = {"sql_query": sql}
    mapped = map_trace(spans, None, SHOP)
    assert mapped.trace.text2sql.sql == sql


# --------------------------------------------------------------------------------------------
# LangGraph: the router is a node; OpenInference and LangSmith shapes
# --------------------------------------------------------------------------------------------


def langgraph_oi_trace(router_node: str = "route") -> list[Span]:
    sc = OI_LANGCHAIN

    def meta(node):
        return {"langgraph_node": node, "langgraph_step": 1, "case_id": "q3"}

    return [
        span("g", None, "LangGraph", "CHAIN", (0, 1000), {
            "input.value": {"messages": [{"type": "human", "content": "Raw denim care?"}]},
            "metadata": {"case_id": "q3"}}, scope=sc),
        span("n1", "g", router_node, "CHAIN", (1, 100), {
            "output.value": {"route": "blog"}, "metadata": meta(router_node)}, scope=sc),
        oi_llm("n1-llm", "n1", (2, 90), '{"route": "blog"}', prompt=30, completion=3,
               extra={"metadata": meta(router_node)}),
        span("n1-edge", "n1", "route_question", "CHAIN", (91, 99), {
            "output.value": "retrieve", "metadata": meta(router_node)}, scope=sc),
        span("n2", "g", "retrieve", "CHAIN", (100, 200), {"metadata": meta("retrieve")},
             scope=sc),
        span("n2-ret", "n2", "VectorStoreRetriever", "RETRIEVER", (101, 190), {
            **oi_docs("retrieval.documents", [("b7", 0.8, "Soak it.")], ids_in_metadata=True),
            "metadata": meta("retrieve")}, scope=sc),
        span("n3", "g", "generate", "CHAIN", (200, 990), {"metadata": meta("generate")},
             scope=sc),
        oi_llm("n3-llm", "n3", (201, 980), "Soak it in cold water.", prompt=200,
               completion=9, extra={"metadata": meta("generate")}),
    ]


def test_langgraph_openinference_router_node():
    spans = langgraph_oi_trace()
    assert guess_preset(spans).preset == "langgraph"
    mapped = map_trace(spans, None, SHOP)
    assert mapped.question == "Raw denim care?"
    assert mapped.join_key == "q3"
    trace = mapped.trace
    assert trace.router.routes == ["blog"]
    ex = mapped.components["router"]
    assert ex.chosen[0].span_id == "n1"
    assert ex.nested_dropped == 2  # its LLM call and edge carry the node's metadata too
    assert trace.router.usage.prompt_tokens == 30
    assert trace.retriever.ids == ["b7"]
    assert trace.generator.answer == "Soak it in cold water."


def test_langgraph_router_node_named_in_the_mapping():
    spans = langgraph_oi_trace(router_node="classify")
    spec = mapping("""
preset: langgraph
components:
  router: {select: {metadata: {langgraph_node: classify}}}
""")
    mapped = map_trace(spans, spec, SHOP)
    assert mapped.trace.router.routes == ["blog"]
    # the preset's default node name finds nothing here
    assert map_trace(spans, mapping("preset: langgraph"), SHOP).trace.router is None


def langsmith_trace() -> list[Span]:
    sc = "langsmith"

    def meta(node):
        return {"langgraph_node": node, "case_id": "q9"}

    def llm_out(text, tool_calls=None):
        return {"generations": [[{"text": text, "type": "ChatGeneration", "message": {
            "lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "AIMessage"],
            "kwargs": {"content": text, "tool_calls": tool_calls or []}}}]],
            "llm_output": {"token_usage": {"prompt_tokens": 1}}}

    return [
        span("g", None, "LangGraph", "chain", (0, 1000), {
            "inputs": {"question": "Blue scarves under 30?"}, "outputs": {"answer": "…"},
            "metadata": {"case_id": "q9"},
            "usage": {"input": 330, "output": 26, "total": 356}}, scope=sc),
        span("r", "g", "router", "chain", (1, 100), {
            "inputs": {"question": "Blue scarves under 30?"}, "outputs": {"route": "sql"},
            "metadata": meta("router"),
            "usage": {"input": 30, "output": 2, "total": 32}}, scope=sc),
        span("r-llm", "r", "ChatOpenAI", "llm", (2, 99), {
            "outputs": llm_out('{"route": "sql"}'), "metadata": meta("router"),
            "usage": {"input": 30, "output": 2, "total": 32}}, scope=sc),
        span("s", "g", "write_sql", "chain", (100, 500), {
            "outputs": {"sql": "SELECT name FROM products WHERE colour = 'blue'",
                        "rows": [{"name": "Blue scarf"}]},
            "metadata": meta("write_sql"),
            "usage": {"input": 100, "output": 15, "total": 115}}, scope=sc),
        span("s-llm", "s", "ChatOpenAI", "llm", (101, 400), {
            "outputs": llm_out("SELECT name FROM products WHERE colour = 'blue'"),
            "metadata": meta("write_sql"),
            "usage": {"input": 100, "output": 15, "total": 115}}, scope=sc),
        span("a", "g", "answer", "chain", (500, 990), {
            "metadata": meta("answer"),
            "usage": {"input": 200, "output": 9, "total": 209}}, scope=sc),
        span("a-llm", "a", "ChatOpenAI", "llm", (501, 980), {
            "outputs": llm_out("The Blue scarf."), "metadata": meta("answer"),
            "usage": {"input": 200, "output": 9, "total": 209}}, scope=sc),
    ]


def test_langgraph_langsmith_shape():
    spans = langsmith_trace()
    guess = guess_preset(spans)
    assert guess.preset == "langgraph" and "langgraph_node" in guess.reason
    mapped = map_trace(spans, None, SHOP)
    trace = mapped.trace
    assert mapped.question == "Blue scarves under 30?" and mapped.join_key == "q9"
    assert trace.router.routes == ["sql"]
    assert trace.text2sql.sql == "SELECT name FROM products WHERE colour = 'blue'"
    assert trace.text2sql.rows == [["Blue scarf"]] and trace.text2sql.columns == ["name"]
    # a LangSmith chain run reports its children's total: counted once, not twice
    assert trace.text2sql.usage.prompt_tokens == 100
    assert trace.router.usage.prompt_tokens == 30
    assert trace.generator.answer == "The Blue scarf."


def test_langchain_langsmith_sql_agent_tool_call_and_tool_rows():
    sc = "langsmith"
    call = {"name": "sql_db_query", "args": {"query": "SELECT 1"}, "id": "c1"}
    spans = [
        span("root", None, "AgentExecutor", "chain", (0, 100),
             {"inputs": {"input": "one?"}}, scope=sc),
        span("sql", "root", "SQL Agent Executor", "chain", (1, 90), {}, scope=sc),
        span("l1", "sql", "ChatOpenAI", "llm", (2, 10), {"outputs": {"generations": [[{
            "text": "", "message": {"kwargs": {"content": "", "tool_calls": [call]}}}]]}},
            scope=sc),
        span("t", "sql", "sql_db_query", "tool", (11, 20), {
            "inputs": {"input": "{'query': 'SELECT 1'}"}, "outputs": {"output": "[(1,)]"}},
            scope=sc),
        span("l2", "sql", "ChatOpenAI", "llm", (21, 80), {"outputs": {"generations": [[{
            "text": "One.", "message": {"kwargs": {"content": "One."}}}]]}}, scope=sc),
    ]
    mapped = map_trace(spans, mapping("preset: langchain-langsmith"), SHOP)
    assert mapped.question == "one?"
    assert mapped.trace.text2sql.sql == "SELECT 1"
    assert mapped.trace.text2sql.rows == [[1]]
    assert mapped.trace.generator.answer == "One."


# --------------------------------------------------------------------------------------------
# OTel GenAI (current and <= 1.36 names), OpenLLMetry, Langfuse
# --------------------------------------------------------------------------------------------


def test_otel_genai_current_names():
    sc = "opentelemetry.instrumentation.openai_v2"
    spans = [
        span("root", None, "invoke_agent shop", "invoke_agent", (0, 500),
             {"gen_ai.operation.name": "invoke_agent"}, scope=sc),
        span("ret", "root", "retrieval blog", "retrieval", (10, 50), {
            "gen_ai.operation.name": "retrieval", "gen_ai.data_source.id": "blog",
            "gen_ai.retrieval.query.text": "raw denim care",
            "gen_ai.retrieval.documents": [{"id": "b1", "score": 0.9},
                                           {"id": "b2", "score": 0.4}]}, scope=sc),
        span("chat", "root", "chat gpt-4o", "chat", (60, 480), {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
            "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 7,
            "gen_ai.input.messages": [{"role": "user", "parts": [
                {"type": "text", "content": "How do I care for raw denim?"}]}],
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
                {"type": "reasoning", "content": "think"},
                {"type": "text", "content": "Wash it "}, {"type": "text", "content": "cold."}],
                "finish_reason": "stop"}])}, scope=sc),
    ]
    assert guess_preset(spans).preset == "otel-genai"
    mapped = map_trace(spans, None, SHOP)
    trace = mapped.trace
    assert mapped.question == "How do I care for raw denim?"
    assert trace.retriever.ids == ["b1", "b2"] and trace.retriever.scores == [0.9, 0.4]
    assert trace.retriever.texts is None
    assert trace.generator.answer == "Wash it cold."  # text parts only, joined
    assert trace.generator.usage.prompt_tokens == 120
    assert trace.generator.usage.completion_tokens == 7


def test_otel_genai_old_names_events_and_prompt_tokens():
    sc = "opentelemetry.instrumentation.openai_v2"
    spans = [
        span("chat", None, "chat gpt-4", "chat", (0, 300), {
            "gen_ai.operation.name": "chat", "gen_ai.system": "openai",
            "gen_ai.usage.prompt_tokens": 50, "gen_ai.usage.completion_tokens": 5},
            scope=sc, events=[
                SpanEvent("gen_ai.user.message", attributes={"content": "Price of the scarf?"}),
                SpanEvent("gen_ai.choice", attributes={
                    "index": 0, "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "19.99"}})]),
    ]
    mapped = map_trace(spans, mapping("preset: otel-genai"), pipeline(generator={}))
    assert mapped.question == "Price of the scarf?"
    assert mapped.trace.generator.answer == "19.99"
    assert mapped.trace.generator.usage.prompt_tokens == 50
    # <= 1.27: the completion is a JSON text in a gen_ai.content.completion event
    spans[0].events = [SpanEvent("gen_ai.content.completion", attributes={
        "gen_ai.completion": '[{"role": "assistant", "content": "20.00"}]'})]
    mapped = map_trace(spans, mapping("preset: otel-genai"), pipeline(generator={}))
    assert mapped.trace.generator.answer == "20.00"


def test_openllmetry_langgraph_and_nested_provider_spans():
    sc_lc = "opentelemetry.instrumentation.langchain"
    sc_oa = "opentelemetry.instrumentation.openai.v1"
    props = "traceloop.association.properties"
    spans = [
        span("w", None, "LangGraph.workflow", None, (0, 1000), {
            "traceloop.span.kind": "workflow", "traceloop.entity.name": "LangGraph",
            "traceloop.entity.input": {"inputs": {"question": "Raw denim care?"}},
            f"{props}.case_id": "q5"}, scope=sc_lc),
        span("route", "w", "execute_task route", None, (1, 100), {
            "traceloop.span.kind": "task", "traceloop.entity.name": "route",
            "traceloop.entity.output": '{"outputs": {"route": "blog"}, "kwargs": {}}',
            f"{props}.langgraph_node": "route"}, scope=sc_lc),
        span("ret", "w", "vector_db_retrieve VectorStoreRetriever", None, (100, 200), {
            "traceloop.span.kind": "task", "traceloop.entity.name": "VectorStoreRetriever",
            "gen_ai.operation.name": "vector_db_retrieve",
            "traceloop.entity.output": {"documents": [
                {"page_content": "Soak it.", "metadata": {"id": "b7"}},
                {"page_content": "Cold wash.", "metadata": {"id": "b8"}}], "count": 2}},
            scope=sc_lc),
        span("llm", "w", "ChatOpenAI.chat", None, (200, 990), {
            "llm.request.type": "chat", "gen_ai.usage.prompt_tokens": 200,
            "gen_ai.usage.completion_tokens": 9, "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "Raw denim care?",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "Soak it in cold water."}, scope=sc_lc),
        # the provider instrumentation's span under it: same call, same tokens
        span("oa", "llm", "openai.chat", None, (201, 980), {
            "llm.request.type": "chat", "gen_ai.usage.prompt_tokens": 200,
            "gen_ai.usage.completion_tokens": 9,
            "gen_ai.completion.0.content": "Soak it in cold water."}, scope=sc_oa),
    ]
    guess = guess_preset(spans)
    assert guess.preset == "openllmetry"
    mapped = map_trace(spans, None, SHOP)
    trace = mapped.trace
    assert mapped.question == "Raw denim care?" and mapped.join_key == "q5"
    assert trace.router.routes == ["blog"]
    assert trace.retriever.ids == ["b7", "b8"]
    assert trace.retriever.texts == ["Soak it.", "Cold wash."]
    assert trace.generator.answer == "Soak it in cold water."
    assert trace.generator.usage.prompt_tokens == 200  # not 400: outermost reporting span
    assert mapped.components["generator"].nested_dropped == 1


def test_langfuse_observations():
    sc = "langfuse"
    spans = [
        span("t", None, "shop-assistant", "TRACE", (0, 400), {
            "input": {"question": "Scarf price?"}, "metadata": {"case_id": "q1"},
            "session_id": "s1", "tags": ["prod"]}, scope=sc),
        span("r", "t", "VectorStoreRetriever", "RETRIEVER", (1, 50), {
            "output": [{"page_content": "Scarves: 19.99", "metadata": {"id": "c1"}}]}, scope=sc),
        span("g", "t", "ChatOpenAI", "GENERATION", (50, 390), {
            "output": {"role": "assistant", "content": "19.99"},
            "usage": {"input": 42, "output": 3, "total": 45}}, scope=sc),
    ]
    assert guess_preset(spans).preset == "langfuse"
    mapped = map_trace(spans, None, SHOP)
    assert mapped.question == "Scarf price?" and mapped.join_key == "q1"
    assert mapped.trace.retriever.ids == ["c1"]
    assert mapped.trace.generator.answer == "19.99"
    assert mapped.trace.generator.usage.prompt_tokens == 42


# --------------------------------------------------------------------------------------------
# Unmappable traces, join keys, usage
# --------------------------------------------------------------------------------------------


def test_unmappable_trace_says_why_per_component():
    spans = [span("x", None, "something", "CHAIN", (0, 5), {"input.value": "hi"},
                  scope=OI_LANGCHAIN)]
    mapped = map_trace(spans, mapping("preset: langchain-openinference"), SHOP)
    assert mapped.error.startswith("no component of the pipeline could be mapped in trace t1")
    assert "generator:" in mapped.error
    assert "generator: no span in the trace matches the selector" in mapped.error
    assert "router: no span matches the selector" in mapped.error
    assert mapped.trace.error == mapped.error
    assert mapped.trace.generator is None  # no half-mapped steps: the case is an error
    assert explain(mapped).splitlines()[1].startswith("UNMAPPABLE: no component")


def test_nothing_maps_at_all():
    spans = [span("x", None, "something", "CHAIN", (0, 5), {}, scope=OI_LANGCHAIN)]
    spec = mapping("""
preset: langchain-openinference
components:
  generator: {required: false}
""")
    mapped = map_trace(spans, spec, SHOP)
    assert mapped.error and "no span matches the selector" in mapped.error
    assert explain(mapped).splitlines()[1].startswith("UNMAPPABLE: ")


def test_join_key_from_a_tag_with_a_regex():
    spans = two_retrievers_trace()
    spans[0].attributes["tag.tags"] = ["prod", "case:q42"]
    spec = mapping("""
preset: langchain-openinference
join: {field: attributes.tag.tags, regex: '^case:(.*)$', take: first}
""")
    mapped = map_trace(spans, spec, SHOP)
    assert mapped.join_key == "q42" and mapped.trace.case_id == "q42"
    assert mapped.join_source.extractor == "attributes.tag.tags"


def test_join_key_from_session_id():
    spans = two_retrievers_trace()
    spans[0].attributes["session.id"] = "sess-1"
    mapped = map_trace(spans, mapping("preset: langchain-openinference\n"
                                      "join: attributes.session.id\n"), SHOP)
    assert mapped.join_key == "sess-1"


def test_span_usage_keys():
    def s(attrs):
        return span("s", None, "x", None, (0, 1), attrs)
    assert span_usage(s({"llm.token_count.prompt": 3, "llm.token_count.completion": 4})) == (3, 4)
    assert span_usage(s({"gen_ai.usage.output_tokens": 9})) == (0, 9)
    assert span_usage(s({"gen_ai.usage.prompt_tokens": 5,
                         "gen_ai.usage.completion_tokens": 6})) == (5, 6)
    assert span_usage(s({"usage": {"input_tokens": 1, "output_tokens": 2}})) == (1, 2)
    assert span_usage(s({"usage": {"input": 7, "output": 8, "total": 15}})) == (7, 8)
    assert span_usage(s({"other": 1})) is None


def test_values_that_do_not_make_a_step_are_the_steps_error():
    spec = mapping("""
preset: langchain-openinference
components:
  generator: {latency_ms: {field: attributes.server_ms}}
""")
    spans = two_retrievers_trace()
    spans[-1].attributes["server_ms"] = -4
    step = map_trace(spans, spec, SHOP).trace.generator
    assert step.answer is None
    assert step.error.startswith("the values extracted for `generator` do not make a generator "
                                 "step: latency_ms: Input should be greater than or equal to 0")


def test_overrides_of_latency_and_tokens():
    spec = mapping("""
preset: langchain-openinference
components:
  generator:
    latency_ms: {field: attributes.server_ms}
    prompt_tokens: attributes.billed.prompt
""")
    spans = two_retrievers_trace()
    spans[-1].attributes.update({"server_ms": 12.5, "billed.prompt": 99})
    step = map_trace(spans, spec, SHOP).trace.generator
    assert step.latency_ms == 12.5
    assert step.usage.prompt_tokens == 99 and step.usage.completion_tokens == 0


# --------------------------------------------------------------------------------------------
# Mapping files: errors with file, line and field; presets; merging
# --------------------------------------------------------------------------------------------


def _error(tmp_path, text: str) -> str:
    path = tmp_path / "m.yaml"
    path.write_text(text)
    with pytest.raises(MappingError) as info:
        load_mapping(path)
    assert isinstance(info.value, ScenarioError)
    return str(info.value)


def test_unknown_field_names_the_line_and_what_is_allowed(tmp_path):
    msg = _error(tmp_path, """preset: langchain-openinference
components:
  router:
    select: {kind: CHAIN, nmae: '^route'}
""")
    assert "m.yaml, line 4, field `components.router.select.nmae`" in msg
    assert "unknown field `nmae`" in msg and "Did you mean `name`?" in msg
    assert "allowed here: kind, name, scope" in msg


def test_unknown_extractor_key(tmp_path):
    msg = _error(tmp_path, """components:
  generator:
    select: {kind: LLM}
    answer:
      - {field: attributes.output.value, paht: $.x}
""")
    assert "line 5" in msg and "field `components.generator.answer[0].paht`" in msg
    assert "Did you mean `path`?" in msg


def test_bad_regex_path_and_field(tmp_path):
    msg = _error(tmp_path, "components:\n  router:\n    select: {name: '(unclosed'}\n")
    assert "line 3" in msg and "not a valid regular expression" in msg
    msg = _error(tmp_path, "question: {field: attributes.input.value, path: '$..x'}\n")
    assert "line 1" in msg and "field `question.path`" in msg and "expected a name" in msg
    msg = _error(tmp_path, "question: input.value\n")
    assert "a field starts with one of attributes, resource, events" in msg


def test_invalid_yaml_and_unknown_preset(tmp_path):
    msg = _error(tmp_path, "preset: langgraph\ncomponents:\n  router: {select: {kind: [LLM}\n")
    assert "m.yaml, line 3" in msg and "invalid YAML" in msg
    msg = _error(tmp_path, "preset: langchain-openinferance\n")
    assert "line 1, field `preset`" in msg and "Did you mean 'langchain-openinference'?" in msg
    msg = _error(tmp_path, "- just a list\n")
    assert "a mapping is a YAML mapping" in msg


def test_inline_block_errors_name_the_scenario_lines():
    text = """name: s
traces:
  path: t.jsonl
  mapping:
    preset: langgraph
    components:
      router: {pick: sometimes}
"""
    data, lines = load_yaml_with_lines(text)
    with pytest.raises(MappingError) as info:
        parse_mapping(data["traces"]["mapping"], source="scenario.yaml", lines=lines,
                      prefix=("traces", "mapping"))
    msg = str(info.value)
    assert msg.startswith("scenario.yaml, line 7, field `traces.mapping.components.router.pick`")


def test_check_mapping_against_the_pipeline():
    spec = mapping("""
preset: langchain-openinference
components:
  reranker: {select: {kind: RERANKER}}
  ranker: {select: {kind: X}}
  router: {sql: attributes.x}
""")
    problems = check_mapping(resolve_mapping(spec), SHOP)
    text = " | ".join(f"{w}: {m}" for w, m in problems)
    assert "m.yaml, line 5, field `components.ranker`: 'ranker' is not a component" in text
    assert "a router step has no `sql`" in text
    assert "components.reranker" not in text  # the retriever's final ranking: allowed
    spec = mapping("preset: otel-genai\ncomponents:\n  router: {latency_ms: {map: {a: b}}}\n")
    (where, message), = check_mapping(resolve_mapping(spec), SHOP)
    assert "line 3, field `components.router.latency_ms`" in where
    assert "has no `field`" in message
    assert check_mapping(resolve_mapping(mapping("preset: otel-genai")), SHOP) == []
    with_reranker = pipeline(retriever={}, rerank={"kind": "reranker", "after": ["retriever"]},
                             generator={"after": ["rerank"]})
    spec = mapping("preset: llamaindex-openinference\ncomponents:\n  reranker: {rerank: true}\n")
    (where, message), = check_mapping(resolve_mapping(spec), with_reranker)
    assert "field `components.reranker`" in where
    assert "only when the pipeline has no reranker component" in message


def test_merging_modifiers_into_preset_alternatives():
    spec = mapping("""
preset: langchain-openinference
components:
  router:
    routes: {map: {products: sql}}
    pick: first
""")
    m = resolve_mapping(spec)
    block, origin = m.block("router", "router")
    assert all(ex.map == {"products": "sql"} for ex in block.routes)
    assert len(block.routes) == 5 and block.pick == "first"
    assert block.select.name  # kept from the preset
    assert origin == "preset langchain-openinference, overridden by m.yaml, line 4, field " \
                     "`components.router`"


def test_no_preset_and_nothing_to_guess_from():
    with pytest.raises(MappingError, match="no preset is named and none could be guessed"):
        resolve_mapping(mapping("description: x"), spans=[span("a", None, "x")])


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_loads_and_fits_the_shop_pipeline(name):
    preset = load_preset(name)
    assert preset.description and preset.written_against
    assert {"router", "text2sql", "retriever", "generator"} <= set(preset.components)
    assert check_mapping(resolve_mapping(None, preset=name), SHOP) == []


@pytest.mark.parametrize(("scope", "attrs", "expected"), [
    (OI_LANGCHAIN, {}, "langchain-openinference"),
    (OI_LLAMA, {}, "llamaindex-openinference"),
    ("opentelemetry.instrumentation.langchain", {"traceloop.span.kind": "task"}, "openllmetry"),
    ("opentelemetry.instrumentation.openai_v2", {"gen_ai.operation.name": "chat"},
     "otel-genai"),
    ("langsmith", {}, "langchain-langsmith"),
    ("langfuse-python", {}, "langfuse"),
    (None, {"gen_ai.operation.name": "chat"}, "otel-genai"),
    (None, {"openinference.span.kind": "CHAIN"}, "langchain-openinference"),
    (None, {"openinference.span.kind": "CHAIN", "n": "RouterQueryEngine.query"},
     "llamaindex-openinference"),
    (None, {"openinference.span.kind": "CHAIN", "metadata": {"langgraph_node": "a"}},
     "langgraph"),
    # a LlamaIndex app's first trace is often its index build: embeddings, no query engine
    (None, {"openinference.span.kind": "EMBEDDING",
            "n": "OpenAIEmbedding.get_text_embedding_batch"}, "llamaindex-openinference"),
    (None, {}, None),
])
def test_guess_preset(scope, attrs, expected):
    name = attrs.pop("n", "x")
    guess = guess_preset([span("a", None, name, None, (0, 1), attrs, scope=scope)])
    assert (guess.preset if guess else None) == expected


def test_map_trace_refuses_spans_of_two_traces():
    with pytest.raises(ValueError, match="one trace at a time"):
        map_trace([span("a", None, "x"), span("b", None, "y", trace="t2")], None, SHOP)


# --------------------------------------------------------------------------------------------
# A mapping without a preset: selectors and extractors written out
# --------------------------------------------------------------------------------------------


def custom_trace() -> list[Span]:
    return [
        span("root", None, "handle_request", None, (0, 100), {
            "app.question": "Which route?", "app.case": 17}),
        span("cls", "root", "classify", None, (1, 10), {
            "app.step": "router", "app.result": '{"labels": ["sql", "blog"], "p": 0.75}'}),
        span("db", "root", "db.query", None, (10, 30), {
            "db.system": "sqlite", "db.query.text": "SELECT 1", "app.rows": "[[1]]"}),
        span("search", "root", "search", None, (30, 50), {
            "app.hits.0.id": "b1", "app.hits.0.text": "one", "app.hits.1.text": "two",
            "app.hits.1.id": "b2"}),
        span("empty", "root", "search", None, (50, 55), {"app.note": "no hits"}),
        span("llm", "root", "llm.call", None, (55, 99), {
            "app.answer": "Both.", "tokens.in": 5, "gen_ai.usage.input_tokens": 11}),
        span("llm-inner", "llm", "http", None, (56, 98), {}),
    ]


CUSTOM = """
preset: none
question: attributes.app.question
join: attributes.app.case
components:
  router:
    select: {attributes: {app.step: router}}
    routes: {field: attributes.app.result, path: $.labels}
    confidence: {field: attributes.app.result, path: $.p}
  text2sql:
    select: {attributes: {db.system: {in: [sqlite, postgresql]}, db.query.text: {exists: true}}}
    sql: attributes.db.query.text
    rows: attributes.app.rows
  retriever:
    select: {name: '^search$', attributes: {app.note: {exists: false}}}
    ids: {field: attributes.app.hits, path: '$[*].id'}
    texts: {field: attributes.app.hits, path: '$[*].text'}
  generator:
    select: {name: '^llm', ancestor_of: {name: '^http$'}, descendant_of: {root: true}}
    answer: attributes.app.answer
"""


def test_custom_mapping_without_a_preset():
    mapped = map_trace(custom_trace(), mapping(CUSTOM), SHOP)
    trace = mapped.trace
    assert mapped.preset is None and mapped.preset_reason == "`preset: none` in the mapping"
    assert mapped.question == "Which route?" and mapped.join_key == "17"
    assert trace.router.routes == ["sql", "blog"] and trace.router.confidence == 0.75
    assert trace.text2sql.sql == "SELECT 1" and trace.text2sql.rows == [[1]]
    assert trace.retriever.ids == ["b1", "b2"] and trace.retriever.texts == ["one", "two"]
    assert mapped.components["retriever"].candidates == 1  # `exists: false` drops `empty`
    assert trace.generator.answer == "Both."
    assert trace.generator.usage.prompt_tokens == 11
    assert trace.generator.contexts == ["1", "one", "two"]


def test_selector_relations_that_do_not_hold():
    text = CUSTOM.replace("ancestor_of: {name: '^http$'}", "ancestor_of: {name: '^nope$'}")
    mapped = map_trace(custom_trace(), mapping(text), SHOP)
    assert mapped.trace.generator is None
    assert mapped.components["generator"].status == "not_run"


def test_missing_document_ids_are_left_out_with_their_texts():
    spans = custom_trace()
    del spans[3].attributes["app.hits.0.id"]
    mapped = map_trace(spans, mapping(CUSTOM), SHOP)
    assert mapped.trace.retriever.ids == ["b2"] and mapped.trace.retriever.texts == ["two"]
    assert any("1 of 2 document ids are missing" in p.message
               for p in mapped.components["retriever"].problems)


def test_an_empty_retrieval_is_an_empty_ranking_not_an_error():
    spans = [
        span("root", None, "RunnableSequence", "CHAIN", (0, 100), {"input.value": "q?"},
             scope=OI_LANGCHAIN),
        span("ret", "root", "VectorStoreRetriever", "RETRIEVER", (1, 10), {},
             scope=OI_LANGCHAIN),
        oi_llm("gen", "root", (10, 90), "I do not know."),
    ]
    mapped = map_trace(spans, None, SHOP)
    step = mapped.trace.retriever
    assert step.ids == [] and step.texts == [] and step.error is None
    assert mapped.components["retriever"].sources["ids"].extractor == "the constant []"


def test_plugin_kind_fields():
    pipe = pipeline(guard={"kind": "guardrail"}, generator={"after": ["guard"]})
    spec = mapping("""
preset: langchain-openinference
components:
  guard:
    select: {name: '^search$'}
    fields: {verdict: {field: attributes.app.note}}
""")
    spans = custom_trace()
    spans[4].kind = "LLM"
    mapped = map_trace(spans, spec, pipe)
    assert mapped.trace.steps["guard"]["verdict"] == "no hits"
    assert mapped.trace.steps["guard"]["latency_ms"] == pytest.approx(5.0)


def test_mapping_given_as_a_preset_name_a_file_or_inline(tmp_path):
    assert mapping_spec(None) is None
    assert mapping_spec("langgraph").preset == "langgraph"
    assert mapping_spec("none").preset == "none"
    (tmp_path / "m.yaml").write_text("preset: otel-genai\n")
    assert mapping_spec("m.yaml", base=tmp_path).preset == "otel-genai"
    assert mapping_spec({"preset": "langfuse"}).preset == "langfuse"
    text = "traces:\n  path: t.jsonl\n  mapping: langgrph\n"
    data, lines = load_yaml_with_lines(text)
    with pytest.raises(MappingError) as info:
        mapping_spec(data["traces"]["mapping"], base=tmp_path, source="s.yaml", lines=lines,
                     prefix=("traces", "mapping"))
    assert str(info.value).startswith("s.yaml, line 3, field `traces.mapping`: 'langgrph' is "
                                      "neither a preset")
    assert "Did you mean 'langgraph'?" in str(info.value)
    with pytest.raises(MappingError, match="cannot be read"):
        mapping_spec("missing.yaml", base=tmp_path)


def test_langfuse_langgraph_sql_tool():
    sc = "langfuse"
    spans = [
        span("t", None, "graph", "TRACE", (0, 900), {"input": {"question": "Orders of 42?"}},
             scope=sc),
        span("n", "t", "sql_agent", "CHAIN", (1, 800), {"metadata": {"langgraph_node":
                                                                       "sql_agent"}}, scope=sc),
        span("g1", "n", "ChatOpenAI", "GENERATION", (2, 100), {
            "metadata": {"langgraph_node": "sql_agent"}, "usage": {"input": 90, "output": 20}},
            scope=sc),
        span("tool", "n", "sql_db_query", "TOOL", (100, 200), {
            "input": {"query": "SELECT COUNT(*) FROM orders WHERE customer_id = 42"},
            "output": "[(7,)]", "metadata": {"langgraph_node": "sql_agent"}}, scope=sc),
        span("g2", "t", "ChatOpenAI", "GENERATION", (800, 890), {
            "output": {"role": "assistant", "content": "Seven."},
            "usage": {"input": 40, "output": 2}}, scope=sc),
    ]
    mapped = map_trace(spans, None, SHOP)
    assert mapped.trace.text2sql.sql == "SELECT COUNT(*) FROM orders WHERE customer_id = 42"
    assert mapped.trace.text2sql.rows == [[7]]
    assert mapped.trace.text2sql.usage.prompt_tokens == 90
    assert mapped.trace.generator.answer == "Seven."


# --------------------------------------------------------------------------------------------
# Fields and paths
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("field", "path", "expected"), [
    ('attributes."input.value"', None, {"q": "x"}),
    ("attributes.input.value", "$.q", "x"),
    ("attributes.input", None, {"value": {"q": "x"}, "mime_type": "json"}),  # a flat record
    ("attributes.llm.output_messages", "$[-1].message.tool_calls[0].tool_call.function.name",
     "f"),
    ("attributes.llm.output_messages", "$[5]", None),
    ("attributes.llm.output_messages", "$[*]['message.role']", ["user", "assistant"]),
    ("attributes.tool.out", "$[0][1]", 19.99),  # a Python literal text
    ("attributes.tool.out", "$[0].x", None),
    ("events.gen_ai.choice", "$[0].message.content", "hi"),
    ("resource.service.name", None, "shop"),
    ("name", None, "llm"),
    ("duration_ms", None, 2.0),
])
def test_fields_and_paths(field, path, expected):
    from evalharness.spans import access

    s = span("s", None, "llm", "LLM", (1, 3), {
        "input.value": {"q": "x"}, "input.mime_type": "json",
        "llm.output_messages.0.message.role": "user",
        "llm.output_messages.1.message.role": "assistant",
        "llm.output_messages.1.message.tool_calls.0.tool_call.function.name": "f",
        "tool.out": "[('Blue scarf', 19.99)]"},
        events=[SpanEvent("gen_ai.choice", attributes={"message": {"content": "hi"}})])
    s.resource = {"service.name": "shop"}
    value = access.read_field(s, access.parse(field, field=True))
    if path is not None and value is not access.MISSING:
        value = access.walk(value, access.parse(path, field=False))
    assert (None if value is access.MISSING else value) == expected


@pytest.mark.parametrize(("text", "field", "message"), [
    ("input.value", True, "a field starts with one of"),
    ("name.x", True, "`name` is a plain value"),
    ("$.a[", False, "unclosed or empty `[`"),
    ("$.a[1:2]", False, "is not one of [N], [-N], [*]"),
    ("a.b", False, "a path starts with `$`"),
    ("$.'open", False, "unclosed quote"),
])
def test_field_and_path_errors(text, field, message):
    from evalharness.spans import access

    with pytest.raises(access.PathError) as info:
        access.parse(text, field=field)
    assert message in str(info.value)


def test_the_docs_name_every_mapping_key_and_preset():
    import re
    from pathlib import Path

    from evalharness.spans.mapping import (
        ComponentMapping,
        Extractor,
        MappingSpec,
        PickBy,
        Selector,
        ValueTest,
    )

    docs = Path(__file__).resolve().parent.parent / "docs"
    text = "".join(p.read_text() for p in (docs / "traces.md", docs / "traces-mapping.md")
                   if p.exists())
    for model in (MappingSpec, ComponentMapping, Selector, Extractor, PickBy, ValueTest):
        for name, info in model.model_fields.items():
            key = info.alias or name
            assert re.search(rf"[`{{]{re.escape(key)}[`:]", text), (model.__name__, key)
    for name in PRESETS:
        assert f"### `{name}`" in text, name


def test_the_docs_example_mapping_is_valid():
    import re
    from pathlib import Path

    docs = Path(__file__).resolve().parent.parent / "docs"
    text = "".join(p.read_text() for p in (docs / "traces.md", docs / "traces-mapping.md")
                   if p.exists())
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", text, re.DOTALL)
              if "components:" in b and "traces:" not in b]
    assert blocks
    for block in blocks:
        check_mapping(resolve_mapping(mapping(block)), SHOP)


def test_a_router_apps_text2sql_is_timed_and_charged_for_its_own_work_only():
    """Issue 31: RouterQueryEngine._query passes the SQL engine's response through, so the
    preset's text2sql selector matched it (outermost): text2sql was timed as the whole routed
    query and charged every LLM call's tokens, 52% of latency and 48% of tokens."""
    sc = OI_LLAMA
    sql = "SELECT name, price FROM products WHERE price < 30"
    meta = {"sql_query": sql, "result": [["Blue scarf", 19.99]], "col_keys": ["name", "price"]}
    spans = [
        span("rq", None, "RouterQueryEngine.query", "CHAIN", (0, 252),
             {"input.value": "Which scarves cost under 30?"}, scope=sc),
        span("rq_", "rq", "RouterQueryEngine._query", "CHAIN", (1, 251),
             {"output.value": {"response": "Blue scarf, 19.99.", "metadata": meta}}, scope=sc),
        span("sel", "rq_", "LLMSingleSelector.select", "CHAIN", (2, 40), {
            "output.value": {"selections": [{"index": 0, "reason": "catalog"}]}}, scope=sc),
        oi_llm("sel-llm", "sel", (3, 39), '{"choice": 1}', prompt=80, completion=5, scope=sc,
               name="OpenAI.chat"),
        span("nl_", "rq_", "NLSQLTableQueryEngine._query", "CHAIN", (41, 250),
             {"output.value": {"response": "Blue scarf, 19.99.", "metadata": meta}}, scope=sc),
        oi_llm("sql-llm", "nl_", (42, 120), f"SQLQuery: {sql}\nSQLResult:", prompt=200,
               completion=30, scope=sc, name="OpenAI.chat"),
        oi_llm("synth", "nl_", (125, 245), "The Blue scarf costs 19.99.", prompt=120,
               completion=10, scope=sc, name="OpenAI.chat"),
    ]
    spec = mapping("preset: llamaindex-openinference\n"
                   "components: {router: {routes: {map: {'0': sql, '1': blog}}}}")
    mapped = map_trace(spans, spec, SHOP)
    t = mapped.trace
    assert t.router.routes == ["sql"] and t.generator.answer == "The Blue scarf costs 19.99."
    # text2sql: NLSQLTableQueryEngine._query (41..250) without the synthesis call (125..245)
    assert t.text2sql.latency_ms == pytest.approx(209.0 - 120.0)
    assert (t.text2sql.usage.prompt_tokens, t.text2sql.usage.completion_tokens) == (200, 30)
    assert (t.generator.usage.prompt_tokens, t.generator.usage.completion_tokens) == (120, 10)
    own = mapped.components["text2sql"].values["own_work"]
    assert "NLSQLTableQueryEngine._query" in own and "generator's" in own
    # every LLM call counted once: the components' tokens add up to the trace's
    total = sum(u.prompt_tokens + u.completion_tokens for u in (
        t.router.usage, t.text2sql.usage, t.generator.usage) if u is not None)
    assert total == 80 + 5 + 200 + 30 + 120 + 10
    assert not [p for p in mapped.problems if p.field == "usage"]
    assert "own_work" in explain(mapped) or "NLSQLTableQueryEngine._query" in explain(mapped)


def test_tokens_counted_for_two_components_are_a_warning():
    """A mapping whose two components take the same LLM span counts its tokens twice: the
    mapping says so (the self-check of issue 31)."""
    spans = [
        span("root", None, "app", "CHAIN", (0, 100), {"input.value": "q"}, scope=OI_LLAMA),
        oi_llm("llm", "root", (1, 99), "SELECT 1", prompt=50, completion=5, scope=OI_LLAMA,
               name="OpenAI.chat"),
    ]
    spec = mapping("""
components:
  text2sql: {select: {kind: LLM}, sql: {field: attributes.llm.output_messages, path: '$[-1].message.content'}}
  generator: {select: {kind: LLM}, answer: {field: attributes.llm.output_messages, path: '$[-1].message.content'}}
""")
    mapped = map_trace(spans, spec, SHOP)
    [warning] = [p for p in mapped.problems if p.field == "usage"]
    assert "add up to 110, more than the 55" in warning.message
