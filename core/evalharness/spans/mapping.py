"""The trace mapping language: which spans are which pipeline component, where their outputs sit.

A *mapping* (docs/traces.md, "Mapping spans to components") says, per pipeline component,
which spans are that component (``select``: a :class:`Selector`), which of several to take
(``pick``), and where its outputs sit (``routes``, ``sql``, ``ids``, ``answer``…: each an
:class:`Extractor`, a field plus an optional JSON path, or alternatives of them). Presets for
the common stacks ship in ``spans/presets/<name>.yaml`` (:data:`PRESETS`); a mapping names one,
or one is guessed from the spans' instrumentation (:func:`guess_preset`), and the mapping's
blocks override the preset's per component (:func:`resolve_mapping`).

This module reads and checks mappings — every error names the file, the line and the field —
and :mod:`evalharness.spans.mapper` applies them to a trace.
"""

from __future__ import annotations

import copy
import difflib
import json
import re
import typing
from collections.abc import Iterable, Iterator, Sequence
from collections.abc import Mapping as MappingABC
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from evalharness.errors import ScenarioError
from evalharness.locate import (
    best_error,
    format_path,
    line_of,
    load_yaml_with_lines,
    short,
    yaml_problem,
)
from evalharness.models import BUILTIN_STEPS
from evalharness.pipeline import Pipeline
from evalharness.spans import access
from evalharness.spans.access import PathError, Token
from evalharness.spans.model import Span

REDACTED = "__REDACTED__"
"""What OpenInference writes in place of hidden content (``OPENINFERENCE_HIDE_*``)."""


class MappingError(ScenarioError):
    """A mapping (a file, or the ``traces.mapping`` block of a scenario) is invalid; the
    message names the file, the line and the field."""


# --------------------------------------------------------------------------------------------
# The mapping, as written
# --------------------------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True,
                              populate_by_name=True)


def _regex(value: str | None) -> str | None:
    if value is not None:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"{value!r} is not a valid regular expression ({exc})") from None
    return value


class ValueTest(_Strict):
    """A test on a value; every key given must hold."""

    equals: Any = None
    """The value, compared as text (``1`` equals ``"1"``)."""
    regex: str | None = None
    """A regular expression the value (as text) must contain (``re.search``; anchor it)."""
    in_: list[Any] | None = Field(default=None, alias="in")
    """Values, one of which the value must equal (as text)."""
    exists: bool | None = None
    """``true``: the value is present (any value); ``false``: it is absent."""

    _check_regex = field_validator("regex")(_regex)

    @model_validator(mode="after")
    def _something(self) -> ValueTest:
        if self.equals is None and self.regex is None and self.in_ is None and self.exists is None:
            raise ValueError("a test needs one of `equals`, `regex`, `in`, `exists`")
        return self


Condition = ValueTest | str | int | float | bool
"""A test, or a plain value the field must equal (as text)."""


class Selector(_Strict):
    """Which spans are a component: every key given must hold."""

    kind: str | list[str] | None = None
    """The span's kind, or one of several (case-insensitive: ``LLM`` matches LangSmith's
    ``llm``): OpenInference ``openinference.span.kind``, GenAI's operation, a Langfuse
    observation type, a LangSmith ``run_type``."""
    name: str | None = None
    """A regular expression the span's name must contain (``re.search``; anchor with ``^…$``)."""
    scope: str | None = None
    """A regular expression the instrumentation scope's name must contain."""
    status: Literal["OK", "ERROR", "UNSET"] | None = None
    """The span's status."""
    root: bool | None = None
    """``true``: the trace's root span (``false``: any other span)."""
    attributes: dict[str, Condition] = Field(default_factory=dict)
    """Attribute key (dotted keys matched greedily, nested records walked) -> a value or a
    test, e.g. ``{gen_ai.operation.name: chat}``, ``{tool.name: {regex: sql}}``."""
    metadata: dict[str, Condition] = Field(default_factory=dict)
    """Metadata key -> a value or a test, looked up in the fields of the mapping's
    ``metadata_fields`` (OpenInference ``metadata``, LangSmith/Langfuse ``metadata``,
    OpenLLMetry ``traceloop.association.properties``), e.g. ``{langgraph_node: route}``."""
    has: ExtractorSpec | None = None
    """An extractor that must find a value in the span (e.g. a SQL query in its output); an
    empty list or record is no value (``$[-1].parts[?type==tool_call]`` on a message without
    tool calls)."""
    descendant_of: Selector | None = None
    """The span must be inside a span this selector matches."""
    ancestor_of: Selector | None = None
    """The span must contain a span this selector matches."""
    not_: Selector | None = Field(default=None, alias="not")
    """The span must not match this selector."""
    any_of: list[Selector] | None = None
    """The span must match at least one of these selectors."""
    outermost: bool = True
    """Drop a match that is inside another match (LangGraph metadata and OpenLLMetry
    association properties are inherited by every span under a node; the node is the one)."""

    _check_name = field_validator("name", "scope")(_regex)

    @field_validator("has", mode="before")
    @classmethod
    def _short(cls, value: Any) -> Any:
        return _shorthand(value)


