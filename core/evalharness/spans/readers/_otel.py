"""What the OpenTelemetry-family readers (OTLP JSON and protobuf, the console exporter,
Phoenix) share: ids, times, span kinds, statuses and the one way attributes are flattened.

Attributes come out the same from every one of these formats, so that one mapping works on
all of them (docs/traces-formats.md):

* keys are flat and dotted, as OpenInference instrumentations write them
  (``llm.input_messages.0.message.content``); a nested mapping (an OTLP ``kvlistValue``,
  Phoenix's nested ``attributes``) is flattened into such keys, and so is a list that holds
  mappings (its items under ``.0``, ``.1``…); a list of plain values stays a list;
* except under the keys OpenInference defines as JSON objects (``metadata``,
  ``document.metadata``, ``llm.prompt_template.variables``, ``tool.parameters``): there the
  mapping is the value;
* a string that is the JSON text of an object or an array (``input.value`` with
  ``input.mime_type: application/json``, ``llm.invocation_parameters``) is decoded; other
  strings stay strings;
* bytes become their base64 text, as OTLP JSON writes ``bytesValue``; ``None`` is dropped;
* no value nests arrays and objects more than :data:`evalharness.jsonlimits.MAX_DEPTH`
  deep, nor does the JSON text of one in a string: either is an error naming the field
  (:func:`too_deep`), never a ``RecursionError``.
"""

from __future__ import annotations

import base64
import binascii
import re
from datetime import UTC, datetime
from typing import Any

import evalharness.jsonlimits as jsonlimits
from evalharness.errors import InputError

OPENINFERENCE_KIND = "openinference.span.kind"
GEN_AI_OPERATION = "gen_ai.operation.name"

OTEL_KINDS = ("UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER")
"""OTel ``SpanKind`` names by their OTLP number."""

STATUSES = ("UNSET", "OK", "ERROR")
"""OTel status codes by their OTLP number."""

_JSON_OBJECT_KEYS = ("llm.prompt_template.variables", "tool.parameters")
_HEX = re.compile(r"[0-9a-fA-F]*")
_ISO = re.compile(r"(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d)(?:[.,](\d+))?\s*(Z|[+-]\d\d:?\d\d)?",
                  re.IGNORECASE)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_JSON_BLANKS = " \t\n\r"
_JSON_BLANK = re.compile(r"[ \t\n\r]*")


def first_char(head: bytes) -> bytes:
    """The first byte of ``head`` that is not whitespace or a UTF-8 byte order mark.

    >>> first_char(b"\\xef\\xbb\\xbf\\n  {")
    b'{'
    """
    return head.lstrip(b"\xef\xbb\xbf").lstrip()[:1]


def fail(where: str, field: str, problem: str) -> InputError:
    """The error of one field of one record: ``FILE, line N, field PATH: problem``."""
    return InputError(f"{where}, field {field}: {problem}")


def too_deep(where: str, field: str) -> InputError:
    """The error of a field whose value, or the JSON text in it, nests too deep.

    >>> "line 2, field attributes: arrays and objects nested more than 128 deep" in str(
    ...     too_deep("f.jsonl, line 2", "attributes"))
    True
    """
    return fail(where, field, f"arrays and objects nested more than {jsonlimits.MAX_DEPTH} "
                              "deep (the limit), in the value or in the JSON text it holds; a "
                              "trace attribute nests a handful of levels")


def span_kind(attributes: dict[str, Any], fallback: str | None) -> str | None:
    """The kind of a span: OpenInference's ``openinference.span.kind`` (upper-cased) when
    present and not ``UNKNOWN``, else OTel GenAI's ``gen_ai.operation.name``, else
    ``fallback`` (the format's own: the OTel span kind name, Phoenix's ``span_kind``).

    >>> span_kind({"openinference.span.kind": "retriever"}, "INTERNAL")
    'RETRIEVER'
    >>> span_kind({"gen_ai.operation.name": "chat"}, "CLIENT")
    'chat'
    >>> span_kind({}, "INTERNAL")
    'INTERNAL'
    """
    kind = attributes.get(OPENINFERENCE_KIND)
    if isinstance(kind, str) and kind and kind.upper() != "UNKNOWN":
        return kind.upper()
    operation = attributes.get(GEN_AI_OPERATION)
    if isinstance(operation, str) and operation:
        return operation
    return fallback


