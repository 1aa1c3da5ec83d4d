"""Readers of OpenTelemetry spans written as JSON: OTLP JSON (``otlp-json``, what the
Collector's file exporter writes) and the Python SDK's span JSON, ``ReadableSpan.to_json()``
however it was saved (``otel-console``: the ``ConsoleSpanExporter``'s output, JSON lines, an
array, an agent framework's ``{"spans": [...]}`` dump); docs/traces-formats.md."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import evalharness.jsonlimits as jsonlimits
from evalharness.errors import InputError
from evalharness.spans.model import Span, SpanEvent
from evalharness.spans.readers._jsonstream import Lists, records, unpacked
from evalharness.spans.readers._otel import (
    add_attribute,
    attributes_from,
    decode_json_text,
    fail,
    first_char,
    hex_id,
    iso_nanos,
    nanos,
    otel_kind,
    span_kind,
    status,
    too_deep,
)

_OTHER_SIGNALS = ("resourceMetrics", "resourceLogs", "resourceProfiles", "resource_metrics",
                  "resource_logs", "resource_profiles")
_OTLP_HEAD = re.compile(rb'"(?:resourceSpans|resource_spans)"\s*:')
_CONSOLE_HEAD = re.compile(rb'"kind"\s*:\s*"SpanKind\.[A-Z]+"')
_CONSOLE_CONTEXT = re.compile(rb'"context"\s*:\s*\{\s*"trace_id"\s*:\s*(?:"0x|\d)')
_CONSOLE_LISTS: Lists = {"spans": {}}
"""Where an agent framework's run dump lists its ``to_json`` spans."""
_RESOURCE_SPANS = ("resourceSpans", "resource_spans")
_SCOPE_SPANS = ("scopeSpans", "scope_spans", "instrumentationLibrarySpans",
                "instrumentation_library_spans")
_SPANS: Lists = {"spans": {}}
LISTS: Lists = dict.fromkeys(_RESOURCE_SPANS, dict.fromkeys(_SCOPE_SPANS, _SPANS))
"""Where OTLP JSON lists its spans: read a span at a time, whatever the size of a request."""


class OtlpJsonReader:
    """OTLP JSON: one ``{"resourceSpans": [...]}`` per line (the Collector's file exporter,
    ``format: json``), or one such document pretty-printed (an OTLP/HTTP JSON request body),
    or a JSON array of them; plain or gzip-compressed. Read a span at a time, however large
    a document. Ids in hex (OTLP JSON) or base64 (the protobuf JSON mapping); camelCase or
    snake_case keys; ``kind`` and ``status.code`` as numbers or names."""

    name = "otlp-json"
    written_against = (
        "OTLP v1 JSON encoding (opentelemetry-proto 1.45 for Python; the Collector-contrib file "
        "exporter, format json); OpenInference semantic conventions 0.1.42; OTel GenAI "
        "semantic conventions 1.44 (gen_ai.operation.name)")

    expects = ('"resourceSpans" → "scopeSpans" → "spans": the Collector\'s file exporter, an '
               'OTLP/HTTP JSON body')

    def sniff(self, head: bytes) -> bool:
        head = unpacked(head)
        return first_char(head) in (b"{", b"[") and _OTLP_HEAD.search(head) is not None

    def near(self, text: str) -> tuple[int, str] | None:
        """Where the start of a file looks like this format but is not (for
        :func:`~evalharness.spans.readers.detect`'s error)."""
        found = re.search(r'"(?:spanId|startTimeUnixNano|start_time_unix_nano|scopeSpans|'
                          r'scope_spans)"\s*:', text)
        if found is None:
            return None
        return found.start(), ('it has OTLP span fields but no "resourceSpans" around them (a '
                               'bare list of spans: wrap it as {"resourceSpans": [{"scopeSpans":'
                               ' [{"spans": [...]}]}]})')

    def read(self, path: Path) -> Iterator[Span]:
        scope_item = resource_item = None  # the lists' holders last read, and what they give
        at_scope = ""
        scope: tuple[str | None, str | None] = (None, None)
        resource: dict[str, Any] = {}
        for item in records(path, LISTS):
            where = f"{path}, line {item.line}"
            if item.key == "spans":
                if item.parent is not scope_item:
                    scope_item = item.parent
                    at_scope = scope_item.field
                    scope = _scope(scope_item.value, where, at_scope)
                    if scope_item.parent is not resource_item:
                        resource_item = scope_item.parent
                        resource = _resource(resource_item.value, where, resource_item.field)
                span = _span(item.value, where, f"{at_scope}.spans[{item.index - 1}]")
                span.resource = resource  # one dict shared by the resource's spans
                span.scope, span.scope_version = scope
                yield span
            elif item.key is None:  # a request holding no list of spans
                yield from _request(item.value, where)
            elif item.key in _RESOURCE_SPANS:  # a resource holding none
                yield from _resource_block(item.value, where, item.field)
            else:  # a scope holding none
                holder = item.parent
                yield from _scope_block(item.value, _resource(holder.value, where, holder.field),
                                        where, item.field)


