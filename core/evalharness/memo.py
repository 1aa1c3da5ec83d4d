"""A bounded, thread-safe memo: what evaluators and judges remember between cases.

A large run repeats itself (the same context judged against many answers, the same query in
many cases); a memo answers the repeats once. The least recently used entry goes first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

MISSING = object()


class LRU:
    """A bounded, thread-safe key -> value memo (least recently used entries go first).

    >>> memo = LRU(maxsize=2)
    >>> memo.put("a", 1); memo.put("b", 2); memo.get("a"); memo.put("c", 3)
    1
    >>> memo.get("b", None) is None, len(memo), memo.hits, memo.misses
    (True, 2, 1, 1)
    """

    def __init__(self, maxsize: int = 8192) -> None:
        self.maxsize = maxsize
        self._data: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable, default: Any = MISSING) -> Any:
        with self._lock:
            try:
                value = self._data[key]
            except KeyError:
                self.misses += 1
                return default
            self._data.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._put(key, value)

    def _put(self, key: Hashable, value: Any) -> None:  # the caller holds the lock
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self.maxsize:
            self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
