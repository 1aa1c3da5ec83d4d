"""The data contracts: what a case, a trace, a metric value, a case result and a report hold.

Every model is pydantic v2, every field is documented (the text shows up in
``evalharness schema case|trace``), and the records that are written to disk carry
``schema_version`` so that a later release can read today's runs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticSerializationError

from evalharness.declarations import Metric

SCHEMA_VERSION = "1"
"""Version of the on-disk formats (cases, traces, results.jsonl, report.json)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


# --------------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------------


class Gold(_Model):
    """The ground truth known for a case; every label is optional, and unknown means ``null``."""

    routes: list[str] | None = None
    """Route names the router should choose (a set; order is ignored), e.g. ``["sql", "blog"]``."""

    sql: str | None = None
    """A correct SQL query answering the question, in the scenario's dialect."""

    relevant: dict[str, int] | None = None
    """Chunk id -> graded relevance (0 = not relevant, 1 = partially, 2 = highly, ...).
    ``{}`` means "judged: nothing in the corpus is relevant"; ``null`` means "not labelled"."""

    answer: str | None = None
    """A reference answer a good system would give."""

    refusal: bool | None = None
    """Whether a good answer declines. ``true``: nothing in the system's data answers the
    question (an unanswerable case, usually with ``routes: []`` and ``relevant: {}``), so a
    good answer declines or says the information is missing, and the generator's default
    verdict is the ``refusal`` metric; ``false``: the question is answerable, so a refusal is
    a failure; ``null``: unknown."""

    @field_validator("relevant")
    @classmethod
    def _grades_are_non_negative(cls, value: dict[str, int] | None) -> dict[str, int] | None:
        if value is not None:
            bad = {k: v for k, v in value.items() if v < 0}
            if bad:
                raise ValueError(f"relevance grades must be >= 0, got {bad}")
        return value


class Case(_Model):
    """One question put to the system under test, with its gold labels."""

    id: str = Field(min_length=1)
    """Unique id of the case within the scenario."""

    question: str
    """The user's question, as the system receives it."""

    gold: Gold = Field(default_factory=Gold)
    """Ground truth per component, where known."""

    tags: list[str] = Field(default_factory=list)
    """Free-form labels used to slice reports (e.g. ``sql-only``, ``price``)."""

    metadata: dict[str, Any] = Field(default_factory=dict)
    """Anything else the scenario wants to keep with the case; passed through untouched."""


# --------------------------------------------------------------------------------------------
# Traces
# --------------------------------------------------------------------------------------------


class Usage(_Model):
    """Token usage of one component for one case."""

    prompt_tokens: int = Field(default=0, ge=0)
    """Tokens sent to a model (0 when the component uses no model)."""

    completion_tokens: int = Field(default=0, ge=0)
    """Tokens produced by a model."""

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class Price(_Model):
    """Price of a model, in currency units per million tokens (the judge's ``prices``, a
    ``generation_cost`` evaluator's)."""

    input: float = Field(ge=0)
    """Per million prompt tokens."""

    output: float = Field(ge=0)
    """Per million completion tokens."""

    def cost(self, usage: Usage) -> float:
        """What ``usage`` costs at this price.

        >>> Price(input=0.15, output=0.6).cost(Usage(prompt_tokens=1000, completion_tokens=500))
        0.00045
        """
        return (usage.prompt_tokens * self.input + usage.completion_tokens * self.output) / 1e6


class Step(_Model):
    """What every component step records besides its own output."""

    latency_ms: float | None = Field(default=None, ge=0)
    """Wall-clock time the component took for this case, in milliseconds."""

    usage: Usage | None = None
    """Tokens the component consumed for this case."""

    error: str | None = None
    """The component's own error message when it failed for this case."""


class RouterStep(Step):
    """The router's decision for a case."""

    routes: list[str] = Field(default_factory=list)
    """Route names chosen (a set; ``[]`` means the router abstained)."""

    confidence: float | None = Field(default=None, ge=0, le=1)
    """The router's confidence in the chosen route set, if it reports one."""

    scores: dict[str, float] | None = None
    """Per-route probability or score, if the router reports them."""


class Text2SQLStep(Step):
    """The text-to-SQL step's query and what running it returned."""

    sql: str | None = None
    """The SQL the component produced (``null`` if it produced none)."""

    columns: list[str] | None = None
    """Column names of the result, if it ran."""

    rows: list[list[Any]] | None = None
    """Result rows as the system saw them, if it ran."""


class RetrieverStep(Step):
    """The retriever's ranked list for a case."""

    ids: list[str] = Field(default_factory=list)
    """Retrieved chunk ids, best first."""

    texts: list[str] | None = None
    """Texts of the retrieved chunks, aligned with ``ids`` (optional when a corpus is given)."""

    scores: list[float] | None = None
    """Retrieval scores aligned with ``ids`` (optional)."""

    @model_validator(mode="after")
    def _aligned(self) -> RetrieverStep:
        for name in ("texts", "scores"):
            other = getattr(self, name)
            if other is not None and len(other) != len(self.ids):
                raise ValueError(
                    f"`{name}` has {len(other)} entries but `ids` has {len(self.ids)}; "
                    "they must be aligned"
                )
        return self


