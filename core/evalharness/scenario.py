"""Scenario files: load, validate everything before anything runs, resolve paths and plugins.

A scenario is one YAML file (``yaml.safe_load`` semantics). Every problem is reported as one
paragraph naming the file, the line, the field path, and what would be valid.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
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

import evalharness.jsonlimits as jsonlimits
from evalharness.context import file_hint, file_sha256, not_a_file, read_records
from evalharness.declarations import Metric, describe_cases, matches, resolve, undeclared
from evalharness.errors import EvalHarnessError, PluginError, ScenarioError
from evalharness.importing import is_path, module_sources, path_sources
from evalharness.judge.base import JudgeConfig
from evalharness.locate import (
    best_error,
    format_path,
    line_of,
    load_yaml_with_lines,
    short,
    yaml_problem,
)
from evalharness.models import BUILTIN_STEPS, Case, Trace
from evalharness.pipeline import SHOP_PIPELINE, ComponentSpec, Pipeline
from evalharness.plugins import PluginHost, load_plugins
from evalharness.review.labels import read as read_labels
from evalharness.review.names import CHUNK, STATS, split_gate_metric
from evalharness.spans.paths import is_glob, trace_files


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


DEFAULT_SYSTEM_TIMEOUT_S = 300.0
"""Default of ``system.timeout_s``: a case that takes five minutes is a hung case."""

DEFAULT_MAX_ERROR_RATE = 0.05
"""Default of a gate's ``max_error_rate``."""

DEFAULT_MAX_DETAILS_BYTES = 200_000
"""Default of ``max_details_bytes``."""


class GateSpec(_Strict):
    """A gate in its mapping form, with its own error-rate limit."""

    gate: str
    """The condition, ``component.metric OP number``."""

    max_error_rate: float = Field(default=DEFAULT_MAX_ERROR_RATE, ge=0, le=1)
    """The largest share of the metric's cases that may be errors for the gate to pass."""


