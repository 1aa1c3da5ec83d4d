"""Every case's gold checked against its scenario: routes the pipeline has, chunk ids the corpus
has, SQL that parses and runs on the database.

A misspelt gold route, a chunk id missing from the corpus or a gold query that does not run
would otherwise score a silent 0 or fail only at run time. ``evalharness validate`` raises
on them (:func:`require_gold`); :func:`gold_problems` lists them, and with ``sql=False,
corpus=False`` reads nothing but the scenario, cheap enough for any command that loads one.

Gold SQL runs through the oracle of the plugin that provides text-to-SQL's
oracle (the built-in SQL plugin: its read-only sandbox and time limit per query), so the
core executes no SQL of its own and names no plugin.
"""

from __future__ import annotations

import contextlib
import difflib
import logging
import re
import tempfile
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import sqlglot
from sqlglot.errors import ParseError, SqlglotError

from evalharness.context import Database, EvalContext, build_sqlite, read_jsonl
from evalharness.errors import NoOracle, ScenarioError
from evalharness.locate import short

if TYPE_CHECKING:
    from evalharness.models import Case
    from evalharness.scenario import Scenario

MAX_LISTED = 10
"""Lines of problems an error lists (problems alike are one line); the rest are counted."""

MAX_IDS = 3
"""Unknown chunk ids named per case; the rest are counted."""

MAX_NEAREST = 30
"""Unknown chunk ids a check looks up the nearest existing id for (each lookup scans the
corpus's ids)."""

MAX_NEAREST_SCAN = 100_000
"""Largest corpus whose ids are scanned for the nearest one to an unknown id."""

SQL_PREFIX = "the gold SQL does not run on the database: "
"""How the SQL plugin's oracle begins the reason a gold query did not run (left out here)."""

RAN = ("too_many_rows",)
"""Statuses of a gold query that ran but whose rows the oracle would not keep: not a problem
of the gold (the evaluators' own row cap is larger)."""


@dataclass(frozen=True)
class GoldProblem:
    """One gold label that does not fit the scenario.

    >>> print(GoldProblem("q4", "gold.routes", "'sqll'", "not a route of the pipeline"))
    case 'q4', field `gold.routes`, 'sqll': not a route of the pipeline
    """

    case_id: str
    """The case whose gold it is."""
    field: str
    """The gold field: ``gold.routes``, ``gold.relevant`` or ``gold.sql``."""
    value: str
    """The bad value as written (quoted, shortened)."""
    reason: str
    """What is wrong with it and what would be valid."""

    def __str__(self) -> str:
        return f"case {self.case_id!r}, field `{self.field}`, {self.value}: {self.reason}"


@dataclass
class GoldCheck:
    """What :func:`check_gold` looked at and found."""

    cases: int = 0
    """Cases in the scenario."""
    routes: int = 0
    """Cases whose gold routes were checked against the pipeline's."""
    relevant: int = 0
    """Cases whose gold chunk ids were checked against the corpus."""
    sql_parsed: int = 0
    """Cases whose gold SQL was parsed."""
    sql_ran: int = 0
    """Cases whose gold SQL ran on the database."""
    skipped: list[str] = field(default_factory=list)
    """Checks not made, each with why (no corpus, no database, ...)."""
    problems: list[GoldProblem] = field(default_factory=list)

    def summary(self) -> str:
        """One line for a person: what was checked.

        >>> GoldCheck(cases=51, routes=51, relevant=30, sql_parsed=40, sql_ran=40).summary()
        'gold checked: 51 cases (routes of 51, chunk ids of 30), 40 SQL queries ran'
        >>> GoldCheck(cases=3, sql_parsed=2, skipped=["SQL not run: no database"]).summary()
        'gold checked: 3 cases, 2 SQL queries parsed (SQL not run: no database)'
        """
        parts = [f"{label} of {n}" for label, n in (("routes", self.routes),
                                                     ("chunk ids", self.relevant)) if n]
        text = f"gold checked: {self.cases} cases" + (f" ({', '.join(parts)})" if parts else "")
        if self.sql_ran:
            text += f", {self.sql_ran} SQL queries ran"
        elif self.sql_parsed:
            text += f", {self.sql_parsed} SQL queries parsed"
        sql_notes = [s for s in self.skipped if s.startswith("SQL")]
        return text + (f" ({'; '.join(sql_notes)})" if sql_notes else "")


