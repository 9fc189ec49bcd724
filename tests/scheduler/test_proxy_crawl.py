"""A crawl through an HTTP proxy: the proxy resolves the names, the crawler must not.

Through a proxy (``http_proxy`` in the environment, or ``meta["proxy"]``) stock Scrapy
never resolves a target's name: it connects to the proxy. The names of such a crawl may
mean nothing to this machine's DNS (here, as in every test, only loopback names
resolve). Before proxies were recognised, the IRL scheduler and the DNS middleware
looked each host up, failed, and dropped every URL (``dns_failed_dropped``).
"""

from __future__ import annotations

import re
import threading
import time
from collections import defaultdict
from urllib.parse import urlsplit

import pytest

from tests.crawl_runner import crawl_in_subprocess
from tests.loopback_site import LoopbackServer, send_body, serving

HOSTS = ("www.shop.example", "blog.shop.example", "news.other.example")
PAGES = 6  # per host


def _handler_class():
    """Answers absolute-form requests (``GET http://host/path``), as a forward proxy does."""
    from http.server import BaseHTTPRequestHandler

    class Handler(BaseHTTPRequestHandler):
        server: ProxySite

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            parts = urlsplit(self.path)
            host = (parts.hostname or "").lower()
            with self.server.lock:
                self.server.hits[host].append((time.monotonic(), parts.path))
            if host not in HOSTS or not parts.scheme:
                self.send_error(502)
                return
            if parts.path == "/robots.txt":
                send_body(self, b"User-agent: *\nDisallow: /private\n", "text/plain")
                return
            match = re.fullmatch(r"/p/(\d+)", parts.path)
            if match is None:
                self.send_error(404)
                return
            n = int(match.group(1))
            links = [f"/p/{(n + 1) % PAGES}", "/private/x"]
            links += [f"http://{other}/p/{n}" for other in HOSTS if other != host]
            body = "".join(f'<a href="{link}">x</a>' for link in links)
            send_body(self, f"<html><body>{body}</body></html>".encode())

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


class ProxySite(LoopbackServer):
    def __init__(self) -> None:
        super().__init__(_handler_class())
        self.lock = threading.Lock()
        self.hits: dict[str, list[tuple[float, str]]] = defaultdict(list)


def _crawl(proxy_url: str, how: str, settings: dict) -> dict:
    config = {"start": [f"http://{HOSTS[0]}/p/0"], "proxy": proxy_url if how == "meta" else None,
              "settings": settings}  # fmt: skip
    stats, _ = crawl_in_subprocess(config, module="tests.scheduler.proxy_spider",
                                   proxy_env={"http_proxy": proxy_url} if how == "env" else {})  # fmt: skip
    return stats


@pytest.mark.parametrize("how", ["env", "meta"])
@pytest.mark.parametrize("scheduler", ["irl", "stock-with-addon-middlewares"])
def test_a_crawl_through_a_proxy_reaches_every_page(how, scheduler, tmp_path):
    settings = {
        "IRL_HOSTS_DIR": str(tmp_path / "hosts"),
        "ADDONS": {"scrapy_irl.Addon": 0},
        "ROBOTSTXT_OBEY": True,
        "IRL_HOST_DELAY": 0.2, "IRL_HOST_DELAY_MIN": 0.2,
        "IRL_IP_DELAY": 0.05, "IRL_IP_DELAY_MIN": 0.05,
        "CLOSESPIDER_TIMEOUT": 60,
    }  # fmt: skip
    if scheduler != "irl":
        settings["SCHEDULER"] = "scrapy.core.scheduler.Scheduler"
    with serving(ProxySite()) as site:
        stats = _crawl(site.base_url, how, settings)
        hits = {host: list(times) for host, times in site.hits.items()}
    for host in HOSTS:
        pages = {path for _, path in hits.get(host, []) if path.startswith("/p/")}
        assert pages == {f"/p/{n}" for n in range(PAGES)}, (host, sorted(pages), stats)
        paths = [path for _, path in hits[host]]
        assert not any(path.startswith("/private") for path in paths), host
        assert paths[0] == "/robots.txt", host  # rules first, as without a proxy
    assert stats.get("irl_sched/dns_failed_dropped", 0) == 0
    assert stats.get("irl_dns/unresolvable_requests", 0) == 0
    if scheduler == "irl":
        # Each host added without a lookup (again if the table forgot it meanwhile).
        assert stats["irl_sched/proxied_hosts_added"] >= len(HOSTS)
        # Politeness still holds per host: tau_h between page starts, as seen by the
        # proxy (robots.txt counts for the IP heap only, as in IRLbot).
        for host in HOSTS:
            times = [t for t, path in hits[host] if path != "/robots.txt"]
            gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
            assert min(gaps) >= 0.2 - 0.05, (host, gaps)
