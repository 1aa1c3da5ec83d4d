"""Router metrics against hand-computed values: Jaccard, abstention, Brier, per-route counts,
precision/recall/F1, macro- and micro-F1, confusion matrices, ECE."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from evalharness import Case, MetricValue, RouterStep
from evalharness_router import (
    NO_CONFIDENCE,
    NO_GOLD,
    RoutingSettings,
    evaluate_router,
    evaluate_router_routing,
    routing_rows,
)
from evalharness_router.metrics import (
    NONE,
    RouteCounts,
    as_pairs,
    averages,
    brier_from_confidence,
    brier_from_scores,
    calibration_bins,
    confusion_matrix,
    expected_calibration_error,
    is_single_route,
    jaccard,
    matrix_labels,
    route_counts,
)


def case(routes=None, id="x") -> Case:
    return Case(id=id, question="q", gold={"routes": routes})


# -- per case ------------------------------------------------------------------------------


@pytest.mark.parametrize(("predicted", "gold", "expected"), [
    (["sql"], ["sql"], 1.0),
    (["sql", "blog"], ["blog", "sql"], 1.0),
    (["sql"], ["sql", "blog"], 0.5),
    (["sql", "faq"], ["sql", "blog"], 1 / 3),
    (["blog"], ["sql"], 0.0),
    ([], ["sql"], 0.0),
    (["sql"], [], 0.0),
    ([], [], 1.0),                      # both empty: the router rightly chose nothing
    (["sql", "sql"], ["sql"], 1.0),     # a set: repetition does not count
])
def test_jaccard(predicted, gold, expected):
    assert jaccard(predicted, gold) == pytest.approx(expected)


def test_brier_from_scores_by_hand():
    # ((0.9 - 1)^2 + (0.2 - 0)^2) / 2 = (0.01 + 0.04) / 2
    assert brier_from_scores({"sql": 0.9, "blog": 0.2}, ["sql"], ["blog", "sql"]) == 0.025
    # a route without a score has probability 0: (0.01 + 0.04 + 0) / 3
    assert brier_from_scores({"sql": 0.9, "blog": 0.2}, ["sql"],
                             ["blog", "faq", "sql"]) == pytest.approx(0.05 / 3)
    # a gold route without a score: (0 - 1)^2 counts in full: (0.01 + 0.04 + 1) / 3
    assert brier_from_scores({"sql": 0.9, "blog": 0.2}, ["sql", "faq"],
                             ["blog", "faq", "sql"]) == pytest.approx(1.05 / 3)
    # empty gold set: every route should have had probability 0
    assert brier_from_scores({"sql": 0.5, "blog": 0.1}, [], ["blog", "sql"]) == 0.13
    assert brier_from_scores({"sql": 1.0, "blog": 0.0}, ["sql"], ["blog", "sql"]) == 0.0
    with pytest.raises(ValueError):
        brier_from_scores({}, [], [])


def test_brier_from_confidence_by_hand():
    assert brier_from_confidence(0.8, True) == 0.04
    assert brier_from_confidence(0.8, False) == 0.64
    assert brier_from_confidence(1.0, True) == 0.0
    assert brier_from_confidence(0.0, True) == 1.0


def test_routing_rows_by_hand():
    batch = [
        # multi-route gold, one route chosen, per-route scores
        (case(["sql", "blog"]),
         RouterStep(routes=["sql"], scores={"sql": 0.9, "blog": 0.4}, confidence=0.54)),
        # abstained, only a chosen-set confidence
        (case(["blog"]), RouterStep(routes=[], confidence=0.3)),
        # empty gold set, abstained: right, but nothing to compute a Brier score from
        (case([]), RouterStep(routes=[])),
        # no gold labels: abstention is still known
        (case(None), RouterStep(routes=["sql"], confidence=0.9)),
        # scores that are not probabilities
        (case(["sql"]), RouterStep(routes=["sql"], scores={"sql": 2.5, "blog": -1.0})),
        # exact match, chosen-set confidence
        (case(["blog", "sql"]), RouterStep(routes=["sql", "blog"], confidence=0.7)),
    ]
    rows = routing_rows(batch, RoutingSettings(), routes=["blog", "sql"])
    assert [set(r) for r in rows] == [{"route_jaccard", "abstention", "brier"}] * 6
    assert [r["route_jaccard"].value for r in rows] == [0.5, 0.0, 1.0, None, 1.0, 1.0]
    assert [r["abstention"].value for r in rows] == [0.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    # ((0.9-1)^2 + (0.4-1)^2) / 2 = 0.185; (0.3-0)^2 = 0.09; (0.7-1)^2 = 0.09
    assert rows[0]["brier"].value == pytest.approx(0.185)
    assert rows[0]["brier"].details == {"source": "scores", "routes": ["blog", "sql"]}
    assert rows[1]["brier"].value == pytest.approx(0.09)
    assert rows[1]["brier"].details["source"] == "confidence"
    assert rows[5]["brier"].value == pytest.approx(0.09)
    assert rows[2]["brier"].error == NO_CONFIDENCE
    assert rows[3]["route_jaccard"].error == NO_GOLD and rows[3]["brier"].error == NO_GOLD
    assert rows[4]["brier"].error == "the router's scores are not probabilities in [0, 1]"
    assert rows[1]["abstention"].details == {"kind": "none", "predicted": []}
    assert rows[0]["route_jaccard"].details == {"predicted": ["sql"], "gold": ["blog", "sql"]}
    for row in rows:
        for value in row.values():
            assert isinstance(value, MetricValue)


def test_fallback_routes_count_as_abstention():
    batch = [(case(["sql"]), RouterStep(routes=["faq"])),
             (case(["sql"]), RouterStep(routes=["faq", "sql"])),
             (case(["sql"]), RouterStep(routes=[]))]
    rows = routing_rows(batch, RoutingSettings(fallback_routes=["faq"]))
    assert [r["abstention"].value for r in rows] == [1.0, 0.0, 1.0]
    assert [r["abstention"].details["kind"] for r in rows] == ["fallback", "routed", "none"]
    # without the setting, "faq" is a route like any other
    assert routing_rows(batch[:1])[0]["abstention"].value == 0.0


def test_brier_source_setting():
    step = RouterStep(routes=["sql"], scores={"sql": 0.9, "blog": 0.2}, confidence=0.6)
    only_conf = RouterStep(routes=["sql"], confidence=0.6)
    batch = [(case(["sql"]), step), (case(["sql"]), only_conf)]
    auto = routing_rows(batch, RoutingSettings(brier="auto"))
    assert [r["brier"].value for r in auto] == [pytest.approx(0.025), pytest.approx(0.16)]
    conf = routing_rows(batch, RoutingSettings(brier="confidence"))
    assert [r["brier"].value for r in conf] == [pytest.approx(0.16), pytest.approx(0.16)]
    scores = routing_rows(batch, RoutingSettings(brier="scores"))
    assert scores[0]["brier"].value == pytest.approx(0.025)
    assert scores[1]["brier"].error == "the router reports no per-route scores"
    none = routing_rows([(case(["sql"]), RouterStep(routes=["sql"]))],
                        RoutingSettings(brier="confidence"))
    assert none[0]["brier"].error == "the router reports no confidence"


def test_brier_covers_the_pipeline_routes():
    """Through the hook: the universe is the pipeline's routes ∪ scored ∪ gold ∪ chosen."""
    pipeline = SimpleNamespace(routes=lambda: {"sql": ["text2sql"], "blog": ["retriever"],
                                               "faq": ["generator"]})
    batch = [(case(["sql"]), RouterStep(routes=["sql"], scores={"sql": 0.7, "blog": 0.1}))]
    rows = evaluate_router_routing("routing", batch, RoutingSettings(),
                                   SimpleNamespace(pipeline=pipeline))
    # ((0.7-1)^2 + 0.1^2 + 0^2) / 3
    assert rows[0]["brier"].value == pytest.approx(0.1 / 3)
    assert rows[0]["brier"].details["unscored"] == ["faq"]
    alone = evaluate_router_routing("routing", batch, RoutingSettings(),
                                    SimpleNamespace(pipeline=None))
    assert alone[0]["brier"].value == pytest.approx(0.05)
    assert evaluate_router("no_such_evaluator", batch) is None


