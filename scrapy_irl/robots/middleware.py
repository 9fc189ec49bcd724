"""``RobotsCacheMiddleware``: Scrapy's ``RobotsTxtMiddleware`` with a persistent, bounded cache.

Drop-in: enabled by ``ROBOTSTXT_OBEY``, same ``ROBOTSTXT_PARSER`` / ``ROBOTSTXT_USER_AGENT``
settings, same ``robotstxt/*`` stats and ``robots_parsed`` signal. What changes (see
``docs/robots.rst``): rules persist in LevelDB across runs and expire after a TTL; RAM holds
a bounded LRU of parsed rules; redirects are followed here (at most 5, RFC 9309) instead
of by RedirectMiddleware; 5xx, timeouts and network errors mean "disallow all for now"
with back-off instead of "allow all for the rest of the run"; only the first 500 KiB are
parsed. One fetch per origin at a time: requests arriving meanwhile wait for it
(IRLbot's RobotsRequested).
"""

from __future__ import annotations

import logging
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import ParseResult, SplitResult, urljoin, urlsplit

from scrapy import signals
from scrapy.exceptions import IgnoreRequest, NotConfigured, StopDownload
from scrapy.http import Request
from scrapy.http.request import NO_CALLBACK
from scrapy.robotstxt import ProtegoRobotParser
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.misc import build_from_crawler, load_object
from scrapy.utils.python import to_unicode
from twisted.internet.defer import Deferred
from w3lib.url import safe_url_string

from scrapy_irl import config
from scrapy_irl.hosts.dnsfail import (
    BY_ROBOTS,
    DNS_ERRORS,
    DnsError,
    clear_dns_failure,
    mark_dns_failed,
)
from scrapy_irl.hosts.download import handler_fails_marked, irl_scheduled, twisted_http_schemes
from scrapy_irl.hosts.middleware import shared_resolver
from scrapy_irl.hosts.names import refused_by_twisted
from scrapy_irl.hosts.paths import open_host_store
from scrapy_irl.hosts.proxy import robots_meta
from scrapy_irl.hosts.records import RobotsKind, RobotsRecord
from scrapy_irl.refusal import refusing_start
from scrapy_irl.startfail import release_if_start_fails
from scrapy_irl.robots import reduce
from scrapy_irl.robots.cache import CachedRobots, RobotsCache
from scrapy_irl.robots.matching import urls_for_rules
from scrapy_irl.robots.origin import HTTP_ORIGINS, origin_host, origin_of
from scrapy_irl.robots.policy import NO_RESPONSE, RobotsPolicy

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)
#: The ``IgnoreRequest`` message of a request dropped because robots.txt is unreachable.
UNREACHABLE_MESSAGE = "Forbidden by robots.txt: unreachable (5xx, timeout or network error)"

#: The robots middleware of each running crawler, for CrawlDelayMiddleware and the scheduler.
_BY_CRAWLER: weakref.WeakValueDictionary[int, RobotsCacheMiddleware] = (
    weakref.WeakValueDictionary()
)

STAT_PREFIX = "irl_robots"
#: Meta key of our robots.txt requests: the body bytes read before the download is stopped.
MAX_BYTES_META = "irl_robots_max_bytes"
_RECEIVED_META = "_irl_robots_bytes_received"
#: Meta key set to the status of a robots.txt response the download handler completed,
#: before the downloader middlewares' process_response (which may still fail it).
_DOWNLOADED_META = "_irl_robots_downloaded_status"
#: Redirects a robots.txt fetch follows (RFC 9110 section 15.4; 304 is not one).
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
#: Status stored for a robots.txt that could not be read: a response a middleware refused,
#: a redirect that is not followed (see _fetch). It is unavailable: allow all for the TTL.
UNREADABLE = 399
#: Meta key the IRL scheduler sets on a request it hands out after checking it against
#: its origin's cached robots.txt: ``(origin, until)``, ``until`` in this middleware's
#: clock. Until then the request is judged by the cached record even once it has expired,
#: instead of fetching robots.txt here, outside the politeness heaps (see
#: :meth:`RobotsCacheMiddleware.robot_parser`).
CHECKED_META = "irl_robots_checked"
#: Meta key the IRL scheduler sets on a request whose host name Twisted's client refuses
#: (``user@host``): it fails before sending a byte, so no robots.txt is fetched for it
#: here, outside the heaps, for nothing.
INVALID_HOST_META = "irl_invalid_host"
#: Meta key the IRL scheduler sets on a request it refused by its origin's robots.txt and
#: hands out only for its errback: ``"forbidden"`` or ``"unreachable"``. The middleware
#: fails it with the IgnoreRequest it would raise itself, whatever the cache holds by then.
REFUSED_META = "irl_robots_refused"
#: At most this many origins' robots.txt DNS failures are remembered (for IRL_DNS_NEGATIVE_TTL).
DNS_FAILED_ORIGINS = 10_000


