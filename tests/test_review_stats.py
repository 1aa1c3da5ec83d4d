"""Judge-versus-people statistics: hand-computed values, edge cases, reference libraries, and the
case-level bootstrap."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from evalharness.review.stats import (
    accuracy,
    balanced_accuracy,
    best_threshold,
    bin_scores,
    bootstrap,
    cohen_kappa,
    confusion,
    estimate,
    kendall_tau_b,
    roc_auc,
    sign_test,
    spearman,
    weighted_kappa,
    win_rate,
)


def from_table(table, categories):
    """Paired lists (people, judge) with table[i][j] cases rated categories[i] by people and
    categories[j] by the judge."""
    people, judge = [], []
    for (i, row), j in itertools.product(enumerate(table), range(len(categories))):
        people += [categories[i]] * row[j]
        judge += [categories[j]] * row[j]
    return people, judge


def random_ordinal(rng, n, k=5):
    """Two correlated raters on levels 1..k: the judge is people's level give or take one."""
    people = rng.integers(1, k + 1, n)
    judge = np.clip(people + rng.integers(-1, 2, n), 1, k)
    return people, judge


# -- reference implementations by definition, O(n^2) or explicit loops -------------------------

def auc_by_pairs(scores, labels):
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    wins = sum((p > q) + 0.5 * (p == q) for p in pos for q in neg)
    return wins / (len(pos) * len(neg))


def tau_b_by_pairs(x, y):
    c = d = tx = ty = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        dx, dy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
        tx += dx == 0
        ty += dy == 0
        c += dx * dy > 0
        d += dx * dy < 0
    n0 = len(x) * (len(x) - 1) // 2
    return (c - d) / math.sqrt((n0 - tx) * (n0 - ty))


def weighted_kappa_by_loops(a, b, k, power):
    n = len(a)
    observed = sum(abs(i - j) ** power for i, j in zip(a, b, strict=True)) / n
    pa = [sum(v == c for v in a) / n for c in range(1, k + 1)]
    pb = [sum(v == c for v in b) / n for c in range(1, k + 1)]
    chance = sum(abs(i - j) ** power * pa[i] * pb[j] for i in range(k) for j in range(k))
    return 1 - observed / chance


# -- roc_auc -----------------------------------------------------------------------------------

def test_roc_auc_by_hand():
    # positives 0.35, 0.8; negatives 0.1, 0.4: ordered pairs (0.35>0.1), (0.8>0.1), (0.8>0.4)
    assert roc_auc([0.1, 0.4, 0.35, 0.8], [False, False, True, True]) == 0.75
    # positives 0.9, 0.8, 0.1; negatives 0.8, 0.3. 0.9 beats both (2); 0.8 ties 0.8 (1/2) and
    # beats 0.3 (1); 0.1 beats neither: 3.5 of 6 pairs
    assert roc_auc([0.9, 0.8, 0.8, 0.3, 0.1], [1, 1, 0, 0, 1]) == pytest.approx(3.5 / 6)
    assert roc_auc([1, 2, 3, 4], [0, 0, 1, 1]) == 1.0
    assert roc_auc([4, 3, 2, 1], [0, 0, 1, 1]) == 0.0
    assert roc_auc([0.5] * 4, [0, 1, 0, 1]) == 0.5  # every pair tied: 1/2 each


def test_roc_auc_needs_both_classes():
    assert math.isnan(roc_auc([0.1, 0.9], [True, True]))
    assert math.isnan(roc_auc([0.1, 0.9], [False, False]))
    assert math.isnan(roc_auc([], []))


def test_roc_auc_rejects_bad_input():
    with pytest.raises(ValueError, match="scores has 3 values but labels has 2"):
        roc_auc([0.1, 0.2, 0.3], [True, False])
    with pytest.raises(ValueError, match="NaN"):
        roc_auc([0.1, float("nan")], [True, False])


