"""A host name with the root's trailing dot (``a.test.``) is its own authority to robots.txt.

URLseen keeps ``http://a.test./p`` apart from ``http://a.test/p`` (docs/scheduler.rst:
many servers answer the two differently), but robots.txt records were keyed by the
dotless name: the dotted authority's pages were judged by the dotless one's rules and its
own ``/robots.txt`` was never asked for (a probe web, 2026-11-28, served a stricter
robots.txt to ``Host: www.good5.zz.``; Scrapy's stock middleware, keyed by the netloc as
written, obeyed it). The two spellings reach one server by one DNS name, so they still
share one politeness key: one host heap entry and one tau_h.
"""

from __future__ import annotations

from pathlib import Path

from scrapy import Request

from scrapy_irl.robots.middleware import REFUSED_META
from scrapy_irl.robots.origin import origin_host, origin_of
from scrapy_irl.scheduler.items import host_key, url_parts
from tests.robots.fakes import FakeClock, FakeWeb
from tests.scheduler.test_park_by_host import _close, _crawl, _open


def test_the_origin_keeps_the_trailing_dot_and_the_host_key_drops_it() -> None:
    dotted = origin_of(url_parts("http://A.Test.:8080/x"))
    assert dotted == "http://a.test.:8080"
    assert origin_of(url_parts("http://a.test:8080/x")) == "http://a.test:8080"
    assert origin_host(dotted) == host_key("a.test.") == "a.test"
    assert origin_of(url_parts("https://a.test.:443/")) == "https://a.test."


def test_a_dotted_host_is_judged_by_its_own_robots_txt(tmp_path: Path) -> None:
    web = FakeWeb({
        "http://a.test/robots.txt": (200, b"User-agent: *\nDisallow: /dotless-only/\n"),
        "http://a.test./robots.txt": (200, b"User-agent: *\nDisallow: /private/\n"),
    })  # fmt: skip
    clock = FakeClock(1000.0)
    sched, robots = _open(tmp_path, clock, tau_h=1, tau_s=0.1, web=web)
    try:
        urls = ["http://a.test/private/1", "http://a.test/dotless-only/1",
                "http://a.test./private/2", "http://a.test./dotless-only/2"]  # fmt: skip
        for url in urls:
            sched.enqueue_request(Request(url, dont_filter=True))
        refused = []
        hand_out = sched.next_request

        def next_request() -> Request | None:
            request = hand_out()
            if request is not None and REFUSED_META in request.meta:
                refused.append(request.url)
            return request

        sched.next_request = next_request
        served: list[str] = []
        _crawl(sched, clock, 1000.0, 20, served)
        assert sorted(web.urls) == ["http://a.test./robots.txt", "http://a.test/robots.txt"]
        assert sorted(refused) == ["http://a.test./private/2", "http://a.test/dotless-only/1"]
        assert len(served) == 4  # (the refused ones for the robots middleware to fail)
        assert "a.test." not in sched.polite.hosts  # one host to the heaps
    finally:
        _close(sched, robots)
