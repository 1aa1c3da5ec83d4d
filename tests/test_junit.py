"""``--junit-xml`` and the GitHub job summary: the JUnit file of a real run validates against
the shipped Jenkins ``junit-10.xsd`` and says what ``results.jsonl`` says; docs/ci.md's
workflows parse and their ``evalharness`` commands are accepted by the CLI."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import click
import pytest
import xmlschema
import yaml

from conftest import ROOT, run_cli
from evalharness import junit
from evalharness.ci import SUMMARY_LIMIT, append_step_summary, write_ci_outputs
from evalharness.errors import EvalHarnessError, OutputError
from evalharness.junit import check_writable, render_junit, stream_junit, write_junit
from evalharness.models import CaseResult, GateResult, Report, Verdict
from evalharness.outcomes import DETAIL_LIMIT, Outcome, explain
from evalharness.results import Results

XSD = ROOT / "tests" / "data" / "junit" / "junit-10.xsd"
STATUS = {"pass": None, "fail": "failure", "error": "error", "not_applicable": "skipped"}


@pytest.fixture(scope="module")
def schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(str(XSD))


def load(out: Path) -> tuple[Report, Results]:
    report = Report.model_validate_json((out / "report.json").read_text(encoding="utf-8"))
    return report, Results.open(out / "results.jsonl")


def validate(schema: xmlschema.XMLSchema, source: Path | str) -> None:
    errors = [str(e) for e in schema.iter_errors(str(source))]
    assert not errors, "\n\n".join(errors[:3])


def verdicts_of(result: CaseResult) -> dict[str, Verdict]:
    verdicts = dict(result.verdicts)
    if result.end_to_end is not None:
        verdicts["end_to_end"] = result.end_to_end
    return verdicts


def suites(path: Path) -> dict[str, ET.Element]:
    return {s.get("name"): s for s in ET.parse(path).getroot()}


def test_a_run_validates_against_the_shipped_xsd(shop_sample, tmp_path, schema):
    report, results = load(shop_sample)
    path = write_junit(tmp_path / "ci" / "reports" / "junit.xml", report, results)
    validate(schema, path)
    assert list(suites(path)) == ["shop.router", "shop.text2sql", "shop.retriever",
                                  "shop.generator", "shop.end_to_end", "shop.gates"]
    assert sorted(p.name for p in path.parent.iterdir()) == ["junit.xml"]  # no temporary left


def test_schema_is_the_unchanged_jenkins_file():
    import hashlib

    digest = hashlib.sha256(XSD.read_bytes()).hexdigest()
    assert digest == "a1a816f58d1bf95ebabf371994df0b9246dee66ea9572fbec4f9296f1b2c0ff6"
    assert digest in (XSD.parent / "README.md").read_text(encoding="utf-8")


def test_counts_are_the_runs_verdict_counts(shop_sample, tmp_path, schema):
    report, results = load(shop_sample)
    # every kind of outcome: one verdict made an error, one gate failed
    results = list(results)
    first = results[0]
    errored = Verdict(status="error", reason="recall@5: could not be computed: no ids")
    results[0] = first.model_copy(update={"verdicts": {**first.verdicts, "retriever": errored}})
    failed = GateResult(name="router.route_accuracy >= 0.99", component="router",
                        metric="route_accuracy", op=">=", threshold=0.99, value=0.9,
                        passed=False, n=12, reason="0.9 < 0.99")
    report = report.model_copy(update={"gates": [*report.gates, failed]})
    path = write_junit(tmp_path / "junit.xml", report, results)
    validate(schema, path)

    expected: dict[str, Counter] = {}
    for result in results:
        for component, verdict in verdicts_of(result).items():
            expected.setdefault(f"shop.{component}", Counter())[verdict.status] += 1
    expected["shop.gates"] = Counter("pass" if g.passed else "fail" for g in report.gates)

    root = ET.parse(path).getroot()
    got = suites(path)
    assert set(got) == set(expected)
    for name, suite in got.items():
        want = expected[name]
        assert int(suite.get("tests")) == sum(want.values()) == len(suite.findall("testcase"))
        assert int(suite.get("failures")) == want["fail"] == len(suite.findall("*/failure"))
        assert int(suite.get("errors")) == want["error"] == len(suite.findall("*/error"))
        assert int(suite.get("skipped")) == want["not_applicable"] == len(
            suite.findall("*/skipped"))
        assert suite.get("timestamp") == report.run["started_at"]
        times = sum(float(c.get("time")) for c in suite.findall("testcase"))
        assert float(suite.get("time")) == pytest.approx(times, abs=0.001 * (1 + want.total()))
    fails = sum(c["fail"] for c in expected.values())
    assert len(root.findall(".//failure")) == fails == int(root.get("failures"))
    assert int(root.get("tests")) == sum(c.total() for c in expected.values())
    assert int(root.get("errors")) == sum(c["error"] for c in expected.values())
    assert all(root.findall(f".//{tag}") for tag in ("failure", "error", "skipped"))


def test_testcases_carry_the_verdicts_reasons_and_latencies(shop_sample, tmp_path):
    report, results = load(shop_sample)
    xml = write_junit(tmp_path / "junit.xml", report, results)
    cases = {(c.get("classname"), c.get("name")): c for c in ET.parse(xml).getroot().iter(
        "testcase")}
    seen = 0
    for result in results:
        for component, verdict in verdicts_of(result).items():
            case = cases[(f"shop.{component}", result.case.id)]
            tag = STATUS[verdict.status]
            if tag is None:
                assert len(case) == 0
            else:
                (child,) = case
                assert child.tag == tag
                assert child.get("message") == verdict.reason
                if tag != "skipped":  # the text: the evidence the evaluators saw
                    assert child.get("type") == ("fail" if tag == "failure" else "error")
                    evidence = explain(result, component, verdict)
                    if len(evidence) > DETAIL_LIMIT:
                        evidence = evidence[: DETAIL_LIMIT - 1] + "…"
                    assert child.text == (evidence or verdict.reason)
            step = result.trace.step(component) if component != "end_to_end" else None
            latency = getattr(step, "latency_ms", None) if step is not None else None
            assert float(case.get("time")) == pytest.approx((latency or 0) / 1000, abs=5e-4)
            seen += 1
    assert seen + len(report.gates) == len(cases)
    for gate in report.gates:
        assert ("shop.gates", gate.name) in cases


def test_characters_xml_cannot_hold_are_escaped(tmp_path, schema):
    bad = "nul\x00 esc\x1b lone\ud800 nonchar\uffff"
    items = [
        Outcome(f"q\x00{i}", "generator", status, message=f"reason {bad}\nsecond line",
                detail=f"answer: {bad}\r\nnext", seconds=0.5)
        for i, status in enumerate(("failed", "error", "skipped", "passed"))]
    items.append(Outcome(None, "generator.faithfulness >= 0.5 \x07", "failed", message=bad))
    path = tmp_path / "junit.xml"
    path.write_text(render_junit("sc\x01", items), encoding="utf-8")
    validate(schema, path)
    root = ET.parse(path).getroot()
    assert root.get("name") == "sc\\x01"
    failure = root.find(".//failure")
    assert failure.get("message") == ("reason nul\\x00 esc\\x1b lone\\ud800 nonchar\\uffff "
                                      "second line")
    assert failure.text == "answer: nul\\x00 esc\\x1b lone\\ud800 nonchar\\uffff\r\nnext"
    names = [c.get("name") for c in root.iter("testcase")]
    assert names[0] == "q\\x000" and "generator.faithfulness >= 0.5 \\x07" in names


def test_a_case_with_a_nul_in_its_answer_through_write_junit(shop_sample, tmp_path, schema):
    report, results = load(shop_sample)
    result = next(r for r in results if r.end_to_end is not None
                  and r.end_to_end.status == "fail")
    answer = "the Navy Coat\x00 costs 40 \x1b[31m"
    generator = result.trace.generator.model_copy(update={"answer": answer})
    broken = result.model_copy(update={"trace": result.trace.model_copy(
        update={"generator": generator})})
    path = write_junit(tmp_path / "junit.xml", report, [broken])
    validate(schema, path)
    text = path.read_text(encoding="utf-8")
    assert "the Navy Coat\\x00 costs 40 \\x1b[31m" in text and "\x00" not in text


def test_outcomes_are_read_once_and_suites_spill_to_disk(monkeypatch, tmp_path, schema):
    monkeypatch.setattr(junit, "_SPOOL", 256)  # every suite goes through a temporary file
    n = 800

    def items():
        for i in range(n):
            for component in ("router", "retriever", "end_to_end"):
                status = ("passed", "failed", "skipped", "error")[(i + len(component)) % 4]
                yield Outcome(f"c{i:05d}", component, status, message=f"m{i}",
                              detail="d" * 50, seconds=0.001)
        yield Outcome(None, "router.route_accuracy >= 0.5", "passed")

    path = tmp_path / "big.xml"
    with open(path, "wb") as fh:
        totals = stream_junit(fh, "big", items(), suites=["router", "retriever", "end_to_end"])
    assert totals.tests == 3 * n + 1
    validate(schema, path)
    got = suites(path)
    assert list(got) == ["big.router", "big.retriever", "big.end_to_end", "big.gates"]
    assert [c.get("name") for c in got["big.router"]][:3] == ["c00000", "c00001", "c00002"]
    assert sum(int(s.get("failures")) for s in got.values()) == totals.failures


def test_suites_follow_the_pipeline_not_the_first_case(tmp_path):
    items = [Outcome("c1", "generator", "passed"), Outcome("c1", "end_to_end", "passed"),
             Outcome("c2", "router", "passed"), Outcome("c2", "generator", "passed")]
    text = render_junit("s", items, suites=["router", "generator", "end_to_end"])
    assert re.findall(r'<testsuite name="([^"]+)"', text) == ["s.router", "s.generator",
                                                              "s.end_to_end"]


def test_written_atomically_over_an_old_file(shop_sample, tmp_path):
    report, results = load(shop_sample)
    path = tmp_path / "a" / "b" / "junit.xml"
    path.parent.mkdir(parents=True)
    path.write_text("old", encoding="utf-8")

    def broken():
        yield results[0]
        raise EvalHarnessError("results.jsonl, line 2: not valid JSON")

    with pytest.raises(EvalHarnessError, match="line 2"):
        write_junit(path, report, broken())
    assert path.read_text(encoding="utf-8") == "old"  # untouched: the new file never replaced it
    assert sorted(p.name for p in path.parent.iterdir()) == ["junit.xml"]
    write_junit(path, report, results[:2])
    assert path.read_text(encoding="utf-8").startswith("<?xml")
    assert sorted(p.name for p in path.parent.iterdir()) == ["junit.xml"]


def test_an_unwritable_path_is_a_clear_error(shop_sample, tmp_path):
    report, results = load(shop_sample)
    blocker = tmp_path / "a-file"
    blocker.write_text("x", encoding="utf-8")
    with pytest.raises(OutputError, match=r"cannot write the JUnit XML file .*a-file/junit\.xml:"
                                          r" .*a-file is a file, not a folder; give --junit-xml"):
        write_junit(blocker / "junit.xml", report, results[:1])
    folder = tmp_path / "folder.xml"
    folder.mkdir()
    with pytest.raises(OutputError, match=r"folder\.xml: it is a folder, not a file"):
        write_junit(folder, report, results[:1])
    assert list(folder.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == [
        "a-file", "folder.xml"]
    assert issubclass(OutputError, EvalHarnessError)


def test_an_unwritable_path_is_found_before_the_run(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x", encoding="utf-8")
    with pytest.raises(OutputError, match="a-file is a file, not a folder; give --junit-xml"):
        check_writable(blocker / "sub" / "junit.xml")
    (tmp_path / "folder").mkdir()
    with pytest.raises(OutputError, match="it is a folder, not a file"):
        check_writable(tmp_path / "folder")
    check_writable(tmp_path / "new" / "junit.xml")
    assert list((tmp_path / "new").iterdir()) == []  # the folder is made, no file is left


def test_an_unwritable_path_through_the_cli_exits_2(small, tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("x", encoding="utf-8")
    res = run_cli("scenario", small, "--out", tmp_path / "run", "-q", "--junit-xml",
                  blocker / "junit.xml", env={"GITHUB_STEP_SUMMARY": ""})
    assert res.code == 2, res
    assert "junit.xml" in res.err and "not a folder" in res.err and "Traceback" not in res.err


def test_step_summary_is_appended_after_a_blank_line(tmp_path):
    md = tmp_path / "report.md"
    md.write_text("# shop\n\n| a | b |\n", encoding="utf-8")
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n", encoding="utf-8")
    assert append_step_summary(md, env={"GITHUB_STEP_SUMMARY": str(summary)}) == summary
    assert summary.read_text(encoding="utf-8") == "earlier step\n\n# shop\n\n| a | b |\n"
    fresh = tmp_path / "fresh.md"
    append_step_summary(md, env={"GITHUB_STEP_SUMMARY": str(fresh)})
    assert fresh.read_text(encoding="utf-8") == md.read_text(encoding="utf-8")


def test_step_summary_reads_the_environment(tmp_path, monkeypatch):
    md = tmp_path / "report.md"
    md.write_text("# report\n", encoding="utf-8")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    assert append_step_summary(md) is None
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert append_step_summary(md) == summary
    assert summary.read_text(encoding="utf-8") == "# report\n"


def test_step_summary_never_fails_the_run(tmp_path, capsys):
    md = tmp_path / "report.md"
    md.write_text("# report\n", encoding="utf-8")
    target = tmp_path / "a-folder"
    target.mkdir()
    assert append_step_summary(md, env={"GITHUB_STEP_SUMMARY": str(target)}) is None
    err = capsys.readouterr().err
    assert err.startswith("warning: cannot append") and "GITHUB_STEP_SUMMARY" in err
    assert append_step_summary(tmp_path / "missing.md",
                               env={"GITHUB_STEP_SUMMARY": str(tmp_path / "s.md")}) is None
    assert "cannot read" in capsys.readouterr().err


def test_step_summary_is_cut_to_what_github_accepts(tmp_path):
    md = tmp_path / "report.md"
    line = "| q0001 | router | fail | route_accuracy = 0 (needs >= 1) |\n"
    md.write_text(line * (SUMMARY_LIMIT // len(line) + 100), encoding="utf-8")
    summary = tmp_path / "summary.md"
    summary.write_text("x" * 1000 + "\n", encoding="utf-8")
    append_step_summary(md, env={"GITHUB_STEP_SUMMARY": str(summary)})
    text = summary.read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) <= SUMMARY_LIMIT
    assert text.endswith(f"see {md} for the rest.*\n")
    assert text.split("\n\n", 1)[1].startswith(line)


def test_write_ci_outputs(shop_sample, tmp_path, schema):
    out = shop_sample
    report, results = load(out)
    summary = tmp_path / "summary.md"
    written = write_ci_outputs(report, results, out, tmp_path / "j.xml",
                               env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert written == {"junit": tmp_path / "j.xml", "step_summary": summary}
    validate(schema, written["junit"])
    assert summary.read_text(encoding="utf-8") == (out / "report.md").read_text(
        encoding="utf-8")
    assert write_ci_outputs(report, results, out, None, env={}) == {}


def test_the_cli_appends_report_md_to_the_step_summary(small, tmp_path, schema):
    summary = tmp_path / "summary.md"
    summary.write_text("## earlier step\n", encoding="utf-8")
    out = tmp_path / "run"
    res = run_cli("scenario", small, "--out", out, "-q", "--junit-xml", out / "junit.xml",
                  env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert res.code == 0, res
    validate(schema, out / "junit.xml")
    report_md = (out / "report.md").read_text(encoding="utf-8")
    assert summary.read_text(encoding="utf-8") == "## earlier step\n\n" + report_md


# docs/ci.md -------------------------------------------------------------------------------

CI_DOC = ROOT / "docs" / "ci.md"
SEPARATORS = {";", ";;", "&&", "||", "|", "(", ")", "!", "then", "do", "else", "if", "elif"}


def yaml_blocks() -> list[tuple[int, str]]:
    text = CI_DOC.read_text(encoding="utf-8")
    return [(text[: m.start()].count("\n") + 1, m.group(1))
            for m in re.finditer(r"^```yaml\n(.*?)^```", text, re.S | re.M)]


def shell_scripts(node, key: str = "") -> list[str]:
    """Every shell script in a workflow: GitHub's ``run:`` and GitLab's ``script:`` items."""
    if isinstance(node, dict):
        return [s for k, v in node.items() for s in shell_scripts(v, str(k))]
    if isinstance(node, list):
        return [s for v in node for s in shell_scripts(v, key)]
    return [node] if key in ("run", "script") and isinstance(node, str) else []


def commands(script: str) -> list[list[str]]:
    """The ``evalharness ...`` command lines of a shell script, as argument lists."""
    found = []
    for line in script.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        tokens = list(lexer)
        for i, token in enumerate(tokens):
            if token == "evalharness" and (i == 0 or tokens[i - 1] in SEPARATORS):
                args = []
                for arg in tokens[i + 1:]:
                    if arg in SEPARATORS - {"!", "then", "do", "else", "if", "elif"}:
                        break
                    args.append(arg)
                found.append(args)
    return found


def parse_cli(args: list[str]) -> click.Context:
    """Parse ``evalharness ARGS`` with the real CLI's options, without running anything."""
    from evalharness.cli import cli

    parent = click.Context(cli, info_name="evalharness")
    name, command, rest = cli.resolve_command(parent, args)
    return command.make_context(name, rest, parent=parent)


