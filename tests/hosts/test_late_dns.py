"""The DNS middleware runs last, and a dead name fails in the download handler.

Found by a probe running Scrapy's own suite with the whole add-on (2026-11-28): at priority
90 the middleware looked every name up before the project's downloader middlewares and
Scrapy's HTTP cache, and raised the DNS error itself. So a proxy a project middleware sets
was ignored (a crawl of names only the proxy resolves failed every request), a replay from
the HTTP cache failed once the names stopped resolving, and the downloader's
``request_reached_downloader``/``request_left_downloader`` signals never saw a dead name's
request (Scrapy's ``test_request_left.py::test_noconnect``). Only loopback is used: every
other name fails to resolve at once (``tests/loopback_dns.py``).
"""

from __future__ import annotations

import json

import pytest

from tests.crawl_runner import crawl_in_subprocess
from tests.loopback_site import serving
from tests.scheduler.test_proxy_crawl import HOSTS, PAGES, ProxySite

SCHEDULERS = {"irl": "scrapy_irl.scheduler.IrlScheduler",
              "stock": "scrapy.core.scheduler.Scheduler"}  # fmt: skip
PROXY_MIDDLEWARE = {"tests.hosts.late_dns_spider.SetProxyMiddleware": 543}


def _crawl(config: dict) -> tuple[dict, str]:
    return crawl_in_subprocess(config, module="tests.hosts.late_dns_spider", proxy_env={})


def _settings(tmp_path, name: str, scheduler: str | None, **extra) -> dict:
    settings = {
        "RETRY_ENABLED": False,
        "CLOSESPIDER_TIMEOUT": 60,
        "HTTPCACHE_DIR": str(tmp_path / "httpcache"),
    }
    if scheduler is not None:  # None: stock Scrapy, no add-on
        settings.update({
            "ADDONS": {"scrapy_irl.Addon": 0},
            "SCHEDULER": SCHEDULERS[scheduler],
            "IRL_HOSTS_DIR": str(tmp_path / f"hosts-{name}"),
            "IRL_DNS_RETRIES": 0,  # a dead name at once, not after 10 + 20 s
            "IRL_HOST_DELAY": 0.2, "IRL_HOST_DELAY_MIN": 0.2,
            "IRL_IP_DELAY": 0.05, "IRL_IP_DELAY_MIN": 0.05,
        })  # fmt: skip
    settings.update(extra)
    return settings


@pytest.mark.parametrize("obey", [False, True])
@pytest.mark.parametrize("scheduler", ["irl", "stock"])
def test_a_dead_names_request_fails_in_the_downloader_as_in_stock_scrapy(scheduler, obey, tmp_path):
    url = "http://dead.example/page"
    runs = {}
    for name, which in (("stock", None), ("addon", scheduler)):
        stats, _ = _crawl({"start": [url],
                           "settings": _settings(tmp_path, name, which, ROBOTSTXT_OBEY=obey)})
        runs[name] = {
            "errors": json.loads(stats["test/errors"]),
            "reached": json.loads(stats["test/reached"]).get(url, 0),
            "left": json.loads(stats["test/left"]).get(url, 0),
            "counted": stats.get("downloader/request_count", 0),
        }
        runs[name]["stats"] = stats
    stock, addon = runs["stock"], runs["addon"]
    assert stock["errors"] == [[url, "CannotResolveHostError"]], stock
    # The same errback, signals and count: the request reached the downloader.
    assert addon["errors"] == stock["errors"], addon
    assert addon["reached"] == addon["left"] == stock["reached"] == 1, (stock, addon)
    assert addon["counted"] == stock["counted"], (stock, addon)
    assert addon["stats"]["irl_dns/unresolvable_requests"] >= 1
    assert not addon["stats"].get("robotstxt/forbidden"), addon["stats"]


def _proxy_hits_ok(site, *, tau_h: float | None) -> None:
    for host in HOSTS:
        hits = site.hits.get(host, [])
        pages = {path for _, path in hits if path.startswith("/p/")}
        assert pages == {f"/p/{n}" for n in range(PAGES)}, (host, sorted(pages))
        paths = [path for _, path in hits]
        assert not any(path.startswith("/private") for path in paths), host
        assert paths[0] == "/robots.txt", host
        if tau_h is not None:
            times = [t for t, path in hits if path != "/robots.txt"]
            gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
            assert min(gaps) >= tau_h - 0.05, (host, gaps)


