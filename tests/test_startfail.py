"""What a component took in from_crawler is given back when its crawl never started."""

from __future__ import annotations

import gc
from pathlib import Path
from types import SimpleNamespace

import pytest

from scrapy_irl.dirlock import DirectoryInUseError, DirectoryLock
from scrapy_irl.startfail import failed_to_start, release_failed_starts, release_if_start_fails


@pytest.fixture(autouse=True)
def _no_holdings_of_earlier_tests() -> None:
    """Components of other tests of this worker, collected since, are given back first:
    the counts below are this test's own."""
    gc.collect()
    release_failed_starts()


class Crawler(SimpleNamespace):
    """The three attributes Scrapy's Crawler has (and a weak reference)."""


def crawler(started: bool, crawling: bool, engine: object | None) -> Crawler:
    return Crawler(_started=started, crawling=crawling, _engine=engine)


@pytest.mark.parametrize(
    ("state", "failed"),
    [((True, False, None), True),  # Crawler.crawl gave up before building the engine
     ((True, False, object()), True),  # or in the engine's open, before its slot existed
     ((True, True, None), False),  # still starting
     ((False, False, None), False)],  # never started: built for a test, the shell's
)
def test_only_a_crawl_that_started_and_stopped_counts(state, failed) -> None:
    assert failed_to_start(crawler(*state)) is failed
    assert failed_to_start(SimpleNamespace()) is False  # another Scrapy: not judged


def test_a_crawl_whose_spider_opened_is_left_to_its_own_close() -> None:
    """The review's case: a scheduler refusing a setting fails inside the engine's open
    ("Engine slot not assigned"): no spider_closed, yet the engine exists. Judged by
    whether the spider opened instead; once it has, spider_closed always follows."""
    from scrapy import signals
    from scrapy.signalmanager import SignalManager

    given: list[str] = []
    opened, refused = crawler(True, True, object()), crawler(True, True, object())
    opened.signals, refused.signals = SignalManager(opened), SignalManager(refused)
    closing = release_if_start_fails(opened, lambda: given.append("opened"))
    release_if_start_fails(refused, lambda: given.append("refused"))
    opened.signals.send_catch_log(signals.spider_opened, spider=None)
    opened.crawling = refused.crawling = False  # one finished (closing), one refused
    assert release_failed_starts() == 1 and given == ["refused"]
    closing()  # its spider_closed
    assert given == ["refused", "opened"]


def test_a_failed_start_gives_back_once_and_a_running_crawl_keeps_its_resource() -> None:
    given: list[str] = []
    running, failing = crawler(True, True, None), crawler(True, True, None)
    keep = release_if_start_fails(running, lambda: given.append("running"))
    give = release_if_start_fails(failing, lambda: given.append("failing"))
    failing.crawling = False  # its engine could not be built
    assert release_failed_starts() == 1 and given == ["failing"]
    give()  # the component's own close, if it came, does nothing more
    assert release_failed_starts() == 0 and given == ["failing"]
    running._engine = object()
    keep()  # closed normally: given back by the component itself
    assert given == ["failing", "running"] and keep.done


def test_a_collected_crawler_that_never_closed_gives_back_too() -> None:
    given: list[int] = []
    release_if_start_fails(crawler(True, True, None), lambda: given.append(1))
    gc.collect()
    assert release_failed_starts() == 1 and given == [1]


def test_a_stand_in_crawler_without_weak_references_is_not_judged() -> None:
    given: list[int] = []
    give = release_if_start_fails(SimpleNamespace(_started=True, crawling=False, _engine=None),
                                  lambda: given.append(1))  # fmt: skip
    assert release_failed_starts() == 0 and given == []
    give()
    assert given == [1]


def test_a_lock_held_by_a_failed_start_of_this_process_is_taken_over(tmp_path: Path) -> None:
    first = DirectoryLock(tmp_path, what="WARC output directory").acquire()
    failing = crawler(True, True, None)
    release_if_start_fails(failing, first.release)
    with pytest.raises(DirectoryInUseError):  # its crawl is still starting: in use
        DirectoryLock(tmp_path, what="WARC output directory").acquire()
    failing.crawling = False
    second = DirectoryLock(tmp_path, what="WARC output directory").acquire()
    assert second.held and not first.held
    second.release()


def test_no_reactor_is_imported_to_schedule_the_check() -> None:
    """Importing the reactor installs one; Scrapy's reactorless mode then refuses every
    later crawl of the process (a review, 2026-11-28)."""
    import subprocess
    import sys

    code = ("import sys\nfrom scrapy_irl.startfail import release_if_start_fails\n"
            "class C: pass\nrelease_if_start_fails(C(), lambda: None)\n"
            "assert 'twisted.internet.reactor' not in sys.modules\n")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("running", [True, False])
def test_the_check_runs_at_the_reactors_next_turn_or_its_start(monkeypatch, running) -> None:
    """CrawlerProcess builds its crawls before reactor.run(): the check was only
    scheduled on a running reactor, so a failed start there kept its resources."""
    import sys

    calls: list[tuple] = []
    fake = SimpleNamespace(running=running,
                           callLater=lambda *a: calls.append(("callLater", *a)),
                           callWhenRunning=lambda *a: calls.append(("callWhenRunning", *a)))  # fmt: skip
    monkeypatch.setitem(sys.modules, "twisted.internet.reactor", fake)
    release_if_start_fails(crawler(True, True, None), lambda: None)()
    if running:
        assert calls == [("callLater", 0, release_failed_starts)]
    else:
        assert calls == [("callWhenRunning", fake.callLater, 0, release_failed_starts)]
