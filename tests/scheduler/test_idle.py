"""The idle meter and the politeness query it relies on."""

from __future__ import annotations

from twisted.internet import task

from scrapy_irl.scheduler.idle import IdleMeter
from scrapy_irl.scheduler.politeness import Politeness


def test_meter_counts_only_samples_with_a_free_slot_and_due_work() -> None:
    due = {0.0: True, 1.0: True, 2.0: False, 3.0: False}
    free = iter([True, False, True, False])
    meter = IdleMeter(lambda now: due[now], lambda: next(free), lambda: 0)
    results = [meter.sample(t) for t in (0.0, 1.0, 2.0, 3.0)]
    assert results == [True, False, False, False]
    assert (meter.samples, meter.free, meter.due, meter.idle_while_due) == (4, 2, 2, 1)
    assert meter.share == 0.25 and meter.stalled == 0  # no call_later: no stall check
    assert IdleMeter(lambda now: True, lambda: True, lambda: 0).share == 0.0  # no samples yet


def test_a_stall_is_due_work_with_nothing_handed_out_until_the_recheck() -> None:
    clock = task.Clock()
    handed = [0]
    due = [True]
    meter = IdleMeter(lambda now: due[0], lambda: True, lambda: handed[0],
                      call_later=clock.callLater, confirm=0.05)  # fmt: skip
    meter.sample(0.0)
    clock.advance(0.05)  # nothing handed out, still due: a stall
    meter.sample(0.1)
    handed[0] += 1  # the engine reacted within the confirm window: latency, not a stall
    clock.advance(0.05)
    meter.sample(0.2)
    due[0] = False  # the due work went away (e.g. handed out and the host is busy again)
    clock.advance(0.05)
    assert (meter.samples, meter.idle_while_due, meter.stalled) == (3, 3, 1)
    assert meter.stalled_share == 1 / 3


def test_due_now_follows_host_and_ip_delays() -> None:
    polite = Politeness(max_in_flight_per_ip=1)
    assert not polite.due_now(0.0)  # nothing queued
    a = polite.add_host("a.example", "10.0.0.1", host_delay=5.0, ip_delay=1.0)
    polite.add_host("b.example", "10.0.0.1", host_delay=5.0, ip_delay=1.0)
    polite.push("a.example", "a1")
    polite.push("a.example", "a2")
    polite.push("b.example", "b1")
    assert polite.due_now(0.0)
    host, item = polite.pop(0.0)
    assert (host.name, item) == ("a.example", "a1")
    # one in flight on the IP (its limit): nothing is due, whatever the time
    assert not polite.due_now(100.0)
    polite.finished(a, 0.5)
    assert not polite.due_now(0.9)  # IP delay (1 s) not over
    assert polite.due_now(1.0)  # b is due; a waits for its host delay
    host, item = polite.pop(1.0)
    assert item == "b1"
    polite.finished(host, 1.2)
    assert not polite.due_now(4.9)  # only a2 left, host delay 5 s from 0.0
    assert polite.due_now(5.0)
    # due_now is a question: the item is still there to pop
    assert polite.pop(5.0)[1] == "a2"


def test_samples_while_inactive_are_not_counted() -> None:
    running = [False]
    meter = IdleMeter(lambda now: True, lambda: True, lambda: 0, active=lambda: running[0])
    assert meter.sample(0.0) is False and meter.samples == 0  # closing: not idling
    running[0] = True
    assert meter.sample(0.1) is True and meter.samples == 1


def test_a_late_recheck_looks_at_the_time_it_runs() -> None:
    clock = task.Clock()
    # due at the sample, not 0.05 s later, due again from 0.2 s on (another host)
    meter = IdleMeter(lambda now: now < 0.01 or now > 0.2, lambda: True, lambda: 0,
                      call_later=clock.callLater, confirm=0.05, clock=clock.seconds)  # fmt: skip
    meter.sample(clock.seconds())
    clock.advance(0.3)  # a busy reactor runs the recheck late: work is due then
    assert meter.stalled == 1


def test_a_reactor_that_stood_still_is_timed_as_a_pause() -> None:
    """LoopingCall skips the samples a blocked reactor missed: the meter times the gap."""
    clock = task.Clock()
    meter = IdleMeter(lambda now: False, lambda: True, lambda: 0, interval=0.1)
    loop = task.LoopingCall(lambda: meter.sample(clock.seconds()))
    loop.clock = clock
    loop.start(0.1, now=False)
    clock.pump([0.1] * 10)  # on time: no pause
    assert (meter.samples, meter.pauses) == (10, 0)
    clock.advance(0.1 + 0.001)  # late by a millisecond: jitter, not a pause
    clock.advance(2.5)  # a 2.5 s merge: one late sample instead of 25
    clock.pump([0.1] * 5)
    loop.stop()
    assert meter.samples == 17
    assert meter.pauses == 1
    assert 2.3 < meter.longest_pause < 2.6 and meter.paused_seconds == meter.longest_pause


def test_a_stretch_not_sampled_on_purpose_is_no_pause() -> None:
    running = [True]
    meter = IdleMeter(lambda now: False, lambda: True, lambda: 0,
                      active=lambda: running[0], interval=0.1)  # fmt: skip
    meter.sample(0.0)
    running[0] = False  # the spider closes: no samples for 10 s
    meter.sample(5.0)
    running[0] = True
    meter.sample(10.0)
    meter.sample(10.1)
    assert (meter.samples, meter.pauses) == (3, 0)
    meter.sample(11.1)
    assert meter.pauses == 1 and abs(meter.paused_seconds - 0.9) < 1e-9
