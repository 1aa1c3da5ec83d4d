"""Judgment tasks: the unit of judging, each a versioned rubric with pydantic input and output.

A rubric's text is the instruction an LLM judge receives; its id and version are stored with
every judgment (and are part of the cache key), so changing a rubric's meaning means bumping its
version. The heuristic backend implements the same tasks without a model.

No rubric assumes a domain: what the application is reaches the tasks that need it as data
(``judge.domain``, an input field such as :attr:`QuestionsInput.domain`), so it is part of
the cache key too (tests/test_judge_domain.py fails on one retail word in judge code).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

I = TypeVar("I", bound=BaseModel)  # noqa: E741
O = TypeVar("O", bound=BaseModel)  # noqa: E741


class _IO(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


@dataclass(frozen=True)
class JudgmentTask(Generic[I, O]):
    """A judgment task: rubric id, version and text, and its input and output models."""

    id: str
    version: str
    rubric: str
    input: type[I]
    output: type[O]
    user: Callable[[I], str] | None = None
    """How an LLM judge is shown the inputs; ``None``: as indented JSON. A task whose input
    holds data a model reads better in another form (rows as a table) says so here."""

    def schema(self) -> dict:
        """The output model's JSON Schema (computed once per task)."""
        return _schema(self.output)

    def messages(self, inputs: I) -> list[dict[str, str]]:
        """Chat messages for an LLM judge: the rubric, then the inputs as JSON."""
        return [
            {"role": "system", "content": _system_prompt(self.rubric, self.output)},
            {"role": "user", "content": (self.user(inputs) if self.user is not None
                                         else inputs.model_dump_json(indent=1))},
        ]


@functools.cache
def _schema(model: type[BaseModel]) -> dict:
    return model.model_json_schema()


@functools.cache
def _system_prompt(rubric: str, model: type[BaseModel]) -> str:
    return (f"{rubric}\n\nAnswer with one JSON object that matches this JSON Schema:\n"
            f"{json.dumps(_schema(model))}")


# -- split an answer into claims -------------------------------------------------------------


class ClaimsInput(_IO):
    question: str
    """The question the answer responds to (resolves pronouns)."""
    answer: str
    """The text to split into claims."""


class ClaimsOutput(_IO):
    claims: list[str]
    """Standalone, atomic factual statements; no pronouns that need the answer to resolve."""


CLAIMS = JudgmentTask(
    id="claims", version="1", input=ClaimsInput, output=ClaimsOutput,
    rubric=(
        "You split an answer into claims. A claim is one standalone, atomic factual statement "
        "made by the answer: replace pronouns with what they refer to (use the question for "
        "context), keep numbers, units, names and sizes exactly as written, and do not add "
        "anything the answer does not say. Greetings, offers of help and questions are not "
        "claims. Return the claims in the order the answer makes them; an answer that makes no "
        "claim gives an empty list."),
)


# -- verify a batch of claims against a context ----------------------------------------------


class RowTable(_IO):
    """Rows a query returned, with their typed values: data the claims may be checked against."""

    columns: list[str]
    """Column names, in order."""
    rows: list[list[Any]]
    """One list of values per row (numbers stay numbers); an empty list: the query matched
    nothing."""
    quantity_columns: list[str] | None = None
    """The columns that say how many of a row's thing are available (a claim that it is
    available needs a quantity above 0). ``None``: the column the claim names, else the only
    column of whole numbers (docs/metrics/row-verifier.md)."""
    source: str | None = None
    """Where the rows come from (e.g. ``text2sql``)."""


class ClaimSupportInput(_IO):
    context: str
    """Everything the claims may be checked against as text (chunks, notes); rows the
    ``tables`` hold are not repeated here."""
    claims: list[str]
    """The claims to verify, in order."""
    tables: list[RowTable] = Field(default_factory=list)
    """Result rows the claims may be checked against, as data."""
    question: str | None = None
    """The question the rows answer (given with ``tables``): a claim may repeat its words, the
    query's conditions, but a figure or a name must come from the rows or the text."""


class ClaimVerdict(_IO):
    claim: str
    """The claim, copied."""
    supported: bool
    """True when the context states or directly implies the claim."""
    reason: str
    """One sentence: the supporting passage, or what is missing or contradicted."""
    confidence: float | None = Field(default=None, ge=0, le=1)
    """Optional: the judge's probability that the claim is supported. When given, scores use
    it instead of the 0/1 verdict (an expected count of supported claims)."""
    evidence: list[str] | None = None
    """Optional: where the verdict comes from, one short line each (a row and column and its
    value, a computation over the rows, a passage)."""


