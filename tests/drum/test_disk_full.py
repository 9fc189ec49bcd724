"""A merge whose commit fails while the process lives on (a full disk), then goes on.

``test_crash_points.py`` abandons the store after each failure, as a kill would; here the
caller catches the error and keeps using the same store, as a crawl that waits for disk
space does. Every tuple must still be merged exactly once.
"""

from __future__ import annotations

import errno
from pathlib import Path

import numpy as np
import pytest

from scrapy_irl.drum import CHECK, UPDATE, Drum, DrumBatch
from scrapy_irl.drum import manifest as manifest_module
from scrapy_irl.drum import store as store_module

KEYS = [(i * 0x9E3779B97F4A7C15) & ((1 << 64) - 1) for i in range(20)]


def open_store(path: Path, sink: list[DrumBatch], *, fsync: bool = False) -> Drum:
    return Drum(path, buckets=4, value_dtype="<u4", merge=lambda old, new: old + new,
                on_results=sink.append, fsync=fsync, auto_merge=False)  # fmt: skip


def counters_after_reopen(path: Path) -> dict[int, int]:
    sink: list[DrumBatch] = []
    with open_store(path, sink) as drum:
        drum.submit(KEYS, CHECK)
        drum.merge()
    return {int(k): int(v) for b in sink for k, v in zip(b.keys, b.values, strict=True)}


def test_a_merge_whose_manifest_write_fails_is_redone_not_merged_twice(tmp_path: Path, monkeypatch) -> None:
    # The new manifest used to be kept in RAM although MANIFEST on disk still named the
    # old epoch: the next merge() read the same bucket files again (counters doubled) and
    # then refused its own results ("0 tuples but 6 results") on every later open.
    sink: list[DrumBatch] = []
    drum = open_store(tmp_path, sink)
    drum.submit(KEYS, UPDATE, values=np.ones(len(KEYS), dtype="<u4"), aux=[b"%d" % i for i in range(20)])
    real_write, calls = manifest_module.write_manifest, []

    def full_disk(*args, **kwargs) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(*args, **kwargs)

    monkeypatch.setattr(store_module, "write_manifest", full_disk)
    with pytest.raises(OSError, match="No space"):
        drum.merge()
    assert len(drum) == 0 and drum.pending_tuples == 20 and not sink
    assert not list(tmp_path.glob("z.0000000001.*")) and not list(tmp_path.glob("res.*"))
    assert drum.merge() == 20  # room again
    assert len(drum) == 20
    assert sorted(aux for batch in sink for aux in batch.unique_aux()) == sorted(b"%d" % i for i in range(20))
    drum.close()
    assert counters_after_reopen(tmp_path) == dict.fromkeys(KEYS, 1)


def test_an_acknowledgement_that_fails_leaves_the_epoch_owed(tmp_path: Path, monkeypatch) -> None:
    sink: list[DrumBatch] = []
    drum = open_store(tmp_path, sink)
    drum.submit(KEYS, UPDATE, values=np.ones(len(KEYS), dtype="<u4"))
    real_write, calls = manifest_module.write_manifest, []

    def full_disk_on_ack(*args, **kwargs) -> None:
        calls.append(1)
        if len(calls) == 2:  # 1: the merge's commit, 2: the delivery's acknowledgement
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(*args, **kwargs)

    monkeypatch.setattr(store_module, "write_manifest", full_disk_on_ack)
    with pytest.raises(OSError, match="No space"):
        drum.merge()
    assert drum.pending_deliveries == 1  # as on disk: the results are still owed
    delivered = len(sink)
    assert drum.deliver() == delivered  # delivered again, same epoch and buckets
    assert [(b.epoch, b.bucket, b.start) for b in sink[delivered:]] == [
        (b.epoch, b.bucket, b.start) for b in sink[:delivered]
    ]
    assert drum.pending_deliveries == 0
    drum.close()
    assert counters_after_reopen(tmp_path) == dict.fromkeys(KEYS, 1)


def test_a_directory_sync_failing_after_the_rename_still_commits(tmp_path: Path, monkeypatch) -> None:
    sink: list[DrumBatch] = []
    drum = open_store(tmp_path, sink, fsync=True)
    drum.submit(KEYS, UPDATE, values=np.ones(len(KEYS), dtype="<u4"))
    real_sync, calls = manifest_module.fsync_directory, []

    def failing_sync(directory: Path) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise OSError(errno.EIO, "Input/output error")
        real_sync(directory)

    monkeypatch.setattr(manifest_module, "fsync_directory", failing_sync)
    assert drum.merge() == 20  # MANIFEST was replaced: the merge is done, not redone
    assert len(drum) == 20 and drum.pending_tuples == 0
    drum.close()
    assert counters_after_reopen(tmp_path) == dict.fromkeys(KEYS, 1)
