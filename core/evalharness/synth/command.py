"""``evalharness synth``: the command line over :func:`evalharness.synth.synthesize`."""

from __future__ import annotations

import contextlib
import json
import random
import sqlite3
import tempfile
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from evalharness.errors import UsageError


def _open_database(path: Path, stack: contextlib.ExitStack) -> sqlite3.Connection:
    """A read-only connection to a SQLite file, or to a database built from a ``.sql`` script
    in a temporary folder."""
    from evalharness.context import Database, build_sqlite

    if path.suffix.lower() == ".sql":
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="evalharness-")))
        built = folder / "synth.sqlite"
        build_sqlite(path, built)
        path = built
    try:
        conn = Database(path=path).connect()
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        raise UsageError(f"--database {str(path)!r}: not a readable SQLite database ({exc}); "
                         "give a SQLite file or a .sql script that builds one") from None
    stack.callback(conn.close)
    return conn


def _check_files(**given: Path | None) -> None:
    """Refuse, naming it, an option's path that is not a regular file: a named pipe would
    block the read, a device like /dev/zero never end (the option's own check only asks that
    the path exists)."""
    from evalharness.context import file_hint, not_a_file

    for option, path in given.items():
        problem = not_a_file(path) if path is not None else None
        if problem is not None:
            raise UsageError(f"--{option} {str(path)!r} {problem}; {file_hint(problem)}")


def _nothing_to_ask(chunks: dict) -> str | None:
    """Why a corpus gives no question at all (the file is empty, every text is blank), or
    ``None``.

    >>> from evalharness.context import Chunk
    >>> _nothing_to_ask({}), _nothing_to_ask({"a": Chunk(id="a", text=" ")})
    ('the file is empty (not one chunk in it)', 'its 1 chunk has a blank `text`')
    >>> _nothing_to_ask({"a": Chunk(id="a", text="Wool."), "b": Chunk(id="b", text="")})
    """
    if not chunks:
        return "the file is empty (not one chunk in it)"
    if all(not c.text.strip() for c in chunks.values()):
        n = len(chunks)
        return (f"its {n} chunk has a blank `text`" if n == 1 else
                f"all {n} chunks have a blank `text`")
    return None


def _preview(cases, console: Console, k: int, seed: int) -> None:
    shown = random.Random(seed).sample(cases, min(k, len(cases)))
    table = Table(title=f"{len(shown)} of {len(cases)} synthetic cases (a seeded sample)",
                  show_lines=True)
    for name in ("id", "kind", "question", "gold", "reference answer"):
        table.add_column(name, overflow="fold")
    for c in shown:
        m = c.metadata["synth"]
        gold = []
        if c.gold.routes is not None:
            gold.append(f"routes: {', '.join(c.gold.routes) or '(none)'}")
        if c.gold.sql:
            gold.append(c.gold.sql)
        if c.gold.relevant:
            gold.append("chunks: " + ", ".join(c.gold.relevant))
        table.add_row(c.id, f"{m['source']} · {m['shape']} · d{m['difficulty']}",
                      escape(c.question), escape("\n".join(gold)),
                      escape((c.gold.answer or "")[:300]))
    console.print(table)


def _print_summary(summary: dict, console: Console) -> None:
    table = Table(title="synth summary", show_header=False)
    table.add_column("what")
    table.add_column("count", overflow="fold")
    table.add_row("written / requested", f"{summary['written']} / {summary['requested']}")
    for key in ("by_route", "by_source", "by_shape", "by_difficulty", "filtered",
                "seeds_dropped", "tables"):
        if summary.get(key):
            table.add_row(key.replace("_", " "),
                          ", ".join(f"{k}: {v}" for k, v in summary[key].items()))
    chunks = summary.get("chunks") or {}
    if chunks.get("total"):
        table.add_row("chunks used", f"{chunks['covered']} of {chunks['total']}")
    if chunks.get("cut"):
        table.add_row("chunks cut", f"{chunks['cut']} longer than {chunks['max_chars']:,} "
                      "characters: only their first part was read")
    console.print(table)


@click.command()
@click.argument("scenario_path", metavar="[SCENARIO]", required=False,
                type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path),
              help="The cases file to write (JSONL, our Case schema).")
@click.option("--n", "n", type=click.IntRange(1, 100_000), default=100, show_default=True,
              help="How many cases to write (fewer when the data cannot give that many).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Same inputs and seed: byte-identical cases.")
@click.option("--corpus", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="A corpus JSONL (instead of, or without, a scenario's).")
@click.option("--database", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="A SQLite file, or a .sql script that builds one.")
@click.option("--writer", type=click.Choice(["offline", "llm"]), default="offline",
              show_default=True, help="offline: templates, no key; llm: the judge's model.")
@click.option("--append", is_flag=True,
              help="Add to an existing --out file; no id or near-duplicate question repeats.")
@click.option("--preview", "preview", is_flag=True,
              help="Print a sample of the cases as a table (without --out: write nothing).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--difficulty", "difficulties", multiple=True, type=click.IntRange(1, 4),
              help="Only questions of this difficulty (1: one table or chunk, one condition "
                   "... 4: nested, several chunks); repeatable.")
@click.option("--persona", "personas", multiple=True, metavar="TEXT",
              help="--writer llm: who asks (repeatable; default: four shopper personas).")
@click.option("--style", "styles", multiple=True, metavar="TEXT",
              help="--writer llm: how they write (repeatable; default: four styles).")
@click.option("--skip-table", "skip_tables", multiple=True, metavar="TABLE",
              help="A table no question may read (personal data, internal tables); "
                   "repeatable.")
