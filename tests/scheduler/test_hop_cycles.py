"""robots.txt fetches whose redirect hops wait for each other (a wait-for cycle).

Each fetch holds its origin's host and a slot on its IP until it ends; each redirect hop
waits until its host and an IP slot are free. Two fetches redirecting to each other's
host (a -> b, b -> a) held each other: both hops waited IRL_HANDOUT_TIMEOUT (60 s), then
went without holding anything, with a warning. Longer cycles, and cycles through one IP
slot, did the same. While such a cycle waits, nothing of its fetches is on the wire (each
chain's last response has arrived): a hop in the cycle now goes at once under the idle
hold of the fetch it waits for, and that fetch's own requests wait until it is over.

The network here is :class:`Wire`: it fails the test when a second request to one host,
or more than IRL_IP_MAX_IN_FLIGHT requests to one IP, would be on the wire at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from scrapy import Request
from scrapy.http import TextResponse
from twisted.internet.defer import Deferred

from scrapy_irl.scheduler import IrlScheduler
from tests.robots.fakes import FakeClock
from tests.scheduler.fake_clock import open_on_fake_clock
from tests.scheduler.test_scheduler_lifecycle import scheduler as new_scheduler

RULES = b"User-agent: *\nAllow: /\n"


class Wire:
    """What is on the network: a request reaches the downloader when sent and leaves it
    when the test answers it (the scheduler hears both, as from Scrapy's signals)."""

    def __init__(self, sched: IrlScheduler) -> None:
        self.sched = sched
        self.pending: dict[str, tuple[Request, Deferred]] = {}
        self.sent: list[str] = []
        self.most_per_ip = 0

    async def download(self, request: Request) -> TextResponse:
        host = urlsplit(request.url).hostname
        on_host = [url for url in self.pending if urlsplit(url).hostname == host]
        assert not on_host, f"{request.url} sent while {on_host} is on the wire"
        ip = self.sched.polite.hosts[host].ip
        per_ip = 1 + sum(self.sched.polite.hosts[urlsplit(url).hostname].ip == ip
                         for url in self.pending)  # fmt: skip
        assert per_ip <= self.sched.polite.max_in_flight_per_ip, (request.url, list(self.pending))
        self.most_per_ip = max(self.most_per_ip, per_ip)
        self.sent.append(request.url)
        self.sched._reached(request)
        answer: Deferred = Deferred()
        self.pending[request.url] = (request, answer)
        status, body, headers = await answer
        return TextResponse(request.url, status=status, body=body, headers=headers, encoding="utf-8")

    def answer(self, url: str, status: int = 200, body: bytes = RULES, location: str = "") -> None:
        """The response to ``url`` arrives: it leaves the downloader, then the robots
        middleware reads it (a redirect asks the scheduler's gate for the next hop)."""
        request, answer = self.pending.pop(url)
        self.sched._left(request)
        answer.callback((status, body, {"Location": location} if location else {}))

    def redirect(self, url: str, to: str) -> None:
        self.answer(url, 301, b"", to)


@pytest.fixture
def cycle(tmp_path: Path, request: Any) -> Any:
    """A scheduler (tau_h 10 s, tau_s 1 s, one request per IP) whose robots middleware
    sends through a :class:`Wire`, on one fake clock; the hop gates' timers are kept
    for the test to fire (``timers``: (when, fire)). Hops are limited by the IP heap
    alone (``IRL_ROBOTS_HOST_DELAY = False``, IRLbot's rule), so the times below are
    tau_s apart; :func:`test_a_cycle_s_hops_wait_tau_h_after_their_hosts_fetches` runs
    a cycle with the default."""
    clock = FakeClock(1000.0)
    sched = new_scheduler(
        ROBOTSTXT_OBEY=True, IRL_HOSTS_DIR=str(tmp_path / "hosts"),
        IRL_HOST_DELAY=10, IRL_HOST_DELAY_MIN=10, IRL_IP_DELAY=1, IRL_IP_DELAY_MIN=1,
        IRL_POLITENESS_MARGIN=0, IRL_IDLE_SAMPLE_INTERVAL=0, IRL_IP_MAX_IN_FLIGHT=1,
        IRL_ROBOTS_HOST_DELAY=getattr(request, "param", False),
    )  # fmt: skip
    wire = Wire(sched)
    robots = open_on_fake_clock(sched, clock, wire.download)
    timers: list[tuple[float, Any]] = []
    sched._call_later = lambda delay, fire, *args: timers.append(
        (clock.now + delay, lambda: fire(*args)))  # fmt: skip
    yield sched, wire, clock, timers
    sched.close("finished")
    robots._spider_closed()


def start(sched: IrlScheduler, clock: FakeClock, hosts: dict[str, str]) -> list[str]:
    """Add ``hosts`` (name -> IP), queue a page on each and hand out their robots.txt
    markers (the fetches begin, their first requests on the wire); returns what else
    was handed out to the engine."""
    for name, ip in hosts.items():
        sched._add_host(name, ip, None)
    for name in hosts:
        sched.enqueue_request(Request(f"http://{name}/page", dont_filter=True))
    return hand_outs(sched, clock, 1000.0)


def fire_due(timers: list[tuple[float, Any]], clock: FakeClock) -> None:
    """Open the hop gates booked so far, each at its time (the hops are sent)."""
    while timers:
        timers.sort(key=lambda timer: timer[0])
        when, fire = timers.pop(0)
        clock.now = max(clock.now, when)
        fire()


def hand_outs(sched: IrlScheduler, clock: FakeClock, at: float) -> list[str]:
    clock.now = at
    urls = []
    while (request := sched.next_request()) is not None:
        urls.append(request.url)
    return urls


@pytest.mark.parametrize("cycle", [True], indirect=True)
def test_a_cycle_s_hops_wait_tau_h_after_their_hosts_fetches(cycle):
    """The default (IRL_ROBOTS_HOST_DELAY): a.test's hop to b.test is a request to b.test,
    whose robots.txt went at 1000.0, so it waits tau_h (10 s) after that one's end; the
    cycle is still resolved at once (no IRL_HANDOUT_TIMEOUT wait) and nothing meets on
    the wire."""
    sched, wire, clock, timers = cycle
    start(sched, clock, {"a.test": "10.0.0.1", "b.test": "10.0.0.2"})
    clock.now = 1000.2
    wire.redirect("http://a.test/robots.txt", "http://b.test/from-a")
    clock.now = 1000.3
    wire.redirect("http://b.test/robots.txt", "http://a.test/from-b")
    assert sorted(when for when, _ in timers) == [1010.2, 1010.3]
    assert sched._hop_waits == [] and sched.counts["robots_hops_borrowed"] == 2
    fire_due(timers, clock)
    assert wire.sent[2:] == ["http://a.test/from-b", "http://b.test/from-a"]


def test_two_fetches_redirecting_to_each_others_host_go_at_once(cycle):
    """a.test -> b.test/from-a and b.test -> a.test/from-b: each hop waits for the host
    the other fetch holds. Both go at once, each under the other fetch's hold: on the
    wire, one request per host; the pages wait tau_h after the hop to their host."""
    sched, wire, clock, timers = cycle
    start(sched, clock, {"a.test": "10.0.0.1", "b.test": "10.0.0.2"})
    assert wire.sent == ["http://a.test/robots.txt", "http://b.test/robots.txt"]
    clock.now = 1000.2
    wire.redirect("http://a.test/robots.txt", "http://b.test/from-a")
    assert timers == []  # b.test is held by its own fetch, which is active
    clock.now = 1000.3
    wire.redirect("http://b.test/robots.txt", "http://a.test/from-b")
    # the cycle is closed: resolved now, tau_s after each IP's last request's end
    assert sorted(when for when, _ in timers) == [1001.2, 1001.3]
    assert sched._hop_waits == []
    fire_due(timers, clock)
    assert wire.sent[2:] == ["http://a.test/from-b", "http://b.test/from-a"]
    assert sched.polite.ips["10.0.0.1"].in_flight == 1  # a.test's fetch's slot, lent
    clock.now = 1001.5
    wire.answer("http://b.test/from-a")  # a.test's fetch ends; b.test's hop is on a.test
    a_host = sched.polite.hosts["a.test"]
    assert a_host.in_flight  # held until the hop under its hold is over
    assert hand_outs(sched, clock, 1001.6) == []
    clock.now = 1002.0
    wire.answer("http://a.test/from-b")
    assert not a_host.in_flight and sched.polite.ips["10.0.0.1"].in_flight == 0
    # each host's page waits tau_h (10 s) after the end of the hop to it
    assert hand_outs(sched, clock, 1011.4) == []
    assert hand_outs(sched, clock, 1011.5) == ["http://b.test/page"]
    assert hand_outs(sched, clock, 1011.9) == []
    assert hand_outs(sched, clock, 1012.0) == ["http://a.test/page"]
    assert sched.counts["robots_hops_in_cycles"] == 2
    assert sched.counts["robots_hops_borrowed"] == 2
    assert sched.counts["robots_fetch_ends_held_for_hops"] == 1
    assert sched.counts["robots_hop_waits_expired"] == 0
    assert sched._hop_claims == {}


def test_a_three_fetch_cycle_goes_at_once_when_it_closes(cycle):
    sched, wire, clock, timers = cycle
    start(sched, clock, {"a.test": "10.0.0.1", "b.test": "10.0.0.2", "c.test": "10.0.0.3"})
    clock.now = 1000.2
    wire.redirect("http://a.test/robots.txt", "http://b.test/from-a")
    wire.redirect("http://b.test/robots.txt", "http://c.test/from-b")
    assert timers == []  # c.test's fetch is on the wire: a chain, no cycle yet
    assert sched.counts["robots_hops_in_cycles"] == 0
    wire.redirect("http://c.test/robots.txt", "http://a.test/from-c")
    assert sorted(when for when, _ in timers) == [1001.2] * 3
    fire_due(timers, clock)
    assert sorted(wire.sent[3:]) == ["http://a.test/from-c", "http://b.test/from-a",
                                     "http://c.test/from-b"]  # fmt: skip
    clock.now = 1001.5
    for url in ("http://a.test/from-c", "http://b.test/from-a", "http://c.test/from-b"):
        wire.answer(url)
    assert sched.counts["robots_hops_borrowed"] == 3
    assert sched.counts["robots_hop_waits_expired"] == 0
    assert not any(host.in_flight for host in sched.polite.hosts.values())
    assert all(ip.in_flight == 0 for ip in sched.polite.ips.values())
    assert sorted(hand_outs(sched, clock, 1011.5)) == [f"http://{n}.test/page" for n in "abc"]


def test_a_cycle_through_ip_slots_goes_at_once(cycle):
    """One request per IP: a.test's fetch holds 10.0.0.1's slot, b.test's 10.0.0.2's;
    a.test redirects to b2.test (on 10.0.0.2), b.test to a2.test (on 10.0.0.1)."""
    sched, wire, clock, timers = cycle
    sched._add_host("a2.test", "10.0.0.1", None)
    sched._add_host("b2.test", "10.0.0.2", None)
    start(sched, clock, {"a.test": "10.0.0.1", "b.test": "10.0.0.2"})
    clock.now = 1000.2
    wire.redirect("http://a.test/robots.txt", "http://b2.test/robots.txt")
    assert timers == []
    wire.redirect("http://b.test/robots.txt", "http://a2.test/robots.txt")
    assert sorted(when for when, _ in timers) == [1001.2, 1001.2]
    fire_due(timers, clock)
    assert sorted(wire.sent[2:]) == ["http://a2.test/robots.txt", "http://b2.test/robots.txt"]
    assert wire.most_per_ip == 1
    assert sched.polite.hosts["b2.test"].in_flight  # its host is claimed as usual
    assert [ip.in_flight for ip in sched.polite.ips.values()] == [1, 1]  # the fetches' slots
    clock.now = 1001.5
    wire.answer("http://a2.test/robots.txt")
    wire.answer("http://b2.test/robots.txt")
    assert all(ip.in_flight == 0 for ip in sched.polite.ips.values())
    assert not any(host.in_flight for host in sched.polite.hosts.values())
    assert sched.counts["robots_hops_borrowed"] == 2


def test_a_fetch_whose_hold_is_lent_waits_for_the_hop_under_it(cycle):
    """a.test's fetch, its hold lent to b.test's hop to a.test, is redirected back to
    a.test: that hop (to its own host, which it never claims) waits for the hop on the
    wire there, and goes tau_s after it."""
    sched, wire, clock, timers = cycle
    start(sched, clock, {"a.test": "10.0.0.1", "b.test": "10.0.0.2"})
    clock.now = 1000.2
    wire.redirect("http://a.test/robots.txt", "http://b.test/from-a")
    wire.redirect("http://b.test/robots.txt", "http://a.test/from-b")
    fire_due(timers, clock)
    clock.now = 1001.5
    wire.redirect("http://b.test/from-a", "http://a.test/back")
    assert timers == []  # b.test's hop is on a.test
    clock.now = 1002.0
    wire.answer("http://a.test/from-b")
    assert [when for when, _ in timers] == [1003.0]  # tau_s after that hop's end
    fire_due(timers, clock)
    assert wire.sent[-1] == "http://a.test/back"
    wire.answer("http://a.test/back")
    assert not any(host.in_flight for host in sched.polite.hosts.values())


def test_a_chain_of_waits_that_ends_on_a_page_is_no_cycle(cycle):
    """a.test waits for b.test, whose fetch waits for c.test, where a page is in flight:
    the page's end frees everything in turn, so nothing is sent under another's hold."""
    sched, wire, clock, timers = cycle
    sched._add_host("c.test", "10.0.0.3", None)
    page = Request("http://c.test/page", dont_filter=True, meta={"dont_obey_robotstxt": True})
    sched._check_robots_and_queue(page, "c.test")
    assert start(sched, clock, {"a.test": "10.0.0.1", "b.test": "10.0.0.2"}) == [
        "http://c.test/page"]  # fmt: skip
    clock.now = 1000.2
    wire.redirect("http://a.test/robots.txt", "http://b.test/from-a")
    wire.redirect("http://b.test/robots.txt", "http://c.test/from-b")
    assert timers == [] and sched.counts["robots_hops_in_cycles"] == 0
    clock.now = 1000.5
    sched._left(next(entry.request for entry in sched._handed.values()))
    assert [when for when, _ in timers] == [1001.5]  # b.test's hop, tau_s after the page
    assert sched.counts["robots_hops_borrowed"] == 0


def test_a_fetch_made_for_a_page_borrows_but_does_not_lend(cycle):
    """b.test's robots.txt is fetched by the middleware for a page handed out already
    (its fetch's hold is the page's, which goes the moment the fetch ends): its hop
    borrows a.test's idle hold, while a.test's hop waits for the page to end."""
    from tests.robots.fakes import run

    sched, wire, clock, timers = cycle
    sched._add_host("b.test", "10.0.0.2", None)
    page = Request("http://b.test/page", dont_filter=True)
    sched.polite.push("b.test", page)  # no robots marker: handed out as it is
    assert start(sched, clock, {"a.test": "10.0.0.1"}) == ["http://b.test/page"]
    fetch = run(sched.robots.process_request(page))
    assert wire.sent == ["http://a.test/robots.txt", "http://b.test/robots.txt"]
    clock.now = 1000.2
    wire.redirect("http://a.test/robots.txt", "http://b.test/from-a")
    wire.redirect("http://b.test/robots.txt", "http://a.test/from-b")
    assert sched.counts["robots_hops_in_cycles"] == 2
    assert [when for when, _ in timers] == [1001.2]  # b.test's hop only
    fire_due(timers, clock)
    assert wire.sent[-1] == "http://a.test/from-b"
    clock.now = 1001.5
    wire.answer("http://a.test/from-b")
    assert fetch.called  # the page goes on; a.test's hop still waits for it
    assert timers == [] and sched.counts["robots_hops_borrowed"] == 1
    clock.now = 1002.0
    sched._left(page)
    assert [when for when, _ in timers] == [1003.0]  # tau_s after the page's end
    fire_due(timers, clock)
    wire.answer("http://b.test/from-a")
    assert not any(host.in_flight for host in sched.polite.hosts.values())


def test_a_hop_not_sent_after_its_gate_frees_its_host_and_ip_at_once(cycle):
    """a.test's robots.txt, fetched by the middleware for a page, redirects to
    b.test's, which b.test's own fetch is getting: the hop waits for b.test, then takes
    that fetch's answer and is never sent. Its claim was freed only by
    IRL_HANDOUT_TIMEOUT (b.test and its IP held 60 s with nothing on the wire; found by
    review, 2026-11-27)."""
    from tests.robots.fakes import run

    sched, wire, clock, timers = cycle
    sched._add_host("b.test", "10.0.0.2", None)
    sched.enqueue_request(Request("http://b.test/page", dont_filter=True))
    sched._add_host("a.test", "10.0.0.1", None)
    page = Request("http://a.test/page", dont_filter=True)
    sched.polite.push("a.test", page)  # no robots marker: the middleware fetches it
    assert hand_outs(sched, clock, 1000.0) == ["http://a.test/page"]
    fetch = run(sched.robots.process_request(page))
    clock.now = 1000.2
    wire.redirect("http://a.test/robots.txt", "http://b.test/robots.txt")
    clock.now = 1000.5
    wire.answer("http://b.test/robots.txt")  # b.test's own fetch ends
    fire_due(timers, clock)  # the hop's gate opens; it takes b.test's answer
    assert fetch.called
    assert wire.sent.count("http://b.test/robots.txt") == 1
    assert sched.counts["robots_hops_unsent"] == 1
    assert sched._hop_claims == {}
    assert not sched.polite.hosts["b.test"].in_flight
    assert sched.polite.ips["10.0.0.2"].in_flight == 0
    sched._left(page)
    assert hand_outs(sched, clock, 1012.0) == ["http://b.test/page"]  # not after 60 s
    assert sched.counts["robots_hops_expired"] == 0
