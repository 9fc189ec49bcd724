"""The progress line reports pages/s and the IRL frontier."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest
from scrapy.exceptions import NotConfigured
from scrapy.settings import Settings
from scrapy.statscollectors import MemoryStatsCollector

from scrapy_irl.progress import IrlProgress, frontier_summary


def crawler(**settings):
    c = SimpleNamespace(settings=Settings(settings), spider=None,
                        signals=SimpleNamespace(connect=lambda *a, **k: None))
    c.stats = MemoryStatsCollector(c)
    return c


def test_line_has_rate_and_frontier():
    c = crawler()
    ext = IrlProgress(c, 10.0, bar=False)
    c.stats.set_value("response_received_count", 50)
    c.stats.set_value("robotstxt/response_count", 12)
    for key, value in {"irl_sched/beast/j": 4, "irl_sched/beast/queued": 120, "irl_sched/beast/qf": 7,
                       "irl_sched/urlseen_pending": 33, "irl_sched/beast/placed_in_qf": 9,
                       "irl_sched/robots_waiting_origins": 2, "irl_sched/beast/parked": 1,
                       "irl_sched/parked/stored": 7, "irl_sched/parked/out": 3,
                       "irl_sched/beast/retrying": 3}.items():
        c.stats.set_value(key, value)
    line = ext.line()
    assert line.startswith("50 pages (") and "12 of them robots.txt" in line
    assert "BEAST 120 (j=4, Q_F 7, parked 5, waiting for a retry 3)" in line
    assert "urlseen 33" in line
    assert "deferred by budget 9" in line and "robots.txt 2 origins" in line


def test_without_irl_scheduler():
    assert frontier_summary({}) == "frontier: (Scrapy scheduler)"


def test_bar_redraws_and_clears():
    c = crawler()
    stream = io.StringIO()
    ext = IrlProgress(c, 10.0, bar=True, stream=stream)
    ext.draw_bar()
    assert stream.getvalue().startswith("\r[scrapy-irl]")
    ext._clear_bar()
    assert stream.getvalue().endswith("\r")


@pytest.mark.parametrize("settings", [{"IRL_PROGRESS_ENABLED": False}, {"IRL_PROGRESS_INTERVAL": 0}])
def test_disabled(settings):
    with pytest.raises(NotConfigured):
        IrlProgress.from_crawler(crawler(**settings))


@pytest.mark.parametrize("value", [-1, "often", float("nan")])
def test_a_bad_interval_is_an_error_naming_the_setting(value):
    with pytest.raises(ValueError, match="IRL_PROGRESS_INTERVAL"):
        IrlProgress.from_crawler(crawler(IRL_PROGRESS_INTERVAL=value))


def test_off_when_scrapys_periodic_stats_are_off():
    """``scrapy shell`` sets LOGSTATS_INTERVAL = 0 to keep its console clean; the progress
    line was logged into it every 10 s and the bar redrawn under the prompt every second."""
    with pytest.raises(NotConfigured):
        IrlProgress.from_crawler(crawler(LOGSTATS_INTERVAL=0))
    assert IrlProgress.from_crawler(crawler(LOGSTATS_INTERVAL=0, IRL_PROGRESS_INTERVAL=5))
    assert IrlProgress.from_crawler(crawler())


def test_off_under_scrapy_shell_with_the_add_on_too():
    # The add-on writes every IRL_* default at Scrapy's "default" priority: that copy
    # read as the project's own choice, and the line and bar ran under the shell.
    from scrapy_irl.addon import _write_defaults

    shell = crawler()
    shell.settings.set("LOGSTATS_INTERVAL", 0, priority="command")
    _write_defaults(shell.settings)
    with pytest.raises(NotConfigured):
        IrlProgress.from_crawler(shell)


def test_no_bar_when_scrapy_logs_nothing(monkeypatch):
    """``scrapy check`` sets LOG_ENABLED = False and prints its results to stderr: in a
    terminal the bar was drawn between its dots."""
    import sys

    monkeypatch.setattr(sys, "stderr", SimpleNamespace(isatty=lambda: True))
    assert IrlProgress.from_crawler(crawler()).bar
    assert not IrlProgress.from_crawler(crawler(LOG_ENABLED=False)).bar
