"""Generator evaluators: is the answer grounded, relevant, correct, and are its figures right?

Evaluators and their metrics:

- ``faithfulness`` (judge): supported claims / all claims, against the context the generator
  was given (retrieved chunks and SQL rows rendered as text); unsupported claims listed.
- ``answer_relevancy`` (judge + embeddings): mean cosine similarity between the question and
  ``n`` questions the judge writes from the answer; noncommittal answers score 0.
- ``answer_correctness`` (judge): claim-level precision, recall and F1 against the reference.
- ``numeric_consistency`` (no judge): share of the answer's figures found in the rows and
  chunks given (or the question); mismatches listed.
- ``answer_present`` and ``generation_cost``: the answer exists; latency and tokens reported.
- ``refusal`` (no judge): 1 when the answer declines exactly when it should (``gold.refusal``,
  else answerable when the reference answer is not itself a refusal); a deterministic
  English pattern matcher tells a refusal from a negative answer (:mod:`.refusal`).

A step that reports no figure, a case without a reference (or refusal label), an answer
without claims: each is an error with its reason, never a silent 0 or NaN.
"""

from __future__ import annotations

import re

from evalharness import MetricValue, hookimpl
from evalharness.registry import Evaluator
from evalharness_generation.judged import (
    CORRECTNESS,
    FaithfulnessSettings,
    RelevancySettings,
    answer_correctness,
    answer_relevancy,
    faithfulness,
)
from evalharness_generation.numbers import numeric_consistency
from evalharness_generation.refusal import refusal_value
from evalharness_generation.sources import generator_sources

__version__ = "0.1.0"

_WORD = re.compile(r"\w+", re.UNICODE)


def word_count(text: str | None) -> int:
    """Words in an answer (runs of letters and digits).

    >>> word_count("The navy coat costs 129.00 €."), word_count(None)
    (6, 0)
    """
    return len(_WORD.findall(text or ""))


@hookimpl
def register_evaluators(register):
    register(Evaluator(
        name="answer_present", component="generator", metrics=["answer_present", "answer_words"],
        description="answer_present: 1 if the answer has any non-blank text; "
                    "answer_words: its length in words"))
    register(Evaluator(
        name="generation_cost", component="generator", metrics=["latency_ms", "total_tokens"],
        description="latency and tokens the generator step reported for each case"))
    register(Evaluator(
        name="faithfulness", component="generator", metrics=["faithfulness"],
        settings=FaithfulnessSettings, needs_judge=True,
        description="supported claims / claims, against the rows and chunks given"))
    register(Evaluator(
        name="answer_relevancy", component="generator", metrics=["answer_relevancy"],
        settings=RelevancySettings, needs_judge=True,
        description="similarity of the question to questions written from the answer"))
    register(Evaluator(
        name="answer_correctness", component="generator", metrics=CORRECTNESS,
        needs_judge=True,
        description="claim-level precision, recall and F1 against the reference answer"))
    register(Evaluator(
        name="numeric_consistency", component="generator", metrics=["numeric_consistency"],
        description="share of the answer's figures found in the rows and chunks given"))
    register(Evaluator(
        name="refusal", component="generator", metrics=["refusal"],
        description="1 when the answer declines (says it cannot answer, or that the data "
                    "does not cover the question) exactly when the case expects it "
                    "(gold.refusal, else answerable when gold.answer is no refusal)"))


@hookimpl
def evaluate_generator(evaluator, batch, settings, context):
    if evaluator == "faithfulness":
        return faithfulness(batch, context)
    if evaluator == "answer_relevancy":
        return answer_relevancy(batch, settings, context)
    if evaluator == "answer_correctness":
        return answer_correctness(batch, context)
    if evaluator == "numeric_consistency":
        return [{"numeric_consistency": numeric_consistency(
            step.answer or "", generator_sources(case, step, context), case.question)}
            for case, step in batch]
    if evaluator == "refusal":
        return [{"refusal": refusal_value(case, step)} for case, step in batch]
    if evaluator == "answer_present":
        return [{"answer_present": MetricValue.of(bool((step.answer or "").strip())),
                 "answer_words": MetricValue.of(word_count(step.answer))}
                for _, step in batch]
    if evaluator == "generation_cost":
        rows = []
        for _, step in batch:
            latency = (MetricValue.of(step.latency_ms) if step.latency_ms is not None else
                       MetricValue.failed("the generator step reports no latency_ms"))
            tokens = (MetricValue.of(step.usage.total_tokens, prompt=step.usage.prompt_tokens,
                                     completion=step.usage.completion_tokens)
                      if step.usage is not None else
                      MetricValue.failed("the generator step reports no token usage"))
            rows.append({"latency_ms": latency, "total_tokens": tokens})
        return rows
    return None
