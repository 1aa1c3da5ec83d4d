"""Langfuse observations and traces, as its public API and its blob storage export write them,
read as spans (docs/traces.md, "Langfuse").

What it reads, a record at a time (JSON Lines, a JSON array, or an object holding a list; see
:mod:`~evalharness.spans.readers._jsonstream`):

- observations of the public API — ``GET /api/public/v2/observations`` and the older
  ``GET /api/public/observations`` pages (``{"data": [...], "meta": ...}``), one observation
  (``GET /api/public/observations/{id}``), the UI's batch export — in camelCase;
- traces of the public API: ``GET /api/public/traces/{id}`` with its ``observations``
  embedded, ``GET /api/public/traces`` pages;
- the blob storage export's ``observations`` (legacy and v4 events table) and ``traces``
  files, in snake_case with ClickHouse times (``2025-03-04 12:34:56.789``, UTC), string-valued
  metadata and quoted 64-bit counts — plain or gzipped, one file or both concatenated.

An observation becomes a span of its trace: ``span_id`` its id, ``parent_id`` its
``parentObservationId`` — or, for a top-level observation, the trace id. A trace record
becomes that trace's root span: kind ``TRACE``, ``span_id`` the trace id, no parent, carrying
the trace's ``input``, ``output``, ``session_id``, ``user_id``, ``tags`` and ``metadata``. So
the top-level observations of a trace hang under its trace record when the file has one; when
it does not (an observations-only export), their parent is absent from the file, as a remote
parent is in OpenTelemetry, and they are the roots of what was read.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import evalharness.jsonlimits as jsonlimits
from evalharness.errors import InputError
from evalharness.spans.model import Span
from evalharness.spans.readers._hosted import (
    TOO_DEEP,
    amount,
    count,
    decoded,
    iso_ns,
    usage,
)
from evalharness.spans.readers._jsonstream import Item, anywhere, head_text, records

TYPES = frozenset({"GENERATION", "SPAN", "EVENT", "AGENT", "TOOL", "CHAIN", "RETRIEVER",
                   "EMBEDDING", "EVALUATOR", "GUARDRAIL"})
"""Observation types Langfuse writes (the last seven since its v3 SDKs)."""
LEVELS = frozenset({"DEBUG", "DEFAULT", "WARNING", "ERROR"})
TRACE_KIND = "TRACE"
SCOPE = "langfuse"
LISTS = anywhere("data", "observations")
"""Where records are listed: a page's ``data``, a trace's ``observations``."""

_TYPE = re.compile(r'"type"\s*:\s*"(?:' + "|".join(sorted(TYPES)) + ')"')


class LangfuseReader:
    """Langfuse's API and blob storage exports of observations and traces (module docstring)."""

    name = "langfuse"
    written_against = ("Langfuse public API (fern definition) and blob storage export of "
                       "langfuse v4.16.0; langfuse-python SDK 4.14.3")

    def sniff(self, head: bytes) -> bool:
        """An observation (``traceId``/``trace_id``, ``startTime``/``start_time`` and an
        observation ``type`` or a parent observation) or a Langfuse trace record; never a
        LangSmith run (``run_type``) nor OTLP (``startTimeUnixNano`` is not ``startTime``)."""
        text = head_text(head).lstrip()
        if text[:1] not in ("{", "[") or '"run_type"' in text:
            return False
        camel = '"traceId"' in text and re.search(r'"startTime"\s*:', text) is not None
        snake = '"trace_id"' in text and '"start_time"' in text
        if (camel or snake) and ('"parentObservationId"' in text
                                 or '"parent_observation_id"' in text
                                 or _TYPE.search(text) is not None):
            return True
        if '"htmlPath"' in text:  # GET /api/public/traces
            return True
        return '"timestamp"' in text and all(
            f'"{a}"' in text or f'"{b}"' in text
            for a, b in (("sessionId", "session_id"), ("userId", "user_id"),
                         ("projectId", "project_id")))

    expects = ('"traceId"/"trace_id" and "startTime"/"start_time" with an observation "type", '
               'or trace records')

    def near(self, text: str) -> tuple[int, str] | None:
        """Where the start of a file looks like this format but is not (for
        :func:`~evalharness.spans.readers.detect`'s error)."""
        found = re.search(r'"(?:parentObservationId|parent_observation_id|observations)"\s*:',
                          text)
        if found is None:
            return None
        return found.start(), ('it has Langfuse\'s parent observations or "observations", but '
                               'no "startTime"/"start_time" with an observation "type"')

    def read(self, path: Path) -> Iterator[Span]:
        for item in records(path, LISTS):
            rec = item.value
            if item.key == "observations" and isinstance(rec, str):
                continue  # GET /traces lists its observations' ids only
            if not isinstance(rec, dict):
                raise InputError(f"{item.where(path)}: expected a JSON object (an observation "
                                 f"or a trace), got {type(rec).__name__}")
            yield _span(rec, item, path)


