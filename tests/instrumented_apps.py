"""Two small RAG apps run offline under real OpenInference instrumentation — LlamaIndex and
LangChain — whose spans tests/test_instrumented.py imports and checks (docs/traces-instrumented.md).

Both apps answer the same six questions over the same SQLite catalog and blog chunks: a router
chooses text-to-SQL or retrieval, then a generator answers. Their language models are offline
stand-ins that answer each prompt from tables keyed by the question, report token usage and
sleep a known time per call; the embedding is a hashed bag of words. Nothing is downloaded.
The instrumentation libraries are imported inside the functions, so collecting this module
(``--doctest-modules``) costs nothing and needs none of them.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PRODUCTS = [
    (1, "Blue scarf", "scarf", 19.99, 12),
    (2, "Red scarf", "scarf", 24.5, 0),
    (3, "Wool coat", "coat", 189.0, 3),
    (4, "Rain coat", "coat", 129.0, 7),
    (5, "Linen shirt", "shirt", 39.9, 20),
    (6, "Denim jacket", "jacket", 89.0, 5),
    (7, "Raw denim jeans", "jeans", 119.0, 9),
    (8, "Cashmere sweater", "sweater", 149.0, 4),
    (9, "Cotton socks", "socks", 7.5, 50),
    (10, "Leather belt", "belt", 45.0, 0),
]
"""The catalog: (id, name, category, price, stock)."""

CHUNKS = {
    "b01": "Raw denim: wash it inside out in cold water, rarely, and hang it to dry.",
    "b02": "Wool sweaters: store them folded, never hung, with cedar against moths.",
    "b03": "Red wine stains: blot at once, then rinse from the back with cold water.",
    "b04": "Cashmere: hand wash in lukewarm water with a little hair shampoo.",
    "b05": "Leather belts: wipe them clean and condition the leather twice a year.",
    "b06": "Linen shirts: iron them while still damp for the crispest finish.",
    "b07": "Rain coats: reproof the fabric after washing to keep it waterproof.",
    "b08": "Socks: turn them inside out before washing to keep the outside soft.",
    "b09": "Coats: brush wool coats after wearing and let them air before storing.",
    "b10": "Scarves: wash silk scarves by hand and never wring them out.",
}
"""The blog's chunks by id."""

SQL_QUESTIONS = {
    "Which products cost less than 30?":
        "SELECT name, price FROM products WHERE price < 30 ORDER BY price",
    "How many products are out of stock?":
        "SELECT COUNT(*) AS n FROM products WHERE stock = 0",
    "What is the most expensive coat?":
        "SELECT name, price FROM products WHERE category = 'coat' ORDER BY price DESC LIMIT 1",
}
"""The text-to-SQL questions and the query the stand-in model writes for each."""

DOC_QUESTIONS = [
    "How do I wash raw denim?",
    "How should I store wool sweaters?",
    "How do I get a red wine stain out?",
]
"""The questions routed to the blog."""

QUESTIONS = [q for pair in zip(SQL_QUESTIONS, DOC_QUESTIONS, strict=True) for q in pair]
"""All six, SQL and blog alternating."""

ROUTE = {**{q: "sql" for q in SQL_QUESTIONS}, **{q: "blog" for q in DOC_QUESTIONS}}
"""Question -> the route the stand-in router chooses."""

DELAY_S = {"route": 0.005, "sql": 0.03, "answer": 0.02}
"""Seconds each kind of model call sleeps: the text-to-SQL call is the slowest, so a text-to-SQL
latency that took in the answer-synthesis call would show."""

TOP_K = 3
CONFIDENCE = 0.9
"""The LangChain router's confidence in every choice."""


def build_database(path: Path) -> Path:
    """Write the catalog to a SQLite file at ``path``."""
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                   "category TEXT NOT NULL, price REAL NOT NULL, stock INTEGER NOT NULL)")
        db.executemany("INSERT INTO products VALUES (?, ?, ?, ?, ?)", PRODUCTS)
    return path


