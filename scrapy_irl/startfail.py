"""Give back what a component took in ``from_crawler`` when its crawl never started.

Scrapy sends ``spider_closed`` only to a crawl whose engine was built. When building it
fails (a pipeline's ``from_crawler`` raising, one of our middlewares refusing a damaged
store), the components built before it never hear of it: the WARC directory stayed
locked and the host store open until the process exited, so a retry in the same process
was refused ("in use by another crawl") and no other process could open the store (a
probe, 2026-11-28). A component registers its release here. It runs once the crawl is
seen to have stopped before its spider opened (from then on Scrapy sends
``spider_closed``): at the reactor's next turn, and at once when this process finds
such a resource in use (:func:`release_failed_starts`).
"""

from __future__ import annotations

import logging
import sys
import weakref
from collections.abc import Callable
from typing import Any

from scrapy import signals as scrapy_signals

logger = logging.getLogger(__name__)


class GiveBack:
    """``release`` run at most once, by whichever comes first: the component's close or
    the failed start. It must not hold the crawler or the component: it outlives both
    when they are collected without a close, and still gives the resource back."""

    def __init__(self, release: Callable[[], None]) -> None:
        self._release: Callable[[], None] | None = release

    @property
    def done(self) -> bool:
        return self._release is None

    def __call__(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()


class _Holding:
    """One component's resource, waiting for its crawl to start or to fail."""

    def __init__(self, crawler: Any, give_back: GiveBack) -> None:
        self.crawler = weakref.ref(crawler)
        self.give_back = give_back
        #: The spider opened: Scrapy sends spider_closed from then on, the component's
        #: own close gives the resource back.
        self.opened = False
        signals = getattr(crawler, "signals", None)
        if signals is not None:  # held weakly by the dispatcher, as long as we are listed
            signals.connect(self.spider_opened, signal=scrapy_signals.spider_opened)

    def spider_opened(self, *args: Any, **kwargs: Any) -> None:
        self.opened = True


_holdings: list[_Holding] = []


def release_if_start_fails(crawler: Any, release: Callable[[], None]) -> GiveBack:
    """``release`` wrapped to run once: by :func:`release_failed_starts` if ``crawler``
    stops before its spider opens, else when the component calls it at its close."""
    _holdings[:] = [h for h in _holdings if not h.give_back.done]
    give_back = GiveBack(release)
    try:
        _holdings.append(_Holding(crawler, give_back))
    except TypeError:  # a stand-in crawler that cannot be weakly referenced: not judged
        return give_back
    _judge_at_next_turn()
    return give_back


def _judge_at_next_turn() -> None:
    """:func:`release_failed_starts` once the reactor turns: at once if it runs (the
    crawl's start goes on until its first wait, and is judged after it), else when it
    starts (``CrawlerProcess`` builds every crawl before ``reactor.run()``). Only a
    reactor already imported is used: importing it installs one, and Scrapy's
    reactorless mode (``TWISTED_REACTOR_ENABLED = False``) refuses to run with one."""
    reactor = sys.modules.get("twisted.internet.reactor")
    if reactor is None:  # no reactor: the in-use checks still give back
        return
    try:
        if reactor.running:
            reactor.callLater(0, release_failed_starts)
        else:
            reactor.callWhenRunning(reactor.callLater, 0, release_failed_starts)
    except Exception:  # noqa: BLE001 - a reactor that cannot schedule: in-use checks only
        logger.debug("cannot schedule the check of the crawl's start", exc_info=True)


def release_failed_starts() -> int:
    """Give back the resources of every crawl that stopped before its spider opened, or
    that was garbage-collected without closing; returns how many were given back."""
    released = 0
    for holding in list(_holdings):
        if holding.give_back.done:
            continue
        crawler = holding.crawler()
        if crawler is not None and (holding.opened or not failed_to_start(crawler)):
            continue
        try:
            holding.give_back()
        except Exception:  # noqa: BLE001 - one failure must not keep the others held
            logger.warning("Could not give back a resource of a crawl that did not start",
                           exc_info=True)  # fmt: skip
        released += 1
    _holdings[:] = [h for h in _holdings if not h.give_back.done]
    return released


def failed_to_start(crawler: Any) -> bool:
    """Whether ``crawler`` started to crawl and stopped (Scrapy's ``Crawler.crawl`` sets
    ``crawling`` back to False when starting fails); the caller checks that its spider
    never opened. Scrapy sends no ``spider_closed`` when building the engine fails, nor
    when the engine's open fails before it has a slot (a scheduler refusing a setting:
    "Engine slot not assigned"). A crawler that never started (built for a test, the
    shell's, or not yet crawling) is not judged."""
    started = getattr(crawler, "_started", False) is True
    return started and getattr(crawler, "crawling", True) is False