class NameDoesNotResolve(Exception):
    """robots.txt of an origin whose name does not resolve: its pages fail the same way.

    Stock Scrapy reads a failed robots.txt fetch as "allow all", and the page then fails
    with the DNS error in the download handler; RFC 9309's "unreachable, complete
    disallow" would drop it with ``IgnoreRequest`` instead, and a spider's errback, or
    ``RetryMiddleware``, would no longer see the DNS error. Nothing is fetched either way:
    the page is marked to fail with that error in the add-on's download handler
    (:mod:`scrapy_irl.hosts.dnsfail`), or fails here under another handler, so a lookup
    that succeeds in between cannot send it unchecked. Nothing is stored in the host
    store; the origin's failure is remembered in RAM for IRL_DNS_NEGATIVE_TTL, so its
    other pages fail the same way without a robots.txt request each."""


UNREACHABLE = "unreachable"
#: REFUSED_META of a request whose origin asks for a Crawl-delay above IRL_CRAWL_DELAY_MAX
#: (with IRL_CRAWL_DELAY_OVER_MAX = "skip").
CRAWL_DELAY_TOO_LONG = "crawl_delay"
#: IRL_CRAWL_DELAY_OVER_MAX's values.
OVER_MAX_CHOICES = ("skip", "cap")


def refuses_long_crawl_delay(settings: Any) -> bool:
    """Whether an origin asking for a Crawl-delay above IRL_CRAWL_DELAY_MAX is skipped
    (True) or crawled at IRL_CRAWL_DELAY_MAX (False)."""
    return config.getstr(settings, "IRL_CRAWL_DELAY_OVER_MAX", choices=OVER_MAX_CHOICES) == "skip"


def robots_for(crawler: Crawler) -> RobotsCacheMiddleware | None:
    """The ``RobotsCacheMiddleware`` enabled in ``crawler``, if any."""
    return _BY_CRAWLER.get(id(crawler))


def policy_from_settings(settings: Any) -> RobotsPolicy:
    try:
        return RobotsPolicy(
            ttl=config.getfloat(settings, "IRL_ROBOTS_TTL", above=0),
            max_bytes=config.getint(settings, "IRL_ROBOTS_MAX_BYTES", minimum=1),
            max_decoded_bytes=config.getint(settings, "IRL_ROBOTS_MAX_DECODED_BYTES", minimum=1),
            max_redirects=config.getint(settings, "IRL_ROBOTS_MAX_REDIRECTS", minimum=0),
            retry_delay=config.getfloat(settings, "IRL_ROBOTS_RETRY_DELAY", above=0),
            retry_max_delay=config.getfloat(settings, "IRL_ROBOTS_RETRY_MAX_DELAY"),
            stale_ttl=config.getfloat(settings, "IRL_ROBOTS_STALE_TTL", minimum=0),
        )
    except config.SettingError:
        raise  # names its setting already
    except ValueError as exc:  # the values together (RobotsPolicy's own checks)
        # Not NotConfigured: that would switch robots.txt off without a word.
        raise config.SettingError(f"invalid IRL_ROBOTS_* setting: {exc}") from exc


