"""OTLP/HTTP requests checked and turned into the records the span files hold, and the
answers the OTLP specification asks for (https://opentelemetry.io/docs/specs/otlp/).

A protobuf request is kept as received (an ``ExportTraceServiceRequest`` has the bytes of a
``TracesData``), after a full decode that checks every span's ids; a JSON request is kept as
one line. What is checked here is what grouping and joining need and what a reader would
otherwise refuse a whole file for: the structure, every span's trace and span ids, and for
JSON each span's name, kind, times and status. Attribute values are converted by the reader
when the files are read, under its own limits (docs/traces-formats.md).
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from typing import Any, Literal

import evalharness.jsonlimits as jsonlimits
from evalharness.errors import InputError
from evalharness.spans.readers._otel import fail, hex_id, nanos, otel_kind, status
from evalharness.spans.readers.otlp_proto import INSTALL, framing

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
MEDIA_TYPES = {PROTOBUF: "pb", JSON: "json"}
"""``Content-Type`` -> the kind of record it is stored as."""

Kind = Literal["pb", "json"]

# google.rpc.Code values for Status.code (the specification lets a server omit it)
INVALID_ARGUMENT = 3
RESOURCE_EXHAUSTED = 8
UNIMPLEMENTED = 12
UNAVAILABLE = 14


class BadRequest(ValueError):
    """The request cannot be stored: answered 400 (not retryable), its message says why."""


class TooLarge(ValueError):
    """The body, or what it decompresses to, is past the size limit: answered 413."""


class Unsupported(ValueError):
    """A content type or encoding that is not read here: answered 415."""


@dataclass(slots=True)
class Decoded:
    """One request, ready to append."""

    kind: Kind
    record: bytes
    """The bytes appended: the protobuf message as received, or one JSON line without its
    newline."""
    spans: int


def media_type(header: str | None) -> str:
    """The media type of a ``Content-Type`` header, without its parameters, lower-case.

    >>> media_type("Application/JSON; charset=utf-8"), media_type(None)
    ('application/json', '')
    """
    return (header or "").split(";", 1)[0].strip().lower()


def protobuf_available() -> bool:
    """Whether ``opentelemetry-proto`` (the ``otlp`` extra) is installed."""
    try:
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2  # noqa: F401
    except ImportError:
        return False
    return True


NO_PROTOBUF = (f"this evalharness cannot read OTLP protobuf: the opentelemetry-proto package "
               f"is not installed ({INSTALL}); restart the receiver after installing it, or "
               "send OTLP JSON (Content-Type: application/json; OTEL_EXPORTER_OTLP_PROTOCOL="
               "http/json in the SDKs that have it)")


def decompress(body: bytes, encoding: str | None, limit: int) -> bytes:
    """``body`` decoded from its ``Content-Encoding`` (none, ``gzip``, ``deflate``), at most
    ``limit`` bytes of it (:class:`TooLarge` past that, before more is inflated).

    >>> import gzip
    >>> decompress(gzip.compress(b"abc"), "gzip", 10)
    b'abc'
    >>> decompress(gzip.compress(b"a" * 100), "gzip", 10)
    Traceback (most recent call last):
    ...
    evalharness.spans.receive.otlp.TooLarge: the request decompresses to more than 10 bytes (the limit)
    """
    coding = (encoding or "").strip().lower()
    if coding in ("", "identity", "none"):
        return body
    if coding in ("gzip", "x-gzip"):
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    elif coding == "deflate":
        inflater = zlib.decompressobj(wbits=zlib.MAX_WBITS if body[:1] == b"\x78"
                                      else -zlib.MAX_WBITS)
    else:
        raise Unsupported(f"Content-Encoding {encoding!r} is not supported; send gzip, deflate "
                          "or no encoding")
    parts = []
    size = 0
    data = body
    try:
        while data:
            chunk = inflater.decompress(data, limit + 1 - size)
            parts.append(chunk)
            size += len(chunk)
            if size > limit:
                raise TooLarge(f"the request decompresses to more than {limit:,} bytes (the "
                               "limit)")
            data = inflater.unconsumed_tail
            if inflater.eof:
                data = inflater.unused_data  # gzip members one after another
                if data:
                    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        if not inflater.eof and body:
            raise BadRequest(f"the {coding} body ends before its end marker (truncated?)")
    except zlib.error as exc:
        raise BadRequest(f"the body is not valid {coding} data ({exc})") from None
    return b"".join(parts)


def decode(kind: Kind, body: bytes) -> Decoded:
    """The record for a request body of ``kind`` (:class:`BadRequest` when it cannot be
    stored)."""
    return decode_protobuf(body) if kind == "pb" else decode_json(body)


def decode_protobuf(body: bytes) -> Decoded:
    """A binary ``ExportTraceServiceRequest``: decoded whole to check it and count its spans,
    kept as received (re-encoded without unknown fields only when, after its length as a
    varint, its first bytes would not be recognised as OTLP protobuf by the reader: a newer
    OTLP's fields first)."""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    try:
        request = ExportTraceServiceRequest.FromString(body)
    except (DecodeError, RecursionError) as exc:
        raise BadRequest(f"not a valid OTLP ExportTraceServiceRequest in protobuf ({exc}); "
                         f"send Content-Type: {JSON} for OTLP JSON") from None
    spans = 0
    for r, block in enumerate(request.resource_spans):
        for s, scope in enumerate(block.scope_spans):
            for n, span in enumerate(scope.spans):
                at = f"resource_spans[{r}].scope_spans[{s}].spans[{n}]"
                _bytes_id(span.trace_id, 16, f"{at}.trace_id", required=True)
                _bytes_id(span.span_id, 8, f"{at}.span_id", required=True)
                _bytes_id(span.parent_span_id, 8, f"{at}.parent_span_id", required=False)
                spans += 1
    record = body
    if spans and framing(varint(len(body)) + body[:1 << 16]) != "varint":
        request.DiscardUnknownFields()
        record = request.SerializeToString()
    return Decoded("pb", record, spans)


def _bytes_id(value: bytes, size: int, field: str, required: bool) -> None:
    if not value or value.count(0) == len(value):
        if required:
            raise BadRequest(f"field {field}: missing (every span needs a trace and a span id)")
        return
    if len(value) != size:
        raise BadRequest(f"field {field}: not a {size}-byte id ({len(value)} bytes)")


_RESOURCE_SPANS = ("resourceSpans", "resource_spans")
_SCOPE_SPANS = ("scopeSpans", "scope_spans", "instrumentationLibrarySpans",
                "instrumentation_library_spans")
_WHERE = "the request"


def decode_json(body: bytes) -> Decoded:
    """An OTLP JSON ``ExportTraceServiceRequest``: decoded (nesting at most
    :data:`~evalharness.jsonlimits.MAX_DEPTH` deep, as every reader of ours decodes JSON),
    every span checked, kept as one line (its line breaks, whitespace between JSON tokens,
    made spaces).

    >>> d = decode_json(b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": '
    ...                 b'"5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174",'
    ...                 b'\\n "name": "ask"}]}]}]}')
    >>> d.spans, b"\\n" in d.record
    (1, False)
    >>> decode_json(b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "x"}]}]}]}')
    Traceback (most recent call last):
    ...
    evalharness.spans.receive.otlp.BadRequest: field resourceSpans[0].scopeSpans[0].spans[0].traceId: not a hex id ('x'; expected 32 hex digits)
    """
    try:
        document = jsonlimits.loads(body)
    except UnicodeDecodeError as exc:
        raise BadRequest(f"the body is not UTF-8 text ({exc.reason} at byte {exc.start}); "
                         f"send Content-Type: {PROTOBUF} for OTLP protobuf") from None
    except ValueError as exc:  # JSONDecodeError, TooDeep
        raise BadRequest(f"not valid JSON ({exc}); an OTLP JSON request is one "
                         '{"resourceSpans": [...]} object') from None
    try:
        spans = _check_request(document)
    except InputError as exc:
        raise BadRequest(str(exc).removeprefix(f"{_WHERE}, ")) from None
    record = body.replace(b"\r", b" ").replace(b"\n", b" ") if b"\n" in body or b"\r" in body \
        else body
    return Decoded("json", record, spans)


def _check_request(document: Any) -> int:
    """The number of spans of a decoded OTLP JSON request, after checking what the
    reader's grouping, mapping and joining rest on (:class:`InputError` naming the field)."""
    if not isinstance(document, dict):
        raise BadRequest(f"expected a JSON object (an OTLP traces request), found "
                         f"{type(document).__name__}")
    blocks, key = _pick(document, _RESOURCE_SPANS)
    spans = 0
    for r, block in enumerate(_list(blocks, key)):
        at = f"{key}[{r}]"
        block = _object(block, at)
        _list(_object(block.get("resource"), f"{at}.resource").get("attributes"),
              f"{at}.resource.attributes")
        scopes, scopes_key = _pick(block, _SCOPE_SPANS)
        for s, scope in enumerate(_list(scopes, f"{at}.{scopes_key}")):
            scope_at = f"{at}.{scopes_key}[{s}]"
            scope = _object(scope, scope_at)
            for n, span in enumerate(_list(scope.get("spans"), f"{scope_at}.spans")):
                _check_span(span, f"{scope_at}.spans[{n}]")
                spans += 1
    return spans


def _check_span(raw: Any, at: str) -> None:
    raw = _object(raw, at)
    snake = "traceId" not in raw and "trace_id" in raw
    trace_key, span_key, parent_key, start_key, end_key = (
        ("trace_id", "span_id", "parent_span_id", "start_time_unix_nano", "end_time_unix_nano")
        if snake else
        ("traceId", "spanId", "parentSpanId", "startTimeUnixNano", "endTimeUnixNano"))
    for key, size in ((trace_key, 16), (span_key, 8)):
        if hex_id(raw.get(key), size, _WHERE, f"{at}.{key}") is None:
            raise fail(_WHERE, f"{at}.{key}", "missing (every span needs a trace and a span id)")
    hex_id(raw.get(parent_key), 8, _WHERE, f"{at}.{parent_key}")
    name = raw.get("name", "")
    if not isinstance(name, str):
        raise fail(_WHERE, f"{at}.name", f"expected a string, found {type(name).__name__}")
    otel_kind(raw.get("kind"), _WHERE, f"{at}.kind")
    nanos(raw.get(start_key), _WHERE, f"{at}.{start_key}")
    nanos(raw.get(end_key), _WHERE, f"{at}.{end_key}")
    status(_object(raw.get("status"), f"{at}.status").get("code"), _WHERE, f"{at}.status.code")
    _list(raw.get("attributes"), f"{at}.attributes")
    _list(raw.get("events"), f"{at}.events")


def _pick(mapping: dict[str, Any], keys: tuple[str, ...]) -> tuple[Any, str]:
    for key in keys:
        if mapping.get(key) is not None:
            return mapping[key], key
    return None, keys[0]


def _list(value: Any, field: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise fail(_WHERE, field, f"expected a list, found {type(value).__name__}")
    return value


def _object(value: Any, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise fail(_WHERE, field, f"expected an object, found {type(value).__name__}")
    return value


def success(kind: Kind) -> bytes:
    """The body of a 200: an empty ``ExportTraceServiceResponse`` (``partial_success`` unset,
    as the specification asks for a full success) in the request's encoding.

    >>> success("pb"), success("json")
    (b'', b'{}')
    """
    return b"" if kind == "pb" else b"{}"


def status_body(kind: Kind, code: int, message: str) -> bytes:
    """The body of a 4xx/5xx: a ``google.rpc.Status`` with ``code`` and ``message``, in
    protobuf (written by hand: it needs no package) or JSON.

    >>> status_body("pb", 3, "bad")
    b'\\x08\\x03\\x12\\x03bad'
    >>> status_body("json", 3, "bad")
    b'{"code": 3, "message": "bad"}'
    """
    if kind == "json":
        return json.dumps({"code": code, "message": message}).encode()
    text = message.encode()
    return b"\x08" + varint(code) + b"\x12" + varint(len(text)) + text


def varint(value: int) -> bytes:
    """``value`` as a protobuf varint (how a length is written before a delimited message).

    >>> varint(5), varint(300)
    (b'\\x05', b'\\xac\\x02')
    """
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)
