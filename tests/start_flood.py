"""A spider whose ``start()`` yields one slow request, then ``n`` more (all duplicates of it),
run in its own process; a 10 ms looping call measures how long the reactor went without a
turn meanwhile (stat ``flood/max_reactor_gap``). Prints the crawl's stats as JSON.

    python -m tests.start_flood '{"url": ..., "n": ..., "settings": {...}}'
"""

from __future__ import annotations

import json
import sys
import time

import scrapy
from twisted.internet import task

from tests.crawl_runner import run_and_print_stats


class FloodSpider(scrapy.Spider):
    name = "flood"

    def __init__(self, url: str, n: int, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.url, self.n = url, n
        self.last = 0.0
        self.gap = 0.0

    async def start(self):
        self.last = time.monotonic()
        self.loop = task.LoopingCall(self.tick)
        self.loop.start(0.01)
        for _ in range(self.n + 1):
            yield scrapy.Request(self.url)

    def tick(self) -> None:
        now = time.monotonic()
        self.gap = max(self.gap, now - self.last)
        self.last = now

    def parse(self, response):
        return None

    def closed(self, reason: str) -> None:
        self.loop.stop()
        self.crawler.stats.set_value("flood/max_reactor_gap", self.gap)


def main() -> None:
    config = json.loads(sys.argv[1])
    run_and_print_stats(FloodSpider, config.get("settings", {}), url=config["url"], n=config["n"])


if __name__ == "__main__":
    main()
