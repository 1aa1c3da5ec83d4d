"""Judged criteria written in the scenario: the ``judged`` evaluator, for any component kind.

A user writes a criterion in words — "is the answer polite", "does the SQL read returns from
the returns table" — with optional evaluation steps, a scale (``binary``, ``1-5`` with an
anchor per level, or ``0-1``), the fields the judge sees (the case's question and reference
answer, any field of the component's step), a threshold that makes the verdict, and the
metric's name::

    evaluators:
      generator:
        - judged:
            metric: politeness
            criterion: The answer is courteous and never blames the user.
            sees: [question, answer]
            scale: binary
            threshold: 1

It becomes a metric like any plugin's: its declaration (:func:`declare`) is made from the
settings — its range from the scale, its default verdict from the threshold (joining the
component's other default criteria), the reviewer's question from the criterion, and a
``version``: the digest of everything the judge is told, which the judgment task's version
carries too, so the cache key and every stored judgment name the exact rubric, and ``compare``
pairs two runs' values only under the same one. Only a language model can judge it: with the
offline heuristic judge the scenario is refused before anything runs (``Evaluator.needs_llm``).

The core registers it through the public plugin API (:mod:`evalharness.builtin`), for every
component kind (``component="*"``); the fields ``sees`` may name are checked against the
kind's step model when the scenario loads.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from evalharness.declarations import Metric
from evalharness.judge.tasks import JudgmentTask
from evalharness.models import MetricValue

NAME = "judged"
"""The evaluator's name in a scenario's ``evaluators:``."""

CASE_FIELDS = {"question": "the user's question",
               "reference": "the reference answer (the case's gold.answer)"}
"""What ``sees`` may name besides the component step's own fields."""

BOOKKEEPING = ("latency_ms", "usage", "error")
"""Fields every step records (listed last among what ``sees`` may name)."""

Scale = Literal["binary", "1-5", "0-1"]

RANGES: dict[str, tuple[float, float]] = {"binary": (0.0, 1.0), "1-5": (1.0, 5.0),
                                           "0-1": (0.0, 1.0)}


class RubricSettings(BaseModel):
    """The ``judged`` evaluator's settings: one criterion, judged per case."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    metric: str = Field(pattern=r"^[a-z][a-z0-9_]*$", max_length=64)
    """The metric's name (lower case, digits, ``_``), as gates and verdicts name it."""
    criterion: str = Field(min_length=1, max_length=4000)
    """What the judge decides, in words: a statement that holds for a good output."""
    steps: list[str] = Field(default_factory=list, max_length=20)
    """Optional evaluation steps the judge follows, in order."""
    scale: Scale = "binary"
    """``binary`` (holds or not: 1 or 0), ``1-5`` (a score with an anchor per level), or
    ``0-1`` (a score between 0 and 1)."""
    levels: dict[int, str] | None = None
    """For ``1-5``: what each level means, ``{1: ..., 5: ...}`` (every level from 1 to 5)."""
    sees: list[str] = Field(min_length=1)
    """The fields the judge is shown: ``question``, ``reference`` (the case's gold answer),
    or any field of the component's step (``answer``, ``contexts``, ``sql``, ``rows``,
    ``routes`` ...)."""
    threshold: float | None = None
    """The verdict: the case passes when the value is at least this (on the scale: 1 for
    ``binary``, 1–5, 0–1). ``None``: the metric is measured, no verdict is made of it."""

    @field_validator("criterion", "steps")
    @classmethod
    def _text(cls, value: Any) -> Any:
        texts = value if isinstance(value, list) else [value]
        if any(not t.strip() for t in texts):
            raise ValueError("must be text, not blank")
        return value

    @field_validator("sees")
    @classmethod
    def _sees(cls, value: list[str], info: ValidationInfo) -> list[str]:
        step = (info.context or {}).get("step")
        known = dict(CASE_FIELDS)
        if step is not None:  # the kind's own fields first, then what every step records
            names = list(getattr(step, "model_fields", {}))
            known.update({f: "" for f in sorted(names, key=lambda f: f in BOOKKEEPING)})
        for field in value:
            if field not in known and (step is not None or not re.fullmatch(r"\w+", field)):
                component = (info.context or {}).get("component", "the component")
                raise ValueError(f"unknown field {field!r}: the judge can see "
                                 f"{', '.join(known)} (the fields of {component}'s step)")
        if len(set(value)) != len(value):
            raise ValueError("names a field twice")
        return value

    @model_validator(mode="after")
    def _scale(self) -> RubricSettings:
        low, high = RANGES[self.scale]
        if self.threshold is not None and not low <= self.threshold <= high:
            raise ValueError(f"threshold {self.threshold:g} is outside the {self.scale} scale "
                             f"({low:g} to {high:g})")
        if self.levels is not None:
            if self.scale != "1-5":
                raise ValueError(f"levels are the anchors of the 1-5 scale, not of "
                                 f"{self.scale!r}")
            if sorted(self.levels) != [1, 2, 3, 4, 5]:
                raise ValueError("levels must give every level from 1 to 5 "
                                 f"(given: {', '.join(map(str, sorted(self.levels)))})")
        return self


