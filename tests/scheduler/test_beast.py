"""BEAST placement, Q_F re-reads and crash safety (thesis chapter VII section 2)."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from scrapy_irl.exceptions import FrontierCorruptionError
from scrapy_irl.scheduler.beast import _ENTRY, Beast


def legacy_park(beast: Beast, record: bytes) -> None:
    """Park as Beast.park did until 2026-11-28: frontiers of layout 1 and 2 hold such
    queues, which a resume reads (the scheduler parks in the parked store now)."""
    beast._append(beast.parked, _ENTRY.pack(1, 0) + record)


def pop(beast: Beast) -> tuple[bytes, tuple[int, int, int]] | None:
    """The next record, going on with a re-read of Q_F for as many calls as it takes
    (a slice a call), as the scheduler's loads do."""
    for _ in range(100_000):
        got = beast.pop()
        if got is not None or not beast.rescanning:
            return got
    raise AssertionError("a re-read of Q_F never ended")


def drain(beast: Beast, limit: int = 10_000) -> list[str]:
    out = []
    for _ in range(limit):
        got = pop(beast)
        if got is None:
            break
        out.append(got[0].decode())
        beast.done(got[1])
    return out


def test_first_budget_to_next_queue_then_one_queue_further_per_budget(tmp_path):
    beast = Beast(tmp_path, initial_queues=4, max_queues=4, fsync=False)
    for p in range(5):
        beast.push(f"a{p}".encode(), 2, p)  # B=2: a0,a1 -> Q2; a2,a3 -> Q3; a4 -> Q4
    for p in range(4):
        beast.push(f"s{p}".encode(), 1, p)  # B=1: s0 -> Q2, s1 -> Q3, s2 -> Q4, s3 -> Q_F
    stats = beast.stats()
    assert (stats["q1"], stats["q2"], stats["q3"], stats["q4"], stats["qf"]) == (0, 3, 3, 2, 1)
    assert drain(beast) == ["a0", "a1", "s0", "a2", "a3", "s1", "a4", "s2", "s3"]


def test_wrap_around_while_reading_a_later_queue(tmp_path):
    beast = Beast(tmp_path, initial_queues=3, max_queues=3, fsync=False)
    beast.push(b"x", 1, 0)  # -> Q2
    assert beast.pop()[0] == b"x"  # Q1 empty: now reading Q2
    assert beast.current == 1
    beast.push(b"y", 1, 0)  # next after Q2 is Q3
    beast.push(b"z", 1, 1)  # one further wraps to Q1
    stats = beast.stats()
    assert (stats["q3"], stats["q1"]) == (1, 1)


def test_qf_reread_doubles_j_and_keeps_everything(tmp_path):
    beast = Beast(tmp_path, initial_queues=2, max_queues=16, fsync=False)
    for p in range(20):
        beast.push(f"s{p}".encode(), 1, p)  # B=1: s0 -> Q2, the rest -> Q_F
    assert beast.stats()["qf"] == 19
    order = drain(beast)
    assert sorted(order) == sorted(f"s{p}" for p in range(20))  # nothing discarded
    assert beast.rescans >= 2 and beast.j == 16
    assert order == [f"s{p}" for p in range(20)]  # P_x order survives the re-reads


def test_qf_reread_only_after_the_last_queue(tmp_path):
    beast = Beast(tmp_path, initial_queues=4, max_queues=8, fsync=False)
    beast.push(b"late", 1, 10)  # Q_F
    beast.push(b"now", 1, 0)  # Q2
    beast.push(b"soon", 1, 1)  # Q3
    assert drain(beast) == ["now", "soon", "late"]
    assert beast.rescans == 1 and beast.j == 8


def crawl_with_steady_work(beast: Beast, pops: int) -> list[tuple[str, int]]:
    """Pop ``pops`` records while a new PLD's in-budget URL arrives before each pop, so
    the ring never runs empty (no fast-forward); (record, queue id) in crawl order."""
    crawled = []
    for n in range(pops):
        beast.push(f"good{n}".encode(), 1, 0)
        got = pop(beast)
        assert got is not None
        crawled.append((got[0].decode(), got[1][0]))
        beast.done(got[1])
    return crawled


@pytest.mark.parametrize("budget", [1, 2])
def test_at_the_cap_every_over_budget_url_is_crawled_in_the_end(tmp_path, budget):
    """j at its cap: the re-read window of k moves on by the ring just read. Before, it
    stayed at [j - 1, 2j - 2], so P_x >= (2j - 1) B_x went back to Q_F at every re-read
    and was never crawled while other sites kept the ring busy (625 re-reads, j = 4)."""
    beast = Beast(tmp_path, initial_queues=4, max_queues=4, fsync=False)
    for p in range(40):
        beast.push(f"big{p}".encode(), budget, p)
    crawled = crawl_with_steady_work(beast, 2_000)
    big = [(name, qid) for name, qid in crawled if name.startswith("big")]
    assert [name for name, _ in big] == [f"big{p}" for p in range(40)]  # all, in P_x order
    per_queue = Counter(qid for _, qid in big)
    assert max(per_queue.values()) <= budget  # still B_x a queue, never a burst
    assert beast.qf.size == 0


def test_at_the_cap_a_fast_forward_is_taken_off_what_stays_in_qf(tmp_path):
    """A fast-forward at the cap jumps to the smallest k; what it leaves in Q_F comes in
    the very next re-read, not (k - j) / j re-reads later."""
    beast = Beast(tmp_path, initial_queues=2, max_queues=2, fsync=False)
    for p in range(100, 106):
        beast.push(f"far{p}".encode(), 1, p)  # k = 100..105: Q_F, the ring is empty
    got = pop(beast)  # fast-forward: k 100, 101 into the ring
    assert got[0] == b"far100"
    beast.done(got[1])
    crawled = crawl_with_steady_work(beast, 40)
    assert [name for name, _ in crawled if name.startswith("far")] == [
        f"far{p}" for p in range(101, 106)
    ]
    assert beast.rescans <= 4