def test_roc_auc_matches_pair_counting_and_mann_whitney():
    rng = np.random.default_rng(11)
    labels = rng.random(300) < 0.4
    scores = np.round(rng.random(300) + 0.3 * labels, 1)  # rounded: many ties
    value = roc_auc(scores, labels)
    assert type(value) is float
    assert value == pytest.approx(auc_by_pairs(scores.tolist(), labels.tolist()), abs=1e-12)
    sps = pytest.importorskip("scipy.stats")
    u = sps.mannwhitneyu(scores[labels], scores[~labels]).statistic
    assert value == pytest.approx(u / (labels.sum() * (~labels).sum()), abs=1e-12)


def test_roc_auc_matches_sklearn():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(12)
    labels = rng.random(500) < 0.3
    scores = np.round(rng.random(500) + 0.2 * labels, 2)
    assert roc_auc(scores, labels) == pytest.approx(metrics.roc_auc_score(labels, scores))


# -- accuracy and balanced accuracy ------------------------------------------------------------

def test_balanced_accuracy_by_hand():
    truth = [True, True, False, False, False, False, False, False]
    predicted = [True, False, False, False, False, False, False, True]
    # TPR = 1/2 (one of two positives), TNR = 5/6: (1/2 + 5/6) / 2 = 2/3; accuracy 6/8
    assert balanced_accuracy(predicted, truth) == pytest.approx(2 / 3)
    assert accuracy(predicted, truth) == 0.75
    # always "yes": TPR 1, TNR 0, whatever the balance
    assert balanced_accuracy([True] * 8, truth) == 0.5


def test_balanced_accuracy_needs_both_classes_of_truth():
    assert math.isnan(balanced_accuracy([True, False], [True, True]))
    assert math.isnan(balanced_accuracy([True, False], [False, False]))
    assert math.isnan(balanced_accuracy([], []))


def test_balanced_accuracy_matches_sklearn():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(13)
    truth = rng.random(400) < 0.2
    predicted = np.where(rng.random(400) < 0.8, truth, ~truth)
    assert balanced_accuracy(predicted, truth) == pytest.approx(
        metrics.balanced_accuracy_score(truth, predicted))


def test_accuracy_compares_values_without_coercion():
    assert accuracy(["pass", "fail", "pass"], ["pass", "pass", "pass"]) == pytest.approx(2 / 3)
    assert accuracy([1, "a"], ["1", "a"]) == 0.5  # 1 is not "1"
    assert accuracy([True, False], [1, 0]) == 1.0
    assert math.isnan(accuracy([], []))
    with pytest.raises(ValueError, match="predicted has 1 values but truth has 2"):
        accuracy([1], [1, 2])


# -- confusion and kappa -----------------------------------------------------------------------

def test_confusion_rows_are_people_columns_the_judge():
    out = confusion(predicted=["yes", "no", "yes", "yes"], truth=["yes", "yes", "no", "yes"])
    # truth "no": judge said yes once; truth "yes": judge said no once, yes twice
    assert out == {"categories": ["no", "yes"], "matrix": [[0, 1], [1, 2]]}
    assert json.dumps(out)  # plain ints and strings
    assert all(type(c) is int for row in out["matrix"] for c in row)


def test_confusion_with_categories_that_never_occur():
    out = confusion([1, 2, 2], [1, 2, 1], categories=[1, 2, 3])
    assert out == {"categories": [1, 2, 3], "matrix": [[1, 1, 0], [0, 1, 0], [0, 0, 0]]}
    with pytest.raises(ValueError, match="the value 4, which is not one of the categories"):
        confusion([1, 4], [1, 2], categories=[1, 2, 3])
    with pytest.raises(ValueError, match="repeat"):
        confusion([1], [1], categories=[1, 1])


