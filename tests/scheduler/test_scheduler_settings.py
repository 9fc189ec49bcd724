"""The scheduler refuses bad IRL_* values with a message naming the setting, and leaves
nothing behind (no temporary frontier directory) when it does."""

from __future__ import annotations

import tempfile

import pytest
from scrapy.utils.test import get_crawler

from scrapy_irl.scheduler import IrlScheduler


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("IRL_IP_SHARE", "random", "invalid IRL_IP_SHARE='random': expected one of 'budget', 'fifo'"),
        # named its argument (max_in_flight_per_ip), not the setting, before 2026-11-28
        ("IRL_IP_MAX_IN_FLIGHT", 0, "IRL_IP_MAX_IN_FLIGHT must be >= 1"),
        ("IRL_RAM_BACKLOG_SECONDS", -1, "IRL_RAM_BACKLOG_SECONDS cannot be negative"),
        ("IRL_ROBOTS_UNREACHABLE_RETRIES", -1, "cannot be negative"),
        ("IRL_TRAP_MAX_SEGMENT_REPEATS", 1, "IRL_TRAP_MAX_SEGMENT_REPEATS"),
        # accepted before 2026-11-24, then the crawl hung or crawled at a crawl
        ("IRL_FRONTIER_RAM_REQUESTS", 0, "IRL_FRONTIER_RAM_REQUESTS must be >= 1"),
        ("IRL_DRUM_FLUSH_INTERVAL", 0, "IRL_DRUM_FLUSH_INTERVAL must be > 0"),
        ("IRL_HANDOUT_TIMEOUT", 0, "IRL_HANDOUT_TIMEOUT must be > 0"),
        ("IRL_CRAWL_DELAY_MAX", -1, "IRL_CRAWL_DELAY_MAX must be >= 0"),
        ("IRL_IDLE_SAMPLE_INTERVAL", float("nan"), "invalid IRL_IDLE_SAMPLE_INTERVAL=nan"),
        ("IRL_BUDGET_FUNCTION", "os.path.join", "calling it with in-degree 0 failed"),
        # wrong types and typos name the setting and what it takes
        ("IRL_HOST_DELAY", "abc", "invalid IRL_HOST_DELAY='abc': expected a number"),
        ("IRL_SESSION_PARAMS", 5, "invalid IRL_SESSION_PARAMS=5: expected a list"),
        ("IRL_BUDGET_FUNCTION", "lgo", "must be one of constant, linear, log, or the dotted"),
        ("IRL_BUDGET_FUNCTION", "mypkg.nothere", "IRL_BUDGET_FUNCTION='mypkg.nothere' cannot be imported"),
        # read only at close before 2026-11-25: the whole crawl ran, then the close failed
        ("IRL_REPORT_TOP_PLDS", "abc", "invalid IRL_REPORT_TOP_PLDS='abc'"),
        ("IRL_REPORT_TOP_PLDS", -1, "IRL_REPORT_TOP_PLDS must be >= 0"),
        # refused only by open() before 2026-11-25, the frontier directory locked and
        # partly written, some with a message naming no setting
        ("IRL_BEAST_QUEUES", 1, "need 2 <= IRL_BEAST_QUEUES <= IRL_BEAST_MAX_QUEUES"),
        ("IRL_BEAST_MAX_QUEUES", 1, "need 2 <= IRL_BEAST_QUEUES <= IRL_BEAST_MAX_QUEUES"),
        ("IRL_URLSEEN_BUCKETS", 3, "IRL_URLSEEN_BUCKETS=3: expected a power of two"),
        ("IRL_FRONTIER_URLSEEN_BUCKET_BYTES", 0, "IRL_FRONTIER_URLSEEN_BUCKET_BYTES must be >= 1"),
        ("IRL_URLSEEN_MERGE_CHUNK_BYTES", 0, "IRL_URLSEEN_MERGE_CHUNK_BYTES must be >= 1"),
        ("IRL_STAR_CACHE_ENTRIES", -1, "IRL_STAR_CACHE_ENTRIES must be >= 0"),
        ("IRL_DNS_TTL", 0, "IRL_DNS_TTL must be > 0"),
        ("IRL_DNS_CONCURRENCY", 0, "IRL_DNS_CONCURRENCY must be >= 1"),
    ],
)
def test_bad_setting_is_refused_and_leaves_no_directory(
    name, value, message, tmp_path, monkeypatch
):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    crawler = get_crawler(settings_dict={name: value})
    with pytest.raises(ValueError, match=message):
        IrlScheduler.from_crawler(crawler)
    assert list(tmp_path.iterdir()) == []


def test_good_settings_make_a_temporary_frontier_directory(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    scheduler = IrlScheduler.from_crawler(get_crawler(settings_dict={"IRL_IP_SHARE": "fifo"}))
    assert scheduler.temporary and scheduler.path.parent == tmp_path
    assert not scheduler.polite._by_budget
    scheduler.path.rmdir()


def test_budget_function_names_are_case_insensitive():
    from scrapy_irl.scheduler.pipeline import budget_policy

    policy = budget_policy(get_crawler(settings_dict={"IRL_BUDGET_FUNCTION": " Linear"}).settings)
    assert policy.kind == "linear" and policy(3) == 10 + 10 * 3
