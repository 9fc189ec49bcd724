"""Crawl-delay above IRL_CRAWL_DELAY_MAX and a host's other origins, on a fake clock.

Host ``a.test`` has two origins: ``http://a.test`` asks for Crawl-delay 3600 (above the
maximum of 5 s, so its URLs are refused by default), ``http://a.test:8080`` for none. The
refused origin must not slow the other one, however the host enters the heaps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scrapy import Request

from scrapy_irl.hosts.records import DnsRecord
from scrapy_irl.robots.middleware import REFUSED_META
from tests.robots.fakes import FakeClock, FakeWeb
from tests.scheduler.fake_clock import open_on_fake_clock
from tests.scheduler.test_robots_expiry import _Resolver
from tests.scheduler.test_scheduler_lifecycle import scheduler as new_scheduler

SLOW = "http://a.test"
FINE = "http://a.test:8080"


def _make(tmp_path: Path, **settings: Any) -> tuple[Any, Any, FakeWeb, FakeClock]:
    clock = FakeClock(1000.0)
    web = FakeWeb({f"{SLOW}/robots.txt": (200, b"User-agent: *\nCrawl-delay: 3600\n"),
                   f"{FINE}/robots.txt": (200, b"User-agent: *\nAllow: /\n")})  # fmt: skip
    sched = new_scheduler(**{
        "ROBOTSTXT_OBEY": True, "IRL_HOSTS_DIR": str(tmp_path / "hosts"),
        "IRL_HOST_DELAY": 1, "IRL_HOST_DELAY_MIN": 1, "IRL_IP_DELAY": 0.1,
        "IRL_IP_DELAY_MIN": 0.1, "IRL_POLITENESS_MARGIN": 0, "IRL_IDLE_SAMPLE_INTERVAL": 0,
        "IRL_CRAWL_DELAY_MAX": 5, **settings})  # fmt: skip
    robots = open_on_fake_clock(sched, clock, web.download)
    sched.resolver = _Resolver()
    return sched, robots, web, clock


def _run(sched: Any, clock: FakeClock, start: float, until: float) -> list[tuple[float, str, Any]]:
    """(time, URL, refusal) of each hand-out from ``start`` to ``until``, 0.25 s steps."""
    got = []
    for step in range(int((until - start) * 4) + 1):
        clock.now = start + step * 0.25
        if "a.test" in sched.resolver.pending:
            sched.resolver.pending.pop("a.test").callback(DnsRecord(("10.0.0.1",), 1000.0, 9e9))
        request = sched.next_request()
        if request is not None:
            got.append((clock.now, request.url, request.meta.get(REFUSED_META)))
            sched._left(request)
    return got


def test_a_refused_origins_delay_does_not_slow_the_host_when_it_comes_back(tmp_path):
    # A host re-added (forgotten when idle, a resumed crawl, a warm robots.txt store)
    # took the Crawl-delay of its first URL's cached robots.txt, refused origin or not:
    # tau_h became the maximum (5 s) for the fine origin's pages.
    sched, robots, web, clock = _make(tmp_path)
    try:
        sched.enqueue_request(Request(f"{SLOW}/s1", dont_filter=True))
        sched.enqueue_request(Request(f"{FINE}/f1", dont_filter=True))
        _run(sched, clock, 1000.0, 1010.0)
        assert sched.polite.forget_idle(1100.0) == 1
        sched.enqueue_request(Request(f"{SLOW}/s2", dont_filter=True))
        for n in range(3):
            sched.enqueue_request(Request(f"{FINE}/g{n}", dont_filter=True))
        got = _run(sched, clock, 1100.0, 1130.0)
        assert (f"{SLOW}/s2" in [url for _, url, why in got if why == "crawl_delay"])
        pages = [when for when, url, _ in got if "/g" in url]
        assert len(pages) == 3
        assert max(b - a for a, b in zip(pages, pages[1:])) < 2  # tau_h 1 s, not 5 s
        assert sched.polite.hosts["a.test"].delay == 1.0
    finally:
        sched.close("finished")
        robots._spider_closed()


def test_a_crawl_delay_learned_after_the_pld_left_the_cache_keeps_its_budget(tmp_path):
    sched, robots, web, clock = _make(tmp_path, IRL_HOST_DELAY=10, IRL_STAR_CACHE_ENTRIES=1,
                                      IRL_CRAWL_DELAY_MAX=60)  # fmt: skip
    try:
        web.answers[f"{SLOW}/robots.txt"] = (200, b"User-agent: *\nAllow: /\n")
        web.answers[f"{FINE}/robots.txt"] = (200, b"User-agent: *\nCrawl-delay: 2\n")
        sched.star._remember("a.test", 5000, None)  # a well-linked PLD
        sched.enqueue_request(Request(f"{SLOW}/p0", dont_filter=True))
        _run(sched, clock, 1000.0, 1003.0)
        host = sched.polite.hosts["a.test"]
        budget = host.budget
        assert budget > 10 and host.delay == 1.0
        sched.star._remember("other.test", 1, None)  # a cache of one: a.test evicted
        sched.enqueue_request(Request(f"{FINE}/q0", dont_filter=True))
        _run(sched, clock, 1003.25, 1006.0)
        assert host.crawl_delay == 2.0
        assert host.budget == budget and host.delay == 2.0  # not B_0's 10 s
    finally:
        sched.close("finished")
        robots._spider_closed()


def test_with_cap_each_entry_of_a_host_counts_its_capped_crawl_delay(tmp_path):
    sched, robots, web, clock = _make(tmp_path, IRL_CRAWL_DELAY_OVER_MAX="cap")
    try:
        sched.enqueue_request(Request(f"{SLOW}/s1", dont_filter=True))
        _run(sched, clock, 1000.0, 1010.0)
        assert sched.counts["crawl_delay_capped"] == 1
        assert sched.polite.forget_idle(1100.0) == 1
        for n in range(2):
            sched.enqueue_request(Request(f"{SLOW}/s{n + 2}", dont_filter=True))
        got = _run(sched, clock, 1100.0, 1120.0)
        assert [url for _, url, _ in got] == [f"{SLOW}/s2", f"{SLOW}/s3"]
        assert got[1][0] - got[0][0] >= 5.0
        assert sched.counts["crawl_delay_capped"] == 2
    finally:
        sched.close("finished")
        robots._spider_closed()


def test_a_refused_origin_is_named_once_at_info(tmp_path, caplog):
    # each refusal is a DEBUG line only: a crawl of one such site fetched nothing, and a
    # log at INFO said nothing why (a user probe)
    sched, robots, web, clock = _make(tmp_path)
    try:
        for n in range(3):
            sched.enqueue_request(Request(f"{SLOW}/s{n}", dont_filter=True))
        with caplog.at_level("INFO", logger="scrapy_irl"):
            got = _run(sched, clock, 1000.0, 1010.0)
        assert [why for _, url, why in got if "/s" in url] == ["crawl_delay"] * 3
        told = [r.getMessage() for r in caplog.records if "IRL_CRAWL_DELAY_MAX" in r.getMessage()]
        assert told == [f"{SLOW} asks for a Crawl-delay of 3600 s in its robots.txt, above "
                        "IRL_CRAWL_DELAY_MAX (5 s): its pages are refused "
                        "(IRL_CRAWL_DELAY_OVER_MAX = 'cap' would crawl them at the maximum)"]
        assert all(r.levelname == "INFO" for r in caplog.records if r.getMessage() in told)
        # the line's own look at the cached robots.txt is no cache hit or miss
        events: list[str] = []
        sched.robots.cache._event = events.append
        sched._told_slow_origins.clear()
        sched._tell_slow_origin(f"{SLOW}/s9")
        assert events == [] and sched._told_slow_origins == {SLOW}
    finally:
        sched.close("finished")
        robots._spider_closed()


def test_once_per_key_lines_stop_after_the_first_few_and_flag_the_last():
    from scrapy_irl.scheduler.robots_gate import EARLIER_FAILURES_TOLD, _first_few

    told: set[str] = set()
    verdicts = [_first_few(told, f"o{n}") for n in range(EARLIER_FAILURES_TOLD + 3)]
    assert verdicts == [False] * (EARLIER_FAILURES_TOLD - 1) + [True] + [None] * 3
    assert _first_few(told, "o0") is None and len(told) == EARLIER_FAILURES_TOLD
