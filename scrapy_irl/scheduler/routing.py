"""Stage 3 of the IRL scheduler: from a BEAST record to its host's queue in the heaps.

A host's first URL resolves its name once (HostResolver, cached per TTL) or, through a
proxy, skips DNS; the host then enters the politeness table with tau_h and tau_s from its
PLD's budget (thesis chapter VII section 1). Failed lookups hold URLs for the retry or hand
them out to fail in the DNS middleware; expired records are renewed in the host's turn.
Work beyond IRL_RAM_BACKLOG_SECONDS for a host or IP is parked on disk (lazy loading,
Polybot section 3.5)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.http import Request

from scrapy_irl.hosts.dnsfail import note_handed_out_dead
from scrapy_irl.hosts.proxy import robots_meta, server_key
from scrapy_irl.scheduler.codec import record_blob
from scrapy_irl.scheduler.items import (
    Held,
    RobotsMarker,
    renewal_margin,
    url_of,
    url_parts,
)
from scrapy_irl.scheduler.pld import pld_of
from scrapy_irl.scheduler.politeness import Host

if TYPE_CHECKING:
    from scrapy_irl.hosts.records import DnsRecord

logger = logging.getLogger(__name__)

#: Least wait of a record parked for a retry (seconds): a retry already due, or a clock
#: step, cannot make records come back and be parked again at every tick.
MIN_RETRY_WAIT = 0.5


class Routing:
    """IrlScheduler's DNS routing and host table (a mixin: the state is IrlScheduler's)."""

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
        url = url_of(item)
        parts = url_parts(url)
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
        crawl_delay = self._cached_crawl_delay(url_of(items[0])) if items else None
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
            self._wait_for_retry(host, items, record.expires_at - self.resolver.clock(), "dns")
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
                note_handed_out_dead(request)  # a proxy set later is warned of
                self._hand_out_now(item, request)

    def _dns_deadline(self, host: str, record: DnsRecord) -> float:
        """When (scheduler clock) ``host``'s turn renews ``record``: the resolver counts in
        wall-clock time, the heaps in monotonic time. A tenth of its life (at most 1 s)
        before it expires, as robots.txt records (``robots_margin``): the DNS middleware
        resolves the name again a little after the hand-out, and the downloader connects
        where that lookup says. An IP literal never expires."""
        if record.ips == (host,):
            return float("inf")
        return self.clock() + (record.expires_at - self._dns_margin() - self.resolver.clock())

    def _dns_margin(self) -> float:
        """How long before its expiry a host's record is renewed in its turn."""
        return renewal_margin(self.resolver.ttl)

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
            items.extend(self._robots_waits_end(item.origin))
        return items

    def _wait_for_retry(self, host: str, items: list[Any], wait: float, why: str) -> None:
        """``host``'s DNS lookup or robots.txt fetch (``why``) is retried in ``wait``
        seconds: its URLs wait for it. BEAST records wait on disk
        (:meth:`Beast.park_for_retry`), back when the retry is due; in RAM they counted
        against IRL_FRONTIER_RAM_REQUESTS, so a seed list with many dead names held the
        healthy hosts back for the whole retry window (found by a probe, 2026-11-27).
        Requests that are not BEAST records (unserializable ones) wait in RAM."""
        parked = "dns_retry_parked" if why == "dns" else "robots_retry_parked"
        held = "dns_retry_held" if why == "dns" else "robots_retry_held"
        now = self.clock()
        due = now + max(MIN_RETRY_WAIT, wait)
        in_ram = []
        for item in items:
            if isinstance(item, Held):
                self.beast.park_for_retry(item.record, due, now)
                self._release(item, moved=True)
                self.counts[parked] += 1
            else:
                in_ram.append(item)
        if in_ram:
            self.counts[held] += len(in_ram)
            self._hold(host, in_ram, wait)

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
                                    address.delay if address else self.delays.ip_delay,
                                    pld=pld_of(name))  # fmt: skip
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
        """A PLD's in-degree grows as the crawl finds links to it: its delays shrink.
        A PLD gone from STAR's RAM cache keeps the budget it had (its in-degree is on
        disk, not 0)."""
        budget = self.star.known_budget(host.name)
        if budget is not None and budget != host.budget:
            self.counts["delays_rescaled"] += 1
            self._apply_budget(host, budget)

    def _budget_of(self, host: Host) -> float:
        """B_x of a host in the heaps: STAR's if its PLD is in the RAM cache, else the
        budget the host has (a miss reads as in-degree 0, not what is on disk)."""
        budget = self.star.known_budget(host.name)
        return host.budget if budget is None else budget

    def _push_or_park(self, host: str, item: Any) -> None:
        if not self._park_if_backlogged(item, host, 0):
            self.polite.push(host, item)

    def _park_if_backlogged(self, item: Any, host: str, waiting: int) -> bool:
        """Park a queued record (back to disk) when its host or IP has enough work in RAM.

        Lazy loading (Polybot section 3.5): RAM should hold what can be fetched soon.
        Work queued for a host (plus ``waiting`` items held for its robots.txt) is worth
        items x tau_h seconds (plus what is left of a server back-off), for its IP items x
        tau_s; past IRL_RAM_BACKLOG_SECONDS more
        of it would only sit in RAM, crowding out the hosts and IPs that could be crawled
        meanwhile (a spam farm's fresh subdomains on a few IPs, a large site at a long
        tau_h). Parked records wait in the parked store, under their IP and host, until
        both have room again (:mod:`.unparking`). Requests that are not BEAST records
        (unserializable ones) are never parked.
        """
        if not self.backlog_seconds or not isinstance(item, Held):
            return False
        record = self.polite.hosts.get(host)
        if record is None:
            return False
        backlog = max(self.polite.backlog_seconds(record), waiting * record.delay)
        if record.not_before > float("-inf"):
            # a host backing off (429, 503, no answer) gets to none of its queue before the wait ends
            backlog += max(0.0, record.not_before - self.clock())
        if backlog < self.backlog_seconds:
            return False
        self._park(item, record)
        return True
