"""LangSmith runs, as its API and SDK write them, read as spans (docs/traces.md, "LangSmith").

What it reads, a record at a time (see :mod:`~evalharness.spans.readers._jsonstream`): runs
as JSON Lines, a JSON array, or ``{"runs": [...]}`` (``POST /api/v1/runs/query``), each run as
``Client.list_runs`` / ``read_run`` return it (``run.model_dump(mode="json")``); nested
``child_runs`` (``read_run(..., load_child_runs=True)``) are read as runs of their own. The
bulk export writes Parquet: turn it into JSON Lines first (docs/traces.md).

A run becomes a span of kind ``run_type`` (``llm``, ``chain``, ``tool``, ``retriever``,
``prompt``, ``parser``, ``embedding``): ``span_id`` its id, ``parent_id`` its
``parent_run_id``, ``trace_id`` its ``trace_id``. ``dotted_order`` (``<start>Z<run id>`` per
level, root first) fills in whichever of the three is missing and is checked against those
present.

Token counts (``prompt_tokens``… or, when the run has none, the ``usage_metadata`` of its
outputs) become ``usage``. On a run that is not an LLM call LangSmith reports the sum over the
LLM runs below it, as its UI does; the mapping counts the outermost usage of a subtree only,
so these are never added to their children's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import evalharness.jsonlimits as jsonlimits
from evalharness.errors import InputError
from evalharness.spans.model import Span, SpanEvent
from evalharness.spans.readers._hosted import (
    TOO_DEEP,
    amount,
    decoded,
    iso_ns,
    usage,
)
from evalharness.spans.readers._jsonstream import Item, anywhere, head_text, records

SCOPE = "langsmith"
LISTS = anywhere("runs", "child_runs")
"""Where runs are listed: a query's ``runs``, a run's ``child_runs``."""

_SEGMENT = re.compile(r"(\d{8}T\d{6}\d{0,6}Z?)([0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}"
                      r"[0-9a-fA-F]{12})")


class LangSmithReader:
    """LangSmith runs exported as JSON (module docstring)."""

    name = "langsmith"
    written_against = ("LangSmith run data format and langsmith Python SDK 0.11.1 "
                       "(schemas.Run, run_trees dotted_order)")

    def sniff(self, head: bytes) -> bool:
        """A run: ``run_type`` with ``start_time`` (both early in a dumped run) or one of
        ``dotted_order``, ``parent_run_id``."""
        text = head_text(head).lstrip()
        if text[:1] not in ("{", "[") or re.search(r'"run_type"\s*:', text) is None:
            return False
        return any(f'"{key}"' in text
                   for key in ("start_time", "dotted_order", "parent_run_id"))

    def read(self, path: Path) -> Iterator[Span]:
        for item in records(path, LISTS):
            if not isinstance(item.value, dict):
                raise InputError(f"{item.where(path)}: expected a JSON object (a run), got "
                                 f"{type(item.value).__name__}")
            yield _run(item.value, item, item.where(path))


def _run(rec: dict, item: Item, at: str) -> Span:
    def error(field: str, why: str) -> InputError:
        return InputError(f"{at}, field {field}: {why}")

    def text(field: str, required: bool = False) -> str | None:
        value = rec.get(field)
        if value is None or value == "":
            if required:
                raise error(field, "missing")
            return None
        if not isinstance(value, str):
            raise error(field, f"expected a string, got {type(value).__name__}")
        return value

    def json_of(field: str) -> Any:
        try:
            return decoded(rec.get(field))
        except jsonlimits.TooDeep:
            raise error(field, TOO_DEEP) from None

    def time(field: str, value: Any) -> int:
        try:
            return iso_ns(value)
        except ValueError:
            raise error(field, f"not an ISO 8601 time ({value!r})") from None

    run_id = text("id", required=True)
    assert run_id is not None
    start = rec.get("start_time")
    if start is None:
        raise error("start_time", "missing")
    start_ns = time("start_time", start)
    end_ns = None if rec.get("end_time") is None else time("end_time", rec["end_time"])
    parent = text("parent_run_id") or (item.owner if item.key == "child_runs" else None)
    trace_id = text("trace_id")
    dotted = text("dotted_order")
    if dotted:
        trace_id, parent = _dotted(dotted, run_id, trace_id, parent, error)
    if trace_id is None:
        if parent is not None:
            raise error("trace_id", "missing, and no dotted_order to find it from")
        trace_id = run_id  # a root run is its trace
    run_type = text("run_type")

    extra = json_of("extra") or {}
    if not isinstance(extra, dict):
        raise error("extra", f"expected an object, got {type(extra).__name__}")
    outputs = json_of("outputs")
    attrs: dict[str, Any] = {"inputs": json_of("inputs"), "outputs": outputs}
    for key in ("metadata", "runtime", "invocation_params"):
        if extra.get(key) is not None:
            attrs[key] = extra[key]
    rest = {k: v for k, v in extra.items() if k not in ("metadata", "runtime",
                                                         "invocation_params")}
    if rest:
        attrs["extra"] = rest
    tags = json_of("tags")
    if tags:
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise error("tags", "expected a list of strings")
        attrs["tags"] = tags
    model = _model(attrs, outputs)
    if model:
        attrs["model"] = model
    try:
        top = usage(rec.get("prompt_tokens"), rec.get("completion_tokens"),
                    rec.get("total_tokens"))
    except ValueError as exc:
        name, _, why = str(exc).partition(": ")
        raise error({"input": "prompt_tokens", "output": "completion_tokens"}.get(
            name, "total_tokens"), why) from None
    tokens = top or _output_usage(outputs, error)
    if tokens:
        attrs["usage"] = tokens
    cost = {}
    for key, field in (("input", "prompt_cost"), ("output", "completion_cost"),
                       ("total", "total_cost")):
        if rec.get(field) is not None:
            try:
                cost[key] = amount(rec[field])
            except (TypeError, ValueError):
                raise error(field, f"not a cost ({rec[field]!r})") from None
    if any(cost.values()):
        attrs["cost"] = cost
    for key, field in (("project_id", "session_id"),  # LangSmith's "session": the project
                       ("reference_example_id", "reference_example_id")):
        if rec.get(field) is not None:
            attrs[key] = rec[field]
    if rec.get("first_token_time") is not None:
        attrs["first_token_ns"] = time("first_token_time", rec["first_token_time"])

    failure = rec.get("error")
    if failure is not None and not isinstance(failure, str):
        failure = str(failure)
    if failure:
        attrs["error"] = failure
    status, message = None, None
    if failure or rec.get("status") == "error":
        lines = failure.strip().splitlines() if failure else []
        status, message = "ERROR", lines[0] if lines else "error"
    elif rec.get("status") == "success" or (rec.get("status") is None and end_ns is not None):
        status = "OK"
    return Span(trace_id=trace_id, span_id=run_id, parent_id=parent,
                name=text("name") or "", kind=run_type, start_ns=start_ns, end_ns=end_ns,
                attributes=attrs, events=_events(json_of("events"), time, error),
                status=status, status_message=message, scope=SCOPE, source=at)


def _dotted(dotted: str, run_id: str, trace_id: str | None, parent: str | None,
            error: Any) -> tuple[str, str | None]:
    """The trace and parent ids ``dotted_order`` gives, checked against those recorded.

    >>> root = "20240914T223155647000Z1b64098b-4ab7-43f6-afee-992304f198d8"
    >>> child = root + ".20240914T223155649000Z809ed3a2-0172-4f4d-8a02-a64e9b7a0f8a"
    >>> _dotted(child, "809ed3a2-0172-4f4d-8a02-a64e9b7a0f8a", None, None, None)
    ('1b64098b-4ab7-43f6-afee-992304f198d8', '1b64098b-4ab7-43f6-afee-992304f198d8')
    """
    ids = []
    for n, segment in enumerate(dotted.split("."), 1):
        m = _SEGMENT.fullmatch(segment)
        if m is None:
            raise error("dotted_order", f"segment {n} ({segment[:60]!r}) is not "
                                        f"<start time>Z<run id>")
        ids.append(m[2])
    if ids[-1].lower() != run_id.lower():
        raise error("dotted_order", f"ends with run {ids[-1]}, not with this run ({run_id})")
    if trace_id is not None and trace_id.lower() != ids[0].lower():
        raise error("dotted_order", f"starts with run {ids[0]}, but trace_id is {trace_id}")
    above = ids[-2] if len(ids) > 1 else None
    if parent is not None and (above is None or parent.lower() != above.lower()):
        raise error("dotted_order", f"puts the run under {above or 'nothing (a root)'}, but "
                                    f"parent_run_id is {parent}")
    return trace_id or ids[0], parent or above


def _model(attrs: dict, outputs: Any) -> str | None:
    metadata = attrs.get("metadata") or {}
    params = attrs.get("invocation_params") or {}
    for value in (metadata.get("ls_model_name") if isinstance(metadata, dict) else None,
                  params.get("model") if isinstance(params, dict) else None,
                  params.get("model_name") if isinstance(params, dict) else None,
                  _path(outputs, "llm_output", "model_name")):
        if isinstance(value, str) and value:
            return value
    return None


def _output_usage(outputs: Any, error: Any) -> dict[str, int]:
    """Token usage the outputs carry: ``usage_metadata`` (newer SDKs and ``traceable``),
    LangChain's ``llm_output.token_usage``, or the first generation's message."""
    for path, names in (
            (("usage_metadata",), ("input_tokens", "output_tokens", "total_tokens")),
            (("llm_output", "token_usage"), ("prompt_tokens", "completion_tokens",
                                             "total_tokens")),
            (("generations", 0, 0, "message", "kwargs", "usage_metadata"),
             ("input_tokens", "output_tokens", "total_tokens"))):
        found = _path(outputs, *path)
        if isinstance(found, dict):
            try:
                out = usage(*(found.get(n) for n in names))
            except ValueError as exc:
                name, _, why = str(exc).partition(": ")
                field = ".".join(map(str, ("outputs", *path, names[("input", "output",
                                                                     "total").index(name)])))
                raise error(field, why) from None
            if out:
                return out
    return {}


def _path(value: Any, *keys: Any) -> Any:
    for key in keys:
        if isinstance(key, int):
            if not isinstance(value, list) or len(value) <= key:
                return None
        elif not isinstance(value, dict):
            return None
        value = value[key] if isinstance(key, int) else value.get(key)
    return value


def _events(events: Any, time: Any, error: Any) -> list[SpanEvent]:
    events = decoded(events)
    if not events:
        return []
    if not isinstance(events, list):
        raise error("events", "expected a list of events")
    out = []
    for i, event in enumerate(events):
        if not isinstance(event, dict):
            raise error(f"events[{i}]", "expected an object")
        when = event.get("time")
        out.append(SpanEvent(
            name=str(event.get("name") or ""),
            time_ns=None if when is None else time(f"events[{i}].time", when),
            attributes={k: v for k, v in event.items() if k not in ("name", "time")}))
    return out
