"""``PoliteHTTP11DownloadHandler``: Scrapy's HTTP/1.1 handler without Twisted's silent re-send.

Twisted's connection pool re-sends a bodiless GET/HEAD at once, on a new connection, when
it fails on a reused keep-alive connection before any response byte came back
(``HTTPConnectionPool.retryAutomatically``). The scheduler never sees that second request:
a server that read the first one and then dropped the connection gets the same URL twice
within milliseconds, closer than tau_h (and tau_s). With the re-send off the download fails
with Scrapy's ``DownloadFailedError`` (in ``RETRY_EXCEPTIONS``), and RetryMiddleware's retry
goes back through the scheduler, which times it like any other request. A connection
is pooled only if HTTP allows another request on it (an HTTP/1.0 server closes after each
response unless it says ``keep-alive``), so the re-send is not needed for the common case
of a server that closes as it should.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler
from scrapy.exceptions import DownloadFailedError
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.web.client import HTTPConnectionPool, RequestTransmissionFailed

from scrapy_irl import config
from scrapy_irl.hosts.dnsfail import raise_if_dns_failed
from scrapy_irl.hosts.names import canonical_host
from scrapy_irl.hosts.pinning import pinned_address
from scrapy_irl.hosts.spacing import SendPlan, SendSpacing, spaced_connections

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.settings import BaseSettings

#: The handler's import path, as the add-on installs it for ``http`` and ``https``.
PATH = f"{__name__}.PoliteHTTP11DownloadHandler"
#: The schemes it serves.
HTTP_SCHEMES = ("http", "https")


class PoliteHTTP11DownloadHandler(HTTP11DownloadHandler):
    """Every HTTP request that reaches a server was handed out by the scheduler."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        pool = getattr(self, "_pool", None)
        if not isinstance(pool, HTTPConnectionPool):  # Scrapy moved it: say so, loudly
            raise TypeError(f"{type(self).__name__}: Scrapy's HTTP11DownloadHandler has no "
                            f"HTTPConnectionPool in _pool (got {type(pool).__name__})")  # fmt: skip
        pool.retryAutomatically = False
        pool._putConnection = _pooling_only_reusable(pool._putConnection)  # type: ignore[method-assign]
        pool.getConnection = _reusing_only_pinned(  # type: ignore[method-assign]
            pool, pool.getConnection,
            lambda: crawler.stats.inc_value("irl_dns/moved_connections_closed"),
        )
        self.spacing, self.ip_gap, self.host_gap = wire_spacing(crawler, self._sent_before_restart)
        self.plan: SendPlan | None = None
        if self.spacing is not None:
            from twisted.internet import reactor

            self._crawler = crawler
            self._reactor = reactor
            self.plan = SendPlan(reactor, recall=self._sent_before_restart)
            self.crawl_delay_max = config.getfloat(crawler.settings, "IRL_CRAWL_DELAY_MAX", minimum=0)
            self.margin = config.getfloat(crawler.settings, "IRL_POLITENESS_MARGIN", minimum=0)
            pool.getConnection = spaced_connections(  # type: ignore[method-assign]
                pool.getConnection, self.spacing, reactor,
                keys=wire_keys(self.ip_gap, self.host_gap),
                waited=lambda wait: _count_spacing_wait(crawler, wait),
                written=self._wire_written,
            )
        # Twisted keeps an idle connection 240 s. A server closes its own sooner (Apache
        # and Node after 5 s, nginx 75 s), and a request written as it closes fails
        # unanswered (a retry, and the host backed off as if down). At politeness
        # delays most reuses come seconds later: closing first avoids the race.
        pool.cachedConnectionTimeout = keepalive_max_idle(crawler.settings)

    async def download_request(self, request: Request) -> Response:
        raise_if_dns_failed(request)  # a dead name: failed here, as Scrapy's handler would
        if self.plan is not None:
            await self._wait_for_turn(request)
        with retryable_transmission_failure():
            return await super().download_request(request)

    async def _wait_for_turn(self, request: Request) -> None:
        """Wait in the :class:`SendPlan` (module :mod:`scrapy_irl.hosts.spacing`) until
        ``request``'s host and server may be sent to: before a connection is asked for
        and before ``DOWNLOAD_TIMEOUT`` runs. Requests that bypass the heaps
        (``engine.download``: FilesPipeline, ImagesPipeline) queue here, their origin's
        Crawl-delay included; a request the heaps timed goes ahead of them and waits at
        most what the last starts of its host and server ask."""
        assert self.plan is not None
        keys = plan_keys(request, self.ip_gap, max(self.host_gap, self._crawl_delay(request)))
        if keys is None:
            return
        waiting = self.plan.wait(keys, front=self._timed_by_heaps(request))
        if waiting is None:
            return
        stats = self._crawler.stats
        stats.inc_value("irl_hosts/send_plan_waits")
        since = self._reactor.seconds()
        await maybe_deferred_to_future(waiting)
        stats.max_value("irl_hosts/send_plan_longest_wait", round(self._reactor.seconds() - since, 3))

    def _wire_written(self, keys: list[tuple[str, float]], wait: float) -> None:
        """A write booked at the wire, ``wait`` s from now: logged by the scheduler (a
        JOBDIR's politeness log), so a restart waits its host's and IP's delays from it.
        The heaps log their own requests too, but not ``engine.download``'s (files):
        before 2026-11-29 a file host's next request after a restart could go at once."""
        names = dict(key.split(" ", 1) for key, _gap in keys)
        if "host" in names:
            self._scheduler_call("wire_started", names["host"], names.get("ip"), wait)

    def _sent_before_restart(self, key: str) -> float | None:
        """The send plan's and the wire check's recall: the last run's last start of a
        host or IP key, as the scheduler's politeness log has it (a JOBDIR crawl
        restarted after a stop)."""
        kind, _, name = key.partition(" ")
        return self._scheduler_call("sent_before", **{"host" if kind == "host" else "ip": name})

    def _scheduler_call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """``method`` of the crawl's scheduler, if it has one (None otherwise)."""
        found = getattr(getattr(self._crawler.engine, "scheduler", None), method, None)
        return found(*args, **kwargs) if found is not None else None

    def _timed_by_heaps(self, request: Request) -> bool:
        return bool(self._scheduler_call("timed_by_heaps", request))

    def _crawl_delay(self, request: Request) -> float:
        """The Crawl-delay the request's origin asks for, up to IRL_CRAWL_DELAY_MAX, plus
        IRL_POLITENESS_MARGIN as the heaps add it (0 if none is known or robots.txt is not
        obeyed). Without the margin a file went 1.992 s after its host's robots.txt at a
        Crawl-delay of 2 s: the plan times the hand-over, the server sees the write."""
        from scrapy_irl.robots.middleware import robots_for  # the robots package imports this one

        robots = robots_for(self._crawler)
        if robots is None or request.meta.get("dont_obey_robotstxt"):
            return 0.0
        delay = robots.crawl_delay(request)
        return min(delay, self.crawl_delay_max) + self.margin if delay and delay > 0 else 0.0


