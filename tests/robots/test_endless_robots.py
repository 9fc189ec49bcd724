"""A robots.txt that never ends is read up to IRL_ROBOTS_MAX_BYTES and obeyed, not waited out.

A real crawl (Scrapy's own scheduler, RobotsCacheMiddleware alone) of a loopback site whose
robots.txt streams rules and then comment lines until the client hangs up. RFC 9309
section 2.5: the first 500 KiB are parsed. Reading on ran into DOWNLOAD_TIMEOUT: the file
counted as unreachable and the whole site was disallowed (or RAM filled up to
DOWNLOAD_MAXSIZE first, on a fast stream).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.crawl_runner import crawl_in_subprocess as crawl
from tests.loopback_site import _Handler, _Server, serving

RULES = b"User-agent: *\nDisallow: /page/3\n"
CHUNK = b"#" + b" endless" * 128 + b"\n"


class _EndlessHandler(_Handler):
    server: _EndlessServer

    def do_GET(self) -> None:
        if self.path != "/robots.txt":
            super().do_GET()
            return
        self.server.hits[self.path] += 1
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(RULES)
        deadline = time.monotonic() + 30  # bounded: a client that never hangs up
        try:
            while time.monotonic() < deadline:
                self.wfile.write(CHUNK * 16)
                self.server.sent += len(CHUNK) * 16
                self.wfile.flush()
                time.sleep(0.002)
        except OSError:  # the crawler stopped reading: what we want
            pass
        self.close_connection = True


class _EndlessServer(_Server):
    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.RequestHandlerClass = _EndlessHandler
        self.sent = 0


@pytest.mark.slow
def test_an_endless_robots_txt_is_cut_at_max_bytes_and_obeyed(tmp_path: Path) -> None:
    with serving(_EndlessServer(size=8)) as server:
        started = time.monotonic()
        stats, log = crawl({
            "start": [f"{server.base_url}/page/1"],
            "settings": {
                "ROBOTSTXT_OBEY": True, "IRL_HOSTS_DIR": str(tmp_path / "hosts"),
                "DOWNLOADER_MIDDLEWARES": {
                    "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
                    "scrapy_irl.robots.middleware.RobotsCacheMiddleware": 100,
                },
                "DOWNLOAD_TIMEOUT": 20, "CLOSESPIDER_TIMEOUT": 60,
            },
        }, timeout=90)  # fmt: skip
        elapsed = time.monotonic() - started
        sent = server.sent
    assert server.hits["/robots.txt"] == 1
    assert stats.get("irl_robots/truncated") == 1, log[-3000:]
    assert not stats.get("irl_robots/unreachable"), log[-3000:]
    assert server.hits["/page/1"] == 1 and server.hits["/page/2"] == 1
    assert server.hits["/page/3"] == 0  # the rule at the top of the endless file holds
    assert stats.get("robotstxt/forbidden", 0) >= 1
    assert sent < 20 * 500 * 1024, sent  # stopped near 500 KiB (socket buffers aside)
    assert elapsed < 20, elapsed  # not DOWNLOAD_TIMEOUT
