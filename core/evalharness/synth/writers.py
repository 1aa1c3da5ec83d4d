"""Writers word a seed's question and reference answer; one interface, two writers.

* :class:`OfflineWriter` — templates per shape, answers rendered from the gold rows or taken
  from the gold chunks' sentences. No key, no network; the same seed gives the same text.
* the LLM writer (:mod:`evalharness.synth.llm`) asks the judge backend's model, with personas,
  question styles and difficulty as options, cached like judgments.

A writer never changes the gold: it gets the seed (gold SQL and rows, gold chunks and their
sentences) and returns text, or an error that makes the case a counted rejection.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from evalharness.synth.seeds import MIXED, SQL, UNANSWERABLE, Seed


@dataclass
class Written:
    question: str | None
    answer: str | None
    error: str | None = None
    prompt_sha256: str | None = None
    raw: str | None = None


class Writer(Protocol):
    name: str
    version: str

    def write_many(self, seeds: Sequence[Seed], rng: random.Random) -> list[Written]:
        """One :class:`Written` per seed, in order."""
        ...

    def identity(self) -> dict[str, Any]:
        """What the provenance records of this writer (name, version, model, options)."""
        ...


def fmt(value: Any) -> str:
    """A value as an answer states it: floats with two decimals unless whole."""
    if value is None:
        return "none"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:.2f}"
    return str(value)


def listing(items: Sequence[str]) -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def lower_first(text: str) -> str:
    """``Caring for cashmere`` -> ``caring for cashmere``; ``UK sizes`` stays."""
    if len(text) > 1 and text[0].isupper() and not text[1].isupper():
        return text[0].lower() + text[1:]
    return text


def _sql_question(seed: Seed, rng: random.Random) -> str:
    f = seed.facts
    shape, agg = seed.shape, f.get("agg")
    if shape == "filter" and "bound" in f:
        return rng.choice([f"Which {f['nouns']} have a {f['measure']} below {fmt(f['bound'])}?",
                           f"List the {f['nouns']} whose {f['measure']} is under "
                           f"{fmt(f['bound'])}."])
    if shape == "filter":
        return rng.choice([f"Which {f['nouns']} have {f['column']} {f['value']}?",
                           f"What are the {f['label']}s of the {f['nouns']} whose {f['column']} "
                           f"is {f['value']}?",
                           f"Show me every {f['noun']} with {f['column']} {f['value']}."])
    if shape == "aggregate":
        scope = (f" whose {f['column']} is {f['value']}" if "value" in f else "")
        if agg == "count":
            return rng.choice([f"How many {f['nouns']} have {f['column']} {f['value']}?",
                               f"What is the number of {f['nouns']}{scope}?"])
        word = {"avg": "average", "max": "highest", "min": "lowest", "sum": "total"}[agg]
        every = scope or (" of all" if agg in ("avg", "sum") else " among all")
        if scope:
            return f"What is the {word} {f['measure']} of the {f['nouns']}{scope}?"
        return f"What is the {word} {f['measure']}{every} {f['nouns']}?"
    if shape == "group_by":
        return rng.choice([f"How many {f['nouns']} are there for each {f['column']}?",
                           f"Count the {f['nouns']} per {f['column']}."])
    if shape == "having":
        return f"Which {f['columns']} have more than {f['k']} {f['nouns']}?"
    if shape == "order_limit":
        word = "highest" if f["highest"] else "lowest"
        if f["top"] == 1:
            return rng.choice([f"Which {f['noun']} has the {word} {f['measure']}?",
                               f"What is the {f['noun']} with the {word} {f['measure']}?"])
        return f"What are the {f['top']} {f['nouns']} with the {word} {f['measure']}?"
    if shape == "ties":
        word = "highest" if f["highest"] else "lowest"
        return f"Which {f['nouns']} share the {word} {f['measure']}?"
    if shape == "nested" and "parents" in f:
        return rng.choice([f"Which {f['parents']} have no {f['nouns']}?",
                           f"List the {f['parents']} without any {f['nouns']}."])
    if shape == "nested" and "value" in f:
        return (f"Which {f['nouns']} whose {f['column']} is {f['value']} have a "
                f"{f['measure']} above the average {f['measure']} of those {f['nouns']}?")
    if shape == "nested":
        return (f"Which {f['nouns']} have a {f['measure']} above the average {f['measure']} "
                f"of all {f['nouns']}?")
    if shape == "null":
        if agg == "count":
            return f"How many {f['nouns']} have no {f['column']} recorded?"
        return f"Which {f['nouns']} have no {f['column']} recorded?"
    if shape == "join":
        if agg == "count":
            return f"How many {f['nouns']} does the {f['parent']} {f['parent_value']} have?"
        if "parent_column" in f:
            return (f"Which {f['nouns']} belong to a {f['parent']} whose {f['parent_column']} "
                    f"is {f['parent_value']}?")
        return rng.choice([f"Which {f['nouns']} belong to the {f['parent']} "
                           f"{f['parent_value']}?",
                           f"List the {f['nouns']} of the {f['parent']} {f['parent_value']}."])
    raise ValueError(f"no template for SQL shape {shape!r}")


def sql_answer(seed: Seed) -> str:
    """The reference answer, rendered from the gold rows only."""
    f, rows = seed.facts, seed.rows or []
    if len(rows) == 1 and len(rows[0]) == 1 and seed.shape in ("aggregate", "null", "join") \
            and f.get("agg"):
        value = fmt(rows[0][0])
        agg = f["agg"]
        if agg == "count":
            return "There is 1." if value == "1" else f"There are {value}."
        word = {"avg": "average", "max": "highest", "min": "lowest", "sum": "total"}[agg]
        return f"The {word} {f['measure']} is {value}."
    if rows and len(rows[0]) == 2:
        return "; ".join(f"{fmt(a)}: {fmt(b)}" for a, b in rows) + "."
    values = [fmt(r[0]) for r in rows]
    if len(values) == 1:
        return f"{values[0]}."
    # rows that share a name (two colours of one product) are said once, with their count
    counts = Counter(values)
    said = [v if counts[v] == 1 else f"{v} ({counts[v]} of them)" for v in dict.fromkeys(values)]
    return f"There are {len(values)}: {listing(said)}."


def _corpus_question(seed: Seed, rng: random.Random) -> str:
    f = seed.facts
    source = f["source"]
    if seed.shape in ("single", "out_of_scope"):
        topic = f["topic"]
        if topic.endswith("?") and seed.shape == "single":
            return topic
        topic = lower_first(topic.rstrip("?.!"))
        return rng.choice([f"What does {source} say about {topic}?",
                           f"Do you have any advice on {topic}?",
                           f"Could you give me some tips on {topic}?",
                           f"What should I know about {topic}?"])
    if seed.shape == "multi_hop":
        return rng.choice([f"Summarise everything {source} says about {f['term']}.",
                           f"What does {source} say about {f['term']}, across all its "
                           "articles?"])
    if seed.shape == "comparison":
        if any(t.endswith("?") for t in f["topics"]):  # a title that is itself a question
            a, b = f["topics"]
            return (f"How does the advice in {source}'s article \u201c{a}\u201d differ from "
                    f"its article \u201c{b}\u201d?")
        a, b = (lower_first(t.rstrip("?.!")) for t in f["topics"])
        return f"How does the advice on {a} differ from the advice on {b}?"
    if seed.shape == "which_of":
        real, fake = lower_first(f["topic"].rstrip("?.!")), f["other"]
        x, y = (real, fake) if f["first"] else (fake, real)
        return f"Which of these does {source} cover: {x} or {y}? What does it say?"
    raise ValueError(f"no template for corpus shape {seed.shape!r}")


def corpus_answer(seed: Seed) -> str:
    if seed.shape == "which_of":
        return f"{seed.facts['topic'].rstrip('?.!')}: {seed.sentences[0]}"
    return " ".join(seed.sentences)


REFUSAL = "I'm sorry, I don't have any information about {topic}."


class OfflineWriter:
    """Templates and extraction: deterministic for a seed (see the module docstring)."""

    name = "offline"
    version = "1"

    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version}

    def write_many(self, seeds: Sequence[Seed], rng: random.Random) -> list[Written]:
        return [self.write(seed, rng) for seed in seeds]

    def write(self, seed: Seed, rng: random.Random) -> Written:
        if seed.source == SQL:
            return Written(_sql_question(seed, rng), sql_answer(seed))
        if seed.source == UNANSWERABLE:
            return Written(_corpus_question(seed, rng),
                           REFUSAL.format(topic=seed.facts["topic"]))
        if seed.source == MIXED:
            sql, corpus = seed.parts
            first = self.write(sql, rng)
            second = self.write(corpus, rng)
            return Written(f"{first.question} Also, {lower_first(second.question)}",
                           f"{first.answer} {second.answer}")
        return Written(_corpus_question(seed, rng), corpus_answer(seed))
