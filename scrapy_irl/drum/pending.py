"""Keys inserted by tuples that are not merged into Z yet: the RAM half of a sync lookup.

Scrapy's ``request_seen`` needs an answer at once, so the keys accepted since the last
merge must be searchable before they reach Z. They are kept as one sorted uint64 array per
bucket (8 bytes a key, bounded by k * r / record size) plus a small set of the newest keys
that is folded into the arrays every ``fold_at`` keys. Per-bucket arrays keep the
temporary copies of a fold 1/k the size of the whole index, so folding does not inflate
the process's RSS.

Keys are hashes, hence uniform within their bucket's range, so each array also gets a
small radix table (uint32, one entry per ~4 keys, ~1 byte a key): the next few bits of the
key name a slot whose two entries bracket the handful of array positions the key can be
at. A lookup is then a bisection over those few positions instead of the whole array; this
is the hot path of Scrapy's synchronous ``request_seen``.
"""

from __future__ import annotations

import bisect

import numpy as np

from scrapy_irl.drum.heap import release_free_heap
from scrapy_irl.drum.records import KEY_DTYPE

#: Radix slots per array: one per 2**_KEYS_PER_SLOT_LOG2 keys (rounded to a power of two).
_KEYS_PER_SLOT_LOG2 = 2
_SLOT_DTYPE = np.dtype(np.uint32)


class PendingKeys:
    """A set of uint64 keys with O(1) expected membership and array-speed bulk insertion."""

    def __init__(self, buckets: int, *, fold_at: int = 8192) -> None:
        self._k = buckets
        self._bucket_bits = buckets.bit_length() - 1
        self._shift = 64 - self._bucket_bits
        self.fold_at = fold_at
        self._recent: set[int] = set()
        self._runs: list[np.ndarray] = [np.empty(0, dtype=KEY_DTYPE)] * buckets
        # Per bucket: None (empty) or (keys view, radix view, radix shift, radix mask).
        self._index: list[tuple[memoryview, memoryview, int, int] | None] = [None] * buckets
        #: The newest keys, a plain set: a sync caller may test ``key in recent`` itself
        #: before calling :attr:`older_contains` (the hot path of ``request_seen``).
        self.recent = self._recent
        self.older_contains = self._make_older_contains()

    def _make_older_contains(self):  # type: ignore[no-untyped-def]
        """Membership in the sorted runs, as a closure: no attribute lookups per call."""
        index = self._index
        shift = self._shift
        bisect_left = bisect.bisect_left

        def older_contains(key: int) -> bool:
            entry = index[key >> shift]
            if entry is None:
                return False
            keys, slots, rshift, rmask = entry
            j = (key >> rshift) & rmask
            hi = slots[j + 1]
            i = bisect_left(keys, key, slots[j], hi)
            return i < hi and keys[i] == key

        return older_contains

    def contains(self, key: int) -> bool:
        return key in self._recent or self.older_contains(key)

    def __contains__(self, key: int) -> bool:
        return key in self._recent or self.older_contains(key)

    def __len__(self) -> int:
        return len(self._recent) + sum(len(run) for run in self._runs)

    def add(self, key: int) -> None:
        recent = self._recent
        recent.add(key)
        if len(recent) >= self.fold_at:
            self.fold()

    def add_many(self, keys: np.ndarray) -> None:
        if len(keys):
            self._insert_sorted(np.unique(np.asarray(keys, dtype=KEY_DTYPE)))

    def clear(self) -> None:
        self._recent.clear()  # in place: the closure holds these objects
        self._runs = [np.empty(0, dtype=KEY_DTYPE)] * self._k
        self._index[:] = [None] * self._k

    def fold(self) -> None:
        """Move the recent keys into the sorted runs (done by :meth:`add` every fold_at)."""
        if not self._recent:
            return
        fresh = np.fromiter(self._recent, dtype=KEY_DTYPE, count=len(self._recent))
        fresh.sort()
        self._insert_sorted(fresh)
        self._recent.clear()
        # Each fold replaces k arrays by slightly larger ones; the freed ones leave holes
        # the allocator keeps. Returning them now keeps RSS at the index's real size.
        release_free_heap()

    def _insert_sorted(self, fresh: np.ndarray) -> None:
        """Merge ``fresh`` (sorted, no repeats) into the runs, skipping keys already there."""
        if self._k == 1:
            bounds = np.array([0, len(fresh)])
        else:
            ids = (fresh >> np.uint64(self._shift)).astype(np.int64)
            bounds = np.searchsorted(ids, np.arange(self._k + 1))
        for i in range(self._k):
            lo, hi = int(bounds[i]), int(bounds[i + 1])
            if lo == hi:
                continue
            run = self._runs[i]
            add = fresh[lo:hi]
            at = np.searchsorted(run, add)
            if len(run):
                present = run[np.minimum(at, len(run) - 1)] == add
                if present.any():
                    keep = ~present
                    add, at = add[keep], at[keep]
                    if not len(add):
                        continue
            run = np.insert(run, at, add)
            self._runs[i] = run
            self._index[i] = self._make_index(i, run)

    def _make_index(self, bucket: int, run: np.ndarray) -> tuple[memoryview, memoryview, int, int]:
        """Radix table of ``run``: slot j holds the first position whose key's radix >= j."""
        bits = max(0, len(run).bit_length() - 1 - _KEYS_PER_SLOT_LOG2)
        bits = min(bits, self._shift)  # k == 1 leaves 64 bits; never more than there are
        rshift = self._shift - bits
        rmask = (1 << bits) - 1
        radix = (run >> np.uint64(rshift)).astype(np.int64) & rmask if bits else np.zeros(
            len(run), dtype=np.int64
        )
        slots = np.searchsorted(radix, np.arange((1 << bits) + 1)).astype(_SLOT_DTYPE)
        return memoryview(run), memoryview(slots), rshift, rmask  # type: ignore[arg-type]
