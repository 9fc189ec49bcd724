"""URLseen's results handed to STAR a slice per reactor turn (IRL_URLSEEN_DELIVERY_SLICE):
a large merge no longer holds the reactor for seconds, every URL still reaches BEAST once,
and a kill in the middle of a sliced delivery loses and repeats nothing."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from scrapy import Request, Spider
from scrapy.utils.test import get_crawler

from scrapy_irl.drum import DrumBatch
from scrapy_irl.scheduler import IrlScheduler
from scrapy_irl.scheduler.items import record_url

SLICE = 10


class Turns:
    """Stands in for reactor.callLater: calls wait until :meth:`run` plays them in order."""

    def __init__(self) -> None:
        self.calls: list[Any] = []

    def __call__(self, delay: float, fn: Any, *args: Any) -> Any:
        call = _Call(fn, args)
        self.calls.append(call)
        return call

    def run(self, limit: int = 1000) -> int:
        turns = 0
        while self.calls and turns < limit:
            call = self.calls.pop(0)
            if call.live:
                call.live = False
                call.fn(*call.args)
            turns += 1
        return turns


class _Call:
    def __init__(self, fn: Any, args: tuple[Any, ...]) -> None:
        self.fn, self.args, self.live = fn, args, True

    def active(self) -> bool:
        return self.live

    def cancel(self) -> None:
        self.live = False


def opened(tmp_path: Path, **settings: object) -> tuple[IrlScheduler, Turns, list[int]]:
    settings = {"IRL_HOSTS_DIR": str(tmp_path / "hosts"), "IRL_URLSEEN_DELIVERY_SLICE": SLICE,
                **settings}  # fmt: skip
    crawler = get_crawler(Spider, settings_dict=settings)
    crawler.spider = crawler._create_spider("slices")
    sched = IrlScheduler.from_crawler(crawler)
    sched.open(crawler.spider)
    turns = Turns()
    sched._call_later = turns  # type: ignore[assignment]
    sizes: list[int] = []  # tuples URLseen handed over, one entry per batch
    deliver = sched.urlseen.on_results
    assert deliver is not None

    def recorded(batch: DrumBatch) -> None:
        sizes.append(len(batch))
        deliver(batch)

    sched.urlseen.on_results = recorded
    return sched, turns, sizes


def merged_with_jobdir(tmp_path: Path, urls: list[str]) -> tuple[IrlScheduler, Turns, list[int]]:
    """A scheduler on ``tmp_path/job`` that was offered ``urls`` and made a forced merge."""
    sched, turns, sizes = opened(tmp_path, JOBDIR=str(tmp_path / "job"))
    for url in urls:
        sched.enqueue_request(Request(url))
    sched._merge_for_idle()
    return sched, turns, sizes


def test_a_forced_merge_hands_its_urls_over_a_slice_a_turn_then_flushes_star(tmp_path: Path):
    sched, turns, sizes = opened(tmp_path, IRL_FRONTIER_RAM_REQUESTS=1)
    try:
        for i in range(95):
            sched.enqueue_request(Request(f"http://127.0.0.{i + 1}/p"))
        sched._merge_for_idle()
        assert SLICE <= sum(sizes) < 2 * SLICE  # one slice in the merge's own turn
        assert sched.urlseen.pending_deliveries == 1
        assert sched.counts["idle_merges"] == 0  # not finished until its last slice
        assert not sched._would_idle(sched.clock() + 60)  # no second merge meanwhile
        played = turns.run()
        assert played >= 95 // (2 * SLICE)  # each turn under two slices
        assert sum(sizes) == 95 and max(sizes) <= SLICE
        assert sched.urlseen.pending_deliveries == 0
        assert sched.counts["urlseen_delivery_slices"] == played
        assert sched.counts["idle_merges"] == 1  # finished: STAR flushed into BEAST
        assert sched.counts["idle_merges_fruitless"] == 0  # one URL went into RAM
        assert sched._ram_items() == 1 and len(sched.beast) == 94
    finally:
        sched.close("finished")


def test_an_enqueue_after_a_merge_that_left_results_owed_schedules_their_delivery(tmp_path: Path):
    sched, turns, sizes = opened(tmp_path)
    try:
        for i in range(40):
            sched.enqueue_request(Request(f"http://127.0.0.{i + 1}/p"))
        sched.urlseen.merge()  # as a full bucket's merge inside check_update
        assert SLICE <= sum(sizes) < 2 * SLICE and not turns.calls
        sched.enqueue_request(Request("http://127.0.0.1/next"))
        assert len(turns.calls) == 1
        turns.run()
        assert sum(sizes) == 40 and sched.urlseen.pending_deliveries == 0
    finally:
        sched.close("finished")


def test_a_kill_in_the_middle_of_a_sliced_delivery_queues_every_url_once(tmp_path: Path):
    sched, turns, sizes = merged_with_jobdir(
        tmp_path, [f"http://127.0.1.{i % 9 + 1}/p{i}" for i in range(50)]
    )
    turns.run(limit=2)  # about 30 of 50 handed to STAR
    sched.star.write_out()  # and on disk, as a tick would make them
    assert 3 * SLICE <= sum(sizes) < 50 and sched.urlseen.pending_deliveries == 1
    shutil.copytree(tmp_path / "job", tmp_path / "killed")  # a kill -9 here
    sched.close("shutdown")

    resumed, turns, sizes = opened(tmp_path / "again", JOBDIR=str(tmp_path / "killed"))
    try:
        assert resumed._idle_merge_wanted()  # owed results: the next tick merges
        resumed._merge_for_idle()
        turns.run()
        assert resumed.urlseen.pending_deliveries == 0
        assert sum(sizes) == 50  # the whole epoch again, from its first tuple
        resumed.star.flush()
        urls = []
        while (got := resumed.beast.pop()) is not None:
            urls.append(record_url(got[0]))
        in_ram = resumed._ram_items()
        assert len(urls) == len(set(urls))  # none twice
        assert len(urls) + in_ram == 50
    finally:
        resumed.close("finished")


def test_a_graceful_stop_finishes_the_begun_delivery_so_the_next_run_counts_nothing_twice(
    tmp_path: Path,
):
    """Left owed, the epoch was delivered again from its first slice at the next start,
    and the URLs of the slices already handed over counted twice in scheduler/enqueued."""
    urls = [f"http://127.0.0.{i + 1}/p" for i in range(30)]
    sched, turns, sizes = merged_with_jobdir(tmp_path, urls + urls[:6])  # 6 duplicates
    assert sum(sizes) < 36 and len(turns.calls) == 1
    sched.close("shutdown")
    assert not turns.calls[0].active()
    assert sum(sizes) == 36  # the rest handed over at close
    first_run = sched.stats.get_stats()
    assert first_run["scheduler/enqueued"] == 30 and first_run["dupefilter/filtered"] == 6
    again, turns, sizes = opened(tmp_path / "again", JOBDIR=str(tmp_path / "job"))
    try:
        assert again.urlseen.pending_deliveries == 0
        # STAR's tuples: 30 admissions and, each URL on a host of its own, 30 hosts to
        # charge to their PLDs (IRL_BUDGET_COUNTS_NEW_HOSTS)
        assert again.stats.get_value("irl_sched/resumed_pending") == 30 + 30
        again.star.flush()
        got = []
        while (popped := again.beast.pop()) is not None:
            got.append(record_url(popped[0]))
        assert len(got) == len(set(got)) and set(got) <= set(urls)
        assert len(got) + again._ram_items() == 30
        assert again.stats.get_value("scheduler/enqueued", 0) == 0
        assert sizes == []
    finally:
        again.close("finished")


def test_a_failure_handing_over_at_close_leaves_the_epoch_owed_and_the_close_whole(
    tmp_path: Path, caplog
):
    import errno

    urls = [f"http://127.0.0.{i + 1}/p" for i in range(30)]
    sched, turns, sizes = merged_with_jobdir(tmp_path, urls)
    sched.enqueue_request(Request("http://127.0.0.1/", dont_filter=True))  # in RAM

    def full_disk(*args: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    sched.star.admit = full_disk  # type: ignore[method-assign]
    sched.close("shutdown")  # does not raise
    assert "handing over URLseen's results at close failed" in caplog.text
    again, turns, sizes = opened(tmp_path / "again", JOBDIR=str(tmp_path / "job"))
    try:
        assert again.urlseen.pending_deliveries == 1
        saved = []
        while (popped := again.beast.pop()) is not None:
            saved.append(record_url(popped[0]))
        assert "http://127.0.0.1/" in saved  # the request RAM held went back to BEAST
        again._merge_for_idle()
        turns.run()
        assert again.urlseen.pending_deliveries == 0
        assert sum(sizes) == 31  # the owed epoch whole, and the dont_filter request's mark
    finally:
        again.close("finished")


def test_a_close_after_a_storage_error_does_not_hand_over_more(tmp_path: Path):
    sched, turns, sizes = merged_with_jobdir(tmp_path, [f"http://127.0.0.{i + 1}/p" for i in range(30)])
    delivered = sum(sizes)
    sched._storage_error = True  # as _on_storage_error leaves it
    sched.close("frontier_storage_error")
    assert sum(sizes) == delivered < 30


def test_a_killed_delivery_whose_results_file_was_damaged_is_refused_at_start(tmp_path: Path):
    """Found only at the first delivery, the damage closed each run after its first
    requests, and "awaiting URLseen" grew run after run (a kill probe, 2026-11-28)."""
    from scrapy_irl.exceptions import DrumCorruptionError

    sched, turns, sizes = merged_with_jobdir(tmp_path, [f"http://127.0.1.{i + 1}/p" for i in range(30)])
    shutil.copytree(tmp_path / "job", tmp_path / "killed")  # a kill -9 mid-delivery
    sched.close("shutdown")
    (results,) = (tmp_path / "killed").rglob("urlseen/res.*.drum")
    results.write_bytes(results.read_bytes()[:-10])
    with pytest.raises(DrumCorruptionError, match="res"):
        opened(tmp_path / "again", JOBDIR=str(tmp_path / "killed"))


def test_a_merge_the_closing_write_out_starts_is_handed_over_whole_too(tmp_path: Path):
    """URLseen's close wrote its buffers out after the hand-over; a bucket that reached
    its size merged there and delivered one slice, left owed and counted again by the
    next run (a stop probe, 2026-11-28: 234 tuples counted twice in 7 stops)."""
    sched, turns, sizes = opened(tmp_path, JOBDIR=str(tmp_path / "job"),
                                 IRL_FRONTIER_URLSEEN_BUCKET_BYTES=64)  # fmt: skip
    urls = [f"http://127.0.0.{i % 200 + 1}/p{i}" for i in range(400)]
    for url in urls:
        sched.enqueue_request(Request(url))
    assert sched.urlseen.pending_tuples  # some still in RAM buffers
    turns.calls.clear()  # the stop comes before any owed slice's turn
    sched.close("shutdown")
    first = sched.stats.get_value("scheduler/enqueued", 0)
    again, turns, sizes = opened(tmp_path / "again", JOBDIR=str(tmp_path / "job"),
                                 IRL_FRONTIER_URLSEEN_BUCKET_BYTES=64)  # fmt: skip
    try:
        assert again.urlseen.pending_deliveries == 0
        again._merge_for_idle()
        turns.run()
        assert first + again.stats.get_value("scheduler/enqueued", 0) == len(urls)
    finally:
        again.close("finished")


def test_an_owed_epoch_not_begun_in_this_run_stays_owed_at_a_graceful_stop(tmp_path: Path):
    """Only a begun delivery is finished at close: results a killed run left owed are
    delivered by the next run's merge, not by a close that never started them."""
    sched, turns, sizes = merged_with_jobdir(tmp_path, [f"http://127.0.1.{i + 1}/p" for i in range(30)])
    shutil.copytree(tmp_path / "job", tmp_path / "killed")  # a kill -9 mid-delivery
    sched.close("shutdown")
    resumed, turns, sizes = opened(tmp_path / "again", JOBDIR=str(tmp_path / "killed"))
    resumed.close("shutdown")
    assert sizes == [] and resumed.urlseen.pending_deliveries == 1
    last, turns, sizes = opened(tmp_path / "last", JOBDIR=str(tmp_path / "killed"))
    try:
        last._merge_for_idle()
        turns.run()
        assert sum(sizes) == 30 and last.urlseen.pending_deliveries == 0
        assert last.stats.get_value("scheduler/enqueued") == 30
    finally:
        last.close("finished")


