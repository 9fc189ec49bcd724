"""A host whose DNS record expires while it waits in the heaps is resolved again in its
turn, before its next request: moved to its new address, held for a retry, or let go at
once when nothing changed. Fake clock, fake name server, no reactor running."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from scrapy import Request, Spider
from scrapy.utils.test import get_crawler
from twisted.internet.defer import Deferred
from twisted.internet.error import DNSLookupError

from scrapy_irl.hosts.dns import HostResolver
from scrapy_irl.robots.origin import origin_of
from scrapy_irl.scheduler import IrlScheduler
from scrapy_irl.scheduler.items import RobotsMarker, url_parts

TTL = 100.0  # IRL_DNS_TTL
TAU_H = 2.0
TAU_S = 10.0


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class FakeDns:
    """Answers from ``answers`` (an address, or None for NXDOMAIN); names in ``held`` wait
    until :meth:`answer` is called, as a slow name server would."""

    def __init__(self, answers: dict[str, str | None]) -> None:
        self.answers = dict(answers)
        self.held: set[str] = set()
        self.asked: list[str] = []
        self._pending: list[tuple[str, Deferred[str]]] = []

    def __call__(self, name: str) -> Deferred[str]:
        self.asked.append(name)
        d: Deferred[str] = Deferred()
        if name in self.held:
            self._pending.append((name, d))
        else:
            self._reply(name, d)
        return d

    def answer(self) -> None:
        pending, self._pending = self._pending, []
        for name, d in pending:
            self._reply(name, d)

    def _reply(self, name: str, d: Deferred[str]) -> None:
        ip = self.answers.get(name)
        if ip is None:
            d.errback(DNSLookupError(f"fake: no such host {name!r}"))
        else:
            d.callback(ip)


def opened(tmp_path: Path, dns: FakeDns, clock: Clock, **settings: Any) -> IrlScheduler:
    crawler = get_crawler(Spider, settings_dict={
        "IRL_HOSTS_DIR": str(tmp_path / "hosts"), "IRL_DNS_TTL": TTL,
        "IRL_HOST_DELAY": TAU_H, "IRL_HOST_DELAY_MIN": TAU_H,
        "IRL_IP_DELAY": TAU_S, "IRL_IP_DELAY_MIN": TAU_S, "IRL_POLITENESS_MARGIN": 0.0,
        "IRL_IP_MAX_IN_FLIGHT": 1, **settings,
    })  # fmt: skip
    crawler.spider = crawler._create_spider("dns-renewal")
    sched = IrlScheduler.from_crawler(crawler)
    sched.open(crawler.spider)
    sched.clock = clock
    sched.wakes = 0  # type: ignore[attr-defined]  # no engine here: count the wake-ups

    def wake() -> None:
        sched.wakes += 1  # type: ignore[attr-defined]

    sched._wake_engine = wake  # type: ignore[method-assign]
    options = crawler.settings
    sched.resolver = HostResolver(
        sched._host_store, dns, ttl=options.getfloat("IRL_DNS_TTL"), clock=clock,
        retries=options.getint("IRL_DNS_RETRIES", 2),
        retry_delay=options.getfloat("IRL_DNS_RETRY_DELAY", 10.0),
    )  # fmt: skip
    return sched


def enqueue(sched: IrlScheduler, *urls: str) -> None:
    for url in urls:
        assert sched.enqueue_request(Request(url))
    sched.urlseen.merge()  # through URLseen and STAR into BEAST
    sched.star.flush()


class Crawl:
    """Hands requests out at the fake clock's time and ends each at once; logs starts."""

    def __init__(self, sched: IrlScheduler, clock: Clock) -> None:
        self.sched, self.clock = sched, clock
        self.starts: list[tuple[float, str, str]] = []  # (time, URL, IP booked)
        # URLs of a dead name: handed out outside the heaps, for the DNS middleware to
        # fail with the DNS error (nothing is sent)
        self.unresolvable: list[str] = []

    def next(self, at: float) -> str | None:
        self.clock.now = at
        request = self.sched.next_request()
        if request is None:
            return None
        if id(request) not in self.sched._handed:
            self.unresolvable.append(request.url)
            return request.url
        host = self.sched._handed[id(request)].host
        self.starts.append((at, request.url, host.ip))
        self.sched._left(request)  # request_left_downloader, at the same moment
        return request.url

    def rest(self) -> None:
        """Everything left, each request as soon as it is due."""
        for _ in range(100):
            if self.next(self.clock.now) is not None:
                continue
            due = self.sched.polite.next_due()
            if due is None:
                return
            self.clock.now = max(self.clock.now, due)
        raise AssertionError("the crawl did not end")

    def start_a_test(self) -> None:
        """a.test/1 handed out at 1000 (its record fresh until 1100); /2 and /3 queued
        behind it, not due yet."""
        enqueue(self.sched, "http://a.test/1")
        assert self.next(1000.0) == "http://a.test/1"
        enqueue(self.sched, "http://a.test/2", "http://a.test/3")
        assert self.next(1000.0) is None  # loaded, not due

    def urls(self) -> list[str]:
        return [url for _, url, _ in self.starts]

    def ip_gaps_hold(self) -> bool:
        """Starts booked on one IP are at least tau_s apart."""
        last: dict[str, float] = {}
        for at, _, ip in self.starts:
            if ip in last and at - last[ip] < TAU_S - 1e-9:
                return False
            last[ip] = at
        return True