class ClaimSupportOutput(_IO):
    verdicts: list[ClaimVerdict]
    """One verdict per claim, in the order given."""


def markdown_table(table: RowTable, limit: int = 200) -> str:
    """A table as Markdown (what an LLM reads best): a header, then one line per row, up to
    ``limit`` rows; ``|`` in values escaped, ``NULL`` for missing values.

    >>> print(markdown_table(RowTable(columns=["name", "n"], rows=[["A|B", 3], [None, 0]])))
    | # | name | n |
    |---|---|---|
    | 1 | A\\|B | 3 |
    | 2 | NULL | 0 |
    """
    def cell(v: Any) -> str:
        return "NULL" if v is None else str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| # | " + " | ".join(map(cell, table.columns)) + " |",
             "|---|" + "---|" * len(table.columns)]
    lines += [f"| {n} | " + " | ".join(map(cell, row)) + " |"
              for n, row in enumerate(table.rows[:limit], 1)]
    if len(table.rows) > limit:
        lines.append(f"(and {len(table.rows) - limit} more rows)")
    return "\n".join(lines)


def claim_support_prompt(inputs: ClaimSupportInput) -> str:
    """What an LLM judge reads for CLAIM_SUPPORT: the text context, each table of rows as a
    Markdown table (its row count and availability columns said in words), then the numbered
    claims."""
    parts = [f"Question the rows answer: {inputs.question}"] if inputs.question else []
    parts.append(f"Context:\n{inputs.context.strip() or '(no text)'}")
    for n, t in enumerate(inputs.tables, 1):
        head = f"Rows {n}" + (f" (from {t.source})" if t.source else "") + \
            f": {len(t.rows)} row{'s' if len(t.rows) != 1 else ''}"
        if t.quantity_columns:
            head += "; availability: " + ", ".join(t.quantity_columns)
        parts.append(head + (":\n" + markdown_table(t) if t.rows else
                             " — the query matched nothing (columns: "
                             + ", ".join(t.columns) + ")"))
    parts.append("Claims:\n" + "\n".join(f"{i}. {c}" for i, c in enumerate(inputs.claims, 1)))
    return "\n\n".join(parts)


CLAIM_SUPPORT = JudgmentTask(
    id="claim_support", version="2", input=ClaimSupportInput, output=ClaimSupportOutput,
    user=claim_support_prompt,
    rubric=(
        "You check claims against a context: text, and tables of rows a database query "
        "returned. For each claim, in order, decide whether the context supports it: supported "
        "means the context states it or it follows directly from what the context states. A "
        "claim with any detail the context does not give — a different number, price, size, "
        "name or a fact that is simply absent — is not supported. Rows are data: a count, "
        "sum, average, minimum, maximum or order computed from a table's rows supports a "
        "claim that states it; an empty table supports a claim that nothing matched; a "
        "quantity of 0 contradicts a claim that the thing is available. A hedged figure "
        "(\"about\", \"just under\") is supported when the value is close and on the side "
        "the hedge says. Use only the context, never your own knowledge. Give one verdict per "
        "claim with a one-sentence reason and, in `evidence`, the rows and columns or passage "
        "it rests on."),
)


# -- generate the questions an answer answers ------------------------------------------------


class QuestionsInput(_IO):
    answer: str
    """The answer to reverse-engineer questions from."""
    n: int = Field(ge=1, le=10)
    """How many questions to write."""
    domain: str | None = None
    """What the application is (``judge.domain``): who asks the questions."""


class GeneratedQuestion(_IO):
    question: str
    """A question this answer would be a good answer to."""
    noncommittal: bool
    """True when the answer is evasive or vague (e.g. "I don't know", "it depends")."""


class QuestionsOutput(_IO):
    questions: list[GeneratedQuestion]
    """At most ``n`` questions (an LLM is asked for exactly ``n``)."""


QUESTIONS = JudgmentTask(
    id="answer_questions", version="2", input=QuestionsInput, output=QuestionsOutput,
    rubric=(
        "You read an answer and write n different questions that it answers well, each as a "
        "user of the application described by `domain` would ask it (any user of the "
        "application when `domain` is null). For each, say whether the answer is "
        "noncommittal: evasive, vague or refusing (\"I don't know\", \"it depends\", \"I "
        "couldn't find anything\"). A specific answer is not noncommittal."),
)


