"""URLs do not wait in a partial URLseen batch for ever while the crawl is busy.

Size merges a batch when a key bucket reaches r, the idle rule when BEAST runs dry with
room in RAM. A probe (2026-11-29) kept RAM full and BEAST busy with a spam farm's
over-budget backlog: 1 464 URLs of legitimate sites sat in URLseen's buckets for the last
six minutes of a seven-minute crawl. IRL_URLSEEN_MAX_BATCH_AGE bounds that wait.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from scrapy import Request

from tests.robots.fakes import FakeClock
from tests.scheduler.test_park_by_host import _close, _open


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1000.0)


def _busy_with_a_new_url(tmp_path: Path, clock: FakeClock, **settings: Any) -> Any:
    sched, robots = _open(tmp_path, clock, tau_h=10, tau_s=1, **settings)
    sched.enqueue_request(Request("http://a.test/new"))  # filtered: waits in URLseen
    sched.ram_requests = 0  # RAM full: the idle rule does not merge
    return sched, robots


def _tick_for(sched: Any, clock: FakeClock, seconds: int) -> None:
    for _ in range(seconds):
        clock.now += 1
        sched._on_tick()


def test_a_partial_batch_is_merged_once_it_is_older_than_the_limit(tmp_path, clock):
    sched, robots = _busy_with_a_new_url(tmp_path, clock, IRL_URLSEEN_MAX_BATCH_AGE=30)
    _tick_for(sched, clock, 29)
    assert sched.urlseen.pending_tuples == 1 and sched.counts["stale_batch_merges"] == 0
    _tick_for(sched, clock, 3)
    assert sched.urlseen.pending_tuples == 0
    assert sched.counts["stale_batch_merges"] == 1
    assert sched.stats.get_value("scheduler/enqueued") == 1  # merged, kept: on its way
    _tick_for(sched, clock, 60)  # nothing pending: no more merges
    assert sched.counts["stale_batch_merges"] == 1
    _close(sched, robots)


def test_the_age_counts_from_the_last_merge_of_any_kind(tmp_path, clock):
    sched, robots = _busy_with_a_new_url(tmp_path, clock, IRL_URLSEEN_MAX_BATCH_AGE=30)
    _tick_for(sched, clock, 20)
    sched.urlseen.merge()  # a bucket filled up, say
    sched._deliver_slice()
    sched.enqueue_request(Request("http://a.test/newer"))
    _tick_for(sched, clock, 25)  # 25 s since that merge
    assert sched.urlseen.pending_tuples == 1 and sched.counts["stale_batch_merges"] == 0
    _tick_for(sched, clock, 8)
    assert sched.urlseen.pending_tuples == 0 and sched.counts["stale_batch_merges"] == 1
    _close(sched, robots)


def test_zero_leaves_the_batch_to_size_and_idle_merges(tmp_path, clock):
    sched, robots = _busy_with_a_new_url(tmp_path, clock, IRL_URLSEEN_MAX_BATCH_AGE=0)
    _tick_for(sched, clock, 120)
    assert sched.urlseen.pending_tuples == 1 and sched.counts["stale_batch_merges"] == 0
    _close(sched, robots)
