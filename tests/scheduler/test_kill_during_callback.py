"""A kill while a page's callback still runs: the page's record stays owed to BEAST until
the engine is done with it and its links are written out, so the restart fetches the page
again (its links come back) instead of missing its whole subtree.

Found by a kill -9 probe on 2026-11-29: a crawl that finished after 56 kills lacked four
pages, all reachable only through one page answered 80 ms before a kill. The record was
released when the download ended, before the spider parsed the page.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from tests.loopback_site import LoopbackServer, send_body, serving

ROOT = Path(__file__).resolve().parents[2]
PAGES = {"/s.html": ["/a.html"], "/a.html": ["/b.html"], "/b.html": []}

#: The spider: /a.html's callback awaits argv[3] seconds before it yields its link (an
#: API call, a database lookup, a busy scraper ahead of it).
SPIDER = """
import asyncio, json, sys
sys.path.insert(0, {root!r})
import scrapy
from scrapy.crawler import CrawlerProcess

class SlowCallback(scrapy.Spider):
    name = "slow_callback"

    async def parse(self, response):
        if response.url.endswith("/a.html"):
            await asyncio.sleep(float(sys.argv[3]))
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)

process = CrawlerProcess(json.loads(sys.argv[1]))
process.crawl(SlowCallback, start_urls=[sys.argv[2]])
process.start()
"""


class _Handler(BaseHTTPRequestHandler):
    server: _Site

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self.server.answered.setdefault(self.path, time.monotonic())
        self.server.hits[self.path] += 1
        links = PAGES.get(self.path)
        if links is None:
            self.send_error(404)
            return
        send_body(self, ("<html><body>" + "".join(f'<a href="{link}">x</a>' for link in links)
                         + "</body></html>").encode())  # fmt: skip

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Site(LoopbackServer):
    def __init__(self) -> None:
        super().__init__(_Handler)
        self.hits: Counter[str] = Counter()
        self.answered: dict[str, float] = {}


@pytest.mark.slow
def test_a_kill_while_a_callback_runs_fetches_the_page_again_and_keeps_its_links(tmp_path: Path):
    settings = {
        "ADDONS": {"scrapy_irl.Addon": 0}, "JOBDIR": str(tmp_path / "job"),
        "IRL_HOSTS_DIR": str(tmp_path / "hosts"), "ROBOTSTXT_OBEY": False,
        "IRL_HOST_DELAY": 0.3, "IRL_HOST_DELAY_MIN": 0.3, "IRL_IP_DELAY": 0.1,
        "IRL_IP_DELAY_MIN": 0.1, "LOG_LEVEL": "INFO", "TELNETCONSOLE_ENABLED": False,
        "IRL_PROGRESS_BAR": False, "CLOSESPIDER_TIMEOUT": 60,
    }  # fmt: skip
    script = tmp_path / "spider.py"
    script.write_text(SPIDER.format(root=str(ROOT)))
    env = {**os.environ, "NO_PROXY": "*", "no_proxy": "*"}
    with serving(_Site()) as site:
        command = [sys.executable, str(script), json.dumps(settings), f"{site.base_url}/s.html"]
        with open(tmp_path / "first.log", "w") as log:
            first = subprocess.Popen(command + ["5"], stdout=subprocess.DEVNULL, stderr=log,
                                     env=env)  # fmt: skip
            for _ in range(600):  # bounded: 60 s
                answered = site.answered.get("/a.html")
                # 2 s into its 5 s callback: past the 1 s write-out window, long before
                # the callback yields /b.html
                if answered is not None and time.monotonic() > answered + 2 or first.poll() is not None:
                    break
                time.sleep(0.1)
            first.kill()
            first.wait(30)
        assert first.returncode == -signal.SIGKILL, (tmp_path / "first.log").read_text()[-3000:]
        assert site.hits["/a.html"] == 1 and "/b.html" not in site.hits
        again = subprocess.run(command + ["0"], capture_output=True, text=True, env=env,
                               timeout=120, check=False)  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    # /a.html, whose callback the kill cut short, is fetched again; its link with it.
    # Before, the restart found /a.html finished and a duplicate, and /b.html was lost.
    assert site.hits["/a.html"] == 2 and site.hits["/b.html"] == 1, dict(site.hits)
    assert "Resuming crawl" in again.stderr
