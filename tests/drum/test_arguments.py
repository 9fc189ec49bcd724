"""What a caller can pass to DRUM: numpy integers work, anything else is refused at the
call with DrumError, before it reaches a buffer (where it used to fail later, or be
silently changed: numpy wraps -1 to 2**64-1 and cuts 1.5 to 1)."""

from __future__ import annotations

import numpy as np
import pytest

from scrapy_irl.drum import CHECK, CHECK_UPDATE, UPDATE, Drum, DrumBatch, DrumError


def delivered(batches: list[DrumBatch]) -> list[tuple[int, bytes, bool, int | None]]:
    return [(int(b.keys[i]), b.aux(i), bool(b.unique[i]),
             None if b.values is None else int(b.values[i]))
            for b in batches for i in range(len(b))]  # fmt: skip


def test_a_str_aux_is_refused_and_does_not_poison_the_buffer(tmp_path) -> None:
    # A str used to be buffered as is; every later write-out, merge and close() then
    # failed with TypeError (the store could not even be closed, its lock stayed held).
    got: list[DrumBatch] = []
    drum = Drum(tmp_path, on_results=got.append)
    drum.check_update(1, aux=b"one")
    with pytest.raises(DrumError, match="aux must be bytes, got str"):
        drum.check_update(2, aux="two")  # type: ignore[arg-type]
    with pytest.raises(DrumError, match="aux must be bytes, got str"):
        drum.submit([3, 4], CHECK_UPDATE, aux=[b"three", "four"])  # type: ignore[list-item]
    drum.submit([5], CHECK_UPDATE, aux=[bytearray(b"five")])  # bytes-like is fine
    assert drum.merge() == 2
    assert delivered(got) == [(1, b"one", True, None), (5, b"five", True, None)]
    drum.close()


def test_an_aux_over_the_frame_limit_is_refused(tmp_path) -> None:
    # A bucket write-out is one frame with a 32-bit length: a 4 GiB aux could never be
    # written, and failed every later write-out. (np.zeros is not touched: no RAM used.)
    huge = memoryview(np.zeros(1 << 32, dtype=np.uint8))
    with Drum(tmp_path) as drum:
        with pytest.raises(DrumError, match="limit"):
            drum.check(1, huge)  # type: ignore[arg-type]
        with pytest.raises(DrumError, match="limit"):
            drum.submit([1], CHECK, aux=[huge])  # type: ignore[list-item]
        assert drum.pending_tuples == 0
    with pytest.raises(DrumError, match="buffer_bytes"):
        Drum(tmp_path / "b", buffer_bytes=1 << 33)


def test_numpy_integer_keys_and_values_are_accepted(tmp_path) -> None:
    # Keys computed with numpy (a hash column) used to fail with AttributeError
    # ('numpy.uint64' object has no attribute 'to_bytes'), values given as numbers with
    # "object of type 'int' has no len()".
    got: list[DrumBatch] = []
    with Drum(tmp_path, value_dtype="<u4", on_results=got.append, sync_index=True) as drum:
        drum.update(np.uint64(2**64 - 1), np.uint32(7), b"a")
        drum.check_update(np.int64(3), 9, b"b")
        drum.check(np.uint64(2**64 - 1), b"c")
        assert drum.check_update_sync(np.uint64(12)) is False
        assert drum.check_update_sync(np.uint64(12)) is True
        assert drum.contains(np.int32(3))
        drum.submit([4, 5], UPDATE, values=[1, 2])  # Python ints in range of <u4
        drum.submit([2**64 - 2, 6], CHECK)  # both sides of 2**63: numpy makes float64
        drum.merge()
    assert delivered(got) == [(3, b"b", True, 0), (12, b"", True, 0), (4, b"", True, 0),
                              (5, b"", True, 0), (6, b"", True, 0), (2**64 - 1, b"a", True, 0),
                              (2**64 - 1, b"c", False, 7), (2**64 - 2, b"", True, 0)]  # fmt: skip


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        (np.array([5, -1], dtype=np.int64), "negative"),  # was stored as 2**64 - 1
        (np.array([1.5]), "float64"),  # was stored as 1
        ([2**64 - 1, 1.5], "float64"),  # was stored as [2**64 - 1, 1]
        ([-1], "64-bit"),  # was OverflowError
        ([2**64], "64-bit"),  # was OverflowError
        (5, "1-d"),
    ],
)
def test_submit_refuses_keys_numpy_would_change(tmp_path, keys, message) -> None:
    with Drum(tmp_path) as drum:
        with pytest.raises(DrumError, match=message):
            drum.submit(keys, UPDATE)
        assert drum.pending_tuples == 0


@pytest.mark.parametrize(
    ("values", "message"),
    [([1.5], "float64"), ([-1], "out of range"), ([2**32], "out of range")],
)
def test_values_that_would_change_are_refused(tmp_path, values, message) -> None:
    # They were cast silently (1.5 -> 1, -1 -> 4294967295, 2**32 -> 0).
    with Drum(tmp_path, value_dtype="<u4") as drum:
        with pytest.raises(DrumError, match=message):
            drum.submit([1], UPDATE, values=values)
        with pytest.raises(DrumError, match=message):
            drum.update(1, values[0])
        assert drum.pending_tuples == 0