class GeneratorStep(Step):
    """The generator's answer and the context it was given."""

    answer: str | None = None
    """The final answer text (``null`` if none was produced)."""

    contexts: list[str] = Field(default_factory=list)
    """Every piece of context the generator was given: retrieved chunks, SQL rows as text."""


BUILTIN_STEPS: dict[str, type[Step]] = {
    "router": RouterStep,
    "text2sql": Text2SQLStep,
    "retriever": RetrieverStep,
    "generator": GeneratorStep,
}


class Trace(_Model):
    """What the system did for one case: one optional step per component."""

    schema_version: str = SCHEMA_VERSION
    """Format version of this record."""

    case_id: str
    """Id of the case this trace answers."""

    router: RouterStep | None = None
    """The router's step, if it ran."""

    text2sql: Text2SQLStep | None = None
    """The text-to-SQL step, if it ran."""

    retriever: RetrieverStep | None = None
    """The retriever's step, if it ran."""

    generator: GeneratorStep | None = None
    """The generator's step, if it ran."""

    steps: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Steps of component kinds added by plugins (e.g. ``reranker``), keyed by component name;
    each is validated against the step model its plugin declares."""

    error: str | None = None
    """Set when the system raised for this case: the exception type and message."""

    traceback: str | None = None
    """When the system raised: where, as Python prints it, from the first frame of the
    user's code (evalharness's frames and the thread machinery under them left out), the
    innermost 30 frames of each chained exception, at most 8,000 characters."""

    def step(self, component: str) -> dict[str, Any] | Step | None:
        """The step recorded for ``component`` (built-in field or plugin step), or ``None``."""
        if component in BUILTIN_STEPS:
            return getattr(self, component)
        return self.steps.get(component)


# --------------------------------------------------------------------------------------------
# Metric values and results
# --------------------------------------------------------------------------------------------


class MetricValue(_Model):
    """One metric for one case: a finite number, or an error with its reason. Never NaN."""

    value: float | None = None
    """The metric's value; ``null`` exactly when ``error`` is set."""

    error: str | None = None
    """Why the metric could not be computed for this case."""

    details: dict[str, Any] = Field(default_factory=dict)
    """Evidence behind the value (e.g. the normalised SQL, the rank of the first hit)."""

    @model_validator(mode="after")
    def _value_xor_error(self) -> MetricValue:
        if self.value is None and not self.error:
            raise ValueError("a metric value needs either `value` or `error`")
        if self.value is not None and self.error:
            raise ValueError("a metric value cannot have both `value` and `error`")
        if self.value is not None and not math.isfinite(self.value):
            raise ValueError(
                f"metric value {self.value!r} is not finite; record an error with a reason instead"
            )
        return self

    @classmethod
    def of(cls, value: float | bool, **details: Any) -> MetricValue:
        """A computed value. ``MetricValue.of(True).value == 1.0``."""
        return cls(value=float(value), details=details)

    @classmethod
    def failed(cls, reason: str, **details: Any) -> MetricValue:
        """A metric that could not be computed, with the reason."""
        return cls(error=reason, details=details)


class EvaluatorRun(_Model):
    """Identity of the evaluator that produced some metric values."""

    name: str
    """Evaluator name as registered."""

    plugin: str
    """Plugin that registered the evaluator."""

    version: str
    """That plugin's version."""

    settings: dict[str, Any] = Field(default_factory=dict)
    """The evaluator's settings, defaults filled in."""

    budget_s: float | None = None
    """Seconds the evaluator could spend per case (its ``budget_s`` in the scenario)."""


class ComponentResult(_Model):
    """All metric values of one component for one case."""

    status: Literal["evaluated", "not_run", "error"]
    """``not_run`` when the trace has no step for this component (or the system failed for the
    case); ``error`` when the step does not validate against its kind's step model. A step that
    reports its own ``error`` is still ``evaluated``, but no evaluator sees it: every metric is
    an error with the reason ``the <component> step carries an error: …``."""

    metrics: dict[str, MetricValue] = Field(default_factory=dict)
    """Metric name -> value."""

    evaluators: dict[str, str] = Field(default_factory=dict)
    """Metric name -> name of the evaluator that produced it."""

    reason: str | None = None
    """Why the component was not evaluated, when it was not."""


