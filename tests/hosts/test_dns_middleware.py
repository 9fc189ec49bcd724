"""HostDnsMiddleware (for Scrapy's own scheduler): dead names fail fast, a hiccup is waited out."""

from __future__ import annotations

import plyvel
import pytest
from scrapy.http import Request
from twisted.internet.defer import fail, succeed
from twisted.internet.error import DNSLookupError
from twisted.internet.task import Clock

from scrapy_irl.hosts.dns import HostResolver
from scrapy_irl.hosts.middleware import HostDnsMiddleware, _DnsError
from tests.robots.fakes import FakeWeb, fake_crawler, result_of, run


class ScriptedLookups:
    """Answers each lookup of a name from its script (an IP, or None for a failure); then fails."""

    def __init__(self, **scripts: list[str | None]) -> None:
        self.scripts = {
            host.replace("_", "."): list(answers) for host, answers in scripts.items()
        }
        self.calls: list[str] = []

    def __call__(self, host: str):
        self.calls.append(host)
        answers = self.scripts.get(host, [])
        answer = answers.pop(0) if answers else None
        return succeed(answer) if answer else fail(DNSLookupError(host))


@pytest.fixture
def make(tmp_path):
    made: list[HostDnsMiddleware] = []

    def build(
        lookups: ScriptedLookups, retries: int = 2
    ) -> tuple[HostDnsMiddleware, Clock]:
        clock = Clock()
        clock.advance(1_000_000)
        mw = HostDnsMiddleware(fake_crawler(FakeWeb(), tmp_path), reactor=clock)
        mw.resolver = HostResolver(mw.store, lookups, retries=retries, retry_delay=10,
                                   negative_ttl=3600, clock=clock.seconds, reactor=clock)  # fmt: skip
        made.append(mw)
        return mw, clock

    yield build
    for mw in made:
        mw._spider_closed()


def stat(mw: HostDnsMiddleware, key: str) -> int:
    return mw.crawler.stats.get_value(f"irl_dns/{key}", 0)


def test_resolved_names_pass_and_are_looked_up_once(make):
    lookups = ScriptedLookups(a_test=["127.0.0.5"])
    mw, _ = make(lookups)
    for path in ("/", "/x", "/y"):
        assert (
            result_of(run(mw.process_request(Request(f"http://a.test{path}")))) is None
        )
    assert result_of(run(mw.process_request(Request("http://127.0.0.9/")))) is None
    assert lookups.calls == ["a.test"]


def test_a_request_during_a_retry_wait_waits_for_the_retry(make):
    lookups = ScriptedLookups(flaky_test=[None, "127.0.0.7"])
    mw, clock = make(lookups)
    d = run(mw.process_request(Request("http://flaky.test/page")))
    assert (
        lookups.calls == ["flaky.test"] and not d.called
    )  # failed once, retry due in 10 s
    clock.advance(9)
    assert not d.called and lookups.calls == ["flaky.test"]
    clock.advance(1.1)
    assert result_of(d) is None  # the retry resolved it: the request goes on
    assert lookups.calls == ["flaky.test", "flaky.test"]
    assert stat(mw, "requests_waited_for_retry") == 1
    assert stat(mw, "unresolvable_requests") == 0


def test_a_dead_name_fails_after_its_retries_and_then_at_once(make):
    lookups = ScriptedLookups()
    mw, clock = make(lookups, retries=2)
    d = run(mw.process_request(Request("http://dead.test/")))
    clock.advance(10.1)  # first retry, fails again; the next waits 20 s
    assert not d.called and len(lookups.calls) == 2
    clock.advance(20.1)
    with pytest.raises(_DnsError, match="dead.test: DNS lookup failed"):
        result_of(d)
    assert lookups.calls == ["dead.test"] * 3
    with pytest.raises(_DnsError):  # dead now: no wait, no lookup
        result_of(run(mw.process_request(Request("http://dead.test/other"))))
    assert len(lookups.calls) == 3
    assert stat(mw, "unresolvable_requests") == 2
    assert stat(mw, "requests_waited_for_retry") == 2


def test_without_retries_a_failure_is_final_at_once(make):
    lookups = ScriptedLookups(once_test=[None, "127.0.0.8"])
    mw, _ = make(lookups, retries=0)
    with pytest.raises(_DnsError):
        result_of(run(mw.process_request(Request("http://once.test/"))))
    assert lookups.calls == ["once.test"]
    assert stat(mw, "requests_waited_for_retry") == 0


