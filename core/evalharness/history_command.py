"""``evalharness history``: many run folders as a history — a table, history.html, history.md
and history.json (docs/history.md); the work is in :mod:`evalharness.history`.

Imported only when the command runs (``cli.LAZY_COMMANDS``). Bad input is a core
:class:`~evalharness.errors.InputError`, which the command group prints as one paragraph
with exit code 2.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console


@click.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False,
                                                                   path_type=Path),
              help="Folder for history.html, history.md and history.json (made if missing).")
@click.option("--all-together", is_flag=True,
              help="One history of every run, whatever its scenario (default: one per "
                   "scenario name).")
@click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True),
              default=0.05, show_default=True,
              help="Significance level: a change is marked when its q-value (or, with "
                   "--correction none, its p-value) is at most alpha.")
@click.option("--correction", type=click.Choice(["bh", "none"]), default="bh",
              show_default=True,
              help="bh: Benjamini-Hochberg over each step's metrics, as `compare` does; "
                   "none: each metric at alpha on its own.")
@click.option("--metric", "metrics", multiple=True, metavar="COMPONENT.METRIC",
              help="Test only this metric (repeatable; wildcards: 'retriever.*').")
@click.option("--exclude", multiple=True, metavar="COMPONENT.METRIC",
              help="Do not test this metric (repeatable; wildcards: '*.latency_ms'); it is "
                   "still drawn.")
@click.option("--resamples", type=click.IntRange(100, 1_000_000), default=2000,
              show_default=True, help="Bootstrap resamples behind each CI of a change.")
@click.option("--permutations", type=click.IntRange(100, 10_000_000), default=10_000,
              show_default=True, help="Random sign flips behind each p-value above 16 pairs.")
@click.option("-q", "--quiet", is_flag=True, help="No table; only the files written.")
def history(runs: tuple[Path, ...], out_dir: Path, all_together: bool, alpha: float,
            correction: str, metrics: tuple[str, ...], exclude: tuple[str, ...],
            resamples: int, permutations: int, quiet: bool) -> None:
    """Show run folders over time and mark the runs where a metric changed significantly.

    RUNS are --out folders of `evalharness scenario` (e.g. one a night), in any order: they
    are ordered by the start time in their run.json and grouped by scenario name (unless
    --all-together). Each run is compared with the one before it as `evalharness compare`
    does — cases paired by id, a paired permutation test per metric, Benjamini-Hochberg over
    the step's metrics — and marked where a metric changed (q <= alpha); runs that share no
    case are not tested. Writes
    OUT/history.html (each metric over the runs with its 95% CI, gates as dashed lines, the
    bottleneck's share per run), OUT/history.md and OUT/history.json. See docs/history.md.

    Exit code 0, or 2 for invalid input.

    \b
    Examples:
      evalharness history runs/nightly-* --out history/
      evalharness history runs/* --out history/ --all-together
      evalharness history runs/nightly-* --out history/ --exclude '*.latency_ms' --alpha 0.01
      evalharness history runs/nightly-* --out history/ --metric 'retriever.*' -q
    """
    from evalharness.history import build_history
    from evalharness.history_render import print_history, write_history

    result = build_history(list(runs), all_together=all_together, alpha=alpha,
                           metrics=list(metrics), exclude=list(exclude), resamples=resamples,
                           permutations=permutations, correction=correction)
    written = write_history(result, out_dir)
    if not quiet:
        print_history(result, Console(width=None if sys.stdout.isatty() else 160))
    click.echo("wrote " + ", ".join(str(p) for p in written))
