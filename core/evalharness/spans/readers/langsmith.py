"""LangSmith runs, as its API and SDK write them, read as spans (docs/traces-hosted.md,
"LangSmith").

What it reads, a record at a time (see :mod:`~evalharness.spans.readers._jsonstream`): runs
as JSON Lines, a JSON array, or ``{"runs": [...]}`` (``POST /api/v1/runs/query``), each run as
``Client.list_runs`` / ``read_run`` return it (``run.model_dump(mode="json")``); nested
``child_runs`` (``read_run(..., load_child_runs=True)``) are read as runs of their own. The
bulk export writes Parquet: turn it into JSON Lines first (docs/traces-hosted.md).

It also reads what the SDK *sends* while it traces — run-ingest request bodies saved to a file:
``POST /runs/batch`` bodies (``{"post": [run, ...], "patch": [run, ...]}``, one a file or one a
line) and ``POST /runs/multipart`` bodies (parts ``post.<id>``, ``post.<id>.inputs``,
``patch.<id>.outputs``… as ``langsmith._internal._operations`` names them, one body after
another). A run is posted when it starts and patched when it ends, often in a later body: the
post and the patches of one id are merged (a patch's fields win where they are set, as the
SDK merges them), and the run is read when its last one has been. That takes two passes over
such a file — the first counts each run's posts and patches, so that the second holds only
the runs still waiting for a patch, never the file.

A run becomes a span of kind ``run_type`` (``llm``, ``chain``, ``tool``, ``retriever``,
``prompt``, ``parser``, ``embedding``): ``span_id`` its id, ``parent_id`` its
``parent_run_id``, ``trace_id`` its ``trace_id``. ``dotted_order`` (``<start>Z<run id>`` per
level, root first) fills in whichever of the three is missing and is checked against those
present (and gives the start time of a run that was only patched in the file).

Token counts (``prompt_tokens``… or, when the run has none, the ``usage_metadata`` of its
outputs) become ``usage``. On a run that is not an LLM call LangSmith reports the sum over the
LLM runs below it, as its UI does; the mapping counts the outermost usage of a subtree only,
so these are never added to their children's.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
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
from evalharness.spans.readers._multipart import parts

SCOPE = "langsmith"
OPERATIONS = ("post", "patch")
LISTS = anywhere("runs", "child_runs", *OPERATIONS)
"""Where runs are listed: a query's ``runs``, a run's ``child_runs``, a ``/runs/batch``
body's ``post`` and ``patch``."""

_PAYLOAD = re.compile(r'"(?:post|patch)"\s*:\s*\[')
_MULTIPART = re.compile(r'(?i)content-disposition:\s*form-data;\s*name="(?:post|patch)\.'
                        r'[0-9a-f]{8}-')
_SEGMENT = re.compile(r"(\d{8}T\d{6}\d{0,6}Z?)([0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}"
                      r"[0-9a-fA-F]{12})")