def test_a_fast_forward_below_the_window_leaves_what_stays_spaced_for_the_next_re_read(
        tmp_path):  # fmt: skip
    """A PLD whose budget grew (1 -> 2) since its URLs went to Q_F: the fast-forward
    starts at k = 0 and places k 0..1; the next, normal, re-read starts at k = j - 1 = 3,
    so k = 2 and 3 both went to its first queue, 4 URLs of a B_x = 2 PLD in one queue."""
    beast = Beast(tmp_path, initial_queues=2, max_queues=16, fsync=False,
                  rebudget=lambda record: 2 if record.startswith(b"big") else None)  # fmt: skip
    for p in range(1, 21):
        beast.push(f"big{p}".encode(), 1, p)  # k = P_x >= 1 = j - 1: all in Q_F
    got = pop(beast)  # the ring is empty: a fast-forward
    beast.done(got[1])
    big = [(got[0].decode(), got[1][0])] + [
        (name, qid) for name, qid in crawl_with_steady_work(beast, 300) if name.startswith("big")
    ]
    assert [name for name, _ in big] == [f"big{p}" for p in range(1, 21)]
    assert max(Counter(qid for _, qid in big).values()) <= 2


def test_restart_resumes_unfinished_records_only(tmp_path):
    beast = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    for i in range(10):
        beast.push(f"r{i}".encode(), 100, i)  # all in Q2
    beast.save()
    taken = [beast.pop() for _ in range(6)]
    for got in taken[:2] + taken[3:5]:  # r0, r1, r3, r4 finished; r2 and r5 still in RAM
        beast.done(got[1])
    beast.save()
    del beast  # a kill -9 here: RAM is gone, only files remain
    again = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    assert drain(again) == ["r2", "r5", "r6", "r7", "r8", "r9"]


def test_unsaved_pushes_are_the_only_loss(tmp_path):
    beast = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    beast.push(b"saved", 1, 0)
    beast.save()
    beast.push(b"unsaved", 1, 0)  # buffered, no save(): the documented window
    again = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    assert drain(again) == ["saved"]


def test_graceful_requeue_is_read_first(tmp_path):
    beast = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    beast.push(b"a", 1, 0)
    beast.push(b"b", 1, 0)
    got = beast.pop()
    beast.requeue(got[0])
    beast.done(got[1])
    beast.close()
    again = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    assert drain(again) == ["a", "b"]


def _tear(path, size):
    with open(path, "r+b") as handle:
        handle.truncate(size - 3)  # the second frame is torn


def _zero_fill(path, size):
    with open(path, "ab") as handle:
        handle.write(b"\0" * 5000)  # space allocated, never written (power loss)


@pytest.mark.parametrize("damage", [_tear, _zero_fill])
def test_torn_or_zero_filled_tail_is_cut(tmp_path, damage):
    beast = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    beast.push(b"one", 1, 0)
    beast.save()
    beast.push(b"two", 1, 0)
    beast.ring[1].write_buffer()  # written; the kill comes before the next STATE save
    target = beast.ring[1].path
    damage(target, target.stat().st_size)
    again = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    # "two" was written after the save: past STATE's length, cut with the damage (the
    # write-out window; reading such frames handed copies out twice, see below)
    assert drain(again) == ["one"]


def _truncate_saved_frame(path):
    with open(path, "r+b") as handle:
        handle.truncate(path.stat().st_size - 3)


def _empty(path):
    path.write_bytes(b"")


def _delete(path):
    path.unlink()


@pytest.mark.parametrize(("damage", "message"), [
    (_truncate_saved_frame, "STATE says .* were written before it was saved"),
    (_empty, "STATE says .* were written before it was saved"),
    (_delete, "missing, but STATE says"),
])
def test_damage_to_what_state_saved_is_refused_not_read_as_empty(tmp_path, damage, message):
    beast = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    for n in range(5):
        beast.push(b"entry-%d" % n, 1, 0)
    beast.save()  # every frame now counts as durable: a kill cannot tear it
    target = beast.ring[1].path
    damage(target)
    with pytest.raises(FrontierCorruptionError, match=message):
        Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)


def test_queue_files_without_state_are_refused_not_deleted(tmp_path):
    beast = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    beast.push(b"owed", 1, 0)
    beast.close()
    (tmp_path / "STATE").unlink()
    files = {p.name: p.read_bytes() for p in tmp_path.glob("q*.beast")}
    with pytest.raises(FrontierCorruptionError, match="STATE: missing, but 1 queue files"):
        Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    assert {p.name: p.read_bytes() for p in tmp_path.glob("q*.beast")} == files


@pytest.mark.parametrize("edit", [lambda b: b.pop("ring"), lambda b: b.update(current=99),
                                  lambda b: b.update(qf="x")])
def test_a_state_with_a_valid_checksum_but_inconsistent_content_is_refused(tmp_path, edit):
    import json
    import zlib

    beast = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    beast.push(b"kept", 1, 0)
    beast.close()
    wrapper = json.loads((tmp_path / "STATE").read_text())
    edit(wrapper["body"])
    wrapper["crc32"] = zlib.crc32(json.dumps(wrapper["body"], sort_keys=True).encode())
    (tmp_path / "STATE").write_text(json.dumps(wrapper))
    with pytest.raises(FrontierCorruptionError, match="STATE"):
        drain(Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False))


def test_state_of_an_earlier_version_without_lengths_still_resumes(tmp_path):
    import json
    import zlib

    beast = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    beast.push(b"kept", 1, 0)
    beast.close()
    wrapper = json.loads((tmp_path / "STATE").read_text())
    del wrapper["body"]["lengths"]
    wrapper["crc32"] = zlib.crc32(json.dumps(wrapper["body"], sort_keys=True).encode())
    (tmp_path / "STATE").write_text(json.dumps(wrapper))
    assert drain(Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)) == ["kept"]


