"""A server that reads a request on a reused keep-alive connection and drops it unanswered.

Twisted's connection pool re-sends such a request at once on a new connection, behind the
scheduler's back: the server saw the same URL twice within milliseconds, closer than
tau_h. With the add-on's handler the failure goes to RetryMiddleware, whose retry the
scheduler times like any request. Judged by the server's own log of arrival times.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler
from itertools import pairwise
from pathlib import Path

import pytest

from tests.crawl_runner import crawl_in_subprocess
from tests.loopback_site import LoopbackServer, send_body, serving

TAU_H = 0.6
TOLERANCE = 0.1  # the scheduler books a start slightly before the bytes reach the server
PAGES = ("/a", "/drop", "/b", "/c")
STOCK = "scrapy.core.downloader.handlers.http11.HTTP11DownloadHandler"


class _KeepAliveHandler(BaseHTTPRequestHandler):
    """HTTP/1.1: a connection serves requests until the client closes it."""

    protocol_version = "HTTP/1.1"
    server: _DroppingServer

    def setup(self) -> None:
        super().setup()
        self.served = 0  # requests answered on this connection so far

    def do_GET(self) -> None:
        server = self.server
        with server.lock:
            server.log.append((time.monotonic(), self.path))
            drop = self.path == "/drop" and self.served > 0 and not server.dropped
            server.dropped = server.dropped or drop
        if drop:  # read, never answered: the connection closes under the client
            self.close_connection = True
            return
        self.served += 1
        links = PAGES if self.path == "/" else ()
        body = "".join(f'<a href="{p}">{p}</a>\n' for p in links)
        send_body(self, f"<html><body>{body}</body></html>".encode())

    def log_message(self, format: str, *args: object) -> None:
        pass


class _DroppingServer(LoopbackServer):
    def __init__(self) -> None:
        super().__init__(_KeepAliveHandler)
        self.lock = threading.Lock()
        self.log: list[tuple[float, str]] = []  # (monotonic arrival, path)
        self.dropped = False


def _crawl(tmp_path: Path, **settings: object) -> tuple[_DroppingServer, dict]:
    with serving(_DroppingServer()) as server:
        stats, _ = crawl_in_subprocess({"start": [f"{server.base_url}/"], "settings": {
            "ADDONS": {"scrapy_irl.Addon": 0},
            "IRL_HOSTS_DIR": str(tmp_path / "hosts"),
            "IRL_HOST_DELAY": TAU_H, "IRL_HOST_DELAY_MIN": TAU_H,
            "IRL_IP_DELAY": 0.3, "IRL_IP_DELAY_MIN": 0.3,
            "CLOSESPIDER_TIMEOUT": 30, **settings,
        }}, timeout=60)  # fmt: skip
    assert server.dropped, server.log  # /drop came on a reused connection, as it must
    return server, stats


def _too_close(log: list[tuple[float, str]]) -> list[tuple[float, str, str]]:
    return [(round(b[0] - a[0], 4), a[1], b[1]) for a, b in pairwise(sorted(log))
            if b[0] - a[0] < TAU_H - TOLERANCE]  # fmt: skip


@pytest.mark.slow
def test_a_request_dropped_on_a_reused_connection_is_retried_through_the_scheduler(tmp_path: Path):
    server, stats = _crawl(tmp_path)
    assert [path for _, path in server.log].count("/drop") == 2, server.log  # dropped, retried
    assert sorted({path for _, path in server.log}) == sorted(("/", *PAGES))
    assert not _too_close(server.log), server.log
    assert stats["retry/count"] == 1, stats
    assert stats["downloader/exception_type_count/scrapy.exceptions.DownloadFailedError"] == 1
    assert stats["downloader/response_count"] == 1 + len(PAGES)
    assert stats["finish_reason"] == "finished", stats


@pytest.mark.slow
def test_the_stock_handler_resends_behind_the_schedulers_back(tmp_path: Path):
    """What the add-on's handler prevents, so that the test above keeps testing something:
    a project that names Scrapy's handler itself keeps it, and Twisted's re-send."""
    server, stats = _crawl(tmp_path, DOWNLOAD_HANDLERS={"http": STOCK})
    assert [path for _, path in server.log].count("/drop") == 2, server.log
    assert _too_close(server.log) == [(pytest.approx(0, abs=TOLERANCE), "/drop", "/drop")]
    assert "retry/count" not in stats, stats  # the scheduler never heard of it