def irl_scheduled(crawler: Crawler) -> bool:
    """Whether the crawl's ``SCHEDULER`` is the IRL scheduler (or a subclass)."""
    from scrapy.utils.misc import load_object

    from scrapy_irl.scheduler import IrlScheduler

    try:
        scheduler = load_object(crawler.settings["SCHEDULER"])
    except (ImportError, NameError, ValueError, TypeError):  # the engine reports it
        return False
    return isinstance(scheduler, type) and issubclass(scheduler, IrlScheduler)


def wire_spacing(
    crawler: Crawler, recall: Callable[[str], float | None] | None = None
) -> tuple[SendSpacing | None, float, float]:
    """The wire check of tau_s0 and tau_h0 (:mod:`scrapy_irl.hosts.spacing`) and its
    IP and host gaps: only when the IRL scheduler times the crawl (a project that kept
    this handler under another scheduler gets no pacing it did not ask for). The host gap
    is 0 with ``IRL_ROBOTS_HOST_DELAY`` off, where the heaps send a host's first page
    tau_s after its robots.txt, as IRLbot did."""
    if not irl_scheduled(crawler):
        return None, 0.0, 0.0
    settings = crawler.settings
    host_gap = 0.0
    if config.getbool(settings, "IRL_ROBOTS_HOST_DELAY"):
        host_gap = config.getfloat(settings, "IRL_HOST_DELAY_MIN", minimum=0)
    ip_gap = config.getfloat(settings, "IRL_IP_DELAY_MIN", minimum=0)
    spacing = SendSpacing(recall=recall) if max(host_gap, ip_gap) > 0 else None
    return spacing, ip_gap, host_gap