def test_flipped_byte_is_refused(tmp_path):
    beast = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    beast.push(b"payload-payload", 1, 0)
    beast.save()
    target = beast.ring[1].path
    data = bytearray(target.read_bytes())
    data[-3] ^= 0xFF
    target.write_bytes(bytes(data))
    with pytest.raises(FrontierCorruptionError, match="checksum"):
        Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)


def test_a_damaged_record_count_in_a_frame_header_is_refused(tmp_path):
    # The checksum covers the payload, not the header: a flipped count passed the start
    # and failed every later read (the crawl neither progressed nor closed).
    beast = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    for i in range(4):
        beast.push(b"payload-%d" % i, 10, 0)
    beast.save()
    target = beast.ring[1].path
    data = bytearray(target.read_bytes())
    data[4] ^= 0x01  # the count field of the first frame: 4 -> 5
    target.write_bytes(bytes(data))
    with pytest.raises(FrontierCorruptionError, match="length table"):
        Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)


def test_a_resumed_queue_finished_and_deleted_is_not_read_again(tmp_path):
    # save() deleted a read-out queue that a resumed run had owed records from, but pop()
    # still asked it for a frame: FileNotFoundError, taken for a storage error.
    beast = Beast(tmp_path, fsync=False)
    for i in range(4):
        beast.push(b"ring%d" % i, 10, 0)
    for i in range(4):
        beast.push(b"qf%d" % i, 1, 50)
    beast.save()
    assert [beast.pop() for _ in range(5)][-1] is not None  # the ring queue is retired
    beast.save()
    again = Beast(tmp_path, fsync=False)  # a kill, then a restart
    owed = [again.pop() for _ in range(4)]
    assert sorted(record for record, _ in owed) == [b"ring0", b"ring1", b"ring2", b"ring3"]
    for _, token in owed:
        again.done(token)
    again.save()  # deletes the read-out queue
    assert sorted(drain(again)) == ["qf0", "qf1", "qf2", "qf3"]


def test_bad_state_is_refused(tmp_path):
    Beast(tmp_path, fsync=False).save()
    state = tmp_path / "STATE"
    state.write_text(state.read_text().replace('"current": 0', '"current": 1'))
    with pytest.raises(FrontierCorruptionError, match="unreadable BEAST state"):
        Beast(tmp_path, fsync=False)


def test_parameters_validated(tmp_path):
    with pytest.raises(ValueError):
        Beast(tmp_path, initial_queues=1)


def test_records_owed_by_a_retired_queue_come_back_after_a_kill(tmp_path):
    beast = Beast(tmp_path, initial_queues=2, max_queues=2, fsync=False)
    for i in range(4):
        beast.push(f"r{i}".encode(), 100, i)  # Q2
    held = [beast.pop() for _ in range(4)]  # reading Q2; all four now in RAM
    assert beast.pop() is None  # Q2 read out: retired, its records still owed
    beast.done(held[0][1])
    beast.done(held[2][1])
    beast.save()
    again = Beast(tmp_path, initial_queues=2, max_queues=2, fsync=False)
    assert len(again) == 2
    assert drain(again) == ["r1", "r3"]


def test_empty_beast_does_not_churn_files(tmp_path):
    beast = Beast(tmp_path, initial_queues=4, max_queues=8, fsync=False)
    before = sorted(p.name for p in tmp_path.glob("q*.beast"))
    for _ in range(100):
        assert beast.pop() is None
    beast.save()
    assert sorted(p.name for p in tmp_path.glob("q*.beast")) == before


def test_url_whose_budget_grew_leaves_qf_for_the_first_new_queue(tmp_path):
    budgets = {b"late": 1}
    beast = Beast(tmp_path, initial_queues=2, max_queues=8, fsync=False,
                  rebudget=budgets.get)  # fmt: skip
    beast.push(b"a", 1, 0)  # Q2
    beast.push(b"late", 1, 5)  # k = 5: Q_F
    assert beast.pop()[0] == b"a"  # now reading Q2
    beast.push(b"b", 1, 0)  # next after Q2: Q1 (wraps), so the ring is not empty
    budgets[b"late"] = 100  # its PLD gained in-degree: k = 5 // 100 = 0
    assert beast.pop()[0] == b"b"  # Q2 read out: Q_F re-read into Q3, Q4; back to Q1
    assert beast.rescans == 1
    stats = beast.stats()
    assert (stats["q3"], stats["q4"], stats["qf"]) == (1, 0, 0)  # not back into Q_F
    assert drain(beast) == ["late"]
    assert beast.rescans == 1


@pytest.mark.parametrize("ring_busy", [False, True])
def test_qf_reread_streams_instead_of_loading_qf_into_ram(tmp_path, ring_busy):
    """A Q_F of 16 MiB is split with about one frame and the new queues' buffers in RAM."""
    import tracemalloc

    beast = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    entry = b"x" * 1024
    for p in range(16 * 1024):
        beast.push(entry + str(p).encode(), 1024, 1024 + p)  # k = 1..16: all in Q_F
    if ring_busy:
        beast.push(b"first", 1, 0)  # Q2: the re-read happens with Q1 holding "wrapped"
        assert beast.pop()[0] == b"first"
        beast.push(b"wrapped", 1, 0)
    beast.save()
    assert beast.stats()["qf"] == 16 * 1024
    tracemalloc.start()
    try:
        got = pop(beast)  # reads out the ring, then re-reads Q_F, a slice a call
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert beast.rescans == 1
    assert got is not None and got[0] == (b"wrapped" if ring_busy else entry + b"0")
    assert peak < 4 * 1024 * 1024, peak  # Q_F is 16 MiB: it was never all in RAM
    rest = drain(beast, limit=20_000)
    assert len(rest) == 16 * 1024 - (0 if ring_busy else 1)


