"""The run's results as a sequence read lazily from ``results.jsonl``: one pass indexes the file,
and each case is parsed from its line again whenever it is read.

A large run does not fit in memory as ``CaseResult`` objects (275,000 cases took 7 GB), so
nothing after the run holds them all: :class:`Results` keeps a few numbers per case (where its
line starts, its line number, its id) and reads a case when asked for it — in case order when
iterated, one at a time. The report, the oracle reruns' plan, the plugins' run hooks and the
HTML page all go through it; :func:`read_results` (every result in a list) is for small uses.
"""

from __future__ import annotations

import gc
import json
import os
import re
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, overload

from pydantic import ValidationError

import evalharness.jsonlimits as jsonlimits
from evalharness.errors import InputError
from evalharness.models import CaseResult

_PREFIX = re.compile(
    rb'\{"schema_version":"[^"\\]*",(?:"repeat":(\d+),)?"case":\{"id":"((?:[^"\\]|\\.)*)"')
"""How a line written by :meth:`CaseResult.to_line` starts, up to its case id (and its repeat,
in a run with repeats): indexing reads them there without parsing the line (other lines are
parsed)."""

_BUFFER = 1 << 18
"""Bytes read at once when iterating (lines are often tens of kB; iteration is sequential)."""


def parse_line(raw: bytes, path: Path, lineno: int, share: _Strings | None = None
               ) -> CaseResult:
    """One line of ``results.jsonl`` as a :class:`CaseResult`; a problem is an
    :class:`InputError` naming the file and the line. With ``share``, equal strings of all the
    lines parsed with it are one object.

    >>> parse_line(b'[1]', Path("results.jsonl"), 3)
    Traceback (most recent call last):
    ...
    evalharness.errors.InputError: results.jsonl, line 3: expected a JSON object, got list
    """
    if share is None:
        try:
            return CaseResult.model_validate_json(raw)
        except ValidationError:
            pass  # parsed again below, for the error that says what is wrong
    try:
        record = jsonlimits.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        where = (f"{exc.msg} at column {exc.colno}" if isinstance(exc, json.JSONDecodeError)
                 else str(exc))
        raise InputError(f"{path}, line {lineno}: not valid JSON ({where}); each line must be "
                         "one JSON object") from None
    if not isinstance(record, dict):
        raise InputError(f"{path}, line {lineno}: expected a JSON object, got "
                         f"{type(record).__name__}")
    try:
        return CaseResult.model_validate(share.dict(record) if share is not None else record)
    except ValidationError as exc:
        raise InputError(f"{path}, line {lineno}: not a result record ({exc.error_count()} "
                         f"problems, first: {exc.errors()[0]['msg']}); was this file written "
                         "by evalharness?") from None


Key = tuple[str, int | None]
"""What identifies a line of a run: its case id and its repeat (``None`` without repeats)."""


def _key(raw: bytes) -> Key | None:
    """The case id and repeat at the start of a line :meth:`CaseResult.to_line` wrote, else
    ``None``.

    >>> _key(b'{"schema_version":"1","case":{"id":"q\\\\"1","question":"?"}}')
    ('q"1', None)
    >>> _key(b'{"schema_version":"1","repeat":3,"case":{"id":"q1","question":"?"}}')
    ('q1', 3)
    >>> _key(b'{"case": {"id": "q1"}}') is None
    True
    """
    found = _PREFIX.match(raw)
    if found is None:
        return None
    repeat, token = found.group(1), found.group(2)
    try:
        case_id = json.loads(b'"' + token + b'"') if b"\\" in token else token.decode()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return case_id, int(repeat) if repeat is not None else None


