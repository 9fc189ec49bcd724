"""The scrapy-irl add-on: ``ADDONS = {"scrapy_irl.Addon": 0}`` switches the components on.

Plain values are written at the ``"addon"`` priority, so a project's own settings still
win; components read their ``IRL_*`` settings themselves in ``from_crawler``. Downloader
middlewares are placed with ``set_in_component_priority_dict``; a project can still
disable any of them by setting its path to ``None`` in ``DOWNLOADER_MIDDLEWARES``.
"""

from __future__ import annotations

import copy
import logging
from typing import TYPE_CHECKING

from scrapy_irl import config

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

STOCK_ROBOTS = "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware"
#: Our downloader middlewares and their priorities: robots.txt where Scrapy's own is,
#: Crawl-delay right after robots.txt has been cached, DNS last, right before the
#: downloader: after the project's middlewares (a proxy one sets means no lookup here)
#: and Scrapy's HTTP cache (a cached page needs no lookup), see scrapy_irl.hosts.dnsfail.
DOWNLOADER_MIDDLEWARES = {
    "scrapy_irl.hosts.middleware.HostDnsMiddleware": 950,
    "scrapy_irl.robots.middleware.RobotsCacheMiddleware": 100,
    "scrapy_irl.robots.crawl_delay.CrawlDelayMiddleware": 101,
}
#: Our spider middlewares: the link source for STAR, outermost (after Scrapy's own filter
#: the output, so requests they add are stamped too).
SPIDER_MIDDLEWARES = {
    "scrapy_irl.linksource.LinkSourceMiddleware": 25,
    # Lets the reactor run while a long start() is read (see scrapy_irl.startpace).
    "scrapy_irl.startpace.StartPacingMiddleware": 24,
}
#: The crawl report's sampler, listed for a crawl with a JOBDIR.
SAMPLER = "scrapy_irl.report.sampler.StatsSampler"
STOCK_SPIDER_STATE = "scrapy.extensions.spiderstate.SpiderState"
SPIDER_STATE = "scrapy_irl.spiderstate.CrashSafeSpiderState"
#: Scrapy's HTTP handler, swapped for ours (which leaves re-sending to the scheduler).
STOCK_HTTP_HANDLER = "scrapy.core.downloader.handlers.http11.HTTP11DownloadHandler"
#: Scrapy's FTP handler, swapped for ours (which ends a download at its timeout).
STOCK_FTP_HANDLER = "scrapy.core.downloader.handlers.ftp.FTPDownloadHandler"


logger = logging.getLogger(__name__)