class Verdict(_Model):
    """Whether one component (or the whole pipeline) did its job for one case, by the verdict
    criteria of the scenario (``verdicts:``) or the defaults of the component's kind."""

    status: Literal["pass", "fail", "not_applicable", "error"]
    """``pass``/``fail`` by the criteria (all must hold); ``not_applicable`` when the component
    did not run and the case's gold route does not need it; ``error`` when a metric a criterion
    reads could not be computed (or the system failed for the case)."""

    reason: str | None = None
    """Why, for anything but ``pass``: the criteria that failed with their values, the metric's
    error, or what did not run."""

    values: dict[str, float | None] = Field(default_factory=dict)
    """The value of each metric the criteria read (``component.metric`` for the end-to-end
    verdict); ``null`` where it could not be computed."""

    failed: list[str] = Field(default_factory=list)
    """The metrics whose criterion does not hold (in criteria order)."""


def over_repeats(statuses: Mapping[str, int]
                 ) -> Literal["pass", "fail", "error", "not_applicable", "flaky"] | None:
    """A verdict over a case's repeats, from how many repeats had each status: ``flaky`` when
    it passed in some and failed or erred in others — the one definition of a flaky case
    (docs/repeat.md) — else the one it had, ``fail`` before ``error`` before
    ``not_applicable``; ``None`` without a verdict.

    >>> over_repeats({"pass": 2, "fail": 1}), over_repeats({"fail": 2, "error": 1})
    ('flaky', 'fail')
    >>> over_repeats({"pass": 3, "not_applicable": 1}), over_repeats({})
    ('pass', None)
    """
    if statuses.get("pass") and (statuses.get("fail") or statuses.get("error")):
        return "flaky"
    for status in ("pass", "fail", "error", "not_applicable"):
        if statuses.get(status):
            return status  # type: ignore[return-value]
    return None


class Attribution(_Model):
    """Where the case went wrong along the pipeline path its gold route requires."""

    kind: Literal["passed", "attributed", "unattributed", "masked", "unknown"]
    """``passed``: passes end to end and no component on the gold path fails; ``attributed``:
    fails end to end and ``root_causes`` are to blame; ``unattributed``: fails end to end
    although every component on the path passes (an interaction); ``masked``: passes end to
    end although a component on the path fails; ``unknown``: the end-to-end verdict is an
    error, or an error upstream of every failure hides where it started."""

    root_causes: list[str] = Field(default_factory=list)
    """The first failing components on the gold path (failing, with every upstream component
    on the path passing); several when parallel branches fail together."""

    shares: dict[str, float] = Field(default_factory=dict)
    """Component -> its share of this case's failure (``1 / len(root_causes)`` each)."""

    failing: list[str] = Field(default_factory=list)
    """Every component on the gold path whose verdict is ``fail`` (for ``masked``: the ones the
    end result hid)."""

    path: list[str] = Field(default_factory=list)
    """The components on the gold path, in pipeline order (those with a verdict)."""

    reason: str | None = None
    """One sentence on the outcome, e.g. ``"router failed first: route_accuracy = 0 ..."``."""