def test_routing_settings_are_validated():
    with pytest.raises(ValueError):
        RoutingSettings(ece_bins=0)
    with pytest.raises(ValueError):
        RoutingSettings(brier="sometimes")
    with pytest.raises(ValueError):
        RoutingSettings(bins=10)


# -- per route -----------------------------------------------------------------------------

# (predicted, gold), hand-counted below
MULTI = as_pairs([
    (["sql"], ["sql"]),
    (["sql", "blog"], ["sql"]),
    (["blog"], ["sql", "blog"]),
    ([], ["blog"]),
    (["sql"], ["blog"]),
    (["blog"], ["faq"]),         # faq: a gold route the router never chooses
])


def test_route_counts_by_hand():
    counts = route_counts(MULTI, ["blog", "faq", "sql"])
    # blog: TP case 3; FP cases 2, 6; FN cases 4, 5; TN case 1
    assert counts["blog"] == RouteCounts(tp=1, fp=2, fn=2, tn=1)
    # sql: TP cases 1, 2; FP case 5; FN case 3; TN cases 4, 6
    assert counts["sql"] == RouteCounts(tp=2, fp=1, fn=1, tn=2)
    assert counts["faq"] == RouteCounts(tp=0, fp=0, fn=1, tn=5)
    for c in counts.values():
        assert c.tp + c.fp + c.fn + c.tn == len(MULTI)
    assert (counts["blog"].precision, counts["blog"].recall) == (1 / 3, 1 / 3)
    assert counts["blog"].f1 == pytest.approx(1 / 3)
    assert (counts["sql"].precision, counts["sql"].recall) == (2 / 3, 2 / 3)
    assert counts["sql"].f1 == pytest.approx(2 / 3)
    # never chosen: precision undefined (None, not 0, not NaN); recall 0; F1 = 0 / (0+0+1)
    assert counts["faq"].precision is None
    assert counts["faq"].recall == 0.0 and counts["faq"].f1 == 0.0