def test_reopening_a_large_queue_reads_it_one_frame_at_a_time(tmp_path):
    import tracemalloc

    beast = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    for p in range(16 * 1024):
        beast.push(b"y" * 1024, 1024, 1024 + p)  # 16 MiB in Q_F
    beast.save()
    del beast
    tracemalloc.start()
    try:
        again = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(again) == 16 * 1024
    assert peak < 2 * 1024 * 1024, peak


def test_garbage_after_the_last_frame_is_refused(tmp_path):
    beast = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    beast.push(b"kept", 1, 0)
    beast.save()
    with open(beast.ring[1].path, "ab") as handle:
        handle.write(b"NOTAFRAME-HEADER" + b"\0" * 64)
    with pytest.raises(FrontierCorruptionError, match="bad frame magic"):
        Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)


def test_parked_records_wait_for_unpark_and_are_read_before_the_ring(tmp_path):
    beast = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    beast.push(b"ring", 1, 0)
    got = beast.pop()
    legacy_park(beast, got[0])  # its host is backlogged: back to disk, out of pop()'s reach
    beast.done(got[1])
    beast.push(b"later", 1, 0)
    assert (len(beast), beast.readable, beast.parked.size) == (2, 1, 1)
    assert drain(beast) == ["later"]  # parked is not read, and Q_F re-reads skip it
    assert beast.pop() is None and len(beast) == 1
    assert beast.unpark() == 1 and beast.unpark() == 0
    beast.push(b"next", 1, 0)
    assert drain(beast) == ["ring", "next"]  # unparked first
    assert len(beast) == 0


def test_records_parked_for_a_retry_come_back_when_their_bucket_is_due(tmp_path):
    beast = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    assert beast.retry_due == float("inf")
    legacy_park(beast, b"backlog")
    beast.park_for_retry(b"dns", 31.0, now=0.0)  # buckets of 2 s: due at 32
    beast.park_for_retry(b"robots", 10.0, now=0.0)  # buckets of 1 s: due at 10
    assert beast.retry_due == 10.0
    assert (len(beast), beast.readable) == (3, 0)
    assert beast.stats()["retrying"] == 2 and beast.stats()["retry_parked_total"] == 2
    assert beast.unpark() == 1  # the backlog only
    assert drain(beast) == ["backlog"]
    assert beast.release_retries(9.9) == 0
    assert beast.release_retries(10.0) == 1 and drain(beast) == ["robots"]
    assert beast.retry_due == 32.0 and beast.release_retries(31.0) == 0
    assert beast.release_retries(32.0) == 1 and drain(beast) == ["dns"]
    assert beast.retry_due == float("inf") and beast.stats()["retry_buckets"] == 0


def test_records_parked_for_a_retry_survive_a_kill_and_are_read_at_the_restart(tmp_path):
    beast = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    legacy_park(beast, b"backlog")
    beast.park_for_retry(b"again", 500.0, now=0.0)
    beast.save()
    del beast  # kill -9: the due time is not saved; the record is
    again = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    assert (len(again), again.retrying, again.retry_due) == (2, 0, float("inf"))
    assert drain(again) == ["again"]  # readable at once: parked again if still not due
    assert again.unpark() == 1 and drain(again) == ["backlog"]


def test_a_release_brings_back_only_records_whose_bucket_is_due(tmp_path):
    """One queue for every record waiting for a retry was released whole at the earliest
    due time: in a broad crawl, with failures at scattered times, every record came back
    (and was parked again) at nearly every tick of its wait (found by review: 72 800
    parks for 2 000 URLs of dead names)."""
    beast = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    dues = {}
    for n in range(2_000):
        now = n * 0.015  # failures spread over 30 s
        due = now + (10.0 if n % 2 else 60.0)  # DNS and robots.txt retries
        beast.park_for_retry(f"u{n}".encode(), due, now)
        dues[f"u{n}"] = due
    assert beast.stats()["retry_buckets"] <= 40
    t, back = 0.0, []
    while beast.retrying and t < 1000:
        t += 1.0  # the scheduler's tick
        if t >= beast.retry_due and beast.release_retries(t):
            back += [(name, t) for name in drain(beast)]
    assert sorted(name for name, _ in back) == sorted(dues)  # each once
    assert all(dues[name] <= t <= dues[name] + 60.0 / 8 + 1.0 for name, t in back)
    assert beast.stats()["retry_parked_total"] == 2_000


def test_a_state_of_a_version_without_the_retry_queue_opens(tmp_path):
    import zlib

    beast = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    legacy_park(beast, b"p")
    beast.save()
    del beast
    state = json.loads((tmp_path / "STATE").read_text())
    del state["body"]["retrying"]  # as version 1 wrote it, before 2026-11-27
    state["body"]["version"] = 1
    state["crc32"] = zlib.crc32(json.dumps(state["body"], sort_keys=True).encode())
    (tmp_path / "STATE").write_text(json.dumps(state))
    again = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    assert again.retrying == 0 and again.unpark() == 1
    assert drain(again) == ["p"]


def test_parked_and_unparked_queues_survive_a_kill(tmp_path):
    beast = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    for name in (b"p1", b"p2", b"p3"):
        legacy_park(beast, name)
    beast.save()
    assert beast.unpark() == 3
    legacy_park(beast, b"p4")
    first = beast.pop()
    assert first[0] == b"p1"  # taken, not finished: still owed after a kill
    beast.save()
    del beast  # kill -9: only files remain
    again = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    assert (again.readable, again.parked.size) == (3, 1)
    assert drain(again) == ["p1", "p2", "p3"]
    again.unpark()
    assert drain(again) == ["p4"]
    again.save()
    assert sorted(p.name for p in tmp_path.glob("q*.beast")) == sorted(
        q.path.name for q in again._queues.values()
    )  # read-out queues are retired, not left behind


