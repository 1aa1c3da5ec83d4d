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
@click.option("--executor", default="local", show_default=True, metavar="NAME",
              help="Where the queue is evaluated: 'local' (this process) or 'ray' (a Ray "
                   "cluster, for a backlog: pip install 'evalharness[ray]').")
@click.option("--address", default=None, metavar="ADDRESS",
              help="The cluster of --executor ray: 'auto' or HOST:PORT (default: a local "
                   "Ray instance on 127.0.0.1).")
def run(monitor_file: Path, once: bool, interval: float, out: Path | None,
        limit: int | None, executor: str, address: str | None) -> None:
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
      evalharness monitor monitor.yaml --once --executor ray --address auto   # a backlog

    Intake and evaluation are decoupled by a queue in the store: a judge that is slow or
    down holds up evaluation only (traces wait in the queue, up to `queue.max`), and with
    `budget:` the judge's daily spend is paced.
    """
    from evalharness.monitor.config import load_monitor
    from evalharness.monitor.passes import MonitorRun, PassSummary

    console = Console(stderr=True, highlight=False, soft_wrap=True)
    config = load_monitor(monitor_file)
    alarms = 0
    stopping = threading.Event()

    def on_batch(n: int, summary: PassSummary) -> None:
        console.print(f"batch {n} evaluated and stored: {summary.line()}")

    def stop(signum: int, frame: Any) -> None:
        stopping.set()
        console.print("stopping after the current batch…")

    cluster = None
    if executor != "local" or address:
        from evalharness.api import make_executor

        cluster = make_executor(config.scenario, executor, address)
        if hasattr(cluster, "start"):
            cluster.start()
    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        machinery = MonitorRun(config, on_batch=on_batch, executor=cluster)
    except BaseException:
        if cluster is not None:
            cluster.close()
        raise
    try:
        console.print(f"monitor {config.name}: store {config.store_path}; "
                      f"{len(config.sources)} source(s)")
        if once:
            summary = machinery.run_pass(limit=limit, stop=stopping.is_set)
            console.print(f"pass done: {summary.line()}" + _extra(summary))
            check, alerts = machinery.check_drift(
                lambda text: console.print(f"warning: {text}"))
            alarms = _print_drift(console, check, alerts)
        else:
            Service(machinery, console, interval=interval, limit=limit,
                    stopping=stopping).run()
    finally:
        machinery.close()
        if cluster is not None:
            cluster.close()
        for s, handler in previous.items():
            signal.signal(s, handler)
    if once and out is not None:
        _write_report(config, out, console)
    if once and alarms:
        raise SystemExit(ALARM)


def _extra(summary: Any) -> str:
    unknown = getattr(summary.feedback, "unknown", 0)
    return ((f"; {summary.expired} expired" if summary.expired else "")
            + (f"; {unknown} feedback records for unknown traces (kept, counted in the report)"
               if unknown else ""))


class Service:
    """``monitor`` without ``--once``: intake in this thread every ``interval`` seconds,
    evaluation in a thread of its own draining the queue (docs/monitor.md, "Running it as a
    service"). Intake never waits for the judge: while the judge is slow or down, traces are
    decided and queued (up to ``queue.max``: then they wait in the sources), and evaluation
    catches up when it answers again. The drift check runs after evaluation stored traces."""

    def __init__(self, machinery: Any, console: Console, *, interval: float,
                 limit: int | None, stopping: threading.Event) -> None:
        self.machinery, self.console = machinery, console
        self.interval, self.limit, self.stopping = interval, limit, stopping
        self.wake = threading.Event()
        """Set by intake when it queued traces: evaluation looks at once."""
        self.failure: BaseException | None = None

    def run(self) -> None:
        worker = threading.Thread(target=self._evaluate, name="evalharness-evaluation",
                                  daemon=True)
        worker.start()
        passes = 0
        try:
            while not self.stopping.is_set():
                try:
                    summary = self.machinery.intake(limit=self.limit,
                                                    stop=self.stopping.is_set)
                except EvalHarnessError as exc:
                    if not passes:  # bad input: exit 2
                        raise
                    # a file removed while it was read, the store busy: the next pass retries
                    self.console.print(f"pass failed, retrying in {self.interval:g} s: {exc}")
                else:
                    passes += 1
                    if summary.queued:
                        self.wake.set()
                    self.console.print(f"pass done: {summary.line()}" + _extra(summary))
                if self._sleep(self.interval):
                    break
        finally:
            self.stopping.set()
            self.wake.set()
            worker.join()
        if self.failure is not None:
            raise self.failure

    def _sleep(self, seconds: float) -> bool:
        """Wait ``seconds`` or until stopped; whether stopped."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not self.stopping.is_set():
            time.sleep(min(0.2, seconds))
        return self.stopping.is_set()

    def _evaluate(self) -> None:
        from evalharness.monitor.passes import PassSummary

        down: str | None = None
        first = True
        while not self.stopping.is_set():
            self.wake.clear()
            try:
                summary = self.machinery.evaluate_queue(PassSummary(),
                                                        stop=self.stopping.is_set)
            except EvalHarnessError as exc:
                self.console.print(f"evaluation failed, again in {self.interval:g} s: {exc}")
                self._wait(self.interval)
                continue
            except BaseException as exc:  # a bug: stop the service, say it
                self.failure = exc
                self.stopping.set()
                return
            if summary.judge_down and summary.judge_down != down:
                self.console.print(f"judge down: {summary.put_back} traces back in the queue "
                                   f"({summary.waiting} waiting; intake goes on): "
                                   f"{summary.judge_down}")
            elif down and not summary.judge_down and summary.evaluated:
                self.console.print("judge answering again: evaluation catching up")
            down = summary.judge_down
            if summary.budget_spent:
                self.console.print(f"evaluation paused: {summary.budget_spent}; "
                                   f"{summary.waiting} traces wait for the next day")
            if summary.evaluated or first:
                first = False
                self.console.print(f"evaluated: {summary.evaluated} traces, "
                                   f"{summary.waiting} waiting")
                try:
                    check, alerts = self.machinery.check_drift(
                        lambda text: self.console.print(f"warning: {text}"))
                except EvalHarnessError as exc:
                    self.console.print(f"drift check failed, again after the next batch: "
                                       f"{exc}")
                else:
                    _print_drift(self.console, check, alerts)
            elif self.machinery.monitor.senders:  # alerts a receiver missed, when due
                try:
                    self.machinery.deliver_alerts(
                        lambda text: self.console.print(f"warning: {text}"))
                except EvalHarnessError as exc:
                    self.console.print(f"alert delivery failed, again later: {exc}")
            self._wait(self._until_due(summary))

    def _until_due(self, summary: Any) -> float:
        """Seconds until the queue's next trace is due (the interval when it is empty)."""
        from datetime import UTC, datetime

        from evalharness.monitor import store

        if summary.budget_spent:
            return self.interval
        try:
            with store.connect(self.machinery.monitor.store_path) as con:
                due = store.next_due(con)
        except EvalHarnessError:
            return self.interval
        if due is None:
            return self.interval
        now = datetime.now(UTC).replace(tzinfo=None)
        return max(0.05, min(self.interval, (due - now).total_seconds()))

    def _wait(self, seconds: float) -> None:
        """Wait ``seconds``, or until intake queued traces, or until stopped."""
        self.wake.wait(seconds)


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
