"""Trace readers by format name, and detection of a file's format from its first bytes.

Each reader module defines one class following :class:`evalharness.spans.model.Reader`; it is
imported only when its format is read or sniffed, so an optional extra's module (protobuf,
parquet) costs nothing until used.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path

from evalharness.errors import InputError
from evalharness.spans.model import Reader, Span
from evalharness.spans.readers._jsonstream import head_text
from evalharness.spans.readers._multipart import ZSTD_MAGIC

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
    """The reader whose ``sniff`` recognises the start of ``path``.

    When none does, the error is one paragraph naming the file and the line, which format the
    start of the file came closest to and what it lacks, and every format tried with what it
    expects. The reader returned adds the same to an error on the file's first record: a
    file that looked like the format at its start but is not (``FILE, line 1, field id:
    missing``) says which format it was taken for, why, and which others there are.
    """
    with open(path, "rb") as fh:
        head = fh.read(SNIFF_BYTES)
    tried: list[Reader] = []
    for name in READERS:
        try:
            candidate = reader(name)
        except ImportError:  # an optional extra that is not installed
            continue
        if candidate.sniff(head):
            return _Recognised(candidate, tried)
        tried.append(candidate)
    raise InputError(_unrecognised(path, head, tried))


def expectations(readers: list[Reader]) -> str:
    """``name (expects …); name (expects …)`` for messages."""
    return "; ".join(f"{r.name} ({r.expects})" for r in readers)


def _unrecognised(path: Path, head: bytes, tried: list[Reader]) -> str:
    if head.startswith(ZSTD_MAGIC):
        return (f"{path}, line 1: zstd-compressed; decompress it first (`zstd -d "
                f"{path.name}`): evalharness reads plain and gzip-compressed files")
    text = head_text(head)
    for candidate in tried:  # the first format it half-matches, in the order tried
        near = getattr(candidate, "near", None)
        found = near(text) if near is not None else None
        if found is not None:
            line = text.count("\n", 0, found[0]) + 1
            what = f"it looks like {candidate.name}: {found[1]}"
            break
    else:
        line = 1
        start = text.lstrip()[:40]
        if not start:
            what = "it is empty"
        elif "\ufffd" in start or not start.replace("\n", " ").replace("\t", " ").isprintable():
            what = "it is binary data of no known kind"
        else:
            what = f"it starts with {start!r}"
    return (f"{path}, line {line}: not a trace format evalharness recognises from its first "
            f"{SNIFF_BYTES // 1024} KB — {what}. Tried: {expectations(tried)}. If the file is "
            f"one of these, name its format (traces: {{path: ..., format: <name>}}, or "
            f"`--format <name>`); otherwise see docs/traces-formats.md for the exports each "
            f"reads.")


class _Recognised:
    """A reader chosen by :func:`detect`: the same reader, whose error on the file's first
    record also says that the format was recognised from the start of the file, and which
    formats were tried before it."""

    def __init__(self, chosen: Reader, tried: list[Reader]) -> None:
        self.chosen, self.tried = chosen, tried
        self.name = chosen.name
        self.written_against = chosen.written_against
        self.expects = chosen.expects

    def __getattr__(self, attribute: str):
        return getattr(self.chosen, attribute)

    def sniff(self, head: bytes) -> bool:
        return self.chosen.sniff(head)

    def read(self, path: Path) -> Iterator[Span]:
        spans = self.chosen.read(path)
        try:
            first = next(spans)
        except StopIteration:
            return
        except InputError as exc:
            expects = self.chosen.expects
            others = (f"; the formats tried before it: {expectations(self.tried)}"
                      if self.tried else "")
            raise InputError(
                f"{exc} (the file was read as {self.name}, recognised from its first "
                f"{SNIFF_BYTES // 1024} KB: {expects}{others}; if it is another format, name "
                f"it with `format:`)") from exc
        yield first
        yield from spans
