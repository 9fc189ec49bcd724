"""A URL the robots.txt check cannot handle costs only itself, not the URLs queued after it.

Found by review (2026-11-27): ``_robots_done`` and ``_resolved`` take every waiting URL
out of the waits first, then check them one by one; an exception in one check lost all
the URLs after it (in no queue, their BEAST records owed for the rest of the run), and
``has_pending_requests()`` could let the crawl close. The trigger found was a request
whose User-Agent header is not UTF-8 (Scrapy's parsers decode it as UTF-8 and raise).
"""

from __future__ import annotations

import logging

from scrapy import Request

from scrapy_irl.robots.middleware import REFUSED_META
from tests.robots.fakes import FakeClock
from tests.scheduler.test_robots_expiry import ROBOTS, done, fake_time, hand_out  # noqa: F401


def _drain(sched, clock: FakeClock, until: float) -> list[Request]:
    """Hand out everything due up to ``until`` (0.5 s steps), each request over at once."""
    got = []
    now = clock.now
    for _ in range(int((until - now) * 2) + 1):
        request = hand_out(sched, clock, now)
        if request is not None:
            got.append(request)
            done(sched, request)
        now += 0.5
    return got


def test_a_user_agent_that_is_not_utf8_is_judged_and_the_urls_after_it_go_on(fake_time):
    sched, robots, web, clock = fake_time
    sched.enqueue_request(Request("http://a.test/private/1", dont_filter=True,
                                  headers={"User-Agent": b"Bot/1.0 (\xe9)"}))  # fmt: skip
    for n in range(3):
        sched.enqueue_request(Request(f"http://a.test/ok{n}", dont_filter=True))
    got = _drain(sched, clock, 1040.0)
    assert [r.url for r in got] == ["http://a.test/private/1", "http://a.test/ok0",
                                    "http://a.test/ok1", "http://a.test/ok2"]  # fmt: skip
    assert got[0].meta[REFUSED_META] == "forbidden"  # Disallow: /private/ for every agent
    assert sched.counts["routing_errors"] == 0
    assert not sched.has_pending_requests()
    assert not sched.beast.front.outstanding


def test_an_error_routing_one_url_drops_only_that_url(fake_time, caplog):
    sched, robots, web, clock = fake_time
    obey = sched._obey

    def failing(cached, item, url, host, **kwargs):
        if url.endswith("/bad"):
            raise RuntimeError("an unforeseen error")
        return obey(cached, item, url, host, **kwargs)

    sched._obey = failing
    for path in ("ok0", "bad", "ok1", "ok2"):  # all wait for robots.txt, then are checked
        sched.enqueue_request(Request(f"http://a.test/{path}", dont_filter=True))
    with caplog.at_level(logging.ERROR):
        got = _drain(sched, clock, 1040.0)
    assert [r.url for r in got] == ["http://a.test/ok0", "http://a.test/ok1", "http://a.test/ok2"]
    assert sched.counts["routing_errors"] == 1
    assert "dropping http://a.test/bad, which it failed to route" in caplog.text
    assert "an unforeseen error" in caplog.text  # with its traceback
    assert not sched.has_pending_requests()
    assert not sched.beast.front.outstanding  # its record is released, not owed for ever


def test_a_queued_request_that_skips_robots_is_not_held_for_an_unreachable_robots_txt(fake_time):
    # It waited through every robots.txt retry (60, 120, 240 s) before it went out.
    sched, robots, web, clock = fake_time
    web.answers[ROBOTS] = (503, b"down")
    sched.enqueue_request(Request("http://a.test/page", dont_filter=True,
                                  meta={"dont_obey_robotstxt": True}))  # fmt: skip
    sched.enqueue_request(Request("http://a.test/other", dont_filter=True))
    got = _drain(sched, clock, 1030.0)
    assert [r.url for r in got] == ["http://a.test/page"]
    assert sched.counts["robots_bypassed_by_meta"] == 1
    assert sched.beast.retrying == 1  # /other waits on disk for the robots.txt retry
