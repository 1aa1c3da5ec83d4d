"""How far a judge agrees with people: AUC, kappas, rank correlations, thresholds, sign tests and
their case-level bootstrap intervals, with numpy only.

Every function takes plain sequences (lists, tuples, numpy arrays) and returns plain Python
values, so results go straight into JSON. A statistic that is undefined on its input (one class
missing, a constant column, no rows) is NaN; :func:`estimate` turns NaN into ``None``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from evalharness.stats import CHUNK_CELLS, percentile_ci

NAN = float("nan")
SIGN_EXACT_MAX = 10_000  # up to this many decisive pairs the sign test sums binomial coefficients
WEIGHTS = ("linear", "quadratic")


# -- helpers ---------------------------------------------------------------------------------

def _paired(a: Sequence, b: Sequence, names: str) -> None:
    if len(a) != len(b):
        first, second = names.split()
        raise ValueError(f"{first} has {len(a)} values but {second} has {len(b)}: "
                         "pass one value of each per case")


def _floats(values: Sequence[float], name: str) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    if x.ndim != 1:
        raise ValueError(f"{name} must be a flat sequence of numbers, got shape {x.shape}")
    if np.isnan(x).any():
        raise ValueError(f"{name} contains NaN: drop those cases before computing agreement")
    return x


def _bools(values: Sequence[bool], name: str) -> np.ndarray:
    y = np.asarray(values)
    if y.ndim != 1:
        raise ValueError(f"{name} must be a flat sequence of booleans, got shape {y.shape}")
    return y.astype(bool)


def _column(values: Sequence) -> np.ndarray:
    """A 1-D array of the values without changing them: numbers and all-string lists become
    numpy arrays of their type, anything else (mixed types, tuples, None) an object array (so
    ``[1, "a"]`` never becomes ``["1", "a"]``)."""
    if isinstance(values, np.ndarray) and values.ndim == 1:
        return values
    values = list(values)
    arr = np.asarray(values) if values else np.empty(0)
    if arr.ndim == 1 and (arr.dtype.kind in "biuf"
                          or (arr.dtype.kind == "U" and all(isinstance(v, str) for v in values))):
        return arr
    return np.fromiter(values, dtype=object, count=len(values))


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value it holds (JSON-serialisable); anything else as is."""
    return value.item() if isinstance(value, np.generic) else value


def _factorize(arr: np.ndarray) -> tuple[list, np.ndarray]:
    """The distinct values of ``arr`` (as Python values) and each element's index among them;
    sorted when the values sort, else in first-seen order (mixed types)."""
    try:
        uniq, inverse = np.unique(arr, return_inverse=True)
        return [_plain(v) for v in uniq], inverse.ravel()
    except TypeError:
        index: dict = {}
        inverse = np.fromiter((index.setdefault(_plain(v), len(index)) for v in arr),
                              dtype=np.int64, count=arr.size)
        return list(index), inverse


