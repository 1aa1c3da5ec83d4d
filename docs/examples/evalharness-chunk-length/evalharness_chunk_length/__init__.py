"""evalharness-chunk-length: an example evalharness plugin that checks how long retrieved chunks are.

It registers one retriever evaluator, ``chunk_length``, with one setting, ``max_chars``
(default 600), and two metrics per case:

- ``mean_chunk_chars``: mean length, in characters, of the chunks the retriever returned;
- ``within_limit``: the fraction of those chunks that are at most ``max_chars`` long.

The texts come from ``step.texts`` when the trace records them, else from the scenario's
corpus (``context.corpus``). A case whose texts are known from neither, or whose retriever
returned nothing, gets ``MetricValue.failed(reason)`` for both metrics.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from evalharness import Evaluator, Metric, MetricValue, RetrieverStep, hookimpl

__version__ = "0.1.0"

EVALUATOR = "chunk_length"
METRICS = ["mean_chunk_chars", "within_limit"]


class ChunkLengthSettings(BaseModel):
    """Settings of the ``chunk_length`` evaluator."""

    model_config = ConfigDict(extra="forbid")

    max_chars: int = Field(default=600, ge=1)
    """Longest chunk, in characters, that counts as within the limit."""


def chunk_texts(step: RetrieverStep, corpus: Mapping) -> list[str] | str:
    """The texts of the retrieved chunks, in rank order, or the reason they are unknown.

    ``corpus`` maps chunk ids to objects with a ``text`` attribute (``context.corpus``).

    >>> chunk_texts(RetrieverStep(ids=["a"], texts=["hello"]), {})
    ['hello']
    >>> chunk_texts(RetrieverStep(ids=["a", "b"]), {})
    'the step records no texts and the scenario has no corpus'
    """
    if step.texts is not None:
        return list(step.texts)
    if not corpus:
        return "the step records no texts and the scenario has no corpus"
    missing = [i for i in step.ids if i not in corpus]
    if missing:
        return f"the step records no texts and the corpus lacks chunk ids: {', '.join(missing[:5])}"
    return [corpus[i].text for i in step.ids]


def chunk_length_metrics(texts: list[str], max_chars: int) -> dict[str, MetricValue]:
    """Both metrics for one case's retrieved texts.

    >>> row = chunk_length_metrics(["x" * 100, "y" * 300], max_chars=250)
    >>> row["mean_chunk_chars"].value, row["within_limit"].value
    (200.0, 0.5)
    >>> chunk_length_metrics([], max_chars=250)["within_limit"].error
    'the retriever returned no chunks'
    """
    if not texts:
        reason = "the retriever returned no chunks"
        return {m: MetricValue.failed(reason) for m in METRICS}
    lengths = [len(t) for t in texts]
    within = sum(n <= max_chars for n in lengths)
    return {
        "mean_chunk_chars": MetricValue.of(sum(lengths) / len(lengths), lengths=lengths),
        "within_limit": MetricValue.of(within / len(lengths), max_chars=max_chars,
                                       over_limit=len(lengths) - within),
    }


METRIC_DECLARATIONS = [
    Metric("mean_chunk_chars", range=(0, None), direction="neutral", unit="chars",
           description="mean length of the retrieved chunks"),
    Metric("within_limit", verdict=">= 0.8",
           question="Are the retrieved chunks short enough to quote?",
           description="share of the retrieved chunks at most max_chars long"),
]
"""What the plugin says about each metric: the core reads nothing else about them."""


def chunk_length(batch, settings, context):
    """The ``chunk_length`` evaluator: both metrics for each ``(case, step)`` of the batch."""
    rows = []
    for _case, step in batch:
        texts = chunk_texts(step, context.corpus)
        if isinstance(texts, str):
            rows.append({m: MetricValue.failed(texts) for m in METRICS})
        else:
            rows.append(chunk_length_metrics(texts, settings.max_chars))
    return rows


@hookimpl
def register_evaluators(register):
    register(Evaluator(
        name=EVALUATOR, component="retriever", metrics=METRIC_DECLARATIONS,
        settings=ChunkLengthSettings, evaluate=chunk_length,
        description="mean length of the retrieved chunks, and the share at most max_chars long"))