def test_undefined_precision_recall_and_f1():
    never_gold = RouteCounts(tp=0, fp=2, fn=0, tn=3)
    assert never_gold.recall is None and never_gold.precision == 0.0 and never_gold.f1 == 0.0
    absent = RouteCounts(tp=0, fp=0, fn=0, tn=4)
    assert absent.precision is None and absent.recall is None and absent.f1 is None
    d = absent.as_dict()
    assert d["precision"] is None and d["support"] == 0 and d["chosen"] == 0


def test_macro_and_micro_f1_by_hand():
    avg = averages(route_counts(MULTI, ["blog", "faq", "sql"]))
    assert avg["macro_f1"] == pytest.approx((1 / 3 + 2 / 3 + 0) / 3)
    # pooled: TP 3, FP 3, FN 4
    assert avg["micro_precision"] == pytest.approx(3 / 6)
    assert avg["micro_recall"] == pytest.approx(3 / 7)
    assert avg["micro_f1"] == pytest.approx(6 / 13)
    # a route that occurs nowhere has no F1 and is left out of the macro mean
    with_absent = averages(route_counts(MULTI, ["blog", "faq", "sql", "web"]))
    assert with_absent["macro_f1"] == pytest.approx(1 / 3)
    assert averages({}) == {"macro_f1": None, "micro_precision": None, "micro_recall": None,
                            "micro_f1": None}


def test_route_set_confusion_matrix_by_hand():
    assert not is_single_route(MULTI)
    # single routes, then combinations, then (none): case 4 chose nothing
    labels = matrix_labels(MULTI)
    assert labels == ["blog", "faq", "sql", "blog+sql", NONE]
    assert matrix_labels(MULTI[:3]) == ["blog", "sql", "blog+sql"]
    # rows = gold, columns = chosen, in label order
    assert confusion_matrix(MULTI, labels) == [
        [0, 0, 1, 0, 1],    # gold blog: chosen sql (case 5), nothing (case 4)
        [1, 0, 0, 0, 0],    # gold faq: chosen blog (case 6)
        [0, 0, 1, 1, 0],    # gold sql: chosen sql (case 1), blog+sql (case 2)
        [1, 0, 0, 0, 0],    # gold blog+sql: chosen blog (case 3)
        [0, 0, 0, 0, 0],    # gold (none)
    ]


SINGLE = as_pairs([
    (["a"], ["a"]), (["b"], ["a"]), (["a"], ["a"]), ([], ["b"]), (["b"], ["b"]), (["c"], []),
])


def test_single_route_confusion_matrix_and_scores_by_hand():
    assert is_single_route(SINGLE)
    labels = matrix_labels(SINGLE, ["a", "b", "c"])
    assert labels == ["a", "b", "c", NONE]
    assert confusion_matrix(SINGLE, labels) == [
        [2, 1, 0, 0],       # gold a
        [0, 1, 0, 1],       # gold b: one right, one abstention
        [0, 0, 0, 0],       # gold c: never
        [0, 0, 1, 0],       # gold (none): c was chosen
    ]
    counts = route_counts(SINGLE, ["a", "b", "c"])
    assert (counts["a"].precision, counts["a"].recall, counts["a"].f1) == (1.0, 2 / 3, 0.8)
    assert (counts["b"].precision, counts["b"].recall, counts["b"].f1) == (0.5, 0.5, 0.5)
    # c: chosen once, never gold: precision 0, recall undefined, F1 0
    assert (counts["c"].precision, counts["c"].recall, counts["c"].f1) == (0.0, None, 0.0)
    avg = averages(counts)
    assert avg["macro_f1"] == pytest.approx((0.8 + 0.5 + 0.0) / 3)
    assert avg["micro_f1"] == pytest.approx(6 / 10)     # TP 3, FP 2, FN 2


def test_single_route_micro_f1_is_accuracy_without_abstentions_or_empty_gold():
    pairs = as_pairs([(["a"], ["a"]), (["b"], ["a"]), (["b"], ["b"]), (["a"], ["b"]),
                      (["a"], ["a"])])
    avg = averages(route_counts(pairs, ["a", "b"]))
    assert avg["micro_f1"] == pytest.approx(3 / 5)