def _request(document: Any, where: str) -> Iterator[Span]:
    if not isinstance(document, dict):
        raise InputError(f"{where}: expected a JSON object (an OTLP traces request), "
                         f"found {type(document).__name__}")
    resource_spans, key = _pick(document, *_RESOURCE_SPANS)
    if resource_spans is None:
        if document and not any(k in document for k in _OTHER_SIGNALS):
            raise fail(where, "resourceSpans", "missing: not an OTLP traces record "
                                               f"(keys: {', '.join(list(document)[:5])})")
        return
    for r, block in enumerate(_list(resource_spans, where, key)):
        yield from _resource_block(block, where, f"{key}[{r}]")


def _pick(mapping: dict[str, Any], camel: str, snake: str) -> tuple[Any, str]:
    value = mapping.get(camel)
    if value is not None:
        return value, camel
    return mapping.get(snake), snake


def _list(value: Any, where: str, field: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise fail(where, field, f"expected a list, found {type(value).__name__}")
    return value


def _object(value: Any, where: str, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise fail(where, field, f"expected an object, found {type(value).__name__}")
    return value


def _resource(block: Any, where: str, at: str) -> dict[str, Any]:
    """The attributes of a ``resourceSpans`` element's resource."""
    resource = _object(_object(block, where, at).get("resource"), where, f"{at}.resource")
    return key_values(resource.get("attributes"), where, f"{at}.resource.attributes")


def _resource_block(block: Any, where: str, at: str) -> Iterator[Span]:
    resource_attributes = _resource(block, where, at)
    scopes, scopes_key = _pick(block, *_SCOPE_SPANS[:2])
    if scopes is None:  # OTLP before 0.15 (2022)
        scopes, scopes_key = _pick(block, *_SCOPE_SPANS[2:])
    for s, scope_block in enumerate(_list(scopes, where, f"{at}.{scopes_key}")):
        yield from _scope_block(scope_block, resource_attributes, where, f"{at}.{scopes_key}[{s}]")


def _scope(block: Any, where: str, at: str) -> tuple[str | None, str | None]:
    """The name and version of a ``scopeSpans`` element's scope."""
    block = _object(block, where, at)
    scope = block.get("scope", block.get("instrumentationLibrary",
                                         block.get("instrumentation_library")))
    scope = _object(scope, where, f"{at}.scope")
    return scope.get("name") or None, scope.get("version") or None


def _scope_block(block: Any, resource_attributes: dict[str, Any], where: str,
                 at: str) -> Iterator[Span]:
    scope_name, scope_version = _scope(block, where, at)
    for n, raw in enumerate(_list(block.get("spans"), where, f"{at}.spans")):
        span = _span(raw, where, f"{at}.spans[{n}]")
        span.resource = resource_attributes
        span.scope, span.scope_version = scope_name, scope_version
        yield span


def otlp_span(raw: Any, where: str, at: str) -> Span:
    """One OTLP JSON span object (camelCase or snake_case keys) as a :class:`Span`, without
    resource and scope (``at``: its field path, for messages)."""
    return _span(raw, where, at)


def _span(raw: Any, where: str, at: str) -> Span:
    raw = _object(raw, where, at)
    if "traceId" in raw or "trace_id" not in raw:
        trace_key, span_key, parent_key = "traceId", "spanId", "parentSpanId"
        start_key, end_key = "startTimeUnixNano", "endTimeUnixNano"
    else:
        trace_key, span_key, parent_key = "trace_id", "span_id", "parent_span_id"
        start_key, end_key = "start_time_unix_nano", "end_time_unix_nano"
    trace_id = hex_id(raw.get(trace_key), 16, where, f"{at}.{trace_key}")
    span_id = hex_id(raw.get(span_key), 8, where, f"{at}.{span_key}")
    if trace_id is None or span_id is None:
        missing = trace_key if trace_id is None else span_key
        raise fail(where, f"{at}.{missing}", "missing (every span needs a trace and a span id)")
    name = raw.get("name", "")
    if not isinstance(name, str):
        raise fail(where, f"{at}.name", f"expected a string, found {type(name).__name__}")
    attributes = key_values(raw.get("attributes"), where, f"{at}.attributes")
    state = _object(raw.get("status"), where, f"{at}.status")
    message = state.get("message") or None
    if message is not None and not isinstance(message, str):
        message = str(message)
    code = status(state.get("code"), where, f"{at}.status.code") or "UNSET"  # 0 is omitted
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=hex_id(raw.get(parent_key), 8, where, f"{at}.{parent_key}"),
        name=name,
        kind=span_kind(attributes, otel_kind(raw.get("kind"), where, f"{at}.kind")),
        start_ns=nanos(raw.get(start_key), where, f"{at}.{start_key}"),
        end_ns=nanos(raw.get(end_key), where, f"{at}.{end_key}"),
        attributes=attributes,
        events=[_event(event, where, f"{at}.events[{i}]")
                for i, event in enumerate(_list(raw.get("events"), where, f"{at}.events"))],
        status=code,
        status_message=message,
        source=where,
    )


def _event(raw: Any, where: str, at: str) -> SpanEvent:
    raw = _object(raw, where, at)
    time, key = _pick(raw, "timeUnixNano", "time_unix_nano")
    return SpanEvent(name=str(raw.get("name", "")), time_ns=nanos(time, where, f"{at}.{key}"),
                     attributes=key_values(raw.get("attributes"), where, f"{at}.attributes"))


def key_values(items: Any, where: str, field: str) -> dict[str, Any]:
    """OTLP ``KeyValue`` list -> flat attributes (:func:`~._otel.add_attribute`)."""
    out: dict[str, Any] = {}
    i = 0
    try:
        for i, item in enumerate(_list(items, where, field)):
            if type(item) is not dict:
                raise fail(where, f"{field}[{i}]", "expected an object {key, value}")
            value = item.get("value")
            if value is None:
                continue
            key = item.get("key", "")
            text = value.get("stringValue") if type(value) is dict else None
            if type(text) is str and type(key) is str:  # the common case, unwrapped inline
                out[key] = decode_json_text(text)
            else:
                add_attribute(out, str(key), any_value(value, where, f"{field}[{i}].value"))
    except jsonlimits.TooDeep:  # the JSON text in a string value
        raise too_deep(where, f"{field}[{i}].value") from None
    return out


def any_value(value: Any, where: str, field: str) -> Any:
    """An OTLP ``AnyValue`` (one of ``stringValue``, ``intValue``…) as a plain value."""
    if type(value) is not dict:
        raise fail(where, field, f"expected an AnyValue object, found {type(value).__name__}")
    for key, inner in value.items():
        if inner is None:  # a member left null, as Phoenix's REST API writes every one
            continue
        if key in ("stringValue", "string_value"):
            if isinstance(inner, str):
                return inner
        elif key in ("intValue", "int_value"):
            if isinstance(inner, int) and not isinstance(inner, bool):
                return inner
            if isinstance(inner, str):
                try:
                    return int(inner)
                except ValueError:
                    pass
        elif key in ("doubleValue", "double_value"):
            if isinstance(inner, int | float) and not isinstance(inner, bool):
                return float(inner)
            if isinstance(inner, str):  # "NaN", "Infinity", "-Infinity" in the JSON mapping
                try:
                    return float(inner)
                except ValueError:
                    pass
        elif key in ("boolValue", "bool_value"):
            if isinstance(inner, bool):
                return inner
        elif key in ("arrayValue", "array_value"):
            values = _list(_object(inner, where, f"{field}.{key}").get("values"), where,
                           f"{field}.{key}.values")
            return [any_value(v, where, f"{field}.{key}.values[{j}]")
                    for j, v in enumerate(values)]
        elif key in ("kvlistValue", "kvlist_value"):
            pairs = _list(_object(inner, where, f"{field}.{key}").get("values"), where,
                          f"{field}.{key}.values")
            nested: dict[str, Any] = {}
            for j, pair in enumerate(pairs):
                pair = _object(pair, where, f"{field}.{key}.values[{j}]")
                if pair.get("value") is not None:
                    nested[str(pair.get("key", ""))] = any_value(
                        pair["value"], where, f"{field}.{key}.values[{j}].value")
            return nested
        elif key in ("bytesValue", "bytes_value"):  # base64 text, kept as such
            if isinstance(inner, str):
                return inner
        else:
            continue  # a union member of a newer OTLP (or a profiles string index): skipped
        raise fail(where, f"{field}.{key}", f"not a valid {key} ({inner!r:.40})")
    return None


class ConsoleReader:
    """The OpenTelemetry Python SDK's span JSON, ``ReadableSpan.to_json()``, however it was
    saved: the ``ConsoleSpanExporter``'s output (pretty-printed objects one after another;
    lines between them that are not JSON, the application's own prints on the same stdout,
    are skipped), one object, JSON lines, a JSON array, or an agent framework's run dump that
    lists them under ``spans`` beside keys of its own (``{"spans": [...], "final_output":
    ...}``). Ids as ``0x`` hex, plain hex, or JSON integers (``span.context.trace_id``
    unformatted)."""

    name = "otel-console"
    written_against = (
        "opentelemetry-sdk 1.45 (Python) ReadableSpan.to_json / ConsoleSpanExporter; "
        "OpenInference semantic conventions 0.1.42; OTel GenAI semantic conventions 1.44")
    expects = ('"context": {"trace_id": …} with "kind": "SpanKind.…": ReadableSpan.to_json, '
               'printed, as JSON lines, an array or under "spans"')

    def sniff(self, head: bytes) -> bool:
        head = unpacked(head)
        return (_CONSOLE_HEAD.search(head) is not None
                and _CONSOLE_CONTEXT.search(head) is not None
                and _OTLP_HEAD.search(head) is None)

    def near(self, text: str) -> tuple[int, str] | None:
        """Where the start of a file looks like this format but is not (for
        :func:`~evalharness.spans.readers.detect`'s error)."""
        context = re.search(r'"context"\s*:\s*\{\s*"trace_id"', text)
        kind = re.search(r'"kind"\s*:\s*"SpanKind\.', text)
        if context and not kind and '"span_kind"' not in text:
            return context.start(), ('it has "context": {"trace_id": …} but no "kind": '
                                     '"SpanKind.…" beside it')
        if kind and not context:
            return kind.start(), ('it has "kind": "SpanKind.…" but no "context": {"trace_id": '
                                  '…} (hex, 0x-hex or an integer)')
        return None

    def read(self, path: Path) -> Iterator[Span]:
        holder = None  # the dump whose "spans" were read: not a span itself
        for item in records(path, _CONSOLE_LISTS, skip_text=True):
            if item.key == "spans":
                holder = item.parent
                where = item.where(path)
            elif item is holder:
                continue
            else:
                where = f"{path}, line {item.line}"
            yield console_span(item.value, where)


def sdk_id(value: Any, size: int, where: str, field: str) -> str | None:
    """An id of the SDK's span JSON: ``0x`` hex (what ``to_json`` writes), plain hex, or the
    integer itself (a trace id of 128 bits, a span id of 64), as lowercase hex.

    >>> sdk_id(0xC393FD0E1CC62BE5, 8, "f, line 1", "context.span_id")
    'c393fd0e1cc62be5'
    >>> sdk_id("0x0b13a023af11bab1", 8, "f, line 1", "parent_id")
    '0b13a023af11bab1'
    >>> sdk_id(1 << 64, 8, "f, line 1", "parent_id")
    Traceback (most recent call last):
    evalharness.errors.InputError: f, line 1, field parent_id: not an id (18446744073709551616 does not fit in 64 bits)
    """
    if isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value < 1 << (8 * size):
            raise fail(where, field, f"not an id ({value} does not fit in {8 * size} bits)")
        return f"{value:0{2 * size}x}" if value else None
    return hex_id(value, size, where, field)


def console_span(record: Any, where: str) -> Span:
    """One ``ReadableSpan.to_json`` object as a :class:`Span`."""
    if not isinstance(record, dict):
        raise InputError(f"{where}: expected a JSON object (a span), found "
                         f"{type(record).__name__}")
    context = _object(record.get("context"), where, "context")
    trace_id = sdk_id(context.get("trace_id"), 16, where, "context.trace_id")
    span_id = sdk_id(context.get("span_id"), 8, where, "context.span_id")
    if trace_id is None or span_id is None:
        missing = "context.trace_id" if trace_id is None else "context.span_id"
        raise fail(where, missing, "missing (every span needs a trace and a span id)")
    attributes = attributes_from(record.get("attributes"), where, "attributes")
    state = _object(record.get("status"), where, "status")
    events = []
    for i, event in enumerate(_list(record.get("events"), where, "events")):
        event = _object(event, where, f"events[{i}]")
        events.append(SpanEvent(
            name=str(event.get("name", "")),
            time_ns=iso_nanos(event.get("timestamp"), where, f"events[{i}].timestamp"),
            attributes=attributes_from(event.get("attributes"), where, f"events[{i}].attributes")))
    resource = _object(record.get("resource"), where, "resource")
    name = record.get("name", "")
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=sdk_id(record.get("parent_id"), 8, where, "parent_id"),
        name=name if isinstance(name, str) else str(name),
        kind=span_kind(attributes, otel_kind(record.get("kind"), where, "kind")),
        start_ns=iso_nanos(record.get("start_time"), where, "start_time"),
        end_ns=iso_nanos(record.get("end_time"), where, "end_time"),
        attributes=attributes,
        events=events,
        status=status(state.get("status_code"), where, "status.status_code"),
        status_message=state.get("description") or None,
        resource=attributes_from(resource.get("attributes"), where, "resource.attributes"),
        source=where,
    )
