"""Comparing two runs: per component and metric, a paired delta with its CI and a p-value.

Two output folders of ``evalharness scenario`` (each holding ``results.jsonl`` and
``report.json``) are compared case by case: for every metric, the cases where *both* runs
computed a value are paired by case id, and the per-case differences ``B − A`` give

- the delta: their mean;
- its 95% CI: a seeded percentile bootstrap of that mean (:func:`stats.bootstrap_ci`);
- a p-value: a two-sided paired permutation test (:func:`stats.paired_permutation_p`).

The metrics are tested at once, so their p-values are corrected for their number: by
default Benjamini–Hochberg (:func:`correct`, :func:`stats.benjamini_hochberg`) over every row
with a p-value, and a metric *regressed* when its delta points the bad way (see
:func:`direction_of`) with its q-value at most ``alpha`` (``correction="none"``: with
``p < alpha``). The command exits 1 when a metric gated in B's scenario regressed.

In runs with repeats (``--repeat N``) each case's repeats are reduced to one value by the
metric's reducer (:func:`load_run`), so the pairs, the bootstrap and the sign flips are over
cases (the cluster bootstrap), and each metric's within-case noise is reported. See
docs/compare.md.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

import evalharness.jsonlimits as jsonlimits
from evalharness.context import jsonl_error, read_jsonl
from evalharness.errors import InputError
from evalharness.formatting import fmt_p
from evalharness.models import SCHEMA_VERSION, CaseResult
from evalharness.plugins import installed_declaration
from evalharness.render import fmt
from evalharness.review import pairwise
from evalharness.stats import (
    EXACT_MAX,
    PERMUTATIONS,
    REDUCERS,
    RESAMPLES,
    benjamini_hochberg,
    bootstrap_ci,
    paired_permutation_p,
    seed_for,
)
from evalharness.stats import reduce_repeats as stats_reduce

COMPARISON_SCHEMA_VERSION = "2"
"""Version of the ``comparison.json`` format (2: ``correction``, ``q_value``, repeats)."""

Correction = Literal["bh", "none"]
"""How the metrics tested at once are corrected for it: ``bh``, Benjamini–Hochberg (the
false discovery rate at ``alpha``); ``none``, each test at ``alpha`` on its own."""

# --------------------------------------------------------------------------------------------
# Which way is better: the one place that decides
# --------------------------------------------------------------------------------------------

Direction = Literal["higher", "lower", "neutral"]


def direction_of(summaries: list[dict[str, Any]], kind: str | None = None) -> Direction:
    """Which way is better for a metric, as its plugin declares it: read from the runs'
    report.json (``components.C.metrics.M.declaration``); for a report written before
    declarations were stored, from the declaration of the installed plugin's evaluator of the
    same name; ``higher`` when neither says.

    >>> direction_of([{"declaration": {"direction": "lower"}}])
    'lower'
    """
    for summary in summaries:
        declared = summary.get("declaration")
        if isinstance(declared, dict) and declared.get("direction") in ("higher", "lower",
                                                                       "neutral"):
            return declared["direction"]
    for summary in summaries:
        evaluator, metric = summary.get("evaluator"), summary.get("metric")
        if kind and isinstance(evaluator, str) and isinstance(metric, str):
            found = installed_declaration(kind, evaluator, metric,
                                          summary.get("scope") or "case")
            if found is not None:
                return found.direction
    return "higher"


# --------------------------------------------------------------------------------------------
# The comparison record
# --------------------------------------------------------------------------------------------


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


Status = Literal["improved", "regressed", "changed", "not_significant", "not_comparable",
                 "no_pairs", "run_level"]


class RunInfo(_Model):
    """One of the two runs, as its report.json describes it."""

    path: str
    """The run's output folder."""

    scenario: str | None
    """Scenario name."""

    scenario_sha256: str | None
    """sha256 of the scenario file."""

    judge: dict[str, Any]
    """The judge's identity: ``backend``, ``model``, ``embedding_model``, ``label``."""

    cases: int
    """Cases in the run's results.jsonl (distinct case ids: a case run N times counts once)."""

    repeats: int | None = None
    """Repeats per case in a run with ``--repeat N``; ``null`` without repeats."""

    flaky: list[str] = Field(default_factory=list)
    """With repeats: the cases whose end-to-end verdict flips between their repeats, as the
    run's report.json lists them (``repeats.flaky``, component ``end_to_end``)."""


class CaseOverlap(_Model):
    """Which cases the two runs share (by case id)."""

    both: int
    """Cases present in both runs."""

    only_a: list[str] = Field(default_factory=list)
    """Ids of cases only in run A."""

    only_b: list[str] = Field(default_factory=list)
    """Ids of cases only in run B."""

    changed: list[str] = Field(default_factory=list)
    """Ids present in both runs whose case record (question, gold, tags, metadata) differs:
    their values are paired anyway, but measure different things."""


