"""The ``evalharness`` command line: run scenarios, list plugins, print schemas."""

from __future__ import annotations

import contextlib
import importlib
import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress
from rich.table import Table

from evalharness.errors import EvalHarnessError, InfrastructureError
from evalharness.exitcodes import GATE_FAILED as EXIT_GATE_FAILED
from evalharness.exitcodes import INFRASTRUCTURE as EXIT_INFRASTRUCTURE
from evalharness.exitcodes import INPUT as EXIT_INPUT
from evalharness.exitcodes import INTERRUPTED as EXIT_INTERRUPTED
from evalharness.exitcodes import run_status
from evalharness.formatting import judge_cell
from evalharness.models import Case, CaseResult, Report, Trace
from evalharness.plugins import load_plugins
from evalharness.render import (
    count,
    fmt,
    fmt_ci,
    gain,
    headline,
    headroom_of,
    headroom_sentence,
    n_cases,
    pct,
    pct_ci,
    repeat_line,
    runs_of,
    usage_line,
)
from evalharness.runner import Progress
from evalharness.scenario import ScenarioFile, load_scenario
from evalharness.validation import validate_scenario
from evalharness.version import __version__


class InputProblem(click.ClickException):
    """Bad input or usage: printed as one paragraph, exit code 2."""

    exit_code = EXIT_INPUT


LAZY_COMMANDS = {
    "init": "evalharness.scaffold:init",
    "synth": "evalharness.synth.command:synth",
    "review": "evalharness.review.command:review",
    "agreement": "evalharness.review.command:agreement",
    "rubric": "evalharness.rubric_command:rubric",
    "monitor": "evalharness.monitor.command:monitor",
    "history": "evalharness.history_command:history",
}
"""Commands that live in modules of their own, imported only when the command runs (or
``--help`` lists it): a run of ``evalharness scenario`` does not pay for them."""