def test_front_pushes_are_read_first_while_being_appended_and_survive_a_kill(tmp_path):
    beast = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    beast.push(b"ring", 1, 0)
    beast.push_front(b"start1")
    beast.push_front(b"start2")
    first = beast.pop()
    assert first[0] == b"start1"  # read before the ring, buffered entries included
    beast.push_front(b"retry")  # appended while the front queue is being read
    assert beast.pop()[0] == b"start2"
    beast.save()
    del beast  # kill -9: start1 and start2 are still owed, retry was saved
    again = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    assert drain(again) == ["start1", "start2", "retry", "ring"]
    assert again.stats()["front_pushed"] == 0  # a per-run counter


def test_read_out_front_queue_is_rotated_and_its_file_removed(tmp_path, monkeypatch):
    import scrapy_irl.scheduler.beast as beast_module

    monkeypatch.setattr(beast_module, "FRONT_ROTATE_BYTES", 1024)
    beast = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    old_front = beast.front.path
    for i in range(50):
        beast.push_front(b"r%02d" % i + b"x" * 40)
    taken = [beast.pop() for _ in range(50)]
    assert beast.pop() is None  # read out: the front queue is replaced
    assert beast.front.path != old_front
    beast.push_front(b"new")
    beast.save()
    assert old_front.exists()  # its records are still held in RAM
    for got in taken:
        beast.done(got[1])
    beast.save()
    assert not old_front.exists()
    assert drain(beast) == ["new"]
    assert beast.stats()["front_pushed"] == 51


def test_two_kills_in_a_row_resume_unfinished_records_only(tmp_path):
    """A queue not read between two restarts keeps its cursor (it used to lose the
    count of finished entries in its first frame, so a second kill re-read them)."""
    beast = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    for i in range(10):
        beast.push(f"r{i}".encode(), 100, i)  # all in Q2, one frame
    beast.save()
    taken = [beast.pop() for _ in range(6)]
    for got in taken[:2] + taken[3:5]:  # r0, r1, r3, r4 finished; r2 and r5 in RAM
        beast.done(got[1])
    beast.save()
    del beast  # first kill -9
    again = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    again.save()  # the scheduler saves every second, read or not
    del again  # second kill -9, before the queue was read
    third = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    assert drain(third) == ["r2", "r5", "r6", "r7", "r8", "r9"]


def test_state_written_by_the_old_save_order_still_opens(tmp_path):
    """Earlier versions deleted a read-out queue right after a commit that still named
    it; a kill then left STATE pointing into a missing (or re-created, empty) file."""
    import json
    import zlib

    beast = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    beast.push(b"a", 100, 0)
    beast.save()
    beast.push(b"b", 100, 1)
    beast.push(b"c", 1, 5)  # Q_F: reading it retires Q2
    beast.save()  # a and b in two frames of Q2
    first = beast.pop()
    beast.done(first[1])
    second = beast.pop()  # b stays owed: Q2 is retired but still named in STATE
    third = beast.pop()
    assert (first[0], second[0], third[0]) == (b"a", b"b", b"c")
    beast.done(third[1])
    beast.save()
    retired = beast._queues[second[1][0]]
    assert retired in beast._draining
    # What the old order left: the cursor at the end of the read-out queue, the file gone.
    wrapper = json.loads((tmp_path / "STATE").read_text())
    body = wrapper["body"]
    body["cursors"][str(retired.qid)] = [retired.path.stat().st_size, 0, []]
    wrapper["crc32"] = zlib.crc32(json.dumps(body, sort_keys=True).encode())
    del beast
    for variant in ("missing", "empty"):
        (tmp_path / "STATE").write_text(json.dumps(wrapper))
        retired.path.unlink(missing_ok=True)
        if variant == "empty":
            retired.path.touch()  # what a restart in between made of it
        again = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
        assert drain(again) == []
        again.save()
        assert not retired.path.exists()
        del again


def test_a_live_queue_shorter_than_its_cursor_is_still_refused(tmp_path):
    beast = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    beast.push(b"r0", 100, 0)
    beast.save()  # one frame
    beast.push(b"r1", 100, 1)
    beast.push(b"r2", 100, 2)
    beast.save()  # a second frame
    got = beast.pop()
    beast.done(got[1])
    beast.save()  # the cursor is now at the second frame
    path = beast.ring[beast.current].path
    del beast
    path.write_bytes(b"")  # the queue being read lost its data
    with pytest.raises(FrontierCorruptionError, match="past the end|written before it was saved"):
        Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)


OPS = ("push", "push", "push_front", "pop", "pop", "done", "park", "unpark", "save", "kill",
       "park_for_retry", "release_retries")


@settings(max_examples=300, deadline=None)
# a finished entry before an owed one in a frame, then two kills (a bug fixed 2026-11-23)
@example([("push", 0), ("push", 0), ("pop", 0), ("pop", 0), ("done", 0), ("kill", 0), ("kill", 0)])
@given(st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 1000)), max_size=120))
def test_random_operations_and_kills_lose_nothing_and_resurrect_nothing(tmp_path_factory, ops):
    """Model check of crash safety: kill at random (right after a save, the scheduler's
    tick), several times. Every record not finished comes back; no finished one does, and
    STATE never names a deleted queue file."""
    from unittest import mock

    import scrapy_irl.scheduler.beast as beast_module

    with mock.patch.object(beast_module, "FRONT_ROTATE_BYTES", 64):  # rotate often
        _random_operations_and_kills(tmp_path_factory.mktemp("beast"), ops)