def plan_keys(request: Request, ip_gap: float, host_gap: float) -> list[tuple[str, float]] | None:
    """What ``request``'s start is booked under in the :class:`SendPlan`: its host name
    as the heaps spell it, and the address pinned for it (none yet: the wire check books
    the peer). Through a proxy, the host name only: the server's address is not known
    (the peer is the proxy), but the host's spacing still holds; until 2026-11-29 such a
    request was not booked at all, and FilesPipeline's files through a proxy reached one
    host 1 ms apart (a probe)."""
    name = urlparse_cached(request).hostname
    if not name:
        return None
    if request.meta.get("proxy"):
        return _booked_under(name, None, ip_gap, host_gap)
    return _booked_under(name, pinned_address(name), ip_gap, host_gap)


def _booked_under(name: str, address: str | None, ip_gap: float,
                  host_gap: float) -> list[tuple[str, float]]:  # fmt: skip
    """The spacing keys of a request to host ``name`` at ``address`` (if known)."""
    keys = [(f"host {canonical_host(name.strip('[]'))}", host_gap)]
    if address is not None:
        keys.append((f"ip {address}", ip_gap))
    return keys


def wire_keys(ip_gap: float, host_gap: float) -> Callable[[Any, Any], list[tuple[str, float]] | None]:
    """What a write on ``connection`` for pool ``key`` is booked under: its peer address
    (tau_s0) and its host name as the heaps spell it (tau_h0; ``http`` and ``https`` are
    one host, as in the heaps). A proxy's key is not booked (see :func:`_pinned_for`)."""

    def keys(key: Any, connection: Any) -> list[tuple[str, float]] | None:
        if not _direct_key(key):
            return None
        return _booked_under(key[1].decode("ascii", "replace"), _peer(connection), ip_gap, host_gap)

    return keys


def _count_spacing_wait(crawler: Crawler, wait: float) -> None:
    stats = crawler.stats
    stats.inc_value("irl_hosts/wire_spacing_waits")
    stats.max_value("irl_hosts/wire_spacing_longest_wait", round(wait, 3))


def keepalive_max_idle(settings: BaseSettings) -> float:
    """``IRL_KEEPALIVE_MAX_IDLE``, checked. Scrapy builds download handlers at the first
    request of their scheme, so the scheduler also reads it when it is created: a bad
    value stops the crawl at start-up instead of failing every request."""
    return config.getfloat(settings, "IRL_KEEPALIVE_MAX_IDLE", above=0)


def _pooling_only_reusable(put: Callable[[Any, Any], None]) -> Callable[[Any, Any], None]:
    """The pool's ``_putConnection``, closing a connection the server will close anyway.

    Without the re-send, a request written on a connection the server is closing fails
    (``ResponseNeverReceived``) and costs a retry, or the page once the retries run out.
    Twisted pools every connection without ``Connection: close``, including those of an
    HTTP/1.0 server that closes after each response without saying so (Python's
    ``http.server``, many small servers), so the next request to such a host met a closing
    connection whenever it came at once (seen: 3 of 40 pages lost under load)."""

    def put_if_reusable(key: Any, connection: Any) -> None:
        if reusable(connection):
            put(key, connection)
        else:
            connection.transport.loseConnection()

    return put_if_reusable