def run_sql(path: Path, sql: str) -> tuple[list[str], list[list[Any]]]:
    """Columns and rows of ``sql`` on the catalog at ``path``."""
    with sqlite3.connect(path) as db:
        cursor = db.execute(sql)
        return [d[0] for d in cursor.description], [list(r) for r in cursor.fetchall()]


def embed(text: str, dim: int = 64) -> list[float]:
    """A deterministic bag-of-words embedding: words hashed into ``dim`` buckets, unit length.

    >>> round(sum(x * x for x in embed("Raw denim, raw!")), 6)
    1.0
    """
    vector = [0.0] * dim
    for word in re.findall(r"[a-z]+", text.lower()):
        if len(word) > 2:
            vector[zlib.crc32(word.encode()) % dim] += 1.0
    norm = sum(x * x for x in vector) ** 0.5 or 1.0
    return [x / norm for x in vector]


def count_tokens(text: str) -> int:
    """What the stand-in models report as tokens: whitespace-separated words.

    >>> count_tokens("SELECT name FROM products")
    4
    """
    return len(text.split())


@dataclass
class Call:
    """One call of a stand-in model."""

    kind: str
    """``route``, ``sql`` or ``answer``."""
    question: str
    output: str
    prompt_tokens: int
    completion_tokens: int


@dataclass
class Script:
    """The stand-in models' log: every call they answered, in order (and what the LangChain
    app's retriever returned)."""

    calls: list[Call] = field(default_factory=list)
    retrieved: dict[str, list[str]] = field(default_factory=dict)
    """Question -> the chunk ids the LangChain app's retriever returned, best first."""

    def answer(self, kind: str, question: str, prompt: str, output: str) -> Call:
        time.sleep(DELAY_S[kind])
        call = Call(kind, question, output, count_tokens(prompt), count_tokens(output))
        self.calls.append(call)
        return call


def _between(text: str, before: str, after: str) -> str:
    found = re.findall(re.escape(before) + r"(.*?)" + re.escape(after), text, flags=re.S)
    if not found:
        raise ValueError(f"the stand-in model got a prompt it has no script for: {text[:300]!r}")
    return found[-1].strip()


# --------------------------------------------------------------------------------------------
# LlamaIndex: RouterQueryEngine over NLSQLTableQueryEngine and a VectorStoreIndex
# --------------------------------------------------------------------------------------------


def llamaindex_reply(script: Script, prompt: str) -> Call:
    """The stand-in model's reply to one of LlamaIndex's prompts: the selector's, the
    text-to-SQL one, the SQL answer synthesis or the text QA one."""
    if "Some choices are given below" in prompt:
        question = _between(prompt, "most relevant to the question: '", "'\n")
        choice = 1 if ROUTE[question] == "sql" else 2
        reply = json.dumps([{"choice": choice, "reason": f"about {ROUTE[question]}"}])
        return script.answer("route", question, prompt, reply)
    if "SQLQuery:" in prompt and "synthesize a response" not in prompt:
        question = _between(prompt, "Question: ", "\nSQLQuery:")
        return script.answer("sql", question, prompt, SQL_QUESTIONS[question])
    if "synthesize a response from the query results" in prompt:
        question = _between(prompt, "Query: ", "\nSQL:")
        rows = _between(prompt, "SQL Response: ", "\nResponse:")
        return script.answer("answer", question, prompt, f"From the catalog: {rows}")
    if "Context information is below" in prompt:
        question = _between(prompt, "Query: ", "\nAnswer:")
        context = _between(prompt, "---------------------\n", "\n---------------------")
        first = context.split("\n\n")[0].strip()
        return script.answer("answer", question, prompt, f"From the blog: {first}")
    raise ValueError(f"the stand-in model got a prompt it has no script for: {prompt[:300]!r}")


