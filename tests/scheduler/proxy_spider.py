"""The spider of ``test_proxy_crawl``: follows every link, optionally with ``meta["proxy"]``."""

from __future__ import annotations

import json
import sys

import scrapy
from scrapy.linkextractors import LinkExtractor

from tests.crawl_runner import run_and_print_stats


class ProxySpider(scrapy.Spider):
    name = "proxied"

    def __init__(self, start: list[str], proxy: str | None, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.start_urls = start
        self.proxy = proxy
        self.links = LinkExtractor()

    def _request(self, url: str) -> scrapy.Request:
        meta = {"proxy": self.proxy} if self.proxy else {}
        return scrapy.Request(url, meta=meta)

    async def start(self):
        for url in self.start_urls:
            yield self._request(url)

    def parse(self, response):
        for link in self.links.extract_links(response):
            yield self._request(link.url)


def main() -> None:
    config = json.loads(sys.argv[1])
    run_and_print_stats(ProxySpider, config["settings"], start=config["start"], proxy=config["proxy"])


if __name__ == "__main__":
    main()
