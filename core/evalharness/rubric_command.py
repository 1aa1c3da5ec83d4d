"""``evalharness rubric try``: what the judge says of a criterion on a few cases, before a run.

A criterion written in the scenario (docs/judge.md, "Criteria you write") is worth reading
against a handful of cases before paying for a full run: this loads the scenario, answers the
chosen cases (the system, or the recorded traces), evaluates only that metric, and prints each
case's value and the judge's reason. Nothing is written but the judge cache (a later run reuses
the judgments).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from evalharness.errors import UsageError


@click.group()
def rubric() -> None:
    """Try a criterion written in the scenario (a `judged` metric) before a full run.

    \b
    Examples:
      evalharness rubric try scenarios/shop-rubrics.yaml no_false_promises
      evalharness rubric try scenarios/shop-rubrics.yaml reads_sizes_right --cases q001,q020
    """


@rubric.command("try")
@click.argument("scenario", type=click.Path(path_type=Path, dir_okay=False))
@click.argument("metric")
@click.option("--cases", "ids", metavar="IDS",
              help="Comma-separated case ids (default: the first --limit cases).")
@click.option("--limit", type=click.IntRange(1, 100), default=3, show_default=True,
              help="How many cases, without --cases.")
@click.option("--plugin", "plugins", multiple=True, metavar="FILE",
              help="A local plugin file to load (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the judgments as JSON.")
def try_(scenario: Path, metric: str, ids: str | None, limit: int,
         plugins: tuple[str, ...], as_json: bool) -> None:
    """Judge METRIC of SCENARIO on a few cases and print what the judge says.

    METRIC is a metric the scenario configures (a `judged` criterion, or any other): each
    chosen case is answered (the system, or its recorded trace), that metric alone is
    evaluated, and its value and the judge's reason are printed with the rubric's version.
    Only the judge cache is written.

    \b
    Examples:
      evalharness rubric try scenarios/shop-rubrics.yaml no_false_promises
      evalharness rubric try scenarios/shop-rubrics.yaml reads_sizes_right --cases q001,q020
    """
    from evalharness.api import load
    from evalharness.prepare import load_system, make_judge, prepare_context
    from evalharness.scoring import evaluate_batch

    loaded = load(scenario, plugins=plugins)
    found = [e for e in loaded.evaluators if metric in e.metrics]
    if not found:
        known = sorted({f"{e.component}.{m}" for e in loaded.evaluators for m in e.metrics})
        raise UsageError(f"{scenario}: no metric {metric!r} is configured; it has "
                         f"{', '.join(known)}")
    configured = found[0]
    cases = _cases(loaded, ids, limit, scenario)
    judge = make_judge(loaded)
    try:
        with tempfile.TemporaryDirectory(prefix="evalharness-rubric-") as folder:
            context = prepare_context(loaded, Path(folder), judge)
            traces = _traces(loaded, cases, load_system)
            results = evaluate_batch(loaded, context, list(zip(cases, traces, strict=True)),
                                     only={(configured.component, metric)})
    finally:
        judge.close()
    declaration = configured.declaration(metric)
    rows = []
    for result in results:
        comp = result.components.get(configured.component)
        value = comp.metrics.get(metric) if comp is not None else None
        reason = comp.reason if comp is not None and value is None else None
        records = (value.details.get("judgments") or []) if value is not None else []
        rows.append({"case": result.case.id,
                     "value": value.value if value is not None else None,
                     "error": (value.error if value is not None else
                               reason or f"the trace has no {configured.component} step"),
                     "reason": value.details.get("reason") if value is not None else None,
                     "requests": sum(r.get("requests", 0) for r in records),
                     "cached": all(r.get("cached") for r in records) if records else False})
    summary = {"metric": metric, "component": configured.component,
               "version": declaration.version, "verdict": declaration.verdict,
               "judge": judge.label(), "cases": rows}
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    _print(summary)


def _cases(loaded, ids: str | None, limit: int, scenario: Path) -> list:
    if not ids:
        return loaded.cases[:limit]
    wanted = [i.strip() for i in ids.split(",") if i.strip()]
    by_id = {c.id: c for c in loaded.cases}
    missing = [i for i in wanted if i not in by_id]
    if missing:
        raise UsageError(f"--cases: no case {missing[0]!r} in {scenario}")
    return [by_id[i] for i in wanted]


def _traces(loaded, cases: list, load_system) -> list:
    """Each case's trace: the system's answer (under its time limit), or the recorded one."""
    from evalharness.execution import answer
    from evalharness.models import Trace

    if loaded.system is None:
        return [loaded.traces.get(c.id) or Trace(case_id=c.id, error="no recorded trace")
                for c in cases]
    func = load_system(loaded)
    is_async = asyncio.iscoroutinefunction(func)

    async def all_of() -> list:
        return [await answer(func, c, loaded.system.options, is_async=is_async,
                             timeout_s=loaded.system.timeout_s) for c in cases]

    return asyncio.run(all_of())


def _print(summary: dict) -> None:
    console = Console()
    verdict = f", verdict {summary['verdict']}" if summary["verdict"] else ""
    table = Table(title=f"{summary['component']}.{summary['metric']} "
                        f"(rubric {summary['version'] or '—'}{verdict}; judge "
                        f"{summary['judge']})", title_justify="left")
    table.add_column("case")
    table.add_column("value", justify="right")
    table.add_column("the judge says")
    for row in summary["cases"]:
        value = f"{row['value']:g}" if row["value"] is not None else "error"
        said = row["reason"] or row["error"] or ""
        if row["cached"]:
            said += " (from the cache)"
        table.add_row(row["case"], value, said)
    console.print(table)
    asked = sum(r["requests"] for r in summary["cases"])
    console.print(f"{asked} requests to the judge; nothing written but the judge cache")