def build_llamaindex_app(workdir: Path, script: Script) -> Any:
    """A ``RouterQueryEngine`` choosing between an ``NLSQLTableQueryEngine`` over the catalog
    (tool 0) and a ``VectorStoreIndex`` query engine over the chunks (tool 1), every model call
    answered by the stand-in model."""
    from llama_index.core import Settings, VectorStoreIndex
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
    from llama_index.core.llms.callbacks import llm_completion_callback
    from llama_index.core.query_engine import NLSQLTableQueryEngine, RouterQueryEngine
    from llama_index.core.schema import TextNode
    from llama_index.core.selectors import LLMSingleSelector
    from llama_index.core.tools import QueryEngineTool
    from llama_index.core.utilities.sql_wrapper import SQLDatabase
    from sqlalchemy import create_engine

    class ScriptedLLM(CustomLLM):
        """Answers LlamaIndex's prompts from the script, reporting usage as OpenAI does."""

        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(model_name="scripted", context_window=8192, num_output=256)

        @llm_completion_callback()
        def complete(self, prompt: str, formatted: bool = False, **kwargs: Any
                     ) -> CompletionResponse:
            call = llamaindex_reply(script, prompt)
            usage = {"prompt_tokens": call.prompt_tokens,
                     "completion_tokens": call.completion_tokens}
            return CompletionResponse(text=call.output, raw={"usage": usage})

        @llm_completion_callback()
        def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any):
            raise NotImplementedError("the stand-in model does not stream")

    class HashEmbedding(BaseEmbedding):
        """The hashed bag of words of :func:`embed`."""

        def _get_text_embedding(self, text: str) -> list[float]:
            return embed(text)

        def _get_query_embedding(self, query: str) -> list[float]:
            return embed(query)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return embed(query)

    Settings.tokenizer = str.split  # no tiktoken encoding to load
    llm, embed_model = ScriptedLLM(), HashEmbedding(model_name="hash")
    database = SQLDatabase(create_engine(f"sqlite:///{build_database(workdir / 'shop.db')}"),
                           include_tables=["products"])
    sql_engine = NLSQLTableQueryEngine(sql_database=database, tables=["products"], llm=llm,
                                       embed_model=embed_model)
    nodes = [TextNode(id_=chunk_id, text=text) for chunk_id, text in CHUNKS.items()]
    index = VectorStoreIndex(nodes, embed_model=embed_model)
    blog_engine = index.as_query_engine(llm=llm, similarity_top_k=TOP_K)
    tools = [
        QueryEngineTool.from_defaults(sql_engine, name="catalog",
                                      description="Products, prices and stock in the catalog"),
        QueryEngineTool.from_defaults(blog_engine, name="blog",
                                      description="Care advice from the shop's blog"),
    ]
    return RouterQueryEngine(selector=LLMSingleSelector.from_defaults(llm=llm),
                             query_engine_tools=tools, llm=llm)


# --------------------------------------------------------------------------------------------
# LangChain: an LCEL router between a text-to-SQL chain and a retriever, then a generator
# --------------------------------------------------------------------------------------------

LC_ROUTE = "Route the question to `sql` (the catalog) or `blog` (care advice). Reply as JSON."
LC_SQL = "Write one SQLite query over products(id, name, category, price, stock)."
LC_ANSWER = "Answer the question from the context only."


def langchain_reply(script: Script, system: str, user: str) -> Call:
    """The stand-in chat model's reply to one of the app's three prompts."""
    prompt = f"{system}\n{user}"
    if system == LC_ROUTE:
        question = _between(prompt, "Question: ", "\nRoute:")
        reply = json.dumps({"route": ROUTE[question], "confidence": CONFIDENCE})
        return script.answer("route", question, prompt, reply)
    if system == LC_SQL:
        question = _between(prompt, "Question: ", "\nSQL:")
        return script.answer("sql", question, prompt, SQL_QUESTIONS[question])
    if system == LC_ANSWER:
        question = _between(prompt, "Question: ", "\nContext:")
        first = prompt.split("\nContext:\n", 1)[1].split("\n")[0]
        return script.answer("answer", question, prompt, f"From the context: {first}")
    raise ValueError(f"the stand-in model got a prompt it has no script for: {prompt[:300]!r}")


