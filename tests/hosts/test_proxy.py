"""ProxyRoutes follows Scrapy's own rule for which requests go through a proxy."""

from __future__ import annotations

import pytest
from scrapy.settings import Settings

from scrapy_irl.hosts.proxy import ProxyRoutes, robots_meta

PROXY_VARS = ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
              "all_proxy", "ALL_PROXY", "REQUEST_METHOD", "ftp_proxy", "FTP_PROXY")  # fmt: skip


@pytest.fixture
def env(monkeypatch):
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def routes(**settings) -> ProxyRoutes:
    return ProxyRoutes.from_settings(Settings(settings))


def test_without_proxies_only_meta_routes_through_one(env):
    r = routes()
    assert not r.proxied("http", "a.test", {})
    assert r.proxied("http", "a.test", {"proxy": "http://127.0.0.1:3128"})
    assert not r.proxied("http", "a.test", {"proxy": None})


def test_environment_proxies_per_scheme_and_no_proxy(env):
    env.setenv("http_proxy", "http://127.0.0.1:3128")
    env.setenv("no_proxy", "intra.test,.corp")
    r = routes()
    assert r.proxied("http", "www.a.test", {})
    assert not r.proxied("https", "www.a.test", {})  # no https_proxy
    assert not r.proxied("http", "intra.test", {})
    assert not r.proxied("http", "x.corp", {})
    assert not r.proxied("http", "www.a.test", {"proxy": None})  # meta decides


def test_ftp_requests_never_go_through_a_proxy(env):
    """Scrapy's FTP handler connects to the host itself: taken as proxied, two ftp: hosts
    of one server were timed on two addresses (gaps of 0.29 s at tau_s 1.5 s, found by
    review 2026-11-27), and the DNS middleware pinned them anyway."""
    env.setenv("ftp_proxy", "http://127.0.0.1:3128")
    r = routes()
    assert not r.proxied("ftp", "a.test", {})
    assert not r.proxied("ftp", "a.test", {"proxy": "http://127.0.0.1:3128"})
    assert r.proxied("http", "a.test", {"proxy": "http://127.0.0.1:3128"})


def test_environment_proxies_ignored_when_the_middleware_is_off(env):
    env.setenv("http_proxy", "http://127.0.0.1:3128")
    assert not routes(HTTPPROXY_ENABLED=False).proxied("http", "a.test", {})
    off = {"scrapy.downloadermiddlewares.httpproxy.HttpProxyMiddleware": None}
    assert not routes(DOWNLOADER_MIDDLEWARES=off).proxied("http", "a.test", {})
    # meta["proxy"] is read by the download handler itself: it still applies.
    assert routes(HTTPPROXY_ENABLED=False).proxied("http", "a.test", {"proxy": "http://p:1"})


def test_robots_requests_take_the_pages_proxy_choice():
    assert robots_meta({"proxy": "http://p:1", "depth": 2}) == {"proxy": "http://p:1"}
    assert robots_meta({"proxy": None}) == {"proxy": None}
    assert robots_meta({"depth": 2}) == {}


def test_bypass_proxies_clears_the_proxy_variables_only(env):
    import os

    from scrapy_irl.simweb.runner import bypass_proxies

    env.setenv("http_proxy", "http://127.0.0.1:9")
    env.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    env.setenv("no_proxy", "localhost")
    assert sorted(bypass_proxies()) == ["HTTPS_PROXY", "http_proxy"]
    assert "http_proxy" not in os.environ and "HTTPS_PROXY" not in os.environ
    assert os.environ["no_proxy"] == "localhost"
    assert not routes().proxied("http", "a.test", {})
