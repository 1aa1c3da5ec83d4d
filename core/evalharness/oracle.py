"""Oracle headroom: how many failed cases a perfect component would have fixed.

Attribution (:mod:`evalharness.attribution`) says where a failed case *starts* to go wrong;
headroom asks the counterfactual question. After a run, each case that failed end to end is
run again with one component's output replaced by its gold — the router's by the gold routes,
text-to-SQL's by the gold SQL and its rows, the retriever's by the gold relevant chunks — and
evaluated like any case. The end-to-end pass-rate gain is that component's headroom. One more
rerun imposes every oracle a case has at once: what is left failing then is the generator's,
or an interaction.

The protocol (docs/bottleneck.md): the system callable declares a keyword parameter
``overrides``; for a rerun it receives ``{component: {field: value, ...}}``, the fields of the
component's trace step, and must use them instead of running the component, and record them
in its trace. A system without that parameter gets no headroom (the report says why). The
oracle outputs come from plugins, through the oracle each registers for a component kind
(``register_oracles``; the deprecated ``oracle_output`` hook is asked for the others): the
built-in plugins provide one for routers, text-to-SQL and retrievers; generators have none
(their gold, the reference answer, is what the end-to-end verdict compares against).

Reruns are written to ``headroom.jsonl`` next to ``results.jsonl`` (one record per oracle and
case, flushed as they finish), so an interrupted run resumes them too.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalharness.context import EvalContext
from evalharness.errors import NoOracle
from evalharness.judge.base import judge_usage
from evalharness.models import Bottleneck, Case, CaseResult, HeadroomRecord, HeadroomRow, Trace
from evalharness.prepare import PARAMETER as PARAMETER  # re-exported: its home was here
from evalharness.prepare import takes_keyword
from evalharness.results import append_lines
from evalharness.sampling import stratified
from evalharness.scenario import Scenario
from evalharness.stats import bootstrap_ci, cluster_bootstrap_ci, seed_for
from evalharness.work import Emit, Work

HEADROOM = "headroom.jsonl"

ALL = "+"
"""Joins the components of the oracle that imposes every component's gold at once."""

MAX_CASES = 1000
"""Failed cases rerun by default (``system.headroom: true``); beyond it, a seeded sample
stratified by gold route (the case sampler, :mod:`evalharness.sampling`) of this many is rerun and the gain is estimated from it (with a wider interval)."""


def sample_failed(results: Iterable[CaseResult], limit: int
                  ) -> tuple[list[int], int]:
    """The indexes of the failed cases to rerun (all, or a seeded sample of ``limit``
    stratified by gold route, in case order), and how many failed in all. One pass over
    ``results``.

    >>> from evalharness.models import Case, CaseResult, Verdict
    >>> rs = [CaseResult(case=Case(id=f"c{i}", question="q"), trace={"case_id": f"c{i}"},
    ...                  end_to_end=Verdict(status="fail" if i % 2 else "pass"))
    ...       for i in range(10)]
    >>> sample_failed(rs, 1000), sample_failed(rs, 2) == sample_failed(rs, 2)
    (([1, 3, 5, 7, 9], 5), True)
    >>> len(sample_failed(rs, 2)[0]), sample_failed(rs, 2)[1]
    (2, 5)
    """
    # failed end to end (an error of measurement is nothing an oracle could fix)
    failed = [(i, r.case) for i, r in enumerate(results)
              if r.end_to_end is not None and r.outcome == "fail"]
    chosen = stratified(failed, limit, seed_for("headroom-sample"), key=lambda item: item[1])
    return [i for i, _ in chosen], len(failed)


def limit_of(setting: bool | int) -> int:
    """The most failed cases to rerun for a ``system.headroom`` setting (``true``:
    :data:`MAX_CASES`)."""
    return MAX_CASES if setting is True else int(setting)


def accepts_overrides(func: Callable[..., Any] | None) -> bool:
    """Whether the system callable declares the ``overrides`` keyword parameter (a bare
    ``**kwargs`` does not count: a system that swallows overrides silently would report a
    headroom of zero).

    >>> def answer(case, *, overrides=None): ...
    >>> def legacy(case, **options): ...
    >>> accepts_overrides(answer), accepts_overrides(legacy), accepts_overrides(None)
    (True, False, False)
    """
    return takes_keyword(func, PARAMETER)


