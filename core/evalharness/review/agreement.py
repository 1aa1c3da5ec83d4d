"""How far the judge agrees with people: per component and metric, the statistic that fits what
the people gave, with seeded bootstrap 95% intervals (``evalharness agreement``).

Labels are first reduced to one per target (case and item): the majority of the reviewers'
yes/no (or agree/disagree) — a tie is left out and counted as ``split`` — and the lower median
of their 1–5 scores. Then, per (component, metric):

- **yes/no** against the automatic *score*: ROC-AUC (the chance a random "yes" scores above a
  random "no"); against the automatic *verdict* (the metric's verdict criterion): Cohen's κ,
  balanced accuracy and the confusion matrix (rows: people, columns: judge). Also the
  threshold that best matches the people (highest balanced accuracy, ties toward the current
  one) and what it would change: how many of the run's cases would change verdict, and the
  bottleneck table with it;
- **1–5 scores**: Spearman's ρ and Kendall's τ-b against the score, and linearly weighted κ
  against the score binned into five equal-width levels of [0, 1] (of the scores' range when
  it is wider: a cosine can be negative);
- **agree/disagree** marks: the judge's accuracy (share of "agree").

Targets without an automatic value are not paired (counted as ``unpaired``). When several
people labelled the same targets, Cohen's κ between each pair of reviewers (inter-reviewer
agreement, the ceiling the judge can be held to).

Rows resample targets (claims and chunks individually, so their intervals are somewhat narrow
when a case's claims go together). The seeds come from the names, so a report is reproducible.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from evalharness import verdicts
from evalharness.attribution import BottleneckTally
from evalharness.errors import InputError
from evalharness.review import stats as S
from evalharness.review.labels import Label, consensus
from evalharness.review.names import STATS as STATS  # what a gate may name
from evalharness.review.session import Review
from evalharness.review.targets import Target
from evalharness.scenario import load_scenario, parse_criterion
from evalharness.stats import seed_for

LEVELS = [1, 2, 3, 4, 5]
RESAMPLES = 1000


def compute(review: Review, labels: Sequence[Label], *, what_if: bool = True,
            resamples: int = RESAMPLES, criteria=None) -> dict[str, Any]:
    """The agreement report of ``labels`` on the run under ``review`` (see the module text):
    plain data for ``review/agreement.json``, report.json's ``agreement`` and the gates.
    ``criteria``: the scenario's verdict criteria, for the bottleneck a better threshold
    would give (loaded from the run's scenario file when not given)."""
    groups: dict[tuple[str, str, str], dict[tuple[str, str], list]] = defaultdict(
        lambda: defaultdict(list))
    targets: dict[tuple, Target] = {}
    reviewers: set[str] = set()
    skipped: list[str] = []
    for lab in labels:
        if lab.kind in (None, "preference"):
            continue
        try:
            target = review.target(lab)
        except InputError as exc:  # a label of another run's claim, a case not in this run
            skipped.append(f"{lab.reviewer}: {exc}")
            continue
        kind = lab.kind
        targets[(lab.case, *target.key)] = target
        groups[(target.component, target.metric, kind)][(lab.case, lab.item)].append(
            (lab.reviewer, lab.label))
        reviewers.add(lab.reviewer)
    rows = []
    for (component, metric, kind), by_target in sorted(groups.items()):
        pairs, split, unpaired = [], 0, 0
        for (case, item), given in by_target.items():
            target = targets[(case, component, metric, item)]
            value = consensus([v for _, v in given])
            if value is None:
                split += 1
            elif target.score is None:
                unpaired += 1
            else:
                pairs.append((target, value))
        row: dict[str, Any] = {
            "component": component, "metric": metric, "kind": kind,
            "unit": _unit(metric), "judged": any(t.judged for t, _ in pairs),
            "targets": len(by_target), "split": split, "unpaired": unpaired,
            "threshold": next((t.threshold.text(metric) for t, _ in pairs if t.threshold),
                              None)}
        seed = seed_for("agreement", component, metric, kind)

        def est(fn, *cols, _seed=seed):
            return S.estimate(fn, *cols, seed=_seed, resamples=resamples)

        scores = [t.score for t, _ in pairs]
        row["n"] = len(pairs)
        if kind == "binary":
            truth = [v == "yes" for _, v in pairs]
            verdict = [bool(t.verdict) for t, _ in pairs]
            row["positives"] = sum(truth)
            row["auc"] = est(S.roc_auc, scores, truth)
            row["kappa"] = est(S.cohen_kappa, verdict, truth)
            row["balanced_accuracy"] = est(S.balanced_accuracy, verdict, truth)
            row["confusion"] = _confusion(verdict, truth)
            row["best_threshold"] = _best(pairs, truth)
        elif kind == "ordinal":
            given = [v for _, v in pairs]
            row["spearman"] = est(S.spearman, scores, given)
            row["kendall"] = est(S.kendall_tau_b, scores, given)
            # binned over [0, 1], or wider for a score that leaves it (a cosine can be < 0)
            lo, hi = min(0.0, *scores), max(1.0, *scores)
            row["weighted_kappa"] = est(
                lambda s, g, lo=lo, hi=hi: S.weighted_kappa(
                    S.bin_scores(s, LEVELS, lo, hi), g, LEVELS, "linear"), scores, given)
        else:
            row["accuracy"] = est(S.accuracy, [True] * len(pairs),
                                  [v == "agree" for _, v in pairs])
        rows.append(row)
    inter = _inter_reviewer(groups, resamples)
    for row in rows:
        match = [r for r in inter if (r["component"], r["metric"], r["kind"]) ==
                 (row["component"], row["metric"], row["kind"])]
        if match:
            row["inter_kappa"] = match[0]["kappa_mean"]
    out = {"labels": sum(len(g) for t in groups.values() for g in t.values()),
           "reviewers": sorted(reviewers), "rows": rows, "inter_reviewer": inter,
           "skipped": len(skipped), "skipped_reasons": skipped[:5]}
    if what_if:
        for row in rows:
            best = row.get("best_threshold")
            if best and best.get("threshold") is not None and not best.get("same"):
                row["what_if"] = change(review, row["component"], row["metric"],
                                        best["threshold"], criteria)
    return out


def _unit(metric: str) -> str:
    return {"claim_support": "claim", "chunk_relevance": "chunk"}.get(metric, "case")


def _confusion(verdict: list[bool], truth: list[bool]) -> dict[str, Any]:
    cm = S.confusion(verdict, truth, categories=[True, False])
    return {"rows": "people (yes, no)", "columns": "judge (pass, fail)",
            "matrix": cm["matrix"]}


def _best(pairs: list[tuple[Target, Any]], truth: list[bool]) -> dict[str, Any] | None:
    thr = pairs[0][0].threshold if pairs else None
    if thr is None or thr.op not in (">=", ">") or all(truth) or not any(truth):
        return None
    scores = [t.score for t, _ in pairs]
    value, ba = S.best_threshold(scores, truth, current=thr.value)
    now = S.balanced_accuracy([thr.passes(s) for s in scores], truth)
    same = all((s >= value) == thr.passes(s) for s in scores) or (now == now and ba <= now)
    return {"threshold": value, "balanced_accuracy": ba, "current": thr.value,
            "current_balanced_accuracy": None if now != now else now, "same": same}


def _inter_reviewer(groups, resamples: int) -> list[dict[str, Any]]:
    out = []
    for (component, metric, kind), by_target in sorted(groups.items()):
        if kind == "ordinal":
            continue
        by_reviewer: dict[str, dict] = defaultdict(dict)
        for target, given in by_target.items():
            for reviewer, value in given:
                by_reviewer[reviewer][target] = value
        pairs = []
        for a, b in itertools.combinations(sorted(by_reviewer), 2):
            common = sorted(set(by_reviewer[a]) & set(by_reviewer[b]))
            if len(common) < 2:
                continue
            x = [by_reviewer[a][t] for t in common]
            y = [by_reviewer[b][t] for t in common]
            pairs.append({"reviewers": [a, b], "n": len(common), "kappa": S.estimate(
                S.cohen_kappa, x, y, seed=seed_for("inter", component, metric, a, b),
                resamples=resamples)})
        if pairs:
            kappas = [p["kappa"]["value"] for p in pairs if p["kappa"]["value"] is not None]
            out.append({"component": component, "metric": metric, "kind": kind,
                        "pairs": pairs,
                        "kappa_mean": {"value": sum(kappas) / len(kappas) if kappas else None,
                                       "ci95": pairs[0]["kappa"]["ci95"] if len(pairs) == 1
                                       else None, "n": sum(p["n"] for p in pairs)}})
    return out


def change(review: Review, component: str, metric: str, threshold: float,
           criteria=None) -> dict[str, Any]:
    """What the run's verdicts and bottleneck would be with ``component.metric``'s verdict
    criterion at ``threshold``: the cases whose component verdict changes, and the bottleneck
    ranking before and after. The bottleneck needs the scenario's pipeline: when the scenario
    file cannot be loaded any more, only the verdict changes are given, with the reason."""
    note = None
    try:
        if criteria is None:
            scenario = load_scenario(review.run.report.scenario["path"])
            criteria = verdicts.criteria_for(scenario)
    except Exception as exc:  # noqa: BLE001 - any failure only drops the bottleneck part
        note = (f"the bottleneck is not recomputed: the scenario "
                f"{review.run.report.scenario.get('path')} could not be loaded "
                f"({str(exc).splitlines()[0][:200]})")
    changed = {"pass_to_fail": 0, "fail_to_pass": 0}
    if criteria is None:
        gate_source = review.run.report.verdict_criteria.get(component)
        texts = gate_source.criteria if gate_source else []
        gates = [parse_criterion(t, component) for t in texts]
        gates = [dataclasses.replace(g, threshold=threshold) if g.metric == metric else g
                 for g in gates if g is not None]
        for result in review.run.results:
            old = result.verdicts.get(component)
            if old is None or old.status not in ("pass", "fail"):
                continue
            comp = result.components.get(component)
            if comp is None or comp.status != "evaluated":
                continue
            new = verdicts.check(gates, comp.metrics)
            _count(changed, old.status, new.status)
        return {"threshold": threshold, **changed, "bottleneck": None, "note": note}
    moved = _with_threshold(criteria, component, metric, threshold)
    judged = criteria.judged()
    before, after = BottleneckTally(judged), BottleneckTally(judged)
    changed |= {"end_to_end_pass_to_fail": 0, "end_to_end_fail_to_pass": 0}
    for result in review.run.results:
        before.add(result)
        old = result.verdicts.get(component)
        old_e2e = result.end_to_end
        new_result = verdicts.apply(None, [result.model_copy()], moved)[0]
        new = new_result.verdicts.get(component)
        if old is not None and new is not None:
            _count(changed, old.status, new.status)
        if old_e2e is not None and new_result.end_to_end is not None:
            _count(changed, old_e2e.status, new_result.end_to_end.status, "end_to_end_")
        after.add(new_result)
    b, a = before.summary(), after.summary()
    table = None
    if b is not None and a is not None:
        shares = {r.component: r.share for r in a.ranking}
        table = [{"component": r.component, "share": r.share, "share_then": shares.get(
                 r.component), "failures": r.failures} for r in b.ranking]
        table.append({"component": "end to end pass rate", "share": b.end_to_end.pass_rate,
                      "share_then": a.end_to_end.pass_rate, "failures": None})
    return {"threshold": threshold, **changed, "bottleneck": table, "note": note}


def _count(changed: dict[str, int], old: str, new: str, prefix: str = "") -> None:
    if old == "pass" and new == "fail":
        changed[prefix + "pass_to_fail"] += 1
    elif old == "fail" and new == "pass":
        changed[prefix + "fail_to_pass"] += 1


def _with_threshold(criteria, component: str, metric: str, threshold: float):
    def move(cc):
        if cc is None:
            return cc
        swap = [dataclasses.replace(g, threshold=threshold)
                if (g.component, g.metric) == (component, metric) else g for g in cc.criteria]
        return dataclasses.replace(cc, criteria=swap)

    return dataclasses.replace(
        criteria, components={k: move(v) for k, v in criteria.components.items()},
        end_to_end=move(criteria.end_to_end))


def value_of(agreement: dict[str, Any], component: str, metric: str, stat: str
             ) -> tuple[float | None, int]:
    """The value of ``stat`` for ``component.metric`` (what an ``agreement.`` gate reads) and
    the number of labelled targets behind it; ``(None, 0)`` when no row has it."""
    for row in agreement.get("rows", []):
        if (row["component"], row["metric"]) != (component, metric):
            continue
        if stat == "n":
            return float(row["n"]), row["n"]
        found = row.get(stat)
        if isinstance(found, dict):
            return found.get("value"), found.get("n", row["n"])
    return None, 0
