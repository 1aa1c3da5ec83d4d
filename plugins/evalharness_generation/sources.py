"""What the generator was given: its recorded contexts, or the trace's rows and chunks — as text,
and, where they came from a query's rows, as the typed rows themselves.

The text-to-SQL step of the same trace carries ``columns`` and typed ``rows``; the generator's
``contexts`` are text. :func:`generator_evidence` links them: a context that renders one of the
step's rows (every value of the row, written as the row holds it) is that row, so the judge gets
the typed table instead of the text. A trace that carries rows only as text (no text-to-SQL step)
has them parsed back where the rendering is unambiguous: lines of ``column: value`` pairs with
the same columns on every line, or a Markdown table.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from evalharness.context import EvalContext
from evalharness.judge.tasks import RowTable
from evalharness.models import Case, GeneratorStep


def render_rows(columns: list[str] | None, rows: list[list]) -> list[str]:
    """SQL rows as one line of text each, ``column: value`` pairs.

    >>> render_rows(["name", "price"], [["Navy Coat", 129.0], ["Camel Coat", None]])
    ['name: Navy Coat, price: 129.0', 'name: Camel Coat, price: NULL']
    """
    names = columns or [f"col{i + 1}" for i in range(max((len(r) for r in rows), default=0))]
    return [", ".join(f"{c}: {'NULL' if v is None else v}" for c, v in zip(names, row,
                                                                          strict=False))
            for row in rows]


def generator_sources(case: Case, step: GeneratorStep, context: EvalContext) -> list[str]:
    """The generator's context as text: ``step.contexts`` when recorded; otherwise the SQL rows
    and retrieved chunks of the same trace, rendered as text."""
    if step.contexts:
        return list(step.contexts)
    trace = context.traces.get(case.id)
    out: list[str] = []
    if trace is not None and trace.text2sql is not None and trace.text2sql.rows:
        out += render_rows(trace.text2sql.columns, trace.text2sql.rows)
    return out + _chunks(case, context)


def _chunks(case: Case, context: EvalContext) -> list[str]:
    trace = context.traces.get(case.id)
    if trace is None or trace.retriever is None:
        return []
    r = trace.retriever
    if r.texts is not None:
        return list(r.texts)
    return [context.corpus[i].text for i in r.ids if i in context.corpus]


@dataclass
class Evidence:
    """What the generator was given, split: text, and rows as typed tables."""

    prose: list[str] = field(default_factory=list)
    tables: list[RowTable] = field(default_factory=list)
    linked: str = "none"
    """How the rows were found: ``trace`` (the text-to-SQL step's typed rows, linked to the
    contexts that render them), ``parsed`` (parsed back from the contexts' text), ``none``."""

    def __bool__(self) -> bool:
        return bool(self.prose or self.tables)


def generator_evidence(case: Case, step: GeneratorStep, context: EvalContext,
                       quantity_columns: list[str] | None = None) -> Evidence:
    """The generator's context with its rows as data (see the module's docstring).

    Without recorded contexts, the trace's rows and chunks are what the generator was given.
    With them, the text-to-SQL step's rows are attached when the contexts render them (the
    contexts that do are not repeated as text), or when the query matched nothing; otherwise
    the contexts' own ``column: value`` lines and Markdown tables are parsed back.
    """
    trace = context.traces.get(case.id)
    sql = trace.text2sql if trace is not None else None
    typed = (sql is not None and sql.rows is not None and sql.error is None
             and sql.columns is not None)
    if typed:
        table = RowTable(columns=list(sql.columns), rows=[list(r) for r in sql.rows],
                         quantity_columns=quantity_columns, source="text2sql")
    if not step.contexts:
        return Evidence(_chunks(case, context), [table], "trace") if typed else \
            Evidence(_chunks(case, context))
    contexts = list(step.contexts)
    if typed:
        prose = [c for c in contexts if not _renders_rows(c, table)]
        if len(prose) < len(contexts) or not table.rows:
            return Evidence(prose, [table], "trace")
    prose, tables = parse_rows(contexts)
    for t in tables:
        t.quantity_columns = quantity_columns
    return Evidence(prose, tables, "parsed" if tables else "none")


def _renders_rows(text: str, table: RowTable) -> bool:
    """Whether every line of ``text`` renders a row of ``table`` (all of the row's values,
    written as it holds them, in one line)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return bool(lines) and all(any(_line_has_row(ln, row) for row in table.rows)
                               for ln in lines)


def _line_has_row(line: str, row: list[Any]) -> bool:
    values = [v for v in row if v is not None and str(v).strip()]
    return bool(values) and all(_written(line, v) for v in values)


def _written(line: str, value: Any) -> bool:
    """Whether ``line`` writes ``value`` as a whole token (numbers at any precision:
    49.9 = "49.90")."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        for m in re.finditer(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.]|\.\d)", line):
            if math.isclose(float(m.group()), float(value), rel_tol=0, abs_tol=1e-9):
                return True
        return False
    return re.search(rf"(?<![\w]){re.escape(str(value).strip())}(?![\w])", line) is not None


