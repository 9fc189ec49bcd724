#!/usr/bin/env python3
"""A plain follow-every-link Scrapy spider run against simweb, in its own process.

    python benchmarks/simweb_spider.py --config simweb.json --settings '{"CLOSESPIDER_PAGECOUNT": 100}'

Start URLs are the web's seed list (``Web.seed_urls``). The process installs
``scrapy_irl.simweb.resolver.SimwebResolver`` as TWISTED_DNS_RESOLVER (it is a process
setting), so no name ever reaches system DNS. Prints ``STATS {json}`` at the end.
Independent of ``example_project``; used by ``baseline_stock.py`` and the simweb tests.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import scrapy
from scrapy.crawler import CrawlerProcess
from scrapy.http import HtmlResponse, XmlResponse
from scrapy.linkextractors import LinkExtractor

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scrapy_irl.simweb.model import web_for
from scrapy_irl.simweb.report import load_config


class SimwebSpider(scrapy.Spider):
    """Follows every extracted link, like a naive broad crawler."""

    name = "simweb"

    def __init__(self, start: list[str], **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.start_urls = start
        self.links = LinkExtractor()

    def parse(self, response):
        if not isinstance(response, (HtmlResponse, XmlResponse)):  # JSON, text: no links
            return
        for link in self.links.extract_links(response):
            yield scrapy.Request(link.url)


#: Always set: the harness must not open ports outside the web nor fetch anything else.
FIXED = {
    "TELNETCONSOLE_ENABLED": False,
    "REMOTE_CONTROL_ENABLED": False,
    "TWISTED_DNS_RESOLVER": "scrapy_irl.simweb.resolver.SimwebResolver",
}


def main(argv: list[str] | None = None) -> int:
    from scrapy_irl.simweb.runner import bypass_proxies

    bypass_proxies()  # every site here is on loopback
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--config",
        required=True,
        help="simweb config JSON (python -m scrapy_irl.simweb --config-out)",
    )
    p.add_argument("--settings", default="{}", help="Scrapy settings as JSON")
    p.add_argument(
        "--retried-log",
        help="append the URL of every retry RetryMiddleware schedules to this file "
        "(benchmarks/kill_resume.py tells retries from URLs queued twice with it)",
    )
    p.add_argument(
        "--first-request-log",
        help="append the time (Unix seconds) this crawl hands its first request to the "
        "downloader to this file (benchmarks/kill_resume.py: no request of this crawl "
        "reached the server before it)",
    )
    p.add_argument(
        "--seeds",
        type=int,
        default=10,
        help="how many of the web's seed URLs to start from",
    )
    args = p.parse_args(argv)
    config = load_config(args.config)
    settings = {
        "LOG_LEVEL": "INFO",
        "CLOSESPIDER_TIMEOUT": 600,
        **json.loads(args.settings),
        **FIXED,
    }
    settings["IRL_SIMWEB_CONFIG"] = str(Path(args.config).resolve())
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(SimwebSpider)
    if args.retried_log:
        log_retries(crawler, Path(args.retried_log))
    if args.first_request_log:
        log_first_request(crawler, Path(args.first_request_log))
    process.crawl(crawler, start=web_for(config).seed_urls(args.seeds))
    process.start()
    stats = {
        k: v
        for k, v in crawler.stats.get_stats().items()
        if isinstance(v, (int, float, str))
    }
    peak = peak_rss_bytes()
    if peak is not None:
        stats["process/peak_rss_bytes"] = peak
    print("STATS " + json.dumps(stats, sort_keys=True), flush=True)
    # A crawl that could not start (a store refused: "Refusing to start the crawl") exits
    # non-zero, as ``scrapy crawl`` does; it exited 0 until 2026-11-28.
    return 1 if process.bootstrap_failed else 0


def log_retries(crawler, path: Path) -> None:
    """Append each scheduled retry's URL to ``path``, a line at a time (kept by a kill)."""
    from scrapy import signals

    handle = open(path, "a", buffering=1)  # noqa: SIM115 - open for the process's life

    def scheduled(request, spider) -> None:
        if request.meta.get("retry_times"):
            handle.write(request.url + "\n")

    crawler.signals.connect(scheduled, signal=signals.request_scheduled, weak=False)


def log_first_request(crawler, path: Path) -> None:
    """Append the time of the crawl's first request to its downloader to ``path``."""
    import time

    from scrapy import signals

    def reached(request, spider) -> None:
        crawler.signals.disconnect(reached, signal=signals.request_reached_downloader)
        with open(path, "a") as handle:
            handle.write(f"{time.time():.6f}\n")

    crawler.signals.connect(reached, signal=signals.request_reached_downloader, weak=False)


def peak_rss_bytes() -> int | None:
    """This process's own peak RSS (Linux VmHWM), or None elsewhere.

    Scrapy's ``memusage/max`` comes from ``getrusage`` ``ru_maxrss``, which on Linux keeps
    the RSS the parent had when it forked this process: a benchmark parent that has just
    judged a large crawl log passes its size on. VmHWM belongs to the memory map that
    ``exec`` created, so it counts only this crawl.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


if __name__ == "__main__":
    sys.exit(main())
