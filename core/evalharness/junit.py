"""``--junit-xml``: a run's outcomes (:mod:`evalharness.outcomes`) as a JUnit XML file.

The file follows the Jenkins xUnit plugin's ``junit-10.xsd`` (the schema pytest's own
``--junitxml`` output is validated against; a copy is in ``tests/data/junit/``), the dialect
GitHub Actions reporters, GitLab's ``artifacts:reports:junit`` and Jenkins all read:

- one ``<testsuites name="shop">``, holding one ``<testsuite name="shop.router">`` per component
  in pipeline order, then ``shop.end_to_end``, then ``shop.gates`` (which also holds a
  testcase ``run`` with an ``<error>`` when the run could not do its work: exit code 3 or 4,
  docs/ci.md);
- in each, one ``<testcase name="q001" classname="shop.router">`` per case (a gate's
  testcase is named by the gate's text), its ``time`` the component's latency for the case;
- a failed verdict is ``<failure message="REASON" type="fail">EVIDENCE</failure>``, an
  erroneous one ``<error ... type="error">``, a component not on the case's gold path
  ``<skipped message="REASON"/>``.

In a run with repeats (``--repeat N``) a case is still one testcase per component, its
repeats combined (:mod:`evalharness.outcomes`), its ``time`` the mean latency over them:

- passed, failed, erred or skipped in every repeat: as above (a failure's message says
  ``failed in 5 of 5 repeats; repeat 1: REASON``, its text lists each repeat's reason and
  evidence);
- flaky (passed in some repeats, failed or erred in others): a *passed* testcase holding, per
  repeat that did not pass, Maven Surefire's rerun element —
  ``<flakyFailure message="repeat 2 of 5: REASON" type="fail"><stackTrace>EVIDENCE
  </stackTrace></flakyFailure>``, ``<flakyError ... type="error">`` for an erred repeat.
  It is what Surefire writes for a test that failed and then passed on a rerun
  (``rerunFailingTestsCount``), and what Jenkins shows as flaky; ``junit-10.xsd`` declares
  both elements (type ``rerunType``). A reader that does not know them shows a pass: a flaky
  case counts in ``tests`` only, never in ``failures`` or ``errors``, so a flaky case does
  not fail the CI job on its own — the gates decide (docs/ci.md);
- every ``<testsuite>`` starts with ``<properties><property name="repeats" value="5"/>
  </properties>``. (``junit-10.xsd`` allows ``<properties>`` on a suite only, not on a
  testcase: a testcase's own counts are in its messages.)

Why a suite per component rather than one suite with the component in ``classname``: the
viewers differ in what they group by — Jenkins by ``classname`` (``shop.router`` shows as
package ``shop``, class ``router``), GitLab's test report and most GitHub reporters
(dorny/test-reporter, mikepenz/action-junit-report) by ``<testsuite>`` — and this layout
groups the same way in all of them: the failures of one component together, with its counts
on the suite, and the same case id in five components five distinct tests.

Writing streams: the outcomes are read once, case by case (a lazily read ``results.jsonl`` of
100,000 cases is never held in memory); each suite's testcases go to its own spooled
temporary file until the counts its start tag needs are known.
"""

from __future__ import annotations

import math
import os
import re
import secrets
import socket
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
from typing import IO, Any
from xml.sax.saxutils import escape, quoteattr

from evalharness.errors import OutputError
from evalharness.models import CaseResult, Report
from evalharness.outcomes import Attempt, Outcome, outcomes
from evalharness.scenario import END_TO_END

GATES = "gates"
"""The suite of the gates (after the components' and ``end_to_end``)."""

