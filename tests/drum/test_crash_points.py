"""Deterministic crashes at each step of a merge's commit, then recovery.

A kill -9 can land between any two file operations of a merge. Here the process "dies"
by an exception raised from the n-th ``os.replace`` (Z keys, Z values, results, MANIFEST,
the delivery acknowledgement) or the first file deletion after the commit; the store
object is then abandoned without ``close()``, exactly as a killed process leaves it, and
a fresh store is opened on the directory. Every tuple must be merged and delivered once.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scrapy_irl.drum import Drum, DrumBatch


class Crash(BaseException):
    """Stands for SIGKILL: nothing after it runs (BaseException skips except Exception)."""


def open_store(path: Path, sink: list[DrumBatch]) -> Drum:
    return Drum(
        path,
        buckets=4,
        value_dtype="<u4",
        merge=lambda old, new: old + new,
        on_results=sink.append,
        fsync=False,
        buffer_bytes=64,
        bucket_bytes=1 << 30,
    )


def abandon(drum: Drum) -> None:
    """Release what the kernel releases when a process dies; write nothing."""
    for bucket in drum._buckets:
        bucket.close()
    if drum._cache_index is not None:
        drum._cache_index.close()
    os.close(drum._lock_fd)


def dedupe(batches: list[DrumBatch]) -> dict[bytes, tuple[bool, int]]:
    seen: set[tuple[int, int, int]] = set()
    out: dict[bytes, tuple[bool, int]] = {}
    for batch in batches:
        if (batch.epoch, batch.bucket, batch.start) in seen:
            continue
        seen.add((batch.epoch, batch.bucket, batch.start))
        for i in range(len(batch)):
            aux = batch.aux(i)
            assert aux not in out, f"{aux!r} delivered in two batches"
            out[aux] = (bool(batch.unique[i]), int(batch.values[i]))
    return out


KEYS = [(i * 0x9E3779B97F4A7C15) & ((1 << 64) - 1) for i in range(40)]
ONE = (1).to_bytes(4, "little")


@pytest.mark.parametrize(
    "fail_at",
    ["replace-1", "replace-2", "replace-3", "replace-4", "replace-5", "unlink-1"],
)
def test_crash_during_merge_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_at: str) -> None:
    sink: list[DrumBatch] = []
    drum = open_store(tmp_path, sink)
    for i, key in enumerate(KEYS):  # epoch 0: every key once
        drum.update(key, ONE, f"a{i}".encode())
    drum.merge()
    for i, key in enumerate(KEYS * 2):  # epoch 1: twice more, merged when we crash
        drum.check_update(key, ONE, f"b{i}".encode())
    drum.write_out()

    kind, nth = fail_at.split("-")
    calls = {"n": 0}
    target = os.replace if kind == "replace" else Path.unlink

    def dying(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == int(nth):
            raise Crash
        return target(*args, **kwargs)

    if kind == "replace":
        monkeypatch.setattr(os, "replace", dying)
    else:
        monkeypatch.setattr(Path, "unlink", dying)
    with pytest.raises(Crash):
        drum.merge()
    monkeypatch.undo()
    abandon(drum)

    drum = open_store(tmp_path, sink)
    drum.merge()
    drum.check(KEYS[0], b"final")
    drum.merge()
    drum.close()
    results = dedupe(sink)
    assert len(results) == len(KEYS) * 3 + 1
    for i in range(len(KEYS)):
        assert results[f"a{i}".encode()] == (True, 0)
        assert results[f"b{i}".encode()] == (False, 1)
        assert results[f"b{i + len(KEYS)}".encode()] == (False, 2)
    assert results[b"final"] == (False, 3)
    leftovers = sorted(p.name for p in tmp_path.iterdir() if p.suffix in {".tmp"})
    assert not leftovers
