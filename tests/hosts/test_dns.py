"""HostResolver: one lookup per host per TTL, bounded concurrency, negative caching."""

from __future__ import annotations

import pytest
from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.error import DNSLookupError
from twisted.internet.task import Clock

from scrapy_irl.hosts.dns import HostResolver
from scrapy_irl.hosts.store import HostStore
from tests.robots.fakes import FakeClock, result_of


@pytest.fixture
def store(tmp_path):
    with HostStore(tmp_path / "h") as s:
        yield s


class Lookups:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.pending: dict[str, Deferred] = {}

    def __call__(self, host: str) -> Deferred:
        self.calls.append(host)
        d: Deferred = Deferred()
        self.pending[host] = d
        return d


def test_one_lookup_per_host_and_ttl(store):
    clock, lookups = FakeClock(), Lookups()
    resolver = HostResolver(store, lookups, ttl=60, clock=clock)
    first, second = resolver.resolve("A.test"), resolver.resolve("a.test")
    assert lookups.calls == ["a.test"] and resolver.in_flight == 1
    lookups.pending["a.test"].callback("127.0.0.7")
    assert result_of(first).ip == result_of(second).ip == "127.0.0.7"
    assert resolver.in_flight == 0
    clock.now += 59
    assert result_of(resolver.resolve("a.test")).ip == "127.0.0.7"
    assert lookups.calls == ["a.test"]
    clock.now += 2
    resolver.resolve("a.test")
    assert lookups.calls == ["a.test", "a.test"]


def test_negative_results_are_remembered(store):
    clock = FakeClock()
    calls: list[str] = []

    def lookup(host):
        calls.append(host)
        return fail(DNSLookupError(host))

    resolver = HostResolver(store, lookup, negative_ttl=30, clock=clock)
    record = result_of(resolver.resolve("dead.test"))
    assert not record.ok and record.error == "DNSLookupError"
    assert not result_of(resolver.resolve("dead.test")).ok
    assert calls == ["dead.test"]
    clock.now += 31
    resolver.resolve("dead.test")
    assert calls == ["dead.test", "dead.test"]


def test_concurrency_is_bounded(store):
    lookups = Lookups()
    resolver = HostResolver(store, lookups, concurrency=3)
    results = [resolver.resolve(f"h{i}.test") for i in range(10)]
    assert len(lookups.calls) == 3
    for _ in range(10):
        if not lookups.pending:
            break
        host, d = lookups.pending.popitem()
        d.callback("127.0.0.1")
        assert len(lookups.pending) <= 3
    assert len(lookups.calls) == 10 and all(r.called for r in results)


def test_ip_literals_need_no_lookup(store):
    resolver = HostResolver(store, Lookups())
    assert result_of(resolver.resolve("127.0.0.9")).ip == "127.0.0.9"
    assert result_of(resolver.resolve("::1")).ip == "::1"


def test_timeout_gives_negative_record(store):
    reactor, lookups = Clock(), Lookups()
    resolver = HostResolver(store, lookups, timeout=5, reactor=reactor)
    d = resolver.resolve("slow.test")
    reactor.advance(5.1)
    record = result_of(d)
    assert not record.ok and "Timeout" in record.error


def test_resolver_raising_synchronously_is_a_failure(store):
    def lookup(host):
        raise OSError("resolver broken")

    assert result_of(HostResolver(store, lookup).resolve("x.test")).error == "OSError"


def test_records_persist_and_corrupt_ones_are_dropped(tmp_path):
    path = tmp_path / "h"
    with HostStore(path) as store:
        result_of(HostResolver(store, lambda h: succeed("127.0.0.3")).resolve("a.test"))
    with HostStore(path) as store:
        resolver = HostResolver(store, Lookups())
        assert resolver.cached("a.test").ip == "127.0.0.3"
        store._db.put(b"Db.test", b"\x01")
        events: list[str] = []
        resolver = HostResolver(store, Lookups(), on_event=events.append)
        assert resolver.cached("b.test") is None and events == ["corrupt_record"]
        assert store.get_dns("b.test") is None


def test_memory_is_bounded(store):
    resolver = HostResolver(store, lambda h: succeed("127.0.0.1"), memory_entries=5)
    for i in range(50):
        result_of(resolver.resolve(f"h{i}.test"))
    assert len(resolver._lru) == 5
    assert resolver.cached("h0.test").ip == "127.0.0.1"  # from LevelDB


@pytest.mark.parametrize("kwargs", [{"ttl": 0}, {"concurrency": 0}, {"timeout": -1}])
def test_bad_parameters(store, kwargs):
    with pytest.raises(ValueError):
        HostResolver(store, Lookups(), **kwargs)


def _always_failing(calls: list[str]):
    def lookup(host):
        calls.append(host)
        return fail(DNSLookupError(host))

    return lookup