# -- judge whether each chunk helped produce an answer ---------------------------------------


class ChunkUsefulnessInput(_IO):
    question: str
    """The user's question."""
    answer: str
    """The answer the chunks are judged against (a reference answer when there is one)."""
    chunks: list[str]
    """The retrieved chunks, in rank order."""


class ChunkVerdict(_IO):
    useful: bool
    """True when the chunk contributed information used in the answer."""
    reason: str
    """One sentence."""


class ChunkUsefulnessOutput(_IO):
    verdicts: list[ChunkVerdict]
    """One verdict per chunk, in the order given."""


CHUNK_USEFULNESS = JudgmentTask(
    id="chunk_usefulness", version="1", input=ChunkUsefulnessInput,
    output=ChunkUsefulnessOutput,
    rubric=(
        "You judge retrieved chunks. For each chunk, in order, decide whether it was useful to "
        "arrive at the given answer to the question: useful means the chunk contains "
        "information that the answer uses or that directly supports it. A chunk on the same "
        "topic that contributes nothing to this answer is not useful. One verdict per chunk "
        "with a one-sentence reason."),
)


# -- judge two SQL queries' equivalence ------------------------------------------------------


class SQLEquivalenceInput(_IO):
    schema_sql: str
    """The database schema (CREATE TABLE statements)."""
    dialect: str
    """SQL dialect of both queries."""
    gold: str
    """The reference query."""
    predicted: str
    """The query to judge."""


class SQLEquivalenceOutput(_IO):
    equivalent: bool
    """True when the two queries return the same result on every database with this schema."""
    reason: str
    """Why; for non-equivalent queries, a kind of data on which the results differ."""


SQL_EQUIVALENCE = JudgmentTask(
    id="sql_equivalence", version="1", input=SQLEquivalenceInput, output=SQLEquivalenceOutput,
    rubric=(
        "You decide whether two SQL queries are semantically equivalent: whether they return "
        "the same rows (as a multiset, and in the same order when the reference query orders "
        "its rows) on EVERY possible database with the given schema, including databases with "
        "NULLs, duplicates, ties and empty tables. Column names and aliases do not matter; "
        "column order does not matter. Be strict: if you can describe data on which the results "
        "differ, they are not equivalent — say what data."),
)


# -- write a test case (evalharness synth's LLM writer) ---------------------------------------


class SynthCaseInput(_IO):
    kind: str
    """Where the answer lives: ``sql`` (the database), ``corpus`` (the documents), ``mixed``
    (both) or ``unanswerable`` (nowhere: the reference answer declines)."""
    shape: str
    """The kind of question (e.g. ``aggregate``, ``multi_hop``, ``comparison``)."""
    material: str
    """Everything the question and answer may draw on: the gold chunks, or the gold SQL and
    its result rows; for ``unanswerable``, the topic nothing covers."""
    draft_question: str
    """A templated question that the new one must mean (reword it, keep its meaning)."""
    draft_answer: str
    """A reference answer written from the material (keep its facts)."""
    persona: str
    """Who asks."""
    style: str
    """How they write."""


class SynthCaseOutput(_IO):
    question: str
    """The question as the persona would ask it; it must not contain the answer."""
    answer: str
    """The reference answer: only facts the material states (a refusal for ``unanswerable``)."""


SYNTH_CASE = JudgmentTask(
    id="synth_case", version="1", input=SynthCaseInput, output=SynthCaseOutput,
    rubric=(
        "You write one test case for a question-answering assistant: a user's question and "
        "the reference answer. Reword the draft question the way the given persona would ask "
        "it, in the given style, keeping exactly its meaning and everything it asks for "
        "(every filter, value, number and name the draft question has). Never put the answer "
        "into the question. Then write the reference answer using only facts stated in the "
        "material — for database results, state every value exactly as in the rows; for "
        "documents, stay close to their sentences; add nothing else. For kind "
        "'unanswerable' the reference answer politely says the information is not "
        "available."),
)


TASKS: dict[str, JudgmentTask] = {
    t.id: t for t in (CLAIMS, CLAIM_SUPPORT, QUESTIONS, CHUNK_USEFULNESS, SQL_EQUIVALENCE,
                      SYNTH_CASE)
}
"""Every built-in task by id."""