class Addon:
    """Turns on every scrapy-irl component built so far."""

    def update_settings(self, settings: BaseSettings) -> None:
        # The scheduler's timers, the DNS middleware and the robots cache run on it.
        config.require_reactor(settings, "scrapy_irl.Addon")
        _write_defaults(settings)
        # Not over a command's choice either: ``scrapy shell`` sets BaseDupeFilter (at the
        # "command" priority, below the add-on's) so that a page can be fetched again,
        # and the IRL scheduler honours it (no filtering).
        if not settings.getpriority("DUPEFILTER_CLASS"):
            settings.set(
                "DUPEFILTER_CLASS", "scrapy_irl.dupefilter.DrumDupeFilter", priority="addon"
            )
        # The IRL scheduler is the only politeness authority: the downloader must not add
        # delays of its own (IrlScheduler.open warns when a project setting still does).
        settings.set("SCHEDULER", "scrapy_irl.scheduler.IrlScheduler", priority="addon")
        settings.set("DOWNLOAD_DELAY", 0, priority="addon")
        settings.set("AUTOTHROTTLE_ENABLED", False, priority="addon")
        # Per-domain concurrency high enough that no download slot ever queues a request
        # the heaps handed out (a project's ``download_slot`` meta may put many hosts in
        # one slot): no more can be in flight than CONCURRENT_REQUESTS.
        settings.set("CONCURRENT_REQUESTS_PER_DOMAIN",
                     max(settings.getint("CONCURRENT_REQUESTS"),
                         settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN")),
                     priority="addon")  # fmt: skip
        settings.set_in_component_priority_dict("EXTENSIONS", _load("scrapy_irl.progress.IrlProgress"), 0)
        if settings.get("JOBDIR") and SAMPLER not in _placed(settings, "EXTENSIONS"):
            # ``scrapy irl-report JOBDIR`` reads its samples (JOBDIR/irl, the job's own);
            # without a JOBDIR they would go to the current directory, unasked.
            settings.set_in_component_priority_dict("EXTENSIONS", _load(SAMPLER), 0)
        extensions = _placed(settings, "EXTENSIONS")
        if not extensions & {STOCK_SPIDER_STATE, SPIDER_STATE}:
            # Scrapy's rewrites spider.state in place at close: a kill then leaves it
            # truncated. Ours writes it atomically, at the same place in the order.
            settings.set_in_component_priority_dict("EXTENSIONS", _load(STOCK_SPIDER_STATE), None)
            settings.set_in_component_priority_dict("EXTENSIONS", _load(SPIDER_STATE), 0)
        middlewares = _placed(settings, "DOWNLOADER_MIDDLEWARES")
        if STOCK_ROBOTS not in middlewares:  # the project did not place it itself
            settings.set_in_component_priority_dict("DOWNLOADER_MIDDLEWARES", _load(STOCK_ROBOTS), None)
        for path, priority in DOWNLOADER_MIDDLEWARES.items():
            if path not in middlewares:
                settings.set_in_component_priority_dict("DOWNLOADER_MIDDLEWARES", _load(path), priority)
        _install_handlers(settings)
        _check_handler_settings(settings)
        spider_middlewares = _placed(settings, "SPIDER_MIDDLEWARES")
        for path, priority in SPIDER_MIDDLEWARES.items():
            if path not in spider_middlewares:
                settings.set_in_component_priority_dict("SPIDER_MIDDLEWARES", _load(path), priority)


def _check_handler_settings(settings: BaseSettings) -> None:
    """``IRL_KEEPALIVE_MAX_IDLE``, read by our HTTP handler, which Scrapy builds at the
    first request: under another ``SCHEDULER`` (the IRL scheduler checks it at open) a bad
    value failed every request of the crawl. Refused here, before the crawl starts."""
    from scrapy_irl.hosts.download import keepalive_max_idle, other_http_handlers
    from scrapy_irl.refusal import log_refusal

    if set(other_http_handlers(settings)) >= {"http", "https"}:
        return  # the project's own handlers serve both: nothing reads the setting
    try:
        keepalive_max_idle(settings)
    except ValueError as exc:
        log_refusal(logger, "%(error)s", {"error": exc}, spider=None, refused=exc)
        raise


def _write_defaults(settings: BaseSettings) -> None:
    """Every ``IRL_*`` default into the crawler's settings, at Scrapy's ``"default"``
    priority (below any other source, so whatever a project, a spider or the command line
    set wins): ``crawler.settings.get("IRL_HOST_DELAY")`` then reads the value in effect,
    as for Scrapy's own settings. Components do not depend on it (:mod:`scrapy_irl.config`
    falls back to the same module, for components enabled without the add-on)."""
    from scrapy_irl import settings as defaults

    for name in dir(defaults):
        if name.startswith("IRL_"):
            settings.set(name, copy.deepcopy(getattr(defaults, name)), priority="default")


def _install_handlers(settings: BaseSettings) -> None:
    """Our handler for each scheme still served by Scrapy's stock one: HTTP(S) without
    Twisted's silent re-send, FTP with a timeout. A handler the project (or an add-on
    before ours) chose in ``DOWNLOAD_HANDLERS``, or put in ``DOWNLOAD_HANDLERS_BASE``, is
    kept; the scheduler names an HTTP one at open, and leaves ``ftp:`` URLs out of the
    heaps under any FTP handler but ours (:func:`scrapy_irl.hosts.download.polite_schemes`).

    Written into ``DOWNLOAD_HANDLERS`` as ``set_in_component_priority_dict`` writes
    middlewares, whatever the setting's priority, but at no less than the base's:
    ``getwithbase`` merges key by key and keeps a base entry set at a higher priority
    (a project that rewrote ``DOWNLOAD_HANDLERS_BASE`` for http alone kept Scrapy's
    https handler)."""
    from scrapy_irl.hosts import download, ftp

    chosen = settings.getdict("DOWNLOAD_HANDLERS")
    base = settings.getdict("DOWNLOAD_HANDLERS_BASE")
    swaps = {scheme: (STOCK_HTTP_HANDLER, download.PATH) for scheme in download.HTTP_SCHEMES}
    swaps[ftp.FTP_SCHEME] = (STOCK_FTP_HANDLER, ftp.PATH)
    ours = {scheme: path for scheme, (stock, path) in swaps.items()
            if scheme not in chosen and _is_stock(base.get(scheme), stock)}  # fmt: skip
    if ours:
        priority = max(settings.getpriority(name) or 0
                       for name in ("DOWNLOAD_HANDLERS", "DOWNLOAD_HANDLERS_BASE"))  # fmt: skip
        settings.set("DOWNLOAD_HANDLERS", {**chosen, **ours}, priority)


def _is_stock(handler: object, stock: str) -> bool:
    if isinstance(handler, str):
        return handler == stock
    return handler is not None and handler is _load(stock)


def _placed(settings: BaseSettings, name: str) -> set[str]:
    """Import paths of the components a project placed itself in ``name``, whether it
    keyed them by path or by class (``{CrawlDelayMiddleware: None}`` must switch ours
    off as ``{"scrapy_irl...CrawlDelayMiddleware": None}`` does)."""
    return {
        key if isinstance(key, str) else f"{key.__module__}.{key.__qualname__}"
        for key in settings.getdict(name)
    }


def _load(path: str) -> type:
    from scrapy.utils.misc import load_object

    return load_object(path)
