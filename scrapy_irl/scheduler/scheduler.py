"""``IrlScheduler``: IRLbot's Fig. 2 pipeline as a Scrapy ``SCHEDULER``.

enqueue_request -> URLseen (DRUM check+update, the request as aux) -> STAR (budget B_x,
admitted P_x of the URL's PLD) -> BEAST (disk queues Q_1..Q_j, Q_F) -> DNS and robots.txt
(RobotsRequested: one fetch per origin, requests wait meanwhile) -> the host heap and the IP
heap -> next_request. Everything before the heaps lives on disk; RAM holds only the hosts
being crawled (lazy loading, Polybot 3.5), bounded by ``IRL_FRONTIER_RAM_REQUESTS``.

The engine is woken when the next host or IP becomes due (it would otherwise poll every
5 s); when nothing is due and the downloader would idle, URLseen's partial batch is merged
so the crawl never stalls or closes while work exists.

This module holds the Scrapy interface, the stores' life cycle and the hand-out loop; each
stage of the pipeline is a mixin of its own module, all sharing the state set up in
``IrlScheduler.__init__``: :mod:`.intake` (URLseen and STAR), :mod:`.routing` (DNS, the host
table, parking), :mod:`.robots_gate` (robots.txt checks and fetches), :mod:`.robots_hops`
(robots.txt redirect hops), :mod:`.tracking` (when a request is over) and
:mod:`.reporting` (stats). The heaps themselves are :mod:`.politeness`, BEAST
:mod:`.beast`, STAR :mod:`.star`.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections import Counter, deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.http import Request
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.job import job_dir
from twisted.internet import task

from scrapy_irl import config
from scrapy_irl.addon import STOCK_ROBOTS
from scrapy_irl.dirlock import DirectoryLock
from scrapy_irl.exceptions import IrlError, StoreAccessError
from scrapy_irl.refusal import log_refusal
from scrapy_irl.tempdirs import (
    make_temporary_directory,
    remove_temporary_directory,
    removed_at_exit,
)
from scrapy_irl.fingerprint import fingerprint_function_for, key_function
from scrapy_irl.hosts.download import other_http_handlers, polite_schemes, twisted_http_schemes
from scrapy_irl.hosts.ftp import ftp_server_answered
from scrapy_irl.hosts.middleware import resolver_from_crawler
from scrapy_irl.hosts.paths import open_host_store
from scrapy_irl.hosts.proxy import ProxyRoutes
from scrapy_irl.robots.middleware import refuses_long_crawl_delay, robots_for
from scrapy_irl.scheduler.backoff import BackoffPolicy
from scrapy_irl.scheduler.codec import (
    RequestCodec,
    pack_record,
    record_url,
)
from scrapy_irl.scheduler.delays import DelayPolicy
from scrapy_irl.scheduler.idle import IdleMeter
from scrapy_irl.scheduler.intake import Intake
from scrapy_irl.scheduler.items import (
    FRONTIER_FAILURES,
    STAT,
    Handout,
    Held,
    Hop,
    ParkedHeld,
    RobotsMarker,
    host_key,
    url_parts,
    without_host,
)
from scrapy_irl.scheduler.layout import MARKER as FRONTIER_MARKER
from scrapy_irl.scheduler.layout import (
    check_frontier,
    check_no_stock_queue,
    mark_frontier,
)
from scrapy_irl.scheduler.parking import ParkedStore
from scrapy_irl.scheduler.pipeline import budget_policy, check_settings
from scrapy_irl.scheduler.politeness import FORGET_SCAN_RATE, Host, Politeness
from scrapy_irl.scheduler.reporting import StatsReporting
from scrapy_irl.scheduler.robots_gate import RobotsGate
from scrapy_irl.scheduler.robots_hops import RobotsHops
from scrapy_irl.scheduler.routing import Routing
from scrapy_irl.scheduler.start_log import FILENAME as START_LOG
from scrapy_irl.scheduler.start_log import PolitenessMemory, StartLog
from scrapy_irl.scheduler.tracking import HandoutTracking
from scrapy_irl.scheduler.traps import PathTrapRule
from scrapy_irl.scheduler.unparking import FILL_SLICE, Unparking
from scrapy_irl.scheduler.urlnorm import SessionStripper
from scrapy_irl.scheduler.waker import EngineWaker

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Spider
    from scrapy.crawler import Crawler


logger = logging.getLogger(__name__)

#: Forced merges wait at least this many times the last one's duration (see _idle_merge_gap).
IDLE_MERGE_COST_FACTOR = 4.0
#: Largest factor the gap between forced merges grows by while they feed nothing to RAM.
IDLE_MERGE_MAX_BACKOFF = 32
#: ``finish_reason`` when the frontier could not be written (full disk, I/O error).
STORAGE_ERROR_REASON = "irl_storage_error"
#: finish_reason when a frontier file turns out damaged mid-crawl (checks at start cannot
#: see everything, e.g. a frame read only later): the spider closes instead of failing on
#: every next_request.
CORRUPTION_REASON = "irl_frontier_corrupt"
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


_OUR_ROBOTS = "scrapy_irl.robots.middleware.RobotsCacheMiddleware"


def _enabled_downloader_middlewares(settings: Any) -> set[str]:
    """Dotted paths of the downloader middlewares the settings enable."""
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
    return names


def _stock_robots_enabled(settings: Any) -> bool:
    """Whether the project turned Scrapy's own robots middleware back on next to ours
    (the add-on replaces it; listing it again runs both)."""
    return {STOCK_ROBOTS, _OUR_ROBOTS} <= _enabled_downloader_middlewares(settings)


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


class IrlScheduler(Intake, Routing, RobotsGate, RobotsHops, HandoutTracking, Unparking,
                   StatsReporting):  # fmt: skip
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
        self.skip_long_crawl_delay = refuses_long_crawl_delay(settings)
        self.ram_requests = config.getint(settings, "IRL_FRONTIER_RAM_REQUESTS", minimum=1)
        # Read now: a bad value must stop the start, not fail the close after the crawl.
        self.top_plds = config.getint(settings, "IRL_REPORT_TOP_PLDS", minimum=0)
        self.robots_retries = config.getint(settings, "IRL_ROBOTS_UNREACHABLE_RETRIES")
        if self.robots_retries < 0:
            raise ValueError(
                f"IRL_ROBOTS_UNREACHABLE_RETRIES cannot be negative, got {self.robots_retries}"
            )
        #: SCHEDULER_DEBUG, as in Scrapy's scheduler: log the first unserializable request.
        self.log_unserializable = settings.getbool("SCHEDULER_DEBUG")
        self.backlog_seconds = config.getfloat(settings, "IRL_RAM_BACKLOG_SECONDS")
        if self.backlog_seconds < 0:
            raise ValueError(
                f"IRL_RAM_BACKLOG_SECONDS cannot be negative, got {self.backlog_seconds}"
            )
        self._parked_ready: deque[str] = deque()  # IPs with room the last sweep found
        self._parked_tokens: list[Any] = []  # BEAST tokens of records parked since the save
        #: requests over for the heaps whose records wait until the engine is done with
        #: them too (their callbacks ran): see _release_after_engine
        self._in_engine: list[tuple[Request, Any]] = []
        # BEAST's close saved: records released from the parked store may be deleted
        # (one moved to a BEAST retry queue is durable there only then)
        self._beast_saved = False
        self.flush_interval = config.getfloat(settings, "IRL_DRUM_FLUSH_INTERVAL", above=0)
        self.handout_timeout = config.getfloat(settings, "IRL_HANDOUT_TIMEOUT", above=0)
        self.robots_host_delay = config.getbool(settings, "IRL_ROBOTS_HOST_DELAY")
        self.backoff = BackoffPolicy(
            frozenset(config.getintlist(settings, "IRL_BACKOFF_HTTP_CODES")),
            config.getfloat(settings, "IRL_BACKOFF_MAX", minimum=0),
            config.getfloat(settings, "IRL_BACKOFF_MAX_FACTOR", minimum=1),
            config.getbool(settings, "IRL_BACKOFF_ON_DOWNLOAD_ERROR"),
        )
        self.idle_merge_interval = config.getfloat(settings, "IRL_IDLE_MERGE_INTERVAL", minimum=0)
        self.max_batch_age = config.getfloat(settings, "IRL_URLSEEN_MAX_BATCH_AGE", minimum=0)
        self.idle_sample_interval = config.getfloat(settings, "IRL_IDLE_SAMPLE_INTERVAL", minimum=0)
        self.handouts = 0
        self.ram_peak = 0  # most requests in RAM at once (lazy loading bounds it)
        self.idle = IdleMeter(self._work_due, self._downloader_free, lambda: self.handouts,
                              active=self._engine_running, clock=self.clock)  # fmt: skip
        self._idle_loop: task.LoopingCall | None = None
        self.strip_session = SessionStripper(
            config.getlist(settings, "IRL_SESSION_PARAMS")
        )
        #: Hosts held by an earlier run's robots.txt failure (RobotsGate._tell_earlier_failure).
        self._told_earlier_failures: set[str] = set()
        self._told_slow_origins: set[str] = set()
        #: Folded source URLs whose spelling redirect was fetched (Intake._spelling_redirect).
        self._spelling_redirected: set[str] = set()
        # URLseen seen-marks (``update`` only: no request waits behind them) in its
        # current epoch, and the merge count that epoch began at (``__len__``).
        self._marks = 0
        self._marks_merge = -1
        # DUPEFILTER_CLASS = BaseDupeFilter (what ``scrapy shell`` sets, so that a page can
        # be fetched again): nothing is filtered, every request goes as if dont_filter.
        self.filtering = _class_path(settings.get("DUPEFILTER_CLASS")) != _NO_FILTER
        self._twisted_schemes = twisted_http_schemes(settings)
        self._polite_schemes = polite_schemes(settings)
        self._told_invalid_host = False
        self._next_forget = float("-inf")  # when the next scan for idle hosts is due
        self._next_ready_count = float("-inf")  # when irl_sched/ready_hosts is next counted
        # Duplicates logged as Scrapy's scheduler has its dupefilter log them: the first
        # one, or every one with DUPEFILTER_DEBUG.
        self.log_every_duplicate = settings.getbool("DUPEFILTER_DEBUG")
        self.log_next_duplicate = True
        self.trap_rule = PathTrapRule(
            max_segments=config.getint(settings, "IRL_TRAP_MAX_PATH_SEGMENTS", minimum=0),
            max_repeats=config.getint(settings, "IRL_TRAP_MAX_SEGMENT_REPEATS"),
        )
        # Read (and range-checked, naming the setting) before Politeness sees it: its own
        # error named its argument, max_in_flight_per_ip.
        max_in_flight = config.getint(settings, "IRL_IP_MAX_IN_FLIGHT", minimum=1)
        self.polite = Politeness(
            max_in_flight_per_ip=max_in_flight,
            ready_order=config.getstr(settings, "IRL_IP_SHARE", choices=Politeness.READY_ORDERS),
            streak_memory=self.backoff.maximum,
            ip_delay_for=self.delays.ip,
        )
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
        # how many of them each host has, over all its origins (ports, schemes)
        self._robots_waits_by_host: Counter[str] = Counter()
        self._waiting = 0  # items in both wait lists (kept, not summed per hand-out)
        self._robots_fetching: set[str] = set()
        # Requests kept in RAM (not BEAST records) whose robots.txt was renewed in their
        # host's turn: what Held.robots_refetched says of a record.
        self._robots_renewed: weakref.WeakSet[Request] = weakref.WeakSet()
        self._direct: deque[Request] = deque()  # requests without a host (data:, file:)
        # The BEAST records of requests in _direct (by id of the request): released when
        # next_request hands the request out, not when it is queued. The engine may not
        # ask for seconds (a closing spider waits for its downloads first), and a record
        # released meanwhile was saved as finished: a kill then lost the URL (a kill -9
        # probe lost 15-31 refused URLs in 6 of 8 Ctrl-C-then-kill runs, 2026-11-27).
        self._direct_held: dict[int, Held] = {}
        # Requests waiting in RAM for URLseen's verdict, with their host: those that
        # cannot be serialized, and those without a host (None; see Intake._enqueue).
        self._ram_checks: dict[int, tuple[Request, str | None]] = {}
        self._ram_check_ids = 0
        self._robots_hosts: dict[
            str, Host
        ] = {}  # robots.txt URL being fetched -> its host
        # Its redirect hops booked in the heaps, by URL (requests the host's tau_h counts,
        # holding their host and an IP slot until request_left_downloader or the end of
        # their fetch), and those still waiting for their host or IP to be free.
        self._hop_claims: dict[str, Hop] = {}
        self._hop_waits: list[Hop] = []
        # (when, delayed call) of the next retry of the waiting hops, set while a hop
        # waits for its host's back-off to end (RobotsHops._grant_hops_at)
        self._hop_regrant: tuple[float, Any] | None = None
        # Origin -> the host its robots.txt fetch (a marker handed out) holds, until the
        # fetch ends; and the fetches that ended while a hop of another fetch was sent
        # under their hold (a wait-for cycle): their host is freed when that hop is over.
        self._robots_holds: dict[str, Host] = {}
        self._robots_ends_held: dict[str, Host] = {}
        # id(request) -> its hand-out, until the request is over
        self._handed: dict[int, Handout] = {}
        # Hand-outs freed by IRL_HANDOUT_TIMEOUT while still on their way (id -> (entry,
        # when)): one that reaches the downloader later moves its host's and IP's start.
        self._expired: dict[int, tuple[Handout, float]] = {}
        # record -> the Request it was written from, while something else still holds
        # that object (the entry, and the record with it, goes when the request does):
        # see _request_of.
        self._live: weakref.WeakValueDictionary[bytes, Request] = weakref.WeakValueDictionary()
        self._last_idle_merge = float("-inf")
        # when URLseen last merged, for any reason (its merge count when last looked at)
        self._last_urlseen_merge = float("-inf")
        self._urlseen_merges_seen = -1
        self._idle_merge_cost = 0.0  # seconds the last forced merge took
        # Times the gap to the next forced merge is stretched: doubled after each forced
        # merge that brought nothing into RAM, back to 1 after one that did.
        self._idle_merge_backoff = 1
        # URLseen's results owed after a merge, handed to STAR a slice per reactor turn
        self._delivery_call: Any = None
        # a forced merge whose results are still being delivered: (seconds spent so far,
        # BEAST pops and parkings when it started), finished by the last slice
        self._idle_merge_open: list[float] | None = None
        self._beast_pops = 0
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
            self.path, self.temporary = make_temporary_directory("scrapy-irl-frontier-"), True
        self._lock = DirectoryLock(self.path, what="frontier directory")

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        """The scheduler; a refused setting is logged first as one ERROR line. Scrapy
        builds the scheduler as the engine opens, and its failure path then raises
        ``RuntimeError: Engine slot not assigned``, the last line a user reads."""
        try:
            config.require_reactor(crawler.settings, "scrapy_irl.scheduler.IrlScheduler")
            return cls(crawler)
        except (ValueError, RuntimeError) as exc:
            log_refusal(logger, "%(error)s", {"error": exc},
                        spider=getattr(crawler, "spider", None), refused=exc)  # fmt: skip
            raise

    # -- lifecycle -------------------------------------------------------------------------
    def open(self, spider: Spider) -> None:
        """Lock the frontier directory, then open the stores; a failure closes what opened.

        A refusal (a damaged or foreign frontier, a directory another process holds) is
        logged first as one ERROR line that says what to do; the errors Scrapy's engine then
        logs because the crawl never opened ("Scraper close failure", ...) go to DEBUG.
        """
        try:
            self._lock.acquire()
            try:
                self._open_stores(spider)
            except BaseException:
                self._closed = True
                self._shut_down()
                raise
        except OSError as exc:
            # a file the system will not open (a directory in its place, no permission):
            # raw, it surfaced as a traceback under "Scraper close failure"
            refusal = StoreAccessError.from_os_error(exc, self.path)
            self._log_refusal(refusal, spider)
            raise refusal from exc
        except IrlError as exc:
            self._log_refusal(exc, spider)
            raise
        except config.SettingError as exc:  # (check_settings reads them all at creation)
            log_refusal(logger, "%(error)s", {"error": exc}, spider=spider, refused=exc)
            raise
        self._opened = True

    def _log_refusal(self, exc: IrlError, spider: Spider) -> None:
        """The one ERROR line that says why the crawl does not start and what to do."""
        log_refusal(
            logger,
            "%(error)s (%(kind)s). Frontier directory: %(path)s. Its files are left as they "
            "are: repair or restore them to resume, or use another JOBDIR to crawl from "
            "scratch.",
            {"error": exc, "kind": type(exc).__name__, "path": self.path},
            spider=spider, refused=exc,
        )

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
        # closed after BEAST (closers run newest first): BEAST saves the records taken
        # back from it before the store deletes them
        self.parked = ParkedStore(self.path / "parked", fsync=fsync)
        self._closers.append(("parked store", self._close_parked))
        self.star, self.beast = build_star_and_beast(self.path, settings, fsync=fsync)
        self._closers += [("BEAST", self._close_beast), ("STAR", lambda: self.star.close())]
        self.parked.check_floor(self.beast.saved_parked_floor)  # what its save counted, first
        # parked after BEAST's last save, before a kill: BEAST still owes them, and reads
        # them again (kept here too, they were fetched twice)
        dropped = self.parked.drop_unsaved_parks(self.beast.saved_parked_mark)
        if dropped:
            logger.info("%(n)d URLs were parked after the frontier's last save before the "
                        "last run stopped: BEAST queues them again, the parked copies are "
                        "removed", {"n": dropped}, extra={"spider": spider})  # fmt: skip
        if self.parked.moved_dropped:
            logger.info("%(n)d URLs moved from the parked store into a BEAST retry queue "
                        "just before the last run stopped were in both: the parked copies "
                        "are removed", {"n": self.parked.moved_dropped},
                        extra={"spider": spider})  # fmt: skip
        self.beast.parked_floor = self.parked.floor
        self.beast.parked_mark = lambda: self.parked.flushed_mark
        # Every save, whoever asks (the tick, STAR's write-out, the close), first forgets
        # what the store holds durably, and then lets the store delete what it made
        # durable in BEAST; a save between ticks (STAR's) left a record moved from the
        # store to a BEAST retry queue in both until the next tick.
        self.beast.before_save = self._flush_parking
        self.beast.after_save = self._after_beast_save
        self.urlseen = build_urlseen(
            self.path, settings, self.star, self._on_urlseen_results, fsync=fsync
        )
        self._closers.append(("URLseen", lambda: self.urlseen.close()))
        # seen-marks a previous run left pending (len(scheduler) leaves them out)
        self._marks, self._marks_merge = self.urlseen.recovered_updates, self.urlseen.stats.merges
        resumed = (self.path / FRONTIER_MARKER).exists()
        # for a spider whose URLs depend on state of its own (a port, a session) that a
        # resumed frontier needs back
        self.stats.set_value("irl_sched/resumed_frontier", int(resumed))
        mark_frontier(self.path, fsync=fsync)
        if not self.temporary:
            self._recall_starts(fsync, resumed=resumed)
        self.robots = robots_for(self.crawler)
        if self.robots is not None:
            self.robots.hop_gate = self._robots_hop_gate
            self.robots.hop_unsent = self._robots_hop_unsent
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
        # before request_left_downloader: the back-off is set when the host is freed
        self.crawler.signals.connect(self._downloaded, signal=signals.response_downloaded)
        # a response's headers arrived: a download that fails after them was answered
        self.crawler.signals.connect(self._headers_arrived, signal=signals.headers_received)
        # an FTP server refused a login or command: up, not silent
        self.crawler.signals.connect(self._headers_arrived, signal=ftp_server_answered)
        self.crawler.signals.connect(self._answered, signal=signals.response_received)
        if self.flush_interval > 0:
            self._tick = task.LoopingCall(self._on_tick)
            self._tick.start(self.flush_interval, now=False)
        if self.idle_sample_interval > 0:
            self.idle.call_later = reactor.callLater  # type: ignore[attr-defined]
            self.idle.confirm = min(0.05, self.idle_sample_interval / 2)
            self.idle.interval = self.idle_sample_interval
            self._idle_loop = task.LoopingCall(self._sample_idle)
            self._idle_loop.start(self.idle_sample_interval, now=False)
        self._warn_about_fighting_settings(settings)
        self._note_other_http_handlers(settings)
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
        # Records a scrapy-irl before 2026-11-28 parked in BEAST: readable at once (they
        # are parked again, in the parked store, if their host has enough work).
        self.beast.unpark()
        pending = self.urlseen.pending_tuples + len(self.beast) + len(self.parked)
        # 0 only when nothing at all waits: URLs, STAR's tuples, undelivered merges
        self.stats.set_value("irl_sched/resumed_pending", pending + self.urlseen.pending_deliveries
                             + self.star.pending)  # fmt: skip
        if pending:
            logger.info(
                "Resuming crawl from %(path)s: %(beast)d URLs queued in BEAST, %(parked)d "
                "parked, %(urlseen)d awaiting URLseen",
                {"path": self.path, "beast": len(self.beast), "parked": len(self.parked),
                 "urlseen": self.urlseen.pending_tuples},
                extra={"spider": spider},
            )  # fmt: skip

    def _recall_starts(self, fsync: bool, *, resumed: bool) -> None:
        """Load the last run's request starts, so politeness holds across the restart."""
        log = StartLog(self.path / START_LOG, horizon=self.delays.longest(),
                       ahead=self.backoff.maximum, fsync=fsync)  # fmt: skip
        missing = resumed and not log.path.exists()
        self.memory = PolitenessMemory(log, self.polite, self.clock)
        self._closers.append(("politeness log", self.memory.close))
        loaded = self.memory.loaded
        why = None
        if missing:
            why = "is missing (deleted, or the frontier of an earlier version)"
        elif loaded.unreadable is not None:
            why = f"cannot be read ({loaded.unreadable})"
        elif loaded.damaged_lines:
            why = f"has {loaded.damaged_lines} damaged lines (skipped)"
        elif loaded.torn_tail:
            why = "ends in a cut line (a kill during a write, or a truncated file)"
        if why is not None:
            # The hosts it lost may have been fetched just before the stop: until the
            # longest delay has passed, every host it does not name waits its delay
            # from this start (a probe cut the log to a tenth: 48 of 354 hosts were asked
            # sooner than their delay, without a word).
            longest = self.delays.longest()
            self.memory.recall_incomplete(longest)
            logger.warning(
                "%(path)s %(why)s: for the next %(s).1f s, every host and IP it does not "
                "name counts as fetched at this start and waits out its delay",
                {"path": log.path, "why": why, "s": longest}, extra={"spider": self.spider},
            )  # fmt: skip
        elif loaded.blind is not None:  # an earlier start's incomplete log, still read blind
            logger.info(
                "%(path)s was incomplete at an earlier start: for the next %(s).1f s, every "
                "host and IP it did not name counts as fetched at that start",
                {"path": log.path, "s": self.memory.blind_until - self.clock()},
                extra={"spider": self.spider},
            )  # fmt: skip
        if loaded.hosts or loaded.ips or loaded.backoffs or loaded.runs:
            logger.info(
                "Politeness across the restart: %(h)d hosts and %(i)d IPs wait out the "
                "delay of their last request (%(f)d were in flight at the stop), %(b)d "
                "hosts the rest of a server back-off (429/503, no answer), %(r)d hosts "
                "go on with their run of back-offs",
                {"h": len(loaded.hosts), "i": len(loaded.ips), "f": loaded.in_flight,
                 "b": len(loaded.backoffs), "r": len(loaded.runs)},
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
        elif (settings.getbool("ROBOTSTXT_OBEY")
              and _OUR_ROBOTS not in _enabled_downloader_middlewares(settings)):  # fmt: skip
            # The scheduler alone: robots.txt is left to whatever middleware obeys it
            # (Scrapy's, by default), which fetches it outside the heaps and knows no
            # Crawl-delay. The add-on, or RobotsCacheMiddleware in its place, fixes both.
            problems.append(
                "ROBOTSTXT_OBEY without scrapy_irl.robots.middleware.RobotsCacheMiddleware "
                "(robots.txt fetches bypass the host and IP heaps and Crawl-delay is not "
                "applied; enable the add-on, ADDONS = {'scrapy_irl.Addon': 0}, or that "
                "middleware in place of Scrapy's RobotsTxtMiddleware)"
            )
        if problems:
            self.counts["fighting_settings"] = len(problems)
            logger.warning(
                "The IRL scheduler enforces politeness itself; these settings make the "
                "downloader delay or block requests on top of it: %(p)s",
                {"p": ", ".join(problems)}, extra={"spider": self.spider},
            )  # fmt: skip

    def _note_other_http_handlers(self, settings: Any) -> None:
        """A project's own http(s) handler is its choice (the add-on keeps it): one line,
        since what it does with a failed request is beyond the heaps' sight."""
        others = other_http_handlers(settings)
        if others:
            logger.info(
                "IRL scheduler: downloads go through the project's handlers %(h)s, not "
                "scrapy_irl.hosts.download.PoliteHTTP11DownloadHandler: a request such a "
                "handler sends again by itself (Scrapy's HTTP11DownloadHandler does, at "
                "once, when one fails on a reused connection) skips the host and IP delays",
                {"h": ", ".join(f"{scheme}: {path}" for scheme, path in others.items())},
                extra={"spider": self.spider},
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
            if self._delivery_call is not None and self._delivery_call.active():
                self._delivery_call.cancel()  # owed results stay on disk for the next run
            self._finish_delivery_at_close()
            # the engine closes the scheduler once its requests are over (callbacks
            # included); URLseen's close writes their links out before BEAST's save
            for item in self._done_in_engine():
                self._release(item)
            if self._hop_regrant is not None and self._hop_regrant[1].active():
                self._hop_regrant[1].cancel()
            self._grant_hops()  # closed: the hops still waiting go (the fetch is dropped)
            saved = self._requeue_ram()
            if saved and not self.temporary:
                logger.info("Saved %(n)d requests held in RAM back to BEAST", {"n": saved},
                            extra={"spider": self.spider})  # fmt: skip
            elif saved:  # a temporary frontier, removed at close: nothing is kept
                logger.info("%(n)d requests were still queued at close (no JOBDIR: not kept)",
                            {"n": saved}, extra={"spider": self.spider})  # fmt: skip
            self._publish_stats()
            self._log_top_plds()
        except FRONTIER_FAILURES:
            if not self._removed_at_exit():
                raise
        finally:
            self._shut_down()

    def _finish_delivery_at_close(self) -> None:
        """A graceful stop hands over the rest of the epoch a sliced delivery began (at
        most one merge's results: seconds for hundreds of thousands of URLs). Left owed,
        the next run delivered it again from its first slice and counted those URLs in
        ``scheduler/enqueued`` and ``dupefilter/filtered`` twice (STAR's origins kept
        them from being queued twice). Epochs not yet begun stay owed, counted once."""
        if self.temporary or self._storage_error:
            return  # removed at close, or closing on a failed store: only save what RAM holds
        try:
            # URLseen's close writes its buffers out, and a bucket that reaches its size
            # merges and delivers a slice of a new epoch, left owed: write out first.
            self.urlseen.write_out()
            self.urlseen.finish_epoch()
        except Exception:  # noqa: BLE001 - the close must still save what RAM holds
            # The epoch stays owed, delivered again from its first slice at the next start.
            logger.exception("IRL scheduler: handing over URLseen's results at close failed; "
                             "the next start delivers them again", extra={"spider": self.spider})

    def _close_beast(self) -> None:
        self.beast.close()
        self._beast_saved = True

    def _after_beast_save(self) -> None:
        self.parked.apply_releases()  # a retry queue BEAST saved may hold them now
        self.parked.forget_marks(self.beast.saved_parked_mark)  # BEAST forgot them

    def _close_parked(self) -> None:
        """Close the parked store after BEAST, releases applied only if BEAST's close
        saved (a record released may be in a BEAST retry queue); that save's
        ``after_save`` already forgot the markers it covers."""
        self.parked.close(apply_releases=self._beast_saved)

    def _removed_at_exit(self) -> bool:
        """The process exits without closing the engine (``scrapy shell`` runs it in a
        daemon thread), and the exit handler removed the temporary frontier under a tick
        or a close: nothing on it could serve a later run, so its errors are not reported."""
        return self.temporary and removed_at_exit(self.path)

    def _shut_down(self) -> None:
        """Close every store opened (newest first: URLseen writes out into STAR, STAR into
        BEAST), even when one fails, then unlock; the first failure is raised at the end."""
        failure: BaseException | None = None
        while self._closers:
            what, close = self._closers.pop()
            try:
                close()
            except Exception as exc:  # noqa: BLE001 - the other stores must still close
                if self._removed_at_exit():
                    continue
                logger.error("Closing %(what)s of %(path)s failed: %(exc)r",
                             {"what": what, "path": self.path, "exc": exc},
                             extra={"spider": self.spider})  # fmt: skip
                failure = failure or exc
        if self.temporary:
            remove_temporary_directory(self.path)
        self._lock.release()
        if failure is not None:
            raise failure

    def _requeue_ram(self) -> int:
        """Graceful stop: requests in host queues and waits go back to disk (BEAST)."""
        items: list[Any] = [self._direct_held.pop(id(r), r) for r in self._direct]
        self._direct.clear()
        for name in list(self.polite.hosts):
            items.extend(self.polite.drain(name))
        for waits in (self._dns_wait, self._robots_wait, self._held):
            for queued in waits.values():
                items.extend(queued)
            waits.clear()
        self._robots_waits_by_host.clear()
        self._held_due.clear()
        self._waiting = 0
        # Requests without a host waiting for URLseen's verdict are saved unchecked (at
        # worst fetched twice); unserializable ones cannot be saved.
        for request, host in self._ram_checks.values():
            if host is None:
                items.append(request)
            else:
                self.counts["lost_unserializable_at_close"] += 1
        self._ram_checks.clear()
        saved = 0
        for item in items:
            if isinstance(item, ParkedHeld):
                continue  # still in the parked store, which the next run reads
            record = self._as_record(item)
            if record is not None:
                self.beast.requeue(record)
                saved += 1
            self._release(item)
        return saved

    def _queue_direct(self, request: Request, item: Any = None) -> None:
        """Hand ``request`` out at the next ``next_request``, outside the heaps; ``item``,
        if a BEAST record, stays owed until then."""
        self._direct.append(request)
        if isinstance(item, Held):
            self._direct_held[id(request)] = item
            if self._live:  # this hand-out uses the record's live request (_request_of)
                self._live.pop(item.record, None)

    def _release_after_engine(self, request: Request, item: Any) -> None:
        """``item`` was handed out as ``request``: BEAST (or the parked store) forgets it
        once the engine is done with the request, callbacks and errbacks included, and
        URLseen has written out the links they yielded (the next tick).

        Released when the download ended, a kill while the callback ran (an ``async``
        callback awaiting an API, a busy scraper) lost the page's links for good: the
        page was finished, its links never enqueued (a probe on 2026-11-29: a page's
        whole subtree missing from a crawl that finished after 56 kills). An engine whose
        set of requests cannot be read (not Scrapy's) gets the old rule: released now."""
        if not isinstance(item, Held):
            return
        if self._engine_in_progress() is None:
            self._release(item)
            return
        self._in_engine.append((request, item))

    def _done_in_engine(self) -> list[Any]:
        """Items of :meth:`_release_after_engine` whose requests the engine is done with
        (all of them once the engine's set of requests cannot be read: it closed)."""
        if not self._in_engine:
            return []
        in_progress = self._engine_in_progress()
        done: list[Any] = []
        waiting: list[tuple[Request, Any]] = []
        for request, item in self._in_engine:
            if in_progress is not None and request in in_progress:
                waiting.append((request, item))
            else:
                done.append(item)
        self._in_engine = waiting
        return done

    def _release(self, item: Any, *, moved: bool = False) -> None:
        """``item`` left RAM for good: BEAST (or the parked store) may forget it. ``moved``:
        into a BEAST retry queue (the parked store marks it: see :mod:`.parking`)."""
        if isinstance(item, ParkedHeld):
            self._release_parked(item, moved=moved)
        elif isinstance(item, Held):
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
        if self._closed:
            # The engine can offer one more start request after closing the scheduler
            # (the start pacing middleware let the reactor turn meanwhile): the stores are
            # closed. Refused and counted (stats were published at close), not reported
            # as a damaged frontier; a resumed crawl's start() offers it again.
            self.stats.inc_value(f"{STAT}/refused_after_close")
            logger.debug("Not kept, the scheduler is closed: %(request)s",
                         {"request": request}, extra={"spider": self.spider})  # fmt: skip
            return False
        try:
            kept = self._enqueue(request)
        except FRONTIER_FAILURES as exc:
            self._on_storage_error(exc, "enqueueing a request")
            return False
        self._schedule_delivery()  # a full bucket's merge may have delivered one slice only
        return kept

    # -- routing to hosts: DNS, robots.txt, politeness --------------------------------------
    # -- hand-out --------------------------------------------------------------------------
    def next_request(self) -> Request | None:
        try:
            return self._next_request()
        except FRONTIER_FAILURES as exc:
            self._on_storage_error(exc, "reading the next request")
            return None

    def _next_request(self) -> Request | None:
        now = self.clock()
        self._fill()
        request = self._pop(now)
        if request is None and self._would_idle(now):
            self._merge_for_idle()
            request = self._pop(now)
        if request is None:
            due = self.polite.next_due()
            if due is not None:
                self.counts["politeness_waits"] += 1
            if self._idle_merge_wanted() and not self._delivering_merge():
                # held back by the gap: ask again when it ends (a delivery in slices
                # wakes the engine at its end)
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
            request = self._direct.popleft()
            held = self._direct_held.pop(id(request), None)
            if held is not None:  # refused: its errback may yet yield requests
                self._release_after_engine(request, held)
            return request
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
                self._wait_for_robots(stale, item)
                self._robots_fetching.add(stale)
                self._fetch_robots(host, RobotsMarker(stale), renew=True)
                continue
            if isinstance(item, Request):
                request = item
            else:
                request = self._decode_or_drop(item)
                if request is None:  # dropped and counted; nothing went to the host, so
                    # its next URL need not wait tau_h (its IP's booking stands)
                    self._host_finished(host, now, count_for_host=False)
                    continue
            self._handed[id(request)] = Handout(host, now, item, request)
            request.meta["irl_host"] = host.name
            self._mark_robots_checked(request, item, checked)
            return request
        return None

    def _would_idle(self, now: float) -> bool:
        """BEAST has nothing left to load while URLs wait in a partial DRUM batch.

        Any room in RAM counts: the requests already there may all belong to hosts that
        are not due for seconds, while the new hosts the crawl needs to stay busy sit in
        URLseen's buffers until a bucket fills (a drop to half the download rate for a
        minute was seen when this waited for RAM to fall below half).
        """
        if self._delivering_merge():
            return False
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

    def _batch_stale(self, now: float) -> bool:
        """URLseen has not merged for IRL_URLSEEN_MAX_BATCH_AGE while URLs wait in its
        partial batch: merge it, though BEAST is not dry.

        Size triggers a merge when URLseen's largest key bucket reaches r, and the idle
        rule when BEAST runs dry. Neither comes while the crawl works through a backlog
        that cannot be cut: a probe web whose spam farm on 16 of 20 IPs kept 27-47 k
        over-budget URLs in Q_F and RAM full left 1 464 of 9 000 URLs of legitimate sites
        in URLseen's buckets for the rest of a 420 s crawl (its merges stopped after 40 s;
        the keys of a bucket grow by 9 bytes a URL, r is 1 MiB: about 11 minutes to the
        next one), and fetched no legitimate page in its last 120 s. Spaced by
        IDLE_MERGE_COST_FACTOR times the last forced merge's cost as well, so where
        merges are long (a big URLseen file) they take at most a fifth of the time."""
        merges = self.urlseen.stats.merges
        if merges != self._urlseen_merges_seen:
            self._urlseen_merges_seen = merges
            self._last_urlseen_merge = now
            return False
        if not self.max_batch_age or self._delivering_merge():
            return False
        if now - self._last_urlseen_merge < self.max_batch_age:
            return False
        if now - self._last_idle_merge < IDLE_MERGE_COST_FACTOR * self._idle_merge_cost:
            return False
        return bool(self.urlseen.pending_tuples or self.star.pending)

    def _idle_merge_gap(self) -> float:
        """Least time from one forced merge to the next: IDLE_MERGE_COST_FACTOR times what
        the last one took, at most IRL_IDLE_MERGE_INTERVAL.

        A merge passes over URLseen's whole sorted file (and STAR's), so its cost grows
        with the crawl; spaced by 4 times that cost, forced merges take at most 1/5 of
        the time, and they run only while the crawl is starved (BEAST dry, room in RAM),
        when the reactor has little else to do. While they are cheap (a small crawl, the
        first minutes of a big one) each link level is merged as soon as it is found:
        with a fixed 1 s gap a 64-page site took 10 s against Scrapy's 1.2 s.

        BEAST also looks dry when all it holds is parked: every host and IP with work
        has minutes of it in RAM already (a few big sites). Then a forced merge only
        parks what it finds, and merging after every gap spent the reactor on nothing;
        so each forced merge that brings nothing into RAM doubles the gap, up to
        IDLE_MERGE_MAX_BACKOFF times, and the first one that does resets it.
        """
        gap = min(self.idle_merge_interval, IDLE_MERGE_COST_FACTOR * self._idle_merge_cost)
        return gap * self._idle_merge_backoff

    def _merge_for_idle(self) -> None:
        """Merge URLseen's partial batch (and STAR's) into BEAST now, timing the merge,
        and load what it brought (:meth:`_fill`); see :meth:`_idle_merge_gap`.

        URLseen delivers one slice (IRL_URLSEEN_DELIVERY_SLICE) here; a larger merge is
        finished by :meth:`_deliver_slice`, a slice a turn, and STAR is flushed after its
        last slice."""
        started = self.clock()
        pops, parked = self._beast_pops, self.counts["parked_backlog"]
        self.urlseen.merge()
        self._idle_merge_open = [self.clock() - started, pops, parked]
        if self.urlseen.pending_deliveries:
            self._schedule_delivery()
        else:
            self._finish_idle_merge()

    def _finish_idle_merge(self) -> None:
        """The forced merge's results are all in STAR: flush it into BEAST and load RAM.
        It cost the time spent in its turns (not the turns between them); it brought
        something when more was read from BEAST since it began than was parked."""
        assert self._idle_merge_open is not None
        spent, pops, parked = self._idle_merge_open
        self._idle_merge_open = None
        started = self.clock()
        self.star.flush()
        self._last_idle_merge = self.clock()
        self._idle_merge_cost = spent + (self._last_idle_merge - started)
        self.counts["idle_merges"] += 1
        self.counts["idle_merge_seconds"] += round(self._idle_merge_cost, 6)
        self._fill()
        if self._beast_pops - pops > self.counts["parked_backlog"] - parked:
            self._idle_merge_backoff = 1
        else:
            self.counts["idle_merges_fruitless"] += 1
            self._idle_merge_backoff = min(IDLE_MERGE_MAX_BACKOFF, 2 * self._idle_merge_backoff)

    def _delivering_merge(self) -> bool:
        """A merge's results are still being handed over, a slice a turn."""
        return self._delivery_call is not None or self._idle_merge_open is not None

    def _schedule_delivery(self) -> None:
        """Deliver URLseen's owed results in the next reactor turn, if any are owed."""
        if self._delivery_call is None and not self._closed and self.urlseen.pending_deliveries:
            self._delivery_call = self._call_later(0.0, self._deliver_slice)

    def _deliver_slice(self) -> None:
        """One slice of URLseen's owed results to STAR, then yield the reactor.

        A merge of a large batch (hundreds of thousands of new links, or the batch a
        killed crawl left) took seconds to hand over at once, all that time with no
        response read and no request sent (7 s for 316 000 URLs, measured 2026-11-28)."""
        self._delivery_call = None
        if self._closed:
            return
        started = self.clock()
        try:
            self.urlseen.deliver(self.urlseen.delivery_slice)
            self.counts["urlseen_delivery_slices"] += 1
            if self._idle_merge_open is not None:
                self._idle_merge_open[0] += self.clock() - started
            if self.urlseen.pending_deliveries:
                self._schedule_delivery()
                return
            if self._idle_merge_open is not None:
                self._finish_idle_merge()
        except FRONTIER_FAILURES as exc:
            self._idle_merge_open = None
            self._on_storage_error(exc, "delivering URLseen's results")
            return
        except Exception:  # the epoch stays owed: the next tick's forced merge retries it
            self._idle_merge_open = None
            logger.exception("IRL scheduler: delivering URLseen's results failed",
                             extra={"spider": self.spider})  # fmt: skip
            return
        self._wake_engine()

    def _fill(self) -> None:
        """Lazy loading: move records from BEAST towards host queues while RAM allows,
        at most FILL_SLICE a call; parked records whose IP had room at the last sweep go
        first."""
        slice_left = FILL_SLICE
        if self._parked_ready:
            slice_left -= self._drain_ready(FILL_SLICE)
        rescan_went_on = False  # a slice of BEAST's re-read of Q_F, nothing to load yet
        for _ in range(max(0, min(slice_left, self.ram_requests - self._ram_items()))):
            got = self.beast.pop()
            if got is None:
                rescan_went_on = self.beast.rescanning
                break
            self._beast_pops += 1
            slice_left -= 1
            record, token = got
            held = Held(record, token)
            parts = url_parts(record_url(record))
            host = host_key(parts.hostname)
            no_host = without_host(parts.scheme, host, self._polite_schemes)
            if no_host or self._maybe_refused(parts):
                # Saved at a graceful stop: back to the direct queue, off the disk (a
                # host name Twisted refuses went the heaps' way on resume until
                # 2026-11-27: a DNS lookup, robots.txt and a turn, then the failure).
                request = self._decode_or_drop(held, take=False)  # routed on, or direct
                if request is None:
                    continue
                if no_host or self._refused_host(parts, request):
                    self._queue_direct(request, held)
                    continue
            self._route(held, host)
        if (slice_left < FILL_SLICE or rescan_went_on) and self._ram_items() < self.ram_requests and (
            self.beast.readable or self._parked_ready
        ):
            # this call made progress (or re-read part of Q_F) and RAM has room for more:
            # the next call loads it
            self.waker.wake_at(self.clock())
        self._note_ram_peak()

    def _note_ram_peak(self) -> None:
        self.ram_peak = max(self.ram_peak, self._ram_items())

    def _ram_items(self) -> int:
        return len(self.polite) + self._waiting

    # -- completion tracking ----------------------------------------------------------------
    # -- engine and housekeeping -------------------------------------------------------------
    def _wake_engine(self) -> None:
        try:
            engine = self.crawler.engine
        except (AttributeError, RuntimeError):  # Scrapy 2.19 raises before the crawl starts
            return
        slot = getattr(engine, "_slot", None)
        if slot is not None:
            slot.nextcall.schedule()

    def _on_tick(self) -> None:
        now = self.clock()
        try:
            done_with = self._done_in_engine()  # their links are in URLseen's buffers now
            self.urlseen.write_out()
            for item in done_with:  # BEAST forgets them in this tick's save, not before
                self._release(item)
            self._schedule_delivery()  # a write-out can merge a full bucket
            self.star.write_out()
            self.beast.sync()  # with the parked store's side (_flush_parking, _after_beast_save)
            self._expire_handouts(now)
            self._expire_hops(now)
            self._route_held(now)
            if now >= self._next_forget:
                # a scan of the whole host table: at most every hosts / FORGET_SCAN_RATE
                # seconds, so its cost per second stays flat as the table grows (85 ms
                # a tick at 100 000 hosts, measured 2026-11-27)
                self.polite.forget_idle(now)
                self._next_forget = now + len(self.polite.hosts) / FORGET_SCAN_RATE
            if self.memory is not None:
                self.memory.tick()
            released = self._sweep_parked()
            if now >= self.beast.retry_due:  # a DNS or robots.txt retry is due: its URLs
                released += self.beast.release_retries(now)
            if released:
                self._fill()
                self._wake_engine()
            if self._would_idle(now):
                # The engine only asks when a slot frees or a host is due; while every
                # host waits out its delay, new URLs must still flow from URLseen to BEAST.
                self._merge_for_idle()
                self._wake_engine()
            elif self._batch_stale(now):
                self.counts["stale_batch_merges"] += 1
                self._merge_for_idle()
                self._wake_engine()
            self._publish_stats()
        except FRONTIER_FAILURES as exc:
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
        if self._removed_at_exit():
            if not self._storage_error:
                self._storage_error = True
                logger.debug("IRL scheduler: the temporary frontier was removed at exit",
                             extra={"spider": self.spider})  # fmt: skip
            return
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
            or len(self.parked)
            or self.urlseen.pending_tuples
            or self.urlseen.pending_deliveries
            or self.star.pending
            or self._handed
        )

    def __len__(self) -> int:
        """Requests waiting to be handed out, each once. Until URLseen's next merge a
        duplicate counts as a request (only the merge can tell); URLseen results merged
        but not delivered yet, and admissions of a STAR epoch owed at open, count once
        they reach STAR or BEAST."""
        return (
            len(self._direct)
            + self._ram_items()
            + len(self.beast)
            + self.parked.available  # taken-back ones are counted in RAM
            + self._urlseen_requests()
            + self.star.admits_pending
        )
