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
        ("IRL_IP_SHARE", "random", "IRL_IP_SHARE: ready_order must be one of budget, fifo"),
        ("IRL_IP_MAX_IN_FLIGHT", 0, "max_in_flight_per_ip must be >= 1"),
        ("IRL_RAM_BACKLOG_SECONDS", -1, "IRL_RAM_BACKLOG_SECONDS cannot be negative"),
        ("IRL_ROBOTS_UNREACHABLE_RETRIES", -1, "cannot be negative"),
        ("IRL_TRAP_MAX_SEGMENT_REPEATS", 1, "IRL_TRAP_MAX_SEGMENT_REPEATS"),
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