@pytest.mark.parametrize("scheduler", ["irl", "stock"])
def test_a_proxy_set_by_a_project_middleware_resolves_the_names(scheduler, tmp_path):
    with serving(ProxySite()) as site:
        settings = _settings(tmp_path, "run", scheduler, ROBOTSTXT_OBEY=True,
                             DOWNLOADER_MIDDLEWARES=PROXY_MIDDLEWARE,
                             TEST_PROXY_URL=site.base_url, IRL_ALWAYS_PROXIED=True)  # fmt: skip
        stats, log = _crawl({"start": [f"http://{HOSTS[0]}/p/0"], "settings": settings})
        # tau_h per host holds at the proxy: the scheduler timed each host by its name.
        _proxy_hits_ok(site, tau_h=0.2 if scheduler == "irl" else None)
    assert not stats.get("irl_dns/unresolvable_requests"), stats
    assert stats["irl_dns/proxied_requests"] >= len(HOSTS) * PAGES
    assert "IRL_ALWAYS_PROXIED" not in log


def test_without_irl_always_proxied_a_late_proxy_is_named_in_a_warning(tmp_path):
    """The IRL scheduler looks a name up when its first URL arrives, before any downloader
    middleware: a proxy set there comes too late for it, and a name only the proxy knows
    is dead to it. The pages are still fetched (through the proxy, robots.txt obeyed),
    but without waiting for their host's turn: the log says which setting fixes that."""
    with serving(ProxySite()) as site:
        settings = _settings(tmp_path, "run", "irl", ROBOTSTXT_OBEY=True,
                             DOWNLOADER_MIDDLEWARES=PROXY_MIDDLEWARE,
                             TEST_PROXY_URL=site.base_url)  # fmt: skip
        stats, log = _crawl({"start": [f"http://{HOSTS[0]}/p/0"], "settings": settings})
        _proxy_hits_ok(site, tau_h=None)
    assert stats["irl_sched/dns_failed_handed_out"] >= 1
    assert log.count("Set IRL_ALWAYS_PROXIED = True") == 1, log[-3000:]


@pytest.mark.parametrize("scheduler", ["irl", "stock"])
def test_scrapys_http_cache_answers_before_any_lookup(scheduler, tmp_path):
    """Recorded through the proxy, replayed with the proxy gone: the names resolve
    nowhere, and every page (and robots.txt) comes from Scrapy's HTTP cache."""
    start = {"start": [f"http://{HOSTS[0]}/p/0"]}
    with serving(ProxySite()) as site:
        record = _settings(tmp_path, "record", scheduler, ROBOTSTXT_OBEY=True,
                           HTTPCACHE_ENABLED=True, DOWNLOADER_MIDDLEWARES=PROXY_MIDDLEWARE,
                           TEST_PROXY_URL=site.base_url, IRL_ALWAYS_PROXIED=True)  # fmt: skip
        recorded, _ = _crawl({**start, "settings": record})
    pages = len(HOSTS) * PAGES
    assert recorded["response_received_count"] >= pages, recorded
    replay = _settings(tmp_path, "replay", scheduler, ROBOTSTXT_OBEY=True, HTTPCACHE_ENABLED=True)
    stats, _ = _crawl({**start, "settings": replay})
    errors = json.loads(stats["test/errors"])
    # No DNS error: only the pages the cached robots.txt forbids are refused.
    assert errors and all(url.endswith("/private/x") and kind == "IgnoreRequest"
                          for url, kind in errors), errors  # fmt: skip
    assert stats["robotstxt/forbidden"] == len(errors), stats
    assert stats["httpcache/hit"] >= pages + len(HOSTS), stats  # robots.txt too
    assert stats["response_received_count"] >= pages, stats


def test_a_dead_origins_robots_txt_is_asked_once_not_for_each_page(tmp_path):
    """Its failure is remembered for IRL_DNS_NEGATIVE_TTL: one robots.txt request for the
    origin, then each page fails with the DNS error at once (a review counted one
    robots.txt request per page, 2026-11-28)."""
    urls = [f"http://dead.example/p{n}" for n in range(12)]
    settings = _settings(tmp_path, "run", "stock", ROBOTSTXT_OBEY=True, CONCURRENT_REQUESTS=1)
    stats, log = _crawl({"start": urls, "settings": settings})
    assert sorted(json.loads(stats["test/errors"])) == sorted(
        [url, "CannotResolveHostError"] for url in urls)  # fmt: skip
    assert stats["robotstxt/request_count"] == 1, stats
    assert stats["irl_robots/dns_failed"] == 1
    assert log.count("robots.txt of http://dead.example not fetched") == 1