# -- calibration ---------------------------------------------------------------------------

CONF = [0.95, 0.85, 0.85, 0.55, 0.3, 0.1, 1.0]
RIGHT = [True, True, False, True, False, False, True]


def test_calibration_bins_by_hand():
    found = calibration_bins(CONF, RIGHT, 10)
    # 0.3 and 0.1 are bin edges: they open bins 3 and 1; 1.0 is in the last bin
    assert [(b.lower, b.n) for b in found] == [(0.1, 1), (0.3, 1), (0.5, 1), (0.8, 2), (0.9, 2)]
    last = found[-1]
    assert last.confidence == pytest.approx(0.975) and last.accuracy == 1.0
    assert found[3].accuracy == 0.5 and found[3].gap == pytest.approx(0.35)


def test_ece_by_hand():
    # (2·0.025 + 2·0.35 + 0.45 + 0.3 + 0.1) / 7
    assert expected_calibration_error(CONF, RIGHT, 10) == pytest.approx(1.6 / 7)
    # 2 bins: [0, .5): conf 0.2, acc 0, n 2; [.5, 1]: conf 0.84, acc 0.8, n 5
    assert expected_calibration_error(CONF, RIGHT, 2) == pytest.approx((2 * 0.2 + 5 * 0.04) / 7)
    # 1 bin: |mean confidence − accuracy|
    assert expected_calibration_error(CONF, RIGHT, 1) == pytest.approx(abs(4.6 / 7 - 4 / 7))
    # perfectly calibrated bins
    assert expected_calibration_error([1.0, 1.0, 0.0], [True, True, False], 10) == 0.0
    assert expected_calibration_error([], [], 10) is None


def test_ece_rejects_bad_input():
    with pytest.raises(ValueError):
        calibration_bins([0.5], [True], 0)
    with pytest.raises(ValueError):
        calibration_bins([1.5], [True], 10)
    with pytest.raises(ValueError):
        calibration_bins([0.5, 0.2], [True], 10)


def test_ece_bin_edges_are_exact_for_many_bins():
    # 0.57 * 100 is 56.99999999999999 in floating point; the edge comparison keeps it in bin 57
    (b,) = calibration_bins([0.57], [True], 100)
    assert b.lower == 0.57


# -- against scikit-learn, when it is installed (it is not a dependency) ---------------------


def test_macro_and_micro_f1_match_sklearn():
    metrics = pytest.importorskip("sklearn.metrics")
    preprocessing = pytest.importorskip("sklearn.preprocessing")
    routes = ["blog", "faq", "sql"]
    binarizer = preprocessing.MultiLabelBinarizer(classes=routes)
    y_true = binarizer.fit_transform([sorted(g) for _, g in MULTI])
    y_pred = binarizer.transform([sorted(p) for p, _ in MULTI])
    avg = averages(route_counts(MULTI, routes))
    assert avg["micro_f1"] == pytest.approx(metrics.f1_score(y_true, y_pred, average="micro"))
    assert avg["macro_f1"] == pytest.approx(
        metrics.f1_score(y_true, y_pred, average="macro", zero_division=0))
    labels = ["a", "b", "c", NONE]
    truth = [next(iter(g), NONE) for _, g in SINGLE]
    pred = [next(iter(p), NONE) for p, _ in SINGLE]
    ours = confusion_matrix(SINGLE, matrix_labels(SINGLE, ["a", "b", "c"]))
    assert ours == metrics.confusion_matrix(truth, pred, labels=labels).tolist()


def test_worked_example_of_the_docs():
    """docs/metrics/router.md, "Worked example": the per-case values and their means."""
    rows = routing_rows([
        (case(["sql"]), RouterStep(routes=["sql"], confidence=0.9)),
        (case(["sql"]), RouterStep(routes=["sql", "blog"], confidence=0.8)),
        (case(["sql", "blog"]), RouterStep(routes=["blog"], confidence=0.55)),
        (case(["blog"]), RouterStep(routes=[], confidence=0.3)),
        (case(["blog"]), RouterStep(routes=["sql"], confidence=0.85)),
        (case(["faq"]), RouterStep(routes=["blog"])),
        (case(None), RouterStep(routes=["sql"], confidence=0.95)),
    ], routes=["blog", "faq", "sql"])

    def mean(metric):
        values = [r[metric].value for r in rows if r[metric].error is None]
        return sum(values) / len(values), len(values)

    assert [r["brier"].value for r in rows[:5]] == pytest.approx([0.01, 0.64, 0.3025, 0.09,
                                                                  0.7225])
    assert mean("route_jaccard") == (pytest.approx(2 / 6), 6)
    assert mean("abstention") == (pytest.approx(1 / 7), 7)
    assert mean("brier") == (pytest.approx(0.353), 5)
