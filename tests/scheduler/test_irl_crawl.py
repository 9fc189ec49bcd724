"""Crawls of simweb (server in its own process) through the IRL scheduler, judged by the server."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.scheduler.simweb_process import (
    ROOT,
    close_pairs,
    crawl,
    judged,
    simweb_server,
    spider_command,
)

POLITE = {
    "ADDONS": {"scrapy_irl.Addon": 0},
    "ROBOTSTXT_OBEY": True,
    "CONCURRENT_REQUESTS": 32,
    "IRL_HOST_DELAY": 2.0,
    "IRL_HOST_DELAY_MIN": 1.0,
    "IRL_IP_DELAY": 0.4,
    "IRL_IP_DELAY_MIN": 0.2,
    "DOWNLOAD_TIMEOUT": 5,
    "RETRY_ENABLED": True,
    "LOG_LEVEL": "INFO",
}


@pytest.mark.slow
def test_crawl_is_polite_robots_clean_and_budgeted(tmp_path: Path) -> None:
    settings = {**POLITE, "CLOSESPIDER_TIMEOUT": 25, "IRL_HOSTS_DIR": str(tmp_path / "hosts"),
                # a short backlog horizon: hosts with more than a few seconds of work park
                # URLs, which must come back (unparked every 3 s) without breaking anything
                "IRL_RAM_BACKLOG_SECONDS": 3.0}  # fmt: skip
    with simweb_server(tmp_path, size="tiny") as (cfg, log):
        stats, stderr = crawl(cfg, settings)
    result = judged(cfg, log, tau_h=1.0, tau_s=0.2)
    assert result["pages"] >= 80, result
    assert result["broke_tau_h"] == 0, result
    assert result["broke_tau_s"] == 0, close_pairs(log, 0.2)
    assert result["robots_violations"] == 0 and result["requests_before_robots"] == 0
    assert result["crawl_delay_violations"] == 0
    assert result["requests_on_robots_5xx_hosts"] == 0
    assert result["duplicate_fetches"] <= stats.get("retry/count", 0)  # only retries refetch
    assert result["robots_fetches_max_per_host"] == 1
    assert stats["scheduler/dequeued"] > 0 and stats["irl_sched/star/pld_edges"] > 0
    assert stats["irl_sched/beast/j"] >= 2
    assert stats["irl_sched/parked_backlog"] > 0
    assert stats.get("irl_sched/beast/parked", 0) == 0  # parked in the parked store, not BEAST
    assert stats["irl_sched/parked/parked_total"] == (
        stats["irl_sched/parked_backlog"] + stats.get("irl_sched/parked_again", 0))
    assert stats["irl_sched/parked/reparked_total"] == stats.get("irl_sched/parked_again", 0)
    assert stats["irl_sched/unparked"] > 0, {k: v for k, v in stats.items() if "park" in k}
    parked_for_retries = (stats.get("irl_sched/robots_retry_parked", 0)
                          + stats.get("irl_sched/dns_retry_parked", 0))  # fmt: skip
    assert stats["irl_sched/beast/retry_parked_total"] == parked_for_retries
    # budgets grow as in-degrees are found, and hosts' delays follow them
    assert stats.get("irl_sched/delays_rescaled", 0) > 0
    # the idle meter ran (its share is a benchmark number, not a test threshold)
    assert stats["irl_sched/idle/samples"] > 0
    assert 0 <= stats["irl_sched/idle/idle_while_due"] <= stats["irl_sched/idle/samples"]
    assert "Top PLDs by in-degree" in stderr
    assert "scrapy_irl/scheduler" not in stderr, stderr[-3000:]  # no traceback through our code
    assert "housekeeping failed" not in stderr


def logged_requests(log: Path) -> list[tuple[str, str]]:
    """(host, target) of every request in the server's log, in order of start."""
    from scrapy_irl.simweb.log import read_log

    _, records = read_log(log)  # sorted by start: the killed run's requests come first
    return [(r.host, r.target) for r in records]


def pages(requests: list[tuple[str, str]]) -> set[tuple[str, str]]:
    return {(host, target) for host, target in requests if not target.startswith("/robots.txt")}


def crawl_killed_after(cfg: Path, settings: dict[str, object], seconds: float) -> None:
    """Start a crawl and kill -9 it after ``seconds``."""
    first = subprocess.Popen(spider_command(cfg, settings), cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)  # fmt: skip
    time.sleep(seconds)
    os.kill(first.pid, signal.SIGKILL)
    first.wait(10)


