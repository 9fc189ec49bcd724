"""``CrawlDelayMiddleware``: honour robots.txt Crawl-delay / Request-rate with Scrapy's scheduler.

Scrapy parses Crawl-delay but never acts on it. This middleware runs after
``RobotsCacheMiddleware`` (so the origin's rules are cached) and raises the delay of the
request's download slot to the host's delay. An origin asking for more than
``IRL_CRAWL_DELAY_MAX`` has its requests refused (``IRL_CRAWL_DELAY_OVER_MAX = "skip"``,
the default) or gets the maximum (``"cap"``). It never lowers a slot's delay, and sets
the slot's jitter to 0 so a random jitter cannot undercut the asked delay. AutoThrottle
lowers a slot's delay at each response (``response_downloaded``), before the slot sends
its next queued request: the delay is raised back there, after AutoThrottle's own
receiver (before 2026-11-29 the gaps fell from 1 s to 3 ms at a Crawl-delay of 1 s with
``AUTOTHROTTLE_ENABLED``). The IRL scheduler applies Crawl-delay in its host heap instead.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured

from scrapy_irl import config
from scrapy_irl.robots.middleware import STAT_PREFIX, refuses_long_crawl_delay, robots_for
from scrapy_irl.refusal import refusing_bad_settings

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


class CrawlDelayMiddleware:
    """Raise download-slot delays to robots.txt Crawl-delay (stock scheduler only)."""

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        if not settings.getbool("ROBOTSTXT_OBEY") or not config.getbool(
            settings, "IRL_CRAWL_DELAY_ENABLED"
        ):
            raise NotConfigured
        if config.uses_irl_scheduler(settings):
            # The add-on's usual set-up, so INFO: Scrapy would log a NotConfigured that
            # carries a message as a WARNING in every crawl.
            logger.info("CrawlDelayMiddleware off: the IRL scheduler applies Crawl-delay "
                        "in its host heap")  # fmt: skip
            raise NotConfigured
        self.crawler = crawler
        self.max_delay = config.getfloat(settings, "IRL_CRAWL_DELAY_MAX", minimum=0)
        if self.max_delay < 0:
            raise NotConfigured(
                f"IRL_CRAWL_DELAY_MAX must not be negative, got {self.max_delay}"
            )
        self.skip_over_max = refuses_long_crawl_delay(settings)
        self._warned_missing = False
        # Connected after AutoThrottle's receiver (extensions are built before the
        # downloader's middlewares), so it runs after AutoThrottle lowered the delay.
        crawler.signals.connect(self._response_downloaded, signal=signals.response_downloaded)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        with refusing_bad_settings("CrawlDelayMiddleware", crawler):
            return cls(crawler)

    def process_request(self, request: Request, spider: Spider | None = None) -> None:
        if request.meta.get("dont_obey_robotstxt"):
            return
        robots = robots_for(self.crawler)
        if robots is None:
            if not self._warned_missing:
                self._warned_missing = True
                logger.warning(
                    "CrawlDelayMiddleware needs scrapy_irl's RobotsCacheMiddleware enabled; "
                    "Crawl-delay is not applied",
                    extra={"spider": self.crawler.spider},
                )
            return
        delay = robots.crawl_delay(request)
        if delay is None:
            return
        if delay > self.max_delay:
            if self.skip_over_max:
                robots.refuse_crawl_delay(request, delay)
            self.crawler.stats.inc_value(f"{STAT_PREFIX}/crawl_delay_capped")
            delay = self.max_delay
        self._raise_slot_delay(request, delay)

    def _response_downloaded(self, response: Any, request: Request, spider: Any = None) -> None:
        """Raise the slot's delay back to the Crawl-delay after AutoThrottle (or anything
        else listening to ``response_downloaded``) lowered it, before the slot sends its
        next queued request."""
        if request.meta.get("dont_obey_robotstxt"):
            return
        robots = robots_for(self.crawler)
        delay = robots.crawl_delay(request) if robots is not None else None
        if not delay or delay <= 0:
            return
        self._raise_slot_delay(request, min(delay, self.max_delay), restored=True)

    def _raise_slot_delay(self, request: Request, delay: float, *, restored: bool = False) -> None:
        downloader: Any = getattr(self.crawler.engine, "downloader", None)
        get_slot = getattr(downloader, "_get_slot", None)
        if get_slot is None:  # not Scrapy's Downloader: nothing we know how to tune
            return
        _key, slot = get_slot(request)
        if slot.delay < delay or slot.jitter:
            if slot.delay < delay:
                if restored:  # lowered by AutoThrottle since
                    self.crawler.stats.inc_value("irl_robots/crawl_delay_restored")
                else:
                    self.crawler.stats.inc_value(f"{STAT_PREFIX}/crawl_delay_applied")
            slot.delay = max(slot.delay, delay)
            slot.jitter = 0.0