PickName = Literal["first", "last", "all"]


class PickBy(_Strict):
    """Pick the candidate with the highest (``max``) or lowest (``min``) value."""

    max: ExtractorSpec | None = None
    """An extractor read from each candidate; the highest number wins."""
    min: ExtractorSpec | None = None
    """An extractor read from each candidate; the lowest number wins."""

    @field_validator("max", "min", mode="before")
    @classmethod
    def _short(cls, value: Any) -> Any:
        return _shorthand(value)

    @model_validator(mode="after")
    def _one(self) -> PickBy:
        if (self.max is None) == (self.min is None):
            raise ValueError("give exactly one of `max` and `min`")
        return self


class Extractor(_Strict):
    """Where a value sits: a field of a span plus an optional JSON path, then modifiers."""

    field: str | None = None
    """Where in the span: ``attributes.<key>``, ``resource.<key>``, ``events.<event name>``
    (a list of the events' attributes) or a span property (``name``, ``kind``, ``status``,
    ``status_message``, ``duration_ms``, ``span_id``…). Dotted keys are matched greedily;
    quote a key to keep it whole: ``attributes."input.value"``."""
    path: str | None = None
    """A JSON path into the value (``$.a.b``, ``$[0]``, ``$[-1]``, ``$[*].x``,
    ``$[?type==text].content``); a JSON text is parsed when the path goes inside it."""
    from_: Selector | None = Field(default=None, alias="from")
    """Read the value from other spans: those this selector matches among the chosen span and
    its descendants (``root: true`` reaches the trace's root from anywhere). Default: the
    chosen span itself."""
    pick: Literal["first", "last"] = "last"
    """With ``from``: which of the spans that have the value to read."""
    up: Selector | None = None
    """Read the value from a span that encloses the chosen span — its parent, its parent's
    parent… up to the trace's root (then the root, if it is not among them) — the nearest
    this selector matches that has the value (``{}``: any span). A fallback: tried only when
    no alternative without ``up`` finds the value in the chosen span, and not when that span
    failed; e.g. the answer an agent's run span or the trace records when its LLM calls
    record none. Not with ``from``."""
    parse: Literal["json", "python"] | None = None
    """Parse a text first: as JSON, or as a Python literal (a tool's ``str()`` of rows)."""
    regex: str | None = None
    """Keep what this regular expression finds in the text (the group named ``value``, else
    group 1, else the whole match); on a list, keep the items it finds something in."""
    map: dict[str, Any] | None = None
    """Replace values (compared as text), e.g. ``{products: sql, "0": sql}``; others stay."""
    take: Literal["first", "last"] | None = None
    """Reduce a list to its first or last item."""
    join: str | None = None
    """Join a list into one text with this separator (``null`` items dropped)."""
    value: Any = None
    """A constant instead of a field, e.g. ``{value: []}`` as the last alternative of a
    retriever's ``ids`` when the instrumentation records no documents for an empty result."""

    _field: list[Token] | None = PrivateAttr(default=None)
    _path: list[Token] | None = PrivateAttr(default=None)

    _check_regex = field_validator("regex")(_regex)

    @model_validator(mode="after")
    def _from_or_up(self) -> Extractor:
        if self.from_ is not None and self.up is not None:
            raise ValueError("give `from` (the chosen span and the spans below it) or `up` "
                             "(the spans enclosing it), not both")
        return self

    @field_validator("field")
    @classmethod
    def _field_parses(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                access.parse(value, field=True)
            except PathError as exc:
                raise ValueError(str(exc)) from None
        return value

    @field_validator("path")
    @classmethod
    def _path_parses(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                access.parse(value, field=False)
            except PathError as exc:
                raise ValueError(str(exc)) from None
        return value

    @field_validator("map", mode="before")
    @classmethod
    def _map_keys_as_text(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {str(k).lower() if isinstance(k, bool) else str(k): v
                    for k, v in value.items()}
        return value

    def model_post_init(self, _: Any) -> None:
        if self.field is not None:
            self._field = access.parse(self.field, field=True)
        if self.path is not None:
            self._path = access.parse(self.path, field=False)

    @property
    def constant(self) -> bool:
        return self.field is None and "value" in self.model_fields_set

    def describe(self) -> str:
        if self.constant:
            return f"the constant {json.dumps(self.value, default=str)}"
        parts = [self.field or "(the span)"]
        if self.path:
            parts.append(self.path)
        if self.up is not None:
            parts.append("(enclosing span)")
        return " ".join(parts)


def _shorthand(value: Any) -> Any:
    """``"attributes.x"`` -> ``{"field": "attributes.x"}``, in lists too."""
    if isinstance(value, str):
        return {"field": value}
    if isinstance(value, list):
        return [_shorthand(v) for v in value]
    return value


ExtractorSpec = Extractor | list[Extractor]
"""An extractor, or alternatives (the first that yields a usable value wins); a text is
short for ``{field: <text>}``."""


class ComponentMapping(_Strict):
    """How to find one component in a trace, and where its outputs are."""

    select: Selector | None = None
    """Which spans are this component (required, here or in the preset)."""
    pick: PickName | PickBy | None = None
    """Which of several matching spans: ``first`` (the first to start), ``last`` (the last to
    end; the default, so a retry that succeeded wins and an LLM call that encloses another in
    time wins over it), ``all`` (lists are concatenated, routes united), or
    ``{max: extractor}`` / ``{min: extractor}``."""
    pass_over: Selector | None = None
    """Candidates this selector matches that record none of the component's primary value
    (``answer``, ``sql``, ``ids``, ``routes``) are passed over by ``pick`` when another
    candidate records it: an LLM call whose output only asks for a tool is a step of an agent
    loop, not the answer (the presets set it for the generator)."""
    required: bool | Literal["when_routed"] | None = None
    """What a trace without a matching span means: ``false`` the component did not run (the
    default); ``true`` an error; ``when_routed`` an error when the trace's router chose a
    route that runs this component, else did not run (the default under a router)."""
    rerank: bool | None = None
    """Retriever only, when the pipeline has no reranker component: take the final ranking
    from the mapping's ``reranker`` block (default ``true``)."""

    routes: ExtractorSpec | None = None
    """Router: the route names chosen (a text is one route)."""
    confidence: ExtractorSpec | None = None
    """Router: the confidence in [0, 1]."""
    scores: ExtractorSpec | None = None
    """Router: route -> score; retriever and reranker: scores aligned with ``ids``."""
    sql: ExtractorSpec | None = None
    """Text-to-SQL: the query (``` fences are removed)."""
    columns: ExtractorSpec | None = None
    """Text-to-SQL: column names of the result."""
    rows: ExtractorSpec | None = None
    """Text-to-SQL: result rows (lists, records, or a text of either in JSON or Python)."""
    ids: ExtractorSpec | None = None
    """Retriever and reranker: document ids, best first."""
    texts: ExtractorSpec | None = None
    """Retriever and reranker: document texts aligned with ``ids``."""
    answer: ExtractorSpec | None = None
    """Generator: the answer text (a list of texts is joined)."""
    contexts: ExtractorSpec | Literal["upstream"] | None = None
    """Generator: the contexts it was given; ``upstream`` (the default): the texts of the
    retriever and the rows of the text-to-SQL step it comes after in the pipeline."""
    latency_ms: ExtractorSpec | None = None
    """Override the latency (default: from the chosen spans' times)."""
    prompt_tokens: ExtractorSpec | None = None
    """Override the prompt tokens (default: the usage rule)."""
    completion_tokens: ExtractorSpec | None = None
    """Override the completion tokens (default: the usage rule)."""
    fields: dict[str, ExtractorSpec] = Field(default_factory=dict)
    """Further step fields, for a component kind a plugin adds: step field -> extractor."""

    @field_validator("routes", "confidence", "scores", "sql", "columns", "rows", "ids", "texts",
                     "answer", "latency_ms", "prompt_tokens", "completion_tokens", "contexts",
                     mode="before")
    @classmethod
    def _short(cls, value: Any) -> Any:
        if value == "upstream":
            return value
        return _shorthand(value)

    @field_validator("fields", mode="before")
    @classmethod
    def _short_fields(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: _shorthand(v) for k, v in value.items()}
        return value


class MappingSpec(_Strict):
    """A mapping as written: a file, or the ``traces.mapping`` block of a scenario."""

    preset: str | None = None
    """The preset this mapping builds on (see :data:`PRESETS`); guessed from the spans'
    instrumentation when not given; ``none``: no preset, every component is mapped here."""
    description: str | None = None
    """What the mapping is for (presets say which stack and versions)."""
    written_against: str | None = None
    """The instrumentation versions the mapping was written against."""
    question: ExtractorSpec | None = None
    """Where the user's question is; read from the trace's root span unless an extractor
    says ``from``."""
    join: ExtractorSpec | None = None
    """The value that joins a trace to a case (a case id in metadata, ``session.id``, a tag);
    read from the root span unless an extractor says ``from``."""
    metadata_fields: list[str] | None = None
    """Fields a selector's ``metadata:`` keys are looked up in, first found wins."""
    redacted: list[str] | None = None
    """Texts that stand for hidden content (default ``["__REDACTED__"]``)."""
    capture_hint: str | None = None
    """Added to the error when content is absent: how to turn content capture on."""
    components: dict[str, ComponentMapping] = Field(default_factory=dict)
    """Component name (a preset: component kind) -> its block; merged over the preset's block
    for the component's kind."""

    _source: str = PrivateAttr(default="")
    _lines: dict = PrivateAttr(default_factory=dict)
    _prefix: tuple = PrivateAttr(default=())
    _raw: dict = PrivateAttr(default_factory=dict)

    @field_validator("question", "join", mode="before")
    @classmethod
    def _short(cls, value: Any) -> Any:
        return _shorthand(value)

    @field_validator("metadata_fields")
    @classmethod
    def _fields_parse(cls, value: list[str] | None) -> list[str] | None:
        for text in value or ():
            try:
                access.parse(text, field=True)
            except PathError as exc:
                raise ValueError(str(exc)) from None
        return value

    def where(self, loc: Sequence[str | int]) -> str:
        """``file, line N, field `x.y``` for a place in this mapping."""
        full = tuple(self._prefix) + tuple(loc)
        line = line_of(full, self._lines) if self._lines else None
        return (f"{self._source}" + (f", line {line}" if line else "")
                + f", field `{format_path(full)}`")


Selector.model_rebuild()
PickBy.model_rebuild()
Extractor.model_rebuild()
ComponentMapping.model_rebuild()
MappingSpec.model_rebuild()


# --------------------------------------------------------------------------------------------
# Loading, with file, line and field in every error
# --------------------------------------------------------------------------------------------


def load_mapping(path: str | Path) -> MappingSpec:
    """Read a mapping file (YAML); :class:`MappingError` names the file, line and field."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise MappingError(f"mapping file {str(path)!r} cannot be read ({exc.strerror}); give "
                           "the path of a YAML mapping (docs/traces.md)") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise MappingError(f"{path}: not UTF-8 text; a mapping is a YAML file") from None
    try:
        data, lines = load_yaml_with_lines(text)
    except yaml.YAMLError as exc:
        raise MappingError(yaml_problem(path, text, exc)) from None
    if data is None:
        data = {}
    return parse_mapping(data, source=path, lines=lines)


def parse_mapping(data: Any, *, source: str | Path = "mapping", lines: dict | None = None,
                  prefix: Sequence[str | int] = ()) -> MappingSpec:
    """Validate a mapping given as data: a scenario's ``traces.mapping`` block (pass the
    scenario's ``lines`` and the block's ``prefix``, e.g. ``("traces", "mapping")``, so that
    errors name the scenario's lines) or a file's content."""
    where_prefix = tuple(prefix)

    def error(loc: Sequence[str | int], message: str) -> MappingError:
        full = where_prefix + tuple(loc)
        line = line_of(full, lines) if lines else None
        return MappingError(f"{source}" + (f", line {line}" if line else "")
                            + f", field `{format_path(full)}`: {message}")

    if not isinstance(data, dict):
        raise error((), "a mapping is a YAML mapping with `preset` and/or `components` "
                    f"(got {type(data).__name__}); see docs/traces.md")
    try:
        spec = MappingSpec.model_validate(data)
    except ValidationError as exc:
        loc, message, value = best_error(exc, data)
        if message == "unknown field":
            message = _unknown_field_message(loc)
        elif value is not None and not isinstance(value, (dict, list)):
            message += f" (got {short(value)})"
        raise error(loc, message) from None
    spec._source = str(source)
    spec._lines = dict(lines or {})
    spec._prefix = where_prefix
    spec._raw = copy.deepcopy(data)
    if spec.preset is not None and spec.preset not in (*PRESETS, NO_PRESET):
        close = difflib.get_close_matches(spec.preset, PRESETS, n=1)
        raise error(("preset",), f"unknown preset {spec.preset!r}; presets: "
                    f"{', '.join(PRESETS)}, or `none` to map every component yourself"
                    + (f". Did you mean {close[0]!r}?" if close else ""))
    return spec


def mapping_spec(value: str | Path | dict | None, *, base: Path | None = None,
                 source: str | Path = "mapping", lines: dict | None = None,
                 prefix: Sequence[str | int] = ()) -> MappingSpec | None:
    """A mapping given the ways a scenario's ``traces.mapping`` (or ``--mapping``) gives it:
    ``None`` (guess the preset from the spans), a preset's name (or ``none``), a YAML file
    (relative to ``base``), or the block inline (``source``, ``lines`` and ``prefix`` locate
    its errors in the scenario file)."""
    if value is None:
        return None
    if isinstance(value, dict):
        return parse_mapping(value, source=source, lines=lines, prefix=prefix)
    text = str(value)
    if isinstance(value, str) and (text in PRESETS or text == NO_PRESET):
        spec = MappingSpec(preset=text)
        spec._source, spec._lines, spec._prefix = str(source), dict(lines or {}), tuple(prefix)
        return spec
    path = Path(text)
    if base is not None and not path.is_absolute():
        path = base / path
    if isinstance(value, Path) or text.endswith((".yaml", ".yml")) or path.is_file():
        return load_mapping(path)
    full = tuple(prefix)
    line = line_of(full, lines) if lines else None
    close = difflib.get_close_matches(text, PRESETS, n=1)
    raise MappingError(
        f"{source}" + (f", line {line}" if line else "") + f", field `{format_path(full)}`: "
        f"{text!r} is neither a preset ({', '.join(PRESETS)}, none) nor a mapping file "
        "(.yaml)" + (f". Did you mean {close[0]!r}?" if close else ""))


def _model_at(loc: Sequence[str | int]) -> type[BaseModel] | None:
    """The mapping model in which the last part of ``loc`` was given (for "allowed here")."""
    current: Any = MappingSpec
    for part in loc[:-1]:
        current = _step_into(current, part)
        if current is None:
            return None
    return next(_models_in(current), None)


def _step_into(annotation: Any, part: str | int) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        for name, info in annotation.model_fields.items():
            if part in (name, info.alias):
                return info.annotation
        return None
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is list and isinstance(part, int):
        return args[0]
    if origin is dict and isinstance(part, str):
        return args[1]
    if args and origin not in (list, dict):  # a union: the member the part fits
        for arg in args:
            got = _step_into(arg, part)
            if got is not None:
                return got
    return None


def _models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
        return
    if typing.get_origin(annotation) in (list, dict):
        return
    for arg in typing.get_args(annotation):
        yield from _models_in(arg)


def _unknown_field_message(loc: Sequence[str | int]) -> str:
    model = _model_at(loc)
    name = str(loc[-1]) if loc else "?"
    if model is None:
        return f"unknown field `{name}`"
    allowed = [f.alias or n for n, f in model.model_fields.items()]
    close = difflib.get_close_matches(name, allowed, n=1)
    return (f"unknown field `{name}`; allowed here: {', '.join(allowed)}"
            + (f". Did you mean `{close[0]}`?" if close else ""))


# --------------------------------------------------------------------------------------------
# Presets, and guessing one from the spans
# --------------------------------------------------------------------------------------------

NO_PRESET = "none"
"""``preset: none``: use no preset, not even a guessed one."""

PRESETS: tuple[str, ...] = (
    "langchain-openinference",
    "langchain-langsmith",
    "langgraph",
    "llamaindex-openinference",
    "otel-genai",
    "openllmetry",
    "langfuse",
)
"""The presets that ship in ``evalharness/spans/presets/<name>.yaml``."""


def preset_path(name: str) -> Any:
    """The preset file of ``name`` (a ``Traversable``; read it with ``.read_text()``)."""
    return resources.files("evalharness.spans").joinpath("presets", f"{name}.yaml")


_PRESET_CACHE: dict[str, MappingSpec] = {}


def load_preset(name: str) -> MappingSpec:
    """The preset ``name``, validated (cached)."""
    if name not in PRESETS:
        raise MappingError(f"unknown preset {name!r}; presets: {', '.join(PRESETS)}")
    if name not in _PRESET_CACHE:
        file = preset_path(name)
        text = file.read_text(encoding="utf-8")
        try:
            data, lines = load_yaml_with_lines(text)
        except yaml.YAMLError as exc:  # pragma: no cover - presets are tested
            raise MappingError(yaml_problem(f"preset {name}", text, exc)) from None
        _PRESET_CACHE[name] = parse_mapping(data, source=f"preset {name} ({name}.yaml)",
                                            lines=lines)
    return _PRESET_CACHE[name]


@dataclass(frozen=True)
class Guess:
    """A preset guessed from the spans, and what gave it away."""

    preset: str
    reason: str


def guess_preset(spans: Iterable[Span]) -> Guess | None:
    """The preset that fits spans of this instrumentation, from scope names and SDK marks.

    >>> s = Span(trace_id="t", span_id="1", parent_id=None, name="RunnableSequence",
    ...          scope="openinference.instrumentation.langchain")
    >>> guess_preset([s]).preset
    'langchain-openinference'
    """
    spans = list(spans)
    scopes = {s.scope or "" for s in spans}
    langgraph = any(_has_langgraph_node(s) for s in spans)
    for scope in sorted(scopes):
        low = scope.lower()
        if low.startswith("openinference.instrumentation.langchain"):
            return Guess("langgraph" if langgraph else "langchain-openinference",
                         f"scope `{scope}`" + (" and `langgraph_node` metadata"
                                               if langgraph else ""))
        if low.startswith("openinference.instrumentation.llama_index"):
            return Guess("llamaindex-openinference", f"scope `{scope}`")
    if any(k.startswith("traceloop.") for s in spans for k in s.attributes):
        return Guess("openllmetry", "`traceloop.*` attributes")
    for scope in sorted(scopes):
        low = scope.lower()
        if "langsmith" in low:
            return Guess("langgraph" if langgraph else "langchain-langsmith",
                         f"scope `{scope}`" + (" and `langgraph_node` metadata"
                                               if langgraph else ""))
        if "langfuse" in low:
            return Guess("langfuse", f"scope `{scope}`")
        if low.startswith("opentelemetry.instrumentation.") or "gen_ai" in low:
            return Guess("otel-genai", f"scope `{scope}`")
    if any(k.startswith("gen_ai.") for s in spans for k in s.attributes):
        return Guess("otel-genai", "`gen_ai.*` attributes")
    if any(k.startswith("openinference.") or k in ("input.value", "output.value")
           for s in spans for k in s.attributes):
        # no scope (a Phoenix export): LlamaIndex names its spans `Class.method`
        if any(_LLAMA_NAME.match(s.name) for s in spans):
            return Guess("llamaindex-openinference",
                         "OpenInference attributes and `Class.method` span names")
        if langgraph:
            return Guess("langgraph", "OpenInference attributes and `langgraph_node` metadata")
        return Guess("langchain-openinference", "OpenInference attributes (no known scope)")
    return None


_LLAMA_NAME = re.compile(r"^[A-Z]\w*(QueryEngine|Retriever|Selector|Synthesizer|Refine|"
                         r"Rerank|Postprocessor|Workflow|Agent\w*|Embedding|Splitter|Parser|"
                         r"LLM)\.[_a-z]\w*$")


def _has_langgraph_node(span: Span) -> bool:
    meta = span.attributes.get("metadata")
    if isinstance(meta, dict) and "langgraph_node" in meta:
        return True
    return any(k.endswith("langgraph_node") for k in span.attributes)


# --------------------------------------------------------------------------------------------
# The resolved mapping: a spec over its preset
# --------------------------------------------------------------------------------------------

EXTRACTOR_KEYS = ("routes", "confidence", "scores", "sql", "columns", "rows", "ids", "texts",
                  "answer", "contexts", "latency_ms", "prompt_tokens", "completion_tokens")
MODIFIER_KEYS = {"parse", "regex", "map", "take", "join", "pick"}

TARGETS: dict[str, tuple[str, ...]] = {
    "router": ("routes", "confidence", "scores"),
    "text2sql": ("sql", "columns", "rows"),
    "retriever": ("ids", "texts", "scores"),
    "generator": ("answer", "contexts"),
    "reranker": ("ids", "texts", "scores"),
}
"""The step fields a block may extract, per component kind (plus ``latency_ms``,
``prompt_tokens``, ``completion_tokens`` for any kind, and ``fields`` for plugin kinds)."""

PRIMARY: dict[str, str] = {"router": "routes", "text2sql": "sql", "retriever": "ids",
                           "generator": "answer", "reranker": "ids"}
"""The field without which a step says nothing: absent from a chosen span, it is an error."""

DEFAULT_METADATA_FIELDS = ["attributes.metadata", "attributes.traceloop.association.properties",
                           "attributes.langfuse.observation.metadata"]


def _merge_extractor(base: Any, over: Any) -> Any:
    """``over`` replaces ``base`` unless it only holds modifiers (``map``, ``regex``…), which
    then apply to the base (to each of its alternatives)."""
    over = _shorthand(over)
    if base is None or not isinstance(over, dict) or not over or not set(over) <= MODIFIER_KEYS:
        return over
    base = _shorthand(base)
    if isinstance(base, list):
        return [{**b, **over} for b in base]
    return {**base, **over}


def _merge_block(base: dict | None, over: dict | None) -> dict | None:
    if base is None:
        return copy.deepcopy(over)
    if over is None:
        return copy.deepcopy(base)
    out = copy.deepcopy(base)
    for key, value in over.items():
        if key in EXTRACTOR_KEYS and value != "upstream":
            out[key] = _merge_extractor(out.get(key), value)
        elif key == "fields":
            merged = dict(out.get("fields") or {})
            for name, ex in (value or {}).items():
                merged[name] = _merge_extractor(merged.get(name), ex)
            out["fields"] = merged
        else:
            out[key] = copy.deepcopy(value)
    return out


class Mapping:
    """A mapping resolved over its preset: what :func:`evalharness.spans.mapper.map_trace`
    applies.

    Build it with :func:`resolve_mapping`. ``block(name, kind)`` is the component's block:
    the user's block for the component *name* merged over the preset's block for its *kind*.
    """

    def __init__(self, spec: MappingSpec | None, preset: str | None,
                 preset_reason: str | None = None) -> None:
        self.spec = spec or MappingSpec()
        self.preset = preset
        self.preset_reason = preset_reason
        self.base = load_preset(preset) if preset else MappingSpec()
        top: dict[str, Any] = {}
        for key in ("question", "join", "metadata_fields", "redacted", "capture_hint"):
            b, o = self.base._raw.get(key), self.spec._raw.get(key)
            top[key] = (_merge_extractor(b, o) if key in ("question", "join") and o is not None
                        else (o if o is not None else b))
        self.top = MappingSpec.model_validate({k: v for k, v in top.items() if v is not None})
        self.metadata_fields = [access.parse(f, field=True) for f in
                                (self.top.metadata_fields or DEFAULT_METADATA_FIELDS)]
        self.redacted = set(self.top.redacted or [REDACTED])
        self._blocks: dict[tuple[str, str], tuple[ComponentMapping | None, str]] = {}

    @property
    def question(self) -> list[Extractor] | None:
        return alternatives_of(self.top.question)

    @property
    def join(self) -> list[Extractor] | None:
        return alternatives_of(self.top.join)

    def block(self, name: str, kind: str) -> tuple[ComponentMapping | None, str]:
        """``(the component's block, where it comes from)``."""
        key = (name, kind)
        if key not in self._blocks:
            base = self.base._raw.get("components", {}).get(kind)
            over = self.spec._raw.get("components", {}).get(name)
            merged = _merge_block(base, over)
            origin = []
            if base is not None:
                origin.append(f"preset {self.preset}")
            if over is not None:
                origin.append(self.spec.where(("components", name)))
            try:
                model = ComponentMapping.model_validate(merged) if merged is not None else None
            except ValidationError as exc:
                loc, message, _ = best_error(exc, merged)
                raise MappingError(f"{self.spec.where(('components', name) + tuple(loc))}: "
                                   f"{message} (after merging over preset {self.preset})") from None
            self._blocks[key] = (model, ", overridden by ".join(origin) or "nowhere")
        return self._blocks[key]


def resolve_mapping(spec: MappingSpec | None = None, *, preset: str | None = None,
                    spans: Iterable[Span] | None = None) -> Mapping:
    """The mapping to apply: ``spec`` over its preset — ``spec.preset``, else ``preset``, else
    the one :func:`guess_preset` finds in ``spans``. A spec with neither a preset nor
    components, and no spans to guess from, is an error that lists the presets."""
    chosen = (spec.preset if spec is not None else None) or preset
    reason = "named in the mapping" if spec is not None and spec.preset else (
        "given" if preset else None)
    if chosen == NO_PRESET:
        return Mapping(spec, None, "`preset: none` in the mapping")
    if chosen is None and spans is not None:
        guess = guess_preset(spans)
        if guess is not None:
            chosen, reason = guess.preset, f"guessed from {guess.reason}"
    if chosen is None and (spec is None or not spec.components):
        where = spec.where(("preset",)) if spec is not None and spec._source else "the mapping"
        raise MappingError(f"{where}: no preset is named and none could be guessed from the "
                           f"spans' instrumentation; name one (preset: ...) of "
                           f"{', '.join(PRESETS)}, or map every component under `components`")
    return Mapping(spec, chosen, reason)


def check_mapping(mapping: Mapping, pipeline: Pipeline,
                  step_fields: MappingABC[str, Iterable[str]] | None = None
                  ) -> list[tuple[str, str]]:
    """Problems of a mapping for a pipeline, as ``(where, message)``: component blocks for
    components the pipeline lacks, fields a kind does not have, components without a
    selector. ``step_fields`` gives a plugin kind's step fields (kind -> names)."""
    found: list[tuple[str, str]] = []
    names = set(pipeline.components)
    kinds = {pipeline.kind(n) for n in names}
    for name, block in mapping.spec.components.items():
        final_ranking = name == "reranker" and "retriever" in kinds and "reranker" not in kinds
        if name not in names and not final_ranking:
            found.append((mapping.spec.where(("components", name)),
                          f"{name!r} is not a component of the pipeline; components: "
                          f"{', '.join(sorted(names))}" + (
                              " (a `reranker` block configures the retriever's final ranking "
                              "only when the pipeline has no reranker component)"
                              if name == "reranker" else "")))
            continue
        kind = pipeline.kind(name) if name in names else "reranker"
        allowed = set(TARGETS.get(kind, ())) | {"latency_ms", "prompt_tokens",
                                                 "completion_tokens"}
        for key in EXTRACTOR_KEYS:
            if getattr(block, key) is not None and key not in allowed:
                found.append((mapping.spec.where(("components", name, key)),
                              f"a {kind} step has no `{key}`; a {kind} block extracts "
                              f"{', '.join(sorted(allowed))}"))
        if block.rerank is not None and kind != "retriever":
            found.append((mapping.spec.where(("components", name, "rerank")),
                          "`rerank` applies to a retriever only"))
        if block.fields and kind in BUILTIN_STEPS:
            found.append((mapping.spec.where(("components", name, "fields")),
                          f"`fields` is for component kinds a plugin adds; a {kind} block "
                          f"extracts {', '.join(TARGETS[kind])}"))
        elif block.fields and step_fields is not None and kind in step_fields:
            known = set(step_fields[kind])
            for fname in block.fields:
                if fname not in known:
                    found.append((mapping.spec.where(("components", name, "fields", fname)),
                                  f"the {kind} step has no field `{fname}`; it has "
                                  f"{', '.join(sorted(known))}"))
    for key in ("question", "join"):
        for i, ex in enumerate(alternatives_of(getattr(mapping.top, key)) or ()):
            if ex.field is None and not ex.constant:
                found.append((mapping.spec.where((key,)), _no_field(key, i)))
    for name in pipeline.order:
        block, _ = mapping.block(name, pipeline.kind(name))
        for key in (*EXTRACTOR_KEYS, *(f"fields.{f}" for f in (block.fields if block else ()))):
            spec = (block.fields.get(key[7:]) if key.startswith("fields.")
                    else getattr(block, key, None)) if block is not None else None
            if spec == "upstream":
                continue
            for i, ex in enumerate(alternatives_of(spec) or ()):
                if ex.field is None and not ex.constant:
                    found.append((mapping.spec.where(("components", name, *key.split(".")))
                                  if mapping.spec._source else f"component {name!r}",
                                  _no_field(key, i)))
        if block is None or block.select is None:
            found.append((mapping.spec.where(("components", name)) if mapping.spec._source
                          else f"component {name!r}",
                          f"no selector for component {name!r} (kind {pipeline.kind(name)})"
                          + (f" in the mapping or preset {mapping.preset}" if mapping.preset
                             else "") + "; add `components: {" + name + ": {select: ...}}`"))
    return found


def _no_field(key: str, i: int) -> str:
    return (f"`{key}` (alternative {i + 1}) has no `field`: modifiers alone (map, regex, "
            "take, join, parse) apply over the preset's extractor, and the preset has none "
            "here; give a `field`")


def alternatives_of(spec: Any) -> list[Extractor] | None:
    """An extractor spec as its list of alternatives (``None`` stays ``None``)."""
    if spec is None:
        return None
    return list(spec) if isinstance(spec, list) else [spec]


