"""Metric declarations: what a plugin says about each metric it computes.

A plugin declares every metric of its evaluators with a :class:`Metric`: its name (or a
pattern such as ``recall@{k}``, whose instances the evaluator's settings choose), its range,
direction and unit, whether it is per case or per run, its default verdict criterion, the
question a reviewer answers about it, the labels it can be compared with and what a
reviewer's label makes gold. The core reads nothing else about a metric: verdicts, gates,
report.html, ``compare``, the review page, agreement and curation all read declarations
(report.json stores each metric's declaration with its summary, so that a saved run is read
without its plugins).

This module holds the data and the small rules every reader shares; it imports nothing of
the core but :mod:`evalharness.errors`.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from evalharness.errors import PluginError

Direction = Literal["higher", "lower", "neutral"]

_CRITERION = re.compile(r"^\s*(>=|<=|==|>|<)\s*(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*$")
_PARAM = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class LabelGold(BaseModel):
    """What a reviewer's label on a metric makes gold (``evalharness review promote``).

    ``field`` is the case's gold field it sets (``routes``, ``sql``, ``answer``, …) and ``step``
    the field of the component's step it is taken from. A correction the reviewer types
    always becomes the gold field (a list field takes comma-separated items); a ``yes`` label
    copies the step's value when ``confirms`` — the metric says the output is right, so the
    output is the gold.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    field: str
    """The case's gold field the label sets (``routes``, ``sql``, ``answer``)."""
    step: str
    """The field of the component's step a ``yes`` copies into it."""
    confirms: bool = True
    """Whether a ``yes`` copies the step's value (the metric says the output is right)."""