def _random_operations_and_kills(directory, ops):
    open_beast = lambda: Beast(directory, initial_queues=2, max_queues=8, fsync=False,
                               buffer_bytes=64)  # fmt: skip
    beast = open_beast()
    pending: Counter[str] = Counter()  # readable or parked, as the model sees it
    held: dict[str, tuple] = {}
    finished: set[str] = set()
    serial = 0
    for op, n in ops:
        if op in ("push", "push_front"):
            name = f"u{serial}"
            serial += 1
            if op == "push":
                beast.push(name.encode(), 4, n % 6)  # mostly the next queue, some to Q_F
            else:
                beast.push_front(name.encode())
            pending[name] += 1
        elif op == "pop":
            got = beast.pop()
            if got is not None:
                name = got[0].decode()
                assert name not in finished, f"{name} finished, read again"
                assert pending[name] > 0, f"{name} read but not pending"
                pending[name] -= 1
                held.setdefault(name, got[1])
        elif op in ("done", "park", "park_for_retry") and held:
            name = sorted(held)[n % len(held)]
            token = held.pop(name)
            if op == "park":
                legacy_park(beast, name.encode())
                pending[name] += 1
            elif op == "park_for_retry":
                beast.park_for_retry(name.encode(), float(n), 0.0)
                pending[name] += 1
            else:
                finished.add(name)
            beast.done(token)
        elif op == "unpark":
            beast.unpark()
        elif op == "release_retries":
            beast.release_retries()
        elif op == "save":
            beast.save()
            named = set(json.loads((directory / "STATE").read_text())["body"]["cursors"])
            assert all((directory / f"q{int(q):08d}.beast").exists() for q in named)
        elif op == "kill":
            beast.save()
            for name in held:  # taken, never finished: owed again
                pending[name] += 1
            held.clear()
            del beast
            beast = open_beast()
            beast.unpark()
    beast.save()
    del beast
    last = open_beast()
    last.unpark()
    left = Counter(drain(last))
    assert not set(left) & finished
    assert set(left) == {name for name, count in pending.items() if count > 0} | set(held)


def test_a_qf_reread_after_the_last_save_is_not_read_twice_after_a_kill(tmp_path):
    """A Q_F re-read at the queue cap copies Q_F into ring queues STATE knows; a kill
    before the next save left the copies on disk and Q_F's saved cursor before the
    originals, so a restart read both (every record of Q_F handed out twice; found by a
    kill loop 2026-11-25). Frames written after the last save are cut on open."""
    beast = Beast(tmp_path, initial_queues=2, max_queues=2, buffer_bytes=1, fsync=False)
    beast.push(b"qf", 1, 5)  # k = 5: Q_F
    beast.push(b"r1", 1, 0)
    _record, token = beast.pop()
    beast.done(token)
    beast.save()  # ring[0] (a new queue) is in STATE, with 0 bytes saved
    assert beast.pop()[0] == b"qf"  # end of the ring: Q_F split into ring[0], written
    del beast  # kill -9 before the next save
    again = Beast(tmp_path, initial_queues=2, max_queues=2, buffer_bytes=1, fsync=False)
    assert drain(again) == ["qf"]


def test_a_record_parked_after_the_last_save_is_not_read_twice_after_a_kill(tmp_path):
    """The scheduler parks a record read from BEAST and finishes its token: a kill before
    the next save left the parked copy on disk while STATE still owed the original."""
    beast = Beast(tmp_path, initial_queues=2, max_queues=4, buffer_bytes=1, fsync=False)
    beast.push(b"a", 1, 0)
    beast.save()
    record, token = beast.pop()
    legacy_park(beast, record)  # buffer_bytes=1: written at once
    beast.done(token)
    del beast  # kill -9 before the next save
    again = Beast(tmp_path, initial_queues=2, max_queues=4, buffer_bytes=1, fsync=False)
    again.unpark()
    assert drain(again) == ["a"]


def test_an_empty_ring_with_work_in_qf_is_fast_forwarded_without_a_file_per_queue(tmp_path):
    """Only Q_F holds records (every PLD over budget: a few big sites): pop() used to walk
    the j empty queues one by one, retiring each and creating a new file for it (64 file
    creations and reads per Q_F re-read at the default IRL_BEAST_MAX_QUEUES; 6 800 in 30 s
    of a 3-site crawl, 10 % of its reactor time). It now re-reads Q_F at once."""
    beast = Beast(tmp_path, initial_queues=64, max_queues=64, fsync=False)
    created = []
    for cycle in range(20):
        for p in range(3):  # k = P_x / B_x far past j: all three go to Q_F
            beast.push(f"c{cycle}-{p}".encode(), 1, 1000 + cycle * 3 + p)
        assert beast.stats()["qf"] == 3
        before = beast._next_id
        got = [beast.pop() for _ in range(3)]
        assert [g[0] for g in got] == [f"c{cycle}-{p}".encode() for p in range(3)]
        created.append(beast._next_id - before)
        for g in got:
            beast.done(g[1])
        beast.save()
    assert max(created) <= 4, created  # a new Q_F and the queues actually written
    assert beast.rescans == 20
    # read-out queues are still retired, so the files do not grow without bound
    assert len(list(tmp_path.glob("q*.beast"))) <= 64 + 4


def test_fast_forward_keeps_records_held_in_ram_owed_across_a_kill(tmp_path):
    beast = Beast(tmp_path, initial_queues=4, max_queues=4, fsync=False)
    beast.push(b"a", 1, 0)  # Q2
    beast.push(b"late", 1, 50)  # Q_F
    first = beast.pop()
    assert first[0] == b"a"  # held in RAM, not finished
    assert beast.pop()[0] == b"late"  # ring empty: Q_F re-read at once
    beast.save()  # kill: neither was finished
    again = Beast(tmp_path, initial_queues=4, max_queues=4, fsync=False)
    assert sorted(drain(again)) == ["a", "late"]