def test_failed_lookups_are_retried_with_doubling_waits_then_given_up(store):
    """A hiccup must not kill a name: retry after 10 s, then 20 s; the third failure is final."""
    clock, calls, events = FakeClock(), [], []
    resolver = HostResolver(store, _always_failing(calls), negative_ttl=300, retries=2,
                            retry_delay=10, clock=clock, on_event=events.append)  # fmt: skip
    first = result_of(resolver.resolve("flaky.test"))
    assert (first.failures, first.expires_at - clock.now) == (1, 10)
    assert resolver.will_retry(first)
    clock.now += 9
    assert result_of(resolver.resolve("flaky.test")) == first  # still waiting
    clock.now += 1
    second = result_of(resolver.resolve("flaky.test"))
    assert (second.failures, second.expires_at - clock.now) == (2, 20)
    assert resolver.will_retry(second)
    clock.now += 20
    third = result_of(resolver.resolve("flaky.test"))
    assert (third.failures, third.expires_at - clock.now) == (3, 300)
    assert not resolver.will_retry(third)
    assert calls == ["flaky.test"] * 3
    assert events.count("retries_scheduled") == 2 and events.count("gave_up") == 1
    clock.now += 300  # a dead name is asked again after the negative TTL, once per TTL
    fourth = result_of(resolver.resolve("flaky.test"))
    assert fourth.failures == 4 and not resolver.will_retry(fourth)
    assert fourth.expires_at - clock.now == 300 and events.count("gave_up") == 1


def test_success_resets_the_failure_count_and_counts_survive_a_restart(store):
    clock, answers = FakeClock(), ["fail", "fail", "127.0.0.9", "fail"]

    def lookup(host):
        answer = answers.pop(0)
        return fail(DNSLookupError(host)) if answer == "fail" else succeed(answer)

    resolver = HostResolver(store, lookup, retries=2, retry_delay=5, clock=clock)
    assert result_of(resolver.resolve("a.test")).failures == 1
    clock.now += 5
    restarted = HostResolver(store, lookup, retries=2, retry_delay=5, clock=clock)
    second = result_of(restarted.resolve("a.test"))  # the count came from the store
    assert second.failures == 2 and second.expires_at - clock.now == 10
    clock.now += 10
    good = result_of(restarted.resolve("a.test"))
    assert good.ok and good.failures == 0 and good.ip == "127.0.0.9"
    clock.now += 3601
    again = result_of(restarted.resolve("a.test"))
    assert again.failures == 1 and restarted.will_retry(again)


def test_retry_waits_are_capped_by_the_negative_ttl_and_zero_retries_give_up_at_once(
    store,
):
    clock, calls = FakeClock(), []
    capped = HostResolver(store, _always_failing(calls), negative_ttl=15, retries=3,
                          retry_delay=10, clock=clock)  # fmt: skip
    assert result_of(capped.resolve("c.test")).expires_at - clock.now == 10
    clock.now += 10
    assert result_of(capped.resolve("c.test")).expires_at - clock.now == 15  # not 20
    strict = HostResolver(store, _always_failing(calls), retries=0, clock=clock)
    record = result_of(strict.resolve("d.test"))
    assert record.failures == 1 and not strict.will_retry(record)


@pytest.mark.parametrize("kwargs", [{"retries": -1}, {"retry_delay": 0}])
def test_bad_retry_settings_are_refused(store, kwargs):
    with pytest.raises(ValueError, match="IRL_DNS_RETR"):
        HostResolver(store, _always_failing([]), **kwargs)


def test_an_address_from_an_earlier_run_is_looked_up_once_again(store):
    """Scrapy's resolver, which the downloader connects through, asks anew in each
    process; a stored address older than this process is checked before it is used."""
    from scrapy_irl.hosts.records import DnsRecord

    clock, lookups = FakeClock(), Lookups()
    clock.now = 1000.0
    store.put_dns("moved.test", DnsRecord(("127.0.0.2",), 900.0, 5000.0))
    store.put_dns("dead.test", DnsRecord((), 950.0, 1300.0, "DNSLookupError", 3))
    events: list[str] = []
    resolver = HostResolver(store, lookups, ttl=60, clock=clock, on_event=events.append,
                            revalidate_before=999.0)  # fmt: skip
    pending = resolver.resolve("moved.test")
    assert lookups.calls == ["moved.test"] and "revalidated" in events
    lookups.pending["moved.test"].callback("127.0.0.3")
    assert result_of(pending).ip == "127.0.0.3"
    assert result_of(resolver.resolve("moved.test")).ip == "127.0.0.3"  # this run's answer
    assert lookups.calls == ["moved.test"]
    # A dead name stays dead until its negative record expires, as before a restart.
    assert not result_of(resolver.resolve("dead.test")).ok
    assert lookups.calls == ["moved.test"]
    # Without a cut-off (the default), stored addresses are used while fresh.
    again = HostResolver(store, lookups, ttl=60, clock=clock)
    store.put_dns("kept.test", DnsRecord(("127.0.0.4",), 900.0, 5000.0))
    assert result_of(again.resolve("kept.test")).ip == "127.0.0.4"
    assert lookups.calls == ["moved.test"]


def test_a_lookup_that_outlives_its_store_still_answers_its_waiters(tmp_path):
    # The store closed under the lookup (its crawl ended): writing the record raised in
    # the lookup's callback, and whoever waited for the address never heard back.
    store, clock, lookups = HostStore(tmp_path / "h"), FakeClock(), Lookups()
    resolver = HostResolver(store, lookups, ttl=60, clock=clock)
    waiting = resolver.resolve("a.test")
    store.close()
    lookups.pending["a.test"].callback("127.0.0.7")
    assert result_of(waiting).ip == "127.0.0.7"
