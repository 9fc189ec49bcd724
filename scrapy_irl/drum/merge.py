"""Pure array functions of a DRUM merge: resolve a sorted bucket against a chunk of Z.

No I/O here. A bucket's records are stably sorted by key, so the tuples of one key form a
contiguous *group* in arrival order. For each group the merge needs the key's state in Z
(present? value?) and then applies the group's operations in arrival order:

* ``check`` reports whether the key existed before it, and its value at that point;
* ``update`` inserts the key, or combines its value with the stored one (overwrite by
  default, or the owner's merge function such as "add counters");
* ``check+update`` does both, the check seeing the state before its own update.

Everything is numpy work over whole arrays; the only loop is over the *rank* of a tuple
inside its group (1st, 2nd, ... occurrence of a key in this batch), needed only when
values are stored, and it runs once per rank, not once per tuple.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from scrapy_irl.drum.records import UPDATE

#: ``merge(old_values, new_values) -> combined`` over arrays of the value dtype.
MergeFunction = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass
class GroupedBatch:
    """A bucket's tuples sorted by key, with the permutation that restores arrival order."""

    order: np.ndarray  # sorted position -> arrival position
    keys: np.ndarray  # sorted keys
    ops: np.ndarray
    values: np.ndarray | None
    group_starts: np.ndarray  # index of the first tuple of each group
    group_keys: np.ndarray
    group_of: np.ndarray  # group id of every sorted tuple

    @classmethod
    def from_records(cls, records: np.ndarray) -> GroupedBatch:
        order = np.argsort(records["key"], kind="stable")
        keys = records["key"][order]
        ops = records["op"][order]
        values = records["value"][order] if "value" in (records.dtype.names or ()) else None
        if len(keys):
            boundary = np.empty(len(keys), dtype=bool)
            boundary[0] = True
            np.not_equal(keys[1:], keys[:-1], out=boundary[1:])
            starts = np.flatnonzero(boundary)
        else:
            boundary = np.empty(0, dtype=bool)
            starts = np.empty(0, dtype=np.int64)
        group_of = np.cumsum(boundary) - 1
        return cls(order, keys, ops, values, starts, keys[starts], group_of)


@dataclass
class Resolution:
    """Outcome of one slice of groups: per tuple and per group."""

    unique: np.ndarray  # per tuple: key absent before this tuple
    value_before: np.ndarray | None  # per tuple: value before this tuple (zeros if absent)
    present_after: np.ndarray  # per group: key stored after the batch
    value_after: np.ndarray | None  # per group: value stored after the batch


def resolve_groups(
    ops: np.ndarray,
    values: np.ndarray | None,
    group_of: np.ndarray,
    group_starts: np.ndarray,
    in_cache: np.ndarray,
    cache_values: np.ndarray | None,
    merge: MergeFunction | None,
) -> Resolution:
    """Apply a slice of grouped tuples to their keys' states in Z.

    ``group_of`` must be local (0..G-1) and ``group_starts`` relative to the slice.
    ``merge`` None means overwrite.
    """
    n = len(ops)
    is_update = (ops & UPDATE).astype(bool)
    updates_incl = np.cumsum(is_update, dtype=np.int64)
    updates_excl = updates_incl - is_update
    updates_before = updates_excl - updates_excl[group_starts][group_of]
    present_before = in_cache[group_of] | (updates_before > 0)
    updates_in_group = np.add.reduceat(is_update.astype(np.int64), group_starts) if n else 0
    present_after = in_cache | (np.asarray(updates_in_group) > 0)
    if values is None or cache_values is None:
        return Resolution(~present_before, None, present_after, None)

    rank = np.arange(n, dtype=np.int64) - group_starts[group_of]
    current = cache_values.copy()
    current_present = in_cache.copy()
    value_before = np.empty(n, dtype=values.dtype)
    # Visit tuples rank by rank: every step touches at most one tuple per group, so the
    # sequential semantics hold while each step stays a whole-array operation.
    by_rank = np.argsort(rank, kind="stable")
    counts = np.bincount(rank) if n else np.empty(0, dtype=np.int64)
    offset = 0
    for count in counts:
        idx = by_rank[offset : offset + count]
        offset += count
        groups = group_of[idx]
        value_before[idx] = current[groups]
        upd = idx[is_update[idx]]
        if not len(upd):
            continue
        upd_groups = group_of[upd]
        new = values[upd]
        if merge is not None:
            had = current_present[upd_groups]
            if had.any():
                new = new.copy()
                new[had] = merge(current[upd_groups][had], new[had])
        current[upd_groups] = new
        current_present[upd_groups] = True
    return Resolution(~present_before, value_before, present_after, current)


def lookup_chunk(
    chunk_keys: np.ndarray, group_keys: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Positions of ``group_keys`` in the sorted chunk, and which of them are present."""
    positions = np.searchsorted(chunk_keys, group_keys)
    found = np.zeros(len(group_keys), dtype=bool)
    inside = positions < len(chunk_keys)
    found[inside] = chunk_keys[positions[inside]] == group_keys[inside]
    return positions, found


def merged_chunk(
    chunk_keys: np.ndarray,
    chunk_values: np.ndarray | None,
    group_keys: np.ndarray,
    positions: np.ndarray,
    found: np.ndarray,
    resolution: Resolution,
) -> tuple[np.ndarray, np.ndarray | None, int]:
    """The updated chunk of Z: values rewritten in place, new keys inserted in order.

    Returns (keys, values, number of inserted keys).
    """
    values = chunk_values
    if values is not None and resolution.value_after is not None and found.any():
        values = chunk_values.copy()  # type: ignore[union-attr]
        values[positions[found]] = resolution.value_after[found]
    inserted = ~found & resolution.present_after
    n_new = int(np.count_nonzero(inserted))
    if not n_new:
        return chunk_keys, values, 0
    at = positions[inserted]
    keys = np.insert(chunk_keys, at, group_keys[inserted])
    if values is not None and resolution.value_after is not None:
        values = np.insert(values, at, resolution.value_after[inserted])
    return keys, values, n_new