def gold_problems(scenario: Scenario, *, sql: bool = True, corpus: bool = True,
                  chunk_ids: Collection[str] | None = None) -> list[GoldProblem]:
    """Every gold label of the scenario's cases that does not fit it, in case order.

    Routes are always checked (against the pipeline's routers); with ``corpus``, chunk ids
    against the corpus (which is read); with ``sql``, gold SQL parsed in the scenario's
    dialect and, when the scenario has a database, run on it. ``sql=False, corpus=False``
    reads nothing beyond the loaded scenario; ``chunk_ids``, the corpus's ids when they are
    loaded already (a run's ``context.corpus``), spares reading it again. Raises
    :class:`ScenarioError` only when the scenario itself cannot be checked (an unknown
    dialect, a database that does not open).
    """
    return check_gold(scenario, sql=sql, corpus=corpus, chunk_ids=chunk_ids).problems


def require_gold(scenario: Scenario, *, sql: bool = True, corpus: bool = True,
                 hint: str = "") -> GoldCheck:
    """:func:`check_gold`, raising one :class:`ScenarioError` that lists the problems (the
    first :data:`MAX_LISTED` lines, problems alike on one line; ``hint`` is appended)."""
    check = check_gold(scenario, sql=sql, corpus=corpus)
    if check.problems:
        raise ScenarioError(describe(scenario, check.problems) + hint)
    return check


def check_gold(scenario: Scenario, *, sql: bool = True, corpus: bool = True,
               chunk_ids: Collection[str] | None = None) -> GoldCheck:
    """What :func:`gold_problems` returns, with what was checked and what was skipped."""
    check = GoldCheck(cases=len(scenario.cases))
    _check_routes(scenario, check)
    if corpus:
        _check_relevant(scenario, check, chunk_ids)
    if sql:
        _check_sql(scenario, check)
    order = {case.id: i for i, case in enumerate(scenario.cases)}
    check.problems.sort(key=lambda p: order.get(p.case_id, len(order)))
    return check


def describe(scenario: Scenario, problems: list[GoldProblem], limit: int = MAX_LISTED) -> str:
    """The problems as one message: a sentence naming the scenario and the cases file, then a
    line per kind of problem (same field and reason), at most ``limit`` lines.

    >>> from types import SimpleNamespace as S
    >>> scenario = S(path="s.yaml", spec=S(cases="cases.jsonl"))
    >>> print(describe(scenario, [GoldProblem(c, "gold.routes", "'sqll'", "not a route")
    ...                           for c in ("q1", "q2", "q3", "q4", "q5")], limit=1))
    s.yaml: 5 gold labels of 5 cases (cases.jsonl) do not fit the scenario:
      cases 'q1', 'q2', 'q3' and 2 more, field `gold.routes`, 'sqll': not a route
    """
    groups: dict[tuple[str, str], list[GoldProblem]] = {}
    for p in problems:
        groups.setdefault((p.field, p.reason), []).append(p)
    lines = [_line(group) for group in groups.values()]
    cases = len({p.case_id for p in problems})
    where = scenario.spec.cases if isinstance(scenario.spec.cases, str) else "written inline"
    head = (f"{scenario.path}: {len(problems)} gold label{'s' if len(problems) != 1 else ''} "
            f"of {cases} case{'s' if cases != 1 else ''} ({where}) "
            f"do{'es' if len(problems) == 1 else ''} not fit the scenario:")
    shown = lines[:limit]
    if len(lines) > limit:
        rest = sum(len(g) for g in list(groups.values())[limit:])
        shown.append(f"… and {rest} more")
    return "\n".join([head, *(f"  {line}" for line in shown)])


def _line(group: list[GoldProblem]) -> str:
    ids = list(dict.fromkeys(p.case_id for p in group))
    named = ", ".join(repr(i) for i in ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3
                                                   else "")
    values = {p.value for p in group}
    value = group[0].value if len(values) == 1 else f"e.g. {group[0].value}"
    first = group[0]
    return (f"case{'s' if len(ids) > 1 else ''} {named}, field `{first.field}`, {value}: "
            f"{first.reason}")


# --------------------------------------------------------------------------------------------
# Routes
# --------------------------------------------------------------------------------------------


def _check_routes(scenario: Scenario, check: GoldCheck) -> None:
    routes = sorted(scenario.pipeline.routes())
    if not routes:
        check.skipped.append("routes: the pipeline has no router with `routes:`")
        return
    known = set(routes)
    for case in scenario.cases:
        if case.gold.routes is None:
            continue
        check.routes += 1
        for route in dict.fromkeys(case.gold.routes):
            if route not in known:
                close = difflib.get_close_matches(route, routes, n=1)
                check.problems.append(GoldProblem(
                    case.id, "gold.routes", repr(route),
                    f"not a route of the pipeline; its routes: {', '.join(routes)}"
                    + (f". Did you mean {close[0]!r}?" if close else "")))