# -- rows written as text --------------------------------------------------------------------

_PAIR = re.compile(r"\s*([^:;,|]{1,40}?)\s*:\s*([^;|]*?)\s*(?:;|$)")


def parse_pairs(line: str) -> list[tuple[str, str]] | None:
    """A line of ``column: value`` pairs (``;``-separated, or ``,``-separated when no value
    holds a comma), or ``None`` when the line is not one (fewer than two pairs, or a column
    name that is not a single identifier-like word group).

    >>> parse_pairs("name: Slim Chino; brand: Hollis & Reed; price: 49.90")
    [('name', 'Slim Chino'), ('brand', 'Hollis & Reed'), ('price', '49.90')]
    >>> parse_pairs("name: Navy Coat, price: 129.0")
    [('name', 'Navy Coat'), ('price', '129.0')]
    >>> parse_pairs("Tip: wash it cold.") is None
    True
    """
    text = line.strip()
    for sep in (";", ","):
        parts = [p for p in text.split(sep)]
        if len(parts) < 2:
            continue
        pairs = []
        for p in parts:
            key, colon, value = p.partition(":")
            key = key.strip()
            if not colon or not re.fullmatch(r"[A-Za-z_][\w ()*.]{0,39}", key) or \
                    len(key.split()) > 3:
                break
            pairs.append((key, value.strip()))
        else:
            return pairs
    return None


def typed(text: str) -> Any:
    """A cell written as text, typed back: ``NULL`` → None, whole numbers → int, decimals →
    float, anything else as it is.

    >>> typed("49.90"), typed("4"), typed("NULL"), typed("43a")
    (49.9, 4, None, '43a')
    """
    s = text.strip()
    if s.upper() in ("NULL", "NONE", ""):
        return None
    if re.fullmatch(r"-?\d+", s):
        return int(s)
    if re.fullmatch(r"-?\d+\.\d+", s):
        return float(s)
    return s


def parse_rows(contexts: list[str]) -> tuple[list[str], list[RowTable]]:
    """Split contexts into text and the tables written in them: runs of lines of
    ``column: value`` pairs with the same columns (:func:`parse_pairs`), and Markdown tables.
    A context that is neither stays text.

    >>> prose, tables = parse_rows(["name: A; price: 1.50", "name: B; price: 2.00",
    ...                             "Wash it cold."])
    >>> prose, tables[0].columns, tables[0].rows
    (['Wash it cold.'], ['name', 'price'], [['A', 1.5], ['B', 2.0]])
    """
    prose: list[str] = []
    tables: list[RowTable] = []
    current: RowTable | None = None
    for text in contexts:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        md = _markdown(lines)
        if md is not None:
            tables.append(md)
            current = None
            continue
        parsed = [parse_pairs(ln) for ln in lines]
        if not lines or any(p is None for p in parsed):
            prose.append(text)
            current = None
            continue
        for pairs in parsed:
            columns = [k for k, _ in pairs]
            if current is None or current.columns != columns:
                current = RowTable(columns=columns, rows=[], source="contexts")
                tables.append(current)
            current.rows.append([typed(v) for _, v in pairs])
    return prose, tables


def _markdown(lines: list[str]) -> RowTable | None:
    """A Markdown table (header, ``---`` rule, rows), or ``None``."""
    if len(lines) < 2 or not all(ln.strip().startswith("|") for ln in lines):
        return None
    if not re.fullmatch(r"\|?(\s*:?-{3,}:?\s*\|)+\s*:?-*:?\s*\|?", lines[1].strip()):
        return None

    def cells(ln: str) -> list[str]:
        parts = re.split(r"(?<!\\)\|", ln.strip())[1:-1]
        return [p.strip().replace("\\|", "|") for p in parts]

    columns = cells(lines[0])
    rows = [cells(ln) for ln in lines[2:]]
    if any(len(r) != len(columns) for r in rows):
        return None
    return RowTable(columns=columns, rows=[[typed(v) for v in r] for r in rows],
                    source="contexts")
