"""A review of one run folder: which cases it shows (the CLI's case sampler, stratified as
asked), their targets, and the checks every label passes before it is stored.

``--stratify`` takes a comma-separated list of keys; a case's stratum is the combination:

- ``route``: its gold route (the sampler's default, as ``--sample`` in a run);
- ``component``: the component its end-to-end failure is attributed to (``passed``,
  ``unattributed``, ``unknown`` otherwise);
- ``verdict``: its end-to-end verdict (``pass``, ``fail``, ``error``, ``none``);
- ``tag``: its first tag (``untagged``).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from evalharness.declarations import Metric
from evalharness.errors import InputError, UsageError
from evalharness.models import CaseResult
from evalharness.plugins import declarations_of
from evalharness.review import labels as L
from evalharness.review.targets import Target, Threshold, targets_of, thresholds
from evalharness.runfolder import RunFolder, load_run
from evalharness.sampling import parse_filter, stratified, stratum

STRATA = ("route", "component", "verdict", "tag")


def parse_stratify(text: str | Sequence[str]) -> tuple[str, ...]:
    """``component,verdict`` as keys, checked.

    >>> parse_stratify("component, verdict")
    ('component', 'verdict')
    """
    keys = tuple(k.strip().lower() for k in (text.split(",") if isinstance(text, str) else text)
                 if k.strip())
    bad = [k for k in keys if k not in STRATA]
    if bad or not keys:
        raise UsageError(f"--stratify {text!r}: expected a comma-separated list of "
                         f"{', '.join(STRATA)} (e.g. 'component,verdict')")
    return keys


def stratum_of(result: CaseResult | SimpleNamespace, keys: Sequence[str]) -> str:
    """A case's stratum for ``keys`` (see the module text)."""
    parts = []
    for key in keys:
        if key == "route":
            parts.append(stratum(result.case))
        elif key == "component":
            a = result.attribution
            if a is None:
                parts.append("unknown")
            elif a.kind == "attributed":
                parts.append("+".join(a.root_causes) or "unknown")
            else:
                parts.append({"passed": "passed", "masked": "passed"}.get(a.kind, a.kind))
        elif key == "verdict":
            parts.append(result.end_to_end.status if result.end_to_end else "none")
        else:
            parts.append(result.case.tags[0] if result.case.tags else "untagged")
    return "/".join(parts)


def run_id(run: RunFolder) -> str:
    """A short, stable id of a run: its start time and inputs, hashed (the folder may move)."""
    return L.id_of(run.path, run.manifest, run.report.scenario.get("sha256"))


