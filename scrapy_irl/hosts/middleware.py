"""``HostDnsMiddleware``: resolve each host once per TTL before its requests are downloaded.

With Scrapy's own scheduler this gives three things the stock resolver does not: failed
lookups are remembered (``IRL_DNS_RETRY_DELAY``, doubling, while ``IRL_DNS_RETRIES`` last;
then ``IRL_DNS_NEGATIVE_TTL``), so requests to a dead name fail at once with the usual
DNS error instead of each waiting for a lookup; failures persist in the host store across
runs (addresses too, but one kept from an earlier run is looked up again at first use:
the downloader's resolver asks anew in each process); and the number of lookups in flight
is bounded. Requests to
an unresolvable host fail with Scrapy's DNS error, so spider errbacks see what they
would see without this middleware.

A request that arrives while its name waits for a retry (a failed lookup, retries left)
waits for that retry instead of failing: otherwise Scrapy's RetryMiddleware would spend
all its attempts within milliseconds on the same cached failure, and one resolver hiccup
would cost the request, which stock Scrapy (a fresh lookup per attempt) would not lose.
The wait holds the request's download slot, as a slow lookup does in stock Scrapy, for
at most the sum of the retry delays (10 s + 20 s by default, below ``DNS_TIMEOUT``).
The IRL scheduler never hands out such a request: it holds a host's URLs meanwhile.

A request that goes through an HTTP proxy (:mod:`scrapy_irl.hosts.proxy`) is not
resolved: the proxy resolves its name, which this machine may not know at all.

The add-on places it last (950), after the project's middlewares (which may set a proxy)
and Scrapy's HTTP cache (which may answer without any lookup); a dead name's request is
failed by the add-on's download handler, as stock Scrapy's handler fails it
(:mod:`scrapy_irl.hosts.dnsfail`).
"""

from __future__ import annotations

import logging
import time
import weakref
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.resolver import dnscache
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet import task

from scrapy_irl import config
from scrapy_irl.hosts.dns import HostResolver
from scrapy_irl.hosts.dnsfail import DnsError as _DnsError
from scrapy_irl.hosts.dnsfail import (
    BY_ROBOTS,
    clear_dns_failure,
    dns_failure,
    handed_out_dead,
    mark_dns_failed,
)
from scrapy_irl.hosts.download import handler_fails_marked
from scrapy_irl.hosts.names import canonical_host
from scrapy_irl.hosts.paths import open_host_store
from scrapy_irl.hosts.pinning import lookup_address, pin_address
from scrapy_irl.hosts.proxy import ProxyRoutes
from scrapy_irl.hosts.store import HostStore
from scrapy_irl.refusal import refusing_start
from scrapy_irl.startfail import release_if_start_fails

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from twisted.internet.defer import Deferred
    from twisted.internet.interfaces import IReactorTime

    from scrapy_irl.hosts.records import DnsRecord

logger = logging.getLogger(__name__)

STAT_PREFIX = "irl_dns"
#: Schemes whose host the downloader connects to by name: resolved here and pinned. An
#: FTP connection resolves through the same reactor resolver (``connectTCP``).
RESOLVED_SCHEMES = ("http", "https", "ftp")
#: When this process began using DNS records: addresses stored before it came from an
#: earlier run, and are looked up again at first use (``HostResolver.revalidate_before``).
PROCESS_STARTED = time.time()


def dns_options(settings: Any) -> dict[str, Any]:
    """The resolver's ``IRL_DNS_*`` values, each checked by name (also read at the
    scheduler's start, before any directory is touched)."""
    return {
        "ttl": config.getfloat(settings, "IRL_DNS_TTL", above=0),
        "negative_ttl": config.getfloat(settings, "IRL_DNS_NEGATIVE_TTL", above=0),
        "concurrency": config.getint(settings, "IRL_DNS_CONCURRENCY", minimum=1),
        "timeout": config.getfloat(settings, "IRL_DNS_TIMEOUT", above=0),
        "retries": config.getint(settings, "IRL_DNS_RETRIES", minimum=0),
        "retry_delay": config.getfloat(settings, "IRL_DNS_RETRY_DELAY", above=0),
        "memory_entries": config.getint(settings, "IRL_DNS_MEMORY_ENTRIES", minimum=1),
    }


