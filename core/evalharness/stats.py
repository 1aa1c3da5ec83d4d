"""Statistics for reports: seeded, reproducible bootstrap confidence intervals."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

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
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    step = max(1, CHUNK_CELLS // n)
    for start in range(0, resamples, step):
        stop = min(resamples, start + step)
        idx = rng.integers(0, n, size=(stop - start, n), dtype=np.int32)
        means[start:stop] = x[idx].mean(axis=1)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(means, [alpha, 1 - alpha])
    return float(lo), float(hi)


def bootstrap_sums(rows: np.ndarray, *, seed: int, resamples: int = RESAMPLES) -> np.ndarray:
    """Column sums of ``resamples`` bootstrap resamples of the rows of ``rows`` (n × d): a
    ``resamples × d`` array. Any statistic that is a function of column sums — an F1 from
    TP/FP/FN counts, an ECE from per-bin sums — gets its bootstrap distribution from it.

    >>> sums = bootstrap_sums(np.array([[1, 0], [0, 1]]), seed=3, resamples=4)
    >>> sums.shape, bool((sums.sum(axis=1) == 2).all())
    ((4, 2), True)
    """
    x = np.asarray(rows, dtype=float)
    if x.ndim != 2:
        raise ValueError(f"rows must be a 2-D array (cases × columns), got shape {x.shape}")
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
