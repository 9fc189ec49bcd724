"""A spider that yields exactly the requests a test lists, run in its own process.

    python -m tests.scheduler.listed_requests '{"requests": [...], "settings": {...}}'

Each listed request is a dict: ``url``, and optionally ``dont_filter``, ``meta``,
``headers``, ``in_ram`` (a lambda callback, so the request cannot be written to disk) and
``pause`` (seconds to wait in ``start()`` before yielding it). Responses are not followed.
Every failure reaches the errback, which counts it in ``listed/errback/<exception class>``.
Prints the crawl's stats as JSON (``tests.crawl_runner``).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import scrapy

from tests.crawl_runner import run_and_print_stats


class ListedSpider(scrapy.Spider):
    name = "listed"

    def __init__(self, requests: list[dict[str, Any]], **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.listed = requests

    async def start(self):
        for spec in self.listed:
            if spec.get("pause"):
                await asyncio.sleep(spec["pause"])
            yield scrapy.Request(
                spec["url"],
                dont_filter=spec.get("dont_filter", False),
                meta=spec.get("meta", {}),
                headers=spec.get("headers"),
                callback=(lambda response: None) if spec.get("in_ram") else self.parse,
                errback=self.failed,
            )

    def parse(self, response):
        return None

    def failed(self, failure):
        self.crawler.stats.inc_value(f"listed/errback/{type(failure.value).__name__}")


def main() -> None:
    config = json.loads(sys.argv[1])
    run_and_print_stats(ListedSpider, config.get("settings", {}), requests=config["requests"])


if __name__ == "__main__":
    main()