class CaseResult(_Model):
    """One line of ``results.jsonl``: a case, what the system did, and every metric."""

    schema_version: str = SCHEMA_VERSION
    """Format version of this record."""

    repeat: int | None = Field(default=None, ge=1)
    """Which repeat of the case this is (1, 2, …) in a run with ``--repeat N``
    (docs/repeat.md); absent from the line (``None``) in a run without repeats."""

    case: Case
    """The case as evaluated."""

    trace: Trace
    """The trace the system produced (or that was read from a traces file)."""

    components: dict[str, ComponentResult] = Field(default_factory=dict)
    """Component name -> its metrics for this case."""

    verdicts: dict[str, Verdict] = Field(default_factory=dict)
    """Component name -> its verdict for this case; components without a verdict criterion
    (no ``verdicts:`` entry and no default for their kind) are absent."""

    end_to_end: Verdict | None = None
    """The end-to-end verdict (answer correctness against the reference when there is one, else
    the final component's verdict); ``null`` when no criterion applies."""

    attribution: Attribution | None = None
    """Which component the case's failure starts at (``null`` without an end-to-end verdict)."""

    warnings: list[str] = Field(default_factory=list)
    """What was changed to record this case: text that is not valid Unicode replaced, evidence
    (``details``) cut to the size cap, values that are not JSON written as text."""

    @property
    def outcome(self) -> Literal["pass", "fail", "error"] | None:
        """How the case came out: its end-to-end verdict when it has one; without one,
        ``error`` when the system failed, else the worst of its component verdicts (``fail``,
        then ``error``, then ``pass``); ``None`` when nothing judged it. The one definition
        behind "a failed case" (:attr:`failed`).

        >>> r = CaseResult(case=Case(id="c", question="q"), trace=Trace(case_id="c"),
        ...                verdicts={"retriever": Verdict(status="fail")},
        ...                end_to_end=Verdict(status="pass"))
        >>> r.outcome, r.model_copy(update={"end_to_end": None}).outcome
        ('pass', 'fail')
        """
        if self.end_to_end is not None:
            return self.end_to_end.status  # type: ignore[return-value]
        if self.trace.error:
            return "error"
        statuses = {v.status for v in self.verdicts.values()}
        for status in ("fail", "error", "pass"):
            if status in statuses:
                return status  # type: ignore[return-value]
        return None

    @property
    def failed(self) -> bool:
        """Whether the case failed: its :attr:`outcome` is ``fail`` or ``error``. What
        ``--rerun-failed`` reruns, ``RunFolder.failed`` lists, the report page lists first;
        the oracle reruns take those whose end-to-end verdict is ``fail`` (an error of
        measurement is nothing an oracle could fix)."""
        return self.outcome in ("fail", "error")

    @model_serializer(mode="wrap")
    def _without_repeat(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # a run without repeats writes the lines it always wrote: no "repeat": null
        data = handler(self)
        if data.get("repeat", 0) is None:
            del data["repeat"]
        return data

    @property
    def key(self) -> tuple[str, int | None]:
        """What identifies the line in its run: the case id and the repeat."""
        return (self.case.id, self.repeat)

    def judgment_records(self) -> list[dict[str, Any]]:
        """The judge's records stored with this case's metric values (each judgment and
        embedding request behind them), every component's, in order."""
        return [record for comp in self.components.values() for value in comp.metrics.values()
                for record in value.details.get("judgments") or () if isinstance(record, dict)]

    def to_line(self) -> str:
        """This result as one line of ``results.jsonl`` (no newline). Never fails: text
        that cannot be encoded (an unpaired surrogate such as ``"\\ud800"``, valid in JSON
        but not in UTF-8) is replaced by U+FFFD, and a value that is not JSON by its
        ``repr``, each noted in ``warnings``.

        >>> r = CaseResult(case=Case(id="c", question="q"),
        ...                trace=Trace(case_id="c", generator={"answer": "caf\\ud800"}))
        >>> import json
        >>> back = json.loads(r.to_line())
        >>> back["trace"]["generator"]["answer"], back["warnings"]
        ('caf\ufffd', ['replaced text that is not valid Unicode (an unpaired surrogate) by U+FFFD at trace.generator.answer'])
        """
        try:
            return self.model_dump_json()
        except PydanticSerializationError:
            pass
        notes: list[str] = []
        data = _scrubbed(self.model_dump(mode="python"), (), notes)
        fixed = CaseResult.model_validate(data)
        fixed.warnings = [*self.warnings, *notes]
        return fixed.model_dump_json()


_PLAIN = (bool, int, float, type(None))
SURROGATES = re.compile("[\ud800-\udfff]")
"""An unpaired surrogate: a code point JSON can escape (``"\\ud800"``) but UTF-8 cannot
encode (a Python string holds no paired ones: a pair is read as one character)."""


def _scrubbed(value: Any, path: tuple, notes: list[str]) -> Any:
    """``value`` with unencodable text replaced and non-JSON values as text (see
    :meth:`CaseResult.to_line`); what was changed is appended to ``notes``."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            notes.append("replaced text that is not valid Unicode (an unpaired surrogate) by "
                         f"U+FFFD at {_dotted(path)}")
            return SURROGATES.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_scrubbed(str(k), path, notes): _scrubbed(v, (*path, k), notes)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrubbed(v, (*path, i), notes) for i, v in enumerate(value)]
    if isinstance(value, _PLAIN):
        return value
    notes.append(f"wrote a {type(value).__name__} value that is not JSON as text at "
                 f"{_dotted(path)}")
    return repr(value)


def _dotted(path: tuple) -> str:
    return ".".join(str(p) for p in path) or "(top level)"


# --------------------------------------------------------------------------------------------
# Reports
# --------------------------------------------------------------------------------------------


class MetricSummary(_Model):
    """Aggregate of one metric over the cases where it applied."""

    mean: float | None
    """Mean over the computed values; ``null`` when no value was computed."""

    ci95: list[float] | None = None
    """95% percentile-bootstrap confidence interval of the mean ``[low, high]`` (2000 resamples,
    seeded by component and metric name, so reruns reproduce it); ``null`` below 2 values."""

    n: int
    """Number of cases with a computed value."""

    errors: int
    """Number of cases where the metric could not be computed."""

    evaluator: str
    """Evaluator that produced the metric."""

    error_reasons: dict[str, int] = Field(default_factory=dict)
    """The most frequent error reasons, with their counts."""

    judge: dict[str, Any] | None = None
    """For judged metrics: judgments, requests, cache hits, tokens, errors (and cost when the
    judge has a price table), summed from the judgment records stored with the values."""

    scope: Literal["case", "run"] = "case"
    """``case``: the mean of per-case values; ``run``: one value computed over the whole run
    (a macro-F1, an ECE) by its evaluator's ``evaluate_run`` hook — then ``mean`` is that
    value, ``ci95`` the evaluator's own interval (``null`` if it gives none), ``n`` the cases
    it was computed from, and ``errors`` 1 when it could not be computed."""

    details: dict[str, Any] = Field(default_factory=dict)
    """For run-level metrics: the evidence the evaluator gave with the value (e.g. bins)."""

    declaration: Metric | None = None
    """What the plugin declares about the metric (range, direction, unit, default verdict,
    review question, …; :class:`evalharness.Metric`): report.html, ``compare`` and the review
    page read it from here. ``null`` in reports written before evalharness 0.2."""

    repeats: RepeatSpread | None = None
    """In a run with ``--repeat N``: how the repeats were reduced and how much a case's value
    moves between them (``mean``, ``n`` and ``ci95`` are then over the cases' reduced values,
    docs/repeat.md); ``null`` without repeats."""


class RepeatSpread(_Model):
    """A metric's repeats: each case's values reduced to one, and their spread."""

    reducer: str
    """How a case's values were reduced to its one value (``mean``, ``median``, ``min``,
    ``max``: what the metric declares, else ``mean``)."""

    values: int
    """Values computed over every repeat of every case."""

    within_sd: float | None
    """The typical standard deviation of a case's values between its repeats (the square root
    of the mean within-case variance, over cases with two values or more): the run-to-run
    noise of one case. ``null`` when no case has two values."""

    varying: int
    """Cases whose values are not all equal across their repeats."""

    naive_ci95: list[float] | None = None
    """The interval a bootstrap gives when every value counts as a case of its own (the
    repeats taken as independent): too narrow, shown to say how much the repeats'
    correlation widens ``ci95``."""


class CostSummary(_Model):
    """Latency and tokens of one component over the run."""

    steps: int
    """Number of cases in which the component ran."""

    latency_ms: dict[str, float | None]
    """``mean``, ``p50``, ``p95`` and ``total`` latency in milliseconds (``null`` if unreported)."""

    tokens: dict[str, int]
    """``prompt``, ``completion`` and ``total`` tokens summed over the run."""

    latency_share: float | None = None
    """This component's share of the latency of all components together (sum of ``total``
    latencies); ``null`` when no component reports latency."""

    token_share: float | None = None
    """This component's share of all components' tokens; ``null`` when none reports tokens."""


class ComponentReport(_Model):
    """Everything the report says about one component."""

    kind: str
    """The component's kind (router, text2sql, retriever, generator, or a plugin's kind)."""

    cases: dict[str, int]
    """Counts of cases by status: ``evaluated``, ``not_run``, ``error``; and ``missing``: the
    cases among ``not_run`` whose gold route needs the component (the router sent them
    elsewhere) — in no mean of its metrics, an error in each of its gates."""

    metrics: dict[str, MetricSummary]
    """Metric name -> its aggregate."""

    cost: CostSummary
    """Latency and tokens."""

    evaluators: list[EvaluatorRun]
    """The evaluators that ran on this component, with their settings."""

    judge: dict[str, Any] | None = None
    """Judge usage summed over this component's metrics (``null`` when nothing was judged)."""


