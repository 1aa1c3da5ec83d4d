"""The core's error hierarchy: every message names the file, case or plugin, and the fix."""

from __future__ import annotations


class EvalHarnessError(Exception):
    """Base class of every error evalharness raises on purpose; the CLI exits 2 on these."""


class ScenarioError(EvalHarnessError):
    """The scenario, or a file it names, is invalid; raised before anything runs."""


class PluginError(EvalHarnessError):
    """A plugin failed to load, or implements or registers something invalid."""


class InputError(EvalHarnessError):
    """A data file (cases, traces, corpus, results) has an invalid record."""


class RunError(EvalHarnessError):
    """A run cannot proceed (e.g. ``--resume`` on the output of a different scenario)."""


class NoOracle(Exception):  # noqa: N818 - it is a signal, not a failure of the run
    """Raised by an :func:`~evalharness.hookspecs.oracle_output` implementation when a case
    lacks the gold its component's oracle output is built from; the message says which.
    Not an :class:`EvalHarnessError`: the run records it per case and goes on."""
