"""What ``evalharness validate`` checks, without running anything — also what ``init`` checks
of the scenario it wrote: one function for both."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from evalharness.goldcheck import require_gold
from evalharness.runner import check_resources, load_system, make_judge
from evalharness.scenario import load_scenario


def validate_scenario(path: str | Path, *, plugins: Sequence[str] = (), gold: bool = True,
                      hint: str = "") -> tuple[str, list[str]]:
    """Everything ``evalharness validate`` checks, without running anything: the scenario
    and every file it names load, the system imports, the judge can be made, the database
    and corpus read (:func:`check_resources`), and — with ``gold`` — every case's gold fits
    the scenario (:func:`evalharness.goldcheck.require_gold`; ``hint`` ends its error).
    Returns the one-line summary and the judge's warnings; raises
    :class:`~evalharness.errors.EvalHarnessError` naming the first problem."""
    loaded = load_scenario(path, extra_plugins=list(plugins))
    if loaded.system is not None:
        load_system(loaded)
    judge = make_judge(loaded)
    judge.close()
    check_resources(loaded)
    checked = require_gold(loaded, hint=hint).summary() if gold else "gold not checked"
    return (f"{path}: valid — {len(loaded.cases)} cases, {len(loaded.pipeline.order)} "
            f"components, {len(loaded.evaluators)} evaluators, {len(loaded.gates)} gates; "
            f"{checked}", list(judge.warnings))
