"""``dont_filter`` requests (Scrapy's default start requests, retries) wait on disk too.

They skip URLseen's check and the budgets, but not BEAST: a seed list of any length must
not grow RAM, and a kill -9 must not lose them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.crawl_runner import ROOT
from tests.crawl_runner import crawl_in_subprocess as crawl
from tests.loopback_site import loopback_site

FAST = {
    "ADDONS": {"scrapy_irl.Addon": 0},
    "IRL_HOST_DELAY": 0.0, "IRL_HOST_DELAY_MIN": 0.0, "IRL_IP_DELAY": 0.0,
    "IRL_IP_DELAY_MIN": 0.0, "IRL_POLITENESS_MARGIN": 0.0,
}  # fmt: skip


@pytest.mark.slow
def test_a_flood_of_dont_filter_start_requests_stays_on_disk(tmp_path: Path):
    n, cap = 1200, 40
    with loopback_site(size=n) as site:
        stats, _ = crawl({
            "start": [],
            "unfiltered": [f"{site.base_url}/page/{i}" for i in range(n)],
            "settings": {**FAST, "IRL_HOSTS_DIR": str(tmp_path / "hosts"),
                         "IRL_FRONTIER_RAM_REQUESTS": cap, "CLOSESPIDER_TIMEOUT": 100},
        })  # fmt: skip
        hits = {p: c for p, c in site.hits.items() if p.startswith("/page/")}
    assert stats["irl_sched/beast/front_pushed"] == n
    # Lazy loading bounds RAM for them as for any URL (before, all n sat in RAM at once).
    assert stats["irl_sched/ram_requests_peak"] <= cap
    assert hits == {f"/page/{i}": 1 for i in range(n)}  # each fetched, once
    # dont_filter URLs are remembered: the links to them were duplicates.
    assert stats["dupefilter/filtered"] > n
    assert stats["finish_reason"] == "finished"


@pytest.mark.slow
def test_dont_filter_requests_survive_a_kill_9(tmp_path: Path):
    n = 300
    job = {"JOBDIR": str(tmp_path / "job"), "IRL_HOSTS_DIR": str(tmp_path / "hosts")}
    with loopback_site(size=n) as site:
        # 0.5 s per page: most URLs are parked (more than 5 s of work for the host).
        slow = {**FAST, **job, "IRL_HOST_DELAY": 0.5, "IRL_HOST_DELAY_MIN": 0.5,
                "IRL_RAM_BACKLOG_SECONDS": 5, "IRL_FRONTIER_RAM_REQUESTS": 1000,
                "CLOSESPIDER_TIMEOUT": 600}  # fmt: skip
        config = {"start": [], "unfiltered": [f"{site.base_url}/page/{i}" for i in range(n)],
                  "settings": slow}  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        first = subprocess.Popen([sys.executable, "-m", "tests.crawl_runner", json.dumps(config)],
                                 cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)  # fmt: skip
        for _ in range(600):  # bounded: 60 s
            if sum(1 for p in site.hits if p.startswith("/page/")) >= 5:
                break
            time.sleep(0.1)
        time.sleep(1.5)  # past the 1 s write-out window of the last enqueued request
        os.kill(first.pid, signal.SIGKILL)
        first.wait(10)
        fetched_before = {p for p in site.hits if p.startswith("/page/")}
        assert 5 <= len(fetched_before) < n / 2
        # The resumed run is given no start URL: everything comes from the frontier. The
        # URLs parked by the killed run are read at once, not after the backlog interval
        # (600 s here, so waiting for it would end the crawl by its 100 s timeout).
        stats, log = crawl({"start": [], "settings": {**FAST, **job, "CLOSESPIDER_TIMEOUT": 100,
                                                      "IRL_RAM_BACKLOG_SECONDS": 600}})  # fmt: skip
        fetched = {p for p in site.hits if p.startswith("/page/")}
    assert "Resuming crawl" in log, log[-3000:]
    assert fetched == {f"/page/{i}" for i in range(n)}
    assert stats["finish_reason"] == "finished"
