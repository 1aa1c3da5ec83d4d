"""One process owns a run folder: ``run.lock`` holds its pid and host under an ``flock``.

Two runs writing one ``results.jsonl`` would interleave their lines and count every case
twice. The lock file is held with ``fcntl.flock`` for as long as the run lasts: the kernel
releases it when the process ends however it ends (a kill included), so a lock left behind
by a dead run is recognised as stale and taken over, while a live one makes the second run
stop at once, naming the process that holds it.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path

from evalharness.errors import RunError

LOCK = "run.lock"

_held: dict[Path, list] = {}
"""Folder -> [open lock file, depth] for the locks this process holds."""


class RunLock:
    """The lock of one run folder; reentrant within a process (the CLI holds it across the
    run and the report; the runner takes it again when called directly)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder).resolve()
        self.path = self.folder / LOCK

    def __enter__(self) -> RunLock:
        entry = _held.get(self.folder)
        if entry is not None:
            entry[1] += 1
            return self
        self.folder.mkdir(parents=True, exist_ok=True)
        fh = self._acquire()
        fh.seek(0)
        previous = fh.read().strip()
        if previous:
            print(f"note: {self.path} was left by a run that is no longer running "
                  f"({_describe(previous)}); taking it over", file=sys.stderr)
        fh.seek(0)
        fh.truncate()
        fh.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                             "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}) + "\n")
        fh.flush()
        _held[self.folder] = [fh, 1]
        return self

    def _acquire(self):
        while True:
            fh = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 - held for the run
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                fh.seek(0)
                holder = _describe(fh.read())
                fh.close()
                raise RunError(f"{self.folder} is in use by another evalharness run "
                               f"({holder}); two runs cannot write one folder. Wait for it to "
                               "finish, stop it, or choose another --out") from None
            try:  # the holder may have removed the file between our open and our flock
                if os.fstat(fh.fileno()).st_ino == os.stat(self.path).st_ino:
                    return fh
            except FileNotFoundError:
                pass
            fcntl.flock(fh, fcntl.LOCK_UN)
            fh.close()

    def __exit__(self, *exc: object) -> None:
        entry = _held.get(self.folder)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] > 0:
            return
        del _held[self.folder]
        fh = entry[0]
        try:
            self.path.unlink(missing_ok=True)
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
            fh.close()


def _describe(text: str) -> str:
    """Who holds (or held) a lock, from its file's content.

    >>> _describe('{"pid": 12, "host": "ci-3", "since": "2026-12-01T10:00:00+0000"}')
    'pid 12 on host ci-3 since 2026-12-01T10:00:00+0000'
    >>> _describe("")
    'holder unknown'
    """
    try:
        info = json.loads(text)
        return f"pid {info['pid']} on host {info['host']} since {info['since']}"
    except (ValueError, KeyError, TypeError):
        return "holder unknown"