class MetricComparison(_Model):
    """One metric of one component in both runs."""

    component: str
    """Component name."""

    metric: str
    """Metric name (a cutoff is part of it, e.g. ``recall@5``)."""

    direction: Direction
    """Which way is better: ``higher``, ``lower`` or ``neutral`` (see docs/compare.md)."""

    mean_a: float | None
    """Mean over every case where run A computed the metric (as in A's report; with repeats,
    of each case's value reduced over its repeats)."""

    mean_b: float | None
    """Mean over every case where run B computed the metric (as in B's report)."""

    n_a: int
    """Cases with a computed value in A."""

    n_b: int
    """Cases with a computed value in B."""

    n_paired: int
    """Cases with a computed value in both runs: the pairs behind delta, CI and p-value."""

    only_a: int
    """Cases with a value in A but none in B (missing from B, or an error there)."""

    only_b: int
    """Cases with a value in B but none in A."""

    delta: float | None
    """Mean of the paired differences ``B − A``; ``null`` without pairs."""

    ci95: list[float] | None
    """95% paired percentile-bootstrap CI of ``delta`` (seeded by component and metric);
    ``null`` below 2 pairs."""

    p_value: float | None
    """Two-sided paired permutation (sign-flip) test of ``delta = 0``; ``null`` without
    pairs."""

    p_method: Literal["exact", "monte_carlo"] | None
    """``exact`` (all ``2**n`` sign patterns, up to 16 pairs) or ``monte_carlo``."""

    q_value: float | None = None
    """``p_value`` adjusted by Benjamini–Hochberg over every metric of the comparison with a
    p-value (the family tested at once); ``null`` without a p-value, or when the row was
    not compared with others (:func:`compare_metric` alone)."""

    repeats_a: int | None = None
    """Repeats per case in run A (``--repeat N``); ``null`` without repeats. Each case's
    value is then its repeats' values reduced by the metric's reducer (mean by default)."""

    repeats_b: int | None = None
    """Repeats per case in run B; ``null`` without repeats."""

    noise_a: float | None = None
    """The metric's pooled within-case standard deviation in run A (the square root of the
    mean variance of a case's values between its repeats, over the cases with two values or
    more): how much one case moves from repeat to repeat. ``null`` without repeats."""

    noise_b: float | None = None
    """The same in run B."""

    status: Status
    """``improved`` / ``regressed``: significant in the good / bad direction (``q_value <=
    alpha`` under the ``bh`` correction, ``p < alpha`` under ``none``);
    ``changed``: significant for a neutral metric; ``not_significant``; ``not_comparable``: a
    judged metric while the two runs' judges differ; ``no_pairs``: no case has a value in
    both runs; ``run_level``: a run-level metric (one value per run, e.g. a macro-F1): both
    values and their difference, no paired test, never a regression."""

    judged: bool
    """Whether the metric's values come from the judge (in either run)."""

    gates: list[str] = Field(default_factory=list)
    """B's gates on this metric, as written in its scenario."""


class BottleneckShift(_Model):
    """Whether the component holding the system back changed between the runs."""

    available: bool
    """Both report.json files carry a non-empty ``bottleneck.ranking``."""

    top_a: str | None = None
    """The top component of A's ranking."""

    share_a: float | None = None
    """Its share of the attributed failures in A."""

    top_b: str | None = None
    """The top component of B's ranking."""

    share_b: float | None = None
    """Its share of the attributed failures in B."""

    moved: bool | None = None
    """Whether the top component differs; ``null`` when not available."""

    shares: dict[str, list[float | None]] = Field(default_factory=dict)
    """Component -> ``[share in A, share in B]`` for every ranked component."""

    note: str = ""
    """Why it is not available, when it is not."""


class Comparison(_Model):
    """``comparison.json``: run B measured against run A, metric by metric."""

    schema_version: str = COMPARISON_SCHEMA_VERSION
    """Format version of this record."""

    a: RunInfo
    """The baseline run."""

    b: RunInfo
    """The run compared with it."""

    alpha: float
    """Significance level: a delta counts when its q-value is at most ``alpha`` (correction
    ``bh``), or when ``p < alpha`` (correction ``none``)."""

    correction: Correction = "none"
    """How the many metrics tested at once are corrected: ``bh``, Benjamini–Hochberg over
    every row with a p-value (the expected share of false alarms among the flagged metrics
    is at most ``alpha``); ``none``, every metric tested on its own at ``alpha``. (Absent in
    comparisons written before the correction existed: they were not corrected.)"""

    resamples: int
    """Bootstrap resamples behind each CI."""

    permutations: int
    """Random sign patterns behind each Monte Carlo p-value (above 16 pairs)."""

    cases: CaseOverlap
    """Which cases the runs share."""

    metrics: list[MetricComparison]
    """Every metric present in both runs, in pipeline order."""

    only_in_a: list[str] = Field(default_factory=list)
    """``component.metric`` measured in A only."""

    only_in_b: list[str] = Field(default_factory=list)
    """``component.metric`` measured in B only."""

    regressions: list[str] = Field(default_factory=list)
    """``component.metric`` that regressed significantly."""

    improvements: list[str] = Field(default_factory=list)
    """``component.metric`` that improved significantly."""

    gated_regressions: list[str] = Field(default_factory=list)
    """The regressions among metrics gated in B: any makes ``evalharness compare`` exit 1."""

    bottleneck: BottleneckShift
    """Whether the bottleneck moved."""

    warnings: list[str] = Field(default_factory=list)
    """What makes the runs less comparable: different scenarios, judges, cases, evaluators."""

    human: dict[str, Any] | None = None
    """People's preferences from ``review serve RUN_A RUN_B --pairwise``: B's win rate with
    its 95% CI, the sign test, and how often the judge's preferred run is the people's
    (:mod:`evalharness.review.pairwise`); ``null`` without preference labels."""

    judge_pairwise: dict[str, Any] | None = None
    """With ``--judge-pairwise``: the judge's preferences between the runs on one criterion,
    each case judged in both orders (:mod:`evalharness.judge_pairwise`), B's win rate with its
    interval, and every case's two judgment records."""


# --------------------------------------------------------------------------------------------
# Reading a run
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CaseSpread:
    """A case's values of one metric over its repeats (a run with ``--repeat N``)."""

    n: int
    """Repeats where the metric was computed (failed repeats are left out)."""

    var: float | None
    """The sample variance of those values (``ddof=1``); ``None`` below two values."""


