"""The standalone API: trec_eval's measures on qrels and run dictionaries, as pytrec_eval takes
them, computed by the vectorised kernel."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import repeat

import numpy as np

from evalharness_retrieval.kernel import (
    RunError,
    compute,
    hits_from_lists,
    hits_from_scores,
    summarise,
)
from evalharness_retrieval.measures import parse_measures


def evaluate(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float] | Sequence[str]],
    measures: Iterable[str] | str,
    relevance_level: int = 1,
    per_query: bool = False,
    *,
    complete: bool = False,
) -> dict[str, float] | dict[str, dict[str, float]]:
    """Evaluate a run against relevance judgments, with trec_eval's semantics.

    :param qrels: ``{qid: {docid: grade}}``, integer grades (negative grades count as
        unjudged).
    :param run: ``{qid: {docid: score}}`` (ordered by score descending, equal scores by docid
        descending, as trec_eval does) or ``{qid: [docid, ...]}`` ranked lists, best first.
    :param measures: names such as ``P_5``, ``recall_10``, ``map``, ``map_cut_10``,
        ``recip_rank``, ``ndcg_cut_10``, ``Rprec``, ``success_10``, and ours: ``F1_10``,
        ``hit_10``, ``recip_rank_cut_10``, ``ndcg_exp2_cut_10``, ``dcg_cut_10``,
        ``dcg_exp2_cut_10``, ``context_precision_10``; counts ``num_q``, ``num_ret``,
        ``num_rel``, ``num_rel_ret``. A bare family (``P``) gives trec_eval's default cutoffs,
        ``P.5,10`` chosen ones, ``all`` everything (docs/metrics/retrieval.md).
    :param relevance_level: a document is relevant when its grade is at least this (>= 0).
        Graded measures (DCG, nDCG) use the grades themselves, as trec_eval's ``ndcg_cut``.
    :param per_query: return ``{qid: {measure: value}}`` instead of the summary.
    :param complete: like ``trec_eval -c``: also evaluate judged queries missing from the run
        (as empty rankings). Otherwise, as trec_eval, only queries that are in the run and have
        at least one judgment are evaluated.
    :returns: ``{measure: value}``: the mean over the evaluated queries (the sum for the
        ``num_*`` counts), or per-query values.
    :raises ValueError: an unknown measure, a docid listed twice in one ranking, a score that
        is not a number, a grade that is not an integer (the message names the query).

    >>> qrels = {"q1": {"c1": 0, "c3": 3, "c5": 2, "c7": 0, "c9": 1}}
    >>> run = {"q1": ["c7", "c3", "c9", "c1", "c5"]}
    >>> out = evaluate(qrels, run, ["P_3", "recall_3", "recip_rank", "ndcg_cut_3",
    ...                             "ndcg_exp2_cut_3"])
    >>> {k: round(v, 3) for k, v in out.items()}
    {'P_3': 0.667, 'recall_3': 0.667, 'recip_rank': 0.5, 'ndcg_cut_3': 0.502, \
'ndcg_exp2_cut_3': 0.523}
    """
    qids, values = evaluate_arrays(qrels, run, measures, relevance_level, complete=complete)
    if not per_query:
        return summarise(values, len(qids))
    names = list(values)
    columns = [v.tolist() for v in values.values()]
    return {q: dict(zip(names, row, strict=True))
            for q, row in zip(qids, zip(*columns, strict=True), strict=True)}


def evaluate_arrays(qrels, run, measures, relevance_level: int = 1, *, complete: bool = False
                    ) -> tuple[list, dict[str, np.ndarray]]:
    """:func:`evaluate`'s work: the evaluated query ids, and per measure a float array of
    their values (in that order)."""
    specs = parse_measures(measures)
    if not specs:
        raise ValueError("give at least one measure, e.g. ['map', 'ndcg_cut_10']")
    # As trec_eval: judged queries (an empty judgment set is none) that are in the run, or
    # with `complete` every judged query. C-level iteration, no Python loop per query.
    qids = list(filter(qrels.get, qrels if complete else run))
    judgments = list(map(qrels.__getitem__, qids))
    if not all(map(isinstance, judgments, repeat(dict))):
        judgments = [_as_dict(j, q, "qrels") for q, j in zip(qids, judgments, strict=True)]
    rankings = list(map(run.get, qids))
    if not all(map(isinstance, rankings, repeat(dict | type(None)))):
        mappings = [isinstance(r, Mapping) for r in rankings if r is not None]
        if all(mappings):
            rankings = [dict(r) if r is not None else None for r in rankings]
        elif any(mappings):
            q = next(q for q, r in zip(qids, rankings, strict=True) if isinstance(r, Mapping))
            raise RunError(f"query {q!r}: the run mixes {{docid: score}} dictionaries and "
                           "ranked lists; use one form for every query")
    if all(map(isinstance, rankings, repeat(dict | type(None)))):
        hits = hits_from_scores([r if r is not None else {} for r in rankings], judgments,
                                relevance_level, qids)
    else:
        for q, r in zip(qids, rankings, strict=True):
            if r is not None and (isinstance(r, str | bytes) or not isinstance(r, Sequence)):
                raise RunError(f"query {q!r}: expected {{docid: score}} or a list of docids, "
                               f"got {type(r).__name__}")
        hits = hits_from_lists([r if r is not None else () for r in rankings], judgments,
                               relevance_level, qids)
    return qids, compute(hits, specs)


def _as_dict(value, qid, what: str) -> dict:
    if isinstance(value, dict):
        return value
    if isinstance(value, Mapping):
        return dict(value)
    raise RunError(f"query {qid!r}: {what} must map docids to grades, got "
                   f"{type(value).__name__}")