class LangSmithReader:
    """LangSmith runs exported as JSON, and the SDK's run-ingest bodies (module docstring)."""

    name = "langsmith"
    written_against = ("LangSmith run data format and langsmith Python SDK 0.11.1 "
                       "(schemas.Run, run_trees dotted_order); run-ingest bodies of "
                       "POST /runs/batch and /runs/multipart as langsmith 0.15.1 sends them "
                       "(_internal/_operations.py)")
    expects = ('"run_type" with "start_time" or "dotted_order", a /runs/batch body {"post": '
               '[...], "patch": [...]}, or a /runs/multipart body')

    def sniff(self, head: bytes) -> bool:
        """A run: ``run_type`` with ``start_time`` (both early in a dumped run) or one of
        ``dotted_order``, ``parent_run_id``; a ``/runs/batch`` body (``post`` or ``patch``
        lists of runs); a ``/runs/multipart`` body (parts named ``post.<run id>``…)."""
        text = head_text(head).lstrip()
        if text.startswith("--"):
            return _MULTIPART.search(text) is not None
        if text[:1] not in ("{", "["):
            return False
        if _PAYLOAD.search(text) and ('"dotted_order"' in text or '"trace_id"' in text):
            return True
        if re.search(r'"run_type"\s*:', text) is None:
            return False
        return any(f'"{key}"' in text
                   for key in ("start_time", "dotted_order", "parent_run_id"))

    def near(self, text: str) -> tuple[int, str] | None:
        """Where the start of a file looks like this format but is not (for
        :func:`~evalharness.spans.readers.detect`'s error)."""
        if (found := re.search(r'"run_type"\s*:', text)) is not None:
            return found.start(), ('it has "run_type" but none of "start_time", '
                                   '"dotted_order", "parent_run_id"')
        if (found := _PAYLOAD.search(text)) is not None:
            return found.start(), ('it has "post"/"patch" lists, but their records have no '
                                   '"dotted_order" or "trace_id"')
        if text.lstrip().startswith("--") and "form-data" in text[:4096].lower():
            return 0, ('it is a multipart/form-data body, but no part is named post.<run id> '
                       'or patch.<run id>')
        return None

    def read(self, path: Path) -> Iterator[Span]:
        multipart = _is_multipart(path)
        counts: Counter[str] = Counter()
        for entry in _entries(path, multipart):
            if entry.operation is None:
                yield _run(entry.record, entry.at, entry.owner)
            else:
                counts[entry.run_id()] += 1
        if not counts:
            return
        pending: dict[str, _Merged] = {}  # runs posted or patched, waiting for the rest
        for entry in _entries(path, multipart):
            if entry.operation is None:
                continue
            run_id = entry.run_id()
            merged = pending.setdefault(run_id, _Merged())
            merged.add(entry)
            if merged.seen == counts[run_id]:
                del pending[run_id]
                yield merged.span()