@dataclass(frozen=True)
class Job:
    """One rerun: an oracle (one component, or all of them) on one failed case."""

    oracle: str
    components: tuple[str, ...]
    case: Case
    overrides: dict[str, dict[str, Any]]
    repeat: int | None = None
    """The failed repeat of the case (a run with ``--repeat``): rerun as that repeat."""

    @property
    def key(self) -> tuple[str, str, int | None]:
        return (self.oracle, self.case.id, self.repeat)


class Failed(str):
    """Why an oracle output could not be built because a plugin failed (not a missing gold)."""


def oracle_outputs(scenario: Scenario, context: EvalContext, result: CaseResult
                   ) -> dict[str, dict[str, Any] | str]:
    """Component -> its oracle output for the case (a dict of step fields), or the reason
    there is none: no plugin provides one for its kind, the case lacks the gold (a ``str``),
    or a plugin failed (a :class:`Failed`). In pipeline order."""
    out: dict[str, dict[str, Any] | str] = {}
    for component in scenario.pipeline.order:
        kind = scenario.pipeline.kind(component)
        try:
            plugin, found = scenario.host.oracle_output(component, kind, result.case, context)
        except NoOracle as exc:
            out[component] = str(exc)
            continue
        except Exception as exc:  # a broken plugin costs this oracle, not the run
            who = _oracle_of(scenario, kind)
            out[component] = Failed(f"the oracle output of {who} for {kind} components "
                                    f"raised {type(exc).__name__}: {exc}")
            continue
        if found is None:
            out[component] = f"no plugin provides an oracle output for {kind} components"
        elif not isinstance(found, dict):
            out[component] = Failed(f"{_oracle_of(scenario, kind, plugin)}'s oracle output for "
                                    f"{kind} components is a {type(found).__name__}, not a "
                                    "dict of step fields")
        else:
            out[component] = found
    return out


def _oracle_of(scenario: Scenario, kind: str, plugin: str | None = None) -> str:
    """Who offers the oracle of ``kind``: ``plugin 'x'``, or ``a plugin`` (the deprecated
    hook does not say which)."""
    registered = scenario.host.registry.oracle(kind)
    plugin = plugin or (registered.plugin if registered is not None else None)
    return f"plugin {plugin!r}" if plugin else "a plugin"


def plan(scenario: Scenario, context: EvalContext, results: Sequence[CaseResult],
         limit: int = MAX_CASES
         ) -> tuple[list[tuple[str, tuple[str, ...]]], list[Job], list[HeadroomRecord]]:
    """The oracles (label, components), the reruns they need, and the records of the failed
    cases no rerun can help (no oracle output): one per oracle and failed case in all — of
    at most ``limit`` failed cases (:func:`sample_failed`). Of the results, only the cases
    of those are kept (each read again by its index)."""
    chosen, _ = sample_failed(results, limit)
    failed: list[tuple[int, Case]] = []
    outputs = {}
    repeats: dict[int, int | None] = {}
    for i in chosen:
        result = results[i]
        outputs[i] = oracle_outputs(scenario, context, result)
        failed.append((i, result.case))
        repeats[i] = result.repeat
    components = [c for c in scenario.pipeline.order
                  if c in scenario.pipeline.components and any(
                      isinstance(outputs[i].get(c), dict) for i, _ in failed)]
    oracles = [(c, (c,)) for c in scenario.pipeline.order]
    if len(components) > 1:
        oracles.append((ALL.join(components), tuple(components)))
    jobs: list[Job] = []
    skipped: list[HeadroomRecord] = []
    for label, comps in oracles:
        for i, case in failed:
            given = {c: o for c in comps if isinstance(o := outputs[i].get(c), dict)}
            failed_here = [c for c in comps if isinstance(outputs[i].get(c), Failed)]
            if failed_here:  # a broken plugin: an error, never a silent "no oracle"
                why = "; ".join(f"{c}: {outputs[i][c]}" for c in failed_here)
                skipped.append(HeadroomRecord(oracle=label, components=list(comps),
                                              case_id=case.id, repeat=repeats[i],
                                              status="error", reason=why))
            elif given:
                jobs.append(Job(label, comps, case, given, repeats[i]))
            else:
                why = "; ".join(f"{c}: {outputs[i].get(c)}" for c in comps)
                skipped.append(HeadroomRecord(oracle=label, components=list(comps),
                                              case_id=case.id, repeat=repeats[i],
                                              status="no_oracle", reason=why))
    return oracles, jobs, skipped