def test_confusion_keeps_mixed_values_apart():
    out = confusion(["1", 1, None], [1, 1, None])
    assert sorted(map(repr, out["categories"])) == ["'1'", "1", "None"]
    index = {repr(c): i for i, c in enumerate(out["categories"])}
    assert out["matrix"][index["1"]][index["'1'"]] == 1  # people 1, judge "1"
    assert sum(map(sum, out["matrix"])) == 3


def test_cohen_kappa_on_a_two_by_two_table():
    # people \ judge   yes  no
    #   yes             20   5
    #   no              10  15        n = 50
    # p_o = (20 + 15) / 50 = 0.7
    # people: 25 yes, 25 no; judge: 30 yes, 20 no
    # p_e = (25*30 + 25*20) / 50^2 = 1250 / 2500 = 0.5
    # kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4
    people, judge = from_table([[20, 5], [10, 15]], ["yes", "no"])
    assert cohen_kappa(judge, people) == pytest.approx(0.4)
    assert cohen_kappa(people, judge) == pytest.approx(0.4)  # symmetric
    assert confusion(judge, people, categories=["yes", "no"])["matrix"] == [[20, 5], [10, 15]]


def test_cohen_kappa_three_categories_and_unused_ones():
    table = [[2, 1, 0],
             [0, 2, 1],
             [1, 0, 3]]  # n = 10, both raters' marginals (3, 3, 4)
    # p_o = 7/10; p_e = (3*3 + 3*3 + 4*4) / 100 = 0.34; kappa = 0.36 / 0.66 = 6/11
    a, b = from_table(table, [1, 2, 3])
    assert cohen_kappa(a, b) == pytest.approx(6 / 11)
    assert cohen_kappa(a, b, categories=[0, 1, 2, 3, 4]) == pytest.approx(6 / 11)


def test_cohen_kappa_edge_cases():
    assert cohen_kappa([1, 2, 3], [1, 2, 3]) == 1.0
    # both constant and equal: p_e = 1, kappa = 0/0
    assert math.isnan(cohen_kappa(["ok"] * 4, ["ok"] * 4))
    # both constant, different: p_o = 0, p_e = 0, kappa = 0
    assert cohen_kappa(["a"] * 3, ["b"] * 3) == 0.0
    # complete disagreement on two balanced classes: p_o = 0, p_e = 1/2, kappa = -1
    assert cohen_kappa([0, 1], [1, 0]) == -1.0
    assert math.isnan(cohen_kappa([], []))


def test_cohen_kappa_matches_sklearn():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(14)
    a, b = random_ordinal(rng, 300)
    assert cohen_kappa(a, b) == pytest.approx(metrics.cohen_kappa_score(a, b))


def test_weighted_kappa_by_hand():
    table = [[2, 1, 0],
             [0, 2, 1],
             [1, 0, 3]]  # rows a, columns b; marginals r = c = (3, 3, 4), n = 10
    a, b = from_table(table, [1, 2, 3])
    # linear w = |i - j|: observed sum(w * O) = 1 + 1 + 2 = 4 (in counts)
    # chance sum(w * r_i * c_j) / n = (3*(3*1 + 4*2) + 3*(3*1 + 4*1) + 4*(3*2 + 3*1)) / 10
    #   = (33 + 21 + 36) / 10 = 9            kappa = 1 - 4/9 = 5/9
    assert weighted_kappa(a, b, [1, 2, 3]) == pytest.approx(5 / 9)
    # quadratic w = (i - j)^2: observed 1 + 1 + 4 = 6
    # chance (3*(3*1 + 4*4) + 3*(3*1 + 4*1) + 4*(3*4 + 3*1)) / 10 = (57 + 21 + 60) / 10 = 13.8
    #   kappa = 1 - 6/13.8 = 13/23
    assert weighted_kappa(a, b, [1, 2, 3], "quadratic") == pytest.approx(13 / 23)
    # an unused level above the top leaves the distances between used levels as they were
    assert weighted_kappa(a, b, [1, 2, 3, 4]) == pytest.approx(5 / 9)
    assert weighted_kappa(a, b, [1, 2, 3, 4], "quadratic") == pytest.approx(13 / 23)


