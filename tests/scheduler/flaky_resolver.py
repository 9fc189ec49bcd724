"""A ``TWISTED_DNS_RESOLVER`` for crawl tests whose names fail on purpose, never real DNS.

``*.flaky.test`` resolves to 127.0.0.1 from its second lookup on (the first fails as a
resolver hiccup would); ``*.hiccup.test`` fails its second lookup only; ``*.steady.test`` (with or without the root's trailing dot)
always resolves to 127.0.0.1; ``*.dead.test`` and every other name fail, as NXDOMAIN does. The
lookups are logged (``flaky-resolver: <name> -> <answer>``) so a test can count them.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from typing import Any, ClassVar

from scrapy.resolver import CachingThreadedResolver, dnscache
from twisted.internet import defer
from twisted.internet.error import DNSLookupError

logger = logging.getLogger(__name__)


class FlakyResolver(CachingThreadedResolver):
    lookups: ClassVar[Counter[str]] = Counter()  # per process: one crawl per process

    @classmethod
    def from_crawler(cls, crawler: Any, reactor: Any) -> FlakyResolver:
        return cls(reactor, 0, 5.0)

    def getHostByName(
        self, name: str, timeout: Sequence[int] = ()
    ) -> defer.Deferred[str]:
        self.lookups[name] += 1
        if name.lower().rstrip(".").endswith(".steady.test"):
            return defer.succeed("127.0.0.1")
        if name.endswith(".hiccup.test") and self.lookups[name] != 2:
            logger.info("flaky-resolver: %s -> 127.0.0.1", name)
            return defer.succeed("127.0.0.1")
        if name.endswith(".flaky.test") and self.lookups[name] > 1:
            logger.info("flaky-resolver: %s -> 127.0.0.1", name)
            dnscache[name] = "127.0.0.1"
            return defer.succeed("127.0.0.1")
        logger.info("flaky-resolver: %s -> failure", name)
        return defer.fail(DNSLookupError(f"flaky-resolver: {name!r} fails on purpose"))
