"""A crawl held by an unreachable robots.txt says why, and until when.

A new user's second crawl fetched nothing for its whole run: the first run's robots.txt
failure, kept in the project's host store, held every URL until its retry, and nothing
in the log said so; the first run's warning did not say when robots.txt would be asked
again either (a probe, 2026-11-28)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.crawl_runner import crawl_in_subprocess
from tests.loopback_site import serving
from tests.scheduler.test_backoff import DROP, _ScriptedSite

SETTINGS = {"ADDONS": {"scrapy_irl.Addon": 0}, "ROBOTSTXT_OBEY": True, "RETRY_ENABLED": False,
            "IRL_HOST_DELAY": 0.1, "IRL_HOST_DELAY_MIN": 0.05, "IRL_IP_DELAY": 0.05,
            "IRL_IP_DELAY_MIN": 0.01, "IRL_ROBOTS_RETRY_DELAY": 120.0,
            "CLOSESPIDER_TIMEOUT": 4}  # fmt: skip


def test_an_earlier_runs_robots_failure_is_named_when_it_holds_this_runs_urls(tmp_path: Path) -> None:
    site = _ScriptedSite({"/robots.txt": [(DROP, {})]})
    settings = {**SETTINGS, "IRL_HOSTS_DIR": str(tmp_path / "hosts")}
    with serving(site):
        start = [f"{site.base_url}/a"]
        first, log = crawl_in_subprocess({"start": start, "settings": settings})
        assert re.search(r"robots.txt of \S+ unreachable: .*\(1 in a row\); asked again in 1[12]\d s, "
                         r"and until then its URLs are not fetched", log), log[-3000:]
        second, log = crawl_in_subprocess({"start": start, "settings": settings})
    assert [p for _, p in site.log] == ["/robots.txt"]  # the second run asked nothing
    assert second.get("response_received_count", 0) == 0
    assert "its robots.txt was unreachable when an earlier run last asked (1 failures in a row" in log
