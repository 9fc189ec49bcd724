"""Opening and closing the IRL scheduler: one crawl per frontier directory (locked before
anything in it is touched), lost stores refused rather than recreated empty, and a failed
open or a failing store close that still releases everything."""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from unittest import mock

import pytest
from scrapy import Request, Spider
from scrapy.utils.test import get_crawler

from scrapy_irl.dirlock import DirectoryInUseError
from scrapy_irl.dupefilter import DrumDupeFilter
from scrapy_irl.exceptions import FrontierCorruptionError, IrlError
from scrapy_irl.scheduler import IrlScheduler


def scheduler(**settings: object) -> IrlScheduler:
    crawler = get_crawler(Spider, settings_dict=settings)
    crawler.spider = crawler._create_spider("lifecycle")
    return IrlScheduler.from_crawler(crawler)


def opened(**settings: object) -> IrlScheduler:
    sched = scheduler(**settings)
    sched.open(sched.crawler.spider)
    return sched


def snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file() and p.name != "LOCK"}  # fmt: skip


def fill(sched: IrlScheduler, n: int) -> None:
    for i in range(n):
        sched.enqueue_request(Request(f"http://h{i % 7}.example/page{i}"))
    sched.urlseen.merge()  # through URLseen ...
    sched.star.flush()  # ... and STAR into BEAST
    sched.beast.save()


def test_a_second_crawl_on_the_same_jobdir_is_refused_before_touching_it(tmp_path: Path):
    first = opened(JOBDIR=str(tmp_path))
    fill(first, 30)
    queued = len(first.beast)
    assert queued == 30
    before = snapshot(tmp_path / "irl")
    second = scheduler(JOBDIR=str(tmp_path))
    with pytest.raises(DirectoryInUseError, match="in use by another crawl"):
        second.open(second.crawler.spider)
    second.close("shutdown")
    assert snapshot(tmp_path / "irl") == before  # no BEAST file dropped, nothing renamed
    first.close("finished")
    again = opened(JOBDIR=str(tmp_path))
    assert len(again.beast) == queued
    again.close("finished")


@pytest.mark.parametrize("store", ["beast", "urlseen", "star", "parked"])
def test_a_deleted_store_is_refused_not_recreated_empty(tmp_path: Path, store: str):
    import shutil

    sched = opened(JOBDIR=str(tmp_path))
    fill(sched, 20)
    sched.close("shutdown")
    shutil.rmtree(tmp_path / "irl" / store)
    with pytest.raises(FrontierCorruptionError, match="missing, but FRONTIER says"):
        opened(JOBDIR=str(tmp_path))
    assert not (tmp_path / "irl" / store).exists()  # refused before recreating anything


def test_a_version_2_frontier_gets_its_parked_store_and_is_marked_current(tmp_path: Path):
    import json
    import shutil

    sched = opened(JOBDIR=str(tmp_path))
    fill(sched, 20)
    sched.close("shutdown")
    shutil.rmtree(tmp_path / "irl" / "parked")  # as a scrapy-irl before 2026-11-28 left it
    (tmp_path / "irl" / "FRONTIER").write_text('{"format": 2, "stores": []}')
    again = opened(JOBDIR=str(tmp_path))
    assert len(again.beast) == 20 and len(again.parked) == 0
    again.close("finished")
    assert json.loads((tmp_path / "irl" / "FRONTIER").read_text())["format"] == 4
    assert (tmp_path / "irl" / "parked" / "CURRENT").exists()


@pytest.mark.parametrize(
    ("marker", "message"),
    [('{"format": 5, "stores": []}', "newer scrapy-irl"), ("\x00garbage", "unreadable"),
     ('{"format": 1e999}', "unreadable"),
     # read as layout 1 by int() until 2026-11-29 (a probe)
     ('{"format": true}', "unreadable"), ('{"format": "3"}', "unreadable"),
     ('{"format": 0}', "unreadable")],
)
def test_a_frontier_marker_of_a_newer_layout_or_garbage_is_refused(
    tmp_path: Path, marker: str, message: str
):
    # FRONTIER's format was written but never read: a newer layout resumed silently.
    sched = opened(JOBDIR=str(tmp_path))
    fill(sched, 5)
    sched.close("shutdown")
    (tmp_path / "irl" / "FRONTIER").write_text(marker)
    with pytest.raises(FrontierCorruptionError, match=message):
        opened(JOBDIR=str(tmp_path))