#: One resolver per crawler and store: the IRL scheduler and this middleware share it.
_shared: weakref.WeakKeyDictionary[Any, HostResolver] = weakref.WeakKeyDictionary()


def resolver_from_crawler(crawler: Crawler, store: HostStore) -> HostResolver:
    """The crawler's HostResolver on the reactor's installed resolver, configured by
    ``IRL_DNS_*``: the same object for every caller with the same store. The IRL scheduler
    times a host on the address its record holds and this middleware pins that address
    for the download; with a resolver each, the middleware's copy of a record expired on
    its own, was looked up again, and a round-robin name could answer another address
    than the one the scheduler had just renewed (tau_s broke at the server it reached)."""
    try:
        resolver = _shared.get(crawler)
    except TypeError:  # a stand-in crawler that cannot be weakly referenced or hashed
        return _new_resolver(crawler, store)
    if resolver is None or resolver.store is not store:
        resolver = _new_resolver(crawler, store)
        _shared[crawler] = resolver
    return resolver


def shared_resolver(crawler: Crawler) -> HostResolver | None:
    """The crawler's HostResolver if the IRL scheduler or this middleware made one."""
    try:
        return _shared.get(crawler)
    except TypeError:
        return None


def _new_resolver(crawler: Crawler, store: HostStore) -> HostResolver:
    from twisted.internet import reactor

    settings = crawler.settings
    # Weakly: the resolver is the value of _shared, keyed weakly by the crawler, and the
    # stats collector holds the crawler. Held strongly, each entry kept its own key alive:
    # every crawl of a process stayed in RAM, engine and caches included, until it exited
    # (a probe: 12 sequential crawls, 12 live crawlers; stock Scrapy 0).
    stats_ref = weakref.ref(crawler.stats)

    def count(name: str) -> None:
        stats = stats_ref()
        if stats is not None:
            stats.inc_value(f"{STAT_PREFIX}/{name}")

    def lookup(host: str) -> Deferred[str]:
        """Ask the reactor's resolver past Scrapy's DNS cache, whose entries never expire:
        otherwise a lookup renewing an expired record (IRL_DNS_TTL) would get the first
        address again, and the downloader would keep connecting there. Dropping the entry
        makes Scrapy's resolver ask again too on its next connection."""
        dnscache.pop(host, None)
        return lookup_address(reactor, host)

    return HostResolver(
        store,
        lookup,
        **dns_options(settings),
        reactor=reactor,
        on_event=count,
        revalidate_before=PROCESS_STARTED,
    )