def test_docs_ci_workflows_parse_and_their_commands_are_accepted():
    blocks = yaml_blocks()
    assert len(blocks) == 2, "docs/ci.md: one GitHub Actions workflow, one GitLab job"
    seen = []
    for lineno, block in blocks:
        try:
            workflow = yaml.safe_load(block)
        except yaml.YAMLError as exc:
            pytest.fail(f"docs/ci.md, the YAML block at line {lineno} does not parse: {exc}")
        scripts = shell_scripts(workflow)
        assert scripts, f"docs/ci.md line {lineno}: no run:/script: found"
        for script in scripts:
            for args in commands(script):
                try:
                    ctx = parse_cli(args)
                except click.ClickException as exc:
                    pytest.fail(f"docs/ci.md line {lineno}: `evalharness {shlex.join(args)}`: "
                                f"{exc.format_message()}")
                seen.append((ctx.info_name, ctx.params))
    runs = [p for name, p in seen if name == "scenario"]
    compares = [p for name, p in seen if name == "compare"]
    assert len(runs) == 2 and len(compares) == 2  # each workflow runs, then compares
    for params in runs:
        assert params["junit_xml"] == Path("runs/new/junit.xml")
        assert params["out_dir"] == Path("runs/new")
    for params in compares:
        assert (params["run_a"], params["run_b"]) == (Path("baselines/shop"), Path("runs/new"))


