"""A robots.txt that arrives whole but fails in a downloader middleware (a body labelled
gzip that is not): unreadable, so unavailable (allow all), not unreachable."""

from __future__ import annotations

from pathlib import Path

from tests.loopback_site import RobotsHandler, _Server, serving
from tests.robots.test_oversized_robots import crawl_with_robots_cache

RULES = b"User-agent: *\nDisallow: /page/3\n"


def mislabelled_robots_site(status: int, body: bytes, encoding: str) -> _Server:
    """A site whose robots.txt answers ``status`` with ``body`` sent as ``encoding``."""

    class MislabelledRobotsHandler(RobotsHandler):
        def send_robots(self) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Encoding", encoding)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = _Server(4)
    server.RequestHandlerClass = MislabelledRobotsHandler
    return server


def test_a_200_whose_body_does_not_decode_allows_all_once(tmp_path: Path) -> None:
    # Plain text labelled gzip: BadGzipFile in HttpCompressionMiddleware. It was taken as
    # unreachable: every page dropped, and robots.txt asked again at each back-off,
    # failing the same way for good.
    with serving(mislabelled_robots_site(200, RULES, "gzip")) as server:
        stats, log = crawl_with_robots_cache(server, tmp_path, CONCURRENT_REQUESTS=1)
    assert not stats.get("irl_robots/unreachable"), log[-2000:]
    assert stats.get("irl_robots/response_dropped") == 1, log[-2000:]
    assert server.hits["/robots.txt"] == 1
    assert [server.hits[f"/page/{n}"] for n in (1, 2, 3)] == [1, 1, 1]  # allow all


def test_a_503_whose_body_does_not_decode_is_still_unreachable(tmp_path: Path) -> None:
    with serving(mislabelled_robots_site(503, RULES, "gzip")) as server:
        stats, log = crawl_with_robots_cache(server, tmp_path, CONCURRENT_REQUESTS=1)
    assert stats.get("irl_robots/unreachable", 0) >= 1, log[-2000:]
    assert not stats.get("irl_robots/response_dropped")
    assert server.hits["/page/2"] == 0