def count(sched: IrlScheduler, key: str) -> int:
    return sched.counts[key]


def test_a_host_whose_name_moved_goes_to_its_new_ip_after_the_lookup(tmp_path: Path):
    dns = FakeDns({"a.test": "10.0.0.1", "b.test": "10.0.0.1", "c.test": "10.0.0.2"})
    clock = Clock(1000.0)
    sched = opened(tmp_path, dns, clock)
    crawl = Crawl(sched, clock)
    try:
        crawl.start_a_test()  # booked on 10.0.0.1
        # a.test's record (until 1100) expires; the name now points at the other server,
        # whose name server is slow to answer.
        dns.answers["a.test"] = "10.0.0.2"
        dns.held.add("a.test")
        # 1140: a.test is due and so is its old IP, but its record has expired: it waits
        # for the lookup ...
        assert crawl.next(1140.0) is None
        assert crawl.next(1140.5) is None  # asked once, not at every next_request
        assert dns.asked.count("a.test") == 2
        # ... and its turn took nothing from the old IP, which serves its other host.
        enqueue(sched, "http://b.test/1")
        assert crawl.next(1141.0) == "http://b.test/1"
        assert sched.polite.host("a.test").resolving
        sched._publish_stats()
        assert sched.stats.get_value("irl_sched/dns_renewing_hosts") == 1
        enqueue(sched, "http://c.test/1")
        assert crawl.next(1145.0) == "http://c.test/1"  # the new server's own host
        dns.answer()
        host = sched.polite.host("a.test")
        assert host.ip == "10.0.0.2" and not host.resolving
        assert len(host.queue) == 2 and sched.polite.ips["10.0.0.2"].queued == 2
        assert sched.polite.ips["10.0.0.1"].queued == 0
        assert sched.wakes > 0  # the engine is told the host may be due
        # tau_s is judged against the new server: 10.0.0.1 (last start 1141) would allow
        # 1151, but 10.0.0.2 served c.test at 1145.
        assert crawl.next(1151.0) is None
        assert crawl.next(1154.9) is None
        assert crawl.next(1155.0) in ("http://a.test/2", "http://a.test/3")
        crawl.rest()
        assert crawl.urls()[:3] == ["http://a.test/1", "http://b.test/1", "http://c.test/1"]
        assert sorted(crawl.urls()[3:]) == ["http://a.test/2", "http://a.test/3"]
        assert [ip for _, url, ip in crawl.starts if "a.test" in url] == [
            "10.0.0.1", "10.0.0.2", "10.0.0.2"]  # fmt: skip
        assert crawl.ip_gaps_hold()
        assert count(sched, "dns_expired_in_queue") == 1
        assert count(sched, "dns_moved_hosts") == 1
        assert dns.asked.count("a.test") == 2
        assert not sched.has_pending_requests()
        # The old address, unused now, is forgotten as idle hosts are.
        sched.polite.forget_idle(clock.now + 100.0)
        assert "10.0.0.1" not in sched.polite.ips
    finally:
        sched.close("finished")