def _span(rec: dict, item: Item, path: Path) -> Span:
    at = item.where(path)
    if _has(rec, "startTime", "start_time"):
        return _observation(rec, item, at)
    if _has(rec, "value") and _has(rec, "dataType", "data_type"):
        raise InputError(f"{at}: a score, not an observation or a trace; give the export of "
                         f"observations or of traces")
    if _has(rec, "timestamp"):
        return _trace(rec, at)
    raise InputError(f"{at}, field startTime: missing — the record is neither an observation "
                     f"(startTime) nor a trace (timestamp)")


def _observation(rec: dict, item: Item, at: str) -> Span:
    f = _Fields(rec, at)
    span_id = f.text("id", "id", required=True)
    trace_id = f.text("traceId", "trace_id") or (item.owner if item.key == "observations"
                                                 else None)
    if not trace_id:
        raise f.error("traceId", "trace_id", "missing; an observation outside a trace "
                                             "cannot be placed")
    kind = f.text("type", "type", required=True)
    if kind not in TYPES:
        raise f.error("type", "type", f"{kind!r} is not a Langfuse observation type "
                                      f"({', '.join(sorted(TYPES))})")
    parent = f.text("parentObservationId", "parent_observation_id") or trace_id
    level = f.text("level", "level")
    if level is not None and level not in LEVELS:
        raise f.error("level", "level", f"{level!r} is not one of {', '.join(sorted(LEVELS))}")
    attrs = _attributes(f, _OBSERVATION_FIELDS)
    model = f.text("model", "model") or f.text("providedModelName", "provided_model_name")
    if model:
        attrs["model"] = model
    tokens = _usage(f)
    if tokens:
        attrs["usage"] = tokens
    prompt = {k: v for k, v in (("id", f.get("promptId", "prompt_id")),
                                ("name", f.get("promptName", "prompt_name")),
                                ("version", f.get("promptVersion", "prompt_version")))
              if v is not None}
    if prompt:
        attrs["prompt"] = prompt
    message = f.text("statusMessage", "status_message")
    return Span(trace_id=trace_id, span_id=span_id, parent_id=parent,
                name=f.text("name", "name") or "", kind=kind,
                start_ns=f.time("startTime", "start_time", required=True),
                end_ns=f.time("endTime", "end_time"), attributes=attrs,
                status="ERROR" if level == "ERROR" else None, status_message=message,
                scope=SCOPE, source=at)


def _trace(rec: dict, at: str) -> Span:
    f = _Fields(rec, at)
    trace_id = f.text("id", "id", required=True)
    start = f.time("timestamp", "timestamp", required=True)
    end = None
    latency = f.get("latency", "latency")  # seconds, in GET /traces
    if isinstance(latency, int | float) and not isinstance(latency, bool) and latency >= 0:
        end = start + round(latency * 1e9)
    attrs = _attributes(f, _TRACE_FIELDS)
    return Span(trace_id=trace_id, span_id=trace_id, parent_id=None,
                name=f.text("name", "name") or "", kind=TRACE_KIND, start_ns=start,
                end_ns=end, attributes=attrs, scope=SCOPE, source=at)


def _attributes(f: _Fields, fields: list[tuple[str, str, str, _Parse]]) -> dict[str, Any]:
    """The fields present, parsed; an empty object or list (the API's ``{}`` for no usage)
    is left out, except as an input or output."""
    attrs: dict[str, Any] = {}
    for key, camel, snake, parse in fields:
        value = f.get(camel, snake)
        if value is not None:
            value = parse(f, camel, snake, value)
            if value not in ({}, []) or key in ("input", "output"):
                attrs[key] = value
    return attrs


def _usage(f: _Fields) -> dict[str, int]:
    """``usageDetails`` (``input``/``output``/``total``, or OpenAI's names), else the
    deprecated ``usage``, as ``{input, output, total}``."""
    for camel, snake in (("usageDetails", "usage_details"), ("usage", "usage")):
        details = f.json(camel, snake, f.get(camel, snake))
        if not details:
            continue
        if not isinstance(details, dict):
            raise f.error(camel, snake, "expected an object of token counts")

        def first(*names: str, details: dict = details) -> Any:
            return next((details[n] for n in names if details.get(n) is not None), None)

        try:
            out = usage(first("input", "prompt_tokens", "input_tokens", "promptTokens"),
                        first("output", "completion_tokens", "output_tokens",
                              "completionTokens"),
                        first("total", "total_tokens", "totalTokens"))
        except ValueError as exc:
            name, _, why = str(exc).partition(": ")
            raise f.error(camel, snake, why, sub=name) from None
        if out:
            return out
    return {}


