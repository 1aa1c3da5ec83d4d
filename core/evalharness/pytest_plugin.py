"""The pytest plugin: a scenario's verdicts as pytest tests (docs/pytest.md).

Registered through the ``pytest11`` entry point and inert unless ``--evalharness`` is given::

    pytest --evalharness scenarios/shop.yaml            # one test per case × component, per gate
    pytest --evalharness scenarios/shop.yaml -k q001    # runs one case
    pytest --evalharness scenarios/shop.yaml --lf       # reruns the cases that failed last time

Items are ``SCENARIO::CASE::COMPONENT`` (each component with a verdict, then ``end_to_end``)
and ``SCENARIO::gates::GATE``, each name written by :func:`test_name` (what would break a
node id or XML escaped, visibly). Collection reads the scenario only; the scenario runs once
per session, at the first item, for just the cases the selected items need (a selected gate
needs every case). An item passes, fails or is skipped (the component is not on the case's
gold path) as its verdict in the run; a failure's message is the evaluator's reason
(:mod:`evalharness.outcomes`). Without positional paths the session collects only the
scenarios; with paths it collects those too.

In a run with repeats (the scenario's ``repeat:``, or ``--evalharness-repeat N``) an item
still stands for one case and component, its repeats combined (:mod:`evalharness.outcomes`):
it passes when every repeat passed, fails when none did. A *flaky* item (passed in some
repeats, failed or erred in others) is reported in a category of its own: ``K`` in the
progress line, ``FLAKY`` with ``-v``, ``N flaky`` in the summary line. It counts as passed
(the session's exit code is left to the real failures and the gates) unless
``--evalharness-flaky=fail`` is given: then it fails, its message starting ``flaky:``.

The fixture ``evalharness_run(path, **options)`` runs a scenario once per session and options
(the options of :func:`evalharness.run_scenario`) and returns its report.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

OPTION = "--evalharness"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("evalharness", "evalharness: scenario verdicts as tests")
    group.addoption(OPTION, action="append", default=[], metavar="SCENARIO",
                    help="Collect one test per case and component verdict, and one per gate, "
                         "of this evalharness scenario file (repeatable).")
    group.addoption("--evalharness-out", metavar="DIR",
                    help="Write the run folder under DIR (default: a temporary folder, named "
                         "at the end of the session).")
    group.addoption("--evalharness-plugin", action="append", default=[], metavar="FILE",
                    help="A local evalharness plugin file to load (repeatable).")
    group.addoption("--evalharness-headroom", action="store_true",
                    help="Also rerun failed cases under oracles (headroom); off by default.")
    group.addoption("--evalharness-repeat", type=_repeats, metavar="N",
                    help="Run each case N times (overrides the scenario's repeat:); an item "
                         "that passed in some repeats and failed in others is flaky.")
    group.addoption("--evalharness-flaky", choices=("pass", "fail"), default="pass",
                    help="What a flaky item (passed in some repeats, failed in others) counts "
                         "as: pass (default; reported as flaky) or fail.")


def _repeats(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= 1000:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number from 1 to 1000")
    return n


def pytest_configure(config: pytest.Config) -> None:
    scenarios = [Path(p) for p in config.getoption(OPTION) or []]
    if not scenarios:
        return  # inert
    from evalharness.context import file_hint, not_a_file

    for path in scenarios:
        problem = not_a_file(path)
        if problem == "does not exist":
            raise pytest.UsageError(f"{OPTION} {path}: no such scenario file; give the path of "
                                    "a scenario YAML file, e.g. scenarios/shop.yaml")
        if problem is not None:
            raise pytest.UsageError(f"{OPTION} {path} {problem}; {file_hint(problem)}")
    resolved = {p.resolve() for p in scenarios}
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        given = {Path(a.split("::")[0]).resolve() for a in config.args}
        config.args = [*config.args, *(str(p) for p in scenarios if p.resolve() not in given)]
    else:  # no paths on the command line: the scenarios are the session
        config.args = [str(p) for p in scenarios]
    config.pluginmanager.register(_Session(config, resolved), "evalharness-session")


@pytest.fixture(scope="session")
def evalharness_run(tmp_path_factory: pytest.TempPathFactory):
    """``evalharness_run(path, **options)``: run the scenario (once per session and
    options) and return its :class:`~evalharness.models.Report`."""
    from evalharness.api import run_scenario

    reports: dict[str, Any] = {}

    def run(path: str | Path, **options: Any):
        key = json.dumps([str(Path(path).resolve()), options], sort_keys=True, default=str)
        if key not in reports:
            options.setdefault("out", tmp_path_factory.mktemp("evalharness"))
            options.setdefault("headroom", False)
            reports[key] = run_scenario(path, **options)
        return reports[key]

    return run


# --------------------------------------------------------------------------------------------
# Collection
# --------------------------------------------------------------------------------------------

_ESCAPED = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff\\\[]|(?<=:):|:$")
"""What a test name escapes: control characters (XML 1.0 cannot hold most of them, and
pytest writes a ``classname`` unescaped), lone surrogates, U+FFFE and U+FFFF, the backslash
(so that an escape is never ambiguous), ``[`` (pytest reads a node id's parameters from the
first one), and a colon after a colon or at the end (``::`` separates a node id's parts)."""


def test_name(text: str) -> str:
    r"""``text`` (a case id, a component or a gate) as a test name: each character of
    :data:`_ESCAPED` written ``\xNN`` (``\uNNNN`` past U+00FF; a backslash ``\\``), so the
    name is valid XML and its node id selects it.

    >>> print(test_name("q001"), test_name("a::b"), test_name("q[1]"), test_name("end:"))
    q001 a:\x3ab q\x5b1] end\x3a
    >>> print(test_name("bell\x07, c:\\tmp"))
    bell\x07, c:\\tmp
    """
    return _ESCAPED.sub(_escape, text)


test_name.__test__ = False  # pytest must not collect it as a test where it is imported


def _escape(m: re.Match) -> str:
    char = m.group()
    if char == "\\":
        return "\\\\"
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"


class ScenarioFile(pytest.File):
    """A scenario file: a collector per case, and one for the gates."""

    def collect(self) -> Iterator[pytest.Collector]:
        from evalharness.errors import EvalHarnessError
        from evalharness.scenario import load_scenario
        from evalharness.verdicts import criteria_for

        session: _Session = self.config.pluginmanager.get_plugin("evalharness-session")
        try:
            scenario = load_scenario(self.path, extra_plugins=session.plugins)
        except EvalHarnessError as exc:
            raise ScenarioProblem(str(exc)) from None
        criteria = criteria_for(scenario)
        names = criteria.judged()
        if criteria.end_to_end.source != "none" and (
                criteria.end_to_end.criteria or criteria.final in names):
            names.append("end_to_end")
        session.scenarios[self.path.resolve()] = _Scenario(scenario)
        for case in scenario.cases:
            yield CaseNode.from_parent(self, name=test_name(case.id), case=case.id,
                                       components=names)
        gates = [*scenario.gates, *scenario.agreement_gates]
        if gates:
            yield GatesNode.from_parent(self, name="gates", gates=[g.name for g in gates])

    def repr_failure(self, excinfo):  # noqa: ANN001 - pytest's signature
        if isinstance(excinfo.value, ScenarioProblem):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


class ScenarioProblem(Exception):
    """The scenario cannot be loaded or run: its message is evalharness's one paragraph."""


class CaseNode(pytest.Collector):
    """One case: an item per component verdict."""

    def __init__(self, *, case: str, components: list[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.components = components

    def collect(self) -> Iterator[pytest.Item]:
        for name in self.components:
            yield VerdictItem.from_parent(self, name=test_name(name), case=self.case,
                                          component=name)


class GatesNode(pytest.Collector):
    """The scenario's gates: an item each."""

    def __init__(self, *, gates: list[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gates = gates

    def collect(self) -> Iterator[pytest.Item]:
        for gate in self.gates:
            yield GateItem.from_parent(self, name=test_name(gate), gate=gate)


class Failed(Exception):
    """A verdict that did not pass; shown as its reason and evidence, no traceback."""


class _Item(pytest.Item):
    @property
    def scenario_path(self) -> Path:
        return self.path.resolve()

    def repr_failure(self, excinfo, style=None):  # noqa: ANN001 - pytest's signature
        if isinstance(excinfo.value, Failed | ScenarioProblem):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, 0, self.nodeid.split("::", 1)[-1]

    def _run(self):
        session: _Session = self.config.pluginmanager.get_plugin("evalharness-session")
        return session.run_of(self.scenario_path)


class VerdictItem(_Item):
    """One case's verdict for one component (or end to end)."""

    def __init__(self, *, case: str, component: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case, self.component = case, component
        self.user_properties.append(("evalharness_case", case))

    def runtest(self) -> None:
        run = self._run()
        case = run.outcomes.get(self.case)
        if case is None:
            raise Failed(f"{self.case}: no result for this case in {run.out_dir}"
                         + (f": {run.status.reason}" if not run.status.did_its_work else ""))
        found = [o for o in case if o.name == self.component]
        if not found:
            _skip(f"{self.component}: no verdict for this case")
        outcome = found[0]
        if outcome.status == "skipped":
            _skip(outcome.message)
        if outcome.status == "flaky":
            if self.config.getoption("--evalharness-flaky") != "fail":
                # passes; the report's property puts it in the "flaky" category
                self.user_properties.append((FLAKY, outcome.message))
                return
        if outcome.status != "passed":
            lead = "error: " if outcome.status == "error" else ""
            raise Failed(f"{self.case} {self.component}: {lead}{outcome.message}"
                         + (f"\n\n{outcome.detail}" if outcome.detail else "")
                         + f"\n\n(run folder: {run.out_dir})")


class GateItem(_Item):
    """One gate of the scenario, on every case."""

    def __init__(self, *, gate: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gate = gate

    def runtest(self) -> None:
        from evalharness.outcomes import gate_outcome

        run = self._run()
        found = [g for g in run.report.gates if g.name == self.gate]
        if not found:
            raise Failed(f"gate {self.gate}: not in the run's report")
        outcome = gate_outcome(found[0])
        if outcome.status != "passed":
            raise Failed(f"gate failed: {outcome.message}\n{outcome.detail}\n\n"
                         f"(run folder: {run.out_dir})")


FLAKY = "evalharness_flaky"
"""The user property a flaky item that passes carries (its message): what puts its report in
the ``flaky`` category (:meth:`_Session.pytest_report_teststatus`); pytest's ``--junitxml``
writes it as a testcase property."""


def _skip(reason: str) -> None:
    """Skip, reported at the item (the scenario file) rather than at this line."""
    raise pytest.skip.Exception(reason, _use_item_location=True)


# --------------------------------------------------------------------------------------------
# The session: which cases the selected items need; one run per scenario
# --------------------------------------------------------------------------------------------


@dataclass
class _Scenario:
    scenario: Any
    needed: set[str] = field(default_factory=set)
    every_case: bool = False
    run: Any = None
    error: BaseException | None = None


@dataclass
class _Run:
    out_dir: Path
    report: Any
    outcomes: dict[str, list[Any]]
    """Each case's outcomes (:func:`evalharness.outcomes.per_case`): one per component and
    end to end, combined over the case's repeats in a run with repeats."""
    status: Any = None
    """:func:`evalharness.exitcodes.run_status` of the run: what the CLI would exit with."""


class _Session:
    """What the plugin keeps for a session with ``--evalharness``."""

    def __init__(self, config: pytest.Config, paths: set[Path]) -> None:
        self.config = config
        self.paths = paths
        self.plugins: list[str] = list(config.getoption("--evalharness-plugin") or [])
        self.scenarios: dict[Path, _Scenario] = {}
        self.out_dirs: list[Path] = []
        self.problems: list[str] = []
        """Runs that could not do their work (exit code 3 or 4 for the CLI), said again in
        the terminal summary."""

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector):
        if file_path.resolve() in self.paths:
            return ScenarioFile.from_parent(parent, path=file_path)
        return None

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:
            if isinstance(item, VerdictItem):
                self.scenarios[item.scenario_path].needed.add(item.case)
            elif isinstance(item, GateItem):
                self.scenarios[item.scenario_path].every_case = True

    def run_of(self, path: Path) -> _Run:
        entry = self.scenarios[path]
        if entry.error is not None:
            raise entry.error
        if entry.run is None:
            try:
                entry.run = self._execute(entry)
            except BaseException as exc:
                from evalharness.api import RunInterrupted
                from evalharness.errors import EvalHarnessError

                if isinstance(exc, RunInterrupted | KeyboardInterrupt):
                    # Ctrl-C: what was evaluated is saved; the session stops, as pytest's does
                    raise KeyboardInterrupt(str(exc)) from None
                if isinstance(exc, EvalHarnessError):
                    exc = ScenarioProblem(str(exc))
                entry.error = exc
                raise exc from None
        return entry.run

    def _execute(self, entry: _Scenario) -> _Run:
        from evalharness.api import execute
        from evalharness.sampling import Selection

        scenario = entry.scenario
        every = entry.every_case or len(entry.needed) == len(scenario.cases)
        selection = Selection() if every else Selection(ids=tuple(sorted(entry.needed)))
        out = self._out_dir(scenario.name)
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        n = len(scenario.cases) if every else len(entry.needed)
        repeats = self.config.getoption("--evalharness-repeat") or scenario.repeats
        if reporter is not None:
            reporter.write_line(f"evalharness: running {scenario.name} on {n} of "
                                f"{len(scenario.cases)} cases"
                                + (f", {repeats} times each," if repeats > 1 else "")
                                + f" into {out}")
        done = execute(scenario, out=out, selection=selection,
                       headroom=bool(self.config.getoption("--evalharness-headroom")),
                       repeat=self.config.getoption("--evalharness-repeat"))
        from evalharness.exitcodes import run_status
        from evalharness.outcomes import per_case

        self.out_dirs.append(out)
        run = _Run(out_dir=out, report=done.report, outcomes=dict(per_case(done.results)),
                   status=run_status(done.report))
        if not run.status.did_its_work:
            self.problems.append(f"evalharness: {scenario.name}: {run.status.reason} (the "
                                 f"CLI exits {run.status.code} on this run; docs/ci.md)")
            if reporter is not None:
                reporter.write_line(self.problems[-1], red=True, bold=True)
        return run

    def _out_dir(self, name: str) -> Path:
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S-%f")
        base = self.config.getoption("--evalharness-out")
        if base:
            return Path(base) / f"{name}-{stamp}"
        return Path(tempfile.mkdtemp(prefix=f"evalharness-{name}-"))

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: pytest.TestReport, config: pytest.Config):
        """A flaky item that passed: category ``flaky`` (``N flaky`` in the summary line),
        ``K`` in the progress line — a letter no pytest outcome uses (``. F E s x X``), nor
        pytest-rerunfailures (``R``) or pytest-subtests (``, u``); lowercase ``f`` would read
        as a failure — and ``FLAKY`` with ``-v``."""
        if report.when == "call" and report.passed and any(
                name == FLAKY for name, _ in report.user_properties):
            return "flaky", "K", ("FLAKY", {"yellow": True})
        return None

    def pytest_terminal_summary(self, terminalreporter) -> None:  # noqa: ANN001
        for out in self.out_dirs:
            terminalreporter.write_line(f"evalharness: run folder {out} (report.html, "
                                        "results.jsonl)")
        for problem in self.problems:
            terminalreporter.write_line(problem, red=True, bold=True)
