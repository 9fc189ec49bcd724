"""The host heap and the IP heap of IRLbot (thesis chapter VII section 1; Polybot 3.4-3.5).

Only hosts with work in RAM (or whose last request is too recent to forget) are held:
each has a FIFO of pending items. A host is *due* when it has no request in flight and
``tau_h`` has passed since its previous request started; an IP is *due* when ``tau_s`` has
passed since its previous request started and fewer than ``max_in_flight`` requests to it
are running. ``pop(now)`` hands out an item only when both its host and its IP are due.

Mechanics: due hosts move from the host heap into their IP's ready heap; IPs with ready
hosts sit in the IP heap keyed by when they are next due. Both big heaps use lazy deletion
(an entry is valid only if its generation matches), so every hot operation is O(log n).
No Scrapy and no clock inside: callers pass ``now``.

Which ready host an IP serves next (``ready_order``) matters on a busy shared server,
whose capacity 1/tau_s is smaller than what its hosts could use; the thesis fixes the
rates (tau_h, tau_s) but not this order. ``"fifo"`` serves ready hosts in the order they
became ready (round-robin): the server's capacity is split evenly, so a site with a large
budget gets no more of it than one with B_0. ``"budget"`` (default) splits it in
proportion to the hosts' budgets by weighted fair queueing: each host carries a virtual
finish time that grows by 1/B per request, and the ready host with the smallest start tag
goes first. The IP's virtual clock advances by 1/W per request served (W: the total
budget of its ready hosts, as in GPS) or to the tag served, if later. A host that had
run out of work, or is new, starts at that clock, so it cannot save up a burst, and a
stream of new hosts cannot hold back the hosts already waiting (each waits at most until
the clock reaches its tag). A host that kept work queued keeps its own finish time while
its tau_h runs, so a well-budgeted host held back by its tau_h is not pushed behind the
newcomers that arrived meanwhile (tau_h already bounds its rate). Nobody's tau_h or tau_s
gets shorter, no host is starved (a B_0 host still gets B_0/W of the server) and nothing
is dropped.

A host's IP comes from a DNS record that expires (``Host.dns_expires``) while the host
can stay in the heaps for hours. When such a host's turn comes (its IP picks it to serve),
nothing is handed out for it: it leaves the ready heap as if served but without taking the
IP's turn, is marked ``resolving`` and listed in ``expired`` for the caller to resolve it
again. Its queue stays where it is, counted in its IP's backlog, and no tau_h, tau_s or
virtual time is spent. :meth:`resume` puts it back in line with the tag it had (its next
turn serves it, even if the record has expired again while it waited for it), after
:meth:`move` to another IP if its address changed; :meth:`remove` takes it out (its
lookup failed, its items were drained).
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any


#: Hosts scanned per second, at most, for idle ones to forget (one scan takes about
#: 0.3 ms per 1 000 hosts): the table of a crawl with 100 000 hosts in RAM is scanned
#: every 5 s, of 20 000 or fewer at every tick.
FORGET_SCAN_RATE = 20_000.0


@dataclass(eq=False)
class Host:
    """One host name: its pending items, politeness state and IP."""

    name: str
    ip: str
    delay: float  # tau_h for this host (already includes its Crawl-delay)
    pld: str = ""  # its pay-level domain, for its IP's average budget ("": the name)
    queue: deque[Any] = field(default_factory=deque)
    last_start: float = float("-inf")
    previous_start: float = float("-inf")  # last_start before the current hand-out
    # Latest robots.txt request to the host, redirect hops included (with
    # IRL_ROBOTS_HOST_DELAY also its own robots.txt fetch): its pages wait tau_h after it.
    hop_start: float = float("-inf")
    in_flight: bool = False
    gen: int = 0  # host-heap entry generation (lazy deletion)
    ready: bool = False  # in its IP's ready list
    # What the delay was derived from (to rescale it when the PLD's budget grows, and for
    # the IP's average budget); the heaps read only ``delay``.
    budget: float = 0.0
    crawl_delay: float | None = None  # the largest of its origins' (http, https, ports)
    delay_origins: tuple[str, ...] = ()  # origins whose Crawl-delay was taken into it
    # Of those, the ones asking for more than IRL_CRAWL_DELAY_MAX, whose URLs are refused
    # (IRL_CRAWL_DELAY_OVER_MAX = "skip"): their delay is not taken into ``delay``.
    slow_origins: tuple[str, ...] = ()
    finish: float = 0.0  # virtual finish time of its last request on its IP
    backlogged: bool = False  # had work queued ever since its last request (keeps finish)
    # When its DNS record stops being fresh (the caller's clock; inf: never, an IP
    # literal). A host whose turn comes later is held instead (``resolving``) until the
    # caller has looked its name up again: see :meth:`Politeness.pop`.
    dns_expires: float = float("inf")
    resolving: bool = False
    # Resolved again at its last turn and not served since: its next turn serves it even
    # if the record has expired again meanwhile (a TTL shorter than its wait for the IP),
    # or it would be held, and looked up, at every turn and never served.
    dns_renewed: bool = False
    # Meta its robots.txt requests carry to go the way its pages go (a proxy named by
    # the pages' meta); None: nothing to add.
    robots_meta: dict[str, Any] | None = None
    # robots.txt redirect hops waiting to claim it (:meth:`Politeness.claim_hop`): kept
    # in the table meanwhile (forget_idle), or the hop would book a forgotten host.
    hop_waits: int = 0
    # Server back-off (:mod:`scrapy_irl.scheduler.backoff`): the host answered 429 or 503,
    # or did not answer, so its next request waits until then even if tau_h has passed;
    # and how many such answers it gave in a row.
    not_before: float = float("-inf")
    backoff_streak: int = 0

    def due_at(self) -> float:
        # hop_start: a robots.txt redirect hop is a request to the host too. Most paths
        # fold it into last_start; a hop booked without the host's slot (it gave up
        # waiting, IRL_HANDOUT_TIMEOUT) does not, and its pages followed it at once.
        return max(max(self.last_start, self.hop_start) + self.delay, self.not_before)


@dataclass(eq=False)
class Ip:
    """One server address shared by its hosts."""

    ip: str
    delay: float  # tau_s
    ready: list[tuple[float, int, Host, float]] = field(default_factory=list)  # a heap
    last_start: float = float("-inf")
    previous_start: float = float("-inf")  # last_start before the latest hand-out
    in_flight: int = 0
    gen: int = 0
    in_heap: bool = False
    # tau_s follows the average budget of the PLDs on a server (thesis VII.1; see
    # ``set_budget``): per PLD with hosts of this IP in the table, [hosts, sum of their
    # budgets] (hosts of one PLD share B_x, but each learns a new one at its own next
    # finish); ``budget_total`` is the sum over those PLDs of their hosts' mean budget,
    # and ``budget_hosts`` the number of hosts.
    plds: dict[str, list[float]] = field(default_factory=dict)
    budget_total: float = 0.0
    budget_hosts: int = 0
    queued: int = 0  # items pending in the queues of its hosts (its RAM backlog)
    clock: float = 0.0  # virtual time (fair queueing), see the module docstring
    ready_weight: float = 0.0  # W: total weight of the entries in ``ready``

    def due_at(self) -> float:
        return self.last_start + self.delay

    @property
    def average_budget(self) -> float:
        """Mean budget of the PLDs whose hosts on this IP are in the table (0: none)."""
        return self.budget_total / len(self.plds) if self.plds else 0.0

    def join(self, host: Host) -> None:
        """Count ``host`` (with its budget) in this IP's average."""
        self._change(host.pld or host.name, 1, host.budget)
        self.budget_hosts += 1

    def leave(self, host: Host) -> None:
        """Take ``host`` out of this IP's average (forgotten, or it moves)."""
        self._change(host.pld or host.name, -1, -host.budget)
        self.budget_hosts -= 1

    def rebudget(self, host: Host, budget: float) -> None:
        """``host``'s budget becomes ``budget`` (it is counted here)."""
        self._change(host.pld or host.name, 0, budget - host.budget)

    def _change(self, pld: str, hosts: int, budget: float) -> None:
        entry = self.plds.get(pld)
        if entry is None:
            entry = self.plds[pld] = [0, 0.0]
        else:
            self.budget_total -= entry[1] / entry[0]
        entry[0] += hosts
        entry[1] += budget
        if entry[0] > 0:
            self.budget_total += entry[1] / entry[0]
        else:
            del self.plds[pld]
        if not self.plds:
            self.budget_total = 0.0  # no float drift carried over an empty table