class _Fields:
    """One record's fields by either spelling (the API's camelCase, the blob export's
    snake_case), with errors naming the file, line and field."""

    def __init__(self, rec: dict, at: str) -> None:
        self.rec, self.at = rec, at
        self.snake = "trace_id" in rec or "start_time" in rec or "project_id" in rec

    def name(self, camel: str, snake: str) -> str:
        if camel in self.rec:
            return camel
        if snake in self.rec:
            return snake
        return snake if self.snake else camel

    def get(self, camel: str, snake: str) -> Any:
        value = self.rec.get(camel)
        return self.rec.get(snake) if value is None else value

    def error(self, camel: str, snake: str, why: str, sub: str = "") -> InputError:
        field = self.name(camel, snake) + (f".{sub}" if sub else "")
        return InputError(f"{self.at}, field {field}: {why}")

    def json(self, camel: str, snake: str, value: Any) -> Any:
        """``value`` (of the field) decoded when it is the JSON text of an object or array."""
        try:
            return decoded(value)
        except jsonlimits.TooDeep:
            raise self.error(camel, snake, TOO_DEEP) from None

    def text(self, camel: str, snake: str, required: bool = False) -> str | None:
        value = self.get(camel, snake)
        if value is None or value == "":
            if required:
                raise self.error(camel, snake, "missing")
            return None
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise self.error(camel, snake, f"expected a string, got {type(value).__name__}")
        return str(value)

    def time(self, camel: str, snake: str, required: bool = False) -> int | None:
        value = self.get(camel, snake)
        if value is None:
            if required:
                raise self.error(camel, snake, "missing")
            return None
        try:
            return iso_ns(value)
        except ValueError:
            raise self.error(camel, snake, f"not an ISO 8601 time ({value!r})") from None


def _same(f: _Fields, camel: str, snake: str, value: Any) -> Any:
    return value


def _json(f: _Fields, camel: str, snake: str, value: Any) -> Any:
    return f.json(camel, snake, value)


def _io(f: _Fields, camel: str, snake: str, value: Any) -> Any:
    """An input or output: the v2 API and the blob export give the stored JSON text
    (``{"q": ...}``, or ``"hello"`` in quotes for a string); the v1 API gives it parsed."""
    if isinstance(value, str) and value.startswith('"') and value.endswith('"'):
        try:
            return jsonlimits.loads(value)
        except ValueError:
            return value
    return f.json(camel, snake, value)


def _metadata(f: _Fields, camel: str, snake: str, value: Any) -> Any:
    """An object; the blob export's string values that hold JSON decoded."""
    value = f.json(camel, snake, value)
    return ({k: f.json(camel, snake, v) for k, v in value.items()} if isinstance(value, dict)
            else value)


def _strings(f: _Fields, camel: str, snake: str, value: Any) -> list[str]:
    value = f.json(camel, snake, value)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise f.error(camel, snake, "expected a list of strings")
    return value


def _counts(f: _Fields, camel: str, snake: str, value: Any) -> dict[str, int]:
    value = f.json(camel, snake, value)
    if not isinstance(value, dict):
        raise f.error(camel, snake, "expected an object of counts")
    out = {}
    for k, v in value.items():
        try:
            out[k] = count(v)
        except ValueError:
            raise f.error(camel, snake, f"not a count ({v!r})", sub=k) from None
    return out


def _costs(f: _Fields, camel: str, snake: str, value: Any) -> dict[str, float]:
    value = f.json(camel, snake, value)
    if not isinstance(value, dict):
        raise f.error(camel, snake, "expected an object of costs")
    out = {}
    for k, v in value.items():
        try:
            out[k] = amount(v)
        except (TypeError, ValueError):
            raise f.error(camel, snake, f"not a cost in USD ({v!r})", sub=k) from None
    return out


def _time(f: _Fields, camel: str, snake: str, value: Any) -> int:
    return f.time(camel, snake)  # type: ignore[return-value]


_Parse = Callable[[_Fields, str, str, Any], Any]

_SHARED: list[tuple[str, str, str, _Parse]] = [
    ("input", "input", "input", _io),
    ("output", "output", "output", _io),
    ("metadata", "metadata", "metadata", _metadata),
    ("version", "version", "version", _same),
    ("environment", "environment", "environment", _same),
    ("session_id", "sessionId", "session_id", _same),
    ("user_id", "userId", "user_id", _same),
    ("tags", "tags", "tags", _strings),
    ("release", "release", "release", _same),
]
"""Attribute, API name, blob export name, parser: fields of traces and (denormalised, v4)
of observations."""

_OBSERVATION_FIELDS: list[tuple[str, str, str, _Parse]] = [
    *_SHARED,
    ("level", "level", "level", _same),
    ("model_parameters", "modelParameters", "model_parameters", _json),
    ("usage_details", "usageDetails", "usage_details", _counts),
    ("cost_details", "costDetails", "cost_details", _costs),
    ("completion_start_ns", "completionStartTime", "completion_start_time", _time),
    ("trace_name", "traceName", "trace_name", _same),
    ("tool_calls", "toolCalls", "tool_calls", _json),
    ("tool_call_names", "toolCallNames", "tool_call_names", _json),
]

_TRACE_FIELDS: list[tuple[str, str, str, _Parse]] = [
    *_SHARED,
    ("scores", "scores", "scores", _same),
]


def _has(rec: dict, *names: str) -> bool:
    return any(n in rec for n in names)