class Commands(click.Group):
    """The command group: an error of the core's (bad input, a refused run) raised by any
    command is one paragraph and exit code 2, never a traceback. The commands of
    :data:`LAZY_COMMANDS` are imported when asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in LAZY_COMMANDS:
            module, _, name = LAZY_COMMANDS[cmd_name].partition(":")
            command = getattr(importlib.import_module(module), name)
            self.add_command(command, cmd_name)
        return command

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except EvalHarnessError as exc:
            raise InputProblem(str(exc)) from None
        except KeyboardInterrupt:  # Ctrl-C before a command's own handling: 130, as for any
            click.echo("interrupted", err=True)  # run (click's own answer, exit 1, would
            sys.exit(EXIT_INTERRUPTED)           # read as "a gate failed")


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="evalharness")
def cli() -> None:
    """Evaluate a multi-component RAG application component by component.

    \b
    Examples:
      evalharness init evals/                             scaffold a scenario for your app
      evalharness scenario scenarios/shop.yaml            run the shop scenario
      evalharness scenario scenarios/shop.yaml --sample 20 --seed 1   try 20 cases
      evalharness scenario scenarios/shop.yaml --out run/ --concurrency 8
      evalharness compare runs/base runs/candidate        did anything regress?
      evalharness history runs/nightly-* --out history/   runs over time, changes marked
      evalharness plugins --json                          what is installed
      evalharness schema trace                            JSON Schema of a trace
      evalharness trec qrels.txt run.txt -m map -m ndcg_cut_10   trec_eval-style
      evalharness traces explain spans.jsonl              recorded spans → components
      evalharness synth scenarios/shop.yaml --out c.jsonl --n 200   cases from your data
      evalharness review serve run/ --sample 30           label cases in the browser
      evalharness agreement run/                          how far to trust the judge
    """



class BarProgress(Progress):
    """A progress bar on stderr; silent when stderr is not a terminal or with --quiet."""

    def __init__(self, enabled: bool) -> None:
        self.bar = RichProgress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True), transient=True, disable=not enabled)
        self.task = None

    def start(self, total: int, done: int, label: str = "cases") -> None:
        if self.task is not None:  # a new phase (the oracle reruns): one bar at a time
            self.bar.remove_task(self.task)
        self.bar.start()
        self.task = self.bar.add_task(label, total=total, completed=done)

    def advance(self, n: int = 1) -> None:
        self.bar.advance(self.task, n)

    def stop(self) -> None:
        self.bar.stop()


@cli.command()
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Output folder (default: runs/<scenario name>-<timestamp>).")
@click.option("--concurrency", type=click.IntRange(1, 256),
              help="How many cases the system handles at once (overrides the scenario).")
@click.option("--resume", is_flag=True,
              help="Continue an interrupted run in --out without redoing finished cases.")
@click.option("--limit", type=click.IntRange(1), metavar="N",
              help="Run only the first N cases (file order).")
@click.option("--sample", type=click.IntRange(1), metavar="N",
              help="Run a seeded sample of N cases, stratified by gold route so every branch "
                   "is covered.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of --sample.")
@click.option("--filter", "filters", multiple=True, metavar="EXPR",
              help="Run only the cases matching EXPR: an id glob ('q01*'), 'tag:T', "
                   "'route:sql' (gold route); ',' separates alternatives, '!' negates; "
                   "repeat to require several.")
@click.option("--rerun-failed", type=click.Path(file_okay=False, path_type=Path),
              metavar="RUN", help="Run only the cases that failed end to end in the run folder "
                                  "RUN.")
@click.option("--junit-xml", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="Also write the case × component verdicts and the gates as JUnit XML.")
@click.option("--plugin", "plugins", multiple=True, type=click.Path(dir_okay=False),
              help="A local plugin file to load (repeatable).")
@click.option("--judge", "judge_backend", help="Judge backend (overrides `judge.backend`).")
@click.option("--judge-concurrency", type=click.IntRange(1, 512),
              help="Judge requests in flight at once (overrides `judge.concurrency`).")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the judge cache.")
@click.option("--refresh-cache", is_flag=True,
              help="Ask the judge again and overwrite what the cache holds.")
@click.option("--no-headroom", is_flag=True,
              help="Skip the oracle reruns of failed cases (headroom per component).")
@click.option("--repeat", type=click.IntRange(1, 1000), metavar="N",
              help="Run each case N times: values reduced per case with their spread, "
                   "intervals over cases, flaky cases listed (overrides `repeat:`; "
                   "docs/repeat.md).")
@click.option("--repeat-judge", type=click.Choice(["cached", "fresh"]),
              help="cached (default): an answer judged before is not judged again; fresh: "
                   "every repeat asks the judge anew, to measure its variance too.")
@click.option("--executor", default="local", show_default=True, metavar="NAME",
              help="Where the cases run: local (this process) or ray (a Ray cluster; "
                   "pip install 'evalharness[ray]'), or an executor a plugin registers.")
@click.option("--address", metavar="ADDRESS",
              help="The cluster of --executor ray: 'auto' (a running `ray start` cluster) or "
                   "ray://HOST:PORT; default: a new local Ray instance.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar and no table.")
def scenario(path: Path, out_dir: Path | None, concurrency: int | None, resume: bool,
             limit: int | None, sample: int | None, seed: int, filters: tuple[str, ...],
             rerun_failed: Path | None, junit_xml: Path | None,
             plugins: tuple[str, ...], judge_backend: str | None,
             judge_concurrency: int | None, no_cache: bool, refresh_cache: bool,
             no_headroom: bool, repeat: int | None, repeat_judge: str | None, executor: str,
             address: str | None, quiet: bool) -> None:
    """Run the scenario in PATH and write results.jsonl, report.json, report.md and
    report.html.

    When the system accepts `overrides`, the cases that fail end to end are then run again
    with each component's output replaced by its gold (headroom.jsonl): the bottleneck table's
    headroom column.

    --limit, --sample, --filter and --rerun-failed choose which cases run (in that order:
    failed, filtered, sampled, limited); the report says how, and --resume continues only the
    same choice. With GITHUB_STEP_SUMMARY set, report.md is appended to it.

    Exit code 0 when every gate passes, 1 when a gate fails, 2 for invalid input (nothing
    ran), 3 when the run could not do its work (a cluster's worker or node died, the judge
    gave no usable answer: the report covers what completed), 4 when the system failed on
    every case, 130 when interrupted (rerun with --resume to continue). See docs/ci.md.

    \b
    Examples:
      evalharness scenario scenarios/shop.yaml
      evalharness scenario scenarios/shop.yaml --sample 20 --seed 1     try it on 20 cases
      evalharness scenario scenarios/shop.yaml --filter 'route:sql' --filter '!tag:slow'
      evalharness scenario scenarios/shop.yaml --rerun-failed runs/last --out runs/fix
      evalharness scenario scenarios/shop.yaml --out run/ --junit-xml run/junit.xml -q
      evalharness scenario scenarios/shop.yaml --out run/ --plugin ./my_checks.py
      evalharness scenario scenarios/shop.yaml --out run/ --resume
      evalharness scenario scenarios/shop.yaml --repeat 5    each case 5 times: flaky cases
      evalharness scenario scenarios/shop.yaml --out run/ --executor ray --address auto
    """
    from evalharness.api import RunInterrupted, execute
    from evalharness.sampling import Selection

    if no_cache and refresh_cache:
        raise InputProblem("--no-cache and --refresh-cache exclude each other: the first "
                           "ignores the cache, the second rewrites it")
    if resume and out_dir is None:
        raise InputProblem("--resume needs --out: the folder of the run to continue")
    progress = BarProgress(enabled=not quiet and sys.stderr.isatty())
    try:
        selection = Selection(limit=limit, sample=sample, seed=seed, filters=filters,
                              rerun_failed=rerun_failed)
        done = execute(path, out=out_dir, resume=resume, concurrency=concurrency,
                       plugins=plugins, judge=judge_backend,
                       judge_concurrency=judge_concurrency,
                       cache="off" if no_cache else "refresh" if refresh_cache else "on",
                       headroom=not no_headroom, selection=selection, junit_xml=junit_xml,
                       progress=progress, executor=executor, address=address,
                       repeat=repeat, repeat_judge=repeat_judge)
    except RunInterrupted as exc:
        if not exc.began:
            click.echo(f"{exc}: run the same command again", err=True)
            sys.exit(EXIT_INTERRUPTED)
        click.echo(f"interrupted: {'some' if exc.saved is None else exc.saved} of {exc.total} "
                   f"cases are saved in {exc.out_dir / 'results.jsonl'}; continue with: "
                   f"evalharness scenario {path} --out {exc.out_dir} --resume"
                   + _selection_flags(limit, sample, seed, filters, rerun_failed), err=True)
        sys.exit(EXIT_INTERRUPTED)
    except EvalHarnessError as exc:
        raise InputProblem(str(exc)) from None
    except InfrastructureError as exc:  # before the run began: a cluster that would not start
        click.echo(f"error: the run could not do its work: {exc} (exit code "
                   f"{EXIT_INFRASTRUCTURE})", err=True)
        sys.exit(EXIT_INFRASTRUCTURE)
    report, paths = done.report, done.paths
    if not quiet:
        print_summary(report, Console(width=None if sys.stdout.isatty() else 120))
        wrote = [str(done.out_dir / "results.jsonl"), *(str(p) for p in paths.values())]
        click.echo(f"\nwrote {', '.join(wrote)}")
    status = run_status(report)
    if status.code == EXIT_GATE_FAILED and quiet:
        for g in report.gates:
            if not g.passed:
                click.echo(f"gate failed: {g.name} (value {fmt(g.value)}; {g.reason})", err=True)
    elif not status.did_its_work:  # even with -q: a CI log must say why the job is red
        click.echo(f"error: {status.reason} (exit code {status.code})", err=True)
    if status.code:
        sys.exit(status.code)


def _selection_flags(limit: int | None, sample: int | None, seed: int,
                     filters: tuple[str, ...], rerun_failed: Path | None) -> str:
    """The case-choosing options again, for the "continue with" hint."""
    import shlex

    parts = []
    if limit is not None:
        parts += ["--limit", str(limit)]
    if sample is not None:
        parts += ["--sample", str(sample), "--seed", str(seed)]
    for expr in filters:
        parts += ["--filter", expr]
    if rerun_failed is not None:
        parts += ["--rerun-failed", str(rerun_failed)]
    return "".join(f" {shlex.quote(p)}" for p in parts)


def print_summary(report: Report, console: Console) -> None:
    """The terminal tables: metrics per component, the bottleneck, cost per component, then
    gates."""
    judge = report.judge.get("label") or report.judge.get("backend")
    repeats = report.repeats
    table = Table(title=f"{report.scenario['name']} — {report.cases['evaluated']} cases"
                        + (f" × {repeats.n} repeats" if repeats is not None else "")
                        + f", judge: {judge}", title_justify="left")
    table.add_column("component")
    table.add_column("metric", no_wrap=True)
    for col in ("mean", "95% CI", "n", "errors", *(["± within case"] if repeats else [])):
        table.add_column(col, justify="right", no_wrap=True)
    for name, comp in report.components.items():
        rows = list(comp.metrics.items()) or [("(no evaluator)", None)]
        for i, (metric, s) in enumerate(rows):
            spread = s.repeats if s is not None else None
            table.add_row(
                name if i == 0 else "",
                metric + (" [dim](per run)[/dim]" if s is not None and s.scope == "run" else ""),
                fmt(s.mean) if s else "", fmt_ci(s.ci95) if s else "", str(s.n) if s else "",
                (f"[red]{s.errors}[/red]" if s.errors else "0") if s else "",
                *([fmt(spread.within_sd) if spread is not None else ""] if repeats else []))
        table.add_section()
    console.print(table)
    if repeats is not None:
        print_repeats(report, console)
    if report.bottleneck is not None:
        print_bottleneck(report, console)
    cost = Table(title="latency and tokens", title_justify="left")
    cost.add_column("component")
    for col in ("ran", "p50 ms", "p95 ms", "% of latency", "tokens", "% of tokens",
                "judge req / hits / tokens"):
        cost.add_column(col, justify="right", no_wrap=True)
    for name, comp in report.components.items():
        c = comp.cost
        cost.add_row(name, str(c.steps), fmt(c.latency_ms["p50"], 1), fmt(c.latency_ms["p95"], 1),
                     pct(c.latency_share), str(c.tokens["total"]), pct(c.token_share),
                     judge_cell(comp.judge))
    console.print(cost)
    if report.judge.get("usage"):
        console.print(f"judge: {usage_line(report.judge['usage'])}")
    if report.judge.get("headroom_usage"):
        console.print(f"judge, oracle reruns: {usage_line(report.judge['headroom_usage'])}")
    for problem in report.infrastructure:
        console.print(f"[bold red]the run could not do its work: {escape(problem)}[/bold red]")
    if report.cases["system_errors"]:
        console.print(f"[yellow]{report.cases['system_errors']} of {report.cases['total']} cases "
                      "failed in the system under test: their components did not run and are "
                      "in no mean above (see results.jsonl, `trace.error`).[/yellow]")
    if report.selection:
        console.print(f"[cyan]cases chosen: {escape(report.selection['how'])}; means and "
                      "intervals are over these cases only.[/cyan]")
    for warning in report.warnings:
        console.print(f"[yellow]warning: {escape(warning)}[/yellow]")
    if report.gates:
        gates = Table(title="gates", title_justify="left")
        for col in ("gate", "value", "errors", "result"):
            gates.add_column(col)
        for g in report.gates:
            gates.add_row(g.name, fmt(g.value), f"{g.errors} of {g.n}"
                          + (f" ({g.missing} missing)" if g.missing else ""),
                          "[green]pass[/green]" if g.passed else
                          f"[bold red]FAIL[/bold red] {escape(g.reason or '')}")
        console.print(gates)


FLAKY_PRINTED = 12
"""Flaky cases the terminal names (report.md lists 50, report.json every one)."""


def print_repeats(report: Report, console: Console) -> None:
    """A repeated run's outcomes over the repeats, and the flaky cases by name."""
    r = report.repeats
    assert r is not None
    console.print(f"[bold]repeats:[/bold] {escape(repeat_line(report) or '')}; means and "
                  "CIs are over cases (each case's repeats reduced to one value; the CIs "
                  "resample whole cases).")
    e2e = [f for f in r.flaky if f.component == "end_to_end"]
    others = len({f.case for f in r.flaky}) - len(e2e)
    if e2e:
        named = ", ".join(f"{f.case} ({f.passed}/{f.passed + f.failed + f.errors})"
                          for f in e2e[:FLAKY_PRINTED])
        more = f" and {len(e2e) - FLAKY_PRINTED} more" if len(e2e) > FLAKY_PRINTED else ""
        console.print(f"[yellow]flaky end to end (passed/repeats):[/yellow] {escape(named)}"
                      f"{more}" + (f"; {others} more cases flip a component's verdict only"
                                   if others else "") + " — report.md lists them")
    elif r.flaky:
        console.print(f"[yellow]{len({f.case for f in r.flaky})} cases flip a component's "
                      "verdict between repeats (none end to end)[/yellow] — report.md lists them")


