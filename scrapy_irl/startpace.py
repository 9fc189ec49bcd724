"""``StartPacingMiddleware``: lets the reactor run while a long ``start()`` is read.

Scrapy's engine reads ``Spider.start()`` item by item, and while the downloader is full
(``CONCURRENT_REQUESTS`` in flight) it reads the next one at once, without waiting for
anything: a seed list is then consumed to its end in one synchronous run of the reactor
thread. Nothing else runs meanwhile: no response is read, no timer fires, so requests in
flight hit ``DOWNLOAD_TIMEOUT`` (their responses wait unread in the socket buffers) and
the progress line and the scheduler's politeness timers stop. The IRL scheduler makes
this common: URLseen hands out a merged batch at once, filling the downloader, and each
request costs more to enqueue (serialization and DRUM) than in Scrapy's memory queues.
100 000 seeds with ``DOWNLOAD_TIMEOUT = 10`` blocked the reactor for 28 s and failed
every request in flight with ``DownloadTimeoutError`` (5 pages in 30 s, against 6 690
with Scrapy's scheduler).

This spider middleware passes ``start()`` through unchanged, but after
:data:`SLICE` seconds of reading (the enqueueing included) it waits for one turn of the
reactor before reading on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import task

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from typing import Self

#: Longest run, in seconds, of reading ``start()`` without a turn of the reactor.
SLICE = 0.05


class StartPacingMiddleware:
    """Read ``start()`` in slices of at most :data:`SLICE` seconds."""

    def __init__(self, reactorless: bool = False) -> None:
        # Scrapy's reactorless mode runs on asyncio's loop and forbids importing the
        # reactor: a turn of that loop is the pause there.
        self.reactorless = reactorless

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(reactorless=not crawler.settings.getbool("TWISTED_REACTOR_ENABLED", True))

    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        deadline = time.monotonic() + SLICE
        async for item in start:
            yield item
            if time.monotonic() >= deadline:
                await self._one_turn()
                deadline = time.monotonic() + SLICE  # a turn per slice, not per item

    async def _one_turn(self) -> None:
        if self.reactorless:
            await asyncio.sleep(0)
            return
        from twisted.internet import reactor

        await maybe_deferred_to_future(task.deferLater(reactor, 0, lambda: None))
