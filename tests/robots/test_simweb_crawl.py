"""Real crawls of simweb with Scrapy's scheduler and the add-on's robots/DNS middlewares.

simweb serves every robots.txt case (rules, 404, 503, slow, huge, malformed, redirect,
Crawl-delay) and unresolvable hosts; its server-side log is judged independently.
"""

from __future__ import annotations

import ast
import re
import socket
from pathlib import Path

import pytest

from tests.test_example_project import run_broad


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def final_stats(log: str) -> dict:
    match = re.search(r"Dumping Scrapy stats:\n(\{.*?\})\n", log, re.DOTALL)
    assert match, log[-2000:]
    text = re.sub(r"datetime\.datetime\([^)]*\)", "None", match.group(1))
    return ast.literal_eval(text)


def judge_value(log: str, label: str) -> str:
    match = re.search(rf"^{re.escape(label)}\s+(.+)$", log, re.MULTILINE)
    assert match, f"{label!r} not in the judge table"
    return match.group(1).strip()


def check_store_against_served_robots(hosts: Path, port: int) -> None:
    """Each stored record is what RFC 9309 makes of what simweb served for that host."""
    from scrapy.settings import Settings

    from scrapy_irl.hosts.records import RobotsKind
    from scrapy_irl.hosts.store import HostStore
    from scrapy_irl.simweb.model import web_for
    from scrapy_irl.simweb.resolver import config_from_settings
    from scrapy_irl.simweb.robots_truth import fetch_served

    web = web_for(config_from_settings(Settings({"IRL_SIMWEB_SIZE": "tiny", "IRL_SIMWEB_PORT": port})))
    kinds_seen = set()
    with HostStore(hosts) as store:
        origins = list(store.robots_origins())
        assert origins
        for origin in origins:
            host = origin.split("://")[1].rsplit(":", 1)[0]
            served = fetch_served(web, host)
            record = store.get_robots(origin)
            assert served is not None, origin
            if served.status >= 500:
                assert record.kind == RobotsKind.DISALLOW_ALL, origin
            elif served.status >= 300:
                assert record.kind == RobotsKind.ALLOW_ALL, origin
            else:
                assert record.kind == RobotsKind.RULES, origin
                assert record.body == served.body[: 500 * 1024], origin
            kinds_seen.add(web.host(host).robots)
        dns = {name: store.get_dns(name) for name in store.dns_hosts()}
    assert {"error", "notfound", "huge", "redirect"} & kinds_seen
    assert any(not r.ok for r in dns.values()), "simweb's unresolvable hosts were never looked up"
    for name, record in dns.items():
        assert record.ok == (web.host(name) is not None), name


@pytest.mark.slow
def test_robots_obeyed_fetched_once_and_reused_next_run(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    port = free_port()
    common = ["-s", f"IRL_HOSTS_DIR={hosts}", "-s", f"IRL_SIMWEB_PORT={port}",
              "-s", "CLOSESPIDER_PAGECOUNT=120", "-s", "DOWNLOAD_TIMEOUT=3"]
    first = run_broad(tmp_path / "one", *common)
    assert first.returncode == 0, first.stderr[-3000:]
    log = first.stderr
    assert judge_value(log, "robots violations") == "0"
    assert judge_value(log, "robots fetches max per host") == "1"
    assert judge_value(log, "requests before host's robots") == "0"
    assert judge_value(log, "requests on robots-5xx hosts") == "0"
    stats = final_stats(log)
    assert stats["robotstxt/request_count"] >= 5
    assert stats.get("spider_exceptions", 0) == 0
    fetched_hosts = int(judge_value(log, "robots.txt fetches / hosts").split("/")[1])
    check_store_against_served_robots(hosts, port)

    second = run_broad(tmp_path / "two", *common)
    assert second.returncode == 0, second.stderr[-3000:]
    again = final_stats(second.stderr)
    assert judge_value(second.stderr, "robots violations") == "0"
    # Same hosts again: their robots.txt comes from LevelDB, not from the server.
    assert again.get("irl_robots/cache/store_hit", 0) >= min(fetched_hosts, 5)
    assert again.get("robotstxt/request_count", 0) < stats["robotstxt/request_count"]
