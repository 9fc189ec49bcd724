"""Runs one Scrapy crawl in its own process (own reactor) and prints its stats as JSON.

    python -m tests.crawl_runner '{"start": [...], "settings": {...}, "again": [...]}'

The spider follows every link; start URLs are filtered like any link; ``again`` URLs are requested once more with
``dont_filter=True`` from the first response.
"""

from __future__ import annotations

import json
import sys

import scrapy
from scrapy.crawler import CrawlerProcess
from scrapy.linkextractors import LinkExtractor


class FollowSpider(scrapy.Spider):
    name = "follow"

    def __init__(self, start: list[str], again: list[str], **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.start_urls = start
        self.again = again
        self.links = LinkExtractor()

    async def start(self):
        # Unlike Scrapy's default, start requests go through the dupefilter too, so the
        # server-side fetch counts of a test are exact.
        for url in self.start_urls:
            yield scrapy.Request(url)

    def parse(self, response):
        for url in self.again:
            yield scrapy.Request(url, dont_filter=True, callback=self.parse_leaf)
        self.again = []
        for link in self.links.extract_links(response):
            yield scrapy.Request(link.url)

    def parse_leaf(self, response):
        return None


def main() -> None:
    config = json.loads(sys.argv[1])
    settings = {
        "LOG_LEVEL": "INFO",
        "TELNETCONSOLE_ENABLED": False,
        "REMOTE_CONTROL_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        "CLOSESPIDER_TIMEOUT": 60,
        **config.get("settings", {}),
    }
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(FollowSpider)
    process.crawl(crawler, start=config["start"], again=config.get("again", []))
    process.start()
    stats = {k: v for k, v in crawler.stats.get_stats().items() if isinstance(v, (int, float, str))}
    print("STATS " + json.dumps(stats))


if __name__ == "__main__":
    main()
