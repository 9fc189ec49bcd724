"""robots.txt fetches and their redirect hops are requests to their host (IRL_ROBOTS_HOST_DELAY).

A server sees a robots.txt request like any other, so tau_h (and a Crawl-delay, once
known) holds between every pair of requests to a host, robots.txt included. IRLbot let
robots.txt through on the IP heap alone; with ``IRL_ROBOTS_HOST_DELAY = False`` the first
page follows its robots.txt after tau_s, as there. Gaps are measured by the servers.
"""

from __future__ import annotations

from pathlib import Path

from tests.loopback_site import serving
from tests.scheduler.test_unusual_requests import _Site, crawl, gaps, moved_to_https

TAU_H = {"IRL_HOST_DELAY": 1.0, "IRL_HOST_DELAY_MIN": 1.0, "ROBOTSTXT_OBEY": True}


def test_the_first_page_waits_tau_h_after_its_robots_txt(tmp_path: Path) -> None:
    with serving(_Site("User-agent: *\nDisallow: /private\n")) as site:
        stats = crawl([{"url": f"{site.base_url}/p{n}"} for n in range(3)], tmp_path, **TAU_H)
    assert stats["finish_reason"] == "finished"
    paths = [path for _, _, path in site.log]
    assert paths[0] == "/robots.txt" and sorted(paths[1:]) == ["/p0", "/p1", "/p2"]
    assert min(gaps(site.log)) >= 0.95, site.log  # robots.txt -> first page included


def test_irlbots_rule_lets_the_first_page_follow_its_robots_txt_after_tau_s(
    tmp_path: Path,
) -> None:
    with serving(_Site("User-agent: *\nDisallow: /private\n")) as site:
        stats = crawl([{"url": f"{site.base_url}/p{n}"} for n in range(3)], tmp_path,
                      IRL_ROBOTS_HOST_DELAY=False, **TAU_H)  # fmt: skip
    assert stats["finish_reason"] == "finished"
    assert site.log[0][2] == "/robots.txt"
    robots_to_page, *between_pages = gaps(site.log)
    assert robots_to_page < 0.9, site.log
    assert min(between_pages) >= 0.95, site.log


def test_a_crawl_delay_counts_from_the_robots_txt_that_declares_it(tmp_path: Path) -> None:
    with serving(_Site("User-agent: *\nCrawl-delay: 2\n")) as site:
        stats = crawl([{"url": f"{site.base_url}/p{n}"} for n in range(2)], tmp_path, **TAU_H)
    assert stats["finish_reason"] == "finished"
    assert [path for _, _, path in site.log][0] == "/robots.txt" and len(site.log) == 3
    assert min(gaps(site.log)) >= 1.95, site.log


def test_a_robots_txt_redirect_hop_on_the_same_host_waits_tau_h(tmp_path: Path) -> None:
    # http://localhost:P/robots.txt -> https://localhost:Q/robots.txt: one host name, so
    # the hop, the https robots.txt answer and the pages keep tau_h between each other.
    secure, plain, old = moved_to_https(tmp_path)
    with serving(secure), serving(plain):
        stats = crawl([{"url": f"{old}/p{n}"} for n in range(2)], tmp_path, **TAU_H)
    assert stats["finish_reason"] == "finished"
    assert sorted(path for _, _, path in secure.pages()) == ["/p0", "/p1"]
    everything = sorted(secure.log + plain.log)
    assert [path for _, _, path in everything][:2] == ["/robots.txt", "/robots.txt"]
    assert min(gaps(everything)) >= 0.95, everything