def print_bottleneck(report: Report, console: Console) -> None:
    """The bottleneck table: components by share of end-to-end failures, with CIs."""
    b = report.bottleneck
    e2e = b.end_to_end
    table = Table(title=f"bottleneck — {e2e.failed} of {e2e.passed + e2e.failed} "
                        f"{runs_of(report)} fail end to end", title_justify="left")
    table.add_column("component")
    for col in ("share", "95% CI", "failures", "headroom (95% CI)"):
        table.add_column(col, justify="right", no_wrap=True)
    single, combined = headroom_of(b)
    for row in b.ranking:
        table.add_row(row.component, pct(row.share), pct_ci(row.ci95), count(row.failures),
                      gain(single.get(row.component)))
    table.add_section()
    table.add_row("[dim]unattributed (interaction)[/dim]", pct(b.unattributed_share),
                  pct_ci(b.unattributed_ci95), str(b.unattributed), "")
    if combined is not None:
        table.add_row("[dim]every oracle at once[/dim]", "", "", "", gain(combined))
    console.print(table)
    sentence = headroom_sentence(b)
    if sentence:
        console.print(sentence)
    masked = ", ".join(f"{c} {n}" for c, n in b.masked_by.items())
    console.print(f"{headline(b)} End-to-end pass rate {pct(e2e.pass_rate)} (CI "
                  f"{pct_ci(e2e.ci95)}). Masked: {n_cases(b.masked)} passed end to end although "
                  "a component on the path failed" + (f" ({masked})" if masked else "")
                  + (f"; {n_cases(b.unknown)} could not be attributed (an error on the path)"
                     if b.unknown else "") + ".")


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--plugin", "plugins", multiple=True, type=click.Path(dir_okay=False),
              help="Also load this local plugin file (repeatable).")
