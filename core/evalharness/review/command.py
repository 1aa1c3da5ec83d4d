"""``evalharness review …`` and ``evalharness agreement``: the command line of
:mod:`evalharness.review` (docs/review.md)."""

from __future__ import annotations

import getpass
import json
import sys
import webbrowser
from pathlib import Path

import click
from rich.console import Console

from evalharness.errors import UsageError
from evalharness.lock import RunLock
from evalharness.plugins import complete_declarations
from evalharness.report import write_reports
from evalharness.review.report import attach
from evalharness.review.session import STRATA, Review

RUN = click.Path(path_type=Path, file_okay=False)


def _sample_options(func):
    func = click.option("--filter", "filters", multiple=True, metavar="EXPR",
                        help="Only cases matching EXPR (as in a run: 'q01*', 'tag:price', "
                             "'route:sql'); repeatable.")(func)
    func = click.option("--seed", type=int, default=0, show_default=True,
                        help="Seed of the sample.")(func)
    func = click.option("--stratify", default="route", show_default=True,
                        metavar="KEYS",
                        help=f"What the sample is stratified by, comma-separated: "
                             f"{', '.join(STRATA)} (e.g. component,verdict).")(func)
    func = click.option("--sample", type=click.IntRange(1), metavar="N",
                        help="Review a seeded sample of N cases (default: every case).")(func)
    return func


def _say(warnings: list[str]) -> None:
    """Print each warning on stderr."""
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)


def _default_reviewer() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no login name (a container): the page asks
        return ""


@click.group()
def review() -> None:
    """Review a run's cases in the browser, or in a spreadsheet, and promote them to gold.

    \b
    Examples:
      evalharness review serve run/ --sample 30 --stratify component,verdict
      evalharness review serve runs/a runs/b --pairwise       which answer is better?
      evalharness review export run/ --sample 30 --out review.csv
      evalharness review import run/ review.csv --reviewer ana
      evalharness review promote run/ --into scenarios/shop/cases.jsonl
      evalharness agreement run/                            how far to trust the judge
    """


@review.command()
@click.argument("runs", nargs=-1, required=True, type=RUN)
@_sample_options
@click.option("--pairwise", is_flag=True,
              help="Two runs: show each case's two answers side by side, in a hidden random "
                   "order, and record which is better.")
@click.option("--port", type=click.IntRange(0, 65535), default=0,
              help="Port to listen on (default: a free one).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind; anything but 127.0.0.1 exposes the page (the token "
                   "still guards it).")
@click.option("--reviewer", default=None, help="Your name (default: your login name); "
                                                  "the page can change it.")
@click.option("--open/--no-open", "open_browser", default=False,
              help="Open the page in the default browser.")