def test_docs_ci_workflows_gate_cache_and_publish():
    github, gitlab = (yaml.safe_load(block) for _, block in yaml_blocks())
    steps = github["jobs"]["evaluate"]["steps"]
    uses = {s.get("uses", "").split("@")[0]: s for s in steps}
    assert uses["actions/cache"]["with"]["path"] == github["jobs"]["evaluate"]["env"][
        "EVALHARNESS_CACHE_DIR"]
    assert uses["mikepenz/action-junit-report"]["with"]["report_paths"] == "runs/new/junit.xml"
    assert uses["actions/upload-artifact"]["with"]["path"] == "runs/new/"
    job = gitlab["evalharness"]
    assert job["artifacts"]["reports"]["junit"] == "runs/new/junit.xml"
    assert job["cache"]["paths"] == [".evalharness-cache/"]
    assert job["variables"]["EVALHARNESS_CACHE_DIR"].endswith("/.evalharness-cache")


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_docs_ci_shell_scripts_are_valid_bash():
    for lineno, block in yaml_blocks():
        for script in shell_scripts(yaml.safe_load(block)):
            check = subprocess.run(["bash", "-n"], input=script, capture_output=True,
                                   text=True)
            assert check.returncode == 0, f"docs/ci.md line {lineno}: {check.stderr}\n{script}"