# --------------------------------------------------------------------------------------------
# Chunk ids
# --------------------------------------------------------------------------------------------


def _check_relevant(scenario: Scenario, check: GoldCheck,
                    chunk_ids: Collection[str] | None) -> None:
    labelled = [c for c in scenario.cases if c.gold.relevant]
    if scenario.corpus_path is None:
        if labelled:
            check.skipped.append("chunk ids: the scenario has no corpus")
        return
    if not labelled:
        return
    ids = set(chunk_ids) if chunk_ids is not None else corpus_ids(scenario.corpus_path)
    ordered: list[str] | None = None
    budget = MAX_NEAREST
    for case in labelled:
        check.relevant += 1
        unknown = [i for i in case.gold.relevant if i not in ids]
        if not unknown:
            continue
        if ordered is None:
            ordered = sorted(ids) if len(ids) <= MAX_NEAREST_SCAN else []
            lowered = {i.lower(): i for i in ordered}
        nearest = []
        for i in unknown[:MAX_IDS]:
            if budget and ordered:
                budget -= 1
                close = [lowered[i.lower()]] if i.lower() in lowered else \
                    difflib.get_close_matches(i, ordered, n=1, cutoff=0.8)
                if close:
                    nearest.append(f"{i!r} → {close[0]!r}")
        value = ", ".join(repr(i) for i in unknown[:MAX_IDS]) + (
            f" and {len(unknown) - MAX_IDS} more" if len(unknown) > MAX_IDS else "")
        reason = (f"{len(unknown)} of its {len(case.gold.relevant)} chunk ids "
                  f"{'is' if len(unknown) == 1 else 'are'} not in the corpus "
                  f"({scenario.spec.corpus}, {len(ids):,} chunks)")
        if nearest:
            reason += f"; nearest existing: {', '.join(nearest)}"
        check.problems.append(GoldProblem(case.id, "gold.relevant", value, reason))


def corpus_ids(path: Path) -> set[str]:
    """The chunk ids of a corpus file, read a line at a time (the texts are not kept)."""
    return {str(record["id"]) for _, record in read_jsonl(path) if "id" in record}


# --------------------------------------------------------------------------------------------
# SQL
# --------------------------------------------------------------------------------------------


def _check_sql(scenario: Scenario, check: GoldCheck) -> None:
    labelled = [c for c in scenario.cases if c.gold.sql is not None]
    if not labelled:
        return
    spec = scenario.spec.database
    dialect = spec.dialect if spec is not None else "sqlite"
    try:
        sqlglot.Dialect.get_or_raise(dialect)
    except (ValueError, SqlglotError) as exc:
        raise ScenarioError(f"{scenario.where(('database', 'dialect'))}: {exc}; give a sqlglot "
                            "dialect name (sqlite, duckdb, postgres, ...)") from None
    parsed = []
    for case in labelled:
        problem = parse_problem(case.gold.sql, dialect)
        check.sql_parsed += 1
        if problem is None:
            parsed.append(case)
        else:
            check.problems.append(GoldProblem(case.id, "gold.sql", short(case.gold.sql, 80),
                                              problem))
    text2sql = [c for c in scenario.pipeline.order if scenario.pipeline.kind(c) == "text2sql"]
    if spec is None:
        check.skipped.append("SQL not run: the scenario has no database")
    elif not text2sql:
        check.skipped.append("SQL not run: the pipeline has no text2sql component")
    elif parsed:
        with _database(scenario) as database:
            _run_sql(scenario, check, parsed, text2sql[0], database)


