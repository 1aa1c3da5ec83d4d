"""Repeats on the shop with seeded noise: how often ``compare`` of two runs of the *same*
system flags a change (the false-alarm rate), how much wider a repeated run's intervals are
than the ones its repeats would give as independent cases, and whether a real change is still
found.

The system is ``scenarios/shop-noisy.yaml``'s: the shop assistant with ``noise`` (default
0.15) seeded by ``noise_seed`` — two ``noise_seed``s are two independent runs of one system,
as two nights of an LLM application at a temperature above zero. For each trial ``t`` (0, 1,
…), two pairs of runs with fresh seeds:

* **single**: two runs without repeats (one answer per case each);
* **repeated**: two runs with ``--repeat N`` (default 5).

Each pair is compared (``compare_runs``) twice, on every metric but the two that time this
machine (``latency_ms``, ``exec_time_ratio``: they measure its load, not the system): with the
Benjamini–Hochberg correction over the metrics compared (the default) and with none (each
metric tested alone at α = 0.05).
Counted per arm and correction: comparisons that flag any metric (``improved``, ``regressed``
or ``changed``) — the **false-alarm rate**, with its Wilson 95% interval — and the share of
metric tests flagged. Every run of the repeated arm also gives, per case-scope metric, the
ratio of its 95% CI's width (a bootstrap over cases) to the width the values would give as
independent cases (``naive_ci95``), and the flaky cases end to end; every single run the
width of its own CI, to set beside the repeated run's.

``--power``: also one pair per arm where run B has the ``text2sql`` fault on (a real
regression): it must be found either way.

    python benchmarks/repeat_false_alarms.py                   # 10 trials, repeat 5
    python benchmarks/repeat_false_alarms.py --trials 20 --power

No wall-clock figure: every number is a count over seeded runs, and the same arguments give
the same figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOISY = ROOT / "scenarios" / "shop-noisy.yaml"
FLAGGED = ("improved", "regressed", "changed")
TIMING = ("latency_ms", "exec_time_ratio")
"""Metrics that time this machine, not the system (its load while each run ran): left out of
the tests, as ``evalharness history --exclude`` leaves them out."""


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score 95% interval of k successes in n."""
    if n == 0:
        return (math.nan, math.nan)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def run(scenario, out: Path, *, seed: int, repeat: int | None, fault: str | None = None):
    """One run of the noisy shop with ``noise_seed`` ``seed`` into ``out``; its report."""
    from evalharness.api import execute

    options = {**scenario.system.options, "noise_seed": seed}
    if fault is not None:
        options["fault"] = fault
    loaded = dataclasses.replace(scenario, system=scenario.system.model_copy(
        update={"options": options}))
    if repeat is None:  # the scenario asks for repeats: a single run asks for none
        loaded = dataclasses.replace(loaded, spec=loaded.spec.model_copy(
            update={"repeat": None}))
    return execute(loaded, out=out, headroom=False, repeat=repeat).report


def flagged(comparison) -> tuple[list[str], int]:
    """The metric tests the comparison flags, and how many it made."""
    tested = [m for m in comparison.metrics if m.p_value is not None]
    return [f"{m.component}.{m.metric}" for m in tested if m.status in FLAGGED], len(tested)