def plugins(as_json: bool, plugins: tuple[str, ...]) -> None:
    """List loaded plugins: version, hooks implemented, evaluators registered (--json: with
    every metric's declaration).

    \b
    Examples:
      evalharness plugins
      evalharness plugins --json
      EVALHARNESS_LOAD_PLUGINS=evalharness_router evalharness plugins
    """
    try:
        host = load_plugins(plugins)
    except EvalHarnessError as exc:
        raise InputProblem(str(exc)) from None
    described = host.describe()
    if as_json:
        click.echo(json.dumps(described, indent=2))
        return
    for p in described:
        click.secho(f"{p['name']} {p['version']}", bold=True, nl=False)
        click.echo(f"  ({p['source']}: {p['location']})")
        click.echo(f"  hooks: {', '.join(p['hooks']) or 'none'}")
        for e in p["evaluators"]:
            needs = [w for w, flag in (("judge", e["needs_judge"]),
                                       ("database", e["needs_database"])) if flag]
            extra = f"  [needs {', '.join(needs)}]" if needs else ""
            click.echo(f"  {e['component']}/{e['name']}: {', '.join(e['metrics'])}{extra}")
        if p["component_kinds"]:
            click.echo(f"  component kinds: {', '.join(p['component_kinds'])}")
        if p["judge_backends"]:
            click.echo(f"  judge backends: {', '.join(p['judge_backends'])}")
        if p["oracles"]:
            click.echo(f"  oracles: {', '.join(p['oracles'])}")
    if len(described) == 1:
        click.echo("No evaluator plugins are installed: run `pip install -e .` in the "
                   "evalharness checkout, or check EVALHARNESS_LOAD_PLUGINS.", err=True)


SCHEMAS = {"case": Case, "trace": Trace, "result": CaseResult, "report": Report,
           "scenario": ScenarioFile}


@cli.command()
@click.argument("what", type=click.Choice(sorted(SCHEMAS)))
def schema(what: str) -> None:
    """Print the JSON Schema of a record, to validate your own files.

    \b
    Examples:
      evalharness schema case  > case.schema.json
      evalharness schema trace > trace.schema.json
    """
    click.echo(json.dumps(SCHEMAS[what].model_json_schema(), indent=2))


@cli.command()
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--plugin", "plugins", multiple=True, type=click.Path(dir_okay=False),
              help="A local plugin file to load (repeatable).")
@click.option("--no-gold-check", "no_gold_check", is_flag=True,
              help="Do not check the cases' gold against the scenario (routes, chunk ids in "
                   "the corpus, gold SQL on the database): for a corpus too large to read.")
def validate(path: Path, plugins: tuple[str, ...], no_gold_check: bool) -> None:
    """Check a scenario file (and every file it names) without running anything.

    Also checks every case's gold against the scenario: each gold route is a route of the
    pipeline, each gold chunk id is in the corpus, and each gold SQL query parses in the
    database's dialect and runs on the database (read-only, under a time limit). A problem
    exits 2, listing the case ids and fields. See docs/scenario.md, "Checking the gold".

    \b
    Examples:
      evalharness validate scenarios/shop.yaml
      evalharness validate big.yaml --no-gold-check    # skip reading the corpus and the SQL
    """
    try:
        summary, warnings = validate_scenario(
            path, plugins=plugins, gold=not no_gold_check,
            hint="\nFix these gold labels, or skip the check with --no-gold-check.")
    except EvalHarnessError as exc:
        raise InputProblem(str(exc)) from None
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
    click.echo(summary + (" (--no-gold-check)" if no_gold_check else ""))


@cli.command()
@click.argument("run_a", type=click.Path(path_type=Path))
@click.argument("run_b", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@click.option("--out", "out_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the comparison to this file (comparison.json).")
@click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True),
              default=0.05, show_default=True, help="Significance level of the p-values.")
