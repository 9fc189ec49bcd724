"""A long start() no longer blocks the reactor while the downloader is full."""

from __future__ import annotations

import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from tests.crawl_runner import crawl_in_subprocess
from tests.loopback_site import LoopbackServer, send_body, serving


class _SlowHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        time.sleep(1.0)
        send_body(self, b"<html><body>slow</body></html>")

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_the_reactor_turns_while_a_long_start_is_enqueued(tmp_path: Path) -> None:
    # One request fills the downloader (CONCURRENT_REQUESTS = 1), so Scrapy's engine reads
    # the rest of start() without waiting: 30 000 requests went into the IRL scheduler in
    # one run of the reactor thread (3.8 s for 20 000 on the test machine), during which
    # no response was read and no timer fired (requests in flight hit DOWNLOAD_TIMEOUT).
    with serving(LoopbackServer(_SlowHandler)) as site:
        stats, log = crawl_in_subprocess({
            "url": f"{site.base_url}/slow", "n": 30_000,
            "settings": {"ADDONS": {"scrapy_irl.Addon": 0}, "CONCURRENT_REQUESTS": 1,
                         "IRL_HOSTS_DIR": str(tmp_path / "hosts"), "CLOSESPIDER_TIMEOUT": 90},
        }, timeout=150, module="tests.start_flood")  # fmt: skip
    assert stats["finish_reason"] == "finished", log[-3000:]
    assert stats["dupefilter/filtered"] == 30_000  # every request was enqueued
    assert stats["flood/max_reactor_gap"] < 1.0, stats["flood/max_reactor_gap"]


REACTORLESS_SPIDER = '''
import scrapy

class Seeds(scrapy.Spider):
    name = "seeds"

    async def start(self):
        for n in range(3000):  # one URL, so Scrapy's dupefilter keeps a single request
            yield scrapy.Request(URL)

    def parse(self, response):
        yield {"status": response.status}
'''


def test_the_pacing_works_in_scrapys_reactorless_mode(tmp_path: Path) -> None:
    # Reactorless mode (TWISTED_REACTOR_ENABLED = False) forbids importing the reactor,
    # which the pause between slices used: start() died with an ImportError. There, one
    # turn of asyncio's loop is the pause.
    import json
    import subprocess
    import sys

    with serving(LoopbackServer(_SlowHandler)) as site:
        spider = tmp_path / "seeds.py"
        spider.write_text(f"URL = {site.base_url + '/slow'!r}\n" + REACTORLESS_SPIDER)
        items = tmp_path / "items.json"
        done = subprocess.run(
            [sys.executable, "-m", "scrapy.cmdline", "runspider", str(spider), "-o", str(items),
             "-s", "TWISTED_REACTOR_ENABLED=False", "-s", "CLOSESPIDER_TIMEOUT=60",
             "-s", 'SPIDER_MIDDLEWARES={"scrapy_irl.startpace.StartPacingMiddleware": 24}'],
            cwd=tmp_path, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Import of twisted.internet.reactor is forbidden" not in done.stderr
    assert json.loads(items.read_text()) == [{"status": 200}]
    assert "'dupefilter/filtered': 2999" in done.stderr