class Init(BaseModel):
    """How ``evalharness init`` lists an evaluator in the scenario it writes.

    ``entry`` is the list item under ``evaluators.COMPONENT`` (``route_accuracy``,
    ``"ranking: {k: [1, 3]}"``), ``comment`` what is written beside it, and
    ``needs_upstream`` keeps it out of a project where nothing feeds the component (a
    faithfulness metric needs contexts to be faithful to). Evaluators without it are listed
    in a comment (``# also: ...``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    entry: str
    """The list item under ``evaluators.COMPONENT``."""
    comment: str = ""
    """Written beside it."""
    needs_upstream: bool = False
    """Listed only when something feeds the component."""
    gate: str | None = None
    """The gate ``init`` writes on the run's mean of each of its metrics that makes a verdict
    (``>= 0.9``); ``None``: the verdict criterion itself."""


class Metric(BaseModel):
    """One metric, as the plugin that computes it declares it.

    Example::

        Metric("politeness", description="the answer thanks the user",
               verdict=">= 0.5", question="Is the answer polite?")
        Metric("recall@{k}", verdict=">= 0.5")       # recall@3, recall@10, ...
        Metric("latency_ms", range=(0, None), direction="lower", unit="ms")
    """

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    name: str
    """The metric's name, or a pattern with ``{parameter}`` parts (``recall@{k}``); the
    cutoff K is part of the name."""

    description: str = ""
    """One line: what the value means."""

    range: tuple[float | None, float | None] | None = (0.0, 1.0)
    """``(low, high)``; ``None`` for an open end (``(0, None)``: any number ≥ 0); ``None``
    when not declared. report.html draws a metric on a bar chart when its range is 0–1."""

    direction: Direction = "higher"
    """Which way is better: ``higher``, ``lower``, or ``neutral`` (no better way; a change is
    reported, never flagged as a regression)."""

    unit: str = ""
    """What the number counts (``ms``, ``tokens``, ``words``); empty for a score."""

    scope: Literal["case", "run"] = "case"
    """``case``: one value per case, averaged by the core; ``run``: one value for the whole
    run (an evaluator's ``run_metrics``)."""

    verdict: str | None = None
    """Its default verdict criterion, ``OP number`` (``>= 0.5``): used when the scenario's
    ``verdicts:`` has no entry for the component. ``None``: it decides no default verdict."""

    precedence: int | None = 0
    """Of the metrics configured on one component that have a default verdict, only those of
    the lowest precedence make the default (all of them must hold): ``equivalent`` (0) wins
    over ``exact_match`` (2), a fallback like ``answer_present`` (1) counts only alone. Of a
    pattern's instances, the largest parameter is read (``recall@10`` over ``recall@3``).
    ``None``: it joins the default criteria whatever the others' precedence (a criterion the
    user wrote, such as a ``judged`` rubric's threshold: the component passes only if it
    holds too)."""

    end_to_end: str | None = None
    """The default end-to-end criterion, ``OP number``, when the metric is configured on the
    pipeline's final component (``>= 0.5`` on a correctness F1); the lowest precedence wins
    as for ``verdict``."""

    cases: dict[str, Any] | None = None
    """Case fields that select the cases its default verdict judges, ``{"gold.refusal":
    True}``: on them it replaces the component's default criteria (and the end-to-end ones,
    on the final component); the other cases never read it. Its evaluator is added
    automatically, with default settings, to every component of its kind that does not list
    it, when some case matches."""

    reducer: Literal["mean", "median", "min", "max"] = "mean"
    """How a case's values over the repeats of a run with ``--repeat N`` become its one value
    (docs/repeat.md): ``mean`` (the default), ``median``, ``min`` (a pass needs every repeat,
    like pass^k), ``max`` (any repeat will do, like pass@k)."""

    question: str | None = None
    """The yes/no question a reviewer answers about the metric's value on one case; ``None``:
    ``Is METRIC right here (did the component do its job)?``."""

    version: str | None = None
    """What the metric measures, by content (a ``judged`` rubric's digest): ``compare``
    pairs two runs' values only when their versions are equal — a changed rubric is another
    metric. ``None``: the name says it all."""

    review: bool = False
    """Offer it to reviewers on every case, even when no verdict criterion reads it and no
    judge computed it (a judged metric, or one a criterion reads, is always offered)."""

    item_labels: tuple[str, ...] = ()
    """Per-item labels it can be compared with, besides labels on the metric itself:
    ``claim_support`` (each claim of the judge's claim-support judgments in its details is
    offered for review and counted in agreement)."""

    gold: LabelGold | None = None
    """What a reviewer's label on it makes gold; ``None``: nothing."""

    reference_free: bool = False
    """It is computed from the trace alone — the question, the steps' outputs, the judge —
    never from a case's gold labels (``faithfulness``, ``answer_relevancy``, ``abstention``,
    ``latency_ms``): ``evalharness monitor`` computes only such metrics on live traffic, and
    its verdicts read only them (docs/monitor.md). ``False``: it needs gold, or may (a metric
    that falls back on the judge without labels declares ``True`` if its judged path needs no
    gold either)."""

    pattern: str | None = None
    """Set by the core on a pattern's instance: the declared pattern (``recall@{k}``)."""

    declared: bool = True
    """``False`` for a metric a plugin names without declaring it (a plain string): its
    range is unknown and it decides no default verdict."""

    def __init__(self, name: str | None = None, /, **data: Any) -> None:
        if name is not None:
            data["name"] = name
        super().__init__(**data)

    @field_validator("verdict", "end_to_end")
    @classmethod
    def _criterion(cls, value: str | None) -> str | None:
        if value is not None and parse_threshold(value) is None:
            raise ValueError(f"{value!r} is not a criterion; write `OP number` with OP one of "
                             ">=, <=, >, <, ==, e.g. `>= 0.5`")
        return value

    @model_validator(mode="after")
    def _sane(self) -> Metric:
        if self.range is not None:
            low, high = self.range
            if low is not None and high is not None and low > high:
                raise ValueError(f"range {self.range}: low is above high")
        if self.scope == "run" and (self.verdict or self.end_to_end or self.cases):
            raise ValueError("a run-level metric cannot decide a case's verdict")
        return self

    # -- names ------------------------------------------------------------------------------

    @property
    def is_pattern(self) -> bool:
        return bool(_PARAM.search(self.name))

    def match(self, name: str) -> dict[str, str] | None:
        """The parameters of ``name`` when it is this metric (or an instance of the pattern).

        >>> Metric("recall@{k}").match("recall@5"), Metric("mrr").match("mrr")
        ({'k': '5'}, {})
        >>> Metric("recall@{k}").match("mrr") is None
        True
        """
        if not self.is_pattern:
            return {} if name == self.name else None
        found = _pattern_regex(self.name).fullmatch(name)
        return found.groupdict() if found else None

    def instance(self, name: str) -> Metric:
        """This declaration for one concrete metric name."""
        if not self.is_pattern:
            return self
        return self.model_copy(update={"name": name, "pattern": self.name})

    # -- reading ----------------------------------------------------------------------------

    @property
    def unit_scale(self) -> bool:
        """Whether the value lies in 0–1 (a score, a rate): drawn on a 0–1 bar chart."""
        return self.range is not None and tuple(self.range) == (0.0, 1.0)

    def question_text(self) -> str:
        return self.question or f"Is {self.name} right here (did the component do its job)?"

    def applies_to(self, case: Any) -> bool:
        """Whether ``case`` is one of the cases its default verdict is for (``cases``)."""
        return self.cases is None or matches(case, self.cases)

    def view(self) -> dict[str, Any]:
        """For report.json: the declaration as plain data."""
        return self.model_dump(mode="json", exclude_defaults=False)


def parse_threshold(text: str) -> tuple[str, float] | None:
    """``(op, number)`` of a criterion's right-hand side.

    >>> parse_threshold(">= 0.5"), parse_threshold("is high")
    (('>=', 0.5), None)
    """
    found = _CRITERION.match(text)
    return (found[1], float(found[2])) if found else None


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    parts = _PARAM.split(pattern)
    out = []
    for i, part in enumerate(parts):
        out.append(re.escape(part) if i % 2 == 0 else f"(?P<{part}>.+?)")
    return re.compile("".join(out))


def instance_order(metric: Metric) -> tuple:
    """Sort key of a pattern's instances: by their parameters, numbers as numbers.

    >>> sorted(["recall@10", "recall@3"], key=lambda n: instance_order(
    ...     Metric("recall@{k}").instance(n)))
    ['recall@3', 'recall@10']
    """
    if metric.pattern is None:
        return ()
    params = Metric(metric.pattern).match(metric.name) or {}
    return tuple((0, float(v), "") if _number(v) else (1, 0.0, v) for v in params.values())


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def matches(case: Any, where: Mapping[str, Any]) -> bool:
    """Whether every dotted field of ``where`` has its value on ``case``.

    >>> from types import SimpleNamespace as NS
    >>> matches(NS(gold=NS(refusal=True)), {"gold.refusal": True})
    True
    """
    for path, wanted in where.items():
        value: Any = case
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else getattr(value, part, None)
        if value != wanted:
            return False
    return True


def describe_cases(where: Mapping[str, Any]) -> str:
    """``{"gold.refusal": True}`` -> ``gold.refusal: true``."""
    return " and ".join(f"{path}: {json.dumps(value)}" for path, value in where.items())


def declarations(items: Iterable[Metric | str], scope: str = "case") -> list[Metric]:
    """Declarations from what an evaluator lists: a plain string is an undeclared metric."""
    out = []
    for item in items:
        if isinstance(item, Metric):
            if scope == "run" and (item.verdict or item.end_to_end or item.cases):
                raise PluginError(f"run-level metric {item.name!r} declares a verdict; a value "
                                  "for the whole run cannot decide a case's verdict (gate it)")
            out.append(item if item.scope == scope else item.model_copy(update={"scope": scope}))
        elif isinstance(item, str):
            out.append(Metric(item, range=None, declared=False, scope=scope))
        else:
            raise PluginError(f"a metric is declared with evalharness.Metric(...) or named "
                              f"with a string, not {type(item).__name__} ({item!r})")
    return out


def resolve(declared: list[Metric], name: str) -> Metric | None:
    """The declaration of the concrete metric ``name``: its own, else a pattern's instance."""
    for metric in declared:
        if not metric.is_pattern and metric.name == name:
            return metric
    for metric in declared:
        if metric.is_pattern and metric.match(name) is not None:
            return metric.instance(name)
    return None


def undeclared(name: str, scope: str = "case") -> Metric:
    """The declaration of a metric no declaration covers."""
    return Metric(name, range=None, declared=False, scope=scope)


# --------------------------------------------------------------------------------------------
# Callables with opt-in arguments
# --------------------------------------------------------------------------------------------


def check_arguments(fn: Callable[..., Any], offered: Iterable[str], what: str) -> None:
    """A :class:`PluginError` when ``fn`` needs an argument that is not ``offered``."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return
    offered = list(offered)
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.name in offered:
            continue
        if p.default is p.empty:
            raise PluginError(f"{what} takes an argument {p.name!r}, which is not offered; it "
                              f"may take any of: {', '.join(offered)}")


def call_with(fn: Callable[..., Any], **offered: Any) -> Any:
    """Call ``fn`` with the offered arguments it names (all of them if it takes ``**kwargs``),
    as pluggy calls a hook implementation."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return fn(**offered)
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return fn(**offered)
    return fn(**{k: v for k, v in offered.items() if k in params})
