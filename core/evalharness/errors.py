"""The core's error hierarchy: every message names the file, case or plugin, and the fix."""

from __future__ import annotations

from evalharness.redaction import redact


class EvalHarnessError(Exception):
    """Base class of every error evalharness raises on purpose; the CLI exits 2 on these."""


class ScenarioError(EvalHarnessError):
    """The scenario, or a file it names, is invalid; raised before anything runs."""


class PluginError(EvalHarnessError):
    """A plugin failed to load, or implements or registers something invalid."""


class InputError(EvalHarnessError):
    """A data file (cases, traces, corpus, results) has an invalid record."""


class UsageError(EvalHarnessError):
    """A command was given options that cannot work together, or a target it cannot use
    (``init`` into a folder whose files exist)."""


class RunError(EvalHarnessError):
    """A run cannot proceed (e.g. ``--resume`` on the output of a different scenario)."""


class OutputError(EvalHarnessError):
    """An output file (``--junit-xml``, a report) cannot be written where it was asked for."""


class NoOracle(Exception):  # noqa: N818 - it is a signal, not a failure of the run
    """Raised by an :func:`~evalharness.hookspecs.oracle_output` implementation when a case
    lacks the gold its component's oracle output is built from; the message says which.
    Not an :class:`EvalHarnessError`: the run records it per case and goes on."""


class Escaped(Exception):  # noqa: N818 - it carries another exception, it is not a failure kind
    """A ``BaseException`` that user code raised in a worker thread — ``sys.exit()``, a
    ``KeyboardInterrupt`` of its own — carried as an ordinary exception, so that it can be
    recorded like any error instead of ending the event loop (and the run) with no report."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(describe(original))
        self.original = original


USER_CODE_ERRORS = (Exception, SystemExit)
"""What a call into user code (the system under test, a plugin's hook) may raise that the run
records and survives: every exception, and ``sys.exit()`` — which would otherwise end the run
with the caller's exit code and no report. A ``KeyboardInterrupt`` still stops the run."""


def describe(exc: BaseException) -> str:
    """One line naming an exception caught from user code, secrets redacted.

    >>> describe(ValueError("no such product"))
    'ValueError: no such product'
    >>> describe(SystemExit(0))
    'SystemExit: the code called sys.exit(0)'
    >>> describe(Escaped(SystemExit("bye")))
    "SystemExit: the code called sys.exit('bye')"
    """
    if isinstance(exc, Escaped):
        exc = exc.original
    if isinstance(exc, SystemExit):
        return f"SystemExit: the code called sys.exit({exc.code!r})"
    text = str(exc)
    return redact(f"{type(exc).__name__}: {text}" if text else type(exc).__name__)