@click.option("--metric", "metrics", multiple=True, metavar="COMPONENT.METRIC",
              help="Compare only this metric (repeatable; wildcards: 'retriever.*').")
@click.option("--resamples", type=click.IntRange(100, 1_000_000), default=2000,
              show_default=True, help="Bootstrap resamples behind each CI of Δ.")
@click.option("--permutations", type=click.IntRange(100, 10_000_000), default=10_000,
              show_default=True, help="Random sign flips behind each p-value above 16 pairs.")
@click.option("--judge-pairwise", "judge_pairwise", metavar="CRITERION",
              help="Also have the LLM judge say, per case and in both orders, which run's "
                   "output better meets CRITERION: a `judged` metric of B's scenario, a "
                   "rubric file (.yaml), or a judged metric of B's run.")
@click.option("--judge", "judge_backend", metavar="NAME",
              help="With --judge-pairwise: this judge backend instead of B's scenario's.")
@click.option("--correction", type=click.Choice(["bh", "none"]), default="bh",
              show_default=True,
              help="For the many metrics tested at once: bh flags a metric when its "
                   "Benjamini–Hochberg q-value is at most --alpha (false discovery rate); "
                   "none, when its own p < --alpha.")
def compare(run_a: Path, run_b: Path, as_json: bool, out_file: Path | None, alpha: float,
            metrics: tuple[str, ...], resamples: int, permutations: int,
            judge_pairwise: str | None, judge_backend: str | None, correction: str) -> None:
    """Compare run B with run A, metric by metric, case by case.

    RUN_A and RUN_B are --out folders of `evalharness scenario`. Cases are paired by id;
    per component and metric it shows both means, Δ = mean(B − A) over the pairs with a
    paired-bootstrap 95% CI, and a paired permutation-test p-value, corrected for the many
    metrics tested at once (Benjamini–Hochberg q-value; --correction none: each on its own).
    A significant change in the bad direction is a regression. With --repeat runs, a case's
    value is its repeats' mean (the metric's reducer). See docs/compare.md.

    Exit code 1 when a metric gated in B's scenario regressed significantly, 2 for invalid
    input, 0 otherwise.

    \b
    Examples:
      evalharness compare runs/baseline runs/candidate
      evalharness compare runs/baseline runs/candidate --metric 'retriever.*' --alpha 0.01
      evalharness compare runs/baseline runs/candidate --json --out comparison.json
      evalharness compare runs/baseline runs/candidate --judge-pairwise no_false_promises
    """
    from evalharness.compare import compare_runs, print_comparison

    if judge_backend is not None and judge_pairwise is None:
        raise InputProblem("--judge names the judge of --judge-pairwise: give both")
    try:
        result = compare_runs(run_a, run_b, alpha=alpha, metrics=list(metrics),
                              resamples=resamples, permutations=permutations,
                              judge_pairwise=judge_pairwise, judge=judge_backend,
                              correction=correction)  # type: ignore[arg-type]
    except EvalHarnessError as exc:
        raise InputProblem(str(exc)) from None
    text = result.model_dump_json(indent=2) + "\n"
    if out_file is not None:
        try:
            out_file.parent.mkdir(parents=True, exist_ok=True)
            out_file.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise InputProblem(f"{out_file}: cannot write the comparison ({exc})") from None
    if as_json:
        click.echo(text, nl=False)
        for warning in result.warnings:
            click.echo(f"warning: {warning}", err=True)
    else:
        print_comparison(result, Console(width=None if sys.stdout.isatty() else 120))
        if out_file is not None:
            click.echo(f"\nwrote {out_file}")
    if result.gated_regressions:
        if as_json:
            click.echo(f"gated metric regressed: {', '.join(result.gated_regressions)}",
                       err=True)
        sys.exit(EXIT_GATE_FAILED)


@cli.group()
def traces() -> None:
    """Read traces recorded by OpenTelemetry/OpenInference, OTel GenAI, Langfuse or
    LangSmith: see how their spans map onto the pipeline, convert them, or receive them over
    OTLP/HTTP (docs/traces.md).

    \b
    Examples:
      evalharness traces explain spans.jsonl                  the guessed preset, per trace
      evalharness traces explain runs.json --mapping my-mapping.yaml --trace 87751d4c
      evalharness traces convert spans.jsonl --out traces.jsonl --cases cases.jsonl
      evalharness traces receive --out received/              an OTLP endpoint of our own
      evalharness traces convert received/ --out traces.jsonl   every file it wrote
    """


def _trace_options(func, with_format: bool = True):
    options = [
        click.option("--mapping", metavar="FILE|PRESET",
                     help="A mapping file (YAML) or a preset's name (default: guessed from "
                          "the spans' instrumentation)."),
        click.option("--scenario", "scenario_path", metavar="SCENARIO",
                     type=click.Path(dir_okay=False, path_type=Path),
                     help="Map onto this scenario's pipeline (default: router → text2sql | "
                          "retriever → generator)."),
    ]
    if with_format:
        options.insert(0, click.option(
            "--format", "fmt", metavar="NAME",
            help="The files' format (default: recognised from each file's content): "
                 "otlp-json, otel-console, otlp-proto, phoenix, langfuse, langsmith."))
    for option in reversed(options):
        func = option(func)
    return func


def _mapping_options(func):
    """``--mapping`` and ``--scenario`` (``traces receive`` writes its own format)."""
    return _trace_options(func, with_format=False)