class HostDnsMiddleware:
    """Downloader middleware: resolve ahead through :class:`HostResolver`, fail dead names fast."""

    def __init__(self, crawler: Crawler, reactor: IReactorTime | None = None) -> None:
        from twisted.internet import reactor as installed

        #: Timers (retry waits); tests pass a fake clock.
        self._reactor: IReactorTime = reactor or installed  # type: ignore[assignment]
        #: Whose resolver the downloader connects through (see ``pin_address``).
        self._installed_reactor: Any = installed
        self.crawler = crawler
        self.store = open_host_store(crawler.settings)
        try:
            self.resolver = resolver_from_crawler(crawler, self.store)
        except Exception:  # a refused IRL_DNS_* value must not keep the store held
            self.store.release()
            raise
        self._closed = False
        self._told_unpinned = False
        self._told_late_proxy = False
        #: Schemes whose download handler is the add-on's, which fails a marked request.
        self._handler_fails = handler_fails_marked(crawler.settings)
        self.proxies = ProxyRoutes.from_settings(crawler.settings)
        crawler.signals.connect(self._spider_closed, signal=signals.spider_closed)
        self._give_back_store = release_if_start_fails(crawler, self.store.release)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        config.require_reactor(crawler.settings, "scrapy_irl.hosts.middleware.HostDnsMiddleware")
        with refusing_start("HostDnsMiddleware (host store)", crawler):
            return cls(crawler)

    def _spider_closed(self, spider: Spider | None = None) -> None:
        if not self._closed:
            # The robots middleware reports it too; with ROBOTSTXT_OBEY off only we do.
            if self.store.write_errors:
                self.crawler.stats.set_value("irl_hosts/store_write_errors", self.store.write_errors)
        self._closed = True
        self._give_back_store()  # unless the crawl's failed start gave it back

    async def process_request(
        self, request: Request, spider: Spider | None = None
    ) -> Any:
        parts = urlparse_cached(request)
        if parts.scheme not in RESOLVED_SCHEMES or not parts.hostname:
            return None
        marked = dns_failure(request)
        if marked is not None and marked[0] == BY_ROBOTS:
            # its robots.txt failed on this name in this pass: so does the request
            self.crawler.stats.inc_value(f"{STAT_PREFIX}/unresolvable_requests")
            return self._fail(request, parts.scheme, marked[1])
        clear_dns_failure(request)  # an earlier pass's own verdict: looked up again
        if self.proxies.proxied(parts.scheme, parts.hostname, request.meta):
            # The proxy resolves the name; this machine's DNS may not know it at all.
            self.crawler.stats.inc_value(f"{STAT_PREFIX}/proxied_requests")
            self._check_late_proxy(request, parts.hostname)
            return None
        record = await self._resolve(parts.hostname)
        if not record.ok:
            self.crawler.stats.inc_value(f"{STAT_PREFIX}/unresolvable_requests")
            return self._fail(
                request, parts.scheme, f"{parts.hostname}: DNS lookup failed ({record.error}, cached)"
            )
        # An IP literal is not looked up by the downloader either (in any spelling).
        if record.ips != (canonical_host(parts.hostname),) and not pin_address(
            self._installed_reactor, parts.hostname, record.ip  # type: ignore[arg-type]
        ):
            self._unpinned()
        return None

    def _fail(self, request: Request, scheme: str, message: str) -> None:
        """Fail ``request`` with Scrapy's DNS error: in the download handler when it is
        the add-on's (see :mod:`scrapy_irl.hosts.dnsfail`), else here."""
        if scheme not in self._handler_fails:
            clear_dns_failure(request)
            raise _DnsError(message)
        mark_dns_failed(request, message)

    def _check_late_proxy(self, request: Request, host: str) -> None:
        """A request that reaches us proxied, which the IRL scheduler handed out at once
        because this machine's DNS gave up on its name: its proxy came from a downloader
        middleware, too late for the scheduler. Said once."""
        if self._told_late_proxy or self.proxies.always or not handed_out_dead(request):
            return
        self._told_late_proxy = True
        logger.warning(
            "Requests to %(host)s go through a proxy a downloader middleware set, but the "
            "name was looked up on this machine first and failed (the IRL scheduler does, "
            "to time its server; it then hands the host's requests out at once, without "
            "waiting for the host's or the server's turn). Set "
            "IRL_ALWAYS_PROXIED = True when a middleware sends every request through a "
            "proxy: no name is then looked up here, and each host is timed by its name.",
            {"host": host}, extra={"spider": self.crawler.spider},
        )  # fmt: skip

    def _unpinned(self) -> None:
        """Count a request whose address could not be pinned; say why once per crawl."""
        self.crawler.stats.inc_value(f"{STAT_PREFIX}/unpinned_requests")
        if self._told_unpinned:
            return
        self._told_unpinned = True
        resolver = type(getattr(self._installed_reactor, "resolver", None)).__name__
        logger.info(
            "The downloader resolves host names itself here (%(why)s): a name with several "
            "addresses may be fetched from another one than the per-IP delay times. "
            "Counted in irl_dns/unpinned_requests.",
            {"why": "DNSCACHE_ENABLED is off" if not dnscache.limit else
                    f"the installed resolver {resolver} does not read Scrapy's DNS cache"},
            extra={"spider": self.crawler.spider},
        )

    async def _resolve(self, host: str) -> DnsRecord:
        """The host's record, waiting out pending retries of a failed lookup (bounded)."""
        record = await maybe_deferred_to_future(self.resolver.resolve(host))
        # bounded: each failed retry raises record.failures until will_retry is false
        for _ in range(self.resolver.retries + 1):
            if record.ok or not self.resolver.will_retry(record):
                break
            wait = max(0.0, record.expires_at - self.resolver.clock()) + 0.01
            self.crawler.stats.inc_value(f"{STAT_PREFIX}/requests_waited_for_retry")
            await maybe_deferred_to_future(
                task.deferLater(self._reactor, wait, lambda: None)
            )
            record = await maybe_deferred_to_future(self.resolver.resolve(host))
        return record
