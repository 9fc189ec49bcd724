"""One server, one URL: a host's trailing dot or default port does not make a page new.

Scrapy's fingerprint keeps ``a.test.`` and ``a.test:80`` apart from ``a.test``; the heaps
and robots.txt treat them as one server, but URLseen did not, and one link in the odd
spelling made every relative link of the page it led to a new URL (a probe, 2026-11-28:
a site's 15 pages fetched twice). A redirect from one spelling to the other (a server
dropping the dot) is fetched, not dropped as its own duplicate.
"""

from __future__ import annotations

import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from scrapy_irl.scheduler.urlnorm import plain_host_spelling
from tests.crawl_runner import crawl_in_subprocess
from tests.loopback_site import LoopbackServer, send_answer, send_body, serving


@pytest.mark.parametrize(
    ("url", "plain"),
    [("http://A.TEST.:80/p", "http://a.test/p"), ("http://a.test:80/p?q#f", "http://a.test/p?q#f"),
     ("https://a.test:443/", "https://a.test/"), ("http://a.test./p", "http://a.test/p"),
     ("http://a.test.:8080/p", "http://a.test:8080/p"), ("http://a.test:80", "http://a.test"),
     ("http://a.test/p", None), ("http://a.test:8080/p", None), ("https://a.test:80/p", None),
     ("http://user@a.test.:80/p", None), ("http://[::1]:80/p", None), ("http://a.test:x/p", None),
     ("http://./p", None), ("data:text/plain,a.test.:80", None)],
)  # fmt: skip
def test_plain_host_spelling(url: str, plain: str | None) -> None:
    assert plain_host_spelling(url) == plain


class _Handler(BaseHTTPRequestHandler):
    server: _SpellingSite

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        host = self.headers.get("Host", "")
        with self.server.lock:
            self.server.hits[(self.path, host.split(":")[0])] += 1
        port = self.server.server_address[1]
        if self.path == "/":
            links = ["/a", f"http://localhost.:{port}/a", f"http://LOCALHOST.:{port}/b", "/b",
                     f"http://localhost.:{port}/moved"]  # fmt: skip
            send_body(self, "".join(f'<a href="{u}">x</a>' for u in links).encode())
        elif self.path == "/moved" and host.startswith("localhost.:"):
            send_answer(self, 301, b"", headers={"Location": f"http://localhost:{port}/moved"})
        elif self.path in ("/a", "/b", "/moved"):
            send_body(self, b"<html><body>a page, a relative <a href='/a'>link</a></body></html>")
        else:
            self.send_error(404)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _SpellingSite(LoopbackServer):
    def __init__(self) -> None:
        super().__init__(_Handler)
        self.lock = threading.Lock()
        self.hits: Counter[tuple[str, str]] = Counter()


def test_a_page_is_fetched_once_whatever_its_hosts_spelling(tmp_path: Path) -> None:
    with serving(_SpellingSite()) as site:
        port = site.server_address[1]
        stats, _ = crawl_in_subprocess({
            "start": [f"http://localhost:{port}/"],
            "settings": {"ADDONS": {"scrapy_irl.Addon": 0}, "IRL_HOSTS_DIR": str(tmp_path / "hosts"),
                         "IRL_HOST_DELAY": 0.05, "IRL_HOST_DELAY_MIN": 0.05, "IRL_IP_DELAY": 0.01,
                         "IRL_IP_DELAY_MIN": 0.01, "CLOSESPIDER_TIMEOUT": 30},
        })  # fmt: skip
    assert stats["finish_reason"] == "finished"
    pages = Counter(path for path, _ in site.hits.elements() if path != "/robots.txt")
    assert pages == {"/": 1, "/a": 1, "/b": 1, "/moved": 2}, site.hits  # /moved: the 301, then it
    assert site.hits[("/moved", "localhost")] == 1
    assert stats["irl_sched/host_spellings_folded"] >= 2
    assert stats["irl_sched/spelling_redirects_followed"] == 1
