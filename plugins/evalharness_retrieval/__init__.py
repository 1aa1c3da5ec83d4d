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

from evalharness import Evaluator, Init, Metric, Oracle, hookimpl
from evalharness.errors import NoOracle
from evalharness.registry import run_evaluator
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

__version__ = "0.2.0"

__all__ = ["ContextPrecisionSettings", "ContextRecallSettings", "RankingSettings", "RunError",
           "evaluate", "ranking_metrics"]


RANKING = [
    Metric("precision@{k}", description="share of the top K that is relevant"),
    Metric("recall@{k}", verdict=">= 0.5",
           description="share of the relevant chunks in the top K"),
    Metric("f1@{k}", description="harmonic mean of precision@K and recall@K"),
    Metric("hit_rate@{k}", description="1 when a relevant chunk is in the top K"),
    Metric("mrr", description="reciprocal rank of the first relevant chunk"),
    Metric("mrr@{k}", description="reciprocal rank of the first relevant chunk in the top K"),
    Metric("map", description="average precision over every relevant chunk"),
    Metric("map@{k}", description="average precision within the top K"),
    Metric("r_precision", description="precision at R, the number of relevant chunks"),
    Metric("ndcg@{k}", description="normalised discounted cumulative gain of the top K"),
    Metric("dcg@{k}", range=(0, None),
           description="discounted cumulative gain of the top K (unnormalised)"),
]
"""The ``ranking`` evaluator's declarations (the cutoff K is part of the name)."""


@hookimpl
def register_evaluators(register):
    register(Evaluator(
        name="ranking", component="retriever", metrics=RANKING, names=ranking_metrics,
        settings=RankingSettings, evaluate=evaluate_ranking,
        init=Init(entry="ranking: {k: [1, 3]}",
                  comment="recall@K, mrr; with an LLM judge add context_precision",
                  gate=">= 0.9"),
        description="trec_eval's ranking measures from graded relevance labels: precision, "
                    "recall, F1, hit rate, MRR, MAP, R-precision, nDCG, DCG"))
    register(Evaluator(
        name="context_precision", component="retriever",
        metrics=[Metric("context_precision@{k}", reference_free=True,
                        description="rank-weighted share of useful chunks in the top K")],
        names=context_precision_metrics, settings=ContextPrecisionSettings,
        needs_judge=True, evaluate=context_precision,
        description="rank-weighted share of useful chunks in the top K: from labels, else "
                    "the judge's chunk-usefulness verdicts (1 request per case)"))
    register(Evaluator(
        name="context_recall", component="retriever",
        metrics=[Metric("context_recall", verdict=">= 0.5", precedence=1,
                        question="Did the retriever find everything the answer needs?",
                        description="share of the relevant chunks (or reference claims) found")],
        settings=ContextRecallSettings, needs_judge=True, evaluate=context_recall,
        description="share of relevant chunks retrieved (labels), else of the reference "
                    "answer's claims the chunks support (2 requests per case)"))

def evaluate_retriever(evaluator, batch, settings=None, context=None):
    """Run one of this plugin's evaluators by name on a batch of ``(case, step)`` pairs (for
    notebooks and tests; a run calls each evaluator's ``evaluate`` itself); ``None`` for a
    name it does not have."""
    return run_evaluator(register_evaluators, evaluator, batch, settings, context)


evaluate_retriever_with_context = evaluate_retriever
"""The same (evalharness 0.1 had two functions)."""


def perfect_retriever(case, context):
    """A perfect retriever returns the gold relevant chunks, most relevant first (ties by id),
    with their texts from the corpus (for oracle headroom)."""
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
def register_oracles(register):
    register(Oracle(kind="retriever", output=perfect_retriever,
                    description="the gold relevant chunks, most relevant first"))


@hookimpl
def register_commands(cli):
    from evalharness_retrieval.cli import trec_command

    cli.add_command(trec_command)
