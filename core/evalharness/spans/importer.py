"""Recorded spans → our traces, joined to cases: what ``traces: {path, format, mapping,
join}`` and ``evalharness traces convert`` do (docs/traces.md).

Read the file with its format's reader (recognised from content unless named), group the
spans by trace (on disk past a bound, so a 1 GB export imports in bounded memory), resolve the
mapping once (the preset guessed from the first trace's instrumentation unless named), map
each trace onto the pipeline's components, then join it to a case: by the mapping's join key
(equal to a case id) or by the normalised question text. Traces without a case and cases
without a trace are counted and named, never dropped silently.
"""

from __future__ import annotations

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
from evalharness.spans.group import group_traces
from evalharness.spans.mapped import Mapped
from evalharness.spans.mapper import map_trace
from evalharness.spans.mapping import (
    Mapping,
    MappingError,
    MappingSpec,
    check_mapping,
    resolve_mapping,
)
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
    info: dict[str, Any] = field(default_factory=dict)
    """For the report: the preset (and why), the join rule, duplicates."""
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


def read_mapped(path: Path, *, fmt: str | None, mapping: MappingSpec | Mapping | None,
                pipeline: Pipeline, step_models: MappingABC[str, type[BaseModel]] | None = None,
                ) -> tuple[str, Iterator[Mapped]]:
    """The format, and every trace of ``path`` mapped onto ``pipeline`` (one at a time)."""
    chosen = reader(fmt) if fmt else detect(path)
    groups = group_traces(chosen.read(path))

    def mapped() -> Iterator[Mapped]:
        resolved = mapping if isinstance(mapping, Mapping) else None
        for spans in groups:
            if resolved is None:  # once per file, from the first trace's instrumentation
                resolved = resolve_mapping(mapping, spans=spans)
                fields = {kind: list(model.model_fields)
                          for kind, model in (step_models or {}).items()}
                found = check_mapping(resolved, pipeline, fields)
                if found:
                    raise MappingError("; ".join(f"{where}: {message}"
                                                 for where, message in found))
            yield map_trace(spans, resolved, pipeline, step_models=step_models)

    return chosen.name, mapped()


def import_traces(path: Path, *, fmt: str | None, mapping: MappingSpec | Mapping | None,
                  join: Join | None, pipeline: Pipeline, cases: Sequence[Case],
                  step_models: MappingABC[str, type[BaseModel]] | None = None) -> Imported:
    """Read, map and join the traces of ``path`` (see the module text)."""
    by_id = {c.id: c for c in cases}
    by_question: dict[str, str] = {}
    shared: dict[str, list[str]] = {}
    for case in cases:
        key = normalise_question(case.question)
        if key in by_question:
            shared.setdefault(key, [by_question[key]]).append(case.id)
        else:
            by_question[key] = case.id
    name, traces_of = read_mapped(path, fmt=fmt, mapping=mapping, pipeline=pipeline,
                                  step_models=step_models)
    out = Imported(traces={}, unmatched=[], format=name)
    unmatched_keys: list[str] = []
    duplicates: list[str] = []
    rules: set[str] = set()
    preset = None
    for m in traces_of:
        if preset is None and (m.preset or m.preset_reason):
            preset = (m.preset, m.preset_reason)
        rule = join or ("key" if m.join_key else "question")
        rules.add(rule)
        if rule == "key":
            case_id = m.join_key if m.join_key in by_id else None
            said = m.join_key
        else:
            said = m.question
            key = normalise_question(m.question) if m.question else None
            if key in shared:
                raise ScenarioError(
                    f"traces: joining by question is ambiguous: cases "
                    f"{', '.join(shared[key])} ask the same question ({m.question!r}); join by "
                    "a key instead (the mapping's `join`, docs/traces.md)")
            case_id = by_question.get(key) if key else None
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
        **({"without_case_keys": unmatched_keys[:50]} if unmatched_keys else {}),
        **({"duplicates": len(duplicates), "duplicate_examples": duplicates[:10]}
           if duplicates else {}),
    }
    return out


def _notes(m: Mapped) -> list[str]:
    """What a reader of the case should know about how its trace was mapped: the choice
    among several candidate spans, redactions, missing content."""
    notes: list[str] = []
    for name, comp in m.components.items():
        if comp.candidates > 1 and comp.chosen:
            notes.append(f"trace mapping, {name}: {comp.candidates} candidate spans; chose "
                         f"{', '.join(c.label() for c in comp.chosen)}"
                         + (f" ({comp.why})" if comp.why else ""))
        for problem in comp.problems:
            if problem.kind != "missing" or comp.status == "error":
                notes.append(f"trace mapping, {name}: {problem.message}")
    notes += [f"trace mapping: {p.message}" for p in m.problems]
    return notes[:NOTES_PER_CASE]