@dataclass
class Run:
    """What a comparison needs from one output folder."""

    path: Path
    report: dict[str, Any]
    values: dict[tuple[str, str], dict[str, float | None]] = field(default_factory=dict)
    """(component, metric) -> case id -> value (``None`` where the metric failed). With
    repeats: the case's values over its computed repeats reduced by the metric's reducer
    (``None`` when no repeat computed it)."""
    cases: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Case id -> the case record as evaluated."""
    repeats: int | None = None
    """Repeats per case in a run with ``--repeat N`` (report.json's ``repeats.n``, else the
    highest repeat in results.jsonl); ``None`` without repeats."""
    spread: dict[tuple[str, str], dict[str, CaseSpread]] = field(default_factory=dict)
    """With repeats: (component, metric) -> case id -> its values' count and variance."""

    def metric_keys(self) -> list[tuple[str, str]]:
        """(component, metric) in the report's (pipeline) order, then any only in results."""
        keys = [(c, m) for c, comp in self.report["components"].items()
                if isinstance(comp, dict) for m in comp.get("metrics") or {}]
        return keys + [k for k in self.values if k not in set(keys)]

    def kind(self, component: str) -> str | None:
        """The component's kind in this run."""
        comp = self.report["components"].get(component)
        kind = comp.get("kind") if isinstance(comp, dict) else None
        return kind if isinstance(kind, str) else None

    def summary(self, component: str, metric: str) -> dict[str, Any]:
        comp = self.report["components"].get(component)
        found = (comp or {}).get("metrics", {}).get(metric) if isinstance(comp, dict) else None
        return found if isinstance(found, dict) else {}

    def reducer(self, component: str, metric: str) -> str:
        """How a case's repeats become one value: the metric's declared reducer as the report
        stores it (``declaration.reducer``, else ``repeats.reducer``), ``mean`` otherwise."""
        summary = self.summary(component, metric)
        for holder in (summary.get("declaration"), summary.get("repeats")):
            if isinstance(holder, dict) and holder.get("reducer") in REDUCERS:
                return holder["reducer"]
        return "mean"

    def noise(self, component: str, metric: str) -> float | None:
        """The metric's pooled within-case standard deviation over the run's cases with two
        computed repeats or more (as report.json's ``repeats.within_sd``); ``None`` without
        repeats or without such a case."""
        if self.repeats is None:
            return None
        variances = [s.var for s in self.spread.get((component, metric), {}).values()
                     if s.var is not None]
        return math.sqrt(math.fsum(variances) / len(variances)) if variances else None

    def flaky(self) -> list[str]:
        """The cases whose end-to-end verdict flips between repeats (report.json's
        ``repeats.flaky``)."""
        block = self.report.get("repeats")
        entries = block.get("flaky") if isinstance(block, dict) else None
        return list(dict.fromkeys(str(e["case"]) for e in entries or []
                                  if isinstance(e, dict) and "case" in e
                                  and e.get("component") == "end_to_end"))


def reduce_repeats(values: list[float], reducer: str = "mean"
                   ) -> tuple[float | None, CaseSpread]:
    """A case's computed values over its repeats reduced to one (:func:`stats.reduce_repeats`:
    the report's reduction), and their spread.

    >>> reduce_repeats([0.1, 0.1, 0.1])
    (0.1, CaseSpread(n=3, var=0.0))
    >>> reduce_repeats([1.0, 0.0, 1.0, 1.0], "median")[0], reduce_repeats([], "max")
    (1.0, (None, CaseSpread(n=0, var=None)))
    """
    value, var = stats_reduce(values, reducer)
    return value, CaseSpread(n=len(values), var=var)


RUN_HELP = ("give the --out folder of an `evalharness scenario` run (it holds results.jsonl "
            "and report.json)")


def load_run(path: Path) -> Run:
    """Read a run's report.json and results.jsonl; every problem is an :class:`InputError`
    naming the file (and the line)."""
    path = Path(path)
    if path.is_file() and path.name in ("results.jsonl", "report.json"):
        path = path.parent
    if not path.exists():
        raise InputError(f"{path}: no such run folder; {RUN_HELP}")
    if not path.is_dir():
        raise InputError(f"{path} is a file, not a run folder; {RUN_HELP}")
    results_path, report_path = path / "results.jsonl", path / "report.json"
    if not results_path.is_file():
        raise InputError(f"{path} has no results.jsonl, so it is not a run folder; {RUN_HELP}")
    if not report_path.is_file():
        raise InputError(f"{path} has results.jsonl but no report.json: the run did not "
                         f"finish. Continue it with `evalharness scenario SCENARIO --out {path} "
                         "--resume`, then compare")
    report = _read_report(report_path)
    run = Run(path=path, report=report)
    seen: dict[tuple[str, int | None], int] = {}
    repeated: bool | None = None  # whether the lines carry a repeat (all do, or none)
    raw: dict[tuple[str, str], dict[str, list[float | None]]] = {}
    for lineno, record in read_jsonl(results_path):
        try:
            result = CaseResult.model_validate(record)
        except ValidationError as exc:
            raise InputError(jsonl_error(
                results_path, lineno, exc, record, "one case result written by `evalharness "
                "scenario`", '{"case": {...}, "trace": {...}, "components": {...}}')) from None
        cid, repeat = result.key
        if repeated is None:
            repeated = repeat is not None
        elif repeated != (repeat is not None):
            first = min(seen.values())
            raise InputError(
                f"{results_path}, line {lineno}: case {cid!r} "
                + (f"has repeat {repeat}, but line {first} has none" if repeat is not None
                   else f"has no repeat, but line {first} has one")
                + ": a run's lines all carry a repeat (--repeat N) or none does")
        if (cid, repeat) in seen:
            if repeat is None:
                raise InputError(f"{results_path}, line {lineno}: case {cid!r} appears again "
                                 f"(first on line {seen[(cid, None)]}); a run holds one result "
                                 "per case")
            raise InputError(f"{results_path}, line {lineno}: case {cid!r} repeat {repeat} "
                             f"appears again (first on line {seen[(cid, repeat)]}); a run "
                             "holds one result per case and repeat")
        seen[(cid, repeat)] = lineno
        run.cases.setdefault(cid, result.case.model_dump(mode="json"))
        for component, comp in result.components.items():
            for metric, value in comp.metrics.items():
                if repeated:
                    raw.setdefault((component, metric), {}).setdefault(cid, []).append(
                        value.value)
                else:
                    run.values.setdefault((component, metric), {})[cid] = value.value
    if not seen:
        raise InputError(f"{results_path} holds no results: the run evaluated no case")
    if repeated:
        block = report.get("repeats")
        n = block.get("n") if isinstance(block, dict) else None
        run.repeats = n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else max(
            r for _, r in seen if r is not None)
        for key, per_case in raw.items():
            reducer = run.reducer(*key)
            values, spread = run.values.setdefault(key, {}), run.spread.setdefault(key, {})
            for cid, got in per_case.items():
                values[cid], spread[cid] = reduce_repeats([v for v in got if v is not None],
                                                          reducer)
    return run