def test_a_frontier_of_layout_1_resumes_and_is_marked_current_so_older_versions_refuse_it(
    tmp_path: Path,
):
    """Version 1 would read STAR's tuples with origins as admissions (a correction as an
    empty record): once this version wrote to a frontier, version 1 must refuse it."""
    import json

    from scrapy_irl.scheduler.layout import _check_marker

    sched = opened(JOBDIR=str(tmp_path))
    fill(sched, 10)
    sched.close("shutdown")
    marker = tmp_path / "irl" / "FRONTIER"
    marker.write_text('{"format": 1, "created": 0, "stores": []}')
    again = opened(JOBDIR=str(tmp_path))
    assert len(again.beast) == 10
    assert json.loads(marker.read_text())["format"] == 4
    again.close("finished")
    for older in (1, 3):  # 3 would read a new host's charge as an admission
        with mock.patch("scrapy_irl.scheduler.layout.FORMAT", older):  # an older scrapy-irl
            with pytest.raises(FrontierCorruptionError, match="version 4, written by a newer"):
                _check_marker(marker)


def test_a_frontier_of_an_earlier_version_without_marker_resumes(tmp_path: Path):
    sched = opened(JOBDIR=str(tmp_path))
    fill(sched, 10)
    sched.close("shutdown")
    (tmp_path / "irl" / "FRONTIER").unlink()
    again = opened(JOBDIR=str(tmp_path))
    assert len(again.beast) == 10 and (tmp_path / "irl" / "FRONTIER").exists()
    again.close("finished")


def test_a_dupefilter_only_jobdir_is_refused_with_the_reason(tmp_path: Path):
    crawler = get_crawler(Spider, settings_dict={"JOBDIR": str(tmp_path)})
    dupefilter = DrumDupeFilter.from_crawler(crawler)
    dupefilter.open()
    for i in range(50):
        dupefilter.request_seen(Request(f"http://a.example/{i}"))
    dupefilter.close("finished")
    with pytest.raises(FrontierCorruptionError, match="DRUM dupefilter and Scrapy's scheduler"):
        opened(JOBDIR=str(tmp_path))


def test_a_failed_open_closes_what_it_opened_and_removes_its_temporary_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    # Bad values are refused when the scheduler is created now; skip that check to make
    # BEAST itself refuse one in open(), after the directory exists.
    monkeypatch.setattr("scrapy_irl.scheduler.scheduler.check_settings", lambda settings: None)
    sched = scheduler(IRL_BEAST_QUEUES=1)
    with pytest.raises(ValueError, match="IRL_BEAST_QUEUES"):
        sched.open(sched.crawler.spider)
    sched.close("shutdown")  # Scrapy still closes it: no AttributeError
    assert list(tmp_path.iterdir()) == []


def test_a_failed_open_unlocks_the_jobdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr("scrapy_irl.scheduler.scheduler.check_settings", lambda settings: None)
    sched = scheduler(JOBDIR=str(tmp_path), IRL_URLSEEN_BUCKETS=3)  # refused by URLseen
    with pytest.raises(Exception, match="power of two"):
        sched.open(sched.crawler.spider)
    sched.close("shutdown")
    opened(JOBDIR=str(tmp_path)).close("finished")  # STAR, BEAST and the lock were released


def test_a_failing_store_close_does_not_keep_the_others_open(tmp_path: Path):
    sched = opened(JOBDIR=str(tmp_path))
    fill(sched, 10)

    def full_disk() -> None:
        raise OSError(28, "No space left on device")

    sched.urlseen.close = full_disk  # type: ignore[method-assign]
    with pytest.raises(OSError, match="No space left"):
        sched.close("finished")
    os.close(sched.urlseen._lock_fd)  # what the end of the process does to URLseen's lock
    again = opened(JOBDIR=str(tmp_path))  # STAR and BEAST were closed, the lock released
    assert len(again.beast) == 10
    again.close("finished")


class FakeEngine:
    def __init__(self) -> None:
        self.reasons: list[str] = []

    async def close_spider_async(self, *, reason: str = "cancelled") -> None:
        self.reasons.append(reason)


