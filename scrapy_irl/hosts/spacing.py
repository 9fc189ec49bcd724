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
the handler first lines each request up in a :class:`SendPlan`, before it asks for a
connection or starts the timeout; the wire check then only corrects what the connection
set-up shifted.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from twisted.internet.defer import Deferred

#: Reservations between two prunes of past entries.
PRUNE_EVERY = 256


class SendSpacing:
    """When the next request may be written under each key (a monotonic clock)."""

    def __init__(
        self,
        now: Callable[[], float] = time.monotonic,
        recall: Callable[[str], float | None] | None = None,
    ) -> None:
        """``recall``: the last write of a key not booked yet, from before a restart (in
        ``now``'s clock), or None."""
        self._now = now
        self._recall = recall
        self._next_write: dict[str, float] = {}
        self._since_prune = 0

    def reserve(self, keys: Iterable[tuple[str, float]]) -> float:
        """Book the next write under every ``(key, gap)``: seconds to wait before it (0.0:
        at once). It waits for the latest of its keys, and each key's next write then
        comes its gap after this one, so concurrent writes queue up."""
        now = self._now()
        keys = [(key, gap) for key, gap in keys if gap > 0]
        start = max([now, *(self._next_due(key, gap, now) for key, gap in keys)])
        for key, gap in keys:
            self._next_write[key] = start + gap
        self._since_prune += 1
        if self._since_prune >= PRUNE_EVERY:
            self._prune(now)
        return start - now

    def _next_due(self, key: str, gap: float, now: float) -> float:
        due = self._next_write.get(key)
        if due is not None:
            return due
        last = self._recall(key) if self._recall is not None else None
        return now if last is None else last + gap

    def _prune(self, now: float) -> None:
        self._since_prune = 0
        for key in [k for k, due in self._next_write.items() if due <= now]:
            del self._next_write[key]

    def __len__(self) -> int:
        return len(self._next_write)


class _Waiter:
    """A request waiting in a :class:`SendPlan` for its keys' gaps."""

    __slots__ = ("keys", "deferred")

    def __init__(self, keys: list[tuple[str, float]], deferred: Deferred[None]) -> None:
        self.keys = keys
        self.deferred = deferred


class SendPlan:
    """Requests wait here, before a connection, until each of their keys' gap since the
    key's last start has passed: per host (the first key) in arrival order, and hosts of
    one server between each other's requests as their gaps allow.

    A request the heaps timed goes to the front of its host's line: it waits at most what
    its host's and server's last starts ask (a file just sent, say), never behind the
    host's queue of files, which the heaps do not know (a page waited 39 s behind 40
    files there, its server held "in flight" meanwhile, in a probe of 2026-11-29). Starts
    are recorded when a request leaves; keys quiet for longer than the largest gap are
    pruned as it goes.
    """

    def __init__(
        self,
        reactor: Any,
        now: Callable[[], float] = time.monotonic,
        recall: Callable[[str], float | None] | None = None,
    ) -> None:
        """``recall``: the last start of a key the plan has not seen, from before a
        restart (in ``now``'s clock), or None."""
        self._reactor = reactor
        self._now = now
        self._recall = recall
        self._last: dict[str, float] = {}
        self._lines: dict[str, deque[_Waiter]] = {}  # by host key
        self._call: Any = None
        self._longest_gap = 0.0
        self._since_prune = 0

    def wait(self, keys: Iterable[tuple[str, float]], *, front: bool = False) -> Deferred[None] | None:
        """None: go now (the start is recorded); else a Deferred firing when it may go.
        ``keys``: ``(key, gap)`` pairs, the host's first. Cancelling the Deferred takes
        the request out of its line."""
        keys = [(key, gap) for key, gap in keys if gap > 0]
        if not keys:
            return None
        now = self._now()
        line = self._lines.get(keys[0][0])
        if (front or not line) and self._due(keys) <= now:
            self._start(keys, now)
            return None
        waiter = _Waiter(keys, Deferred(lambda d: self._cancelled(waiter)))
        line = self._lines.setdefault(keys[0][0], deque())
        if front:
            line.appendleft(waiter)
        else:
            line.append(waiter)
        self._reschedule(now)
        return waiter.deferred

    def __len__(self) -> int:
        """Requests waiting."""
        return sum(len(line) for line in self._lines.values())

    def _due(self, keys: list[tuple[str, float]]) -> float:
        return max(self._last_start(key) + gap for key, gap in keys)

    def _last_start(self, key: str) -> float:
        last = self._last.get(key)
        if last is None:
            last = self._recall(key) if self._recall is not None else None
            if last is None:
                return -math.inf
            self._last[key] = last
        return last

    def _start(self, keys: list[tuple[str, float]], now: float) -> None:
        for key, gap in keys:
            self._last[key] = now
            self._longest_gap = max(self._longest_gap, gap)
        self._since_prune += 1
        if self._since_prune >= PRUNE_EVERY:
            self._since_prune = 0
            horizon = now - self._longest_gap
            for key in [k for k, last in self._last.items() if last < horizon]:
                del self._last[key]

    def _release(self) -> None:
        self._call = None
        now = self._now()
        released = []
        for host in list(self._lines):
            line = self._lines[host]
            while line and self._due(line[0].keys) <= now:
                waiter = line.popleft()
                self._start(waiter.keys, now)
                released.append(waiter)
            if not line:
                del self._lines[host]
        self._reschedule(now)
        for waiter in released:  # after the bookkeeping: a callback may call wait()
            waiter.deferred.callback(None)

    def _reschedule(self, now: float) -> None:
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None
        if self._lines:
            when = min(self._due(line[0].keys) for line in self._lines.values())
            self._call = self._reactor.callLater(max(0.0, when - now), self._release)

    def _cancelled(self, waiter: _Waiter) -> None:
        line = self._lines.get(waiter.keys[0][0])
        if line is not None and waiter in line:
            line.remove(waiter)
            if not line:
                del self._lines[waiter.keys[0][0]]
            self._reschedule(self._now())


def spaced_connections(
    get: Callable[[Any, Any], Deferred[Any]],
    spacing: SendSpacing,
    reactor: Any,
    *,
    keys: Callable[[Any, Any], list[tuple[str, float]] | None],
    waited: Callable[[float], None],
    written: Callable[[list[tuple[str, float]], float], None] | None = None,
) -> Callable[[Any, Any], Deferred[Any]]:
    """A pool's ``getConnection`` whose connections come no sooner than ``spacing`` allows
    ``keys(pool key, connection)`` (None: not held, e.g. a proxy's connection, whose peer
    is the proxy, not the server the heaps timed). A connection the server closed during
    the hold (an idle keep-alive one) is swapped for a fresh one of the same key; the
    write keeps the slot already booked. ``written(keys, wait)``: a write was booked
    under ``keys``, ``wait`` seconds from now."""

    def get_connection(key: Any, endpoint: Any) -> Deferred[Any]:
        def hold(connection: Any) -> Any:
            booked = keys(key, connection)
            wait = spacing.reserve(booked) if booked else 0.0
            if booked and written is not None:
                written(booked, wait)
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
