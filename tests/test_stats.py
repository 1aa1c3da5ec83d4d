"""Bootstrap confidence intervals: reproducible, sensible, bounded in memory."""

from __future__ import annotations

import numpy as np
import pytest

from evalharness.stats import bootstrap_ci, seed_for


def test_same_seed_same_interval():
    values = np.random.default_rng(0).random(200)
    assert bootstrap_ci(values, seed=5) == bootstrap_ci(list(values), seed=5)
    assert bootstrap_ci(values, seed=5) != bootstrap_ci(values, seed=6)


def test_interval_covers_the_mean_and_shrinks_with_n():
    rng = np.random.default_rng(1)
    small = rng.random(30)
    large = rng.random(3000)
    lo_s, hi_s = bootstrap_ci(small, seed=1)
    lo_l, hi_l = bootstrap_ci(large, seed=1)
    assert lo_s <= small.mean() <= hi_s and lo_l <= large.mean() <= hi_l
    assert (hi_l - lo_l) < (hi_s - lo_s) / 5
    # Normal approximation for a large sample: half-width ~ 1.96 sd / sqrt(n).
    expected = 1.96 * large.std(ddof=1) / np.sqrt(large.size)
    assert abs((hi_l - lo_l) / 2 - expected) / expected < 0.1


def test_large_inputs_are_resampled_in_chunks():
    values = np.arange(20000) % 2
    lo, hi = bootstrap_ci(values, seed=seed_for("x", "y"), resamples=300)
    assert lo < 0.5 < hi


def test_constant_and_tiny_inputs():
    lo, hi = bootstrap_ci([0.3] * 10, seed=1)
    assert lo == pytest.approx(0.3) and hi == pytest.approx(0.3)
    assert bootstrap_ci([], seed=1) is None