_INVALID = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""Characters XML 1.0 cannot hold in any form (not even as ``&#...;``): C0 controls other
than tab and newlines, unpaired surrogates, U+FFFE and U+FFFF."""

_SPOOL = 1 << 20
"""Bytes of one suite's testcases kept in memory before they go to a temporary file."""


def xml_safe(text: str) -> str:
    r"""``text`` with each character XML 1.0 forbids written out as its escape, visibly.

    >>> xml_safe("nul\x00, bell\x07, lone \ud800, tab\tkept")
    'nul\\x00, bell\\x07, lone \\ud800, tab\tkept'
    >>> xml_safe("café ✓ 𝄞")
    'café ✓ 𝄞'
    """
    if _INVALID.search(text) is None:
        return text
    return _INVALID.sub(lambda m: _escaped(ord(m.group())), text)


def _escaped(code: int) -> str:
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


@dataclass
class Totals:
    """The counts of one suite, or of the whole file."""

    tests: int = 0
    failures: int = 0
    errors: int = 0
    skipped: int = 0
    seconds: float = 0.0

    def add(self, status: str, seconds: float) -> None:
        self.tests += 1
        self.failures += status == "failed"
        self.errors += status == "error"
        self.skipped += status == "skipped"
        self.seconds += seconds


@dataclass
class _Suite:
    name: str
    totals: Totals = field(default_factory=Totals)
    body: Any = field(default_factory=lambda: tempfile.SpooledTemporaryFile(_SPOOL, "w+b"))


def stream_junit(out: IO[bytes], scenario: str, items: Iterable[Outcome], *,
                 suites: Sequence[str] = (), timestamp: str | None = None,
                 hostname: str | None = None,
                 properties: Mapping[str, object] | None = None) -> Totals:
    """Write the JUnit XML of ``items`` to the binary file ``out``; returns the file's totals.

    ``suites``: the components in the order their suites should come (the pipeline's, then
    ``end_to_end``); components not in it follow in the order they first appear, and the
    gates come last. A suite with no testcase is left out. ``timestamp`` (the run's start) and
    ``hostname`` are written on each ``<testsuite>`` when given, the only element the schema
    allows them on. ``properties`` (the run's ``repeats``) go in a ``<properties>`` element at
    the start of each suite.
    """
    opened: dict[tuple[bool, str], _Suite] = {}
    try:
        for item in items:
            gate = item.case is None
            key = (gate, GATES if gate else item.name)
            suite = opened.get(key)
            if suite is None:
                suite = opened[key] = _Suite(f"{scenario}.{key[1]}")
            seconds = _finite(item.seconds)
            suite.totals.add(item.status, seconds)
            suite.body.write(_testcase(item, suite.name, seconds).encode("utf-8"))
        rank = {name: i for i, name in enumerate(suites)}
        ordered = sorted(opened.items(), key=lambda kv: (kv[0][0], rank.get(kv[0][1], len(rank))))
        total = Totals()
        for _, suite in ordered:
            t = suite.totals
            total.tests += t.tests
            total.failures += t.failures
            total.errors += t.errors
            total.skipped += t.skipped
            total.seconds += t.seconds
        out.write(b'<?xml version="1.0" encoding="UTF-8"?>\n')
        out.write(_start("testsuites", {"name": scenario, "tests": total.tests,
                                        "failures": total.failures, "errors": total.errors,
                                        "time": _time(total.seconds)}))
        for _, suite in ordered:
            t = suite.totals
            attrs: dict[str, object] = {
                "name": suite.name, "tests": t.tests, "failures": t.failures,
                "errors": t.errors, "skipped": t.skipped, "time": _time(t.seconds)}
            if timestamp:
                attrs["timestamp"] = timestamp
            if hostname:
                attrs["hostname"] = hostname
            out.write(b"  " + _start("testsuite", attrs))
            if properties:
                out.write(_properties(properties))
            suite.body.seek(0)
            while chunk := suite.body.read(_SPOOL):
                out.write(chunk)
            out.write(b"  </testsuite>\n")
        out.write(b"</testsuites>\n")
        return total
    finally:
        for suite in opened.values():
            suite.body.close()


def render_junit(scenario: str, items: Iterable[Outcome], **options: Any) -> str:
    """The JUnit XML of ``items`` as text (``options``: those of :func:`stream_junit`).

    >>> print(render_junit("shop", [
    ...     Outcome("q1", "router", "passed", seconds=0.0123),
    ...     Outcome("q1", "text2sql", "failed", "execution_accuracy = 0 (needs >= 1)",
    ...             "only in gold: [['Navy Coat']]"),
    ...     Outcome("q1", "retriever", "skipped", "the case's gold route does not need it"),
    ...     Outcome(None, "router.route_accuracy >= 0.9", "passed")]))
    <?xml version="1.0" encoding="UTF-8"?>
    <testsuites name="shop" tests="4" failures="1" errors="0" time="0.012">
      <testsuite name="shop.router" tests="1" failures="0" errors="0" skipped="0" time="0.012">
        <testcase name="q1" classname="shop.router" time="0.012"/>
      </testsuite>
      <testsuite name="shop.text2sql" tests="1" failures="1" errors="0" skipped="0" time="0.000">
        <testcase name="q1" classname="shop.text2sql" time="0.000"><failure message="execution_accuracy = 0 (needs &gt;= 1)" type="fail">only in gold: [['Navy Coat']]</failure></testcase>
      </testsuite>
      <testsuite name="shop.retriever" tests="1" failures="0" errors="0" skipped="1" time="0.000">
        <testcase name="q1" classname="shop.retriever" time="0.000"><skipped message="the case's gold route does not need it"/></testcase>
      </testsuite>
      <testsuite name="shop.gates" tests="1" failures="0" errors="0" skipped="0" time="0.000">
        <testcase name="router.route_accuracy &gt;= 0.9" classname="shop.gates" time="0.000"/>
      </testsuite>
    </testsuites>
    <BLANKLINE>
    """
    buffer = BytesIO()
    stream_junit(buffer, scenario, items, **options)
    return buffer.getvalue().decode("utf-8")


def write_junit(path: Path, report: Report, results: Iterable[CaseResult]) -> Path:
    """Write the run's JUnit XML to ``path`` (parent folders created), atomically: a temporary
    file next to it, then renamed over it. A path that cannot be written is an
    :class:`~evalharness.errors.OutputError` naming it."""
    path = Path(path)
    scenario = str(report.scenario.get("name") or "evalharness")
    started = report.run.get("started_at")
    properties = {"repeats": report.repeats.n} if report.repeats is not None else None
    with atomic_output(path, "the JUnit XML file", "--junit-xml") as fh:
        stream_junit(fh, scenario, outcomes(report, results),
                     suites=[*report.components, END_TO_END],
                     timestamp=started if isinstance(started, str) else None,
                     hostname=socket.gethostname() or None, properties=properties)
    return path


def check_writable(path: Path, what: str = "the JUnit XML file",
                   option: str | None = "--junit-xml") -> None:
    """Before a long run: raise the :class:`~evalharness.errors.OutputError` that writing
    ``path`` at its end would raise (its folder cannot be created or written, or ``path`` is a
    folder). Creates the parent folders; leaves no file behind."""
    path = Path(path)
    tmp = _temporary(path)
    try:
        _open(path, tmp).close()
        _discard(tmp)
        _not_a_folder(path)
    except OSError as exc:
        raise _error(exc, path, what, option) from None


@contextmanager
def atomic_output(path: Path, what: str, option: str | None = None) -> Iterator[IO[bytes]]:
    """``with atomic_output(path, "the JUnit XML file") as fh``: a binary file that replaces
    ``path`` when the block ends (parent folders created), and is removed when the block
    raises. Failing to create, write or rename it is an
    :class:`~evalharness.errors.OutputError` saying which file and why (``option``: the
    command-line option that named the path, for the fix)."""
    path = Path(path)
    tmp = _temporary(path)
    try:
        fh = _open(path, tmp)
    except OSError as exc:
        raise _error(exc, path, what, option) from None
    try:
        with fh:
            yield fh
        _not_a_folder(path)
        os.replace(tmp, path)
    except OSError as exc:
        _discard(tmp)
        raise _error(exc, path, what, option) from None
    except BaseException:
        _discard(tmp)
        raise


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")


def _open(path: Path, tmp: Path) -> IO[bytes]:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        where = next((p for p in (path.parent, *path.parent.parents)
                      if p.exists() and not p.is_dir()), path.parent)
        raise NotADirectoryError(exc.errno, f"{where} is a file, not a folder") from None
    return open(tmp, "xb")


def _not_a_folder(path: Path) -> None:
    if path.is_dir():
        raise IsADirectoryError(21, "it is a folder, not a file")


def _error(exc: OSError, path: Path, what: str, option: str | None) -> OutputError:
    fix = f"; give {option} a file path in a writable folder" if option else ""
    return OutputError(f"cannot write {what} {path}: {exc.strerror or exc}{fix}")


def _discard(tmp: Path) -> None:
    try:
        tmp.unlink(missing_ok=True)
    except OSError:
        pass


def _testcase(item: Outcome, classname: str, seconds: float) -> str:
    head = (f"    <testcase name={_attr(item.name if item.case is None else item.case)} "
            f"classname={_attr(classname)} time=\"{_time(seconds)}\"")
    if item.status == "passed":
        return head + "/>\n"
    if item.status == "flaky":  # passed, with Surefire's record of the repeats that did not
        reruns = "".join(_flaky(a, item.repeats) for a in item.attempts)
        return f"{head}>{reruns}</testcase>\n"
    message = _attr(" ".join(item.message.splitlines()) or item.status)
    if item.status == "skipped":
        return f"{head}><skipped message={message}/></testcase>\n"
    tag, kind = ("failure", "fail") if item.status == "failed" else ("error", "error")
    body = _text(item.detail or item.message)
    return f'{head}><{tag} message={message} type="{kind}">{body}</{tag}></testcase>\n'


def _flaky(attempt: Attempt, repeats: int) -> str:
    """A repeat that did not pass, of a flaky case: Surefire's ``flakyFailure`` or
    ``flakyError``, the evidence in its ``stackTrace``."""
    tag, kind = (("flakyFailure", "fail") if attempt.status == "failed"
                 else ("flakyError", "error"))
    message = _attr(f"repeat {attempt.repeat} of {repeats}: "
                    + (" ".join(attempt.message.splitlines()) or attempt.status))
    body = _text(attempt.detail or attempt.message)
    return f'<{tag} message={message} type="{kind}"><stackTrace>{body}</stackTrace></{tag}>'


def _properties(properties: Mapping[str, object]) -> bytes:
    items = "".join(f"<property name={_attr(str(k))} value={_attr(str(v))}/>"
                    for k, v in properties.items())
    return f"    <properties>{items}</properties>\n".encode()


def _start(tag: str, attrs: dict[str, object]) -> bytes:
    text = " ".join(f"{k}={_attr(str(v))}" for k, v in attrs.items())
    return f"<{tag} {text}>\n".encode()


def _attr(value: str) -> str:
    return quoteattr(xml_safe(value), {"\n": "&#10;", "\r": "&#13;", "\t": "&#9;"})


def _text(value: str) -> str:
    return escape(xml_safe(value), {"\r": "&#13;"})


def _finite(seconds: float) -> float:
    return seconds if isinstance(seconds, int | float) and math.isfinite(seconds) and \
        seconds > 0 else 0.0


def _time(seconds: float) -> str:
    """Seconds as the schema's ``SUREFIRE_TIME``: digits, at most three decimals."""
    return f"{seconds:.3f}"
