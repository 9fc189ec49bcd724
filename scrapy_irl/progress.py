"""``IrlProgress``: a LogStats-style progress line for broad crawls, and a terminal bar.

Scrapy's LogStats says pages and items per minute. A broad crawl also needs to see its
frontier: URLs waiting for URLseen, BEAST's queues (j, Q_F), requests in RAM, hosts waiting
for DNS or robots.txt, budget deferrals (URLs placed in Q_F), URLs parked because their host
or IP has enough work in RAM or waiting on disk for a DNS or robots.txt retry, and
politeness waits. Every
``IRL_PROGRESS_INTERVAL`` seconds one INFO line gives them; when stderr is a terminal a
one-line bar (pages, pages/s, frontier) is redrawn in place every second as well.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

from scrapy import signals
from scrapy.exceptions import NotConfigured
from twisted.internet import task

from scrapy_irl import config
from scrapy_irl.refusal import refusing_bad_settings

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Spider
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


def frontier_summary(stats: dict[str, Any]) -> str:
    """The frontier part of the line, from the scheduler's ``irl_sched/*`` stats."""
    g = stats.get
    if g("irl_sched/beast/j") is None:
        return "frontier: (Scrapy scheduler)"
    # parked now: the parked store's URLs not taken back, and any BEAST still holds (a
    # frontier written before 2026-11-28)
    parked = (g("irl_sched/parked/stored", 0) - g("irl_sched/parked/out", 0)
              + g("irl_sched/beast/parked", 0))  # fmt: skip
    return (
        f"frontier: urlseen {g('irl_sched/urlseen_pending', 0)}, BEAST {g('irl_sched/beast/queued', 0)} "
        f"(j={g('irl_sched/beast/j', 0)}, Q_F {g('irl_sched/beast/qf', 0)}, parked {parked}, "
        f"waiting for a retry {g('irl_sched/beast/retrying', 0)}), "
        f"RAM {g('irl_sched/ram_requests', 0)} "
        f"on {g('irl_sched/hosts_in_ram', 0)} hosts; deferred by budget {g('irl_sched/beast/placed_in_qf', 0)}; "
        f"waiting DNS {g('irl_sched/dns_waiting_hosts', 0)} hosts, robots.txt "
        f"{g('irl_sched/robots_waiting_origins', 0)} origins"
    )


class IrlProgress:
    """Periodic progress line (and a terminal bar) for scrapy-irl crawls."""

    def __init__(
        self, crawler: Crawler, interval: float, bar: bool, stream: TextIO = sys.stderr
    ) -> None:
        self.crawler = crawler
        self.interval = interval
        self.bar = bar
        self.stream = stream
        self._line_task: task.LoopingCall | None = None
        self._bar_task: task.LoopingCall | None = None
        self._started = time.monotonic()
        self._last_pages = 0
        self._last_time = self._started
        self._bar_drawn = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        with refusing_bad_settings("IrlProgress", crawler):
            return cls._configured(crawler)

    @classmethod
    def _configured(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        if not config.getbool(settings, "IRL_PROGRESS_ENABLED"):
            raise NotConfigured
        config.require_reactor(settings, "scrapy_irl.progress.IrlProgress")
        interval = config.getfloat(settings, "IRL_PROGRESS_INTERVAL", minimum=0)
        if interval == 0:
            raise NotConfigured("IRL_PROGRESS_INTERVAL = 0: no progress lines")
        # Priority 0: the add-on's copy of the default (scrapy_irl.addon), not a choice.
        if settings.getfloat("LOGSTATS_INTERVAL", 60.0) == 0 and not settings.getpriority(
            "IRL_PROGRESS_INTERVAL"
        ):
            # Scrapy's own periodic line is off: what ``scrapy shell`` sets, so that its
            # console is not written over (our bar was redrawn under the prompt every
            # second, our line logged every 10 s). An IRL_PROGRESS_INTERVAL of the
            # project's own still turns ours on. No message: Scrapy would log it as a
            # warning, into the console it is meant to keep clean.
            raise NotConfigured
        # Not with LOG_ENABLED = False either: the commands that set it (``scrapy check``)
        # write their own report to stderr, and the bar was drawn in the middle of it.
        bar = (config.getbool(settings, "IRL_PROGRESS_BAR") and settings.getbool("LOG_ENABLED", True)
               and sys.stderr.isatty())  # fmt: skip
        ext = cls(crawler, interval, bar)
        crawler.signals.connect(ext.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        return ext

    def spider_opened(self, spider: Spider | None = None) -> None:
        self._started = self._last_time = time.monotonic()
        self._line_task = task.LoopingCall(self.log_line)
        self._line_task.start(self.interval, now=False)
        if self.bar:
            self._bar_task = task.LoopingCall(self.draw_bar)
            self._bar_task.start(1.0, now=False)

    def _stats(self) -> dict[str, Any]:
        return self.crawler.stats.get_stats()

    def line(self) -> str:
        stats = self._stats()
        now = time.monotonic()
        pages = int(stats.get("response_received_count", 0))
        rate = (pages - self._last_pages) / max(now - self._last_time, 1e-9)
        self._last_pages, self._last_time = pages, now
        return (
            f"{pages} pages ({rate:.1f}/s; {stats.get('robotstxt/response_count', 0)} of them robots.txt), "
            f"{stats.get('scheduler/dequeued', 0)} requests handed out, "
            f"{stats.get('dupefilter/filtered', 0)} duplicates, {stats.get('robotstxt/forbidden', 0)} "
            f"forbidden by robots.txt; {frontier_summary(stats)}"
        )

    def log_line(self) -> None:
        self._clear_bar()
        logger.info(
            "Progress: %(line)s",
            {"line": self.line()},
            extra={"spider": self.crawler.spider},
        )

    def draw_bar(self) -> None:
        stats = self._stats()
        elapsed = time.monotonic() - self._started
        pages = int(stats.get("response_received_count", 0))
        text = (
            f"[scrapy-irl] {elapsed:6.0f}s  {pages} pages  {pages / max(elapsed, 1e-9):.1f}/s  "
            f"BEAST {stats.get('irl_sched/beast/queued', '-')}  RAM {stats.get('irl_sched/ram_requests', '-')}"
        )
        self.stream.write("\r" + text[:150].ljust(150))
        self.stream.flush()
        self._bar_drawn = True

    def _clear_bar(self) -> None:
        if self._bar_drawn:
            self.stream.write("\r" + " " * 150 + "\r")
            self.stream.flush()
            self._bar_drawn = False

    def spider_closed(self, spider: Spider | None = None, reason: str = "") -> None:
        for loop in (self._line_task, self._bar_task):
            if loop is not None and loop.running:
                loop.stop()
        self._clear_bar()
