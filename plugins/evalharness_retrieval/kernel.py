"""The ranking kernel: every measure of a whole run at once, with numpy, exactly as trec_eval.

A run is reduced to a few flat arrays (:class:`Hits`): per query, how many documents were
retrieved and how many are relevant; per retrieved document that can change a measure (judged
relevant, or with a positive grade), its query, its rank and its grade; per query, the
positive grades of the judgments (for the ideal DCG). Every measure is then a handful of
``bincount`` calls over those arrays — no Python loop over queries or documents.

The expensive part is turning dictionaries into arrays, so it is done with iterators that
run in C (``chain``, ``map``, ``np.fromiter``): scores are read once into one array; the
judged documents (usually a few per query) are looked up in the run, not the other way
round; each query's scores are sorted once (queries of equal length as one 2-D block) and
the rank of a judged document is found by a vectorised binary search. Equal scores are
ordered by docid, descending, as trec_eval does; only the documents tied with a judged one
are ever compared by docid.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain, compress, repeat
from operator import methodcaller

import numpy as np

from evalharness_retrieval.measures import SUMMED, Measure

NAN = float("nan")
UNJUDGED = -1
"""The grade an unjudged document gets: below every relevance level, no gain."""

_values = methodcaller("values")
_get = operator.attrgetter("get")
_BLOCK = 1 << 21
"""Elements per block when a step needs temporary arrays proportional to query lengths."""


class RunError(ValueError):
    """The run or the qrels cannot be evaluated; the message names the query."""


@dataclass(frozen=True)
class Hits:
    """A run reduced to what the measures need. Hits are sorted by (query, rank)."""

    n: int
    """Number of queries."""
    num_ret: np.ndarray
    """Per query: documents retrieved."""
    num_rel: np.ndarray
    """Per query: judged documents with grade >= level."""
    q: np.ndarray
    """Per hit (a retrieved document with grade >= level or grade > 0): its query."""
    rank: np.ndarray
    """Per hit: its rank, from 1."""
    grade: np.ndarray
    """Per hit: its grade."""
    ideal_q: np.ndarray
    """Per judged document with a positive grade, sorted by (query, grade descending): query."""
    ideal_grade: np.ndarray
    """... and grade."""
    level: int
    """Relevance level: grade >= level is relevant."""


# -- building Hits ---------------------------------------------------------------------------


def _judged(judgments: Sequence[dict], n: int, level: int, names: Sequence[str]):
    """Flat judged grades and their query indices, relevant counts, the ideal ordering."""
    jl = np.fromiter(map(len, judgments), np.int64, n)
    total = int(jl.sum())
    jgrade = np.fromiter(chain.from_iterable(map(_values, judgments)), np.int64, total)
    check = np.fromiter(chain.from_iterable(map(_values, judgments)), np.float64, total)
    if not np.array_equal(check, jgrade):
        bad = int(np.flatnonzero(check != jgrade)[0])
        q = int(np.searchsorted(np.cumsum(jl), bad, side="right"))
        raise RunError(f"query {names[q]!r}: relevance grades must be integers (got "
                       f"{check[bad]!r})")
    jq = np.repeat(np.arange(n, dtype=np.int64), jl)
    num_rel = np.bincount(jq[jgrade >= level], minlength=n)
    positive = jgrade > 0
    iq, ig = jq[positive], jgrade[positive]
    order = np.lexsort((-ig, iq))
    return jq, jgrade, num_rel, iq[order], ig[order]


def _check_level(level: int) -> int:
    if isinstance(level, bool) or not isinstance(level, int | np.integer) or level < 0:
        raise RunError(f"relevance_level must be an integer >= 0, got {level!r}")
    return int(level)


def hits_from_lists(rankings: Sequence[Sequence[str]], judgments: Sequence[dict], level: int,
                    names: Sequence[str]) -> Hits:
    """Hits of ranked lists (best first); a docid listed twice in one ranking is an error.

    >>> h = hits_from_lists([["a", "b", "c"]], [{"c": 2, "a": 0, "z": 1}], 1, ["q"])
    >>> h.rank.tolist(), h.grade.tolist(), h.num_rel.tolist(), h.ideal_grade.tolist()
    ([3], [2], [2], [2, 1])
    """
    level = _check_level(level)
    n = len(rankings)
    lens = np.fromiter(map(len, rankings), np.int64, n)
    distinct = np.fromiter(map(len, map(set, rankings)), np.int64, n)
    if not np.array_equal(lens, distinct):
        q = int(np.flatnonzero(lens != distinct)[0])
        seen, dupes = set(), []
        for d in rankings[q]:
            if d in seen and d not in dupes:
                dupes.append(d)
            seen.add(d)
        raise RunError(f"query {names[q]!r}: the ranking lists "
                       f"{', '.join(map(repr, dupes[:5]))} more than once; each docid may "
                       "appear once per query")
    _, jgrade, num_rel, ideal_q, ideal_grade = _judged(judgments, n, level, names)
    total = int(lens.sum())
    grades = np.fromiter(
        chain.from_iterable(map(map, map(_get, judgments), rankings, repeat(repeat(UNJUDGED)))),
        np.int64, total)
    hit = np.flatnonzero((grades >= level) | (grades > 0))
    starts = np.cumsum(lens) - lens
    q = np.searchsorted(starts, hit, side="right") - 1
    # An empty query shares its start with the next one: searchsorted picks the last of them,
    # which is the non-empty one the hit belongs to.
    return Hits(n=n, num_ret=lens, num_rel=num_rel, q=q.astype(np.int64),
                rank=hit - starts[q] + 1, grade=grades[hit], ideal_q=ideal_q,
                ideal_grade=ideal_grade, level=level)


def hits_from_scores(runs: Sequence[dict], judgments: Sequence[dict], level: int,
                     names: Sequence[str]) -> Hits:
    """Hits of ``{docid: score}`` runs, ordered as trec_eval orders them: score descending,
    equal scores by docid descending.

    >>> h = hits_from_scores([{"a": 1.0, "b": 2.0, "c": 1.0}], [{"a": 1, "c": 1}], 1, ["q"])
    >>> h.rank.tolist()   # b (2.0), then c before a: equal scores, docid descending
    [2, 3]
    """
    level = _check_level(level)
    n = len(runs)
    lens = np.fromiter(map(len, runs), np.int64, n)
    total = int(lens.sum())
    try:
        scores = np.fromiter(chain.from_iterable(map(_values, runs)), np.float64, total)
    except (TypeError, ValueError):
        scores = None
    if scores is None or np.isnan(scores).any():
        _bad_score(runs, names)
    jq, jgrade, num_rel, ideal_q, ideal_grade = _judged(judgments, n, level, names)
    # Look the judged documents that can matter up in the run (usually far fewer than the
    # retrieved ones): relevant ones and those with a positive grade.
    wanted = np.flatnonzero((jgrade >= level) | (jgrade > 0))
    mask = np.zeros(jq.size, dtype=bool)
    mask[wanted] = True
    flags = mask.tolist()
    jl = np.bincount(jq, minlength=n).tolist()
    jscore = np.fromiter(
        map(dict.get, compress(chain.from_iterable(map(repeat, runs, jl)), flags),
            compress(chain.from_iterable(judgments), flags), repeat(NAN)),
        np.float64, wanted.size)
    found = ~np.isnan(jscore)
    hit = wanted[found]
    hq, hscore, hgrade = jq[hit], jscore[found], jgrade[hit]
    starts = np.cumsum(lens) - lens
    ascending = _sorted_rows(-scores, lens, starts)
    lo, hi = starts[hq], starts[hq] + lens[hq]
    first = _search(ascending, lo, hi, -hscore, right=False)
    rank = first - lo + 1
    # The hit's score is in its row (it was retrieved): another document shares it exactly
    # when the sorted row holds that score twice, i.e. at the next position too.
    after = np.minimum(first + 1, max(ascending.size - 1, 0))
    tied = np.flatnonzero((first + 1 < hi) & (ascending[after] == -hscore))
    if tied.size:
        rank[tied] += _docid_ties(runs, judgments, scores, lens, starts, hq[tied],
                                  hscore[tied], hit[tied])
    order = np.lexsort((rank, hq))
    return Hits(n=n, num_ret=lens, num_rel=num_rel, q=hq[order], rank=rank[order],
                grade=hgrade[order], ideal_q=ideal_q, ideal_grade=ideal_grade, level=level)


def _bad_score(runs: Sequence[dict], names: Sequence[str]) -> None:
    for name, run in zip(names, runs, strict=True):
        for doc, score in run.items():
            try:
                value = float(score)
            except (TypeError, ValueError):
                raise RunError(f"query {name!r}, docid {doc!r}: the score {score!r} is not a "
                               "number") from None
            if value != value:
                raise RunError(f"query {name!r}, docid {doc!r}: the score is NaN; give every "
                               "retrieved document a number") from None
    raise RunError("a score is not a number")  # pragma: no cover - found above


def _sorted_rows(values: np.ndarray, lens: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """``values`` with each query's segment sorted ascending, in place; equal-length queries
    are sorted together as one 2-D block."""
    distinct = np.unique(lens)
    if distinct.size == 1:
        width = int(distinct[0])
        if width > 1:
            values.reshape(-1, width).sort(axis=1)
        return values
    for width in distinct.tolist():
        if width < 2:
            continue
        rows = np.flatnonzero(lens == width)
        step = max(1, _BLOCK // width)
        for b in range(0, rows.size, step):
            idx = starts[rows[b:b + step], None] + np.arange(width)
            block = values[idx]
            block.sort(axis=1)
            values[idx] = block
    return values


def _search(a: np.ndarray, lo: np.ndarray, hi: np.ndarray, v: np.ndarray, *, right: bool
            ) -> np.ndarray:
    """Vectorised ``searchsorted`` of each ``v[i]`` in the sorted slice ``a[lo[i]:hi[i]]``
    (returned as an index into ``a``).

    >>> a = np.array([1.0, 2.0, 2.0, 3.0, 0.0, 5.0])
    >>> _search(a, np.array([0, 0, 4]), np.array([4, 4, 6]), np.array([2.0, 2.0, 5.0]),
    ...         right=False).tolist()
    [1, 1, 5]
    >>> _search(a, np.array([0, 4]), np.array([4, 6]), np.array([2.0, 5.0]), right=True).tolist()
    [3, 6]
    """
    lo, hi = lo.copy(), hi.copy()
    if a.size == 0:
        return lo
    last = a.size - 1
    while True:
        active = lo < hi
        if not active.any():
            return lo
        mid = (lo + hi) >> 1
        at = a[np.minimum(mid, last)]
        go_right = (at <= v) if right else (at < v)
        lo = np.where(active & go_right, mid + 1, lo)
        hi = np.where(active & ~go_right, mid, hi)


def _docid_ties(runs, judgments, scores, lens, starts, tq, tscore, tjudged) -> np.ndarray:
    """For each tied hit: how many documents of its query have its score and a greater docid
    (trec_eval puts them first)."""
    jkeys = list(chain.from_iterable(judgments))
    rows = np.unique(tq)
    rkeys = list(chain.from_iterable(runs[r] for r in rows.tolist()))
    rstart = np.cumsum(lens[rows]) - lens[rows]
    out = np.zeros(tq.size, dtype=np.int64)
    width = lens[tq]
    cum = np.cumsum(width)
    b0 = 0
    while b0 < tq.size:  # blocks of about _BLOCK compared documents
        b1 = max(b0 + 1, int(np.searchsorted(cum, cum[b0] - width[b0] + _BLOCK, "right")))
        w = width[b0:b1]
        owner = np.repeat(np.arange(b0, b1), w)
        local = np.arange(int(w.sum())) - np.repeat(np.cumsum(w) - w, w)
        same = scores[starts[tq[owner]] + local] == tscore[owner]
        owner, local = owner[same], local[same]
        keys_at = rstart[np.searchsorted(rows, tq[owner])] + local
        peers = map(rkeys.__getitem__, keys_at.tolist())
        mine = map(jkeys.__getitem__, tjudged[owner].tolist())
        greater = np.fromiter(map(operator.gt, peers, mine), bool, owner.size)
        out += np.bincount(owner[greater], minlength=tq.size)
        b0 = b1
    return out


# -- measures --------------------------------------------------------------------------------


def compute(h: Hits, measures: Sequence[Measure]) -> dict[str, np.ndarray]:
    """Per-query values (float arrays of length ``h.n``) of each measure.

    >>> h = hits_from_lists([["c7", "c3", "c9", "c1", "c5"]],
    ...                     [{"c1": 0, "c3": 3, "c5": 2, "c7": 0, "c9": 1}], 1, ["q"])
    >>> from evalharness_retrieval.measures import parse_measures
    >>> out = compute(h, parse_measures(["P_3", "recall_3", "recip_rank", "ndcg_cut_3",
    ...                                  "ndcg_exp2_cut_3"]))
    >>> {k: round(float(v[0]), 3) for k, v in out.items()}
    {'P_3': 0.667, 'recall_3': 0.667, 'recip_rank': 0.5, 'ndcg_cut_3': 0.502, \
'ndcg_exp2_cut_3': 0.523}
    """
    n = h.n
    rel = h.grade >= h.level
    rq, rrank = h.q[rel], h.rank[rel]
    kth = np.arange(1, rq.size + 1) - np.searchsorted(rq, rq, side="left")
    prec = kth / rrank
    num_rel = h.num_rel.astype(np.float64)
    denom = np.where(h.num_rel > 0, num_rel, 1.0)
    found: dict[int, np.ndarray] = {}

    def count_at(k: int) -> np.ndarray:
        if k not in found:
            found[k] = np.bincount(rq[rrank <= k], minlength=n).astype(np.float64)
        return found[k]

    first = kth == 1
    first_rank = np.zeros(n, dtype=np.int64)
    first_rank[rq[first]] = rrank[first]
    rr = np.zeros(n)
    np.divide(1.0, first_rank, out=rr, where=first_rank > 0)
    gained = h.grade > 0
    gq, grank, ggrade = h.q[gained], h.rank[gained], h.grade[gained]
    ipos = np.arange(1, h.ideal_q.size + 1) - np.searchsorted(h.ideal_q, h.ideal_q, "left")

    def dcg(k: int, exp2: bool, ideal: bool) -> np.ndarray:
        q, r, g = (h.ideal_q, ipos, h.ideal_grade) if ideal else (gq, grank, ggrade)
        keep = r <= k
        gain = np.ldexp(1.0, g[keep]) - 1.0 if exp2 else g[keep].astype(np.float64)
        return _sum(q[keep], gain / np.log2(r[keep] + 1.0), n)

    out: dict[str, np.ndarray] = {}
    for m in measures:
        f, k = m.family, m.k
        if f == "num_q":
            v = np.ones(n)
        elif f == "num_ret":
            v = h.num_ret.astype(np.float64)
        elif f == "num_rel":
            v = num_rel
        elif f == "num_rel_ret":
            v = np.bincount(rq, minlength=n).astype(np.float64)
        elif f == "P":
            v = count_at(k) / k
        elif f == "recall":
            v = count_at(k) / denom
        elif f == "F1":
            p, r = count_at(k) / k, count_at(k) / denom
            v = np.zeros(n)
            np.divide(2 * p * r, p + r, out=v, where=(p + r) > 0)
        elif f in ("success", "hit"):
            v = (count_at(k) > 0).astype(np.float64)
        elif f == "recip_rank":
            v = rr
        elif f == "recip_rank_cut":
            v = np.where((first_rank > 0) & (first_rank <= k), rr, 0.0)
        elif f == "map":
            v = _sum(rq, prec, n) / denom
        elif f == "map_cut":
            keep = rrank <= k
            v = _sum(rq[keep], prec[keep], n) / denom
        elif f == "Rprec":
            v = np.bincount(rq[rrank <= h.num_rel[rq]], minlength=n) / denom
        elif f in ("ndcg_cut", "ndcg_exp2_cut"):
            exp2 = f == "ndcg_exp2_cut"
            d, ideal = dcg(k, exp2, False), dcg(k, exp2, True)
            v = d.copy()
            np.divide(d, ideal, out=v, where=ideal > 0)
        elif f in ("dcg_cut", "dcg_exp2_cut"):
            v = dcg(k, f == "dcg_exp2_cut", False)
        elif f == "context_precision":
            keep = rrank <= k
            total = _sum(rq[keep], prec[keep], n)
            v = np.zeros(n)
            np.divide(total, count_at(k), out=v, where=count_at(k) > 0)
        else:  # pragma: no cover - parse_measures admits no other family
            raise ValueError(f"unknown measure family {f!r}")
        out[m.name] = v
    return out


def _sum(index: np.ndarray, weights: np.ndarray, n: int) -> np.ndarray:
    """Per-query sums of ``weights``, added in array order (rank order: trec_eval's order)."""
    return np.bincount(index, weights=weights, minlength=n).astype(np.float64, copy=False)


def summarise(values: dict[str, np.ndarray], n: int) -> dict[str, float]:
    """trec_eval's summary line: the mean over queries, the sum for counts (``num_*``)."""
    return {name: float(v.sum()) if name in SUMMED else (float(v.sum() / n) if n else 0.0)
            for name, v in values.items()}
