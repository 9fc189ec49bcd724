"""robots.txt and the politeness heaps: a record that expires while its URLs wait in a
host queue, at any TTL; a robots.txt redirect to a host not in the heaps yet.

The scheduler renews an expired record in the host's turn, once per URL (a TTL shorter
than tau_h must not loop). When the URL then waits longer than the TTL again (for its
IP), RobotsCacheMiddleware used to find the record expired and fetch robots.txt itself,
outside the heaps, the page right behind it: 378-397 tau_s breaks in 60 s of simweb at
IRL_ROBOTS_TTL=3 (three runs). The hand-out now carries ``CHECKED_META`` and the
middleware judges the request by the rules fetched in the host's turn.

A redirect hop to a host the heaps did not hold waited one flat IRL_IP_DELAY and was
booked nowhere (a page on the same server followed it within milliseconds); it is now
resolved, added and booked on its IP like a hop to a known host.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from scrapy import Request
from twisted.internet.defer import Deferred

from scrapy_irl.hosts.records import DnsRecord
from scrapy_irl.robots.middleware import CHECKED_META
from scrapy_irl.scheduler import IrlScheduler
from tests.loopback_site import LoopbackServer, send_body, serving
from tests.robots.fakes import FakeClock, FakeWeb, outcome
from tests.scheduler.fake_clock import open_on_fake_clock
from tests.scheduler.simweb_process import close_pairs, crawl, judged, simweb_server
from tests.scheduler.test_irl_crawl import POLITE
from tests.scheduler.test_scheduler_lifecycle import scheduler as new_scheduler

ROBOTS = "http://a.test/robots.txt"
RULES = b"User-agent: *\nDisallow: /private/\n"


@pytest.fixture
def fake_time(tmp_path: Path) -> Any:
    """A scheduler on one host (a.test, tau_h 10 s, tau_s 1 s, robots.txt TTL 3 s) whose
    robots middleware answers from a FakeWeb, both on one fake clock; nothing is left
    scheduled on the reactor (no tick, no wake-up)."""
    clock = FakeClock(1000.0)
    web = FakeWeb({ROBOTS: (200, RULES)})
    sched = new_scheduler(
        ROBOTSTXT_OBEY=True, IRL_HOSTS_DIR=str(tmp_path / "hosts"), IRL_ROBOTS_TTL=3,
        IRL_HOST_DELAY=10, IRL_HOST_DELAY_MIN=10, IRL_IP_DELAY=1, IRL_IP_DELAY_MIN=1,
        IRL_POLITENESS_MARGIN=0, IRL_IDLE_SAMPLE_INTERVAL=0,
    )  # fmt: skip
    robots = open_on_fake_clock(sched, clock, web.download)
    sched._add_host("a.test", "10.0.0.1", None)
    yield sched, robots, web, clock
    sched.close("finished")
    robots._spider_closed()


def hand_out(sched: IrlScheduler, clock: FakeClock, at: float) -> Request | None:
    clock.now = at
    return sched.next_request()


def done(sched: IrlScheduler, request: Request) -> None:
    """The request left the downloader (what the engine's signal would tell)."""
    sched._left(request)


def test_a_url_whose_robots_expired_again_is_judged_by_the_rules_of_its_hosts_turn(fake_time):
    sched, robots, web, clock = fake_time
    for n in range(2):
        sched.enqueue_request(Request(f"http://a.test/p{n}", dont_filter=True))
    assert hand_out(sched, clock, 1000.0) is None  # robots.txt fetched; tau_s runs
    assert web.urls == [ROBOTS]
    first = hand_out(sched, clock, 1001.0)
    assert first is not None and first.url == "http://a.test/p0"
    assert first.meta[CHECKED_META] == ("http://a.test", 1061.0)  # fresh rules, checked
    done(sched, first)
    # tau_h later the record (expired at 1003) is renewed in the host's turn ...
    assert hand_out(sched, clock, 1011.0) is None
    assert web.urls == [ROBOTS, ROBOTS]
    assert sched.counts["robots_expired_in_queue"] == 1
    # ... and the URL's IP is busy for longer than the TTL: expired again (at 1014).
    second = hand_out(sched, clock, 1020.0)
    assert second is not None and second.url == "http://a.test/p1"
    assert second.meta[CHECKED_META] == ("http://a.test", 1080.0)
    assert sched.counts["robots_expired_again_in_queue"] == 1
    assert outcome(robots, second.url, **second.meta) == "allowed"
    assert web.urls == [ROBOTS, ROBOTS]  # the middleware did not fetch it a third time
    assert robots.crawler.stats.get_value("irl_robots/expired_but_checked") == 1


def test_a_flag_from_an_earlier_hand_out_is_replaced_or_dropped(fake_time):
    """Retries and redirects copy meta: a flag must vouch for this hand-out's check only."""
    sched, robots, web, clock = fake_time
    earlier = {CHECKED_META: ("http://a.test", 9e9)}
    sched.enqueue_request(Request("http://a.test/again", dont_filter=True, meta=earlier))
    sched.enqueue_request(Request("http://a.test/skip", dont_filter=True,
                                  meta={**earlier, "dont_obey_robotstxt": True}))  # fmt: skip
    assert hand_out(sched, clock, 1000.0) is None  # robots.txt
    again = hand_out(sched, clock, 1001.0)
    assert again is not None and again.url == "http://a.test/again"
    assert again.meta[CHECKED_META] == ("http://a.test", 1061.0)
    done(sched, again)
    # (a BEAST record's meta is not read before its hand-out: its robots.txt, expired
    # meanwhile, is renewed like any other's)
    assert hand_out(sched, clock, 1011.0) is None
    skip = hand_out(sched, clock, 1012.0)
    assert skip is not None and skip.url == "http://a.test/skip"
    assert CHECKED_META not in skip.meta  # it skips robots.txt: nothing was checked


def test_an_unserializable_request_is_renewed_in_its_hosts_turn_too(fake_time):
    # Requests kept in RAM (a lambda callback) were handed out as they were once their
    # robots.txt expired: the middleware fetched it outside the heaps.
    sched, robots, web, clock = fake_time
    for n in range(2):
        sched.enqueue_request(Request(f"http://a.test/r{n}", dont_filter=True, callback=lambda r: None))
    assert hand_out(sched, clock, 1000.0) is None
    first = hand_out(sched, clock, 1001.0)
    assert first is not None
    done(sched, first)
    assert hand_out(sched, clock, 1011.0) is None  # renewed in the host's turn
    assert web.urls == [ROBOTS, ROBOTS]
    second = hand_out(sched, clock, 1012.0)
    assert second is not None and second.url == "http://a.test/r1"
    assert second.meta[CHECKED_META] == ("http://a.test", 1072.0)
    assert outcome(robots, second.url, **second.meta) == "allowed"
    assert web.urls == [ROBOTS, ROBOTS]


@pytest.mark.slow
def test_a_robots_ttl_shorter_than_the_waits_breaks_no_delay(tmp_path: Path) -> None:
    """Judged by simweb's server: with robots.txt expiring after 0.5 s, every host's turn
    renews it and many URLs wait longer than that for their IP afterwards."""
    settings = {**POLITE, "CLOSESPIDER_TIMEOUT": 20, "IRL_HOSTS_DIR": str(tmp_path / "hosts"),
                "IRL_ROBOTS_TTL": 0.5, "RETRY_ENABLED": False}  # fmt: skip
    with simweb_server(tmp_path, size="tiny") as (cfg, log):
        stats, stderr = crawl(cfg, settings)
    result = judged(cfg, log, tau_h=1.0, tau_s=0.2)
    assert result["pages"] >= 40, result
    assert stats["irl_sched/robots_expired_in_queue"] > 0  # the renewals happened ...
    assert stats["irl_sched/robots_expired_again_in_queue"] > 0  # ... and expired again
    assert result["broke_tau_s"] == 0, close_pairs(log, 0.2)
    assert result["broke_tau_h"] == 0, result
    assert result["robots_violations"] == 0 and result["requests_before_robots"] == 0
    assert "scrapy_irl/scheduler" not in stderr, stderr[-3000:]


# -- a robots.txt redirect to a host not in the politeness table -----------------------------
class _Resolver:
    """Answers the lookups the test fires itself."""

    def __init__(self) -> None:
        self.pending: dict[str, Deferred] = {}
        self.clock = FakeClock(1000.0)
        self.ttl = 3600.0  # IRL_DNS_TTL (the renewal margin is a tenth of it)

    def resolve(self, name: str) -> Deferred:
        self.pending[name] = Deferred()
        return self.pending[name]

    def will_retry(self, record: DnsRecord) -> bool:
        return record.failures < 2


def _gated(sched: IrlScheduler) -> tuple[_Resolver, list[float]]:
    """Fake the scheduler's resolver and record the waits of its hop gate."""
    waits: list[float] = []

    def call_later(delay: float, fire: Any, *args: Any) -> None:
        waits.append(delay)
        fire(*args)  # at once: the test checks the wait, not the reactor

    sched.resolver = resolver = _Resolver()
    sched._call_later = call_later
    return resolver, waits


def fired(d: Deferred) -> bool:
    box: list[Any] = []
    d.addBoth(box.append)
    return bool(box)


def test_a_robots_redirect_to_an_unknown_host_is_resolved_and_booked_on_its_ip(fake_time):
    # It waited one flat IRL_IP_DELAY from the redirect, booked nowhere: a page handed out
    # to that IP meanwhile went right before the hop, and the next one right after it.
    sched, robots, web, clock = fake_time
    resolver, waits = _gated(sched)
    sched.enqueue_request(Request("http://a.test/p0", dont_filter=True))
    assert hand_out(sched, clock, 1000.0) is None  # a.test's robots.txt
    page = hand_out(sched, clock, 1001.0)
    assert page is not None  # a page on 10.0.0.1
    clock.now = 1001.25
    gate = sched._robots_hop_gate("http://www.a.test/robots.txt")
    assert not fired(gate) and waits == []  # resolving; next_request is not held up
    resolver.pending["www.a.test"].callback(DnsRecord(("10.0.0.1",), 1001.25, 9e9))
    assert not fired(gate) and waits == []  # the page holds the IP's one slot
    clock.now = 1001.5
    done(sched, page)
    assert fired(gate)
    assert waits == [pytest.approx(1.0)]  # tau_s after the page's end, not a flat 1 s
    address = sched.polite.ips["10.0.0.1"]
    assert address.last_start == 1002.5  # booked: the IP's next request waits after it
    hop_host = sched.polite.hosts["www.a.test"]
    assert sched._hop_claims["http://www.a.test/robots.txt"].host is hop_host
    assert sched.counts["robots_hops_resolved"] == 1


def test_a_hop_whose_lookup_is_retried_waits_for_the_retry_and_is_booked(fake_time):
    # The DNS middleware would hold the hop for the retry, then send it unbooked.
    sched, robots, web, clock = fake_time
    resolver, waits = _gated(sched)
    gate = sched._robots_hop_gate("http://late.test/robots.txt")
    first = resolver.pending["late.test"]
    first.callback(DnsRecord((), 1000.0, 1010.0, error="DNSLookupError", failures=1))
    assert waits == [10.0] and not fired(gate)  # waited for the retry, asked again
    assert resolver.pending["late.test"] is not first
    resolver.pending["late.test"].callback(DnsRecord(("10.0.0.9",), 1010.0, 9e9))
    assert fired(gate)
    assert sched._hop_claims["http://late.test/robots.txt"].host.ip == "10.0.0.9"


def test_a_hop_to_a_name_that_does_not_resolve_goes_at_once(fake_time):
    sched, robots, web, clock = fake_time
    resolver, waits = _gated(sched)
    gate = sched._robots_hop_gate("http://gone.test/robots.txt")
    dead = DnsRecord((), 1000.0, 1300.0, error="DNSLookupError", failures=2)
    resolver.pending["gone.test"].callback(dead)
    assert fired(gate) and waits == []  # no server can be reached: nothing to wait for
    assert "gone.test" not in sched.polite.hosts
    assert sched.counts["robots_hop_unresolved"] == 1


def test_a_hop_through_a_proxy_is_not_resolved_and_is_booked_on_its_own_host(fake_time):
    # The proxy resolves the name; this machine's DNS may not know it (every host of a
    # crawl through a proxy failed its lookup and lost its URLs).
    sched, robots, web, clock = fake_time
    resolver, waits = _gated(sched)
    gate = sched._robots_hop_gate("http://www.b.test/robots.txt", {"proxy": "http://127.0.0.1:1"})
    assert fired(gate) and resolver.pending == {}
    assert waits == [0.0]  # its own new "address": due at once
    host = sched.polite.hosts["www.b.test"]
    assert host.ip == "proxied:www.b.test" and host.robots_meta == {"proxy": "http://127.0.0.1:1"}
    assert sched._hop_claims["http://www.b.test/robots.txt"].host is host
    assert sched.counts["proxied_hosts_added"] == 1
    # "proxy": None in the page's meta: direct, resolved as before.
    sched._robots_hop_gate("http://www.c.test/robots.txt", {"proxy": None})
    assert "www.c.test" in resolver.pending


@pytest.mark.parametrize("url", ["", "ftp://a.test/robots.txt", "http://[oops/robots.txt"])
def test_a_hop_the_middleware_will_not_send_is_not_waited_for(fake_time, url):
    sched, robots, web, clock = fake_time
    resolver, waits = _gated(sched)
    assert fired(sched._robots_hop_gate(url))
    assert waits == [] and resolver.pending == {}


class _RedirectingSite(LoopbackServer):
    """robots.txt of a.steady.test redirects to b.steady.test (same server, same IP)."""

    def __init__(self) -> None:
        super().__init__(_RedirectingHandler)
        self.lock = threading.Lock()
        self.log: list[tuple[float, str, str]] = []


class _RedirectingHandler(BaseHTTPRequestHandler):
    server: _RedirectingSite

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        host = self.headers.get("Host", "")
        with self.server.lock:
            self.server.log.append((time.monotonic(), host, self.path))
        if self.path == "/robots.txt" and host.startswith("a."):
            self.send_response(301)
            self.send_header("Location", f"http://b.steady.test:{self.server.server_address[1]}/robots.txt")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        send_body(self, b"User-agent: *\nAllow: /\n" if self.path == "/robots.txt" else b"<html></html>")

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_a_robots_redirect_to_another_name_keeps_tau_s_on_the_server(tmp_path: Path) -> None:
    from tests.scheduler.test_unusual_requests import crawl as listed_crawl
    from tests.scheduler.test_unusual_requests import gaps

    with serving(_RedirectingSite()) as site:
        port = site.server_address[1]
        stats = listed_crawl([{"url": f"http://a.steady.test:{port}/p{n}"} for n in range(2)],
                             tmp_path, ROBOTSTXT_OBEY=True, IRL_IP_DELAY=0.6, IRL_IP_DELAY_MIN=0.6,
                             IRL_HOST_DELAY=1.0, IRL_HOST_DELAY_MIN=1.0,
                             TWISTED_DNS_RESOLVER="tests.scheduler.flaky_resolver.FlakyResolver")  # fmt: skip
    paths = [(host.split(":")[0], path) for _, host, path in site.log]
    assert paths[:2] == [("a.steady.test", "/robots.txt"), ("b.steady.test", "/robots.txt")]
    assert sorted(paths[2:]) == [("a.steady.test", "/p0"), ("a.steady.test", "/p1")]
    assert min(gaps(site.log)) >= 0.55, site.log  # hop included: tau_s on the one server
    assert stats["irl_sched/robots_hops_resolved"] == 1


# -- a redirect hop is a request in flight: host and IP bounds ------------------------------
HOP_RULES = b"User-agent: *\nAllow: /\n"


def _timers(sched: IrlScheduler) -> list[tuple[float, Any]]:
    """Keep the scheduler's timers (the hop gates' waits) for the test to fire."""
    timers: list[tuple[float, Any]] = []
    sched._call_later = lambda delay, fire, *args: timers.append((delay, lambda: fire(*args)))
    return timers


def _hop_request(url: str) -> Request:
    """The request the robots middleware sends for a hop (as the signals carry it)."""
    return Request(url, meta={"dont_obey_robotstxt": True})


def _queue_page(sched: IrlScheduler, url: str) -> None:
    """Queue a page that skips robots.txt straight into its host's queue (as a request
    kept in RAM goes): its hand-outs show what the heaps allow, with no fetch before."""
    request = Request(url, dont_filter=True, meta={"dont_obey_robotstxt": True})
    sched._check_robots_and_queue(request, urlsplit(url).hostname)


def test_a_hop_to_another_ip_waits_for_the_page_in_flight_there_and_holds_its_host(fake_time):
    """A hop to b.test (10.0.0.2) while a page of c.test is in flight on that IP (at most
    one request per IP, the default): it went at once, two requests on the IP. Now it
    waits for the page's end, then holds b.test and the IP's slot until it is over."""
    sched, robots, web, clock = fake_time
    timers = _timers(sched)
    sched._add_host("b.test", "10.0.0.2", None)
    sched._add_host("c.test", "10.0.0.2", None)
    _queue_page(sched, "http://c.test/page")
    page = hand_out(sched, clock, 1000.0)
    assert page is not None and page.url == "http://c.test/page"
    hop_url = "http://b.test/robots.txt"
    web.answers[ROBOTS] = (301, b"", {"Location": hop_url})
    web.answers[hop_url] = hop_answer = Deferred()
    sched.enqueue_request(Request("http://a.test/p0", dont_filter=True))
    assert hand_out(sched, clock, 1000.5) is None  # a.test's robots.txt: redirected to b.test
    assert web.urls == [ROBOTS] and timers == []  # the hop waits: c.test's page holds 10.0.0.2
    clock.now = 1001.0
    done(sched, page)  # the IP's slot is free: the hop claims it, tau_s after the page's end
    assert [delay for delay, _ in timers] == [1.0]
    b_host, ip = sched.polite.hosts["b.test"], sched.polite.ips["10.0.0.2"]
    assert b_host.in_flight and ip.in_flight == 1 and ip.last_start == 1002.0
    _queue_page(sched, "http://b.test/page")
    _queue_page(sched, "http://c.test/page2")
    assert hand_out(sched, clock, 1002.0) is None  # nothing else on 10.0.0.2 meanwhile
    timers[0][1]()  # the gate opens: the hop is sent
    assert web.urls == [ROBOTS, hop_url]
    sched._reached(_hop_request(hop_url))
    assert hand_out(sched, clock, 1003.0) is None  # still in flight
    clock.now = 1003.5
    sched._left(_hop_request(hop_url))
    assert not b_host.in_flight and ip.in_flight == 0
    hop_answer.callback((200, HOP_RULES))  # the fetch ends: a.test's page may follow
    assert sched.counts["robots_hops_released_at_fetch_end"] == 0  # released already
    # the IP's next request waits tau_s from the hop's end, b.test's page tau_h (10 s)
    assert ip.due_at() == 1004.5 and b_host.due_at() == 1013.5
    assert [e[3] for e in sched.polite._host_heap if e[2] == e[3].gen].count(b_host) == 1


@pytest.mark.parametrize("hop_url", ["http://www.a.test/robots.txt", "https://a.test/robots.txt"])
def test_a_hop_on_the_fetchs_own_ip_or_host_does_not_wait_for_the_fetch(fake_time, hop_url):
    """The robots.txt fetch of a.test holds a.test and the one slot of 10.0.0.1 until it
    ends: a hop there (www.a.test on the same IP, or a.test itself) that waited for them
    would wait for itself. It takes what the fetch does not hold (www.a.test)."""
    sched, robots, web, clock = fake_time
    timers = _timers(sched)
    sched._add_host("www.a.test", "10.0.0.1", None)
    web.answers[ROBOTS] = (301, b"", {"Location": hop_url})
    web.answers[hop_url] = hop_answer = Deferred()
    sched.enqueue_request(Request("http://a.test/p0", dont_filter=True))
    assert hand_out(sched, clock, 1000.0) is None
    # booked tau_s after the fetch's start; a hop to a.test itself is a request to it, so
    # it waits tau_h after the fetch (IRL_ROBOTS_HOST_DELAY)
    same_host = not hop_url.startswith("http://www.")
    wait = 10.0 if same_host else 1.0
    assert [delay for delay, _ in timers] == [wait]
    ip = sched.polite.ips["10.0.0.1"]
    assert ip.in_flight == 1  # the fetch's slot only
    www = sched.polite.hosts["www.a.test"]
    assert www.in_flight is (hop_url.startswith("http://www."))
    timers[0][1]()
    clock.now = 1000.5 + wait
    sched._left(_hop_request(hop_url))
    assert not www.in_flight and ip.in_flight == 1  # the fetch still holds its own
    hop_answer.callback((200, HOP_RULES))
    assert ip.in_flight == 0 and not sched.polite.hosts["a.test"].in_flight
    if hop_url.startswith("http://www."):
        assert hand_out(sched, clock, 1002.5).url == "http://a.test/p0"
    else:  # a hop to a.test is a request to it: its page waits tau_h after the hop
        assert sched.polite.hosts["a.test"].due_at() == clock.now + 10.0


def test_a_hop_that_never_reaches_the_downloader_is_released_when_its_fetch_ends(fake_time):
    """A downloader middleware refusing the hop (an offsite filter) ends it with no
    request_left_downloader: its host and IP slot, claimed at the gate, would stay taken
    and b.test would never get a page again."""
    from scrapy.exceptions import IgnoreRequest

    sched, robots, web, clock = fake_time
    timers = _timers(sched)
    sched._add_host("b.test", "10.0.0.2", None)
    hop_url = "http://b.test/robots.txt"
    web.answers[ROBOTS] = (301, b"", {"Location": hop_url})
    web.answers[hop_url] = IgnoreRequest("offsite")
    sched.enqueue_request(Request("http://a.test/p0", dont_filter=True))
    assert hand_out(sched, clock, 1000.0) is None
    b_host, ip = sched.polite.hosts["b.test"], sched.polite.ips["10.0.0.2"]
    assert b_host.in_flight and ip.in_flight == 1  # claimed at the gate
    timers[0][1]()  # sent, refused before the downloader: the fetch ends
    assert robots.crawler.stats.get_value("irl_robots/redirect_ignored") == 1
    assert not b_host.in_flight and ip.in_flight == 0
    assert sched.counts["robots_hops_released_at_fetch_end"] == 1
    assert sched._hop_claims == {} and hop_url not in sched._robots_hosts
    _queue_page(sched, "http://b.test/page")
    assert hand_out(sched, clock, 1001.0).url == "http://a.test/p0"
    assert hand_out(sched, clock, 1009.9) is None  # tau_h after the hop (a request to b.test)
    assert hand_out(sched, clock, 1010.0).url == "http://b.test/page"


def test_a_hop_to_a_host_whose_record_expired_is_booked_on_its_fresh_address(fake_time):
    """www.a.test's record (10.0.0.1) had expired: the hop was booked there while the DNS
    middleware sent it to the address a fresh lookup gave (10.0.0.7), whose tau_s and
    in-flight bound it skipped. The host itself stays where it is until its own turn."""
    sched, robots, web, clock = fake_time
    timers = _timers(sched)

    class Fresh(_Resolver):
        def resolve(self, name: str, **kwargs: Any) -> Deferred:
            self.asked = kwargs
            return super().resolve(name)

    sched.resolver = resolver = Fresh()
    www = sched._add_host("www.a.test", "10.0.0.1", None)
    www.dns_expires = 999.0
    url = "http://www.a.test/robots.txt"
    clock.now = 1000.0
    gate = sched._robots_hop_gate(url)
    assert not fired(gate) and "www.a.test" in resolver.pending
    resolver.pending["www.a.test"].callback(DnsRecord(("10.0.0.7",), 1000.0, 9e9))
    assert [delay for delay, _ in timers] == [0.0]
    fresh, old = sched.polite.ips["10.0.0.7"], sched.polite.ips["10.0.0.1"]
    assert fresh.in_flight == 1 and fresh.last_start == 1000.0 and old.in_flight == 0
    assert www.ip == "10.0.0.1" and www.in_flight
    assert sched.counts["robots_hops_dns_renewed"] == 1
    clock.now = 1000.4
    sched._left(_hop_request(url))
    assert fresh.in_flight == 0 and fresh.last_start == 1000.4 and not www.in_flight
    assert old.last_start == float("-inf")  # the old address was not asked


def test_a_hop_that_cannot_claim_its_host_goes_unheld_after_the_handout_timeout(fake_time):
    """A host held for ever (a page that never ends; a cycle of fetches the robots
    middleware made for pages of their own, which lend nothing) must not stop the fetch.
    (A cycle of the scheduler's own fetches goes at once: test_hop_cycles.py.)"""
    sched, robots, web, clock = fake_time
    timers = _timers(sched)
    _queue_page(sched, "http://a.test/page")
    page = hand_out(sched, clock, 1000.0)
    assert page is not None
    gate = sched._robots_hop_gate("http://a.test/robots.txt")  # (of b.test's fetch)
    assert not fired(gate) and timers == []  # a.test's page is in flight
    sched._expire_hops(1000.0 + sched.handout_timeout)
    assert not fired(gate) and timers == []  # still waiting
    clock.now = 1000.0 + sched.handout_timeout + 1
    sched._expire_hops(clock.now)
    assert sched.counts["robots_hop_waits_expired"] == 1
    assert [delay for delay, _ in timers] == [0.0]  # booked only: tau_s from the page's start
    assert sched.polite.ips["10.0.0.1"].in_flight == 1  # the page's, nothing more