def _reusing_only_pinned(pool: HTTPConnectionPool, get: Callable[[Any, Any], Any],
                         closed: Callable[[], None]) -> Callable[[Any, Any], Any]:  # fmt: skip
    """The pool's ``getConnection``, first closing the idle connections of the request's
    key whose peer is not the address its host is pinned to now
    (:func:`scrapy_irl.hosts.pinning.pin_address`, just before the download).

    Twisted pools connections by scheme, host name and port, so after a host's name moved
    (a DNS renewal, a round-robin name answering another address) its requests kept
    going over a kept-alive connection to the old server, for as long as they came
    within :confval:`IRL_KEEPALIVE_MAX_IDLE` of each other, while the heaps timed them on
    the new address: a probe saw all 32 requests of a moved host reach its old server,
    the last 10.5 s after the move, 15 of them within tau_s of that server's other
    hosts. A key without a pinned address (a proxy, an IP literal, no DNS cache) is
    left as it is."""

    def get_connection(key: Any, endpoint: Any) -> Any:
        connections = pool._connections.get(key)
        if connections:
            expected = _pinned_for(key)
            if expected is not None:
                for connection in [c for c in connections if _peer(c) not in (None, expected)]:
                    connections.remove(connection)
                    timer = pool._timeouts.pop(connection, None)
                    if timer is not None and timer.active():
                        timer.cancel()
                    connection.transport.loseConnection()
                    closed()
        return get(key, endpoint)

    return get_connection


def _direct_key(key: Any) -> bool:
    """Is ``key`` a direct connection's ``(scheme, host, port, bind address)``, as
    Scrapy's agent builds it? A proxy's is not (see :func:`_pinned_for`)."""
    return (isinstance(key, tuple) and 3 <= len(key) <= 4 and key[0] in (b"http", b"https")
            and isinstance(key[1], bytes))  # fmt: skip


def _pinned_for(key: Any) -> str | None:
    """The pinned address of a direct connection's key ``(scheme, host, port,
    bind address)``, as Scrapy's agent builds it: None for a proxy's (an HTTP proxy's
    key names the proxy; an HTTPS tunnel's adds the proxy's host, port and credentials,
    and its connection's peer is the proxy). The name is looked up as the DNS middleware
    pinned it: lower case, a trailing dot kept (``rr.test.`` is pinned apart from
    ``rr.test``, the downloader resolving each spelling on its own)."""
    if not _direct_key(key):
        return None
    return pinned_address(key[1].decode("ascii", "replace").lower())


def _peer(connection: Any) -> str | None:
    try:
        return str(connection.transport.getPeer().host)
    except AttributeError:  # no transport, or one without an IP peer: not ours to judge
        return None


def reusable(connection: Any) -> bool:
    """May ``connection`` carry another request, by the last response's version and
    ``Connection`` header (RFC 9112 section 9.3: before HTTP/1.1, only with
    ``keep-alive``)? Read from Twisted's protocol while its parser is still attached (the
    pool is called just before it is detached); without one, Twisted's checks decide."""
    parser = getattr(connection, "_parser", None)
    version = getattr(getattr(parser, "response", None), "version", None)
    if parser is None or not isinstance(version, tuple) or len(version) != 3:
        return True
    options = {
        token.strip().lower()
        for value in parser.connHeaders.getRawHeaders(b"connection", ())
        for token in value.split(b",")
    }
    if b"close" in options:
        return False
    return tuple(version[1:]) >= (1, 1) or b"keep-alive" in options


@contextmanager
def retryable_transmission_failure() -> Iterator[None]:
    """``RequestTransmissionFailed``, which Twisted re-sent too, as the
    ``DownloadFailedError`` RetryMiddleware retries (Scrapy maps ``ResponseNeverReceived``
    itself). It hardly reaches a bodiless request (written at once, on a connection the
    pool checked was idle); should it, its retry must not be lost for want of a name
    Scrapy knows. The third, ``RequestNotSent``, cannot: it means a connection that was
    not idle, and the pool hands out idle ones only."""
    try:
        yield
    except RequestTransmissionFailed as exc:
        raise DownloadFailedError(f"{type(exc).__name__}: {exc}") from exc


