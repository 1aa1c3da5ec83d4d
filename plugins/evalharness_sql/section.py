"""The SQL plugin's report section: verdicts per stage, error categories, and the minimal
counterexamples, as markdown tables (the report renders them in ``report.md`` and
``report.html`` alike)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from evalharness.registry import ReportSection
from evalharness_sql.taxonomy import CATEGORIES

SHOWN = 5
"""Minimal counterexamples shown per component, at most."""


def cell(value: Any) -> str:
    """A value as a markdown table cell: NULL for None, text quoted, pipes escaped.

    >>> [cell(v) for v in (None, 3, 2.5, "a|b", "")]
    ['NULL', '3', '2.5', "'a\\\\|b'", "''"]
    """
    if value is None:
        return "NULL"
    text = repr(value) if isinstance(value, str) else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def table(title: str, columns: list[str], rows: list[list[Any]], total: int | None = None
          ) -> list[str]:
    """A small markdown table under a bold title (a header row when it has no rows).

    >>> print("\\n".join(table("t", ["id", "name"], [[1, "Ada"]])))
    **t**
    <BLANKLINE>
    | id | name |
    |---|---|
    | 1 | 'Ada' |
    """
    lines = [f"**{title}**", ""]
    lines.append("| " + " | ".join(c.replace("|", "\\|") for c in columns) + " |")
    lines.append("|" + "---|" * len(columns))
    for row in rows:
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    if not rows:
        lines.append("| " + " | ".join("" for _ in columns) + " |")
    if total is not None and total > len(rows):
        lines += ["", f"({len(rows)} of {total} rows)"]
    return lines


def counterexample_markdown(case_id: str, reason: str, minimal: dict[str, Any]) -> list[str]:
    """One minimal counterexample: the two queries, the database's tables and both results."""
    queries = minimal.get("queries", {})
    lines = [f"#### {case_id}", "", reason, ""]
    if queries:
        lines += [f"- gold: `{queries.get('gold', '')}`",
                  f"- predicted: `{queries.get('predicted', '')}`", ""]
    lines.append(f"The database, shrunk from {minimal.get('rows_before')} rows to "
                 f"{minimal.get('rows')} ({minimal.get('runs')} tries):")
    lines.append("")
    for name, t in minimal.get("tables", {}).items():
        lines += table(name, t.get("columns", []), t.get("rows", []), t.get("rows_total"))
        lines.append("")
    for side in ("gold", "predicted"):
        result = minimal.get(side)
        if result is not None:
            lines += table(f"{side} result", result.get("columns", []), result.get("rows", []),
                           result.get("rows_total"))
            lines.append("")
    return lines


def sections(results: list[Any]) -> list[ReportSection] | None:
    """One section per text-to-SQL component scored by ``equivalence``."""
    per_component: dict[str, dict[str, Any]] = {}
    for result in results:
        for name, component in result.components.items():
            if component.evaluators.get("equivalent") != "equivalence":
                continue
            value = component.metrics.get("equivalent")
            if value is None:
                continue
            counts = per_component.setdefault(name, {"stage": Counter(), "category": Counter(),
                                                     "verdict": Counter(), "minimal": []})
            stage = value.details.get("stage", "unknown")
            verdict = ("undecided" if value.error else
                       "equivalent" if value.value == 1.0 else "not equivalent")
            counts["stage"][f"{stage}: {verdict}"] += 1
            counts["verdict"][verdict] += 1
            if verdict == "not equivalent":
                counts["category"][value.details.get("category") or "other"] += 1
                minimal = (value.details.get("counterexample") or {}).get("minimal")
                if minimal:
                    counts["minimal"].append((result.case.id, value.details.get("reason", ""),
                                              minimal))
    out = []
    for name, counts in per_component.items():
        lines = [f"Verdicts: {counts['verdict']['equivalent']} equivalent, "
                 f"{counts['verdict']['not equivalent']} not equivalent, "
                 f"{counts['verdict']['undecided']} undecided.", "",
                 "| decided by | cases |", "|---|---:|"]
        lines += [f"| {k} | {v} |" for k, v in sorted(counts["stage"].items())]
        if counts["category"]:
            lines += ["", "| error category | cases |", "|---|---:|"]
            lines += [f"| {c} | {counts['category'][c]} |" for c in CATEGORIES
                      if counts["category"][c]]
        found = sorted(counts["minimal"], key=lambda m: (m[2].get("rows", 0), m[0]))
        if found:
            lines += ["", f"### Minimal counterexamples ({min(SHOWN, len(found))} of "
                          f"{len(found)}, smallest first)", ""]
            for case_id, reason, minimal in found[:SHOWN]:
                lines += counterexample_markdown(case_id, reason, minimal)
        data = {k: dict(v) for k, v in counts.items() if k != "minimal"}
        data["minimal_counterexamples"] = [{"case": c, "reason": r, **m}
                                           for c, r, m in found[:SHOWN]]
        out.append(ReportSection(title=f"Text-to-SQL equivalence ({name})",
                                 markdown="\n".join(lines), data=data))
    return out or None
