"""robots.txt redirect hops of the IRL scheduler, gated by the host and IP heaps.

A robots.txt fetch that redirects (example.com -> www.example.com) makes a request to
another host, perhaps on another server. RobotsCacheMiddleware asks the gate before each
hop; the gate resolves the hop's host if needed (or again, when its DNS record expired),
waits until that host has nothing in flight and its IP a free slot, and holds both while
the hop is in flight, as for any request: tau_h, tau_s and IRL_IP_MAX_IN_FLIGHT hold for
hops too. What the fetch itself holds (its own host, its IP's slot) is not claimed again,
or a chain of hops would wait for itself; backstops release hops that never reach the
downloader."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy_irl.scheduler.items import (
    Hop,
    host_key,
    url_parts,
)
from scrapy_irl.scheduler.politeness import Host, Ip

if TYPE_CHECKING:
    from scrapy_irl.hosts.records import DnsRecord

logger = logging.getLogger(__name__)


class RobotsHops:
    """IrlScheduler's gate for robots.txt redirect hops (a mixin: the state is IrlScheduler's)."""

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
            parts = url_parts(url)
            name = host_key(parts.hostname)
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
            host = self.polite.host(host_key(url_parts(origin).hostname))
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
        if hop.url not in self._hop_claims:
            self._hop_claims[hop.url] = hop
        hop.start = start
        self._call_later(max(0.0, start - now), hop.gate.callback, None)

    def _release_hop(self, hop: Hop, now: float) -> None:
        """``hop`` is over: its host and IP slot are free, timed from now (as a page's)."""
        if self._hop_claims.get(hop.url) is hop:
            del self._hop_claims[hop.url]
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
