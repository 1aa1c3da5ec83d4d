"""What ``evalharness traces receive --cases`` writes: the traces received so far, mapped
and joined to the cases as a scenario's ``traces:`` joins them, as our trace JSONL, and the
cases with a question-only case added for each trace that joined none
(docs/traces-receive.md, "Joining to cases").

Both files are rewritten whole each time (written beside, then renamed over the old ones), from
every complete file of the receive folder: a trace whose spans came in several files is
joined once they are all complete.
"""

from __future__ import annotations

import os
from collections.abc import Mapping as MappingABC
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

from evalharness.models import Case
from evalharness.pipeline import Pipeline
from evalharness.spans.group import GroupStats
from evalharness.spans.importer import CaseJoin, Join, read_mapped
from evalharness.spans.mapping import Mapping, MappingSpec
from evalharness.spans.paths import PART, trace_files

TRACES = "traces.jsonl"
CASES = "cases.jsonl"
TAG = "from-traces"
"""The tag of a question-only case made from a trace (as ``traces convert --cases``)."""


@dataclass
class Joined:
    """What one join wrote."""

    traces: int = 0
    matched: int = 0
    """Traces that joined one of the given cases."""
    new_cases: int = 0
    """Question-only cases written for traces that joined none."""
    no_question: int = 0
    """Traces that joined no case and had no question: in the traces file, no case made."""
    unmappable: int = 0
    """Traces where nothing mapped (their ``error`` says why)."""
    duplicates: list[str] = field(default_factory=list)
    """Traces that joined a case another trace joined first (kept out, as a scenario does)."""
    duplicate_spans: int = 0
    """Spans read twice (kept once)."""
    files: int = 0
    """Span files read."""


def join_received(folder: Path, out: Path, *, cases: Sequence[Case],
                  mapping: MappingSpec | Mapping | None, pipeline: Pipeline,
                  join: Join | None = None,
                  step_models: MappingABC[str, type[BaseModel]] | None = None) -> Joined:
    """Map every trace in the complete files of ``folder`` and join it to ``cases``; write
    ``out/traces.jsonl`` (one trace a line: ``case_id`` the case it joined, else its join key
    when that is no case's id, else the trace id) and ``out/cases.jsonl`` (``cases``, then a
    question-only case, tagged ``from-traces``, for each trace that joined none).
    :class:`~evalharness.errors.InputError` when ``folder`` holds no complete file yet."""
    paths = trace_files(folder, what="receive")
    stats = GroupStats()
    _, mapped = read_mapped(paths, fmt=None, mapping=mapping, pipeline=pipeline,
                            step_models=step_models, stats=stats)
    joiner = CaseJoin(cases, join)
    ids = {c.id for c in cases}
    taken: set[str] = set()
    done = Joined(files=len(paths))
    out.mkdir(parents=True, exist_ok=True)
    traces_part, cases_part = out / (TRACES + PART), out / (CASES + PART)
    with open(traces_part, "w", encoding="utf-8") as traces_out, \
            open(cases_part, "w", encoding="utf-8") as cases_out:
        for case in cases:
            cases_out.write(case.model_dump_json(exclude_defaults=True) + "\n")
        for m in mapped:
            case_id, _, _ = joiner.case_of(m)
            done.traces += 1
            done.unmappable += bool(m.error)
            if case_id is not None and case_id in taken:
                done.duplicates.append(f"{case_id}: trace {m.trace_id} (the first trace for "
                                       "it was kept)")
                continue
            if case_id is not None:
                done.matched += 1
            else:
                key = m.join_key
                case_id = key if key and key not in ids and key not in taken else m.trace_id
                if m.question:
                    done.new_cases += 1
                    case = Case(id=case_id, question=m.question, tags=[TAG],
                                metadata={"trace_id": m.trace_id, "source": str(folder)})
                    cases_out.write(case.model_dump_json(exclude_defaults=True) + "\n")
                else:
                    done.no_question += 1
            taken.add(case_id)
            trace = m.trace.model_copy(update={"case_id": case_id})
            traces_out.write(trace.model_dump_json(exclude_none=True) + "\n")
    os.replace(traces_part, out / TRACES)
    os.replace(cases_part, out / CASES)
    done.duplicate_spans = stats.duplicate_spans
    return done