class Results(Sequence[CaseResult]):
    """The results of ``results.jsonl``, one per case id, as a read-only sequence: ``len()``,
    ``results[i]`` and iteration in case order, each case parsed from its line when read (so
    iterate once, and keep only what you need). Nothing is cached: two reads of a case are
    two equal, distinct objects.

    Built by :meth:`open` in one pass over the file that keeps, per case, where its line
    starts, its line number and its id (read from the start of the line). A problem in a line
    is an :class:`InputError` naming the file and the line, raised when that line is read (a
    line that does not start as evalharness writes them: when the file is indexed).
    """

    def __init__(self, path: Path, offsets: array, linenos: array, ids: list[str],
                 prepare: Callable[[CaseResult], CaseResult] | None = None,
                 repeats: array | None = None) -> None:
        self.path = path
        self._offsets = offsets
        self._linenos = linenos
        self._ids = ids
        self._prepare = prepare
        self._repeats = repeats  # per line, 0 for none; None: no line has a repeat

    @classmethod
    def open(cls, path: Path, *, order: Sequence[str] | None = None, repair: bool = False,
             warnings: list[str] | None = None) -> Results:
        """Index ``path`` (no file: no results).

        ``order``: the scenario's case ids; the results are then in that order, and those of
        cases not in it are left out. Without it, the results are in the order of the file —
        but for a case's repeats, which come together, in order, where its first line was.

        In a run with repeats (docs/repeat.md) each case has a line per repeat, ordered by
        case, then repeat. A case id (and repeat) met again (a line repeated by hand, or by two
        runs on one folder before the run lock existed) counts once — the first line — and is
        reported in ``warnings``. With
        ``repair``, a torn last line (a write cut short by a kill: no newline, not JSON) is
        dropped and cut from the file; a last line that is whole but for its newline gets it.
        """
        path = Path(path)
        if not path.is_file():
            return cls(path, array("q"), array("q"), [])
        index = _Index(order)
        repeated: list[tuple[str, int, int]] = []
        cut = mend = None
        with open(path, "rb") as fh:
            offset = lineno = 0
            for raw in fh:
                lineno += 1
                start, offset = offset, offset + len(raw)
                if repair and not raw.endswith(b"\n"):  # the last line, and no newline
                    if not jsonlimits.is_json(raw):
                        cut = start
                        break
                    mend = offset
                key = _key(raw)
                if key is None:
                    if not raw.strip():
                        continue
                    key = parse_line(raw, path, lineno).key
                first = index.add(key, start, lineno)
                if first is not None:
                    repeated.append((_label(key), first, lineno))
        if cut is not None:
            with open(path, "r+b") as fh:
                fh.truncate(cut)
        elif mend is not None:
            with open(path, "ab") as fh:
                fh.write(b"\n")
        if repeated and warnings is not None:
            (case_id, first, again), n = repeated[0], len(repeated)
            warnings.append(f"{path} repeats {n} case{'s' if n > 1 else ''} (e.g. {case_id} "
                            f"on lines {first} and {again}); each case counts once, from its "
                            "first line")
        return cls(path, *index.done())

    @property
    def case_ids(self) -> Sequence[str]:
        """The case ids, in order (known without reading a line; do not change it). In a run
        with repeats, an id comes once per repeat (see :attr:`keys`)."""
        return self._ids

    @property
    def keys(self) -> list[Key]:
        """Each line's (case id, repeat), in order; the repeat is ``None`` without repeats."""
        if self._repeats is None:
            return [(case_id, None) for case_id in self._ids]
        return [(case_id, r or None) for case_id, r in zip(self._ids, self._repeats,
                                                             strict=True)]

    @property
    def repeated(self) -> bool:
        """Whether the lines are repeats of their cases (a run with ``--repeat``)."""
        return self._repeats is not None

    def prepared(self, prepare: Callable[[CaseResult], CaseResult]) -> Results:
        """The same results, each passed through ``prepare`` when read (after this view's own
        ``prepare``, if any)."""
        inner = self._prepare
        both = prepare if inner is None else (lambda result: prepare(inner(result)))
        return Results(self.path, self._offsets, self._linenos, self._ids, both, self._repeats)

    def __len__(self) -> int:
        return len(self._ids)

    @overload
    def __getitem__(self, index: int) -> CaseResult: ...

    @overload
    def __getitem__(self, index: slice) -> Results: ...

    def __getitem__(self, index: int | slice) -> CaseResult | Results:
        if isinstance(index, slice):
            return Results(self.path, self._offsets[index], self._linenos[index],
                           self._ids[index], self._prepare,
                           None if self._repeats is None else self._repeats[index])
        n = len(self._ids)
        i = index + n if index < 0 else index
        if not 0 <= i < n:
            raise IndexError(f"result index {index} out of range ({n} results)")
        with open(self.path, "rb") as fh:
            fh.seek(self._offsets[i])
            return self._read(fh.readline(), i)

    def __iter__(self) -> Iterator[CaseResult]:
        return self.iterate()

    def iterate(self, share: _Strings | None = None) -> Iterator[CaseResult]:
        """The results in order, each parsed as it is reached (``share``: see
        :func:`parse_line`)."""
        if not self._ids:
            return
        with open(self.path, "rb", buffering=_BUFFER) as fh:
            at = -1
            for i, offset in enumerate(self._offsets):
                if offset != at:
                    fh.seek(offset)
                raw = fh.readline()
                at = offset + len(raw)
                yield self._read(raw, i, share)

    def _read(self, raw: bytes, i: int, share: _Strings | None = None) -> CaseResult:
        result = parse_line(raw, self.path, self._linenos[i], share)
        repeat = self._repeats[i] or None if self._repeats is not None else None
        if result.case.id != self._ids[i] or result.repeat != repeat:
            raise InputError(f"{self.path}, line {self._linenos[i]}: holds case "
                             f"{_label(result.key)} where case {_label((self._ids[i], repeat))} "
                             "was; the file changed while it was read")
        return result if self._prepare is None else self._prepare(result)

    def __repr__(self) -> str:
        return f"Results({str(self.path)!r}, {len(self)} cases)"