class Politeness:
    """Both heaps; hands out items whose host and IP are both due."""

    READY_ORDERS = ("budget", "fifo")

    def __init__(
        self, *, max_in_flight_per_ip: int = 4, ready_order: str = "budget",
        streak_memory: float = 0.0, ip_delay_for: Callable[[float], float] | None = None,
    ) -> None:
        if max_in_flight_per_ip < 1:
            raise ValueError(
                f"max_in_flight_per_ip must be >= 1, got {max_in_flight_per_ip}"
            )
        if ready_order not in self.READY_ORDERS:
            raise ValueError(
                f"ready_order must be one of {', '.join(self.READY_ORDERS)}, "
                f"got {ready_order!r}"
            )
        self.max_in_flight_per_ip = max_in_flight_per_ip
        self._by_budget = ready_order == "budget"
        # How long a host in a run of back-offs stays after its wait is over with nothing
        # queued: Scrapy's retry of its last page comes back through the disk queues, and
        # forgotten meanwhile, the host would start its run again at one tau_h.
        self.streak_memory = streak_memory
        # tau_s of an IP from the average budget of its PLDs: applied again when a host
        # leaves the IP (forgotten, removed, moved), or the IP kept the tau_s a departed
        # host's budget gave it. None: tau_s changes only through set_delays.
        self.ip_delay_for = ip_delay_for
        self.hosts: dict[str, Host] = {}
        self.ips: dict[str, Ip] = {}
        self._host_heap: list[tuple[float, int, int, Host]] = []
        self._ip_heap: list[tuple[float, int, int, Ip]] = []
        self._seq = itertools.count()
        self.items = 0  # pending items over all hosts
        # Hosts held at their turn because their DNS record had expired, not yet handed
        # to the caller (who takes them after each pop) to be resolved again.
        self.expired: list[Host] = []
        self.resolving = 0  # hosts held for a fresh lookup now

    # -- hosts and items -------------------------------------------------------------------
    def host(self, name: str) -> Host | None:
        return self.hosts.get(name)

    def add_host(
        self, name: str, ip: str, host_delay: float, ip_delay: float, pld: str = ""
    ) -> Host:
        """Register (or update the delays of) a host; its IP is created on first use.
        ``pld``: its pay-level domain (tau_s averages budgets over PLDs); "" counts the
        host as a PLD of its own."""
        address = self.ips.get(ip)
        if address is None:
            address = self.ips[ip] = Ip(ip, ip_delay)
        else:
            address.delay = ip_delay
        host = self.hosts.get(name)
        if host is None:
            host = self.hosts[name] = Host(name, ip, host_delay, pld=pld)
            address.join(host)
        else:
            host.delay = host_delay
        return host

    def set_budget(self, host: Host, budget: float) -> float:
        """Record ``host``'s budget; returns the average budget of the PLDs on its IP
        (thesis VII.1: tau_s scales with it). Until 2026-11-29 the average ran over
        hosts, so one PLD's many virtual hosts outweighed the other PLDs of a server."""
        address = self.ips[host.ip]
        address.rebudget(host, budget)
        host.budget = budget
        return address.average_budget

    def set_delays(self, host: Host, host_delay: float, ip_delay: float) -> None:
        """New tau_h for ``host`` and tau_s for its IP (budgets change during a crawl).

        Heap entries keyed by the old due time are replaced, so a shorter delay takes
        effect at once and a longer one is never undercut (a host already waiting in its
        IP's ready heap is checked again at its turn: :meth:`_not_due_after_all`).
        """
        address = self.ips[host.ip]
        if host.delay != host_delay:
            host.delay = host_delay
            if host.queue and not host.in_flight and not host.ready and not host.resolving:
                self._schedule_host(host)
        self._set_ip_delay(address, ip_delay)

    def _set_ip_delay(self, address: Ip, ip_delay: float) -> None:
        if address.delay != ip_delay:
            address.delay = ip_delay
            if address.in_heap:
                self._schedule_ip(address)

    def push(self, name: str, item: Any, *, front: bool = False) -> None:
        """Queue ``item`` for host ``name`` (registered with :meth:`add_host`)."""
        host = self.hosts[name]
        if front:
            host.queue.appendleft(item)
        else:
            host.queue.append(item)
        self.items += 1
        self.ips[host.ip].queued += 1
        if (len(host.queue) == 1 and not host.in_flight and not host.ready
                and not host.resolving):  # fmt: skip
            self._schedule_host(host)

    def drain(self, name: str) -> list[Any]:
        """Remove and return every pending item of a host (e.g. its DNS failed)."""
        host = self.hosts.get(name)
        if host is None:
            return []
        items = list(host.queue)
        host.queue.clear()
        host.backlogged = False
        self.items -= len(items)
        self.ips[host.ip].queued -= len(items)
        host.gen += 1
        if host.ready:
            self._unready(host)
        return items

    def filter(self, name: str, keep: Callable[[Any], bool]) -> list[Any]:
        """Drop the items of a host for which ``keep`` is false; returns the dropped ones."""
        host = self.hosts.get(name)
        if host is None:
            return []
        dropped = [item for item in host.queue if not keep(item)]
        if dropped:
            host.queue = deque(item for item in host.queue if keep(item))
            host.backlogged = host.backlogged and bool(host.queue)
            self.items -= len(dropped)
            self.ips[host.ip].queued -= len(dropped)
            if not host.queue and host.ready:
                self._unready(host)
        return dropped

    def _unready(self, host: Host, *, keep_place: bool = False) -> None:
        """Take ``host`` out of its IP's ready heap (rare: its items were drained, or a
        redirect hop claims it). ``keep_place``: it re-enters with the tag it had."""
        address = self.ips[host.ip]
        if keep_place:
            host.finish = next(entry[0] for entry in address.ready if entry[2] is host)
            host.backlogged = True
        address.ready = [entry for entry in address.ready if entry[2] is not host]
        heapq.heapify(address.ready)
        address.ready_weight = sum(entry[3] for entry in address.ready)
        host.ready = False

    # -- the heaps -------------------------------------------------------------------------
    def _schedule_host(self, host: Host) -> None:
        host.gen += 1
        heapq.heappush(
            self._host_heap, (host.due_at(), next(self._seq), host.gen, host)
        )

    def _schedule_ip(self, address: Ip) -> None:
        address.gen += 1
        address.in_heap = True
        heapq.heappush(
            self._ip_heap, (address.due_at(), next(self._seq), address.gen, address)
        )

    def _promote_due_hosts(self, now: float) -> None:
        heap = self._host_heap
        while heap and heap[0][0] <= now:
            _, _, gen, host = heapq.heappop(heap)
            if (gen != host.gen or host.in_flight or host.ready or host.resolving
                    or not host.queue):  # fmt: skip
                continue
            address = self.ips[host.ip]
            host.ready = True
            weight = host.budget if host.budget > 0 else 1.0
            if not self._by_budget:
                tag = 0.0
            elif host.backlogged:
                tag = host.finish
            else:
                tag = max(host.finish, address.clock)
            heapq.heappush(address.ready, (tag, next(self._seq), host, weight))
            address.ready_weight += weight
            if not address.in_heap and address.in_flight < self.max_in_flight_per_ip:
                self._schedule_ip(address)

    def pop(self, now: float) -> tuple[Host, Any] | None:
        """The next item whose host and IP are both due, marked as started at ``now``."""
        self._promote_due_hosts(now)
        heap = self._ip_heap
        while heap and heap[0][0] <= now:
            _, _, gen, address = heapq.heappop(heap)
            if gen != address.gen:
                continue
            address.in_heap = False
            if not address.ready or address.in_flight >= self.max_in_flight_per_ip:
                continue
            total = address.ready_weight
            tag, _, host, weight = heapq.heappop(address.ready)
            address.ready_weight = total - weight if address.ready else 0.0
            if host.due_at() > now:
                self._not_due_after_all(host, address, tag)
                continue
            if now >= host.dns_expires and not host.dns_renewed:
                self._hold_for_dns(host, address, tag)
                continue
            host.dns_renewed = False
            if self._by_budget:
                address.clock = max(tag, address.clock + 1.0 / total)
                host.finish = tag + 1.0 / weight
                # what stays queued once this item has left: a host served its last item
                # starts again at the IP's clock (True here gave it a burst on return)
                host.backlogged = len(host.queue) > 1
            host.ready = False
            item = host.queue.popleft()
            self.items -= 1
            address.queued -= 1
            host.in_flight = True
            host.previous_start = host.last_start
            host.last_start = now
            host.gen += 1
            address.in_flight += 1
            address.previous_start = address.last_start
            address.last_start = now
            if address.ready and address.in_flight < self.max_in_flight_per_ip:
                self._schedule_ip(address)
            return host, item
        return None

    def _not_due_after_all(self, host: Host, address: Ip, tag: float) -> None:
        """``host``'s delay grew while it waited in its IP's ready heap (a Crawl-delay
        learned from another of its origins, a larger tau_h): it goes back to the host
        heap until the new due time, keeping its place in line, and the IP goes on to
        its next ready host. Served at its old turn, the longer delay was undercut."""
        host.ready = False
        host.finish = tag
        host.backlogged = True
        self._schedule_host(host)
        if address.ready and address.in_flight < self.max_in_flight_per_ip:
            self._schedule_ip(address)

    def _hold_for_dns(self, host: Host, address: Ip, tag: float) -> None:
        """``host``'s turn came with its DNS record expired: hold it for a fresh lookup.

        It is not served, so nothing it would book (the IP's turn and virtual clock, its
        own start) is touched, and the IP goes on to its next ready host. It keeps its
        place: resumed with the same address, it re-enters the ready heap with ``tag``.
        """
        host.ready = False
        host.resolving = True
        host.finish = tag
        host.backlogged = True
        self.resolving += 1
        self.expired.append(host)
        if address.ready and address.in_flight < self.max_in_flight_per_ip:
            self._schedule_ip(address)

    def resume(self, host: Host, dns_expires: float) -> None:
        """``host``'s name was resolved again (record fresh until ``dns_expires``): it is
        due as before the lookup (its tau_h had passed) and keeps its place in line. Its
        next turn serves it even if the record has expired again by then."""
        if not host.resolving:
            return
        host.resolving = False
        self.resolving -= 1
        host.dns_expires = dns_expires
        host.dns_renewed = bool(host.queue)  # (an emptied host's next turn is far off)
        if host.queue and not host.in_flight and not host.ready:
            self._schedule_host(host)

    def move(self, host: Host, ip: str, ip_delay: float) -> None:
        """Move a held ``host`` (with its queue, budget, delays and last start) to ``ip``,
        its new address: from its next request on, tau_s and the in-flight bound of ``ip``
        apply. Its IP is created with ``ip_delay`` on first use. Only a host that is not
        in flight nor ready can move (one held by :meth:`pop`), so no booking on the old
        IP is left behind; the old IP is forgotten by :meth:`forget_idle` once unused.
        """
        if host.in_flight or host.ready or ip == host.ip:
            raise ValueError(f"cannot move {host.name} from {host.ip} to {ip} now")
        self._leave_ip(host).queued -= len(host.queue)
        address = self.ips.get(ip)
        if address is None:
            address = self.ips[ip] = Ip(ip, ip_delay)
        address.join(host)
        address.queued += len(host.queue)
        host.ip = ip
        # Virtual times of two servers do not compare: it starts as a newcomer does.
        host.finish = address.clock
        host.backlogged = False

    def remove(self, name: str) -> list[Any]:
        """Take a host that is not in flight out of the table; returns its pending items
        (its fresh lookup failed: they go the way of a first failed lookup)."""
        host = self.hosts.get(name)
        if host is None or host.in_flight:
            return []
        items = self.drain(name)
        if host.resolving:
            host.resolving = False
            self.resolving -= 1
        self._forget(host)
        return items

    def hop_blocked(self, host: Host, ip: str, *, host_slot: bool, ip_slot: bool) -> bool:
        """Whether a redirect hop to ``host`` on ``ip`` must wait to claim the slots it
        needs: the host has a request in flight (or waits for a DNS lookup, and may move),
        or the IP has :attr:`max_in_flight_per_ip` requests in flight."""
        if host_slot and (host.in_flight or host.resolving):
            return True
        address = self.ips.get(ip)
        return (ip_slot and address is not None
                and address.in_flight >= self.max_in_flight_per_ip)  # fmt: skip

    def claim_hop(self, host: Host, now: float, *, ip: str | None = None,
                  host_slot: bool = True, ip_slot: bool = True,
                  host_due: bool = True) -> float:  # fmt: skip
        """Book a robots.txt redirect hop to ``host`` on ``ip`` (default ``host.ip``, which
        must be in the table) and hold it in flight until :meth:`release_hop`.

        Returns when it may start: once the IP's delay has passed and, with ``host_due``,
        the host's tau_h since its last request (a page, robots.txt or an earlier hop),
        as for any request to it; without, the IP heap alone limits it (IRLbot, chapter
        VII section 1). That moment becomes the IP's last start, so nothing
        else is handed out to the IP too close to it. ``host_slot``: the host counts as
        in flight (taken out of its IP's ready heap, keeping its place), so none of its
        pages go during the hop; ``ip_slot``: the hop takes one of the IP's in-flight
        slots. The caller leaves out what the hop's robots.txt fetch already holds (its
        own host and IP), or a chain of hops would wait for itself.
        """
        address = self.ips[host.ip if ip is None else ip]
        start = max(now, address.due_at())
        if host_due:
            start = max(start, max(host.last_start, host.hop_start) + host.delay,
                        host.not_before)  # fmt: skip
        address.last_start = start
        # a hop is a plain request to the host: pages wait after it
        host.hop_start = max(host.hop_start, start)
        if ip_slot:
            address.in_flight += 1
        if host_slot:
            if host.ready:
                self._unready(host, keep_place=True)
            host.in_flight = True
            host.gen += 1  # its host-heap entry, if any, is stale: queued again at release
        if address.in_heap:
            self._schedule_ip(address)
        return start

    def release_hop(self, host: Host, now: float, *, ip: str | None = None,
                    host_slot: bool = True, ip_slot: bool = True) -> None:  # fmt: skip
        """The hop claimed with :meth:`claim_hop` (same ``ip`` and slots) is over at
        ``now``: its host's pages wait tau_h, the IP's next request tau_s, from then."""
        self.restarted(host, now, host_too=False, hop=True, ip=ip)
        if host_slot and host.in_flight:
            host.in_flight = False
            host.last_start = max(host.last_start, host.hop_start)
            if host.queue and not host.ready and not host.resolving:
                self._schedule_host(host)
        address = self.ips.get(host.ip if ip is None else ip)
        if address is None:
            return
        if ip_slot:
            address.in_flight = max(0, address.in_flight - 1)
        if address.ready and address.in_flight < self.max_in_flight_per_ip:
            self._schedule_ip(address)

    def restarted(self, host: Host, now: float, *, host_too: bool = True,
                  hop: bool = False, ip: str | None = None) -> None:  # fmt: skip
        """The request of ``host`` really started at ``now`` (later than its hand-out).

        Moves both delays' reference points forward, so gaps hold between the moments
        requests reach the network rather than the moments they were handed out.
        """
        if host_too:
            host.last_start = max(host.last_start, now)
        if hop:  # a redirect hop counts for the host too: pages wait tau_h after it
            host.hop_start = max(host.hop_start, now)
        # A robots.txt redirect hop books a host that may have no work queued: the table
        # can forget its IP (once tau_s after the booking passed) while the hop is slow.
        # ``ip``: the hop was booked on another address than the host's (its record had
        # expired and the name now resolves elsewhere).
        address = self.ips.get(host.ip if ip is None else ip)
        if address is None:
            return
        if now > address.last_start:
            address.last_start = now
            if address.in_heap:
                self._schedule_ip(address)

    def finished(self, host: Host, now: float, *, count_for_host: bool = True,
                 unsent: bool = False) -> None:  # fmt: skip
        """The request handed out for ``host`` is over (response, failure or drop).

        ``count_for_host=False`` (a robots.txt fetch, or an item dropped before it was
        sent) restores the host's previous start, or its latest hop if later: a robots.txt
        request that went out is timed through :meth:`restarted` with ``hop=True``
        (``IRL_ROBOTS_HOST_DELAY``), and one served from the cache, or not at all, does
        not hold the host's pages back. ``unsent``: the request never reached the
        downloader; the IP's start is given back too.
        """
        if not host.in_flight:
            return
        address = self.ips[host.ip]
        if unsent:
            # Nothing reached the server (a downloader middleware answered it from its
            # cache, or refused it): neither the host's nor the IP's turn is used up.
            # The IP's only if no request to it was booked after this one.
            if address.last_start == host.last_start:
                address.last_start = address.previous_start
                if address.in_heap:
                    self._schedule_ip(address)
            count_for_host = False
        if not count_for_host:
            host.last_start = max(host.previous_start, host.hop_start)
        host.in_flight = False
        address.in_flight -= 1
        if host.queue:
            self._schedule_host(host)
        if (
            address.ready
            and not address.in_heap
            and address.in_flight < self.max_in_flight_per_ip
        ):
            self._schedule_ip(address)

    def due_now(self, now: float) -> bool:
        """Whether :meth:`pop` at ``now`` would hand out an item (host and IP both due).

        For measurement (downloader idle while work is due), not the hot path: it scans
        the IP heap's entries.
        """
        self._promote_due_hosts(now)
        if not self._ip_heap or self._ip_heap[0][0] > now:
            return False
        return any(
            gen == address.gen
            and address.ready
            and address.in_flight < self.max_in_flight_per_ip
            and any(entry[2].due_at() <= now for entry in address.ready)  # (_not_due_after_all)
            for due, _, gen, address in self._ip_heap
            if due <= now
        )

    def next_due(self) -> float | None:
        """Earliest time an item could become available (None: nothing waits on time)."""
        times = []
        for heap in (self._host_heap, self._ip_heap):
            while heap and heap[0][2] != heap[0][3].gen:
                heapq.heappop(heap)  # type: ignore[misc]  # drop stale tops: exact answer
            if heap:
                times.append(heap[0][0])
        return min(times) if times else None

    # -- memory ----------------------------------------------------------------------------
    def forget_idle(self, now: float) -> int:
        """Drop hosts and IPs with nothing pending whose delay has passed; returns hosts dropped."""
        idle = [
            h
            for h in self.hosts.values()
            if not h.queue and not h.in_flight and not h.resolving and not h.hop_waits
            and h.due_at() + (self.streak_memory if h.backoff_streak else 0.0) <= now
        ]
        for host in idle:
            self._forget(host)
        # budget_hosts counts an IP's hosts in the table (a set of every host's IP was
        # built here each call)
        for ip in [
            ip
            for ip, a in self.ips.items()
            if a.budget_hosts <= 0 and a.in_flight == 0 and a.due_at() <= now
        ]:
            del self.ips[ip]
        return len(idle)

    def _forget(self, host: Host) -> None:
        """Drop ``host`` from the table and from its IP's budget average."""
        del self.hosts[host.name]
        self._leave_ip(host)

    def _leave_ip(self, host: Host) -> Ip:
        """Take ``host``'s budget out of its IP's average (it is forgotten or moves)."""
        address = self.ips[host.ip]
        address.leave(host)
        if self.ip_delay_for is not None and address.budget_hosts > 0:
            self._set_ip_delay(address, self.ip_delay_for(address.average_budget))
        return address

    def backlog_seconds(self, host: Host) -> float:
        """How long the work already queued for ``host``, or for its IP, takes at tau_h/tau_s.

        The larger of the two: pending items of the host times tau_h, and pending items
        on all hosts of its IP times tau_s (lazy loading: RAM should hold what can be
        fetched soon, Polybot section 3.5).
        """
        address = self.ips[host.ip]
        return max(len(host.queue) * host.delay, address.queued * address.delay)

    def ready_hosts(self) -> int:
        return sum(len(a.ready) for a in self.ips.values())

    def __len__(self) -> int:
        return self.items

    def __iter__(self) -> Iterator[Any]:
        for host in self.hosts.values():
            yield from host.queue
