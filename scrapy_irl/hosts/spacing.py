"""Requests written to one server, and to one host, at least the minimum gaps apart,
checked at the wire.

The heaps book a start for each hand-out, but the moment a request's bytes leave is the
reactor's, and some requests never pass through the heaps:

* with :confval:`IRL_IP_MAX_IN_FLIGHT` above 1 the next request to an IP is timed from
  when the previous one reached the downloader, and a busy reactor that writes the
  earlier one late brought two requests closer than tau_s0 at the server (a probe of
  2026-11-27: one gap of 0.43 s at 0.5 s among 3 600 requests);
* ``engine.download`` sends a request straight to the downloader, as Scrapy's
  FilesPipeline and ImagesPipeline do for every file: the add-on's ``DOWNLOAD_DELAY`` 0
  left nothing between them (five files of one server arrived within 3 ms).

So :class:`~scrapy_irl.hosts.download.PoliteHTTP11DownloadHandler` books every write
here, the moment Twisted's pool hands it a connection (the request is written on it at
once), under its peer address (gap ``IRL_IP_DELAY_MIN``, tau_s0) and its host name (gap
``IRL_HOST_DELAY_MIN``, tau_h0), and holds the connection until both are due. The heaps
time their own requests from the previous response, so for them the hold does not come:
it is the guarantee, not the schedule. It knows no Crawl-delay, back-off or in-flight
limit: those stay the scheduler's.

RAM: one float per address and host written to within the last gap, pruned as it goes
(bounded by the requests in flight, not by the crawl's size).

Holding a connection is right for the small corrections it makes, wrong for a queue:
many ``engine.download`` requests to one host (FilesPipeline with a page of 40 files)
waited there holding one idle connection each, inside ``DOWNLOAD_TIMEOUT`` (30 of 40
files timed out in a probe of 2026-11-29), and, booked one behind the other under their
IP too, held every other host of that server until the whole queue had gone (19 s). So
the handler first books each request in a :class:`SendPlan`, before it asks for a
connection or starts the timeout: the earliest start that keeps every gap of its keys,
between earlier bookings where there is room, so one host's queue takes only its own
share of its server's slots. The wire check then only corrects what the connection set-up
shifted.
"""

from __future__ import annotations

import itertools
import time
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from twisted.internet.defer import Deferred

#: Reservations between two prunes of past entries.
PRUNE_EVERY = 256


class SendSpacing:
    """When the next request may be written under each key (a monotonic clock)."""

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now
        self._next_write: dict[str, float] = {}
        self._since_prune = 0

    def reserve(self, keys: Iterable[tuple[str, float]]) -> float:
        """Book the next write under every ``(key, gap)``: seconds to wait before it (0.0:
        at once). It waits for the latest of its keys, and each key's next write then
        comes its gap after this one, so concurrent writes queue up."""
        now = self._now()
        keys = [(key, gap) for key, gap in keys if gap > 0]
        start = max([now, *(self._next_write.get(key, now) for key, _ in keys)])
        for key, gap in keys:
            self._next_write[key] = start + gap
        self._since_prune += 1
        if self._since_prune >= PRUNE_EVERY:
            self._prune(now)
        return start - now

    def _prune(self, now: float) -> None:
        self._since_prune = 0
        for key in [k for k, due in self._next_write.items() if due <= now]:
            del self._next_write[key]

    def __len__(self) -> int:
        return len(self._next_write)


#: Two times closer than this are one (float sums of gaps are not exact).
_EPSILON = 1e-9


@dataclass(frozen=True)
class Booking:
    """A start booked in a :class:`SendPlan` under ``keys``, to give back if unused."""

    keys: tuple[str, ...]
    start: float
    number: int  # tells bookings of one start apart: a second release frees nothing


