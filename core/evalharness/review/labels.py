"""People's labels: one JSON line each in ``RUN/review/labels.jsonl``, appended the moment a
label is given (flushed and fsynced), so closing the tab or killing the server loses nothing.

A label says what one reviewer thinks of one *target* of one case (see
:mod:`evalharness.review.targets`): a judged metric of a component, or one claim, chunk or
route under it. The value is one of

- ``"yes"`` / ``"no"``: the underlying label (the answer is acceptable, the claim is supported,
  the chunk is relevant, the route is right);
- ``"agree"`` / ``"disagree"``: a mark on the judge's verdict, nothing more;
- a whole number 1–5: an ordinal score (how good the answer is);
- ``null``: the reviewer took a label back.

The file is a log: the last line of a reviewer for a target wins (:func:`latest`), earlier
lines stay as history. Pairwise preferences (``"A"``, ``"B"``, ``"tie"``) live in
``review/pairwise.jsonl`` with the two runs' ids, in the same line format.
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import hashlib
import json
import os
import statistics as _st
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from evalharness.errors import InputError

LABELS = Path("review") / "labels.jsonl"
"""Where a run folder keeps its labels."""

PAIRWISE = Path("review") / "pairwise.jsonl"
"""Where a run folder keeps preference labels between it and another run."""

BINARY = ("yes", "no")
MARKS = ("agree", "disagree")
ORDINAL = (1, 2, 3, 4, 5)
PREFERENCES = ("A", "B", "tie")

LabelValue = Literal["yes", "no", "agree", "disagree", "A", "B", "tie"] | int | None

VALID = ("yes or no (the underlying label), agree or disagree (a mark on the judge's "
         "verdict), a whole number 1-5 (an ordinal score), or empty to take a label back")


class Label(BaseModel):
    """One reviewer's label of one target of one case."""

    model_config = ConfigDict(extra="forbid")

    case: str = Field(min_length=1)
    """The case id."""
    component: str = Field(min_length=1)
    """The component, e.g. ``generator``."""
    metric: str = Field(min_length=1)
    """The metric the label is about, e.g. ``faithfulness``, ``claim_support``."""
    item: str = ""
    """Which part of the case: ``""`` for the case itself, ``claim:2``, ``chunk:b047``."""
    label: LabelValue = None
    """The value (see the module text)."""
    reviewer: str = Field(min_length=1, max_length=80)
    """Who gave it; several reviewers are told apart by name."""
    note: str = Field(default="", max_length=4000)
    """What the reviewer wants to say about it."""
    correction: str | None = Field(default=None, max_length=20000)
    """The right value, when the reviewer gives it: routes (comma-separated), SQL, or the
    answer a person would accept. Promoted into the cases file as gold
    (:mod:`evalharness.review.curate`)."""
    at: str = ""
    """When (UTC, ISO 8601); filled in when empty."""
    runs: list[str] | None = None
    """Pairwise only: the ids of run A and run B."""

    @field_validator("label", mode="before")
    @classmethod
    def _value(cls, value: Any) -> Any:
        return parse_value(value)

    @property
    def key(self) -> tuple:
        """(reviewer, case, component, metric, item, runs): what a later label replaces (a
        preference between A and B does not replace one between A and C)."""
        return (self.reviewer, self.case, self.component, self.metric, self.item,
                tuple(self.runs or ()))

    @property
    def target(self) -> tuple[str, str, str, str]:
        """(case, component, metric, item)."""
        return (self.case, self.component, self.metric, self.item)

    @property
    def kind(self) -> str | None:
        """``binary``, ``mark``, ``ordinal``, ``preference`` or ``None`` (taken back)."""
        return kind_of(self.label)

    def line(self) -> str:
        return json.dumps(self.model_dump(exclude_none=False), ensure_ascii=False)


