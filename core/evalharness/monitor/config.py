"""MONITOR.yaml: the monitor's own keys over a scenario (docs/monitor.md, "MONITOR.yaml").

:func:`load_monitor` reads and validates the file the way a scenario is read — every problem
one paragraph naming the file, the line and the field, and what would be valid (exit 2) —,
loads the scenario it names (its pipeline, trace mapping, judge and evaluators are reused)
and resolves every path relative to the monitor file.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from evalharness.context import file_hint, not_a_file
from evalharness.errors import EvalHarnessError, ScenarioError
from evalharness.locate import (
    best_error,
    format_path,
    line_of,
    load_yaml_with_lines,
    short,
    yaml_problem,
)
from evalharness.monitor.timespans import FORMS, parse_span
from evalharness.redaction import redact
from evalharness.scenario import Scenario, TracesSpec, load_scenario
from evalharness.spans.mapping import MappingSpec, mapping_spec
from evalharness.spans.paths import is_glob

Window = Literal["hour", "day"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


def _a_span(value: str) -> str:
    """A span of time as MONITOR.yaml writes it (``24h``), checked."""
    span = parse_span(value)
    if span is None or span.total_seconds() <= 0:
        raise ValueError(f"{value!r} is no span of time: give one like {FORMS}")
    return value


class Rule(_Strict):
    """An always-include rule: a trace that matches every key given is always evaluated."""

    feedback: Literal["down", "up"] | None = None
    """A user gave the trace this thumbs (feedback ingested before the trace was decided, or
    later: a trace left out that then gets a thumbs-down is evaluated on the next pass)."""
    error: bool | None = None
    """``true``: the application recorded an error on the trace or one of its steps."""
    route: str | None = None
    """The router chose this route (one of them)."""

    @model_validator(mode="after")
    def _some(self) -> Rule:
        if self.feedback is None and self.error is None and self.route is None:
            raise ValueError("an always-rule needs at least one of feedback, error, route "
                             "(e.g. {feedback: down})")
        return self

    def label(self) -> str:
        """``feedback=down, route=sql``: how ``sample_reason`` names the rule."""
        parts = [f"{k}={v if not isinstance(v, bool) else str(v).lower()}"
                 for k, v in self.model_dump(exclude_none=True).items()]
        return ", ".join(parts)


class Sampling(_Strict):
    """Which traces are evaluated. Decided once per trace, from a hash of ``seed`` and its
    trace id (so a restart decides the same), and stored."""

    rate: float = Field(default=1.0, ge=0.0, le=1.0)
    """The share of traces evaluated (``0.2``: one in five)."""
    by: Literal["route"] | None = None
    """``route``: stratified — a route whose evaluated share falls below ``rate`` catches up
    (its next traces are taken), so a rare route is never left out."""
    always: list[Rule] = Field(default_factory=list)
    """Traces evaluated whatever the rate (``{feedback: down}``, ``{error: true}``,
    ``{route: sql}``)."""
    seed: int = 0
    """The hash's seed: another seed picks other traces."""


