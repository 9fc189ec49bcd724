"""URLs parked for a backlog come back when their host can take them, not every interval.

A long-run probe (2026-11-28, 28 minutes of simweb ``--size big``) found the parked set
re-read and parked again every IRL_RAM_BACKLOG_SECONDS: 61 000 URLs parked at minute 27,
re-parked at 63 000 a minute against 7 000-10 000 requests a minute, a cost growing with
the frontier (requests/s fell from 165 to 119). Each parked URL now carries a due time:
its host's and IP's work ahead of it, at tau_h and tau_s.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from scrapy import Request
from scrapy.http import Response

from scrapy_irl.scheduler.beast import Beast
from tests.robots.fakes import FakeClock, FakeWeb
from tests.scheduler.fake_clock import open_on_fake_clock
from tests.scheduler.test_robots_expiry import RULES, done
from tests.scheduler.test_scheduler_lifecycle import scheduler as new_scheduler

ROBOTS = "http://a.test/robots.txt"


@pytest.fixture()
def one_slow_host(tmp_path: Path) -> Any:
    """A scheduler with one host (tau_h 10 s, tau_s 1 s) on a fake clock."""
    clock = FakeClock(1000.0)
    web = FakeWeb({ROBOTS: (200, RULES)})
    sched = new_scheduler(
        ROBOTSTXT_OBEY=True, IRL_HOSTS_DIR=str(tmp_path / "hosts"),
        IRL_HOST_DELAY=10, IRL_HOST_DELAY_MIN=10, IRL_IP_DELAY=1, IRL_IP_DELAY_MIN=1,
        IRL_POLITENESS_MARGIN=0, IRL_IDLE_SAMPLE_INTERVAL=0,
    )  # fmt: skip
    open_on_fake_clock(sched, clock, web.download)
    sched._add_host("a.test", "10.0.0.1", None)
    sched._next_forget = math.inf  # the ticks keep a.test (this fake has no DNS to ask)
    yield sched, clock
    sched.close("finished")


def _crawl(sched: Any, clock: FakeClock, start: float, seconds: int, *, cached: bool = False,
           served: list[str]) -> None:  # fmt: skip
    """Tick and hand out once a second, each page answered at once (from a cache, or
    fetched: then the host's next turn is tau_h later)."""
    for step in range(seconds):
        clock.now = start + step
        sched._on_tick()
        while (request := sched.next_request()) is not None:
            served.append(request.url)
            if cached:
                sched._answered(Response(request.url, flags=["cached"]), request)
                continue
            sched._reached(request)
            sched._downloaded(Response(request.url), request)
            done(sched, request)


def test_a_parked_url_is_read_back_about_once_not_every_interval(one_slow_host):
    sched, clock = one_slow_host
    urls = [f"http://a.test/p{n}" for n in range(300)]
    for url in urls:
        sched.enqueue_request(Request(url, dont_filter=True))
    served: list[str] = []
    _crawl(sched, clock, 1000.0, 900, served=served)
    # One page per tau_h (10 s): the host is never idle for want of a parked URL.
    assert len(served) >= 88, len(served)
    assert len(set(served)) == len(served)
    # RAM holds 60 s of work (6 URLs); the others are parked once each, plus few again.
    # Before, all were parked again every 60 s: 3984 parkings in these 900 s.
    parked = sched.counts["parked_backlog"]
    assert parked < 1.2 * len(urls), parked
    assert sched.counts.get("unparked_early", 0) == 0
    assert sched.beast.parked_size + len(sched.polite) + len(served) == len(urls)


def test_urls_answered_from_a_cache_are_not_held_to_their_booked_times(one_slow_host):
    """Answered from a cache, a host's queue empties faster than its URLs were booked:
    with nothing else to do, the earliest parked ones come back at the next tick."""
    sched, clock = one_slow_host
    for n in range(100):
        sched.enqueue_request(Request(f"http://a.test/p{n}", dont_filter=True))
    served: list[str] = []
    _crawl(sched, clock, 1000.0, 60, cached=True, served=served)
    assert sorted(served) == sorted(f"http://a.test/p{n}" for n in range(100))
    assert sched.counts["unparked_early"] >= 1


def test_parked_buckets_come_back_at_their_start_and_survive_a_restart(tmp_path: Path):
    """Due times are in the scheduler's monotonic clock, meaningless in the next
    process: a restart reads the parked URLs at once (they are parked again if their
    host is still busy), and none is lost."""
    beast = Beast(tmp_path, initial_queues=2, max_queues=8, buffer_bytes=64)
    beast.park(b"early", due=1010.0, now=1000.0)  # a bucket 1 s wide: [1009, 1010)
    beast.park(b"late", due=5000.0, now=1000.0)  # 256 s wide: early by up to that
    beast.park(b"next-unpark")
    assert beast.readable == 0 and beast.parked_size == 3 and len(beast) == 3
    assert beast.release_parked(1005.0) == 0
    assert beast.parked_due == 1009.0
    assert beast.release_parked(1009.0) == 1
    record, token = beast.pop()
    assert record == b"early" and beast.park_slack(token[0]) == 1.0
    beast.done(token)
    assert beast.release_parked(1011.0, at_least=1) == 1  # the next bucket, early
    record, token = beast.pop()
    assert record == b"late" and beast.park_slack(token[0]) == 256.0
    beast.park(b"later", due=9000.0, now=1000.0)
    beast.close()
    again = Beast(tmp_path, initial_queues=2, max_queues=8, buffer_bytes=64)
    # "late" was read but not marked done: owed again; "later" readable at once.
    got = set()
    while (popped := again.pop()) is not None:
        got.add(popped[0])
    assert got == {b"late", b"later"}
    assert again.parked_size == 1  # the next unpark's queue stays parked
    again.close()
