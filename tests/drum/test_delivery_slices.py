"""DRUM's sliced delivery: a large merge handed over in several calls, resumable and exact."""

from __future__ import annotations

import numpy as np
import pytest

from scrapy_irl.drum import Drum, DrumBatch, DrumError

#: (epoch, bucket, index in bucket, key, unique, aux) of every delivered tuple
Row = tuple[int, int, int, int, bool, bytes]


def rows(batches: list[DrumBatch]) -> list[Row]:
    return [
        (b.epoch, b.bucket, b.start + i, int(b.keys[i]), bool(b.unique[i]), b.aux(i))
        for b in batches
        for i in range(len(b))
    ]


def fill(drum: Drum, n: int, offset: int = 0) -> None:
    """``n`` tuples spread over the buckets, every third key a repeat of an earlier one."""
    for i in range(n):
        k = (i % max(1, i // 3 + 1)) if i % 3 == 2 else i + offset
        drum.check_update(k * 0x9E3779B97F4A7C15 % 2**64, aux=f"u{i + offset}".encode())


def whole(tmp_path, n: int, buckets: int) -> list[Row]:
    got: list[DrumBatch] = []
    with Drum(tmp_path / "whole", buckets=buckets, on_results=got.append) as drum:
        fill(drum, n)
        drum.merge()
    return rows(got)


@pytest.mark.parametrize("buckets", [1, 4])
def test_merge_delivers_one_slice_and_deliver_goes_on_where_it_stopped(tmp_path, buckets):
    got: list[DrumBatch] = []
    with Drum(tmp_path / "sliced", buckets=buckets, on_results=got.append,
              delivery_slice=7) as drum:  # fmt: skip
        fill(drum, 100)
        drum.merge()
        assert sum(len(b) for b in got) == 7  # one slice only
        assert drum.pending_deliveries == 1
        calls = 1
        while drum.pending_deliveries:
            before = len(got)
            drum.deliver(7)
            # stops between batches once 7 went: under 7 more, at a bucket's end
            assert 0 < sum(len(b) for b in got[before:]) < 14
            calls += 1
            assert calls < 100
        assert all(len(b) <= 7 for b in got)
    assert rows(got) == whole(tmp_path, 100, buckets)
    assert calls >= 100 // 14


def test_deliver_without_a_limit_finishes_a_sliced_epoch(tmp_path):
    got: list[DrumBatch] = []
    with Drum(tmp_path / "s", buckets=4, on_results=got.append, delivery_slice=5) as drum:
        fill(drum, 60)
        drum.merge()
        drum.deliver()
        assert drum.pending_deliveries == 0
    assert rows(got) == whole(tmp_path, 60, 4)


def test_a_callback_that_raises_mid_epoch_gets_the_epoch_again_from_its_first_batch(tmp_path):
    got: list[DrumBatch] = []
    fail = [True]

    def on_results(batch: DrumBatch) -> None:
        if fail[0] and batch.start >= 10:
            raise RuntimeError("consumer failed")
        got.append(batch)

    with Drum(tmp_path / "s", buckets=1, on_results=on_results, delivery_slice=5) as drum:
        fill(drum, 30)
        drum.merge()  # 0..4
        drum.deliver(5)  # 5..9
        with pytest.raises(RuntimeError):
            drum.deliver(5)
        assert drum.pending_deliveries == 1
        fail[0] = False
        got.clear()
        drum.deliver()
    assert rows(got) == whole(tmp_path, 30, 1)  # from index 0 again, same batches


def test_a_close_mid_epoch_leaves_it_owed_for_the_next_open(tmp_path):
    first: list[DrumBatch] = []
    with Drum(tmp_path / "s", buckets=4, on_results=first.append, delivery_slice=4) as drum:
        fill(drum, 50)
        drum.merge()
        drum.deliver(4)
        assert drum.pending_deliveries == 1
    again: list[DrumBatch] = []
    with Drum(tmp_path / "s", buckets=4, on_results=again.append, delivery_slice=4) as drum:
        drum.deliver()
        assert drum.pending_deliveries == 0
    expected = whole(tmp_path, 50, 4)
    assert rows(again) == expected
    assert rows(first) == expected[: len(rows(first))]


def test_a_merge_during_a_sliced_delivery_is_delivered_after_the_older_epoch(tmp_path):
    got: list[DrumBatch] = []
    with Drum(tmp_path / "s", buckets=2, on_results=got.append, delivery_slice=6) as drum:
        fill(drum, 40)
        drum.merge()
        fill(drum, 40, offset=1000)  # new keys, and repeats of the first merge's
        drum.merge()  # merges now, delivers the next slice of the first epoch
        assert drum.pending_deliveries == 2
        drum.deliver()
        assert drum.pending_deliveries == 0
    epochs = [row[0] for row in rows(got)]
    assert epochs == sorted(epochs) and len(set(epochs)) == 2
    assert sum(len(b) for b in got) == 80
    # the second merge saw the first one's keys: every repeat (each third tuple) is not
    # unique, every new key (offset 1000) is
    second = [row for row in rows(got) if row[0] == epochs[-1]]
    unique = {int(row[5][1:]) - 1000: row[4] for row in second}
    assert unique == {i: i % 3 != 2 for i in range(40)}


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "5"])
def test_a_bad_delivery_slice_is_refused(tmp_path, bad):
    with pytest.raises(DrumError, match="delivery_slice"):
        Drum(tmp_path / "s", delivery_slice=bad)


