"""Hostile inputs (issue 25): each is refused with exit 2 naming the file, line and field and
the limit it passed, never a traceback, a hang or an unbounded read.

Deeply nested JSON and YAML, a line past the byte cap, a named pipe or a device given as a
file, a corpus of one enormous chunk, an empty or blank corpus for ``synth``. The caps are
lowered through their module constants so each test runs in seconds; a test whose input would
hang or eat memory before the fix runs the CLI in a subprocess under a timeout and an
address-space limit.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import CASES, TRACES, CLIResult, run_cli, write, write_jsonl
from evalharness import context, jsonlimits
from evalharness.errors import InputError

DEEP = 3000
"""Nesting past anything CPython's decoder (about 1,000) or PyYAML's composer survives."""

ADDRESS_SPACE = 1536 << 20
"""Address space a limited CLI subprocess may take: a validate needs well under 1 GB."""


def nested(depth: int, leaf: str = "1") -> str:
    """A JSON (and YAML flow) value of ``depth`` arrays inside each other."""
    return "[" * depth + leaf + "]" * depth


def run_limited(*args: str | Path, cwd: Path | None = None, timeout: float = 60) -> CLIResult:
    """``evalharness ARGS`` in a subprocess that cannot take more than :data:`ADDRESS_SPACE`
    (reading ``/dev/zero`` whole would otherwise eat the machine) nor run past ``timeout``
    (a named pipe opened for reading blocks until someone writes)."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))

    env = {k: v for k, v in os.environ.items() if k != "EVALHARNESS_LOAD_PLUGINS"}
    proc = subprocess.run([sys.executable, "-m", "evalharness.cli", *map(str, args)],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, preexec_fn=limit)
    return CLIResult.of(proc)


def one_paragraph(res: CLIResult, *needles: str) -> str:
    """The error of a refused command: exit 2, one paragraph, no traceback, every needle."""
    assert res.code == 2, res
    assert "Traceback" not in res.err, res
    message = " ".join(res.err.split())
    for needle in needles:
        assert needle in message, (needle, message)
    return message


def scenario(folder: Path, extra: str = "", *, corpus: bool = False) -> Path:
    """A small recorded-traces scenario (the shared cases and traces), with ``extra`` YAML."""
    write_jsonl(folder / "cases.jsonl", CASES)
    write_jsonl(folder / "traces.jsonl", TRACES)
    if corpus:
        write_jsonl(folder / "corpus.jsonl", [{"id": "d1", "text": "Wool likes cold water."}])
    lines = ["name: s", "cases: cases.jsonl", "traces: traces.jsonl"]
    lines += ["corpus: corpus.jsonl"] if corpus else []
    return write(folder / "s.yaml", "\n".join(lines) + "\n" + extra)


# -- 1. nesting --------------------------------------------------------------------------------


def _deep_line(kind: str) -> tuple[str, str]:
    """(a JSONL line holding a value nested DEEP levels, the field it sits in)."""
    if kind == "cases":
        return json.dumps({"id": "deep", "question": "x?"})[:-1] + \
            f', "metadata": {{"a": {nested(DEEP)}}}}}', "metadata.a"
    if kind == "corpus":
        return f'{{"id": "d2", "text": "t", "extra": {nested(DEEP)}}}', "extra"
    if kind == "results":
        case = json.dumps(CASES[0])
        return (f'{{"case": {case}, "trace": {{"case_id": "c1", "steps": {{"r": {{"x": '
                f'{nested(DEEP)}}}}}}}}}'), "trace.steps.r.x"
    return f'{{"case_id": "c2", "steps": {{"r": {nested(DEEP)}}}}}', "steps.r"


@pytest.mark.parametrize("kind, file, lineno, extra", [
    ("cases", "cases.jsonl", 2, ""),
    ("corpus", "corpus.jsonl", 2, ""),
    ("traces", "traces.jsonl", 3, "traces: {path: traces.jsonl, format: evalharness}\n"),
    ("results", "results.jsonl", 1, "traces: results.jsonl\n"),
])
def test_json_nested_too_deep_is_exit_2_naming_file_line_field_and_limit(
        tmp_path, kind, file, lineno, extra):
    """Cases, corpus, our traces and a run's results.jsonl read as traces (whose first line
    is also read to recognise the format): a RecursionError traceback and exit 1 before."""
    folder = tmp_path / kind
    path = scenario(folder, corpus=kind == "corpus")
    if extra:
        text = path.read_text().replace("traces: traces.jsonl\n", extra)
        path.write_text(text)
    target = folder / file
    line, field = _deep_line(kind)
    before = target.read_text().splitlines()[:lineno - 1] if target.exists() else []
    target.write_text("\n".join([*before, line]) + "\n")
    message = one_paragraph(run_cli("validate", path), f"{file}, line {lineno}",
                            f"field `{field}", "nested more than 128 deep")
    assert "not valid JSON" not in message