def test_an_unchanged_address_neither_requeues_nor_slows_the_host(tmp_path: Path):
    dns = FakeDns({"a.test": "10.0.0.1"})
    clock = Clock(1000.0)
    sched = opened(tmp_path, dns, clock)
    crawl = Crawl(sched, clock)
    try:
        crawl.start_a_test()
        host = sched.polite.host("a.test")
        # 1150: a.test's record expired at 1100. The name server answers at once with the
        # same address: the same call hands its next URL out, and nothing else is booked
        # on the IP.
        assert crawl.next(1150.0) in ("http://a.test/2", "http://a.test/3")
        assert dns.asked.count("a.test") == 2
        assert sched.polite.host("a.test") is host and host.ip == "10.0.0.1"
        assert sched.polite.ips["10.0.0.1"].last_start == 1150.0
        assert host.dns_expires == 1249.0  # renewed for a full TTL (less the margin)
        crawl.rest()
        assert sorted(crawl.urls()) == [f"http://a.test/{n}" for n in (1, 2, 3)]
        assert [at for at, _, _ in crawl.starts] == [1000.0, 1150.0, 1160.0]
        assert dns.asked.count("a.test") == 2  # not again before 1250
        assert count(sched, "dns_expired_in_queue") == 1
        assert count(sched, "dns_moved_hosts") == 0
        assert count(sched, "parked_backlog") == 0 and sched.beast.stats()["front"] == 0
    finally:
        sched.close("finished")


@pytest.mark.parametrize("recovers", [True, False])
def test_a_failed_renewal_follows_the_rules_of_a_first_failed_lookup(
    tmp_path: Path, recovers: bool
):
    dns = FakeDns({"a.test": "10.0.0.1"})
    clock = Clock(1000.0)
    sched = opened(tmp_path, dns, clock, IRL_DNS_RETRIES=1, IRL_DNS_RETRY_DELAY=5.0)
    crawl = Crawl(sched, clock)
    try:
        crawl.start_a_test()
        dns.answers["a.test"] = None  # NXDOMAIN (or a timeout)
        assert crawl.next(1150.0) is None
        assert dns.asked.count("a.test") == 2
        assert count(sched, "dns_renew_failed") == 1
        # Parked for the retry like a first failed lookup's URLs, due with it.
        assert "a.test" not in sched.polite.hosts
        assert count(sched, "dns_retry_parked") == 2 and "a.test" not in sched._held
        assert sched.beast.stats()["retrying"] == 2 and sched.beast.retry_due == 1155.0
        assert len(sched) == 2 and sched.has_pending_requests()
        if recovers:
            dns.answers["a.test"] = "10.0.0.3"
        clock.now = 1155.0  # the retry is due (IRL_DNS_RETRY_DELAY)
        assert sched.beast.release_retries() == 2  # what the tick does once it is due
        sched._fill()
        assert dns.asked.count("a.test") == 3
        crawl.rest()
        if recovers:
            assert sorted(crawl.urls()[1:]) == ["http://a.test/2", "http://a.test/3"]
            assert {ip for _, _, ip in crawl.starts[1:]} == {"10.0.0.3"}
            assert count(sched, "dns_failed_dropped") == 0
        else:
            assert crawl.urls() == ["http://a.test/1"]
            assert count(sched, "dns_failed_dropped") == 2  # the resolver gave up
            # ... and they went to fail in the DNS middleware (their errbacks see it)
            assert sorted(crawl.unresolvable) == ["http://a.test/2", "http://a.test/3"]
        assert not sched.has_pending_requests() and len(sched) == 0
        assert sched.beast.stats()["queued"] == 0
        assert not any(q.outstanding for q in sched.beast._queues.values())  # all released
    finally:
        sched.close("finished")


