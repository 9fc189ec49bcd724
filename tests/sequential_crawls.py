"""Runs N crawls one after another in one process (AsyncCrawlerRunner) and prints how
many Crawler objects are still alive after a garbage collection.

    python -m tests.sequential_crawls '{"crawls": 3, "settings": {...}}'

A service that runs crawls in a loop needs each finished one freed; the test compares
the add-on with stock Scrapy, which leaves none.
"""

from __future__ import annotations

import gc
import json
import sys

from scrapy.utils.reactor import install_reactor

install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")

import tests.loopback_dns  # noqa: E402,F401 - no DNS server is asked
from scrapy.crawler import AsyncCrawlerRunner, Crawler  # noqa: E402
from scrapy.utils.defer import deferred_from_coro  # noqa: E402
from twisted.internet import reactor  # noqa: E402

from tests.crawl_runner import FollowSpider  # noqa: E402
from tests.loopback_site import loopback_site  # noqa: E402


def main() -> None:
    config = json.loads(sys.argv[1])
    outcome: list[str] = []
    with loopback_site(size=8) as site:
        runner = AsyncCrawlerRunner({"TELNETCONSOLE_ENABLED": False, "LOG_LEVEL": "WARNING",
                                     "CLOSESPIDER_TIMEOUT": 30, **config["settings"]})  # fmt: skip

        async def crawl_all() -> None:
            for _ in range(config["crawls"]):
                await runner.crawl(FollowSpider, start=[f"{site.base_url}/page/1"], again=[])
            gc.collect()
            outcome.append(f"LIVE {sum(isinstance(o, Crawler) for o in gc.get_objects())}")

        def run() -> None:
            done = deferred_from_coro(crawl_all())
            done.addErrback(lambda failure: outcome.append("FAILED " + failure.getTraceback()))
            done.addBoth(lambda _: reactor.stop())

        reactor.callWhenRunning(run)
        reactor.run()
    print("\n".join(outcome))


if __name__ == "__main__":
    main()
