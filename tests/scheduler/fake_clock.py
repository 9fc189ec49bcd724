"""A scheduler wired to a fake clock, for tests that drive ``next_request`` by hand."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from unittest import mock

from scrapy_irl.robots.middleware import RobotsCacheMiddleware
from scrapy_irl.scheduler import IrlScheduler
from scrapy_irl.scheduler.waker import EngineWaker
from tests.robots.fakes import FakeClock


def open_on_fake_clock(sched: IrlScheduler, clock: FakeClock,
                       download: Callable[[Any], Awaitable[Any]]) -> RobotsCacheMiddleware:  # fmt: skip
    """Open ``sched`` with its robots middleware on ``clock``; the engine's downloads go
    to ``download``; nothing is left scheduled on the reactor (no tick, no wake-up).
    Returns the middleware (close it with ``_spider_closed`` after the scheduler)."""
    sched.crawler.engine = mock.MagicMock()
    sched.crawler.engine.download_async = mock.AsyncMock(side_effect=download)
    sched.crawler.signals.send_catch_log_async = mock.AsyncMock(return_value=[])
    robots = RobotsCacheMiddleware(sched.crawler, clock=clock)
    sched.open(sched.crawler.spider)
    sched.clock = clock
    sched._tick.stop()
    sched.waker = EngineWaker(sched._wake_engine, lambda *args: mock.MagicMock(), clock)
    return robots
