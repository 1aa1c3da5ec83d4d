"""Recorded spans → our traces, joined to cases: what ``traces: {path, format, mapping,
join}`` and ``evalharness traces convert`` do (docs/traces.md).

Read the file — or every complete file of a folder or a glob, in name order, each with its
format's reader (recognised from each file's content unless named) — group the spans by trace
across all of them (on disk past a bound, so a 1 GB export imports in bounded memory; a span
read twice is kept once and counted), resolve the mapping once (the preset guessed from the
first trace's instrumentation unless named), map each trace onto the pipeline's components,
then join it to a case: by the mapping's join key (equal to a case id) or by the normalised
question text. Traces without a case and cases without a trace are counted and named, never
dropped silently.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Iterator, Sequence
from collections.abc import Mapping as MappingABC
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from evalharness.errors import ScenarioError
from evalharness.models import Case, Trace
from evalharness.pipeline import Pipeline
from evalharness.spans.group import GroupStats, group_traces
from evalharness.spans.mapped import Mapped
from evalharness.spans.mapper import map_trace
from evalharness.spans.mapping import (
    Mapping,
    MappingError,
    MappingSpec,
    check_mapping,
    resolve_mapping,
)
from evalharness.spans.model import Reader, Span
from evalharness.spans.paths import trace_files
from evalharness.spans.readers import detect, reader

Join = Literal["key", "question"]

NOTES_PER_CASE = 5
"""Mapping notes (ambiguous candidates, redactions, missing values) kept per case."""


@dataclass
class Imported:
    """Traces read from spans and joined to cases."""

    traces: dict[str, Trace]
    """Case id -> its trace (the first one when several traces join the same case)."""
    unmatched: list[str]
    """Ids of the traces that joined no case (their join key or question is listed in
    ``info``)."""
    format: str
    """The format's name; several, comma-separated, when the files differ."""
    info: dict[str, Any] = field(default_factory=dict)
    """For the report: the preset (and why), the join rule, duplicates (traces joining a case
    already joined, spans read twice), the number of files when several."""
    notes: dict[str, list[str]] = field(default_factory=dict)
    """Case id -> what the mapping found ambiguous, missing or redacted for its trace."""


def normalise_question(text: str) -> str:
    """The form questions are compared in when joining by question: Unicode-normalised,
    case-folded, whitespace collapsed, outer punctuation and quotes dropped.

    >>> normalise_question("  What's   the cheapest COAT?\\n")
    "what's the cheapest coat"
    """
    text = unicodedata.normalize("NFKC", text).casefold()
    text = re.sub(r"\s+", " ", text).strip()
    return text.strip(" \"'`.?!,;:")


def _paths(path: Path | Sequence[Path]) -> list[Path]:
    """The files to read: a folder or a glob given as one path is expanded
    (:func:`~evalharness.spans.paths.trace_files`); a list is read as given."""
    if isinstance(path, (str, Path)):
        return trace_files(Path(path))
    return [Path(p) for p in path]


def read_groups(path: Path | Sequence[Path], *, fmt: str | None,
                stats: GroupStats | None = None) -> tuple[str, Iterator[list[Span]]]:
    """The format, and the spans of every trace of ``path``, grouped (one trace at a time).

    ``path`` is a file, a folder or a glob (every complete file, in name order), or a list of
    files; each file's format is recognised from its content unless ``fmt`` names it (an
    unrecognised file is an error naming it, before anything is read). The spans of all the
    files are grouped into traces together — a trace's spans may be in several files — and
    a span read twice is kept once, counted in ``stats``. The format returned is the files'
    one, or their names comma-separated when they differ."""
    paths = _paths(path)
    if fmt:
        chosen = reader(fmt)
        readers: list[Reader] = [chosen] * len(paths)
    else:
        readers = [detect(p) for p in paths]
    spans = itertools.chain.from_iterable(r.read(p) for r, p in zip(readers, paths, strict=True))
    return ", ".join(dict.fromkeys(r.name for r in readers)), group_traces(spans, stats=stats)


class TraceMapper:
    """Maps one trace's spans onto ``pipeline``; the mapping is resolved once, from the first
    trace's instrumentation (unless given resolved), and checked against the pipeline then: a
    mapping that does not fit is a :class:`MappingError` before any trace is mapped."""

    def __init__(self, mapping: MappingSpec | Mapping | None, pipeline: Pipeline,
                 step_models: MappingABC[str, type[BaseModel]] | None = None) -> None:
        self.spec = mapping
        self.resolved = mapping if isinstance(mapping, Mapping) else None
        self.pipeline = pipeline
        self.step_models = step_models

    def __call__(self, spans: list[Span]) -> Mapped:
        if self.resolved is None:
            self.resolved = resolve_mapping(self.spec, spans=spans)
            fields = {kind: list(model.model_fields)
                      for kind, model in (self.step_models or {}).items()}
            found = check_mapping(self.resolved, self.pipeline, fields)
            if found:
                raise MappingError("; ".join(f"{where}: {message}" for where, message in found))
        return map_trace(spans, self.resolved, self.pipeline, step_models=self.step_models)