class GateResult(_Model):
    """One gate (``component.metric >= threshold``) and whether the run passed it."""

    name: str
    """The gate as written in the scenario."""

    component: str
    """Component the gate checks."""

    metric: str
    """Metric the gate checks."""

    op: str
    """Comparison operator."""

    threshold: float
    """The threshold."""

    value: float | None
    """The metric's mean in this run (``null`` if it could not be computed)."""

    passed: bool
    """Whether the gate holds: the comparison holds *and* at most ``max_error_rate`` of the
    cases behind the value are errors."""

    n: int = 0
    """Cases behind the gate: those with a value and those with an error."""

    errors: int = 0
    """Cases where the metric could not be computed: an error value, an invalid step, a
    system that failed for the case, a case whose gold route needs the component but never
    reached it (``missing``), a case the run could not complete (a value computed on the
    survivors cannot pass a gate)."""

    missing: int = 0
    """Of ``errors``: cases whose gold route needs the gate's component, which did not run
    (the router sent them elsewhere), and cases the run could not complete."""

    error_rate: float | None = None
    """``errors / n`` (``null`` when ``n`` is 0)."""

    max_error_rate: float = 0.05
    """The largest error rate at which the gate can still pass (per gate in the scenario)."""

    reason: str | None = None
    """Why the gate fails, when it does."""


class CriteriaReport(_Model):
    """The verdict criteria used for one component (or for ``end_to_end``)."""

    criteria: list[str]
    """The criteria, all of which must hold, e.g. ``["recall@5 >= 0.5"]`` (``component.metric``
    form for ``end_to_end``); empty when the component gets no verdict. A component judged on
    unanswerable cases (``gold.refusal: true``) only lists their criteria, and its note says
    so."""

    source: Literal["scenario", "default", "none"]
    """``scenario`` when written under ``verdicts:``, ``default`` when chosen for the
    component's kind from its configured metrics, ``none`` when there is no usable criterion."""

    note: str | None = None
    """What else applies, e.g. the end-to-end fallback for cases without a reference answer,
    the criteria of unanswerable cases (``gold.refusal: true``) when they differ, or the
    ``refusal`` evaluator added because of them."""


