"""The IRL scheduler keeps the URLs of a host whose DNS lookup failed, until retries run out.

A real crawl (own process, own reactor) of a loopback site reached under two names: one
whose first lookup fails (a resolver hiccup) and one that never resolves.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.crawl_runner import crawl_in_subprocess as crawl
from tests.loopback_site import loopback_site


@pytest.mark.slow
def test_a_failed_lookup_is_retried_and_only_a_dead_name_loses_its_urls(tmp_path: Path):
    with loopback_site(size=12) as site:
        port = site.server_address[1]
        stats, log = crawl({
            "start": [f"http://www.flaky.test:{port}/page/1",
                      f"http://www.dead.test:{port}/page/1",
                      f"http://www.dead.test:{port}/page/2"],
            "settings": {
                "ADDONS": {"scrapy_irl.Addon": 0},
                "TWISTED_DNS_RESOLVER": "tests.scheduler.flaky_resolver.FlakyResolver",
                "IRL_HOSTS_DIR": str(tmp_path / "hosts"),
                "IRL_DNS_RETRIES": 2, "IRL_DNS_RETRY_DELAY": 0.5,
                "IRL_HOST_DELAY": 0.0, "IRL_HOST_DELAY_MIN": 0.0, "IRL_IP_DELAY": 0.0,
                "IRL_IP_DELAY_MIN": 0.0, "IRL_POLITENESS_MARGIN": 0.0,
                "CLOSESPIDER_TIMEOUT": 60,
            },
        })  # fmt: skip
        pages = {p for p in site.hits if p.startswith("/page/")}
    # Every page of the flaky name was crawled, although its first lookup failed.
    assert pages == {f"/page/{n}" for n in range(12)}
    assert stats["irl_dns/retries_scheduled"] == 1 + 2  # flaky once, dead twice
    assert stats["irl_dns/gave_up"] == 1
    assert log.count("flaky-resolver: www.flaky.test -> failure") == 1
    # The dead name was asked 1 + IRL_DNS_RETRIES times, then its 2 URLs left the
    # frontier: handed out to fail with the DNS error, as with Scrapy's scheduler
    # (errbacks see it), each retried twice by RetryMiddleware, with no new lookup.
    assert log.count("flaky-resolver: www.dead.test -> failure") == 3
    assert stats["irl_sched/dns_failed_dropped"] == 2 * 3
    assert stats["irl_sched/dns_failed_handed_out"] == 2 * 3
    assert stats["irl_dns/unresolvable_requests"] == 2 * 3
    assert stats["retry/max_reached"] == 2
    assert "Gave up retrying <GET http://www.dead.test" in log
    # parked on disk per failure, per URL (held in RAM before 2026-11-27)
    assert stats["irl_sched/dns_retry_parked"] == 1 + 2 * 2
    assert "irl_sched/dns_retry_held" not in stats
    assert stats["irl_sched/held_hosts"] == 0
    assert stats["finish_reason"] == "finished"


@pytest.mark.slow
def test_urls_of_dead_names_wait_on_disk_not_in_the_ram_healthy_hosts_need(tmp_path: Path):
    """Held in RAM for the lookup's retries, the URLs of dead names filled
    IRL_FRONTIER_RAM_REQUESTS and no other host was loaded until the retries were spent
    (a probe: a healthy host's first page at 18.6 s)."""
    with loopback_site(size=4) as site:
        port = site.server_address[1]
        dead = [f"http://www{n % 3}.dead.test:{port}/page/{n}" for n in range(10)]
        stats, _ = crawl({
            "start": [*dead, f"http://www.steady.test:{port}/page/0"],
            "settings": {
                "ADDONS": {"scrapy_irl.Addon": 0},
                "TWISTED_DNS_RESOLVER": "tests.scheduler.flaky_resolver.FlakyResolver",
                "IRL_HOSTS_DIR": str(tmp_path / "hosts"), "IRL_FRONTIER_RAM_REQUESTS": 5,
                "IRL_DNS_RETRIES": 2, "IRL_DNS_RETRY_DELAY": 10.0,
                "IRL_HOST_DELAY": 0.0, "IRL_HOST_DELAY_MIN": 0.0, "IRL_IP_DELAY": 0.0,
                "IRL_IP_DELAY_MIN": 0.0, "IRL_POLITENESS_MARGIN": 0.0, "RETRY_ENABLED": False,
                "CLOSESPIDER_TIMEOUT": 8,  # the dead names' retries take 10 + 20 s
            },
        })  # fmt: skip
        pages = {p for p in site.hits if p.startswith("/page/")}
    assert stats["finish_reason"] == "closespider_timeout"
    assert pages == {f"/page/{n}" for n in range(4)}  # the healthy host, all of it
    assert stats["irl_sched/dns_retry_parked"] >= 10


@pytest.mark.slow
def test_a_lookup_the_downloader_fails_after_the_scheduler_resolved_the_name_is_retried(tmp_path: Path):
    """This resolver reads no Scrapy DNS cache, so nothing is pinned and the downloader
    looks each name up again. The second lookup of the name, the robots.txt download's,
    fails: the name was marked dead for IRL_DNS_NEGATIVE_TTL and all its pages failed,
    although the scheduler's record held a fresh address (a probe of 2026-11-29 lost
    1 200 of 1 200 pages of 30 intermittent names this way)."""
    with loopback_site(size=8) as site:
        port = site.server_address[1]
        stats, log = crawl({
            "start": [f"http://www.hiccup.test:{port}/page/1"],
            "settings": {
                "ADDONS": {"scrapy_irl.Addon": 0},
                "TWISTED_DNS_RESOLVER": "tests.scheduler.flaky_resolver.FlakyResolver",
                "DNSCACHE_ENABLED": False, "ROBOTSTXT_OBEY": True,
                "IRL_HOSTS_DIR": str(tmp_path / "hosts"),
                "IRL_ROBOTS_RETRY_DELAY": 0.5,
                "IRL_HOST_DELAY": 0.0, "IRL_HOST_DELAY_MIN": 0.0, "IRL_IP_DELAY": 0.0,
                "IRL_IP_DELAY_MIN": 0.0, "IRL_POLITENESS_MARGIN": 0.0,
                "CLOSESPIDER_TIMEOUT": 60,
            },
        })  # fmt: skip
        pages = {p for p in site.hits if p.startswith("/page/")}
        robots = [p for p in site.hits if p == "/robots.txt"]
    assert log.count("flaky-resolver: www.hiccup.test -> failure") == 1
    assert pages == {f"/page/{n}" for n in range(8)}
    assert stats["irl_robots/dns_failed_in_downloader"] == 1
    assert "irl_robots/dns_failed" not in stats
    assert len(robots) == 1  # the failed download never reached the server
    assert stats["finish_reason"] == "finished"
