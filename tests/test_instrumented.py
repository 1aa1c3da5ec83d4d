"""Spans written by real instrumentation — LlamaIndex and LangChain through OpenInference, run
offline on stand-in models (tests/instrumented_apps.py) — imported and mapped onto the pipeline,
each component checked against what the app did (docs/traces-instrumented.md, issue 31).

Needs the ``instrumented`` extra; skipped without it. Every span is recorded once per module.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

EXTRA = "needs the `instrumented` extra: pip install 'evalharness[instrumented]'"
for _module in ("llama_index.core", "openinference.instrumentation.llama_index",
                "langchain_core", "openinference.instrumentation.langchain",
                "opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.common",
                "opentelemetry.proto"):
    pytest.importorskip(_module, reason=EXTRA)

# what the instrumentation libraries themselves still call (not ours to fix)
pytestmark = [
    pytest.mark.filterwarnings("ignore:The `json` method is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Calling .text.. as a method is deprecated"),
]

from instrumented_apps import (  # noqa: E402
    CHUNKS,
    CONFIDENCE,
    DELAY_S,
    DOC_QUESTIONS,
    QUESTIONS,
    ROUTE,
    SQL_QUESTIONS,
    Call,
    NetworkUsed,
    Recording,
    offline,
    record_langchain,
    record_llamaindex,
    run_sql,
    write_exports,
)

from evalharness.models import Case, Trace  # noqa: E402
from evalharness.pipeline import SHOP_PIPELINE, ComponentSpec, Pipeline  # noqa: E402
from evalharness.spans.importer import Imported, import_traces, read_mapped  # noqa: E402
from evalharness.spans.mapped import Mapped, explain  # noqa: E402
from evalharness.spans.mapping import parse_mapping  # noqa: E402

SHOP = Pipeline({name: ComponentSpec(**spec) for name, spec in SHOP_PIPELINE.items()})
CASES = [Case(id=f"q{i}", question=q) for i, q in enumerate(QUESTIONS)]
CASE_OF = {q: f"q{i}" for i, q in enumerate(QUESTIONS)}
LLAMA_MAPPING = {"components": {"router": {"routes": {"map": {"0": "sql", "1": "blog"}}}}}
"""What a LlamaIndex user writes: the names of the router's tools (catalog first); the preset
is guessed from the spans."""
FORMATS = ("otlp-json", "otlp-proto", "otel-console")


@dataclass
class Imports:
    """One app's recording, its exports, and what the importer made of them."""

    recording: Recording
    paths: dict[str, Path]
    imported: Imported
    mapped: dict[str, Mapped]
    """Trace id -> the mapped trace (for the explanation and trace-level problems)."""
    spans: dict[str, list[Any]]
    """Trace id -> the SDK's own spans of it."""
    trace_of: dict[str, str]
    """Question -> its trace id."""

    def trace(self, question: str) -> Trace:
        return self.imported.traces[CASE_OF[question]]

    def explained(self, question: str) -> Mapped:
        return self.mapped[self.trace_of[question]]

    def span(self, question: str, name: str) -> Any:
        found = [s for s in self.spans[self.trace_of[question]] if s.name == name]
        assert len(found) == 1, f"{len(found)} spans named {name!r} for {question!r}"
        return found[0]

    def inside(self, question: str, outer: Any) -> list[Any]:
        """The spans under ``outer`` in the question's trace, by start time."""
        group = self.spans[self.trace_of[question]]
        parent = {s.context.span_id: s.parent.span_id if s.parent else None for s in group}

        def under(s: Any) -> bool:
            up = parent[s.context.span_id]
            while up is not None and up != outer.context.span_id:
                up = parent.get(up)
            return up is not None

        return sorted((s for s in group if under(s)), key=lambda s: s.start_time)

    def calls(self, question: str, kind: str | None = None) -> list[Call]:
        return [c for c in self.recording.script.calls
                if c.question == question and kind in (None, c.kind)]


