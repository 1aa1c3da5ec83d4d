"""How the monitor's drift check behaves on the shop assistant's live traffic, over seeded
repeats: how often it raises a false alarm when nothing changed, and how long after a
fault starts it raises an alarm naming the faulty component.

For each repeat (seed 0, 1, …) and each of two arms:

* **control**: N traces of live traffic (``scenarios/shop/traced.py``'s ``traffic``:
  questions drawn from the shop's cases, a fifth rephrased, 24 simulated users), no fault;
* **fault**: the same traffic (same seed: the same questions and users), the ``--fault``
  (default ``generator``: the assistant's ``invent_figures``) on from trace N/2 (from 0) on.
  ``--fault schema_migration`` is a live traffic fault of ``traced.py`` (a renamed column
  breaks the text-to-SQL queries that read it): its detection is an alarm naming text2sql.

Each trace is sent at a simulated start time (``traffic(..., at=...)``: its spans are started
and ended at that time plus their real offsets, so they keep their durations and order):
arrivals are a seeded Poisson process (``traced.arrivals``), ``--per-day`` traces a day on
average from 2026-11-01 00:00 UTC, in the order the traffic asked them. (Until issue 33 the
traffic was written in real time and each trace moved there afterwards; the times, and so
the figures, are the same.) One monitor pass (sampling rate 1.0, no retention, the shop
traffic scenario's reference-free evaluators, the offline heuristic judge) stores every
trace of an arm in a fresh DuckDB store.

Then a **check** is made every ``--every`` simulated hours, from ``--first`` hours (48) after
the first trace to the last trace: ``check_drift`` with the recent window the ``--recent`` hours
before the check's time and the baseline the ``--baseline`` hours before that (windows
clipped by the traffic's start hold less), at ``--q`` with ``--min-n``. The checks only read
the store. Counted:

* control arm: **false-alarm rate** — the share of checks that raise any alarm (Wilson 95%
  interval; checks of one repeat share traffic, so the interval is optimistic), and the share
  of repeats with at least one; both again leaving out alarms on latency metrics, which come
  from the spans' real durations (this machine's load while the traffic ran, not seeded);
* fault arm: checks whose windows end at or before the fault's first trace see the control's
  traffic (same seed, same questions and times; counted apart, not pooled); after it, the **detection delay** — from
  the start time of the first faulty trace to the time of the first check that raises an
  alarm naming the faulty component (an alarm whose component is it: its metrics, its
  verdict, its share of the failed traces as their root cause), in simulated hours and in
  faulty traces started by then; whether the first check after the fault with any alarm names
  it; which other components alarm after the fault; and the **bottleneck shift**: how often
  a root-cause-share alarm says the faulty component's share of the failed traces *rose*, and
  after how long.

    python benchmarks/drift_alarms.py                           # 10 repeats of 160 traces
    python benchmarks/drift_alarms.py --repeats 2 --traces 80   # a quick look
    python benchmarks/drift_alarms.py --alarms                  # also list every alarm
    python benchmarks/drift_alarms.py --fault schema_migration  # a fault upstream of the generator
    python benchmarks/drift_alarms.py --exclude latency_ms      # as MONITOR.yaml's drift.exclude

Every draw is seeded (traffic, arrival times, the checks' permutations), so a run prints the
same figures again — except latency metrics, which come from the spans' real durations
(``--exclude latency_ms`` leaves them out of the check, so they cannot move the
Benjamini–Hochberg thresholds either: then every figure repeats).
With the generator fault, the fault arm's retriever, router and text2sql metrics other than
latency are those of the control arm trace for trace (same seed; checked on seed 9): alarms on
them after the fault are the traffic's own, not the fault's. A fault upstream of the generator
(``schema_migration``) moves the generator's metrics too: it answers from what it was given.
No wall-clock assertion: this measures behaviour, not speed.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHOP = ROOT / "scenarios" / "shop"
SCENARIO = SHOP / "monitor" / "scenario.yaml"
EPOCH = datetime(2026, 11, 1)
"""The simulated traffic's first possible start (naive UTC)."""
FAULTS = ("generator", "text2sql", "retriever", "router", "schema_migration")
"""The shop assistant's fault variants and ``traced.py``'s live traffic faults (``--fault``):
each degrades one component (:func:`component_of`), whose alarm then counts as the
detection."""
LIVE_COMPONENT = {"schema_migration": "text2sql"}
"""The component each live traffic fault degrades (a variant's is its name)."""