def serve(runs: tuple[Path, ...], sample: int | None, stratify: str, seed: int,
          filters: tuple[str, ...], pairwise: bool, port: int, host: str,
          reviewer: str | None, open_browser: bool) -> None:
    """Serve a review page over RUN (an --out folder) until Ctrl-C.

    Each sampled case shows its question, each component's step (route, SQL and rows,
    retrieved chunks with their gold marks, the answer with its contexts) and every value to
    check, with the judge's reasons. Label with the keyboard (y/n, a/d, 1-5, j/k, ←/→; ? for
    help); every label is appended to RUN/review/labels.jsonl the moment it is given.

    With two runs and --pairwise, the same case's two answers side by side; preferences go
    to RUN_A/review/pairwise.jsonl, and `evalharness compare RUN_A RUN_B` reports them.

    \b
    Examples:
      evalharness review serve run/ --sample 30 --stratify component,verdict --seed 1
      evalharness review serve runs/base runs/new --pairwise --sample 40
    """
    from evalharness.review.server import (
        WILDCARDS,
        App,
        Pairing,
        bind_problem,
        machine_names,
        make_server,
        new_token,
        url_host,
    )

    if pairwise != (len(runs) == 2) or len(runs) > 2:
        raise UsageError("give one run folder, or two with --pairwise (RUN_A RUN_B)")
    first = Review.open(runs[0], sample=sample, stratify=stratify, seed=seed,
                        filters=filters)
    pairing = None
    if pairwise:
        second = Review.open(runs[1])
        ids = [first.run.results[i].case.id for i in first.chosen]
        both = [i for i in ids if i in second.index]
        if not both:
            raise UsageError(f"{runs[0]} and {runs[1]} have no case id in common")
        pairing = Pairing(first, second, new_token(), both)
    else:
        first.record_sample(seed, stratify.split(","))
    app = App(first, new_token(), set(), reviewer if reviewer is not None
              else _default_reviewer(), pairing)
    try:
        server = make_server(app, host, port)
    except OSError as exc:
        raise UsageError(bind_problem(host, port, exc)) from None
    bound = server.server_address[1]
    url = f"http://{url_host(host)}:{bound}/?t={app.token}"
    what = (f"{len(pairing.ids)} cases of {runs[0]} and {runs[1]}, side by side"
            if pairing else f"{first.how} of {runs[0]}")
    click.echo(f"reviewing {what}\nopen {url}", err=False)
    if host.strip("[]") in WILDCARDS:
        names = sorted(n for n in machine_names() if n != "localhost")
        if names:
            click.echo(f"(from another machine: http://{names[0]}:{bound}/?t={app.token}, "
                       "or this machine's IP address)")
    click.echo("(Ctrl-C to stop; labels are saved as they are given)")
    sys.stdout.flush()
    if open_browser:
        webbrowser.open(url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        click.echo("stopped")
    finally:
        server.server_close()


@review.command(name="export")
@click.argument("run", type=RUN)
@_sample_options
@click.option("--format", "fmt", type=click.Choice(["csv", "jsonl"]), default=None,
              help="Default: from --out's suffix, else csv.")
@click.option("--out", "out_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Write here (default: standard output).")
@click.option("--reviewer", default=None,
              help="Fill in this reviewer's labels given so far.")
def export_cmd(run: Path, sample: int | None, stratify: str, seed: int,
               filters: tuple[str, ...], fmt: str | None, out_file: Path | None,
               reviewer: str | None) -> None:
    """Write the sampled cases' targets as CSV or JSONL, one row per target, to label in a
    spreadsheet: fill in `label` (yes/no, agree/disagree or 1-5), optionally `note`,
    `correction` and `reviewer`, then `evalharness review import`.

    \b
    Examples:
      evalharness review export run/ --sample 30 --out review.csv
      evalharness review export run/ --format jsonl > review.jsonl
    """
    from evalharness.review.exchange import render, rows

    rev = Review.open(run, sample=sample, stratify=stratify, seed=seed, filters=filters)
    fmt = fmt or ("jsonl" if out_file is not None and out_file.suffix == ".jsonl" else "csv")
    data = rows(rev, reviewer)
    text = render(data, fmt)
    _say(rev.warnings)
    if out_file is None:
        click.echo(text, nl=False)
        return
    try:
        out_file.write_text(text, encoding="utf-8", newline="")  # CSV rows end in CRLF
    except OSError as exc:
        raise UsageError(f"{out_file}: cannot write ({exc.strerror})") from None
    rev.record_sample(seed, stratify.split(","))
    click.echo(f"wrote {len(data)} targets of {rev.how} to {out_file}", err=True)


@review.command(name="import")
@click.argument("run", type=RUN)
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--reviewer", default=None,
              help="The reviewer of every row (else each row's reviewer column).")
def import_cmd(run: Path, file: Path, reviewer: str | None) -> None:
    """Merge the labels of FILE (CSV or JSONL, as `review export` writes it) into
    RUN/review/labels.jsonl. Every row is checked against the run first — the case, the
    component and metric, the item, the label — and nothing is imported if one is wrong;
    the error names the row.

    \b
    Example:
      evalharness review import run/ review.csv --reviewer ana
    """
    from evalharness.review.exchange import import_labels

    rev = Review.open(run)
    said: list[str] = []
    stored = import_labels(rev, file, reviewer, said)
    _say(said)
    who = sorted({lab.reviewer for lab in stored})
    click.echo(f"imported {len(stored)} labels" + (f" by {', '.join(who)}" if who else "")
               + f" into {rev.labels_path}")


@review.command()
@click.argument("run", type=RUN)
@click.option("--into", type=click.Path(dir_okay=False, path_type=Path),
              help="The cases file to write (default: the run's scenario's `cases:`).")
@click.option("--case", "cases", multiple=True, metavar="ID",
              help="Promote only this case (repeatable; default: every labelled case).")
