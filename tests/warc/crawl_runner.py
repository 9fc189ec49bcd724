"""Runs one Scrapy crawl of a fixed list of requests in its own process; prints stats as JSON.

    python -m tests.warc.crawl_runner '{"get": [...], "post": [[url, body]], "settings": {...},
                                       "headers": {name: value}}'

The spider follows nothing; ``headers`` are added to every GET request (UTF-8 encoded).
``StopLongDownloads`` stops reading ``/long`` at its first bytes; ``FlakyWarcExtension`` fails every second write, for the test that write errors are counted
without stopping the crawl.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import scrapy
from scrapy.exceptions import StopDownload

from scrapy_irl.warc.extension import WarcExtension
from scrapy_irl.warc.writer import RotatingWarcWriter
from tests.crawl_runner import run_and_print_stats


class ListSpider(scrapy.Spider):
    name = "warc-list"

    def __init__(self, get: list[str], post: list[list[str]], headers: dict[str, str] | None = None,
                 **kwargs: Any) -> None:  # fmt: skip
        super().__init__(**kwargs)
        self.get, self.post, self.extra_headers = get, post, headers or {}

    async def start(self):
        for url in self.get:
            yield scrapy.Request(url, callback=self.parse, errback=self.failed, headers=self.extra_headers)
        for url, body in self.post:
            yield scrapy.Request(url, method="POST", body=body.encode(), callback=self.parse,
                                 headers={"Content-Type": "text/plain"})

    def parse(self, response):
        self.crawler.stats.inc_value("test/parsed")

    def failed(self, failure):
        self.crawler.stats.inc_value("test/failed")


class StopLongDownloads:
    """Stops reading ``/long`` at its first bytes, as ``StopDownload(fail=False)`` does."""

    def __init__(self, crawler: Any) -> None:
        crawler.signals.connect(self.bytes_received, signal=scrapy.signals.bytes_received)

    @classmethod
    def from_crawler(cls, crawler: Any) -> StopLongDownloads:
        return cls(crawler)

    def bytes_received(self, data: bytes, request: Any, spider: Any = None) -> None:
        if request.url.endswith("/long"):
            raise StopDownload(fail=False)


class _FlakyWriter(RotatingWarcWriter):
    calls = 0

    def write(self, *records: Any) -> int:
        self.calls += 1
        if self.calls % 2 == 0:
            raise OSError(28, "No space left on device (simulated)")
        return super().write(*records)


class FlakyWarcExtension(WarcExtension):
    def _make_writer(self, settings: Any) -> RotatingWarcWriter:
        writer = super()._make_writer(settings)
        writer.__class__ = _FlakyWriter
        return writer


def main() -> None:
    config = json.loads(sys.argv[1])
    settings = {"CLOSESPIDER_TIMEOUT": 30, "RETRY_ENABLED": False, "DOWNLOAD_TIMEOUT": 10,
                **config.get("settings", {})}  # fmt: skip
    run_and_print_stats(ListSpider, settings, get=config.get("get", []),
                        post=config.get("post", []), headers=config.get("headers"))  # fmt: skip


if __name__ == "__main__":
    main()
