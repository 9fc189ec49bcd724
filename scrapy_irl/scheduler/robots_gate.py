"""Stage 4 of the IRL scheduler: robots.txt before a URL may wait in its host's queue.

URLs of an origin with fresh rules are checked at once; the others wait (Q_R) while
RobotsRequested fetches robots.txt in the host's turn, booked in the IP heap like any
request to that server (thesis chapter VII; Polybot section 3.4). Refused URLs are
handed out to fail in RobotsCacheMiddleware, so errbacks see them as with Scrapy's own
robots middleware; an unreachable robots.txt holds its URLs for the retries."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scrapy.http import Request
from scrapy.utils.defer import deferred_from_coro

from scrapy_irl.hosts.middleware import PROCESS_STARTED
from scrapy_irl.hosts.records import RobotsKind
from scrapy_irl.robots.middleware import (
    CHECKED_META,
    CRAWL_DELAY_TOO_LONG,
    REFUSED_META,
    UNREACHABLE,
)
from scrapy_irl.robots.origin import HTTP_ORIGINS, origin_host, origin_of
from scrapy_irl.scheduler.items import (
    FRONTIER_FAILURES,
    Held,
    RobotsMarker,
    robots_margin,
    url_of,
    url_parts,
)
from scrapy_irl.scheduler.politeness import Host

if TYPE_CHECKING:
    from scrapy_irl.robots.cache import CachedRobots

logger = logging.getLogger(__name__)
#: Hosts held by an earlier run's robots.txt failure that are named in the log.
EARLIER_FAILURES_TOLD = 10


class RobotsGate:
    """IrlScheduler's robots.txt checks and fetches (a mixin: the state is IrlScheduler's)."""

    def _check_robots_and_queue(self, item: Any, host: str) -> None:
        """Queue ``item`` for ``host`` once robots.txt allows it (or refuse it, or wait for
        the rules). An error costs only this item (:meth:`_routing_failed`): the callers
        loop over URLs that have left every other queue."""
        try:
            self._robots_then_queue(item, host)
        except Exception as exc:
            self._routing_failed(item, exc)

    def _routing_failed(self, item: Any, exc: Exception) -> None:
        """``item`` could not be routed. A frontier write or read failed: the crawl closes
        cleanly (what the last save committed resumes). Anything else is a request this
        scheduler cannot handle (until 2026-11-27 a User-Agent header that was not UTF-8
        raised in the robots.txt check): it is dropped, counted in
        ``irl_sched/routing_errors`` and logged with its traceback, and the URLs queued
        behind it go on (they were lost with it, and the crawl could close early)."""
        if isinstance(exc, FRONTIER_FAILURES):
            self._on_storage_error(exc, "routing a request")
            return
        self.counts["routing_errors"] += 1
        logger.error("IRL scheduler: dropping %(url)s, which it failed to route",
                     {"url": url_of(item)}, exc_info=exc,
                     extra={"spider": self.spider})  # fmt: skip
        self._release(item)

    def _robots_then_queue(self, item: Any, host: str) -> None:
        if self.robots is None or (
            isinstance(item, Request) and item.meta.get("dont_obey_robotstxt")
        ):
            self._push_or_park(host, item)
            return
        url = url_of(item)
        origin = origin_of(url_parts(url))
        if origin is None:
            self._push_or_park(host, item)
            return
        if not origin.startswith(HTTP_ORIGINS):
            # ftp: and other network schemes: timed by the heaps like any request to the
            # host, but robots.txt is read over http(s) only (docs/robots.rst).
            self.counts["robots_other_scheme"] += 1
            self._push_or_park(host, item)
            return
        cached = self.robots.cache.get(origin)
        if cached is not None and cached.record.is_fresh(self.robots.clock()):
            if self._note_crawl_delay(host, origin, cached):
                self._refuse_for_crawl_delay(host, item)
            else:
                self._obey(cached, item, url, host)
            return
        waiting = self._robots_wait.get(origin)
        if self._park_if_backlogged(item, host, len(waiting) if waiting else 0):
            return
        self._wait_for_robots(origin, item)
        if origin not in self._robots_fetching:
            self._robots_fetching.add(origin)
            self.polite.push(host, RobotsMarker(origin), front=True)

    def _wait_for_robots(self, origin: str, item: Any) -> None:
        """Hold ``item`` until ``origin``'s robots.txt is in, counted for its host (the
        unparking allowance reads that count: :meth:`Unparking._robots_waiting`)."""
        self._robots_wait.setdefault(origin, []).append(item)
        self._waiting += 1
        self._robots_waits_by_host[origin_host(origin)] += 1

    def _robots_waits_end(self, origin: str) -> list[Any]:
        """The items held for ``origin``'s robots.txt, no longer held."""
        items = self._robots_wait.pop(origin, [])
        if items:
            self._waiting -= len(items)
            name = origin_host(origin)
            left = self._robots_waits_by_host[name] - len(items)
            if left > 0:
                self._robots_waits_by_host[name] = left
            else:
                self._robots_waits_by_host.pop(name, None)
        return items

    def _note_crawl_delay(self, name: str, origin: str, cached: Any, *, fetched: bool = False) -> bool:
        """Take ``origin``'s Crawl-delay into its host's tau_h, once per origin (and again
        after each fetch of its robots.txt). A host name can be served by several origins
        (http and https, other ports), each with its own robots.txt; they reach the same
        server, so the host keeps the largest delay any of them asks for.

        True when the origin asks for more than IRL_CRAWL_DELAY_MAX and such origins are
        skipped (IRL_CRAWL_DELAY_OVER_MAX = "skip"): its URLs are to be refused, and its
        delay is not taken (the host's other origins keep their pace)."""
        host = self.polite.hosts.get(name)
        if host is None:
            return self._crawl_delay_too_long(cached.crawl_delay(self._default_ua()))
        if origin in host.delay_origins and not fetched:
            return origin in host.slow_origins
        if origin not in host.delay_origins:
            host.delay_origins = (*host.delay_origins, origin)
        delay = cached.crawl_delay(self._default_ua())
        if self._crawl_delay_too_long(delay):
            if origin not in host.slow_origins:
                host.slow_origins = (*host.slow_origins, origin)
                self._refuse_queued(host, origin)
            return True
        if origin in host.slow_origins:
            host.slow_origins = tuple(o for o in host.slow_origins if o != origin)
        if delay and delay > self.delays.crawl_delay_max:
            self.counts["crawl_delay_capped"] += 1  # (IRL_CRAWL_DELAY_OVER_MAX "cap")
        if delay and delay > (host.crawl_delay or 0.0):
            host.crawl_delay = delay
            self._apply_budget(host, self._budget_of(host))
        return False

    def _crawl_delay_too_long(self, delay: float | None) -> bool:
        return bool(self.skip_long_crawl_delay and delay and delay > self.delays.crawl_delay_max)

    def _refuse_queued(self, host: Host, origin: str) -> None:
        """A re-fetched robots.txt now asks for too long a Crawl-delay: the URLs of that
        origin already in the host's queue are refused too (none are, the first time)."""
        if not host.queue:
            return

        def other_origin(item: Any) -> bool:
            return isinstance(item, RobotsMarker) or origin_of(url_parts(url_of(item))) != origin

        self._route_each(host.name, self.polite.filter(host.name, other_origin),
                         self._refuse_for_crawl_delay)  # fmt: skip

    def _route_each(self, host: str, items: list[Any], step: Callable[[str, Any], None]) -> None:
        """``step(host, item)`` for each of ``items``, which have left every queue: an
        error costs only its own item (:meth:`_routing_failed`)."""
        for item in items:
            try:
                step(host, item)
            except Exception as exc:
                self._routing_failed(item, exc)

    def _refuse_for_crawl_delay(self, host: str, item: Any) -> None:
        """Refuse ``item``: its origin's Crawl-delay is above IRL_CRAWL_DELAY_MAX. A
        request that asks to skip robots.txt (``dont_obey_robotstxt``) is queued anyway."""
        request = item if isinstance(item, Request) else self._decode_or_drop(item, take=False)
        if request is None:
            return
        if request.meta.get("dont_obey_robotstxt"):
            self.counts["robots_bypassed_by_meta"] += 1
            self._push_or_park(host, item)
            return
        self.counts["crawl_delay_refused"] += 1
        self._tell_slow_origin(request.url)
        self._refuse(item, request, CRAWL_DELAY_TOO_LONG)

    def _tell_slow_origin(self, url: str) -> None:
        """Say at INFO, once per origin for the first few, why its pages are refused: each
        refusal is only a DEBUG line, and a crawl of one such site fetched nothing with no
        word why (a user probe, 2026-11-28)."""
        origin = origin_of(url_parts(url))
        last = _first_few(self._told_slow_origins, origin) if origin else None
        if last is None:
            return
        # a look that serves no request: not a robots.txt cache hit or miss
        cached = self.robots.cache.get(origin, count=False) if self.robots is not None else None
        delay = cached.crawl_delay(self._default_ua()) if cached is not None else None
        logger.info(
            "%(origin)s asks for a Crawl-delay of %(delay)s s in its robots.txt, above "
            "IRL_CRAWL_DELAY_MAX (%(max)g s): its pages are refused "
            "(IRL_CRAWL_DELAY_OVER_MAX = 'cap' would crawl them at the maximum)%(more)s",
            {"origin": origin, "delay": "an unknown" if delay is None else f"{delay:g}",
             "max": self.delays.crawl_delay_max,
             "more": " (further origins refused so are not logged)" if last else ""},
            extra={"spider": self.spider},
        )  # fmt: skip

    def _cached_crawl_delay(self, url: str) -> float | None:
        """Crawl-delay of the URL's origin if its robots.txt is cached (a host met again).
        None for an origin whose URLs are refused for asking too much (its delay must not
        slow the host's other origins)."""
        if self.robots is None:
            return None
        origin = origin_of(url_parts(url))
        cached = self.robots.cache.get(origin) if origin else None
        if cached is None:
            return None
        delay = cached.crawl_delay(self._default_ua())
        return None if self._crawl_delay_too_long(delay) else delay

    def _obey(self, cached: Any, item: Any, url: str, host: str, *, front: bool = False) -> None:
        """Queue ``item`` if the rules allow it; ``front``: it was due already (handed out
        when its robots.txt turned out expired), so it goes first, unparked."""
        user_agent = (
            self.robots.user_agent(item)  # type: ignore[union-attr]
            if isinstance(item, Request)
            else self._default_ua()
        )
        if cached.allowed(url, user_agent):
            self._queue_allowed(host, item, front=front)
            return
        # a look only: a held or queued record keeps its live request (scrapy shell's)
        request = item if isinstance(item, Request) else self._decode_or_drop(item, take=False)
        if request is None:
            return
        if cached.record.kind == RobotsKind.DISALLOW_ALL and (
            cached.record.failures <= self.robots_retries
        ) and not (isinstance(item, Held) and request.meta.get("dont_obey_robotstxt")):
            self._hold_for_robots(cached.record, item, host)
            return
        if isinstance(item, Held) and self._allowed_anyway(cached, request, url):
            self._queue_allowed(host, item, front=front)
            return
        unreachable = cached.record.kind == RobotsKind.DISALLOW_ALL
        self._refuse(item, request, UNREACHABLE if unreachable else "forbidden")

    def _queue_allowed(self, host: str, item: Any, *, front: bool) -> None:
        if front:
            self.polite.push(host, item, front=True)
        else:
            self._push_or_park(host, item)

    def _decode_or_drop(self, item: Any, *, take: bool = True) -> Request | None:
        """The request of a queued record that leaves the heaps' path (refused by robots.txt,
        or of a dead name); None, dropped and counted, if it does not decode. Only such
        records are unpickled here, so the common case costs nothing. ``take=False``: the
        record may stay queued, so its live request stays for its hand-out
        (:meth:`_request_of`)."""
        try:
            return self._request_of(item.record, take=take)
        except ValueError as exc:
            self.counts["undecodable_dropped"] += 1
            logger.error("Dropping a queued request: %(exc)s", {"exc": exc},
                         extra={"spider": self.spider})  # fmt: skip
            self._release(item)
            return None

    def _allowed_anyway(self, cached: Any, request: Request, url: str) -> bool:
        """A queued record the default user agent may not fetch: its request may still
        ask to skip robots.txt (``dont_obey_robotstxt``, as RobotsTxtMiddleware honours
        it) or carry a User-Agent the rules allow."""
        if request.meta.get("dont_obey_robotstxt"):
            self.counts["robots_bypassed_by_meta"] += 1
            return True
        return bool(cached.allowed(url, self.robots.user_agent(request)))  # type: ignore[union-attr]

    def _refuse(self, item: Any, request: Request, verdict: str) -> None:
        """robots.txt forbids ``request`` (or stayed unreachable past its retries): hand it
        out at once, outside the heaps, marked (``REFUSED_META``), so that
        RobotsCacheMiddleware fails it with the ``IgnoreRequest`` of Scrapy's own robots
        middleware and the spider's errback sees it. Nothing reaches the server; the
        middleware counts it (``robotstxt/forbidden``, ``irl_robots/unreachable_dropped``).
        Dropped here instead, such requests left no trace but a count."""
        request.meta[REFUSED_META] = verdict
        self.counts["robots_refused_handed_out"] += 1
        self._hand_out_now(item, request)

    def _hand_out_now(self, item: Any, request: Request) -> None:
        """``item`` leaves the frontier when its ``request`` goes to the engine, at the next
        ``next_request``, outside the heaps, for a downloader middleware to fail (it
        reaches no server)."""
        self._queue_direct(request, item)
        self._wake_engine()

    def _hold_for_robots(self, record: Any, item: Any, host: str) -> None:
        """robots.txt is unreachable but will be asked again: keep the URL until then.

        RFC 9309 forbids crawling meanwhile, not remembering: a 503 or a timeout on one
        fetch must not cost the origin its URLs. BEAST records are parked on disk until
        the back-off is over (then they wait in Q_R for the re-fetch; until 2026-11-27
        they came back only with the next unpark, up to IRL_RAM_BACKLOG_SECONDS late);
        other requests wait in RAM for the back-off. After
        IRL_ROBOTS_UNREACHABLE_RETRIES failed re-fetches the URLs are dropped, so an
        origin that stays down cannot keep a crawl open for hours of back-off.
        """
        wait = record.expires_at - self.robots.clock()  # type: ignore[union-attr]
        if record.checked_at < PROCESS_STARTED and host not in self._told_earlier_failures:
            self._tell_earlier_failure(host, record, wait)
        self._wait_for_retry(host, [item], wait, "robots")

    def _tell_earlier_failure(self, host: str, record: Any, wait: float) -> None:
        """A robots.txt failure an earlier run stored holds this run's URLs with no fetch
        of its own to log: a new user's second crawl fetched nothing for its whole 40 s
        and said nothing why (a probe, 2026-11-28). Said once per host, for the first few."""
        last = _first_few(self._told_earlier_failures, host)
        if last is None:
            return
        logger.info(
            "%(host)s: its robots.txt was unreachable when an earlier run last asked "
            "(%(n)d failures in a row, kept in the host store): its URLs wait for the next "
            "try in %(wait).0f s%(more)s",
            {"host": host, "n": record.failures, "wait": max(0.0, wait),
             "more": " (further hosts held so are not logged)" if last else ""},
            extra={"spider": self.spider},
        )  # fmt: skip

    def _default_ua(self) -> str:
        assert self.robots is not None
        return self.robots.user_agent(Request("http://example.invalid/"))  # type: ignore[return-value]

    def _fetch_robots(self, host: Host, marker: RobotsMarker, *, renew: bool = False) -> None:
        """Fetch an origin's robots.txt (RobotsRequested); the host counts as busy meanwhile.

        ``renew``: its record is about to expire (see :meth:`_stale_robots`); fetched even
        though it is fresh for a moment more, or the middleware would fetch it right
        after, outside the heaps."""
        assert self.robots is not None
        probe = Request(marker.origin + "/",
                        meta={"dont_obey_robotstxt": False, **(host.robots_meta or {})})  # fmt: skip
        self._robots_hosts[marker.origin + "/robots.txt"] = host
        self._robots_holds[marker.origin] = host
        cached = self.robots.cache.get(marker.origin) if renew else None
        fresh_for = robots_margin(cached.record) if cached is not None else 0.0
        d = deferred_from_coro(self.robots.robot_parser(probe, fresh_for=fresh_for))
        d.addBoth(self._robots_done, host, marker.origin)
        d.addErrback(self._log_failure, f"the end of the robots.txt fetch of {marker.origin}")

    def _robots_done(self, result: Any, host: Host, origin: str) -> None:
        self._robots_fetching.discard(origin)
        self._robots_hosts.pop(origin + "/robots.txt", None)
        now = self.clock()
        for hop in [h for h in self._hop_claims.values() if h.origin == origin]:
            # Refused before the downloader (an offsite filter): no request_left_downloader.
            self.counts["robots_hops_released_at_fetch_end"] += 1
            self._release_hop(hop, now)
        self._robots_holds.pop(origin, None)
        if self._lent(origin) != (False, False):
            # Another fetch's hop is on the wire under this hold (a wait-for cycle): the
            # host stays held until that hop is over (_release_hop), or a page could join it.
            self.counts["robots_fetch_ends_held_for_hops"] += 1
            self._robots_ends_held[origin] = host
        else:
            self._host_finished(host, now, count_for_host=False)
        items = self._robots_waits_end(origin)
        if self._closed:
            return
        cached = self.robots.cache.get(origin) if self.robots is not None else None
        if cached is None:  # fetch ignored or failed oddly: no rules to apply
            verdict = self._push_or_park
        elif self._note_crawl_delay(host.name, origin, cached, fetched=True):
            verdict = self._refuse_for_crawl_delay
        else:
            def verdict(name: str, item: Any) -> None:
                self._obey(cached, item, url_of(item), name, front=self._robots_refetched(item))
        self._route_each(host.name, items, verdict)
        self._wake_engine()

    def _robots_check(self, item: Any) -> tuple[str, CachedRobots] | None:
        """The origin of a queued item and its cached robots.txt (looked up once per
        hand-out); None when robots.txt does not apply (no robots middleware, a request
        that skips it, no origin) or was never stored (its fetch ignored, e.g. by an
        offsite filter: the middleware decides)."""
        if self.robots is None or (
            isinstance(item, Request) and item.meta.get("dont_obey_robotstxt")
        ):
            return None
        origin = origin_of(url_parts(url_of(item)))
        if origin is None:
            return None
        cached = self.robots.cache.get(origin)
        return None if cached is None else (origin, cached)

    def _stale_robots(self, item: Any, checked: tuple[str, CachedRobots] | None) -> str | None:
        """The origin of a queued item whose robots.txt is no longer fresh (or is about to
        expire: the request reaches RobotsCacheMiddleware a little after its hand-out),
        None when its rules are fresh, do not apply, are being fetched, or were renewed
        for this item already (a TTL shorter than the host's wait must not loop)."""
        if checked is None or self._robots_refetched(item):
            return None
        origin, cached = checked
        if origin in self._robots_fetching:
            return None
        record = cached.record
        now = self.robots.clock()  # type: ignore[union-attr]
        return None if record.is_fresh(now + robots_margin(record)) else origin

    def _robots_refetched(self, item: Any) -> bool:
        """Whether ``item``'s robots.txt was renewed in its host's turn already."""
        if isinstance(item, Held):
            return item.robots_refetched
        return isinstance(item, Request) and item in self._robots_renewed

    def _mark_robots_refetched(self, item: Any) -> None:
        if isinstance(item, Held):
            item.robots_refetched = True
        else:
            self._robots_renewed.add(item)

    def _mark_robots_checked(
        self, request: Request, item: Any, checked: tuple[str, CachedRobots] | None
    ) -> None:
        """Tell RobotsCacheMiddleware (``CHECKED_META``) that this hand-out was checked
        against its origin's cached robots.txt: fresh now, or fetched in this host's turn
        for it. The middleware then judges it by that record even if it expires before
        the request gets there, instead of fetching robots.txt outside the heaps with the
        page right behind it (a TTL shorter than the wait after the renewal). A flag the
        request brought from an earlier hand-out (retries and redirects copy meta) is
        dropped first: it vouched for another check, perhaps of another origin."""
        request.meta.pop(CHECKED_META, None)
        if checked is None or request.meta.get("dont_obey_robotstxt"):
            return
        origin, cached = checked
        now = self.robots.clock()  # type: ignore[union-attr]
        if not cached.record.is_fresh(now):
            if not self._robots_refetched(item):
                return  # a fetch of it is in flight: the middleware waits for that one
            # Renewed in the host's turn, expired again while the URL waited its turn
            # (IRL_ROBOTS_TTL shorter than that wait): judged by the renewed rules.
            self.counts["robots_expired_again_in_queue"] += 1
        request.meta[CHECKED_META] = (origin, now + self.handout_timeout)


def _first_few(told: set[str], key: str) -> bool | None:
    """Whether to name ``key`` in a once-per-key INFO line of which only the first
    EARLIER_FAILURES_TOLD are written (the set stays bounded): None if it was named
    already or the limit is reached; else it is added, and True means it is the last."""
    if key in told or len(told) >= EARLIER_FAILURES_TOLD:
        return None
    told.add(key)
    return len(told) == EARLIER_FAILURES_TOLD
