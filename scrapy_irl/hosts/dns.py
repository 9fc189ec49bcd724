"""``HostResolver``: each host resolved once per TTL, asynchronously, results in the host store.

IRLbot resolves DNS ahead of crawling and keeps the answers with the robots data
(RobotsCache, thesis chapter IV section 3); the per-IP politeness heap needs a host's IP
before its first request. Lookups go through the reactor's installed resolver (so
``TWISTED_DNS_RESOLVER`` applies), at most ``concurrency`` at a time, one per host however
many callers ask. A failed lookup is retried ``retries`` times, ``retry_delay`` seconds
after the first failure and twice as long after each next one (a timeout or a
resolver hiccup must not cost a host all its URLs); after that the name counts as dead
for ``negative_ttl`` and is not looked up again for every URL. The count of consecutive
failures is stored with the record, so it survives a restart.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from twisted.internet import defer
from twisted.internet.abstract import isIPAddress, isIPv6Address
from twisted.internet.defer import Deferred, DeferredSemaphore

from scrapy_irl.exceptions import HostStoreError
from scrapy_irl.hosts.names import canonical_host
from scrapy_irl.hosts.records import DnsRecord, RecordError
from scrapy_irl.hosts.store import DiscardLog, HostStore

logger = logging.getLogger(__name__)

Lookup = Callable[[str], "Deferred[str]"]


class HostResolver:
    """Resolve host names through ``lookup`` with a persistent, TTL-bounded cache."""

    def __init__(
        self,
        store: HostStore,
        lookup: Lookup,
        *,
        ttl: float = 3600.0,
        negative_ttl: float = 300.0,
        concurrency: int = 32,
        timeout: float = 10.0,
        retries: int = 2,
        retry_delay: float = 10.0,
        memory_entries: int = 10_000,
        clock: Callable[[], float] = time.time,
        reactor: Any = None,
        on_event: Callable[[str], None] | None = None,
        revalidate_before: float | None = None,
    ) -> None:
        if ttl <= 0 or negative_ttl <= 0 or timeout <= 0:
            raise ValueError("DNS TTLs and timeout must be positive")
        if concurrency < 1 or memory_entries < 1:
            raise ValueError("DNS concurrency and memory entries must be positive")
        if retries < 0 or retry_delay <= 0:
            raise ValueError(
                f"need IRL_DNS_RETRIES >= 0 and IRL_DNS_RETRY_DELAY > 0, got {retries}, {retry_delay}"
            )
        self.store = store
        self.lookup = lookup
        self.ttl = ttl
        self.negative_ttl = negative_ttl
        self.timeout = timeout
        self.retries = retries
        self.retry_delay = retry_delay
        self.memory_entries = memory_entries
        self.clock = clock
        self._reactor = reactor
        self._semaphore = DeferredSemaphore(concurrency)
        self._lru: OrderedDict[str, DnsRecord] = OrderedDict()
        self._discards = DiscardLog("DNS", "irl_dns/corrupt_record")
        self._waiting: dict[str, list[Deferred[DnsRecord]]] = {}
        self._event = on_event or (lambda name: None)
        #: Addresses resolved before this time (an earlier process's, read from the store)
        #: are looked up again at their first use; see :meth:`resolve`.
        self.revalidate_before = revalidate_before

    @property
    def in_flight(self) -> int:
        """Hosts being resolved (or queued for a lookup slot) right now."""
        return len(self._waiting)

    def will_retry(self, record: DnsRecord) -> bool:
        """A failed ``record`` whose name is looked up again once it expires (not dead yet)."""
        return not record.ok and 0 < record.failures <= self.retries

    def cached(self, host: str) -> DnsRecord | None:
        """The stored record of ``host`` (fresh or not) without resolving; None if unknown."""
        host = canonical_host(host)
        record = self._lru.get(host)
        if record is not None:
            self._lru.move_to_end(host)
            return record
        try:
            record = self.store.get_dns(host)
        except RecordError as exc:
            self._event("corrupt_record")
            self._discards.discarded(host, exc)
            self.store.delete_dns(host)
            return None
        if record is not None:
            self._remember(host, record)
        return record

    def resolve(self, host: str, *, fresh_for: float = 0.0) -> Deferred[DnsRecord]:
        """A Deferred firing with the fresh record of ``host``; DNS failures give a negative record.

        ``fresh_for``: a record expiring within this many seconds is looked up again now
        (the IRL scheduler renews a host's record a little before it expires).

        Keyed by :func:`canonical_host`, as the heaps are: ``site.test.`` looked up apart
        from ``site.test`` could answer another address of a round-robin name, and the
        downloader, pinned to it by ``HostDnsMiddleware``, fetched from a server other
        than the one its IP delay timed (4 gaps under tau_s0 in a probe). One spelling
        of an IPv6 address is one IP for the heaps too."""
        host = canonical_host(host)
        if isIPAddress(host) or isIPv6Address(host):
            now = self.clock()
            return defer.succeed(DnsRecord((host,), now, now + self.ttl))
        record = self.cached(host)
        if record is not None and self._from_earlier_run(record):
            # The downloader connects where Scrapy's resolver says, and that resolver
            # asks anew in each process (its cache lives in RAM): an address kept from an
            # earlier run may not be the one connected to, and per-IP politeness would
            # time the wrong server. Asked again once; the answer serves this run.
            self._event("revalidated")
        elif record is not None and record.is_fresh(self.clock() + fresh_for):
            self._event("cache_hit")
            return defer.succeed(record)
        elif record is not None:
            self._event("expired")
        waiter: Deferred[DnsRecord] = Deferred()
        waiters = self._waiting.get(host)
        if waiters is not None:
            waiters.append(waiter)
            self._event("waited")
            return waiter
        self._waiting[host] = [waiter]
        self._semaphore.run(self._lookup, host).addBoth(self._finished, host)
        return waiter

    def _from_earlier_run(self, record: DnsRecord) -> bool:
        """An address resolved before ``revalidate_before``. Failed lookups are kept as
        they are: a restart must neither forget a dead name nor restart its retries."""
        cutoff = self.revalidate_before
        return cutoff is not None and record.ok and record.resolved_at < cutoff

    def _lookup(self, host: str) -> Deferred[DnsRecord]:
        self._event("lookups")
        started = self.clock()
        try:
            d = self.lookup(host)
        except Exception as exc:  # noqa: BLE001 - a resolver raising synchronously is a failed lookup too
            d = defer.fail(exc)
        if self._reactor is not None:
            d.addTimeout(self.timeout, self._reactor)

        def ok(ip: str) -> DnsRecord:
            now = self.clock()
            logger.debug("Resolved %s to %s in %.3f s", host, ip, now - started)
            return DnsRecord((str(ip),), now, now + self.ttl)

        def failed(failure: Any) -> DnsRecord:
            now = self.clock()
            name = type(failure.value).__name__
            self._event(f"failures/{name}")
            previous = self.cached(host)
            failures = (
                previous.failures + 1 if previous is not None and not previous.ok else 1
            )
            if failures <= self.retries:
                wait = min(self.negative_ttl, self.retry_delay * 2 ** (failures - 1))
                self._event("retries_scheduled")
            else:
                wait = self.negative_ttl
                if failures == self.retries + 1:
                    self._event("gave_up")
            logger.debug(
                "DNS lookup of %s failed (%d in a row): %s",
                host,
                failures,
                failure.value,
            )
            return DnsRecord((), now, now + wait, name or "error", failures)

        return d.addCallbacks(ok, failed)

    def _finished(self, result: Any, host: str) -> None:
        waiters = self._waiting.pop(host, [])
        if isinstance(result, DnsRecord):
            try:
                self.store.put_dns(host, result)
            except HostStoreError:  # closed under a lookup that outlived its crawl
                logger.debug("DNS record of %s not stored: the host store is closed", host)
            self._remember(host, result)
            for waiter in waiters:
                waiter.callback(result)
        else:  # only a bug in our own callbacks lands here; never lose the waiters
            for waiter in waiters:
                waiter.errback(result)

    def _remember(self, host: str, record: DnsRecord) -> None:
        self._lru[host] = record
        self._lru.move_to_end(host)
        while len(self._lru) > self.memory_entries:
            self._lru.popitem(last=False)
