"""Reader of OTLP protobuf files (``otlp-proto``): ``TracesData`` messages each after its
length (the Collector's file exporter, ``format: proto``: 4 bytes big-endian; or a varint, as
protobuf's ``writeDelimitedTo`` writes), or one unprefixed ``TracesData`` /
``ExportTraceServiceRequest`` (an OTLP/HTTP request body); docs/traces-formats.md.

Needs the ``opentelemetry-proto`` package (``pip install 'evalharness[otlp]'``), imported only
when a file is read: :meth:`OtlpProtoReader.sniff` works on bytes alone.

A length is checked against the bytes left in the file and against :data:`MAX_MESSAGE` before
anything is read for it; attribute values nest at most
:data:`evalharness.jsonlimits.MAX_DEPTH` deep, as in every JSON format (the protobuf decoder
itself stops at 100 nested messages).
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import evalharness.jsonlimits as jsonlimits
from evalharness.errors import InputError
from evalharness.spans.model import Span, SpanEvent
from evalharness.spans.readers._otel import (
    OTEL_KINDS,
    STATUSES,
    add_attribute,
    fail,
    span_kind,
    too_deep,
)

INSTALL = "pip install 'evalharness[otlp]'"
MAX_MESSAGE = 256 << 20
"""The largest message (a length-prefixed ``TracesData``, or one ``ResourceSpans`` of an
unprefixed one) read and decoded at once, in bytes."""

_RESOURCE_SPANS_TAG = 0x0A  # TracesData / ExportTraceServiceRequest field 1, length-delimited
_RESOURCE_SPANS_FIELDS = {0x0A, 0x12, 0x1A}  # ResourceSpans: resource, scope_spans, schema_url


class OtlpProtoReader:
    """OTLP protobuf: length-prefixed ``TracesData`` messages, or one unprefixed message."""

    name = "otlp-proto"
    written_against = (
        "OTLP v1 protobuf (opentelemetry-proto 1.45 for Python, protobuf 7); the "
        "Collector-contrib file exporter, format proto (4-byte big-endian length prefix); "
        "OpenInference semantic conventions 0.1.42; OTel GenAI semantic conventions 1.44")

    expects = "OTLP protobuf TracesData, length-prefixed or one unprefixed request"

    def sniff(self, head: bytes) -> bool:
        return framing(head) is not None

    def read(self, path: Path) -> Iterator[Span]:
        try:
            from opentelemetry.proto.trace.v1 import trace_pb2
        except ImportError:
            raise InputError(f"{path}: reading OTLP protobuf needs the opentelemetry-proto "
                             f"package: {INSTALL}") from None
        from google.protobuf.message import DecodeError

        try:
            fh = open(path, "rb")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise InputError(f"{path}: cannot be read: {exc.strerror or exc}") from exc
        with fh:
            head = fh.read(64 * 1024)
            style = framing(head)
            if style is None:
                raise InputError(f"{path}: not OTLP protobuf (neither length-prefixed TracesData "
                                 f"messages nor one TracesData / ExportTraceServiceRequest)")
            fh.seek(0)
            number = 0
            for offset, payload in _messages(fh, style, path):
                number += 1
                where = f"{path}, message {number} (byte {offset})"
                try:
                    if style == "bare":  # one ResourceSpans of the single message
                        blocks = [trace_pb2.ResourceSpans.FromString(payload)]
                        field = f"resource_spans[{number - 1}]"
                    else:
                        blocks = list(trace_pb2.TracesData.FromString(payload).resource_spans)
                        field = "resource_spans"
                except DecodeError as exc:
                    raise InputError(f"{where}: not a valid OTLP message ({_decode_error(exc)})"
                                     ) from None
                for r, block in enumerate(blocks):
                    at = field if style == "bare" else f"{field}[{r}]"
                    yield from _resource_spans(block, where, at)


def _decode_error(exc: Exception) -> str:
    """The protobuf decoder's complaint, said plainly when it is about nesting."""
    text = str(exc)
    if "MaxDepth" in text or "nesting" in text:
        return (f"{text}: messages nested deeper than the protobuf decoder's limit of 100 — "
                "an attribute's kvlistValue or arrayValue nested too deep; a trace attribute "
                "nests a handful of levels")
    return text