def _trace_setup(mapping: str | None, scenario_path: Path | None):
    """(mapping spec, pipeline, step models of plugin kinds) for the ``traces`` commands."""
    from evalharness.pipeline import ComponentSpec, Pipeline
    from evalharness.scenario import SHOP_PIPELINE
    from evalharness.spans.mapping import mapping_spec

    step_models = {}
    if scenario_path is not None:
        loaded = load_scenario(scenario_path)
        pipeline = loaded.pipeline
        step_models = {k: kind.step for k in {pipeline.kind(n) for n in pipeline.order}
                       if (kind := loaded.host.component_kind(k)) is not None
                       and k not in Trace.model_fields}
    else:
        pipeline = Pipeline({n: ComponentSpec.model_validate(c)
                             for n, c in SHOP_PIPELINE.items()})
    spec = mapping_spec(mapping, base=Path.cwd(), source="--mapping", prefix=())
    return spec, pipeline, step_models


def _span_files(paths: tuple[str, ...]) -> list[Path]:
    """Every file the PATHS name (a file, a folder, a glob each), in order, each once."""
    from evalharness.spans.paths import trace_files

    found: dict[Path, None] = {}
    for path in paths:
        found.update(dict.fromkeys(trace_files(Path(path), what="span file")))
    return list(found)


def _mapped_traces(paths: tuple[str, ...], fmt: str | None, mapping: str | None,
                   scenario_path: Path | None):
    """(format, mapped traces, the pipeline) for the ``traces`` commands."""
    from evalharness.spans.importer import read_mapped

    files = _span_files(paths)
    spec, pipeline, step_models = _trace_setup(mapping, scenario_path)
    return (*read_mapped(files, fmt=fmt, mapping=spec, pipeline=pipeline,
                         step_models=step_models), pipeline)


def _named(paths: tuple[str, ...]) -> str:
    return ", ".join(paths)


@traces.command()
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@_trace_options
@click.option("--trace", "trace_ids", multiple=True, metavar="ID",
              help="Explain only this trace (an id or its start; repeatable).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per trace.")
def explain(paths: tuple[str, ...], fmt: str | None, mapping: str | None,
            scenario_path: Path | None, trace_ids: tuple[str, ...], as_json: bool) -> None:
    """For each trace in PATH (files, folders of them — every complete file, in name order —
    or quoted globs) and each component: the span chosen, the selector that matched, the
    values extracted, and what was ambiguous, missing or redacted.

    \b
    Examples:
      evalharness traces explain spans.jsonl
      evalharness traces explain spans.jsonl --scenario scenarios/shop.yaml --trace 87751d4c
      evalharness traces explain runs.json --mapping langgraph --json
      evalharness traces explain received/ --trace 87751d4c
    """
    from evalharness.spans.mapped import explain as render

    name, mapped, _ = _mapped_traces(paths, fmt, mapping, scenario_path)
    shown = 0
    for m in mapped:
        if trace_ids and not any(m.trace_id.startswith(t) for t in trace_ids):
            continue
        shown += 1
        click.echo(m.model_dump_json() if as_json else render(m) + "\n")
    if not shown:
        raise InputProblem(f"{_named(paths)} ({name}): no trace" + (
            f" with an id starting {', '.join(trace_ids)}" if trace_ids else ""))


@traces.command()
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@_trace_options
@click.option("--out", "out_file", required=True, metavar="FILE",
              type=click.Path(dir_okay=False, path_type=Path),
              help="Write our trace JSONL here (the `traces:` of a scenario).")
@click.option("--cases", "cases_file", metavar="FILE",
              type=click.Path(dir_okay=False, path_type=Path),
              help="Also write a question-only case per trace, to label later; the "
                   "reference-free metrics run on them at once.")
def convert(paths: tuple[str, ...], fmt: str | None, mapping: str | None,
            scenario_path: Path | None, out_file: Path, cases_file: Path | None) -> None:
    """Convert the spans in PATH (files, folders of them — every complete file, in name
    order — or quoted globs) into our trace JSONL (one trace per line, `case_id` = the
    mapping's join key, else the trace id), and with --cases write question-only cases.

    \b
    Examples:
      evalharness traces convert spans.jsonl --out traces.jsonl --cases cases.jsonl
      evalharness traces convert runs.json --mapping my-mapping.yaml --out traces.jsonl
      evalharness traces convert received/ --out traces.jsonl
      evalharness traces convert 'received/*.pb' --out traces.jsonl
    """
    from evalharness.spans.group import GroupStats
    from evalharness.spans.importer import read_mapped

    files = _span_files(paths)
    spec, pipeline, step_models = _trace_setup(mapping, scenario_path)
    stats = GroupStats()
    name, mapped = read_mapped(files, fmt=fmt, mapping=spec, pipeline=pipeline,
                               step_models=step_models, stats=stats)
    counts = {"traces": 0, "unmappable": 0, "no question": 0}
    seen: set[str] = set()
    for target in (out_file, cases_file):
        if target is not None:
            target.parent.mkdir(parents=True, exist_ok=True)
    with open(out_file, "w", encoding="utf-8") as out, \
            (open(cases_file, "w", encoding="utf-8") if cases_file else
             contextlib.nullcontext()) as cases_out:
        for m in mapped:
            case_id = m.join_key or m.trace_id
            if case_id in seen:
                case_id = m.trace_id
            seen.add(case_id)
            counts["traces"] += 1
            counts["unmappable"] += bool(m.error)
            trace = m.trace.model_copy(update={"case_id": case_id})
            out.write(trace.model_dump_json(exclude_none=True) + "\n")
            if cases_out is not None:
                if not m.question:
                    counts["no question"] += 1
                    continue
                case = Case(id=case_id, question=m.question, tags=["from-traces"],
                            metadata={"trace_id": m.trace_id, "source": _named(paths)})
                cases_out.write(case.model_dump_json(exclude_defaults=True) + "\n")
    click.echo(f"{_named(paths)} ({name}"
               + (f", {len(files)} files" if len(files) > 1 else "")
               + f"): {counts['traces']} traces → {out_file}"
               + (f", {counts['traces'] - counts['no question']} question-only cases → "
                  f"{cases_file}" if cases_file else "")
               + (f"; {counts['unmappable']} could not be mapped (their `error` says why)"
                  if counts["unmappable"] else "")
               + (f"; {counts['no question']} had no question (no case written)"
                  if counts["no question"] else "")
               + (f"; {stats.duplicate_spans} spans read twice were kept once (an "
                  "exporter's retry, or overlapping exports)" if stats.duplicate_spans else ""))