def build_langchain_app(workdir: Path, script: Script) -> Any:
    """An LCEL app named ``shop_assistant``: the chain ``route`` (a prompt, the model, a JSON
    parser) chooses, a ``RunnableBranch`` runs the chain ``text_to_sql`` (the model writes the
    query, a lambda runs it on SQLite) or the ``BlogRetriever``, and the model answers from the
    rows or the documents. Step names follow docs/traces-mapping.md (`route…`, `…sql…`)."""
    from operator import itemgetter

    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.output_parsers import JsonOutputParser, StrOutputParser
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnableBranch, RunnableLambda, RunnablePassthrough

    class ScriptedChatModel(BaseChatModel):
        """Answers the app's prompts from the script, with ``usage_metadata`` as chat
        models report it."""

        @property
        def _llm_type(self) -> str:
            return "scripted-chat"

        def _generate(self, messages: list[BaseMessage], stop: Any = None,
                      run_manager: Any = None, **kwargs: Any) -> ChatResult:
            call = langchain_reply(script, str(messages[0].content), str(messages[-1].content))
            usage = {"input_tokens": call.prompt_tokens, "output_tokens": call.completion_tokens,
                     "total_tokens": call.prompt_tokens + call.completion_tokens}
            message = AIMessage(content=call.output, usage_metadata=usage)
            return ChatResult(generations=[ChatGeneration(message=message)])

    class BlogRetriever(BaseRetriever):
        """The top chunks by :func:`embed` similarity; the chunk id in each document's
        metadata (LangChain documents' own ``id`` is not recorded by OpenInference)."""

        k: int = TOP_K

        def _get_relevant_documents(self, query: str, *,
                                    run_manager: CallbackManagerForRetrieverRun
                                    ) -> list[Document]:
            q = embed(query)
            scored = sorted(((sum(a * b for a, b in zip(q, embed(text), strict=True)), cid)
                             for cid, text in CHUNKS.items()), key=lambda p: (-p[0], p[1]))
            script.retrieved[query] = [cid for _, cid in scored[:self.k]]
            return [Document(page_content=CHUNKS[cid], metadata={"id": cid, "score": score})
                    for score, cid in scored[:self.k]]

    database = build_database(workdir / "shop-lc.db")

    def execute(sql: str) -> dict[str, Any]:
        columns, rows = run_sql(database, sql)
        return {"sql": sql, "columns": columns, "rows": rows}

    def rows_context(x: dict[str, Any]) -> str:
        return "\n".join("; ".join(f"{c}: {v}" for c, v in zip(x["result"]["columns"], row,
                                                                 strict=True))
                         for row in x["result"]["rows"])

    def docs_context(x: dict[str, Any]) -> str:
        return "\n".join(d.page_content for d in x["docs"])

    def chooses_catalog(x: dict[str, Any]) -> bool:
        return x["route"]["route"] == "sql"

    model = ScriptedChatModel()
    answer = (ChatPromptTemplate.from_messages(
        [("system", LC_ANSWER), ("human", "Question: {question}\nContext:\n{context}")])
        | model | StrOutputParser())
    route = (ChatPromptTemplate.from_messages(
        [("system", LC_ROUTE), ("human", "Question: {question}\nRoute:")])
        | model | JsonOutputParser()).with_config(run_name="route")
    text_to_sql = (ChatPromptTemplate.from_messages(
        [("system", LC_SQL), ("human", "Question: {question}\nSQL:")])
        | model | StrOutputParser() | RunnableLambda(execute)).with_config(run_name="text_to_sql")
    catalog = (RunnablePassthrough.assign(result=text_to_sql)
               | RunnablePassthrough.assign(context=rows_context) | answer)
    blog = (RunnablePassthrough.assign(docs=itemgetter("question") | BlogRetriever())
            | RunnablePassthrough.assign(context=docs_context) | answer)
    return (RunnablePassthrough.assign(route=route)
            | RunnableBranch((chooses_catalog, catalog), blog)).with_config(
                run_name="shop_assistant")


