"""``evalharness monitor``: evaluate live traffic per component into a store (docs/monitor.md).

``evalharness monitor MONITOR.yaml`` runs the monitor (the ``run`` subcommand, taken when the
first argument is no subcommand's name); ``monitor report``, ``monitor feedback`` and
``monitor export`` live in their own modules and are added when they are installed.
"""

from __future__ import annotations

import importlib
import signal
import threading
import time
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from evalharness.errors import EvalHarnessError
from evalharness.exitcodes import ALARM

SUBCOMMANDS = {
    "report": "evalharness.monitor.report:report_command",
    "feedback": "evalharness.monitor.feedback:feedback_group",
    "export": "evalharness.monitor.export:export_command",
}
"""Subcommands in modules of their own, imported when asked for; left out while their module
does not exist."""


def _lazy(name: str) -> click.Command | None:
    module, _, attr = SUBCOMMANDS[name].partition(":")
    try:
        loaded = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name == module:  # not written (or not installed) yet
            return None
        raise
    return getattr(loaded, attr, None)


class MonitorGroup(click.Group):
    """A group whose first argument, when it is no subcommand's name, is MONITOR.yaml for
    ``run``: ``evalharness monitor m.yaml --once`` is ``evalharness monitor run m.yaml
    --once``."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = set(super().list_commands(ctx))
        names |= {n for n in SUBCOMMANDS if _lazy(n) is not None}
        return sorted(names)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in SUBCOMMANDS:
            command = _lazy(cmd_name)
            if command is not None:
                self.add_command(command, cmd_name)
        return command

    def resolve_command(self, ctx: click.Context, args: list[str]):
        if args and not args[0].startswith("-") and self.get_command(ctx, args[0]) is None:
            return "run", self.get_command(ctx, "run"), args
        return super().resolve_command(ctx, args)


@click.group(cls=MonitorGroup, no_args_is_help=True)
def monitor() -> None:
    """Evaluate live traffic per component, reference-free, into a store.

    \b
    Examples:
      evalharness monitor scenarios/shop-monitor.yaml --once --out runs/monitor
      evalharness monitor monitor.yaml                  # keeps going; Ctrl-C stops it
      evalharness monitor report monitor.yaml --since 7d --out report/

    MONITOR.yaml names a scenario (its pipeline, trace mapping, judge and evaluators) and the
    sources, sampling, store, feedback, windows and redaction (docs/monitor.md).
    """


@monitor.command("run")
@click.argument("monitor_file", metavar="MONITOR.yaml",
                type=click.Path(path_type=Path, dir_okay=False))
@click.option("--once", is_flag=True,
              help="Process what the sources hold now, then exit (for cron or CI).")
@click.option("--interval", type=click.FloatRange(0.1, None), default=30.0,
              show_default=True, help="Seconds between passes, without --once.")
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="With --once: write the report (report.json, .md, .html) here.")
@click.option("--limit", type=click.IntRange(1, None), default=None,
              help="Decide at most N new traces per pass.")
def run(monitor_file: Path, once: bool, interval: float, out: Path | None,
        limit: int | None) -> None:
    """Evaluate the traces of MONITOR.yaml's sources not yet in its store.

    Each trace is decided once (sampled or left out, by a hash of the seed and its id),
    evaluated with the scenario's reference-free metrics per component, given a root cause
    (the first component on its taken path whose verdict fails) and stored with its metrics
    and verdicts, a batch per transaction: killed at any moment, the monitor resumes without
    losing or counting a trace twice. After a pass that stored traces, the drift check
    compares the recent window with its baseline (MONITOR.yaml `drift:`); an alarm that starts
    firing or resolves is sent through `alerts:`. With --once, exit 5 when an alarm fires.

    \b
    Examples:
      evalharness monitor scenarios/shop-monitor.yaml --once --out runs/monitor
      evalharness monitor monitor.yaml --interval 60
      evalharness monitor run monitor.yaml --once --limit 100
    """
    from evalharness.monitor.config import load_monitor
    from evalharness.monitor.passes import MonitorRun, PassSummary

    console = Console(stderr=True, highlight=False, soft_wrap=True)
    config = load_monitor(monitor_file)
    alarms = 0
    stopping = threading.Event()

    def on_batch(n: int, summary: PassSummary) -> None:
        console.print(f"batch {n} stored: {summary.line()}")

    def stop(signum: int, frame: Any) -> None:
        stopping.set()
        console.print("stopping after the current batch…")

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    machinery = MonitorRun(config, on_batch=on_batch)
    try:
        console.print(f"monitor {config.name}: store {config.store_path}; "
                      f"{len(config.sources)} source(s)")
        passes = 0
        while True:
            try:
                summary = machinery.run_pass(limit=limit, stop=stopping.is_set)
            except EvalHarnessError as exc:
                if once or not passes:  # bad input: exit 2
                    raise
                # a file removed while it was read, the store busy: the next pass retries
                console.print(f"pass failed, retrying in {interval:g} s: {exc}")
            else:
                passes += 1
                unknown = getattr(summary.feedback, "unknown", 0)
                console.print(f"pass done: {summary.line()}"
                              + (f"; {summary.expired} expired" if summary.expired else "")
                              + (f"; {unknown} feedback records for unknown traces (kept, "
                                 "counted in the report)" if unknown else ""))
                if summary.stored or passes == 1:
                    try:
                        check, alerts = machinery.check_drift(
                            lambda text: console.print(f"warning: {text}"))
                    except EvalHarnessError as exc:
                        if once:
                            raise
                        console.print(f"drift check failed, again after the next pass: {exc}")
                    else:
                        alarms = _print_drift(console, check, alerts)
            if once or stopping.is_set():
                break
            deadline = time.monotonic() + interval
            while time.monotonic() < deadline and not stopping.is_set():
                time.sleep(min(0.2, interval))
            if stopping.is_set():
                break
    finally:
        machinery.close()
        for s, handler in previous.items():
            signal.signal(s, handler)
    if once and out is not None:
        _write_report(config, out, console)
    if once and alarms:
        raise SystemExit(ALARM)


def _print_drift(console: Console, check: dict[str, Any] | None, alerts: list) -> int:
    """One line for the drift check, one per firing alarm; how many fire."""
    if check is None:
        return 0
    tested = sum(1 for t in check["tests"] if t["skipped"] is None)
    fired = check["alarms"]
    sent = {a.key: a.state for a in alerts}
    console.print(f"drift: {len(fired)} alarm(s) in {tested} tests of the recent window "
                  f"({check['recent']['start']} to {check['recent']['end']})"
                  + (f"; {sum(1 for s in sent.values() if s == 'resolved')} resolved"
                     if any(s == "resolved" for s in sent.values()) else ""))
    from evalharness.monitor.drift import alarm_key

    for t in fired:
        new = " (new)" if sent.get(alarm_key(t)) == "firing" else ""
        console.print(f"  alarm{new}: {t['message']}")
    return len(fired)


def _write_report(config: Any, out: Path, console: Console) -> None:
    """``monitor report``'s files, when the report module is installed."""
    try:
        from evalharness.monitor import report
    except ModuleNotFoundError as exc:
        if exc.name != "evalharness.monitor.report":
            raise
        console.print(f"--out {out}: the monitor's report is not available in this "
                      "installation; nothing written")
        return
    write = getattr(report, "write_report", None)
    if write is None:
        console.print(f"--out {out}: the monitor's report has no write_report; nothing "
                      "written")
        return
    write(config.store_path, out, since=None, monitor=config.path, windows=config.spec.windows,
          wait=config.spec.feedback.wait_span, drift=config.spec.drift)
    console.print(f"report written to {out}")
