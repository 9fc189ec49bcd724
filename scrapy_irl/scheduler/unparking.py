"""Parking and unparking: the scheduler's side of the parked store (:mod:`.parking`).

A record read from BEAST for a host or IP that has ``IRL_RAM_BACKLOG_SECONDS`` of work in
RAM is parked under that IP and host (lazy loading, Polybot section 3.5). Every tick the
scheduler looks at the IPs with parked records (at most :data:`SWEEP_IPS` of them, in
rotation) and takes back from each what it can start within the horizon: as many as keep
the IP's backlog (items x tau_s) and each host's (items x tau_h, plus a back-off's wait)
under ``IRL_RAM_BACKLOG_SECONDS``. A host or IP still busy is skipped without reading its
records, so the cost follows the crawl's rate, not the size of what is parked. IPs found
with room but not served because RAM was full are served first by the next loads from
BEAST (:meth:`Unparking._drain_ready`), so parked hosts are not starved by fresh URLs.

Crash safety: a record parked here stays owed to BEAST until the store's writes are
durable (:meth:`Unparking._flush_parking`, at the start of every BEAST save); a record
taken back stays on disk here until released and a BEAST save is over (its retry queues
may hold it now). A kill between a park and BEAST's next save, or between that save and
the store's deletion of a record moved into a BEAST retry queue, leaves the record in both
places: the next open removes the store's copy (see :mod:`.parking`).
"""

from __future__ import annotations

import math
from collections import Counter, deque
from typing import TYPE_CHECKING, Any

from scrapy_irl.scheduler.items import Held, ParkedHeld

if TYPE_CHECKING:
    from scrapy_irl.scheduler.politeness import Host

#: IPs looked at per tick, at most: the sweep's cost stays flat however many are parked.
SWEEP_IPS = 2_000
#: Records one load into RAM moves at most (:meth:`IrlScheduler._fill`, the tick's sweep;
#: parked ones taken back included); the rest waits for the engine's next call, asked for
#: at once. Each costs 0.1-0.4 ms (DNS and robots.txt cache reads, cold at a resume): a
#: resume loaded its 5 000 in one call, and the reactor stood still for 2 s (2026-11-28).
FILL_SLICE = 256


class Unparking:
    """Mixin of :class:`~scrapy_irl.scheduler.scheduler.IrlScheduler` (see the module)."""

    parked: Any
    beast: Any
    polite: Any
    delays: Any
    counts: Any
    backlog_seconds: float
    ram_requests: int
    _dns_wait: dict[str, list[Any]]
    _robots_waits_by_host: Counter[str]
    _parked_ready: deque[str]
    _parked_tokens: list[Any]
    clock: Any
    _ram_items: Any
    _route: Any

    def _park(self, item: Held, host: Host) -> None:
        """Write ``item`` to the parked store under its host and IP."""
        if isinstance(item, ParkedHeld):
            self.parked.park(host.ip, host.name, item.record, replaces=item.key)
            self.counts["parked_again"] += 1
            return
        self.parked.park(host.ip, host.name, item.record)
        # BEAST forgets it only once the store's write is durable (see _flush_parking)
        self._parked_tokens.append(item.token)
        self.counts["parked_backlog"] += 1

    def _flush_parking(self) -> None:
        """Make the parked store's writes durable, then let BEAST forget those records."""
        self.parked.sync()
        tokens, self._parked_tokens = self._parked_tokens, []
        for token in tokens:
            self.beast.done(token)

    # -- unparking ---------------------------------------------------------------------------
    def _sweep_parked(self) -> int:
        """The tick's look at parked IPs: take back what has room; returns how many."""
        if not self.parked.available:
            self._parked_ready.clear()
            return 0
        self._parked_ready = deque(self.parked.ips_with_work(SWEEP_IPS))
        return self._drain_ready(FILL_SLICE)  # (a review: unbounded, a resume's first tick stood still)

    def _drain_ready(self, limit: int) -> int:
        """Take back records of the IPs the last sweep found, while RAM has room (at
        most ``limit``)."""
        brought = 0
        while self._parked_ready:
            room = min(self.ram_requests - self._ram_items(), limit - brought)
            if room <= 0:
                break  # the IP stays first in line for the next load
            ip = self._parked_ready.popleft()
            took = self._take_back(ip, room)
            brought += took
            if took == room:  # cut short by RAM or the slice: it keeps its place
                self._parked_ready.appendleft(ip)
        if brought:
            self.counts["unparked"] += brought
        return brought

    def _take_back(self, ip: str, room: int) -> int:
        limit = min(room, self._ip_allowance(ip))
        if limit <= 0:
            return 0
        now = self.clock()
        taken = self.parked.take(ip, lambda host: self._host_allowance(host, now), limit)
        for key, host, record in taken:
            self._route(ParkedHeld(record, key), host)
        return len(taken)

    def _ip_allowance(self, ip: str) -> int:
        """How many more items the IP's queues can take within the horizon."""
        address = self.polite.ips.get(ip)
        if address is None:
            return _fits(0, self.delays.ip(0), self.backlog_seconds)
        return _fits(address.queued, address.delay, self.backlog_seconds)

    def _host_allowance(self, name: str, now: float) -> int:
        """How many more items the host's queue can take within the horizon (a host not
        in the table yet: at its longest tau_h, less what waits for its DNS lookup)."""
        host = self.polite.hosts.get(name)
        if host is None:
            waiting = len(self._dns_wait.get(name, ()))
            return _fits(0, self.delays.host(0), self.backlog_seconds) - waiting
        queued = len(host.queue) + self._robots_waiting(name)
        wait = max(0.0, host.not_before - now)
        fits = _fits(queued, host.delay, self.backlog_seconds, wait)
        address = self.polite.ips.get(host.ip)
        if wait and address is not None:
            # the parking test adds a back-off's wait to the IP's backlog too: taken back
            # under it, they would be parked again at every tick (a review: 185 in 10)
            fits = min(fits, _fits(address.queued, address.delay, self.backlog_seconds, wait))
        return fits

    def _robots_waiting(self, name: str) -> int:
        """Items of the host waiting for a robots.txt, of any of its origins (they count
        in the parking test: taken back, they would only be parked again). Until
        2026-11-28 only the default ports' origins were counted: a host on another port
        had its URLs taken back and parked again at every tick while its robots.txt was
        on the wire (174 in 30 s in ``test_park_by_host.py``)."""
        return self._robots_waits_by_host.get(name, 0)

    def _release_parked(self, item: ParkedHeld, *, moved: bool = False) -> None:
        self.parked.release(item.key, moved=moved)


def _fits(items: int, delay: float, horizon: float, wait: float = 0.0) -> int:
    """How many items of ``delay`` seconds each can join ``items`` queued (plus ``wait``)
    while the backlog stays under ``horizon`` when each joins: the test
    :meth:`Routing._park_if_backlogged` applies, ``items * delay + wait``, in its own
    floating-point arithmetic. (Until 2026-11-28 this divided: (60 - 99 x 0.6) / 0.6 is
    1.0000000000000024, so 2 came back where 1 fits, and the second was parked again: 354
    of them in a dev.py crawl.)"""
    if horizon <= 0:
        return 1 << 30  # IRL_RAM_BACKLOG_SECONDS = 0: nothing is parked, all comes back
    if items * delay + wait >= horizon:
        return 0
    if delay <= 0:
        return 1 << 30
    n = max(1, math.ceil((horizon - wait) / delay) - items)  # near the answer; then exact:
    while n > 1 and (items + n - 1) * delay + wait >= horizon:
        n -= 1
    while (items + n) * delay + wait < horizon:
        n += 1
    return n
