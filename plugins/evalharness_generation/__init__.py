"""Generator evaluators: is the answer grounded, relevant, correct, and are its figures right?

Evaluators and their metrics:

- ``faithfulness`` (judge): supported claims / all claims, against the context the generator
  was given (retrieved chunks as text; SQL rows as typed rows, which the offline judge checks
  claim by claim); unsupported claims listed. ``faithfulness_all``: the weakest claim's
  support, so one unsupported claim fails the answer (for lists, where every line counts).
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

from pydantic import BaseModel, ConfigDict

from evalharness import Evaluator, Init, LabelGold, Metric, MetricValue, Price, hookimpl
from evalharness.registry import run_evaluator
from evalharness_generation.judged import (
    CORRECTNESS,
    FAITHFULNESS,
    FaithfulnessSettings,
    RelevancySettings,
    answer_correctness,
    answer_relevancy,
    faithfulness,
)
from evalharness_generation.numbers import numeric_consistency
from evalharness_generation.refusal import refusal_value
from evalharness_generation.sources import generator_sources

__version__ = "0.2.0"

_WORD = re.compile(r"\w+", re.UNICODE)


def word_count(text: str | None) -> int:
    """Words in an answer (runs of letters and digits).

    >>> word_count("The navy coat costs 129.00 €."), word_count(None)
    (6, 0)
    """
    return len(_WORD.findall(text or ""))


ANSWER = LabelGold(field="answer", step="answer", confirms=False)
"""A reviewer's correction of any generator metric becomes the reference answer."""

REFERENCE = LabelGold(field="answer", step="answer")
"""On a correctness metric, a ``yes`` also makes the answer itself the reference."""

METRICS = {
    "answer_present": Metric(
        "answer_present", reference_free=True, verdict=">= 1", precedence=1, gold=ANSWER,
        description="1 when the answer has any non-blank text"),
    "answer_words": Metric(
        "answer_words", reference_free=True, range=(0, None), direction="neutral",
        unit="words",
        description="the answer's length in words"),
    "latency_ms": Metric(
        "latency_ms", reference_free=True, range=(0, None), direction="lower", unit="ms",
        description="the generator step's latency"),
    "total_tokens": Metric(
        "total_tokens", reference_free=True, range=(0, None), direction="lower",
        unit="tokens",
        description="tokens the generator step used"),
    "cost": Metric(
        "cost", reference_free=True, range=(0, None), direction="lower", unit="currency",
        description="what the generator step's tokens cost at the prices given "
                    "(generation_cost: {prices: {input, output}} per million tokens)"),
    "faithfulness": Metric(
        "faithfulness", reference_free=True, verdict=">= 0.5", gold=ANSWER,
        item_labels=("claim_support",),
        question="Is every statement of the answer supported by its contexts?",
        description="the answer says what its context says (supported claims / claims)"),
    "faithfulness_all": Metric(
        "faithfulness_all", reference_free=True, gold=ANSWER,
        question="Is every statement of the answer supported by its contexts?",
        description="the weakest claim's support: one unsupported claim fails the answer"),
    "answer_relevancy": Metric(
        "answer_relevancy", reference_free=True, verdict=">= 0.1", gold=ANSWER,
        question="Does the answer address the question?",
        description="similarity of the question to questions written from the answer"),
    "correctness_precision": Metric(
        "correctness_precision", gold=REFERENCE,
        question="Is everything the answer says also in the reference answer?",
        description="share of the answer's claims the reference supports"),
    "correctness_recall": Metric(
        "correctness_recall", gold=REFERENCE,
        question="Does the answer say everything the reference answer says?",
        description="share of the reference's claims the answer supports"),
    "correctness_f1": Metric(
        "correctness_f1", end_to_end=">= 0.5", gold=REFERENCE,
        question="Does the answer say what the reference answer says?",
        description="the answer says what the reference answer says (claim F1)"),
    "numeric_consistency": Metric(
        "numeric_consistency", reference_free=True, gold=ANSWER,
        description="share of the answer's figures found in the rows and chunks given"),
    "refusal": Metric(
        "refusal", verdict=">= 1", cases={"gold.refusal": True}, gold=ANSWER,
        question="Does the answer decline exactly when it should?",
        description="1 when the answer declines exactly when the case expects it"),
}
"""Every generator metric's declaration."""


def _declared(*names: str) -> list[Metric]:
    return [METRICS[name] for name in names]


