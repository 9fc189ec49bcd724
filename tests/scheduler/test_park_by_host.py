"""URLs parked for a backlog come back when their own host and IP have room, read from the
parked store by IP and host, not with the whole parked set every interval.

A long-run probe (2026-11-28, 28 minutes of simweb ``--size big``) found the parked set
re-read and parked again every IRL_RAM_BACKLOG_SECONDS: 61 000 URLs parked at minute 27,
re-parked at 63 000 a minute against 7 000-10 000 requests a minute. A first fix (due
times booked once, reverted) held an IP's other hosts behind a slow one and did not follow
a delay that dropped; these tests hold the store-based fix to both.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from scrapy import Request
from scrapy.http import Response

from scrapy_irl.scheduler.codec import record_url
from tests.robots.fakes import FakeClock, FakeWeb
from tests.scheduler.fake_clock import open_on_fake_clock
from tests.scheduler.test_robots_expiry import RULES, done
from tests.scheduler.test_scheduler_lifecycle import scheduler as new_scheduler


def _open(tmp_path: Path, clock: FakeClock, *, tau_h: float, tau_s: float,
          web: FakeWeb | None = None, **extra: Any) -> Any:  # fmt: skip
    """a.test and slow.test on one IP, robots.txt from ``web`` (by default both hosts'
    answer RULES)."""
    if web is None:
        web = FakeWeb({f"http://{h}/robots.txt": (200, RULES) for h in ("a.test", "slow.test")})
    sched = new_scheduler(
        JOBDIR=str(tmp_path / "job"), ROBOTSTXT_OBEY=True, IRL_HOSTS_DIR=str(tmp_path / "hosts"),
        IRL_HOST_DELAY=tau_h, IRL_HOST_DELAY_MIN=tau_h, IRL_IP_DELAY=tau_s,
        IRL_IP_DELAY_MIN=tau_s, IRL_POLITENESS_MARGIN=0, IRL_IDLE_SAMPLE_INTERVAL=0,
        IRL_ROBOTS_TTL=10_000, **extra,
    )  # fmt: skip
    robots = open_on_fake_clock(sched, clock, web.download)
    for host in ("a.test", "slow.test"):
        sched._add_host(host, "10.0.0.1", None)  # one server
    sched._next_forget = math.inf  # the ticks keep the hosts (this fake has no DNS to ask)
    return sched, robots


def _close(sched: Any, robots: Any, reason: str = "finished") -> None:
    sched.close(reason)
    robots._spider_closed()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1000.0)


def _crawl(sched: Any, clock: FakeClock, start: float, seconds: int, served: list[str], *,
           cached: bool = False) -> None:  # fmt: skip
    """Tick and hand out once a second, each page answered at once (from a cache, or
    fetched: then the host's next turn is tau_h later)."""
    for step in range(seconds):
        clock.now = start + step
        sched._on_tick()
        while (request := sched.next_request()) is not None:
            if request.url.endswith("/robots.txt"):
                continue
            served.append(request.url)
            if cached:
                sched._answered(Response(request.url, flags=["cached"]), request)
                continue
            sched._reached(request)
            sched._downloaded(Response(request.url), request)
            done(sched, request)


def _enqueue(sched: Any, host: str, count: int) -> list[str]:
    urls = [f"http://{host}/p{n}" for n in range(count)]
    for url in urls:
        sched.enqueue_request(Request(url, dont_filter=True))
    return urls


def _park_then_stop(tmp_path: Path, clock: FakeClock, seconds: int) -> tuple[list[str], list[str]]:
    """Crawl 100 URLs of one host at tau_h 10 s for ``seconds``, then stop gracefully:
    most of them are parked. Returns (the URLs, those served)."""
    sched, robots = _open(tmp_path, clock, tau_h=10, tau_s=1)
    urls = _enqueue(sched, "a.test", 100)
    served: list[str] = []
    _crawl(sched, clock, 1000.0, seconds, served)
    assert len(sched.parked) > 50  # most of them are parked
    _close(sched, robots, "shutdown")
    return urls, served


def test_a_parked_url_is_read_back_about_once_not_every_interval(tmp_path: Path, clock):
    sched, robots = _open(tmp_path, clock, tau_h=10, tau_s=1)
    urls = _enqueue(sched, "a.test", 300)
    served: list[str] = []
    _crawl(sched, clock, 1000.0, 900, served)
    # One page per tau_h (10 s): the host is never idle for want of a parked URL.
    assert len(served) >= 88 and len(set(served)) == len(served), len(served)
    # RAM holds 60 s of work (6 URLs); the others are parked once each, taken back as
    # the queue drains. Before, all were parked again every 60 s: 3984 parkings here.
    assert sched.counts["parked_backlog"] <= len(urls)
    assert sched.counts["parked_again"] == 0
    assert sched.parked.taken_total <= len(served) + 6
    assert sched.parked.available + sched.parked.out + len(served) == len(urls)
    _close(sched, robots)


def test_urls_answered_from_a_cache_come_back_at_the_next_tick(tmp_path: Path, clock):
    sched, robots = _open(tmp_path, clock, tau_h=10, tau_s=1)
    urls = _enqueue(sched, "a.test", 100)
    served: list[str] = []
    _crawl(sched, clock, 1000.0, 60, served, cached=True)
    assert sorted(served) == sorted(urls)
    _close(sched, robots)


def test_a_slow_host_does_not_hold_back_the_other_hosts_of_its_ip(tmp_path: Path, clock):
    # slow.test asks for 20 s between requests, a.test gets 2 s, both on one IP (tau_s
    # 0.5 s). The reverted due-time fix booked slow.test's URLs on the IP: a.test served
    # 30 of its 200 URLs in 900 s.
    sched, robots = _open(tmp_path, clock, tau_h=2, tau_s=0.5)
    sched.polite.hosts["slow.test"].delay = 20.0
    mine = _enqueue(sched, "a.test", 200)
    slow = _enqueue(sched, "slow.test", 200)
    served: list[str] = []
    _crawl(sched, clock, 1000.0, 900, served)
    assert sorted(u for u in served if "a.test" in u) == sorted(mine)  # all, in 400-ish s
    slow_served = [u for u in served if "slow.test" in u]
    assert 40 <= len(slow_served) <= 46 and set(slow_served) < set(slow)
    assert sched.counts["parked_again"] <= 2
    _close(sched, robots)


def test_a_host_whose_delay_drops_gets_its_parked_urls_sooner(tmp_path: Path, clock):
    # The reverted fix kept the due times booked at the old delay: 47 requests instead
    # of 284 in 300 s after tau_h fell from 10 s to 1 s.
    sched, robots = _open(tmp_path, clock, tau_h=10, tau_s=0.1)
    _enqueue(sched, "a.test", 400)
    served: list[str] = []
    _crawl(sched, clock, 1000.0, 60, served)
    before = len(served)
    assert before <= 7
    sched.polite.hosts["a.test"].delay = 1.0  # its PLD's budget grew (STAR)
    _crawl(sched, clock, 1060.0, 300, served)
    assert len(served) - before >= 280, len(served) - before
    assert len(set(served)) == len(served)
    _close(sched, robots)


def test_parked_urls_survive_a_graceful_stop_and_none_is_fetched_twice(tmp_path: Path, clock):
    urls, served = _park_then_stop(tmp_path, clock, seconds=120)
    again, robots = _open(tmp_path, clock, tau_h=0.1, tau_s=0.1)
    assert len(again.parked) + len(again.beast) == len(urls) - len(served)
    # the first tick takes back what the host has room for (all: tau_h is 0.1 s now);
    # this fake hands out once a second
    _crawl(again, clock, 2000.0, 100, served)
    assert sorted(served) == sorted(urls)
    assert again.counts["parked_again"] == 0
    _close(again, robots)


def test_every_host_of_a_busy_ip_gets_its_turn(tmp_path: Path, clock):
    # 20 hosts on one IP, more work than the IP can serve: taken back in key order
    # alone, the first hosts took the IP's whole allowance at every tick (a review:
    # 37 pages each for the first ten hosts, 1-4 for the last ten, in 400 s).
    sched, robots = _open(tmp_path, clock, tau_h=10, tau_s=1)
    hosts = [f"h{n:02d}.test" for n in range(20)]
    for host in hosts:
        sched._add_host(host, "10.0.0.2", None)
        _enqueue(sched, host, 40)
    served: list[str] = []
    _crawl(sched, clock, 1000.0, 400, served)
    per_host = [sum(1 for u in served if f"//{host}/" in u) for host in hosts]
    assert min(per_host) >= 10, per_host
    assert sched.counts["parked_again"] <= 20
    _close(sched, robots)


def test_a_back_off_on_a_busy_ip_does_not_park_the_same_urls_at_every_tick(tmp_path, clock):
    # The parking test adds a host's back-off to its IP's backlog: 40 s of work on the
    # IP plus a 30 s back-off parks a.test's URLs; taken back, they were parked again at
    # every tick (a review: 185 in 10 ticks).
    sched, robots = _open(tmp_path, clock, tau_h=1, tau_s=1)
    _enqueue(sched, "slow.test", 45)
    _enqueue(sched, "a.test", 1)
    _crawl(sched, clock, 1000.0, 3, [])  # both robots.txt fetched, a few pages served
    assert 38 <= sched.polite.ips["10.0.0.1"].queued <= 46
    sched.polite.hosts["a.test"].not_before = 1033.0
    _enqueue(sched, "a.test", 30)
    for step in range(10):  # nothing is handed out: the IP's backlog stays
        clock.now = 1003.0 + step
        sched._fill()  # what next_request would load
        sched._on_tick()
    assert sched.counts["parked_backlog"] >= 30 and sched.counts["parked_again"] == 0
    _close(sched, robots)


def test_a_run_without_parking_takes_back_what_an_earlier_run_parked(tmp_path: Path, clock):
    # IRL_RAM_BACKLOG_SECONDS = 0 parks nothing; the URLs an earlier run parked must
    # still come back (the horizon of 0 gave them no room: a crawl that never ended).
    urls, served = _park_then_stop(tmp_path, clock, seconds=30)
    again, robots = _open(tmp_path, clock, tau_h=0.1, tau_s=0.1, IRL_RAM_BACKLOG_SECONDS=0)
    _crawl(again, clock, 2000.0, 150, served)
    assert sorted(served) == sorted(urls) and not again.has_pending_requests()
    _close(again, robots)


def test_a_failed_beast_save_at_close_keeps_a_record_the_store_released(tmp_path, clock):
    # A URL taken back and moved to a BEAST retry queue is released from the store; if
    # BEAST's close then fails to save, the store must keep it (it was deleted, and the
    # URL lost: a review with a full disk at close).
    from scrapy_irl.scheduler.items import ParkedHeld

    sched, robots = _open(tmp_path, clock, tau_h=10, tau_s=1)
    _enqueue(sched, "a.test", 20)
    _crawl(sched, clock, 1000.0, 5, [])
    (key, host, record), = sched.parked.take("10.0.0.1", lambda name: 1, 1)
    sched._wait_for_retry(host, [ParkedHeld(record, key)], 30.0, "robots")
    assert sched.beast.retrying == 1

    def full_disk() -> None:
        raise OSError(28, "No space left on device")

    sched.beast.save = sched.beast.close = full_disk
    with pytest.raises(OSError, match="No space"):
        _close(sched, robots, "shutdown")
    again, robots = _open(tmp_path, clock, tau_h=10, tau_s=1)
    assert record in [r for *_, r in again.parked.scan()]
    _close(again, robots)


def test_a_store_damaged_under_a_write_closes_the_crawl_instead_of_dropping_urls(tmp_path):
    import plyvel

    from scrapy_irl.exceptions import FrontierCorruptionError
    from scrapy_irl.scheduler.parking import ParkedStore

    store = ParkedStore(tmp_path / "p")
    real = store._db

    class Damaged:  # LevelDB reports background damage on the next write
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def write_batch(self, *args: Any, **kwargs: Any) -> Any:
            raise plyvel.CorruptionError("Corruption: block checksum mismatch")

    store._db = Damaged()
    with pytest.raises(FrontierCorruptionError, match="parked store"):
        store.park("ip", "a.test", b"r")
    store._db = real
    store.close()


def test_urls_waiting_for_a_robots_txt_on_another_port_count_against_their_host(tmp_path, clock):
    # A host served on a port other than 80 or 443 has its own origin: the unparking
    # allowance counted only the default ports' robots.txt waits, so while its robots.txt
    # was on the wire, the URLs it took back found the host full and were parked again
    # at every tick (396 in one dev.py crawl, where simweb serves every host on a port).
    from twisted.internet.defer import Deferred

    robots_txt: Deferred = Deferred()
    web = FakeWeb({"http://p.test:8080/robots.txt": robots_txt})
    sched = new_scheduler(
        JOBDIR=str(tmp_path / "job"), ROBOTSTXT_OBEY=True, IRL_HOSTS_DIR=str(tmp_path / "hosts"),
        IRL_HOST_DELAY=10, IRL_HOST_DELAY_MIN=10, IRL_IP_DELAY=1, IRL_IP_DELAY_MIN=1,
        IRL_POLITENESS_MARGIN=0, IRL_IDLE_SAMPLE_INTERVAL=0, IRL_ROBOTS_TTL=10_000,
    )  # fmt: skip
    robots = open_on_fake_clock(sched, clock, web.download)
    sched._add_host("p.test", "10.0.0.1", None)
    sched._next_forget = math.inf
    urls = [f"http://p.test:8080/p{n}" for n in range(200)]
    for url in urls:
        sched.enqueue_request(Request(url, dont_filter=True))
    served: list[str] = []
    _crawl(sched, clock, 1000.0, 30, served)  # robots.txt is asked for, not answered
    assert web.urls == ["http://p.test:8080/robots.txt"] and not served
    assert sched.counts["parked_backlog"] >= 150
    assert sched.counts["parked_again"] == 0, sched.counts["parked_again"]
    assert sched._robots_waiting("p.test") == 6  # the horizon's 60 s at tau_h 10 s
    robots_txt.callback((200, RULES))
    _crawl(sched, clock, 1030.0, 100, served)
    assert 9 <= len(served) <= 11 and len(set(served)) == len(served)
    assert sched._robots_waiting("p.test") == 0
    _close(sched, robots)


def test_origin_host_spells_the_host_as_the_politeness_key():
    from scrapy_irl.robots.origin import origin_host, origin_of
    from scrapy_irl.scheduler.items import host_key
    from scrapy_irl.scheduler.items import url_parts

    for url in ("http://A.test:8080/x", "https://a.test/", "http://[::1]:81/", "http://[::1]/",
                "http://127.0.0.1:9/", "https://xn--bcher-kva.test./"):  # fmt: skip
        parts = url_parts(url)
        assert origin_host(origin_of(parts)) == host_key(parts.hostname), url


@given(items=st.integers(0, 20_000), delay=st.floats(0.001, 30.0),
       horizon=st.floats(0.5, 900.0), wait=st.one_of(st.just(0.0), st.floats(0.0, 120.0)))  # fmt: skip
@example(items=99, delay=0.6, horizon=60.0, wait=0.0)  # (60 - 59.4) / 0.6 = 1.0000000000000024
def test_the_allowance_is_exactly_what_the_parking_test_admits(items, delay, horizon, wait):
    # Found in dev.py crawl (2026-11-28): the allowance divided, and a rounding error
    # took back 2 URLs where the parking test admits 1; the second was parked again
    # (354 in 150 s). Item k joins when (items + k) * delay + wait < horizon.
    from scrapy_irl.scheduler.unparking import _fits

    n = _fits(items, delay, horizon, wait)
    if items * delay + wait >= horizon:
        assert n == 0
        return
    assert (items + n - 1) * delay + wait < horizon <= (items + n) * delay + wait


_KILLED_AFTER_PARKING = """
import json, os, sys
sys.path.insert(0, {root!r})
from pathlib import Path
from twisted.internet import reactor  # the default one, as pytest-twisted's
from tests.robots.fakes import FakeClock
from tests.scheduler.test_park_by_host import _crawl, _enqueue, _open
clock = FakeClock(1000.0)
sched, robots = _open(Path(sys.argv[1]), clock, tau_h=10, tau_s=1)
_enqueue(sched, "a.test", 100)
served = []
_crawl(sched, clock, 1000.0, {seconds}, served)  # each step: a tick (BEAST saved), then loads
{then}
print(json.dumps({{"served": served, "parked": len(sched.parked)}}))
sys.stdout.flush()
os._exit(0)  # killed: nothing closed, no tick after the loads that parked
"""


def _run_killed(directory: Path, seconds: int, then: str) -> dict[str, Any]:
    """Run _KILLED_AFTER_PARKING in a child process on ``directory``, ``then`` run before
    the kill; returns what it printed."""
    import json
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    child = _KILLED_AFTER_PARKING.format(root=str(root), seconds=seconds, then=then)
    out = subprocess.run([sys.executable, "-c", child, str(directory)], cwd=root, check=True,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(("seconds", "save_again"), [(1, False), (1, True), (25, False)])
def test_urls_parked_after_beasts_last_save_are_not_queued_twice_after_a_kill(
        tmp_path: Path, clock, seconds: int, save_again: bool) -> None:  # fmt: skip
    # A URL read from BEAST and parked stays owed to BEAST until its next save, but the
    # parked store's write survives a kill -9 at once: a kill in between left the URL in
    # both, and the restart fetched it twice (a 25-minute soak, 2026-11-29: 69 pages
    # fetched again 14-184 s after a first fetch soon after a resume). A save of BEAST
    # after the parks (``save_again``) counts them in the store's floor, not in its mark.
    then = "sched.beast.save()" if save_again else ""  # a save between ticks (STAR's)
    before = _run_killed(tmp_path, seconds, then)
    assert before["parked"] > 50  # most of them were parked after the last save
    served: list[str] = list(before["served"])
    again, robots = _open(tmp_path, clock, tau_h=0.1, tau_s=0.1)
    _crawl(again, clock, 5000.0, 400, served)
    assert not again.has_pending_requests()
    urls = [f"http://a.test/p{n}" for n in range(100)]
    # in flight at the kill (handed out, not finished) may come again; nothing else
    assert sorted(set(served)) == sorted(urls)
    twice = [u for u in set(served) if served.count(u) > 1]
    assert len(twice) <= 1, twice
    _close(again, robots)


_MOVE_ONE_TO_A_RETRY_QUEUE = """
from scrapy_irl.scheduler.items import ParkedHeld
sched._on_tick()  # the parks are flushed: the URL below is the store's only copy
(key, host, record), = sched.parked.take("10.0.0.1", lambda name: 1, 1)
sched._wait_for_retry(host, [ParkedHeld(record, key)], 30.0, "robots")
"""


_KILLED_RIGHT_AFTER_THE_SAVE = """
def killed_after_the_save():
    print(json.dumps({"served": served, "parked": len(sched.parked)}))
    sys.stdout.flush()
    os._exit(0)
sched.beast.after_save = killed_after_the_save
sched.beast.save()
"""


def _urls_held_after_the_kill(tmp_path: Path, clock: FakeClock, then: str) -> tuple[Any, Any]:
    """Run the killed child with ``then``, reopen, and check that the parked store and
    BEAST together hold each of the 100 URLs once; returns the reopened (sched, robots)."""
    before = _run_killed(tmp_path, 1, then)
    assert before["parked"] > 50
    again, robots = _open(tmp_path, clock, tau_h=0.1, tau_s=0.1)
    records = [r for *_, r in again.parked.scan()]  # (a restart reads retry queues at once)
    for _ in range(1000):  # bounded: BEAST holds 100 at most
        popped = again.beast.pop()
        if popped is None:
            break
        records.append(popped[0])
        again.beast.done(popped[1])
    urls = sorted(record_url(r) for r in records)
    assert urls == sorted(f"http://a.test/p{n}" for n in range(100))  # each once
    return again, robots


def test_a_parked_url_moved_to_a_retry_queue_between_ticks_is_queued_once_after_a_kill(
        tmp_path: Path, clock) -> None:  # fmt: skip
    # A URL taken back from the store and parked for a robots.txt retry in a BEAST retry
    # queue, then a save between ticks (STAR's write-out asks for one), then a kill: the
    # save must also let BEAST forget the URL's first record and let the store delete its
    # copy, or the restart holds it two or three times.
    then = _MOVE_ONE_TO_A_RETRY_QUEUE + "sched.beast.save()\n"
    again, robots = _urls_held_after_the_kill(tmp_path, clock, then)
    _close(again, robots)


def test_a_parked_url_moved_to_a_retry_queue_is_held_once_after_a_kill_right_after_the_save(
        tmp_path: Path, clock) -> None:  # fmt: skip
    # The save is over (BEAST's retry queue holds the URL), the store has not deleted its
    # copy yet (apply_releases runs after the save): a kill there left the URL in both,
    # and the restart fetched it twice.
    then = _MOVE_ONE_TO_A_RETRY_QUEUE + _KILLED_RIGHT_AFTER_THE_SAVE
    again, robots = _urls_held_after_the_kill(tmp_path, clock, then)
    assert again.parked.stats()["moved_dropped"] == 1
    _close(again, robots)


def test_an_open_that_fails_after_a_kill_keeps_the_mark_the_next_open_needs(
        tmp_path: Path, clock, monkeypatch) -> None:  # fmt: skip
    # A kill right after BEAST's save left a moved URL in the store and in BEAST, which
    # the next open resolves by the mark BEAST saved. An open that failed first (here a
    # full disk under the drop) closed BEAST before the store was wired in, and that
    # close saved a STATE without the mark (and without the floor): the open after it
    # kept the store's copy too.
    from scrapy_irl.exceptions import StoreAccessError
    from scrapy_irl.scheduler.parking import ParkedStore

    then = _MOVE_ONE_TO_A_RETRY_QUEUE + _KILLED_RIGHT_AFTER_THE_SAVE

    def full_disk(store: Any, saved: Any) -> int:
        raise OSError(28, "No space left on device")

    real_drop = ParkedStore.drop_unsaved_parks
    monkeypatch.setattr(ParkedStore, "drop_unsaved_parks", full_disk)

    real_open = _open

    def open_once_failing(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
        with pytest.raises(StoreAccessError, match="No space"):  # the start is refused
            real_open(*args, **kwargs)
        monkeypatch.setattr(ParkedStore, "drop_unsaved_parks", real_drop)
        return real_open(*args, **kwargs)

    monkeypatch.setattr(f"{__name__}._open", open_once_failing)
    again, robots = _urls_held_after_the_kill(tmp_path, clock, then)
    assert again.parked.stats()["moved_dropped"] == 1
    _close(again, robots)
