"""Oversized robots.txt files: cut at IRL_ROBOTS_MAX_BYTES, or, when unreadable, fetched once.

A real crawl (Scrapy's own scheduler, RobotsCacheMiddleware alone) of a loopback site whose
robots.txt streams rules and then comment lines until the client hangs up. RFC 9309
section 2.5: the first 500 KiB are parsed. Reading on ran into DOWNLOAD_TIMEOUT: the file
counted as unreachable and the whole site was disallowed (or RAM filled up to
DOWNLOAD_MAXSIZE first, on a fast stream).
"""

from __future__ import annotations

import gzip
import time
from pathlib import Path
from typing import Any

import pytest

from tests.crawl_runner import crawl_in_subprocess as crawl
from tests.loopback_site import RobotsHandler, _Server, gzip_robots_site, serving

RULES = b"User-agent: *\nDisallow: /page/3\n"
CHUNK = b"#" + b" endless" * 128 + b"\n"


class _EndlessHandler(RobotsHandler):
    server: _EndlessServer

    def send_robots(self) -> None:
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


#: robots.txt: rules, then 3 MB of comment lines, gzip-encoded (about 10 KB on the wire).
GZIP_BOMB = gzip.compress(RULES + b"#" * 3_000_000 + b"\n")


class _EndlessServer(_Server):
    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.RequestHandlerClass = _EndlessHandler
        self.sent = 0


def warc_responses(directory: Path) -> list[tuple[str, str | None, str | None]]:
    """(URL, WARC-Truncated, HTTP Content-Length) of every response record."""
    from warcio.archiveiterator import ArchiveIterator

    out = []
    for path in sorted(directory.glob("*.warc.gz")):
        with open(path, "rb") as handle:
            out += [(r.rec_headers.get_header("WARC-Target-URI"),
                     r.rec_headers.get_header("WARC-Truncated"),
                     r.http_headers.get_header("Content-Length"))
                    for r in ArchiveIterator(handle) if r.rec_type == "response"]  # fmt: skip
    return out


def crawl_with_robots_cache(server: Any, tmp_path: Path, **settings: Any) -> tuple[dict[str, Any], str]:
    """Crawl ``server`` from /page/1 with RobotsCacheMiddleware alone (Scrapy's scheduler)."""
    return crawl({
        "start": [f"{server.base_url}/page/1"],
        "settings": {
            "ROBOTSTXT_OBEY": True, "IRL_HOSTS_DIR": str(tmp_path / "hosts"),
            "DOWNLOADER_MIDDLEWARES": {
                "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
                "scrapy_irl.robots.middleware.RobotsCacheMiddleware": 100,
            },
            **settings,
        },
    }, timeout=90)  # fmt: skip


@pytest.mark.slow
def test_an_endless_robots_txt_is_cut_at_max_bytes_and_obeyed(tmp_path: Path) -> None:
    with serving(_EndlessServer(size=8)) as server:
        started = time.monotonic()
        stats, log = crawl_with_robots_cache(
            server, tmp_path, DOWNLOAD_TIMEOUT=20, CLOSESPIDER_TIMEOUT=60,
            EXTENSIONS={"scrapy_irl.warc.extension.WarcExtension": 0},
            IRL_WARC_DIR=str(tmp_path / "warc"))  # fmt: skip
        elapsed = time.monotonic() - started
        sent = server.sent
    # Archived as what it is, a file cut at a configured length (until 2026-11-29 the
    # record passed for the whole robots.txt)
    [robots] = [r for r in warc_responses(tmp_path / "warc") if r[0].endswith("/robots.txt")]
    assert robots[1] == "length" and robots[2] is None  # no length announced, none invented
    assert stats.get("irl_warc/truncated") == 1
    assert server.hits["/robots.txt"] == 1
    assert stats.get("irl_robots/truncated") == 1, log[-3000:]
    assert not stats.get("irl_robots/unreachable"), log[-3000:]
    assert server.hits["/page/1"] == 1 and server.hits["/page/2"] == 1
    assert server.hits["/page/3"] == 0  # the rule at the top of the endless file holds
    assert stats.get("robotstxt/forbidden", 0) >= 1
    assert sent < 20 * 500 * 1024, sent  # stopped near 500 KiB (socket buffers aside)
    assert elapsed < 20, elapsed  # not DOWNLOAD_TIMEOUT