def test_non_http_requests_are_left_alone(make):
    lookups = ScriptedLookups()
    mw, _ = make(lookups)
    assert result_of(run(mw.process_request(Request("data:,hello")))) is None
    assert lookups.calls == []


def test_failed_store_writes_are_reported_at_close_without_the_robots_middleware(make) -> None:
    """With ROBOTSTXT_OBEY off the robots middleware (which reported this stat) is not
    built: the DNS middleware's failed writes were counted and never shown."""
    mw, _clock = make(ScriptedLookups(a_test=["127.0.0.1"]))
    mw.store._db = _WritesFail(mw.store._db)  # as on a full disk: reads work, writes fail
    result_of(mw.resolver.resolve("a.test"))
    assert mw.store.write_errors == 1
    mw._spider_closed()
    assert mw.crawler.stats.get_value("irl_hosts/store_write_errors") == 1


class _WritesFail:
    """A LevelDB handle whose writes fail like a full disk's."""

    def __init__(self, db) -> None:  # type: ignore[no-untyped-def]
        self._db = db

    def put(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise plyvel.IOError(b"IO error: No space left on device")

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self._db, name)


def test_a_lookup_asks_past_scrapys_dns_cache_so_a_renewal_sees_a_new_address(
    tmp_path, monkeypatch
) -> None:
    """Scrapy's dnscache keeps an address for ever: renewing an expired record through the
    reactor's caching resolver gave the first address again, and the downloader kept
    connecting there. The lookup drops the name from that cache first."""
    from scrapy.resolver import dnscache
    from twisted.internet import reactor

    from scrapy_irl.hosts.middleware import resolver_from_crawler
    from scrapy_irl.hosts.store import HostStore

    asked: list[str] = []

    def fake_resolve(host: str):  # type: ignore[no-untyped-def]
        asked.append(host)  # a caching resolver would answer from dnscache; this one cannot
        return succeed(dnscache.get(host, "127.0.0.9"))

    monkeypatch.setattr(reactor, "resolve", fake_resolve, raising=False)
    # A simple resolver installed (Scrapy's default), which the lookup asks through
    # reactor.resolve.
    monkeypatch.setattr(reactor, "resolver", object(), raising=False)
    dnscache["renew.test"] = "127.0.0.8"  # Scrapy's entry from the first connection
    store = HostStore(tmp_path / "hosts")
    try:
        resolver = resolver_from_crawler(fake_crawler(FakeWeb(), tmp_path), store)
        record = result_of(resolver.resolve("renew.test"))
    finally:
        dnscache.pop("renew.test", None)
        store.close()
    assert asked == ["renew.test"] and record.ip == "127.0.0.9"


def test_each_request_pins_its_address_in_scrapys_dns_cache(make, caplog) -> None:
    """The downloader must connect where the heaps time the host: the middleware writes the
    record's address into Scrapy's cache before each download (IP literals excepted),
    and counts requests it could not pin (a resolver that does not read that cache)."""
    from types import SimpleNamespace

    from scrapy.resolver import CachingThreadedResolver, dnscache

    lookups = ScriptedLookups(pin_test=["127.0.0.5"])
    mw, _ = make(lookups)
    saved, limit = dict(dnscache), dnscache.limit
    try:
        mw._installed_reactor = SimpleNamespace(resolver=CachingThreadedResolver(Clock(), 5, 5.0))
        dnscache["pin.test"] = "127.0.0.99"  # an answer the downloader got on its own
        assert result_of(run(mw.process_request(Request("http://pin.test/a")))) is None
        assert dnscache["pin.test"] == "127.0.0.5"
        dnscache["pin.test"] = "127.0.0.99"  # an FTP connection resolves through it too
        assert result_of(run(mw.process_request(Request("ftp://pin.test/file")))) is None
        assert dnscache["pin.test"] == "127.0.0.5"
        assert result_of(run(mw.process_request(Request("http://127.0.0.6/")))) is None
        assert "127.0.0.6" not in dnscache and stat(mw, "unpinned_requests") == 0
        mw._installed_reactor = SimpleNamespace(resolver=object())
        with caplog.at_level("INFO", logger="scrapy_irl.hosts.middleware"):
            for path in ("/b", "/c"):
                assert result_of(run(mw.process_request(Request(f"http://pin.test{path}")))) is None
        assert stat(mw, "unpinned_requests") == 2
        said = [r.getMessage() for r in caplog.records if "resolves host names itself" in r.getMessage()]
        assert len(said) == 1 and "resolver object does not read" in said[0], said
    finally:
        dnscache.clear()
        dnscache.limit = limit
        dnscache.update(saved)


