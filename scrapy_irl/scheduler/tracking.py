"""When a handed-out request is over, so that its host (and IP) may be served again.

Scrapy signals when a request reaches and leaves the downloader; a request that never
reaches it (a middleware refused it, a cached response) ends without a signal and is
found missing from the engine's in-progress set. The next request to the host is timed
from the response's arrival, which is certainly after its bytes reached the server."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from scrapy.http import Request
from scrapy.utils.httpobj import urlparse_cached

from scrapy_irl.hosts.download import HTTP_SCHEMES
from scrapy_irl.scheduler.backoff import Backoff
from scrapy_irl.scheduler.items import Handout
from scrapy_irl.scheduler.politeness import Host

if TYPE_CHECKING:
    from scrapy import Spider

logger = logging.getLogger(__name__)


def http_answer(request: Request) -> bool:
    """Is the request's status an HTTP server's? Scrapy's FTP handler maps every failed
    FTP command but 550 (no such file) to 503: not "come back later"."""
    return urlparse_cached(request).scheme in HTTP_SCHEMES


class HandoutTracking:
    """IrlScheduler's completion tracking (a mixin: the state is IrlScheduler's)."""

    def timed_by_heaps(self, request: Request) -> bool:
        """Whether the heaps timed ``request``: handed out by this scheduler, or its
        robots.txt fetch or one of that fetch's redirect hops. The HTTP handler's send
        plan lets these go ahead of requests that bypass the heaps (``engine.download``)."""
        if id(request) in self._handed or (self._expired and id(request) in self._expired):
            return True
        return bool(request.meta.get("dont_obey_robotstxt")
                    and (request.url in self._robots_hosts or request.url in self._hop_claims))  # fmt: skip

    def wire_started(self, host: str, ip: str | None, wait: float = 0.0) -> None:
        """The HTTP handler booked a write to ``host`` on ``ip`` ``wait`` s from now (any
        request: the heaps do not see ``engine.download``'s): logged in a JOBDIR's
        politeness log, so a restart waits its host's and IP's delays from it."""
        if self.memory is not None:
            self.memory.wire_started(host, ip, wait)

    def sent_before(self, *, host: str | None = None, ip: str | None = None) -> float | None:
        """The last run's last start of ``host`` (or ``ip``) within the longest delay, in
        this scheduler's clock (``time.monotonic``, the send plan's), or None."""
        if self.memory is None:
            return None
        return self.memory.sent_before(host=host, ip=ip)

    def _reached(self, request: Request, spider: Spider | None = None) -> None:
        # A request this scheduler handed out first: a project's own request may carry
        # dont_obey_robotstxt too, and must free its host like any other.
        entry = self._handed.get(id(request))
        if entry is not None:
            entry.reached = True
            self.polite.restarted(entry.host, self.clock())
            return
        late = self._expired.pop(id(request), None) if self._expired else None
        if late is not None and late[0].request is request:
            # freed by the timeout, it goes out now: the host's and IP's next requests
            # wait their delays from now
            self.counts["handouts_reached_after_timeout"] += 1
            self.polite.restarted(late[0].host, self.clock())
            return
        if not request.meta.get("dont_obey_robotstxt"):
            return
        hop = self._hop_claims.get(request.url)
        if hop is not None:  # a redirect hop of our robots.txt fetch starts now
            hop.reached = True
            self.polite.restarted(hop.host, self.clock(), host_too=False, hop=True, ip=hop.ip)
            return
        robots_host = self._robots_hosts.get(request.url)
        if robots_host is not None:  # our robots.txt fetch starts now
            self.polite.restarted(robots_host, self.clock(), host_too=False,
                                  hop=self.robots_host_delay)  # fmt: skip

    def _downloaded(self, response: Any, request: Request, spider: Spider | None = None) -> None:
        """The server's answer to a page this scheduler handed out: a 429 or 503
        (``IRL_BACKOFF_HTTP_CODES``) makes its host wait (:mod:`scrapy_irl.scheduler.backoff`),
        any other answer (an FTP one too, whatever status Scrapy's FTP handler gave it)
        ends its run of them. Sent before request_left_downloader frees
        the host, so the host re-enters its heap with the wait already set."""
        entry = self._handed.get(id(request))
        if entry is not None:
            entry.answered = True
            host = entry.host
        else:
            # Our robots.txt fetch (or one of its redirect hops): a 429 or 503 there is
            # the same server asking for less load. Before 2026-11-28 only pages backed
            # off: with a recent copy of the rules in force, a probe's host answering
            # robots.txt "503, Retry-After: 60" got a page every 1.1 s meanwhile.
            robots_host = self._robots_fetch_host(request)
            if robots_host is None or not self.backoff.applies(response.status):
                # Only a page's answer ends a run of refusals: a static robots.txt served
                # while the pages are rate-limited reset the doubling at every re-fetch.
                return
            host = robots_host
        if not self.backoff.applies(response.status) or not http_answer(request):
            if host.backoff_streak:
                host.backoff_streak = 0
                if self.memory is not None:  # the run is over, after a kill too
                    self.memory.backed_off(host)
            return
        host.backoff_streak += 1
        wait = self.backoff.wait(host.delay, host.backoff_streak,
                                 response.headers.get(b"Retry-After"), time.time())  # fmt: skip
        if wait.source == "retry_after":
            self.counts["backoff/retry_after"] += 1
        else:
            self.counts["backoff/exponential"] += 1
        if wait.capped:
            self.counts["backoff/retry_after_capped"] += 1
        if wait.unreadable:
            self.counts["backoff/retry_after_unreadable"] += 1
        self._hold_host(host, wait, f"answered {response.status}")

    def _robots_fetch_host(self, request: Request) -> Host | None:
        """The host a request of our robots.txt fetches goes to (the origin's, or a
        redirect hop's target); None for any other request."""
        if not request.meta.get("dont_obey_robotstxt"):
            return None
        hop = self._hop_claims.get(request.url)
        if hop is not None:
            return hop.host  # type: ignore[no-any-return]
        return self._robots_hosts.get(request.url)  # type: ignore[no-any-return]

    def _headers_arrived(self, request: Request, **kwargs: Any) -> None:
        """The server began its answer (Scrapy's HTTP handlers send ``headers_received``):
        a download that fails from here on (``DOWNLOAD_MAXSIZE``, a body cut short or too
        slow) was answered, and its host is not backed off for it."""
        entry = self._handed.get(id(request))
        if entry is not None:
            entry.answered = True

    def _unanswered(self, host: Host) -> None:
        """A page of ``host`` left the downloader before any response header came: a
        timeout, a refused or dropped connection. The server is down or
        drowning; its next request waits longer each time (``IRL_BACKOFF_ON_DOWNLOAD_ERROR``)."""
        if not self.backoff.on_download_error:
            return
        host.backoff_streak += 1
        self.counts["backoff/no_answer"] += 1
        self._hold_host(host, self.backoff.silence(host.delay, host.backoff_streak),
                        "did not answer")  # fmt: skip

    def _hold_host(self, host: Host, wait: Backoff, why: str) -> None:
        """Keep ``host`` waiting ``wait`` from now, in RAM and in the politeness log."""
        host.not_before = max(host.not_before, self.clock() + wait.seconds)
        if self.memory is not None:
            self.memory.backed_off(host)
        longest = self.counts["backoff/longest_wait"]
        self.counts["backoff/longest_wait"] = max(longest, round(wait.seconds))
        logger.debug("%(host)s %(why)s: its next request waits %(s).1f s "
                     "(%(source)s, %(n)d in a row)",
                     {"host": host.name, "why": why, "s": wait.seconds,
                      "source": wait.source, "n": host.backoff_streak},
                     extra={"spider": self.spider})  # fmt: skip

    def _left(self, request: Request, spider: Spider | None = None) -> None:
        entry = self._handed.pop(id(request), None)
        if entry is not None:
            if entry.reached and not entry.answered:
                self._unanswered(entry.host)
            self._correct_start(entry.host, request)
            self._finish(entry)
            return
        if request.meta.get("dont_obey_robotstxt"):
            hop = self._hop_claims.get(request.url)
            if hop is not None:  # its host and IP slot are free, timed from its end
                self._release_hop(hop, self.clock())
                return
            robots_host = self._robots_hosts.pop(request.url, None)
            if robots_host is not None:
                # timed from its end, as pages are (_correct_start); with
                # IRL_ROBOTS_HOST_DELAY the host's pages wait tau_h from then too
                self.polite.restarted(robots_host, self.clock(), host_too=False,
                                      hop=self.robots_host_delay)  # fmt: skip

    def _finish(self, entry: Handout, *, unsent: bool = False) -> None:
        """The request is over: its host (and IP) may be served again once due. One that
        never reached the downloader (a downloader middleware answered it from a cache or
        refused it) touched no server: the start booked for it is given back, so a
        replay from HTTPCACHE is not paced at tau_h (one page per 10 s by default)."""
        self._refresh_budget(entry.host)
        self._host_finished(entry.host, self.clock(), unsent=unsent)
        self._release_after_engine(entry.request, entry.item)  # once its callback ran
        self._wake_engine()

    def _host_finished(self, host: Host, now: float, *, count_for_host: bool = True,
                       unsent: bool = False) -> None:  # fmt: skip
        """Free ``host`` in the heaps and log when its next request may come."""
        if not host.in_flight:
            return
        self.polite.finished(host, now, count_for_host=count_for_host, unsent=unsent)
        if self.memory is not None:
            self.memory.ended(host)
        self._grant_hops()  # a hop may be waiting for this host or its IP

    def _answered(self, response: Any, request: Request, spider: Spider | None = None) -> None:
        """A response that never went through the downloader (a downloader middleware
        answered: HttpCacheMiddleware's cached pages, a mock): no request_left_downloader
        will come, so the host is freed now rather than after IRL_HANDOUT_TIMEOUT.

        Only a cached page (``"cached"`` in its flags, as HttpCacheMiddleware marks it)
        gives its politeness turn back: a middleware may also fetch the page itself (a
        browser, a render service) and answer with what the server sent."""
        entry = self._handed.get(id(request))
        if entry is not None and not entry.reached:
            del self._handed[id(request)]
            self.counts["handouts_answered_by_middleware"] += 1
            self._finish(entry, unsent="cached" in (getattr(response, "flags", None) or ()))

    def _correct_start(self, host: Host, request: Request) -> None:
        """Time the host's and IP's next request from this request's end.

        The moment a request's bytes reached the server is not observable from Scrapy: a
        busy reactor can send well after the hand-out, or after ``request_reached_downloader``.
        The response's arrival is certainly later than the send, so timing the next request
        from it (when it is later than the booked start) keeps every gap at least tau, at
        the cost of adding the response time to the gap. One request per host (and, by
        default, per IP) is in flight, so nothing was handed out in between.
        """
        self.polite.restarted(host, self.clock())

    def _expire_handouts(self, now: float) -> None:
        """Free the hosts of requests that ended without reaching the downloader.

        A downloader middleware that raises (IgnoreRequest from OffsiteMiddleware, any
        error) ends a request with no signal the scheduler could hear. The engine keeps
        every request it is working on in its slot's ``inprogress`` from the moment it
        takes it from ``next_request`` until the request is over, so a hand-out that has
        left that set without reaching the downloader is over (checked every tick).
        IRL_HANDOUT_TIMEOUT remains the bound when the engine's set cannot be read.
        """
        in_progress = self._engine_in_progress()
        for key, (_, when) in list(self._expired.items()):
            if now - when > 10 * self.handout_timeout:  # it will not come: forget it
                del self._expired[key]
        for key, entry in list(self._handed.items()):
            if entry.reached:
                continue
            if in_progress is not None and entry.request not in in_progress:
                # refused or failed in a middleware: it reached no server
                self.counts["handouts_ended_before_download"] += 1
                unsent = True
            elif now - entry.when > self.handout_timeout:
                # still on its way (a slow middleware) or lost: it may yet go out, so
                # its booked start stands, and a late arrival moves it (_reached)
                self.counts["handouts_expired"] += 1
                self._expired[key] = (entry, now)
                unsent = False
            else:
                continue
            del self._handed[key]
            self._finish(entry, unsent=unsent)

    def _engine_in_progress(self) -> Any:
        """The engine's set of requests being worked on (Scrapy's ``_Slot.inprogress``);
        None if there is none to read."""
        try:
            engine = getattr(self.crawler, "engine", None)
        except RuntimeError:  # Scrapy 2.19 raises before the crawl starts
            return None
        slot = getattr(engine, "_slot", None)
        in_progress = getattr(slot, "inprogress", None)
        return in_progress if isinstance(in_progress, set) else None