def read_mapped(path: Path | Sequence[Path], *, fmt: str | None,
                mapping: MappingSpec | Mapping | None, pipeline: Pipeline,
                step_models: MappingABC[str, type[BaseModel]] | None = None,
                stats: GroupStats | None = None) -> tuple[str, Iterator[Mapped]]:
    """The format, and every trace of ``path`` mapped onto ``pipeline`` (one at a time): the
    groups of :func:`read_groups` through a :class:`TraceMapper`."""
    name, groups = read_groups(path, fmt=fmt, stats=stats)
    mapper = TraceMapper(mapping, pipeline, step_models)
    return name, (mapper(spans) for spans in groups)


class CaseJoin:
    """Finds the case a mapped trace answers: by the mapping's join key (equal to a case id)
    or by the normalised question text (docs/traces.md, "Join")."""

    def __init__(self, cases: Sequence[Case], join: Join | None) -> None:
        self.join = join
        self.ids = {c.id for c in cases}
        self.by_question: dict[str, str] = {}
        self.shared: dict[str, list[str]] = {}
        for case in cases:
            key = normalise_question(case.question)
            if key in self.by_question:
                self.shared.setdefault(key, [self.by_question[key]]).append(case.id)
            else:
                self.by_question[key] = case.id

    def case_of(self, m: Mapped) -> tuple[str | None, Join, str | None]:
        """``(case id or None, the rule used, what the trace said: its key or question)``.
        Joining by a question several cases ask is an error naming them."""
        rule: Join = self.join or ("key" if m.join_key else "question")
        if rule == "key":
            return (m.join_key if m.join_key in self.ids else None), rule, m.join_key
        key = normalise_question(m.question) if m.question else None
        if key in self.shared:
            raise ScenarioError(
                f"traces: joining by question is ambiguous: cases "
                f"{', '.join(self.shared[key])} ask the same question ({m.question!r}); join "
                "by a key instead (the mapping's `join`, docs/traces.md)")
        return (self.by_question.get(key) if key else None), rule, m.question


def import_traces(path: Path | Sequence[Path], *, fmt: str | None,
                  mapping: MappingSpec | Mapping | None, join: Join | None,
                  pipeline: Pipeline, cases: Sequence[Case],
                  step_models: MappingABC[str, type[BaseModel]] | None = None) -> Imported:
    """Read, map and join the traces of ``path`` — a file, a folder, a glob or a list of
    files, as :func:`read_mapped` reads them (see the module text)."""
    joiner = CaseJoin(cases, join)
    paths = _paths(path)
    stats = GroupStats()
    name, traces_of = read_mapped(paths, fmt=fmt, mapping=mapping, pipeline=pipeline,
                                  step_models=step_models, stats=stats)
    out = Imported(traces={}, unmatched=[], format=name)
    unmatched_keys: list[str] = []
    duplicates: list[str] = []
    rules: set[str] = set()
    preset = None
    for m in traces_of:
        if preset is None and (m.preset or m.preset_reason):
            preset = (m.preset, m.preset_reason)
        case_id, rule, said = joiner.case_of(m)
        rules.add(rule)
        if case_id is None:
            out.unmatched.append(m.trace_id)
            unmatched_keys.append(f"{m.trace_id}: {rule} {said!r}" if said is not None else
                                  f"{m.trace_id}: no {'join key' if rule == 'key' else 'question'}"
                                  " found")
            continue
        if case_id in out.traces:
            duplicates.append(f"{case_id}: trace {m.trace_id} ignored (the first trace for it "
                              "was kept)")
            continue
        trace = m.trace.model_copy(update={"case_id": case_id})
        out.traces[case_id] = trace
        notes = _notes(m)
        if notes:
            out.notes[case_id] = notes
    out.info = {
        "preset": preset[0] if preset else None,
        **({"preset_reason": preset[1]} if preset and preset[1] else {}),
        "join": join or ("/".join(sorted(rules)) if rules else "key"),
        **({"files": len(paths)} if len(paths) > 1 else {}),
        **({"without_case_keys": unmatched_keys[:50]} if unmatched_keys else {}),
        **({"duplicates": len(duplicates), "duplicate_examples": duplicates[:10]}
           if duplicates else {}),
        **({"duplicate_spans": stats.duplicate_spans,
            "duplicate_span_examples": stats.examples} if stats.duplicate_spans else {}),
    }
    return out


def _notes(m: Mapped) -> list[str]:
    """What a reader of the case should know about how its trace was mapped: a choice among
    candidate spans that could be wrong (the mapper's ``ambiguous`` problems, which name the
    span chosen and why), redactions, missing or invalid content. How a rule decided something
    (problems of kind ``note``) stays in ``traces explain``."""
    notes: list[str] = []
    for name, comp in m.components.items():
        for problem in comp.problems:
            if problem.kind == "note":
                continue
            if problem.kind != "missing" or comp.status == "error":
                notes.append(f"trace mapping, {name}: {problem.message}")
    notes += [f"trace mapping: {p.message}" for p in m.problems if p.kind != "note"]
    return notes[:NOTES_PER_CASE]
