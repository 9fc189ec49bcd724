"""A write-out larger than one frame can hold is split into several frame pairs.

One ``submit()`` can put any amount of aux data into a bucket's buffer before it is
written out; as one frame, more than 4 GiB overflowed the 32-bit length field. The frame
limit, :data:`scrapy_irl.drum.bucket.MAX_FRAME_PAYLOAD`, is lowered here so that a write-out
of a few KB is split: the split frames must read back as one frame would, and survive the
same torn tails, kills and corruption checks.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np
import pytest

from scrapy_irl.drum import (
    CHECK,
    CHECK_UPDATE,
    UPDATE,
    Drum,
    DrumBatch,
    DrumCorruptionError,
    DrumError,
)
from scrapy_irl.drum import bucket as bucket_module
from scrapy_irl.drum import records as records_module
from scrapy_irl.drum.records import FRAME_HEADER, MAGIC_AUX, MAGIC_KV, scan_frames

LIMIT = 300  # bytes of payload per frame while splitting
RECORD = 8 + 1 + 4  # key, op, <u4 value


def spread(k: int) -> int:
    return (k * 0x9E3779B97F4A7C15) & ((1 << 64) - 1)


def open_store(path: Path, sink: list[DrumBatch]) -> Drum:
    return Drum(path, buckets=1, value_dtype="<u4", buffer_bytes=1 << 20, bucket_bytes=1 << 30,
                merge=lambda old, new: old + new, on_results=sink.append, fsync=False,
                flush_interval=3600)


def workload() -> tuple[np.ndarray, np.ndarray, np.ndarray, list[bytes]]:
    """Mixed check / update / check+update of keys half merged before, with aux strings of
    0 to 700 bytes: one of them larger than a whole frame."""
    n = 120
    keys = np.array([spread(k % 90) for k in range(n)], dtype="<u8")
    ops = np.array([(CHECK, UPDATE, CHECK_UPDATE)[k % 3] for k in range(n)], dtype=np.uint8)
    values = np.arange(n, dtype="<u4") + 1
    aux = [b"%d:" % k + bytes([65 + k % 26]) * (k * 7 % 61) for k in range(n)]
    aux[50] = b"big" * 233  # 699 bytes: alone in its frames
    return keys, ops, values, aux


def prepare(path: Path, sink: list[DrumBatch]) -> Drum:
    """A store with a merged Z (keys 0..44) and the workload buffered in one bucket."""
    drum = open_store(path, sink)
    drum.submit(np.array([spread(k) for k in range(45)], dtype="<u8"), UPDATE,
                np.full(45, 1000, dtype="<u4"), [b"z"] * 45)
    drum.merge()
    sink.clear()
    drum.submit(*workload())
    return drum


def results(batches: list[DrumBatch]) -> list[tuple]:
    return [(int(b.keys[i]), int(b.ops[i]), bool(b.unique[i]), int(b.values[i]), b.aux(i))
            for b in batches for i in range(len(b))]


@pytest.fixture
def expected(tmp_path: Path) -> list[tuple]:
    """What the workload gives when written out as one frame pair (no split)."""
    sink: list[DrumBatch] = []
    with prepare(tmp_path / "reference", sink) as drum:
        drum.merge()
    assert len(sink) and results(sink)[50][4] == b"big" * 233
    return results(sink)


def frames(path: Path, magic: bytes, **kwargs) -> list:
    return scan_frames(path.read_bytes(), magic, str(path), **kwargs).frames


def abandon(drum: Drum) -> None:
    """Release what the kernel releases when a process dies; write nothing."""
    for bucket in drum._buckets:
        bucket.close()
    os.close(drum._lock_fd)


def split_files(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, list[int]]:
    """Write the workload out with the lowered limit; its bucket files and frame counts."""
    monkeypatch.setattr(bucket_module, "MAX_FRAME_PAYLOAD", LIMIT)
    drum = prepare(path, [])
    drum.write_out()
    bucket = drum._buckets[0]
    abandon(drum)
    monkeypatch.undo()
    kv = frames(bucket.kv_path, MAGIC_KV)
    return bucket.kv_path, bucket.aux_path, [f.count for f in kv]


def test_a_large_write_out_is_split_into_frames_within_the_limit(tmp_path: Path, monkeypatch,
                                                                 expected: list[tuple]) -> None:
    kv_path, aux_path, counts = split_files(tmp_path / "store", monkeypatch)
    kv = frames(kv_path, MAGIC_KV)
    aux = frames(aux_path, MAGIC_AUX, aux_layout=True)
    assert len(kv) == len(aux) > 5 and sum(counts) == 120
    assert [f.count for f in aux] == counts  # one aux frame per key frame, same tuples
    for kv_frame, aux_frame in zip(kv, aux):
        assert len(kv_frame.payload) == kv_frame.count * RECORD <= LIMIT
        assert len(aux_frame.payload) <= LIMIT or aux_frame.count == 1  # the 699-byte aux
    assert 1 in counts
    sink: list[DrumBatch] = []
    with open_store(tmp_path / "store", sink) as drum:  # reopened with the default limit
        assert drum.pending_tuples == 120 and drum.stats.torn_tuples_dropped == 0
        drum.merge()
    assert results(sink) == expected


def test_split_frames_read_back_like_one_through_merge_chunks(tmp_path: Path, monkeypatch,
                                                              expected: list[tuple]) -> None:
    # Results are delivered in slices of merge_chunk_bytes built from whole aux frames.
    split_files(tmp_path / "store", monkeypatch)
    sink: list[DrumBatch] = []
    drum = open_store(tmp_path / "store", sink)
    drum.merge_chunk_bytes = 500
    with drum:
        drum.merge()
    assert len(sink) > 1 and results(sink) == expected


def crash_states(kv: bytes, aux: bytes, kv_frames: list, aux_frames: list, counts: list[int]):
    """(kv bytes, aux bytes, whole pairs, tuples counted as torn) left by a kill at points
    of the write sequence aux 1, kv 1, aux 2, kv 2, ...: inside an aux frame, or inside
    (or before) the key frame after it. A torn frame without a whole header counts 1."""
    kv_ends = [0] + [f.end for f in kv_frames]
    aux_ends = [0] + [f.end for f in aux_frames]
    for g in range(len(kv_frames)):
        size = aux_ends[g + 1] - aux_ends[g]
        for cut in sorted({1, FRAME_HEADER.size, size // 2, size - 1}):  # torn aux frame
            yield kv[: kv_ends[g]], aux[: aux_ends[g] + cut], g, (
                counts[g] if cut >= FRAME_HEADER.size else 1)
        size = kv_ends[g + 1] - kv_ends[g]
        for cut in sorted({0, 1, FRAME_HEADER.size, size // 2, size - 1}):  # aux whole
            yield kv[: kv_ends[g] + cut], aux[: aux_ends[g + 1]], g, counts[g]


def test_a_kill_in_a_split_write_out_keeps_the_whole_pairs(tmp_path: Path, monkeypatch,
                                                           expected: list[tuple]) -> None:
    kv_path, aux_path, counts = split_files(tmp_path / "model", monkeypatch)
    kv, aux = kv_path.read_bytes(), aux_path.read_bytes()
    kv_frames = frames(kv_path, MAGIC_KV)
    aux_frames = frames(aux_path, MAGIC_AUX, aux_layout=True)
    states = list(crash_states(kv, aux, kv_frames, aux_frames, counts))
    assert len(states) > 40
    for n, (kv_left, aux_left, pairs, torn) in enumerate(states[::3] + states[-2:]):
        path = tmp_path / f"kill{n}"
        prepare(path, []).close()  # the same merged Z and epoch
        bucket_kv = path / kv_path.name
        bucket_aux = path / aux_path.name
        bucket_kv.write_bytes(kv_left)
        bucket_aux.write_bytes(aux_left)
        kept = sum(counts[:pairs])
        sink: list[DrumBatch] = []
        with open_store(path, sink) as drum:
            assert drum.pending_tuples == kept
            assert drum.stats.torn_tuples_dropped == torn
            drum.merge()
        assert results(sink) == expected[:kept]


def test_a_damaged_split_frame_is_refused(tmp_path: Path, monkeypatch) -> None:
    kv_path, aux_path, _ = split_files(tmp_path / "store", monkeypatch)
    for path, magic in ((kv_path, MAGIC_KV), (aux_path, MAGIC_AUX)):
        middle = frames(path, magic, aux_layout=magic == MAGIC_AUX)[3]
        data = bytearray(path.read_bytes())
        original = bytes(data)
        data[middle.end - 2] ^= 0x40  # inside a complete middle frame's payload
        path.write_bytes(bytes(data))
        with pytest.raises(DrumCorruptionError, match="checksum mismatch"):
            open_store(tmp_path / "store", [])
        assert path.read_bytes() == bytes(data)  # nothing cut
        path.write_bytes(original)


def test_a_split_write_out_that_fails_part_way_keeps_the_rest_buffered(tmp_path: Path, monkeypatch,
                                                                       expected: list[tuple]) -> None:
    monkeypatch.setattr(bucket_module, "MAX_FRAME_PAYLOAD", LIMIT)
    drum = prepare(tmp_path / "store", [])
    bucket = drum._buckets[0]
    real_write, calls = os.write, []

    def failing_write(fd: int, data) -> int:
        calls.append(fd)
        if len(calls) == 6:  # the key frame of the third pair: a full disk
            real_write(fd, bytes(data[:7]))
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(bucket_module.os, "write", failing_write)
    with pytest.raises(OSError):
        drum.write_out()
    monkeypatch.setattr(bucket_module.os, "write", real_write)
    written = len(frames(bucket.kv_path, MAGIC_KV))
    assert written == 2 and len(frames(bucket.aux_path, MAGIC_AUX, aux_layout=True)) == 2
    assert bucket.file_records + bucket.buffered_records == 120
    assert bucket.buffered_bytes == len(bucket._kv_buffer) + 4 * bucket.buffered_records + sum(
        map(len, bucket._aux_buffer))
    drum.write_out()  # room again: the rest, in frames of its own
    drum.close()
    monkeypatch.undo()
    sink: list[DrumBatch] = []
    with open_store(tmp_path / "store", sink) as drum:
        assert drum.pending_tuples == 120
        drum.merge()
    assert results(sink) == expected


def test_a_frame_the_header_cannot_hold_is_refused_before_anything_is_written(tmp_path: Path,
                                                                              monkeypatch) -> None:
    # The last line of defence, should a write-out ever not be split: a DrumError, not a
    # struct.error, and no byte written (4 GiB stands for itself here as 100 bytes).
    drum = prepare(tmp_path / "store", [])
    monkeypatch.setattr(records_module, "FRAME_FIELD_MAX", 100)
    bucket = drum._buckets[0]
    with pytest.raises(DrumError, match="32-bit frame header"):
        drum.write_out()
    assert bucket.buffered_records == 120
    assert not bucket.aux_path.exists() or bucket.aux_path.stat().st_size == 0
    assert not bucket.kv_path.exists() or bucket.kv_path.stat().st_size == 0
    abandon(drum)
