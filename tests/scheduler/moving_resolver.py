"""A ``TWISTED_DNS_RESOLVER`` for crawl tests whose one name moves to another loopback
address mid-crawl, never real DNS.

``moved.test`` resolves to 127.0.0.2 until ``TEST_DNS_MOVE_AFTER`` seconds (a setting)
after the resolver was made, to 127.0.0.3 after; ``fixed.test`` always resolves to
127.0.0.3; ``rr.test`` has both addresses, and each lookup that reaches this resolver
answers the other one (round-robin DNS); every other name fails as NXDOMAIN does. Like Scrapy's own resolver it answers
from ``scrapy.resolver.dnscache`` when the name is there and stores its answers in it,
so the downloader connects where the last lookup that reached it said; with
``DNSCACHE_ENABLED`` off it asks afresh each time (as a resolver without a cache does).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from scrapy.resolver import CachingThreadedResolver, dnscache
from twisted.internet import defer
from twisted.internet.error import DNSLookupError

logger = logging.getLogger(__name__)

OLD, NEW = "127.0.0.2", "127.0.0.3"


class MovingResolver(CachingThreadedResolver):
    def __init__(self, reactor: Any, move_after: float, cache_size: int = 10_000) -> None:
        super().__init__(reactor, cache_size, 5.0)
        self.move_at = time.monotonic() + move_after
        self.rr_answers = 0

    @classmethod
    def from_crawler(cls, crawler: Any, reactor: Any) -> MovingResolver:
        settings = crawler.settings
        return cls(reactor, settings.getfloat("TEST_DNS_MOVE_AFTER", 5.0),
                   settings.getint("DNSCACHE_SIZE") if settings.getbool("DNSCACHE_ENABLED")
                   else 0)  # fmt: skip

    def answer(self, name: str) -> str | None:
        name = name.lower().rstrip(".")
        if name == "moved.test":
            return OLD if time.monotonic() < self.move_at else NEW
        if name == "fixed.test":
            return NEW
        if name == "rr.test":
            self.rr_answers += 1
            return (OLD, NEW)[self.rr_answers % 2]
        return None

    def getHostByName(self, name: str, timeout: Sequence[int] = ()) -> defer.Deferred[str]:
        if name in dnscache:
            return defer.succeed(dnscache[name])
        ip = self.answer(name)
        logger.info("moving-resolver: %s -> %s", name, ip)
        if ip is None:
            return defer.fail(DNSLookupError(f"moving-resolver: {name!r} does not exist"))
        if dnscache.limit:
            dnscache[name] = ip
        return defer.succeed(ip)