def hex_id(value: Any, size: int, where: str, field: str) -> str | None:
    """A trace id (``size`` 16) or span id (``size`` 8) as lowercase hex; ``None`` when empty
    (or all zeros, which OTel uses for "no parent"). Accepts hex (OTLP JSON, optionally
    ``0x``-prefixed) and base64 (the protobuf JSON mapping of ``bytes``).

    >>> hex_id("0x5B8EFFF798038103D269B633813FC60C", 16, "f, line 1", "traceId")
    '5b8efff798038103d269b633813fc60c'
    >>> hex_id("W47/95gDgQPSabYzgT/GDA==", 16, "f, line 1", "traceId")
    '5b8efff798038103d269b633813fc60c'
    >>> hex_id("0000000000000000", 8, "f, line 1", "parentSpanId") is None
    True
    >>> hex_id("xyz", 8, "f, line 1", "spanId")
    Traceback (most recent call last):
    evalharness.errors.InputError: f, line 1, field spanId: not a hex id ('xyz'; expected 16 hex digits)
    """
    if value is None or value == "":
        return None
    if isinstance(value, str):
        text = value[2:] if value[:2] in ("0x", "0X") else value
        if len(text) == 2 * size and _HEX.fullmatch(text):
            text = text.lower()
            return None if text.count("0") == len(text) else text
        if len(text) in (4 * ((size + 2) // 3), (4 * size + 2) // 3):  # base64, padded or not
            try:
                raw = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
            except (binascii.Error, ValueError):
                raw = b""
            if len(raw) == size:
                return raw.hex() if raw.count(0) < size else None
    raise fail(where, field, f"not a hex id ({value!r:.60}; expected {2 * size} hex digits)")


def nanos(value: Any, where: str, field: str) -> int | None:
    """An OTLP ``fixed64`` time in nanoseconds (a JSON string or number); ``None`` for 0.

    >>> nanos("1700000000123456789", "f, line 1", "startTimeUnixNano")
    1700000000123456789
    """
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.isdigit():
        number = int(value)
    else:
        raise fail(where, field, f"not an integer of nanoseconds since the epoch ({value!r:.40})")
    return number or None


def iso_nanos(value: Any, where: str, field: str) -> int | None:
    """An ISO 8601 time as nanoseconds since the epoch, exactly (fractions of up to nine
    digits); no offset means UTC.

    >>> iso_nanos("2024-05-01T12:00:00.123456Z", "f, line 1", "start_time")
    1714564800123456000
    >>> iso_nanos("2024-05-01T14:00:00.123456789+02:00", "f, line 1", "start_time")
    1714564800123456789
    """
    if value is None or value == "":
        return None
    match = _ISO.fullmatch(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise fail(where, field, f"not an ISO 8601 time ({value!r:.40})")
    day, clock, fraction, offset = match.groups()
    if offset is None or offset.upper() == "Z":
        offset = "+00:00"
    try:
        moment = datetime.fromisoformat(f"{day}T{clock}{offset}")
    except ValueError as exc:
        raise fail(where, field, f"not an ISO 8601 time ({value!r:.40}): {exc}") from None
    delta = moment - _EPOCH
    seconds = delta.days * 86_400 + delta.seconds
    return seconds * 1_000_000_000 + int(((fraction or "") + "000000000")[:9])


def datetime_nanos(moment: datetime) -> int:
    """A ``datetime`` (naive: UTC) as nanoseconds since the epoch, exactly."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def status(value: Any, where: str, field: str) -> str | None:
    """An OTel status code (its number or its name, with or without ``STATUS_CODE_``) as
    ``UNSET``/``OK``/``ERROR``.

    >>> status(2, "f, line 1", "status.code"), status("STATUS_CODE_OK", "f", "code")
    ('ERROR', 'OK')
    """
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(STATUSES):
        return STATUSES[value]
    if isinstance(value, str):
        name = value.upper().removeprefix("STATUS_CODE_").removeprefix("STATUSCODE.")
        if name in STATUSES:
            return name
    raise fail(where, field, f"not a status code ({value!r:.40}; expected 0-2 or "
                             f"{'/'.join(STATUSES)})")


def otel_kind(value: Any, where: str, field: str) -> str | None:
    """An OTel span kind (its number, ``SPAN_KIND_CLIENT``, ``SpanKind.CLIENT`` or ``CLIENT``)
    as its name; ``None`` for ``UNSPECIFIED``.

    >>> otel_kind(3, "f", "kind"), otel_kind("SpanKind.INTERNAL", "f", "kind")
    ('CLIENT', 'INTERNAL')
    """
    if value is None:
        return None
    name = None
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(OTEL_KINDS):
        name = OTEL_KINDS[value]
    elif isinstance(value, str):
        name = value.upper().removeprefix("SPAN_KIND_").removeprefix("SPANKIND.")
    if name not in OTEL_KINDS:
        raise fail(where, field, f"not a span kind ({value!r:.40}; expected 0-5 or "
                                 f"{'/'.join(OTEL_KINDS[1:])})")
    return None if name == "UNSPECIFIED" else name


def decode_json_text(value: str) -> Any:
    """A string that is the JSON text of an object or an array, decoded; any other string
    unchanged. :class:`~evalharness.jsonlimits.TooDeep` when the text nests deeper than the
    limit (the caller names the field).

    >>> decode_json_text('{"query": "red shoes"}'), decode_json_text("[1] see above")
    ({'query': 'red shoes'}, '[1] see above')
    >>> decode_json_text("[" * 200 + "]" * 200)
    Traceback (most recent call last):
    ...
    evalharness.jsonlimits.TooDeep: arrays and objects nested more than 128 deep (the limit): line 1 column 129 (char 128)
    """
    first = value[:1]
    if first in (" ", "\n", "\t", "\r"):
        stripped = value.strip()
        first, last = stripped[:1], stripped[-1:]
    else:
        last = value[-1:].rstrip() or value.rstrip()[-1:]
    if (first == "{" and last == "}") or (first == "[" and last == "]"):
        start = _JSON_BLANK.match(value).end() if value[:1] in _JSON_BLANKS else 0
        try:  # raw_decode: json.loads' own checks, at half the cost of jsonlimits.loads
            decoded, end = jsonlimits.raw_decode(value, start)
        except jsonlimits.TooDeep:
            raise
        except ValueError:
            return value
        if isinstance(decoded, dict | list) and not value[end:].strip(_JSON_BLANKS):
            return decoded
    return value


def add_attribute(out: dict[str, Any], key: str, value: Any) -> None:
    """Put one attribute into ``out`` the way every OTel-family reader does (the module's
    docstring says how).

    >>> out = {}
    >>> add_attribute(out, "llm", {"input_messages": [{"message": {"role": "user"}}]})
    >>> add_attribute(out, "metadata", {"user": "u1"})
    >>> add_attribute(out, "input.value", '{"question": "hi"}')
    >>> add_attribute(out, "tag.tags", ["a", "b"])
    >>> out
    {'llm.input_messages.0.message.role': 'user', 'metadata': {'user': 'u1'}, 'input.value': {'question': 'hi'}, 'tag.tags': ['a', 'b']}
    """
    kind = type(value)
    if kind is str:
        out[key] = decode_json_text(value)
    elif kind is dict:
        if key == "metadata" or key.endswith(".metadata") or key.endswith(_JSON_OBJECT_KEYS):
            out[key] = _without_none(value)
            return
        for name, item in value.items():
            add_attribute(out, f"{key}.{name}" if key else str(name), item)
    elif kind is list or kind is tuple:
        if any(type(item) is dict for item in value):
            for index, item in enumerate(value):
                add_attribute(out, f"{key}.{index}", item)
        else:
            out[key] = [base64.b64encode(v).decode() if isinstance(v, bytes) else v
                        for v in value if v is not None]
    elif value is None:
        return
    elif kind is bytes:
        out[key] = base64.b64encode(value).decode()
    else:
        out[key] = value


def attributes_from(mapping: Any, where: str, field: str) -> dict[str, Any]:
    """A mapping of attributes (plain JSON values, nested or flat) put through
    :func:`add_attribute`."""
    if mapping is None:
        return {}
    if not isinstance(mapping, dict):
        raise fail(where, field, f"expected an object of attributes, found "
                                 f"{type(mapping).__name__}")
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        try:
            add_attribute(out, key, value)
        except jsonlimits.TooDeep:
            raise too_deep(where, f"{field}.{key}") from None
    return out


def _without_none(value: Any) -> Any:
    """A nested value without ``None`` entries in its mappings (a parquet struct has every
    field of every row; the missing ones are null)."""
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value
