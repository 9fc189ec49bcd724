"""The spider of ``test_late_dns``: follows links and reports, per request, what Scrapy's
downloader signals and the errbacks saw, so a test can compare a dead name's path with
stock Scrapy's. A project downloader middleware can set ``meta["proxy"]``, as a
rotating-proxy middleware does.

    python -m tests.hosts.late_dns_spider '{"start": [...], "settings": {...}}'
"""

from __future__ import annotations

import json
import sys
from collections import Counter

import scrapy
from scrapy import signals
from scrapy.linkextractors import LinkExtractor

from tests.crawl_runner import run_and_print_stats


class SetProxyMiddleware:
    """A project's own downloader middleware sending every request through a proxy."""

    def __init__(self, proxy: str) -> None:
        self.proxy = proxy

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler.settings["TEST_PROXY_URL"])

    def process_request(self, request, spider=None):
        request.meta["proxy"] = self.proxy


class LateDnsSpider(scrapy.Spider):
    name = "late_dns"

    def __init__(self, start: list[str], **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.start_urls = start
        self.links = LinkExtractor()
        self.reached: Counter[str] = Counter()
        self.left: Counter[str] = Counter()
        self.errors: list[tuple[str, str]] = []

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider._reached, signal=signals.request_reached_downloader)
        crawler.signals.connect(spider._left, signal=signals.request_left_downloader)
        crawler.signals.connect(spider._closed, signal=signals.spider_closed)
        return spider

    def _reached(self, request, spider=None):
        self.reached[request.url] += 1

    def _left(self, request, spider=None):
        self.left[request.url] += 1

    def _closed(self, spider=None):
        stats = self.crawler.stats
        stats.set_value("test/reached", json.dumps(self.reached))
        stats.set_value("test/left", json.dumps(self.left))
        stats.set_value("test/errors", json.dumps(self.errors))

    async def start(self):
        for url in self.start_urls:
            yield scrapy.Request(url, errback=self.failed)

    def parse(self, response):
        for link in self.links.extract_links(response):
            yield scrapy.Request(link.url, errback=self.failed)

    def failed(self, failure):
        self.errors.append((failure.request.url, type(failure.value).__name__))


def main() -> None:
    config = json.loads(sys.argv[1])
    run_and_print_stats(LateDnsSpider, config["settings"], start=config["start"])


if __name__ == "__main__":
    main()
