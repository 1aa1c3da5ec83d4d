"""Statistics for reports: seeded, reproducible bootstrap confidence intervals."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

RESAMPLES = 2000
CHUNK_CELLS = 2_000_000  # resample in chunks of at most this many indices (bounded memory)


def seed_for(*names: str) -> int:
    """A stable seed from names (not Python's salted ``hash``).

    >>> seed_for("retriever", "recall@5") == seed_for("retriever", "recall@5")
    True
    """
    return int.from_bytes(hashlib.sha256("\0".join(names).encode()).digest()[:8], "little")


def bootstrap_ci(values: Sequence[float], *, seed: int, resamples: int = RESAMPLES,
                 level: float = 0.95) -> tuple[float, float] | None:
    """Percentile bootstrap confidence interval of the mean; ``None`` with fewer than 2 values.

    The same values and seed give the same interval, so reports are reproducible.

    >>> bootstrap_ci([1.0, 1.0, 1.0], seed=1)
    (1.0, 1.0)
    >>> lo, hi = bootstrap_ci([0, 1] * 50, seed=7)
    >>> 0.39 < lo < 0.5 < hi < 0.61
    True
    >>> bootstrap_ci([0.5], seed=1) is None
    True
    """
    x = np.asarray(values, dtype=float)
    n = x.size
    if n < 2:
        return None
    means = _resampled(n, lambda idx: x[idx].mean(axis=1), seed=seed, resamples=resamples)
    return _percentiles(means, level)


def _resampled(n: int, statistic: Callable[[np.ndarray], np.ndarray], *, seed: int,
               resamples: int) -> np.ndarray:
    """``statistic`` of ``resamples`` seeded resamples of ``n`` items with replacement: each
    resample an index row, drawn a chunk of rows at a time (at most :data:`CHUNK_CELLS`
    indices in memory); ``statistic`` maps a chunk's index rows to one number each."""
    rng = np.random.default_rng(seed)
    out = np.empty(resamples)
    step = max(1, CHUNK_CELLS // n)
    for start in range(0, resamples, step):
        stop = min(resamples, start + step)
        out[start:stop] = statistic(rng.integers(0, n, size=(stop - start, n),
                                                 dtype=np.int32))
    return out


def _percentiles(samples: np.ndarray, level: float) -> tuple[float, float]:
    alpha = (1 - level) / 2
    lo, hi = np.quantile(samples, [alpha, 1 - alpha])
    return float(lo), float(hi)


def bootstrap_sums(rows: np.ndarray, *, seed: int, resamples: int = RESAMPLES,
                   clusters: Sequence[Any] | None = None) -> np.ndarray:
    """Column sums of ``resamples`` bootstrap resamples of the rows of ``rows`` (n × d): a
    ``resamples × d`` array. Any statistic that is a function of column sums — an F1 from
    TP/FP/FN counts, an ECE from per-bin sums — gets its bootstrap distribution from it.

    ``clusters``: the cluster of each row (a case's repeats, by case id): the rows of a
    cluster are summed and whole clusters resampled (the cluster bootstrap). With one row per
    cluster it is the same as without.

    >>> sums = bootstrap_sums(np.array([[1, 0], [0, 1]]), seed=3, resamples=4)
    >>> sums.shape, bool((sums.sum(axis=1) == 2).all())
    ((4, 2), True)
    >>> rows = np.array([[1.0], [1.0], [0.0]])
    >>> together = bootstrap_sums(rows, seed=3, resamples=50, clusters=["a", "a", "b"])
    >>> sorted(set(together[:, 0].tolist()))  # resamples of {a: 2, b: 0}: 0, 2 or 4
    [0.0, 2.0, 4.0]
    """
    x = np.asarray(rows, dtype=float)
    if x.ndim != 2:
        raise ValueError(f"rows must be a 2-D array (cases × columns), got shape {x.shape}")
    if clusters is not None:
        _, inverse = np.unique(np.asarray(clusters, dtype=object).astype(str),
                               return_inverse=True)
        summed = np.zeros((int(inverse.max()) + 1 if inverse.size else 0, x.shape[1]))
        np.add.at(summed, inverse, x)
        x = summed
    n, d = x.shape
    out = np.zeros((resamples, d))
    if n == 0:
        return out
    rng = np.random.default_rng(seed)
    # a quarter of the usual chunk: each cell has four transient arrays (draws, flat index,
    # counts, counts as floats), and this runs while a large run's results are in memory
    step = max(1, CHUNK_CELLS // (4 * n))
    for start in range(0, resamples, step):
        size = min(resamples, start + step) - start
        idx = rng.integers(0, n, size=(size, n), dtype=np.int32)
        # how often each row is drawn in each resample, then one matrix product: as fast for
        # a hundred columns as for one, and no resamples × n × d array
        offsets = np.arange(size, dtype=np.int64)[:, None] * n
        drawn = np.bincount((offsets + idx).ravel(), minlength=size * n).reshape(size, n)
        out[start:start + size] = drawn @ x
    return out


def percentile_ci(samples: np.ndarray, level: float = 0.95) -> tuple[float, float] | None:
    """The percentile interval of a bootstrap distribution, ignoring resamples where the
    statistic is undefined (NaN); ``None`` when it is undefined in all.

    >>> percentile_ci(np.array([np.nan, 1.0, 2.0, 3.0]), level=0.5)
    (1.5, 2.5)
    """
    x = np.asarray(samples, dtype=float)
    x = x[~np.isnan(x)]
    if x.size == 0:
        return None
    alpha = (1 - level) / 2
    lo, hi = np.quantile(x, [alpha, 1 - alpha])
    return float(lo), float(hi)


PERMUTATIONS = 10_000
EXACT_MAX = 16  # up to this many pairs, every one of the 2**n sign patterns is enumerated


def paired_permutation_p(differences: Sequence[float], *, seed: int,
                         permutations: int = PERMUTATIONS,
                         exact_max: int = EXACT_MAX) -> float | None:
    """Two-sided p-value of a paired permutation (sign-flip) test; ``None`` without pairs.

    Under the null hypothesis "A and B do not differ", each paired difference is as likely
    to have the opposite sign, so the statistic ``|sum of differences|`` is compared with its
    distribution under random sign flips. With at most ``exact_max`` pairs every one of the
    ``2**n`` sign patterns is enumerated and the p-value is exact (the observed pattern is
    one of them). Otherwise ``permutations`` seeded random patterns are drawn and the p-value
    is ``(count + 1) / (permutations + 1)`` (the observed pattern counted as one of them), so
    it is never 0: no finite sample can prove more. Identical runs (all differences 0) give
    exactly 1.

    >>> paired_permutation_p([0.0, 0.0, 0.0], seed=1)
    1.0
    >>> paired_permutation_p([1.0] * 5, seed=1)  # exact: 2 of 32 patterns reach |sum| = 5
    0.0625
    >>> paired_permutation_p([1.0, -1.0, 2.0], seed=1)  # |sum| >= 2 in 6 of 8 patterns
    0.75
    >>> paired_permutation_p([1.0] * 40, seed=1, permutations=999)  # Monte Carlo floor
    0.001
    >>> paired_permutation_p([], seed=1) is None
    True
    """
    d = np.asarray(differences, dtype=float)
    n = d.size
    if n == 0:
        return None
    observed = abs(float(d.sum()))
    # Sums of the same numbers in another order may differ in the last bits: count those as
    # ties rather than as smaller.
    tol = 1e-9 * float(np.abs(d).sum())
    if n <= exact_max:
        patterns = np.arange(2 ** n, dtype=np.int64)[:, None] >> np.arange(n) & 1
        sums = (1 - 2 * patterns).astype(float) @ d
        return float(np.count_nonzero(np.abs(sums) >= observed - tol)) / 2 ** n
    rng = np.random.default_rng(seed)
    count = 0
    step = max(1, CHUNK_CELLS // n)
    for start in range(0, permutations, step):
        size = min(permutations, start + step) - start
        signs = 1.0 - 2.0 * rng.integers(0, 2, size=(size, n), dtype=np.int8)
        count += int(np.count_nonzero(np.abs(signs @ d) >= observed - tol))
    return (count + 1) / (permutations + 1)


def benjamini_hochberg(pvalues: Sequence[float], q: float = 0.05
                       ) -> tuple[list[float], list[bool]]:
    """Benjamini–Hochberg step-up: the adjusted p-values (q-values: ``min over j >= i of
    m p_(j) / j`` in sorted order, at most 1, in the given order) and which are rejected at
    false discovery rate ``q`` (adjusted p-value at most ``q``).

    >>> benjamini_hochberg([0.01, 0.04, 0.03, 0.005])
    ([0.02, 0.04, 0.04, 0.02], [True, True, True, True])
    """
    p = np.asarray(pvalues, dtype=float)
    m = p.size
    if m == 0:
        return [], []
    order = np.argsort(p, kind="stable")
    scaled = p[order] * m / np.arange(1, m + 1)
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(np.minimum.accumulate(scaled[::-1])[::-1], 1.0)
    values = [float(v) for v in adjusted]
    return values, [v <= q for v in values]


def wilson(k: int, n: int, z: float = 1.959964) -> list[float] | None:
    """The 95% Wilson score interval of a proportion ``k / n``; ``None`` when ``n`` is 0.

    >>> [round(v, 4) for v in wilson(8, 10)]
    [0.4902, 0.9433]
    >>> wilson(0, 0) is None, wilson(5, 5)[1]
    (True, 1.0)
    """
    if n <= 0:
        return None
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [max(0.0, centre - half), min(1.0, centre + half)]


def cluster_bootstrap_ci(values: Sequence[float], groups: Sequence[int], *, seed: int,
                         resamples: int = RESAMPLES, level: float = 0.95
                         ) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the mean of ``values`` when they come in clusters
    (``groups``: the cluster of each value, e.g. a case's repeats): whole clusters are
    resampled, and each resample's statistic is its values' sum over their count (the mean of
    the values it holds). With one value per cluster it is exactly :func:`bootstrap_ci`'s
    interval (the same draws); ``None`` with fewer than 2 clusters.

    >>> bootstrap_ci([0, 1, 0, 1], seed=1) == cluster_bootstrap_ci([0, 1, 0, 1], [0, 1, 2, 3],
    ...                                                             seed=1)
    True
    >>> values = [1, 1, 1, 0, 0, 0] * 10  # 20 cases of 3 repeats that always agree
    >>> lo, hi = cluster_bootstrap_ci(values, [i // 3 for i in range(60)], seed=2)
    >>> naive_lo, naive_hi = bootstrap_ci(values, seed=2)
    >>> 1.5 < (hi - lo) / (naive_hi - naive_lo) < 2  # about sqrt(3): 20 cases, not 60
    True
    >>> cluster_bootstrap_ci([1, 0], [0, 0], seed=1) is None
    True
    """
    x = np.asarray(values, dtype=float)
    _, inverse = np.unique(np.asarray(groups), return_inverse=True)
    sums = np.bincount(inverse, weights=x)
    counts = np.bincount(inverse).astype(float)
    k = sums.size
    if k < 2:
        return None
    ratios = _resampled(k, lambda idx: sums[idx].sum(axis=1) / counts[idx].sum(axis=1),
                        seed=seed, resamples=resamples)
    return _percentiles(ratios, level)


REDUCERS: dict[str, Callable[[Sequence[float]], float]] = {
    "mean": lambda x: math.fsum(x) / len(x), "median": lambda x: float(np.median(x)),
    "min": min, "max": max}
"""How a case's values over the repeats of a run become one (a metric's declared
``reducer``, docs/repeat.md). The mean is :func:`math.fsum`'s, which does not depend on the
order of the repeats."""


def reduce_repeats(values: Sequence[float], reducer: str = "mean"
                   ) -> tuple[float | None, float | None]:
    """A case's values over its repeats reduced to one (``reducer``: a key of
    :data:`REDUCERS`, else the mean), and their sample variance (``ddof=1``; ``None`` below
    two values). Values that are all equal reduce to that value exactly, with variance 0: a
    case that does not vary has no rounding noise for a test to find. The one reduction of the
    report, ``compare`` and ``RunFolder``.

    >>> reduce_repeats([0.1, 0.1, 0.1])
    (0.1, 0.0)
    >>> reduce_repeats([1.0, 0.0, 1.0, 1.0], "median"), reduce_repeats([], "max")
    ((1.0, 0.25), (None, None))
    >>> round(reduce_repeats([1.0, 0.0, 1.0])[1], 12)
    0.333333333333
    """
    if not values:
        return None, None
    first = values[0]
    if all(v == first for v in values):
        return float(first), 0.0 if len(values) > 1 else None
    x = np.asarray(values, dtype=float)
    return (float(REDUCERS.get(reducer, REDUCERS["mean"])(values)),
            float(np.var(x, ddof=1)) if len(values) > 1 else None)