class RubricInput(BaseModel):
    """What the judge is shown for one case."""

    model_config = ConfigDict(extra="forbid")

    domain: str | None = None
    """What the application is (``judge.domain``)."""
    component: str
    """The component whose output is judged."""
    fields: dict[str, Any]
    """The fields ``sees`` names, with this case's values."""


class BinaryOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str
    """One or two sentences: why, citing what the fields show."""
    holds: bool
    """Whether the criterion holds."""


class ScoreOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str
    """One or two sentences: why, citing what the fields show."""
    score: int = Field(ge=1, le=5)
    """The level, 1 to 5."""


class UnitOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str
    """One or two sentences: why, citing what the fields show."""
    score: float = Field(ge=0, le=1)
    """How well the criterion holds, 0 to 1."""


OUTPUTS: dict[str, type[BaseModel]] = {"binary": BinaryOutput, "1-5": ScoreOutput,
                                        "0-1": UnitOutput}


def rubric_text(settings: RubricSettings) -> str:
    """What the judge is told: the criterion, the steps, the scale and its levels."""
    lines = ["You judge one output of a component of an application (described by `domain`; "
             "any application when it is null) against one criterion. The input gives the "
             "component's name and, under `fields`, what you may look at. Judge only what "
             "those fields show, never your own knowledge of the world.",
             *criterion_lines(settings.criterion, settings.steps), ""]
    if settings.scale == "binary":
        lines.append("Give a short reason first, then `holds`: true when the criterion holds, "
                     "false otherwise.")
    elif settings.scale == "1-5":
        lines.append("Give a short reason first, then `score`, a level from 1 (the criterion "
                     "does not hold at all) to 5 (it holds fully):")
        for level, anchor in sorted((settings.levels or {}).items()):
            lines.append(f"{level}: {anchor.strip()}")
    else:
        lines.append("Give a short reason first, then `score`, from 0 (the criterion does not "
                     "hold at all) to 1 (it holds fully).")
    return "\n".join(lines)


def criterion_lines(criterion: str, steps: Sequence[str]) -> list[str]:
    """The criterion and its evaluation steps, as a rubric states them.

    >>> criterion_lines("Polite.", ["Read it."])
    ['', 'Criterion: Polite.', '', 'Evaluation steps:', '1. Read it.']
    """
    lines = ["", f"Criterion: {criterion.strip()}"]
    if steps:
        lines += ["", "Evaluation steps:", *(f"{n}. {s.strip()}" for n, s in enumerate(steps, 1))]
    return lines