@traces.command()
@click.option("--out", "out_dir", required=True, metavar="DIR",
              type=click.Path(file_okay=False, path_type=Path),
              help="Folder the span files are written into (created if missing).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. Only this machine can send to 127.0.0.1; any "
                   "other address lets every machine that reaches it write spans here.")
@click.option("--port", default=4318, show_default=True, type=click.IntRange(0, 65535),
              help="Port to listen on (OTLP/HTTP's own; 0 picks a free one).")
@click.option("--rotate-mb", default=64.0, show_default=True,
              type=click.FloatRange(min=0.001),
              help="Complete a file (rename it from *.part) once it holds this many MB.")
@click.option("--rotate-minutes", default=1.0, show_default=True,
              type=click.FloatRange(min=0.001),
              help="Complete a file this many minutes after it was opened: spans are "
                   "readable at most this long after they arrive.")
@click.option("--max-queue-mb", default=64.0, show_default=True,
              type=click.FloatRange(min=0.001),
              help="Request bodies held in memory at once (being read, checked, written); "
                   "past it requests are answered 429 with Retry-After.")
@click.option("--min-free-mb", default=500.0, show_default=True, type=click.FloatRange(min=0),
              help="Refuse spans (503 with Retry-After) while the disk has less free space.")
@click.option("--max-request-mb", default=20.0, show_default=True,
              type=click.FloatRange(min=0.001),
              help="The largest request, before and after decompression (413 past it).")
@click.option("--cases", "cases_file", metavar="FILE",
              type=click.Path(dir_okay=False, path_type=Path),
              help="Join the traces to these cases, as a scenario does; writes "
                   "DIR/joined/traces.jsonl and DIR/joined/cases.jsonl (these cases plus a "
                   "question-only case per trace that joined none) when the receiver stops.")
@_mapping_options
@click.option("--join-minutes", type=click.FloatRange(min=0.1), metavar="M",
              help="With --cases: also join every M minutes while receiving.")
@click.option("--quiet", "-q", is_flag=True,
              help="No progress lines (the summary at the end is printed).")
def receive(out_dir: Path, host: str, port: int, rotate_mb: float, rotate_minutes: float,
            max_queue_mb: float, min_free_mb: float, max_request_mb: float,
            cases_file: Path | None, mapping: str | None, scenario_path: Path | None,
            join_minutes: float | None, quiet: bool) -> None:
    """Receive spans over OTLP/HTTP (POST /v1/traces, protobuf or JSON, gzip or not) from
    your application's OpenTelemetry exporter, and append them to rotated files in DIR that
    `traces: {path: DIR}` in a scenario reads (docs/traces-receive.md).

    A file is written as *.part and renamed when it is complete (by size, by age, or when the
    receiver stops), so a reader never sees one half-written. Each request is answered 200
    once its spans are written; a full queue is 429 and a nearly full disk 503, both with
    Retry-After, which the exporters honour. A batch the exporter sends again (a retry after
    a lost answer) is stored once. Ctrl-C or SIGTERM stops it after writing everything it
    accepted. Protobuf needs `pip install 'evalharness[otlp]'`; JSON needs nothing.

    \b
    Examples:
      evalharness traces receive --out received/
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:4318/v1/traces python app.py
      evalharness scenario eval.yaml        # with  traces: {path: received/}
    \b
      evalharness traces receive --out received/ --port 0          any free port
      evalharness traces receive --out received/ --cases cases.jsonl --scenario eval.yaml
      evalharness traces receive --out received/ --rotate-minutes 10 --rotate-mb 256
    """
    import signal
    import threading

    from evalharness.addresses import is_loopback
    from evalharness.spans.receive.server import Receiver

    joining = _receive_join_setup(cases_file, mapping, scenario_path, out_dir) \
        if cases_file is not None else None
    if join_minutes is not None and joining is None:
        raise InputProblem("--join-minutes joins to --cases: give --cases FILE too")
    if max_request_mb > max_queue_mb:
        raise InputProblem(f"--max-request-mb {max_request_mb:g} is more than --max-queue-mb "
                           f"{max_queue_mb:g}: one request could never be taken; raise "
                           "--max-queue-mb or lower --max-request-mb")
    mb = 1 << 20
    receiver = Receiver(out_dir, host=host, port=port, rotate_bytes=int(rotate_mb * mb),
                        rotate_seconds=rotate_minutes * 60, max_queue_bytes=int(max_queue_mb * mb),
                        min_free_bytes=int(min_free_mb * mb),
                        max_request_bytes=int(max_request_mb * mb))
    if not is_loopback(host):
        click.echo(f"WARNING: --host {host} listens beyond this machine: anyone who reaches "
                   f"it on port {port} can write spans into {out_dir} (no authentication, "
                   "no TLS). Use 127.0.0.1 (the default) unless the application runs "
                   "elsewhere, and then let only its machine through a firewall.", err=True)
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set())
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        receiver.start()
        _receive_banner(receiver, out_dir)
        _receive_loop(receiver, stop, quiet, joining, join_minutes)
    finally:
        stats = receiver.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    click.echo(_receive_summary(stats, out_dir), err=True)
    if joining is not None:
        from evalharness.spans.paths import complete

        if any(complete(p) for p in out_dir.iterdir()):
            _receive_join(joining, out_dir, final=True)
        else:
            click.echo(f"nothing to join to {joining['source']}: no spans in {out_dir}",
                       err=True)