def test_a_failed_renewal_also_holds_the_urls_waiting_for_the_hosts_robots_fetch(
    tmp_path: Path,
):
    """A host's queue can start with a robots.txt marker whose origin's URLs wait in Q_R:
    with the host gone they would wait for a fetch that never comes (and keep the crawl
    open for ever). They are held with the host's URLs and come back through robots.txt."""
    dns = FakeDns({"a.test": "10.0.0.1"})
    clock = Clock(1000.0)
    sched = opened(tmp_path, dns, clock, IRL_DNS_RETRIES=1, IRL_DNS_RETRY_DELAY=5.0)
    fetches: list[str] = []
    sched._fetch_robots = lambda host, marker, **kw: fetches.append(marker.origin)  # type: ignore[method-assign]
    crawl = Crawl(sched, clock)
    try:
        enqueue(sched, "http://a.test/1")
        assert crawl.next(1000.0) == "http://a.test/1"
        # What _check_robots_and_queue does for a URL of an origin without rules.
        origin = origin_of(url_parts("http://a.test:8080/x"))
        sched._robots_wait[origin] = [Request("http://a.test:8080/x", callback=lambda r: r)]
        sched._waiting += 1
        sched._robots_fetching.add(origin)
        sched.polite.push("a.test", RobotsMarker(origin), front=True)
        dns.answers["a.test"] = None
        assert crawl.next(1150.0) is None
        assert fetches == []  # no robots.txt fetch through a name that no longer resolves
        assert "a.test" not in sched.polite.hosts and not sched._robots_wait
        assert origin not in sched._robots_fetching
        assert [r.url for r in sched._held["a.test"]] == ["http://a.test:8080/x"]
        assert len(sched) == 1 and sched._waiting == 1
        clock.now = 1155.0
        sched._route_held(clock.now)  # fails again: the resolver gives up
        assert count(sched, "dns_failed_dropped") == 1
        assert crawl.next(1155.0) == "http://a.test:8080/x"  # to fail with the DNS error
        assert crawl.unresolvable == ["http://a.test:8080/x"]
        assert not sched.has_pending_requests()
    finally:
        sched.close("finished")


def test_a_record_shorter_than_the_wait_for_the_ip_does_not_starve_its_host(tmp_path: Path):
    """IRL_DNS_TTL shorter than tau_s: a renewed record has expired again by the time its
    host's turn on a busy IP comes back. The host was held and looked up again at each of
    its turns, for ever while the IP had other work (a lookup per tau_s, none of its URLs
    fetched). Renewed, it is served at its next turn, as a robots.txt renewed in the
    host's turn is not fetched again for the same URL."""
    dns = FakeDns({"a.test": "10.0.0.1", "b.test": "10.0.0.1"})
    clock = Clock(1000.0)
    sched = opened(tmp_path, dns, clock, IRL_DNS_TTL=1.0, IRL_RAM_BACKLOG_SECONDS=0)
    crawl = Crawl(sched, clock)
    try:
        enqueue(sched, *[f"http://a.test/{n}" for n in range(3)],
                *[f"http://b.test/{n}" for n in range(8)])  # fmt: skip
        dns.held.add("a.test")  # each lookup answers just after the turn that asked
        for step in range(8):  # one IP turn per tau_s: b.test always has work
            crawl.next(1005.0 + step * TAU_S)
            dns.answer()
        served_a = [url for url in crawl.urls() if "a.test" in url]
        assert len(served_a) >= 3, crawl.urls()
        assert dns.asked.count("a.test") <= 1 + 2 * len(served_a), dns.asked
        assert crawl.ip_gaps_hold()
        crawl.rest()
        assert sorted(crawl.urls()) == sorted(
            [f"http://a.test/{n}" for n in range(3)] + [f"http://b.test/{n}" for n in range(8)])
        assert sched.polite.resolving == 0
    finally:
        sched.close("finished")


def test_a_host_first_added_by_a_robots_redirect_hop_is_renewed_too(tmp_path: Path):
    """A robots.txt redirect hop to a host not in the heaps resolves and adds it; its
    record's expiry was not kept (never expiring), so its URLs went to its first address
    for as long as it stayed in the heaps."""
    dns = FakeDns({"www.a.test": "10.0.0.1"})
    clock = Clock(1000.0)
    sched = opened(tmp_path, dns, clock)
    later: list[float] = []
    sched._call_later = lambda seconds, f, *a: later.append(seconds)  # type: ignore[method-assign]
    crawl = Crawl(sched, clock)
    try:
        sched._robots_hop_gate("http://www.a.test/robots.txt")
        host = sched.polite.host("www.a.test")
        assert host is not None and host.dns_expires == 1000.0 + TTL - 1.0
        # the hop holds its host until it leaves the downloader
        sched._left(Request("http://www.a.test/robots.txt", meta={"dont_obey_robotstxt": True}))
        enqueue(sched, "http://www.a.test/1", "http://www.a.test/2")
        assert crawl.next(1010.0) == "http://www.a.test/1"
        dns.answers["www.a.test"] = "10.0.0.2"
        crawl.next(1150.0)
        crawl.rest()
        assert [ip for _, _, ip in crawl.starts] == ["10.0.0.1", "10.0.0.2"]
        assert count(sched, "dns_moved_hosts") == 1
    finally:
        sched.close("finished")