class RobotsCacheMiddleware:
    """Downloader middleware obeying robots.txt from a persistent per-origin cache."""

    DOWNLOAD_PRIORITY: int = 1000

    def __init__(
        self, crawler: Crawler, *, clock: Callable[[], float] = time.time
    ) -> None:
        settings = crawler.settings
        if not settings.getbool("ROBOTSTXT_OBEY"):
            raise NotConfigured
        self.crawler = crawler
        self.stats = crawler.stats
        self.clock = clock
        self._default_useragent: str = settings["USER_AGENT"]
        self._robotstxt_useragent: str | None = settings["ROBOTSTXT_USER_AGENT"]
        self._download_maxsize: int = settings.getint("DOWNLOAD_MAXSIZE")
        #: Schemes fetched by Twisted's HTTP client, which refuses some host names before
        #: sending (a proxy, or another handler, may reach them).
        self._twisted_schemes = twisted_http_schemes(settings)
        #: Schemes whose download handler fails a page marked for a dead name (the
        #: add-on's); for the others the page fails here (see NameDoesNotResolve).
        self._handler_fails = handler_fails_marked(settings)
        #: Origins whose robots.txt failed on their name's DNS, until when (wall clock),
        #: with the error: their pages fail the same way without another robots.txt
        #: request each (bounded: the oldest go first).
        self._dns_failed: OrderedDict[str, tuple[float, str]] = OrderedDict()
        self._dns_failed_ttl = config.getfloat(settings, "IRL_DNS_NEGATIVE_TTL", above=0)
        #: Refuse requests to origins asking for a Crawl-delay above IRL_CRAWL_DELAY_MAX
        #: (IRL_CRAWL_DELAY_OVER_MAX "skip"), as the IRL scheduler does with its own.
        self._skip_long_delays = refuses_long_crawl_delay(settings) and irl_scheduled(crawler)
        self._crawl_delay_max = config.getfloat(settings, "IRL_CRAWL_DELAY_MAX", minimum=0)
        self._parserimpl: Any = load_object(settings.get("ROBOTSTXT_PARSER"))
        build_from_crawler(self._parserimpl, crawler, b"")  # fail early on missing deps
        #: Protego bodies are reduced to our user agent's group before parsing (see
        #: scrapy_irl.robots.reduce); other parsers get the whole body.
        self._reduce = (
            config.getbool(settings, "IRL_ROBOTS_REDUCE")
            and reduce.AVAILABLE
            and self._parserimpl is ProtegoRobotParser
        )
        self.policy = policy_from_settings(settings)
        # Read before the store opens: a refused value must not leave it held.
        memory_entries = config.getint(settings, "IRL_ROBOTS_MEMORY_ENTRIES", minimum=1)
        memory_bytes = config.getint(settings, "IRL_ROBOTS_MEMORY_BYTES", minimum=1)
        self.store = open_host_store(settings)
        self.cache = RobotsCache(
            self.store,
            self._parse,
            memory_entries=memory_entries,
            memory_bytes=memory_bytes,
            on_event=lambda name: self._inc(f"cache/{name}"),
            reread=self.policy.within_limits,
        )
        self._fetching: dict[str, list[Deferred[CachedRobots | None]]] = {}
        #: Called before each redirect hop of a robots.txt fetch with the next URL; returns
        #: a Deferred firing when the hop may start. The IRL scheduler sets it so that hops
        #: respect its host and IP delays; None follows redirects at once.
        # Called as hop_gate(url, route, origin) with the hop's proxy choice (see
        # robots_meta) and the origin whose robots.txt is fetched: the fetch holds that
        # origin's host and IP in the scheduler's heaps, and its hops must not wait for it.
        self.hop_gate: Callable[[str, dict[str, Any], str], Deferred[None]] | None = None
        # Called with a hop's URL when its gate fired but the hop is not sent after all.
        self.hop_unsent: Callable[[str], None] | None = None
        self._closed = False
        _BY_CRAWLER[id(crawler)] = self
        crawler.signals.connect(self._spider_closed, signal=signals.spider_closed)
        self._give_back_store = release_if_start_fails(crawler, self.store.release)
        crawler.signals.connect(self._bytes_received, signal=signals.bytes_received)
        crawler.signals.connect(self._response_downloaded, signal=signals.response_downloaded)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        with refusing_start("RobotsCacheMiddleware (host store)", crawler):
            return cls(crawler)

    def _inc(self, key: str, count: int = 1) -> None:
        self.stats.inc_value(f"{STAT_PREFIX}/{key}", count)

    def _parse(self, body: bytes) -> Any:
        if self._reduce:
            agent = to_unicode(
                self._robotstxt_useragent or self._default_useragent or "*"
            )
            return reduce.AgentRules(body, self.crawler.spider, agent)
        return build_from_crawler(self._parserimpl, self.crawler, body)

    def _spider_closed(self, spider: Spider | None = None) -> None:
        if self._closed:
            return
        self.stats.set_value(f"{STAT_PREFIX}/memory_entries", len(self.cache))
        self.stats.set_value(f"{STAT_PREFIX}/memory_bytes", self.cache.held_bytes)
        if self.store.write_errors:
            self.stats.set_value("irl_hosts/store_write_errors", self.store.write_errors)
        self._closed = True
        _BY_CRAWLER.pop(id(self.crawler), None)
        self._give_back_store()  # unless the crawl's failed start gave it back

    def _bytes_received(
        self, data: bytes, request: Request, spider: Spider | None = None
    ) -> None:
        """Stop reading a robots.txt once more than IRL_ROBOTS_MAX_BYTES arrived: the rest
        would be cut off anyway (RFC 9309 section 2.5), and a file that never ends would
        otherwise run into DOWNLOAD_TIMEOUT (unreachable: the whole site disallowed) or
        fill RAM up to DOWNLOAD_MAXSIZE. The response keeps what arrived."""
        limit = request.meta.get(MAX_BYTES_META)
        if limit is None:
            return
        if _RECEIVED_META not in request.meta:
            self._cap_decoded_size(request)
        received = request.meta.get(_RECEIVED_META, 0) + len(data)
        request.meta[_RECEIVED_META] = received
        if received > limit:
            # The reason WarcExtension writes as WARC-Truncated (its TRUNCATED_META):
            # cut at a configured maximum length (docs/warc.rst, "Bodies cut short").
            request.meta["irl_warc_truncated"] = "length"
            raise StopDownload(fail=False)

    def _response_downloaded(self, response: Response, request: Request,
                             spider: Spider | None = None) -> None:  # fmt: skip
        """Note that a robots.txt response arrived whole: a middleware that fails it
        afterwards (a body that does not decompress) says nothing of the server's health."""
        if MAX_BYTES_META in request.meta:
            request.meta[_DOWNLOADED_META] = response.status

    def _cap_decoded_size(self, request: Request) -> None:
        """Bound what HttpCompressionMiddleware may inflate a robots.txt to.

        The wire bytes stop at IRL_ROBOTS_MAX_BYTES, but 500 KiB of gzip can inflate
        a thousandfold, and the decompression limit is ``download_maxsize`` (1 GiB by
        default). Set at the first body bytes, not on the request: the download handler
        has then already compared Content-Length with its own limit (none: the request
        carries ``download_maxsize`` 0, see :meth:`_robots_request`), so a long plain
        robots.txt is cut, not cancelled. The project's DOWNLOAD_MAXSIZE still bounds
        the decompressed body when it is the lower limit.
        """
        cap = self.policy.max_decoded_bytes
        configured = self._download_maxsize
        request.meta["download_maxsize"] = min(cap, configured) if configured else cap

    # -- the middleware --------------------------------------------------------------------
    async def process_request(
        self, request: Request, spider: Spider | None = None
    ) -> None:
        if request.meta.get("dont_obey_robotstxt"):
            return
        if request.url.startswith(("data:", "file:")) or request.meta.get(INVALID_HOST_META):
            return
        refused = request.meta.pop(REFUSED_META, None)
        if refused is not None:  # the IRL scheduler's verdict, handed out for the errback
            if refused == UNREACHABLE:
                self._drop_unreachable(request)
            if refused == CRAWL_DELAY_TOO_LONG:
                self.refuse_crawl_delay(request, self.crawl_delay(request))
            self._forbid(request)
        clear_dns_failure(request)  # a verdict of an earlier pass of this request
        try:
            cached = await self.robot_parser(request, checked=request.meta.get(CHECKED_META))
        except NameDoesNotResolve as exc:
            self._inc("dns_failed_requests")
            if urlparse_cached(request).scheme not in self._handler_fails:
                raise DnsError(str(exc)) from exc  # no handler of ours to fail it
            mark_dns_failed(request, str(exc), BY_ROBOTS)
            return
        if cached is None:
            return
        if (
            not cached.allowed(request.url, self.user_agent(request))
            and cached.record.kind == RobotsKind.DISALLOW_ALL
        ):
            self._drop_unreachable(request)
        self.process_request_2(cached.rules, request)
        if self._skip_long_delays:
            # The IRL scheduler refuses such origins' URLs before the heaps; requests
            # that bypass it (engine.download: FilesPipeline's files) are refused here,
            # or they went out at IRL_CRAWL_DELAY_MAX spacing at best (a probe of
            # 2026-11-29: five files of an origin asking 120 s, 1 s apart).
            delay = cached.crawl_delay(self.user_agent(request))
            if delay and delay > self._crawl_delay_max:
                self.refuse_crawl_delay(request, delay)

    def _drop_unreachable(self, request: Request) -> NoReturn:
        """robots.txt cannot be had: RFC 9309 section 2.3.1.4, "complete disallow". So it
        counts in Scrapy's ``robotstxt/forbidden`` too (the meaning matches: refused by
        robots.txt), and the error starts as Scrapy's does, for errbacks that read it."""
        self._inc("unreachable_dropped")
        self.stats.inc_value("robotstxt/forbidden")
        logger.debug(
            "robots.txt of %(request)s is unreachable; dropping it",
            {"request": request},
            extra={"spider": self.crawler.spider},
        )
        raise IgnoreRequest(UNREACHABLE_MESSAGE)

    def refuse_crawl_delay(self, request: Request, delay: float | None) -> NoReturn:
        """The origin asks for a Crawl-delay above IRL_CRAWL_DELAY_MAX and the project
        skips such origins (IRL_CRAWL_DELAY_OVER_MAX = "skip"): fetching its pages faster
        than asked would break the Crawl-delay guarantee, waiting longer than the maximum
        is what the project ruled out. Refused like a robots.txt-forbidden page."""
        self._inc("crawl_delay_refused")
        self.stats.inc_value("robotstxt/forbidden")
        shown = "unknown" if delay is None else f"{delay:g}"
        logger.debug(
            "Forbidden by robots.txt: Crawl-delay of %(delay)s s is above "
            "IRL_CRAWL_DELAY_MAX: %(request)s",
            {"delay": shown, "request": request},
            extra={"spider": self.crawler.spider},
        )
        raise IgnoreRequest(
            f"Forbidden by robots.txt: Crawl-delay of {shown} s is above IRL_CRAWL_DELAY_MAX"
        )

    def _forbid(self, request: Request) -> NoReturn:
        logger.debug(
            "Forbidden by robots.txt: %(request)s",
            {"request": request},
            extra={"spider": self.crawler.spider},
        )
        self.stats.inc_value("robotstxt/forbidden")
        raise IgnoreRequest("Forbidden by robots.txt")

    def user_agent(self, request: Request) -> str:
        """The agent name robots.txt rules are matched for (Scrapy's choice: the
        ROBOTSTXT_USER_AGENT setting, else the request's User-Agent, else USER_AGENT), as
        text. A header's bytes that are not UTF-8 are read as Latin-1 (HTTP's historical
        header charset): Scrapy's parsers decoded them as UTF-8 and raised."""
        useragent: str | bytes | None = self._robotstxt_useragent
        if not useragent:
            useragent = request.headers.get(b"User-Agent", self._default_useragent)
        if isinstance(useragent, bytes):
            try:
                useragent = useragent.decode("utf-8")
            except UnicodeDecodeError:
                useragent = useragent.decode("latin-1")
        return useragent or "*"

    def process_request_2(self, rp: Any, request: Request) -> None:
        """Raise IgnoreRequest if ``rp`` forbids ``request`` (Scrapy's method, same contract)."""
        if rp is None:
            return
        agent = self.user_agent(request)
        if not all(rp.allowed(url, agent) for url in urls_for_rules(request.url)):
            self._forbid(request)

    @staticmethod
    def _checked_until(flag: Any, origin: str) -> float | None:
        """Until when the scheduler vouches for a request's robots.txt check (``flag``,
        its CHECKED_META), or None: no flag, a malformed one, or one naming another
        origin (a meta dict copied into a request for another site is no check of it)."""
        if flag is None:
            return None
        try:
            flagged_origin, until = flag
            until = float(until)
        except (TypeError, ValueError):
            return None
        return until if flagged_origin == origin else None

    # -- lookups ---------------------------------------------------------------------------
    def cached(self, url_or_request: Request) -> CachedRobots | None:
        """The cached state of a request's origin, without fetching (None if unknown)."""
        origin = origin_of(urlparse_cached(url_or_request))
        return self.cache.get(origin) if origin else None

    def crawl_delay(self, request: Request) -> float | None:
        """Crawl-delay/Request-rate of the request's origin for our user agent, if cached."""
        cached = self.cached(request)
        return (
            cached.crawl_delay(self.user_agent(request)) if cached is not None else None
        )

    async def robot_parser(
        self, request: Request, *, fresh_for: float = 0.0, checked: Any = None
    ) -> CachedRobots | None:
        """Rules for the request's origin: from RAM, from LevelDB, or fetched once.

        ``fresh_for``: a cached record expiring within this many seconds is fetched
        again now (the IRL scheduler renews it before a request it hands out).
        ``checked``: the request's CHECKED_META. The IRL scheduler checked the request
        against the cached record when it handed it out (its rules fresh then, or
        fetched in the host's turn); until the flag's time, for the flag's origin, an
        expired record is used rather than fetched again. A
        fetch here goes outside the politeness heaps, the page right behind it, and
        with a TTL shorter than a host's wait each such request would bring one."""
        origin = origin_of(urlparse_cached(request))
        if origin is None:
            self._inc("no_host")
            return None
        if not origin.startswith(HTTP_ORIGINS):  # ftp: and the like: not fetched
            self._inc("other_scheme")
            return None
        cached = self.cache.get(origin)
        if cached is not None:
            now = self.clock()
            if cached.record.is_fresh(now + fresh_for):
                return cached
            checked_until = self._checked_until(checked, origin)
            if checked_until is not None and origin not in self._fetching:
                if now <= checked_until:
                    self._inc("expired_but_checked")
                    return cached
                self._inc("checked_too_late")
            self._inc("cache/expired")
        failed = self._dns_failed.get(origin)
        if failed is not None:
            if self.clock() < failed[0]:
                raise NameDoesNotResolve(failed[1])
            del self._dns_failed[origin]
        waiters = self._fetching.get(origin)
        if waiters is not None:
            waiter: Deferred[CachedRobots | None] = Deferred()
            waiters.append(waiter)
            self._inc("waited")
            return await maybe_deferred_to_future(waiter)
        self._fetching[origin] = []
        try:
            result = await self._fetch(origin, cached, request)
        except BaseException as exc:
            for waiter in self._fetching.pop(origin, []):
                waiter.errback(exc)
            raise
        for waiter in self._fetching.pop(origin, []):
            waiter.callback(result)
        return result

    def _resolved_here(self, origin: str) -> bool:
        """Whether the crawl's HostResolver holds a fresh address for the origin's host."""
        resolver = shared_resolver(self.crawler)
        if resolver is None:
            return False
        record = resolver.cached(origin_host(origin))
        return record is not None and record.ok and record.is_fresh(resolver.clock())

    # -- fetching --------------------------------------------------------------------------
    async def _fetch(
        self, origin: str, previous: CachedRobots | None, request: Request
    ) -> CachedRobots | None:
        previous_record = previous.record if previous is not None else None
        url = f"{origin}/robots.txt"
        route = robots_meta(request.meta)  # through the page's proxy, if it names one
        for hop in range(self.policy.max_redirects + 1):
            try:
                robots_request = self._robots_request(url, route, hop)
            except ValueError:
                self._inc("bad_redirect")
                return self._store_unreadable(origin, previous_record)
            self.stats.inc_value("robotstxt/request_count")
            try:
                response = await self.crawler.engine.download_async(robots_request)
            except IgnoreRequest:
                if robots_request.meta.get(_RECEIVED_META):
                    # The server answered and a middleware refused the response:
                    # HttpCompressionMiddleware past IRL_ROBOTS_MAX_DECODED_BYTES (or
                    # DOWNLOAD_MAXSIZE) once decompressed (a gzip bomb). Unreadable, so unavailable: allow all for the TTL.
                    # Storing nothing fetched it again for every request to the origin.
                    self._inc("response_dropped")
                    return self._store_unreadable(origin, previous_record)
                if hop:
                    # The origin's server answered with a redirect a middleware will not
                    # follow (an offsite filter): like a redirect to no http(s) URL,
                    # unavailable, allow all for the TTL. Storing nothing fetched
                    # robots.txt again for every request to the origin (with the IRL
                    # scheduler, again right before the page, outside the heaps).
                    self._inc("redirect_ignored")
                    return self._store_unreadable(origin, previous_record)
                self._inc(
                    "fetch_ignored"
                )  # e.g. an offsite filter: says nothing about the host
                return None
            except Exception as exc:  # noqa: BLE001 - any fetch failure is "unreachable"
                status = robots_request.meta.get(_DOWNLOADED_META)
                if status is not None and not self.policy.is_unreachable_status(status):
                    # The server answered in full and a middleware failed the response
                    # (a 200 labelled gzip that is not: BadGzipFile). Unreadable, so
                    # unavailable: allow all for the TTL, as a refused response. Taken
                    # as unreachable, it disallowed the whole site, at every re-fetch.
                    self._inc("response_dropped")
                    logger.warning(
                        "robots.txt of %(origin)s (HTTP %(status)d) failed in a downloader "
                        "middleware: %(kind)s: %(exc)s; read as unavailable (allow all)",
                        {"origin": origin, "status": status, "kind": type(exc).__name__,
                         "exc": exc}, extra={"spider": self.crawler.spider},
                    )  # fmt: skip
                    return self._store_unreadable(origin, previous_record)
                if not hop and isinstance(exc, DNS_ERRORS) and self._resolved_here(origin):
                    # The downloader looked the name up itself (DNSCACHE_ENABLED off, or
                    # a resolver that does not read Scrapy's cache) and failed, while the
                    # host's record holds a fresh address: a resolver hiccup, not a dead
                    # name. Taken as unreachable, so robots.txt is asked again after
                    # IRL_ROBOTS_RETRY_DELAY; marked dead, every URL of the host failed
                    # (a probe: 30 intermittent names, 1 200 of 1 200 pages lost).
                    self._inc("dns_failed_in_downloader")
                elif not hop and isinstance(exc, DNS_ERRORS):
                    self._inc("dns_failed")
                    self._dns_failed[origin] = (self.clock() + self._dns_failed_ttl, str(exc))
                    while len(self._dns_failed) > DNS_FAILED_ORIGINS:
                        self._dns_failed.popitem(last=False)
                    logger.info(
                        "robots.txt of %(origin)s not fetched: %(exc)s. Its requests fail "
                        "with the same DNS error, nothing fetched.",
                        {"origin": origin, "exc": exc}, extra={"spider": self.crawler.spider},
                    )  # fmt: skip
                    raise NameDoesNotResolve(str(exc)) from exc
                now = self.clock()
                record = self.policy.on_failure(NO_RESPONSE, now, previous_record)
                logger.warning(
                    "robots.txt of %(origin)s unreachable: %(kind)s: %(exc)s (%(n)d in a "
                    "row); asked again in %(wait).0f s, and until then %(meanwhile)s",
                    # the class too: some say nothing (ResponseDataLossError's text is empty)
                    {"origin": origin, "kind": type(exc).__name__, "exc": exc,
                     "n": record.failures, "wait": max(0.0, record.expires_at - now),
                     "meanwhile": "its last good copy stays in force"
                     if record.kind != RobotsKind.DISALLOW_ALL else
                     "its URLs are not fetched (the IRL scheduler keeps them through "
                     "IRL_ROBOTS_UNREACHABLE_RETRIES re-fetches)"},
                    extra={"spider": self.crawler.spider},
                )  # fmt: skip
                self.stats.inc_value(f"robotstxt/exception_count/{type(exc)}")
                return self._stored_failure(origin, record)
            self.stats.inc_value("robotstxt/response_count")
            self.stats.inc_value(f"robotstxt/response_status_count/{response.status}")
            location = response.headers.get(b"Location")
            # The statuses Scrapy's RedirectMiddleware follows: a 304 (or 300) carrying a
            # Location was followed, and its target's body replaced the copy in hand.
            if response.status in REDIRECT_STATUSES and location:
                if hop < self.policy.max_redirects:
                    self._inc("redirects")
                    # As Scrapy's RedirectMiddleware reads Location (UTF-8, made safe);
                    # a target that is no URL fails the next hop's check: bad_redirect.
                    try:
                        url = urljoin(response.url, safe_url_string(location))
                    except ValueError:
                        url = ""
                    known = self._fresh_target(origin, url)
                    if known is not None:
                        self._inc("redirect_target_reused")
                        return self.cache.put(origin, known)
                    if self.hop_gate is not None:
                        await maybe_deferred_to_future(self.hop_gate(url, route, origin))
                        # The target's own fetch may have ended while the hop waited for
                        # its host's turn (it was in flight): that answer serves us too,
                        # and the turn claimed for the hop is given back unused.
                        known = self._fresh_target(origin, url)
                        if known is not None:
                            self._inc("redirect_target_reused")
                            if self.hop_unsent is not None:
                                self.hop_unsent(url)
                            return self.cache.put(origin, known)
                    continue
                self._inc("redirect_limit")
            return await self._store_response(
                origin, response, previous_record, request
            )
        raise AssertionError("unreachable: the loop returns on its last hop")

    def _robots_request(self, url: str, route: dict[str, Any], hop: int = 0) -> Request:
        """The request for one hop; a ValueError for anything but an http(s) URL, so a
        redirect to ``file:``, ``data:`` or ``ftp:`` is never followed (Scrapy's own
        RedirectMiddleware refuses those too), nor one to a host the HTTP client refuses
        before sending (``user@host``, an empty host): the origin counts as bad_redirect.
        ``route``: the page's ``meta["proxy"]``, if it had that key."""
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https"):
            raise ValueError(f"not an http(s) URL: {url[:200]!r}")
        if (hop and not route.get("proxy") and scheme in self._twisted_schemes
                and refused_by_twisted(scheme, parts.netloc)):  # fmt: skip
            # A redirect to userinfo, an empty host, a % in it: the client fails it before
            # sending, and that read as an unreachable server, the whole site shut out
            # after the retries (a probe, 2026-11-28).
            raise ValueError(f"not a host the HTTP client can reach: {url[:200]!r}")
        return Request(
            url,
            priority=self.DOWNLOAD_PRIORITY,
            meta={
                "dont_obey_robotstxt": True,
                "dont_redirect": True,  # followed in _fetch, with RFC 9309's limit of 5
                "dont_retry": True,  # failures back off through the cache instead
                "handle_httpstatus_all": True,
                MAX_BYTES_META: self.policy.max_bytes,  # see _bytes_received
                # IRL_ROBOTS_MAX_BYTES cuts the body (_bytes_received), not the project's
                # DOWNLOAD_MAXSIZE: the download handler cancels a response whose
                # Content-Length, or whose bytes so far, pass that limit, and a robots.txt
                # longer than it counted as unreachable (the whole site disallowed).
                "download_maxsize": 0,
                **route,
            },
            callback=NO_CALLBACK,
        )

    def _store_unreadable(self, origin: str, previous: RobotsRecord | None) -> CachedRobots:
        """Store the origin as unavailable (allow all for the TTL): storing nothing would
        fetch robots.txt again for every request to it."""
        return self.cache.put(
            origin, self.policy.on_response(UNREADABLE, b"", self.clock(), previous)
        )

    def _stored_failure(self, origin: str, record: RobotsRecord) -> CachedRobots:
        if record.kind == RobotsKind.DISALLOW_ALL:
            self._inc("unreachable")
        else:
            self._inc("stale_used")
        return self.cache.put(origin, record)

    async def _store_response(
        self,
        origin: str,
        response: Response,
        previous: RobotsRecord | None,
        request: Request,
    ) -> CachedRobots:
        now = self.clock()
        if self.policy.is_unreachable_status(response.status):
            return self._stored_failure(
                origin, self.policy.on_failure(response.status, now, previous)
            )
        body = response.body
        if len(body) > self.policy.max_bytes:
            self._inc("truncated")
        cached = self.cache.put(
            origin, self.policy.on_response(response.status, body, now, previous)
        )
        self._store_for_target(origin, response, cached.record)
        if cached.record.kind == RobotsKind.RULES:
            await self._send_robots_parsed(cached.rules, request)
        return cached

    def _fresh_target(self, origin: str, url: str) -> RobotsRecord | None:
        """The fresh record of the origin whose own ``/robots.txt`` a redirect of
        ``origin``'s points at (a site moved to https whose https robots.txt was fetched
        already), if it holds a final answer (rules, or a 4xx's allow all): that file
        serves ``origin`` too, without asking the server for it again (the converse of
        :meth:`_store_for_target`). None: follow the redirect."""
        try:
            target = _other_origins_robots(urlsplit(url), origin)
        except ValueError:
            return None
        if target is None:
            return None
        current = self.cache.get(target, count=False)
        if current is None or current.record.kind == RobotsKind.DISALLOW_ALL:
            return None  # never fetched, or unreachable: ask (it may be back)
        return current.record if current.record.is_fresh(self.clock()) else None

    def _store_for_target(self, origin: str, response: Response, record: RobotsRecord) -> None:
        """A redirect chain that ended at another origin's own ``/robots.txt`` (http to
        https, a move to ``www.``) got that origin's answer too: store it for the target
        as well, unless the target has a fresh record or a fetch of its own under way.
        Otherwise the first page of the target origin fetched the same file again: one
        more request per host for every site that moved from http to https. Only a final
        answer is shared (2xx, or a 4xx that allows all); failures stay with the origin
        that was asked."""
        if not (200 <= response.status < 300 or 400 <= response.status < 500):
            return
        target = _other_origins_robots(urlparse_cached(response), origin)
        if target is None or target in self._fetching:
            return
        current = self.cache.get(target, count=False)
        if current is not None and current.record.is_fresh(self.clock()):
            return
        self.cache.put(target, record)
        self._inc("redirect_target_stored")

    async def _send_robots_parsed(self, rules: Any, request: Request) -> None:
        send = getattr(self.crawler.signals, "send_catch_log_async", None)
        if send is not None:
            await send(signal=signals.robots_parsed, robotparser=rules, request=request)
        else:  # Scrapy < 2.14
            await maybe_deferred_to_future(
                self.crawler.signals.send_catch_log_deferred(
                    signal=signals.robots_parsed, robotparser=rules, request=request
                )
            )


def _other_origins_robots(parts: SplitResult | ParseResult, origin: str) -> str | None:
    """The origin whose own ``/robots.txt`` (http(s), no query) the URL ``parts`` is, if
    that is not ``origin`` itself; None otherwise."""
    if parts.path != "/robots.txt" or parts.query or parts.scheme.lower() not in ("http", "https"):
        return None
    target = origin_of(parts)
    return None if target == origin else target