# --------------------------------------------------------------------------------------------
# Recording: instrument, run every question offline, export
# --------------------------------------------------------------------------------------------


@dataclass
class Recording:
    """What one app did under instrumentation: its finished spans (the SDK's own objects, with
    their exact start and end), its answer per question, and the model calls it made."""

    spans: list[Any]
    answers: dict[str, Any]
    """Question -> what the app returned (a LlamaIndex ``Response``, a LangChain text)."""
    script: Script
    database: Path


class NetworkUsed(RuntimeError):
    """Something tried to open a connection while the apps ran offline."""


def _refuse(*args: Any, **kwargs: Any) -> Any:
    raise NetworkUsed(f"the offline apps tried to connect: {args[1:] or kwargs}")


def offline(monkeypatch: Any) -> None:
    """Make every outgoing connection fail loudly (a model or tokenizer download would)."""
    import socket

    monkeypatch.setattr(socket.socket, "connect", _refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", _refuse)
    monkeypatch.setattr(socket, "create_connection", _refuse)


def _tracing() -> tuple[Any, Any]:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def record_llamaindex(workdir: Path) -> Recording:
    """Build the LlamaIndex app under ``LlamaIndexInstrumentor`` (the index's embedding calls
    are a trace of their own, as in any real export), ask every question, uninstrument."""
    import llama_index.core
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    provider, exporter = _tracing()
    instrumentor = LlamaIndexInstrumentor()
    tokenizer = llama_index.core.global_tokenizer
    instrumentor.instrument(tracer_provider=provider)
    try:
        script = Script()
        app = build_llamaindex_app(workdir, script)
        answers = {q: app.query(q) for q in QUESTIONS}
    finally:
        instrumentor.uninstrument()
        llama_index.core.global_tokenizer = tokenizer
    return Recording(list(exporter.get_finished_spans()), answers, script, workdir / "shop.db")


def record_langchain(workdir: Path) -> Recording:
    """Run the LangChain app under ``LangChainInstrumentor``, each question with its case id
    in the run's metadata (``case_id`` = ``q<n>``, its index in :data:`QUESTIONS`)."""
    from openinference.instrumentation.langchain import LangChainInstrumentor

    provider, exporter = _tracing()
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        script = Script()
        app = build_langchain_app(workdir, script)
        answers = {q: app.invoke({"question": q}, config={"metadata": {"case_id": f"q{i}"}})
                   for i, q in enumerate(QUESTIONS)}
    finally:
        instrumentor.uninstrument()
    return Recording(list(exporter.get_finished_spans()), answers, script,
                     workdir / "shop-lc.db")


def write_exports(spans: list[Any], folder: Path, batch: int = 16) -> dict[str, Path]:
    """``spans`` written as three exporters write them, ``batch`` spans an export call:
    ``otlp-json`` (the Collector's file exporter, JSON), ``otlp-proto`` (its proto format:
    each ``TracesData`` after its length in 4 bytes) and ``otel-console`` (the SDK's
    ``ConsoleSpanExporter``)."""
    import io
    import struct

    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    from evalharness.testing.otlp import collector_line

    folder.mkdir(parents=True, exist_ok=True)
    batches = [spans[i:i + batch] for i in range(0, len(spans), batch)]
    paths = {"otlp-json": folder / "spans.jsonl", "otlp-proto": folder / "spans.pb",
             "otel-console": folder / "console.txt"}
    paths["otlp-json"].write_text("".join(collector_line(b) + "\n" for b in batches))
    frames = [TracesData(resource_spans=encode_spans(b).resource_spans).SerializeToString()
              for b in batches]
    paths["otlp-proto"].write_bytes(b"".join(struct.pack(">I", len(f)) + f for f in frames))
    out = io.StringIO()
    console = ConsoleSpanExporter(out=out)
    for b in batches:
        console.export(b)
    paths["otel-console"].write_text(out.getvalue())
    return paths