class RankedComponent(_Model):
    """One row of the bottleneck ranking."""

    component: str
    """The component."""

    share: float | None
    """Its share of the end-to-end failures it is the root cause of (fractional when parallel
    branches share a case); ``null`` when no case failed end to end."""

    ci95: list[float] | None = None
    """95% percentile-bootstrap interval of ``share`` over the failing cases (2000 resamples,
    seeded by the component's name); ``null`` below 2 failing cases."""

    failures: float
    """Number of end-to-end failures attributed to it (sum of shares, so 0.5 per shared case)."""


class WorstCase(_Model):
    """A case a component is to blame for, with its evaluator's evidence."""

    case: str
    """Case id."""

    values: dict[str, float | None]
    """The values of the metrics the component's criteria read (``null``: not computed or the
    component did not run)."""

    reason: str
    """The verdict's reason, followed by the evaluator's own reason when it gives one (e.g. the
    SQL cascade's counterexample summary)."""


class EndToEndSummary(_Model):
    """How many cases pass end to end."""

    cases: int
    """Cases with an end-to-end verdict."""

    passed: int
    """Cases that pass end to end."""

    failed: int
    """Cases that fail end to end (the denominator of every bottleneck share)."""

    errors: int
    """Cases whose end-to-end verdict is an error (not counted as pass or fail)."""

    pass_rate: float | None
    """``passed / (passed + failed)``; ``null`` when there are none."""

    ci95: list[float] | None = None
    """95% percentile-bootstrap interval of ``pass_rate``; ``null`` below 2 cases."""


class HeadroomRecord(_Model):
    """One oracle rerun (a line of ``headroom.jsonl``): a case that failed end to end, run
    again with one component's output (or every component's) replaced by its gold."""

    oracle: str
    """The oracle: a component's name, or the components joined by ``+`` for all at once."""

    components: list[str]
    """The components whose output the oracle replaces."""

    case_id: str
    """The case."""

    repeat: int | None = None
    """The repeat of the case that failed and was rerun, in a run with ``--repeat N``; the
    rerun is called with the same ``repeat``."""

    status: Literal["fixed", "still_fails", "no_oracle", "error"]
    """``fixed``: passes end to end with the oracle; ``still_fails``; ``no_oracle``: the case
    lacks the gold the oracle needs (not rerun); ``error``: the rerun failed, the system did not
    apply the override, or the end-to-end verdict is an error."""

    reason: str = ""
    """Why: the end-to-end verdict's or the attribution's reason, or the problem."""

    verdicts: dict[str, str] = Field(default_factory=dict)
    """Component -> its verdict status in the rerun."""

    judge: dict[str, Any] | None = None
    """Judge usage of the rerun's evaluation (requests, cache hits, tokens)."""


class HeadroomRow(_Model):
    """An oracle's end-to-end pass-rate gain: the counterfactual bottleneck."""

    oracle: str
    """A component's name, or the components joined by ``+`` (every oracle at once)."""

    components: list[str]
    """The components whose output the oracle replaces."""

    gain: float | None
    """Cases fixed over the cases with a pass/fail end-to-end verdict: how much the end-to-end
    pass rate would rise with this component perfect; ``null`` when no failed case could be
    rerun (see ``reason``)."""

    ci95: list[float] | None = None
    """95% percentile-bootstrap interval of ``gain`` (over every decided case, seeded)."""

    pass_rate: float | None = None
    """The end-to-end pass rate with the oracle (the run's plus ``gain``)."""

    fixed: int = 0
    """Failed cases that pass with the oracle."""

    still_fails: int = 0
    """Failed cases that still fail with the oracle."""

    no_oracle: int = 0
    """Failed cases without the gold the oracle needs (not rerun)."""

    errors: int = 0
    """Reruns that failed (see ``headroom.jsonl`` for the reasons)."""

    sampled: int | None = None
    """How many of the failed cases were rerun when only a random sample was (more failed
    than ``system.headroom`` allows); ``null`` when every failed case was. The counts above
    are the sample's; ``gain`` is estimated from it."""

    reason: str | None = None
    """What limits the row: reruns that failed and failed cases without an oracle output,
    each with its count and an example reason (why ``gain`` is ``null`` when it is)."""


class Bottleneck(_Model):
    """Which component holds the system back: end-to-end failures attributed along the pipeline
    (see docs/bottleneck.md)."""

    end_to_end: EndToEndSummary
    """End-to-end pass and fail counts."""

    ranking: list[RankedComponent]
    """Components with a verdict, by share of end-to-end failures they start at (largest first;
    ties in pipeline order)."""

    unattributed: int
    """Cases that fail end to end although every component on their gold path passes."""

    unattributed_share: float | None = None
    """``unattributed`` over the end-to-end failures."""

    unattributed_ci95: list[float] | None = None
    """95% bootstrap interval of ``unattributed_share``."""

    unknown: int = 0
    """Failing or erroring cases that could not be attributed because a verdict on the path (or
    the end-to-end one) is an error."""

    masked: int
    """Cases that pass end to end although a component on their gold path fails."""

    masked_by: dict[str, int] = Field(default_factory=dict)
    """Component -> masked cases in which it fails."""

    verdicts: dict[str, dict[str, int]] = Field(default_factory=dict)
    """Component -> counts of its per-case verdicts (``pass``, ``fail``, ``not_applicable``,
    ``error``)."""

    worst_cases: dict[str, list[WorstCase]] = Field(default_factory=dict)
    """Component -> up to 5 cases attributed to it, lowest criterion values first."""

    headroom: list[HeadroomRow] | None = None
    """Oracle headroom per component (and every oracle at once), in pipeline order; ``null``
    when it was not computed (``headroom_note`` says why)."""

    headroom_note: str | None = None
    """Why there is no headroom (recorded traces; a system without ``overrides``;
    ``--no-headroom``; an interrupted run), or a remark on it."""


