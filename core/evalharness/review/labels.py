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

A crash or a full disk can leave a torn last line (no newline, not JSON). Readers leave it out
with a warning; the next append moves it to ``labels.jsonl.torn`` (one JSON line per repair,
the fragment's bytes kept) before it writes, so a label always starts a line of its own.
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
from typing import Any, BinaryIO, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

import evalharness.jsonlimits as jsonlimits
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
        """The label as one line of labels.jsonl (without its newline)."""
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
    """The current UTC time as a label's ``at`` (ISO 8601, seconds, ``Z``)."""
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def torn_path(path: Path) -> Path:
    """Where :func:`append` moves a torn last line of ``path``: ``labels.jsonl.torn`` beside
    it.

    >>> torn_path(Path("run/review/labels.jsonl")).as_posix()
    'run/review/labels.jsonl.torn'
    """
    return path.with_name(path.name + ".torn")


def append(path: Path, labels: Iterable[Label], warnings: list[str] | None = None
           ) -> list[Label]:
    """Append labels to ``path`` (made with its folder when missing), under an exclusive
    ``flock`` so two server threads or processes never interleave a line, then fsync. Labels
    without a time get the current one; the stored labels are returned.

    Every writer of labels (the page, the pairwise page, ``review import``) goes through
    here. A label is appended only after a whole line: a torn last line (a crash or a full
    disk mid-append: no newline, not JSON) is first moved to :func:`torn_path` and cut from
    the file, and ``warnings`` gets a sentence saying so; a last line that is whole but for
    its newline gets its newline."""
    stored = [lab if lab.at else lab.model_copy(update={"at": now()}) for lab in labels]
    if not stored:
        return stored
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(lab.line() + "\n" for lab in stored).encode("utf-8")
    with open(path, "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            said = _end_with_a_whole_line(path, fh)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
    if said and warnings is not None:
        warnings.append(said)
    return stored


def _end_with_a_whole_line(path: Path, fh: BinaryIO) -> str | None:
    """Under the caller's lock, make the file open as ``fh`` (append mode) end with a newline:
    a torn last line is recorded in :func:`torn_path` (one JSON line: when, which line, its
    offset and its bytes), fsynced there, then cut; what to tell the user, or ``None``."""
    if _ends_whole(fh):
        return None
    fh.seek(0)
    data = fh.read()
    start = data.rfind(b"\n") + 1
    fragment = data[start:]
    if not fragment.strip() or jsonlimits.is_json(fragment):
        fh.write(b"\n")  # a whole label that lacks only its newline (a file edited by hand)
        return None
    line = data.count(b"\n", 0, start) + 1
    torn = torn_path(path)
    record = {"at": now(), "file": path.name, "line": line, "offset": start,
              "bytes": len(fragment), "fragment": fragment.decode("utf-8", "surrogateescape")}
    with open(torn, "a+b") as out:
        lead = b"" if _ends_whole(out) else b"\n"  # its own last record torn: keep ours whole
        out.write(lead + json.dumps(record).encode("ascii") + b"\n")
        out.flush()
        os.fsync(out.fileno())
    fh.truncate(start)
    return (f"{path}: its last line (line {line}, {len(fragment)} bytes) was cut short by a "
            f"write that did not finish; moved it to {torn} before appending")


def _ends_whole(fh: BinaryIO) -> bool:
    """Whether the file open as ``fh`` is empty or ends with a newline."""
    end = fh.seek(0, os.SEEK_END)
    if end == 0:
        return True
    fh.seek(end - 1)
    return fh.read(1) == b"\n"


def read(path: Path, warnings: list[str] | None = None) -> list[Label]:
    """Every label line of ``path`` in order (``[]`` when it does not exist), read under a
    shared lock (never half of an append). A torn last line (no newline, not JSON: a crash
    mid-write) is left out and ``warnings`` gets a sentence naming it (the file is not
    changed: the next :func:`append` moves it aside); any other bad line is an
    :class:`InputError` naming the file and line."""
    if not path.is_file():
        return []
    with open(path, "rb") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_SH)
        except OSError:  # a file system without flock: read as is
            pass
        data = fh.read()
    out: list[Label] = []
    lines = data.split(b"\n")
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        if number == len(lines) and not jsonlimits.is_json(raw):
            if warnings is not None:
                warnings.append(f"{path}: its last line (line {number}, {len(raw)} bytes) is "
                                "cut short (no newline: a write that did not finish); it is "
                                f"left out, and the next label given moves it to "
                                f"{torn_path(path).name}")
            break
        out.append(parse_line(raw, path, number))
    return out


def parse_line(raw: bytes, path: Path, number: int) -> Label:
    """One line of a labels file as a :class:`Label`; an :class:`InputError` naming the file
    and line when it is not UTF-8, not JSON (or nested too deep), or not a label."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}, line {number}: not UTF-8 text (byte 0x{raw[exc.start]:02x} "
                         f"at column {exc.start + 1})") from None
    try:
        value = jsonlimits.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}, line {number}: not JSON ({exc.msg}, column {exc.colno})"
                         ) from None
    try:
        return Label.model_validate(value)
    except ValidationError as exc:
        raise InputError(f"{path}, line {number}: {describe(exc)}") from None


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
