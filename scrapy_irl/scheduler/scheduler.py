"""``IrlScheduler``: IRLbot's Fig. 2 pipeline as a Scrapy ``SCHEDULER``.

enqueue_request -> URLseen (DRUM check+update, the request as aux) -> STAR (budget B_x,
admitted P_x of the URL's PLD) -> BEAST (disk queues Q_1..Q_j, Q_F) -> DNS and robots.txt
(RobotsRequested: one fetch per origin, requests wait meanwhile) -> the host heap and the IP
heap -> next_request. Everything before the heaps lives on disk; RAM holds only the hosts
being crawled (lazy loading, Polybot 3.5), bounded by ``IRL_FRONTIER_RAM_REQUESTS``.

The engine is woken when the next host or IP becomes due (it would otherwise poll every
5 s); when nothing is due and the downloader would idle, URLseen's partial batch is merged
so the crawl never stalls or closes while work exists.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
import weakref
from collections import Counter, deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import numpy as np
from pydispatch.dispatcher import getAllReceivers, liveReceivers
from scrapy import signals
from scrapy.http import Request
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.job import job_dir
from twisted.internet import task

from scrapy_irl import config
from scrapy_irl.dirlock import DirectoryLock
from scrapy_irl.drum import CHECK
from scrapy_irl.exceptions import DrumError, FrontierCorruptionError, IrlError
from scrapy_irl.fingerprint import fingerprint_function_for, key_function
from scrapy_irl.hosts.middleware import resolver_from_crawler
from scrapy_irl.hosts.paths import open_host_store
from scrapy_irl.hosts.proxy import ProxyRoutes, robots_meta, server_key
from scrapy_irl.hosts.records import RobotsKind
from scrapy_irl.linksource import SOURCE_META_KEY
from scrapy_irl.robots.middleware import (
    CHECKED_META,
    REFUSED_META,
    UNREACHABLE,
    robots_for,
)
from scrapy_irl.robots.origin import origin_of
from scrapy_irl.scheduler.codec import (
    RequestCodec,
    pack_record,
    record_blob,
    record_url,
)
from scrapy_irl.scheduler.delays import DelayPolicy
from scrapy_irl.scheduler.idle import IdleMeter
from scrapy_irl.scheduler.layout import MARKER as FRONTIER_MARKER
from scrapy_irl.scheduler.layout import (
    check_frontier,
    check_no_stock_queue,
    mark_frontier,
)
from scrapy_irl.scheduler.pipeline import budget_policy, check_settings
from scrapy_irl.scheduler.politeness import Host, Ip, Politeness
from scrapy_irl.scheduler.start_log import FILENAME as START_LOG
from scrapy_irl.scheduler.start_log import PolitenessMemory, StartLog
from scrapy_irl.scheduler.traps import PathTrapRule
from scrapy_irl.scheduler.urlnorm import SessionStripper
from scrapy_irl.scheduler.waker import EngineWaker

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Spider
    from scrapy.crawler import Crawler

    from scrapy_irl.drum.store import DrumBatch
    from scrapy_irl.hosts.records import DnsRecord
    from scrapy_irl.robots.cache import CachedRobots

logger = logging.getLogger(__name__)

STAT = "irl_sched"
#: Forced merges wait at least this many times the last one's duration (see _idle_merge_gap).
IDLE_MERGE_COST_FACTOR = 4.0
#: ``finish_reason`` when the frontier could not be written (full disk, I/O error).
STORAGE_ERROR_REASON = "irl_storage_error"
#: finish_reason when a frontier file turns out damaged mid-crawl (checks at start cannot
#: see everything, e.g. a frame read only later): the spider closes instead of failing on
#: every next_request.
CORRUPTION_REASON = "irl_frontier_corrupt"
_FRONTIER_FAILURES = (OSError, DrumError, FrontierCorruptionError)
_FULL_DISK_MESSAGE = (
    "IRL scheduler: the frontier in %(path)s cannot be written (%(where)s: %(exc)s). "
    "Closing the spider (reason %(reason)s); the next start with this JOBDIR resumes from "
    "the last save once the disk has room, URLs enqueued since then are lost."
)
_DAMAGED_MESSAGE = (
    "IRL scheduler: a frontier file in %(path)s is damaged (%(where)s: %(exc)s). Closing "
    "the spider (reason %(reason)s); the next start with this JOBDIR checks every file and "
    "refuses what it cannot repair: move the JOBDIR away to start afresh."
)


class Held:
    """A BEAST record in RAM, with the token that releases it from BEAST once finished."""

    __slots__ = ("record", "robots_refetched", "token")

    def __init__(self, record: bytes, token: tuple[int, int, int]) -> None:
        self.record = record
        self.token = token
        # Its origin's robots.txt was fetched again at its hand-out (it had expired while
        # the record waited): not a second time, so a tiny IRL_ROBOTS_TTL cannot loop.
        self.robots_refetched = False


class Handout:
    """A request handed to the engine: its host stays busy until the request is over."""

    __slots__ = ("host", "item", "reached", "request", "when")

    def __init__(self, host: Host, when: float, item: Any, request: Request) -> None:
        self.host = host
        self.when = when  # hand-out time (scheduler clock)
        self.reached = False  # request_reached_downloader seen
        self.item = item  # what RAM held (Held record or Request), released at the end
        self.request = request


class Hop:
    """A robots.txt redirect hop: waiting to claim its host and IP, then booked on them."""

    __slots__ = ("gate", "host", "host_slot", "ip", "ip_slot", "origin", "reached",
                 "since", "start", "url")  # fmt: skip

    def __init__(self, url: str, host: Host, ip: str, origin: str | None, *,
                 host_slot: bool, ip_slot: bool, since: float, gate: Any) -> None:  # fmt: skip
        self.url = url
        self.host = host
        self.ip = ip  # where it is booked: ``host.ip``, or a fresh address (record expired)
        self.origin = origin  # the origin whose robots.txt fetch it belongs to
        # What it holds in flight (what the fetch does not hold already); False for both
        # once it gave up waiting (IRL_HANDOUT_TIMEOUT) and was only booked.
        self.host_slot = host_slot
        self.ip_slot = ip_slot
        self.since = since  # when it started waiting (scheduler clock)
        self.start = since  # when it was booked to start, once claimed
        self.gate = gate  # the Deferred the robots middleware waits on
        self.reached = False  # request_reached_downloader seen


class RobotsMarker:
    """Host-queue item meaning "fetch robots.txt of this origin before anything else"."""

    __slots__ = ("origin",)

    def __init__(self, origin: str) -> None:
        self.origin = origin


def _url_of(item: Any) -> str:
    if isinstance(item, Request):
        return item.url
    return record_url(item.record)


_url_parts = urlsplit  # hot path (every routed record): no per-call import


def _stock_robots_enabled(settings: Any) -> bool:
    """Whether the project turned Scrapy's own robots middleware back on next to ours
    (the add-on replaces it; listing it again runs both)."""
    from scrapy.utils.conf import build_component_list

    # Keys normalized to classes as Scrapy's MiddlewareManager does: the add-on switches
    # the stock middleware off with a class key, which a plain getwithbase would list
    # next to the base's path key, still enabled (a false warning on every crawl).
    names = set()
    for component in build_component_list(
        settings.get_component_priority_dict_with_base("DOWNLOADER_MIDDLEWARES")
    ):
        names.add(component if isinstance(component, str) else (
            f"{component.__module__}.{component.__qualname__}"))  # fmt: skip
    return {
        "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware",
        "scrapy_irl.robots.middleware.RobotsCacheMiddleware",
    } <= names


#: Scrapy settings only its own scheduler reads: request order (the IRL scheduler hands
#: out in BEAST and politeness order) and the queues.
_ORDER_SETTINGS = (
    "SCHEDULER_PRIORITY_QUEUE", "SCHEDULER_DISK_QUEUE", "SCHEDULER_MEMORY_QUEUE",
    "SCHEDULER_START_DISK_QUEUE", "SCHEDULER_START_MEMORY_QUEUE",
)  # fmt: skip
#: Dupefilters whose job URLseen does (the add-on's, Scrapy's default).
_URLSEEN_LIKE = frozenset({"scrapy_irl.dupefilter.DrumDupeFilter", "scrapy.dupefilters.RFPDupeFilter"})
_NO_FILTER = "scrapy.dupefilters.BaseDupeFilter"


def _class_path(value: Any) -> str:
    return value if isinstance(value, str) else f"{value.__module__}.{value.__qualname__}"


def _ignored_settings(settings: Any) -> list[str]:
    """Settings a project set that the IRL scheduler does not apply (it is not Scrapy's
    scheduler: no priority queues, and URLseen instead of a DUPEFILTER_CLASS)."""
    ignored = [name for name in _ORDER_SETTINGS if settings.getpriority(name)]
    if settings.getint("DEPTH_PRIORITY"):
        ignored.append(f"DEPTH_PRIORITY={settings.getint('DEPTH_PRIORITY')}")
    dupefilter = _class_path(settings.get("DUPEFILTER_CLASS"))
    if dupefilter not in _URLSEEN_LIKE | {_NO_FILTER}:
        ignored.append(f"DUPEFILTER_CLASS={dupefilter}")
    return ignored


def _renewal_margin(lifetime: float) -> float:
    """How long before its expiry a record (robots.txt, DNS) is renewed at a hand-out: a
    tenth of its life, at most 1 s. The request reaches the downloader middlewares, which
    would renew it themselves outside the heaps, a little after its hand-out; a record
    fetched just now is always fresh enough, so nothing loops."""
    return min(1.0, max(0.0, lifetime) / 10)


def _robots_margin(record: Any) -> float:
    return _renewal_margin(record.expires_at - record.checked_at)


def _host_key(hostname: str | None) -> str:
    """The politeness key of a URL's host: lower case, without the root's trailing dot
    (``site.test.`` and ``site.test`` are one DNS name, one server to be polite to)."""
    return (hostname or "").lower().rstrip(".")


#: URLseen aux of a request that cannot be written to disk (a lambda callback, a URL of
#: 64 KiB or more): a record with an empty URL, which no real record has, then the key of
#: the request waiting in RAM for the merge's verdict.
_RAM_PREFIX = b"\x00\x00RAM"


class IrlScheduler:
    """A Scrapy scheduler doing URLseen, STAR, BEAST, robots, DNS and politeness on disk."""

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.crawler = crawler
        self.stats = crawler.stats
        self.clock = time.monotonic
        self.delays = DelayPolicy(
            margin=config.getfloat(settings, "IRL_POLITENESS_MARGIN"),
            host_delay=config.getfloat(settings, "IRL_HOST_DELAY"),
            host_delay_min=config.getfloat(settings, "IRL_HOST_DELAY_MIN"),
            ip_delay=config.getfloat(settings, "IRL_IP_DELAY"),
            ip_delay_min=config.getfloat(settings, "IRL_IP_DELAY_MIN"),
            base_budget=config.getfloat(settings, "IRL_BUDGET_BASE", minimum=1),
            crawl_delay_max=config.getfloat(settings, "IRL_CRAWL_DELAY_MAX", minimum=0),
        )
        self.ram_requests = config.getint(settings, "IRL_FRONTIER_RAM_REQUESTS", minimum=1)
        # Read now: a bad value must stop the start, not fail the close after the crawl.
        self.top_plds = config.getint(settings, "IRL_REPORT_TOP_PLDS", minimum=0)
        self.robots_retries = config.getint(settings, "IRL_ROBOTS_UNREACHABLE_RETRIES")
        if self.robots_retries < 0:
            raise ValueError(
                f"IRL_ROBOTS_UNREACHABLE_RETRIES cannot be negative, got {self.robots_retries}"
            )
        self.backlog_seconds = config.getfloat(settings, "IRL_RAM_BACKLOG_SECONDS")
        if self.backlog_seconds < 0:
            raise ValueError(
                f"IRL_RAM_BACKLOG_SECONDS cannot be negative, got {self.backlog_seconds}"
            )
        self._last_unpark = self.clock()
        self.flush_interval = config.getfloat(settings, "IRL_DRUM_FLUSH_INTERVAL", above=0)
        self.handout_timeout = config.getfloat(settings, "IRL_HANDOUT_TIMEOUT", above=0)
        self.idle_merge_interval = config.getfloat(settings, "IRL_IDLE_MERGE_INTERVAL", minimum=0)
        self.idle_sample_interval = config.getfloat(settings, "IRL_IDLE_SAMPLE_INTERVAL", minimum=0)
        self.handouts = 0
        self.ram_peak = 0  # most requests in RAM at once (lazy loading bounds it)
        self.idle = IdleMeter(self._work_due, self._downloader_free, lambda: self.handouts,
                              active=self._engine_running, clock=self.clock)  # fmt: skip
        self._idle_loop: task.LoopingCall | None = None
        self.strip_session = SessionStripper(
            config.getlist(settings, "IRL_SESSION_PARAMS")
        )
        # DUPEFILTER_CLASS = BaseDupeFilter (what ``scrapy shell`` sets, so that a page can
        # be fetched again): nothing is filtered, every request goes as if dont_filter.
        self.filtering = _class_path(settings.get("DUPEFILTER_CLASS")) != _NO_FILTER
        self.trap_rule = PathTrapRule(
            max_segments=config.getint(settings, "IRL_TRAP_MAX_PATH_SEGMENTS", minimum=0),
            max_repeats=config.getint(settings, "IRL_TRAP_MAX_SEGMENT_REPEATS"),
        )
        try:
            self.polite = Politeness(
                max_in_flight_per_ip=config.getint(settings, "IRL_IP_MAX_IN_FLIGHT"),
                ready_order=config.get(settings, "IRL_IP_SHARE"),
            )
        except ValueError as exc:
            raise ValueError(f"IRL_IP_MAX_IN_FLIGHT / IRL_IP_SHARE: {exc}") from None
        budget_policy(settings)  # a bad IRL_BUDGET_* is refused here, before any directory
        check_settings(settings)  # likewise IRL_BEAST_*, IRL_URLSEEN_*, IRL_DNS_*
        self.memory: PolitenessMemory | None = None  # last starts on disk (a JOBDIR only)
        self.spider: Spider | None = None
        self.codec = RequestCodec(None)
        self._dns_wait: dict[str, list[Any]] = {}
        # Items held in RAM until a retry (DNS lookup, robots.txt fetch) is due, by host,
        # and when (scheduler clock): see _hold.
        self._held: dict[str, list[Any]] = {}
        self._held_due: dict[str, float] = {}
        self._robots_wait: dict[str, list[Any]] = {}
        self._waiting = 0  # items in both wait lists (kept, not summed per hand-out)
        self._robots_fetching: set[str] = set()
        # Requests kept in RAM (not BEAST records) whose robots.txt was renewed in their
        # host's turn: what Held.robots_refetched says of a record.
        self._robots_renewed: weakref.WeakSet[Request] = weakref.WeakSet()
        self._direct: deque[Request] = deque()  # requests without a host (data:, file:)
        # Requests that cannot be serialized, waiting in RAM for URLseen's verdict.
        self._ram_checks: dict[int, tuple[Request, str]] = {}
        self._ram_check_ids = 0
        self._robots_hosts: dict[
            str, Host
        ] = {}  # robots.txt URL being fetched -> its host
        # Its redirect hops booked in the heaps, by URL (requests the host's tau_h counts,
        # holding their host and an IP slot until request_left_downloader or the end of
        # their fetch), and those still waiting for their host or IP to be free.
        self._hop_claims: dict[str, Hop] = {}
        self._hop_waits: list[Hop] = []
        # id(request) -> its hand-out, until the request is over
        self._handed: dict[int, Handout] = {}
        # record -> the Request it was written from, while something else still holds
        # that object (the entry, and the record with it, goes when the request does):
        # see _request_of.
        self._live: weakref.WeakValueDictionary[bytes, Request] = weakref.WeakValueDictionary()
        self._last_idle_merge = float("-inf")
        self._idle_merge_cost = 0.0  # seconds the last forced merge took
        self._tick: task.LoopingCall | None = None
        self._closed = False
        self.counts: Counter[str] = Counter()
        self._opened = False
        self._storage_error = False  # a frontier write failed; the spider is closing
        # (what, close) of every store opened so far, closed in reverse order.
        self._closers: list[tuple[str, Callable[[], None]]] = []
        # Last, once every setting has been checked: a refused setting leaves no directory.
        jobdir = job_dir(settings)
        configured = config.getpath(settings, "IRL_FRONTIER_DIR")
        if configured:
            self.path, self.temporary = Path(configured), False
        elif jobdir:
            self.path, self.temporary = Path(jobdir, "irl"), False
        else:
            self.path, self.temporary = (
                Path(tempfile.mkdtemp(prefix="scrapy-irl-frontier-")),
                True,
            )
        self._lock = DirectoryLock(self.path, what="frontier directory")

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    # -- lifecycle -------------------------------------------------------------------------
    def open(self, spider: Spider) -> None:
        """Lock the frontier directory, then open the stores; a failure closes what opened.

        A refusal (a damaged or foreign frontier, a directory another process holds) is
        logged first as one ERROR line that says what to do: Scrapy's engine then logs
        its own follow-on errors ("Scraper close failure", ...), which read as the cause.
        """
        try:
            self._lock.acquire()
            try:
                self._open_stores(spider)
            except BaseException:
                self._closed = True
                self._shut_down()
                raise
        except IrlError as exc:
            logger.error(
                "Refusing to start the crawl: %(error)s (%(kind)s). Frontier directory: "
                "%(path)s. Its files are left as they are: repair or restore them to resume, "
                "or use another JOBDIR to crawl from scratch.",
                {"error": exc, "kind": type(exc).__name__, "path": self.path},
                extra={"spider": spider},
            )
            raise
        self._opened = True

    def _open_stores(self, spider: Spider) -> None:
        from scrapy_irl.scheduler.pipeline import build_star_and_beast, build_urlseen

        self._fingerprint = fingerprint_function_for(self.crawler)
        self._key = key_function(self.crawler.request_fingerprinter)

        self.spider = spider
        self.codec = RequestCodec(spider)
        settings = self.crawler.settings
        fsync = config.getbool(settings, "IRL_DRUM_FSYNC") and not self.temporary
        check_frontier(self.path)  # a deleted store is refused, not recreated empty
        check_no_stock_queue(job_dir(settings))
        self.star, self.beast = build_star_and_beast(self.path, settings, fsync=fsync)
        self._closers += [("BEAST", lambda: self.beast.close()), ("STAR", lambda: self.star.close())]
        self.urlseen = build_urlseen(
            self.path, settings, self.star, self._on_urlseen_results, fsync=fsync
        )
        self._closers.append(("URLseen", lambda: self.urlseen.close()))
        resumed = (self.path / FRONTIER_MARKER).exists()
        mark_frontier(self.path, fsync=fsync)
        if not self.temporary:
            self._recall_starts(fsync, resumed=resumed)
        self.robots = robots_for(self.crawler)
        if self.robots is not None:
            self.robots.hop_gate = self._robots_hop_gate
            self._host_store = self.robots.store
        else:
            self._host_store = open_host_store(settings)
            self._closers.insert(0, ("host store", self._host_store.release))  # last
        self.resolver = resolver_from_crawler(self.crawler, self._host_store)
        self.proxies = ProxyRoutes.from_settings(settings)
        from twisted.internet import reactor

        self._call_later = reactor.callLater  # type: ignore[attr-defined]
        self.waker = EngineWaker(self._wake_engine, self._call_later, self.clock)
        self.crawler.signals.connect(
            self._reached, signal=signals.request_reached_downloader
        )
        self.crawler.signals.connect(self._left, signal=signals.request_left_downloader)
        self.crawler.signals.connect(self._answered, signal=signals.response_received)
        if self.flush_interval > 0:
            self._tick = task.LoopingCall(self._on_tick)
            self._tick.start(self.flush_interval, now=False)
        if self.idle_sample_interval > 0:
            self.idle.call_later = reactor.callLater  # type: ignore[attr-defined]
            self.idle.confirm = min(0.05, self.idle_sample_interval / 2)
            self._idle_loop = task.LoopingCall(self._sample_idle)
            self._idle_loop.start(self.idle_sample_interval, now=False)
        self._warn_about_fighting_settings(settings)
        ignored = _ignored_settings(settings)
        if ignored:
            self.counts["ignored_settings"] = len(ignored)
            logger.warning(
                "The IRL scheduler does not apply these settings (it hands requests out in "
                "BEAST and politeness order, not by priority, and filters duplicates with "
                "its URLseen store; DUPEFILTER_CLASS = scrapy.dupefilters.BaseDupeFilter "
                "turns filtering off): %(s)s", {"s": ", ".join(ignored)},
                extra={"spider": self.spider},
            )  # fmt: skip
        if not self.filtering:
            logger.info("IRL scheduler: DUPEFILTER_CLASS is BaseDupeFilter, so duplicate "
                        "requests are not filtered (each goes as if dont_filter=True)",
                        extra={"spider": self.spider})  # fmt: skip
        # Records parked by an earlier run waited for host queues that are gone now:
        # readable at once rather than after IRL_RAM_BACKLOG_SECONDS.
        self.beast.unpark()
        pending = self.urlseen.pending_tuples + len(self.beast)
        if pending:
            logger.info(
                "Resuming crawl from %(path)s: %(beast)d URLs queued in BEAST, %(urlseen)d "
                "awaiting URLseen", {"path": self.path, "beast": len(self.beast),
                                     "urlseen": self.urlseen.pending_tuples},
                extra={"spider": spider},
            )  # fmt: skip

    def _recall_starts(self, fsync: bool, *, resumed: bool) -> None:
        """Load the last run's request starts, so politeness holds across the restart."""
        log = StartLog(self.path / START_LOG, horizon=self.delays.longest(), fsync=fsync)
        if resumed and not log.path.exists():
            logger.warning(
                "%(path)s is missing (deleted, or the frontier of an earlier version): "
                "hosts fetched in the last seconds before the stop may be asked again "
                "sooner than their delay", {"path": log.path}, extra={"spider": self.spider},
            )  # fmt: skip
        self.memory = PolitenessMemory(log, self.polite, self.clock)
        self._closers.append(("politeness log", self.memory.close))
        loaded = self.memory.loaded
        if loaded.unreadable is not None:
            logger.warning(
                "%(path)s cannot be read (%(exc)s): hosts fetched in the last seconds "
                "before the stop may be asked again sooner than their delay",
                {"path": log.path, "exc": loaded.unreadable}, extra={"spider": self.spider},
            )  # fmt: skip
        if loaded.damaged_lines:
            logger.warning(
                "%(path)s: %(n)d damaged lines skipped; hosts they named may be asked "
                "again sooner than their delay after this restart",
                {"path": log.path, "n": loaded.damaged_lines}, extra={"spider": self.spider},
            )  # fmt: skip
        if loaded.hosts or loaded.ips:
            logger.info(
                "Politeness across the restart: %(h)d hosts and %(i)d IPs wait out the "
                "delay of their last request (%(f)d were in flight at the stop)",
                {"h": len(loaded.hosts), "i": len(loaded.ips), "f": loaded.in_flight},
                extra={"spider": self.spider},
            )  # fmt: skip

    def _warn_about_fighting_settings(self, settings: Any) -> None:
        """Downloader delays and throttling on top of our heaps would break their timing."""
        problems = []
        if settings.getfloat("DOWNLOAD_DELAY") > 0:
            problems.append(
                f"DOWNLOAD_DELAY={settings.getfloat('DOWNLOAD_DELAY')} (use IRL_HOST_DELAY*)"
            )
        if settings.getbool("AUTOTHROTTLE_ENABLED"):
            problems.append("AUTOTHROTTLE_ENABLED=True")
        if settings.getdict("DOWNLOAD_SLOTS"):
            problems.append("DOWNLOAD_SLOTS")
        if settings.getint("CONCURRENT_REQUESTS_PER_IP"):
            problems.append("CONCURRENT_REQUESTS_PER_IP (use IRL_IP_MAX_IN_FLIGHT)")
        if settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN") < 1:
            problems.append("CONCURRENT_REQUESTS_PER_DOMAIN < 1")
        if settings.getbool("ROBOTSTXT_OBEY") and _stock_robots_enabled(settings):
            problems.append(
                "Scrapy's RobotsTxtMiddleware enabled in DOWNLOADER_MIDDLEWARES (its "
                "robots.txt fetches bypass the host and IP heaps; set it to None)"
            )
        if problems:
            self.counts["fighting_settings"] = len(problems)
            logger.warning(
                "The IRL scheduler enforces politeness itself; these settings make the "
                "downloader delay or block requests on top of it: %(p)s",
                {"p": ", ".join(problems)}, extra={"spider": self.spider},
            )  # fmt: skip

    def close(self, reason: str) -> None:
        if self._closed:
            return
        self._closed = True
        if not self._opened:  # open() never ran, or failed and cleaned up already
            self._shut_down()
            return
        try:
            for loop in (self._tick, self._idle_loop):
                if loop is not None and loop.running:
                    loop.stop()
            self.waker.cancel()
            self._grant_hops()  # closed: the hops still waiting go (the fetch is dropped)
            saved = self._requeue_ram()
            if saved:
                logger.info("Saved %(n)d requests held in RAM back to BEAST", {"n": saved},
                            extra={"spider": self.spider})  # fmt: skip
            self._publish_stats()
            self._log_top_plds()
        finally:
            self._shut_down()

    def _shut_down(self) -> None:
        """Close every store opened (newest first: URLseen writes out into STAR, STAR into
        BEAST), even when one fails, then unlock; the first failure is raised at the end."""
        failure: BaseException | None = None
        while self._closers:
            what, close = self._closers.pop()
            try:
                close()
            except Exception as exc:  # noqa: BLE001 - the other stores must still close
                logger.error("Closing %(what)s of %(path)s failed: %(exc)r",
                             {"what": what, "path": self.path, "exc": exc},
                             extra={"spider": self.spider})  # fmt: skip
                failure = failure or exc
        if self.temporary:
            shutil.rmtree(self.path, ignore_errors=True)
        self._lock.release()
        if failure is not None:
            raise failure

    def _requeue_ram(self) -> int:
        """Graceful stop: requests in host queues and waits go back to disk (BEAST)."""
        items: list[Any] = list(self._direct)
        self._direct.clear()
        for name in list(self.polite.hosts):
            items.extend(self.polite.drain(name))
        for waits in (self._dns_wait, self._robots_wait, self._held):
            for queued in waits.values():
                items.extend(queued)
            waits.clear()
        self._held_due.clear()
        self._waiting = 0
        # Unserializable requests still waiting for URLseen's verdict cannot be saved.
        self.counts["lost_unserializable_at_close"] += len(self._ram_checks)
        self._ram_checks.clear()
        saved = 0
        for item in items:
            record = self._as_record(item)
            if record is not None:
                self.beast.requeue(record)
                saved += 1
            self._release(item)
        return saved

    def _release(self, item: Any) -> None:
        """``item`` left RAM for good: BEAST may forget it."""
        if isinstance(item, Held):
            self.beast.done(item.token)

    def _as_record(self, item: Any) -> bytes | None:
        if isinstance(item, RobotsMarker):
            return None
        if isinstance(item, Held):
            return item.record
        try:
            return pack_record(item.url, self.codec.encode(item))
        except ValueError:
            self.counts["lost_unserializable_at_close"] += 1
            return None

    # -- enqueue ---------------------------------------------------------------------------
    def enqueue_request(self, request: Request) -> bool:
        # Every request offered (links, duplicates included: the crawl report's p is
        # unique over offered); scheduler/enqueued counts, as in Scrapy, only those kept.
        self.stats.inc_value(f"{STAT}/offered")
        if self._storage_error:
            self.counts["refused_after_storage_error"] += 1  # the spider is closing
            return False
        try:
            return self._enqueue(request)
        except _FRONTIER_FAILURES as exc:
            self._on_storage_error(exc, "enqueueing a request")
            return False

    def _enqueue(self, request: Request) -> bool:
        parts = urlparse_cached(request)
        host = _host_key(parts.hostname)
        if not host or parts.scheme not in ("http", "https"):
            # data:, file:, unknown schemes: no host to be polite to; the downloader
            # handles (or rejects) them, so hand them out as they come, in RAM (and
            # unchanged: what follows a data: URL's comma is content, not a query).
            self.counts["no_host"] += 1
            self._direct.append(request)
            self.stats.inc_value("scheduler/enqueued")
            return True
        stripped = self.strip_session(request.url)
        if stripped is not None and self._redirected_to_add_session(request, stripped):
            # A server that puts the session id in the URL (a servlet without its
            # cookie) redirects each page to itself with one: stripped, the target is
            # its own source again, a duplicate (or, with dont_filter, a redirect loop
            # until REDIRECT_MAX_TIMES), and the page was never fetched. Kept as is; its
            # links are stripped like any other.
            self.counts["session_redirects_kept"] += 1
            stripped = None
        if stripped is not None:
            self.counts["session_params_stripped"] += 1
            request = request.replace(url=stripped)
            parts = urlparse_cached(request)
        # The page the link was found on (LinkSourceMiddleware), dropped from meta so the
        # record on disk does not carry it; the Referer header when the middleware is off.
        source = request.meta.pop(SOURCE_META_KEY, None) or request.headers.get(b"Referer")
        if not request.dont_filter and self.trap_rule.active:
            trap = self.trap_rule(parts.path)
            if trap is not None:
                # Refused before URLseen: a trap URL costs no disk and no budget. False
                # makes the engine send request_dropped, as for any refused request.
                self.counts[f"trap_dropped/{trap}"] += 1
                logger.debug("Dropped %(url)s: path looks like a crawler trap (%(why)s)",
                             {"url": request.url, "why": trap}, extra={"spider": self.spider})  # fmt: skip
                return False
        if source:
            self._record_link(source, host)
        if request.dont_filter:
            self.counts["dont_filter"] += 1
        elif not self.filtering:
            self.counts["not_filtered"] += 1
        fingerprint = self._fingerprint(request)
        try:
            record = pack_record(request.url, self.codec.encode(request))
        except ValueError:
            self._enqueue_in_ram(request, host, self._key(fingerprint))
            return True
        self._live[record] = request
        if request.dont_filter or not self.filtering:
            # Not filtered, but remembered: a later ordinary link to it is a duplicate.
            # Outside the budgets, yet on disk like the rest (start URLs can be millions,
            # and a retry must survive a kill -9): BEAST's front queue, read first.
            self.urlseen.update(self._key(fingerprint))
            self.beast.push_front(record)
            self.stats.inc_value("scheduler/enqueued")
            return True
        self.urlseen.check_update(self._key(fingerprint), None, record)
        return True

    def _redirected_to_add_session(self, request: Request, stripped: str) -> bool:
        """``request`` is a redirect whose target, stripped of session ids, is the URL it
        was redirected from (RedirectMiddleware's ``redirect_urls``)."""
        sources = request.meta.get("redirect_urls")
        if not sources or not isinstance(sources, list):
            return False
        source = str(sources[-1])
        return (self.strip_session(source) or source) == stripped

    def _request_of(self, record: bytes) -> Request:
        """The request a record was written from, if its caller still holds that object
        (as Scrapy's memory queues hand out the very object enqueued); else rebuilt.

        ``scrapy shell`` calls ``engine.crawl(request)`` and only then sets the callback
        that delivers the response to the console, on that object: a rebuilt copy has no
        such callback, so every shell fetch hung. Usually nothing holds a request once it
        is enqueued, and its entry goes with it; each entry serves one hand-out.
        """
        request = self._live.pop(record, None) if self._live else None
        if request is not None:
            return request
        return self.codec.decode(record_blob(record))

    def _record_link(self, source: str | bytes, host: str) -> None:
        """STAR's PLD edge from the page ``source`` to ``host``; a source that is not a
        URL (a malformed Referer header) is counted and ignored, never an error."""
        if isinstance(source, bytes):
            source = source.decode("latin-1")
        try:
            src_host = _host_key(_url_parts(source).hostname)
        except ValueError:
            self.counts["link_source_unparseable"] += 1
            return
        if src_host:
            self.star.record_link(src_host, host)

    def _enqueue_in_ram(self, request: Request, host: str, key: int) -> None:
        """A request that cannot be written to disk stays in RAM, as in Scrapy's own
        scheduler, but is still filtered: URLseen checks its key like any other (the aux
        names the waiting request), and only a URL never seen before is routed."""
        self.stats.inc_value("scheduler/unserializable")
        if request.dont_filter or not self.filtering:
            self.urlseen.update(key)
            self.stats.inc_value("scheduler/enqueued")
            self._route(request, host)
            self._note_ram_peak()
            return
        self._ram_check_ids += 1
        token = self._ram_check_ids
        self._ram_checks[token] = (request, host)
        self.urlseen.check_update(key, None, _RAM_PREFIX + token.to_bytes(8, "little"))

    def _take_ram_check(self, aux: bytes) -> tuple[Request, str] | None:
        """The waiting request a URLseen aux names, if it is a RAM check still known here
        (after a restart it is not: the request died with the process, as it would have
        in Scrapy's scheduler, and is counted)."""
        if not aux.startswith(_RAM_PREFIX):
            return None
        got = self._ram_checks.pop(int.from_bytes(aux[len(_RAM_PREFIX) :], "little"), None)
        if got is None:
            self.counts["unserializable_lost_at_restart"] += 1
        return got

    def _on_urlseen_results(self, batch: DrumBatch) -> None:
        checked = (batch.ops & CHECK).astype(
            bool
        )  # UPDATE-only tuples: dont_filter marks
        unique = 0
        for i in np.flatnonzero(batch.unique & checked):
            record = batch.aux(int(i))
            unique += 1
            if record.startswith(_RAM_PREFIX):
                waiting = self._take_ram_check(record)
                if waiting is not None:
                    self.stats.inc_value("scheduler/enqueued")
                    self._route(*waiting)  # in RAM, outside the budgets, as before
                    self._note_ram_peak()
                continue
            host = _host_key(_url_parts(record_url(record)).hostname)
            self.stats.inc_value("scheduler/enqueued")
            self.star.admit(record, host)  # STAR hands it to BEAST with (B_x, P_x)
        duplicates = int(np.count_nonzero(checked)) - unique
        if duplicates:
            self.stats.inc_value("dupefilter/filtered", duplicates)
            self._signal_dropped(batch, checked)
        self.counts["unique"] += unique

    def _signal_dropped(self, batch: DrumBatch, checked: np.ndarray) -> None:
        """``request_dropped`` for each duplicate, rebuilt from its record.

        The engine could not send it: ``enqueue_request`` returned True before the batch
        merged. Rebuilding a request costs an unpickle, so it is done only while some
        receiver is connected to the signal (Scrapy itself connects none).
        """
        sender = self.crawler.signals.sender
        duplicates = np.flatnonzero(~batch.unique & checked)
        # Duplicates of requests waiting in RAM are forgotten here; the scan is skipped
        # (as on every merge of a crawl without such requests) when none is waiting.
        ram = []
        if self._ram_checks:
            auxes = (batch.aux(int(i)) for i in duplicates)
            ram = [self._take_ram_check(aux) for aux in auxes if aux.startswith(_RAM_PREFIX)]
        if not any(True for _ in liveReceivers(getAllReceivers(sender, signals.request_dropped))):
            return
        for waiting in ram:
            if waiting is not None:
                self.crawler.signals.send_catch_log(
                    signals.request_dropped, request=waiting[0], spider=self.spider
                )
        for i in duplicates:
            aux = batch.aux(int(i))
            if aux.startswith(_RAM_PREFIX):
                continue
            try:
                request = self.codec.decode(record_blob(aux))
            except ValueError:
                self.counts["dropped_signal_undecodable"] += 1
                continue
            self.crawler.signals.send_catch_log(
                signals.request_dropped, request=request, spider=self.spider
            )

    # -- routing to hosts: DNS, robots.txt, politeness --------------------------------------
    def _route(self, item: Any, host: str) -> None:
        """Send a request (Request or record) towards its host queue."""
        if host in self.polite.hosts:
            self._check_robots_and_queue(item, host)
            return
        waiting = self._dns_wait.get(host)
        if waiting is not None:
            self._waiting += 1
            waiting.append(item)
            return
        meta = self._meta_of(item)
        url = _url_of(item)
        parts = _url_parts(url)
        # Its robots.txt goes the way its first URL goes ("proxy": None included).
        route = robots_meta(meta)
        if self.proxies.proxied(parts.scheme.lower(), parts.hostname, meta):
            self._add_proxied_host(host, url, route)
            self._check_robots_and_queue(item, host)
            return
        self._waiting += 1
        self._dns_wait[host] = [item]
        self.resolver.resolve(host).addCallback(self._resolved, host, route).addErrback(
            self._log_failure, f"DNS of {host}"
        )

    def _meta_of(self, item: Any) -> dict[str, Any]:
        """A queued item's meta, for its host's proxy choice (see
        :mod:`scrapy_irl.hosts.proxy`): a record's by a plain unpickle; an unreadable one
        gives {} (its hand-out drops it, counted)."""
        if isinstance(item, Request):
            return item.meta
        try:
            return self.codec.meta_of(record_blob(item.record))
        except ValueError:
            return {}

    def _add_proxied_host(self, name: str, url: str, route: dict[str, Any]) -> Host:
        """A host reached through a proxy: no DNS lookup (the proxy resolves its name, and
        this machine may not know it). Which server stands behind the proxy is unknown,
        so the host is its own "address" in the IP heap: tau_h, Crawl-delay and one
        request in flight per host hold; tau_s cannot group its virtual hosts."""
        self.counts["proxied_hosts_added"] += 1
        host = self._add_host(name, server_key(name), self._cached_crawl_delay(url))
        host.robots_meta = route  # never expires: dns_expires stays inf
        return host

    def _resolved(self, record: DnsRecord, host: str, route: dict[str, Any]) -> None:
        items = self._dns_wait.pop(host, [])
        self._waiting -= len(items)
        if self._closed:
            return
        if not record.ok or record.ip is None:
            self._dns_failed(host, record, items)
            return
        crawl_delay = self._cached_crawl_delay(_url_of(items[0])) if items else None
        added = self._add_host(host, record.ip, crawl_delay)
        added.dns_expires = self._dns_deadline(host, record)
        added.robots_meta = route or None
        for item in items:
            self._check_robots_and_queue(item, host)
        self._wake_engine()

    def _dns_failed(self, host: str, record: DnsRecord, items: list[Any]) -> None:
        """``host``'s lookup failed: hold its URLs for the resolver's retry, or drop them
        (counted) once it gave up on the name."""
        if self.resolver.will_retry(record):
            # In RAM, not parked: an unpark is a minute away by default, the retry 10 s.
            self.counts["dns_retry_held"] += len(items)
            self._hold(host, items, record.expires_at - self.resolver.clock())
            return
        self.counts["dns_failed_dropped"] += len(items)
        # Each leaves the frontier but is handed out at once, outside the heaps, so its
        # errback sees the DNS error Scrapy's own scheduler would give it: the DNS
        # middleware fails it from the cached negative record, with no lookup and nothing
        # sent. Dropped here instead, such requests left no trace but a count.
        for item in items:
            request = item if isinstance(item, Request) else self._decode_or_drop(item)
            if request is not None:
                self.counts["dns_failed_handed_out"] += 1
                self._hand_out_now(item, request)

    def _dns_deadline(self, host: str, record: DnsRecord) -> float:
        """When (scheduler clock) ``host``'s turn renews ``record``: the resolver counts in
        wall-clock time, the heaps in monotonic time. A tenth of its life (at most 1 s)
        before it expires, as robots.txt records (``_robots_margin``): the DNS middleware
        resolves the name again a little after the hand-out, and the downloader connects
        where that lookup says. An IP literal never expires."""
        if record.ips == (host,):
            return float("inf")
        return self.clock() + (record.expires_at - self._dns_margin() - self.resolver.clock())

    def _dns_margin(self) -> float:
        """How long before its expiry a host's record is renewed in its turn."""
        return _renewal_margin(self.resolver.ttl)

    def _renew_dns(self) -> None:
        """Look up again the hosts the heaps held at their turn because their DNS record
        had expired (:meth:`Politeness.pop`); each is resumed, moved or dropped by
        :meth:`_renewed`. One lookup per held host: it is held until its answer."""
        expired, self.polite.expired = self.polite.expired, []
        margin = self._dns_margin()  # held that long before its expiry (_dns_deadline)
        for host in expired:
            self.counts["dns_expired_in_queue"] += 1
            renewal = self.resolver.resolve(host.name, fresh_for=margin)
            renewal.addCallback(self._renewed, host).addErrback(self._renewal_broke, host)

    def _renewed(self, record: DnsRecord, host: Host) -> None:
        """A held host's fresh answer: same address, it goes on where it was; another
        address, it moves there (queue, budget, Crawl-delay, last start) so that tau_s and
        the per-IP in-flight bound apply to the server the downloader will now connect
        to; a failed lookup, its URLs go the way of a first failed lookup."""
        if not self._still_held(host):
            return  # drained at close: its URLs went back to BEAST
        if not record.ok or record.ip is None:
            self.counts["dns_renew_failed"] += 1
            logger.debug("DNS renewal of %(host)s failed (%(error)s): its URLs are held "
                         "for the retry or dropped", {"host": host.name, "error": record.error},
                         extra={"spider": self.spider})  # fmt: skip
            self._dns_failed(host.name, record, self._take_host_items(host))
            self._wake_engine()
            return
        if record.ip != host.ip:
            self.counts["dns_moved_hosts"] += 1
            # DEBUG: a round-robin name can answer with another of its addresses each time.
            logger.debug("%(host)s moved from %(old)s to %(new)s (DNS record renewed): "
                         "its %(n)d queued URLs follow it", {"host": host.name, "old": host.ip,
                         "new": record.ip, "n": len(host.queue)},
                         extra={"spider": self.spider})  # fmt: skip
            address = self.polite.ips.get(record.ip)
            self.polite.move(host, record.ip,
                             address.delay if address else self.delays.ip_delay)  # fmt: skip
            if self.memory is not None:
                self.memory.apply(host)  # the new IP's start in the last run, if recalled
            self._apply_budget(host, host.budget)  # tau_s of the new IP with this host in it
        self.polite.resume(host, self._dns_deadline(host.name, record))
        self._wake_engine()

    def _renewal_broke(self, failure: Any, host: Host) -> None:
        """A renewal that raised (a bug, not a DNS failure: those arrive as negative
        records) must not leave its host held for ever, which would keep the crawl from
        closing: logged, and the host goes on at its old address, to be looked up again
        after IRL_DNS_RETRY_DELAY."""
        self._log_failure(failure, f"DNS renewal of {host.name}")
        if not self._still_held(host):
            return
        self.counts["dns_renew_errors"] += 1
        self.polite.resume(host, self.clock() + self.resolver.retry_delay)
        self._wake_engine()

    def _still_held(self, host: Host) -> bool:
        """Whether ``host`` still waits for its renewal (not drained at close, not
        forgotten and added again meanwhile)."""
        return not self._closed and self.polite.hosts.get(host.name) is host and host.resolving

    def _take_host_items(self, host: Host) -> list[Any]:
        """Take a held host out of the table with its pending URLs, and the URLs that wait
        for a robots.txt fetch its queue was to make (its marker goes with it: the URLs
        come back through DNS and robots.txt as new)."""
        items = []
        for item in self.polite.remove(host.name):
            if not isinstance(item, RobotsMarker):
                items.append(item)
                continue
            self._robots_fetching.discard(item.origin)
            waiting = self._robots_wait.pop(item.origin, [])
            self._waiting -= len(waiting)
            items.extend(waiting)
        return items

    def _hold(self, host: str, items: list[Any], wait: float) -> None:
        """Keep ``items`` in RAM for ``wait`` seconds, then route them again (:meth:`_on_tick`).

        For URLs whose host is to be retried (a failed DNS lookup, an unreachable
        robots.txt). They count against IRL_FRONTIER_RAM_REQUESTS, so a burst of them
        only slows loading; BEAST records stay outstanding, so a kill -9 meanwhile
        re-reads them, and a graceful stop requeues them.
        """
        due = self.clock() + max(0.0, wait)
        self._held.setdefault(host, []).extend(items)
        self._held_due[host] = max(due, self._held_due.get(host, due))
        self._waiting += len(items)

    def _route_held(self, now: float) -> None:
        """Held items whose retry is due go back towards their host (DNS, robots.txt)."""
        due = [h for h, when in self._held_due.items() if when <= now]
        for host in due:
            del self._held_due[host]
            items = self._held.pop(host, [])
            self._waiting -= len(items)
            for item in items:
                self._route(item, host)
        if due:
            self._wake_engine()

    def _add_host(self, name: str, ip: str, crawl_delay: float | None) -> Host:
        """Put a resolved host in the politeness table, its delays from its PLD's budget."""
        address = self.polite.ips.get(ip)
        # delays set from the budget just below; the IP keeps its own until then
        host = self.polite.add_host(name, ip, self.delays.host_delay,
                                    address.delay if address else self.delays.ip_delay)  # fmt: skip
        host.crawl_delay = crawl_delay
        if self.memory is not None:
            self.memory.apply(host)
        self._apply_budget(host, self.star.budget(name))
        return host

    def _apply_budget(self, host: Host, budget: float) -> None:
        """tau_h from B_x (and Crawl-delay); tau_s from the average budget on the IP."""
        average = self.polite.set_budget(host, budget)
        self.polite.set_delays(host, self.delays.host(budget, host.crawl_delay),
                               self.delays.ip(average))  # fmt: skip

    def _refresh_budget(self, host: Host) -> None:
        """A PLD's in-degree grows as the crawl finds links to it: its delays shrink."""
        budget = self.star.budget(host.name)
        if budget != host.budget:
            self.counts["delays_rescaled"] += 1
            self._apply_budget(host, budget)

    def _check_robots_and_queue(self, item: Any, host: str) -> None:
        if self.robots is None or (
            isinstance(item, Request) and item.meta.get("dont_obey_robotstxt")
        ):
            self._push_or_park(host, item)
            return
        url = _url_of(item)
        origin = origin_of(_url_parts(url))
        if origin is None:
            self._push_or_park(host, item)
            return
        cached = self.robots.cache.get(origin)
        if cached is not None and cached.record.is_fresh(self.robots.clock()):
            self._note_crawl_delay(host, origin, cached)
            self._obey(cached, item, url, host)
            return
        waiting = self._robots_wait.get(origin)
        if self._park_if_backlogged(item, host, len(waiting) if waiting else 0):
            return
        if waiting is None:
            self._robots_wait[origin] = waiting = []
        waiting.append(item)
        self._waiting += 1
        if origin not in self._robots_fetching:
            self._robots_fetching.add(origin)
            self.polite.push(host, RobotsMarker(origin), front=True)

    def _push_or_park(self, host: str, item: Any) -> None:
        if not self._park_if_backlogged(item, host, 0):
            self.polite.push(host, item)

    def _park_if_backlogged(self, item: Any, host: str, waiting: int) -> bool:
        """Park a queued record (back to disk) when its host or IP has enough work in RAM.

        Lazy loading (Polybot section 3.5): RAM should hold what can be fetched soon.
        Work queued for a host (plus ``waiting`` items held for its robots.txt) is worth
        items x tau_h seconds, for its IP items x tau_s; past IRL_RAM_BACKLOG_SECONDS more
        of it would only sit in RAM, crowding out the hosts and IPs that could be crawled
        meanwhile (a spam farm's fresh subdomains on a few IPs, a large site at a long
        tau_h). Parked records come back every IRL_RAM_BACKLOG_SECONDS. Requests that are
        not BEAST records (unserializable ones) are never parked.
        """
        if not self.backlog_seconds or not isinstance(item, Held):
            return False
        record = self.polite.hosts.get(host)
        if record is None:
            return False
        backlog = max(self.polite.backlog_seconds(record), waiting * record.delay)
        if backlog < self.backlog_seconds:
            return False
        self.beast.park(item.record)
        self._release(item)
        self.counts["parked_backlog"] += 1
        return True

    def _note_crawl_delay(self, name: str, origin: str, cached: Any, *, fetched: bool = False) -> None:
        """Take ``origin``'s Crawl-delay into its host's tau_h, once per origin (and again
        after each fetch of its robots.txt). A host name can be served by several origins
        (http and https, other ports), each with its own robots.txt; they reach the same
        server, so the host keeps the largest delay any of them asks for."""
        host = self.polite.hosts.get(name)
        if host is None or (origin in host.delay_origins and not fetched):
            return
        if origin not in host.delay_origins:
            host.delay_origins = (*host.delay_origins, origin)
        delay = cached.crawl_delay(self._default_ua())
        if delay and delay > (host.crawl_delay or 0.0):
            host.crawl_delay = delay
            self._apply_budget(host, self.star.budget(name))

    def _cached_crawl_delay(self, url: str) -> float | None:
        """Crawl-delay of the URL's origin if its robots.txt is cached (a host met again)."""
        if self.robots is None:
            return None
        origin = origin_of(_url_parts(url))
        cached = self.robots.cache.get(origin) if origin else None
        return cached.crawl_delay(self._default_ua()) if cached is not None else None

    def _obey(self, cached: Any, item: Any, url: str, host: str, *, front: bool = False) -> None:
        """Queue ``item`` if the rules allow it; ``front``: it was due already (handed out
        when its robots.txt turned out expired), so it goes first, unparked."""
        user_agent = (
            self.robots.user_agent(item)  # type: ignore[union-attr]
            if isinstance(item, Request)
            else self._default_ua()
        )
        if cached.allowed(url, user_agent):
            self._queue_allowed(host, item, front=front)
            return
        if cached.record.kind == RobotsKind.DISALLOW_ALL and (
            cached.record.failures <= self.robots_retries
        ):
            self._hold_for_robots(cached.record, item, host)
            return
        request = item if isinstance(item, Request) else self._decode_or_drop(item)
        if request is None:
            return
        if isinstance(item, Held) and self._allowed_anyway(cached, request, url):
            self._queue_allowed(host, item, front=front)
            return
        self._refuse(item, request, cached.record.kind == RobotsKind.DISALLOW_ALL)

    def _queue_allowed(self, host: str, item: Any, *, front: bool) -> None:
        if front:
            self.polite.push(host, item, front=True)
        else:
            self._push_or_park(host, item)

    def _decode_or_drop(self, item: Any) -> Request | None:
        """The request of a queued record that leaves the heaps' path (refused by robots.txt,
        or of a dead name); None, dropped and counted, if it does not decode. Only such
        records are unpickled here, so the common case costs nothing."""
        try:
            return self._request_of(item.record)
        except ValueError as exc:
            self.counts["undecodable_dropped"] += 1
            logger.error("Dropping a queued request: %(exc)s", {"exc": exc},
                         extra={"spider": self.spider})  # fmt: skip
            self._release(item)
            return None

    def _allowed_anyway(self, cached: Any, request: Request, url: str) -> bool:
        """A queued record the default user agent may not fetch: its request may still
        ask to skip robots.txt (``dont_obey_robotstxt``, as RobotsTxtMiddleware honours
        it) or carry a User-Agent the rules allow."""
        if request.meta.get("dont_obey_robotstxt"):
            self.counts["robots_bypassed_by_meta"] += 1
            return True
        return bool(cached.allowed(url, self.robots.user_agent(request)))  # type: ignore[union-attr]

    def _refuse(self, item: Any, request: Request, unreachable: bool) -> None:
        """robots.txt forbids ``request`` (or stayed unreachable past its retries): hand it
        out at once, outside the heaps, marked (``REFUSED_META``), so that
        RobotsCacheMiddleware fails it with the ``IgnoreRequest`` of Scrapy's own robots
        middleware and the spider's errback sees it. Nothing reaches the server; the
        middleware counts it (``robotstxt/forbidden``, ``irl_robots/unreachable_dropped``).
        Dropped here instead, such requests left no trace but a count."""
        request.meta[REFUSED_META] = UNREACHABLE if unreachable else "forbidden"
        self.counts["robots_refused_handed_out"] += 1
        self._hand_out_now(item, request)

    def _hand_out_now(self, item: Any, request: Request) -> None:
        """``item`` leaves the frontier; its ``request`` goes to the engine at the next
        ``next_request``, outside the heaps, for a downloader middleware to fail (it
        reaches no server)."""
        self._release(item)
        self._direct.append(request)
        self._wake_engine()

    def _hold_for_robots(self, record: Any, item: Any, host: str) -> None:
        """robots.txt is unreachable but will be asked again: keep the URL until then.

        RFC 9309 forbids crawling meanwhile, not remembering: a 503 or a timeout on one
        fetch must not cost the origin its URLs. BEAST records are parked on disk (they
        come back with the next unpark and, once the back-off is over, wait in Q_R for
        the re-fetch); other requests wait in RAM for the back-off. After
        IRL_ROBOTS_UNREACHABLE_RETRIES failed re-fetches the URLs are dropped, so an
        origin that stays down cannot keep a crawl open for hours of back-off.
        """
        if isinstance(item, Held):
            self.counts["robots_retry_parked"] += 1
            self.beast.park(item.record)
            self._release(item)
        else:
            self.counts["robots_retry_held"] += 1
            self._hold(host, [item], record.expires_at - self.robots.clock())  # type: ignore[union-attr]

    def _default_ua(self) -> str:
        assert self.robots is not None
        return self.robots.user_agent(Request("http://example.invalid/"))  # type: ignore[return-value]

    def _fetch_robots(self, host: Host, marker: RobotsMarker, *, renew: bool = False) -> None:
        """Fetch an origin's robots.txt (RobotsRequested); the host counts as busy meanwhile.

        ``renew``: its record is about to expire (see :meth:`_stale_robots`); fetched even
        though it is fresh for a moment more, or the middleware would fetch it right
        after, outside the heaps."""
        assert self.robots is not None
        probe = Request(marker.origin + "/",
                        meta={"dont_obey_robotstxt": False, **(host.robots_meta or {})})  # fmt: skip
        self._robots_hosts[marker.origin + "/robots.txt"] = host
        cached = self.robots.cache.get(marker.origin) if renew else None
        fresh_for = _robots_margin(cached.record) if cached is not None else 0.0
        d = deferred_from_coro(self.robots.robot_parser(probe, fresh_for=fresh_for))
        d.addBoth(self._robots_done, host, marker.origin)

    def _robots_hop_gate(self, url: str, route: dict[str, Any] | None = None,
                         origin: str | None = None) -> Any:  # fmt: skip
        """Delay a robots.txt redirect hop of ``origin``'s fetch until its host and IP
        are free and its IP is due, booked and held in the heaps (:meth:`_hop_when_due`).

        A host not in the politeness table (another name, as example.com ->
        www.example.com, or one forgotten since) is resolved first, through the
        HostResolver (once per TTL), and added: its IP's tau_s then holds before the hop
        and after it, as for any request to that IP. So is a host whose DNS record has
        expired: the DNS middleware sends the hop where a fresh lookup says. A hop through
        a proxy (``route``: the robots.txt request's proxy meta, or the environment's) is
        not resolved: its host is added as its own address (:meth:`_add_proxied_host`).
        The gate is a Deferred the robots middleware waits on; next_request is never held
        up by it."""
        from twisted.internet import defer

        try:
            parts = _url_parts(url)
            name = _host_key(parts.hostname)
        except ValueError:
            name = ""
        if not name or parts.scheme.lower() not in ("http", "https"):
            return defer.succeed(None)  # never sent: the middleware refuses it (bad_redirect)
        host = self.polite.host(name)
        if host is not None and self.clock() < host.dns_expires:
            return self._hop_when_due(host, url, origin)
        if host is not None:
            # Booked on host.ip, the hop went where the DNS middleware's fresh lookup sent it.
            self.counts["robots_hops_dns_renewed"] += 1
            resolving = self.resolver.resolve(name, fresh_for=self._dns_margin())
        else:
            route = route or {}
            if self.proxies.proxied(parts.scheme.lower(), name, route):
                host = self._add_proxied_host(name, url, route)
                return self._hop_when_due(host, url, origin)
            self.counts["robots_hops_resolved"] += 1
            resolving = self.resolver.resolve(name)
        resolving.addCallback(self._hop_resolved, name, url, route, origin)
        resolving.addErrback(self._hop_not_resolved, url)
        return resolving

    def _hop_resolved(self, record: DnsRecord, name: str, url: str,
                      route: dict[str, Any] | None = None, origin: str | None = None) -> Any:  # fmt: skip
        """The hop's host resolved: add it to the table (if it is not there by now) and book
        the hop on the address it resolved to. A failed lookup with retries left is retried
        first (the DNS middleware would make the hop wait for that retry, then send it
        unbooked); a dead name sends the hop at once: no server can be reached for it.

        A host in the table whose expired record now gives another address is not moved
        (it may be ready or in flight): the hop alone is booked on the new address, whose
        tau_s and in-flight bound it obeys; the host moves at its own turn's renewal."""
        if self._closed:
            return None
        if not record.ok or record.ip is None:
            if self.resolver.will_retry(record):
                retry = self._after(record.expires_at - self.resolver.clock())
                retry.addCallback(lambda _: self.resolver.resolve(name))
                return retry.addCallback(self._hop_resolved, name, url, route, origin)
            self.counts["robots_hop_unresolved"] += 1
            return None
        host = self.polite.host(name)
        if host is None:
            host = self._add_host(name, record.ip, self._cached_crawl_delay(url))
            host.robots_meta = route or None  # its own robots.txt, later: the same way
            host.dns_expires = self._dns_deadline(name, record)  # renewed in its turn too
        elif record.ip == host.ip and not host.resolving:
            host.dns_expires = max(host.dns_expires, self._dns_deadline(name, record))
        elif record.ip not in self.polite.ips:
            self._add_ip(record.ip)
        return self._hop_when_due(host, url, origin, record.ip)

    def _hop_not_resolved(self, failure: Any, url: str) -> Any:
        """The lookup raised (a bug: failed lookups are negative records): fall back to
        the longest tau_s from now, what the gate waited before it resolved names."""
        self._log_failure(failure, f"DNS of the robots.txt redirect to {url}")
        return self._after(self.delays.ip_delay + self.delays.margin)

    def _add_ip(self, ip: str) -> None:
        """Put an address no host of the table has in it (a hop booked on a host's new
        address), with its last start of the previous run if the start log recalls it."""
        self.polite.ips[ip] = Ip(ip, self.delays.ip_delay)
        if self.memory is not None:
            self.memory.apply_ip(ip)

    def _hop_when_due(self, host: Host, url: str, origin: str | None = None,
                      ip: str | None = None) -> Any:  # fmt: skip
        """Wait until the hop may claim its host and a slot on its IP, book it there
        (:meth:`Politeness.claim_hop`) and fire when its IP is due.

        A page is never in flight to a host together with a hop to it, and an IP never
        has more than IRL_IP_MAX_IN_FLIGHT requests in flight, hops included. The fetch
        the hop belongs to holds its origin's host and a slot on that host's IP until
        it ends (:meth:`_robots_done`): a hop there takes neither again, or the chain,
        one request at a time, would wait for itself."""
        from twisted.internet import defer

        held_host, held_ip = self._held_by_fetch(origin)
        hop = Hop(url, host, host.ip if ip is None else ip, origin,
                  host_slot=host is not held_host, ip_slot=(ip or host.ip) != held_ip,
                  since=self.clock(), gate=defer.Deferred())  # fmt: skip
        host.hop_waits += 1
        self._hop_waits.append(hop)
        self._grant_hops()
        return hop.gate

    def _held_by_fetch(self, origin: str | None) -> tuple[Host | None, str | None]:
        """The host (and its IP) that the robots.txt fetch of ``origin`` holds in flight:
        its origin's host, handed out as a robots marker, or as the page whose robots.txt
        the middleware fetches itself (a fetch of neither holds nothing)."""
        if origin is None:
            return None, None
        try:
            host = self.polite.host(_host_key(_url_parts(origin).hostname))
        except ValueError:
            return None, None
        if host is None or not host.in_flight:
            return None, None
        return host, host.ip

    def _grant_hops(self) -> None:
        """Book the waiting hops whose host and IP are free (in the order they came);
        one that waited IRL_HANDOUT_TIMEOUT is only booked (counted, logged): a host held
        for ever (a cycle of redirects between two fetches) must not stop its fetch."""
        if not self._hop_waits:
            return
        now = self.clock()
        waiting, self._hop_waits = self._hop_waits, []
        for hop in waiting:
            host = hop.host
            if self._closed or self.polite.hosts.get(host.name) is not host:
                host.hop_waits -= 1  # closing, or removed (its renewal failed): just go
                self._call_later(0.0, hop.gate.callback, None)
            elif hop.url in self._hop_claims or self.polite.hop_blocked(
                host, hop.ip, host_slot=hop.host_slot, ip_slot=hop.ip_slot
            ):
                if now - hop.since <= self.handout_timeout:
                    self._hop_waits.append(hop)
                    continue
                self.counts["robots_hop_waits_expired"] += 1
                logger.warning("A robots.txt redirect hop to %(url)s waited %(s).0f s for "
                               "its host or IP to be free: sent without holding them",
                               {"url": hop.url, "s": now - hop.since},
                               extra={"spider": self.spider})  # fmt: skip
                hop.host_slot = hop.ip_slot = False
                self._claim_hop(hop, now)
            else:
                self._claim_hop(hop, now)

    def _claim_hop(self, hop: Hop, now: float) -> None:
        """Book ``hop`` in the heaps, holding its slots; its gate fires when its IP is due."""
        hop.host.hop_waits -= 1
        if hop.ip not in self.polite.ips:  # forgotten while the hop waited
            self._add_ip(hop.ip)
        start = self.polite.claim_hop(hop.host, now, ip=hop.ip,
                                      host_slot=hop.host_slot, ip_slot=hop.ip_slot)  # fmt: skip
        if self.memory is not None:
            self.memory.hopped(hop.host, hop.ip)
        self._robots_hosts[hop.url] = hop.host
        if hop.url not in self._hop_claims:
            self._hop_claims[hop.url] = hop
        hop.start = start
        self._call_later(max(0.0, start - now), hop.gate.callback, None)

    def _release_hop(self, hop: Hop, now: float) -> None:
        """``hop`` is over: its host and IP slot are free, timed from now (as a page's)."""
        if self._hop_claims.get(hop.url) is hop:
            del self._hop_claims[hop.url]
        if self._robots_hosts.get(hop.url) is hop.host:
            del self._robots_hosts[hop.url]
        self.polite.release_hop(hop.host, now, ip=hop.ip,
                                host_slot=hop.host_slot, ip_slot=hop.ip_slot)  # fmt: skip
        if self.memory is not None:
            self.memory.hopped(hop.host, hop.ip)
        self._grant_hops()
        self._wake_engine()

    def _expire_hops(self, now: float) -> None:
        """Free hops that never reached the downloader (their fetch's end frees them too,
        but a fetch the middleware made for a page of its own has no end we hear of),
        and book the waiting ones that gave up."""
        for hop in list(self._hop_claims.values()):
            if not hop.reached and now - hop.start > self.handout_timeout:
                self.counts["robots_hops_expired"] += 1
                self._release_hop(hop, now)
        self._grant_hops()

    def _after(self, seconds: float) -> Any:
        from twisted.internet import defer

        d: Any = defer.Deferred()
        self._call_later(max(0.0, seconds), d.callback, None)
        return d

    def _robots_done(self, result: Any, host: Host, origin: str) -> None:
        self._robots_fetching.discard(origin)
        self._robots_hosts.pop(origin + "/robots.txt", None)
        now = self.clock()
        for hop in [h for h in self._hop_claims.values() if h.origin == origin]:
            # Refused before the downloader (an offsite filter): no request_left_downloader.
            self.counts["robots_hops_released_at_fetch_end"] += 1
            self._release_hop(hop, now)
        self._host_finished(host, now, count_for_host=False)
        items = self._robots_wait.pop(origin, [])
        self._waiting -= len(items)
        if self._closed:
            return
        cached = self.robots.cache.get(origin) if self.robots is not None else None
        if cached is None:  # fetch ignored or failed oddly: no rules to apply
            for item in items:
                self._push_or_park(host.name, item)
        else:
            self._note_crawl_delay(host.name, origin, cached, fetched=True)
            for item in items:
                self._obey(cached, item, _url_of(item), host.name,
                           front=self._robots_refetched(item))  # fmt: skip
        self._wake_engine()

    # -- hand-out --------------------------------------------------------------------------
    def next_request(self) -> Request | None:
        try:
            return self._next_request()
        except _FRONTIER_FAILURES as exc:
            self._on_storage_error(exc, "reading the next request")
            return None

    def _next_request(self) -> Request | None:
        now = self.clock()
        self._fill()
        request = self._pop(now)
        if request is None and self._would_idle(now):
            self._merge_for_idle()
            self._fill()
            request = self._pop(now)
        if request is None:
            due = self.polite.next_due()
            if due is not None:
                self.counts["politeness_waits"] += 1
            if self._idle_merge_wanted():  # held back by the gap: ask again when it ends
                gap_end = self._last_idle_merge + self._idle_merge_gap()
                due = gap_end if due is None else min(due, gap_end)
            if due is not None:
                self.waker.wake_at(due)
            return None
        self.stats.inc_value("scheduler/dequeued")
        self.handouts += 1
        return request

    def _pop(self, now: float) -> Request | None:
        if self._direct:
            return self._direct.popleft()
        for _ in range(10_000):  # bounded: each turn consumes one queued item or held host
            got = self.polite.pop(now)
            if self.polite.expired:
                self._renew_dns()  # a cached answer resumes its host at once
                if got is None:
                    continue
            if got is None:
                return None
            host, item = got
            checked = None if isinstance(item, RobotsMarker) else self._robots_check(item)
            stale = self._stale_robots(item, checked)
            if self.memory is not None:
                self.memory.started(host, robots=isinstance(item, RobotsMarker) or stale is not None)
            if isinstance(item, RobotsMarker):
                self._fetch_robots(host, item)
                continue
            if stale is not None:
                # Its origin's robots.txt expired while it waited in the host queue: fetch
                # it again here, in this host's turn, as RobotsRequested does. Handed out
                # as is, RobotsCacheMiddleware would fetch robots.txt itself, outside the
                # heaps, and the page would follow it at once (no tau_s, no tau_h).
                self.counts["robots_expired_in_queue"] += 1
                self._mark_robots_refetched(item)
                self._robots_wait.setdefault(stale, []).append(item)
                self._waiting += 1
                self._robots_fetching.add(stale)
                self._fetch_robots(host, RobotsMarker(stale), renew=True)
                continue
            if isinstance(item, Request):
                request = item
            else:
                try:
                    request = self._request_of(item.record)
                except ValueError as exc:
                    self.counts["undecodable_dropped"] += 1
                    logger.error(
                        "Dropping a queued request: %(exc)s",
                        {"exc": exc},
                        extra={"spider": self.spider},
                    )
                    self._host_finished(host, now)
                    self._release(item)
                    continue
            self._handed[id(request)] = Handout(host, now, item, request)
            request.meta["irl_host"] = host.name
            self._mark_robots_checked(request, item, checked)
            return request
        return None

    def _robots_check(self, item: Any) -> tuple[str, CachedRobots] | None:
        """The origin of a queued item and its cached robots.txt (looked up once per
        hand-out); None when robots.txt does not apply (no robots middleware, a request
        that skips it, no origin) or was never stored (its fetch ignored, e.g. by an
        offsite filter: the middleware decides)."""
        if self.robots is None or (
            isinstance(item, Request) and item.meta.get("dont_obey_robotstxt")
        ):
            return None
        origin = origin_of(_url_parts(_url_of(item)))
        if origin is None:
            return None
        cached = self.robots.cache.get(origin)
        return None if cached is None else (origin, cached)

    def _stale_robots(self, item: Any, checked: tuple[str, CachedRobots] | None) -> str | None:
        """The origin of a queued item whose robots.txt is no longer fresh (or is about to
        expire: the request reaches RobotsCacheMiddleware a little after its hand-out),
        None when its rules are fresh, do not apply, are being fetched, or were renewed
        for this item already (a TTL shorter than the host's wait must not loop)."""
        if checked is None or self._robots_refetched(item):
            return None
        origin, cached = checked
        if origin in self._robots_fetching:
            return None
        record = cached.record
        now = self.robots.clock()  # type: ignore[union-attr]
        return None if record.is_fresh(now + _robots_margin(record)) else origin

    def _robots_refetched(self, item: Any) -> bool:
        """Whether ``item``'s robots.txt was renewed in its host's turn already."""
        if isinstance(item, Held):
            return item.robots_refetched
        return isinstance(item, Request) and item in self._robots_renewed

    def _mark_robots_refetched(self, item: Any) -> None:
        if isinstance(item, Held):
            item.robots_refetched = True
        else:
            self._robots_renewed.add(item)

    def _mark_robots_checked(
        self, request: Request, item: Any, checked: tuple[str, CachedRobots] | None
    ) -> None:
        """Tell RobotsCacheMiddleware (``CHECKED_META``) that this hand-out was checked
        against its origin's cached robots.txt: fresh now, or fetched in this host's turn
        for it. The middleware then judges it by that record even if it expires before
        the request gets there, instead of fetching robots.txt outside the heaps with the
        page right behind it (a TTL shorter than the wait after the renewal). A flag the
        request brought from an earlier hand-out (retries and redirects copy meta) is
        dropped first: it vouched for another check, perhaps of another origin."""
        request.meta.pop(CHECKED_META, None)
        if checked is None or request.meta.get("dont_obey_robotstxt"):
            return
        origin, cached = checked
        now = self.robots.clock()  # type: ignore[union-attr]
        if not cached.record.is_fresh(now):
            if not self._robots_refetched(item):
                return  # a fetch of it is in flight: the middleware waits for that one
            # Renewed in the host's turn, expired again while the URL waited its turn
            # (IRL_ROBOTS_TTL shorter than that wait): judged by the renewed rules.
            self.counts["robots_expired_again_in_queue"] += 1
        request.meta[CHECKED_META] = (origin, now + self.handout_timeout)

    def _would_idle(self, now: float) -> bool:
        """BEAST has nothing left to load while URLs wait in a partial DRUM batch.

        Any room in RAM counts: the requests already there may all belong to hosts that
        are not due for seconds, while the new hosts the crawl needs to stay busy sit in
        URLseen's buffers until a bucket fills (a drop to half the download rate for a
        minute was seen when this waited for RAM to fall below half).
        """
        if now - self._last_idle_merge < self._idle_merge_gap():
            return False
        return self._idle_merge_wanted()

    def _idle_merge_wanted(self) -> bool:
        """URLs wait in a partial DRUM batch while BEAST is dry and RAM has room."""
        if not (
            self.urlseen.pending_tuples
            or self.urlseen.pending_deliveries
            or self.star.pending
        ):
            return False
        return self.beast.readable == 0 and self._ram_items() < self.ram_requests

    def _idle_merge_gap(self) -> float:
        """Least time from one forced merge to the next: IDLE_MERGE_COST_FACTOR times what
        the last one took, at most IRL_IDLE_MERGE_INTERVAL.

        A merge passes over URLseen's whole sorted file (and STAR's), so its cost grows
        with the crawl; spaced by 4 times that cost, forced merges take at most 1/5 of
        the time, and they run only while the crawl is starved (BEAST dry, room in RAM),
        when the reactor has little else to do. While they are cheap (a small crawl, the
        first minutes of a big one) each link level is merged as soon as it is found:
        with a fixed 1 s gap a 64-page site took 10 s against Scrapy's 1.2 s.
        """
        return min(self.idle_merge_interval, IDLE_MERGE_COST_FACTOR * self._idle_merge_cost)

    def _merge_for_idle(self) -> None:
        """Merge URLseen's partial batch (and STAR's) into BEAST now, timing the merge."""
        started = self.clock()
        self.urlseen.merge()
        self.star.flush()
        self._last_idle_merge = self.clock()
        self._idle_merge_cost = self._last_idle_merge - started
        self.counts["idle_merges"] += 1
        self.counts["idle_merge_seconds"] += round(self._idle_merge_cost, 6)

    def _fill(self) -> None:
        """Lazy loading: move records from BEAST towards host queues while RAM allows."""
        budget = self.ram_requests - self._ram_items()
        for _ in range(max(0, budget)):
            got = self.beast.pop()
            if got is None:
                break
            record, token = got
            host = _host_key(_url_parts(record_url(record)).hostname)
            self._route(Held(record, token), host)
        self._note_ram_peak()

    def _note_ram_peak(self) -> None:
        self.ram_peak = max(self.ram_peak, self._ram_items())

    def _ram_items(self) -> int:
        return len(self.polite) + self._waiting

    # -- completion tracking ----------------------------------------------------------------
    def _reached(self, request: Request, spider: Spider | None = None) -> None:
        # A request this scheduler handed out first: a project's own request may carry
        # dont_obey_robotstxt too, and must free its host like any other.
        entry = self._handed.get(id(request))
        if entry is not None:
            entry.reached = True
            self.polite.restarted(entry.host, self.clock())
            return
        if not request.meta.get("dont_obey_robotstxt"):
            return
        hop = self._hop_claims.get(request.url)
        if hop is not None:  # a redirect hop of our robots.txt fetch starts now
            hop.reached = True
            self.polite.restarted(hop.host, self.clock(), host_too=False, hop=True, ip=hop.ip)
            return
        robots_host = self._robots_hosts.get(request.url)
        if robots_host is not None:  # our robots.txt fetch starts now
            self.polite.restarted(robots_host, self.clock(), host_too=False)

    def _left(self, request: Request, spider: Spider | None = None) -> None:
        entry = self._handed.pop(id(request), None)
        if entry is not None:
            self._correct_start(entry.host, request)
            self._finish(entry)
            return
        if request.meta.get("dont_obey_robotstxt"):
            hop = self._hop_claims.get(request.url)
            if hop is not None:  # its host and IP slot are free, timed from its end
                self._release_hop(hop, self.clock())
                return
            robots_host = self._robots_hosts.pop(request.url, None)
            if robots_host is not None:
                # timed from its end, as pages are (_correct_start)
                self.polite.restarted(robots_host, self.clock(), host_too=False)

    def _finish(self, entry: Handout) -> None:
        """The request is over: its host (and IP) may be served again once due."""
        self._refresh_budget(entry.host)
        self._host_finished(entry.host, self.clock())
        self._release(entry.item)
        self._wake_engine()

    def _host_finished(self, host: Host, now: float, *, count_for_host: bool = True) -> None:
        """Free ``host`` in the heaps and log when its next request may come."""
        if not host.in_flight:
            return
        self.polite.finished(host, now, count_for_host=count_for_host)
        if self.memory is not None:
            self.memory.ended(host)
        self._grant_hops()  # a hop may be waiting for this host or its IP

    def _answered(self, response: Any, request: Request, spider: Spider | None = None) -> None:
        """A response that never went through the downloader (a downloader middleware
        answered: HttpCacheMiddleware's cached pages, a mock): no request_left_downloader
        will come, so the host is freed now rather than after IRL_HANDOUT_TIMEOUT."""
        entry = self._handed.get(id(request))
        if entry is not None and not entry.reached:
            del self._handed[id(request)]
            self.counts["handouts_answered_by_middleware"] += 1
            self._finish(entry)

    def _correct_start(self, host: Host, request: Request) -> None:
        """Time the host's and IP's next request from this request's end.

        The moment a request's bytes reached the server is not observable from Scrapy: a
        busy reactor can send well after the hand-out, or after ``request_reached_downloader``.
        The response's arrival is certainly later than the send, so timing the next request
        from it (when it is later than the booked start) keeps every gap at least tau, at
        the cost of adding the response time to the gap. One request per host (and, by
        default, per IP) is in flight, so nothing was handed out in between.
        """
        self.polite.restarted(host, self.clock())

    def _expire_handouts(self, now: float) -> None:
        """Free the hosts of requests that ended without reaching the downloader.

        A downloader middleware that raises (IgnoreRequest from OffsiteMiddleware, any
        error) ends a request with no signal the scheduler could hear. The engine keeps
        every request it is working on in its slot's ``inprogress`` from the moment it
        takes it from ``next_request`` until the request is over, so a hand-out that has
        left that set without reaching the downloader is over (checked every tick).
        IRL_HANDOUT_TIMEOUT remains the bound when the engine's set cannot be read.
        """
        in_progress = self._engine_in_progress()
        for key, entry in list(self._handed.items()):
            if entry.reached:
                continue
            if in_progress is not None and entry.request not in in_progress:
                self.counts["handouts_ended_before_download"] += 1
            elif now - entry.when > self.handout_timeout:
                self.counts["handouts_expired"] += 1
            else:
                continue
            del self._handed[key]
            self._finish(entry)

    def _engine_in_progress(self) -> Any:
        """The engine's set of requests being worked on (Scrapy's ``_Slot.inprogress``)."""
        engine = getattr(self.crawler, "engine", None)
        slot = getattr(engine, "_slot", None)
        in_progress = getattr(slot, "inprogress", None)
        return in_progress if isinstance(in_progress, set) else None

    # -- engine and housekeeping -------------------------------------------------------------
    def _wake_engine(self) -> None:
        engine = getattr(self.crawler, "engine", None)
        slot = getattr(engine, "_slot", None)
        if slot is not None:
            slot.nextcall.schedule()

    def _on_tick(self) -> None:
        now = self.clock()
        try:
            self.urlseen.write_out()
            self.star.write_out()
            self.beast.sync()
            self._expire_handouts(now)
            self._expire_hops(now)
            self._route_held(now)
            self.polite.forget_idle(now)
            if self.memory is not None:
                self.memory.tick()
            if now - self._last_unpark >= self.backlog_seconds:
                self._last_unpark = now
                if self.beast.unpark():
                    self._fill()
                    self._wake_engine()
            if self._would_idle(now):
                # The engine only asks when a slot frees or a host is due; while every
                # host waits out its delay, new URLs must still flow from URLseen to BEAST.
                self._merge_for_idle()
                self._fill()
                self._wake_engine()
            self._publish_stats()
        except _FRONTIER_FAILURES as exc:
            self._on_storage_error(exc, "the periodic write-out")
        except Exception:
            logger.exception(
                "IRL scheduler housekeeping failed", extra={"spider": self.spider}
            )

    def _on_storage_error(self, exc: Exception, where: str) -> None:
        """A frontier write failed (full disk, I/O error), or a frontier file read back
        damaged: close the spider once, cleanly.

        Going on would lose every URL enqueued from then on, one traceback each (or, for a
        damaged file, fail on every ``next_request`` and never close). What the last save
        committed stays on disk for the next start, which resumes or refuses.
        """
        damaged = not isinstance(exc, OSError)
        counter = "frontier_corrupt" if damaged else "storage_errors"
        self.counts[counter] += 1
        self.stats.set_value(f"{STAT}/{counter}", self.counts[counter])
        if self._storage_error:
            return
        self._storage_error = True
        reason = CORRUPTION_REASON if damaged else STORAGE_ERROR_REASON
        logger.error(
            _DAMAGED_MESSAGE if damaged else _FULL_DISK_MESSAGE,
            {"path": self.path, "where": where, "exc": exc, "reason": reason},
            extra={"spider": self.spider},
        )
        engine = self.crawler.engine
        if engine is None:
            return
        close_async = getattr(engine, "close_spider_async", None)  # Scrapy >= 2.14
        if close_async is not None:
            closing = deferred_from_coro(close_async(reason=reason))
        elif self.spider is not None:
            closing = engine.close_spider(self.spider, reason)
        else:
            return
        closing.addErrback(self._log_failure, "closing the spider after a storage error")

    def _work_due(self, now: float) -> bool:
        return bool(self._direct) or self.polite.due_now(now)

    def _downloader_free(self) -> bool:
        engine = getattr(self.crawler, "engine", None)
        downloader = getattr(engine, "downloader", None)
        return downloader is not None and not downloader.needs_backout()

    def _engine_running(self) -> bool:
        """Running and not closing: while a spider closes the engine stops pulling on purpose
        (in-flight downloads, even 20 s drip pages, are waited for), which is no idling."""
        engine = getattr(self.crawler, "engine", None)
        slot = getattr(engine, "_slot", None)
        return bool(getattr(engine, "running", False)) and slot is not None and not slot.closing

    def _sample_idle(self) -> None:
        try:
            self.idle.sample(self.clock())
        except Exception:
            logger.exception("IRL scheduler idle sampling failed", extra={"spider": self.spider})
            if self._idle_loop is not None and self._idle_loop.running:
                self._idle_loop.stop()

    def _log_failure(self, failure: Any, what: str) -> None:
        logger.error("%(what)s failed: %(f)s", {"what": what, "f": failure.getTraceback()},
                     extra={"spider": self.spider})  # fmt: skip

    def _publish_stats(self) -> None:
        s = self.stats.set_value
        s(f"{STAT}/urlseen_pending", self.urlseen.pending_tuples)
        s(f"{STAT}/urlseen_merges", self.urlseen.stats.merges)
        s(f"{STAT}/ram_requests", self._ram_items())
        s(f"{STAT}/ram_requests_peak", self.ram_peak)
        s(f"{STAT}/hosts_in_ram", len(self.polite.hosts))
        s(f"{STAT}/dns_waiting_hosts", len(self._dns_wait))
        s(f"{STAT}/dns_renewing_hosts", self.polite.resolving)
        s(f"{STAT}/held_hosts", len(self._held))
        s(f"{STAT}/robots_waiting_origins", len(self._robots_wait))
        s(f"{STAT}/in_flight", len(self._handed))
        for key, value in self.beast.stats().items():
            s(f"{STAT}/beast/{key}", value)
        for key, value in self.star.stats().items():
            s(f"{STAT}/star/{key}", value)
        if self.memory is not None:
            for key, value in self.memory.stats().items():
                s(f"{STAT}/politeness_log/{key}", value)
        for key, value in self.counts.items():
            s(f"{STAT}/{key}", value)
        if self.idle.samples:
            s(f"{STAT}/idle/samples", self.idle.samples)
            s(f"{STAT}/idle/downloader_free", self.idle.free)
            s(f"{STAT}/idle/work_due", self.idle.due)
            s(f"{STAT}/idle/idle_while_due", self.idle.idle_while_due)
            s(f"{STAT}/idle/idle_while_due_share", round(self.idle.share, 4))
            s(f"{STAT}/idle/stalled", self.idle.stalled)
            s(f"{STAT}/idle/stalled_share", round(self.idle.stalled_share, 4))

    def _log_top_plds(self) -> None:
        top = self.star.top(self.top_plds)
        if not top:
            return
        lines = "\n".join(
            f"  {pld:<40} in-degree {d:>6}  budget {b:>6}  admitted {p:>7}"
            for pld, d, b, p in top
        )
        logger.info(
            "Top PLDs by in-degree:\n%(lines)s",
            {"lines": lines},
            extra={"spider": self.spider},
        )

    # -- state -----------------------------------------------------------------------------
    def has_pending_requests(self) -> bool:
        return bool(
            self._direct
            or len(self.polite)
            or self._dns_wait
            or self._held
            or self._robots_wait
            or self._robots_fetching
            or len(self.beast)
            or self.urlseen.pending_tuples
            or self.urlseen.pending_deliveries
            or self.star.pending
            or self._handed
        )

    def __len__(self) -> int:
        return (
            len(self._direct)
            + self._ram_items()
            + len(self.beast)
            + self.urlseen.pending_tuples
        )
