"""A keep-alive server that drops idle connections: the handler closes its own first.

Twisted's pool keeps an idle connection 240 s; a server closes it sooner (Apache after
5 s). A request written on a connection the server is closing is never read: with
Twisted's silent re-send off (the add-on's handler) it fails unanswered, costs a retry and
backs the host off. Here the server stops reading a connection idle for 1 s and closes it
2 s later, so a request sent 1.2 s after the previous one (tau_h) on the same connection
meets it every time (found by a probe: 3 of 40 000 requests lost on simweb, whose
servers close after 30 s).
"""

from __future__ import annotations

import select
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.test import get_crawler

from scrapy_irl.hosts.download import PoliteHTTP11DownloadHandler
from tests.crawl_runner import crawl_in_subprocess
from tests.loopback_site import LoopbackServer, send_body, serving

PAGES = 4


class _IdleClosingHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Site

    def handle(self) -> None:
        self.close_connection = False
        while not self.close_connection:
            readable, _, _ = select.select([self.connection], [], [], 1.0)
            if not readable:  # idle for 1 s: stop reading, close a little later
                time.sleep(2.0)
                return
            self.handle_one_request()

    def do_GET(self) -> None:
        with self.server.lock:
            self.server.hits.append(self.path)
        send_body(self, b"<html><body>page</body></html>")

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Site(LoopbackServer):
    def __init__(self) -> None:
        super().__init__(_IdleClosingHandler)
        self.lock = threading.Lock()
        self.hits: list[str] = []


@pytest.mark.slow
def test_no_request_meets_a_connection_the_server_dropped_for_idleness(tmp_path: Path) -> None:
    with serving(_Site()) as site:
        stats, _ = crawl_in_subprocess({
            "requests": [{"url": f"{site.base_url}/{n}"} for n in range(PAGES)],
            "settings": {
                "ADDONS": {"scrapy_irl.Addon": 0}, "IRL_HOSTS_DIR": str(tmp_path / "hosts"),
                "IRL_HOST_DELAY": 1.2, "IRL_HOST_DELAY_MIN": 1.2, "IRL_IP_DELAY": 0.0,
                "IRL_IP_DELAY_MIN": 0.0, "IRL_POLITENESS_MARGIN": 0.0, "RETRY_ENABLED": False,
                "IRL_KEEPALIVE_MAX_IDLE": 0.5, "CLOSESPIDER_TIMEOUT": 60,
            }}, timeout=90, module="tests.scheduler.listed_requests")  # fmt: skip
    assert sorted(site.hits) == sorted(f"/{n}" for n in range(PAGES))
    assert "downloader/exception_count" not in stats, stats
    assert stats["finish_reason"] == "finished"


def test_the_setting_reaches_the_pool() -> None:
    handler = build_from_crawler(PoliteHTTP11DownloadHandler,
                                 get_crawler(settings_dict={"IRL_KEEPALIVE_MAX_IDLE": 2.5}))  # fmt: skip
    assert handler._pool.cachedConnectionTimeout == 2.5
    default = build_from_crawler(PoliteHTTP11DownloadHandler, get_crawler())
    assert default._pool.cachedConnectionTimeout == 4.0