class _Index:
    """Where each line is, while :meth:`Results.open` reads the file: by the position of its
    case in ``order`` (ids not in it are only checked for repeats), then its repeat; or in the
    order of the file."""

    def __init__(self, order: Sequence[str] | None) -> None:
        self.order = order
        self.found: dict[Key, tuple[int, int]] = {}  # key -> (offset, line number)
        self.repeats = False
        if order is not None:
            self.position = {case_id: i for i, case_id in enumerate(order)}

    def add(self, key: Key, offset: int, lineno: int) -> int | None:
        """Record a line; the line of the first one when the key was met before."""
        first = self.found.get(key)
        if first is not None:
            return first[1]
        self.found[key] = (offset, lineno)
        self.repeats = self.repeats or key[1] is not None
        return None

    def done(self) -> tuple[array, array, list[str], None, array | None]:
        """Offsets, line numbers, ids (no ``prepare``) and repeats of the lines found, in
        order."""
        keys = list(self.found)
        if self.order is not None:
            position = self.position
            keys = sorted((k for k in keys if k[0] in position),
                          key=lambda k: (position[k[0]], k[1] or 0))
        elif self.repeats:  # the order of the file, but a case's repeats together, in order
            first: dict[str, int] = {}
            for case_id, _ in keys:
                first.setdefault(case_id, len(first))
            keys.sort(key=lambda k: (first[k[0]], k[1] or 0))
        found = self.found
        return (array("q", [found[k][0] for k in keys]), array("q", [found[k][1] for k in keys]),
                [k[0] for k in keys], None,
                array("q", [k[1] or 0 for k in keys]) if self.repeats else None)


def _label(key: Key) -> str:
    """A line's key for a message: ``'q1'``, or ``'q1' (repeat 2)``."""
    case_id, repeat = key
    return repr(case_id) if repeat is None else f"{case_id!r} (repeat {repeat})"


def read_results(path: Path, *, repair: bool = False, warnings: list[str] | None = None
                 ) -> list[CaseResult]:
    """Every result of ``results.jsonl`` in a list, in the order of the file, one per case id
    (see :meth:`Results.open`); every line is parsed, so a problem anywhere is raised here.
    For small uses (tests, ``compare``): a run's report reads through :class:`Results`.

    The strings of all results are shared: chunk texts, contexts, claims, reasons, SQL, keys
    repeat from case to case, and sharing them takes a third off the memory the results hold.
    """
    view = Results.open(path, repair=repair, warnings=warnings)
    # No garbage collection while the results pile up: each collection would walk the objects
    # read so far (reading 10k results took five times as long), and reading creates no
    # reference cycles for it to find. Then everything goes straight to the oldest generation
    # (freeze + unfreeze), so the next young collections do not walk the results either.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return list(view.iterate(share=_Strings()))
    finally:
        gc.freeze()
        gc.unfreeze()
        if collecting:
            gc.enable()


class _Strings:
    """Equal strings as one object: a JSON value rebuilt with every key and string shared.

    >>> share = _Strings()
    >>> a, b = share.dict({"text": "x" * 100}), share.dict({"text": "x" * 100})
    >>> a == b and a is not b and a["text"] is b["text"]
    True
    """

    def __init__(self) -> None:
        self._seen: dict[str, str] = {}

    def dict(self, value: dict) -> dict:
        one = self._seen.setdefault
        return {one(k, k): (one(v, v) if type(v) is str else self._any(v))
                for k, v in value.items()}

    def _any(self, value: Any) -> Any:
        kind = type(value)
        if kind is dict:
            return self.dict(value)
        if kind is list:
            one = self._seen.setdefault
            return [one(v, v) if type(v) is str else self._any(v) for v in value]
        return value


def append_lines(sink, lines: Iterable[str]) -> None:
    """Append ``lines`` (each without its newline) to the open file ``sink`` and make them
    durable before returning: what a run has written survives a kill."""
    sink.write("".join(line + "\n" for line in lines))
    sink.flush()
    os.fsync(sink.fileno())