@dataclass
class Review:
    """One run folder under review (:meth:`open`)."""

    run: RunFolder
    chosen: list[int]
    """Positions (in results.jsonl) of the sampled cases, in file order."""
    how: str
    criteria: dict[tuple[str, str], Threshold]
    index: dict[str, int] = field(repr=False)
    """Case id -> position in results.jsonl, for every case of the run (its first repeat, in
    a run with repeats: that is the answer people review)."""
    _targets: dict[str, list[Target]] = field(default_factory=dict, repr=False)
    _declared: dict[tuple[str, str], Metric] | None = field(default=None, repr=False)
    warnings: list[str] = field(default_factory=list, repr=False)
    """What reading labels had to say (a torn last line left out), each once."""

    @classmethod
    def open(cls, folder: str | Path, *, sample: int | None = None,
             stratify: Sequence[str] = ("route",), seed: int = 0,
             filters: Sequence[str] = ()) -> Review:
        """The run at ``folder`` and the cases to review: all of them, or ``sample`` of them
        (seeded, stratified by ``stratify``), after ``filters`` (``--filter`` terms)."""
        run = load_run(folder)
        keys = parse_stratify(stratify)
        index: dict[str, int] = {}
        items: list[tuple[int, SimpleNamespace]] = []
        tests = [parse_filter(f) for f in filters]
        for i, result in enumerate(run.results):
            if result.case.id in index:  # a run with repeats: people review a case's first
                continue
            index[result.case.id] = i
            if all(t(result.case) for t in tests):
                items.append((i, _slim(result)))
        if not items:
            raise UsageError(f"{run.path}: no case of the run passes "
                             f"--filter {' '.join(filters)}")
        how = f"all {len(items)} cases" + (" that pass --filter" if filters else "")
        if sample is not None and sample < len(items):
            items = stratified(items, sample, seed, key=lambda it: it[1].case,
                               by=lambda it: stratum_of(it[1], keys))
            how = (f"{len(items)} of {len(index)} cases, a sample stratified by "
                   f"{', '.join(keys)} (seed {seed})")
        return cls(run, [i for i, _ in items], how,
                   thresholds({k: v.model_dump() for k, v in
                               run.report.verdict_criteria.items()}), index)

    @classmethod
    def of(cls, run: RunFolder) -> Review:
        """A review of every case of ``run`` (e.g. one whose report is being built); in a
        run with repeats, of each case's first repeat."""
        index: dict[str, int] = {}
        for i, r in enumerate(run.results):
            index.setdefault(r.case.id, i)
        return cls(run, list(index.values()), f"all {len(index)} cases",
                   thresholds({k: v.model_dump() for k, v in
                               run.report.verdict_criteria.items()}), index)

    @property
    def path(self) -> Path:
        return self.run.path

    @property
    def labels_path(self) -> Path:
        return self.run.path / L.LABELS

    @property
    def id(self) -> str:
        return run_id(self.run)

    def result(self, case_id: str) -> CaseResult:
        """A case's result (any case of the run); :class:`InputError` when it has none."""
        if case_id not in self.index:
            close = difflib.get_close_matches(case_id, list(self.index), n=3)
            raise InputError(f"no case {case_id!r} in the run {self.run.path}" + (
                f"; did you mean {', '.join(map(repr, close))}?" if close else ""))
        return self.run.results[self.index[case_id]]

    def sampled(self) -> list[CaseResult]:
        """The cases under review, in file order."""
        return [self.run.results[i] for i in self.chosen]

    def targets(self, case_id: str) -> list[Target]:
        """A case's targets (computed once)."""
        if case_id not in self._targets:
            if self._declared is None:
                self._declared = declarations_of(self.run.report)
            found = targets_of(self.result(case_id), self.criteria, self._declared)
            for t in found:
                comp = self.run.report.components.get(t.component)
                t.kind = comp.kind if comp is not None else t.component
                t.ordinal = t.ordinal or (t.kind == "generator" and not t.item)
            self._targets[case_id] = found
        return self._targets[case_id]

    def target(self, label: L.Label) -> Target:
        """The target a label names, checked: the case exists, the component, metric and item
        are one of its targets, and the value fits it. :class:`InputError` otherwise, naming
        what would be valid."""
        targets = self.targets(label.case)
        by_key = {t.key: t for t in targets}
        found = by_key.get((label.component, label.metric, label.item))
        if found is None:
            metrics = {(t.component, t.metric) for t in targets}
            if (label.component, label.metric) not in metrics:
                known = sorted(f"{c}.{m}" for c, m in metrics)
                raise InputError(
                    f"case {label.case!r} has no target {label.component}.{label.metric}; "
                    f"its targets are {', '.join(known) or 'none (nothing was evaluated)'}")
            items = sorted(t.item or "(the case)" for t in targets
                           if (t.component, t.metric) == (label.component, label.metric))
            raise InputError(f"case {label.case!r}: {label.component}.{label.metric} has no "
                             f"item {label.item!r}; its items are {', '.join(items[:8])}")
        kind = label.kind
        if kind == "preference":
            raise InputError(f"{label.label!r} is a pairwise preference; give it on the "
                             "pairwise page (`review serve RUN_A RUN_B --pairwise`)")
        if kind == "ordinal" and not found.ordinal:
            raise InputError(f"case {label.case!r}: {label.component}.{label.metric}"
                             f"{' ' + label.item if label.item else ''} takes yes/no or "
                             f"agree/disagree, not a 1-5 score")
        if kind == "mark" and found.verdict is None:
            raise InputError(f"case {label.case!r}: {label.component}.{label.metric} "
                             f"{label.item} has no automatic verdict to agree with; label it "
                             "yes or no")
        return found

    def labels(self, extra: Sequence[Path] = ()) -> list[L.Label]:
        """The labels in force: the run's own (``review/labels.jsonl``) and those of ``extra``
        files, the last per reviewer and target winning."""
        said: list[str] = []
        rows = L.read(self.labels_path, said)
        for path in extra:
            rows += read_file(path, said)
        self.warnings += [w for w in said if w not in self.warnings]
        return L.latest(rows)

    def record_sample(self, seed: int, stratify: Sequence[str]) -> None:
        """``review/sample.json``: which cases were shown and how they were chosen."""
        path = self.run.path / "review" / "sample.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        ids = [self.run.results[i].case.id for i in self.chosen]
        path.write_text(json.dumps({"how": self.how, "seed": seed, "stratify": list(stratify),
                                    "ids": ids}, indent=1) + "\n", encoding="utf-8")


def read_file(path: Path, warnings: list[str] | None = None) -> list[L.Label]:
    """Labels from a labels.jsonl-style file (``--labels``, a scenario's ``labels:``); a torn
    last line is left out and said in ``warnings``."""
    if not Path(path).is_file():
        raise InputError(f"{path}: no such labels file; give a labels.jsonl written by "
                         "`evalharness review serve` or `review import`")
    return L.read(Path(path), warnings)


def _slim(result: CaseResult) -> SimpleNamespace:
    """Only what stratifying needs stays in memory while sampling (case and verdicts)."""
    return SimpleNamespace(case=result.case, end_to_end=result.end_to_end,
                           attribution=result.attribution)


def case_view(review: Review, result: CaseResult) -> dict[str, Any]:
    """A case as the review page shows it: the question, each component's step, the
    targets."""
    trace = result.trace
    gold = result.case.gold
    steps: list[dict[str, Any]] = []
    for name, comp in result.components.items():
        verdict = result.verdicts.get(name)
        entry: dict[str, Any] = {"component": name, "status": comp.status,
                                 "reason": comp.reason,
                                 "verdict": verdict.status if verdict else None,
                                 "verdict_reason": verdict.reason if verdict else None}
        step = getattr(trace, name, None) if name in ("router", "text2sql", "retriever",
                                                        "generator") else None
        raw = step.model_dump() if step is not None else trace.steps.get(name, {})
        entry["kind"] = name if step is not None else "other"
        entry["step"] = raw
        steps.append(entry)
    return {"id": result.case.id, "question": result.case.question,
            "tags": result.case.tags, "gold": gold.model_dump(exclude_none=True),
            "error": trace.error, "traceback": trace.traceback, "steps": steps,
            "end_to_end": result.end_to_end.status if result.end_to_end else None,
            "targets": [t.view() for t in review.targets(result.case.id)]}
