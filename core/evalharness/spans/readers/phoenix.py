"""Reader of Arize Phoenix exports (``phoenix``): Phoenix's span JSON (``span_to_json``), as
JSON lines or a JSON array; the pages of its REST API (``GET /v1/projects/{p}/spans``, its own
span JSON, and ``.../spans/otlpv1``, OTLP JSON spans), one a file or one a line; its spans
dataframe / ``TraceDataset`` saved as parquet; and that dataframe saved to SQLite with pandas'
``to_sql``; docs/traces-formats.md.

Parquet needs ``pyarrow`` (``pip install 'evalharness[phoenix]'``), imported only when a
parquet file is read; it is read one record batch at a time. SQLite is read with the standard
library, a few hundred rows at a time.
"""

from __future__ import annotations

import ast
import re
import sqlite3
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import evalharness.jsonlimits as jsonlimits
from evalharness.errors import InputError
from evalharness.spans.model import Span, SpanEvent
from evalharness.spans.readers._jsonstream import Lists, records, unpacked
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
from evalharness.spans.readers.otlp_json import otlp_span

INSTALL = "pip install 'evalharness[phoenix]'"
PARQUET_MAGIC = b"PAR1"
SQLITE_MAGIC = b"SQLite format 3\x00"
BATCH_ROWS = 2048
SQLITE_ROWS = 512
MAX_LITERAL = 1_000_000
"""Longest cell text read as a Python literal (``ast.literal_eval`` is slow on huge texts)."""
EMPTY_TEXTS = frozenset({"", "nan", "NaN", "None", "NaT", "<NA>"})
"""Cell texts that are an empty cell: what ``df.astype(str)`` makes of ``None``, ``NaN``,
``NaT`` and ``pd.NA``."""
PAGES: Lists = {"data": {}}
"""Where a REST API page lists its spans: ``{"data": [...], "next_cursor": ...}``."""

_HEAD = re.compile(rb'"span_kind"\s*:')
_CONTEXT = re.compile(rb'"context"\s*:\s*\{')
_OTLP_PAGE = re.compile(rb'"data"\s*:\s*\[\s*\{')
_OTLP_SPAN = re.compile(rb'"(?:start_time_unix_nano|startTimeUnixNano)"\s*:')
_OTLP_ID = re.compile(rb'"(?:span_id|spanId)"\s*:')
_TIME_COLUMNS = ("start_time", "end_time")
_NUMERIC_COLUMNS = ("attributes.llm.token_count.", "attributes.llm.cost.")
_JSON_OBJECT_KEYS = (".metadata", "llm.prompt_template.variables", "tool.parameters")
"""Attribute columns OpenInference defines as numbers (read back from text in SQLite)."""
_REQUIRED_COLUMNS = ("context.trace_id", "context.span_id", "name")
_UNIT_NANOS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}