def answer_present(batch):
    """The ``answer_present`` evaluator."""
    return [{"answer_present": MetricValue.of(bool((step.answer or "").strip())),
             "answer_words": MetricValue.of(word_count(step.answer))}
            for _, step in batch]


class CostSettings(BaseModel):
    """Settings of the ``generation_cost`` evaluator."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    prices: Price | None = None
    """The generator model's prices; given, the evaluator also computes ``cost``."""


def generation_cost(batch, settings: CostSettings):
    """The ``generation_cost`` evaluator: latency and tokens as the step reports them, and
    with ``prices`` what the tokens cost."""
    rows = []
    prices = settings.prices
    for _, step in batch:
        latency = (MetricValue.of(step.latency_ms) if step.latency_ms is not None else
                   MetricValue.failed("the generator step reports no latency_ms"))
        usage = step.usage
        tokens = (MetricValue.of(usage.total_tokens, prompt=usage.prompt_tokens,
                                 completion=usage.completion_tokens)
                  if usage is not None else
                  MetricValue.failed("the generator step reports no token usage"))
        row = {"latency_ms": latency, "total_tokens": tokens}
        if prices is not None:
            row["cost"] = (MetricValue.of(prices.cost(usage), prices=prices.model_dump())
                if usage is not None else
                MetricValue.failed("the generator step reports no token usage to price"))
        rows.append(row)
    return rows


def numeric(batch, context):
    """The ``numeric_consistency`` evaluator."""
    return [{"numeric_consistency": numeric_consistency(
        step.answer or "", generator_sources(case, step, context), case.question)}
        for case, step in batch]


def refusal(batch):
    """The ``refusal`` evaluator."""
    return [{"refusal": refusal_value(case, step)} for case, step in batch]


@hookimpl
def register_evaluators(register):
    register(Evaluator(
        name="answer_present", component="generator",
        metrics=_declared("answer_present", "answer_words"), evaluate=answer_present,
        init=Init(entry="answer_present"),
        description="answer_present: 1 if the answer has any non-blank text; "
                    "answer_words: its length in words"))
    register(Evaluator(
        name="generation_cost", component="generator",
        metrics=_declared("latency_ms", "total_tokens"), evaluate=generation_cost,
        settings=CostSettings,
        declare=lambda settings: _declared("cost") if settings.prices is not None else [],
        description="latency and tokens the generator step reported for each case; with "
                    "prices: {input, output} per million tokens, their cost"))
    register(Evaluator(
        name="faithfulness", component="generator", metrics=_declared(*FAITHFULNESS),
        settings=FaithfulnessSettings, needs_judge=True,
        evaluate=faithfulness,
        init=Init(entry="faithfulness", needs_upstream=True, gate=">= 0.6"),
        description="supported claims / claims, against the rows and chunks given; "
                    "faithfulness_all: the weakest claim's support"))
    register(Evaluator(
        name="answer_relevancy", component="generator", metrics=_declared("answer_relevancy"),
        settings=RelevancySettings, needs_judge=True, evaluate=answer_relevancy,
        description="similarity of the question to questions written from the answer"))
    register(Evaluator(
        name="answer_correctness", component="generator", metrics=_declared(*CORRECTNESS),
        needs_judge=True, evaluate=answer_correctness,
        init=Init(entry="answer_correctness", gate=">= 0.6"),
        description="claim-level precision, recall and F1 against the reference answer"))
    register(Evaluator(
        name="numeric_consistency", component="generator",
        metrics=_declared("numeric_consistency"), evaluate=numeric,
        description="share of the answer's figures found in the rows and chunks given"))
    register(Evaluator(
        name="refusal", component="generator", metrics=_declared("refusal"), evaluate=refusal,
        description="1 when the answer declines (says it cannot answer, or that the data "
                    "does not cover the question) exactly when the case expects it "
                    "(gold.refusal, else answerable when gold.answer is no refusal)"))


def evaluate_generator(evaluator, batch, settings=None, context=None):
    """Run one of this plugin's evaluators by name on a batch of ``(case, GeneratorStep)``
    pairs (for notebooks and tests; a run calls each evaluator's ``evaluate`` itself).

    >>> from evalharness import Case, GeneratorStep
    >>> evaluate_generator("answer_present", [(Case(id="q", question="?"),
    ...                                        GeneratorStep(answer="Yes."))])[0]["answer_words"].value
    1.0
    """
    return run_evaluator(register_evaluators, evaluator, batch, settings, context)