class SendPlan:
    """Starts booked per key; a new request gets the earliest start that is at least each
    of its keys' gaps away from every start booked under that key (before or after it).

    Unlike :class:`SendSpacing`, which queues each write behind the last one of each of
    its keys, a request to a quiet host of a busy server fits between the bookings of the
    server's busy host. Bookings older than the largest gap are pruned as it goes.
    """

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now
        self._booked: dict[str, list[tuple[float, int]]] = {}  # (start, number), sorted
        self._longest_gap = 0.0
        self._since_prune = 0
        self._numbers = itertools.count()

    def book(self, keys: Iterable[tuple[str, float]]) -> tuple[float, Booking]:
        """Book a start under every ``(key, gap)``: (seconds to wait for it, the booking)."""
        now = self._now()
        keys = [(key, gap) for key, gap in keys if gap > 0]
        start = self._earliest(now, keys)
        number = next(self._numbers)
        for key, gap in keys:
            insort(self._booked.setdefault(key, []), (start, number))
            self._longest_gap = max(self._longest_gap, gap)
        self._since_prune += 1
        if self._since_prune >= PRUNE_EVERY:
            self._prune(now)
        return start - now, Booking(tuple(key for key, _ in keys), start, number)

    def release(self, booking: Booking) -> None:
        """Give back a start that was not used (the request was cancelled while waiting)."""
        for key in booking.keys:
            starts = self._booked.get(key)
            if not starts:
                continue
            entry = (booking.start, booking.number)
            i = bisect_left(starts, entry)
            if i < len(starts) and starts[i] == entry:
                del starts[i]
            if not starts:
                del self._booked[key]

    def _earliest(self, now: float, keys: list[tuple[str, float]]) -> float:
        """Sweep forward from ``now``: a start too close to a booking of some key moves
        just past the last such booking, until no key objects. Each move passes at least
        one booking, so there are at most as many moves as bookings."""
        start = now
        moved = True
        while moved:
            moved = False
            for key, gap in keys:
                starts = self._booked.get(key)
                if not starts:
                    continue
                # bookings b with start - gap < b < start + gap are too close
                last = bisect_left(starts, (start + gap - _EPSILON,)) - 1
                if last >= 0 and starts[last][0] > start - gap + _EPSILON:
                    start = starts[last][0] + gap
                    moved = True
        return start

    def _prune(self, now: float) -> None:
        self._since_prune = 0
        horizon = now - self._longest_gap
        for key in list(self._booked):
            starts = self._booked[key]
            del starts[: bisect_left(starts, (horizon,))]
            if not starts:
                del self._booked[key]

    def __len__(self) -> int:
        return sum(len(starts) for starts in self._booked.values())


def spaced_connections(
    get: Callable[[Any, Any], Deferred[Any]],
    spacing: SendSpacing,
    reactor: Any,
    *,
    keys: Callable[[Any, Any], list[tuple[str, float]] | None],
    waited: Callable[[float], None],
) -> Callable[[Any, Any], Deferred[Any]]:
    """A pool's ``getConnection`` whose connections come no sooner than ``spacing`` allows
    ``keys(pool key, connection)`` (None: not held, e.g. a proxy's connection, whose peer
    is the proxy, not the server the heaps timed). A connection the server closed during
    the hold (an idle keep-alive one) is swapped for a fresh one of the same key; the
    write keeps the slot already booked."""

    def get_connection(key: Any, endpoint: Any) -> Deferred[Any]:
        def hold(connection: Any) -> Any:
            booked = keys(key, connection)
            wait = spacing.reserve(booked) if booked else 0.0
            if wait <= 0:
                return connection
            waited(wait)
            return _after(reactor, wait, connection,
                          lambda: _usable(connection) or get(key, endpoint))  # fmt: skip

        return get(key, endpoint).addCallback(hold)

    return get_connection


def _usable(connection: Any) -> Any:
    """``connection`` if it can still carry a request, else None."""
    return connection if getattr(connection, "state", "QUIESCENT") == "QUIESCENT" else None


def _after(reactor: Any, wait: float, connection: Any, then: Callable[[], Any]) -> Deferred[Any]:
    """``then()`` after ``wait`` seconds. Cancelled (the download timed out, the crawl
    stopped), the held connection is closed rather than left open outside the pool, and
    a fresh one still on its way is cancelled."""
    fresh: list[Deferred[Any]] = []

    def cancel(_: Deferred[Any]) -> None:
        if fresh:
            fresh[0].cancel()
        elif call.active():
            call.cancel()
            transport = getattr(connection, "transport", None)
            if transport is not None:
                transport.loseConnection()

    held: Deferred[Any] = Deferred(cancel)

    def fire() -> None:
        try:
            result = then()
        except Exception as exc:  # noqa: BLE001 - the pool's failure is the download's
            held.errback(exc)
            return
        if isinstance(result, Deferred):  # a fresh connection, still on its way
            fresh.append(result)
            result.chainDeferred(held)
        else:
            held.callback(result)

    call = reactor.callLater(wait, fire)
    return held