def test_json_at_the_nesting_limit_is_read_and_one_past_it_is_refused(tmp_path):
    path = tmp_path / "cases.jsonl"
    for depth, ok in ((jsonlimits.MAX_DEPTH - 2, True), (jsonlimits.MAX_DEPTH - 1, False)):
        # the line's object and `metadata` are two levels, then `depth` arrays
        path.write_text(json.dumps({"id": "a", "question": "q"})[:-1]
                        + f', "metadata": {{"a": {nested(depth)}}}}}\n')
        if ok:
            (_, record), = context.read_jsonl(path)
            assert jsonlimits.depth(record) == jsonlimits.MAX_DEPTH
        else:
            with pytest.raises(InputError, match=r"line 1, field `metadata\.a\[0\]"):
                list(context.read_jsonl(path))


def _inline(metadata: str) -> str:
    return f"name: s\ncases:\n  - id: c1\n    question: q?\n    metadata: {metadata}\n" \
           "traces: traces.jsonl\n"


@pytest.mark.parametrize("style", ["flow", "block", "aliases"])
def test_yaml_nested_too_deep_in_a_scenario_is_exit_2_naming_line_and_limit(tmp_path, style):
    """Inline cases nested 3,000 deep (PyYAML's composer recursed: a RecursionError
    traceback), or made deep through aliases of anchored values (nothing recurses while
    composing, everything after it would)."""
    write_jsonl(tmp_path / "traces.jsonl", TRACES)
    if style == "flow":
        text = _inline(f"{{a: {nested(DEEP)}}}")
    elif style == "block":
        body = "".join(f"{'  ' * (i + 3)}k:\n" for i in range(DEEP)) + f"{'  ' * (DEEP + 3)}1\n"
        text = _inline("\n" + body.rstrip("\n"))
    else:  # each anchor holds the one before it 100 levels down: 30 of them nest 3,000 deep
        anchors = [f"a0: &a0 {nested(100)}"]
        anchors += [f"a{i}: &a{i} {nested(100, f'*a{i - 1}')}" for i in range(1, 30)]
        text = _inline("{" + ", ".join(anchors) + "}")
    path = write(tmp_path / "s.yaml", text)
    one_paragraph(run_cli("validate", path), "s.yaml, line ", "nested more than 128 deep")


def test_yaml_at_the_nesting_limit_is_read_and_one_past_it_is_refused(tmp_path):
    write_jsonl(tmp_path / "traces.jsonl", TRACES)
    # the document, cases, the case and metadata: 4 levels before the arrays
    ok = write(tmp_path / "ok.yaml", _inline(f"{{a: {nested(jsonlimits.MAX_DEPTH - 4)}}}"))
    res = run_cli("validate", ok)
    assert res.code == 0, res
    deep = write(tmp_path / "deep.yaml", _inline(f"{{a: {nested(jsonlimits.MAX_DEPTH - 3)}}}"))
    one_paragraph(run_cli("validate", deep), "deep.yaml, line 5", "field `cases",
                  "nested more than 128 deep")


# -- 2. bytes per line -------------------------------------------------------------------------


def test_a_line_past_the_byte_cap_is_an_error_naming_file_line_and_cap(tmp_path, monkeypatch):
    monkeypatch.setattr(context, "MAX_LINE_BYTES", 1000)
    path = tmp_path / "cases.jsonl"
    ok = json.dumps({"id": "a", "question": "q" * 900})
    assert len(ok) <= 1000
    long = json.dumps({"id": "b", "question": "q" * 5000})
    path.write_text(f"{ok}\n{long}\n{ok}\n")
    with pytest.raises(InputError) as caught:
        list(context.read_jsonl(path))
    message = str(caught.value)
    assert f"{path}, line 2" in message and "1,000 bytes" in message
    # a line just at the cap (its newline not counted) is read, one byte more is not
    head = '{"id": "c", "question": "'
    at_cap = head + "q" * (1000 - len(head) - 2) + '"}'
    over = head + "q" * (1001 - len(head) - 2) + '"}'
    assert (len(at_cap), len(over)) == (1000, 1001)
    path.write_text(at_cap + "\n" + over)  # the last line: no newline
    with pytest.raises(InputError, match="line 2: longer than 1,000 bytes"):
        list(context.read_jsonl(path))
    path.write_text(at_cap + "\n" + at_cap)
    assert [n for n, _ in context.read_jsonl(path)] == [1, 2]


