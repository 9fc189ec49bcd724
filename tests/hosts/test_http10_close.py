"""An HTTP/1.0 server that closes each connection after its response (Python's
``http.server``, many small and old servers) without a ``Connection: close`` header.

RFC 9112 section 9.3: an HTTP/1.0 response is persistent only with ``Connection:
keep-alive``. Twisted's pool looks for ``close`` only, so it kept such a connection and
the next request to the host went out on it while the server was closing it:
``ResponseNeverReceived``. With Twisted's silent re-send off (the add-on's handler, so
that a server never sees a request the scheduler did not time), each such request cost a
retry, and a page whose retries all met a closing connection was lost (seen in CI: 3 of
40 pages under load). Here the server holds the connection open for a moment after each
response, so the next request meets it every time.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import SimpleNamespace

import pytest
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.test import get_crawler
from twisted.web.http_headers import Headers

from scrapy_irl.hosts.download import PoliteHTTP11DownloadHandler, reusable
from tests.crawl_runner import crawl_in_subprocess
from tests.loopback_site import LoopbackServer, send_body, serving

PAGES = 8


class _LingeringHttp10Handler(BaseHTTPRequestHandler):
    """HTTP/1.0 (the default), no Connection header; the socket closes 0.3 s after the
    response, unread requests and all."""

    server: _Site

    def do_GET(self) -> None:
        with self.server.lock:
            self.server.hits.append(self.path)
        n = int(self.path.strip("/") or 0)
        body = "".join(f'<a href="/{m}">{m}</a>' for m in range(n + 1, min(n + 3, PAGES)))
        send_body(self, f"<html><body>{body}</body></html>".encode())
        self.wfile.flush()
        time.sleep(0.3)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Site(LoopbackServer):
    def __init__(self) -> None:
        super().__init__(_LingeringHttp10Handler)
        self.lock = threading.Lock()
        self.hits: list[str] = []


@pytest.mark.slow
def test_no_request_is_sent_on_a_connection_the_server_closes(tmp_path: Path) -> None:
    with serving(_Site()) as site:
        stats, _ = crawl_in_subprocess({"start": [f"{site.base_url}/0"], "settings": {
            "ADDONS": {"scrapy_irl.Addon": 0}, "IRL_HOSTS_DIR": str(tmp_path / "hosts"),
            "IRL_HOST_DELAY": 0.0, "IRL_HOST_DELAY_MIN": 0.0, "IRL_IP_DELAY": 0.0,
            "IRL_IP_DELAY_MIN": 0.0, "IRL_POLITENESS_MARGIN": 0.0, "RETRY_ENABLED": False,
            "CLOSESPIDER_TIMEOUT": 60,
        }}, timeout=90)  # fmt: skip
    assert sorted(site.hits) == sorted(f"/{n}" for n in range(PAGES))
    assert "downloader/exception_count" not in stats, stats
    assert stats["finish_reason"] == "finished"


def _connection(version: tuple[bytes, int, int], *connection: bytes) -> SimpleNamespace:
    headers = Headers({b"connection": list(connection)} if connection else {})
    response = SimpleNamespace(version=version)
    return SimpleNamespace(_parser=SimpleNamespace(response=response, connHeaders=headers))


@pytest.mark.parametrize(
    ("version", "connection", "kept"),
    [
        ((b"HTTP", 1, 1), (), True),
        ((b"HTTP", 1, 1), (b"keep-alive",), True),
        ((b"HTTP", 1, 0), (), False),
        ((b"HTTP", 1, 0), (b"Keep-Alive",), True),
        ((b"HTTP", 1, 0), (b"close",), False),
        ((b"HTTP", 0, 9), (), False),
    ],
)
def test_reusable_follows_the_http_persistence_rules(version, connection, kept) -> None:
    assert reusable(_connection(version, *connection)) is kept


def test_a_connection_without_a_parser_is_left_to_twisted() -> None:
    assert reusable(SimpleNamespace()) is True  # Twisted's own checks apply


def test_the_handler_closes_what_is_not_reusable_instead_of_pooling_it() -> None:
    handler = build_from_crawler(PoliteHTTP11DownloadHandler, get_crawler())
    closed = []
    connection = _connection((b"HTTP", 1, 0))
    connection.state = "QUIESCENT"
    connection.transport = SimpleNamespace(loseConnection=lambda: closed.append(True))
    handler._pool._putConnection(("http", b"a.test", 80), connection)
    assert closed == [True]
    assert handler._pool._connections == {}