@pytest.mark.slow
def test_a_robots_txt_refused_once_decompressed_is_fetched_once(tmp_path: Path) -> None:
    with serving(gzip_robots_site(GZIP_BOMB)) as server:
        stats, log = crawl_with_robots_cache(server, tmp_path, DOWNLOAD_MAXSIZE=1_000_000,
                                             CONCURRENT_REQUESTS=1)  # fmt: skip
    assert server.hits["/page/1"] == 1 and server.hits["/page/15"] == 1, log[-3000:]
    # Unreadable: unavailable, allow all for IRL_ROBOTS_TTL; it was fetched again for
    # every request of the origin (nothing was stored).
    assert server.hits["/robots.txt"] == 1, server.hits
    assert stats.get("robotstxt/request_count") == 1
    assert stats.get("irl_robots/response_dropped") == 1
    assert not stats.get("irl_robots/fetch_ignored")


@pytest.mark.slow
def test_a_gzip_bomb_is_refused_at_max_decoded_bytes_not_download_maxsize(tmp_path: Path) -> None:
    """DOWNLOAD_MAXSIZE left at Scrapy's 1 GiB: the 3 MB inflated body is refused at
    IRL_ROBOTS_MAX_DECODED_BYTES, so a real bomb cannot fill RAM up to 1 GiB."""
    with serving(gzip_robots_site(GZIP_BOMB)) as server:
        stats, log = crawl_with_robots_cache(server, tmp_path, CONCURRENT_REQUESTS=1,
                                             IRL_ROBOTS_MAX_DECODED_BYTES=1_000_000)  # fmt: skip
    assert server.hits["/robots.txt"] == 1, server.hits
    assert stats.get("irl_robots/response_dropped") == 1, log[-3000:]
    assert server.hits["/page/3"] == 1  # unavailable: allow all, as RFC 9309 says


@pytest.mark.slow
def test_a_gzip_robots_txt_within_max_decoded_bytes_is_cut_and_obeyed(tmp_path: Path) -> None:
    """The same file under the default 8 MiB cap: inflated, cut at 500 KiB, rules kept."""
    with serving(gzip_robots_site(GZIP_BOMB)) as server:
        stats, log = crawl_with_robots_cache(server, tmp_path, CONCURRENT_REQUESTS=1)
    assert server.hits["/robots.txt"] == 1, server.hits
    assert not stats.get("irl_robots/response_dropped"), log[-3000:]
    assert stats.get("irl_robots/truncated") == 1, log[-3000:]
    assert server.hits["/page/3"] == 0  # the rule at the top of the inflated file holds
    assert server.hits["/page/1"] == 1 and server.hits["/page/2"] == 1


def long_robots_site(body: bytes, size: int = 16) -> _Server:
    """The site, its ``/robots.txt`` answered with ``body`` and its Content-Length."""

    class LongRobotsHandler(RobotsHandler):
        def send_robots(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except OSError:  # the crawler stopped reading at IRL_ROBOTS_MAX_BYTES
                pass

    server = _Server(size)
    server.RequestHandlerClass = LongRobotsHandler
    return server


@pytest.mark.slow
@pytest.mark.parametrize(
    ("maxsize", "body"),
    [
        # Content-Length over DOWNLOAD_MAXSIZE: the download handler cancelled it unread.
        (1_000_000, RULES + b"#" * 2_000_000 + b"\n"),
        # DOWNLOAD_MAXSIZE under IRL_ROBOTS_MAX_BYTES: a rule past it was lost (cancelled).
        (100_000, b"User-agent: *\n" + b"#" * 200_000 + b"\nDisallow: /page/3\n"),
    ],
)
def test_a_long_robots_txt_is_read_up_to_max_bytes_whatever_download_maxsize(
    tmp_path: Path, maxsize: int, body: bytes
) -> None:
    """A project's DOWNLOAD_MAXSIZE bounds its pages, not robots.txt: RFC 9309 asks for
    500 KiB (IRL_ROBOTS_MAX_BYTES). Before, a robots.txt longer than DOWNLOAD_MAXSIZE was
    cancelled by the download handler and counted as unreachable: the whole site was
    disallowed."""
    with serving(long_robots_site(body)) as server:
        stats, log = crawl_with_robots_cache(server, tmp_path, DOWNLOAD_MAXSIZE=maxsize,
                                             CONCURRENT_REQUESTS=1)  # fmt: skip
    assert server.hits["/robots.txt"] == 1, server.hits
    assert not stats.get("irl_robots/unreachable"), log[-3000:]
    assert server.hits["/page/1"] == 1 and server.hits["/page/2"] == 1, log[-3000:]
    assert server.hits["/page/3"] == 0  # the rule holds