def component_of(fault: str) -> str:
    """The component ``fault`` degrades: the one whose alarm counts as its detection.

    >>> component_of("generator"), component_of("schema_migration")
    ('generator', 'text2sql')
    """
    return LIVE_COMPONENT.get(fault, fault)


def _traced() -> Any:
    spec = importlib.util.spec_from_file_location("shop_traced_drift", SHOP / "traced.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


# --- traffic ---------------------------------------------------------------------------------


@dataclass
class Arm:
    """One arm of one repeat: its store and when its traces started."""

    name: str
    seed: int
    store: Path
    times: list[datetime]
    fault_at: datetime | None
    """The first faulty trace's start (None: control)."""
    root_causes: dict[str, int] = field(default_factory=dict)


def make_arm(work: Path, traced: Any, name: str, seed: int, args: argparse.Namespace) -> Arm:
    """Traffic of one arm, sent at simulated times, stored by one monitor pass."""
    from evalharness.monitor.config import load_monitor
    from evalharness.monitor.passes import MonitorRun

    folder = work / f"{name}-{seed}"
    (folder / "traffic").mkdir(parents=True)
    spans = folder / "traffic" / "spans.jsonl"
    fault_after = args.traces // 2
    times = traced.arrivals(args.traces, args.per_day, start=EPOCH, seed=seed)
    run = traced.traffic(args.traces, out=spans, seed=seed,
                         fault=args.fault if name == "fault" else None,
                         fault_after=fault_after, at=times)
    if run.dropped:
        raise SystemExit(f"{run.dropped} spans dropped writing {spans}")
    evaluators = f"evaluators: {args.evaluators}\n" if args.evaluators else ""
    monitor = folder / "monitor.yaml"
    monitor.write_text(
        f'scenario: "{SCENARIO}"\nname: drift-{name}-{seed}\nsources: ["{folder / "traffic"}"]\n'
        "sampling: {rate: 1.0}\n"
        f'store: {{path: "{folder / "monitor.duckdb"}", retention_days: null}}\n'
        f"{evaluators}", encoding="utf-8")
    pass_ = MonitorRun(load_monitor(monitor))
    try:
        summary = pass_.run_pass()
    finally:
        pass_.close()
    if summary.evaluated != args.traces:
        raise SystemExit(f"{name} arm, seed {seed}: {summary.line()}")
    return Arm(name, seed, folder / "monitor.duckdb", times,
               times[fault_after] if name == "fault" else None, summary.root_causes)


# --- checks ----------------------------------------------------------------------------------


@dataclass
class Check:
    """One drift check of an arm."""

    at: datetime
    """The recent window's end (the check's time)."""
    alarms: list[dict[str, Any]]
    tested: int
    skipped: int
    after_fault: bool
    """Its windows hold faulty traces (ends after the fault's first trace)."""
    faulty: int
    """Faulty traces started before ``at``."""
    fault: str = "generator"
    """The component whose fault the arm's traffic has (or would have)."""

    @property
    def components(self) -> set[str]:
        return {alarm_component(a) for a in self.alarms}

    @property
    def names_fault(self) -> bool:
        return self.fault in self.components

    @property
    def shift(self) -> bool:
        """A root-cause-share alarm (any route) says the faulty component's share of the failed
        traces rose: the bottleneck moved to it."""
        return any(a["kind"] == "root_cause_share" and a["component"] == self.fault
                   and a["effect"] > 0 for a in self.alarms)

    @property
    def shares(self) -> list[dict[str, Any]]:
        return [a for a in self.alarms if a["kind"] == "root_cause_share"]

    @property
    def quality_alarms(self) -> list[dict[str, Any]]:
        """The alarms but those on latency metrics (the spans' real durations: wall-clock
        time of this machine while the traffic ran, not seeded)."""
        return [a for a in self.alarms if not is_latency(a)]


def is_latency(alarm: dict[str, Any]) -> bool:
    return alarm["kind"] == "metric" and str(alarm["metric"]).endswith("latency_ms")


def alarm_component(alarm: dict[str, Any]) -> str:
    """What an alarm names: its component (a metric, a verdict, a root-cause share), or
    ``end-to-end``."""
    return alarm["component"] or ("end-to-end" if alarm["kind"] == "end_to_end" else "?")


def alarm_label(alarm: dict[str, Any]) -> str:
    what = {"metric": f"{alarm['component']} {alarm['metric']}",
            "verdict": f"{alarm['component']} verdict", "end_to_end": "end to end",
            "root_cause_share": f"root cause {alarm['component']}"}[alarm["kind"]]
    return what if alarm["route"] == "all" else f"{what} [{alarm['route']}]"


def run_checks(arm: Arm, args: argparse.Namespace) -> list[Check]:
    """A check every ``--every`` hours from ``--first`` hours after the first trace to the
    last trace's start, over the arm's store (read only)."""
    from evalharness.monitor import store
    from evalharness.monitor.drift import check_drift

    every, recent, baseline = (timedelta(hours=h) for h in
                               (args.every, args.recent, args.baseline))
    first, last = arm.times[0], arm.times[-1]
    out = []
    with store.connect(arm.store, read_only=True) as con:
        at = first + timedelta(hours=args.first)
        while at <= last + timedelta(microseconds=1):
            r = (at - recent, at)
            b = (at - recent - baseline, at - recent)
            result = check_drift(con, baseline=b, recent=r, q=args.q, min_n=args.min_n,
                                 seed=arm.seed, resamples=args.resamples,
                                 exclude=args.exclude)
            after = arm.fault_at is not None and at > arm.fault_at
            faulty = (sum(1 for t in arm.times if arm.fault_at <= t < at)
                      if arm.fault_at is not None else 0)
            out.append(Check(at, result["alarms"],
                             sum(1 for t in result["tests"] if t["skipped"] is None),
                             sum(1 for t in result["tests"] if t["skipped"] is not None),
                             after, faulty, component_of(args.fault)))
            at += every
    return out


# --- the summary -----------------------------------------------------------------------------


def rate(k: int, n: int) -> str:
    from evalharness.monitor.report import wilson

    ci = wilson(k, n)
    if ci is None:
        return "n/a"
    return f"{k}/{n} = {k / n:.1%} (95% CI {ci[0]:.1%}–{ci[1]:.1%})"


def spread(values: list[float], unit: str, digits: int = 1) -> str:
    if not values:
        return "n/a"
    return (f"median {statistics.median(values):.{digits}f} {unit}, min {min(values):.{digits}f}"
            f", max {max(values):.{digits}f}")


def counted(counter: Counter[str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counter.most_common()) or "none"


def summarise(arms: list[tuple[Arm, list[Check]]], args: argparse.Namespace) -> None:
    control = [(a, c) for a, c in arms if a.fault_at is None]
    fault = [(a, c) for a, c in arms if a.fault_at is not None]

    print()
    print("control arm (no fault): every check is a no-change check")
    checks = [c for _, cs in control for c in cs]
    alarmed = [c for c in checks if c.alarms]
    print(f"  repeats                       {len(control)}")
    print(f"  checks                        {len(checks)} ({len(checks) / max(1, len(control)):.1f}"
          f" a repeat; tests a check: median {statistics.median([c.tested for c in checks]) if checks else 0:.0f}"
          f", skipped (n < {args.min_n}) median "
          f"{statistics.median([c.skipped for c in checks]) if checks else 0:.0f})")
    print(f"  checks with any alarm         {rate(len(alarmed), len(checks))}")
    print(f"  repeats with any alarm        "
          f"{rate(sum(1 for _, cs in control if any(c.alarms for c in cs)), len(control))}")
    print(f"  the same, latency alarms left out: checks "
          f"{rate(sum(1 for c in checks if c.quality_alarms), len(checks))}; repeats "
          f"{rate(sum(1 for _, cs in control if any(c.quality_alarms for c in cs)), len(control))}")
    print(f"  alarms per alarmed check      "
          f"{spread([len(c.alarms) for c in alarmed], '', 0).replace(' ,', ',')}")
    print(f"  components alarmed (checks)   "
          f"{counted(Counter(x for c in alarmed for x in c.components))}")
    print(f"  checks with a root-cause-share alarm "
          f"{rate(sum(1 for c in checks if c.shares), len(checks))}")

    target = component_of(args.fault)
    print()
    print(f"fault arm ({args.fault} fault on from trace {args.traces // 2 + 1} of {args.traces}"
          f"{'' if target == args.fault else f'; it degrades {target}'})")
    before = [c for _, cs in fault for c in cs if not c.after_fault]
    before_alarmed = [c for c in before if c.alarms]
    print(f"  repeats                       {len(fault)}")
    print(f"  checks before the fault       {len(before)}; with any alarm "
          f"{rate(len(before_alarmed), len(before))} (the control's traffic until then)")
    after = [c for _, cs in fault for c in cs if c.after_fault]
    print(f"  checks after the fault starts {len(after)}; with any alarm "
          f"{rate(sum(1 for c in after if c.alarms), len(after))}; naming {target} "
          f"{rate(sum(1 for c in after if c.names_fault), len(after))}")
    hours, traces, first_right, first_other = [], [], 0, Counter()
    detected, first_any, by_latency = 0, 0, 0
    quality_first, quality_right = 0, 0
    shifted, shift_hours, shift_traces = 0, [], []
    for arm, cs in fault:
        post = [c for c in cs if c.after_fault]
        hit = next((c for c in post if c.names_fault), None)
        if hit is not None:
            detected += 1
            hours.append((hit.at - arm.fault_at).total_seconds() / 3600)
            traces.append(hit.faulty)
            by_latency += not any(alarm_component(a) == target and not is_latency(a)
                                  for a in hit.alarms)
        first = next((c for c in post if c.alarms), None)
        if first is not None:
            first_any += 1
            first_right += first.names_fault
            first_other.update(x for x in first.components if x != target)
        first_quality = next((c for c in post if c.quality_alarms), None)
        if first_quality is not None:  # latency alarms left out: seeded, repeats exactly
            quality_first += 1
            quality_right += target in {alarm_component(a) for a in first_quality.quality_alarms}
        moved = next((c for c in post if c.shift), None)
        if moved is not None:
            shifted += 1
            shift_hours.append((moved.at - arm.fault_at).total_seconds() / 3600)
            shift_traces.append(float(moved.faulty))
    print(f"  repeats detected              {rate(detected, len(fault))} (a check after the "
          f"fault names {target}, before the traffic ends)")
    print(f"  delay, simulated hours        {spread(hours, 'h')}")
    print(f"  delay, faulty traces          {spread([float(t) for t in traces], 'traces', 0)}")
    print(f"  detections by a {target} latency alarm alone: {by_latency}")
    print(f"  first alarm after the fault   names {target} in {rate(first_right, first_any)}"
          f" of the repeats with one")
    print(f"    other components in it      {counted(first_other)}")
    print(f"    latency alarms left out     names {target} in "
          f"{rate(quality_right, quality_first)}")
    print(f"  bottleneck shift: a root-cause-share alarm says {target}'s share of the failed "
          f"traces rose")
    print(f"    repeats                     {rate(shifted, len(fault))}")
    print(f"    checks after the fault      {rate(sum(1 for c in after if c.shift), len(after))}")
    print(f"    delay                       {spread(shift_hours, 'h')}; "
          f"{spread(shift_traces, 'faulty traces', 0)}")
    moves = Counter(x for c in after for x in {
        f"{a['component']} {'up' if a['effect'] > 0 else 'down'}" for a in c.shares})
    print(f"    root-cause-share alarms after the fault (checks) {counted(moves)}")
    print(f"  components alarmed after the fault (checks) "
          f"{counted(Counter(x for c in after if c.alarms for x in c.components))}")
    print(f"  root causes stored (all repeats, fault arm) "
          f"{counted(sum((Counter(a.root_causes) for a, _ in fault), Counter()))}")
    print(f"  root causes stored (all repeats, control)   "
          f"{counted(sum((Counter(a.root_causes) for a, _ in control), Counter()))}")


def list_alarms(arms: list[tuple[Arm, list[Check]]]) -> None:
    print()
    print("every alarm (arm, seed, hours after the first trace, [after the fault]: alarms)")
    for arm, cs in arms:
        for c in cs:
            if c.alarms:
                h = (c.at - arm.times[0]).total_seconds() / 3600
                flag = " after fault" if c.after_fault else ""
                print(f"  {arm.name:7} {arm.seed:3} {h:6.1f}h{flag}: "
                      + "; ".join(f"{alarm_label(a)} q={a['p_adjusted']:.2g} "
                                  f"effect {a['effect']:+.3g}" for a in c.alarms))


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--repeats", type=int, default=10, help="seeds 0 … R-1 (10)")
    parser.add_argument("--fault", choices=FAULTS, default="generator",
                        help="the fault switched on midway (generator: invent_figures; "
                             "schema_migration: traced.py's live fault of text2sql)")
    parser.add_argument("--traces", type=int, default=160,
                        help="traces of traffic per arm and repeat; the fault arm's fault is "
                             "on from the second half (160)")
    parser.add_argument("--per-day", type=float, default=40.0,
                        help="simulated traces a day, on average (40)")
    parser.add_argument("--first", type=float, default=None,
                        help="the first check, hours after the first trace (48; under 4 "
                             "simulated days of traffic: the recent window and the hours "
                             "min_n traces take to arrive, 36 for --traces 80)")
    parser.add_argument("--every", type=float, default=6.0, help="hours between checks (6)")
    parser.add_argument("--recent", type=float, default=24.0,
                        help="the recent window, hours before the check (24)")
    parser.add_argument("--baseline", type=float, default=72.0,
                        help="the baseline window, hours before the recent one (72)")
    parser.add_argument("--q", type=float, default=0.05,
                        help="Benjamini–Hochberg false discovery rate of a check (0.05)")
    parser.add_argument("--min-n", type=int, default=20,
                        help="fewer values in a window: the comparison is skipped (20)")
    parser.add_argument("--resamples", type=int, default=10_000,
                        help="permutation test resamples (10,000, check_drift's default)")
    parser.add_argument("--evaluators", default="",
                        help="MONITOR.yaml `evaluators:` as a YAML flow mapping (default: "
                             "the shop traffic scenario's)")
    parser.add_argument("--exclude", action="append", default=[], metavar="METRIC",
                        help="leave a metric out of the check, as MONITOR.yaml's "
                             "drift.exclude (repeatable): --exclude latency_ms")
    parser.add_argument("--alarms", action="store_true", help="list every alarm raised")
    parser.add_argument("--work", type=Path, default=None,
                        help="keep the stores here (default: a temporary folder, removed)")
    args = parser.parse_args()
    if args.traces < 2 or args.repeats < 1:
        parser.error("--traces must be 2 or more and --repeats 1 or more")
    if args.first is None:
        args.first = (48.0 if args.traces / args.per_day >= 4
                      else args.recent + 24 * args.min_n / args.per_day)

    work = args.work or Path(tempfile.mkdtemp(prefix="drift-alarms-"))
    work.mkdir(parents=True, exist_ok=True)
    traced = _traced()
    began = time.perf_counter()
    spent = {"traffic and monitor pass": 0.0, "checks": 0.0}
    arms: list[tuple[Arm, list[Check]]] = []
    try:
        for seed in range(args.repeats):
            for name in ("control", "fault"):
                t = time.perf_counter()
                arm = make_arm(work, traced, name, seed, args)
                spent["traffic and monitor pass"] += time.perf_counter() - t
                t = time.perf_counter()
                arms.append((arm, run_checks(arm, args)))
                spent["checks"] += time.perf_counter() - t
            print(f"seed {seed}: done ({time.perf_counter() - began:.0f} s)", file=sys.stderr)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)

    days = args.traces / args.per_day
    print(f"traffic: {args.repeats} repeats x 2 arms x {args.traces} traces, {args.per_day:g} a "
          f"simulated day on average (Poisson arrivals, about {days:.1f} days); one monitor "
          f"pass per arm (rate 1.0, evaluators: {args.evaluators or 'the scenario' + chr(39) + 's'}"
          f", heuristic judge)")
    print(f"checks: every {args.every:g} h from {args.first:g} h after the first trace to the "
          f"last; recent = the {args.recent:g} h before the check, baseline = the "
          f"{args.baseline:g} h before that; q = {args.q:g}, min_n = {args.min_n}, "
          f"{args.resamples} permutations")
    summarise(arms, args)
    if args.alarms:
        list_alarms(arms)
    print()
    print("time: " + ", ".join(f"{k} {v:.0f} s" for k, v in spent.items())
          + f", total {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