@click.option("--reviewer", default=None, help="Only this reviewer's labels.")
def promote(run: Path, into: Path | None, cases: tuple[str, ...], reviewer: str | None
            ) -> None:
    """Promote reviewed cases into the cases file as gold: a route, SQL or answer a
    person accepted (or corrected) becomes gold.routes, gold.sql or gold.answer; chunk
    labels become grades in gold.relevant. The reviewer and the date go into the case's
    metadata.review.

    \b
    Examples:
      evalharness review promote run/                     into the scenario's cases file
      evalharness review promote run/ --case q003 --into reviewed.jsonl
    """
    from evalharness.review.curate import cases_file
    from evalharness.review.curate import promote as do_promote

    rev = Review.open(run)
    target = into or cases_file(rev)
    done = do_promote(rev, target, cases=list(cases) or None, reviewer=reviewer)
    _say(rev.warnings)
    if not done["updated"] and not done["added"]:
        click.echo("no label of these cases sets any gold (yes on a route, SQL or "
                   "correctness metric, a chunk label, or a correction); nothing written")
        return
    click.echo(f"{target}: {len(done['updated'])} cases updated, {len(done['added'])} added "
               f"(gold {', '.join(done['fields'])})")


@click.command()
@click.argument("run", type=RUN)
@click.option("--labels", "label_files", multiple=True,
              type=click.Path(dir_okay=False, path_type=Path),
              help="More labels (a labels.jsonl); the run's own review/labels.jsonl is "
                   "always read. Repeatable.")
@click.option("--reviewer", "reviewers", multiple=True,
              help="Only these reviewers' labels (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the agreement as JSON.")
@click.option("--report/--no-report", "update_report", default=True, show_default=True,
              help="Add the section to the run's report.json, report.md and report.html.")
@click.option("--resamples", type=click.IntRange(100, 100_000), default=1000,
              show_default=True, help="Bootstrap resamples behind each CI.")
@click.option("--filter", "filters", multiple=True, metavar="EXPR",
              help="Only the labels of cases matching EXPR ('tag:begin_wow', 'q01*', "
                   "'route:sql'; as in a run); repeatable. Not written into the reports.")
def agreement(run: Path, label_files: tuple[Path, ...], reviewers: tuple[str, ...],
              as_json: bool, update_report: bool, resamples: int,
              filters: tuple[str, ...]) -> None:
    """How far the judge agrees with people, per component and metric, with bootstrap CIs.

    yes/no labels: ROC-AUC against the judge's score; Cohen's κ, balanced accuracy and the
    confusion matrix against its verdict; the threshold that best matches the people and
    what it would change in the run's verdicts and bottleneck. 1-5 scores: Spearman, Kendall
    and weighted κ. agree/disagree: the judge's accuracy. Several reviewers: κ between
    them. Writes RUN/review/agreement.json (and, by default, a section in the run's
    reports). See docs/review.md.

    \b
    Examples:
      evalharness agreement run/
      evalharness agreement run/ --labels team-labels.jsonl --json
      evalharness agreement run/ --filter tag:price          one slice of the cases
    """
    from evalharness.review.agreement import compute
    from evalharness.review.render import print_agreement

    rev = Review.open(run, filters=filters)
    labels = rev.labels(label_files)
    _say(rev.warnings)
    if reviewers:
        labels = [lab for lab in labels if lab.reviewer in set(reviewers)]
    if filters:
        kept = {rev.run.results[i].case.id for i in rev.chosen}
        labels = [lab for lab in labels if lab.case in kept]
        update_report = False
    result = compute(rev, labels, resamples=resamples)
    path = rev.path / "review" / "agreement.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if update_report:
        add_to_reports(rev, result)
    if as_json:
        click.echo(json.dumps(result, indent=1))
        return
    print_agreement(result, Console(width=None if sys.stdout.isatty() else 140))
    click.echo(f"\nwrote {path}" + (" and the section in report.md/report.html"
                                    if update_report and result["rows"] else ""))


def add_to_reports(review: Review, agreement: dict) -> None:
    """Rewrite the run's report.json, report.md and report.html with the agreement section
    (under the run's lock: a run writing the same folder is not overtaken)."""
    with RunLock(review.path):
        report = review.run.report
        complete_declarations(report)
        attach(report, agreement)
        write_reports(report, Path(review.path), review.run.results)