def test_a_trailing_dot_spelling_is_fetched_from_the_address_the_heaps_time(make) -> None:
    """``rr.test.`` is ``rr.test``: the heaps time it on the address of ``rr.test``, and the
    middleware looked ``rr.test.`` up apart. A round-robin name then answered another
    address, pinned for the downloader: pages went to a server the IP delay did not time
    (a probe saw 4 gaps under tau_s0 and two requests in flight at an IP)."""
    from types import SimpleNamespace

    from scrapy.resolver import CachingThreadedResolver, dnscache

    lookups = ScriptedLookups(rr_test=["127.0.0.3", "127.0.0.2"])
    mw, _ = make(lookups)
    saved, limit = dict(dnscache), dnscache.limit
    try:
        mw._installed_reactor = SimpleNamespace(resolver=CachingThreadedResolver(Clock(), 5, 5.0))
        timed_on = result_of(mw.resolver.resolve("rr.test"))  # what the scheduler books
        assert timed_on.ip == "127.0.0.3"
        for url in ("http://rr.test./a", "http://RR.TEST./b", "http://rr.test/c"):
            assert result_of(run(mw.process_request(Request(url)))) is None
        assert lookups.calls == ["rr.test"]
        # pinned under the name the downloader's resolver is asked for
        assert dnscache["rr.test."] == dnscache["rr.test"] == "127.0.0.3"
        assert mw.resolver.cached("RR.test.").ip == "127.0.0.3"
    finally:
        dnscache.clear()
        dnscache.limit = limit
        dnscache.update(saved)


def test_the_scheduler_and_the_middleware_share_one_resolver_per_crawler(tmp_path) -> None:
    """With a resolver each, the middleware's copy of a record expired on its own and was
    looked up again: a round-robin name could then be pinned on another address than the
    one the scheduler had just renewed (``test_dns_move_crawl.py`` judges it in a crawl)."""
    from scrapy_irl.hosts.middleware import resolver_from_crawler
    from scrapy_irl.hosts.store import HostStore

    crawler, other = fake_crawler(FakeWeb(), tmp_path), fake_crawler(FakeWeb(), tmp_path)
    first, second = HostStore(tmp_path / "a"), HostStore(tmp_path / "b")
    try:
        resolver = resolver_from_crawler(crawler, first)
        assert resolver_from_crawler(crawler, first) is resolver
        assert resolver_from_crawler(other, first) is not resolver  # another crawl
        assert resolver_from_crawler(crawler, second).store is second  # another store
        # A stand-in crawler that cannot be weakly referenced gets a resolver of its own.
        from types import SimpleNamespace

        stand_in = SimpleNamespace(settings=crawler.settings, stats=crawler.stats)
        assert resolver_from_crawler(stand_in, first) is not resolver_from_crawler(stand_in, first)
    finally:
        first.close()
        second.close()


def test_a_request_is_marked_for_the_add_ons_handler_and_a_later_pass_looks_again(make):
    """Under the add-on's handler a dead name's request is marked, not failed here (it
    fails in the handler, as in stock Scrapy). The same request object coming back (a
    middleware re-sending it) is looked up again: a stale mark must not fail it once the
    name resolves (a review, 2026-11-28)."""
    from scrapy_irl.hosts import dnsfail

    lookups = ScriptedLookups(flaky_test=[None, "127.0.0.7"])
    mw, clock = make(lookups, retries=0)
    mw._handler_fails = frozenset({"http", "https"})
    request = Request("http://flaky.test/page")
    assert result_of(run(mw.process_request(request))) is None
    assert dnsfail.dns_failure(request) == (dnsfail.BY_LOOKUP, "flaky.test: DNS lookup failed "
                                            "(DNSLookupError, cached)")  # fmt: skip
    clock.advance(3601)  # the negative record expires; the name resolves now
    assert result_of(run(mw.process_request(request))) is None
    assert dnsfail.dns_failure(request) is None
    # A mark from the robots middleware in this pass binds: no lookup, no fetch.
    other = Request("http://flaky.test/other")
    dnsfail.mark_dns_failed(other, "flaky.test: robots.txt", dnsfail.BY_ROBOTS)
    assert result_of(run(mw.process_request(other))) is None
    with pytest.raises(_DnsError, match="robots.txt"):
        dnsfail.raise_if_dns_failed(other)  # as the add-on's download handlers do
