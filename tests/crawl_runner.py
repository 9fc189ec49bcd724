"""Runs one Scrapy crawl in its own process (own reactor) and prints its stats as JSON.

    python -m tests.crawl_runner '{"start": [...], "settings": {...}, "again": [...]}'

The spider follows every link; start URLs are filtered like any link; ``again`` URLs are requested once more with
``dont_filter=True`` from the first response; ``unfiltered`` start URLs are requested with ``dont_filter=True``;
``in_ram`` start URLs likewise, with a lambda callback, which cannot be serialized: the IRL scheduler keeps them in RAM.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import scrapy
from scrapy.crawler import CrawlerProcess

import tests.loopback_dns  # noqa: F401 - the crawl asks no DNS server either
from scrapy.linkextractors import LinkExtractor


class FollowSpider(scrapy.Spider):
    name = "follow"

    def __init__(self, start: list[str], again: list[str], unfiltered: list[str] | None = None,
                 in_ram: list[str] | None = None, **kwargs: object) -> None:  # fmt: skip
        super().__init__(**kwargs)
        self.start_urls = start
        self.again = again
        self.unfiltered = unfiltered or []
        self.in_ram = in_ram or []
        self.links = LinkExtractor()

    async def start(self):
        # Unlike Scrapy's default, start requests go through the dupefilter too, so the
        # server-side fetch counts of a test are exact.
        for url in self.start_urls:
            yield scrapy.Request(url)
        for url in self.unfiltered:
            yield scrapy.Request(url, dont_filter=True)
        for url in self.in_ram:
            yield scrapy.Request(url, dont_filter=True, callback=lambda response: None)

    def parse(self, response):
        for url in self.again:
            yield scrapy.Request(url, dont_filter=True, callback=self.parse_leaf)
        self.again = []
        for link in self.links.extract_links(response):
            yield scrapy.Request(link.url)

    def parse_leaf(self, response):
        return None


def run_and_print_stats(spider_cls: type[scrapy.Spider], settings: dict[str, Any],
                        **spider_kwargs: Any) -> None:  # fmt: skip
    """Crawl with ``spider_cls`` in this process; print the numeric and text stats as JSON."""
    process = CrawlerProcess({
        "LOG_LEVEL": "INFO",
        "TELNETCONSOLE_ENABLED": False,
        "REMOTE_CONTROL_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        "CLOSESPIDER_TIMEOUT": 60,
        **settings,
    })  # fmt: skip
    crawler = process.create_crawler(spider_cls)
    process.crawl(crawler, **spider_kwargs)
    process.start()
    stats = {k: v for k, v in crawler.stats.get_stats().items() if isinstance(v, (int, float, str))}
    print("STATS " + json.dumps(stats))


ROOT = Path(__file__).resolve().parents[1]


def crawl_in_subprocess(
    config: dict[str, Any], timeout: float = 120, module: str = "tests.crawl_runner",
    proxy_env: dict[str, str] | None = None,
) -> tuple[dict[str, Any], str]:
    """Run ``module`` (this one, or another spider's that prints its stats the same way)
    on ``config`` in a new process; its stats and its log (stderr). ``proxy_env``: the
    process gets these proxy variables and none of this one's (``{}``: no proxy)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if proxy_env is not None:
        env = {k: v for k, v in env.items() if "proxy" not in k.lower()} | proxy_env
    proc = subprocess.run(
        [sys.executable, "-m", module, json.dumps(config)],
        capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [x for x in proc.stdout.splitlines() if x.startswith("STATS ")][-1]
    return json.loads(line[6:]), proc.stderr


def main() -> None:
    config = json.loads(sys.argv[1])
    run_and_print_stats(FollowSpider, config.get("settings", {}),
                        start=config["start"], again=config.get("again", []),
                        unfiltered=config.get("unfiltered", []),
                        in_ram=config.get("in_ram", []))  # fmt: skip


if __name__ == "__main__":
    main()
