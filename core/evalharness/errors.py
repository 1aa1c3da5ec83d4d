"""The core's error hierarchy: every message names the file, case or plugin, and the fix."""

from __future__ import annotations

import os
import sysconfig
import traceback

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


class InfrastructureError(Exception):
    """The run could not do its work because the machinery around the system failed: a
    cluster's worker, raylet or node died, the judge endpoint answered no request. Not an
    :class:`EvalHarnessError` (the input is fine; running again may succeed): the run writes
    the report of what completed, records the reason (``Report.infrastructure``) and the CLI
    exits 3 (:mod:`evalharness.exitcodes`); the cases that did not complete have no line in
    ``results.jsonl``, so ``--resume`` runs them."""


class EvalHarnessDeprecationWarning(FutureWarning):
    """A plugin uses a way of evalharness 0.1 that goes in the next release (shown by default,
    once per message: the person running evalharness is the one who can ask for an update)."""


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


MAX_TRACEBACK_FRAMES = 30
"""The most frames a stored traceback keeps of each exception in its chain: the innermost
ones, where the error happened (a deep recursion is said, not copied)."""
MAX_TRACEBACK_CHARS = 8_000
"""The most characters a stored traceback keeps: its start and its end, the middle cut."""

_OURS = os.path.dirname(os.path.abspath(__file__)) + os.sep
_STDLIB = os.path.abspath(sysconfig.get_paths()["stdlib"]) + os.sep


def user_traceback(exc: BaseException) -> str | None:
    """The traceback of an exception raised by user code, for a person to find the failing
    line: the frames before the first frame of the user's code — evalharness calling it, the
    thread or event-loop machinery under that — are dropped, each exception of the chain
    keeps its innermost :data:`MAX_TRACEBACK_FRAMES` frames, the text at most
    :data:`MAX_TRACEBACK_CHARS` characters; secrets redacted. ``None`` without a traceback.

    >>> def users_code():
    ...     raise KeyError("sku-12")
    >>> try:
    ...     users_code()
    ... except KeyError as exc:
    ...     print(user_traceback(exc).splitlines()[-1])
    KeyError: 'sku-12'
    """
    if isinstance(exc, Escaped):
        exc = exc.original
    if exc.__traceback__ is None:
        return None
    te = traceback.TracebackException.from_exception(exc, capture_locals=False)
    seen: set[int] = set()
    link: traceback.TracebackException | None = te
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        frames = list(link.stack)
        start = next((i for i, f in enumerate(frames) if _users(f.filename)), 0)
        kept = frames[start:]
        omitted = len(kept) - MAX_TRACEBACK_FRAMES
        if omitted > 0:
            kept = kept[omitted:]
        link.stack = _Stack(kept)
        link.stack.omitted = max(omitted, 0)
        nxt = link.__cause__ or (link.__context__ if not link.__suppress_context__ else None)
        if nxt is not None and not any(_users(f.filename) for f in nxt.stack):
            # an exception of evalharness's own that the user's happened to be raised under
            link.__cause__ = link.__context__ = None
            nxt = None
        link = nxt
    text = redact("".join(te.format()))
    if len(text) > MAX_TRACEBACK_CHARS:
        head = MAX_TRACEBACK_CHARS // 4
        tail = MAX_TRACEBACK_CHARS - head
        text = (f"{text[:head]}\n… [cut: {len(text) - MAX_TRACEBACK_CHARS:,} characters] …\n"
                f"{text[-tail:]}")
    return text


class _Stack(traceback.StackSummary):
    """A stack that says how many of its outer frames were left out."""

    omitted = 0

    def format(self) -> list[str]:
        lines = super().format()
        if self.omitted:
            lines.insert(0, f"  [{self.omitted} outer frames omitted]\n")
        return lines


def _users(filename: str) -> bool:
    """Whether a frame's file is user code: neither evalharness's core nor the standard
    library (site-packages, where the user's libraries live, counts as theirs)."""
    path = os.path.abspath(filename)
    if path.startswith(_OURS):
        return False
    return not path.startswith(_STDLIB) or f"{os.sep}site-packages{os.sep}" in path
