"""People's preferences between two runs (``review serve RUN_A RUN_B --pairwise``), as
``evalharness compare`` reports them.

Per case the reviewers' preferences become one (the majority; an even split is a tie), seen
from the comparison's side: a *win* is a case where people preferred run B. Then B's win rate
(ties count one half) with a seeded bootstrap 95% interval over cases, the exact two-sided
sign test on wins and losses (ties left out), and how often the judge's preferred run is the
people's: with ``compare --judge-pairwise``, the judge's own preference between the two
outputs, judged in both orders (:mod:`evalharness.judge_pairwise`); without it, a proxy — the
run whose final component scores higher on the mean of its verdict-criteria metrics, a tie
when equal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import evalharness.jsonlimits as jsonlimits
from evalharness.review import labels as L
from evalharness.review import stats as S
from evalharness.scenario import parse_criterion
from evalharness.stats import seed_for


def _manifest(path: Path) -> dict[str, Any]:
    try:
        return jsonlimits.loads((Path(path) / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def preferences(a_dir: Path, b_dir: Path, report_a: dict, report_b: dict,
                warnings: list[str] | None = None) -> dict[str, list[tuple[str, str]]]:
    """Case id -> [(reviewer, "a" | "b" | "tie")] from both runs' ``review/pairwise.jsonl``,
    whichever run was A when they were given (a torn last line left out, said in
    ``warnings``)."""
    id_a = L.id_of(a_dir, _manifest(a_dir), (report_a.get("scenario") or {}).get("sha256"))
    id_b = L.id_of(b_dir, _manifest(b_dir), (report_b.get("scenario") or {}).get("sha256"))
    rows = (L.read(Path(a_dir) / L.PAIRWISE, warnings)
            + L.read(Path(b_dir) / L.PAIRWISE, warnings))
    out: dict[str, list[tuple[str, str]]] = {}
    for lab in L.latest(rows):
        if lab.runs is None or set(lab.runs) != {id_a, id_b} or id_a == id_b:
            continue
        first_is_a = lab.runs[0] == id_a
        side = {"A": "a" if first_is_a else "b", "B": "b" if first_is_a else "a",
                "tie": "tie"}.get(lab.label)
        if side:
            out.setdefault(lab.case, []).append((lab.reviewer, side))
    return out


def judge_preference(report: dict, values: dict[tuple[str, str], dict[str, float | None]]
                     ) -> tuple[str | None, list[str]]:
    """The final component and the metrics whose mean decides the judge's preference."""
    components = list(report.get("components") or {})
    final = components[-1] if components else None
    crit = ((report.get("verdict_criteria") or {}).get(final) or {}).get("criteria") or []
    metrics = []
    for text in crit:
        gate = parse_criterion(text, final)
        if gate is not None and gate.op in (">=", ">") and (final, gate.metric) in values:
            metrics.append(gate.metric)
    return final, metrics


def summary(a_dir: Path, b_dir: Path, report_a: dict, report_b: dict,
            values_a: dict, values_b: dict, resamples: int = 2000,
            warnings: list[str] | None = None,
            judged: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The human comparison of B with A (see the module text); ``None`` without
    preferences. What reading them had to say goes to ``warnings``. ``judged``: the judge's
    own pairwise preferences (:mod:`evalharness.judge_pairwise`), which then are the judge's
    preferred run per case instead of the metric means."""
    prefs = preferences(a_dir, b_dir, report_a, report_b, warnings)
    if not prefs:
        return None
    per_case = {case: L.consensus([v for _, v in given]) or "tie"
                for case, given in sorted(prefs.items())}
    counted = _counted(per_case, prefs, resamples)
    if judged is not None:
        return {**counted, "judge": _matching(
            per_case, {x["case"]: x["outcome"] for x in judged["per_case"]}, resamples,
            criterion=judged["criterion"], component=judged["component"])}
    final, metrics = judge_preference(report_b, values_b)
    preferred: dict[str, str | None] = {}
    for case in per_case:
        a = [values_a.get((final, m), {}).get(case) for m in metrics]
        b = [values_b.get((final, m), {}).get(case) for m in metrics]
        if not metrics or any(v is None for v in a + b):
            continue
        ma, mb = sum(a) / len(a), sum(b) / len(b)
        preferred[case] = "b" if mb > ma else "a" if ma > mb else "tie"
    return {**counted, "judge": _matching(per_case, preferred, resamples, component=final,
                                          metrics=metrics)}


def _counted(per_case: dict[str, str], prefs: dict, resamples: int) -> dict[str, Any]:
    """People's counts, win rate with its interval, and sign test."""
    wins = sum(v == "b" for v in per_case.values())
    losses = sum(v == "a" for v in per_case.values())
    ties = sum(v == "tie" for v in per_case.values())
    scores = [{"b": 1.0, "a": 0.0, "tie": 0.5}[v] for v in per_case.values()]
    ci = S.bootstrap(lambda x: float(sum(x) / len(x)), scores,
                     seed=seed_for("pairwise", str(len(scores))), resamples=resamples)
    return {"cases": len(per_case), "reviewers": sorted({r for g in prefs.values()
                                                         for r, _ in g}),
            "b_wins": wins, "a_wins": losses, "ties": ties,
            "win_rate_b": S.win_rate(wins, losses, ties),
            "win_rate_ci95": list(ci) if ci else None,
            "sign_test_p": S.sign_test(wins, losses)}


def _matching(per_case: dict[str, str], judge: dict[str, str | None], resamples: int,
              **about: Any) -> dict[str, Any]:
    """How often the judge's preferred run (per case) is the people's."""
    matches = [float(judge[c] == people) for c, people in per_case.items()
               if judge.get(c) is not None]
    ci = S.bootstrap(lambda x: float(sum(x) / len(x)), matches,
                     seed=seed_for("pairwise-judge"), resamples=resamples)
    return {"metrics": [], **about, "cases": len(matches), "matches": int(sum(matches)),
            "match_rate": sum(matches) / len(matches) if matches else None,
            "match_ci95": list(ci) if ci else None}