class PhoenixReader:
    """Arize Phoenix spans: span JSON lines / a JSON array, REST API pages, or a spans
    dataframe in parquet or SQLite."""

    name = "phoenix"
    written_against = (
        "arize-phoenix 20.26 (REST API v1 spans and spans/otlpv1, phoenix.trace "
        "span_json_encoder, TraceDataset) and arize-phoenix-client 3.5 "
        "(Client().spans.get_spans_dataframe); OpenInference semantic conventions 0.1.42; "
        "pyarrow 14+ for parquet; pandas' to_sql for SQLite")
    expects = ('"context" with "span_kind", a REST page {"data": [...]} of spans, or its '
               'spans dataframe as parquet or SQLite')

    def sniff(self, head: bytes) -> bool:
        if head.startswith((PARQUET_MAGIC, SQLITE_MAGIC)):
            return True
        head = unpacked(head)
        if first_char(head) not in (b"{", b"["):
            return False
        if _HEAD.search(head) is not None and _CONTEXT.search(head) is not None:
            return True
        return (_OTLP_PAGE.search(head) is not None and _OTLP_SPAN.search(head) is not None
                and _OTLP_ID.search(head) is not None and b'"resourceSpans"' not in head)

    def near(self, text: str) -> tuple[int, str] | None:
        """Where the start of a file looks like this format but is not (for
        :func:`~evalharness.spans.readers.detect`'s error)."""
        kind = re.search(r'"span_kind"\s*:', text)
        if kind and not re.search(r'"context"\s*:\s*\{', text):
            return kind.start(), 'it has "span_kind" but no "context": {"trace_id", "span_id"}'
        page = re.search(r'"data"\s*:\s*\[', text)
        if page and '"next_cursor"' in text and not kind:
            return page.start(), ('it is a page {"data": [...], "next_cursor"} whose records '
                                  'are neither Phoenix spans ("context", "span_kind") nor OTLP '
                                  'spans ("span_id", "start_time_unix_nano")')
        return None

    def read(self, path: Path) -> Iterator[Span]:
        try:
            with open(path, "rb") as fh:
                magic = fh.read(len(SQLITE_MAGIC))
        except OSError as exc:
            raise InputError(f"{path}: cannot be read: {exc.strerror or exc}") from exc
        if magic.startswith(PARQUET_MAGIC):
            yield from _parquet(path)
            return
        if magic == SQLITE_MAGIC:
            yield from _sqlite(path)
            return
        for item in records(path, PAGES):
            record = item.value
            if isinstance(record, dict) and "context" not in record and (
                    "span_id" in record or "spanId" in record):  # a /spans/otlpv1 span
                at = f"data[{item.index - 1}]" if item.key == "data" else "span"
                yield otlp_span(record, f"{path}, line {item.line}", at)
            else:
                yield json_span(record, item.where(path) if item.key == "data"
                                else f"{path}, line {item.line}")


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
                         f"save one with `Client().spans.get_spans_dataframe(project_identifier"
                         f"=...).to_parquet(...)` (phoenix.client) or `TraceDataset.save()`")
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


def _sqlite(path: Path) -> Iterator[Span]:
    """A Phoenix spans dataframe that pandas' ``to_sql`` wrote into a SQLite file, read with
    the standard library: lists and dicts as JSON texts or Python reprs (``astype(str)``), times
    as ISO texts."""
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise InputError(f"{path}: not a readable SQLite file ({exc})") from None
    try:
        table, columns = _spans_table(db, path)
        quoted = '"' + table.replace('"', '""') + '"'
        cursor = db.execute(f"SELECT * FROM {quoted}")  # noqa: S608 (a name from the file)
        names = [d[0] for d in cursor.description]
        attribute_columns = [(n, n[len("attributes."):]) for n in names
                             if n.startswith("attributes.")]
        row = 0
        while batch := cursor.fetchmany(SQLITE_ROWS):
            for values in batch:
                row += 1
                where = f"{path}, table {table}, row {row}"
                cells = {name: _cell(name, value, where)
                         for name, value in zip(names, values, strict=True)}
                yield _row_span(cells, attribute_columns, {}, where)
    except sqlite3.Error as exc:
        raise InputError(f"{path}: cannot be read as SQLite ({exc})") from None
    finally:
        db.close()


def _spans_table(db: sqlite3.Connection, path: Path) -> tuple[str, list[str]]:
    """The table that holds the spans: ``spans``, else the one table with Phoenix's span
    columns; a file without one is refused, saying how to save parquet instead."""
    tables = [name for (name,) in db.execute(
        "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') ORDER BY name")]
    found = {}
    for table in tables:
        quoted = '"' + table.replace('"', '""') + '"'
        found[table] = [r[1] for r in db.execute(f"PRAGMA table_info({quoted})")]
    fitting = [t for t, cols in found.items() if all(c in cols for c in _REQUIRED_COLUMNS)]
    if "spans" in fitting:
        return "spans", found["spans"]
    if len(fitting) == 1:
        return fitting[0], found[fitting[0]]
    save = ("save the dataframe as parquet instead — `df = Client().spans."
            "get_spans_dataframe(project_identifier=...)`, then `df.to_parquet(\"spans.parquet\")`"
            " — and import that file (docs/traces-formats.md, `phoenix`)")
    if len(fitting) > 1:
        raise InputError(f"{path}: several tables hold Phoenix spans ({', '.join(fitting)}) and "
                         f"none is named `spans`; keep one, or {save}")
    table = "spans" if "spans" in found else (tables[0] if len(tables) == 1 else None)
    if table is None:
        raise InputError(f"{path}: no table of Phoenix spans (tables: "
                         f"{', '.join(tables) or 'none'}; one needs the columns "
                         f"{', '.join(_REQUIRED_COLUMNS)}); {save}")
    have = found[table]
    missing = [c for c in _REQUIRED_COLUMNS if c not in have]
    index = (" (a frame whose span ids are only its index, as before Phoenix 20, loses them "
             "to `to_sql(..., index=False)`)" if missing == ["context.span_id"] else "")
    raise InputError(f"{path}: table {table} is not a Phoenix spans dataframe: it has no "
                     f"column {', '.join(missing)}{index} (its columns: {', '.join(have[:8])}"
                     f"{'…' if len(have) > 8 else ''}); {save}")


