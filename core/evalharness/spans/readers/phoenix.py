"""Reader of Arize Phoenix exports (``phoenix``): Phoenix's span JSON (``span_to_json``), as
JSON lines or a JSON array, and its spans dataframe / ``TraceDataset`` saved as parquet;
docs/traces-formats.md.

Parquet needs ``pyarrow`` (``pip install 'evalharness[phoenix]'``), imported only when a
parquet file is read; it is read one record batch at a time.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import evalharness.jsonlimits as jsonlimits
from evalharness.errors import InputError
from evalharness.spans.model import Span, SpanEvent
from evalharness.spans.readers._jsonstream import records, unpacked
from evalharness.spans.readers._otel import (
    add_attribute,
    attributes_from,
    datetime_nanos,
    fail,
    first_char,
    iso_nanos,
    span_kind,
    status,
    too_deep,
)

INSTALL = "pip install 'evalharness[phoenix]'"
PARQUET_MAGIC = b"PAR1"
BATCH_ROWS = 2048

_HEAD = re.compile(rb'"span_kind"\s*:')
_CONTEXT = re.compile(rb'"context"\s*:\s*\{')
_REQUIRED_COLUMNS = ("context.trace_id", "context.span_id", "name")
_UNIT_NANOS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}


class PhoenixReader:
    """Arize Phoenix spans: span JSON lines / a JSON array, or a spans dataframe in parquet."""

    name = "phoenix"
    written_against = (
        "arize-phoenix 20.3 (phoenix.trace span_json_encoder, TraceDataset, "
        "get_spans_dataframe); OpenInference semantic conventions 0.1.42; pyarrow 14+ for "
        "parquet")

    def sniff(self, head: bytes) -> bool:
        if head.startswith(PARQUET_MAGIC):
            return True
        head = unpacked(head)
        return (first_char(head) in (b"{", b"[") and _HEAD.search(head) is not None
                and _CONTEXT.search(head) is not None)

    def read(self, path: Path) -> Iterator[Span]:
        try:
            with open(path, "rb") as fh:
                magic = fh.read(4)
        except OSError as exc:
            raise InputError(f"{path}: cannot be read: {exc.strerror or exc}") from exc
        if magic == PARQUET_MAGIC:
            yield from _parquet(path)
            return
        for item in records(path):
            yield json_span(item.value, f"{path}, line {item.line}")


def _text(value: Any, where: str, field: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise fail(where, field, f"expected a string, found {type(value).__name__}")
    return value


def _time(value: Any, where: str, field: str) -> int | None:
    if isinstance(value, datetime):
        return datetime_nanos(value)
    return iso_nanos(value, where, field)


def _kind(attributes: dict[str, Any], value: Any) -> str | None:
    own = value.upper() if isinstance(value, str) and value else None
    return span_kind(attributes, None if own == "UNKNOWN" else own)


def _events(value: Any, where: str) -> list[SpanEvent]:
    if value is None:
        return []
    if isinstance(value, str):  # a dataframe cell may hold the events as JSON text
        try:
            value = jsonlimits.loads(value) if value.strip() else []
        except jsonlimits.TooDeep:
            raise too_deep(where, "events") from None
        except ValueError:
            raise fail(where, "events", "not JSON") from None
    if not isinstance(value, list):
        raise fail(where, "events", f"expected a list, found {type(value).__name__}")
    events = []
    for i, event in enumerate(value):
        if not isinstance(event, dict):
            raise fail(where, f"events[{i}]", "expected an object {name, timestamp, attributes}")
        events.append(SpanEvent(
            name=str(event.get("name") or ""),
            time_ns=_time(event.get("timestamp"), where, f"events[{i}].timestamp"),
            attributes=attributes_from(event.get("attributes"), where,
                                       f"events[{i}].attributes")))
    return events


def json_span(record: Any, where: str) -> Span:
    """One Phoenix span JSON object as a :class:`Span` (its nested ``attributes`` flattened
    into dotted keys)."""
    if not isinstance(record, dict):
        raise InputError(f"{where}: expected a JSON object (a span), found "
                         f"{type(record).__name__}")
    context = record.get("context")
    if not isinstance(context, dict):
        raise fail(where, "context", "missing or not an object {trace_id, span_id}")
    trace_id = _text(context.get("trace_id"), where, "context.trace_id")
    span_id = _text(context.get("span_id"), where, "context.span_id")
    if trace_id is None or span_id is None:
        missing = "context.trace_id" if trace_id is None else "context.span_id"
        raise fail(where, missing, "missing (every span needs a trace and a span id)")
    attributes = attributes_from(record.get("attributes"), where, "attributes")
    conversation = record.get("conversation")
    if conversation:
        try:
            add_attribute(attributes, "conversation", conversation)
        except jsonlimits.TooDeep:
            raise too_deep(where, "conversation") from None
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=_text(record.get("parent_id"), where, "parent_id"),
        name=str(record.get("name") or ""),
        kind=_kind(attributes, record.get("span_kind")),
        start_ns=_time(record.get("start_time"), where, "start_time"),
        end_ns=_time(record.get("end_time"), where, "end_time"),
        attributes=attributes,
        events=_events(record.get("events"), where),
        status=status(record.get("status_code") or None, where, "status_code"),
        status_message=_text(record.get("status_message"), where, "status_message"),
        source=where,
    )


def _parquet(path: Path) -> Iterator[Span]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError(f"{path}: reading parquet needs the pyarrow package: {INSTALL}"
                         ) from None
    try:
        table = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(f"{path}: not a readable parquet file ({exc})") from None
    schema = table.schema_arrow
    names = schema.names
    missing = [c for c in _REQUIRED_COLUMNS if c not in names]
    if missing:
        raise InputError(f"{path}: not a Phoenix spans table: no column {', '.join(missing)} "
                         f"(it has {', '.join(names[:12])}{'…' if len(names) > 12 else ''}); "
                         f"save one with `px.Client().get_spans_dataframe().to_parquet(...)` or "
                         f"`TraceDataset.save()`")
    deep = [f.name for f in schema if _type_depth(f.type) > jsonlimits.MAX_DEPTH]
    if deep:
        raise InputError(f"{path}: column {deep[0]} nests lists and structs more than "
                         f"{jsonlimits.MAX_DEPTH} deep (the limit); a trace attribute nests "
                         f"a handful of levels")
    attribute_columns = [(n, n[len("attributes."):]) for n in names if n.startswith("attributes.")]
    times = {}
    for column in ("start_time", "end_time"):
        if column in names and pa.types.is_timestamp(schema.field(column).type):
            times[column] = _UNIT_NANOS[schema.field(column).type.unit]
    row = 0
    try:
        batches = table.iter_batches(batch_size=BATCH_ROWS)
        for batch in batches:
            columns = {}
            for name in batch.schema.names:
                array = batch.column(name)
                if name in times:  # exact nanoseconds, whatever pyarrow makes of timestamps
                    array = array.cast(pa.int64())
                columns[name] = array.to_pylist()
            for i in range(batch.num_rows):
                row += 1
                where = f"{path}, row {row}"
                cells = {name: values[i] for name, values in columns.items()}
                yield _row_span(cells, attribute_columns, times, where)
    except pa.ArrowException as exc:
        raise InputError(f"{path}, row {row + 1}: cannot be read ({exc})") from None


def _type_depth(kind: Any) -> int:
    """How many lists, maps and structs an Arrow type nests (walked without recursion).

    >>> import pyarrow as pa
    >>> _type_depth(pa.string()), _type_depth(pa.list_(pa.struct([("a", pa.list_(pa.int8()))])))
    (0, 3)
    """
    deepest, stack = 0, [(kind, 0)]
    while stack:
        kind, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((kind.field(i).type, depth + 1) for i in range(kind.num_fields))
    return deepest


def _row_span(cells: dict[str, Any], attribute_columns: list[tuple[str, str]],
              times: dict[str, int], where: str) -> Span:
    attributes: dict[str, Any] = {}
    for column, key in attribute_columns:
        value = cells[column]
        if value is not None and value == value:  # null, or NaN: pandas' empty cell
            try:
                add_attribute(attributes, key, value)
            except jsonlimits.TooDeep:
                raise too_deep(where, column) from None
    trace_id = _text(cells["context.trace_id"], where, "context.trace_id")
    span_id = _text(cells["context.span_id"], where, "context.span_id")
    if trace_id is None or span_id is None:
        missing = "context.trace_id" if trace_id is None else "context.span_id"
        raise fail(where, missing, "missing (every span needs a trace and a span id)")
    moments = {}
    for column in ("start_time", "end_time"):
        value = cells.get(column)
        moments[column] = (value * times[column] if column in times and value is not None
                           else _time(value, where, column))
    parent = cells.get("parent_id")
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=_text(parent, where, "parent_id") if isinstance(parent, str) or parent is None
        else None,  # a NaN of pandas
        name=str(cells.get("name") or ""),
        kind=_kind(attributes, cells.get("span_kind")),
        start_ns=moments["start_time"],
        end_ns=moments["end_time"],
        attributes=attributes,
        events=_events(cells.get("events"), where),
        status=status(cells.get("status_code") or None, where, "status_code"),
        status_message=_text(cells.get("status_message"), where, "status_message"),
        source=where,
    )