@pytest.mark.slow
def test_kill_9_then_resume_loses_nothing_and_refetches_little(tmp_path: Path) -> None:
    settings = {**POLITE, "JOBDIR": str(tmp_path / "job"), "IRL_HOSTS_DIR": str(tmp_path / "hosts"),
                "IRL_HOST_DELAY": 1.0, "IRL_HOST_DELAY_MIN": 0.5, "CLOSESPIDER_TIMEOUT": 20}  # fmt: skip
    with simweb_server(tmp_path, size="tiny") as (cfg, log):
        crawl_killed_after(cfg, settings, 12)
        before = judged(cfg, log)
        requests_before = logged_requests(log)
        stats, stderr = crawl(cfg, {**settings, "CLOSESPIDER_TIMEOUT": 15})
    after = judged(cfg, log)
    assert "Resuming crawl" in stderr, stderr[-3000:]
    assert before["pages"] >= 20
    assert after["pages"] > before["pages"] + 10  # the resumed crawl goes on from the frontier
    # Re-fetches caused by the kill: pages the resumed run fetched that the killed run had
    # fetched already. At most the requests in flight at the kill (retries of 5xx answers,
    # which RETRY_ENABLED repeats within either run, are not re-fetches of the resume).
    refetched = pages(logged_requests(log)[len(requests_before):]) & pages(requests_before)
    assert len(refetched) <= settings["CONCURRENT_REQUESTS"], sorted(refetched)[:40]
    assert stats.get("irl_sched/unique", 0) > 0


@pytest.mark.slow
def test_graceful_stop_saves_ram_and_resume_refetches_nothing(tmp_path: Path) -> None:
    settings = {**POLITE, "JOBDIR": str(tmp_path / "job"), "IRL_HOSTS_DIR": str(tmp_path / "hosts"),
                "IRL_HOST_DELAY": 1.0, "IRL_HOST_DELAY_MIN": 0.5, "RETRY_ENABLED": False,
                "CLOSESPIDER_TIMEOUT": 10}  # fmt: skip
    with simweb_server(tmp_path, size="tiny") as (cfg, log):
        _, first = crawl(cfg, settings)
        before = judged(cfg, log)
        stats, second = crawl(cfg, settings)
    after = judged(cfg, log)
    assert "back to BEAST" in first, first[-3000:]  # requests held in RAM were saved
    assert "Resuming crawl" in second
    assert after["pages"] > before["pages"]
    # Only start URLs come twice: Scrapy runs start() again on resume, and its start
    # requests are dont_filter (so does Scrapy's own scheduler); the spider has 10 seeds.
    assert after["duplicate_fetches"] <= 10, after


@pytest.mark.slow
def test_politeness_holds_across_kill_9_and_graceful_restarts(tmp_path: Path) -> None:
    """tau_h (6 s here) is longer than a restart takes: without the politeness log, hosts
    fetched in the last seconds before a stop were fetched again right after the start."""
    settings = {**POLITE, "JOBDIR": str(tmp_path / "job"), "IRL_HOSTS_DIR": str(tmp_path / "hosts"),
                "IRL_HOST_DELAY": 6.0, "IRL_HOST_DELAY_MIN": 6.0, "CLOSESPIDER_TIMEOUT": 30}  # fmt: skip
    with simweb_server(tmp_path, size="tiny") as (cfg, log):
        # 20 s: each host's first page waits tau_h after its robots.txt (IRL_ROBOTS_HOST_DELAY)
        crawl_killed_after(cfg, settings, 20)
        before = judged(cfg, log)
        stats, second = crawl(cfg, {**settings, "CLOSESPIDER_TIMEOUT": 8})
        _, third = crawl(cfg, {**settings, "CLOSESPIDER_TIMEOUT": 6})
    after = judged(cfg, log, tau_h=6.0, tau_s=0.2)
    assert before["pages"] >= 10
    assert "Politeness across the restart" in second, second[-3000:]
    assert stats["irl_sched/politeness_log/applied"] > 0
    assert "Politeness across the restart" in third, third[-3000:]
    assert after["pages"] > before["pages"] + 10
    assert after["broke_tau_h"] == 0, after
    assert after["broke_tau_s"] == 0, close_pairs(log, 0.2)
    assert after["crawl_delay_violations"] == 0, after