def _cell(column: str, value: Any, where: str) -> Any:
    """A SQLite cell as the dataframe held it, as far as its text tells: empty markers
    (``nan``, ``None``…) as null; token counts and costs as numbers; in attribute and event
    columns, a list or dict that ``json.dumps`` or ``str()`` turned into text back as the list
    or dict (see :func:`_structure`); every other text as text, as a string cell of the
    parquet frame is.

    >>> _cell("attributes.tag.tags", "['prod', 'rag']", "f, table spans, row 1")
    ['prod', 'rag']
    >>> _cell("attributes.llm.token_count.prompt", "61.0", "f"), _cell("parent_id", "nan", "f")
    (61, None)
    >>> _cell("attributes.output.value", "[(412,)]", "f")  # a tool's str() of its rows
    '[(412,)]'
    """
    if isinstance(value, float) and value != value:
        return None
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text in EMPTY_TEXTS:
        return None
    if column.startswith(_NUMERIC_COLUMNS) or column == "attributes.reranker.top_k":
        try:  # a count `astype(str)` made text ("61.0")
            number = float(text)
        except ValueError:
            return value
        return int(number) if number.is_integer() else number
    if column in _TIME_COLUMNS or not (column.startswith("attributes.") or column == "events"):
        return value
    if text[:1] not in ("[", "{") or text[-1:] not in ("]", "}"):
        return value
    found = _structure(column, text, where)
    return value if found is None else found


def _structure(column: str, text: str, where: str) -> Any:
    """The list or dict a dataframe cell held, from its text; ``None`` when the text was a
    string cell (an attribute whose value is JSON or Python text, such as ``input.value``).

    The frame holds lists (``llm.input_messages``, ``retrieval.documents``, ``tag.tags``…) and,
    under the keys OpenInference defines as JSON objects (``metadata``…), dicts; its other
    cells are strings. So: JSON text (``json.dumps`` of a cell) of a list holding a dict is
    that list (a JSON string attribute is the same either way otherwise); a Python repr
    (``astype(str)``) is a list, or a dict under those keys — when it holds only what JSON
    holds (a tuple, as in ``[(412,)]``, never came from Phoenix).
    """
    try:
        decoded = jsonlimits.loads(text)
    except jsonlimits.TooDeep:
        raise too_deep(where, column) from None
    except ValueError:
        decoded = _literal(text, column, where)
        if decoded is None:
            return None
        if isinstance(decoded, list):
            return decoded
        key = column.removeprefix("attributes.")
        return decoded if key == "metadata" or key.endswith(_JSON_OBJECT_KEYS) else None
    if column == "events" or (isinstance(decoded, list)
                              and any(isinstance(v, dict) for v in decoded)):
        return decoded
    return None


def _literal(text: str, column: str, where: str) -> Any:
    """A Python literal's value when it holds only lists, dicts, strings, numbers, booleans
    and ``None``; ``None`` otherwise (or when too long to parse quickly)."""
    if len(text) > MAX_LITERAL:
        return None
    try:
        decoded = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    try:
        jsonlimits.check(decoded, f"{where}, field {column}")
    except ValueError:
        raise too_deep(where, column) from None
    stack = [decoded]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if not all(isinstance(k, str) for k in item):
                return None
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif item is not None and not isinstance(item, str | int | float | bool):
            return None  # a tuple, a set, bytes…
    return decoded


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
