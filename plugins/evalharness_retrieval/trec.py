"""TREC file formats: reading qrels and run files as trec_eval does, printing its output lines.

A qrels line is ``qid iter docno rel`` (exactly 4 fields, ``rel`` an integer); a run line is
``qid iter docno rank sim run_id`` (at least 6 fields; the rank is ignored, fields after the
run id too). Blank lines and lines starting with ``#`` are skipped. Anything else is a
:class:`TrecFormatError` naming the file and the line.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

from evalharness_retrieval.measures import SUMMED


class TrecFormatError(ValueError):
    """A malformed TREC file: the message names the file and the line."""

    def __init__(self, path: Path | str, line: int, message: str) -> None:
        super().__init__(f"{path}, line {line}: {message}")
        self.path = str(path)
        self.line = line


def _lines(path: Path):
    try:
        with open(path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                stripped = line.strip()
                if stripped and not stripped.startswith("#"):
                    yield lineno, stripped.split()
    except UnicodeDecodeError as exc:
        raise TrecFormatError(path, 0, f"not UTF-8 text ({exc.reason})") from None


def read_qrels(path: Path | str) -> dict[str, dict[str, int]]:
    """``{qid: {docno: grade}}`` from a qrels file.

    >>> import tempfile, os
    >>> with tempfile.NamedTemporaryFile("w", suffix=".qrels", delete=False) as f:
    ...     _ = f.write("q1 0 d1 2\\n# a comment\\nq1 0 d2 0\\n")
    >>> read_qrels(f.name)
    {'q1': {'d1': 2, 'd2': 0}}
    >>> os.unlink(f.name)
    """
    path = Path(path)
    out: dict[str, dict[str, int]] = {}
    first: dict[tuple[str, str], int] = {}
    for lineno, fields in _lines(path):
        if len(fields) != 4:
            raise TrecFormatError(path, lineno, f"expected 4 fields `qid iter docno rel`, got "
                                                f"{len(fields)}")
        qid, _, doc, rel = fields
        try:
            grade = int(rel)
        except ValueError:
            raise TrecFormatError(path, lineno, f"the relevance {rel!r} is not an integer"
                                  ) from None
        judged = out.setdefault(qid, {})
        if doc in judged:
            raise TrecFormatError(path, lineno, f"query {qid!r} judges {doc!r} twice (first on "
                                                f"line {first[qid, doc]})")
        judged[doc] = grade
        first[qid, doc] = lineno
    return out


def read_run(path: Path | str) -> tuple[dict[str, dict[str, float]], str]:
    """``({qid: {docno: score}}, run id)`` from a run file; the run id is the last line's.

    >>> import tempfile, os
    >>> with tempfile.NamedTemporaryFile("w", suffix=".run", delete=False) as f:
    ...     _ = f.write("q1 Q0 d1 1 2.5 bm25\\nq1 Q0 d2 2 1.0 bm25 extra fields\\n")
    >>> read_run(f.name)
    ({'q1': {'d1': 2.5, 'd2': 1.0}}, 'bm25')
    >>> os.unlink(f.name)
    """
    path = Path(path)
    out: dict[str, dict[str, float]] = {}
    first: dict[tuple[str, str], int] = {}
    run_id = ""
    for lineno, fields in _lines(path):
        if len(fields) < 6:
            raise TrecFormatError(path, lineno, f"expected 6 fields `qid iter docno rank sim "
                                                f"run_id`, got {len(fields)}")
        qid, _, doc, _, sim, run_id = fields[:6]
        try:
            score = float(sim)
        except ValueError:
            raise TrecFormatError(path, lineno, f"the score {sim!r} is not a number") from None
        if math.isnan(score):
            raise TrecFormatError(path, lineno, "the score is NaN")
        ranked = out.setdefault(qid, {})
        if doc in ranked:
            raise TrecFormatError(path, lineno, f"query {qid!r} retrieves {doc!r} twice (first "
                                                f"on line {first[qid, doc]})")
        ranked[doc] = score
        first[qid, doc] = lineno
    return out, run_id


def format_value(measure: str, value: float) -> str:
    """A value as trec_eval prints it: counts as integers, the rest with 4 decimals.

    >>> format_value("num_ret", 1500.0), format_value("map", 0.17851)
    ('1500', '0.1785')
    """
    return f"{int(round(value))}" if measure in SUMMED else f"{value:.4f}"


def format_line(measure: str, qid: str, value: str) -> str:
    """One output line, as trec_eval formats it (``%-22s\\t%s\\t%s``)."""
    return f"{measure:<22}\t{qid}\t{value}"


def trec_lines(per_query: dict[str, dict[str, float]], summary: dict[str, float],
               run_id: str | None, show_queries: bool) -> Iterable[str]:
    """trec_eval's output: per-query lines (queries in sorted order) if asked, then ``all``."""
    if show_queries:
        for qid in sorted(per_query):
            for measure, value in per_query[qid].items():
                if measure != "num_q":
                    yield format_line(measure, qid, format_value(measure, value))
    if run_id is not None:
        yield format_line("runid", "all", run_id)
    for measure, value in summary.items():
        yield format_line(measure, "all", format_value(measure, value))
