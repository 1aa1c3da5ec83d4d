"""The generator: extractive — the SQL rows rendered with a sentence template, then the
sentences of the retrieved chunks most similar to the question."""

from __future__ import annotations

import re
import time
from typing import Any

import numpy as np

from evalharness.models import (
    GeneratorStep,
    RetrieverStep,
    Text2SQLStep,
    Usage,
)

from .data import Corpus
from .retriever import expand_query
from .text import approx_tokens
from .text2sql import Slots

_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+")


def sentence_vector(corp: Corpus, sentence: str) -> np.ndarray:
    """``corp.vector(sentence)`` for a sentence of a chunk, computed once per sentence and
    corpus (the corpus has a few hundred; every blog answer scores those of its top chunks)."""
    known: dict[str, np.ndarray] = corp.__dict__.setdefault("_sentence_vectors", {})
    vec = known.get(sentence)
    if vec is None:
        vec = corp.vector(sentence)
        vec.flags.writeable = False
        if len(known) < 8192:
            known[sentence] = vec
    return vec


def fmt_value(value: Any) -> str:
    """Floats with two decimals (prices), everything else as text."""
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def render_rows(columns: list[str], rows: list[list[Any]]) -> list[str]:
    """One ``col: value; ...`` line per row (the SQL context as the generator sees it)."""
    return [
        "; ".join(f"{c}: {fmt_value(v)}" for c, v in zip(columns, row, strict=False))
        for row in rows
    ]


def _product_phrase(row: dict[str, Any]) -> str:
    text = str(row.get("name", ""))
    if row.get("colour"):
        text = f"{row['colour']} {text}"
    if row.get("brand"):
        text += f" by {row['brand']}"
    details = [f"{fmt_value(row['price'])} €"] if "price" in row else []
    if "stock" in row:
        details.append(f"{row['stock']} in stock in that size")
    return text + (f" ({', '.join(details)})" if details else "")


def sql_sentence(slots: Slots, step: Text2SQLStep) -> str:
    """A templated sentence stating the SQL result."""
    if step.error or step.rows is None:
        return "I could not look that up in the catalog."
    if not step.rows or all(v is None for v in step.rows[0]):
        return "I found nothing in the catalog matching that."
    columns = step.columns or []
    first = [fmt_value(v) for v in step.rows[0]]
    rows = [dict(zip(columns, r, strict=False)) for r in step.rows]
    intent = slots.intent
    templates = {
        "count": "We have {0} matching products.",
        "count_orders": "There were {0} matching orders.",
        "average_price": "The average price is {0} € across {1} products.",
        "revenue": "The revenue was {0} € from {1} orders.",
        "stock_units": "There are {0} units in stock.",
        "best_seller": "The top product is the {1} {0} with {2} units.",
        "top_group": "{0} has the most, with {1}.",
    }
    if intent in templates:
        return templates[intent].format(*first)
    if intent in {"cheapest", "most_expensive"}:
        label = "cheapest" if intent == "cheapest" else "most expensive"
        return f"The {label} is the {_product_phrase(rows[0])}."
    if intent == "sizes":
        return "In stock in sizes: " + ", ".join(f"{r[0]} ({r[1]})" for r in step.rows) + "."
    if intent == "brands":
        return "Brands: " + ", ".join(str(r[0]) for r in step.rows) + "."
    if intent == "count_by":
        return "; ".join(f"{r[0]}: {r[1]}" for r in step.rows) + "."
    if intent == "list_orders":
        ids = ", ".join(str(r[0]) for r in step.rows[:10])
        return f"{len(step.rows)} orders match: {ids}."
    shown = ", ".join(_product_phrase(r) for r in rows[:5])
    more = f" and {len(rows) - 5} more" if len(rows) > 5 else ""
    lead = "sold out" if intent == "sold_out" else "matching"
    noun = "product" if len(rows) == 1 else "products"
    return f"I found {len(rows)} {lead} {noun}: the {shown}{more}."


def best_sentences(question: str, texts: list[str], corp: Corpus, n: int = 2) -> list[str]:
    """The ``n`` sentences of ``texts`` most similar to the question."""
    qv = corp.vector(expand_query(question))
    scored: list[tuple[float, int, str]] = []
    for ti, text in enumerate(texts):
        for sentence in _SENTENCE_RE.split(text.strip()):
            if len(sentence.split()) < 4:
                continue
            # prefer higher-ranked chunks
            score = float(sentence_vector(corp, sentence) @ qv) - 0.02 * ti
            scored.append((score, len(scored), sentence.strip()))
    scored.sort(key=lambda t: (-t[0], t[1]))
    return [s for _, _, s in scored[:n]]


def generate(
    question: str,
    slots: Slots | None,
    sql_step: Text2SQLStep | None,
    ret_step: RetrieverStep | None,
    corp: Corpus | None,
) -> GeneratorStep:
    """Compose the answer from the SQL rows and the best sentences of the top chunks."""
    start = time.perf_counter()
    contexts: list[str] = []
    parts: list[str] = []
    if sql_step is not None and slots is not None:
        contexts.extend(render_rows(sql_step.columns or [], sql_step.rows or []))
        parts.append(sql_sentence(slots, sql_step))
    if ret_step is not None and corp is not None:
        texts = ret_step.texts or []
        contexts.extend(texts)
        parts.extend(best_sentences(question, texts[:3], corp))
    answer = " ".join(p for p in parts if p) or "Sorry, I don't know."
    usage = Usage(
        prompt_tokens=approx_tokens(question) + sum(approx_tokens(c) for c in contexts),
        completion_tokens=approx_tokens(answer),
    )
    return GeneratorStep(
        answer=answer,
        contexts=contexts,
        usage=usage,
        latency_ms=(time.perf_counter() - start) * 1000.0,
    )