def version_of(settings: RubricSettings) -> str:
    """The rubric's version: a digest of everything the judge is told and shown, so an edit
    is a new version (and a new cache key), and an unchanged rubric keeps its judgments.

    >>> a = RubricSettings(metric="polite", criterion="Polite.", sees=["answer"])
    >>> version_of(a) == version_of(a.model_copy()), version_of(a) == version_of(
    ...     a.model_copy(update={"criterion": "Very polite."}))
    (True, False)
    """
    told = {"rubric": rubric_text(settings), "sees": settings.sees, "scale": settings.scale}
    digest = hashlib.sha256(json.dumps(told, sort_keys=True).encode()).hexdigest()
    return digest[:12]


def task_for(settings: RubricSettings) -> JudgmentTask:
    """The judgment task of a rubric: id ``judged:METRIC``, version :func:`version_of`."""
    return JudgmentTask(id=f"{NAME}:{settings.metric}", version=version_of(settings),
                        rubric=rubric_text(settings), input=RubricInput,
                        output=OUTPUTS[settings.scale])


def declare(settings: RubricSettings) -> list[Metric]:
    """The metric's declaration, made from the settings."""
    return [Metric(
        settings.metric, description=settings.criterion.strip(),
        range=RANGES[settings.scale], direction="higher",
        verdict=f">= {settings.threshold:g}" if settings.threshold is not None else None,
        precedence=None, question=_question(settings.criterion), review=True,
        version=version_of(settings), reference_free="reference" not in settings.sees)]


def _question(criterion: str) -> str:
    """The reviewer's yes/no question: does the criterion hold here?

    >>> _question("The answer is polite.")
    'Does this hold here: "The answer is polite."?'
    """
    return f'Does this hold here: "{criterion.strip()}"?'


def evaluate(batch: Sequence[tuple[Any, Any]], settings: RubricSettings, context: Any,
             component: str) -> list[dict[str, MetricValue]]:
    """One judgment per case: the fields ``sees`` names, judged against the rubric."""
    judge = context.judge
    metric = settings.metric
    rows: list[dict[str, MetricValue] | None] = [None] * len(batch)
    todo: list[tuple[int, RubricInput]] = []
    domain = getattr(getattr(judge, "config", None), "domain", None)
    for i, (case, step) in enumerate(batch):
        fields, missing = _fields(settings.sees, case, step)
        if missing:
            rows[i] = {metric: MetricValue.failed(
                f"the judge cannot see {missing}: this case has none "
                f"(the rubric's `sees` names it)")}
        else:
            todo.append((i, RubricInput(domain=domain, component=component, fields=fields)))
    task = task_for(settings)
    judgments = judge.run_many(task, [inputs for _, inputs in todo], metric=metric) \
        if todo else []
    identity = {"backend": judge.backend, "model": judge.model}
    for (i, _), j in zip(todo, judgments, strict=True):
        details = {"judge": identity, "judgments": [j.record()],
                   "rubric": {"task": task.id, "version": task.version}}
        if j.output is None:
            rows[i] = {metric: MetricValue.failed(
                f"the judge gave no usable answer: {j.error}", **details)}
            continue
        out = j.output
        value = (1.0 if out.holds else 0.0) if settings.scale == "binary" else float(out.score)
        rows[i] = {metric: MetricValue.of(value, reason=out.reason, **details)}
    return rows  # type: ignore[return-value]


def _fields(sees: Sequence[str], case: Any, step: Any) -> tuple[dict[str, Any], str | None]:
    """The values of ``sees`` for one case, or the first that it lacks."""
    data = step.model_dump(mode="json") if isinstance(step, BaseModel) else dict(step or {})
    out: dict[str, Any] = {}
    for field in sees:
        if field == "question":
            value = case.question
        elif field == "reference":
            value = case.gold.answer
        else:
            value = data.get(field)
        if value is None:
            where = "gold.answer" if field == "reference" else f"a step field {field!r}"
            return {}, f"{field} ({where})"
        out[field] = value
    return out, None
