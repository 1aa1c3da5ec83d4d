"""Generator evaluators: is there an answer, and what did producing it cost?

First metrics: ``answer_present`` and ``answer_words`` (evaluator ``answer_present``), and the
per-case ``latency_ms`` and ``total_tokens`` the generator step reported (evaluator
``generation_cost``); a step that reports no figure gets an error, never a silent 0.
"""

from __future__ import annotations

import re

from evalharness import MetricValue, hookimpl
from evalharness.registry import Evaluator

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


@hookimpl
def evaluate_generator(evaluator, batch):
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
