"""What the generator was given, as text: its recorded contexts, or the trace's rows and chunks."""

from __future__ import annotations

from evalharness.context import EvalContext
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
    """The generator's context: ``step.contexts`` when recorded; otherwise the SQL rows and
    retrieved chunks of the same trace, rendered as text."""
    if step.contexts:
        return list(step.contexts)
    trace = context.traces.get(case.id)
    out: list[str] = []
    if trace is not None and trace.text2sql is not None and trace.text2sql.rows:
        out += render_rows(trace.text2sql.columns, trace.text2sql.rows)
    if trace is not None and trace.retriever is not None:
        r = trace.retriever
        if r.texts is not None:
            out += list(r.texts)
        else:
            out += [context.corpus[i].text for i in r.ids if i in context.corpus]
    return out
