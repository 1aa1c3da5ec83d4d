"""Records the shop monitor's traffic (scenarios/shop-monitor.yaml): 45 questions of the
reference assistant, then 15 with the generator fault, as OpenInference spans in traffic/,
and the simulated users' feedback in feedback.jsonl. Run it from the repository's root::

    python scenarios/shop/monitor/record.py

The assistant answers the 60 questions in a few seconds; :func:`spread` then moves each
trace, whole, to the time a shop's users would have asked it — 20 questions a day from
2026-12-03 to 2026-12-05, between 08:00 and 20:00 UTC, the fault from the 46th on (the
afternoon of the third day) — and each feedback record with its trace, so the report has
days and hours to show. Spans keep their real durations and order within a trace.

The fault is applied inside the instrumented ``generate`` call, so the generator's span
carries the faulty answer — what ``traced.traffic(..., fault="generator")`` now does too
(the recorded files were written by this script; kept so they can be written again
byte-identical).
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHOP = HERE.parent
FIRST_DAY = dt.datetime(2026, 12, 3, 8, 0, tzinfo=dt.UTC)
PER_DAY = 20
OPEN_HOURS = 12


def _traced():
    spec = importlib.util.spec_from_file_location("shop_traced_script", SHOP / "traced.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    traced = _traced()
    (HERE / "traffic").mkdir(exist_ok=True)
    for old in (HERE / "traffic").glob("spans-*.jsonl"):
        old.unlink()
    feedback = [HERE / "feedback-0001.jsonl", HERE / "feedback-0002.jsonl"]
    traced.traffic(45, out=HERE / "traffic" / "spans-0001.jsonl", seed=1,
                   feedback=feedback[0])
    plain = traced.load_assistant

    def faulty():
        assistant = plain()
        generate, invent = assistant.generate, assistant.faults.invent_figures
        assistant.generate = lambda *args, **kw: invent(generate(*args, **kw))
        return assistant

    traced.load_assistant = faulty
    traced.traffic(15, out=HERE / "traffic" / "spans-0002.jsonl", seed=2,
                   feedback=feedback[1])
    with open(HERE / "feedback.jsonl", "w", encoding="utf-8") as out:
        for part in feedback:
            out.write(part.read_text(encoding="utf-8"))
            part.unlink()
    spread(sorted((HERE / "traffic").glob("spans-*.jsonl")), HERE / "feedback.jsonl")


def schedule(n: int, seed: int = 3) -> list[dt.datetime]:
    """When the ``n`` traces start: :data:`PER_DAY` a day from :data:`FIRST_DAY`, at seeded
    times within :data:`OPEN_HOURS`, in order."""
    draw = random.Random(seed)
    out = []
    for day in range(0, n, PER_DAY):
        count = min(PER_DAY, n - day)
        minutes = sorted(draw.uniform(0, OPEN_HOURS * 60) for _ in range(count))
        out += [FIRST_DAY + dt.timedelta(days=day // PER_DAY, minutes=m) for m in minutes]
    return out


def _spans(document: dict):
    for resource in document.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            yield from scope.get("spans", [])


def move_traces(documents: list[dict], at: dict[str, dt.datetime]) -> dict[str, int]:
    """Move each trace of the OTLP JSON ``documents`` (in place) whole to its start time in
    ``at`` (trace id → aware or naive-UTC datetime): its spans are shifted by one amount, so
    they keep their durations and order. Returns each trace's shift in nanoseconds."""
    starts: dict[str, int] = {}
    for doc in documents:
        for span in _spans(doc):
            t = int(span["startTimeUnixNano"])
            starts[span["traceId"]] = min(t, starts.get(span["traceId"], t))
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    shift = {tid: ((when if when.tzinfo else when.replace(tzinfo=dt.UTC)) - epoch)
             // dt.timedelta(microseconds=1) * 1000 - starts[tid] for tid, when in at.items()}
    for doc in documents:
        for span in _spans(doc):
            by = shift[span["traceId"]]
            for key in ("startTimeUnixNano", "endTimeUnixNano"):
                span[key] = str(int(span[key]) + by)
            for event in span.get("events", []):
                event["timeUnixNano"] = str(int(event["timeUnixNano"]) + by)
    return shift


def spread(files: list[Path], feedback: Path) -> None:
    """Move each trace of the OTLP JSON-lines ``files`` to its :func:`schedule` time (traces
    in the order they started), rewriting the files and the ``at`` of ``feedback``'s
    records by their trace's shift."""
    documents = {f: [json.loads(line) for line in f.read_text(encoding="utf-8").splitlines()
                     if line.strip()] for f in files}
    starts = {span["traceId"]: int(span["startTimeUnixNano"])
              for docs in documents.values() for doc in docs for span in _spans(doc)}
    for docs in documents.values():
        for doc in docs:
            for span in _spans(doc):
                starts[span["traceId"]] = min(starts[span["traceId"]],
                                              int(span["startTimeUnixNano"]))
    order = sorted(starts, key=starts.__getitem__)
    shift = move_traces([d for docs in documents.values() for d in docs],
                        dict(zip(order, schedule(len(order)), strict=True)))
    for path, docs in documents.items():
        path.write_text("".join(json.dumps(d, separators=(",", ":")) + "\n" for d in docs),
                        encoding="utf-8")
    lines = []
    for line in feedback.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        at = dt.datetime.fromisoformat(record["at"])
        moved = at + dt.timedelta(microseconds=shift[record["trace_id"]] // 1000)
        record["at"] = moved.isoformat(timespec="milliseconds")
        lines.append(json.dumps(record, ensure_ascii=False) + "\n")
    feedback.write_text("".join(lines), encoding="utf-8")


if __name__ == "__main__":
    main()