def test_weighted_kappa_edge_cases():
    assert weighted_kappa([1, 3, 5], [1, 3, 5], [1, 2, 3, 4, 5]) == 1.0
    # two levels: every weight is 0 or 1, so weighted kappa is Cohen's kappa
    a, b = [1, 1, 2, 2, 2], [1, 2, 2, 2, 1]
    assert weighted_kappa(a, b, [1, 2]) == pytest.approx(cohen_kappa(a, b))
    assert math.isnan(weighted_kappa([3, 3], [3, 3], [1, 2, 3, 4, 5]))
    assert math.isnan(weighted_kappa([], [], [1, 2, 3]))
    with pytest.raises(ValueError, match="weights must be one of"):
        weighted_kappa([1], [1], [1, 2], weights="cubic")
    with pytest.raises(ValueError, match="not one of the categories"):
        weighted_kappa([1, 6], [1, 2], [1, 2, 3, 4, 5])


@pytest.mark.parametrize(("weights", "power"), [("linear", 1), ("quadratic", 2)])
def test_weighted_kappa_matches_its_definition(weights, power):
    rng = np.random.default_rng(15)
    a, b = random_ordinal(rng, 200)
    expected = weighted_kappa_by_loops(a.tolist(), b.tolist(), 5, power)
    assert weighted_kappa(a, b, [1, 2, 3, 4, 5], weights) == pytest.approx(expected)


@pytest.mark.parametrize("weights", ["linear", "quadratic"])
def test_weighted_kappa_matches_sklearn(weights):
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(16)
    a, b = random_ordinal(rng, 300)
    expected = metrics.cohen_kappa_score(a, b, labels=[1, 2, 3, 4, 5], weights=weights)
    assert weighted_kappa(a, b, [1, 2, 3, 4, 5], weights) == pytest.approx(expected)


# -- rank correlations -------------------------------------------------------------------------

def test_spearman_by_hand():
    # no ties: 1 - 6 * sum(d^2) / (n (n^2 - 1)) = 1 - 6 * 2 / 60
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert spearman([1, 2, 3], [30, 20, 10]) == -1.0
    # ties: x ranks 1, 2, 3.5, 3.5 and y ranks 2, 1, 3.5, 3.5; centred on 2.5:
    # dx = (-1.5, -0.5, 1, 1), dy = (-0.5, -1.5, 1, 1): 3.5 / sqrt(4.5 * 4.5) = 7/9
    assert spearman([1, 2, 3, 3], [2, 1, 3, 3]) == pytest.approx(7 / 9)


def test_spearman_edge_cases():
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))
    assert math.isnan(spearman([1, 2, 3], [5, 5, 5]))
    assert math.isnan(spearman([1], [2]))
    with pytest.raises(ValueError, match="x has 2 values but y has 3"):
        spearman([1, 2], [1, 2, 3])


def test_spearman_matches_scipy():
    sps = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(17)
    x = rng.integers(0, 10, 500)  # many ties
    y = x + rng.integers(0, 6, 500)
    value = spearman(x, y)
    assert type(value) is float
    assert value == pytest.approx(sps.spearmanr(x, y).statistic, abs=1e-12)