def test_a_line_past_the_cap_is_refused_before_it_is_held_whole(tmp_path, monkeypatch):
    """The reader streams: a file is never read whole, and a line past the cap costs no more
    memory than the cap (it read the whole file, then split it: twice its size)."""
    monkeypatch.setattr(context, "MAX_LINE_BYTES", 64 << 10)
    path = tmp_path / "big.jsonl"
    path.write_bytes(b'{"id": "a", "text": "' + b"x" * (8 << 20) + b'"}\n')
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match="line 1: longer than 65,536 bytes"):
            list(context.read_jsonl(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, f"peak {peak:,} bytes for a cap of 64 kB"


def test_streaming_keeps_every_behaviour_of_the_reader(tmp_path):
    """BOMs, UTF-8 errors naming line and byte, blank lines, a torn last line tolerated only
    when asked and only when it is last and unterminated, surrogates."""
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"a": 1}\n\n  \n{"a": 2}\r\n{"a": 3}')
    assert list(context.read_jsonl(path)) == [(1, {"a": 1}), (4, {"a": 2}), (5, {"a": 3})]
    path.write_bytes('{"a": 1}\n'.encode("utf-16"))
    with pytest.raises(InputError, match="UTF-16 text"):
        list(context.read_jsonl(path))
    path.write_bytes(b'{"a": 1}\n{"a": "caf\xe9"}\n')
    with pytest.raises(InputError, match=r"line 2: not UTF-8 text \(byte 0xe9 at column 11\)"):
        list(context.read_jsonl(path))
    path.write_bytes(b'{"a": 1}\n{"a": 2')
    assert list(context.read_jsonl(path, tolerate_torn_tail=True)) == [(1, {"a": 1})]
    with pytest.raises(InputError, match="line 2: not valid JSON"):
        list(context.read_jsonl(path))
    path.write_bytes(b'{"a": 2\n{"a": 1}')
    with pytest.raises(InputError, match="line 1: not valid JSON"):
        list(context.read_jsonl(path, tolerate_torn_tail=True))
    path.write_bytes(b'{"a": 1}\n{"a": "\\ud800"}\n')
    with pytest.raises(InputError, match="line 2, field `a`: .*unpaired surrogate"):
        list(context.read_jsonl(path, reject_surrogates=True))


# -- 3. not a regular file ---------------------------------------------------------------------

SPECIAL = {"fifo": "is a named pipe (FIFO)", "zero": "is a character device"}


def _special(tmp_path: Path, which: str, name: str) -> Path:
    if which == "zero":
        return Path("/dev/zero")
    path = tmp_path / name
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("which", ["fifo", "zero"])
@pytest.mark.parametrize("field, yaml_text, name", [pytest.param(*p, id=p[0]) for p in [
    ("cases", "cases: {p}\ntraces: traces.jsonl\n", "c.jsonl"),
    ("corpus", "cases: cases.jsonl\ntraces: traces.jsonl\ncorpus: {p}\n", "c.jsonl"),
    ("traces", "cases: cases.jsonl\ntraces: {p}\n", "t.jsonl"),
    ("traces.mapping",
     "cases: cases.jsonl\ntraces: {{path: traces.jsonl, format: otlp-json, mapping: {p}}}\n",
     "m.yaml"),
    ("database.build", "cases: cases.jsonl\ntraces: traces.jsonl\ndatabase: {{build: {p}}}\n",
     "b.sql"),
    ("database.path", "cases: cases.jsonl\ntraces: traces.jsonl\ndatabase: {{path: {p}}}\n",
     "db.sqlite"),
    ("plugins[0]", "cases: cases.jsonl\ntraces: traces.jsonl\nplugins: [{p}]\n", "p.py"),
]])
def test_a_pipe_or_a_device_as_an_input_file_is_named_as_such(tmp_path, which, field,
                                                               yaml_text, name):
    """It said "does not exist"; reading /dev/zero never ended and opening a FIFO blocked."""
    write_jsonl(tmp_path / "cases.jsonl", CASES)
    write_jsonl(tmp_path / "traces.jsonl", TRACES)
    special = _special(tmp_path, which, name)
    path = write(tmp_path / "s.yaml", "name: s\n" + yaml_text.format(p=special))
    message = one_paragraph(run_limited("validate", path), f"field `{field}`", SPECIAL[which],
                            "not a regular file")
    assert "does not exist" not in message


@pytest.mark.parametrize("which", ["fifo", "zero"])
def test_a_pipe_or_a_device_as_the_scenario_or_a_synth_input_is_named_as_such(tmp_path,
                                                                               which):
    special = _special(tmp_path, which, "x")
    for args in (("validate", special), ("scenario", special, "--out", tmp_path / "o"),
                 ("synth", "--corpus", special, "--preview"),
                 ("synth", "--database", special, "--preview")):
        message = one_paragraph(run_limited(*args, cwd=tmp_path), SPECIAL[which],
                                "not a regular file", str(special))
        assert "does not exist" not in message


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Raise ``TimeoutError`` in this (the main) thread after ``seconds``: a blocking open of
    a named pipe is interrupted by the alarm."""

    def ring(signum, frame):  # noqa: ANN001 - a signal handler's signature
        raise TimeoutError(f"still blocked after {seconds} s")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_the_reader_itself_refuses_a_pipe_without_blocking(tmp_path, monkeypatch):
    monkeypatch.setattr(context, "MAX_LINE_BYTES", 1 << 20)  # /dev/zero read whole: 1 MB
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, what in ((fifo, SPECIAL["fifo"]), (Path("/dev/zero"), SPECIAL["zero"]),
                       (tmp_path, "is a directory")):
        with deadline(10), pytest.raises(InputError,
                                         match=what.replace("(", r"\(").replace(")", r"\)")):
            list(context.read_jsonl(path))
    assert context.not_a_file(tmp_path / "nowhere") == "does not exist"
    assert context.not_a_file(fifo) == SPECIAL["fifo"] + ", not a regular file"
    assert context.not_a_file(tmp_path / "nowhere" / "deeper") == "does not exist"


# -- 4. synth on one enormous chunk ------------------------------------------------------------


def _prose(n_chars: int, salt: str) -> str:
    """Sentences of distinct words (nothing an lru_cache could have seen), ``n_chars`` long."""
    words = ["wool", "linen", "cotton", "denim", "jacket", "collar", "sleeve", "lining",
             "pocket", "button", "seam", "fabric", "press", "steam", "brush", "store"]
    out, i = [], 0
    while sum(map(len, out)) + len(out) < n_chars:
        picked = [words[(i * 7 + k * 3) % len(words)] for k in range(8)]
        out.append(f"{picked[0].capitalize()} {' '.join(picked[1:])} {salt}{i}.")
        i += 1
    return " ".join(out)


def _work(monkeypatch, chunk_text: str) -> tuple[int, object]:
    """Characters the heuristic text functions were handed while synth (with the heuristic
    judge checking support) read one chunk of ``chunk_text``: every tokeniser, number and
    name finder normalises its text first."""
    from evalharness.judge import heuristic
    from evalharness.judge.base import JudgeConfig
    from evalharness.plugins import load_plugins
    from evalharness.synth import synthesize

    seen = [0]
    original = heuristic.normalise

    def counting(text: str) -> str:
        seen[0] += len(text)
        return original(text)

    judge = load_plugins([]).judge_backend("heuristic").factory(JudgeConfig(cache_mode="off"))
    monkeypatch.setattr(heuristic, "normalise", counting)
    try:
        chunk = context.Chunk(id="c1", title="Caring for wool", text=chunk_text)
        result = synthesize(n=5, corpus={"c1": chunk}, judge=judge)
    finally:
        monkeypatch.setattr(heuristic, "normalise", original)
        judge.close()
    return seen[0], result


def test_synth_reads_a_long_chunk_up_to_the_cap_and_the_summary_says_so(monkeypatch):
    """One 28 MB chunk took 200 s and 2.6 GB: everything read the whole text, several times
    per candidate. Past the cap, a chunk four times as long costs the same."""
    from evalharness.synth import corpus as synth_corpus

    monkeypatch.setattr(synth_corpus, "MAX_CHUNK_CHARS", 2000)
    text = _prose(32_000, "a")
    index = synth_corpus.CorpusIndex([context.Chunk(id="c1", text=text)])
    assert index.cut == ["c1"] and len(index.chunks["c1"].text) <= 2000
    assert index.best_sentences("c1") and all(s in text[:2000]
                                              for s in index.best_sentences("c1"))
    small, result = _work(monkeypatch, _prose(8_000, "b"))
    large, result_large = _work(monkeypatch, text)
    assert large < 1.5 * small, (small, large)
    for res in (result, result_large):
        assert res.cases
        assert res.summary["chunks"]["cut"] == 1 and res.summary["chunks"]["max_chars"] == 2000
    # without the cap the same inputs cost four times as much: the test can tell
    monkeypatch.setattr(synth_corpus, "MAX_CHUNK_CHARS", 10**9)
    small, _ = _work(monkeypatch, _prose(8_000, "c"))
    large, _ = _work(monkeypatch, _prose(32_000, "d"))
    assert large > 3 * small, (small, large)


@pytest.mark.parametrize("tagged", [False, True])
def test_what_a_long_chunk_says_past_the_cap_still_keeps_gold_exact(monkeypatch, tagged):
    """A topic mentioned only past the cap is still "in the corpus": it is never asked as
    unanswerable; and a multi-hop term (a tag's phrase, or without tags a title word) that a
    third chunk mentions past its cap is not "in exactly two chunks"."""
    from evalharness.synth import corpus as synth_corpus
    from evalharness.synth import synthesize

    monkeypatch.setattr(synth_corpus, "MAX_CHUNK_CHARS", 2000)
    tags = {"tags": ["velvet"]} if tagged else {}
    base = _prose(2500, "e")
    chunks = {
        "a": context.Chunk(id="a", title="Velvet jackets", text=_prose(600, "f"), **tags),
        "b": context.Chunk(id="b", title="Velvet trousers", text=_prose(600, "g"), **tags),
        "c": context.Chunk(id="c", title="Other", text=base + " Tuning a guitar with velvet."),
    }
    result = synthesize(n=200, corpus=chunks)
    asked = " ".join(c.question.lower() for c in result.cases)
    assert "multi_hop" not in result.summary["by_shape"]
    assert "guitar" not in asked
    assert "brewing kombucha" in asked  # other topics are still asked: the check is narrow
    chunks["c"] = context.Chunk(id="c", title="Other", text=base)
    again = synthesize(n=200, corpus=chunks)
    assert "multi_hop" in again.summary["by_shape"]
    assert "guitar" in " ".join(c.question.lower() for c in again.cases)


# -- 5. synth with nothing to read -------------------------------------------------------------


def test_synth_with_an_empty_corpus_file_says_the_file_is_empty(tmp_path):
    empty = write(tmp_path / "empty.jsonl", "\n\n")
    one_paragraph(run_cli("synth", "--corpus", empty, "--out", tmp_path / "o.jsonl"),
                  str(empty), "empty")
    assert not (tmp_path / "o.jsonl").exists()


def test_synth_with_a_corpus_of_blank_texts_writes_nothing_and_says_why(tmp_path):
    blank = write_jsonl(tmp_path / "blank.jsonl",
                        [{"id": f"b{i}", "text": " \n\t"[: i % 3]} for i in range(5)])
    message = one_paragraph(run_cli("synth", "--corpus", blank, "--out", tmp_path / "o.jsonl"),
                            str(blank), "blank")
    assert "5 chunks" in message
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.parametrize("which", ["fifo", "zero"])
def test_a_pipe_or_a_device_given_to_the_other_commands_is_named_as_such(tmp_path, which):
    """Was: `traces convert/explain` said "no such file", `init --corpus/--database` and a
    plugin file "does not exist", `review import` "no such file"."""
    from evalharness.errors import PluginError
    from evalharness.plugins import load_plugin_file

    special = _special(tmp_path, which, "x")
    commands = [("traces", "convert", special, "--out", tmp_path / "t.jsonl"),
                ("traces", "explain", special),
                ("init", tmp_path / "new", "--no-input", "--corpus", special),
                ("init", tmp_path / "new", "--no-input", "--database", special)]
    for args in commands:
        message = one_paragraph(run_limited(*args, cwd=tmp_path), SPECIAL[which],
                                "not a regular file", str(special))
        assert "does not exist" not in message and "no such file" not in message, message
    with pytest.raises(PluginError, match="not a regular file"):
        load_plugin_file(special)
