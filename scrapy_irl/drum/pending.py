"""Keys inserted by tuples that are not merged into Z yet: the RAM half of a sync lookup.

Scrapy's ``request_seen`` needs an answer at once, so the keys accepted since the last
merge must be searchable before they reach Z. They are kept as one sorted uint64 array per
bucket (8 bytes a key, bounded by k * r / record size) plus a small set of the newest keys
that is folded into the arrays every ``fold_at`` keys. Per-bucket arrays keep the
temporary copies of a fold 1/k the size of the whole index, so folding does not inflate
the process's RSS.
"""

from __future__ import annotations

import bisect

import numpy as np

from scrapy_irl.drum.heap import release_free_heap
from scrapy_irl.drum.records import KEY_DTYPE


class PendingKeys:
    """A set of uint64 keys with O(log n) membership and array-speed bulk insertion."""

    def __init__(self, buckets: int, *, fold_at: int = 8192) -> None:
        self._k = buckets
        self._shift = 64 - (buckets.bit_length() - 1)
        self._fold_at = fold_at
        self._recent: set[int] = set()
        self._runs: list[np.ndarray] = [np.empty(0, dtype=KEY_DTYPE)] * buckets
        self._views: list[memoryview | None] = [None] * buckets

    def __contains__(self, key: int) -> bool:
        if key in self._recent:
            return True
        view = self._views[key >> self._shift] if self._k > 1 else self._views[0]
        if view is None:
            return False
        i = bisect.bisect_left(view, key)
        return i < len(view) and view[i] == key

    def __len__(self) -> int:
        return len(self._recent) + sum(len(run) for run in self._runs)

    def add(self, key: int) -> None:
        self._recent.add(key)
        if len(self._recent) >= self._fold_at:
            self._fold()

    def add_many(self, keys: np.ndarray) -> None:
        if len(keys):
            self._insert_sorted(np.unique(np.asarray(keys, dtype=KEY_DTYPE)))

    def clear(self) -> None:
        self._recent.clear()
        self._runs = [np.empty(0, dtype=KEY_DTYPE)] * self._k
        self._views = [None] * self._k

    def _fold(self) -> None:
        fresh = np.fromiter(self._recent, dtype=KEY_DTYPE, count=len(self._recent))
        fresh.sort()
        self._insert_sorted(fresh)
        self._recent.clear()
        # Each fold replaces k arrays by slightly larger ones; the freed ones leave holes
        # the allocator keeps. Returning them now keeps RSS at the index's real size.
        release_free_heap()

    def _insert_sorted(self, fresh: np.ndarray) -> None:
        if self._k == 1:
            bounds = np.array([0, len(fresh)])
        else:
            ids = (fresh >> np.uint64(self._shift)).astype(np.int64)
            bounds = np.searchsorted(ids, np.arange(self._k + 1))
        for i in range(self._k):
            lo, hi = int(bounds[i]), int(bounds[i + 1])
            if lo == hi:
                continue
            run = np.union1d(self._runs[i], fresh[lo:hi])
            self._runs[i] = run
            self._views[i] = memoryview(run)  # type: ignore[arg-type]  # ndarray is a buffer
