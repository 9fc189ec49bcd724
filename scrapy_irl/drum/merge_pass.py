"""One bucket's share of DRUM's single sequential pass over Z.

Bucket i holds keys with prefix i, and Z is sorted, so the keys of bucket i form one
contiguous range of Z. :func:`merge_bucket` reads that range chunk by chunk (Delta bytes at
a time, via :class:`~scrapy_irl.drum.cache.CacheReader`), resolves the bucket's sorted
tuples against each chunk and writes the updated chunk to the new Z; calling it for
i = 0..k-1 in order is the thesis' one pass over Z for all buckets.
"""

from __future__ import annotations

import numpy as np

from scrapy_irl.drum.cache import CacheReader, CacheWriter
from scrapy_irl.drum.merge import (
    GroupedBatch,
    MergeFunction,
    lookup_chunk,
    merged_chunk,
    resolve_groups,
)
from scrapy_irl.drum.records import KEY_DTYPE


def merge_bucket(
    records: np.ndarray,
    reader: CacheReader,
    writer: CacheWriter,
    upper: int | None,
    value_dtype: np.dtype,
    merge: MergeFunction | None,
) -> tuple[np.ndarray, np.ndarray | None, int]:
    """Merge one bucket with the key range of Z below ``upper``, writing the new Z.

    Returns, in the bucket's arrival order, whether each tuple's key was new and the
    value it saw (None without values), plus the number of keys inserted into Z.
    """
    has_values = value_dtype.itemsize > 0
    n = len(records)
    if not n:
        for chunk_keys, chunk_values in reader.chunks_below(upper):
            writer.write(chunk_keys, chunk_values)
        return np.empty(0, dtype=bool), None, 0
    batch = GroupedBatch.from_records(records)
    n_groups = len(batch.group_keys)
    starts = batch.group_starts
    unique_sorted = np.empty(n, dtype=bool)
    before_sorted = np.zeros(n, dtype=value_dtype) if has_values else None
    done = 0  # groups handled so far
    inserted = 0

    def handle(chunk_keys: np.ndarray, chunk_values: np.ndarray | None, upto: int) -> None:
        nonlocal done, inserted
        g0, g1 = done, upto
        t0 = int(starts[g0]) if g0 < n_groups else n
        t1 = int(starts[g1]) if g1 < n_groups else n
        group_keys = batch.group_keys[g0:g1]
        positions, found = lookup_chunk(chunk_keys, group_keys)
        cache_values = None
        if has_values:
            cache_values = np.zeros(g1 - g0, dtype=value_dtype)
            if chunk_values is not None and found.any():
                cache_values[found] = chunk_values[positions[found]]
        resolution = resolve_groups(
            batch.ops[t0:t1],
            batch.values[t0:t1] if batch.values is not None else None,
            batch.group_of[t0:t1] - g0,
            starts[g0:g1] - t0,
            found,
            cache_values,
            merge,
        )
        unique_sorted[t0:t1] = resolution.unique
        if before_sorted is not None and resolution.value_before is not None:
            before_sorted[t0:t1] = resolution.value_before
        out_keys, out_values, n_new = merged_chunk(
            chunk_keys, chunk_values, group_keys, positions, found, resolution
        )
        writer.write(out_keys, out_values)
        inserted += n_new
        done = g1

    for chunk_keys, chunk_values in reader.chunks_below(upper):
        upto = int(np.searchsorted(batch.group_keys, chunk_keys[-1], side="right"))
        handle(chunk_keys, chunk_values, upto)
    if done < n_groups:
        empty_values = np.empty(0, dtype=value_dtype) if has_values else None
        handle(np.empty(0, dtype=KEY_DTYPE), empty_values, n_groups)

    unique = np.empty(n, dtype=bool)
    unique[batch.order] = unique_sorted
    before = None
    if before_sorted is not None:
        before = np.empty(n, dtype=value_dtype)
        before[batch.order] = before_sorted
    return unique, before, inserted