def parse_problem(sql: str, dialect: str) -> str | None:
    """Why ``sql`` is not one query sqlglot parses in ``dialect``, or ``None``.

    >>> parse_problem("SELECT name FROM products", "sqlite") is None
    True
    >>> parse_problem("SELEC name FROM products", "sqlite")
    "does not parse as sqlite SQL: Invalid expression / Unexpected token at line 1, column 15 ('FROM')"
    >>> parse_problem("SELECT name FROM", "sqlite")
    "does not parse as sqlite SQL: Expected table name but got the end of the query at line 1, column 16 ('FROM')"
    >>> parse_problem("SELECT name FROM products WHERE price <", "sqlite")
    "does not parse as sqlite SQL: Required keyword: 'expression' missing for LT at line 1, column 39 ('<')"
    >>> parse_problem("SELECT 1; SELECT 2", "sqlite")
    'holds 2 statements; gold SQL is one query'
    >>> parse_problem("  ", "sqlite")
    'is blank; write the query, or null when the case has none'
    """
    try:
        with _quiet_sqlglot():
            statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except ParseError as exc:
        first = exc.errors[0] if exc.errors else {}
        what = _TOKEN.sub(_token_words, first.get("description") or str(exc).splitlines()[0])
        at = (f" at line {first['line']}, column {first['col']}"
              + (f" ({first['highlight']!r})" if first.get("highlight") else "")
              if first.get("line") else "")
        return f"does not parse as {dialect} SQL: {what}{at}"
    except (SqlglotError, ValueError, RecursionError) as exc:
        return f"does not parse as {dialect} SQL: {str(exc).splitlines()[0] if str(exc) else exc!r}"
    if not statements:
        return "is blank; write the query, or null when the case has none"
    if len(statements) > 1:
        return f"holds {len(statements)} statements; gold SQL is one query"
    return None


_TOKEN = re.compile(r"<Token token_type: TokenType\.(\w+), text: (.*?), line: \d+.*?>"
                    r"|<class 'sqlglot\.[\w.]*?(\w+)'>")


def _token_words(m: re.Match) -> str:
    """A sqlglot token or expression class in an error, in words."""
    if m[3]:
        return m[3]
    return "the end of the query" if m[1] == "SENTINEL" else repr(m[2])


@contextlib.contextmanager
def _quiet_sqlglot() -> Iterator[None]:
    """Silence sqlglot's "falling back to Command" warnings while parsing."""
    logger = logging.getLogger("sqlglot")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


@contextlib.contextmanager
def _database(scenario: Scenario) -> Iterator[Database]:
    """The scenario's database; one with a build script and no file yet is built on a
    scratch copy, removed after."""
    spec = scenario.spec.database
    path = scenario.database_path
    with contextlib.ExitStack() as stack:
        if scenario.database_build is not None and (path is None or not path.is_file()):
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="evalharness-gold-"))
            path = Path(tmp) / "gold.sqlite"
            build_sqlite(scenario.database_build, path)
        yield Database(path=path, engine=spec.engine, dialect=spec.dialect, dsn=spec.dsn)


def sql_failure(reason: str) -> str | None:
    """What the text-to-SQL oracle's reason for not running a gold query says of the gold
    (``None``: it ran, only its rows were too many to keep).

    >>> sql_failure(SQL_PREFIX + "error: no such table: product")
    'fails on the database: no such table: product'
    >>> sql_failure(SQL_PREFIX + "refused: refused: only a single SELECT query may run")
    'is not run: refused: only a single SELECT query may run'
    >>> sql_failure(SQL_PREFIX + "timeout: stopped after the 5s time limit")
    'did not finish: stopped after the 5s time limit'
    >>> sql_failure(SQL_PREFIX + "too_many_rows: result exceeds the row cap") is None
    True
    """
    reason = reason.removeprefix(SQL_PREFIX)
    status, _, error = reason.partition(": ")
    if status in RAN:
        return None
    if status == "refused":
        return f"is not run: {error}"
    if status == "timeout":
        return f"did not finish: {error}"
    return f"fails on the database: {error if status in ('error', 'too_large') else reason}"


def _run_sql(scenario: Scenario, check: GoldCheck, cases: list[Case], component: str,
             database: Database) -> None:
    """Run each case's gold SQL through the text-to-SQL oracle (once per distinct query)."""
    context = EvalContext(database=database, pipeline=scenario.pipeline, component=component)
    seen: dict[str, str | None] = {}
    for case in cases:
        sql = case.gold.sql
        if sql not in seen:
            try:
                _, found = scenario.host.oracle_output(component, "text2sql", case, context)
            except NoOracle as exc:
                seen[sql] = sql_failure(str(exc))
            except Exception as exc:  # the database or a plugin failed, not the gold
                raise ScenarioError(
                    f"{scenario.where(('database',))}: the gold SQL cannot be run: "
                    f"{type(exc).__name__}: {exc}; check that the database opens (or skip "
                    "the gold SQL check)") from None
            else:
                if found is None:
                    check.skipped.append("SQL not run: no plugin provides text2sql's oracle "
                                         "(the SQL plugin is not loaded)")
                    return
                seen[sql] = None
        if seen[sql] is None:
            check.sql_ran += 1
        else:
            check.problems.append(GoldProblem(case.id, "gold.sql", short(sql, 80), seen[sql]))
