"""pin_address / lookup_address: the downloader connects where the heaps time a host."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from scrapy.resolver import CachingHostnameResolver, CachingThreadedResolver, dnscache
from twisted.internet._resolver import ComplexResolverSimplifier
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.defer import succeed
from twisted.internet.error import DNSLookupError
from twisted.internet.task import Clock

from scrapy_irl.hosts.pinning import connection_name, lookup_address, pin_address
from tests.robots.fakes import result_of


@pytest.fixture(autouse=True)
def _own_dnscache():
    """dnscache is process-wide: each test gets it empty with room for 3 names."""
    saved, limit = dict(dnscache), dnscache.limit
    dnscache.clear()
    dnscache.limit = 3
    yield
    dnscache.clear()
    dnscache.limit = limit
    dnscache.update(saved)


def _threaded() -> SimpleNamespace:
    return SimpleNamespace(resolver=CachingThreadedResolver(Clock(), 3, 5.0))


def _hostname() -> SimpleNamespace:
    reactor = SimpleNamespace(nameResolver=None)
    reactor.nameResolver = CachingHostnameResolver(SimpleNamespace(nameResolver=None), 3)
    return reactor


def test_the_threaded_resolver_gets_the_address_string_as_its_newest_entry() -> None:
    reactor = _threaded()
    for name in ("a.test", "b.test", "c.test"):
        dnscache[name] = "127.0.0.9"
    assert pin_address(reactor, "a.test", "127.0.0.2")
    assert dnscache["a.test"] == "127.0.0.2"
    assert list(dnscache)[-1] == "a.test"
    # The same answer again: kept, but made the newest, so the next name evicts b.test.
    assert pin_address(reactor, "b.test", "127.0.0.9")
    dnscache["d.test"] = "127.0.0.4"
    assert list(dnscache) == ["a.test", "b.test", "d.test"]
    assert result_of(reactor.resolver.getHostByName("a.test")) == "127.0.0.2"


def test_the_hostname_resolver_gets_one_address_of_the_right_family() -> None:
    reactor = _hostname()
    assert pin_address(reactor, "v4.test", "127.0.0.3")
    assert pin_address(reactor, "v6.test", "::1")
    assert dnscache["v4.test"] == [IPv4Address("TCP", "127.0.0.3", 0)]
    assert dnscache["v6.test"] == [IPv6Address("TCP", "::1", 0)]


def test_nothing_is_pinned_without_a_cache_or_with_an_unknown_resolver() -> None:
    assert not pin_address(SimpleNamespace(resolver=object()), "a.test", "127.0.0.2")
    reactor = _threaded()
    dnscache.limit = 0  # DNSCACHE_ENABLED = False
    assert not pin_address(reactor, "a.test", "127.0.0.2")
    assert "a.test" not in dnscache


def test_an_internationalized_name_is_pinned_under_the_name_the_endpoint_resolves() -> None:
    assert connection_name("xn--bcher-kva.de") == "bücher.de"
    assert connection_name("example.com") == "example.com"
    assert connection_name("xn--.bad") == "xn--.bad"  # undecodable: as it is
    assert pin_address(_threaded(), "xn--bcher-kva.de", "127.0.0.2")
    assert dnscache["bücher.de"] == "127.0.0.2"


class _NameResolver:
    """An IHostnameResolver answering from a fixed list of addresses."""

    def __init__(self, *addresses: object) -> None:
        self.addresses = addresses
        self.asked: list[tuple[str, object]] = []

    def resolveHostName(self, receiver, name, portNumber=0, addressTypes=None, transportSemantics="TCP"):  # noqa: N802
        self.asked.append((name, addressTypes))
        receiver.resolutionBegan(SimpleNamespace(name=name))
        for address in self.addresses:
            receiver.addressResolved(address)
        receiver.resolutionComplete()
        return receiver


def _with_name_resolver(resolver: _NameResolver) -> SimpleNamespace:
    return SimpleNamespace(nameResolver=resolver, resolver=ComplexResolverSimplifier(resolver))


def test_an_installed_name_resolver_is_asked_for_every_family_and_ipv4_is_preferred() -> None:
    both = _NameResolver(IPv6Address("TCP", "::1", 0), IPv4Address("TCP", "127.0.0.7", 0))
    assert result_of(lookup_address(_with_name_resolver(both), "dual.test")) == "127.0.0.7"
    assert both.asked == [("dual.test", None)]
    # reactor.resolve would ask for IPv4 only, and an IPv6-only name would count as dead.
    only6 = _NameResolver(IPv6Address("TCP", "::1", 0))
    assert result_of(lookup_address(_with_name_resolver(only6), "v6.test")) == "::1"
    none = _NameResolver()
    failure = lookup_address(_with_name_resolver(none), "gone.test")
    failures: list[object] = []
    failure.addErrback(failures.append)
    assert failures and failures[0].check(DNSLookupError)


def test_a_simple_resolver_is_asked_through_reactor_resolve() -> None:
    calls: list[str] = []
    reactor = SimpleNamespace(resolver=object(), nameResolver=object(),
                              resolve=lambda name: calls.append(name) or succeed("127.0.0.8"))  # fmt: skip
    assert result_of(lookup_address(reactor, "a.test")) == "127.0.0.8"
    assert calls == ["a.test"]