def _imports(recording: Recording, folder: Path, mapping: dict | None) -> Imports:
    paths = write_exports(recording.spans, folder)
    spec = parse_mapping(mapping, source="test") if mapping else None
    imported = import_traces(paths["otlp-json"], fmt=None, mapping=spec, join=None,
                             pipeline=SHOP, cases=CASES)
    _, mapped = read_mapped(paths["otlp-json"], fmt=None, mapping=spec, pipeline=SHOP)
    spans: dict[str, list[Any]] = {}
    for s in recording.spans:
        spans.setdefault(f"{s.context.trace_id:032x}", []).append(s)
    trace_of = {}
    for trace_id, group in spans.items():
        root = next(s for s in group if s.parent is None)
        if root.attributes.get("input.value") in QUESTIONS:
            trace_of[root.attributes["input.value"]] = trace_id
    return Imports(recording, paths, imported, {m.trace_id: m for m in mapped}, spans,
                   trace_of)


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Imports:
    folder = tmp_path_factory.mktemp("llamaindex")
    with pytest.MonkeyPatch.context() as mp:
        offline(mp)
        recording = record_llamaindex(folder)
    return _imports(recording, folder / "exports", LLAMA_MAPPING)


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Imports:
    folder = tmp_path_factory.mktemp("langchain")
    with pytest.MonkeyPatch.context() as mp:
        offline(mp)
        recording = record_langchain(folder)
    return _imports(recording, folder / "exports", None)


def ms(span: Any) -> float:
    """A span's duration in milliseconds, from the SDK's own nanoseconds."""
    return (span.end_time - span.start_time) / 1e6


def usage(call: Call) -> dict[str, int]:
    return {"prompt_tokens": call.prompt_tokens, "completion_tokens": call.completion_tokens}


def tokens(step: Any) -> int:
    return step.usage.prompt_tokens + step.usage.completion_tokens if step and step.usage else 0


def rendered(imports: Imports, question: str) -> list[str]:
    """The question's SQL rows as ``contexts: upstream`` renders them."""
    columns, rows = run_sql(imports.recording.database, SQL_QUESTIONS[question])
    return ["; ".join(f"{c}: {v}" for c, v in zip(columns, row, strict=True)) for row in rows]


def llm_span_tokens(spans: list[Any]) -> int:
    """Tokens the trace's spans report (each model call reports on one span)."""
    return sum(s.attributes.get("llm.token_count.prompt", 0)
               + s.attributes.get("llm.token_count.completion", 0) for s in spans)


# --------------------------------------------------------------------------------------------
# LlamaIndex: RouterQueryEngine -> NLSQLTableQueryEngine | VectorStoreIndex
# --------------------------------------------------------------------------------------------


def test_llamaindex_every_question_is_one_trace_joined_by_its_text(llama: Imports):
    imported = llama.imported
    assert sorted(llama.trace_of) == sorted(QUESTIONS)
    assert sorted(imported.traces) == sorted(CASE_OF.values())
    assert imported.info["join"] == "question"  # LlamaIndex spans carry no case id
    assert imported.info["preset"] == "llamaindex-openinference"
    assert "openinference.instrumentation.llama_index" in imported.info["preset_reason"]
    # building the index embedded the chunks: a trace of its own that joins no case
    (extra,) = imported.unmatched
    assert {s.name for s in llama.spans[extra]} >= {"HashEmbedding.get_text_embedding_batch"}
    assert llama.mapped[extra].error and "no component" in llama.mapped[extra].error


@pytest.mark.parametrize("question", QUESTIONS)
def test_llamaindex_router(llama: Imports, question: str):
    router = llama.trace(question).router
    assert router.routes == [ROUTE[question]]
    assert router.error is None
    (call,) = llama.calls(question, "route")
    assert router.usage.model_dump() == usage(call)
    # the selector span, not the query engine around it
    assert router.latency_ms == pytest.approx(ms(llama.span(question, "LLMSingleSelector._select")))


@pytest.mark.parametrize("question", list(SQL_QUESTIONS))
def test_llamaindex_text2sql_values(llama: Imports, question: str):
    step = llama.trace(question).text2sql
    (call,) = llama.calls(question, "sql")
    response = llama.recording.answers[question]
    assert step.sql == call.output == response.metadata["sql_query"] == SQL_QUESTIONS[question]
    columns, rows = run_sql(llama.recording.database, SQL_QUESTIONS[question])
    assert step.rows == rows == [list(r) for r in response.metadata["result"]]
    assert step.columns == columns
    assert step.error is None
    assert llama.trace(question).retriever is None  # not routed there


@pytest.mark.parametrize("question", list(SQL_QUESTIONS))
def test_llamaindex_text2sql_latency_and_tokens_are_its_own_work(llama: Imports,
                                                                 question: str):
    """The selector matches ``RouterQueryEngine._query`` (it passes the engine's response,
    ``sql_query`` and all, through) and ``NLSQLTableQueryEngine._query``; the work is the
    inner one's, without the answer-synthesis LLM call it also holds (the generator's)."""
    step = llama.trace(question).text2sql
    engine = llama.span(question, "NLSQLTableQueryEngine._query")
    router = llama.span(question, "RouterQueryEngine._query")
    # the engine's two LLM calls, in order (each a `predict` span around a `complete` one)
    to_sql, synthesis = (s for s in llama.inside(question, engine)
                         if s.name == "ScriptedLLM.predict")
    assert step.latency_ms == pytest.approx(ms(engine) - ms(synthesis), abs=1e-6)
    assert step.latency_ms > ms(to_sql) >= DELAY_S["sql"] * 1000
    assert step.latency_ms < ms(router) - DELAY_S["answer"] * 1000 - DELAY_S["route"] * 1000
    (call,) = llama.calls(question, "sql")
    assert step.usage.model_dump() == usage(call)
    own = llama.explained(question).components["text2sql"].values["own_work"]
    assert "measured on `NLSQLTableQueryEngine._query`" in own
    assert "without generator's `ScriptedLLM.predict` LLM" in own


