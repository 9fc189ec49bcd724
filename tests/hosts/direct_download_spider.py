"""A spider that fetches pages with ``engine.download_async``, as FilesPipeline and
ImagesPipeline do: those requests never pass through the scheduler's heaps.

    python -m tests.hosts.direct_download_spider '{"start": URL, "direct": [URL...], "settings": {...}}'
"""

from __future__ import annotations

import asyncio
import json
import sys

import scrapy

import tests.loopback_dns  # noqa: F401 - the crawl asks no DNS server either
from tests.crawl_runner import run_and_print_stats


class DirectDownloadSpider(scrapy.Spider):
    name = "direct"

    def __init__(self, start: str, direct: list[str], **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.start_urls = [start]
        self.direct = direct

    async def parse(self, response):
        engine = self.crawler.engine
        answers = await asyncio.gather(*(engine.download_async(scrapy.Request(url))
                                         for url in self.direct))  # fmt: skip
        self.crawler.stats.set_value("direct/answered", sum(a.status == 200 for a in answers))
        return
        yield  # an async generator callback, as Scrapy expects of one that awaits


def main() -> None:
    config = json.loads(sys.argv[1])
    run_and_print_stats(DirectDownloadSpider, config.get("settings", {}),
                        start=config["start"], direct=config["direct"])  # fmt: skip


if __name__ == "__main__":
    main()
