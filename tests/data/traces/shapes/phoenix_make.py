"""Writes the ``phoenix_*`` fixtures of tests/test_trace_shapes_readers.py from a real, local
Phoenix 20: the spans of ``otelsdk_make.plan()`` sent to it over OTLP/HTTP, then saved as its
REST API returns them and as its spans dataframe is saved (parquet, and SQLite with pandas).

Nothing here runs in the tests. In an environment with ``arize-phoenix==20.26.1`` (and its
``arize-phoenix-client``, ``opentelemetry-sdk``, ``opentelemetry-exporter-otlp-proto-http``,
``pandas``, ``pyarrow``), on loopback only:

    PHOENIX_HOST=127.0.0.1 PHOENIX_PORT=36006 PHOENIX_WORKING_DIR=$(mktemp -d) \\
    PHOENIX_TELEMETRY_ENABLED=false PHOENIX_ALLOW_EXTERNAL_RESOURCES=false \\
        python tests/data/traces/shapes/phoenix_make.py serve &
    python tests/data/traces/shapes/phoenix_make.py export http://127.0.0.1:36006
    kill %1

``serve`` starts Phoenix with its gRPC receiver switched off: Phoenix 20 binds gRPC to every
interface (``[::]``) whatever ``PHOENIX_HOST`` says, and the fixtures need only OTLP/HTTP.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROJECT = "shapes"
PAGE = 5
"""Spans a REST page: the 8 spans come in two pages, a trace split across them."""


def serve() -> None:
    import phoenix.server.grpc_server as grpc_server

    async def no_grpc(self):  # GrpcServer.__aenter__: bind nothing
        return None

    grpc_server.GrpcServer.__aenter__ = no_grpc
    from phoenix.server.main import main

    sys.argv = ["phoenix", "serve", "--no-internet"]
    main()


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 (loopback)
        return response.read()


def _pages(base: str, path: str) -> list[bytes]:
    pages, cursor = [], None
    while True:
        url = f"{base}/v1/projects/{PROJECT}/{path}?limit={PAGE}"
        body = _get(url + (f"&cursor={cursor}" if cursor else ""))
        pages.append(body)
        cursor = json.loads(body)["next_cursor"]
        if not cursor:
            return pages


def export(base: str) -> None:
    sys.path.insert(0, str(HERE))
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from otelsdk_make import plan, record

    record(OTLPSpanExporter(endpoint=f"{base}/v1/traces"),
           {"openinference.project.name": PROJECT})
    for _ in range(60):  # Phoenix inserts spans in the background
        try:
            if len(b"".join(_pages(base, "spans")).split(b'"context"')) - 1 >= len(plan()):
                break
        except OSError:
            pass
        time.sleep(0.5)
    for path, stem in (("spans", "phoenix_rest_spans"), ("spans/otlpv1", "phoenix_rest_otlpv1")):
        pages = _pages(base, path)
        # one page a file, as `curl -o` saves a response
        (HERE / f"{stem}_page1.json").write_bytes(pages[0])
        # every page a line, as `echo "$page" >> spans.jsonl` in a paging loop writes
        (HERE / f"{stem}_pages.jsonl").write_bytes(b"".join(p + b"\n" for p in pages))
    _dataframes(base)


def _dataframes(base: str) -> None:
    from phoenix.client import Client

    df = Client(base_url=base).spans.get_spans_dataframe(project_identifier=PROJECT)
    df.to_parquet(HERE / "phoenix_spans_dataframe.parquet")
    notes = {"index": df.index.name, "cells": {c: type(v).__name__ for c, v in df.iloc[0].items()}}
    for index in (True, False):  # what a user meets first
        try:
            with sqlite3.connect(":memory:") as db:
                df.to_sql("spans", db, index=index)
            notes[f"to_sql(index={index})"] = "written"
        except Exception as exc:
            cause = exc.__cause__ or exc.__context__
            notes[f"to_sql(index={index})"] = f"{type(exc).__name__}: {exc}" + (
                f" ({type(cause).__name__}: {cause})" if cause else "")
    # what users do then (the index is also a column): every cell as its str() ...
    target = HERE / "phoenix_spans_astype_str.db"
    target.unlink(missing_ok=True)
    with sqlite3.connect(target) as db:
        df.astype(str).to_sql("spans", db, index=False)
    # ... or lists and dicts as JSON texts
    target = HERE / "phoenix_spans_json.db"
    target.unlink(missing_ok=True)
    as_json = df.map(lambda v: json.dumps(v) if isinstance(v, list | dict) else v)
    with sqlite3.connect(target) as db:
        as_json.to_sql("spans", db, index=False)
    print(json.dumps(notes, indent=1))


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve()
    else:
        export(sys.argv[2] if len(sys.argv) > 2 else "http://127.0.0.1:6006")