def test_values_are_sliced_with_their_tuples(tmp_path):
    got: list[DrumBatch] = []
    with Drum(tmp_path / "v", buckets=1, value_dtype="<u4", merge=lambda o, n: o + n,
              on_results=got.append, delivery_slice=3) as drum:  # fmt: skip
        for i in range(10):
            drum.check_update(i % 4, np.uint32(1).tobytes(), f"t{i}".encode())
        drum.merge()
        drum.deliver()
    seen = [(b.aux(i), int(b.values[i])) for b in got for i in range(len(b))]
    # the value each tuple saw: how many earlier tuples had its key
    assert seen == [(f"t{i}".encode(), i // 4) for i in range(10)]


def test_a_callback_that_closes_the_store_leaves_the_rest_of_the_epoch_owed(tmp_path):
    """Read as "epoch finished", a closed cursor made DRUM acknowledge 16 of 60 tuples
    and delete the other 44 (review, 2026-11-28)."""
    got: list[DrumBatch] = []
    drum = Drum(tmp_path / "s", buckets=4)

    def closing(batch: DrumBatch) -> None:
        got.append(batch)
        drum.close()

    drum.on_results = closing
    fill(drum, 60)
    drum.merge()
    assert len(got) == 1
    again: list[DrumBatch] = []
    with Drum(tmp_path / "s", buckets=4, on_results=again.append) as reopened:
        assert reopened.pending_deliveries == 1
        reopened.deliver()
    assert rows(again) == whole(tmp_path, 60, 4)


def test_finish_epoch_delivers_the_rest_of_the_begun_epoch_and_no_more(tmp_path):
    """A graceful stop finishes the epoch it began handing over; a later owed epoch waits."""
    got: list[DrumBatch] = []
    with Drum(tmp_path / "s", buckets=2, on_results=got.append, delivery_slice=5) as drum:
        assert drum.finish_epoch() == 0  # nothing begun
        fill(drum, 60)
        drum.merge()  # epoch 1: one slice
        fill(drum, 40, offset=1000)
        drum.merge()  # epoch 2 owed; the merge's slice went on with epoch 1
        assert drum.pending_deliveries == 2
        first = got[0].epoch
        assert {b.epoch for b in got} == {first}
        assert drum.finish_epoch() > 0
        assert drum.pending_deliveries == 1
        assert {b.epoch for b in got} == {first}
        assert rows(got) == whole(tmp_path, 60, 2)  # all of epoch 1, each tuple once
        assert drum.finish_epoch() == 0  # epoch 2 not begun: stays owed
        assert drum.pending_deliveries == 1
    with Drum(tmp_path / "s", buckets=2, on_results=got.append, delivery_slice=5) as drum:
        drum.deliver()
        assert drum.pending_deliveries == 0
    assert len(rows(got)) == 100
    closed = Drum(tmp_path / "t", buckets=1)
    closed.close()
    with pytest.raises(DrumError, match="closed"):
        closed.finish_epoch()
