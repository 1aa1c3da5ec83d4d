"""The agreement report as text: markdown (report.md, report.html's section) and rich tables
(the terminal)."""

from __future__ import annotations

from typing import Any

TITLE = "Agreement with people"


def num(est: dict[str, Any] | None, digits: int = 2) -> str:
    """An estimate as ``0.71 [0.52, 0.86]``; ``n/a`` without a value.

    >>> num({"value": 0.7123, "ci95": [0.5, 0.9]}), num({"value": None}), num(None)
    ('0.71 [0.50, 0.90]', 'n/a', '—')
    """
    if est is None:
        return "—"
    value = est.get("value")
    if value is None:
        return "n/a"
    ci = est.get("ci95")
    text = f"{value:.{digits}f}"
    return text + (f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]" if ci else "")


def stat_cells(row: dict[str, Any]) -> list[tuple[str, str]]:
    """(statistic, value with CI) pairs of one row, in the order they are shown."""
    if row["kind"] == "binary":
        return [("AUC", num(row.get("auc"))), ("κ", num(row.get("kappa"))),
                ("balanced acc.", num(row.get("balanced_accuracy")))]
    if row["kind"] == "ordinal":
        return [("Spearman", num(row.get("spearman"))), ("Kendall τb", num(row.get("kendall"))),
                ("weighted κ", num(row.get("weighted_kappa")))]
    return [("judge accuracy", num(row.get("accuracy")))]


def label_kind(kind: str) -> str:
    return {"binary": "yes/no", "ordinal": "1–5", "mark": "agree/disagree"}[kind]


def confusion_text(row: dict[str, Any]) -> str:
    """``yes: 8 pass / 2 fail; no: 1 pass / 9 fail``."""
    cm = row.get("confusion")
    if not cm:
        return ""
    (tp, fn), (fp, tn) = cm["matrix"]
    return f"people yes: {tp} pass / {fn} fail; people no: {fp} pass / {tn} fail"


def markdown(agreement: dict[str, Any]) -> str:
    """The section's markdown: one table of every row, the confusion matrices, the better
    thresholds and what they would change, inter-reviewer κ."""
    rows = agreement.get("rows", [])
    if not rows:
        return "No labels yet: review cases with `evalharness review serve RUN`."
    lines = [f"{agreement['labels']} labels from {len(agreement['reviewers'])} reviewer(s) "
             f"({', '.join(agreement['reviewers'])}); 95% bootstrap intervals in brackets.", "",
             "| component | metric | labels | n | statistics | threshold |",
             "|---|---|---|---:|---|---|"]
    for row in rows:
        stats = "; ".join(f"{k} {v}" for k, v in stat_cells(row))
        lines.append(f"| {row['component']} | {row['metric']} | {label_kind(row['kind'])} | "
                     f"{row['n']} | {stats} | {row.get('threshold') or ''} |")
    notes = []
    for row in rows:
        name = f"{row['component']}.{row['metric']}"
        if row.get("confusion"):
            notes.append(f"- **{name}** confusion (people × judge): {confusion_text(row)}.")
        best = row.get("best_threshold")
        if best and not best.get("same"):
            cur = best.get("current_balanced_accuracy")
            text = (f"- **{name}**: the threshold that best matches the people is "
                    f"{best['threshold']:.3g} (balanced accuracy {best['balanced_accuracy']:.2f}"
                    + (f", against {cur:.2f} at {best['current']:g}" if cur is not None else "")
                    + ")")
            change = row.get("what_if")
            if change:
                text += (f"; with it {change['pass_to_fail']} case(s) of the run would go from "
                         f"pass to fail and {change['fail_to_pass']} from fail to pass in "
                         f"{row['component']}'s verdict")
                if "end_to_end_pass_to_fail" in change:
                    text += (f", {change['end_to_end_pass_to_fail']} and "
                             f"{change['end_to_end_fail_to_pass']} end to end")
                if change.get("bottleneck"):
                    moves = ", ".join(
                        f"{b['component']} {_pct(b['share'])} → {_pct(b['share_then'])}"
                        for b in change["bottleneck"])
                    text += f" (bottleneck: {moves})"
                elif change.get("note"):
                    text += f" ({change['note']})"
            notes.append(text + ".")
        for key, what in (("split", "left out: the reviewers split evenly"),
                          ("unpaired", "without an automatic value")):
            if row.get(key):
                notes.append(f"- **{name}**: {row[key]} target(s) {what}.")
    for inter in agreement.get("inter_reviewer", []):
        pairs = "; ".join(f"{p['reviewers'][0]}–{p['reviewers'][1]} κ {num(p['kappa'])} "
                          f"(n {p['n']})" for p in inter["pairs"])
        notes.append(f"- **{inter['component']}.{inter['metric']}** between reviewers: {pairs}.")
    return "\n".join(lines + ([""] + notes if notes else []))


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.0f}%"


def print_agreement(agreement: dict[str, Any], console) -> None:
    """The terminal view: a rich table, then the notes of :func:`markdown`."""
    from rich.table import Table

    rows = agreement.get("rows", [])
    if not rows:
        console.print("no labels yet: review cases with `evalharness review serve RUN`")
        return
    table = Table(title=f"{TITLE} · {agreement['labels']} labels, "
                        f"{len(agreement['reviewers'])} reviewer(s) · 95% CI in brackets")
    for col in ("component", "metric", "labels", "n", "statistic", "value [95% CI]",
                "threshold"):
        table.add_column(col, justify="right" if col == "n" else "left")
    for row in rows:
        cells = stat_cells(row)
        for k, (name, value) in enumerate(cells):
            first = k == 0
            table.add_row(row["component"] if first else "", row["metric"] if first else "",
                          label_kind(row["kind"]) if first else "",
                          str(row["n"]) if first else "", name, value,
                          (row.get("threshold") or "") if first else "",
                          end_section=k == len(cells) - 1)
    console.print(table)
    text = markdown(agreement).split("\n\n", 2)
    if len(text) > 2:
        for line in text[2].splitlines():
            console.print(line.replace("**", ""), markup=False, highlight=False)