class SliceVerdicts(_Model):
    """The per-case verdicts of one component (or end to end) over the cases of a slice,
    counted as the bottleneck counts them."""

    passed: int
    """Cases whose verdict is ``pass``."""

    failed: int
    """Cases whose verdict is ``fail``."""

    not_applicable: int = 0
    """Cases whose verdict is ``not_applicable`` (not in the pass rate)."""

    errors: int = 0
    """Cases whose verdict is ``error`` (not in the pass rate)."""

    pass_rate: float | None = None
    """``passed / (passed + failed)``; ``null`` when no case of the slice passes or fails."""

    ci95: list[float] | None = None
    """95% percentile-bootstrap interval of ``pass_rate`` over the slice's cases (see
    :class:`Slice`); ``null`` below 2 cases that pass or fail."""


class SliceMetric(_Model):
    """One per-case metric over the cases of a slice where it was computed."""

    mean: float
    """Mean of the computed values."""

    ci95: list[float] | None = None
    """95% percentile-bootstrap interval of ``mean`` (see :class:`Slice`); ``null`` below 2
    values."""

    n: int
    """Cases of the slice with a computed value."""


class SliceComponent(_Model):
    """One component over the cases of a slice."""

    verdicts: SliceVerdicts | None = None
    """Its per-case verdicts; ``null`` when the component gets no verdict (no criterion)."""

    metrics: dict[str, SliceMetric] = Field(default_factory=dict)
    """Metric name -> its mean over the slice, for the per-case metrics computed for at least
    one case of the slice (run-level metrics, such as a macro-F1, are not sliced)."""


class Slice(_Model):
    """The cases carrying one tag (or one side of the synthetic / hand-written pair), with
    the report's per-case statistics recomputed over them. Every interval of a slice comes
    from the same 2000 resamples of its cases (``stats.bootstrap_sums``, seeded by the
    slice's name): a ratio per resample (passes over decided cases, or the sum of a metric's
    values over the cases that have one), resamples where it is undefined left out."""

    name: str
    """The tag; ``synthetic`` or ``hand-written`` for the pair in ``Slices.origin``."""

    cases: int
    """Cases of the run in the slice."""

    end_to_end: SliceVerdicts | None = None
    """The end-to-end verdicts; ``null`` when no case of the run has one."""

    components: dict[str, SliceComponent] = Field(default_factory=dict)
    """Component name -> its verdicts and metric means over the slice, in pipeline order."""


class Slices(_Model):
    """The run sliced by case tag (``Case.tags``); see docs/slices.md."""

    min_cases: int
    """A tag needs at least this many cases of the run to be sliced (``slices.MIN_CASES``);
    smaller tags are only counted, in ``small``."""

    max_tags: int
    """At most this many tags are sliced, the most frequent (``slices.MAX_TAGS``); the rest
    are counted in ``beyond_cap``."""

    tags: list[Slice] = Field(default_factory=list)
    """One slice per tag with at least ``min_cases`` cases, most frequent first (ties by
    tag), at most ``max_tags``."""

    origin: list[Slice] | None = None
    """The pseudo-slice pair: cases not tagged ``synthetic`` (``hand-written``), then cases
    tagged ``synthetic``; ``null`` unless both are non-empty."""

    small: dict[str, int] = Field(default_factory=dict)
    """Tags with fewer than ``min_cases`` cases -> their count, most frequent first (ties by
    tag)."""

    beyond_cap: dict[str, int] = Field(default_factory=dict)
    """Tags with enough cases that the cap left out -> their count, most frequent first."""

    unlisted: int = 0
    """Distinct tags in neither ``small`` nor ``beyond_cap`` nor ``tags``: the two lists hold at
    most ``slices.MAX_LISTED`` tags together, the most frequent."""

    untagged: int = 0
    """Cases of the run without any tag (in no tag's slice)."""


class SystemErrorGroup(_Model):
    """Cases whose system raised with the same first line of error, and where one of them
    failed."""

    reason: str
    """The first line of the error (``RuntimeError: boom``)."""

    count: int
    """Cases with this reason."""

    example: str
    """The first such case's id."""

    traceback: str | None = None
    """That case's traceback (``trace.traceback``), if the system raised an exception."""