def test_a_full_disk_closes_the_spider_once_instead_of_failing_every_link(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    import errno

    sched = opened(JOBDIR=str(tmp_path))
    engine = FakeEngine()
    sched.crawler.engine = engine  # type: ignore[assignment]
    calls = []

    def full_disk(*args: object) -> None:
        calls.append(args)
        raise OSError(errno.ENOSPC, "No space left on device")

    sched.urlseen.check_update = full_disk  # type: ignore[method-assign]
    sched.beast.sync = full_disk  # type: ignore[method-assign]
    assert sched.enqueue_request(Request("http://a.example/1")) is False
    assert sched.enqueue_request(Request("http://a.example/2")) is False  # not even tried
    sched._on_tick()  # the periodic write-out fails too: counted, no second close
    assert len(calls) == 2
    assert engine.reasons == ["irl_storage_error"]
    stats = sched.crawler.stats
    assert stats.get_value("irl_sched/storage_errors") == 2
    sched._publish_stats()
    assert stats.get_value("irl_sched/refused_after_storage_error") == 1
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and "cannot be written" in errors[0].getMessage()
    del sched.beast.sync  # the disk has room again by the time the spider closes
    del sched.urlseen.check_update
    sched.close("irl_storage_error")


def test_a_frontier_file_found_damaged_mid_crawl_closes_the_spider(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    # Such an error escaped next_request, every 5 s, and the crawl never closed.
    from scrapy_irl.exceptions import FrontierCorruptionError

    sched = opened(JOBDIR=str(tmp_path))
    engine = FakeEngine()
    sched.crawler.engine = engine  # type: ignore[assignment]

    def damaged(*args: object) -> None:
        raise FrontierCorruptionError("q00000002.beast: bad frame at offset 16")

    sched.beast.pop = damaged  # type: ignore[method-assign]
    fill(sched, 3)
    assert sched.next_request() is None
    assert sched.next_request() is None  # counted, no second close
    assert engine.reasons == ["irl_frontier_corrupt"]
    assert sched.crawler.stats.get_value("irl_sched/frontier_corrupt") == 2
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and "is damaged" in errors[0].getMessage()
    del sched.beast.pop
    sched.close("irl_frontier_corrupt")


def test_a_jobdir_with_requests_left_by_scrapys_scheduler_is_refused(tmp_path: Path):
    from scrapy.core.scheduler import Scheduler

    crawler = get_crawler(Spider, settings_dict={
        "JOBDIR": str(tmp_path),
        "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue",  # needs no engine
    })  # fmt: skip
    crawler.spider = crawler._create_spider("stock")
    stock = Scheduler.from_crawler(crawler)
    stock.open(crawler.spider)
    stock.enqueue_request(Request("http://a.example/left-behind"))
    stock.close("shutdown")
    with pytest.raises(IrlError, match="Scrapy's scheduler left requests queued"):
        opened(JOBDIR=str(tmp_path))
    (tmp_path / "requests.queue" / "active.json").write_text("[]")  # drained: fine
    opened(JOBDIR=str(tmp_path)).close("finished")


def test_settings_that_fight_the_heaps_are_named_in_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    sched = opened(
        JOBDIR=str(tmp_path), DOWNLOAD_DELAY=2.0, ROBOTSTXT_OBEY=True,
        DOWNLOADER_MIDDLEWARES={"scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": 100,
                                "scrapy_irl.robots.middleware.RobotsCacheMiddleware": 101},
    )  # fmt: skip
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    (message,) = [m for m in warnings if "enforces politeness itself" in m]
    assert "DOWNLOAD_DELAY=2.0" in message and "RobotsTxtMiddleware" in message
    sched.close("finished")
    caplog.clear()
    opened(JOBDIR=str(tmp_path / "other"), ROBOTSTXT_OBEY=True,
           ADDONS={"scrapy_irl.Addon": 0}).close("finished")  # fmt: skip
    assert not [r for r in caplog.records if "enforces politeness" in r.getMessage()]


@pytest.mark.parametrize("middlewares", [
    {},  # Scrapy's RobotsTxtMiddleware, from DOWNLOADER_MIDDLEWARES_BASE
    {"scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None},  # none at all
])  # fmt: skip
def test_the_scheduler_alone_warns_that_robots_txt_is_outside_the_heaps(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, middlewares: dict
):
    """SCHEDULER set without the add-on or RobotsCacheMiddleware: Scrapy's middleware
    fetched robots.txt outside the heaps (6 ms before the first page, at tau_h0 0.3 s)
    and Crawl-delay 1 s was not applied (pages 0.6 s apart), without a word."""
    sched = opened(JOBDIR=str(tmp_path), ROBOTSTXT_OBEY=True,
                   DOWNLOADER_MIDDLEWARES=middlewares)  # fmt: skip
    (message,) = [r.getMessage() for r in caplog.records
                  if r.levelname == "WARNING" and "enforces politeness" in r.getMessage()]  # fmt: skip
    assert "ROBOTSTXT_OBEY without scrapy_irl.robots.middleware.RobotsCacheMiddleware" in message
    assert "Crawl-delay is not applied" in message
    assert sched.counts["fighting_settings"] == 1
    sched.close("finished")
    caplog.clear()
    opened(JOBDIR=str(tmp_path / "ours"), ROBOTSTXT_OBEY=True, DOWNLOADER_MIDDLEWARES={
        "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
        "scrapy_irl.robots.middleware.RobotsCacheMiddleware": 100}).close("finished")  # fmt: skip
    opened(JOBDIR=str(tmp_path / "off"), ROBOTSTXT_OBEY=False).close("finished")
    assert not [r for r in caplog.records if "enforces politeness" in r.getMessage()]


def test_a_projects_own_fingerprints_do_not_collide_in_urlseen(tmp_path: Path):
    """A fingerprinter returning the URL: every fingerprint starts ``http://h``, so keyed
    by its first 8 bytes every URL after the first was dropped as a duplicate."""
    from tests.test_dupefilter import UrlFingerprinter

    sched = opened(JOBDIR=str(tmp_path / "job"), IRL_HOSTS_DIR=str(tmp_path / "hosts"),
                   REQUEST_FINGERPRINTER_CLASS=UrlFingerprinter)  # fmt: skip
    try:
        fill(sched, 40)
        assert len(sched.beast) == 40
        fill(sched, 40)  # the same 40 again: all duplicates
        assert len(sched.beast) == 40
    finally:
        sched.close("finished")


def test_settings_the_scheduler_does_not_apply_are_named_in_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    """Request order and the project's own dupefilter are Scrapy's scheduler's settings;
    the IRL scheduler ignored them without a word (a project asking for BFO order with
    DEPTH_PRIORITY = 1 got BEAST order, a custom DUPEFILTER_CLASS was never built)."""
    sched = opened(JOBDIR=str(tmp_path / "a"), IRL_HOSTS_DIR=str(tmp_path / "hosts"),
                   DEPTH_PRIORITY=1, SCHEDULER_PRIORITY_QUEUE="scrapy.pqueues.ScrapyPriorityQueue",
                   SCHEDULER_DISK_QUEUE="scrapy.squeues.PickleFifoDiskQueue",
                   DUPEFILTER_CLASS="myproject.filters.MyDupeFilter")  # fmt: skip
    sched.close("finished")
    (message,) = [r.getMessage() for r in caplog.records if "does not apply" in r.getMessage()]
    for name in ("DEPTH_PRIORITY=1", "SCHEDULER_PRIORITY_QUEUE", "SCHEDULER_DISK_QUEUE",
                 "DUPEFILTER_CLASS=myproject.filters.MyDupeFilter"):  # fmt: skip
        assert name in message
    assert "SCHEDULER_MEMORY_QUEUE" not in message
    caplog.clear()
    for dupefilter in ("scrapy_irl.dupefilter.DrumDupeFilter", DrumDupeFilter,
                       "scrapy.dupefilters.RFPDupeFilter"):  # fmt: skip
        opened(JOBDIR=str(tmp_path / "b"), IRL_HOSTS_DIR=str(tmp_path / "hosts"),
               DUPEFILTER_CLASS=dupefilter).close("finished")  # fmt: skip
    assert not [r for r in caplog.records if "does not apply" in r.getMessage()]


def test_base_dupefilter_turns_filtering_off(tmp_path: Path):
    """What ``scrapy shell`` sets so a page can be fetched twice: every request is kept."""
    sched = opened(JOBDIR=str(tmp_path / "job"), IRL_HOSTS_DIR=str(tmp_path / "hosts"),
                   DUPEFILTER_CLASS="scrapy.dupefilters.BaseDupeFilter")  # fmt: skip
    try:
        fill(sched, 10)
        fill(sched, 10)  # the same 10 again
        assert len(sched.beast) == 20
        assert sched.stats.get_value("dupefilter/filtered") is None
    finally:
        sched.close("finished")


def test_forced_merges_are_spaced_by_their_own_cost_up_to_the_interval(tmp_path: Path):
    """A forced merge (BEAST dry, URLs in a partial batch) waits 4 times the last one's
    duration, at most IRL_IDLE_MERGE_INTERVAL: cheap merges follow each link level at once."""
    sched = opened(IRL_HOSTS_DIR=str(tmp_path / "hosts"), IRL_IDLE_MERGE_INTERVAL=1.0)
    now = [100.0]
    sched.clock = lambda: now[0]
    real_merge = sched.urlseen.merge
    cost = [0.01]

    def timed_merge() -> None:
        real_merge()
        now[0] += cost[0]

    sched.urlseen.merge = timed_merge  # type: ignore[method-assign]
    try:
        sched.enqueue_request(Request("http://a.example/1"))
        assert sched._would_idle(now[0])
        sched._merge_for_idle()
        sched.beast.pop()  # what the hand-out would do: BEAST is dry again
        sched.enqueue_request(Request("http://a.example/2"))
        last = now[0]
        assert not sched._would_idle(last + 0.039)
        assert sched._would_idle(last + 0.041)  # 4 x 0.01 s
        cost[0] = 0.6
        sched._merge_for_idle()
        sched.beast.pop()
        sched.enqueue_request(Request("http://a.example/3"))
        last = now[0]
        assert not sched._would_idle(last + 0.99)  # 4 x 0.6 s is past the 1 s cap
        assert sched._would_idle(last + 1.01)
    finally:
        sched.close("finished")


def test_forced_merges_that_only_park_back_off_until_one_feeds_ram(tmp_path: Path):
    """BEAST looks dry when all it holds is parked (a big site with minutes of work in
    RAM): a forced merge whose URLs are all parked again brought nothing, and the gap to
    the next one doubles; a merge that brings a URL into RAM resets it."""
    sched = opened(IRL_HOSTS_DIR=str(tmp_path / "hosts"), IRL_IDLE_MERGE_INTERVAL=1.0,
                   IRL_RAM_BACKLOG_SECONDS=1.0, IRL_HOST_DELAY=10.0)  # fmt: skip
    now = [100.0]
    sched.clock = lambda: now[0]
    real_merge = sched.urlseen.merge

    def timed_merge() -> None:  # each merge takes 0.01 s: a gap of 4 x 0.01 s
        real_merge()
        now[0] += 0.01

    sched.urlseen.merge = timed_merge  # type: ignore[method-assign]
    big = "http://127.0.0.9"  # an IP literal: in the host table at once, no lookup
    try:
        sched.enqueue_request(Request(f"{big}/0"))
        sched._merge_for_idle()  # its first URL: into RAM, 10 s of work for its host
        assert sched._ram_items() == 1
        gap = 0.04
        for n in (1, 2, 3):
            sched.enqueue_request(Request(f"{big}/{n}"))
            last = now[0]
            assert not sched._would_idle(last + gap - 0.001)
            assert sched._would_idle(last + gap + 0.001)
            now[0] = last + gap + 0.001
            sched._merge_for_idle()  # parked: its host has its backlog in RAM already
            assert sched.counts["idle_merges_fruitless"] == n
            assert sched._ram_items() == 1 and sched.beast.readable == 0
            gap *= 2
        sched.enqueue_request(Request("http://127.0.0.10/new-host"))
        now[0] += gap + 0.001
        sched._merge_for_idle()  # a host with room: into RAM, and the gap is 0.04 s again
        assert sched._ram_items() == 2
        sched.enqueue_request(Request("http://127.0.0.10/more"))
        last = now[0]
        assert not sched._would_idle(last + 0.039)
        assert sched._would_idle(last + 0.041)
    finally:
        sched.close("finished")


def test_a_jobdir_that_is_a_file_is_refused_with_a_clear_error(tmp_path: Path, caplog):
    from scrapy_irl.dirlock import DirectoryUnusableError

    taken = tmp_path / "job"
    taken.write_text("not a directory")
    sched = scheduler(JOBDIR=str(taken))
    with pytest.raises(DirectoryUnusableError, match="cannot use it as a frontier directory"):
        sched.open(sched.crawler.spider)
    sched.close("shutdown")
    assert "Refusing to start the crawl" in caplog.text and "point JOBDIR" in caplog.text
    assert taken.read_text() == "not a directory"


def test_a_projects_own_http_handler_is_named_once_at_open(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    """The add-on keeps a project's http(s) handler; what that handler does with a failed
    request the heaps cannot see, so the scheduler says which one it is (INFO: a choice)."""
    from scrapy_irl.hosts.download import PATH

    custom = "tests.hosts.test_download_handler.STOCK"  # any path: it is not loaded to be run
    with caplog.at_level("INFO", logger="scrapy_irl.scheduler.scheduler"):
        opened(JOBDIR=str(tmp_path), DOWNLOAD_HANDLERS={"http": PATH, "https": custom}).close("finished")
    (message,) = [r for r in caplog.records if "project's handlers" in r.getMessage()]
    assert message.levelname == "INFO" and "https: " + custom in message.getMessage()
    assert "http: " not in message.getMessage()
    caplog.clear()
    with caplog.at_level("INFO", logger="scrapy_irl.scheduler.scheduler"):
        opened(JOBDIR=str(tmp_path / "ours"), DOWNLOAD_HANDLERS={"http": PATH, "https": PATH}).close("finished")
    assert not [r for r in caplog.records if "project's handlers" in r.getMessage()]


@pytest.mark.parametrize("debug", [False, True])
def test_duplicates_are_logged_as_scrapys_scheduler_logs_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, debug: bool
) -> None:
    """Issue 2 asks for DUPEFILTER_DEBUG-style logging: the first duplicate, or each one
    with DUPEFILTER_DEBUG, under Scrapy's ``scrapy.dupefilters`` logger. Until 2026-11-27
    the IRL scheduler only counted them."""
    sched = opened(JOBDIR=str(tmp_path / "job"), IRL_HOSTS_DIR=str(tmp_path / "hosts"),
                   DUPEFILTER_DEBUG=debug)  # fmt: skip
    try:
        with caplog.at_level(logging.DEBUG, logger="scrapy.dupefilters"):
            for url in ("http://a.example/1", "http://a.example/1", "http://a.example/2"):
                sched.enqueue_request(Request(url, headers={"Referer": "http://r.example/"}))
            sched.urlseen.merge()
            sched.enqueue_request(Request("http://a.example/2", callback=lambda r: None))  # in RAM
            sched.urlseen.merge()
        lines = [r.getMessage() for r in caplog.records if r.name == "scrapy.dupefilters"]
        assert sched.stats.get_value("dupefilter/filtered") == 2
    finally:
        sched.close("finished")
    if debug:
        assert lines == [
            "Filtered duplicate request: <GET http://a.example/1> (referer: http://r.example/)",
            "Filtered duplicate request: <GET http://a.example/2> (referer: None)",
        ]
    else:
        assert lines == ["Filtered duplicate request: <GET http://a.example/1> - no more "
                         "duplicates will be shown (see DUPEFILTER_DEBUG to show all duplicates)"]


def test_a_request_offered_after_close_is_refused_quietly(tmp_path: Path, caplog) -> None:
    # The engine can offer one more start request after closing the scheduler: the
    # closed DRUM store raised, and it was reported as a damaged frontier (an ERROR,
    # the spider closed with irl_frontier_corrupt).
    import logging

    sched = opened(JOBDIR=str(tmp_path / "job"), IRL_IDLE_SAMPLE_INTERVAL=0)
    sched.close("finished")
    with caplog.at_level(logging.WARNING):
        assert sched.enqueue_request(Request("http://late.example/")) is False
    assert sched.stats.get_value("irl_sched/refused_after_close") == 1
    assert not caplog.records


@pytest.mark.parametrize("victim", ["beast/STATE", "beast/q*.beast", "urlseen/MANIFEST", "urlseen/LOCK"])
def test_a_frontier_file_the_system_will_not_open_is_refused_by_name(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, victim: str
) -> None:
    """A directory where a frontier file should be (or a file this user may not read):
    the OSError surfaced as a raw traceback under Scrapy's "Scraper close failure", with
    no "Refusing to start" line and the close reason "shutdown" (a fuzz of a JOBDIR,
    2026-11-27, hit it with STATE, a queue, MANIFEST and LOCK)."""
    from scrapy_irl.exceptions import StoreAccessError

    first = opened(JOBDIR=str(tmp_path))
    fill(first, 30)
    first.close("shutdown")
    directory, pattern = (tmp_path / "irl" / victim).parent, Path(victim).name
    matches = sorted(directory.glob(pattern), key=lambda p: -p.stat().st_size)
    target = matches[0]  # a queue with records, not an empty one
    target.unlink()
    target.mkdir()
    again = scheduler(JOBDIR=str(tmp_path))
    with pytest.raises(StoreAccessError, match="cannot be opened, read or written"):
        again.open(again.crawler.spider)
    (message,) = [r.getMessage() for r in caplog.records if "Refusing to start" in r.getMessage()]
    assert str(target) in message and "IsADirectoryError" in message
    target.rmdir()  # nothing else was touched: the other files are as they were


def test_the_idle_host_scan_runs_less_often_as_the_host_table_grows(tmp_path: Path) -> None:
    """forget_idle scans the whole host table: 85 ms a tick at 100 000 hosts in RAM
    (with ready_hosts, measured 2026-11-27). It runs at most every hosts / 20 000 s."""
    from scrapy_irl.scheduler.politeness import FORGET_SCAN_RATE
    from tests.robots.fakes import FakeClock

    from unittest import mock

    sched = opened(JOBDIR=str(tmp_path))
    sched._tick.stop()
    sched.crawler.engine = mock.MagicMock()
    clock = FakeClock()
    sched.clock = clock
    scans = []
    real = sched.polite.forget_idle
    sched.polite.forget_idle = lambda now: scans.append(now) or real(now)
    for tick in range(10):  # a small table: every tick
        clock.now = 1000.0 + tick
        sched._on_tick()
    assert len(scans) == 10
    sched.polite.forget_idle = lambda now: scans.append(now) or 0
    sched.polite.hosts.update({f"h{n}.test": None for n in range(int(FORGET_SCAN_RATE * 4))})
    scans.clear()
    for tick in range(20):  # 80 000 hosts: every 4 s
        clock.now = 2000.0 + tick
        sched._on_tick()
    assert scans == [2000.0, 2004.0, 2008.0, 2012.0, 2016.0]
    sched.polite.hosts.clear()
    sched.close("finished")


def test_a_refused_record_stays_owed_until_next_request_hands_it_out(tmp_path: Path):
    """A URL refused by robots.txt (or of a dead name) waits in RAM for the engine's next
    ``next_request``; a closing spider does not ask for seconds. Its BEAST record was
    released when it was queued, the next save wrote it as finished, and a kill then lost
    it: a kill -9 probe lost 15-31 such URLs in 6 of 8 Ctrl-C-then-kill runs (2026-11-27).
    Now a kill before the hand-out leaves it in the frontier; after the hand-out (and the
    tick that follows the engine's end with it: its errback may yield requests) it is gone."""
    import shutil
    from unittest import mock

    from scrapy_irl.scheduler.codec import record_url
    from scrapy_irl.scheduler.items import Held

    def frontier_urls(directory: Path) -> set[str]:
        resumed = opened(JOBDIR=str(directory))
        urls = set()
        while (got := resumed.beast.pop()) is not None:
            urls.add(record_url(got[0]))
        resumed.close("finished")
        return urls

    sched = opened(JOBDIR=str(tmp_path / "job"))
    fill(sched, 3)
    sched.crawler.engine = mock.MagicMock()
    record, token = sched.beast.pop()
    url = record_url(record)
    sched._hand_out_now(Held(record, token), sched._request_of(record))
    sched.beast.save()
    shutil.copytree(tmp_path / "job", tmp_path / "killed_before")  # a kill -9 here
    assert url in frontier_urls(tmp_path / "killed_before")
    assert sched.next_request().url == url
    sched._on_tick()  # this fake engine's set of requests is unreadable: done with it
    shutil.copytree(tmp_path / "job", tmp_path / "killed_after")
    assert url not in frontier_urls(tmp_path / "killed_after")
    assert len(frontier_urls(tmp_path / "killed_after")) == 2
    sched.close("finished")


def test_a_refused_record_waiting_at_a_graceful_stop_is_saved_once(tmp_path: Path):
    """At close the waiting request goes back to BEAST and its record is released: the
    resumed frontier holds it once, not once more as the still-owed original."""
    from unittest import mock

    from scrapy_irl.scheduler.codec import record_url
    from scrapy_irl.scheduler.items import Held

    sched = opened(JOBDIR=str(tmp_path))
    sched.crawler.engine = mock.MagicMock()
    fill(sched, 3)
    record, token = sched.beast.pop()
    sched._hand_out_now(Held(record, token), sched._request_of(record))
    sched.close("shutdown")
    resumed = opened(JOBDIR=str(tmp_path))
    urls = []
    while (got := resumed.beast.pop()) is not None:
        urls.append(record_url(got[0]))
    resumed.close("finished")
    assert sorted(urls) == sorted(f"http://h{i}.example/page{i}" for i in range(3))


def test_resumed_pending_counts_urls_still_on_their_way_to_beast(tmp_path: Path):
    """irl_sched/resumed_pending (the example spider refuses a lost port only when it is
    not 0) counted only BEAST and URLseen: URLs merged by URLseen but not yet through
    STAR read as an empty frontier (review, 2026-11-27)."""
    import shutil

    sched = opened(JOBDIR=str(tmp_path / "job"))
    for i in range(5):
        sched.enqueue_request(Request(f"http://h{i}.example/page{i}"))
    sched.urlseen.merge()
    sched.star.write_out()
    assert len(sched.beast) == 0 and sched.urlseen.pending_tuples == 0
    shutil.copytree(tmp_path / "job", tmp_path / "killed")  # a kill -9 here
    sched.close("finished")
    resumed = opened(JOBDIR=str(tmp_path / "killed"))
    assert resumed.crawler.stats.get_value("irl_sched/resumed_pending") > 0
    resumed.close("finished")
    fresh = opened(JOBDIR=str(tmp_path / "new"))
    assert fresh.crawler.stats.get_value("irl_sched/resumed_pending") == 0
    fresh.close("finished")


def test_an_invalid_host_request_saved_at_a_graceful_stop_skips_the_heaps_on_resume(tmp_path: Path):
    """``http://user@h1.example/x`` goes to the downloader at once (Twisted refuses the
    name); saved at a graceful stop, it went the heaps' way on resume: a DNS lookup of
    h1.example, robots.txt and a politeness turn, then the same failure (review,
    2026-11-27)."""
    from unittest import mock

    sched = opened(JOBDIR=str(tmp_path))
    sched.crawler.engine = mock.MagicMock()
    sched.enqueue_request(Request("http://user@h1.example/x", dont_filter=True))
    sched.close("shutdown")
    resumed = opened(JOBDIR=str(tmp_path))
    resumed.crawler.engine = mock.MagicMock()
    resumed._fill()
    assert [r.url for r in resumed._direct] == ["http://user@h1.example/x"]
    assert not resumed._dns_wait and not list(resumed.polite.hosts)
    assert resumed.next_request().url == "http://user@h1.example/x"
    resumed.close("finished")


@pytest.mark.parametrize("jobdir", [True, False])
def test_requests_queued_at_close_are_called_saved_only_with_a_jobdir(tmp_path: Path, caplog, jobdir):
    # Without a JOBDIR the frontier is a temporary directory removed at close: "Saved N
    # requests held in RAM back to BEAST" told a user something was kept (a probe).
    from unittest import mock

    from scrapy_irl.scheduler.codec import record_url
    from scrapy_irl.scheduler.items import Held, url_parts

    sched = opened(**({"JOBDIR": str(tmp_path)} if jobdir else {}))
    sched.crawler.engine = mock.MagicMock()
    fill(sched, 3)
    record, token = sched.beast.pop()
    host = url_parts(record_url(record)).hostname
    sched._add_host(host, "127.0.0.9", None)  # as its DNS answer would
    sched._push_or_park(host, Held(record, token))
    with caplog.at_level(logging.INFO):
        sched.close("shutdown")
    saved = "Saved 1 requests held in RAM back to BEAST" in caplog.text
    dropped = "1 requests were still queued at close (no JOBDIR: not kept)" in caplog.text
    assert (saved, dropped) == ((True, False) if jobdir else (False, True)), caplog.text


@pytest.mark.parametrize("damage", ["delete", "empty", "cut"])
def test_a_parked_store_that_lost_its_leveldb_log_is_refused_not_resumed_short(
    tmp_path: Path, damage: str
):
    """A LevelDB log deleted, emptied or cut short is no checksum error: the store opened at
    its last compaction, and the URLs parked since (which BEAST had forgotten) were gone
    without a word (a probe: 1 168 of 3 190 parked URLs). BEAST's STATE now keeps how many
    the store must hold at least, and a store holding fewer is refused."""
    import shutil

    sched = opened(JOBDIR=str(tmp_path / "job"))
    for n in range(20):
        sched.parked.park("127.0.0.5", "127.0.0.5", b"record %d" % n)
    sched.close("shutdown")  # BEAST's last save counts the 20
    for name in ("intact", "damaged"):
        shutil.copytree(tmp_path / "job", tmp_path / name)
    logs = sorted((tmp_path / "damaged" / "irl" / "parked").glob("*.log"))
    assert logs
    for log in logs:
        if damage == "delete":
            log.unlink()
        else:
            os.truncate(log, 0 if damage == "empty" else log.stat().st_size // 2)
    for _attempt in range(2):  # a refused start's close saved BEAST without the floor
        with pytest.raises(FrontierCorruptionError, match="parked store holds .* URLs, but the frontier's last save counted 20"):
            opened(JOBDIR=str(tmp_path / "damaged"))
    intact = opened(JOBDIR=str(tmp_path / "intact"))
    assert len(intact.parked) == 20
    intact.close("shutdown")


def test_len_counts_each_waiting_request_once_at_every_stage(tmp_path: Path):
    # A probe of 2026-11-29: five dont_filter requests counted 10 (each also left a seen
    # mark in URLseen), and URLs between URLseen's merge and BEAST (in STAR's stores)
    # were not counted at all: len 0 while the scheduler had 5 requests pending.
    sched = opened(JOBDIR=str(tmp_path), IRL_DRUM_FLUSH_INTERVAL=1000)
    sched.crawler.engine = mock.MagicMock()
    try:
        for i in range(5):
            sched.enqueue_request(Request(f"http://d{i}.example/p", dont_filter=True))
        assert len(sched) == 5
        for i in range(5):
            sched.enqueue_request(Request(f"http://h{i}.example/page{i}"))
        assert len(sched) == 10
        sched.urlseen.merge()  # the 5 reach STAR ...
        assert sched.star.admits_pending == 5 and len(sched) == 10
        sched.star.flush()  # ... and BEAST
        assert sched.star.admits_pending == 0 and len(sched) == 10 == len(sched.beast)
        # a duplicate counts until URLseen's merge tells it apart, then not
        sched.enqueue_request(Request("http://h0.example/page0"))
        assert len(sched) == 11
        sched.urlseen.merge()
        assert len(sched) == 10
    finally:
        sched.close("shutdown")


def test_len_after_a_restart_counts_what_the_last_run_left_once(tmp_path: Path):
    # Seen-marks and admissions the last run left pending in URLseen and STAR: the marks
    # counted as requests after a restart (len 10 for 5 dont_filter requests), and this
    # run's count of admissions was taken down by the last run's.
    sched = opened(JOBDIR=str(tmp_path), IRL_DRUM_FLUSH_INTERVAL=1000)
    sched.crawler.engine = mock.MagicMock()
    for i in range(5):
        sched.enqueue_request(Request(f"http://d{i}.example/p", dont_filter=True))
    sched.close("shutdown")  # the 5 marks stay pending in URLseen
    sched = opened(JOBDIR=str(tmp_path), IRL_DRUM_FLUSH_INTERVAL=1000)
    sched.crawler.engine = mock.MagicMock()
    try:
        assert sched.urlseen.pending_tuples == 5 and len(sched) == 5 == len(sched.beast)
        for i in range(3):
            sched.enqueue_request(Request(f"http://h{i}.example/page{i}"))
        sched.urlseen.merge()
        assert len(sched) == 8 and sched.star.admits_pending == 3
    finally:
        sched.close("shutdown")  # the 3 admissions stay pending in STAR
    sched = opened(JOBDIR=str(tmp_path), IRL_DRUM_FLUSH_INTERVAL=1000)
    sched.crawler.engine = mock.MagicMock()
    try:
        assert sched.star.admits_pending == 3 and len(sched) == 8
        for i in range(4):
            sched.enqueue_request(Request(f"http://n{i}.example/page{i}"))
        sched.urlseen.merge()
        assert len(sched) == 12
        sched.star.flush()
        assert sched.star.admits_pending == 0 and len(sched) == 12 == len(sched.beast)
    finally:
        sched.close("shutdown")
