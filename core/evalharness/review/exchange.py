"""The spreadsheet workflow: ``review export`` writes the sampled cases' targets as CSV or
JSONL, one row per target; a person fills in ``label`` (and ``note``, ``correction``);
``review import`` validates every row against the run and appends the labels to
``review/labels.jsonl``, all or nothing.

Columns: ``case, component, metric, item, question, case_question, shown, text, score,
verdict, threshold, label, note, correction, reviewer``. Only ``case, component, metric,
item, label`` are read back (and ``note``, ``correction``, ``reviewer``, ``at`` when
present); a row with an empty ``label`` is skipped as not labelled.

A CSV is opened in a spreadsheet, which runs a cell beginning with ``=``, ``+``, ``-``, ``@``,
a tab or a carriage return as a formula (CSV injection: a case text is anyone's text). Export
puts a single quote before such a cell (OWASP's advice), and before a text that already begins
with a quote; import takes one leading quote away when the next character is one of those or
another quote, so every text comes back as it was, and a quote a person typed before anything
else (``'tis``) stays. Numbers (the score) are written as numbers.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

import evalharness.jsonlimits as jsonlimits
from evalharness.context import file_hint, not_a_file
from evalharness.errors import InputError
from evalharness.review import labels as L
from evalharness.review.session import Review

COLUMNS = ["case", "component", "metric", "item", "question", "case_question", "shown", "text",
           "score", "verdict", "threshold", "label", "note", "correction", "reviewer"]
READ = ("case", "component", "metric", "item", "label", "note", "correction", "reviewer", "at")
FORMULA = ("=", "+", "-", "@", "\t", "\r")
"""What a spreadsheet takes for the start of a formula."""
ESCAPED = (*FORMULA, "'")
"""What export puts a quote before: a formula's start, and a quote (to tell ours apart)."""


def shown(result, component: str) -> str:
    """What the component produced, in one cell: the routes, the SQL, the ids, the answer."""
    trace = result.trace
    step = getattr(trace, component, None) if component in (
        "router", "text2sql", "retriever", "generator") else None
    if step is None:
        return ""
    if component == "router":
        return ", ".join(step.routes)
    if component == "text2sql":
        return step.sql or ""
    if component == "retriever":
        return ", ".join(step.ids)
    return step.answer or ""


def rows(review: Review, reviewer: str | None = None) -> list[dict[str, Any]]:
    """One row per target of every sampled case; the reviewer's labels filled in."""
    given = ({lab.target: lab for lab in review.labels() if lab.reviewer == reviewer}
             if reviewer else {})
    out = []
    for result in review.sampled():
        for t in review.targets(result.case.id):
            lab = given.get((result.case.id, *t.key))
            view = t.view()
            out.append({"case": result.case.id, "component": t.component, "metric": t.metric,
                        "item": t.item, "question": t.question,
                        "case_question": result.case.question,
                        "shown": shown(result, t.component), "text": t.text or "",
                        "score": "" if t.score is None else round(t.score, 4),
                        "verdict": {True: "pass", False: "fail", None: ""}[t.verdict],
                        "threshold": view["threshold"] or "",
                        "label": "" if lab is None else lab.label,
                        "note": lab.note if lab else "",
                        "correction": (lab.correction or "") if lab else "",
                        "reviewer": reviewer or ""})
    return out


def escape_cell(value: Any) -> Any:
    r"""A cell as export writes it into a CSV: a text beginning with a formula character or a
    quote gets a leading single quote; anything else (numbers too) is left as it is.

    >>> [escape_cell(v) for v in ("=1+1", "-x", "\tx", "'tis", "plain", -0.5, "")]
    ["'=1+1", "'-x", "'\tx", "''tis", 'plain', -0.5, '']
    """
    if isinstance(value, str) and value.startswith(ESCAPED):
        return "'" + value
    return value


def unescape_cell(text: str) -> str:
    """A CSV cell as import reads it: the quote :func:`escape_cell` added taken away (one
    leading quote before a formula character or another quote); any other text as it is.

    >>> [unescape_cell(v) for v in ("'=1+1", "''tis", "'tis", "=typed", "plain", "'")]
    ['=1+1', "'tis", "'tis", '=typed', 'plain', "'"]
    """
    if text[:1] == "'" and text[1:2].startswith(ESCAPED):
        return text[1:]
    return text


def export(review: Review, fmt: str, reviewer: str | None = None) -> str:
    """The sample as ``csv`` (formula cells escaped, see the module text) or ``jsonl``
    text."""
    return render(rows(review, reviewer), fmt)