def ignored(trace: Trace, overrides: dict[str, dict[str, Any]]) -> str | None:
    """Why the trace shows the system did not use an override (a step it records differs from
    the imposed output), or ``None``. A component that did not run is fine: an upstream
    decision (a route) can make an oracle moot."""
    for component, fields in overrides.items():
        step = trace.step(component)
        if step is None:
            continue
        recorded = step if isinstance(step, dict) else step.model_dump(mode="json")
        for name, value in fields.items():
            if _json(recorded.get(name)) != _json(value):
                return (f"the system did not apply the {component} override: its trace has "
                        f"{name}={_short(recorded.get(name))}, the oracle gave "
                        f"{_short(value)} (a system that accepts `overrides` must use and "
                        "record them; see docs/bottleneck.md)")
    return None


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _short(value: Any, limit: int = 80) -> str:
    text = _json(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def record_of(job: Job, result: CaseResult, trace: Trace) -> HeadroomRecord:
    """What a rerun shows: fixed, still failing, or an error (with the reason)."""
    base = {"oracle": job.oracle, "components": list(job.components),
            "case_id": result.case.id, "repeat": job.repeat}
    problem = trace.error or ignored(trace, job.overrides)
    if problem is not None:
        return HeadroomRecord(**base, status="error", reason=problem)
    judgments = result.judgment_records()
    if judgments:
        base["judge"] = judge_usage(judgments)
    e2e = result.end_to_end
    verdicts = {c: v.status for c, v in result.verdicts.items()}
    if e2e is None or e2e.status == "error":
        why = (e2e.reason or "") if e2e is not None else "no end-to-end verdict"
        return HeadroomRecord(**base, status="error", reason=why, verdicts=verdicts)
    if e2e.status == "pass":
        return HeadroomRecord(**base, status="fixed", reason=e2e.reason or "",
                              verdicts=verdicts)
    attribution = result.attribution
    why = (attribution.reason if attribution is not None else e2e.reason) or ""
    return HeadroomRecord(**base, status="still_fails", reason=why, verdicts=verdicts)


def read_records(path: Path) -> list[HeadroomRecord]:
    """The records of ``headroom.jsonl`` (a torn last line, left by a kill, is dropped)."""
    if not path.is_file():
        return []
    out = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for n, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            out.append(HeadroomRecord.model_validate_json(line))
        except ValueError:
            if n == len(lines) - 1:
                break
            raise
    return out


Rerun = Callable[[list[Work], Emit], Awaitable[bool]]
"""``rerun(work, emit)``: the run's executor doing the reruns (:func:`evalharness.executors.
execute`); ``emit(group, lines)`` gets each group's ``results.jsonl`` lines; returns whether a
stop was requested."""


async def run_headroom(scenario: Scenario, context: EvalContext,
                       results: Sequence[CaseResult], out_dir: Path, *, rerun: Rerun,
                       progress: Any, limit: int = MAX_CASES
                       ) -> tuple[list[tuple[str, tuple[str, ...]]], list[HeadroomRecord]]:
    """Rerun the failed cases under each oracle (skipping reruns ``headroom.jsonl`` already
    holds); return the oracles and every record. The reruns are the run's machinery's work
    (``rerun``: the same executor, the system under the same time limit, evaluated the same
    way, the same stop signal), one :class:`~evalharness.executors.Work` per rerun with the
    oracle's ``overrides``; this module plans them and makes each result a record."""
    path = out_dir / HEADROOM
    done = {(r.oracle, r.case_id, r.repeat): r for r in read_records(path)}
    oracles, jobs, skipped = plan(scenario, context, results, limit)
    records = list(skipped)
    pending = [j for j in jobs if j.key not in done]
    records += [done[j.key] for j in jobs if j.key in done]
    with open(path, "w", encoding="utf-8") as sink:  # rewritten whole: drops a torn tail
        for record in records:
            sink.write(record.model_dump_json() + "\n")
        sink.flush()
        if not pending:
            return oracles, records
        by_key: dict[str, Job] = {}
        work = []
        for job in pending:
            item = Work(job.case.id, oracle=job.oracle, overrides=job.overrides,
                        repeat=job.repeat)
            by_key[item.key] = job
            work.append(item)

        def emit(group: list, lines: list[str]) -> None:
            new = []
            for item, line in zip(group, lines, strict=True):
                result = CaseResult.model_validate_json(line)
                new.append(record_of(by_key[item.key], result, result.trace))
            append_lines(sink, (r.model_dump_json() for r in new))
            records.extend(new)
            progress.advance(len(new))

        progress.start(len(jobs), len(jobs) - len(pending), label="oracle reruns")
        try:
            stopped = await rerun(work, emit)
        finally:
            progress.stop()
        if stopped:
            raise asyncio.CancelledError
    return oracles, records


def summarise(records: Sequence[HeadroomRecord], oracles: Sequence[tuple[str, Sequence[str]]],
              bottleneck: Bottleneck, decided_cases: Mapping[str, int] | None = None
              ) -> list[HeadroomRow]:
    """One row per oracle: cases fixed, still failing, without an oracle, errors, and the gain
    in end-to-end pass rate over the run's decided cases, with a seeded bootstrap CI.

    When only a sample of the failed cases was rerun, each fixed case stands for
    ``failed / sampled`` of them (the gain is estimated from the sample; its interval resamples
    the decided cases with those weights, so it is wider). ``decided_cases``: in a run with
    repeats, each case's decided results (id -> how many): the interval then resamples whole
    cases."""
    e2e = bottleneck.end_to_end
    decided = e2e.passed + e2e.failed
    rows = []
    for label, comps in oracles:
        mine = [r for r in records if r.oracle == label]
        counts = Counter(r.status for r in mine)
        fixed = counts["fixed"]
        completed = fixed + counts["still_fails"]
        sampled = len(mine)
        notes = []
        if e2e.failed and sampled < e2e.failed:
            notes.append(f"estimated from a seeded sample (stratified by gold route) of "
                         f"{sampled} of the {e2e.failed} failed cases")
        if counts["error"]:
            errors = Counter(r.reason for r in mine if r.status == "error")
            notes.append(f"{counts['error']} reruns failed, e.g. {errors.most_common(1)[0][0]}")
        if counts["no_oracle"]:
            reasons = Counter(r.reason.split("; ")[0] for r in mine if r.status == "no_oracle")
            notes.append(f"{counts['no_oracle']} failed cases have no oracle output, e.g. "
                         f"{reasons.most_common(1)[0][0]}")
        # a gain counts the reruns that completed; none completed: not computed, not zero
        gain = ci = None
        if decided and (completed or not e2e.failed):
            weight = e2e.failed / sampled if sampled else 0.0
            seed = seed_for("headroom", label)
            if decided_cases:  # repeats: a case's decided results together, cases resampled
                by_case = Counter(r.case_id for r in mine if r.status == "fixed")
                values, groups = [], []
                for g, (case_id, k) in enumerate(decided_cases.items()):
                    f = min(by_case.get(case_id, 0), k)
                    values += [weight] * f + [0.0] * (k - f)
                    groups += [g] * k
                gain = math.fsum(values) / decided
                found = cluster_bootstrap_ci(values, groups, seed=seed)
            else:
                values = [weight] * fixed + [0.0] * (decided - fixed)
                gain = math.fsum(values) / decided
                found = bootstrap_ci(values, seed=seed)
            ci = None if found is None else [found[0], found[1]]
        reason = "; ".join(notes) or (None if e2e.failed else "no case failed end to end")
        rows.append(HeadroomRow(
            oracle=label, components=list(comps), gain=gain, ci95=ci,
            pass_rate=(e2e.pass_rate + gain) if gain is not None and e2e.pass_rate is not None
            else None,
            fixed=fixed, still_fails=counts["still_fails"], no_oracle=counts["no_oracle"],
            errors=counts["error"], sampled=sampled if sampled < e2e.failed else None,
            reason=reason))
    return rows