def _http_handlers(settings: BaseSettings) -> Iterator[tuple[str, Any, Any]]:
    """(scheme, setting, class or None if it does not load) of each ``http``/``https``
    handler in use, as Scrapy merges them (``DOWNLOAD_HANDLERS`` over
    ``DOWNLOAD_HANDLERS_BASE``); a scheme switched off (``None``) is left out."""
    merged = settings.getwithbase("DOWNLOAD_HANDLERS")
    for scheme in HTTP_SCHEMES:
        handler = merged.get(scheme)
        if handler is not None:
            yield scheme, handler, _handler_class(handler)


def _handler_class(handler: Any) -> type | None:
    """The class a ``DOWNLOAD_HANDLERS`` entry names, or None if it does not load."""
    from scrapy.utils.misc import load_object

    try:
        cls = load_object(handler) if isinstance(handler, str) else handler
    except (ImportError, NameError, ValueError):  # the downloader reports it; not ours
        return None
    return cls if isinstance(cls, type) else None


def polite_schemes(settings: BaseSettings) -> frozenset[str]:
    """Schemes whose URLs go through the politeness heaps: ``http`` and ``https``, and
    ``ftp`` when :class:`~scrapy_irl.hosts.ftp.PoliteFTPDownloadHandler` (or a subclass)
    serves it. A host is served again only once its request has left the downloader, so
    a scheme joins the heaps only with a handler known to end every download: Scrapy's
    own FTP handler has no timeout (one stalled transfer held its host, and its IP, for
    the rest of the crawl), and a project's own handler for another scheme is unknown."""
    from scrapy_irl.hosts.ftp import FTP_SCHEME, PoliteFTPDownloadHandler

    cls = _handler_class(settings.getwithbase("DOWNLOAD_HANDLERS").get(FTP_SCHEME))
    timed = cls is not None and issubclass(cls, PoliteFTPDownloadHandler)
    return frozenset(HTTP_SCHEMES) | ({FTP_SCHEME} if timed else frozenset())


def handler_fails_marked(settings: BaseSettings) -> frozenset[str]:
    """Schemes served by the add-on's handlers (or subclasses), which fail a request
    ``HostDnsMiddleware`` marked for a dead name (:mod:`scrapy_irl.hosts.dnsfail`)."""
    from scrapy_irl.hosts.ftp import FTP_SCHEME, PoliteFTPDownloadHandler

    ours = {scheme for scheme, _, cls in _http_handlers(settings)
            if cls is not None and issubclass(cls, PoliteHTTP11DownloadHandler)}  # fmt: skip
    ftp = _handler_class(settings.getwithbase("DOWNLOAD_HANDLERS").get(FTP_SCHEME))
    if ftp is not None and issubclass(ftp, PoliteFTPDownloadHandler):
        ours.add(FTP_SCHEME)
    return frozenset(ours)


def twisted_http_schemes(settings: BaseSettings) -> frozenset[str]:
    """The ``http``/``https`` schemes downloaded by Scrapy's Twisted HTTP/1.1 handler (or
    ours, built on it): the ones whose host names Twisted judges
    (:func:`scrapy_irl.hosts.names.refused_by_twisted`). A browser or other handler may
    fetch what Twisted refuses, so its URLs keep the usual path."""
    return frozenset(scheme for scheme, _, cls in _http_handlers(settings)
                     if cls is not None and issubclass(cls, HTTP11DownloadHandler))  # fmt: skip


def other_http_handlers(settings: BaseSettings) -> dict[str, str]:
    """The ``http``/``https`` handlers in use that are not ours (scheme: import path)."""
    from scrapy.utils.python import global_object_name

    return {
        scheme: handler if isinstance(handler, str) else global_object_name(handler)
        for scheme, handler, cls in _http_handlers(settings)
        if not (cls is not None and issubclass(cls, PoliteHTTP11DownloadHandler))
    }
