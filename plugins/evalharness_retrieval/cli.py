"""The ``evalharness trec`` command: trec_eval's measures on TREC files, printed as trec_eval
prints them. Added to the command line through the ``register_commands`` hook."""

from __future__ import annotations

from pathlib import Path

import click

from evalharness_retrieval.api import evaluate_arrays
from evalharness_retrieval.kernel import RunError, summarise
from evalharness_retrieval.measures import DEFAULT_MEASURES, parse_measures
from evalharness_retrieval.trec import (
    TrecFormatError,
    format_line,
    read_qrels,
    read_run,
    trec_lines,
)


class TrecInputError(click.ClickException):
    """A file that cannot be evaluated (it names the file and line), or a bad option: exit 2."""

    exit_code = 2


@click.command("trec")
@click.argument("qrels", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("run", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-m", "--measure", "measures", multiple=True, metavar="MEASURE",
              help="A measure (repeatable): P_5, P.5,10, P, recall_10, map, map_cut_10, "
                   "recip_rank, ndcg_cut_10, ndcg_exp2_cut_10, Rprec, success_10, F1_10, "
                   "hit_10, recip_rank_cut_10, dcg_cut_10, num_rel, ... or all. Default: "
                   "num_q, num_ret, num_rel, num_rel_ret, map, Rprec, recip_rank, P, recall, "
                   "ndcg_cut.")
@click.option("-q", "per_query", is_flag=True, help="Also print each query's values.")
@click.option("-l", "level", type=click.IntRange(min=0), default=1, show_default=True,
              help="Relevance level: a grade at least this is relevant.")
@click.option("-c", "complete", is_flag=True,
              help="Average over every judged query; queries missing from the run score 0.")
def trec_command(qrels: Path, run: Path, measures: tuple[str, ...], per_query: bool,
                 level: int, complete: bool) -> None:
    """Evaluate the TREC run file RUN against the qrels file QRELS, like trec_eval.

    Prints `measure<TAB>query<TAB>value` lines (`all` for the summary: the mean over queries,
    the sum for num_* counts). Equal scores are ordered by docid, descending; unjudged
    documents are not relevant; without -c, only queries both judged and in the run count.
    Exit code 2 for a malformed file (the message names the file and line) or an unknown
    measure.

    \b
    Examples:
      evalharness trec qrels.txt run.txt
      evalharness trec qrels.txt run.txt -m map -m ndcg_cut.5,10 -m P_5 -q
      evalharness trec qrels.txt run.txt -m all -l 2 -c
    """
    names = [m for m in measures if m != "runid"] if measures else list(DEFAULT_MEASURES)
    try:
        parse_measures(names)
        judgments = read_qrels(qrels)
        ranked, run_id = read_run(run)
        if not names:  # only `-m runid`
            click.echo(format_line("runid", "all", run_id))
            return
        qids, values = evaluate_arrays(judgments, ranked, names, level, complete=complete)
    except TrecFormatError as exc:
        raise TrecInputError(str(exc)) from None
    except RunError as exc:
        raise TrecInputError(f"{run}: {exc}") from None
    except ValueError as exc:
        raise TrecInputError(str(exc)) from None
    show_run_id = not measures or any(m in ("all", "runid") for m in measures)
    columns = {m: v.tolist() for m, v in values.items()}
    rows = {q: {m: col[i] for m, col in columns.items()} for i, q in enumerate(qids)}
    lines = trec_lines(rows, summarise(values, len(qids)), run_id if show_run_id else None,
                       per_query)
    click.echo("\n".join(lines))
