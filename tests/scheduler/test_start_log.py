"""The politeness log: last starts of hosts and IPs survive a restart (and a kill -9)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from scrapy_irl.scheduler.politeness import Politeness
from scrapy_irl.scheduler.start_log import PolitenessMemory, StartLog


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def opened(path: Path, wall: Clock, horizon: float = 30.0) -> StartLog:
    log = StartLog(path, horizon=horizon, wall=wall)
    log.rewrite([], [])  # what PolitenessMemory does at open: the log is appendable
    return log


def test_a_missing_log_recalls_nothing(tmp_path: Path) -> None:
    recalled = StartLog(tmp_path / "p.log", horizon=10).load()
    assert recalled.hosts == {} and recalled.ips == {} and recalled.in_flight == 0


def test_ended_requests_are_recalled_until_their_delay_cannot_matter(tmp_path: Path) -> None:
    wall = Clock(1000.0)
    log = opened(tmp_path / "p.log", wall, horizon=30)
    log.started("a.test", "10.0.0.1")
    log.ended("a.test", "10.0.0.1", 1000.5, 1000.6)
    log.started("old.test", "10.0.0.2")
    log.ended("old.test", "10.0.0.2", 965.0, 965.0)  # 35 s before the restart below
    log.close()
    wall.now = 1002.0
    recalled = StartLog(tmp_path / "p.log", horizon=30, wall=wall).load()
    assert recalled.hosts == {"a.test": 1000.5}
    assert recalled.ips == {"10.0.0.1": 1000.6}
    assert recalled.in_flight == 0


def test_a_request_in_flight_at_the_kill_counts_as_started_at_the_restart(tmp_path: Path) -> None:
    wall = Clock(1000.0)
    log = opened(tmp_path / "p.log", wall)
    log.started("a.test", "10.0.0.1")
    log.ended("a.test", "10.0.0.1", 1000.0, 1000.0)
    log.started("a.test", "10.0.0.1")  # no end: killed meanwhile
    log.started("b.test", "10.0.0.1")
    log.ended("b.test", "10.0.0.1", 1001.0, 1001.0)
    log.started("robots.test", "10.0.0.3", robots=True)  # robots.txt: a request to its host too
    log.close()
    wall.now = 1003.0
    recalled = StartLog(tmp_path / "p.log", horizon=30, wall=wall).load()
    assert recalled.hosts == {"a.test": 1003.0, "b.test": 1001.0, "robots.test": 1003.0}
    # a.test's request is still open on 10.0.0.1, whatever b.test's end says
    assert recalled.ips == {"10.0.0.1": 1003.0, "10.0.0.3": 1003.0}
    assert recalled.in_flight == 2


def test_torn_tail_and_damaged_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "p.log"
    lines = [
        json.dumps(["e", "a.test", "10.0.0.1", 999.0, 999.0]),
        "garbage",
        json.dumps(["e", "b.test", None, "soon", None]),  # wrong type
        json.dumps(["s", "c.test"]),  # too short
        json.dumps(["e", "d.test", "10.0.0.4", 998.0, None]),
    ]
    path.write_bytes(("\n".join(lines) + "\n").encode() + b'["s","torn.te')
    recalled = StartLog(path, horizon=30, wall=Clock(1000.0)).load()
    assert recalled.hosts == {"a.test": 999.0, "d.test": 998.0}
    assert recalled.damaged_lines == 3
    assert recalled.torn_tail


def test_a_clock_set_back_cannot_push_a_host_into_the_far_future(tmp_path: Path) -> None:
    path = tmp_path / "p.log"
    path.write_text(json.dumps(["e", "a.test", "10.0.0.1", 5000.0, 5000.0]) + "\n")
    recalled = StartLog(path, horizon=30, wall=Clock(1000.0)).load()
    assert recalled.hosts == {"a.test": 1000.0} and recalled.ips == {"10.0.0.1": 1000.0}


def test_rewrite_keeps_what_the_heaps_hold_and_nothing_older(tmp_path: Path) -> None:
    wall = Clock(1000.0)
    log = opened(tmp_path / "p.log", wall)
    for i in range(500):
        log.started(f"h{i}.test", "10.0.0.1")
        log.ended(f"h{i}.test", "10.0.0.1", 900.0 + i / 10, 900.0 + i / 10)
    big = log.size
    log.rewrite([("a.test", "10.0.0.1", 999.0, False), ("b.test", "10.0.0.2", 950.0, True),
                 ("stale.test", "10.0.0.1", 960.0, False)],
                [("10.0.0.1", 999.5), ("10.0.0.2", 999.0)])  # fmt: skip
    assert log.size < big / 20
    log.ended("b.test", "10.0.0.2", 1000.0, 1000.0)  # appends go to the new file
    log.close()
    assert not (tmp_path / "p.tmp").exists()  # renamed over the log
    recalled = StartLog(tmp_path / "p.log", horizon=30, wall=wall).load()
    assert recalled.hosts == {"a.test": 999.0, "b.test": 1000.0}
    assert recalled.ips == {"10.0.0.1": 999.5, "10.0.0.2": 1000.0}
    assert recalled.in_flight == 0


def test_a_kill_during_a_rewrite_leaves_the_old_log_readable(tmp_path: Path) -> None:
    wall = Clock(1000.0)
    log = opened(tmp_path / "p.log", wall)
    log.ended("a.test", "10.0.0.1", 999.0, 999.0)
    log.close()
    (tmp_path / "p.tmp").write_bytes(b'["e","half')  # the rewrite's file, killed before the rename
    recalled = StartLog(tmp_path / "p.log", horizon=30, wall=wall).load()
    assert recalled.hosts == {"a.test": 999.0}


def test_a_failed_write_is_counted_and_logged_once_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = opened(tmp_path / "p.log", Clock(1000.0))
    assert log._fd is not None
    os.close(log._fd)  # every write now fails with EBADF
    with caplog.at_level(logging.ERROR):
        log.started("a.test", "10.0.0.1")
        log.ended("a.test", "10.0.0.1", 1000.0, 1000.0)
    assert log.write_errors == 2
    assert sum("Cannot write" in r.getMessage() for r in caplog.records) == 1
    log._fd = None


def run(tmp_path: Path, wall: Clock, mono: Clock) -> tuple[Politeness, PolitenessMemory]:
    polite = Politeness(max_in_flight_per_ip=1)
    memory = PolitenessMemory(StartLog(tmp_path / "p.log", horizon=30, wall=wall), polite, mono)
    return polite, memory


def test_a_restarted_crawl_waits_out_the_delay_of_the_last_request_before_the_stop(
    tmp_path: Path,
) -> None:
    """The end-to-end rule with the heaps: a second run (another monotonic clock) cannot
    fetch a host sooner than tau_h after the first run's last request to it, nor its IP
    sooner than tau_s."""
    wall, mono = Clock(1000.0), Clock(50.0)
    polite, memory = run(tmp_path, wall, mono)
    host = polite.add_host("a.test", "10.0.0.1", 8.0, 2.0)
    memory.apply(host)
    polite.push("a.test", "page")
    got = polite.pop(mono.now)
    assert got is not None
    memory.started(host, robots=False)
    mono.now += 0.5
    wall.now += 0.5
    polite.finished(host, mono.now)  # the heaps count the next gap from 50.0 (the start)
    memory.ended(host)
    memory.log.close()  # the kill: nothing more written

    wall.now, mono = 1003.0, Clock(7.0)  # restarted 2.5 s later, in a new process
    polite, memory = run(tmp_path, wall, mono)
    assert memory.loaded.hosts == {"a.test": 1000.0}
    host = polite.add_host("b.test", "10.0.0.1", 8.0, 2.0)  # another host on that IP
    memory.apply(host)
    host = polite.add_host("a.test", "10.0.0.1", 8.0, 2.0)
    memory.apply(host)
    polite.push("a.test", "again")
    assert polite.pop(mono.now) is None
    assert polite.next_due() == pytest.approx(7.0 - 3.0 + 8.0)  # 8 s after the old start
    assert polite.pop(11.9) is None
    assert polite.pop(12.0) is not None
    assert memory.stats()["applied"] == 2  # a.test's host start, 10.0.0.1's IP start


def test_recalls_for_hosts_never_seen_again_are_forgotten_after_the_horizon(tmp_path: Path) -> None:
    wall, mono = Clock(1000.0), Clock(0.0)
    polite, memory = run(tmp_path, wall, mono)
    host = polite.add_host("a.test", "10.0.0.1", 8.0, 2.0)
    polite.push("a.test", "page")
    polite.pop(0.0)
    memory.started(host, robots=False)
    memory.log.close()  # killed with the request in flight

    polite, memory = run(tmp_path, Clock(1001.0), Clock(100.0))
    assert memory.loaded.in_flight == 1 and memory.hosts == {"a.test": 100.0}
    memory.clock = Clock(129.0)
    memory.tick()
    assert memory.hosts == {"a.test": 100.0}  # within the 30 s horizon
    memory.clock = Clock(131.0)
    memory.tick()
    assert memory.hosts == {} and memory.ips == {}
    memory.close()
    assert StartLog(tmp_path / "p.log", horizon=30, wall=Clock(1031.0)).load().hosts == {}


def test_missing_or_damaged_log_of_a_resumed_frontier_is_a_warning_not_a_refusal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.scheduler.test_scheduler_lifecycle import opened as opened_scheduler

    settings = {"JOBDIR": str(tmp_path / "job"), "IRL_HOSTS_DIR": str(tmp_path / "hosts")}

    def start_and_close():  # type: ignore[no-untyped-def]
        scheduler = opened_scheduler(**settings)
        scheduler.close("finished")
        return scheduler

    start_and_close()
    log = tmp_path / "job" / "irl" / "politeness.log"
    assert log.exists()
    log.unlink()
    with caplog.at_level(logging.WARNING):
        start_and_close()
    assert any("politeness.log is missing" in r.getMessage() for r in caplog.records)
    log.write_text("not json\n" + json.dumps(["e", "a.test", "10.0.0.1", 9e12, None]) + "\n")
    caplog.clear()
    with caplog.at_level(logging.INFO):
        scheduler = start_and_close()
    assert any("has 1 damaged lines (skipped)" in r.getMessage() for r in caplog.records)
    assert scheduler.memory is not None and scheduler.memory.loaded.hosts.keys() == {"a.test"}
    assert scheduler.memory.blind_until > scheduler.memory.loaded_at  # unnamed hosts wait
    log.write_text(json.dumps(["e", "a.test", "10.0.0.1", 9e12, None]) + '\n["e", "b.te')
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        scheduler = start_and_close()
    assert any("ends in a cut line" in r.getMessage() for r in caplog.records)
    assert scheduler.memory is not None and scheduler.memory.blind_until > scheduler.memory.loaded_at
    window = scheduler.memory.blind_until - scheduler.memory.blind_since
    caplog.clear()
    with caplog.at_level(logging.INFO):  # rewritten whole at that start: no warning
        again = start_and_close()
    assert not any("politeness.log" in r.getMessage() for r in caplog.records
                   if r.levelno >= logging.WARNING)  # fmt: skip
    assert any("was incomplete at an earlier start" in r.getMessage() for r in caplog.records)
    # but the blind window opened by the cut log runs on (it dropped at that rewrite
    # until 2026-11-29: a second stop within it forgot the hosts the cut log had lost)
    assert again.memory is not None
    assert again.memory.blind_until - again.memory.blind_since == pytest.approx(window, abs=0.01)
    assert again.memory.blind_since < again.memory.loaded_at


def fetched(polite: Politeness, memory: PolitenessMemory, names: list[str], now: float) -> None:
    """Each host (one IP apiece) takes one request at ``now``, over at once, all logged."""
    for i, name in enumerate(names):
        memory.apply(polite.add_host(name, f"10.1.{i // 250}.{i % 250}", 8.0, 2.0))
        polite.push(name, "page")
    for _ in names:
        got = polite.pop(now)
        assert got is not None
        memory.started(got[0], robots=False)
        polite.finished(got[0], now)
        memory.ended(got[0])


def test_a_rewrite_larger_than_the_limit_is_not_repeated_at_every_tick(tmp_path: Path) -> None:
    """With many hosts in the heaps a rewrite alone can pass ``max_bytes``: the next one
    waits until as many bytes again were appended (amortised O(1) per event), instead of
    rewriting every host at every tick."""
    wall, mono = Clock(1000.0), Clock(50.0)
    polite = Politeness(max_in_flight_per_ip=1)
    log = StartLog(tmp_path / "p.log", horizon=30, max_bytes=4096, wall=wall)
    memory = PolitenessMemory(log, polite, mono)
    fetched(polite, memory, [f"h{i}.test" for i in range(300)], mono.now)
    memory.tick()
    rewritten = log.size
    assert log.rewrites == 2 and rewritten > log.max_bytes  # at open, then past max_bytes
    for _ in range(5):
        memory.tick()
    assert log.rewrites == 2
    host = polite.hosts["h0.test"]
    while log.size <= 2 * rewritten:  # appends: the next rewrite comes after as many bytes
        memory.ended(host)
    memory.tick()
    assert log.rewrites == 3
    memory.close()


def test_brackets_nested_deep_are_a_damaged_line_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "p.log"
    path.write_bytes(b"[" * 100_000 + b"\n" + json.dumps(["e", "a.test", None, 999.0, None]).encode() + b"\n")
    recalled = StartLog(path, horizon=30, wall=Clock(1000.0)).load()
    assert recalled.hosts == {"a.test": 999.0} and recalled.damaged_lines == 1


def test_a_huge_damaged_line_is_skipped_in_bounded_ram(tmp_path: Path) -> None:
    """A log is at most a few MiB; one of gigabytes (NUL bytes of a lost tail, a runaway
    line) must not be read into RAM whole, nor cost the good lines after it."""
    import tracemalloc

    path = tmp_path / "p.log"
    huge = 24 << 20
    with open(path, "wb") as handle:
        handle.write(b"\x00" * huge + b"\n")
        handle.write(json.dumps(["e", "a.test", "10.0.0.1", 999.0, 999.0]).encode() + b"\n")
        handle.write(b"x" * huge)  # and a huge torn tail
    tracemalloc.start()
    try:
        recalled = StartLog(path, horizon=30, wall=Clock(1000.0)).load()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert recalled.hosts == {"a.test": 999.0} and recalled.ips == {"10.0.0.1": 999.0}
    assert recalled.damaged_lines == 1 and recalled.torn_tail
    assert peak < huge / 4


def test_a_wall_clock_step_during_the_run_does_not_age_the_logged_starts(tmp_path: Path) -> None:
    """The wall clock jumps forward mid-run (an NTP correction, a suspended machine whose
    monotonic clock stood still); a request after the jump is logged at its wall time, so
    a run restarted just after it still waits tau_h."""
    wall, mono = Clock(1000.0), Clock(50.0)
    polite, memory = run(tmp_path, wall, mono)
    wall.now += 3600.0
    fetched(polite, memory, ["a.test"], mono.now)
    started_at = wall.now
    memory.log.close()  # the kill
    wall.now += 2.0
    recalled = StartLog(tmp_path / "p.log", horizon=30, wall=wall).load()
    assert recalled.hosts == {"a.test": pytest.approx(started_at)}


def test_a_directory_in_place_of_the_log_costs_the_recall_not_the_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.scheduler.test_scheduler_lifecycle import opened as opened_scheduler

    settings = {"JOBDIR": str(tmp_path / "job"), "IRL_HOSTS_DIR": str(tmp_path / "hosts")}
    opened_scheduler(**settings).close("finished")
    log = tmp_path / "job" / "irl" / "politeness.log"
    log.unlink()
    log.mkdir()
    with caplog.at_level(logging.WARNING):
        scheduler = opened_scheduler(**settings)
    assert any("politeness.log cannot be read" in r.getMessage() for r in caplog.records)
    assert scheduler.memory is not None
    assert scheduler.memory.stats()["write_errors"] >= 1  # the rewrite at open failed
    host = scheduler._add_host("a.test", "10.0.0.1", None)
    scheduler.memory.started(host, robots=False)  # appends go nowhere, counted
    scheduler.close("finished")
    assert log.is_dir() and not (tmp_path / "job" / "irl" / "politeness.tmp").exists()


def test_a_robots_redirect_hop_is_logged_when_booked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hop books a start on its host and IP in the heaps (Politeness.reserve) outside
    _pop: a kill -9 right after it must still leave the booking in the log."""
    import time

    from twisted.internet import reactor

    from tests.scheduler.test_scheduler_lifecycle import opened as opened_scheduler

    monkeypatch.setattr(reactor, "callLater", lambda *args, **kwargs: None)
    scheduler = opened_scheduler(JOBDIR=str(tmp_path / "job"), IRL_HOSTS_DIR=str(tmp_path / "hosts"))
    try:
        scheduler._add_host("a.test", "10.0.0.1", None)
        scheduler._robots_hop_gate("https://a.test/robots.txt")
        booked = time.time()
        # killed here: read the log as the next start would
        recalled = StartLog(tmp_path / "job" / "irl" / "politeness.log", horizon=60).load()
    finally:
        scheduler.close("finished")
    assert recalled.hosts.keys() == {"a.test"} and recalled.ips.keys() == {"10.0.0.1"}
    assert recalled.hosts["a.test"] == pytest.approx(booked, abs=1.0)
    assert recalled.ips["10.0.0.1"] == pytest.approx(booked, abs=1.0)