def _receive_join_setup(cases_file: Path, mapping: str | None, scenario_path: Path | None,
                        out_dir: Path) -> dict:
    """What a join needs, checked before the receiver listens (bad input: exit 2 at once)."""
    from evalharness.scenario import load_cases

    if cases_file.exists():
        cases = load_cases(cases_file)
    else:
        click.echo(f"warning: --cases {cases_file} does not exist: every trace becomes a "
                   "question-only case", err=True)
        cases = []
    spec, pipeline, step_models = _trace_setup(mapping, scenario_path)
    return {"cases": cases, "mapping": spec, "pipeline": pipeline, "step_models": step_models,
            "source": cases_file}


def _receive_banner(receiver, out_dir: Path) -> None:
    kinds = "protobuf and JSON" if receiver.protobuf else (
        "JSON only: protobuf needs pip install 'evalharness[otlp]'")
    recovered = (f"; completed {len(receiver.recovered)} file(s) a stopped receiver left "
                 "unfinished" if receiver.recovered else "")
    click.echo(f"receiving OTLP/HTTP traces ({kinds}) on {receiver.url} into {out_dir}"
               f"{recovered}\n"
               f"  in the application: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT={receiver.url}\n"
               "  stop with Ctrl-C or SIGTERM: everything accepted is written first", err=True)


def _receive_loop(receiver, stop, quiet: bool, joining: dict | None,
                  join_minutes: float | None) -> None:
    """Print progress every 10 seconds (when something came) until ``stop`` is set; join
    every ``join_minutes``."""
    import time

    every = 10.0
    last = receiver.stats()
    next_join = time.monotonic() + join_minutes * 60 if join_minutes else None
    while not stop.wait(every if next_join is None
                        else max(0.1, min(every, next_join - time.monotonic()))):
        if next_join is not None and time.monotonic() >= next_join:
            _receive_join(joining, receiver.folder, final=False)
            next_join = time.monotonic() + join_minutes * 60
        now = receiver.stats()
        if quiet or (now.requests == last.requests and len(now.files) == len(last.files)):
            continue
        rate = (now.spans - last.spans) / max(now.seconds - last.seconds, 1e-9)
        click.echo(f"[{time.strftime('%H:%M:%S')}] {now.spans:,} spans in {now.requests:,} "
                   f"requests ({rate:,.0f} spans/s now); {len(now.files)} files complete; "
                   f"{now.held_bytes / (1 << 20):.1f} MB held"
                   + (f"; refused: {_refusals(now.rejected)}" if now.rejected else ""),
                   err=True)
        last = now


def _refusals(rejected: dict[int, int]) -> str:
    return ", ".join(f"{status} ×{n:,}" for status, n in sorted(rejected.items()))


def _receive_summary(stats, out_dir: Path) -> str:
    size = sum(f.size for f in stats.files) / (1 << 20)
    rate = (f", {stats.spans / stats.busy_seconds:,.0f} spans/s from the first request to "
            "the last" if stats.busy_seconds > 0 else "")
    return (f"received {stats.spans:,} spans in {stats.requests:,} requests over "
            f"{stats.seconds:,.1f} s{rate}; {len(stats.files)} files in {out_dir} "
            f"({size:,.1f} MB)"
            + (f"; {stats.duplicate_requests:,} requests sent again by the exporter "
               f"({stats.duplicate_spans:,} spans) were stored once"
               if stats.duplicate_requests else "")
            + (f"; refused: {_refusals(stats.rejected)}" if stats.rejected else ""))


def _receive_join(joining: dict, out_dir: Path, final: bool) -> None:
    from evalharness.errors import EvalHarnessError
    from evalharness.spans.receive.join import CASES, TRACES, join_received

    target = out_dir / "joined"
    try:
        done = join_received(out_dir, target, cases=joining["cases"],
                             mapping=joining["mapping"], pipeline=joining["pipeline"],
                             step_models=joining["step_models"])
    except EvalHarnessError as exc:
        click.echo(f"{'' if final else 'join: '}not joined: {exc}", err=True)
        if final:
            raise InputProblem(f"not joined to {joining['source']}: {exc}") from None
        return
    click.echo(f"joined {done.traces:,} traces from {done.files} files to "
               f"{joining['source']}: {done.matched:,} matched a case, {done.new_cases:,} "
               f"question-only cases added → {target / TRACES}, {target / CASES}"
               + (f"; {len(done.duplicates)} traces joined a case another trace joined first "
                  f"(left out: {', '.join(done.duplicates[:3])})" if done.duplicates else "")
               + (f"; {done.no_question} traces without a question (no case made)"
                  if done.no_question else "")
               + (f"; {done.unmappable} could not be mapped (their `error` says why)"
                  if done.unmappable else ""), err=True)


def _show_deprecations() -> None:
    """A plugin's deprecation warning as one ``warning:`` line on stderr, once per message
    (not Python's ``file:line: Category:`` form, which names evalharness's code, not the
    plugin)."""
    import warnings

    from evalharness.errors import EvalHarnessDeprecationWarning

    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, EvalHarnessDeprecationWarning):
            click.echo(f"warning: {message}", err=True)
        else:
            shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show


def main() -> None:
    """Console-script entry point: lets plugins add commands, then runs the CLI."""
    _show_deprecations()
    try:
        host = load_plugins()
    except EvalHarnessError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(EXIT_INPUT)
    for name in host.plugins:
        host.call_for_plugin("register_commands", name, cli=cli)
    cli(prog_name="evalharness")


if __name__ == "__main__":  # pragma: no cover
    main()
