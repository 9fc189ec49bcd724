"""STAR learns cross-site links even from pages that forbid the Referer header.

A page served with ``Referrer-Policy: no-referrer`` (or ``same-origin``) makes Scrapy's
RefererMiddleware send its links without a ``Referer``: before LinkSourceMiddleware, the
scheduler saw no source for them, and the linked PLDs got no in-degree at all.
"""

from __future__ import annotations

import logging
import socketserver
from contextlib import ExitStack
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from scrapy import Request
from scrapy.exceptions import NotConfigured
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from scrapy_irl.linksource import SOURCE_META_KEY, LinkSourceMiddleware
from tests.crawl_runner import crawl_in_subprocess as crawl
from tests.loopback_site import LoopbackServer, serving

MIDDLEWARE = "scrapy_irl.linksource.LinkSourceMiddleware"


class _Handler(BaseHTTPRequestHandler):
    """``/`` links to every URL in ``server.links``; the page forbids referrers."""

    server: _Site

    def do_GET(self) -> None:
        if self.path != "/":
            self.send_error(404)
            return
        body = "".join(f'<a href="{url}">x</a>' for url in self.server.links)
        self.send_response(200)
        self.send_header("Referrer-Policy", self.server.policy)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Site(LoopbackServer):
    def __init__(self, address: str, policy: str = "no-referrer") -> None:
        self.address = address
        self.links: list[str] = []
        self.policy = policy
        super().__init__(_Handler)

    def server_bind(self) -> None:  # each site on its own loopback address: its own PLD
        # TCPServer's bind, not HTTPServer's: that one calls socket.getfqdn(), a reverse
        # DNS query for 127.0.0.2 that /etc/hosts does not answer, so it leaves the machine.
        self.server_address = (self.address, 0)
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.address, self.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://{self.address}:{self.server_address[1]}"


def _crawl_hub(tmp_path: Path, policy: str, settings: dict) -> dict:
    with ExitStack() as stack:
        sites = [stack.enter_context(serving(_Site(f"127.0.0.{k}", policy))) for k in (1, 2, 3)]
        hub, *leaves = sites
        hub.links = [f"{leaf.base_url}/" for leaf in leaves]
        stats, _ = crawl({
            "start": [f"{hub.base_url}/"],
            "settings": {
                "ADDONS": {"scrapy_irl.Addon": 0}, "IRL_HOSTS_DIR": str(tmp_path / "hosts"),
                "IRL_HOST_DELAY": 0.0, "IRL_HOST_DELAY_MIN": 0.0, "IRL_IP_DELAY": 0.0,
                "IRL_IP_DELAY_MIN": 0.0, "IRL_POLITENESS_MARGIN": 0.0, **settings,
            },
        })  # fmt: skip
    assert stats["finish_reason"] == "finished"
    return stats


@pytest.mark.parametrize("policy", ["no-referrer", "same-origin"])
def test_links_from_a_no_referrer_page_count_for_star(tmp_path: Path, policy: str) -> None:
    stats = _crawl_hub(tmp_path, policy, {})
    assert stats["response_received_count"] == 3  # the hub and both leaves
    assert stats["irl_sched/star/pld_edges"] == 2  # hub -> leaf 1, hub -> leaf 2


def test_without_the_middleware_the_referer_policy_hides_the_links(tmp_path: Path) -> None:
    """The control: what the crawl above would count with only the Referer to go by."""
    stats = _crawl_hub(tmp_path, "no-referrer", {"SPIDER_MIDDLEWARES": {MIDDLEWARE: None}})
    assert stats["response_received_count"] == 3
    assert stats.get("irl_sched/star/pld_edges", 0) == 0


def test_the_middleware_stamps_the_source_page_and_keeps_the_spiders_own() -> None:
    middleware = LinkSourceMiddleware(get_crawler(settings_dict={"SCHEDULER": "scrapy_irl.scheduler.IrlScheduler"}))
    response = HtmlResponse("http://a.example/page", body=b"")
    plain = Request("http://b.example/")
    chosen = Request("http://c.example/", meta={SOURCE_META_KEY: "http://d.example/"})
    items = [{"an": "item"}, plain, chosen]
    out = list(middleware.process_spider_output(response, items))
    assert out == items
    assert plain.meta[SOURCE_META_KEY] == "http://a.example/page"
    assert chosen.meta[SOURCE_META_KEY] == "http://d.example/"
    start = Request("http://e.example/")
    assert list(middleware.process_spider_output(None, [start])) == [start]
    assert SOURCE_META_KEY not in start.meta  # start requests have no source page


def test_the_middleware_is_off_with_another_scheduler(caplog) -> None:
    crawler = get_crawler(settings_dict={"SCHEDULER": "scrapy.core.scheduler.Scheduler"})
    with caplog.at_level(logging.INFO), pytest.raises(NotConfigured) as raised:
        LinkSourceMiddleware(crawler)
    # A bare NotConfigured: Scrapy logs one that carries a message as a WARNING.
    assert raised.value.args == ()
    assert "only the IRL scheduler reads the link source" in caplog.text