def test_command_extraction():
    script = ("pip install -e .\nif [ -f x ] && [ \"$A\" != 1 ]; then\n"
              "  evalharness compare a b --out c.json  # gate\nfi\n"
              "evalharness scenario s.yaml \\\n  --out o -q || exit 1\necho evalharness")
    assert commands(script) == [["compare", "a", "b", "--out", "c.json"],
                                ["scenario", "s.yaml", "--out", "o", "-q"]]
    with pytest.raises(click.UsageError, match="no-such-option"):
        parse_cli(["scenario", "s.yaml", "--no-such-option"])


def test_a_flaky_outcome_is_a_passed_testcase_with_surefires_rerun_elements(schema, tmp_path):
    """A case that passed in some repeats: Surefire's `<flakyFailure>`/`<flakyError>` (declared
    by junit-10.xsd itself, type rerunType), one per repeat that did not pass, in a testcase
    that counts as passed; the suites carry the run's repeats as a property."""
    from evalharness.outcomes import combine_repeats

    ok = Outcome("q1", "generator", "passed", seconds=0.3)
    bad = Outcome("q1", "generator", "failed", "faithfulness = 0.5 (needs >= 0.8)",
                  "faithfulness: unsupported claims:\n  - ships <free> & fast\x07")
    err = Outcome("q1", "generator", "error", "faithfulness: could not be computed", "timeout")
    flaky = combine_repeats("q1", "generator", [(1, ok), (2, bad), (3, ok), (4, err)])
    failed = combine_repeats("q2", "generator", [(1, bad), (2, bad), (3, bad), (4, bad)])
    path = tmp_path / "junit.xml"
    with open(path, "wb") as fh:
        totals = stream_junit(fh, "shop", [flaky, failed], properties={"repeats": 4})
    validate(schema, path)
    assert (totals.tests, totals.failures, totals.errors) == (2, 1, 0)
    (suite,) = ET.parse(path).getroot()
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "1", "0")
    assert [(p.get("name"), p.get("value")) for p in suite.iter("property")] == [("repeats", "4")]
    q1, q2 = suite.findall("testcase")
    assert [(c.tag, c.get("type"), c.get("message")) for c in q1] == [
        ("flakyFailure", "fail", "repeat 2 of 4: faithfulness = 0.5 (needs >= 0.8)"),
        ("flakyError", "error", "repeat 4 of 4: faithfulness: could not be computed")]
    assert q1[0].find("stackTrace").text == bad.detail.replace("\x07", "\\x07")
    assert q1[1].find("stackTrace").text == "timeout"
    assert float(q1.get("time")) == pytest.approx(0.15, abs=1e-3)  # the mean over 4 repeats
    (failure,) = q2
    assert failure.tag == "failure"
    assert failure.get("message") == ("failed in 4 of 4 repeats; repeat 1: faithfulness = 0.5 "
                                      "(needs >= 0.8)")
    assert failure.text.startswith("repeats 1, 2, 3, 4 failed: faithfulness = 0.5")


def test_the_schema_declares_surefires_flaky_elements(schema):
    """The flaky elements are junit-10.xsd's own (no extended copy is needed), while
    `<properties>` is declared for a testsuite but not for a testcase — so the repeats are a
    suite property."""
    for name in ("flakyFailure", "flakyError", "rerunFailure", "rerunError"):
        assert schema.elements[name].type.name == "rerunType"
    rerun = schema.types["rerunType"]
    assert {"message", "type"} <= set(rerun.attributes)
    assert [e.name for e in rerun.content.iter_elements()] == ["stackTrace", "system-out",
                                                             "system-err"]
    testcase = [e.name for e in schema.elements["testcase"].type.content.iter_elements()]
    assert "flakyFailure" in testcase and "properties" not in testcase
    suite = [e.name for e in schema.elements["testsuite"].type.content.iter_elements()]
    assert "properties" in suite