class FlakyCase(_Model):
    """A case whose verdict is not the same in every repeat."""

    case: str
    """The case id."""

    component: str
    """The component whose verdict flips, or ``end_to_end``."""

    passed: int
    """Repeats where it passed."""

    failed: int
    """Repeats where it failed."""

    errors: int = 0
    """Repeats where the verdict was an error."""


class RepeatReport(_Model):
    """What the repeats of a run show (docs/repeat.md)."""

    n: int
    """Repeats asked per case (``--repeat N``, the scenario's ``repeat:``)."""

    judge: Literal["cached", "fresh"] = "cached"
    """How the repeats met the judge cache: ``cached``, an answer judged before is not judged
    again (the judge's own variance is not measured); ``fresh``, every repeat asks the judge
    anew (its cache key holds the repeat)."""

    cases: int
    """Cases with at least one result."""

    incomplete: int = 0
    """Cases with fewer results than ``n`` (an interrupted run)."""

    end_to_end: dict[str, int] = Field(default_factory=dict)
    """Cases by how their end-to-end verdict came out over the repeats: ``always_pass``,
    ``always_fail``, ``flaky``, ``undecided`` (no pass or fail in any repeat)."""

    flaky: list[FlakyCase] = Field(default_factory=list)
    """Every case and component (or ``end_to_end``) whose verdict passed in some repeats and
    failed or erred in others, end to end first, then by case."""


class Report(_Model):
    """``report.json``: enough to read, reproduce and compare a run."""

    schema_version: str = SCHEMA_VERSION
    """Format version of this record."""

    scenario: dict[str, Any]
    """``name``, ``path`` and ``sha256`` of the scenario file."""

    judge: dict[str, Any]
    """Backend and model of the judge, and whether it is a heuristic (not an LLM)."""

    versions: dict[str, str]
    """evalharness and plugin versions."""

    cases: dict[str, int]
    """``total`` cases, ``evaluated`` (those with a result), ``system_errors``."""

    infrastructure: list[str] = Field(default_factory=list)
    """Why the run could not do its work, when it could not (exit code 3, docs/ci.md): a
    cluster's worker or node that died (the cases it did not complete have no result; the
    report covers the others), a judge that gave no usable answer to any request. Empty for a run
    that did its work."""

    system_errors: list[SystemErrorGroup] = Field(default_factory=list)
    """The system's errors grouped by their first line, most frequent first (at most
    :data:`~evalharness.report.SYSTEM_ERROR_GROUPS`), each with one case's traceback."""

    trace_source: dict[str, Any] | None = None
    """For a scenario of recorded traces: the file and its ``format`` (and the mapping or
    preset for spans), how many ``traces`` it held, how many ``matched`` a case, the traces
    ``without_case`` (counted; ``without_case_ids`` lists the first 50) and the
    ``cases_without_trace`` (each is also a system error in results.jsonl). ``null`` when a
    system ran."""

    selection: dict[str, Any] | None = None
    """How the cases were chosen when not all ran (``--limit``, ``--sample``, ``--filter``,
    ``--rerun-failed``): ``how`` (a sentence), ``chosen``, ``total``, ``ids_sha256`` and, for a
    sample, ``strata`` (gold route -> cases). ``null`` when every case of the scenario ran.
    Means and CIs are over the cases that ran."""

    components: dict[str, ComponentReport]
    """Component name -> its report, in pipeline order."""

    gates: list[GateResult]
    """Every gate and its outcome."""

    verdict_criteria: dict[str, CriteriaReport] = Field(default_factory=dict)
    """Component name (and ``end_to_end``) -> the criteria its per-case verdicts use, defaults
    written out."""

    bottleneck: Bottleneck | None = None
    """Failure attribution along the pipeline; ``null`` when no case has an end-to-end
    verdict."""

    slices: Slices | None = None
    """The run sliced by case tag: per tag (and synthetic vs hand-written), the cases, the
    verdict pass rates and the metric means with bootstrap CIs; ``null`` when no case of the
    run has a tag."""

    sections: list[dict[str, Any]] = Field(default_factory=list)
    """Extra report sections contributed by plugins."""

    agreement: dict[str, Any] | None = None
    """How far the judge agrees with people's labels (the scenario's ``labels:`` or
    ``evalharness agreement``): per component and metric, the statistics with 95% bootstrap
    intervals (docs/review.md); ``null`` without labels."""

    repeats: RepeatReport | None = None
    """A run with ``--repeat N``: how many repeats, how the judge met them, and the flaky
    cases (docs/repeat.md); ``null`` without repeats."""

    warnings: list[str] = Field(default_factory=list)
    """What the run noticed that a reader should know: repeated result lines ignored, trace
    steps of components the pipeline does not have, cases recorded with warnings."""

    run: dict[str, Any] = Field(default_factory=dict)
    """When and how the run happened (start time, duration, concurrency); differs per run."""