def parse_value(value: Any) -> Any:
    """A label value as written by a person or a spreadsheet, made canonical; a
    :class:`ValueError` for anything else.

    >>> [parse_value(v) for v in ("Yes", " no ", "AGREE", "3", 4.0, "", None, "tie", True)]
    ['yes', 'no', 'agree', 3, 4, None, None, 'tie', 'yes']
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        if value in ORDINAL:
            return value
        raise ValueError(f"{value} is not a valid label: {VALID}")
    text = str(value).strip()
    if not text:
        return None
    low = text.lower()
    if low in BINARY or low in MARKS or low == "tie":
        return low
    if text in ("A", "B"):
        return text
    if low in ("true", "false"):
        return "yes" if low == "true" else "no"
    if low.isdigit() and int(low) in ORDINAL:
        return int(low)
    raise ValueError(f"{text!r} is not a valid label: {VALID}")


def kind_of(value: Any) -> str | None:
    """The kind of a canonical label value.

    >>> kind_of("yes"), kind_of("disagree"), kind_of(5), kind_of("tie"), kind_of(None)
    ('binary', 'mark', 'ordinal', 'preference', None)
    """
    if value is None:
        return None
    if value in BINARY:
        return "binary"
    if value in MARKS:
        return "mark"
    if value in PREFERENCES:
        return "preference"
    return "ordinal"


def now() -> str:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def append(path: Path, labels: Iterable[Label]) -> list[Label]:
    """Append labels to ``path`` (made with its folder when missing), under an exclusive
    ``flock`` so two server threads or processes never interleave a line, then fsync. Labels
    without a time get the current one; the stored labels are returned."""
    stored = [lab if lab.at else lab.model_copy(update={"at": now()}) for lab in labels]
    if not stored:
        return stored
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(lab.line() + "\n" for lab in stored)
    with open(path, "a", encoding="utf-8") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
    return stored


def read(path: Path) -> list[Label]:
    """Every label line of ``path`` in order (``[]`` when it does not exist). A torn last line
    (a crash mid-write) is dropped; any other bad line is an :class:`InputError` naming the
    file and line."""
    if not path.is_file():
        return []
    out: list[Label] = []
    lines = path.read_text(encoding="utf-8").split("\n")
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            out.append(Label.model_validate_json(text))
        except ValidationError as exc:
            if number == len(lines) and not text.endswith("}"):
                break  # torn last line
            raise InputError(f"{path}, line {number}: {describe(exc)}") from None
    return out


def latest(labels: Iterable[Label]) -> list[Label]:
    """The labels in force: per reviewer and target the last one given, without those taken
    back (``label: null``), in the order they were first given.

    >>> a = Label(case="c", component="g", metric="m", label="yes", reviewer="ana")
    >>> b = a.model_copy(update={"label": "no"})
    >>> [x.label for x in latest([a, b])], latest([a, a.model_copy(update={"label": None})])
    (['no'], [])
    """
    last: dict[tuple, Label] = {}
    for lab in labels:
        last[lab.key] = lab
    return [lab for lab in last.values() if lab.label is not None]


def describe(exc: ValidationError) -> str:
    """A pydantic error as one sentence: the field and what is wrong with it."""
    parts = []
    for err in exc.errors()[:3]:
        where = ".".join(str(p) for p in err["loc"]) or "the line"
        message = str(err["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {message}")
    return "; ".join(parts)


def consensus(values: Sequence[Any]) -> Any:
    """One label from several reviewers' (see the module text); ``None`` for a tie.

    >>> consensus(["yes", "no", "yes"]), consensus(["yes", "no"]), consensus([2, 5, 4, 1])
    ('yes', None, 2)
    """
    if all(isinstance(v, int) for v in values):
        return _st.median_low(values)
    counts = defaultdict(int)
    for v in values:
        counts[v] += 1
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        return None
    return ranked[0][0]


def id_of(path: Path, manifest: dict[str, Any], scenario_sha256: str | None) -> str:
    """:func:`run_id` from a run's folder, its run.json and its scenario's digest."""
    m = manifest
    basis = json.dumps([m.get("started_at"), m.get("inputs_sha256"), m.get("scenario_sha256"),
                        scenario_sha256])
    if not m:
        basis = str(Path(path).resolve())
    return hashlib.sha256(basis.encode()).hexdigest()[:12]