@click.option("--rejected", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the candidates the filters dropped, with why (JSONL).")
def synth(scenario_path: Path | None, out: Path | None, n: int, seed: int,
          corpus: Path | None, database: Path | None, writer: str, append: bool,
          preview: bool, as_json: bool, difficulties: tuple[int, ...],
          personas: tuple[str, ...], styles: tuple[str, ...], skip_tables: tuple[str, ...],
          rejected: Path | None) -> None:
    """Write labelled test cases from the corpus and the database (docs/synth.md).

    Reads the scenario's corpus, database and pipeline (a scenario without `cases` and
    without `system`/`traces` is fine), or --corpus / --database without a scenario. Every
    case is tagged `synthetic`, with its provenance under `metadata.synth`; the summary
    counts what each filter dropped. Check a sample by hand before trusting the cases.

    \b
    Examples:
      evalharness synth scenarios/shop.yaml --out cases.synth.jsonl --n 200 \\
          --skip-table customers
      evalharness synth scenarios/shop.yaml --n 20 --preview
      evalharness synth --corpus chunks.jsonl --database shop.sqlite --out cases.jsonl
      evalharness synth scenarios/shop.yaml --out cases.jsonl --append --n 50 --seed 1
    """
    from evalharness.context import load_corpus
    from evalharness.models import Case
    from evalharness.plugins import load_plugins
    from evalharness.runner import make_judge
    from evalharness.scenario import load_cases, load_scenario
    from evalharness.synth import synthesize, write_cases

    if out is None and not preview:
        raise UsageError("give --out FILE to write the cases, or --preview to look at a "
                         "sample first")
    _check_files(corpus=corpus, database=database)
    if out is not None and out.exists() and not append:
        raise UsageError(f"--out {str(out)!r} already exists; pass --append to add to it, "
                         "or choose another file")
    scenario = None
    if scenario_path is not None:
        scenario = load_scenario(scenario_path, purpose="synth")
    elif corpus is None and database is None:
        raise UsageError("give a scenario, or --corpus and/or --database: synth writes cases "
                         "from a corpus and a database")
    existing: list[Case] = list(scenario.cases) if scenario is not None else []
    if append and out is not None and out.exists():
        existing += load_cases(out)
    console = Console()
    err = Console(stderr=True)
    with contextlib.ExitStack() as stack:
        conn = None
        db_source = database
        spec_db = scenario.spec.database if scenario is not None else None
        if database is None and spec_db is not None and spec_db.engine != "sqlite":
            raise UsageError(f"{scenario_path}, field `database.engine`: synth reads SQLite "
                             f"databases (its catalogue gives types and keys); this one is "
                             f"{spec_db.engine}. Give --database with a SQLite copy or a "
                             ".sql script")
        if db_source is None and scenario is not None:
            db_source = scenario.database_path if (
                scenario.database_path is not None and scenario.database_path.is_file()) \
                else scenario.database_build
        if db_source is not None:
            conn = _open_database(db_source, stack)
        chunks = None
        corpus_source = corpus or (scenario.corpus_path if scenario is not None else None)
        if corpus_source is not None:
            chunks = load_corpus(corpus_source)
            named = (f"--corpus {str(corpus_source)!r}" if corpus is not None else
                     f"{scenario_path}, field `corpus`: {str(corpus_source)!r}")
            problem = _nothing_to_ask(chunks)
            if problem and conn is None:
                raise UsageError(f"{named}: {problem}; synth writes questions from the "
                                 "chunks' text (a JSONL file, one chunk a line: "
                                 '{"id": "b001", "text": "..."})')
            if problem:
                err.print(f"[yellow]{escape(named)}: {escape(problem)}; the cases come from "
                          "the database alone[/]")
        if conn is None and not chunks:
            raise UsageError(f"{scenario_path}: the scenario names no database and no corpus; "
                             "synth needs at least one (or give --corpus / --database)")
        if scenario is not None:
            judge = make_judge(scenario)
        else:
            from evalharness.judge.base import JudgeConfig

            judge = load_plugins([]).judge_backend("heuristic").factory(JudgeConfig())
        stack.callback(judge.close)
        if writer == "llm":
            from evalharness.synth.llm import LLMWriter

            options = {k: v for k, v in (("personas", personas), ("styles", styles)) if v}
            chosen = LLMWriter.from_judge(judge, chunks, **options)
        else:
            if personas or styles:
                raise UsageError("--persona and --style word questions through a model: add "
                                 "--writer llm (the offline writer uses templates)")
            chosen = None
        from evalharness.cli import BarProgress

        bar = BarProgress(err.is_terminal)
        bar.start(n, 0, "synth")
        stack.callback(bar.stop)
        result = synthesize(n=n, seed=seed, corpus=chunks, database=conn,
                            pipeline=scenario.pipeline if scenario is not None else None,
                            existing=existing, writer=chosen, judge=judge,
                            skip_tables=skip_tables, difficulties=difficulties,
                            progress=bar.advance)
    if out is not None:
        write_cases(out, result.cases, append=append)
    if rejected is not None:
        rejected.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n"
                                    for r in result.rejected), encoding="utf-8")
    if as_json:
        click.echo(json.dumps(result.summary, indent=2, ensure_ascii=False))
    else:
        if preview and result.cases:
            _preview(result.cases, console, 10, seed)
        _print_summary(result.summary, console)
    where = f" to {out}" if out is not None else " (preview only: nothing written)"
    err.print(f"{result.summary['written']} cases{escape(where)}.")
    if result.summary["written"] < n:
        err.print(f"[yellow]fewer than the {n} asked for: the data gives no more that pass "
                  "the filters (see the summary)[/]")
    if not result.cases:
        raise UsageError("no case passed the filters; see the summary above (a corpus of a "
                         "few chunks or a database of tiny tables gives too little)")