def _messages(fh: BinaryIO, style: str, path: Path) -> Iterator[tuple[int, bytes]]:
    """``(byte offset, payload)`` of each message; for ``bare`` files each ``ResourceSpans``
    of the one message, so that it too streams. A length is checked against the bytes left
    in the file and :data:`MAX_MESSAGE` before anything is read for it."""
    total = os.fstat(fh.fileno()).st_size
    offset = 0
    while True:
        if style == "be32":
            prefix = fh.read(4)
            if not prefix:
                return
            if len(prefix) < 4:
                raise InputError(f"{path}, byte {offset}: the file ends inside a length prefix")
            size, start = int.from_bytes(prefix, "big"), offset + 4
        else:
            first = fh.read(1)
            if not first:
                return
            if style == "bare" and first[0] != _RESOURCE_SPANS_TAG:
                raise InputError(f"{path}, byte {offset}: expected field 1 (resource_spans) of "
                                 f"a TracesData message, found tag 0x{first[0]:02x}")
            size, used = _read_varint(fh, b"" if style == "bare" else first, path, offset)
            start = offset + (1 if style == "bare" else 0) + used
        if size > total - start:
            raise InputError(f"{path}, byte {offset}: the file ends inside a message (its "
                             f"length prefix says {size:,} bytes; {max(0, total - start):,} "
                             f"are left in the file): a truncated file, or bytes that are not "
                             f"a length prefix")
        if size > MAX_MESSAGE:
            raise InputError(f"{path}, byte {offset}: a message of {size:,} bytes, more than "
                             f"{MAX_MESSAGE >> 20} MB (the limit of one message read at "
                             f"once); export in smaller batches")
        payload = fh.read(size)
        if len(payload) < size:
            raise InputError(f"{path}, byte {offset}: the file ends inside a message (expected "
                             f"{size} bytes, found {len(payload)})")
        yield offset, payload
        offset = start + size


def _read_varint(fh: BinaryIO, first: bytes, path: Path, offset: int) -> tuple[int, int]:
    value = shift = used = 0
    pending = first
    while True:
        byte = pending or fh.read(1)
        pending = b""
        if not byte:
            raise InputError(f"{path}, byte {offset}: the file ends inside a length prefix")
        used += 1
        value |= (byte[0] & 0x7F) << shift
        if not byte[0] & 0x80:
            return value, used
        shift += 7
        if shift > 63:
            raise InputError(f"{path}, byte {offset}: a length prefix longer than 10 bytes")


def _varint_at(data: bytes, pos: int) -> tuple[int, int] | None:
    """``(value, position after it)``, or None when ``data`` ends inside it."""
    value = shift = 0
    while pos < len(data) and shift < 64:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    return None


def _resource_spans_at(data: bytes, pos: int) -> bool:
    """Whether ``data[pos:]`` starts like a ``ResourceSpans`` field of a ``TracesData``: tag
    0x0A, a length, and inside it fields that a ResourceSpans has (as far as ``data`` goes)."""
    if pos >= len(data) or data[pos] != _RESOURCE_SPANS_TAG:
        return False
    parsed = _varint_at(data, pos + 1)
    if parsed is None:
        return False
    size, inner = parsed
    end = min(inner + size, len(data))
    if size == 0 or inner >= len(data):
        return size == 0 or inner == len(data)
    while inner < end:  # walk the ResourceSpans' fields that are in the head
        if data[inner] not in _RESOURCE_SPANS_FIELDS:
            return False
        parsed = _varint_at(data, inner + 1)
        if parsed is None:
            return True  # the head ends inside it
        length, inner = parsed
        inner += length
    return inner == end or end == len(data)


_CONTROL = bytes(c for c in range(32) if c not in (9, 10, 13))


def _json_text(head: bytes) -> bool:
    """Whether ``head`` is JSON text (its first 4 KB free of control bytes, starting with ``{``
    or ``[`` after blanks): the blank lines before it would otherwise read as a ResourceSpans
    tag (0x0A) and a length. OTLP protobuf holds control bytes in its first fields (lengths,
    tags, random ids)."""
    sample = head[:4096]
    return (sample.lstrip(b" \t\r\n")[:1] in (b"{", b"[")
            and not any(c in sample for c in _CONTROL))


