"""One call of the scheduler's lazy loading moves at most FILL_SLICE records into RAM,
and asks the engine to call again while RAM has room: a resume loaded all 5 000 in one
call, and the reactor stood still for 2 s before the first request (2026-11-28)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from scrapy import Request

from scrapy_irl.scheduler.scheduler import FILL_SLICE
from tests.robots.fakes import FakeClock, FakeWeb
from tests.scheduler.fake_clock import open_on_fake_clock
from tests.scheduler.test_scheduler_lifecycle import scheduler


class WakeLog:
    def __init__(self) -> None:
        self.asked: list[float] = []

    def wake_at(self, when: float) -> None:
        self.asked.append(when)

    def cancel(self) -> None:
        pass


def _open(tmp_path: Path, clock: FakeClock) -> tuple[Any, Any]:
    sched = scheduler(JOBDIR=str(tmp_path / "job"), IRL_HOSTS_DIR=str(tmp_path / "hosts"),
                      ROBOTSTXT_OBEY=True, IRL_FRONTIER_RAM_REQUESTS=5000,
                      IRL_RAM_BACKLOG_SECONDS=0)  # fmt: skip
    robots = open_on_fake_clock(sched, clock, FakeWeb().download)
    sched._next_forget = math.inf  # the hosts stay (this fake has no DNS to ask)
    return sched, robots


def _to_beast(sched: Any) -> None:
    sched.urlseen.merge()  # through URLseen ...
    sched.star.flush()  # ... and STAR into BEAST


def test_a_fill_moves_one_slice_and_asks_to_be_called_again(tmp_path: Path) -> None:
    clock = FakeClock(1000.0)
    sched, robots = _open(tmp_path, clock)
    for n in range(50):
        sched._add_host(f"h{n}.example", f"10.0.1.{n}", None)
    total = 3 * FILL_SLICE + 10
    for i in range(total):
        sched.enqueue_request(Request(f"http://h{i % 50}.example/p{i}"))
    _to_beast(sched)
    assert sched.beast.readable == total and sched._ram_items() == 0
    sched.waker = wake = WakeLog()
    sched._fill()
    assert sched.beast.readable == total - FILL_SLICE and wake.asked == [clock.now]
    assert FILL_SLICE <= sched._ram_items() <= FILL_SLICE + 50  # (+ robots.txt markers)
    for _ in range(3):
        sched._fill()
    assert sched.beast.readable == 0 and sched._ram_items() >= total
    assert len(wake.asked) == 3  # none once BEAST had nothing more to give
    sched.close("finished")
    robots._spider_closed()


def test_the_ticks_sweep_takes_back_one_slice_at_most(tmp_path: Path) -> None:
    # A review: the tick's sweep of the parked store drained without the slice, so a
    # resume's first tick could still move a whole RAM's worth in one reactor turn.
    clock = FakeClock(1000.0)
    sched, robots = _open(tmp_path, clock)
    total = 4 * FILL_SLICE
    for i in range(total):
        sched.enqueue_request(Request(f"http://127.0.0.9/p{i}"))
    _to_beast(sched)
    while (got := sched.beast.pop()) is not None:  # what a resume finds: all parked
        sched.parked.park("127.0.0.9", "127.0.0.9", got[0])
        sched.beast.done(got[1])
    assert sched.beast.readable == 0 and sched.parked.available == total
    sched.waker = wake = WakeLog()
    assert sched._sweep_parked() == FILL_SLICE
    sched._fill()  # the tick's next step; more for the IP than a slice: asks for a call
    assert sched.parked.out == 2 * FILL_SLICE and wake.asked
    for _ in range(4):
        sched._fill()
    assert sched.parked.out == total
    sched.close("finished")
    robots._spider_closed()


def test_a_fill_that_went_on_with_a_re_read_of_qf_asks_to_be_called_again(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # BEAST re-reads a large Q_F a slice per pop (2026-11-29); a fill that got nothing
    # but a slice must still ask the engine back, or the re-read waits for its heartbeat.
    monkeypatch.setattr("scrapy_irl.scheduler.beast.SPLIT_SLICE", 10)
    clock = FakeClock(1000.0)
    sched, robots = _open(tmp_path, clock)
    sched._add_host("h.example", "10.0.1.1", None)
    total = 100
    for i in range(total):
        sched.enqueue_request(Request(f"http://h.example/p{i}"))
    _to_beast(sched)
    records = []
    while (got := sched.beast.pop()) is not None:
        records.append(got[0])
        sched.beast.done(got[1])
    for admitted, record in enumerate(records, start=5):
        sched.beast.push(record, 1, admitted)  # far over budget: all in Q_F
    assert sched.beast.stats()["qf"] == total
    sched.waker = wake = WakeLog()
    calls = 0
    while sched._ram_items() < total and calls < 100:
        asked = len(wake.asked)
        sched._fill()
        calls += 1
        assert len(wake.asked) == asked + 1 or sched._ram_items() >= total
    assert sched._ram_items() >= total and calls > total // 10
    sched.close("finished")
    robots._spider_closed()
