"""The add-on's HTTP handler: Twisted's pool does not re-send, failures reach RetryMiddleware."""

from __future__ import annotations

import pytest
from scrapy.exceptions import DownloadFailedError
from scrapy.settings import Settings, default_settings
from scrapy.utils.misc import build_from_crawler, load_object
from scrapy.utils.test import get_crawler
from twisted.internet.error import ConnectionDone
from twisted.python.failure import Failure
from twisted.web.client import RequestTransmissionFailed

from scrapy_irl.hosts.download import (
    PATH,
    PoliteHTTP11DownloadHandler,
    other_http_handlers,
    retryable_transmission_failure,
)

STOCK = "scrapy.core.downloader.handlers.http11.HTTP11DownloadHandler"


def test_the_pool_does_not_resend_but_the_stock_one_does():
    crawler = get_crawler()
    ours = build_from_crawler(PoliteHTTP11DownloadHandler, crawler)
    stock = build_from_crawler(load_object(STOCK), crawler)
    assert ours._pool.retryAutomatically is False
    assert stock._pool.retryAutomatically is True  # what the subclass is for


def test_a_transmission_failure_becomes_an_error_retry_middleware_retries():
    retried = tuple(load_object(e) if isinstance(e, str) else e for e in default_settings.RETRY_EXCEPTIONS)
    with pytest.raises(DownloadFailedError) as caught, retryable_transmission_failure():
        raise RequestTransmissionFailed([Failure(ConnectionDone())])
    assert isinstance(caught.value, retried)
    assert isinstance(caught.value.__cause__, RequestTransmissionFailed)


def test_other_http_handlers_names_what_is_not_ours():
    def settings(handlers: dict) -> Settings:
        return Settings({"DOWNLOAD_HANDLERS": handlers})

    assert other_http_handlers(settings({"http": PATH, "https": PoliteHTTP11DownloadHandler})) == {}
    assert other_http_handlers(settings({})) == {"http": STOCK, "https": STOCK}
    assert other_http_handlers(settings({"http": PATH, "https": None})) == {}  # https off

    class Subclassed(PoliteHTTP11DownloadHandler):
        pass

    assert other_http_handlers(settings({"http": Subclassed, "https": "no.such.Handler"})) == {
        "https": "no.such.Handler"
    }


def test_a_pooled_connection_to_another_address_than_the_pinned_one_is_closed():
    """Twisted keys its pool by scheme, name and port: a host whose name moved kept its
    kept-alive connection to the old server (found by a probe, 2026-11-27)."""
    from types import SimpleNamespace

    from scrapy.resolver import dnscache
    from twisted.internet.task import Clock

    from scrapy_irl.hosts.download import _reusing_only_pinned

    class Connection:
        def __init__(self, peer: str) -> None:
            self.closed = False
            self.transport = SimpleNamespace(getPeer=lambda: SimpleNamespace(host=peer),
                                             loseConnection=self.close)  # fmt: skip

        def close(self) -> None:
            self.closed = True

    clock = Clock()
    old, new, proxied = Connection("127.0.0.2"), Connection("127.0.0.3"), Connection("127.0.0.9")
    key, proxy_key = (b"http", b"moved.test", 80, None), ("http-proxy", b"proxy.test")
    timers = {c: clock.callLater(4, lambda: None) for c in (old, new, proxied)}
    pool = SimpleNamespace(_connections={key: [old, new], proxy_key: [proxied]}, _timeouts=dict(timers))
    asked, closed = [], []
    get = _reusing_only_pinned(pool, lambda k, e: asked.append(k), lambda: closed.append(1))
    saved = dict(dnscache)
    try:
        dnscache["moved.test"] = "127.0.0.3"
        get(key, None)
        get(proxy_key, None)
    finally:
        dnscache.clear()
        dnscache.update(saved)
    assert old.closed and not timers[old].active() and pool._connections[key] == [new]
    assert not new.closed and not proxied.closed and closed == [1]
    assert asked == [key, proxy_key]


def test_the_pinned_address_is_read_as_pinned_and_proxy_tunnels_are_left_alone():
    """``rr.test.`` is pinned apart from ``rr.test`` (a trailing dot kept): read without
    it, a stale ``rr.test`` entry closed the connection to the new server and kept the
    old one. An HTTPS tunnel's peer is the proxy: judged, it was closed before each
    reuse. Both found by review, 2026-11-27."""
    from types import SimpleNamespace

    from scrapy.resolver import dnscache

    from scrapy_irl.hosts.download import _reusing_only_pinned

    def connection(peer: str) -> SimpleNamespace:
        conn = SimpleNamespace(closed=False)
        conn.transport = SimpleNamespace(getPeer=lambda: SimpleNamespace(host=peer),
                                         loseConnection=lambda: setattr(conn, "closed", True))  # fmt: skip
        return conn

    old, new, tunnel = connection("127.0.0.2"), connection("127.0.0.3"), connection("127.0.0.9")
    dotted = (b"http", b"RR.test.", 80, None)
    tunnelled = (b"https", b"rr.test", 443, "proxy.test", 3128, None, None)
    pool = SimpleNamespace(_connections={dotted: [old, new], tunnelled: [tunnel]}, _timeouts={})
    get = _reusing_only_pinned(pool, lambda k, e: None, lambda: None)
    saved = dict(dnscache)
    try:
        dnscache["rr.test."] = "127.0.0.3"
        dnscache["rr.test"] = "127.0.0.2"  # the undotted spelling's own, older answer
        get(dotted, None)
        get(tunnelled, None)
    finally:
        dnscache.clear()
        dnscache.update(saved)
    assert old.closed and not new.closed and pool._connections[dotted] == [new]
    assert not tunnel.closed