def framing(head: bytes) -> str | None:
    """How the messages of a file starting with ``head`` are delimited: ``bare`` (one
    unprefixed message), ``be32`` (4-byte big-endian lengths) or ``varint``; None when it
    does not look like OTLP protobuf.

    >>> framing(bytes([0x0A, 0x02, 0x0A, 0x00]))
    'bare'
    >>> framing(bytes([0, 0, 0, 4, 0x0A, 0x02, 0x0A, 0x00]))
    'be32'
    >>> framing(b'{"resourceSpans": []}') is None
    True
    >>> framing(b'\\n\\n{\\n  "name": "router"}') is None  # JSON text, not a varint 10
    True
    """
    if not head or _json_text(head):
        return None
    if head[0] == _RESOURCE_SPANS_TAG and _resource_spans_at(head, 0):
        return "bare"
    if len(head) >= 5 and head[0] == 0:
        size = int.from_bytes(head[:4], "big")
        if size and _resource_spans_at(head[:4 + size], 4):
            return "be32"
    parsed = _varint_at(head, 0)
    if parsed is not None and parsed[0] and _resource_spans_at(head[:parsed[1] + parsed[0]],
                                                                parsed[1]):
        return "varint"
    return None


# --- protobuf messages -> spans ---------------------------------------------------------------


def _resource_spans(block: Any, where: str, at: str) -> Iterator[Span]:
    resource = _attributes(block.resource.attributes, where, f"{at}.resource.attributes")
    scopes = block.scope_spans
    for s, scope_block in enumerate(scopes):
        scope_name = scope_block.scope.name or None
        scope_version = scope_block.scope.version or None
        for n, raw in enumerate(scope_block.spans):
            span = _span(raw, where, f"{at}.scope_spans[{s}].spans[{n}]")
            span.resource = resource
            span.scope, span.scope_version = scope_name, scope_version
            yield span


def _id(value: bytes, size: int, where: str, field: str, required: bool) -> str | None:
    if not value or value.count(0) == len(value):
        if required:
            raise fail(where, field, "missing (every span needs a trace and a span id)")
        return None
    if len(value) != size:
        raise fail(where, field, f"not a {size}-byte id ({len(value)} bytes)")
    return value.hex()


def _attributes(items: Any, where: str, field: str) -> dict[str, Any]:
    """:func:`key_values` with its errors naming the record and the field."""
    try:
        return key_values(items)
    except ValueError:  # nested too deep, or the JSON text in a string (TooDeep) is
        raise too_deep(where, field) from None


def _span(raw: Any, where: str, at: str) -> Span:
    attributes = _attributes(raw.attributes, where, f"{at}.attributes")
    kind = OTEL_KINDS[raw.kind] if 0 < raw.kind < len(OTEL_KINDS) else None
    code = raw.status.code  # an absent status is UNSET (0), as in OTLP
    return Span(
        trace_id=_id(raw.trace_id, 16, where, f"{at}.trace_id", True),
        span_id=_id(raw.span_id, 8, where, f"{at}.span_id", True),
        parent_id=_id(raw.parent_span_id, 8, where, f"{at}.parent_span_id", False),
        name=raw.name,
        kind=span_kind(attributes, kind),
        start_ns=raw.start_time_unix_nano or None,
        end_ns=raw.end_time_unix_nano or None,
        attributes=attributes,
        events=[SpanEvent(e.name, e.time_unix_nano or None,
                          _attributes(e.attributes, where, f"{at}.events[{i}].attributes"))
                for i, e in enumerate(raw.events)],
        status=STATUSES[code] if 0 <= code < len(STATUSES) else "UNSET",
        status_message=raw.status.message or None,
        source=where,
    )


def key_values(items: Any) -> dict[str, Any]:
    """Protobuf ``KeyValue``s -> flat attributes (:func:`~._otel.add_attribute`);
    ``ValueError`` when a value, or the JSON text in one, nests deeper than the limit."""
    out: dict[str, Any] = {}
    for item in items:
        add_attribute(out, item.key, any_value(item.value))
    return out


def any_value(value: Any, depth: int = 0) -> Any:
    """An ``AnyValue`` as a plain value; arrays and key-value lists nest at most
    :data:`~evalharness.jsonlimits.MAX_DEPTH` deep (``depth``: how many are around it)."""
    which = value.WhichOneof("value")
    if which in ("array_value", "kvlist_value") and depth >= jsonlimits.MAX_DEPTH:
        raise ValueError(f"arrays and objects nested more than {jsonlimits.MAX_DEPTH} deep "
                         "(the limit); a trace attribute nests a handful of levels")
    if which == "string_value":
        return value.string_value
    if which == "int_value":
        return value.int_value
    if which == "double_value":
        return value.double_value
    if which == "bool_value":
        return value.bool_value
    if which == "array_value":
        return [any_value(v, depth + 1) for v in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: any_value(kv.value, depth + 1) for kv in value.kvlist_value.values}
    if which == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    return None  # unset, or a union member of a newer OTLP