def _read_report(path: Path) -> dict[str, Any]:
    try:
        report = jsonlimits.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}, line {exc.lineno}, column {exc.colno}: not valid JSON "
                         f"({exc.msg}); report.json is written by `evalharness scenario`"
                         ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot be read ({exc})") from None
    if not isinstance(report, dict) or not isinstance(report.get("components"), dict):
        raise InputError(f"{path}: not an evalharness report (no `components` object); "
                         "report.json is written by `evalharness scenario`")
    return report


# --------------------------------------------------------------------------------------------
# Comparing
# --------------------------------------------------------------------------------------------


def paired_differences(a: dict[str, float | None], b: dict[str, float | None]
                       ) -> tuple[list[str], list[float]]:
    """Case ids with a value in both runs (sorted, so results are reproducible whatever order
    the runs finished their cases in) and the differences ``B − A``.

    >>> paired_differences({"x": 1.0, "y": 0.5, "z": None}, {"y": 1.0, "x": 0.0, "z": 1.0})
    (['x', 'y'], [-1.0, 0.5])
    """
    ids = sorted(cid for cid, va in a.items() if va is not None and b.get(cid) is not None)
    return ids, [b[cid] - a[cid] for cid in ids]


def _mean(values: list[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def compare_metric(component: str, metric: str, a: dict[str, float | None],
                   b: dict[str, float | None], *, alpha: float = 0.05,
                   resamples: int = RESAMPLES, permutations: int = PERMUTATIONS,
                   judged: bool = False, comparable: bool = True,
                   gates: list[str] | None = None, direction: Direction = "higher",
                   repeats_a: int | None = None, repeats_b: int | None = None,
                   noise_a: float | None = None, noise_b: float | None = None
                   ) -> MetricComparison:
    """One metric's comparison from its per-case values in A and B (``None`` = failed);
    ``direction``: which way is better, as the metric's plugin declares it.

    In a run with repeats a case's value is its repeats' values reduced to one
    (:func:`load_run`), so a paired difference carries the repeat noise of both sides: the
    bootstrap over cases of these differences is the cluster bootstrap, and the sign flips
    flip whole cases. ``repeats_*`` and ``noise_*`` (the runs' repeats per case and the
    metric's pooled within-case SD) are recorded, not used. The status is tested at
    ``p < alpha`` on this metric alone; :func:`compare_runs` corrects it for the others
    (:func:`correct`)."""
    ids, diffs = paired_differences(a, b)
    computed_a = [v for v in a.values() if v is not None]
    computed_b = [v for v in b.values() if v is not None]
    delta = _mean(diffs)
    ci = bootstrap_ci(diffs, seed=seed_for("compare", component, metric), resamples=resamples)
    p = paired_permutation_p(diffs, seed=seed_for("compare-permutation", component, metric),
                             permutations=permutations)
    way = direction
    if not ids:
        status: Status = "no_pairs"
    elif not comparable:
        status = "not_comparable"
    else:
        status = _tested_status(p, delta, way, alpha, "none")
    paired = set(ids)
    return MetricComparison(
        component=component, metric=metric, direction=way,
        mean_a=_mean(computed_a), mean_b=_mean(computed_b),
        n_a=len(computed_a), n_b=len(computed_b), n_paired=len(ids),
        only_a=sum(1 for c, v in a.items() if v is not None and c not in paired),
        only_b=sum(1 for c, v in b.items() if v is not None and c not in paired),
        delta=delta, ci95=list(ci) if ci is not None else None, p_value=p,
        p_method=None if not ids else "exact" if len(ids) <= EXACT_MAX else "monte_carlo",
        repeats_a=repeats_a, repeats_b=repeats_b, noise_a=noise_a, noise_b=noise_b,
        status=status, judged=judged, gates=list(gates or []))


TESTED = ("improved", "regressed", "changed", "not_significant")
"""The statuses a test decides (the others: no pairs, judges differ, run-level)."""


def _tested_status(p: float | None, delta: float | None, way: Direction, alpha: float,
                   correction: Correction, q: float | None = None) -> Status:
    significant = (q is not None and q <= alpha) if correction == "bh" else \
        (p is not None and p < alpha)
    if not (significant and delta):
        return "not_significant"
    if way == "neutral":
        return "changed"
    return "improved" if (delta > 0) == (way == "higher") else "regressed"


def correct(rows: list[MetricComparison], alpha: float, correction: Correction
            ) -> list[MetricComparison]:
    """The rows with their q-values (Benjamini–Hochberg over every row with a p-value: the
    family tested at once) and their statuses decided under ``correction``: ``bh``, a delta
    counts when its q-value is at most ``alpha``; ``none``, when its p-value is below it.

    >>> ids = ("x", "y", "z")
    >>> rows = [compare_metric("r", m, dict.fromkeys(ids, 0.0), dict.fromkeys(ids, d))
    ...         for m, d in (("a", 1.0), ("b", 0.0))]
    >>> [(r.p_value, r.q_value) for r in correct(rows, 0.05, "bh")]
    [(0.25, 0.5), (1.0, 1.0)]
    """
    family = [i for i, r in enumerate(rows) if r.p_value is not None]
    adjusted, _ = benjamini_hochberg([rows[i].p_value for i in family], alpha)
    q_of = dict(zip(family, adjusted, strict=True))
    out = []
    for i, r in enumerate(rows):
        q = q_of.get(i)
        status = r.status if r.status not in TESTED else _tested_status(
            r.p_value, r.delta, r.direction, alpha, correction, q)
        out.append(r.model_copy(update={"q_value": q, "status": status}))
    return out


JUDGE_IDENTITY = ("backend", "model", "embedding_model")
"""The judge fields that must agree for judged metrics to be comparable."""


def run_level_row(component: str, metric: str, a: dict[str, Any], b: dict[str, Any],
                  gates: list[str] | None, direction: Direction = "higher"
                  ) -> MetricComparison:
    """A run-level metric (one value per run): both values and B − A. There is no per-case
    pair to test, so it is shown, never flagged; rerun both scenarios' cases together to test
    it."""
    mean_a, mean_b = _number(a.get("mean")), _number(b.get("mean"))
    return MetricComparison(
        component=component, metric=metric, direction=direction, mean_a=mean_a,
        mean_b=mean_b, n_a=int(a.get("n") or 0), n_b=int(b.get("n") or 0), n_paired=0,
        only_a=0, only_b=0,
        delta=None if mean_a is None or mean_b is None else mean_b - mean_a,
        ci95=None, p_value=None, p_method=None, status="run_level", judged=False,
        gates=list(gates or []))


def _run_info(run: Run) -> RunInfo:
    scenario = run.report.get("scenario") or {}
    judge = run.report.get("judge") or {}
    return RunInfo(path=str(run.path), scenario=scenario.get("name"),
                   scenario_sha256=scenario.get("sha256"),
                   judge={k: judge.get(k) for k in (*JUDGE_IDENTITY, "label") if k in judge},
                   cases=len(run.cases), repeats=run.repeats,
                   flaky=run.flaky() if run.repeats is not None else [])


def select(keys: list[tuple[str, str]], patterns: list[str]) -> list[tuple[str, str]]:
    """The ``(component, metric)`` keys matching any ``COMPONENT.METRIC`` pattern (shell-style
    wildcards allowed); every pattern must match something.

    >>> select([("router", "brier"), ("retriever", "recall@5")], ["retriever.*"])
    [('retriever', 'recall@5')]
    """
    if not patterns:
        return keys
    chosen = []
    for pattern in patterns:
        if "." not in pattern:
            raise InputError(f"--metric {pattern!r}: write COMPONENT.METRIC, e.g. "
                             "retriever.recall@5 or 'retriever.*'")
        hits = [k for k in keys if fnmatchcase(f"{k[0]}.{k[1]}", pattern)]
        if not hits:
            known = ", ".join(f"{c}.{m}" for c, m in keys[:40])
            raise InputError(f"--metric {pattern!r} matches no metric present in both runs; "
                             f"they have: {known}{', ...' if len(keys) > 40 else ''}")
        chosen += [k for k in hits if k not in chosen]
    return [k for k in keys if k in chosen]


def compare_runs(a_dir: Path, b_dir: Path, *, alpha: float = 0.05,
                 metrics: list[str] | None = None, resamples: int = RESAMPLES,
                 permutations: int = PERMUTATIONS, judge_pairwise: str | None = None,
                 judge: str | None = None, correction: Correction = "bh") -> Comparison:
    """Compare run B with run A (both output folders of ``evalharness scenario``); the
    metrics' tests are corrected for their number by ``correction`` (:func:`correct`); with
    ``judge_pairwise`` (a criterion, see :mod:`evalharness.judge_pairwise`) the LLM judge
    also says, case by case and in both orders, which run's output is better (``judge``: a
    judge backend instead of B's scenario's)."""
    run_a, run_b = load_run(Path(a_dir)), load_run(Path(b_dir))
    judged_pairs = None
    if judge_pairwise is not None:
        from evalharness import judge_pairwise as jp

        scenario, pair_judge = jp.load_judge(run_b.report, judge)
        try:
            judged_pairs = jp.judge_runs(Path(a_dir), Path(b_dir), judge_pairwise, scenario,
                                         pair_judge, run_b.report, resamples=resamples)
        finally:
            pair_judge.close()
    if correction not in ("bh", "none"):
        raise InputError(f"correction {correction!r}: use 'bh' (Benjamini–Hochberg) or 'none'")
    warnings = _warnings(run_a, run_b)
    keys_a, keys_b = run_a.metric_keys(), run_b.metric_keys()
    common = [k for k in keys_b if k in set(keys_a)]
    changed = _versions_differ(run_a, run_b, common)
    for (component, metric), (va, vb) in changed.items():
        warnings.append(f"{component}.{metric} measures something else in each run (version "
                        f"{va} in A, {vb} in B: its rubric changed): a different metric, "
                        "not compared")
    common = [k for k in common if k not in changed]
    chosen = select(common, list(metrics or []))

    judges_differ = _judge(run_a) != _judge(run_b)
    gates: dict[tuple[str, str], list[str]] = {}
    for gate in run_b.report.get("gates") or []:
        if (isinstance(gate, dict) and "component" in gate and "metric" in gate
                and gate["component"] != "agreement"):  # gates on people's labels: no metric
            gates.setdefault((gate["component"], gate["metric"]), []).append(
                str(gate.get("name") or f"{gate['component']}.{gate['metric']}"))

    rows = []
    for component, metric in chosen:
        sa, sb = run_a.summary(component, metric), run_b.summary(component, metric)
        way = direction_of([{**sb, "metric": metric}, {**sa, "metric": metric}],
                           run_b.kind(component) or run_a.kind(component))
        if "run" in (sa.get("scope"), sb.get("scope")):
            rows.append(run_level_row(component, metric, sa, sb, gates.get((component, metric)),
                                      way))
            continue
        judged = bool(run_a.summary(component, metric).get("judge")
                      or run_b.summary(component, metric).get("judge"))
        rows.append(compare_metric(
            component, metric, run_a.values.get((component, metric), {}),
            run_b.values.get((component, metric), {}), alpha=alpha, resamples=resamples,
            permutations=permutations, judged=judged, comparable=not (judged and judges_differ),
            gates=gates.get((component, metric)), direction=way, repeats_a=run_a.repeats,
            repeats_b=run_b.repeats, noise_a=run_a.noise(component, metric),
            noise_b=run_b.noise(component, metric)))
    rows = correct(rows, alpha, correction)
    if judges_differ:
        judged = [f"{r.component}.{r.metric}" for r in rows if r.judged]
        warnings.append(
            f"the judges differ ({_judge_text(run_a)} vs {_judge_text(run_b)}): judged metrics "
            f"are not comparable and never count as regressions"
            + (f" ({', '.join(judged)})" if judged else ""))
    for key in gates:
        if key not in set(keys_a):
            warnings.append(f"gated metric {key[0]}.{key[1]} is not in run A: not compared")

    ids_a, ids_b = set(run_a.cases), set(run_b.cases)
    both = ids_a & ids_b
    overlap = CaseOverlap(
        both=len(both), only_a=sorted(ids_a - ids_b), only_b=sorted(ids_b - ids_a),
        changed=sorted(c for c in both if run_a.cases[c] != run_b.cases[c]))
    for label, ids in (("A", overlap.only_a), ("B", overlap.only_b)):
        if ids:
            warnings.append(f"{len(ids)} cases are only in run {label} ({_some(ids)}): they "
                            "are in its mean but in no pair")
    if overlap.changed:
        warnings.append(f"{len(overlap.changed)} cases have the same id but a different question "
                        f"or gold labels in the two runs ({_some(overlap.changed)}): their "
                        "pairs compare different things")

    def named(rows_, status):
        return [f"{r.component}.{r.metric}" for r in rows_ if r.status == status]

    regressions = named(rows, "regressed")
    return Comparison(
        a=_run_info(run_a), b=_run_info(run_b), alpha=alpha, correction=correction,
        resamples=resamples,
        permutations=permutations, cases=overlap, metrics=rows,
        only_in_a=[f"{c}.{m}" for c, m in keys_a if (c, m) not in set(common)],
        only_in_b=[f"{c}.{m}" for c, m in keys_b if (c, m) not in set(common)],
        regressions=regressions, improvements=named(rows, "improved"),
        gated_regressions=[f"{r.component}.{r.metric}" for r in rows
                           if r.status == "regressed" and r.gates],
        bottleneck=bottleneck_shift(run_a.report, run_b.report), warnings=warnings,
        human=pairwise.summary(Path(a_dir), Path(b_dir), run_a.report, run_b.report,
                               run_a.values, run_b.values, resamples=resamples,
                               warnings=warnings, judged=judged_pairs),
        judge_pairwise=judged_pairs)


def _judge(run: Run) -> tuple:
    judge = run.report.get("judge") or {}
    return tuple(judge.get(k) for k in JUDGE_IDENTITY)


def _judge_text(run: Run) -> str:
    judge = run.report.get("judge") or {}
    return "/".join(str(judge[k]) for k in JUDGE_IDENTITY if judge.get(k)) or "no judge"


def _some(ids: list[str], limit: int = 5) -> str:
    return ", ".join(ids[:limit]) + (", ..." if len(ids) > limit else "")


def _versions_differ(a: Run, b: Run, keys: list[tuple[str, str]]
                     ) -> dict[tuple[str, str], tuple[str, str]]:
    """The metrics whose declared ``version`` (what they measure, e.g. a judged rubric's
    digest) differs between the runs: the same name, another metric."""
    out = {}
    for component, metric in keys:
        va = (a.summary(component, metric).get("declaration") or {}).get("version")
        vb = (b.summary(component, metric).get("declaration") or {}).get("version")
        if va != vb:
            out[(component, metric)] = (str(va), str(vb))
    return out


def _warnings(a: Run, b: Run) -> list[str]:
    out = []
    sa, sb = a.report.get("scenario") or {}, b.report.get("scenario") or {}
    if sa.get("name") != sb.get("name"):
        out.append(f"different scenarios: A ran {sa.get('name')!r}, B ran {sb.get('name')!r}")
    elif sa.get("sha256") != sb.get("sha256"):
        out.append(f"the scenario file changed between the runs (sha256 "
                   f"{str(sa.get('sha256'))[:12]} vs {str(sb.get('sha256'))[:12]})")
    if sa.get("database_sha256") and sb.get("database_sha256") and \
            sa["database_sha256"] != sb["database_sha256"]:
        out.append("the databases differ (database_sha256): SQL execution metrics ran on "
                   "different data")
    for run in (a, b):
        version = run.report.get("schema_version")
        if version != SCHEMA_VERSION:
            out.append(f"{run.path}/report.json has format version {version!r}, this "
                       f"evalharness reads {SCHEMA_VERSION!r}")
    if (a.repeats is None) != (b.repeats is None):
        label, n, other = ("A", a.repeats, "B") if a.repeats is not None else \
            ("B", b.repeats, "A")
        out.append(f"run {label} ran each case {n} times (--repeat) and run {other} once: "
                   f"a case's value in {label} is its repeats' values reduced to one (their "
                   f"mean, or the metric's reducer), in {other} a single run's, so the pairs "
                   f"set a less noisy value against a noisier one; {other}'s repeat noise is "
                   "not measured")
    elif a.repeats is not None and a.repeats != b.repeats:
        out.append(f"the runs repeated each case a different number of times ({a.repeats} in "
                   f"A, {b.repeats} in B): their per-case values are reduced over different "
                   "numbers of repeats")
    crit_a, crit_b = (r.report.get("verdict_criteria") for r in (a, b))
    if crit_a and crit_b and crit_a != crit_b:
        out.append("the verdict criteria differ: the bottleneck rankings judge failures "
                   "differently")
    for component, comp_b in b.report["components"].items():
        comp_a = a.report["components"].get(component)
        if not isinstance(comp_a, dict) or not isinstance(comp_b, dict):
            continue
        evs_a = {e.get("name"): e for e in comp_a.get("evaluators") or [] if isinstance(e, dict)}
        for ev in comp_b.get("evaluators") or []:
            if not isinstance(ev, dict) or ev.get("name") not in evs_a:
                continue
            old = evs_a[ev["name"]]
            for what in ("version", "settings"):
                if old.get(what) != ev.get(what):
                    out.append(f"{component}: evaluator {ev['name']!r} ran with different "
                               f"{what} ({old.get(what)} vs {ev.get(what)})")
    return out


def _ranking(report: dict[str, Any]) -> list[dict[str, Any]] | None:
    bottleneck = report.get("bottleneck")
    ranking = bottleneck.get("ranking") if isinstance(bottleneck, dict) else None
    if not isinstance(ranking, list) or not ranking:
        return None
    if not all(isinstance(r, dict) and "component" in r for r in ranking):
        return None
    return ranking


def bottleneck_shift(a: dict[str, Any], b: dict[str, Any]) -> BottleneckShift:
    """Compare the top of the two reports' ``bottleneck.ranking`` (when both have one).

    >>> ra = {"bottleneck": {"ranking": [{"component": "retriever", "share": 0.6}]}}
    >>> rb = {"bottleneck": {"ranking": [{"component": "text2sql", "share": 0.5},
    ...                                  {"component": "retriever", "share": 0.3}]}}
    >>> s = bottleneck_shift(ra, rb)
    >>> s.moved, s.top_a, s.top_b, s.shares["retriever"]
    (True, 'retriever', 'text2sql', [0.6, 0.3])
    >>> bottleneck_shift(ra, {}).available
    False
    """
    ranking_a, ranking_b = _ranking(a), _ranking(b)
    if ranking_a is None or ranking_b is None:
        missing = [n for n, r in (("A", ranking_a), ("B", ranking_b)) if r is None]
        whose = "the reports of both runs have" if len(missing) == 2 else \
            f"the report of run {missing[0]} has"
        return BottleneckShift(available=False,
                               note=f"not available: {whose} no bottleneck ranking")
    shares: dict[str, list[float | None]] = {}
    for i, ranking in enumerate((ranking_a, ranking_b)):
        for entry in ranking:
            shares.setdefault(str(entry["component"]), [None, None])[i] = _number(
                entry.get("share"))
    top_a, top_b = ranking_a[0], ranking_b[0]
    return BottleneckShift(
        available=True, top_a=str(top_a["component"]), share_a=_number(top_a.get("share")),
        top_b=str(top_b["component"]), share_b=_number(top_b.get("share")),
        moved=top_a["component"] != top_b["component"], shares=shares)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


# --------------------------------------------------------------------------------------------
# The terminal view
# --------------------------------------------------------------------------------------------

FLAGS = {
    "improved": "[green]▲ improved[/green]",
    "regressed": "[bold red]▼ regressed[/bold red]",
    "changed": "changed",
    "not_significant": "",
    "not_comparable": "[yellow]judge differs[/yellow]",
    "no_pairs": "[dim]no pairs[/dim]",
    "run_level": "[dim]per run[/dim]",
}
MARKS = {"higher": "", "lower": " ↓", "neutral": " ·"}


def fmt_delta(value: float | None, digits: int = 3) -> str:
    """A signed difference.

    >>> fmt_delta(-0.25), fmt_delta(0.0), fmt_delta(None)
    ('-0.250', '+0.000', '—')
    """
    return "—" if value is None else f"{value:+.{digits}f}"


def _preferred(counts: dict[str, Any], on_ties: str = "") -> str:
    """Preferences between the runs as the terminal says them (people's or the judge's)."""
    ci = counts["win_rate_ci95"]
    return (f"B preferred {counts['b_wins']}, A {counts['a_wins']}, ties {counts['ties']}"
            f"{on_ties}; B's win rate {fmt(counts['win_rate_b'], 2)}"
            + (f" [{fmt(ci[0], 2)}, {fmt(ci[1], 2)}]" if ci else "")
            + f", sign test p = {fmt_p(counts['sign_test_p'])}")


def _noise_note(cmp: Comparison) -> str:
    """With repeats: how a case's value was made, and the repeat noise of the metrics whose
    values vary between a case's repeats (within-case SD, A/B)."""
    times = "; ".join(f"{label}: {'1 run' if run.repeats is None else f'{run.repeats} repeats'}"
                      " per case" for label, run in (("A", cmp.a), ("B", cmp.b)))
    noisy = [r for r in cmp.metrics if (r.noise_a or 0) > 0 or (r.noise_b or 0) > 0]
    text = (f"repeats — {times}; a case's value is its repeats' mean (or the metric's "
            "reducer), its pairs tested over cases. ")
    if not noisy:
        return text + "Repeat noise: no metric varies between a case's repeats."
    return text + "Repeat noise (within-case SD, A/B): " + ", ".join(
        f"{r.component}.{r.metric} {fmt(r.noise_a)}/{fmt(r.noise_b)}" for r in noisy)


def print_comparison(cmp: Comparison, console) -> None:
    """The terminal view: one row per metric, the bottleneck, warnings, a verdict line."""
    from rich.table import Table

    def who(run: RunInfo) -> str:
        judge = run.judge.get("label") or run.judge.get("backend")
        times = "" if run.repeats is None else \
            f" × {run.repeats} repeats, {len(run.flaky)} flaky end to end"
        return f"{run.path} ({run.scenario}, {run.cases} cases{times}, judge: {judge})"

    console.print(f"[bold]A[/bold] {who(cmp.a)}\n[bold]B[/bold] {who(cmp.b)}",
                  highlight=False)
    bh = cmp.correction == "bh"
    family = sum(1 for r in cmp.metrics if r.p_value is not None)
    table = Table(title=f"B vs A — {cmp.cases.both} cases in both runs, α = {cmp.alpha:g}, "
                  + (f"Benjamini–Hochberg over {family} tests" if bh else "no correction"),
                  title_justify="left")
    table.add_column("component")
    table.add_column("metric", no_wrap=True)
    columns = ["A", "B", "Δ B−A", "95% CI of Δ", "p", *(["q"] if bh else []), "n"]
    for col in columns:
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("", no_wrap=True)
    last = None
    for r in cmp.metrics:
        if last is not None and r.component != last:
            table.add_section()
        ci = "—" if r.ci95 is None else f"{fmt_delta(r.ci95[0])}…{fmt_delta(r.ci95[1])}"
        flag = FLAGS[r.status] + (" [bold](gate)[/bold]" if r.gates and r.status == "regressed"
                                  else "")
        cells = [fmt(r.mean_a), fmt(r.mean_b), fmt_delta(r.delta), ci, fmt_p(r.p_value),
                 *([fmt_p(r.q_value)] if bh else []), str(r.n_paired)]
        table.add_row(r.component if r.component != last else "", r.metric + MARKS[r.direction],
                      *cells, flag)
        last = r.component
    console.print(table)
    console.print("[dim]Δ: mean of B − A over the n cases with a value in both runs; CI: paired "
                  "bootstrap; p: two-sided paired permutation test (exact up to "
                  f"{EXACT_MAX} pairs)"
                  + ("; q: p adjusted by Benjamini–Hochberg over the metrics tested, flagged "
                     "when q ≤ α" if bh else "; flagged when p < α, each metric on its own")
                  + ". ↓ lower is better, · no better direction"
                  + ("; per run: not tested, a run-level metric (one value per run, no pairs)"
                     if any(r.status == "run_level" for r in cmp.metrics) else "")
                  + ".[/dim]")
    if cmp.a.repeats is not None or cmp.b.repeats is not None:
        console.print(_noise_note(cmp), highlight=False)
    bn = cmp.bottleneck
    if bn.available:
        verdict = "[bold]moved[/bold]" if bn.moved else "did not move"
        console.print(f"bottleneck: A {bn.top_a} ({fmt(bn.share_a, 2)}) → B {bn.top_b} "
                      f"({fmt(bn.share_b, 2)}): {verdict}")
        console.print("[dim]shares of the failures, A → B: " + ", ".join(
            f"{c} {fmt(sa, 2)} → {fmt(sb, 2)}" for c, (sa, sb) in bn.shares.items()) + "[/dim]")
    else:
        console.print(f"bottleneck: {bn.note}")
    if cmp.human is not None:
        h = cmp.human
        console.print(f"people ({', '.join(h['reviewers'])}, {h['cases']} cases): "
                      f"{_preferred(h)}", highlight=False)
        j = h["judge"]
        if j["cases"]:
            mci = j["match_ci95"]
            how = (f"judged pairwise on {j['criterion']}" if j.get("criterion") else
                   f"mean {', '.join(j['metrics'])} of {j['component']}")
            console.print(
                f"the judge's preferred run ({how}) "
                f"is the people's in {j['matches']} of {j['cases']} cases "
                f"({fmt(j['match_rate'], 2)}"
                + (f" [{fmt(mci[0], 2)}, {fmt(mci[1], 2)}]" if mci else "") + ")",
                highlight=False)
    if cmp.judge_pairwise is not None:
        jp = cmp.judge_pairwise
        console.print(
            f"the judge ({jp['judge']}, {jp['component']}.{jp['criterion']}, each case in both "
            f"orders, {jp['cases']} cases): "
            + _preferred(jp, f" ({jp['order_disagreements']} where the two orders disagreed)")
            + (f"; {jp['errors']} cases without a judgment" if jp["errors"] else ""),
            highlight=False)
    for extra, label in ((cmp.only_in_a, "A"), (cmp.only_in_b, "B")):
        if extra:
            console.print(f"measured in run {label} only (not compared): {', '.join(extra)}")
    for warning in cmp.warnings:
        console.print(f"[yellow]warning: {warning}[/yellow]", highlight=False)
    n_reg, n_imp = len(cmp.regressions), len(cmp.improvements)
    line = (f"{n_reg} regression{'s' * (n_reg != 1)}, {n_imp} improvement{'s' * (n_imp != 1)}"
            + (f" at q ≤ {cmp.alpha:g}" if bh else f" at α = {cmp.alpha:g}, uncorrected"))
    if cmp.gated_regressions:
        console.print(f"{line}; [bold red]gated metric regressed: "
                      f"{', '.join(cmp.gated_regressions)}[/bold red]")
    else:
        console.print(f"{line}; no gated metric regressed")