def test_kendall_tau_b_by_hand():
    # pairs of [1,2,3,4] / [1,3,2,4]: 5 concordant, 1 discordant, no ties: (5 - 1) / 6
    assert kendall_tau_b([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(2 / 3)
    # x = [1,1,2,3], y = [1,2,2,3]: pair (0,1) tied in x, (1,2) tied in y, 4 concordant;
    # n0 = 6, n1 = n2 = 1: 4 / sqrt(5 * 5)
    assert kendall_tau_b([1, 1, 2, 3], [1, 2, 2, 3]) == pytest.approx(0.8)
    # x = [1,2,3,3], y = [2,1,3,3]: (0,1) discordant, (2,3) tied in both, 4 concordant:
    # (4 - 1) / sqrt((6 - 1) * (6 - 1))
    assert kendall_tau_b([1, 2, 3, 3], [2, 1, 3, 3]) == pytest.approx(0.6)
    # a pair tied in both counts in n1 and n2 but is neither concordant nor discordant:
    # x = [1,1,2], y = [5,5,7]: 2 concordant, n1 = n2 = 1: 2 / sqrt(2 * 2)
    assert kendall_tau_b([1, 1, 2], [5, 5, 7]) == pytest.approx(1.0)
    assert kendall_tau_b([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)


def test_kendall_tau_b_edge_cases():
    assert math.isnan(kendall_tau_b([2, 2, 2], [1, 2, 3]))
    assert math.isnan(kendall_tau_b([1, 2, 3], [0, 0, 0]))
    assert math.isnan(kendall_tau_b([1], [1]))
    assert math.isnan(kendall_tau_b([], []))


def test_kendall_tau_b_matches_pair_counting():
    rng = np.random.default_rng(18)
    for n, levels in [(60, 4), (80, 1000), (100, 3)]:
        x = rng.integers(0, levels, n).astype(float)
        y = x + rng.integers(-2, 3, n)
        assert kendall_tau_b(x, y) == pytest.approx(tau_b_by_pairs(x, y), abs=1e-12)


def test_kendall_tau_b_matches_scipy():
    sps = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(19)
    for n in (7, 500, 20_000):
        x = np.round(rng.random(n), 2)
        y = np.round(x + rng.random(n), 1)
        value = kendall_tau_b(x, y)
        assert type(value) is float
        assert value == pytest.approx(sps.kendalltau(x, y, variant="b").statistic, abs=1e-12)


# -- thresholds and bins -----------------------------------------------------------------------

def test_best_threshold_by_hand():
    scores, labels = [0.1, 0.4, 0.35, 0.8], [False, False, True, True]
    # balanced accuracy of score >= t (2 positives, 2 negatives):
    #   t = 0.1: TPR 1, TNR 0    -> 0.5        t = 0.4: TPR 1/2, TNR 1/2 -> 0.5
    #   t = 0.35: TPR 1, TNR 1/2 -> 0.75       t = 0.8: TPR 1/2, TNR 1   -> 0.75
    #   t = 1.8 (max + 1, nothing passes): TPR 0, TNR 1 -> 0.5
    assert best_threshold(scores, labels) == (0.35, 0.75)  # tie: the lowest
    assert best_threshold(scores, labels, current=0.7) == (0.8, 0.75)  # tie: closest
    assert best_threshold(scores, labels, current=0.36) == (0.35, 0.75)
    assert best_threshold(scores, labels, current=0.575) == (0.35, 0.75)  # equidistant: lowest


def test_best_threshold_can_pass_nothing():
    # the one positive scores lowest: t = 0.2 (all pass) and t = 1.4 (none) both give 0.5,
    # t = 0.4 gives 0
    assert best_threshold([0.2, 0.4], [True, False]) == (0.2, 0.5)
    assert best_threshold([0.2, 0.4], [True, False], current=0.9) == (1.4, 0.5)


def test_best_threshold_is_the_best_candidate():
    rng = np.random.default_rng(20)
    labels = rng.random(200) < 0.3
    scores = np.round(rng.random(200) * 0.7 + 0.3 * labels, 2)
    t, ba = best_threshold(scores, labels)
    assert type(t) is float and type(ba) is float
    candidates = [*np.unique(scores), scores.max() + 1]
    values = [balanced_accuracy(scores >= c, labels) for c in candidates]
    assert ba == pytest.approx(max(values))
    assert t == min(c for c, v in zip(candidates, values, strict=True)
                    if v == pytest.approx(max(values)))
    assert balanced_accuracy(scores >= t, labels) == pytest.approx(ba)


def test_best_threshold_needs_both_classes():
    t, ba = best_threshold([0.1, 0.9], [True, True])
    assert math.isnan(t) and math.isnan(ba)


def test_bin_scores():
    # five bins of width 0.2 on [0, 1]: a boundary goes up, 1.0 to the top level
    assert bin_scores([0.0, 0.19, 0.2, 0.5, 0.6, 0.99, 1.0], [1, 2, 3, 4, 5]) == [
        1, 1, 2, 3, 4, 5, 5]
    # three bins of width 10 on [0, 30], levels need not be 1..k
    assert bin_scores([0, 9.9, 10, 29, 30], [0, 5, 10], lo=0, hi=30) == [0, 0, 5, 10, 10]
    assert bin_scores(np.array([0.5]), np.array([1, 2])) == [2]
    assert type(bin_scores(np.array([0.5]), np.array([1, 2]))[0]) is int
    assert bin_scores([], [1, 2]) == []
    with pytest.raises(ValueError, match=r"score 1.5 is outside \[0.0, 1.0\]"):
        bin_scores([0.5, 1.5], [1, 2, 3])
    with pytest.raises(ValueError, match="hi must exceed lo"):
        bin_scores([0.5], [1, 2], lo=1.0, hi=1.0)
    with pytest.raises(ValueError, match="levels is empty"):
        bin_scores([0.5], [])


# -- pairwise preferences ----------------------------------------------------------------------

def test_sign_test_by_hand():
    assert sign_test(5, 0) == 0.0625  # 2 * (1/2)^5
    assert sign_test(0, 5) == 0.0625
    assert sign_test(8, 2) == 0.109375  # 2 * (C(10,0) + C(10,1) + C(10,2)) / 2^10 = 2 * 56/1024
    assert sign_test(6, 4) == 0.75390625  # 2 * (1 + 10 + 45 + 120 + 210) / 1024, below 1
    assert sign_test(10, 0) == 2 / 1024
    assert sign_test(1, 0) == 1.0  # 2 * 1/2
    assert sign_test(3, 3) == 1.0
    assert sign_test(0, 0) == 1.0
    with pytest.raises(ValueError, match="non-negative integer"):
        sign_test(-1, 2)
    with pytest.raises(ValueError, match="non-negative integer"):
        sign_test(1.5, 2)


def test_sign_test_matches_scipy():
    sps = pytest.importorskip("scipy.stats")
    # small n, and large n on both sides of the exact limit (10,000 decisive pairs)
    for wins, losses in [(7, 2), (13, 20), (40, 60), (2600, 2300), (5200, 5000), (61000, 60000)]:
        expected = sps.binomtest(wins, wins + losses, 0.5).pvalue
        assert sign_test(wins, losses) == pytest.approx(expected, rel=1e-8)


def test_win_rate():
    assert win_rate(3, 1, 0) == 0.75
    assert win_rate(2, 1, 1) == 0.625  # (2 + 1/2) / 4
    assert win_rate(0, 0, 4) == 0.5
    assert math.isnan(win_rate(0, 0, 0))


# -- bootstrap and estimate --------------------------------------------------------------------

def sample(n, seed):
    rng = np.random.default_rng(seed)
    labels = rng.random(n) < 0.4
    scores = np.round(rng.random(n) + 0.4 * labels, 2)
    return scores, labels


def test_bootstrap_is_deterministic_for_a_seed():
    scores, labels = sample(300, 1)
    first = bootstrap(roc_auc, scores, labels, seed=5, resamples=200)
    assert first == bootstrap(roc_auc, scores.tolist(), labels.tolist(), seed=5, resamples=200)
    assert first != bootstrap(roc_auc, scores, labels, seed=6, resamples=200)
    assert all(type(v) is float for v in first)


def test_bootstrap_interval_contains_the_estimate():
    scores, labels = sample(1000, 2)
    value = roc_auc(scores, labels)
    lo, hi = bootstrap(roc_auc, scores, labels, seed=1)
    assert lo < value < hi and hi - lo < 0.15
    a, b = random_ordinal(np.random.default_rng(3), 500)
    out = estimate(lambda x, y: weighted_kappa(x, y, [1, 2, 3, 4, 5], "quadratic"), a, b,
                   seed=2, resamples=300)
    assert out["ci95"][0] < out["value"] < out["ci95"][1] and out["n"] == 500


def test_bootstrap_keeps_rows_paired():
    # identical columns stay identical in every resample (independent resampling would not)
    values = list(range(50))
    assert bootstrap(accuracy, values, values, seed=0, resamples=100) == (1.0, 1.0)
    # categorical columns, mixed types: resampled without turning 1 into "1"
    judge, people = [1, "a", 1, "a", None, 1], [1, "a", 1, "1", None, 1]
    lo, hi = bootstrap(cohen_kappa, judge, people, seed=0, resamples=100)
    assert -1 <= lo <= hi <= 1


def test_bootstrap_drops_undefined_resamples_and_gives_up_past_half():
    # one positive in 20 rows: about (19/20)^20 = 36% of resamples have no positive (NaN AUC)
    scores = np.linspace(0, 1, 20)
    labels = [False] * 19 + [True]
    assert bootstrap(roc_auc, scores, labels, seed=0, resamples=200) == (1.0, 1.0)
    # a statistic undefined in most resamples: no interval
    rare = [0] * 9 + [1]  # NaN unless the last row is drawn first: 90% of resamples
    assert bootstrap(lambda x: 1.0 if x[0] == 1 else float("nan"), rare, seed=0) is None
    assert bootstrap(lambda x: None, rare, seed=0) is None
    assert bootstrap(roc_auc, [0.1, 0.2], [True, True], seed=0) is None
    assert bootstrap(roc_auc, [0.1], [True], seed=0) is None  # one row


def test_bootstrap_rejects_unpaired_columns():
    with pytest.raises(ValueError, match="column 1 has 3 rows but column 2 has 2"):
        bootstrap(accuracy, [1, 2, 3], [1, 2], seed=0)
    with pytest.raises(ValueError, match="at least one column"):
        bootstrap(accuracy, seed=0)


def test_estimate_is_json_ready():
    scores, labels = sample(200, 4)
    out = estimate(roc_auc, scores, labels, seed=3, resamples=200)
    assert set(out) == {"value", "ci95", "n"} and out["n"] == 200
    assert type(out["value"]) is float and out["value"] == roc_auc(scores, labels)
    assert out == estimate(roc_auc, list(scores), list(labels), seed=3, resamples=200)
    json.dumps(out, allow_nan=False)
    # undefined: None, never NaN
    undefined = estimate(cohen_kappa, ["ok"] * 5, ["ok"] * 5, seed=0, resamples=50)
    assert undefined == {"value": None, "ci95": None, "n": 5}
    json.dumps(undefined, allow_nan=False)
    assert estimate(accuracy, [1], [1], seed=0) == {"value": 1.0, "ci95": None, "n": 1}


def test_statistics_return_plain_python_values():
    rng = np.random.default_rng(21)
    x, y = rng.random(30), rng.random(30)
    labels = y > 0.5
    a, b = random_ordinal(rng, 30)
    for value in (roc_auc(x, labels), balanced_accuracy(x > 0.5, labels),
                  accuracy(x > 0.5, labels), cohen_kappa(a, b),
                  weighted_kappa(a, b, [1, 2, 3, 4, 5]), spearman(x, y), kendall_tau_b(x, y),
                  *best_threshold(x, labels), sign_test(np.int64(9), np.int64(3)),
                  win_rate(np.int64(1), 2, 3)):
        assert type(value) is float
    out = confusion(a, b)
    assert all(type(c) is int for c in out["categories"])
