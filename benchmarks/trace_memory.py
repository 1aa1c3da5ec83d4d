"""How much memory one very large trace costs to import: every span of an export in ONE trace.

Generates (once per size, cached in ``--work``) the export of ``benchmarks/trace_import.py``
— OpenInference LangChain RAG requests, JSON lines of 512 spans — but with every span under
one trace id, as an application that never starts a new trace (or a hostile file) writes.
Then, in a fresh interpreter, reads, groups and maps it onto the shop's default pipeline
(``read_mapped``: what ``evalharness traces convert`` does) and prints the wall time, the
child's peak RSS (``ru_maxrss``) and its ratio to the file's size; ``--stage group`` stops
after grouping (the spans of the one trace held in memory, not mapped).

    python benchmarks/trace_memory.py                  # 50 MB
    python benchmarks/trace_memory.py --size-mb 200
    python benchmarks/trace_memory.py --stage group
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from trace_import import generate  # noqa: E402

TRACE_ID = "0" * 31 + "1"


def generate_one_trace(path: Path, size_mb: int) -> None:
    """Write ``trace_import``'s export of about ``size_mb`` MB with one trace id throughout."""
    source = path.with_suffix(".many")
    generate(source, size_mb)
    with open(source) as fh, open(path.with_suffix(".part"), "w") as out:
        for line in fh:
            document = json.loads(line)
            for block in document["resourceSpans"]:
                for scope in block["scopeSpans"]:
                    for span in scope["spans"]:
                        span["traceId"] = TRACE_ID
            out.write(json.dumps(document, separators=(",", ":")) + "\n")
    source.unlink()
    path.with_suffix(".part").rename(path)


def child(path: Path, stage: str) -> None:
    """Read, group (and map) ``path``; print one JSON line of figures."""
    from evalharness.pipeline import ComponentSpec, Pipeline
    from evalharness.scenario import SHOP_PIPELINE
    from evalharness.spans.group import group_traces
    from evalharness.spans.importer import read_mapped
    from evalharness.spans.readers.otlp_json import OtlpJsonReader

    began = time.perf_counter()
    spans = traces = 0
    if stage == "group":
        for group in group_traces(OtlpJsonReader().read(path)):
            traces += 1
            spans += len(group)
    else:
        pipeline = Pipeline({n: ComponentSpec.model_validate(c)
                             for n, c in SHOP_PIPELINE.items()})
        _, mapped = read_mapped(path, fmt=None, mapping=None, pipeline=pipeline)
        for m in mapped:
            traces += 1
            spans += sum(len(c.chosen) for c in m.components.values())
    seconds = time.perf_counter() - began
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": seconds, "traces": traces, "peak_mb": peak_kb / 1024}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=50)
    parser.add_argument("--stage", choices=("group", "map"), default="map")
    parser.add_argument("--work", type=Path, default=Path("/tmp/evalharness-trace-memory"))
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.stage)
        return
    args.work.mkdir(parents=True, exist_ok=True)
    path = args.work / f"one-trace-{args.size_mb}mb.jsonl"
    if not path.exists():
        began = time.perf_counter()
        generate_one_trace(path, args.size_mb)
        print(f"generated {path} in {time.perf_counter() - began:.0f} s")
    size_mb = path.stat().st_size / 1e6
    spans = sum(line.count('"spanId"') for line in open(path))
    baseline = json.loads(subprocess.run(
        [sys.executable, "-c", "import json, resource; import evalharness.spans.importer, "
         "evalharness.scenario; print(json.dumps(resource.getrusage(resource.RUSAGE_SELF)"
         ".ru_maxrss / 1024))"], check=True, capture_output=True, text=True).stdout)
    result = json.loads(subprocess.run(
        [sys.executable, __file__, "--child", str(path), "--stage", args.stage], check=True,
        capture_output=True, text=True).stdout.strip().splitlines()[-1])
    grown = result["peak_mb"] - baseline
    print(f"{size_mb:.0f} MB, {spans:,} spans in one trace, stage {args.stage}: "
          f"{result['seconds']:.1f} s; peak RSS {result['peak_mb']:.0f} MB "
          f"({baseline:.0f} MB of it the interpreter and imports): "
          f"{grown / size_mb:.1f} x the file")


if __name__ == "__main__":
    main()