def test_a_full_disk_while_a_sliced_merge_finishes_closes_the_crawl_cleanly(tmp_path: Path):
    """The last slice flushes STAR; a storage error there escaped to the reactor and the
    spider was never closed (review, 2026-11-28)."""
    import errno

    sched, turns, sizes = opened(tmp_path)
    errors: list[str] = []
    sched._on_storage_error = lambda exc, where: errors.append(where)  # type: ignore[method-assign]
    try:
        for i in range(40):
            sched.enqueue_request(Request(f"http://127.0.0.{i + 1}/p"))
        sched._merge_for_idle()

        def full_disk() -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        sched.star.flush = full_disk  # type: ignore[method-assign]
        turns.run()
        assert errors == ["delivering URLseen's results"]
        assert sched._idle_merge_open is None
    finally:
        del sched.star.flush
        sched.close("finished")


def test_the_engine_is_not_polled_every_turn_while_a_merge_is_delivered(tmp_path: Path):
    """Owed results made next_request ask for a wake-up at a gap end already past: an
    immediate call in every turn of the delivery (review, 2026-11-28)."""
    sched, turns, sizes = opened(tmp_path)
    wakes: list[float] = []
    sched.waker.wake_at = wakes.append  # type: ignore[method-assign]
    try:
        for i in range(40):
            sched.enqueue_request(Request(f"http://127.0.0.{i + 1}/p"))
        sched._merge_for_idle()
        assert sched.urlseen.pending_deliveries
        now = sched.clock()
        sched.next_request()  # whatever it hands out, it asks for no wake-up already due
        assert all(when > now for when in wakes)
    finally:
        sched.close("finished")