def _is_multipart(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False  # the reading reports it
    return head_text(head).lstrip().startswith("--")


@dataclass(slots=True)
class _Entry:
    """A run as the file has it: a whole run, or one post or patch of one."""

    operation: str | None
    """``post``, ``patch``, or ``None`` for a run exported whole."""
    record: Any
    at: str
    """Where it was read, for messages."""
    owner: str | None = None
    """The run that lists it in ``child_runs``."""

    def run_id(self) -> str:
        if not isinstance(self.record, dict):
            raise InputError(f"{self.at}: expected a JSON object (a run), got "
                             f"{type(self.record).__name__}")
        run_id = self.record.get("id")
        if not isinstance(run_id, str) or not run_id:
            raise InputError(f"{self.at}, field id: missing (every run posted or patched "
                             f"carries its id)")
        return run_id


@dataclass(slots=True)
class _Merged:
    """The posts and patches of one run, merged as the SDK merges them: each field as last
    set (``null`` sets nothing), a patch's over a post's."""

    post: dict = field(default_factory=dict)
    patch: dict = field(default_factory=dict)
    post_at: str | None = None
    patch_at: str | None = None
    seen: int = 0

    def add(self, entry: _Entry) -> None:
        self.seen += 1
        into = self.post if entry.operation == "post" else self.patch
        into.update((k, v) for k, v in entry.record.items() if v is not None)
        if entry.operation == "post":
            self.post_at = self.post_at or entry.at
        else:
            self.patch_at = self.patch_at or entry.at

    def span(self) -> Span:
        at = self.post_at or self.patch_at or ""
        if self.post_at and self.patch_at:
            at = f"{at} (patched at {self.patch_at.partition(', ')[2]})"
        return _run({**self.post, **self.patch}, at, None, start_from_order=not self.post_at)


def _entries(path: Path, multipart: bool) -> Iterator[_Entry]:
    if multipart:
        yield from _multipart_entries(path)
        return
    for item in records(path, LISTS):
        if item.key in OPERATIONS:
            yield _Entry(item.key, item.value, f"{path}, line {item.line}, "
                                               f"{item.key}[{item.index - 1}]")
            continue
        if not isinstance(item.value, dict):
            raise InputError(f"{item.where(path)}: expected a JSON object (a run), got "
                             f"{type(item.value).__name__}")
        yield _Entry(None, item.value, item.where(path), _owner(item))


def _owner(item: Item) -> str | None:
    return item.owner if item.key == "child_runs" else None


def _multipart_entries(path: Path) -> Iterator[_Entry]:
    """The posts and patches of ``/runs/multipart`` bodies: a run's part (``post.<id>``) and
    its fields' parts (``post.<id>.inputs``…) make one entry; feedback and attachments are
    skipped."""
    current: _Entry | None = None
    key: tuple[str, str] | None = None
    for part in parts(path, want=lambda name: name.split(".", 1)[0] in OPERATIONS):
        if part.data is None:
            continue
        operation, _, rest = part.name.partition(".")
        run_id, _, name = rest.partition(".")
        at = f"{path}, line {part.line}, part {part.name}"
        value = _part_json(part.data, at)
        if key != (operation, run_id) or (not name and current is not None
                                          and current.record.get("id") is not None):
            if current is not None:
                yield current
            current, key = _Entry(operation, {}, at), (operation, run_id)
        if name:
            current.record[name] = value
            continue
        if not isinstance(value, dict):
            raise InputError(f"{at}: expected a JSON object (the run), got "
                             f"{type(value).__name__}")
        if value.get("id") not in (None, run_id):
            raise InputError(f"{at}, field id: {value['id']!r}, but the part is named for run "
                             f"{run_id}")
        current.record = {**value, "id": run_id, **current.record}
        current.at = at
    if current is not None:
        yield current


def _part_json(data: bytes, at: str) -> Any:
    try:
        return jsonlimits.loads(data)
    except jsonlimits.TooDeep:
        raise InputError(f"{at}: {TOO_DEEP}") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{at}: not UTF-8 text ({exc.reason})") from None
    except ValueError as exc:
        raise InputError(f"{at}: not valid JSON ({exc}); the SDK sends each part as JSON"
                         ) from None


def _run(rec: dict, at: str, owner: str | None,
         start_from_order: bool = False) -> Span:
    """A run's record as a span (``owner``: the run listing it in ``child_runs``;
    ``start_from_order``: a run only patched in the file takes its start from
    ``dotted_order``)."""
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
    if start is None and start_from_order and isinstance(rec.get("dotted_order"), str):
        start = _order_start(rec["dotted_order"])
    if start is None:
        raise error("start_time", "missing")
    start_ns = time("start_time", start)
    end_ns = None if rec.get("end_time") is None else time("end_time", rec["end_time"])
    parent = text("parent_run_id") or owner
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
    for key, name in (("input", "prompt_cost"), ("output", "completion_cost"),
                      ("total", "total_cost")):
        if rec.get(name) is not None:
            try:
                cost[key] = amount(rec[name])
            except (TypeError, ValueError):
                raise error(name, f"not a cost ({rec[name]!r})") from None
    if any(cost.values()):
        attrs["cost"] = cost
    for key, name in (("project_id", "session_id"),  # LangSmith's "session": the project
                      ("project_name", "session_name"),  # in run-ingest bodies
                      ("reference_example_id", "reference_example_id")):
        if rec.get(name) is not None:
            attrs[key] = rec[name]
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


def _order_start(dotted: str) -> str | None:
    """The start time the last segment of ``dotted_order`` records, as ISO 8601.

    >>> _order_start("20250603T091402118000Z0196e4c1-000a-7000-8000-00000000000a")
    '2025-06-03T09:14:02.118000Z'
    """
    m = _SEGMENT.fullmatch(dotted.rsplit(".", 1)[-1])
    if m is None:
        return None  # reported by the dotted_order check
    t = m[1].rstrip("Z")
    return f"{t[:4]}-{t[4:6]}-{t[6:8]}T{t[9:11]}:{t[11:13]}:{t[13:15]}.{t[15:] or '0'}Z"


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