def test_a_queue_an_older_state_lacks_is_not_made_of_a_stray_file(tmp_path):
    """An older STATE (without ``parked``) gets the queue made at open, on id ``next_id``;
    a file of that name, frames a killed run wrote after its last save, was taken for its
    contents, so copies of records STATE still owes were handed out (found by review)."""
    import zlib

    from scrapy_irl.scheduler.beast import _ENTRY, _Queue

    beast = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    beast.push(b"owed", 1, 0)
    beast.save()
    del beast
    state = json.loads((tmp_path / "STATE").read_text())
    body = state["body"]
    parked = body.pop("parked")
    body["cursors"].pop(str(parked))
    body["lengths"].pop(str(parked))
    body["next_id"] = parked  # as the older version saved it, then wrote to that id:
    (tmp_path / f"q{parked:08d}.beast").unlink()
    stray = _Queue(tmp_path, parked)
    stray.append(_ENTRY.pack(1, 0) + b"copy of owed")
    stray.write_buffer()
    state["crc32"] = zlib.crc32(json.dumps(body, sort_keys=True).encode())
    (tmp_path / "STATE").write_text(json.dumps(state))
    again = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    again.unpark()
    assert drain(again) == ["owed"]


def test_a_state_naming_a_single_retry_queue_opens(tmp_path):
    """A development build of 2026-11-27 saved one retry queue id, not a list: such a STATE
    was refused as inconsistent (review), and skipping the key would have deleted the
    queue's file as a stray, its URLs with it."""
    import zlib

    beast = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    beast.park_for_retry(b"waiting", 100.0, now=0.0)
    beast.save()
    del beast
    state = json.loads((tmp_path / "STATE").read_text())
    [qid] = state["body"]["retrying"]
    state["body"]["retrying"] = qid
    state["crc32"] = zlib.crc32(json.dumps(state["body"], sort_keys=True).encode())
    (tmp_path / "STATE").write_text(json.dumps(state))
    assert drain(Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)) == ["waiting"]


def test_an_endless_retry_wait_is_bounded(tmp_path):
    beast = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    beast.park_for_retry(b"never", float("inf"), now=5.0)
    assert beast.retry_due <= 5.0 + 86_400.0 * (1 + 1 / 8) and beast.retrying == 1  # a day
    assert beast.release_retries(beast.retry_due) == 1 and drain(beast) == ["never"]


def test_a_qf_reread_never_lowers_a_budget(tmp_path):
    # STAR answers re-reads from its RAM cache of in-degrees: a PLD evicted from it read
    # as in-degree 0, and its URLs were re-placed with B_0 instead of the budget they had.
    placed = {}
    for fresh in (50, 10, None):
        beast = Beast(tmp_path / str(fresh), initial_queues=2, max_queues=8, fsync=False,
                      rebudget=lambda record, fresh=fresh: fresh)  # fmt: skip
        beast.push(b"a", 1, 0)
        beast.push(b"big", 50, 100)  # k = 2: Q_F
        assert beast.pop()[0] == b"a"
        beast.push(b"b", 1, 0)
        assert beast.pop()[0] == b"b"  # Q_F re-read: j 2 -> 4
        assert beast.rescans == 1
        placed[fresh] = {k: v for k, v in beast.stats().items() if k.startswith("q")}
        beast.close()
    assert placed[50]["q4"] == 1 and placed[50]["qf"] == 0  # k = 2 at budget 50
    assert placed[10] == placed[None] == placed[50], placed  # at 10, k = 10: Q_F again


def _held_first_rest_finished(directory, count, buffer_bytes=4096):
    """Push ``count`` records, take all, finish every one but the first (a slow download
    holding the queue's cursor back)."""
    beast = Beast(directory, initial_queues=2, max_queues=4, fsync=False,
                  buffer_bytes=buffer_bytes)  # fmt: skip
    for n in range(count):
        beast.push(f"r{n:06d}".encode(), 1_000_000, 0)
    beast.save()
    taken = [beast.pop() for _ in range(count)]
    for _record, token in taken[1:]:
        beast.done(token)
    return beast, taken


def test_finished_marks_behind_a_held_record_keep_state_small(tmp_path):
    """STATE wrote each finished entry past the cursor as an [offset, index] pair: with
    one record held while 20 000 after it finished, 330 kB written and fsynced every
    second (100 000 marks took 330 ms a save). One hex bitmap per frame now."""
    beast, taken = _held_first_rest_finished(tmp_path, 20_000)
    beast.save()
    assert (tmp_path / "STATE").stat().st_size < 12_000
    del beast  # kill -9: only the held record is owed
    again = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    assert drain(again) == [taken[0][0].decode()]


def test_finished_marks_are_forgotten_once_the_held_record_finishes(tmp_path):
    beast, taken = _held_first_rest_finished(tmp_path, 3_000)
    queue = beast.ring[beast.current]
    assert len(queue.finished) == 2_999
    beast.done(taken[0][1])
    assert len(queue.finished) == 0
    beast.save()
    del beast
    assert drain(Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)) == []


def test_a_version_2_state_with_finished_pairs_resumes(tmp_path):
    """Versions 1 and 2 saved finished entries as [offset, index] pairs."""
    import zlib

    beast, taken = _held_first_rest_finished(tmp_path, 50, buffer_bytes=64)
    beast.save()
    qid = str(beast.ring[beast.current].qid)
    del beast
    state = json.loads((tmp_path / "STATE").read_text())
    offset, index, marks = state["body"]["cursors"][qid]
    assert marks and all(isinstance(bits, str) for _frame, bits in marks)
    pairs = [[frame, i] for frame, bits in marks
             for i in range(int(bits, 16).bit_length()) if int(bits, 16) >> i & 1]  # fmt: skip
    assert len(pairs) == 49
    state["body"]["cursors"][qid] = [offset, index, pairs]
    state["body"]["version"] = 2
    state["crc32"] = zlib.crc32(json.dumps(state["body"], sort_keys=True).encode())
    (tmp_path / "STATE").write_text(json.dumps(state))
    again = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    assert drain(again) == [taken[0][0].decode()]


