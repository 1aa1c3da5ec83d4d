"""Curation: reviewed cases promoted into the scenario's cases file as gold
(``evalharness review promote``).

What a person's labels become (labels of the chosen reviewer, else every reviewer's, the
last given winning) is what each metric's plugin declares (``Metric.gold``, an
:class:`evalharness.LabelGold`): a ``correction`` becomes the gold field it names (a list
field, like ``gold.routes``, takes comma-separated items: ``sql, blog``), and a ``yes`` copies
the component's step field into it when the declaration ``confirms``. With the built-in
plugins:

- the router's ``route_accuracy`` — ``yes``: the routes taken become ``gold.routes``;
- the text-to-SQL step's ``execution_accuracy`` or ``equivalent`` — ``yes``: its SQL becomes
  ``gold.sql``;
- the generator — a correction on any of its metrics becomes ``gold.answer``; ``yes`` on a
  correctness metric makes the answer itself the reference.

The retriever's chunks (``chunk_relevance``) — ``yes``/``no``: grade 1/0 in ``gold.relevant``
(other chunks keep their grades).

The case's ``metadata.review`` records who reviewed it, when, and from which run. Other lines
of the file are kept byte for byte; a case the file lacks is appended. The file is replaced
atomically.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

import evalharness.jsonlimits as jsonlimits
from evalharness.errors import InputError
from evalharness.models import Case, Gold
from evalharness.plugins import declarations_of
from evalharness.review.labels import Label
from evalharness.review.names import CHUNK
from evalharness.review.session import Review


def cases_file(review: Review) -> Path:
    """The run's scenario's cases file (a JSONL path under ``cases:``); an
    :class:`InputError` saying to give ``--into`` when there is none."""
    scenario = Path(review.run.report.scenario.get("path", ""))
    hint = "; give the cases file to write with --into FILE"
    try:
        spec = yaml.safe_load(scenario.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"cannot read the run's scenario {scenario} to find its cases file "
                         f"({exc.__class__.__name__}){hint}") from None
    cases = spec.get("cases") if isinstance(spec, dict) else None
    if not isinstance(cases, str):
        raise InputError(f"{scenario}: its cases are not a JSONL file{hint}")
    return (scenario.parent / cases).resolve()


def updates(review: Review, labels: list[Label]) -> dict[str, dict[str, Any]]:
    """Case id -> the gold fields its labels set (see the module text)."""
    out: dict[str, dict[str, Any]] = defaultdict(dict)
    declared = declarations_of(review.run.report)
    corrected: set[tuple[str, str]] = set()  # a reviewer's correction wins over a `yes`
    for lab in labels:
        result = review.result(lab.case)
        gold = out[lab.case]
        if lab.metric == CHUNK and lab.label in ("yes", "no"):
            relevant = gold.setdefault("relevant", dict(result.case.gold.relevant or {}))
            relevant[lab.item.removeprefix("chunk:")] = 1 if lab.label == "yes" else 0
            continue
        about = declared.get((lab.component, lab.metric))
        rule = about.gold if about is not None and not lab.item else None
        if rule is None:
            continue
        if lab.correction:
            gold[rule.field] = _parsed(rule.field, lab.correction)
            corrected.add((lab.case, rule.field))
        elif lab.label == "yes" and rule.confirms and (lab.case, rule.field) not in corrected:
            value = _step_value(result.trace.step(lab.component), rule.step)
            if value not in (None, "", []):
                gold[rule.field] = sorted(set(value)) if isinstance(value, list) else value
    return {k: v for k, v in out.items() if v}


def _parsed(field: str, correction: str) -> Any:
    """A reviewer's correction as the gold field's value: comma-separated items for a list
    field (``gold.routes``), the text otherwise.

    >>> _parsed("routes", "sql, blog"), _parsed("sql", " SELECT 1 ")
    (['blog', 'sql'], 'SELECT 1')
    """
    annotation = str(Gold.model_fields[field].annotation) if field in Gold.model_fields else ""
    if "list" in annotation:
        return sorted({r.strip() for r in correction.split(",") if r.strip()})
    return correction.strip()


def _step_value(step: Any, name: str) -> Any:
    if step is None:
        return None
    return step.get(name) if isinstance(step, dict) else getattr(step, name, None)


def promote(review: Review, into: Path, *, cases: list[str] | None = None,
            reviewer: str | None = None, today: str | None = None) -> dict[str, list[str]]:
    """Write the gold of the reviewed cases (``cases``, else every labelled one) into
    ``into``; returns ``{"updated": [...], "added": [...], "fields": [...]}``."""
    labels = [lab for lab in review.labels() if reviewer is None or lab.reviewer == reviewer]
    if cases is not None:
        for case in cases:
            review.result(case)  # unknown ids are an error
        labels = [lab for lab in labels if lab.case in set(cases)]
    if not labels:
        raise InputError(f"{review.labels_path}: no labels"
                         + (f" by {reviewer!r}" if reviewer else "")
                         + (f" for {', '.join(cases)}" if cases else "")
                         + "; review the cases first (`evalharness review serve`)")
    gold = updates(review, labels)
    reviewers: dict[str, set[str]] = defaultdict(set)
    for lab in labels:
        reviewers[lab.case].add(lab.reviewer)
    from datetime import date

    when = today or date.today().isoformat()
    lines = into.read_text(encoding="utf-8").splitlines() if into.is_file() else []
    done: set[str] = set()
    fields: set[str] = set()
    updated = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            raw = jsonlimits.loads(line)
        except ValueError as exc:
            raise InputError(f"{into}, line {i + 1}: not JSON ({exc}); fix the line or give "
                             "another file with --into") from None
        case_id = raw.get("id") if isinstance(raw, dict) else None
        if case_id not in gold:
            continue
        lines[i] = json.dumps(_merge(raw, gold[case_id], reviewers[case_id], review, when),
                              ensure_ascii=False)
        done.add(case_id)
        updated.append(case_id)
        fields |= set(gold[case_id])
    added = []
    for case_id, fields_of in gold.items():
        if case_id in done:
            continue
        base = review.result(case_id).case.model_dump(exclude_defaults=True)
        lines.append(json.dumps(_merge(base, fields_of, reviewers[case_id], review, when),
                                ensure_ascii=False))
        added.append(case_id)
        fields |= set(fields_of)
    for line in lines:  # what is written must still be a valid case
        if line.strip():
            Case.model_validate_json(line)
    into.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=into.parent, prefix=f".{into.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    os.replace(tmp, into)
    return {"updated": updated, "added": added, "fields": sorted(fields)}


def _merge(raw: dict[str, Any], gold: dict[str, Any], reviewers: set[str], review: Review,
           when: str) -> dict[str, Any]:
    out = dict(raw)
    out["gold"] = {**(raw.get("gold") or {}), **gold}
    meta = dict(raw.get("metadata") or {})
    meta["review"] = {"reviewed_by": sorted(reviewers), "reviewed_at": when,
                      "run": review.id, "fields": sorted(gold)}
    out["metadata"] = meta
    return out