def render(data: list[dict[str, Any]], fmt: str) -> str:
    """:func:`rows` as ``csv`` or ``jsonl`` text."""
    if fmt == "jsonl":
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in data)
    buf = io.StringIO(newline="")
    # CRLF between rows (RFC 4180), so a carriage return inside a cell is quoted too
    writer = csv.DictWriter(buf, COLUMNS, lineterminator="\r\n")
    writer.writeheader()
    writer.writerows({k: escape_cell(v) for k, v in row.items()} for row in data)
    return buf.getvalue()


def read_rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(row number, fields) of a CSV or JSONL file (by its suffix; ``.tsv`` too). CSV rows are
    numbered as a spreadsheet shows them (the header is row 1), and their cells unescaped
    (:func:`unescape_cell`)."""
    try:
        text = path.read_bytes().decode("utf-8-sig")  # newlines as they are: CR in a cell
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at "
                         f"offset {exc.start}); save it as UTF-8 (CSV UTF-8)") from None
    if path.suffix.lower() in (".jsonl", ".json", ".ndjson"):
        out = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                value = jsonlimits.loads(line)
            except jsonlimits.TooDeep as exc:
                raise InputError(f"{path}, line {number}: {exc.msg} (column {exc.colno})"
                                 ) from None
            except ValueError as exc:
                raise InputError(f"{path}, line {number}: not JSON ({exc.msg}); each line must "
                                 "be one object with case, component, metric, item and "
                                 "label") from None
            if not isinstance(value, dict):
                raise InputError(f"{path}, line {number}: expected an object with case, "
                                 "component, metric, item and label")
            out.append((number, value))
        return out
    dialect = "excel-tab" if path.suffix.lower() == ".tsv" else "excel"
    reader = csv.DictReader(io.StringIO(text, newline=""), dialect=dialect)
    missing = [c for c in ("case", "component", "metric", "label")
               if c not in (reader.fieldnames or [])]
    if missing:
        raise InputError(f"{path}: the header has no column {', '.join(missing)}; export a "
                         "file to fill in with `evalharness review export RUN`")
    out = []
    try:
        for number, row in enumerate(reader, 2):
            out.append((number, {k: unescape_cell(v) if isinstance(v, str) else v
                                 for k, v in row.items()}))
    except csv.Error as exc:
        raise InputError(f"{path}, row {len(out) + 2}: not CSV ({exc})") from None
    return out


def parse(review: Review, path: Path, reviewer: str | None) -> list[L.Label]:
    """Every labelled row of ``path`` as a checked :class:`Label`; the first problems (up to
    five) in one :class:`InputError` naming each row, and nothing imported."""
    out: list[L.Label] = []
    problems: list[str] = []
    what = "line" if path.suffix.lower() in (".jsonl", ".json", ".ndjson") else "row"
    for number, raw in read_rows(path):
        fields = {k: raw.get(k) for k in READ if raw.get(k) not in (None, "")}
        if "label" not in fields:
            continue
        fields.setdefault("item", "")
        if reviewer:
            fields["reviewer"] = reviewer
        if "reviewer" not in fields:
            problems.append(f"{what} {number}: no reviewer; fill the reviewer column or give "
                            "--reviewer NAME")
            continue
        for key in ("case", "component", "metric", "item", "reviewer"):
            if key in fields:
                fields[key] = str(fields[key]).strip()
        for key in ("note", "correction"):  # free text: kept as written
            if key in fields:
                fields[key] = str(fields[key])
        try:
            lab = L.Label.model_validate(fields)
        except ValidationError as exc:
            problems.append(f"{what} {number} (case {fields.get('case')!r}): "
                            f"{L.describe(exc)}")
            continue
        try:
            review.target(lab)
        except InputError as exc:
            problems.append(f"{what} {number}: {exc}")
            continue
        out.append(lab)
        if len(problems) >= 5:
            break
    if problems:
        raise InputError(f"{path}: nothing imported; " + "; ".join(problems[:5]))
    return out


def import_labels(review: Review, path: Path, reviewer: str | None,
                  warnings: list[str] | None = None) -> list[L.Label]:
    """Validate ``path`` and append its labels to the run's labels.jsonl (a torn last line
    there is moved aside first, and said in ``warnings``)."""
    problem = not_a_file(path)
    if problem is not None:
        hint = "" if problem == "does not exist" else f" ({file_hint(problem)})"
        raise InputError(f"{path} {problem}; give the CSV or JSONL written by "
                         f"`evalharness review export` with its label column filled in{hint}")
    return L.append(review.labels_path, parse(review, path, reviewer), warnings)