@pytest.mark.parametrize("marks", [[[0, "-1"]], [[-5, "1"]], [[0, -1]], [[0, "zz"]], [[0]]])
def test_damaged_finished_marks_are_refused_by_name(tmp_path, marks):
    import zlib

    beast, _taken = _held_first_rest_finished(tmp_path, 10)
    beast.save()
    qid = str(beast.ring[beast.current].qid)
    del beast
    state = json.loads((tmp_path / "STATE").read_text())
    state["body"]["cursors"][qid][2] = marks
    state["crc32"] = zlib.crc32(json.dumps(state["body"], sort_keys=True).encode())
    (tmp_path / "STATE").write_text(json.dumps(state))
    with pytest.raises(FrontierCorruptionError, match="inconsistent BEAST state"):
        Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)


def _frame_bytes(beast: Beast) -> int:
    """Bytes of records BEAST's loaded frames still hold (retired queues included)."""
    return sum(len(entry) for queue in beast._queues.values() for entry in queue.frame)


def test_a_read_frame_keeps_no_copy_of_records_while_one_of_them_is_held(tmp_path):
    """A queue retired while one of its records was held in RAM kept every entry of its
    last frame (up to buffer_bytes): with parked hosts, 100 MiB per million URLs parked
    (frontier benchmark with one busy IP, 2026-11-28)."""
    beast = Beast(tmp_path, initial_queues=2, max_queues=4, buffer_bytes=64 * 1024, fsync=False)
    held = []
    for round_ in range(40):
        for i in range(50):
            beast.push(f"{round_}/{i}/".encode() + b"x" * 300, 1000, 0)
        got = [beast.pop() for _ in range(50)]
        assert all(g is not None for g in got)
        held.append(got[0])  # one record of each round stays in RAM
        for _, token in got[1:]:
            beast.done(token)
        beast.save()  # retires read-out queues that owe nothing
    assert len(beast._queues) > 20  # retired queues kept alive by their held record
    assert _frame_bytes(beast) == 0
    for _, token in held:
        beast.done(token)
    beast.save()
    del beast
    assert drain(Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)) == []


def _farm(beast: Beast, count: int, budget: int = 3) -> list[str]:
    """``count`` records of one PLD over its budget, k = 1.. (all in Q_F at j = 2)."""
    records = [f"f{p:05d}" for p in range(count)]
    for p, record in enumerate(records):
        beast.push(record.encode(), budget, budget + p)
    return records


@pytest.mark.parametrize("ring_busy", [False, True])
def test_a_large_qf_is_re_read_a_slice_per_call(tmp_path, monkeypatch, ring_busy):
    # In one go, a Q_F of 446 000 entries held the reactor 14.4 s (a probe, 2026-11-29).
    whole = Beast(tmp_path / "whole", initial_queues=2, max_queues=4, fsync=False)
    sliced = Beast(tmp_path / "sliced", initial_queues=2, max_queues=4, fsync=False)
    for beast in (whole, sliced):
        if ring_busy:  # Q1 holds a record when the ring's end is reached
            beast.push(b"first", 1, 0)
            assert beast.pop()[0] == b"first"
            beast.push(b"wrapped", 1, 0)
        _farm(beast, 100)
    expected = drain(whole)
    monkeypatch.setattr("scrapy_irl.scheduler.beast.SPLIT_SLICE", 7)
    placed = []
    original = sliced._placed
    monkeypatch.setattr(sliced, "_placed", lambda entry: placed.append(entry) or original(entry))
    calls, got = [], []
    for _ in range(1000):
        before = len(placed)
        record = sliced.pop()
        calls.append(len(placed) - before)
        if record is not None:
            got.append(record[0].decode())
            sliced.done(record[1])
        elif not sliced.rescanning:
            break
        else:  # nothing lost meanwhile
            assert len(sliced) == len(expected) - len(got)
    # at most a slice of the pass for the smallest k, then one of the split, per call
    assert max(calls) <= 7 + 7
    assert sum(1 for n in calls if n) > 100 // 7
    assert got == expected
    assert sliced.rescans == whole.rescans


def test_a_kill_during_a_re_read_resumes_it(tmp_path, monkeypatch):
    monkeypatch.setattr("scrapy_irl.scheduler.beast.SPLIT_SLICE", 10)
    reference = Beast(tmp_path / "ref", initial_queues=2, max_queues=4, fsync=False)
    _farm(reference, 95)
    expected = drain(reference)
    beast = Beast(tmp_path / "job", initial_queues=2, max_queues=4, fsync=False)
    _farm(beast, 95)
    beast.push(b"now", 1, 0)
    now = pop(beast)
    assert now[0] == b"now"  # Q2: the ring's end comes next
    beast.done(now[1])
    for _ in range(30):
        if beast.pop() is None and beast._split is not None and beast._split.old.size < 60:
            break
    assert beast._split is not None  # under way, partly placed
    beast.save()
    del beast  # a kill: no close
    again = Beast(tmp_path / "job", initial_queues=2, max_queues=4, fsync=False)
    assert again.rescanning and len(again) == 95
    assert drain(again) == expected  # every record once, in the same order


def test_a_state_naming_a_re_read_into_queues_outside_the_ring_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr("scrapy_irl.scheduler.beast.SPLIT_SLICE", 10)
    beast = Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
    _farm(beast, 50)
    beast.push(b"now", 1, 0)
    pop(beast)
    for _ in range(10):  # the pass for the smallest k, then the split begins
        if beast.pop() is None and beast._split is not None:
            break
    assert beast._split is not None
    beast._split.slots = 99
    beast.save()
    with pytest.raises(FrontierCorruptionError, match="outside a ring"):
        Beast(tmp_path, initial_queues=2, max_queues=4, fsync=False)
