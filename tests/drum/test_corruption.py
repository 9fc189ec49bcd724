"""Damaged files are detected with a clear DrumCorruptionError; torn tails are recovered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scrapy_irl.drum import Drum, DrumBatch, DrumCorruptionError, DrumError
from scrapy_irl.drum.records import MAGIC_AUX, scan_frames


def build(path: Path, *, owe_results: bool = False) -> None:
    """A store with a merged Z (keys and values), pending bucket frames, maybe owed results."""
    sink: list[DrumBatch] = []

    def refuse(batch: DrumBatch) -> None:
        raise RuntimeError("consumer down")

    drum = Drum(path, buckets=2, value_dtype="<u4", buffer_bytes=30, on_results=sink.append)
    for k in range(100):
        drum.update(k << 50, k.to_bytes(4, "little"), b"aux-%d" % k)
    drum.merge()
    if owe_results:
        drum.on_results = refuse
        for k in range(100, 120):
            drum.check_update(k << 50, None, b"x")
        with pytest.raises(RuntimeError):
            drum.merge()
    for k in range(200, 260):  # several frames per bucket file, left pending
        drum.check_update(spread(k), None, b"pending-%d" % k)
    drum.close()


def spread(k: int) -> int:
    return (k * 0x9E3779B97F4A7C15) & ((1 << 64) - 1)


def reopen(path: Path) -> Drum:
    return Drum(path, buckets=2, value_dtype="<u4", on_results=lambda b: None)


def only(path: Path, pattern: str) -> Path:
    (found,) = sorted(path.glob(pattern))
    return found


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x40
    path.write_bytes(bytes(data))


def truncate(path: Path, size: int) -> None:
    path.write_bytes(path.read_bytes()[:size])


@pytest.mark.parametrize(
    ("pattern", "damage", "message"),
    [
        ("MANIFEST", lambda p: flip(p, len(p.read_bytes()) // 2), "manifest"),
        ("MANIFEST", lambda p: truncate(p, 20), "manifest"),
        ("z.*.keys.drum", lambda p: flip(p, 17), "CRC32"),
        ("z.*.keys.drum", lambda p: truncate(p, 80), "bytes on disk"),
        ("z.*.vals.drum", lambda p: flip(p, 3), "CRC32"),
        ("z.*.vals.drum", lambda p: truncate(p, 0), "bytes on disk"),
        ("bucket-0000.*.kv.drum", lambda p: flip(p, 20), "checksum"),
        ("bucket-0000.*.kv.drum", lambda p: flip(p, 1), "magic"),
        ("bucket-0001.*.aux.drum", lambda p: flip(p, 18), "checksum"),
    ],
)
def test_damage_is_refused(tmp_path: Path, pattern: str, damage, message: str) -> None:
    build(tmp_path)
    damage(only(tmp_path, pattern))
    with pytest.raises(DrumCorruptionError, match=message):
        reopen(tmp_path)


def test_aux_file_missing_frames_is_refused(tmp_path: Path) -> None:
    build(tmp_path)
    aux = only(tmp_path, "bucket-0000.*.aux.drum")
    truncate(aux, 10)  # fewer aux frames than key frames: no crash order explains it
    with pytest.raises(DrumCorruptionError, match="aux frames"):
        reopen(tmp_path)


@pytest.mark.parametrize("damage", ["emptied", "deleted"])
def test_key_file_losing_whole_frames_is_refused_not_cut(tmp_path: Path, damage: str) -> None:
    build(tmp_path)
    kv = only(tmp_path, "bucket-0000.*.kv.drum")
    aux = only(tmp_path, "bucket-0000.*.aux.drum")
    frames = scan_frames(aux.read_bytes(), MAGIC_AUX, str(aux)).frames
    assert len(frames) >= 2  # more aux frames than a kill can leave ahead of their kv frames
    if damage == "emptied":
        kv.write_bytes(b"")
    else:
        kv.unlink()
    before = aux.read_bytes()
    with pytest.raises(DrumCorruptionError, match="at most one aux frame ahead"):
        reopen(tmp_path)
    assert aux.read_bytes() == before  # nothing cut: the owner decides


def test_torn_tail_is_cut_and_counted(tmp_path: Path) -> None:
    build(tmp_path)
    kv = only(tmp_path, "bucket-0000.*.kv.drum")
    size = kv.stat().st_size
    truncate(kv, size - 5)  # what a kill in the middle of write() leaves
    with reopen(tmp_path) as drum:
        lost = 60 - drum.pending_tuples
        assert 0 < lost < 60
        assert drum.stats.torn_tuples_dropped == lost  # known from the surplus aux frame
        assert drum.merge() == 60 - lost
        assert len(drum) == 100 + 60 - lost
    # the surplus aux frame of the torn batch was cut too: the store reopens cleanly again
    with reopen(tmp_path) as drum:
        assert drum.pending_tuples == 0


def test_zero_filled_tail_is_torn_not_corrupt(tmp_path: Path) -> None:
    build(tmp_path)
    kv = only(tmp_path, "bucket-0001.*.kv.drum")
    kv.write_bytes(kv.read_bytes() + bytes(4096))  # preallocated, never written
    with reopen(tmp_path) as drum:
        assert drum.pending_tuples == 60


@pytest.mark.parametrize(
    "damage", [lambda p: flip(p, 30), lambda p: truncate(p, 12), lambda p: p.write_bytes(p.read_bytes()[:-1]),
               lambda p: p.unlink(), lambda p: p.write_bytes(b"")],  # fmt: skip
)
def test_damaged_results_of_an_owed_epoch_are_refused_at_open(tmp_path: Path, damage) -> None:
    """Found only at the first delivery, damage closed each run after its first requests,
    and the next run resumed the same way (a kill probe, 2026-11-28)."""
    build(tmp_path, owe_results=True)
    damage(only(tmp_path, "res.*.drum"))
    with pytest.raises(DrumCorruptionError, match=r"res\.\d+\.drum"):
        reopen(tmp_path)


def test_results_damaged_after_open_are_refused_on_delivery(tmp_path: Path) -> None:
    build(tmp_path, owe_results=True)
    drum = reopen(tmp_path)
    try:
        truncate(only(tmp_path, "res.*.drum"), 12)
        with pytest.raises(DrumCorruptionError):
            drum.deliver()
    finally:
        drum.close()


def test_missing_manifest_with_data_is_refused(tmp_path: Path) -> None:
    build(tmp_path)
    (tmp_path / "MANIFEST").unlink()
    with pytest.raises(DrumCorruptionError, match="MANIFEST is missing"):
        reopen(tmp_path)


def test_newer_format_version_is_refused(tmp_path: Path) -> None:
    build(tmp_path)
    manifest = tmp_path / "MANIFEST"
    wrapper = json.loads(manifest.read_bytes())
    wrapper["body"]["version"] = 99
    import zlib

    wrapper["crc32"] = zlib.crc32(json.dumps(wrapper["body"], sort_keys=True).encode())
    manifest.write_text(json.dumps(wrapper))
    with pytest.raises(DrumError, match="format version 99"):
        reopen(tmp_path)


def test_stale_files_of_unfinished_merge_are_removed(tmp_path: Path) -> None:
    build(tmp_path)
    stale = [tmp_path / "z.0000000099.keys.tmp", tmp_path / "z.0000000099.keys.drum",
             tmp_path / "bucket-0000.0000000099.kv.drum"]
    for path in stale:
        path.write_bytes(b"junk")
    user_file = tmp_path / "notes.txt"
    user_file.write_text("mine")
    with reopen(tmp_path) as drum:
        assert drum.pending_tuples == 60
    assert not any(p.exists() for p in stale)
    assert user_file.exists()


def test_torn_tail_is_counted_without_aux(tmp_path: Path) -> None:
    # With no aux file (the dupefilter's URLseen) the torn key frame's header is all
    # that says what was lost; the loss was silent before.
    drum = Drum(tmp_path, buckets=1, buffer_bytes=10**6, store_aux=False)
    for k in range(50):
        drum.check_update(spread(k))
    drum.write_out()
    for k in range(50, 100):
        drum.check_update(spread(k))
    drum.close()
    kv = only(tmp_path, "bucket-0000.*.kv.drum")
    truncate(kv, kv.stat().st_size - 3)
    with Drum(tmp_path, buckets=1, store_aux=False) as drum:
        assert drum.pending_tuples == 50
        assert drum.stats.torn_tuples_dropped == 50


@pytest.mark.parametrize("fail_on", ["aux", "kv"])
def test_a_write_that_fails_part_way_leaves_no_broken_frame(tmp_path: Path, monkeypatch, fail_on) -> None:
    # A full disk mid-write used to leave half a frame, then the retried batch after it:
    # a checksum error at the next merge and on every later open.
    import errno
    import os

    from scrapy_irl.drum import bucket as bucket_module

    drum = Drum(tmp_path, buckets=1, buffer_bytes=10**6)
    for k in range(40):
        drum.check_update(spread(k), None, b"first-%d" % k)
    drum.write_out()
    for k in range(40, 80):
        drum.check_update(spread(k), None, b"second-%d" % k)
    real_write, calls = os.write, []

    def failing_write(fd: int, data) -> int:
        calls.append(fd)
        target = drum._buckets[0]._aux_fd if fail_on == "aux" else drum._buckets[0]._kv_fd
        if fd == target and len(calls) <= 2:
            real_write(fd, bytes(data[:7]))  # part of the frame reaches the file
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(bucket_module.os, "write", failing_write)
    with pytest.raises(OSError):
        drum.write_out()
    monkeypatch.setattr(bucket_module.os, "write", real_write)
    drum.write_out()  # room again: the batch still buffered is written whole
    drum.close()
    seen: list[bytes] = []
    with Drum(tmp_path, buckets=1, on_results=lambda b: seen.extend(b.unique_aux())) as drum:
        assert drum.pending_tuples == 80
        assert drum.merge() == 80
    assert sorted(seen) == sorted([b"first-%d" % k for k in range(40)] + [b"second-%d" % k for k in range(40, 80)])


def test_a_cut_key_file_of_an_epoch_owing_results_is_refused_not_cut(tmp_path: Path) -> None:
    """Its files were whole when the epoch was merged, so a short tail is damage, not a
    kill's torn write: it used to be cut at open (a frame's tuples gone for good) and the
    store refused only later, at delivery, in the middle of a crawl."""
    build(tmp_path, owe_results=True)
    owed = only(tmp_path, "bucket-0000.0000000001.kv.drum")
    truncate(owed, owed.stat().st_size - 3)
    before = owed.read_bytes()
    with pytest.raises(DrumCorruptionError, match="results still owed"):
        reopen(tmp_path)
    assert owed.read_bytes() == before


def _frame_offsets(data: bytes) -> list[int]:
    """Where each frame header starts (walking the length fields of an intact file)."""
    from scrapy_irl.drum.records import FRAME_HEADER

    offsets, pos = [], 0
    while pos < len(data):
        offsets.append(pos)
        pos += FRAME_HEADER.size + FRAME_HEADER.unpack_from(data, pos)[2]
    return offsets


def _flip_length(path: Path, frame: int) -> bytes:
    data = bytearray(path.read_bytes())
    data[_frame_offsets(bytes(data))[frame] + 10] ^= 0x5A  # third byte of the length
    path.write_bytes(bytes(data))
    return bytes(data)


def test_a_damaged_length_in_an_early_key_frame_is_refused_not_cut(tmp_path: Path) -> None:
    """Found by an API probe (2026-11-27): a flipped bit in the first frame's length made
    the rest of the file look like one torn frame, and open cut all five frames (50 keys
    of the dupefilter's URLseen gone, reported as 10 torn tuples). Fixed-size records fix
    the length from the count: a header that disagrees is damage."""
    drum = Drum(tmp_path, buckets=1, store_aux=False)
    for frame in range(5):
        for k in range(frame * 10, frame * 10 + 10):
            drum.check_update(spread(k))
        drum.write_out()
    drum.close()
    kv = only(tmp_path, "bucket-0000.*.kv.drum")
    damaged = _flip_length(kv, 0)
    with pytest.raises(DrumCorruptionError, match="damaged header"):
        Drum(tmp_path, buckets=1, store_aux=False)
    assert kv.read_bytes() == damaged  # nothing cut


def test_a_damaged_length_in_the_last_aux_frame_is_refused_not_dropped(tmp_path: Path) -> None:
    """The last aux frame with an inflated length read as a batch torn by a kill, and its
    tuples were dropped although their key frame was whole: the aux frame's length table
    and checksum show the frame is all there."""
    build(tmp_path)
    aux = only(tmp_path, "bucket-0000.*.aux.drum")
    damaged = _flip_length(aux, -1)
    with pytest.raises(DrumCorruptionError, match="not a torn write"):
        reopen(tmp_path)
    assert aux.read_bytes() == damaged


def test_a_damaged_length_inside_a_queue_file_is_not_a_torn_tail() -> None:
    """BEAST's queue files use the aux layout with no key file to cross-check: a middle
    frame's inflated length would have cut every frame after it as a torn tail."""
    from scrapy_irl.drum.records import encode_aux, encode_frame

    frames = [encode_frame(MAGIC_AUX, 3, encode_aux([b"a" * i, b"bb", b"c"])) for i in range(4)]
    data = bytearray(b"".join(frames))
    data[_frame_offsets(bytes(data))[1] + 10] ^= 0x5A
    with pytest.raises(DrumCorruptionError, match="not a torn write"):
        scan_frames(bytes(data), MAGIC_AUX, "queue", aux_layout=True)
    # a real torn write of the last frame is still a torn tail
    whole = b"".join(frames)
    scan = scan_frames(whole[:-3], MAGIC_AUX, "queue", aux_layout=True)
    assert len(scan.frames) == 3 and scan.torn_bytes == len(frames[-1]) - 3