@pytest.mark.parametrize("question", DOC_QUESTIONS)
def test_llamaindex_retriever(llama: Imports, question: str):
    trace = llama.trace(question)
    nodes = llama.recording.answers[question].source_nodes
    assert trace.retriever.ids == [n.node.node_id for n in nodes]
    assert trace.retriever.texts == [n.node.get_content() for n in nodes]
    assert trace.retriever.scores == pytest.approx([n.score for n in nodes])
    assert trace.retriever.latency_ms == pytest.approx(
        ms(llama.span(question, "VectorIndexRetriever.retrieve")))
    assert trace.text2sql is None


@pytest.mark.parametrize("question", QUESTIONS)
def test_llamaindex_generator(llama: Imports, question: str):
    generator = llama.trace(question).generator
    (call,) = llama.calls(question, "answer")
    assert generator.answer == call.output == str(llama.recording.answers[question])
    assert generator.usage.model_dump() == usage(call)
    assert generator.error is None
    # contexts: upstream — the retriever's texts, or the rows rendered `col: value; …`
    if ROUTE[question] == "blog":
        assert generator.contexts == llama.trace(question).retriever.texts
    else:
        assert generator.contexts == rendered(llama, question)


@pytest.mark.parametrize("question", QUESTIONS)
def test_llamaindex_tokens_are_counted_once(llama: Imports, question: str):
    trace = llama.trace(question)
    counted = sum(tokens(getattr(trace, c)) for c in ("router", "text2sql", "retriever",
                                                      "generator"))
    made = sum(c.prompt_tokens + c.completion_tokens for c in llama.calls(question))
    assert counted == made == llm_span_tokens(llama.spans[llama.trace_of[question]])
    assert not [p for p in llama.explained(question).problems if p.field == "usage"]


# --------------------------------------------------------------------------------------------
# LangChain: route -> text_to_sql | BlogRetriever -> the model
# --------------------------------------------------------------------------------------------


def test_langchain_every_question_is_one_trace_joined_by_its_case_id(chain: Imports):
    imported = chain.imported
    assert sorted(chain.trace_of) == sorted(QUESTIONS)
    assert sorted(imported.traces) == sorted(CASE_OF.values())
    assert imported.unmatched == []
    assert imported.info["join"] == "key"  # `metadata.case_id` of the root run
    assert imported.info["preset"] == "langchain-openinference"
    assert "openinference.instrumentation.langchain" in imported.info["preset_reason"]
    for question, trace_id in chain.trace_of.items():
        assert chain.mapped[trace_id].question == question


@pytest.mark.parametrize("question", QUESTIONS)
def test_langchain_router(chain: Imports, question: str):
    router = chain.trace(question).router
    assert router.routes == [ROUTE[question]]
    assert router.confidence == CONFIDENCE
    (call,) = chain.calls(question, "route")
    assert router.usage.model_dump() == usage(call)
    assert router.latency_ms == pytest.approx(ms(chain.span(question, "route")))


@pytest.mark.parametrize("question", list(SQL_QUESTIONS))
def test_langchain_text2sql(chain: Imports, question: str):
    step = chain.trace(question).text2sql
    (call,) = chain.calls(question, "sql")
    assert step.sql == call.output == SQL_QUESTIONS[question]
    columns, rows = run_sql(chain.recording.database, SQL_QUESTIONS[question])
    assert (step.columns, step.rows) == (columns, rows)
    # its own span: the model writing the query and the query run, not the answer after it
    own = chain.span(question, "text_to_sql")
    assert step.latency_ms == pytest.approx(ms(own), abs=1e-6)
    assert step.latency_ms < ms(chain.span(question, "RunnableBranch")) - DELAY_S["answer"] * 1000
    assert step.usage.model_dump() == usage(call)
    assert chain.trace(question).retriever is None


