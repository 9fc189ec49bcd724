"""robots.txt redirect hops of the IRL scheduler, gated by the host and IP heaps.

A robots.txt fetch that redirects (example.com -> www.example.com) makes a request to
another host, perhaps on another server. RobotsCacheMiddleware asks the gate before each
hop; the gate resolves the hop's host if needed (or again, when its DNS record expired),
waits until that host has nothing in flight and its IP a free slot, and holds both while
the hop is in flight, as for any request: tau_h, tau_s and IRL_IP_MAX_IN_FLIGHT hold for
hops too. What the fetch itself holds (its own host, its IP's slot) is not claimed again,
or a chain of hops would wait for itself; backstops release hops that never reach the
downloader.

Fetches can wait for each other: a.test's hop waits for b.test, which b.test's fetch
holds while its own hop waits for a.test (longer cycles, or cycles through full IP
slots, likewise). Nothing of such fetches is on the wire: each asks for its next hop
only once its last response has arrived. Their holds are idle, so a hop in the cycle is
sent under the hold it waits for (it *borrows* it) and the lender's own requests wait
until that hop is over: one request per host, IRL_IP_MAX_IN_FLIGHT per IP, on the wire."""

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
        for ever must not stop its fetch. Hops left waiting for each other's fetches (a
        wait-for cycle) are resolved at once (:meth:`_resolve_hop_cycles`)."""
        if not self._hop_waits:
            return
        now = self.clock()
        waiting, self._hop_waits = self._hop_waits, []
        for hop in waiting:
            host = hop.host
            if self._closed or self.polite.hosts.get(host.name) is not host:
                host.hop_waits -= 1  # closing, or removed (its renewal failed): just go
                self._call_later(0.0, hop.gate.callback, None)
            elif self.robots_host_delay and hop.host_slot and host.not_before > now:
                # The host backs off (a 429, a 503, no answer): booked now, the hop would hold its IP
                # until the wait is over, and the IP's other hosts with it. It waits
                # unbooked instead, for at most IRL_BACKOFF_MAX (the host's pages wait
                # too, so no new answer can push the wait further), and its wait for the
                # slots counts from the end of the back-off.
                hop.since = now
                self._hop_waits.append(hop)
                self._grant_hops_at(host.not_before)
            elif hop.url in self._hop_claims or self._hold_lent(hop) or self.polite.hop_blocked(
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
        if len(self._hop_waits) > 1 and not self._closed:
            self._resolve_hop_cycles(now)

    def _grant_hops_at(self, when: float) -> None:
        """Try the waiting hops again at ``when`` (scheduler clock), when a host's
        back-off ends: nothing else may happen on its IP meanwhile to call
        :meth:`_grant_hops`. One call is kept pending, the earliest asked for."""
        pending = self._hop_regrant
        if pending is not None and pending[1].active():
            if pending[0] <= when:
                return
            pending[1].cancel()
        delay = max(0.0, when - self.clock())
        self._hop_regrant = (when, self._call_later(delay, self._grant_hops))

    # -- wait-for cycles -------------------------------------------------------------------
    def _resolve_hop_cycles(self, now: float) -> None:
        """Send the hops of a wait-for cycle under the idle holds they wait for.

        Each fetch in the cycle asked for its next hop after its last response came:
        none has anything on the wire, so a hop may use the host or IP slot another
        fetch of the cycle holds without two requests meeting on the wire there; that
        fetch's own requests wait for the hop (:meth:`_hold_lent`), and its end keeps
        its host held until the hop is over. Only a fetch this scheduler started lends
        (a fetch the middleware makes for a page sends that page the moment it ends);
        a hop that finds nothing to borrow yet (its IP full of pages) tries again at the
        next change."""
        cycle = self._hops_in_cycles()
        if not cycle:
            return
        lendable = self._lendable_holds({hop.origin for hop in cycle if hop.origin is not None})
        for hop in cycle:
            if not hop.in_cycle:
                hop.in_cycle = True
                self.counts["robots_hops_in_cycles"] += 1
            if hop in self._hop_waits and hop.url not in self._hop_claims and self._borrow(
                hop, lendable
            ):
                self._hop_waits.remove(hop)
                self.counts["robots_hops_borrowed"] += 1
                logger.debug("robots.txt redirect hop to %(url)s sent under the hold of "
                             "%(lender)s's fetch (a wait-for cycle)",
                             {"url": hop.url, "lender": hop.host_lender or hop.ip_lender},
                             extra={"spider": self.spider})  # fmt: skip
                self._claim_hop(hop, now)

    def _hops_in_cycles(self) -> list[Hop]:
        """The waiting hops that only each other's fetches hold up: a wait-for cycle.

        A deadlock check by reduction (cheap: one waiting hop per fetch, a handful of
        fetches): a fetch waiting for a host or IP that something else holds (a page, a
        hop on the wire, a fetch not waiting) will go once that ends, and its own hold
        then ends too; fetches left when no more can go wait for each other. An IP slot
        is waited for only while the fetches left hold all of that IP's slots."""
        holds = {hop.origin: self._held_by_fetch(hop.origin) for hop in self._hop_waits
                 if hop.origin is not None}  # fmt: skip
        holds = {origin: held for origin, held in holds.items() if held[0] is not None}
        if len(holds) < 2:
            return []
        waiting: dict[str, list[Hop]] = {}
        for hop in self._hop_waits:
            if hop.origin in holds:
                waiting.setdefault(hop.origin, []).append(hop)
        holder = {id(host): origin for origin, (host, _) in holds.items()}
        on_ip: dict[str | None, int] = {}
        for _, ip in holds.values():
            on_ip[ip] = on_ip.get(ip, 0) + 1
        stuck = set(waiting)
        freed = True
        while freed:
            freed = False
            for origin in list(stuck):
                if not all(self._held_up(hop, stuck, holder, on_ip) for hop in waiting[origin]):
                    stuck.discard(origin)
                    on_ip[holds[origin][1]] -= 1
                    freed = True
        return [hop for hop in self._hop_waits if hop.origin in stuck]

    def _held_up(self, hop: Hop, stuck: set[str], holder: dict[int, str],
                 on_ip: dict[str | None, int]) -> bool:  # fmt: skip
        """Whether ``hop`` waits for a hold of the ``stuck`` fetches: its host held by one
        of them, or its IP's slots all held by them (``on_ip``: their holds per IP)."""
        if hop.host_slot and holder.get(id(hop.host)) in stuck:
            return True
        address = self.polite.ips.get(hop.ip)
        return (hop.ip_slot and address is not None
                and address.in_flight >= self.polite.max_in_flight_per_ip
                and on_ip.get(hop.ip, 0) >= self.polite.max_in_flight_per_ip)  # fmt: skip

    def _lendable_holds(self, origins: set[str]) -> dict[str, list[Any]]:
        """The holds the fetches of ``origins`` may lend: origin -> [host, IP, host free,
        IP slot free], for fetches this scheduler started (see :meth:`_resolve_hop_cycles`)."""
        lendable = {}
        for origin in origins:
            host = self._robots_holds.get(origin)
            if host is not None and host.in_flight:
                host_lent, ip_lent = self._lent(origin)
                lendable[origin] = [host, host.ip, not host_lent, not ip_lent]
        return lendable

    def _borrow(self, hop: Hop, lendable: dict[str, list[Any]]) -> bool:
        """Take for ``hop`` what it waits for from the idle ``lendable`` holds; False
        (nothing taken) when some of it is held by something else, or lent already."""
        host_from = ip_from = None
        if hop.host_slot and (hop.host.in_flight or hop.host.resolving):
            host_from = next((origin for origin, (host, _, free, _) in lendable.items()
                              if host is hop.host and free), None)  # fmt: skip
            if host_from is None:
                return False
        address = self.polite.ips.get(hop.ip)
        if (hop.ip_slot and address is not None
                and address.in_flight >= self.polite.max_in_flight_per_ip):  # fmt: skip
            first = [host_from] if host_from is not None else []
            ip_from = next((origin for origin in [*first, *lendable]
                            if lendable[origin][1] == hop.ip and lendable[origin][3]), None)  # fmt: skip
            if ip_from is None:
                return False
        if host_from is not None:
            lendable[host_from][2] = hop.host_slot = False
            hop.host_lender = host_from
        if ip_from is not None:
            lendable[ip_from][3] = hop.ip_slot = False
            hop.ip_lender = ip_from
        return True

    def _lent(self, origin: str) -> tuple[bool, bool]:
        """Whether the host, and the IP slot, that ``origin``'s fetch holds are lent to a
        hop of another fetch now (claimed, not yet over)."""
        claims = self._hop_claims.values()
        return (any(hop.host_lender == origin for hop in claims),
                any(hop.ip_lender == origin for hop in claims))  # fmt: skip

    def _hold_lent(self, hop: Hop) -> bool:
        """Whether ``hop`` would use its own fetch's hold (its host, or IP slot) while a
        hop of another fetch is on the wire under it: it waits for that one."""
        if hop.origin is None or (hop.host_slot and hop.ip_slot):
            return False
        held = self._robots_holds.get(hop.origin)
        if held is None:
            return False
        host_lent, ip_lent = self._lent(hop.origin)
        return ((host_lent and not hop.host_slot and hop.host is held)
                or (ip_lent and not hop.ip_slot and hop.ip == held.ip))  # fmt: skip

    def _claim_hop(self, hop: Hop, now: float) -> None:
        """Book ``hop`` in the heaps, holding its slots; its gate fires when its IP is due."""
        hop.host.hop_waits -= 1
        if hop.ip not in self.polite.ips:  # forgotten while the hop waited
            self._add_ip(hop.ip)
        start = self.polite.claim_hop(hop.host, now, ip=hop.ip, host_slot=hop.host_slot,
                                      ip_slot=hop.ip_slot,
                                      host_due=self.robots_host_delay)  # fmt: skip
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
        self._end_held_fetches(hop, now)
        self._grant_hops()
        self._wake_engine()

    def _robots_hop_unsent(self, url: str) -> None:
        """The middleware's gate for ``url`` fired, but it took the answer of the target's
        own fetch (over meanwhile) instead of sending the hop: free the hop's slots now.
        Only a fetch this scheduler started frees its hops at its end; one the middleware
        made for a page held its hop's host and IP until IRL_HANDOUT_TIMEOUT (found by
        review, 2026-11-27). The claimed turn stays used: more delay, never less."""
        hop = self._hop_claims.get(url)
        if hop is not None and not hop.reached:
            self.counts["robots_hops_unsent"] += 1
            self._release_hop(hop, self.clock())

    def _end_held_fetches(self, hop: Hop, now: float) -> None:
        """Free the hosts of fetches that ended while ``hop`` used their hold, once no
        other hop uses it."""
        for lender in (hop.host_lender, hop.ip_lender):
            if lender in self._robots_ends_held and self._lent(lender) == (False, False):
                self._host_finished(self._robots_ends_held.pop(lender), now, count_for_host=False)

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
