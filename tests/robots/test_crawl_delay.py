"""CrawlDelayMiddleware raises download-slot delays to robots.txt Crawl-delay."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
from scrapy.core.downloader import Slot
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import Request

from scrapy_irl.robots.crawl_delay import CrawlDelayMiddleware
from scrapy_irl.robots.middleware import RobotsCacheMiddleware
from tests.robots.fakes import FakeWeb, fake_crawler, outcome


class Slots:
    def __init__(self, delay: float = 0.0, jitter: float = 0.5) -> None:
        self.slots: dict[str, Slot] = {}
        self.delay, self.jitter = delay, jitter

    def _get_slot(self, request):
        key = request.url.split("/")[2]
        return key, self.slots.setdefault(key, Slot(8, self.delay, self.jitter))


@pytest.fixture
def setup(tmp_path):
    web = FakeWeb(
        {
            "http://a.test/robots.txt": (200, b"User-agent: *\nCrawl-delay: 3\n"),
            "http://b.test/robots.txt": (200, b"User-agent: *\nCrawl-delay: 3600\n"),
            "http://c.test/robots.txt": (200, b"User-agent: *\nDisallow: /x\n"),
        }
    )
    crawler = fake_crawler(web, tmp_path, IRL_CRAWL_DELAY_MAX=30)
    crawler.engine.downloader = Slots(delay=1.0)
    robots = RobotsCacheMiddleware(crawler)
    delays = CrawlDelayMiddleware(crawler)
    yield robots, delays, crawler
    robots._spider_closed()


def through(robots, delays, url):
    assert outcome(robots, url) == "allowed"
    delays.process_request(Request(url))


def test_slot_delay_raised_to_crawl_delay_without_jitter(setup):
    robots, delays, crawler = setup
    through(robots, delays, "http://a.test/1")
    slot = crawler.engine.downloader.slots["a.test"]
    assert slot.delay == 3.0 and slot.jitter == 0.0
    assert min(slot.download_delay() for _ in range(50)) == 3.0


def test_a_crawl_delay_above_the_maximum_refuses_the_request(setup):
    # Capped, its pages went IRL_CRAWL_DELAY_MAX apart: sooner than the origin asked.
    robots, delays, crawler = setup
    with pytest.raises(IgnoreRequest, match="Crawl-delay of 3600 s is above IRL_CRAWL_DELAY_MAX"):
        through(robots, delays, "http://b.test/1")
    assert "b.test" not in crawler.engine.downloader.slots
    assert crawler.stats.get_value("irl_robots/crawl_delay_refused") == 1
    assert crawler.stats.get_value("robotstxt/forbidden") == 1


def test_with_cap_a_huge_crawl_delay_is_capped_and_counted(tmp_path):
    web = FakeWeb({"http://b.test/robots.txt": (200, b"User-agent: *\nCrawl-delay: 3600\n")})
    crawler = fake_crawler(web, tmp_path, IRL_CRAWL_DELAY_MAX=30, IRL_CRAWL_DELAY_OVER_MAX="cap")
    crawler.engine.downloader = Slots(delay=1.0)
    robots, delays = RobotsCacheMiddleware(crawler), CrawlDelayMiddleware(crawler)
    try:
        through(robots, delays, "http://b.test/1")
    finally:
        robots._spider_closed()
    assert crawler.engine.downloader.slots["b.test"].delay == 30.0
    assert crawler.stats.get_value("irl_robots/crawl_delay_capped") == 1


def test_an_unknown_over_max_policy_is_refused_by_name(tmp_path):
    crawler = fake_crawler(FakeWeb(), tmp_path, IRL_CRAWL_DELAY_OVER_MAX="wait")
    with pytest.raises(ValueError, match="IRL_CRAWL_DELAY_OVER_MAX"):
        CrawlDelayMiddleware(crawler)


def test_no_crawl_delay_leaves_slot_alone(setup):
    robots, delays, crawler = setup
    through(robots, delays, "http://c.test/1")
    slot = crawler.engine.downloader.slots.get("c.test")
    assert slot is None or (slot.delay == 1.0 and slot.jitter == 0.5)


def test_never_lowers_a_larger_project_delay(setup, tmp_path):
    robots, delays, crawler = setup
    crawler.engine.downloader = Slots(delay=10.0, jitter=0.0)
    through(robots, delays, "http://a.test/1")
    assert crawler.engine.downloader.slots["a.test"].delay == 10.0


def test_disabled_by_setting(tmp_path):
    crawler = fake_crawler(FakeWeb(), tmp_path, IRL_CRAWL_DELAY_ENABLED=False)
    with pytest.raises(NotConfigured):
        CrawlDelayMiddleware(crawler)


def test_off_quietly_with_the_irl_scheduler(tmp_path, caplog):
    crawler = fake_crawler(FakeWeb(), tmp_path, SCHEDULER="scrapy_irl.scheduler.IrlScheduler")
    with caplog.at_level(logging.INFO), pytest.raises(NotConfigured) as raised:
        CrawlDelayMiddleware(crawler)
    # A bare NotConfigured (no WARNING from Scrapy in the add-on's usual set-up), and why
    # it is off at INFO.
    assert raised.value.args == ()
    assert "the IRL scheduler applies Crawl-delay in its host heap" in caplog.text


def test_without_robots_middleware_it_warns_once(tmp_path, caplog):
    crawler = fake_crawler(FakeWeb(), tmp_path)
    crawler.engine.downloader = SimpleNamespace()
    mw = CrawlDelayMiddleware(crawler)
    mw.process_request(Request("http://a.test/"))
    mw.process_request(Request("http://a.test/"))
    assert caplog.text.count("needs scrapy_irl's RobotsCacheMiddleware") == 1


def test_autothrottle_cannot_lower_the_delay_below_the_crawl_delay(tmp_path):
    """AutoThrottle lowers a slot's delay at each response, before the slot sends its
    next queued request; the delay was raised only when a request entered the slot, so
    with AUTOTHROTTLE_ENABLED a Crawl-delay of 1 s fell to gaps of 3 ms (a probe,
    2026-11-29). The middleware raises it back after AutoThrottle's receiver."""
    from scrapy import signals
    from scrapy.extensions.throttle import AutoThrottle
    from scrapy.http import Response
    from scrapy.signalmanager import SignalManager

    web = FakeWeb({"http://a.test/robots.txt": (200, b"User-agent: *\nCrawl-delay: 1\n")})
    crawler = fake_crawler(web, tmp_path, AUTOTHROTTLE_ENABLED=True, AUTOTHROTTLE_START_DELAY=0.1,
                           DOWNLOAD_DELAY=0)  # fmt: skip
    crawler.signals = SignalManager()
    crawler.signals.send_catch_log_async = lambda **kwargs: _no_receivers()
    crawler.engine.downloader = Slots(delay=0.1)
    crawler.spider = SimpleNamespace(download_delay=0.1)
    throttle = AutoThrottle(crawler)  # an extension: built first, as in a crawl
    throttle._spider_opened(crawler.spider)
    robots, delays = RobotsCacheMiddleware(crawler), CrawlDelayMiddleware(crawler)
    try:
        for n in range(12):
            request = Request(f"http://a.test/{n}", meta={"download_slot": "a.test",
                                                          "download_latency": 0.001})  # fmt: skip
            through(robots, delays, request.url)
            crawler.signals.send_catch_log(signals.response_downloaded, request=request,
                                           response=Response(request.url, request=request),
                                           spider=crawler.spider)  # fmt: skip
            assert crawler.engine.downloader.slots["a.test"].delay == 1.0
    finally:
        robots._spider_closed()
    assert crawler.stats.get_value("irl_robots/crawl_delay_restored") == 12


async def _no_receivers() -> list:
    return []