def test_a_robots_redirect_hop_is_logged_again_when_it_ends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hop holds its host and IP until it leaves the downloader, and the next request
    to either waits from then: a kill -9 after its end must recall the end, not the
    booking. A hop booked on another address than its host's (an expired record) is
    logged on that address."""
    from unittest import mock

    from scrapy import Request
    from twisted.internet import reactor

    from tests.scheduler.test_scheduler_lifecycle import opened as opened_scheduler

    monkeypatch.setattr(reactor, "callLater", lambda *args, **kwargs: None)
    scheduler = opened_scheduler(JOBDIR=str(tmp_path / "job"), IRL_HOSTS_DIR=str(tmp_path / "hosts"))
    scheduler.crawler.engine = mock.MagicMock()
    clock = [1000.0]
    scheduler.clock = lambda: clock[0]
    try:
        scheduler._add_host("a.test", "10.0.0.1", None)
        scheduler._add_ip("10.0.0.9")
        hop = scheduler._hop_when_due(scheduler.polite.hosts["a.test"], "https://a.test/robots.txt",
                                      None, "10.0.0.9")  # fmt: skip
        assert hop is not None and scheduler.polite.ips["10.0.0.9"].in_flight == 1
        clock[0] = 1005.0
        scheduler._left(Request("https://a.test/robots.txt", meta={"dont_obey_robotstxt": True}))
        lines = [json.loads(line) for line in
                 (tmp_path / "job" / "irl" / "politeness.log").read_text().splitlines()]  # fmt: skip
    finally:
        scheduler.close("finished")
    hops = [line for line in lines if line[0] == "h"]
    assert [(h[1], h[2]) for h in hops] == [("a.test", "10.0.0.9")] * 2
    assert hops[1][3] - hops[0][3] == pytest.approx(5.0, abs=0.01)  # the end, 5 s later
    assert hops[1][4] - hops[0][4] == pytest.approx(5.0, abs=0.01)


def test_a_hop_neither_opens_nor_closes_a_request(tmp_path: Path) -> None:
    wall = Clock(1000.0)
    log = opened(tmp_path / "p.log", wall)
    log.started("a.test", "10.0.0.1")  # in flight at the kill
    log.hopped("a.test", "10.0.0.1", 999.0, 999.0)
    log.started("b.test", "10.0.0.2", robots=True)
    log.hopped("c.test", "10.0.0.3", 1000.0, 1000.0)
    log.close()
    wall.now = 1003.0
    recalled = StartLog(tmp_path / "p.log", horizon=30, wall=wall).load()
    assert recalled.hosts == {"a.test": 1003.0, "b.test": 1003.0, "c.test": 1000.0}
    assert recalled.ips == {"10.0.0.1": 1003.0, "10.0.0.2": 1003.0, "10.0.0.3": 1000.0}
    assert recalled.in_flight == 2 and recalled.damaged_lines == 0


def test_a_failed_rewrite_after_a_torn_tail_does_not_glue_the_next_event_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kill tore the last line; the rewrite at the next open failed (a full disk), so
    events were appended to the old log: the first was glued to the torn line and lost
    (a host in flight at a second kill was not recalled)."""
    path = tmp_path / "p.log"
    path.write_bytes(b'["e","a.test","10.0.0.1",999.0,999.0]\n["s","b.test","10.0')
    wall = Clock(1000.0)
    log = StartLog(path, horizon=30, wall=wall)
    assert log.load().torn_tail

    def full(self: StartLog, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(StartLog, "_replace", full)
        log.rewrite([], [])
    log._reopen()  # _replace reopens the old log when its rename did not happen
    log.started("c.test", "10.0.0.2")
    log.close()  # a second kill: c.test was in flight
    recalled = StartLog(path, horizon=30, wall=wall).load()
    assert recalled.hosts == {"a.test": 999.0, "c.test": 1000.0}
    assert recalled.damaged_lines == 1  # the torn line, now ended


def test_a_cut_log_makes_the_hosts_it_lost_wait_their_delay_from_the_start(tmp_path: Path) -> None:
    """A probe cut politeness.log to a tenth after a kill: the hosts named only in the
    lost part came back at once (48 of 354 sooner than their delay), without a word. A
    log known to be incomplete (cut, damaged, missing) now makes every host and IP it
    does not name count as fetched at the load, until the longest delay has passed."""
    wall, mono = Clock(1000.0), Clock(50.0)
    polite, memory = run(tmp_path, wall, mono)
    fetched(polite, memory, ["a.test", "b.test"], mono.now)
    memory.log.close()  # the kill
    path = tmp_path / "p.log"
    data = path.read_bytes()
    cut = data[: data.index(b'"b.test"') + 3]  # b.test's events gone, a.test's kept
    path.write_bytes(cut)

    wall.now, mono = 1001.0, Clock(10.0)  # restarted 1 s later
    polite, memory = run(tmp_path, wall, mono)
    assert memory.loaded.torn_tail and "b.test" not in memory.loaded.hosts
    memory.recall_incomplete(30.0)  # what the scheduler does for a cut log
    b = polite.add_host("b.test", "10.9.0.1", 8.0, 2.0)
    memory.apply(b)
    polite.push("b.test", "again")
    assert polite.next_due() == pytest.approx(10.0 + 8.0)  # tau_h from the load
    assert memory.stats()["blind_starts"] == 2  # b.test and its IP
    mono.now = 41.0  # past the longest delay: any start before the stop is older
    c = polite.add_host("c.test", "10.9.0.2", 8.0, 2.0)
    memory.apply(c)
    assert c.last_start == float("-inf") and memory.stats()["blind_starts"] == 2
    memory.close()


def test_a_start_outside_the_heaps_is_recalled_by_the_next_runs_heaps_and_send_plan(
    tmp_path: Path,
) -> None:
    """A file (``engine.download``) leaves the HTTP handler's send plan without the heaps:
    its start was not logged, so after a kill -9 the next run sent its host's next request
    at once. It is logged now, kept by a rewrite, and recalled by both the heaps and the
    next run's send plan."""
    from scrapy_irl.hosts.spacing import SendPlan, SendSpacing

    wall, mono = Clock(1000.0), Clock(50.0)
    polite, memory = run(tmp_path, wall, mono)
    memory.wire_started("cdn.test", "10.0.0.9")
    memory.wire_started("nameless.test", None)  # no address pinned yet
    memory.rewrite()  # a compaction in between keeps them
    memory.log.close()  # the kill

    wall.now, mono = 1002.0, Clock(7.0)  # restarted 2 s later
    polite, memory = run(tmp_path, wall, mono)
    assert memory.loaded.hosts == {"cdn.test": 1000.0, "nameless.test": 1000.0}
    assert memory.loaded.ips == {"10.0.0.9": 1000.0}
    assert memory.sent_before(host="cdn.test") == pytest.approx(5.0)
    assert memory.sent_before(ip="10.0.0.9") == pytest.approx(5.0)
    assert memory.sent_before(host="other.test") is None

    def recall(key: str) -> float | None:
        kind, _, name = key.partition(" ")
        return memory.sent_before(**{kind: name})

    plan = SendPlan(reactor=None, now=mono, recall=recall)
    assert plan._due([("host cdn.test", 6.0), ("ip 10.0.0.9", 1.0)]) == pytest.approx(11.0)
    assert plan.wait([("host other.test", 6.0)]) is None  # nothing recalled: goes now
    wire = SendSpacing(now=mono, recall=recall)  # the wire check, for an unpinned address
    assert wire.reserve([("ip 10.0.0.9", 3.0)]) == pytest.approx(1.0)  # 3 s after 5.0
    assert wire.reserve([("ip 10.0.0.8", 3.0)]) == 0.0

    host = polite.add_host("cdn.test", "10.0.0.9", 8.0, 2.0)
    memory.apply(host)
    polite.push("cdn.test", "page")
    assert polite.pop(mono.now) is None
    assert polite.next_due() == pytest.approx(5.0 + 8.0)  # tau_h after the file's start
    memory.close()


def test_wire_writes_are_written_once_per_host_at_a_compaction_and_expire_in_order(
    tmp_path: Path,
) -> None:
    """A host both in the heaps and written at the wire was written twice at each
    compaction, and tick() scanned every wire write each second (a review, 2026-11-29)."""
    wall, mono = Clock(1000.0), Clock(50.0)
    polite, memory = run(tmp_path, wall, mono)
    fetched(polite, memory, ["a.test"], mono.now)  # in the heaps, on 10.1.0.0
    mono.now += 1.0
    wall.now += 1.0
    memory.wire_started("a.test", "10.1.0.0", wait=0.5)  # its write, held 0.5 s at the wire
    memory.wire_started("files.test", None)
    memory.rewrite()
    lines = [json.loads(line) for line in (tmp_path / "p.log").read_text().splitlines()]
    assert sorted(line[1] or line[2] for line in lines) == ["10.1.0.0", "a.test", "files.test"]
    assert ["e", "a.test", None, 1001.5, None] in lines  # the later of heap and wire
    assert ["e", None, "10.1.0.0", None, 1001.5] in lines
    mono.now += 30.2  # past the 30 s horizon for files.test's write, not for a.test's
    memory.tick()  # a.test's, booked first, stands before it until its own time has passed
    assert list(memory.wire_hosts) == ["a.test", "files.test"]
    mono.now += 0.4
    memory.tick()
    assert not memory.wire_hosts and not memory.wire_ips
    memory.close()


def test_sent_before_reads_an_incomplete_log_blind_for_the_longest_delay(tmp_path: Path) -> None:
    """The send plan's recall follows the heaps' rule for a cut or damaged log: a host or
    IP it does not name counts as started at the load, until the longest delay passed."""
    wall, mono = Clock(1000.0), Clock(50.0)
    polite, memory = run(tmp_path, wall, mono)
    memory.recall_incomplete(30.0)
    assert memory.sent_before(host="unnamed.test") == 50.0
    assert memory.sent_before(ip="10.0.0.1") == 50.0
    mono.now = 80.0
    assert memory.sent_before(host="unnamed.test") is None
    assert memory.stats()["blind_starts"] == 0  # the heaps count theirs; the plan's are not
    memory.close()


def test_a_second_stop_within_an_incomplete_logs_blind_window_keeps_it(tmp_path: Path) -> None:
    """A probe (2026-11-29), by reading: a cut log makes the hosts it does not name wait
    their delay from the load, but the load's rewrite left the window out, so a second
    kill within it forgot those hosts: one never fetched in between went at once."""
    wall, mono = Clock(1000.0), Clock(50.0)
    polite, memory = run(tmp_path, wall, mono)
    memory.recall_incomplete(30.0)  # the first load found the log cut
    memory.rewrite()  # a compaction: the window stays in the log
    memory.log.close()  # the second kill, 0 s after

    wall.now, mono = 1005.0, Clock(500.0)  # restarted 5 s later, in a new process
    polite, memory = run(tmp_path, wall, mono)  # the log is whole now
    assert memory.loaded.blind == (1000.0, 1030.0)
    host = polite.add_host("lost.test", "10.9.0.3", 8.0, 2.0)
    memory.apply(host)
    polite.push("lost.test", "page")
    assert polite.next_due() == pytest.approx(495.0 + 8.0)  # tau_h from the first load
    assert memory.sent_before(host="other.test") == pytest.approx(495.0)
    mono.now = 526.0  # past 1030 in wall time: the window is over
    assert memory.sent_before(host="other.test") is None
    memory.rewrite()
    memory.close()
    assert StartLog(tmp_path / "p.log", horizon=30, wall=Clock(1031.0)).load().blind is None
