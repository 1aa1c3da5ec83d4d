"""Issue 25's findings about a run's own results: a system's exception keeps its traceback, and
a step that carries an error never yields a metric value (docs/reliability.md)."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from conftest import ROOT, run_cli, write, write_jsonl

SYSTEM = '''
"""A system whose adapter fails two calls deep for the cases tagged "boom"."""

def lookup(question):
    raise RuntimeError("boom in my app")


def answer(case):
    if "boom" in case.tags:
        return {"generator": {"answer": lookup(case.question)}}
    if "exit" in case.tags:
        raise SystemExit(4)
    return {"router": {"routes": ["sql"]}, "generator": {"answer": "The coat costs 12."}}
'''


@pytest.fixture(scope="module")
def failing_run(tmp_path_factory) -> Path:
    """One run of a system that raises for two of its four cases; returns its folder."""
    tmp = tmp_path_factory.mktemp("traceback")
    write(tmp / "system.py", SYSTEM)
    tags = {"c1": ["boom"], "c3": ["boom"], "c4": ["exit"]}
    write_jsonl(tmp / "cases.jsonl", [
        {"id": f"c{i}", "question": f"question {i}", "tags": tags.get(f"c{i}", []),
         "gold": {"routes": ["sql"]}} for i in range(1, 5)])
    return run_system(tmp, "tracebacks")


def run_system(folder: Path, name: str) -> Path:
    """Run the scenario of ``folder``'s system.py and cases.jsonl (a router and a generator);
    returns the run folder."""
    s = write(folder / "s.yaml", f"""
        name: {name}
        cases: cases.jsonl
        system: system.py:answer
        pipeline: {{router: {{}}, generator: {{after: [router]}}}}
        evaluators:
          router: [route_accuracy]
          generator: [answer_present]
    """)
    res = run_cli("scenario", s, "--out", folder / "o", "--quiet", "--no-headroom")
    assert res.code == 0, res
    return folder / "o"


def _results(out: Path) -> dict[str, dict]:
    lines = (out / "results.jsonl").read_text(encoding="utf-8").splitlines()
    return {r["case"]["id"]: r for r in map(json.loads, lines)}


def test_a_systems_exception_keeps_its_traceback_from_the_users_frames(failing_run):
    """Was: only `RuntimeError: boom in my app` was stored; the user could not find the line
    of their own adapter that failed."""
    trace = _results(failing_run)["c1"]["trace"]
    assert trace["error"] == "RuntimeError: boom in my app"
    tb = trace["traceback"]
    assert tb.startswith("Traceback (most recent call last):"), tb
    assert 'system.py", line 9, in answer' in tb and 'system.py", line 4, in lookup' in tb, tb
    assert tb.rstrip().endswith("RuntimeError: boom in my app"), tb
    # evalharness's own frames (and the thread machinery under them) are not the user's
    assert "evalharness" not in tb.replace("tracebacks", ""), tb
    assert "concurrent" not in tb and "threading" not in tb, tb
    assert _results(failing_run)["c2"]["trace"].get("traceback") is None


def test_sys_exit_in_the_system_keeps_its_traceback_too(failing_run):
    trace = _results(failing_run)["c4"]["trace"]
    assert trace["error"] == "SystemExit: the code called sys.exit(4)"
    assert 'line 11, in answer' in trace["traceback"], trace


def test_the_reports_show_the_traceback(failing_run):
    md = (failing_run / "report.md").read_text(encoding="utf-8")
    assert "## System errors" in md, md
    section = md.split("## System errors", 1)[1]
    assert "RuntimeError: boom in my app" in section and "2 cases" in section, section
    assert 'system.py", line 4, in lookup' in section, section
    page = html.unescape((failing_run / "report.html").read_text(encoding="utf-8"))
    assert page.count('system.py", line 4, in lookup') >= 3, "the header and both cases"
    report = json.loads((failing_run / "report.json").read_text(encoding="utf-8"))
    groups = {g["reason"]: g for g in report["system_errors"]}
    assert groups["RuntimeError: boom in my app"]["count"] == 2
    assert groups["RuntimeError: boom in my app"]["example"] == "c1"
    assert "line 4, in lookup" in groups["RuntimeError: boom in my app"]["traceback"]


def test_a_traceback_is_capped():
    from evalharness.errors import MAX_TRACEBACK_CHARS, MAX_TRACEBACK_FRAMES, user_traceback

    def deep(n):
        if n == 0:
            raise ValueError("x" * 50_000)
        return deep(n - 1)

    try:
        deep(200)
    except ValueError as exc:
        tb = user_traceback(exc)
    assert len(tb) <= MAX_TRACEBACK_CHARS + 200, len(tb)
    assert tb.count(", in deep") <= MAX_TRACEBACK_FRAMES, tb.count(", in deep")
    assert "frames omitted" in tb and "[cut:" in tb, tb[:2000]


# --------------------------------------------------------------------------------------------
# A step that carries an error yields no metric value
# --------------------------------------------------------------------------------------------


def test_a_retriever_step_with_an_error_yields_metric_errors_not_zeros(tmp_path):
    """Was: the repository's LangSmith fixture had retriever steps whose documents carry no
    ids the preset read; the step carried an error, yet context_precision@5 = 0.0, n=2,
    errors=0. (The preset now reads `metadata.doc_id`: the ids are taken out here.)"""
    def without_ids(value):
        if isinstance(value, dict):
            return {k: without_ids(v) for k, v in value.items() if k not in ("doc_id", "id")
                    or "run_type" in value}
        return [without_ids(v) for v in value] if isinstance(value, list) else value

    source = ROOT / "tests" / "data" / "traces" / "hosted" / "langsmith_rag_runs.jsonl"
    runs = tmp_path / "runs.jsonl"
    write_jsonl(runs, [without_ids(json.loads(line))
                       for line in source.read_text(encoding="utf-8").splitlines() if line])
    write_jsonl(tmp_path / "cases.jsonl", [
        {"id": "q007", "question": "What is the refund window for opened items?",
         "gold": {"routes": ["blog"], "relevant": {"returns-3": 1}, "answer": "14 days."}},
        {"id": "q008", "question": "Do you ship to Norway?",
         "gold": {"routes": ["blog"], "relevant": {"shipping-1": 1}, "answer": "Yes."}}])
    s = write(tmp_path / "s.yaml", f"""
        name: langsmith
        cases: cases.jsonl
        traces: {{path: {runs}}}
        pipeline: {{retriever: {{}}, generator: {{after: [retriever]}}}}
        evaluators:
          retriever: [{{ranking: {{k: [5], measures: [precision]}}}}, context_precision]
          generator: [answer_present]
    """)
    res = run_cli("scenario", s, "--out", tmp_path / "o", "--quiet", "--no-headroom")
    assert res.code in (0, 1), res
    results = _results(tmp_path / "o")
    steps = [r["trace"]["retriever"] for r in results.values() if r["trace"].get("retriever")]
    assert steps and all(step.get("error") for step in steps), steps
    report = json.loads((tmp_path / "o" / "report.json").read_text(encoding="utf-8"))
    for name in ("precision@5", "context_precision@5"):
        metric = report["components"]["retriever"]["metrics"][name]
        assert metric["n"] == 0 and metric["errors"] == len(steps), (name, metric)
        assert all(reason.startswith("the retriever step carries an error: ")
                   for reason in metric["error_reasons"]), metric
        for r in results.values():
            value = r["components"]["retriever"]["metrics"][name]
            assert value["value"] is None and value["error"].startswith(
                "the retriever step carries an error: the ") and "document ids" in value["error"]


# --------------------------------------------------------------------------------------------
# report.html carries no raw control characters
# --------------------------------------------------------------------------------------------


def test_report_html_carries_no_raw_control_characters(tmp_path):
    """Was: a NUL in a case's question or answer went raw into report.html (a parse error in
    every browser; some cut the page there)."""
    import re

    tmp = tmp_path
    write(tmp / "system.py", '''
        def answer(case):
            return {"router": {"routes": ["blog"]},
                    "generator": {"answer": "nul\\x00 bell\\x07 del\\x7f c1\\x85 ok"}}
    ''')
    write_jsonl(tmp / "cases.jsonl", [
        {"id": "c\x001", "question": "why\x00 is\x1b[31m red?", "gold": {"routes": ["sql"]}}])
    page = (run_system(tmp, "controls") / "report.html").read_text(encoding="utf-8")
    raw = re.findall(r"[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f]", page)
    assert not raw, sorted(set(raw))
    assert "why␀ is␛[31m red?" in page and "nul␀ bell␇ del␡" in page


def test_the_review_page_shows_the_traceback(failing_run):
    from evalharness.review.server import App, new_token
    from evalharness.review.session import Review

    app = App(Review.open(failing_run), new_token(), set(), "ana")
    page = html.unescape(app.page(app.ids.index("c1"), "ana", "nonce"))
    assert "the system failed: RuntimeError: boom in my app" in page
    assert 'system.py", line 4, in lookup' in page, page[-3000:]


def test_a_broken_template_cache_never_costs_a_page(tmp_path, monkeypatch):
    """Compiled templates are cached in a temporary folder; a cache file that is torn or
    foreign, or a folder that cannot be written, makes the page compile its templates
    again, never fail."""
    import jinja2
    import jinja2.bccache

    from evalharness import pages

    cache = pages._Compiled(str(tmp_path))
    monkeypatch.setattr(pages, "_bytecode_cache", lambda: cache)
    pages.environment.cache_clear()
    try:
        first = pages.render("base.html", csp="default-src 'none'")
        written = list(tmp_path.iterdir())
        assert written, "the compiled template was cached"
        for path in written:
            path.write_bytes(jinja2.bccache.bc_magic + b"\x80torn")  # right magic, torn body
        pages.environment.cache_clear()
        assert pages.render("base.html", csp="default-src 'none'") == first

        def full(*args, **kwargs):
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(jinja2.FileSystemBytecodeCache, "dump_bytecode", full)
        for path in tmp_path.iterdir():
            path.unlink()
        pages.environment.cache_clear()
        assert pages.render("base.html", csp="default-src 'none'") == first
    finally:
        pages.environment.cache_clear()


def test_a_results_line_nested_too_deep_is_an_error_naming_the_line(tmp_path):
    """results.jsonl is read back by --resume, load_run, compare and review: a line someone
    edited into a deep nest is an error naming it, never a RecursionError."""
    from evalharness.errors import InputError
    from evalharness.results import parse_line

    deep = b'{"case": {"id": "c1", "question": "q", "tags": ' + b"[" * 5000 + b"]" * 5000 + b"}}"
    with pytest.raises(InputError, match=r"results.jsonl, line 7: not valid JSON \(arrays and "
                                         r"objects nested more than 128 deep"):
        parse_line(deep, Path("results.jsonl"), 7)


def test_a_run_folders_own_files_edited_out_of_shape_are_errors_naming_them(failing_run,
                                                                            tmp_path):
    """run.json read by --resume, report.json read by compare: a file torn or nested too deep
    is exit 2 naming it, never a traceback."""
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(failing_run, broken)
    (broken / "run.json").write_text('{"scenario": "s.yaml", "inputs_sha2', encoding="utf-8")
    res = run_cli("scenario", failing_run.parent / "s.yaml", "--out", broken, "--resume", "-q")
    assert res.code == 2 and "run.json: not the record of a run" in res.err, res
    (broken / "report.json").write_text("[" * 3000 + "]" * 3000, encoding="utf-8")
    res = run_cli("compare", failing_run, broken)
    assert res.code == 2 and "report.json" in res.err and "nested more than 128" in res.err, res
    assert "Traceback" not in res.err


def test_review_import_of_a_pipe_names_it(failing_run, tmp_path):
    """Was: `review import RUN FIFO` said "no such file"."""
    import os

    fifo = tmp_path / "labels.csv"
    os.mkfifo(fifo)
    res = run_cli("review", "import", failing_run, fifo)
    assert res.code == 2 and "is a named pipe (FIFO), not a regular file" in res.err, res
    assert "no such file" not in res.err
    assert not (failing_run / "review" / "labels.jsonl").exists()