def _table(a: Sequence, b: Sequence, categories: Sequence | None,
           names: str) -> tuple[list, np.ndarray]:
    """Categories and the k × k count matrix, rows indexed by ``a`` and columns by ``b``.

    By default the categories are the values that occur in either column, sorted when they
    sort, else in first-seen order; a value outside given ``categories`` is an error.
    """
    _paired(a, b, names)
    (va, ia), (vb, ib) = _factorize(_column(a)), _factorize(_column(b))
    if categories is None:
        cats = list(dict.fromkeys(va + vb))
        try:
            cats.sort()
        except TypeError:
            pass
    else:
        cats = [_plain(c) for c in categories]
        if len(set(cats)) != len(cats):
            raise ValueError(f"categories {cats!r} repeat a value: list each category once")
    index = {c: i for i, c in enumerate(cats)}
    codes = []
    for name, values, inverse in zip(names.split(), (va, vb), (ia, ib), strict=True):
        missing = [v for v in values if v not in index]
        if missing:
            raise ValueError(f"{name} has the value {missing[0]!r}, which is not one of the "
                             f"categories {cats!r}: add it to the categories")
        codes.append(np.array([index[v] for v in values], dtype=np.int64)[inverse])
    k = len(cats)
    matrix = np.bincount(codes[0] * k + codes[1], minlength=k * k).reshape(k, k)
    return cats, matrix


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n, tied values sharing the average of the ranks they span."""
    n = x.size
    order = np.argsort(x)  # tied values share one rank: no need for a stable sort
    new = _runs(x[order])
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], n)
    ranks = np.empty(n)
    ranks[order] = ((starts + ends + 1) / 2)[np.cumsum(new) - 1]
    return ranks


def _runs(*columns: np.ndarray) -> np.ndarray:
    """A mask of the rows of sorted columns where a run of equal rows starts."""
    new = np.ones(columns[0].size, dtype=bool)
    if new.size:
        new[1:] = np.logical_or.reduce([col[1:] != col[:-1] for col in columns])
    return new


def _tied_pairs(new: np.ndarray) -> int:
    """How many pairs fall within runs, given the mask of where runs start (``_runs``): the sum
    of t(t-1)/2 over runs of length t."""
    t = np.diff(np.append(np.flatnonzero(new), new.size))
    return int((t * (t - 1) // 2).sum())


def _inversions(v: np.ndarray) -> int:
    """How many pairs i < j have ``v[i] > v[j]`` (v: non-negative integers), in O(n log n log m).

    A pair is counted at the highest bit where the two values differ: among values sharing the
    bits above it, each value with a 0 there counts the earlier values with a 1.
    """
    total = 0
    for b in range(int(v.max()).bit_length() - 1 if v.size else -1, -1, -1):
        prefix = v >> (b + 1)
        order = np.argsort(prefix, kind="stable")
        p = prefix[order]
        bit = (v[order] >> b) & 1
        ones_before = np.cumsum(bit) - bit
        start = np.r_[True, p[1:] != p[:-1]]
        ones_before -= ones_before[start][np.cumsum(start) - 1]
        total += int(ones_before[bit == 0].sum())
    return total


# -- binary scores against binary labels -----------------------------------------------------

def roc_auc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """Area under the ROC curve: the chance that a random positive case scores higher than a
    random negative one, ties counting 1/2 — the Mann-Whitney U of the positives divided by
    ``n_pos * n_neg``. NaN when either class is missing.

    >>> roc_auc([0.1, 0.4, 0.35, 0.8], [False, False, True, True])  # 3 of 4 pairs ordered
    0.75
    >>> roc_auc([0.5, 0.5, 0.9], [False, True, True])  # (1/2 + 1) of 2 pairs
    0.75
    >>> roc_auc([0.2, 0.7], [True, True])
    nan
    """
    _paired(scores, labels, "scores labels")
    s, y = _floats(scores, "scores"), _bools(labels, "labels")
    n_pos = int(np.count_nonzero(y))
    n_neg = y.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return NAN
    u = float(_ranks(s)[y].sum()) - n_pos * (n_pos + 1) / 2
    return u / (n_pos * n_neg)


def balanced_accuracy(predicted: Sequence[bool], truth: Sequence[bool]) -> float:
    """The mean of the recall of each class of ``truth``: (TPR + TNR) / 2. A judge that always
    says the same thing scores 0.5 whatever the class balance. NaN when ``truth`` lacks a class.

    >>> round(balanced_accuracy([True, True, False, False], [True, False, False, False]), 4)
    0.8333
    >>> balanced_accuracy([True, False], [True, True])
    nan
    """
    _paired(predicted, truth, "predicted truth")
    p, t = _bools(predicted, "predicted"), _bools(truth, "truth")
    n_pos = int(np.count_nonzero(t))
    n_neg = t.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return NAN
    tp = int(np.count_nonzero(p & t))
    tn = int(np.count_nonzero(~p & ~t))
    return (tp / n_pos + tn / n_neg) / 2


def accuracy(predicted: Sequence[Hashable], truth: Sequence[Hashable]) -> float:
    """The fraction of cases where ``predicted`` equals ``truth``; NaN with no cases.

    >>> accuracy([1, 2, 3, 4], [1, 2, 3, 3])
    0.75
    >>> accuracy([], [])
    nan
    """
    _paired(predicted, truth, "predicted truth")
    p, t = _column(predicted), _column(truth)
    if p.size == 0:
        return NAN
    if p.dtype.kind != t.dtype.kind and not (p.dtype.kind in "biuf" and t.dtype.kind in "biuf"):
        p, t = p.astype(object), t.astype(object)
    return int(np.count_nonzero(p == t)) / p.size


def best_threshold(scores: Sequence[float], labels: Sequence[bool],
                   current: float | None = None) -> tuple[float, float]:
    """The threshold ``t`` that maximises the balanced accuracy of ``score >= t`` against
    ``labels``, and that balanced accuracy.

    The candidates are the distinct scores and ``max(scores) + 1`` (nothing passes). Among
    equally good candidates the one closest to ``current`` wins, then the lowest (so with no
    ``current``, the lowest). ``(nan, nan)`` when a class of ``labels`` is missing.

    >>> s, y = [0.1, 0.4, 0.35, 0.8], [False, False, True, True]
    >>> best_threshold(s, y)  # t = 0.35 and t = 0.8 both give (1 + 1/2) / 2
    (0.35, 0.75)
    >>> best_threshold(s, y, current=0.7)
    (0.8, 0.75)
    """
    _paired(scores, labels, "scores labels")
    s, y = _floats(scores, "scores"), _bools(labels, "labels")
    n_pos = int(np.count_nonzero(y))
    n_neg = y.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return NAN, NAN
    values, inverse = np.unique(s, return_inverse=True)
    inverse = inverse.ravel()
    k = values.size
    # cases at or above each candidate, positives and negatives; the last candidate passes none
    tp = np.append(np.bincount(inverse[y], minlength=k)[::-1].cumsum()[::-1], 0)
    fp = np.append(np.bincount(inverse[~y], minlength=k)[::-1].cumsum()[::-1], 0)
    candidates = np.append(values, values[-1] + 1.0)
    # 2 * n_pos * n_neg * balanced accuracy, in integers so that equal accuracies tie exactly
    doubled = tp * n_neg + (n_neg - fp) * n_pos
    best = doubled.max()
    tied = candidates[doubled == best]
    if current is not None and tied.size > 1:
        distance = np.abs(tied - current)
        tied = tied[distance <= distance.min() * (1 + 1e-12) + 1e-15]
    return float(tied.min()), float(best) / (2 * n_pos * n_neg)


# -- categories: confusion and kappa ---------------------------------------------------------

def confusion(predicted: Sequence[Hashable], truth: Sequence[Hashable],
              categories: Sequence | None = None) -> dict:
    """The confusion matrix of the judge (``predicted``) against people (``truth``): row i,
    column j counts the cases people put in category i and the judge in category j.

    ``categories`` fixes the order (and may list categories that never occur); by default it is
    every value that occurs, sorted (in first-seen order when the values do not sort). A value
    outside ``categories`` is an error.

    >>> confusion(["yes", "no", "yes"], ["yes", "yes", "no"])
    {'categories': ['no', 'yes'], 'matrix': [[0, 1], [1, 1]]}
    >>> confusion([1, 1], [1, 2], categories=[1, 2, 3])["matrix"]
    [[1, 0, 0], [1, 0, 0], [0, 0, 0]]
    """
    cats, matrix = _table(truth, predicted, categories, "truth predicted")
    return {"categories": cats, "matrix": matrix.tolist()}


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable],
                categories: Sequence | None = None) -> float:
    """Cohen's kappa of two raters: ``(p_o - p_e) / (1 - p_e)``, where ``p_o`` is the fraction
    of cases they agree on and ``p_e`` the agreement expected by chance from each rater's own
    category frequencies (the sum over categories of the product of the two fractions). 1 is
    perfect agreement, 0 chance level; symmetric in ``a`` and ``b``. Categories that never occur
    change nothing.

    NaN with no cases, and when ``p_e`` is 1 — both raters give one and the same category to
    every case — since agreement beyond chance is then undefined (0 / 0).

    >>> # p_o = 4/6; both say 1 four times in six: p_e = (4*4 + 2*2) / 36 = 20/36
    >>> cohen_kappa([1, 1, 1, 0, 0, 1], [1, 1, 0, 0, 1, 1])  # (24 - 20) / (36 - 20)
    0.25
    >>> cohen_kappa(["ok", "ok"], ["ok", "ok"])
    nan
    """
    _, m = _table(a, b, categories, "a b")
    n = int(m.sum())
    # in counts: (n * agreed - chance) / (n * n - chance), exact in integers
    agreed = int(np.trace(m))
    chance = int(m.sum(axis=1) @ m.sum(axis=0))
    return NAN if n * n == chance else (n * agreed - chance) / (n * n - chance)


def weighted_kappa(a: Sequence[int], b: Sequence[int], categories: Sequence[int],
                   weights: str = "linear") -> float:
    """Weighted kappa of two raters on an ordinal scale: ``1 - sum(w * O) / sum(w * E)``, with
    ``O`` the observed k × k table of fractions, ``E`` the outer product of the two raters'
    category fractions (chance) and ``w[i][j]`` the disagreement weight of categories at
    positions i and j of ``categories``: ``|i - j|`` (``"linear"``) or ``(i - j)**2``
    (``"quadratic"``). Distances are positions in ``categories``, not the values, so
    ``categories`` must list the whole scale in order, including levels nobody used.

    NaN with no cases, and when chance disagreement ``sum(w * E)`` is 0 (both raters give one
    and the same category to every case).

    >>> # O: (1,1), (2,3), (3,3), each 1/3: sum(w * O) = 1/3. Chance: a is 1/3 each level,
    >>> # b is (1/3, 0, 2/3): sum(w * E) = 1/3 * (2/3*2 + (1/3 + 2/3) + 1/3*2) = 1
    >>> round(weighted_kappa([1, 2, 3], [1, 3, 3], [1, 2, 3]), 6)  # 1 - (1/3) / 1
    0.666667
    >>> # quadratic: sum(w * O) = 1/3; sum(w * E) = 1/3 * (2/3*4 + 1 + 1/3*4) = 5/3
    >>> round(weighted_kappa([1, 2, 3], [1, 3, 3], [1, 2, 3], "quadratic"), 6)  # 1 - 1/5
    0.8
    """
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {WEIGHTS}, not {weights!r}")
    if categories is None or len(categories) == 0:
        raise ValueError("weighted_kappa needs the ordered categories of the scale, e.g. "
                         "[1, 2, 3, 4, 5]")
    _, m = _table(a, b, categories, "a b")
    n = int(m.sum())
    if n == 0:
        return NAN
    k = m.shape[0]
    distance = np.abs(np.arange(k)[:, None] - np.arange(k)[None, :])
    w = distance if weights == "linear" else distance ** 2
    # in counts: sum(w * O) * n^2 and sum(w * E) * n^2, exact in integers
    observed = int((w * m).sum()) * n
    chance = int(m.sum(axis=1) @ w @ m.sum(axis=0))
    if chance == 0:
        return NAN
    return 1.0 - observed / chance


# -- rank correlation ------------------------------------------------------------------------

def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation: the Pearson correlation of the ranks of ``x`` and ``y``,
    tied values sharing their average rank. NaN when either is constant (or has < 2 values).

    >>> spearman([1, 2, 3, 4], [1, 3, 2, 4])  # 1 - 6 * (0 + 1 + 1 + 0) / (4 * 15)
    0.8
    >>> # x ranks 1, 2.5, 2.5, 4; centred: (-1.5, 0, 0, 1.5) and (-1.5, -0.5, 0.5, 1.5)
    >>> round(spearman([1, 2, 2, 3], [1, 2, 3, 4]), 6)  # 4.5 / sqrt(4.5 * 5)
    0.948683
    >>> spearman([1, 1, 1], [1, 2, 3])
    nan
    """
    _paired(x, y, "x y")
    a, b = _floats(x, "x"), _floats(y, "y")
    if a.size < 2 or a.min() == a.max() or b.min() == b.max():
        return NAN
    ra, rb = _ranks(a), _ranks(b)
    ra -= ra.mean()
    rb -= rb.mean()
    r = float(ra @ rb) / math.sqrt(float(ra @ ra) * float(rb @ rb))
    return max(-1.0, min(1.0, r))


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau-b: ``(C - D) / sqrt((n0 - n1) * (n0 - n2))`` with C and D the concordant
    and discordant pairs, ``n0 = n(n-1)/2`` all pairs, and ``n1``, ``n2`` the pairs tied in x and
    in y. NaN when either is constant (or has < 2 values). Knight's method, O(n log² n): sort by
    x then y; D is then the number of inversions of y.

    >>> round(kendall_tau_b([1, 2, 3, 4], [1, 3, 2, 4]), 6)  # (5 - 1) / 6
    0.666667
    >>> round(kendall_tau_b([1, 2, 2, 3], [1, 2, 3, 4]), 6)  # (5 - 0) / sqrt((6 - 1) * 6)
    0.912871
    >>> kendall_tau_b([2, 2], [1, 2])
    nan
    """
    _paired(x, y, "x y")
    a, b = _floats(x, "x"), _floats(y, "y")
    n = a.size
    if n < 2:
        return NAN
    order = np.lexsort((b, a))
    a, b = a[order], b[order]
    n0 = n * (n - 1) // 2
    n1, n2 = _tied_pairs(_runs(a)), _tied_pairs(_runs(np.sort(b)))
    n3 = _tied_pairs(_runs(a, b))  # tied in both: counted in n1 and n2, but neither C nor D
    if n0 == n1 or n0 == n2:
        return NAN
    discordant = _inversions(np.unique(b, return_inverse=True)[1].ravel())
    tau = (n0 - n1 - n2 + n3 - 2 * discordant) / math.sqrt((n0 - n1) * (n0 - n2))
    return max(-1.0, min(1.0, tau))


# -- scales, pairwise preferences ------------------------------------------------------------

def bin_scores(scores: Sequence[float], levels: Sequence[int], lo: float = 0.0,
               hi: float = 1.0) -> list[int]:
    """Scores on ``[lo, hi]`` mapped onto the k ordinal ``levels`` by k equal-width bins: bin i
    is ``[lo + i*w, lo + (i+1)*w)`` with ``w = (hi - lo) / k``, a score on a boundary goes to the
    upper bin and ``hi`` itself to the top level. A score outside ``[lo, hi]`` is an error.

    >>> bin_scores([0.0, 0.19, 0.2, 0.5, 0.99, 1.0], [1, 2, 3, 4, 5])
    [1, 1, 2, 3, 5, 5]
    >>> bin_scores([-1.0, 0.0, 1.0], [0, 1], lo=-1.0)
    [0, 1, 1]
    """
    if len(levels) == 0:
        raise ValueError("levels is empty: pass the ordinal scale, e.g. [1, 2, 3, 4, 5]")
    if not hi > lo:
        raise ValueError(f"the score range [{lo}, {hi}] is empty: hi must exceed lo")
    s = _floats(scores, "scores")
    outside = s[(s < lo) | (s > hi)]
    if outside.size:
        raise ValueError(f"score {float(outside[0])} is outside [{lo}, {hi}]: pass the range "
                         "the scores live on as lo and hi")
    k = len(levels)
    index = np.minimum(np.floor((s - lo) / (hi - lo) * k).astype(np.int64), k - 1)
    scale = [_plain(level) for level in levels]
    return [scale[i] for i in index.tolist()]


def sign_test(wins: int, losses: int) -> float:
    """Exact two-sided sign test: the probability, if wins and losses were equally likely, of a
    split at least as uneven as ``wins : losses`` — ``2 * P(X <= min(wins, losses))`` for
    ``X ~ Binomial(wins + losses, 1/2)``, at most 1. Ties are the caller's to drop. 1.0 when
    there are no wins or losses.

    >>> sign_test(5, 0)  # 2 * 1/32
    0.0625
    >>> sign_test(8, 2)  # 2 * (1 + 10 + 45) / 1024
    0.109375
    >>> sign_test(3, 3), sign_test(0, 0)
    (1.0, 1.0)
    """
    for name, count in (("wins", wins), ("losses", losses)):
        if int(count) != count or count < 0:
            raise ValueError(f"{name} must be a count (a non-negative integer), not {count!r}")
    n, k = int(wins) + int(losses), int(min(wins, losses))
    if 2 * k >= n:
        return 1.0
    if n <= SIGN_EXACT_MAX:
        term = tail = 1  # C(n, 0); then C(n, i + 1) = C(n, i) * (n - i) / (i + 1)
        for i in range(k):
            term = term * (n - i) // (i + 1)
            tail += term
        return min(1.0, 2 * tail / 2 ** n)
    # in logs, to spare the big integers: log C(n, i) - n log 2, summed with log-sum-exp
    logs = np.array([math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
                     for i in range(k + 1)]) - n * math.log(2)
    top = logs.max()
    return min(1.0, 2 * math.exp(top) * float(np.exp(logs - top).sum()))


def win_rate(wins: int, losses: int, ties: int) -> float:
    """The fraction of comparisons won, a tie counting half: ``(wins + ties/2) / (wins + losses
    + ties)``. NaN with no comparisons.

    >>> win_rate(2, 1, 1)  # (2 + 1/2) / 4
    0.625
    >>> win_rate(0, 0, 0)
    nan
    """
    n = wins + losses + ties
    return NAN if n == 0 else float((wins + ties / 2) / n)


# -- uncertainty -----------------------------------------------------------------------------

def bootstrap(statistic: Callable[..., float], *columns: Sequence, seed: int,
              resamples: int = 1000, level: float = 0.95) -> tuple[float, float] | None:
    """Case-level paired percentile bootstrap interval of ``statistic(*columns)``.

    Each resample draws row indices with replacement (``numpy.random.default_rng(seed)``) and
    applies them to every column, so the pairing of a case's values is kept; ``statistic`` gets
    the resampled columns as numpy arrays. Resamples where it is NaN (or ``None``) — a class
    missing by chance, say — are dropped. ``None`` with fewer than 2 rows, or when more than
    half the resamples are NaN (the interval would describe a different sample). The same
    columns and seed give the same interval (:func:`evalharness.stats.seed_for` makes a seed
    from names).

    >>> bootstrap(accuracy, [1, 2, 3], [1, 2, 3], seed=0)
    (1.0, 1.0)
    >>> bootstrap(roc_auc, [0.2, 0.3, 0.9], [True, True, True], seed=0) is None
    True
    """
    if not columns:
        raise ValueError("bootstrap needs at least one column to resample")
    data = [_column(col) for col in columns]
    n = len(data[0])
    for i, col in enumerate(data[1:], start=2):
        if len(col) != n:
            raise ValueError(f"column 1 has {n} rows but column {i} has {len(col)}: "
                             "the columns must be paired, one value per case")
    if n < 2:
        return None
    rng = np.random.default_rng(seed)
    values = np.empty(resamples)
    step = max(1, CHUNK_CELLS // n)
    for start in range(0, resamples, step):
        stop = min(resamples, start + step)
        draws = rng.integers(0, n, size=(stop - start, n))
        for r, idx in enumerate(draws, start=start):
            value = statistic(*(col[idx] for col in data))
            values[r] = NAN if value is None else value
    if 2 * np.count_nonzero(np.isnan(values)) > resamples:
        return None
    return percentile_ci(values, level)


def estimate(statistic: Callable[..., float], *columns: Sequence, seed: int,
             resamples: int = 1000) -> dict:
    """``statistic(*columns)`` with its 95% bootstrap interval (:func:`bootstrap`), ready for
    JSON: ``{"value": float or None, "ci95": [lo, hi] or None, "n": rows}``. An undefined
    (NaN) value is ``None``.

    >>> estimate(accuracy, [1, 0, 1, 1], [1, 0, 0, 1], seed=0)["value"]
    0.75
    >>> estimate(roc_auc, [0.2, 0.4], [True, True], seed=0)
    {'value': None, 'ci95': None, 'n': 2}
    """
    if not columns:
        raise ValueError("estimate needs at least one column")
    value = statistic(*columns)
    value = None if value is None or math.isnan(value) else float(value)
    ci = bootstrap(statistic, *columns, seed=seed, resamples=resamples)
    return {"value": value, "ci95": None if ci is None else [ci[0], ci[1]],
            "n": len(columns[0])}