def tested_metrics(report) -> list[str]:
    """Every metric of the run but those timing the machine (:data:`TIMING`)."""
    return [f"{c}.{m}" for c, comp in report.components.items() for m in comp.metrics
            if m not in TIMING]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--noise", type=float, default=None,
                        help="override the scenario's noise (default: its 0.15)")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--power", action="store_true",
                        help="also a pair per arm with the text2sql fault in run B")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)

    from evalharness.compare import compare_runs
    from evalharness.runfolder import load_run
    from evalharness.scenario import load_scenario

    scenario = load_scenario(NOISY)
    if args.noise is not None:
        scenario = dataclasses.replace(scenario, system=scenario.system.model_copy(
            update={"options": {**scenario.system.options, "noise": args.noise}}))
    arms = {"single": None, "repeated": args.repeat}
    corrections = ("bh", "none")
    alarms = {(a, c): 0 for a in arms for c in corrections}
    tests = {(a, c): [0, 0] for a in arms for c in corrections}
    ratios: list[float] = []  # repeated run: cluster CI width / naive CI width, per metric
    widths: dict[str, list[float]] = {a: [] for a in arms}  # mean CI width per run
    flaky: list[int] = []
    which: Counter[str] = Counter()  # the metrics flagged, over every comparison
    pass_rates: dict[str, list[float]] = {a: [] for a in arms}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="evalharness-repeat-") as tmp:
        folder = Path(tmp)
        for t in range(args.trials):
            for arm, repeat in arms.items():
                base = 1000 * (1 + list(arms).index(arm)) + 2 * t
                dirs = [folder / f"{arm}-{t}-{side}" for side in "ab"]
                for side, out in enumerate(dirs):
                    report = run(scenario, out, seed=base + side, repeat=repeat)
                    chosen = tested_metrics(report)
                    pass_rates[arm].append(report.bottleneck.end_to_end.pass_rate)
                    unit = [s for c in report.components.values() for s in c.metrics.values()
                            if s.scope == "case" and s.ci95 is not None
                            and s.declaration is not None
                            and tuple(s.declaration.range or ()) == (0.0, 1.0)]
                    widths[arm].append(statistics.fmean(s.ci95[1] - s.ci95[0] for s in unit))
                    if repeat is not None:
                        flaky.append(report.repeats.end_to_end.get("flaky", 0))
                        for s in unit:
                            naive = s.repeats.naive_ci95 if s.repeats else None
                            if naive and naive[1] > naive[0]:
                                ratios.append((s.ci95[1] - s.ci95[0]) / (naive[1] - naive[0]))
                for correction in corrections:
                    cmp = compare_runs(dirs[0], dirs[1], alpha=args.alpha,
                                       correction=correction, metrics=chosen)
                    hits, n = flagged(cmp)
                    tests[(arm, correction)][0] += len(hits)
                    tests[(arm, correction)][1] += n
                    alarms[(arm, correction)] += bool(hits)
                    which.update(f"{arm}/{correction}: {h}" for h in hits)
            print(f"trial {t + 1}/{args.trials} done ({time.perf_counter() - started:.0f} s)",
                  file=sys.stderr)
        power = {}
        if args.power:
            for arm, repeat in arms.items():
                a, b = folder / f"{arm}-power-a", folder / f"{arm}-power-b"
                run(scenario, a, seed=9000, repeat=repeat)
                run(scenario, b, seed=9001, repeat=repeat, fault="text2sql")
                cmp = compare_runs(a, b, alpha=args.alpha,
                                   metrics=tested_metrics(load_run(a).report))
                power[arm] = {"regressions": cmp.regressions,
                              "found": any(r.startswith("text2sql.") for r in cmp.regressions)}

    figures = {"trials": args.trials, "repeat": args.repeat, "alpha": args.alpha,
               "noise": scenario.system.options.get("noise"), "arms": {}}
    print(f"\nshop-noisy (noise {figures['noise']}), {args.trials} trials per arm: compare of "
          f"two runs of the same system (α = {args.alpha:g})\n")
    print(f"{'arm':<10} {'correction':<11} {'comparisons flagging a change':<36} "
          f"{'metric tests flagged':<22}")
    for arm in arms:
        figures["arms"][arm] = {}
        for correction in corrections:
            k = alarms[(arm, correction)]
            lo, hi = wilson(k, args.trials)
            flagged_tests, n_tests = tests[(arm, correction)]
            share = flagged_tests / n_tests if n_tests else math.nan
            figures["arms"][arm][correction] = {
                "false_alarms": k, "comparisons": args.trials, "ci95": [lo, hi],
                "tests_flagged": flagged_tests, "tests": n_tests}
            print(f"{arm:<10} {correction:<11} {f'{k}/{args.trials} ({k / args.trials:.0%}, CI {lo:.0%}–{hi:.0%})':<36} "
                  f"{f'{flagged_tests}/{n_tests} ({share:.1%})':<22}")
    single_w, rep_w = statistics.fmean(widths["single"]), statistics.fmean(widths["repeated"])
    figures["ci"] = {
        "cluster_over_naive_median": statistics.median(ratios) if ratios else None,
        "cluster_over_naive_range": [min(ratios), max(ratios)] if ratios else None,
        "mean_width_single": single_w, "mean_width_repeated": rep_w}
    figures["flaky_end_to_end"] = {"median": statistics.median(flaky) if flaky else None,
                                   "range": [min(flaky), max(flaky)] if flaky else None}
    figures["pass_rate"] = {a: statistics.fmean(v) for a, v in pass_rates.items()}
    if ratios:
        print(f"\nrepeated runs ({args.repeat} repeats): a 0–1 metric's 95% CI (resampling "
              f"cases) is {statistics.median(ratios):.2f}× (median; {min(ratios):.2f}–"
              f"{max(ratios):.2f}) the width its values give as independent cases")
    print(f"mean 95% CI width of the 0–1 metrics: single run {single_w:.3f}, repeated run "
          f"{rep_w:.3f} ({rep_w / single_w:.2f}×)")
    if flaky:
        print(f"flaky cases end to end per repeated run: median {statistics.median(flaky):g} "
              f"(range {min(flaky)}–{max(flaky)}) of 51")
    print("end-to-end pass rate: " + ", ".join(f"{a} {v:.1%}" for a, v in
                                               figures["pass_rate"].items()))
    if power:
        figures["power"] = power
        for arm, found in power.items():
            print(f"power ({arm}): the text2sql fault in run B is "
                  f"{'found' if found['found'] else 'NOT found'}: regressions "
                  f"{', '.join(found['regressions']) or 'none'}")
    if which:
        figures["flagged"] = dict(which.most_common())
        print("flagged: " + "; ".join(f"{k} ×{n}" for k, n in which.most_common()))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
