"""Retriever evaluators and trec_eval-exact ranking measures, vectorised over a whole run.

Evaluators (docs/metrics/retrieval.md defines every measure):

- ``ranking``: precision@K, recall@K, f1@K, hit_rate@K, mrr, mrr@K, map, map@K,
  r_precision, ndcg@K and dcg@K (gain ``exp2`` or ``linear``) from graded labels, with
  trec_eval's conventions (equal scores ordered by chunk id descending, unjudged = not
  relevant, recall and AP over every relevant chunk, P@K over K, no relevant chunk -> 0).
- ``context_precision``: context_precision@K, from labels or the judge's chunk-usefulness
  verdicts.
- ``context_recall``: from labels, or the reference answer's claims the chunks support.

Also usable on its own: :func:`evaluate` takes pytrec_eval-style dictionaries and trec_eval's
measure names, and ``evalharness trec QRELS RUN`` reads TREC files and prints trec_eval's
lines.
"""

from __future__ import annotations

from evalharness import hookimpl
from evalharness.errors import NoOracle
from evalharness.registry import Evaluator
from evalharness_retrieval.api import evaluate
from evalharness_retrieval.contexts import (
    ContextPrecisionSettings,
    ContextRecallSettings,
    context_precision,
    context_precision_metrics,
    context_recall,
)
from evalharness_retrieval.kernel import RunError
from evalharness_retrieval.ranking import RankingSettings, evaluate_ranking, ranking_metrics

__version__ = "0.1.0"

__all__ = ["ContextPrecisionSettings", "ContextRecallSettings", "RankingSettings", "RunError",
           "evaluate", "ranking_metrics"]


@hookimpl
def register_evaluators(register):
    register(Evaluator(
        name="ranking", component="retriever", metrics=ranking_metrics,
        settings=RankingSettings,
        description="trec_eval's ranking measures from graded relevance labels: precision, "
                    "recall, F1, hit rate, MRR, MAP, R-precision, nDCG, DCG"))
    register(Evaluator(
        name="context_precision", component="retriever", metrics=context_precision_metrics,
        settings=ContextPrecisionSettings, needs_judge=True,
        description="rank-weighted share of useful chunks in the top K: from labels, else "
                    "the judge's chunk-usefulness verdicts (1 request per case)"))
    register(Evaluator(
        name="context_recall", component="retriever", metrics=["context_recall"],
        settings=ContextRecallSettings, needs_judge=True,
        description="share of relevant chunks retrieved (labels), else of the reference "
                    "answer's claims the chunks support (2 requests per case)"))


@hookimpl
def evaluate_retriever(evaluator, batch, settings):
    if evaluator != "ranking":
        return None
    return evaluate_ranking(batch, settings)


@hookimpl(specname="evaluate_retriever")
def evaluate_retriever_with_context(evaluator, batch, settings, context):
    """The evaluators that need the context (corpus, judge, traces)."""
    if evaluator == "context_precision":
        return context_precision(batch, settings, context)
    if evaluator == "context_recall":
        return context_recall(batch, settings, context)
    return None


@hookimpl
def oracle_output(kind, case, context):
    """A perfect retriever returns the gold relevant chunks, most relevant first (ties by id),
    with their texts from the corpus (for oracle headroom)."""
    if kind != "retriever":
        return None
    relevant = case.gold.relevant
    if relevant is None:
        raise NoOracle("the case has no relevance labels (gold.relevant)")
    ids = sorted((c for c, grade in relevant.items() if grade > 0),
                 key=lambda c: (-relevant[c], c))
    missing = [c for c in ids if c not in context.corpus]
    if missing:
        raise NoOracle(f"gold chunk {missing[0]!r} is not in the scenario's corpus, so its "
                       "text cannot be given to the generator")
    return {"ids": ids, "texts": [context.corpus[c].text for c in ids]}


@hookimpl
def register_commands(cli):
    from evalharness_retrieval.cli import trec_command

    cli.add_command(trec_command)