class RepeatSpec(_Strict):
    """``repeat:`` — each case run several times (docs/repeat.md); ``repeat: 5`` is short for
    ``repeat: {n: 5}``."""

    n: int = Field(ge=1, le=1000, strict=True)
    """How many times each case runs (1: once, as without ``repeat:``)."""

    judge: Literal["cached", "fresh"] = "cached"
    """``cached``: an answer the judge has judged before (in an earlier repeat, or an earlier
    run) is not judged again, so the repeats measure the system's variance only;
    ``fresh``: every repeat asks the judge anew (the repeat is part of the judge cache key),
    so they measure the judge's variance too, at N times the judge's cost."""

    @model_validator(mode="before")
    @classmethod
    def _short(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            return {"n": value}
        return value


class TracesSpec(_Strict):
    """Where recorded traces come from, and how their spans map onto the pipeline."""

    path: str
    """The file, a folder (every complete file in it, in name order: what ``evalharness
    traces receive`` writes), or a glob (``received/*.jsonl``); relative to the scenario
    file."""

    format: str | None = None
    """``evalharness`` (our trace JSONL, or a run's results.jsonl), or a span format
    (``otlp-json``, ``otel-console``, ``otlp-proto``, ``phoenix``, ``langfuse``,
    ``langsmith``); default: recognised from each file's content."""

    mapping: str | dict[str, Any] | None = None
    """How spans become component steps: a mapping file (YAML, relative to the scenario
    file), a preset's name, or the mapping inline; default: the preset guessed from the
    spans' instrumentation."""

    join: Literal["key", "question"] | None = None
    """How a trace finds its case: by the mapping's ``join`` value (a trace attribute,
    session id, tag or metadata equal to the case id), or by the normalised question text;
    default: ``key`` when the mapping extracts one, else ``question``."""


class SystemSpec(_Strict):
    """The system under test as a Python callable."""

    callable: str
    """``module:function`` or ``path/to/file.py:function`` (relative to the scenario file)."""

    options: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments passed to the callable with each case (checked against its
    parameters before the run starts)."""

    timeout_s: float | None = Field(default=DEFAULT_SYSTEM_TIMEOUT_S, gt=0)
    """Seconds the system may take for one case; past it the case is recorded as a timeout
    error and the run goes on (a synchronous call is abandoned in its thread, an async one is
    cancelled). ``null``: no limit."""

    headroom: bool | int = True
    """After the run, rerun the cases that failed end to end with each component's output
    replaced by its gold, when the callable accepts ``overrides`` (oracle headroom, see
    docs/bottleneck.md): ``true`` reruns up to 1000 failed cases (a seeded sample of them
    stratified by gold route beyond that), a number sets that limit, ``false`` (or 0) skips it (so does
    ``--no-headroom``)."""

    @field_validator("headroom", mode="before")
    @classmethod
    def _headroom(cls, value: Any) -> bool | int:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value >= 0:
            return value if value else False
        raise ValueError("expected true, false, or the most failed cases to rerun (a whole "
                         "number >= 0)")


class DatabaseSpec(_Strict):
    """The scenario's database."""

    engine: Literal["sqlite", "duckdb", "postgresql"] = "sqlite"
    """Database engine: ``sqlite`` (built in), ``duckdb`` or ``postgresql`` (optional extras
    ``evalharness[duckdb]`` / ``evalharness[postgresql]``)."""

    path: str | None = None
    """Database file (SQLite or DuckDB). A SQLite file is built from ``build`` when it does not
    exist yet."""

    build: str | None = None
    """A SQL script that builds a SQLite database; without ``path`` the database is built into
    the run's output folder."""

    dsn: str | None = None
    """Connection string of a PostgreSQL database (queries run in read-only transactions)."""

    dialect: str | None = None
    """SQL dialect of the gold and predicted queries (a sqlglot dialect name); default: the
    engine's (``sqlite``, ``duckdb``, ``postgres``)."""

    @model_validator(mode="after")
    def _where(self) -> DatabaseSpec:
        if self.engine == "postgresql":
            if not self.dsn:
                raise ValueError("a postgresql database needs `dsn`, e.g. "
                                 "postgresql://reader@localhost/shop")
        elif self.dsn:
            raise ValueError(f"`dsn` is for postgresql; a {self.engine} database takes `path`")
        elif self.engine == "duckdb":
            if not self.path or self.build:
                raise ValueError("a duckdb database takes `path` to an existing file "
                                 "(`build:` scripts make SQLite databases)")
        elif not self.path and not self.build:
            raise ValueError("give `path` (a SQLite file), `build` (a SQL script), or both")
        if self.dialect is None:
            self.dialect = {"sqlite": "sqlite", "duckdb": "duckdb",
                            "postgresql": "postgres"}[self.engine]
        return self


class ScenarioFile(_Strict):
    """The scenario file's keys (see docs/scenario.md)."""

    name: str = Field(min_length=1)
    """Short name of the scenario; used in report titles and default output folders."""

    description: str = ""
    """What the scenario evaluates."""

    cases: str | list[Case] | None = None
    """A JSONL file of cases (relative to the scenario file), or the cases inline. Required
    to run; ``evalharness synth`` reads a scenario without it (it writes the cases)."""

    system: str | SystemSpec | None = None
    """The system under test: ``module:function``, ``file.py:function``, or a mapping with
    ``callable`` and ``options``. Exactly one of ``system`` and ``traces`` (neither, for
    ``evalharness synth``)."""

    traces: str | TracesSpec | None = None
    """Recorded traces instead of a system: a JSONL file of our traces (or a previous run's
    ``results.jsonl``), or ``{path, format, mapping, join}`` for spans exported by
    OpenTelemetry/OpenInference, Langfuse or LangSmith (docs/traces.md); the path may be a
    folder or a glob of such files."""

    database: DatabaseSpec | None = None
    """The database text-to-SQL runs against."""

    corpus: str | None = None
    """A JSONL file of chunks ``{"id", "text", ...}`` the retriever searches."""

    judge: JudgeConfig = Field(default_factory=JudgeConfig)
    """The judge used by evaluators that need one (default: the offline heuristic judge)."""

    pipeline: dict[str, ComponentSpec] | None = None
    """The pipeline graph; default: router -> text2sql | retriever -> generator."""

    evaluators: dict[str, list[str | dict[str, dict[str, Any] | None]]] = Field(
        default_factory=dict)
    """Component name -> evaluators to run, each a name or ``{name: {setting: value}}``."""

    gates: list[str | GateSpec] = Field(default_factory=list)
    """Conditions the run must meet, e.g. ``retriever.recall@5 >= 0.8``; a gate also fails
    when more than 5% of its metric's cases are errors (``{gate: ..., max_error_rate: 0.1}``
    sets that per gate)."""

    labels: str | list[str] | None = None
    """People's labels (a ``labels.jsonl`` of ``evalharness review``, or several): the report
    then measures how far the judge agrees with them (docs/review.md), and gates may name
    ``agreement.COMPONENT.METRIC.STAT``, e.g. ``agreement.generator.faithfulness.kappa >=
    0.6``."""

    verdicts: dict[str, str | list[str]] = Field(default_factory=dict)
    """Component name (or ``end_to_end``) -> the criterion, or list of criteria that must all
    hold, of its per-case verdict, e.g. ``recall@5 >= 0.8``; ``end_to_end`` takes
    ``component.metric OP number``. Components left out get their kind's default; ``[]`` gives
    a component no verdict (docs/bottleneck.md)."""

    plugins: list[str] = Field(default_factory=list)
    """Local plugin files to load, relative to the scenario file."""

    repeat: RepeatSpec | None = None
    """Run each case this many times (``repeat: 5``, or ``{n: 5, judge: fresh}``): each case
    is then reported with its values reduced over the repeats and their spread, its
    intervals by a bootstrap over cases, and the cases whose verdict flips as flaky
    (docs/repeat.md). ``--repeat N`` on the command line overrides it."""

    concurrency: int = Field(default=4, ge=1, le=256, strict=True)
    """How many cases the system handles at once."""

    batch_size: int = Field(default=32, ge=1, strict=True)
    """How many finished cases are evaluated together."""

    max_details_bytes: int = Field(default=DEFAULT_MAX_DETAILS_BYTES, ge=1000, strict=True)
    """Largest evidence (``details``) one metric value may store, in bytes of JSON; longer
    texts and lists in it are cut, and the value says so (``details.truncated``)."""

    @model_validator(mode="after")
    def _one_source(self) -> ScenarioFile:
        if self.system is not None and self.traces is not None:
            raise ValueError(
                "give exactly one of `system` (a callable to run) and `traces` (a JSONL file "
                "of recorded traces)"
            )
        return self


GATE_RE = re.compile(
    r"^\s*(?P<component>[A-Za-z_][\w-]*)\.(?P<metric>[^\s<>=!]+)\s*"
    r"(?P<op>>=|<=|==|>|<)\s*(?P<threshold>[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?)\s*$"
)


@dataclass(frozen=True)
class Gate:
    """A parsed gate: ``component.metric OP threshold``."""

    name: str
    component: str
    metric: str
    op: str
    threshold: float
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE

    def check(self, value: float | None) -> bool:
        if value is None:
            return False
        return {
            ">=": value >= self.threshold,
            "<=": value <= self.threshold,
            ">": value > self.threshold,
            "<": value < self.threshold,
            "==": value == self.threshold,
        }[self.op]


END_TO_END = "end_to_end"
"""The key of the end-to-end criterion under ``verdicts:``."""


def parse_criterion(text: str, component: str) -> Gate | None:
    """Parse a verdict criterion ``metric OP number`` of ``component`` (the gate syntax with the
    component implied; ``component.metric OP number`` is accepted too); ``None`` if it does not
    have that shape. The criterion's name is the text as written.

    >>> parse_criterion("recall@5 >= 0.8", "retriever")
    Gate(name='recall@5 >= 0.8', component='retriever', metric='recall@5', op='>=', threshold=0.8, max_error_rate=0.05)
    >>> parse_criterion("retriever.recall@5 >= 0.8", "retriever").metric
    'recall@5'
    >>> parse_criterion("recall@5 is high", "retriever") is None
    True
    """
    if not isinstance(text, str):
        return None
    gate = parse_gate(text)
    if gate is None or gate.component != component:
        gate = parse_gate(f"{component}.{text.strip()}")
    if gate is None:
        return None
    return Gate(text.strip(), gate.component, gate.metric, gate.op, gate.threshold)


def parse_gate(text: str) -> Gate | None:
    """Parse ``component.metric OP number``; ``None`` if it does not have that shape.

    >>> parse_gate("retriever.recall@5 >= 0.8")
    Gate(name='retriever.recall@5 >= 0.8', component='retriever', metric='recall@5', op='>=', threshold=0.8, max_error_rate=0.05)
    >>> parse_gate("recall >= high") is None
    True
    """
    m = GATE_RE.match(text)
    if not m:
        return None
    return Gate(text.strip(), m["component"], m["metric"], m["op"], float(m["threshold"]))


@dataclass
class ConfiguredEvaluator:
    """An evaluator as configured on one component of a scenario."""

    component: str
    name: str
    plugin: str
    settings: BaseModel
    metrics: list[str]
    evaluator: Any  # registry.Evaluator
    run_metrics: list[str] = field(default_factory=list)
    """Its run-level metrics (one value per run; see ``Evaluator.run_metrics``)."""
    budget_s: float | None = None
    """Seconds it may spend per case (the core's ``budget_s`` setting, any evaluator)."""
    added: str | None = None
    """Why the core added it although the scenario does not list it (``None``: listed)."""
    declarations: dict[str, Metric] = field(default_factory=dict)
    """Every metric it produces (per case and per run) -> its declaration."""
    where: tuple = ()
    """Its field path in the scenario file (``evaluators``, component, index, name)."""

    def declaration(self, metric: str) -> Metric:
        """The declaration of one of its metrics (a bare one when the plugin gave none)."""
        found = self.declarations.get(metric)
        return found if found is not None else undeclared(metric)


@dataclass
class Scenario:
    """A validated scenario with every path resolved and every plugin loaded."""

    path: Path
    sha256: str
    spec: ScenarioFile
    cases: list[Case]
    host: PluginHost
    pipeline: Pipeline
    evaluators: list[ConfiguredEvaluator]
    gates: list[Gate]
    verdicts: dict[str, list[Gate]] = field(default_factory=dict)
    """The ``verdicts:`` block, validated: component (or ``end_to_end``) -> its criteria."""
    labels: list[Path] = field(default_factory=list)
    """The ``labels:`` files, resolved and readable."""
    agreement_gates: list[Gate] = field(default_factory=list)
    """The gates on the agreement with people (``agreement.COMPONENT.METRIC.STAT``)."""
    inputs_sha256: str = ""
    traces: dict[str, Trace] | None = None
    system: SystemSpec | None = None
    database_path: Path | None = None
    database_build: Path | None = None
    corpus_path: Path | None = None
    plugin_files: list[Path] = field(default_factory=list)
    lines: dict = field(default_factory=dict)
    """Field path -> line of the scenario file, for errors found after loading."""
    input_digests: dict[str, str] = field(default_factory=dict)
    """Input file -> its sha256 (what ``inputs_sha256`` combines), to name what changed."""
    trace_source: dict = field(default_factory=dict)
    """Where recorded traces came from and how they matched the cases (``traces``,
    ``matched``, ``without_case`` and their ids, ``cases_without_trace``, the format and the
    mapping); empty for a system."""
    trace_notes: dict = field(default_factory=dict)
    """Case id -> what mapping its recorded spans found ambiguous, missing or redacted (added
    to the case result's warnings)."""
    selection: dict = field(default_factory=dict)
    """How ``cases`` were chosen from the file's (:meth:`evalharness.sampling.Chosen.record`);
    empty when nothing chose: every case."""

    def where(self, loc: tuple) -> str:
        """``file, line N, field `x.y``` for an error found after loading."""
        line = line_of(loc, self.lines)
        return (f"{self.path}" + (f", line {line}" if line else "")
                + f", field `{format_path(loc)}`")

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def base(self) -> Path:
        return self.path.parent

    def evaluators_on(self, component: str) -> list[ConfiguredEvaluator]:
        return [e for e in self.evaluators if e.component == component]

    @property
    def repeats(self) -> int:
        """How many times each case runs (1 without ``repeat:``)."""
        return self.spec.repeat.n if self.spec.repeat is not None else 1

    @property
    def repeated(self) -> bool:
        """Whether the run's results are repeats (``repeat:`` given, even ``n: 1``: then each
        line still records its repeat)."""
        return self.spec.repeat is not None


def with_repeat(scenario: Scenario, n: int | None, judge: str | None = None) -> Scenario:
    """The scenario with ``repeat:`` set from the command line (``--repeat N``,
    ``--repeat-judge``); unchanged when neither is given."""
    if n is None and judge is None:
        return scenario
    current = scenario.spec.repeat
    if n is None and current is None:
        raise ScenarioError(f"--repeat-judge {judge} needs repeats: give --repeat N too, or "
                            f"`repeat:` in {scenario.path}")
    try:
        spec = RepeatSpec(n=n if n is not None else current.n,  # type: ignore[union-attr]
                          judge=judge or (current.judge if current is not None else "cached"))
    except ValidationError as exc:
        raise ScenarioError(f"--repeat: {exc.errors()[0]['msg']} (give a whole number from 1 "
                            "to 1000; --repeat-judge cached or fresh)") from None
    return replace(scenario, spec=scenario.spec.model_copy(update={"repeat": spec}))


class Problems:
    """Formats problems at a field path of the scenario file as one paragraph; resolves paths
    relative to the scenario file."""

    def __init__(self, path: Path, lines: dict) -> None:
        self.path = path
        self.lines = lines
        self.base = path.parent

    def error(self, loc: tuple, message: str) -> ScenarioError:
        line = line_of(loc, self.lines)
        where = f"{self.path}" + (f", line {line}" if line else "")
        return ScenarioError(f"{where}, field `{format_path(loc)}`: {message}")

    def resolve(self, rel: str) -> Path:
        """``rel`` relative to the scenario file (an absolute path as it is)."""
        return Path(rel) if Path(rel).is_absolute() else (self.base / rel).resolve()

    def must_exist(self, loc: tuple, rel: str, what: str, folder_ok: bool = False) -> Path:
        """``rel`` resolved, checked to be a file (or, ``folder_ok``, a folder)."""
        p = self.resolve(rel)
        problem = not_a_file(p)
        if problem is None or (folder_ok and problem == "is a directory"):
            return p
        if problem == "is a directory":
            raise self.error(loc, f"{what} {rel!r} is a directory ({p}); give a file")
        if problem == "does not exist":
            raise self.error(loc, f"{what} {rel!r} does not exist (looked for {p}); paths "
                             "are relative to the scenario file")
        raise self.error(loc, f"{what} {rel!r} {problem} (looked at {p}); "
                         f"{file_hint(problem)}")


def load_scenario(
    path: str | Path,
    *,
    extra_plugins: list[str | Path] = (),
    judge_backend: str | None = None,
    judge_overrides: dict[str, Any] | None = None,
    host: PluginHost | None = None,
    purpose: Literal["run", "synth"] = "run",
) -> Scenario:
    """Read and validate a scenario file; raise :class:`ScenarioError` on the first problem.

    ``purpose="synth"`` reads a scenario for ``evalharness synth``: ``cases`` (written by
    synth) and ``system``/``traces`` may be missing; everything present is checked as for a
    run. The steps, in the order their problems are reported: the file, the plugins (names
    of evaluators, component kinds and judge backends depend on them), the cases, the system
    or the traces file, the resources, the judge, the pipeline, the evaluators, the gates,
    the verdict criteria, the labels, the recorded traces, the inputs' digests.
    """
    path = Path(path)
    raw, spec, problems = _read(path)
    plugin_files = _plugin_files(spec, extra_plugins, problems)
    if host is None:
        host = load_plugins(plugin_files)
    cases = _cases(spec, purpose, problems)
    system, recorded, trace_paths = _system_or_traces(spec, problems)
    db_path, db_build, corpus_path = _resources(spec, problems)
    spec.judge = _judge(spec, host, judge_backend, judge_overrides, problems)
    pipeline = _pipeline(spec, host, problems)
    configured = configure_evaluators(spec, pipeline, host, problems)
    _needs_llm(configured, spec.judge, host, problems)
    configured += _automatic_evaluators(cases, pipeline, host, configured)
    gates, agreement_gates = _gates(spec, pipeline, configured, problems)
    verdicts = _configure_verdicts(spec, pipeline, configured, problems)
    label_files = _label_files(spec, problems)
    traces = None
    trace_source: dict[str, Any] = {}
    trace_notes: dict[str, list[str]] = {}
    mapping_file = None
    if recorded is not None:
        traces, trace_source, mapping_file = _recorded_traces(
            recorded, trace_paths, pipeline, cases, problems, problems.resolve, host,
            trace_notes)
    inputs = [p for p in (*plugin_files, db_build, corpus_path) if p is not None]
    if isinstance(spec.cases, str):
        inputs.append(problems.resolve(spec.cases))
    inputs += [*trace_paths, *([mapping_file] if mapping_file is not None else [])]
    if system is not None:
        target = system.callable.rsplit(":", 1)[0]
        inputs += (path_sources(problems.resolve(target)) if is_path(target)
                   else module_sources(target, path.parent))
    digests = _digests(raw, path, inputs, db_path)
    return Scenario(
        path=path, sha256=hashlib.sha256(raw).hexdigest(), spec=spec, cases=cases, host=host,
        inputs_sha256=_combined(digests), input_digests=digests, lines=problems.lines,
        pipeline=pipeline, evaluators=configured, gates=gates, verdicts=verdicts,
        traces=traces, trace_source=trace_source, trace_notes=trace_notes, system=system,
        database_path=db_path, database_build=db_build, corpus_path=corpus_path,
        plugin_files=plugin_files, labels=label_files, agreement_gates=agreement_gates,
    )


def _read(path: Path) -> tuple[bytes, ScenarioFile, Problems]:
    """The file's bytes, its content validated as a :class:`ScenarioFile`, and the problem
    formatter that knows its lines."""
    problem = not_a_file(path)
    if problem == "does not exist":
        raise ScenarioError(f"scenario file {str(path)!r} does not exist; give the path to a "
                            "YAML scenario, e.g. scenarios/shop.yaml")
    if problem == "is a directory":
        raise ScenarioError(f"scenario file {str(path)!r} is a directory; give the path to a "
                            "YAML scenario, e.g. scenarios/shop.yaml")
    if problem is not None:
        raise ScenarioError(f"scenario file {str(path)!r} {problem}; {file_hint(problem)}")
    raw = path.read_bytes()
    try:
        data, lines = load_yaml_with_lines(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ScenarioError(f"{path}: not UTF-8 text; a scenario is a YAML file") from None
    except yaml.YAMLError as exc:
        raise ScenarioError(yaml_problem(path, raw.decode("utf-8"), exc)) from None
    problems = Problems(path, lines)
    if not isinstance(data, dict):
        raise problems.error((), "a scenario must be a YAML mapping with at least `name`, "
                             "`cases` and `system` or `traces`")
    try:
        spec = ScenarioFile.model_validate(data)
    except ValidationError as exc:
        loc, message, value = best_error(exc, data)
        hint = _hint(loc, message, value)
        raise problems.error(loc, f"{message}{hint}") from None
    return raw, spec, problems


def _plugin_files(spec: ScenarioFile, extra: list[str | Path], problems: Problems
                  ) -> list[Path]:
    """The scenario's `plugins:` files, then the command line's ``--plugin`` files."""
    files = [problems.must_exist(("plugins", i), rel, "plugin file")
             for i, rel in enumerate(spec.plugins)]
    for rel in extra:
        p = Path(rel).resolve()
        problem = not_a_file(p)
        if problem == "does not exist":
            raise ScenarioError(f"--plugin {str(rel)!r}: file does not exist; give the path "
                                "to a .py plugin file")
        if problem is not None:
            raise ScenarioError(f"--plugin {str(rel)!r} {problem}; give the path to a .py "
                                "plugin file saved on disk")
        files.append(p)
    return files


def _cases(spec: ScenarioFile, purpose: str, problems: Problems) -> list[Case]:
    """The cases, from their JSONL file or inline (ids unique); a run needs at least one, and
    a system or traces."""
    if purpose == "run" and spec.cases is None:
        raise problems.error(("cases",), "required field is missing; give a JSONL file of "
                             "cases (`cases: cases.jsonl`) or the cases inline — no cases "
                             "yet? `evalharness synth` writes some from the corpus and the "
                             "database")
    if spec.cases is None:
        cases = []
    elif isinstance(spec.cases, str):
        cases = load_cases(problems.must_exist(("cases",), spec.cases, "cases file"))
    else:
        cases = list(spec.cases)
        seen: dict[str, int] = {}
        for i, case in enumerate(cases):
            if case.id in seen:
                raise problems.error(("cases", i, "id"), f"duplicate case id {case.id!r} (also "
                                     f"cases[{seen[case.id]}]); case ids must be unique")
            seen[case.id] = i
    if not cases and purpose == "run":
        raise problems.error(("cases",), "the scenario has no cases; add at least one")
    if purpose == "run" and spec.system is None and spec.traces is None:
        raise problems.error((), "give exactly one of `system` (a callable to run) and "
                             "`traces` (a JSONL file of recorded traces)")
    return cases


def _system_or_traces(spec: ScenarioFile, problems: Problems
                      ) -> tuple[SystemSpec | None, TracesSpec | None, list[Path]]:
    """The system to call (its target checked to exist), or the recorded traces and their
    files (one, or those of a folder or a glob)."""
    if spec.system is not None:
        system = spec.system if isinstance(spec.system, SystemSpec) else SystemSpec(
            callable=spec.system)
        loc = ("system", "callable") if isinstance(spec.system, SystemSpec) else ("system",)
        if ":" not in system.callable.strip(":"):
            raise problems.error(loc, f"{system.callable!r} is not `module:function`, "
                                 "`file.py:function` or `path/to/package:function`")
        target = system.callable.rsplit(":", 1)[0]
        if is_path(target):
            found = problems.must_exist(loc, target, "system file or package folder",
                                        folder_ok=True)
            if found.is_dir() and not (found / "__init__.py").is_file():
                raise problems.error(loc, f"{target!r} is a folder without an `__init__.py`, "
                                     "so not a package; name a `.py` file "
                                     "(`folder/module.py:function`) or a package folder")
        return system, None, []
    if spec.traces is not None:
        recorded = spec.traces if isinstance(spec.traces, TracesSpec) else TracesSpec(
            path=spec.traces)
        loc = ("traces", "path") if isinstance(spec.traces, TracesSpec) else ("traces",)
        return None, recorded, _trace_files(loc, recorded.path, problems)
    return None, None, []


def _trace_files(loc: tuple, rel: str, problems: Problems) -> list[Path]:
    """The files ``traces.path`` names: one file, or every complete file of a folder or a
    glob, in name order (:func:`evalharness.spans.paths.trace_files`)."""
    resolved = problems.resolve(rel)
    if not is_glob(rel) or resolved.exists():
        problem = not_a_file(resolved)
        if problem not in (None, "is a directory"):
            problems.must_exist(loc, rel, "traces file")  # raises, naming the problem
    try:
        return trace_files(resolved, what="traces")
    except EvalHarnessError as exc:
        raise problems.error(loc, f"{exc} (paths are relative to the scenario file)") from None


def _resources(spec: ScenarioFile, problems: Problems
               ) -> tuple[Path | None, Path | None, Path | None]:
    """The database's path and build script, and the corpus file, checked."""
    db_path = db_build = corpus_path = None
    if spec.database is not None:
        if spec.database.build:
            db_build = problems.must_exist(("database", "build"), spec.database.build,
                                           "database script")
        if spec.database.path:
            db_path = problems.resolve(spec.database.path)
            problem = not_a_file(db_path)
            if problem == "does not exist" and db_build is None:
                raise problems.error(("database", "path"), f"database {spec.database.path!r} "
                                     f"does not exist (looked for {db_path}); give an existing "
                                     "SQLite file, or a `build:` script to create it")
            if problem not in (None, "does not exist"):
                raise problems.error(("database", "path"), f"database {spec.database.path!r} "
                                     f"{problem} (looked at {db_path}); "
                                     "give a database file (or, with a `build:` script, a "
                                     "path where it may be built)")
    if spec.corpus is not None:
        corpus_path = problems.must_exist(("corpus",), spec.corpus, "corpus file")
    return db_path, db_build, corpus_path


def _judge(spec: ScenarioFile, host: PluginHost, backend: str | None,
           overrides: dict[str, Any] | None, problems: Problems) -> JudgeConfig:
    """The judge block after the command line's overrides, its cache path resolved and its
    backend registered."""
    judge = spec.judge
    if backend:
        judge = judge.model_copy(update={"backend": backend})
    if overrides:
        judge = judge.model_copy(update=overrides)
    if judge.cache:
        judge = judge.model_copy(update={"cache": str(problems.resolve(judge.cache))})
    if host.judge_backend(judge.backend) is None:
        known = ", ".join(sorted(host.registry.judge_backends))
        if backend:
            raise ScenarioError(f"--judge {backend!r}: unknown judge backend; "
                                f"registered backends: {known}")
        raise problems.error(("judge", "backend"), f"unknown judge backend "
                             f"{judge.backend!r}; registered backends: {known}")
    return judge


def _pipeline(spec: ScenarioFile, host: PluginHost, problems: Problems) -> Pipeline:
    """The pipeline graph (the shop's when not written): acyclic, every kind registered."""
    components = spec.pipeline if spec.pipeline is not None else {
        name: ComponentSpec.model_validate(c) for name, c in SHOP_PIPELINE.items()}
    if not components:
        raise problems.error(("pipeline",), "the pipeline has no components")
    cycle = Pipeline.check_acyclic(components)
    if cycle:
        raise problems.error(("pipeline",), cycle)
    pipeline = Pipeline(components)
    for loc, message in pipeline.problems(set(host.registry.component_kinds)):
        raise problems.error(("pipeline",) + loc, message)
    return pipeline


def _gates(spec: ScenarioFile, pipeline: Pipeline, configured: list[ConfiguredEvaluator],
           problems: Problems) -> tuple[list[Gate], list[Gate]]:
    """The gates on metrics, and the gates on the agreement with people."""
    gates = []
    agreement_gates: list[Gate] = []
    for i, entry in enumerate(spec.gates):
        text = entry if isinstance(entry, str) else entry.gate
        gate = parse_gate(text)
        if gate is None:
            loc = ("gates", i) if isinstance(entry, str) else ("gates", i, "gate")
            raise problems.error(loc, f"{text!r} is not a gate; write "
                                 "`component.metric OP number` with OP one of >=, <=, >, <, ==, "
                                 "e.g. `retriever.recall@5 >= 0.8`")
        if not isinstance(entry, str):
            gate = dataclasses.replace(gate, max_error_rate=entry.max_error_rate)
        if gate.component == "agreement":
            agreement_gates.append(_agreement_gate(gate, spec, pipeline, configured,
                                                   problems, i))
            continue
        if gate.component not in pipeline.components:
            raise problems.error(("gates", i), f"{gate.component!r} is not a component of the "
                                 f"pipeline; components: {', '.join(pipeline.order)}")
        produced = [m for e in configured if e.component == gate.component
                    for m in [*e.metrics, *e.run_metrics]]
        if gate.metric not in produced:
            close = difflib.get_close_matches(gate.metric, produced, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise problems.error(("gates", i), f"component {gate.component!r} has no metric "
                                 f"{gate.metric!r}; its evaluators produce: "
                                 f"{', '.join(produced) or 'nothing (configure one under `evaluators:`)'}."
                                 f"{hint}")
        gates.append(gate)
    return gates, agreement_gates


def _label_files(spec: ScenarioFile, problems: Problems) -> list[Path]:
    """The `labels:` files, each readable as labels."""
    out = []
    for i, rel in enumerate([spec.labels] if isinstance(spec.labels, str)
                            else spec.labels or []):
        loc = ("labels",) if isinstance(spec.labels, str) else ("labels", i)
        found = problems.must_exist(loc, rel, "labels file")
        try:
            read_labels(found)
        except EvalHarnessError as exc:
            raise problems.error(loc, str(exc)) from None
        out.append(found)
    return out


def _agreement_gate(gate: Gate, spec: ScenarioFile, pipeline: Pipeline,
                    configured: list[ConfiguredEvaluator], problems, i: int) -> Gate:
    """An ``agreement.COMPONENT.METRIC.STAT`` gate, checked: the scenario has ``labels:``, the
    component exists and the statistic is one the agreement report computes."""
    component, metric, stat = split_gate_metric(gate.metric)
    example = "e.g. `agreement.generator.faithfulness.kappa >= 0.6`"
    if not spec.labels:
        raise problems.error(("gates", i), f"{gate.name!r} gates on the agreement with "
                             "people, but the scenario has no `labels:`; add the labels file "
                             "of `evalharness review` (`labels: review/labels.jsonl`)")
    if not metric or not stat:
        raise problems.error(("gates", i), f"{gate.name!r}: write agreement.COMPONENT.METRIC."
                             f"STAT, {example}")
    if component not in pipeline.components:
        raise problems.error(("gates", i), f"{gate.name!r}: {component!r} is not a component "
                             f"of the pipeline; components: {', '.join(pipeline.order)}")
    if stat not in STATS:
        raise problems.error(("gates", i), f"{gate.name!r}: {stat!r} is not an agreement "
                             f"statistic; valid: {', '.join(STATS)}")
    produced = [m for e in configured if e.component == component for m in e.metrics]
    produced += list(dict.fromkeys(label for e in configured if e.component == component
                                   for m in e.metrics
                                   for label in e.declaration(m).item_labels))
    produced += [CHUNK] if pipeline.kind(component) == "retriever" else []
    if metric not in produced:
        close = difflib.get_close_matches(metric, produced, n=1)
        raise problems.error(("gates", i), f"{gate.name!r}: component {component!r} has no "
                             f"metric {metric!r} to label; its metrics: {', '.join(produced)}"
                             + (f". Did you mean {close[0]!r}?" if close else ""))
    return gate


def _hint(loc: tuple, message: str, value: Any) -> str:
    """What would be valid at ``loc``: the keys of the mapping, or the value we got."""
    if message == "unknown field":
        owner = _model_at(loc[:-1])
        if owner is not None:
            where = "top-level keys" if len(loc) == 1 else f"keys of `{format_path(loc[:-1])}`"
            return f"; valid {where}: {', '.join(owner.model_fields)}"
        return ""
    return "" if message == "required field is missing" else f" (got {short(value)})"


def _model_at(path: tuple) -> type[BaseModel] | None:
    """The scenario model that owns the mapping at ``path`` (for listing valid keys).

    >>> _model_at(("judge",)).__name__, _model_at(("pipeline", "router")).__name__
    ('JudgeConfig', 'ComponentSpec')
    """
    nested = {(): ScenarioFile, ("judge",): JudgeConfig, ("database",): DatabaseSpec,
              ("system",): SystemSpec}
    if len(path) == 2 and path[0] == "pipeline":
        return ComponentSpec
    return nested.get(tuple(path))


BUDGET = "budget_s"
"""The setting every evaluator accepts, read by the core (never by the plugin's settings
model): seconds the evaluator may spend per case (``EvalContext.budget_s``)."""


def configure_evaluators(spec: ScenarioFile, pipeline: Pipeline, host: PluginHost,
                          problems: Problems) -> list[ConfiguredEvaluator]:
    """The scenario's ``evaluators:`` checked against the pipeline and the registered
    evaluators, each with its settings validated; what is wrong is added to ``problems``
    (the monitor checks its own ``evaluators:`` override the same way)."""
    out: list[ConfiguredEvaluator] = []
    for component, entries in spec.evaluators.items():
        if component not in pipeline.components:
            raise problems.error(("evaluators", component), f"{component!r} is not a component "
                                 f"of the pipeline; components: {', '.join(pipeline.order)}")
        kind = pipeline.kind(component)
        produced: dict[str, str] = {}
        for i, entry in enumerate(entries):
            if isinstance(entry, str):
                name, raw_settings, loc = entry, {}, ("evaluators", component, i)
            else:
                if len(entry) != 1:
                    raise problems.error(("evaluators", component, i), "write one evaluator per "
                                         "list item: a name, or `{name: {setting: value}}`")
                name, raw_settings = next(iter(entry.items()))
                raw_settings = raw_settings or {}
                loc = ("evaluators", component, i, name)
            registered = host.registry.evaluator(kind, name)
            if registered is None:
                available = host.registry.evaluators_for(kind)
                close = difflib.get_close_matches(name, available, n=1)
                hint = f" Did you mean {close[0]!r}?" if close else ""
                plugins_hint = "" if len(host.plugins) > 1 else (
                    " No evaluator plugins are loaded: install evalharness (`pip install -e .` "
                    "in a checkout) so its entry points exist, or check EVALHARNESS_LOAD_PLUGINS.")
                raise problems.error(loc, f"unknown evaluator {name!r} for {kind} component "
                                     f"{component!r}; registered: "
                                     f"{', '.join(available) or 'none'}.{hint}{plugins_hint}")
            evaluator = registered.item
            raw_settings = dict(raw_settings) if isinstance(raw_settings, dict) else raw_settings
            budget = None
            if isinstance(raw_settings, dict) and BUDGET in raw_settings:
                budget = raw_settings.pop(BUDGET)
                if budget is not None and (isinstance(budget, bool) or not isinstance(
                        budget, int | float) or not 0 < budget < float("inf")):
                    raise problems.error(loc + (BUDGET,), f"expected seconds per case, a "
                                         f"number > 0 (got {short(budget)})")
            try:  # a validator may read the component it is configured on (its step's fields)
                settings = evaluator.settings.model_validate(raw_settings, context={
                    "component": component, "kind": kind,
                    "step": host.component_kind(kind).step})
            except ValidationError as exc:
                sub, message, value = best_error(exc, raw_settings)
                fields = ", ".join(evaluator.settings.model_fields) or "none"
                got = "" if message in {"required field is missing", "unknown field"} else \
                    f" (got {short(value)})"
                raise problems.error(loc + sub, f"{message}{got}; settings of evaluator "
                                     f"{name!r}: {fields}") from None
            if evaluator.needs_database and spec.database is None:
                raise problems.error(loc, f"evaluator {name!r} needs a database; add a "
                                     "`database:` block (a SQLite `path`, or a `build:` script)")
            try:
                metrics = evaluator.metric_names_with(settings)
                run_metrics = evaluator.run_metric_names(settings)
            except EvalHarnessError:
                raise
            except Exception as exc:
                raise problems.error(loc, f"evaluator {name!r} cannot name its metrics with "
                                     f"these settings: {exc}") from None
            for metric in [*metrics, *run_metrics]:
                if metric in produced:
                    raise problems.error(loc, f"metric {metric!r} is produced by both "
                                         f"{produced[metric]!r} and {name!r} on {component!r}; "
                                         "configure only one of them")
                produced[metric] = name
            try:
                declared = _declared(evaluator, metrics, run_metrics, settings)
            except PluginError as exc:
                raise problems.error(loc, str(exc)) from None
            out.append(ConfiguredEvaluator(component, name, registered.plugin, settings,
                                           metrics, evaluator, run_metrics,
                                           float(budget) if budget is not None else None,
                                           declarations=declared, where=loc))
    return out


def _needs_llm(configured: list[ConfiguredEvaluator], judge: JudgeConfig, host: PluginHost,
               problems: Problems) -> None:
    """An evaluator that needs a language model, with a judge backend that is none (the
    offline heuristic), is refused before anything runs: never a silent heuristic number."""
    backend = host.judge_backend(judge.backend)
    if backend is None or getattr(backend, "llm", True):
        return
    for e in configured:
        if e.evaluator.needs_llm:
            metrics = ", ".join(e.metrics)
            raise problems.error(e.where or ("evaluators", e.component), (
                f"evaluator {e.name!r} ({metrics}) on {e.component!r} needs a language model "
                f"to judge, and the judge backend {judge.backend!r} is none: it cannot judge "
                "a criterion written in words. Set `judge.backend: openai` with `judge.model` "
                "(and `judge.base_url` for a local server: llama.cpp, vLLM, Ollama; see "
                "docs/judge.md), or run with --judge openai"))


def _declared(evaluator: Any, metrics: list[str], run_metrics: list[str],
              settings: Any = None) -> dict[str, Metric]:
    """Each metric's declaration; a name no declaration of a declaring evaluator covers is a
    :class:`PluginError` (an evaluator that declares nothing has bare declarations)."""
    out = {}
    for scope, names in (("case", metrics), ("run", run_metrics)):
        declared = (evaluator.declared_with(settings, scope) if settings is not None
                    else evaluator.declared(scope))
        for name in names:
            found = resolve(declared, name)
            if found is None and declared:
                raise PluginError(
                    f"evaluator {evaluator.name!r} names metric {name!r}, which none of its "
                    f"declarations ({', '.join(m.name for m in declared)}) covers; the plugin "
                    "must declare it (evalharness.Metric)")
            out[name] = found if found is not None else undeclared(name, scope)
    return out


def _automatic_evaluators(cases: list[Case], pipeline: Pipeline, host: PluginHost,
                          configured: list[ConfiguredEvaluator]) -> list[ConfiguredEvaluator]:
    """Evaluators added by their declarations: one with a metric whose default verdict is for
    some cases only (``Metric.cases``, e.g. ``{"gold.refusal": True}``) is added, with its
    default settings, to every component of its kind that does not list it (nor another
    evaluator producing its metrics), when a case of the scenario matches."""
    out = []
    for (kind, name), registered in sorted(host.registry.evaluators.items()):
        evaluator = registered.item
        filters = [m.cases for m in evaluator.declared() if m.cases]
        if not filters:
            continue
        matching = sum(1 for case in cases if any(matches(case, f) for f in filters))
        if not matching:
            continue
        try:
            settings = evaluator.settings.model_validate({})
            metrics = evaluator.metric_names(settings)
            run_metrics = evaluator.run_metric_names(settings)
            declared = _declared(evaluator, metrics, run_metrics)
        except Exception:  # it needs settings: it cannot be added unasked
            continue
        unique: list[dict] = []
        for f in filters:
            if f not in unique:
                unique.append(f)
        why = " or ".join(describe_cases(f) for f in unique)
        for component in pipeline.order:
            if pipeline.kind(component) != kind or any(
                    e.component == component and (e.name == name or set(metrics) & set(e.metrics))
                    for e in [*configured, *out]):
                continue
            out.append(ConfiguredEvaluator(
                component, name, registered.plugin, settings, metrics, evaluator, run_metrics,
                added=f"added automatically: {matching} of the scenario's cases have "
                      f"{why} and `evaluators.{component}` does not list it",
                declarations=declared))
    return out


def _configure_verdicts(spec: ScenarioFile, pipeline: Pipeline,
                        configured: list[ConfiguredEvaluator],
                        problems: Problems) -> dict[str, list[Gate]]:
    """Validate the ``verdicts:`` block like gates: every criterion parses and reads a metric
    one of the component's configured evaluators produces."""
    out: dict[str, list[Gate]] = {}
    for key, entry in spec.verdicts.items():
        if key != END_TO_END and key not in pipeline.components:
            raise problems.error(("verdicts", key), f"{key!r} is not a component of the "
                                 f"pipeline; components: {', '.join(pipeline.order)}, or "
                                 f"`{END_TO_END}` for the end-to-end verdict")
        texts = [(("verdicts", key), entry)] if isinstance(entry, str) else [
            (("verdicts", key, i), text) for i, text in enumerate(entry)]
        criteria = []
        for loc, text in texts:
            if key == END_TO_END:
                criterion = parse_gate(text)
                if criterion is None:
                    raise problems.error(loc, f"{text!r} is not an end-to-end criterion; write "
                                         "`component.metric OP number` with OP one of >=, <=, "
                                         ">, <, ==, e.g. `generator.correctness_f1 >= 0.5`")
                if criterion.component not in pipeline.components:
                    raise problems.error(loc, f"{criterion.component!r} is not a component of "
                                         f"the pipeline; components: "
                                         f"{', '.join(pipeline.order)}")
            else:
                criterion = parse_criterion(text, key)
                if criterion is None:
                    raise problems.error(loc, f"{text!r} is not a criterion; write "
                                         "`metric OP number` with OP one of >=, <=, >, <, ==, "
                                         "e.g. `recall@5 >= 0.8`")
            produced = [m for e in configured if e.component == criterion.component
                        for m in e.metrics]
            run_level = [m for e in configured if e.component == criterion.component
                         for m in e.run_metrics]
            if criterion.metric in run_level:
                raise problems.error(loc, f"{criterion.metric!r} is a run-level metric of "
                                     f"{criterion.component!r} (one value for the whole run), "
                                     "so it cannot decide a case's verdict; gate it under "
                                     f"`gates:` instead, or use a per-case metric: "
                                     f"{', '.join(produced) or 'none configured'}")
            if criterion.metric not in produced:
                close = difflib.get_close_matches(criterion.metric, produced, n=1)
                hint = f" Did you mean {close[0]!r}?" if close else ""
                raise problems.error(loc, f"component {criterion.component!r} has no metric "
                                     f"{criterion.metric!r}; its evaluators produce: "
                                     f"{', '.join(produced) or 'nothing (configure one under `evaluators:`)'}."
                                     f"{hint}")
            criteria.append(criterion)
        out[key] = criteria
    return out


def _digests(raw: bytes, path: Path, files: list[Path], database: Path | None
             ) -> dict[str, str]:
    """sha256 of the scenario text and of every input file it names (a database file by size
    and modification time: it may be large)."""
    out = {str(path): hashlib.sha256(raw).hexdigest()}
    for file in sorted(set(files)):
        out[str(file)] = file_sha256(file)
    if database is not None and database.is_file():
        stat = database.stat()
        out[str(database)] = hashlib.sha256(
            f"{stat.st_size}\0{stat.st_mtime_ns}".encode()).hexdigest()
    return out


def _combined(digests: dict[str, str]) -> str:
    """One fingerprint of every input (what ``--resume`` compares)."""
    return hashlib.sha256(json.dumps(digests, sort_keys=True).encode()).hexdigest()


def load_cases(path: Path) -> list[Case]:
    """Read a cases JSONL file; errors name the file, line and field."""
    return list(read_records(path, Case, key=lambda c: c.id, what="a case",
                             example='{"id": "q1", "question": "...", "gold": {...}}',
                             reject_surrogates=True).values())


NATIVE = "evalharness"
"""The ``format:`` of our own trace JSONL (and of a run's results.jsonl)."""

LISTED_IDS = 50
"""Trace ids without a case listed in the report (all are counted)."""


def _recorded_traces(recorded: TracesSpec, paths: list[Path], pipeline: Pipeline,
                     cases: list[Case], problems: Problems, resolve: Callable[[str], Path],
                     host: PluginHost, trace_notes: dict[str, list[str]]
                     ) -> tuple[dict[str, Trace], dict[str, Any], Path | None]:
    """Read recorded traces (ours, or spans through a mapping) from one file or several (a
    folder's, a glob's), keyed by case id, with what the report says of them; a trace that
    matches no case is counted and listed, never dropped silently."""
    fmt = recorded.format or _native_or_spans(paths, problems)
    mapping_file = None
    if fmt == NATIVE:
        if recorded.mapping is not None or recorded.join is not None:
            raise problems.error(("traces", "mapping" if recorded.mapping is not None
                                  else "join"), "our own trace format needs no mapping: each "
                                 "line names its `case_id`; a mapping is for spans "
                                 "(`format: otlp-json`, `langfuse`, `langsmith`, ...)")
        traces = _load_native(paths, problems)
        extra: dict[str, Any] = {"files": len(paths)} if len(paths) > 1 else {}
        unmatched = [k for k in traces if k not in {c.id for c in cases}]
    else:
        from evalharness.spans.importer import import_traces
        from evalharness.spans.mapping import MappingError, mapping_spec
        from evalharness.spans.readers import READERS

        if fmt is not None and fmt not in READERS:
            raise problems.error(("traces", "format"), f"unknown trace format {fmt!r}; "
                                 f"formats: {NATIVE}, {', '.join(READERS)}")
        if isinstance(recorded.mapping, str) and (
                recorded.mapping.endswith((".yaml", ".yml"))
                or not_a_file(resolve(recorded.mapping)) not in ("does not exist",
                                                                 "is a directory")):
            mapping_file = resolve(recorded.mapping)
            problem = not_a_file(mapping_file)
            if problem == "does not exist":
                raise problems.error(("traces", "mapping"), f"mapping file "
                                     f"{recorded.mapping!r} does not exist (resolved to "
                                     f"{mapping_file})")
            if problem is not None:
                raise problems.error(("traces", "mapping"), f"mapping file "
                                     f"{recorded.mapping!r} {problem} (resolved to "
                                     f"{mapping_file}); {file_hint(problem)}")
        spec = mapping_spec(recorded.mapping, base=problems.path.parent,
                            source=problems.path, lines=problems.lines,
                            prefix=("traces", "mapping"))
        kinds = {pipeline.kind(name) for name in pipeline.order} - set(BUILTIN_STEPS)
        step_models = {k: kind.step for k in kinds if (kind := host.component_kind(k))}
        try:
            imported = import_traces(paths, fmt=fmt, mapping=spec, join=recorded.join,
                                     pipeline=pipeline, cases=cases, step_models=step_models)
        except MappingError:
            raise
        except EvalHarnessError as exc:
            raise problems.error(("traces",), str(exc)) from None
        traces, unmatched, extra = imported.traces, imported.unmatched, imported.info
        trace_notes.update(imported.notes)
        if recorded.mapping is not None:
            extra["mapping"] = (str(mapping_file) if mapping_file is not None
                                else recorded.mapping if isinstance(recorded.mapping, str)
                                else "inline")
        fmt = imported.format
    ids = {c.id for c in cases}
    total = len(traces) if fmt == NATIVE else len(traces) + len(unmatched)
    source = {"path": str(resolve(recorded.path)), "format": fmt, **extra, "traces": total,
              "matched": sum(1 for k in traces if k in ids),
              "without_case": len(unmatched), "without_case_ids": unmatched[:LISTED_IDS],
              "cases_without_trace": sum(1 for c in cases if c.id not in traces)}
    return traces, source, mapping_file


def _native_or_spans(paths: list[Path], problems: Problems) -> str | None:
    """``evalharness`` when every file is our own trace JSONL, ``None`` (spans: each file's
    format recognised by the importer) when none is; a mix is an error naming both kinds."""
    native = [p for p in paths if looks_native(p)]
    if not native:
        return None
    if len(native) == len(paths):
        return NATIVE
    spans = [p for p in paths if p not in native]
    raise problems.error(("traces",), f"the traces mix our own trace JSONL ({native[0]}) with span "
                         f"exports ({spans[0]}); read one kind at a time: point `path` at a "
                         "folder or glob holding only one of them")


def _load_native(paths: list[Path], problems: Problems) -> dict[str, Trace]:
    """Our traces of every file; a case id in two files is an error naming both."""
    traces: dict[str, Trace] = {}
    seen_in: dict[str, Path] = {}
    for path in paths:
        for case_id, trace in load_traces(path).items():
            if case_id in traces:
                raise problems.error(("traces",), f"case {case_id!r} has a trace in "
                                     f"{seen_in[case_id]} and in {path}; keep one trace a case")
            traces[case_id] = trace
            seen_in[case_id] = path
    return traces


def looks_native(path: Path) -> bool:
    """Whether the first record of ``path`` is one of our traces (or a run's result line)."""
    with open(path, "rb") as fh:
        head = fh.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
        if head and head[:1] != b"{":  # protobuf, parquet, gzip, a JSON array: not ours
            return False
        fh.seek(0)
        while raw := fh.readline(1 << 20):  # a first line past 1 MB is not read whole
            if not raw.strip():
                continue
            try:
                first = jsonlimits.loads(raw)
            except ValueError:  # not JSON, a huge line, too deep: ours start with `case_id`
                # or `case` (the reader then says what is wrong with the line)
                return bool(re.match(rb'\s*\{\s*"(schema_version"\s*:\s*"[^"]*"\s*,\s*")?'
                                     rb'(case_id|case)"', raw))
            return isinstance(first, dict) and ("case_id" in first or (
                isinstance(first.get("trace"), dict) and "case" in first))
    return True  # an empty file: ours (it simply has no trace)


def load_traces(path: Path) -> dict[str, Trace]:
    """Read recorded traces: Trace lines, or a previous run's results.jsonl (its ``trace``)."""
    return read_records(
        path, Trace, key=lambda t: t.case_id, what="a trace",
        example='{"case_id": "q1", "router": {"routes": ["sql"]}}',
        select=lambda r: r["trace"] if isinstance(r.get("trace"), dict) else r)
