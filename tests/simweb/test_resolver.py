"""The resolver maps simweb names and NXDOMAINs the rest; a real Scrapy crawl goes through it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from scrapy.resolver import dnscache
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.test import get_crawler
from twisted.internet.error import DNSLookupError

from scrapy_irl.simweb.config import WebConfig
from scrapy_irl.simweb.log import read_log
from scrapy_irl.simweb.model import BLOG_PLD, web_for
from scrapy_irl.simweb.report import judge
from scrapy_irl.simweb.resolver import SimwebResolver, write_config
from scrapy_irl.simweb.testing import RunningWeb

ROOT = Path(__file__).resolve().parents[2]
SPIDER = ROOT / "benchmarks" / "simweb_spider.py"


def _result(d):  # a Deferred that already fired (the resolver answers synchronously)
    out: list = []
    d.addBoth(out.append)
    assert out, "the resolver must answer without the reactor running"
    return out[0]


def _resolver(settings: dict) -> SimwebResolver:
    from twisted.internet import reactor

    crawler = get_crawler(settings_dict=settings)
    return build_from_crawler(SimwebResolver, crawler, reactor=reactor)


def test_maps_names_and_nxdomains_the_rest(tmp_path: Path) -> None:
    config = WebConfig.sized("tiny", seed=5)
    write_config(config, tmp_path / "web.json")
    resolver = _resolver({"IRL_SIMWEB_CONFIG": str(tmp_path / "web.json")})
    web = web_for(config)
    name = web.hosts_of[3][0]
    assert _result(resolver.getHostByName(name)) == web.resolve(name)
    assert dnscache[name] == web.resolve(name)
    assert _result(resolver.getHostByName(f"u3.{BLOG_PLD}")) in web.blog_ips
    for unknown in (
        "example.com",
        f"gone1.{web.plds[0].name}",
        "10.0.0.1",
        "8.8.8.8",
    ):
        failure = _result(resolver.getHostByName(unknown))
        assert failure.check(DNSLookupError), unknown
    assert _result(resolver.getHostByName("127.0.3.4")) == "127.0.3.4"


def test_localhost_and_loopback_names_of_the_hosts_file_resolve(tmp_path: Path) -> None:
    # A project keeping this resolver can crawl a loopback site of its own (-a seeds=):
    # "localhost" and names a harness lists in /etc/hosts used to fail as NXDOMAIN.
    from twisted.internet import reactor

    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n127.0.0.7 site7.test shop.test\n"
                     "10.1.2.3 outside.test\n::1 six.test\n")  # fmt: skip
    web = web_for(WebConfig.sized("tiny", seed=5))
    resolver = SimwebResolver(reactor, web, hosts_file=hosts)
    assert _result(resolver.getHostByName("localhost")) == "127.0.0.1"
    assert _result(resolver.getHostByName("a.b.localhost")) == "127.0.0.1"
    assert _result(resolver.getHostByName("shop.test")) == "127.0.0.7"
    assert _result(resolver.getHostByName("SITE7.test")) == "127.0.0.7"
    assert _result(resolver.getHostByName("six.test")) == "::1"
    for refused in ("outside.test", "missing.test"):  # not loopback, not listed
        assert _result(resolver.getHostByName(refused)).check(DNSLookupError), refused
    gone = SimwebResolver(reactor, web, hosts_file=tmp_path / "absent")
    assert _result(gone.getHostByName("shop.test")).check(DNSLookupError)
    assert _result(gone.getHostByName(web.hosts_of[3][0])) == web.resolve(web.hosts_of[3][0])


def test_irl_simweb_hosts_file_names_the_hosts_file(tmp_path: Path) -> None:
    """A project's test web under many names needed root (/etc/hosts) or a resolver of
    its own (a trap probe wrote one, 2026-11-29)."""
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.12 a.mytest b.mytest\n10.0.0.1 away.mytest\n")
    resolver = _resolver({"IRL_SIMWEB_SIZE": "tiny", "IRL_SIMWEB_HOSTS_FILE": str(hosts)})
    assert _result(resolver.getHostByName("b.mytest")) == "127.0.0.12"
    assert _result(resolver.getHostByName("away.mytest")).check(DNSLookupError)
    default = _resolver({"IRL_SIMWEB_SIZE": "tiny"})
    assert default.hosts_file.path == "/etc/hosts"


def test_settings_without_file_pick_the_same_web() -> None:
    resolver = _resolver({"IRL_SIMWEB_SIZE": "tiny", "IRL_SIMWEB_SEED": 5})
    assert resolver.web.config == WebConfig.sized("tiny", seed=5)


def test_scrapy_crawl_through_resolver_reaches_server(
    simweb: RunningWeb, tmp_path: Path
) -> None:
    """A real Scrapy process (own reactor, resolver installed by TWISTED_DNS_RESOLVER) crawls simweb."""
    write_config(simweb.config, tmp_path / "web.json")
    settings = {"CLOSESPIDER_PAGECOUNT": 40, "CLOSESPIDER_TIMEOUT": 40, "ROBOTSTXT_OBEY": True,
                "DOWNLOAD_TIMEOUT": 3, "RETRY_ENABLED": False, "LOG_LEVEL": "WARNING"}  # fmt: skip
    proc = subprocess.run(
        [sys.executable, str(SPIDER), "--config", str(tmp_path / "web.json"), "--settings", json.dumps(settings)],
        check=False,
        capture_output=True, text=True, timeout=90, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = json.loads(
        next(l for l in proc.stdout.splitlines() if l.startswith("STATS "))[6:]
    )
    assert stats["finish_reason"] in ("closespider_pagecount", "finished")
    records = simweb.records()
    assert len(records) >= 40
    assert all(r.status != 421 for r in records), (
        "every request went to its host's own IP"
    )
    assert len({r.ip for r in records}) >= 3 and len({r.host for r in records}) >= 5
    result = judge(records, simweb.web)
    # Scrapy also counts robots.txt requests to names that never resolve (they reach no server)
    assert 0 < result["robots_fetches"] <= stats["robotstxt/request_count"]
    assert result["robots_violations"] == 0  # Scrapy's robots middleware obeys
    assert result["requests"] == len(read_log(simweb.log_path)[1])


def test_the_config_file_appears_whole(tmp_path: Path, monkeypatch) -> None:
    # A harness waits for the file to exist, then reads it: written in place, it was
    # once read empty (JSONDecodeError in tests/test_benchmark_kill_resume.py).
    import os

    from scrapy_irl.simweb import resolver

    target = tmp_path / "web.json"
    seen: list[bool] = []
    real_replace = os.replace

    def replace(src, dst):  # the moment the file appears under its name
        seen.append(target.exists())
        assert json.loads(Path(src).read_text(encoding="utf-8"))["seed"] == 5
        real_replace(src, dst)

    monkeypatch.setattr(resolver.os, "replace", replace)
    write_config(WebConfig.sized("tiny", seed=5), target)
    assert seen == [False] and json.loads(target.read_text(encoding="utf-8"))["seed"] == 5
    assert [p.name for p in tmp_path.iterdir()] == ["web.json"]
