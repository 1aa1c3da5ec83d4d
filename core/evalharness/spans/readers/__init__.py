"""Trace readers by format name, and detection of a file's format from its first bytes.

Each reader module defines one class following :class:`evalharness.spans.model.Reader`; it is
imported only when its format is read or sniffed, so an optional extra's module (protobuf,
parquet) costs nothing until used.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from evalharness.errors import InputError
from evalharness.spans.model import Reader

READERS: dict[str, str] = {
    "otlp-json": "evalharness.spans.readers.otlp_json:OtlpJsonReader",
    "otel-console": "evalharness.spans.readers.otlp_json:ConsoleReader",
    "otlp-proto": "evalharness.spans.readers.otlp_proto:OtlpProtoReader",
    "phoenix": "evalharness.spans.readers.phoenix:PhoenixReader",
    "langfuse": "evalharness.spans.readers.langfuse:LangfuseReader",
    "langsmith": "evalharness.spans.readers.langsmith:LangSmithReader",
}
"""``format:`` value -> ``module:Class``, in the order :func:`detect` tries them."""

SNIFF_BYTES = 64 * 1024


def reader(name: str) -> Reader:
    """The reader of a format name (an unknown name is an error listing the known ones)."""
    target = READERS.get(name)
    if target is None:
        raise InputError(f"unknown trace format {name!r}; known: {', '.join(READERS)}")
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(module), cls)()


def detect(path: Path) -> Reader:
    """The reader whose ``sniff`` recognises the start of ``path``."""
    with open(path, "rb") as fh:
        head = fh.read(SNIFF_BYTES)
    for name in READERS:
        try:
            candidate = reader(name)
        except ImportError:  # an optional extra that is not installed
            continue
        if candidate.sniff(head):
            return candidate
    raise InputError(f"{path}: not a trace format evalharness recognises from its content "
                     f"(tried {', '.join(READERS)}); name it with `format:` (traces: {{path: "
                     f"..., format: otlp-json}}) — see docs/traces.md")
