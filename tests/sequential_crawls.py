"""Runs crawls one after another in one process (AsyncCrawlerRunner) and prints, as JSON,
how each ended, how many Crawler objects are still alive after a garbage collection, and
which host stores the process still holds.

    python -m tests.sequential_crawls '{"runs": [{...}, {...}], "settings": {...}}'

Each run's settings are the common ones updated with its own. A service that runs crawls
in a loop needs each finished one freed, and a crawl that failed to start must give back
what its components took (locks, the host store), or the next one is refused.
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
from typing import Any

from scrapy.utils.reactor import install_reactor

install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")

import tests.loopback_dns  # noqa: E402,F401 - no DNS server is asked
from scrapy.crawler import AsyncCrawlerRunner, Crawler  # noqa: E402
from scrapy.utils.defer import deferred_from_coro  # noqa: E402
from twisted.internet import reactor  # noqa: E402

from scrapy_irl.hosts.store import HostStore  # noqa: E402
from tests.crawl_runner import FollowSpider  # noqa: E402
from tests.loopback_site import loopback_site  # noqa: E402


class FailingPipeline:
    """An item pipeline whose construction fails: the crawl stops before its engine exists."""

    @classmethod
    def from_crawler(cls, crawler: Any) -> FailingPipeline:
        raise ConnectionError("the database is down")


def main() -> None:
    config = json.loads(sys.argv[1])
    report: dict[str, Any] = {"runs": []}
    with loopback_site(size=8) as site:
        common = {"TELNETCONSOLE_ENABLED": False, "LOG_LEVEL": "WARNING",
                  "CLOSESPIDER_TIMEOUT": 30, **config["settings"]}  # fmt: skip

        async def crawl_all() -> None:
            for own in config["runs"]:
                runner = AsyncCrawlerRunner({**common, **own})
                crawler = runner.create_crawler(FollowSpider)
                try:
                    await runner.crawl(crawler, start=[f"{site.base_url}/page/1"], again=[])
                    report["runs"].append(crawler.stats.get_value("finish_reason"))
                except Exception as exc:  # noqa: BLE001 - reported, the next run goes on
                    report["runs"].append(type(exc).__name__)
                del crawler, runner
            await asyncio.sleep(0.1)  # a reactor turn: a failed start is given back then
            gc.collect()
            report["live"] = sum(isinstance(o, Crawler) for o in gc.get_objects())
            report["host_stores_held"] = {k: refs for k, (_, refs) in HostStore._shared.items()}

        def run() -> None:
            done = deferred_from_coro(crawl_all())
            done.addErrback(lambda failure: report.update(failed=failure.getTraceback()))
            done.addBoth(lambda _: reactor.callLater(0.2, reactor.stop))

        reactor.callWhenRunning(run)
        reactor.run()
    print("REPORT " + json.dumps(report))


if __name__ == "__main__":
    main()