class StoreSpec(_Strict):
    """Where the store is, and how long it keeps traces."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True,
                              populate_by_name=True)

    path: str | None = None
    """The DuckDB file, relative to the monitor file (default ``monitor.duckdb``; not with
    ``url``)."""
    url: str | None = None
    """A PostgreSQL server's database, ``postgresql://user@host:port/db`` (its password
    better in ``PGPASSWORD`` or ``~/.pgpass`` than here), in place of ``path``."""
    schema_name: str | None = Field(default=None, alias="schema")
    """With ``url``: the PostgreSQL schema holding the store's tables, created when missing
    (several monitors share one database, each in its schema); default ``public``."""
    retention_days: float | None = Field(default=90, gt=0)
    """Traces older than this (by their start time; by when they were stored when the trace
    has none) are deleted with their metrics, verdicts and feedback at the start of a pass;
    ``null``: kept for ever."""

    @field_validator("url")
    @classmethod
    def _one_store(cls, url: str | None, info: Any) -> str | None:
        if url is None:
            return url
        if info.data.get("path") is not None:
            raise ValueError("give `store.path` (a DuckDB file) or `store.url` (a PostgreSQL "
                             "server), not both")
        if not re.match(r"postgres(ql)?://", url):
            raise ValueError("a store's url is a PostgreSQL URL, "
                             "postgresql://user@host:port/database (for a DuckDB file, give "
                             "`store.path`)")
        return url

    @field_validator("schema_name")
    @classmethod
    def _schema(cls, schema: str | None, info: Any) -> str | None:
        if schema is None:
            return schema
        if info.data.get("url") is None:
            raise ValueError("`store.schema` is a PostgreSQL schema: give it with `store.url` "
                             "(a DuckDB file, `store.path`, has none)")
        if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", schema):
            raise ValueError("a schema name is lowercase letters, digits and `_`, starting "
                             "with a letter or `_`, at most 63 characters (e.g. shop_monitor)")
        return schema

    def target(self, base: Path) -> Any:
        """Where :func:`evalharness.monitor.store.connect` finds the store: the DuckDB file
        (relative to ``base``, the monitor file's folder) or the PostgreSQL schema."""
        from evalharness.monitor.store import PostgresTarget

        if self.url is not None:
            return PostgresTarget(self.url, self.schema_name or "public")
        rel = Path(self.path or "monitor.duckdb")
        return rel if rel.is_absolute() else Path(os.path.normpath(base / rel))


class FeedbackSpec(_Strict):
    """Users' feedback read from a file (docs/monitor.md, "Users' feedback")."""

    path: str | None = None
    """A JSONL file of feedback records, relative to the monitor file."""
    key: str = "trace_id"
    """What a record's key names: ``trace_id``, or a trace attribute (``session.id``)."""
    wait: str = "24h"
    """How long feedback waits for its trace, as a span (``90m``, ``24h``, ``7d``): a record
    the store cannot join although it holds traffic that started this much later is for an
    unknown trace (refused by ``feedback add`` and the endpoint; counted by the report)."""

    _wait_is_a_span = field_validator("wait")(classmethod(lambda cls, v: _a_span(v)))

    @property
    def wait_span(self) -> timedelta:
        """``wait`` as a :class:`~datetime.timedelta`."""
        return parse_span(self.wait)  # type: ignore[return-value]


class DriftSpec(_Strict):
    """The drift check (docs/monitor.md, "Drift alarms")."""

    recent: str = "1d"
    """The window checked, a span back from the newest trace's hour (``24h``, ``1d``)."""
    baseline: str = "7d"
    """The window it is compared with: this span directly before ``recent``."""
    q: float = Field(default=0.05, gt=0, lt=1)
    """The false discovery rate over one check's tests (Benjamini–Hochberg)."""
    min_n: int = Field(default=20, ge=2)
    """Fewer values (verdicts, traces) in either window: the test is skipped, saying so."""
    enabled: bool = True
    """``false``: no check, no alarm, no exit code 5."""
    exclude: list[str] = Field(default_factory=list)
    """Metrics the check leaves out, by name (``latency_ms``) or as ``component.metric``:
    ones too noisy to alarm on (latency measured on a loaded machine), so they neither alarm
    nor enter the false-discovery family."""

    _spans = field_validator("recent", "baseline")(classmethod(lambda cls, v: _a_span(v)))


class QueueSpec(_Strict):
    """The queue between intake and evaluation (docs/monitor.md, "Running it as a service")."""

    max: int = Field(default=10_000, ge=1)
    """Sampled traces waiting for evaluation at most. At the bound, intake takes no new trace
    from the sources (back-pressure: they stay there, not even decided, and are taken once
    evaluation has made room)."""
    retry: str = "30s"
    """The wait before evaluation tries again after the judge could not answer (connection
    refused, timeouts, HTTP 429 or 5xx after the judge's own retries); doubled at each failure
    in a row up to ``max_retry``."""
    max_retry: str = "10m"
    """The longest wait between two tries while the judge stays down."""

    _spans = field_validator("retry", "max_retry")(classmethod(lambda cls, v: _a_span(v)))

    @property
    def retry_span(self) -> timedelta:
        return parse_span(self.retry)  # type: ignore[return-value]

    @property
    def max_retry_span(self) -> timedelta:
        return parse_span(self.max_retry)  # type: ignore[return-value]


class BudgetSpec(_Strict):
    """The judge's daily budget (docs/monitor.md, "The judge's budget"). A day is a UTC
    calendar day; what a day spent is summed over the traces evaluated that day."""

    judge_requests_per_day: int | None = Field(default=None, ge=0)
    """Requests to an LLM judge a day (the offline heuristic judge sends none)."""
    judge_cost_per_day: float | None = Field(default=None, ge=0)
    """The judge's cost a day, in the currency of ``judge.prices`` (which it needs)."""
    soften_at: float = Field(default=0.5, ge=0, lt=1)
    """The share of the day's budget from which sampling slows down: the rate is scaled by
    the share of the rest of the budget still unspent (1 at ``soften_at``, 0 at the budget),
    so spending approaches the budget without a cliff. At the budget nothing more is sent to
    the judge that day: sampled traces wait in the queue for the next day."""

    @property
    def enabled(self) -> bool:
        return self.judge_requests_per_day is not None or self.judge_cost_per_day is not None


class RedactSpec(_Strict):
    """What of users' data the store keeps."""

    user_ids: Literal["hash", "drop", "keep"] = "hash"
    """``hash``: a salted SHA-256 (the salt is kept in the store: one user's traces still
    group together); ``drop``: not stored; ``keep``: as recorded."""
    texts: Literal["keep", "drop"] = "keep"
    """``drop``: questions, answers, SQL rows, chunk texts and contexts are not stored (the
    metrics are computed before; the stored trace keeps ids, routes, SQL, timings, tokens)."""


class MonitorFile(_Strict):
    """MONITOR.yaml as written."""

    scenario: str
    """The scenario whose pipeline, trace mapping (``traces:``), judge and evaluators are
    reused; relative to the monitor file."""
    name: str | None = None
    """A name for reports; default: the scenario's name."""
    sources: list[str] = Field(min_length=1)
    """Files, folders (every complete file, as ``traces receive`` writes them) or globs of
    span exports; relative to the monitor file."""
    sampling: Sampling = Field(default_factory=Sampling)
    """Which traces are evaluated."""
    store: StoreSpec = Field(default_factory=StoreSpec)
    """The store."""
    feedback: FeedbackSpec = Field(default_factory=FeedbackSpec)
    """Users' feedback read from a file."""
    evaluators: dict[str, list[str | dict[str, Any]]] | None = None
    """Per component, evaluators replacing the scenario's (same syntax); only their
    reference-free metrics are computed."""
    drift: DriftSpec = Field(default_factory=DriftSpec)
    """The drift check after every pass and in every report."""
    alerts: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Alert senders by name (``webhook``, or a plugin's) and their settings: each alarm is
    sent once when it starts firing and once when it resolves."""
    windows: list[Window] = Field(default_factory=lambda: ["hour", "day"])
    """The report's time windows."""
    redact: RedactSpec = Field(default_factory=RedactSpec)
    """What of users' data the store keeps."""
    batch_size: int = Field(default=50, ge=1, le=10_000)
    """Traces evaluated and stored in one transaction."""
    queue: QueueSpec = Field(default_factory=QueueSpec)
    """The queue between intake and evaluation."""
    budget: BudgetSpec = Field(default_factory=BudgetSpec)
    """The judge's daily budget."""


NESTED: dict[tuple, type[BaseModel]] = {
    (): MonitorFile, ("sampling",): Sampling, ("store",): StoreSpec,
    ("feedback",): FeedbackSpec, ("redact",): RedactSpec, ("drift",): DriftSpec,
    ("queue",): QueueSpec, ("budget",): BudgetSpec}
"""The model of each mapping of the file, for listing the valid keys in an error."""


@dataclass
class Monitor:
    """A validated MONITOR.yaml, its scenario loaded and its paths resolved."""

    path: Path
    spec: MonitorFile
    scenario: Scenario
    traces: TracesSpec
    """The scenario's ``traces:`` block: the format and the mapping the sources are read
    with."""
    mapping: MappingSpec | None
    """The mapping, resolved from the scenario (``None``: the preset is guessed)."""
    sources: list[Path]
    """Each source resolved (a file, a folder or a glob)."""
    store_path: Any
    """The store's target (:data:`evalharness.monitor.store.Target`): the DuckDB file's path,
    or a :class:`~evalharness.monitor.store.PostgresTarget` (``store: {url: …}``)."""
    feedback_path: Path | None
    lines: dict = field(default_factory=dict)
    senders: list[tuple[str, Any, Any]] = field(default_factory=list)
    """``alerts:`` resolved: each sender's name, its ``send`` and its validated settings."""

    @property
    def name(self) -> str:
        return self.spec.name or self.scenario.name

    def growing(self, source: Path) -> bool:
        """Whether ``source`` may still grow (a folder or a glob): its traces whose root span
        has not arrived are left for the next pass."""
        return source.is_dir() or is_glob(str(source))

    def where(self, loc: tuple) -> str:
        line = line_of(loc, self.lines)
        return f"{self.path}" + (f", line {line}" if line else "") + \
            f", field `{format_path(loc)}`"


def _error(path: Path, lines: dict, loc: tuple, message: str) -> ScenarioError:
    """The error of a field; a value repeated in it is redacted (a store URL's password
    would otherwise land in CI logs)."""
    line = line_of(loc, lines)
    return ScenarioError(f"{path}" + (f", line {line}" if line else "")
                         + (f", field `{format_path(loc)}`" if loc else "")
                         + f": {redact(message)}")


def _hint(loc: tuple, message: str, value: Any) -> str:
    if message == "unknown field":
        owner = NESTED.get(tuple(loc[:-1]))
        if owner is None and len(loc) == 3 and loc[:2] == ("sampling", "always"):
            owner = Rule
        if owner is not None:
            where = "top-level keys" if len(loc) == 1 else f"keys of `{format_path(loc[:-1])}`"
            return f"; valid {where}: {', '.join(f.alias or n for n, f in owner.model_fields.items())}"
        return ""
    return "" if message == "required field is missing" else f" (got {short(value)})"


def read_monitor_file(path: Path) -> tuple[MonitorFile, dict]:
    """The file validated as a :class:`MonitorFile`, and its lines per field path."""
    problem = not_a_file(path)
    if problem is not None:
        hint = ("give the path to a MONITOR.yaml, e.g. scenarios/shop-monitor.yaml"
                if problem in ("does not exist", "is a directory") else file_hint(problem))
        raise ScenarioError(f"monitor file {str(path)!r} {problem}; {hint}")
    text = path.read_bytes().decode("utf-8", errors="replace")
    try:
        data, lines = load_yaml_with_lines(text)
    except yaml.YAMLError as exc:
        raise ScenarioError(yaml_problem(path, text, exc)) from None
    if not isinstance(data, dict):
        raise _error(path, lines, (), "a monitor file is a YAML mapping with at least "
                     "`scenario` and `sources`")
    try:
        return MonitorFile.model_validate(data), lines
    except ValidationError as exc:
        loc, message, value = best_error(exc, data)
        raise _error(path, lines, loc, f"{message}{_hint(loc, message, value)}") from None


def load_monitor(path: str | Path) -> Monitor:
    """Read and validate MONITOR.yaml and load its scenario; :class:`ScenarioError` (exit 2)
    on the first problem, naming the file, the line and the field."""
    path = Path(path)
    spec, lines = read_monitor_file(path)
    base = path.parent

    def resolve(rel: str) -> Path:
        return Path(rel) if Path(rel).is_absolute() else Path(os.path.normpath(base / rel))

    scenario_path = resolve(spec.scenario)
    if not_a_file(scenario_path) is not None:
        raise _error(path, lines, ("scenario",), f"scenario file {spec.scenario!r} "
                     f"{not_a_file(scenario_path)} (looked for {scenario_path}); paths are "
                     "relative to the monitor file")
    try:
        scenario = load_scenario(scenario_path)
    except EvalHarnessError as exc:
        lead = _error(path, lines, ("scenario",), "the scenario it names does not load")
        raise ScenarioError(f"{lead}: {exc}") from None
    recorded = scenario.spec.traces
    if recorded is None:
        raise _error(path, lines, ("scenario",), f"the scenario {spec.scenario!r} has no "
                     "`traces:` block, so the monitor does not know how to map spans onto its "
                     "pipeline; give it `traces: {path: SAMPLE, mapping: PRESET-OR-FILE}` "
                     "(docs/traces.md) — a scenario that runs a `system:` cannot be monitored")
    traces = recorded if isinstance(recorded, TracesSpec) else TracesSpec(path=recorded)
    if scenario.trace_source.get("format") == "evalharness" or traces.format == "evalharness":
        raise _error(path, lines, ("scenario",), f"the scenario {spec.scenario!r} reads our "
                     "own trace JSONL, which has no spans to map; the monitor reads span "
                     "exports: give the scenario `traces: {path, mapping}` over an export "
                     "(docs/traces.md)")
    mapping = mapping_spec(traces.mapping, base=scenario.base, source=scenario.path,
                           lines=scenario.lines, prefix=("traces", "mapping"))
    sources: list[Path] = []
    for i, rel in enumerate(spec.sources):
        p = resolve(rel)
        if not is_glob(rel) and not p.exists():
            raise _error(path, lines, ("sources", i), f"source {rel!r} does not exist "
                         f"(looked for {p}); give a file, a folder or a glob of span exports, "
                         "relative to the monitor file")
        sources.append(p)
    feedback = resolve(spec.feedback.path) if spec.feedback.path else None
    monitor = Monitor(path=path, spec=spec, scenario=scenario, traces=traces, mapping=mapping,
                      sources=sources, store_path=spec.store.target(base),
                      feedback_path=feedback, lines=lines)
    if spec.evaluators is not None:
        monitor.scenario = _with_evaluators(monitor)
    if spec.budget.judge_cost_per_day is not None and not scenario.spec.judge.prices:
        raise _error(path, lines, ("budget", "judge_cost_per_day"), "a cost budget needs the "
                     "judge's prices: give the scenario's judge `prices: {MODEL: {input, "
                     "output}}` (per million tokens), or budget requests with "
                     "`judge_requests_per_day`")
    monitor.senders = _senders(monitor)
    return monitor


def _senders(monitor: Monitor) -> list[tuple[str, Any, Any]]:
    """``alerts:``: each sender registered by a plugin (the scenario's), its settings valid."""
    host = monitor.scenario.host
    out = []
    for name, settings in monitor.spec.alerts.items():
        sender = host.alert_sender(name)
        if sender is None:
            known = ", ".join(sorted(host.registry.alert_senders)) or "none"
            raise _error(monitor.path, monitor.lines, ("alerts", name),
                         f"no plugin registers the alert sender {name!r}; registered: {known} "
                         "(a plugin adds one with the register_alert_senders hook)")
        try:
            out.append((name, sender.send, sender.settings.model_validate(settings or {})))
        except ValidationError as exc:
            where, message, _ = best_error(exc, settings or {})
            raise _error(monitor.path, monitor.lines, ("alerts", name, *where),
                         f"{message}; valid keys of `alerts.{name}`: "
                         f"{', '.join(sender.settings.model_fields)}") from None
    return out


def _with_evaluators(monitor: Monitor) -> Scenario:
    """The scenario with the monitor's ``evaluators:`` in place of its own (validated as a
    scenario's are; problems name the monitor file)."""
    import dataclasses

    from evalharness.scenario import Problems, configure_evaluators

    scenario = monitor.scenario
    spec = scenario.spec.model_copy(update={"evaluators": monitor.spec.evaluators})
    problems = Problems(monitor.path, monitor.lines)
    configured = configure_evaluators(spec, scenario.pipeline, scenario.host, problems)
    return dataclasses.replace(scenario, spec=spec, evaluators=configured)
