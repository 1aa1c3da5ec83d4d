"""The judge cache: a content-addressed SQLite file, so an unchanged rerun makes no request."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

CACHE_ENV = "EVALHARNESS_CACHE_DIR"
CACHE_FILE = "judge-cache.sqlite"


def default_cache_path() -> Path:
    """``$EVALHARNESS_CACHE_DIR/judge-cache.sqlite``, else the user's cache directory."""
    folder = os.environ.get(CACHE_ENV)
    if not folder:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
        folder = os.path.join(base, "evalharness")
    return Path(folder) / CACHE_FILE


class JudgeCache:
    """Key -> JSON value, in one SQLite file; safe to share between threads and processes."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        self._conn.execute("PRAGMA journal_mode=WAL")
        # No fsync per commit (WAL's "normal" stays consistent; a power cut may lose the last
        # answers, which a rerun asks again): a commit per answer with fsync took a fifth of
        # the judge thread's time at a concurrency of 64.
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("CREATE TABLE IF NOT EXISTS judgments "
                           "(key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL)")
        self._conn.execute("CREATE TABLE IF NOT EXISTS notes "
                           "(key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL)")
        self._conn.commit()

    def recall(self, key: str) -> str | None:
        """A note a backend left for later runs (e.g. what an endpoint accepts), or ``None``."""
        with self._lock:
            row = self._conn.execute("SELECT value FROM notes WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def remember(self, key: str, value: str) -> None:
        with self._lock:
            self._conn.execute("INSERT OR REPLACE INTO notes VALUES (?, ?, ?)",
                               (key, value, time.time()))
            self._conn.commit()

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._conn.execute("SELECT value FROM judgments WHERE key = ?",
                                     (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, value: dict[str, Any]) -> None:
        with self._lock:
            self._conn.execute("INSERT OR REPLACE INTO judgments VALUES (?, ?, ?)",
                               (key, json.dumps(value), time.time()))
            self._conn.commit()

    def put_many(self, values: dict[str, dict[str, Any]]) -> None:
        """Store several entries in one transaction (one commit, not one per entry)."""
        now = time.time()
        with self._lock:
            self._conn.executemany("INSERT OR REPLACE INTO judgments VALUES (?, ?, ?)",
                                   [(k, json.dumps(v), now) for k, v in values.items()])
            self._conn.commit()

    def __len__(self) -> int:
        with self._lock:
            return self._conn.execute("SELECT COUNT(*) FROM judgments").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._conn.close()