@pytest.mark.parametrize("question", DOC_QUESTIONS)
def test_langchain_retriever(chain: Imports, question: str):
    trace = chain.trace(question)
    assert trace.retriever.ids == chain.recording.script.retrieved[question]
    assert trace.retriever.latency_ms == pytest.approx(ms(chain.span(question, "BlogRetriever")))
    assert trace.text2sql is None
    assert chain.explained(question).components["text2sql"].status == "not_run"


@pytest.mark.parametrize("question", QUESTIONS)
def test_langchain_generator(chain: Imports, question: str):
    generator = chain.trace(question).generator
    (call,) = chain.calls(question, "answer")
    assert generator.answer == call.output == chain.recording.answers[question]
    assert generator.usage.model_dump() == usage(call)
    if ROUTE[question] == "sql":  # the rows, as the app also rendered them into its prompt
        assert generator.contexts == rendered(chain, question)
    else:
        assert generator.contexts == [CHUNKS[i] for i in chain.recording.script.retrieved[question]]


@pytest.mark.parametrize("question", QUESTIONS)
def test_langchain_tokens_are_counted_once(chain: Imports, question: str):
    trace = chain.trace(question)
    counted = sum(tokens(getattr(trace, c)) for c in ("router", "text2sql", "retriever",
                                                      "generator"))
    made = sum(c.prompt_tokens + c.completion_tokens for c in chain.calls(question))
    assert counted == made == llm_span_tokens(chain.spans[chain.trace_of[question]])


# --------------------------------------------------------------------------------------------
# The same spans through every OpenTelemetry exporter format
# --------------------------------------------------------------------------------------------


def _without_latency(imported: Imported) -> tuple[dict[str, Any], dict[str, float]]:
    steps, latencies = {}, {}
    for case, trace in imported.traces.items():
        dumped = json.loads(trace.model_dump_json())
        for name in ("router", "text2sql", "retriever", "generator"):
            if dumped.get(name):
                latencies[f"{case}.{name}"] = dumped[name].pop("latency_ms")
        steps[case] = dumped
    return steps, latencies


@pytest.mark.parametrize("fmt", FORMATS[1:])
@pytest.mark.parametrize("app", ["llama", "chain"])
def test_every_export_format_maps_the_same(request: pytest.FixtureRequest, app: str, fmt: str):
    imports: Imports = request.getfixturevalue(app)
    # the console exporter prints no instrumentation scope to guess the preset from: name it
    preset = "llamaindex-openinference" if app == "llama" else "langchain-openinference"
    spec = parse_mapping({**(LLAMA_MAPPING if app == "llama" else {}), "preset": preset},
                         source="test")
    other = import_traces(imports.paths[fmt], fmt=None, mapping=spec, join=None,
                          pipeline=SHOP, cases=CASES)
    assert other.format == fmt
    steps, latencies = _without_latency(other)
    expected_steps, expected_latencies = _without_latency(imports.imported)
    assert steps == expected_steps
    # the console exporter prints microseconds, through a float (docs/traces-formats.md)
    assert latencies == pytest.approx(expected_latencies, abs=0.002 if fmt == "otel-console"
                                      else 1e-9)


# Found by this test: without a scope (otel-console, Phoenix) the preset is guessed from the
# file's first trace, LlamaIndex's index build (`HashEmbedding.get_text_embedding_batch`), whose
# `Class.method` name the guess did not know, so `langchain-openinference` was guessed and the
# router was lost.
def test_llamaindex_preset_is_guessed_from_a_console_export(llama: Imports):
    spec = parse_mapping(LLAMA_MAPPING, source="test")
    other = import_traces(llama.paths["otel-console"], fmt=None, mapping=spec, join=None,
                          pipeline=SHOP, cases=CASES)
    assert other.info["preset"] == "llamaindex-openinference"
    assert all(trace.router is not None for trace in other.traces.values())


def test_explain_names_the_spans_of_both_apps(llama: Imports, chain: Imports):
    text = explain(llama.explained(next(iter(SQL_QUESTIONS))))
    assert "`LLMSingleSelector._select` CHAIN" in text
    assert "`RouterQueryEngine._query` CHAIN" in text
    text = explain(chain.explained(DOC_QUESTIONS[0]))
    assert "`route` CHAIN" in text and "`BlogRetriever` RETRIEVER" in text


def test_the_apps_run_with_every_connection_refused(monkeypatch: pytest.MonkeyPatch):
    """The guard the recordings run under: a download (a tokenizer's encoding, NLTK data, a
    model) would fail the module's fixtures instead of reaching the network."""
    import urllib.request

    offline(monkeypatch)
    with pytest.raises(NetworkUsed):
        urllib.request.urlopen("http://127.0.0.1:9/", timeout=1)