def test_values_for_a_store_without_values_are_refused(tmp_path) -> None:
    # They were dropped without a word.
    with Drum(tmp_path) as drum, pytest.raises(DrumError, match="keeps no values"):
        drum.submit([1], UPDATE, values=np.array([7], dtype="<u4"))


def test_an_operation_out_of_range_is_a_drum_error(tmp_path) -> None:
    with Drum(tmp_path) as drum:
        for op in (256, 2.0, -1):
            with pytest.raises(DrumError, match="operation"):
                drum.submit([1], op)  # type: ignore[arg-type]


def test_reopening_with_other_values_names_both(tmp_path) -> None:
    Drum(tmp_path, value_dtype="<u8").close()
    with pytest.raises(DrumError, match=r"uint64, opened with no values \(value_dtype=None\)"):
        Drum(tmp_path)
    with pytest.raises(DrumError, match="created with store_aux=True, opened with store_aux=False"):
        Drum(tmp_path, value_dtype="<u8", store_aux=False)


def test_a_closed_store_refuses_to_deliver(tmp_path) -> None:
    # deliver() on a closed store used to rewrite MANIFEST without holding the lock.
    def fail(batch: DrumBatch) -> None:
        raise RuntimeError("consumer down")

    drum = Drum(tmp_path, on_results=fail)
    drum.check_update(1)
    with pytest.raises(RuntimeError):
        drum.merge()
    drum.close()
    drum.close()  # twice is fine
    with pytest.raises(DrumError, match="closed"):
        drum.deliver()


def test_every_call_after_close_raises(tmp_path) -> None:
    """docs/drum.rst: "close() twice is harmless; any other call after it raises". An API
    probe (2026-11-27) found write_out() returning 0, contains() of an absent key raising
    AttributeError, and contains()/check_update_sync() of a key still in the RAM sets
    answering True after close."""
    drum = Drum(tmp_path, sync_index=True)
    assert drum.check_update_sync(7) is False  # pending, in the newest keys' set
    drum.close()
    drum.close()
    for call in (drum.write_out, lambda: drum.contains(7), lambda: drum.contains(8),
                 lambda: drum.check_update_sync(7), lambda: drum.check_update_sync(8)):  # fmt: skip
        with pytest.raises(DrumError, match="closed"):
            call()


def test_values_a_float_dtype_would_round_or_overflow_are_refused(tmp_path) -> None:
    # can_cast(..., "same_kind") let lossy casts through: 2**53 + 1 became 2**53, and
    # 1e300 in a <f4 store became inf, with only numpy's RuntimeWarning (a probe).
    with Drum(tmp_path / "f8", value_dtype="<f8") as drum:
        with pytest.raises(DrumError, match="would change"):
            drum.update(1, 2**53 + 1)
        with pytest.raises(DrumError, match="would change"):
            drum.submit([1], UPDATE, values=np.array([2**63 - 1]))
        drum.update(2, 2**53)  # exact: kept
        drum.submit([3, 4], UPDATE, values=np.array([0.5, float("nan")]))  # NaN stays NaN
        assert drum.merge() == 3
    with Drum(tmp_path / "f4", value_dtype="<f4") as drum:
        with pytest.raises(DrumError, match="would change"):
            drum.update(1, 1e300)
        drum.update(2, 0.25)


def test_short_byte_values_are_refused_by_submit_as_by_update(tmp_path) -> None:
    # submit() padded b"ab" to b"ab\x00" for a V3 store; update() refused it.
    with Drum(tmp_path, value_dtype="V3") as drum:
        with pytest.raises(DrumError, match="3 bytes"):
            drum.update(9, b"ab")
        with pytest.raises(DrumError, match="3 bytes"):
            drum.submit([1], UPDATE, values=[b"ab"])
        drum.submit([1], UPDATE, values=[b"abc"])


@pytest.mark.parametrize("dtype", [object, [("a", "<u4"), ("b", object)]])
def test_a_value_dtype_holding_python_objects_is_refused(tmp_path, dtype) -> None:
    # Their bytes are pointers: stored as addresses, and every merge after failed.
    with pytest.raises(DrumError, match="without Python objects"):
        Drum(tmp_path, value_dtype=dtype)


def test_invalid_store_arguments_are_drum_errors(tmp_path) -> None:
    with pytest.raises(DrumError, match="must be an integer"):
        Drum(tmp_path / "a", buckets=2.0)  # type: ignore[arg-type]
    Drum(tmp_path / "n", buckets=np.int64(4)).close()
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(DrumError, match="cannot make the DRUM directory"):
        Drum(tmp_path / "file")


def test_numbers_are_refused_by_a_byte_store_and_structured_values_converted(tmp_path) -> None:
    # numpy writes 123456789012 into an S8 store as b"12345678", its text cut short.
    with Drum(tmp_path / "s", value_dtype="S8") as drum:
        with pytest.raises(DrumError, match="cannot be stored"):
            drum.submit([1], UPDATE, values=np.array([123456789012]))
    # A structured array of another layout is converted field by field, as before.
    target = np.dtype([("a", "<u4"), ("b", "<f4")])
    with Drum(tmp_path / "r", value_dtype=target) as drum:
        source = np.array([(7, 0.5)], dtype=[("a", "<u2"), ("b", "<f4")])
        drum.submit([1], UPDATE, values=source)
        assert drum.merge() == 1