def test_a_hand_out_just_before_the_record_expires_goes_where_it_is_booked(tmp_path: Path):
    """The DNS middleware resolves each request's name again a little after its hand-out
    (and drops it from Scrapy's dnscache first, so the downloader connects where that
    lookup says): a URL handed out in the last moments of its host's record was booked on
    the old address and sent to the new one. The heaps renew a record a tenth of its life
    (at most 1 s) before it expires, as robots.txt records are."""
    dns = FakeDns({"a.test": "10.0.0.1"})
    clock = Clock(1000.0)
    sched = opened(tmp_path, dns, clock)
    crawl = Crawl(sched, clock)
    try:
        enqueue(sched, "http://a.test/1")
        assert crawl.next(1000.0) == "http://a.test/1"  # the record is fresh until 1100
        enqueue(sched, "http://a.test/2")
        assert crawl.next(1000.0) is None  # loaded, not due
        dns.answers["a.test"] = "10.0.0.2"
        assert crawl.next(1099.99) == "http://a.test/2"
        clock.now = 1100.01  # what HostDnsMiddleware asks before the download
        sent_to = sched.resolver.resolve("a.test").result.ip
        assert crawl.starts[-1][2] == sent_to == "10.0.0.2"
    finally:
        sched.close("finished")


def test_a_graceful_stop_while_a_host_is_resolved_again_saves_its_urls(tmp_path: Path):
    """A host held for its lookup is still in the table with its queue: the stop drains
    it back to BEAST like any host, and the answer arriving after the stop is ignored."""
    dns = FakeDns({"a.test": "10.0.0.1"})
    clock = Clock(1000.0)
    sched = opened(tmp_path, dns, clock)
    crawl = Crawl(sched, clock)
    closed = False
    try:
        enqueue(sched, "http://a.test/1")
        assert crawl.next(1000.0) == "http://a.test/1"
        enqueue(sched, "http://a.test/2", "http://a.test/3")
        assert crawl.next(1000.0) is None
        dns.held.add("a.test")
        assert crawl.next(1150.0) is None
        assert sched.polite.host("a.test").resolving
        sched.close("shutdown")
        closed = True
        assert sched.beast.requeued == 2  # both of its URLs, back on disk
        dns.answers["a.test"] = "10.0.0.2"
        dns.answer()  # after the stop: ignored
        assert sched.polite.resolving == 1 and not sched.polite.hosts["a.test"].queue
    finally:
        if not closed:
            sched.close("finished")


def test_a_renewal_that_raises_does_not_hold_its_host_for_ever(tmp_path: Path):
    """A fault in the renewal's own code (not a DNS failure) left the host held: its URLs
    never went out and the crawl could not close. It now goes on at its old address."""
    dns = FakeDns({"a.test": "10.0.0.1"})
    clock = Clock(1000.0)
    sched = opened(tmp_path, dns, clock)
    crawl = Crawl(sched, clock)

    def broken(record: Any, host: Any) -> None:
        raise RuntimeError("a bug in the renewal")

    sched._renewed = broken  # type: ignore[method-assign]
    try:
        crawl.start_a_test()
        assert crawl.next(1150.0) in ("http://a.test/2", "http://a.test/3")
        assert not sched.polite.host("a.test").resolving
        assert count(sched, "dns_renew_errors") == 1
        crawl.rest()
        assert sorted(crawl.urls()) == ["http://a.test/1", "http://a.test/2", "http://a.test/3"]
        assert not sched.has_pending_requests()
    finally:
        sched.close("finished")
