"""The address a host is timed on is the address the downloader connects to.

The per-IP heap books each request on its host's resolved address (``HostResolver``),
while Scrapy's downloader resolves the name itself, through the reactor's installed
resolver and Scrapy's process-wide ``dnscache``. The two agree only while the name's
answer sits in that cache: the cache keeps ``DNSCACHE_SIZE`` names (10 000 by default) and
drops the oldest, so in a crawl of more hosts a name still being fetched is asked again
at the downloader's next connection, and a name with several A records (round-robin DNS)
may then answer another server than the one its requests are timed on. So
:func:`pin_address` writes the host's address into that cache just before each download,
in the form the installed resolver reads (the string ``CachingThreadedResolver`` stores, or
the address list of ``CachingHostnameResolver``). A name with several addresses is then
fetched from the one the heaps time, as IRLbot binds a host to one IP per DNS TTL.

:func:`lookup_address` asks the installed resolver for a name's address: through
``reactor.resolve`` when an ``IResolverSimple`` is installed (Scrapy's default), else
through the installed ``IHostnameResolver`` with every address family, preferring IPv4
(``reactor.resolve`` would ask that resolver for IPv4 only, and an IPv6-only name would
count as dead).
"""

from __future__ import annotations

from typing import Any

from scrapy.resolver import CachingHostnameResolver, CachingThreadedResolver, dnscache
from twisted.internet._resolver import ComplexResolverSimplifier
from twisted.internet.abstract import isIPv6Address
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.defer import Deferred
from twisted.internet.error import DNSLookupError


def _name_resolver_installed(reactor: Any) -> bool:
    """True when the reactor's primary resolver is an ``IHostnameResolver`` (installed with
    ``installNameResolver``, or Twisted's own default), which ``reactor.resolve`` reaches
    only through a wrapper asking for IPv4 addresses."""
    resolver = getattr(reactor, "resolver", None)
    return isinstance(resolver, ComplexResolverSimplifier) and hasattr(reactor, "nameResolver")


class _Addresses:
    """An ``IResolutionReceiver`` firing a Deferred with the first IPv4 address, else the
    first IPv6 one, once the resolution completes."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.v4: list[str] = []
        self.v6: list[str] = []
        self.done: Deferred[str] = Deferred()

    def resolutionBegan(self, resolution: Any) -> None:  # noqa: N802 (Twisted's interface)
        pass

    def addressResolved(self, address: Any) -> None:  # noqa: N802
        if isinstance(address, IPv6Address):
            self.v6.append(address.host)
        elif isinstance(address, IPv4Address):
            self.v4.append(address.host)

    def resolutionComplete(self) -> None:  # noqa: N802
        found = self.v4 or self.v6
        if found:
            self.done.callback(found[0])
        else:
            self.done.errback(DNSLookupError(self.name))


def lookup_address(reactor: Any, host: str) -> Deferred[str]:
    """One address of ``host`` from the reactor's installed resolver (see module doc)."""
    if not _name_resolver_installed(reactor):
        return reactor.resolve(host)  # type: ignore[no-any-return]
    receiver = _Addresses(host)
    reactor.nameResolver.resolveHostName(receiver, host, 0)
    return receiver.done


def connection_name(host: str) -> str:
    """The name the downloader asks its resolver for: Twisted's ``HostnameEndpoint``
    resolves an internationalized name in its Unicode form (``bücher.de``), while URLs
    carry the ASCII one (``xn--bcher-kva.de``)."""
    if "xn--" not in host:
        return host
    try:
        import idna

        return str(idna.decode(host))
    except Exception:  # noqa: BLE001 - not IDNA 2008 after all: Twisted falls back too
        try:
            return host.encode("ascii").decode("idna")
        except UnicodeError:
            return host


def pin_address(reactor: Any, host: str, ip: str) -> bool:
    """Make the downloader's next connection to ``host`` go to ``ip``: write it into
    Scrapy's ``dnscache`` if the installed resolver reads that cache (False otherwise,
    or when ``DNSCACHE_ENABLED`` is off and the cache keeps nothing). The entry becomes the
    newest, so the cache's oldest-first eviction does not drop it before the connection."""
    if not dnscache.limit:
        return False
    host = connection_name(host)
    value: Any
    if isinstance(getattr(reactor, "nameResolver", None), CachingHostnameResolver):
        family = IPv6Address if isIPv6Address(ip) else IPv4Address
        value = [family("TCP", ip, 0)]
    elif isinstance(getattr(reactor, "resolver", None), CachingThreadedResolver):
        value = ip
    else:
        return False
    if dnscache.get(host) == value:
        dnscache.move_to_end(host)
    else:
        dnscache.pop(host, None)
        dnscache[host] = value
    return True


def pinned_address(host: str) -> str | None:
    """The address Scrapy's DNS cache holds for ``host`` (as :func:`pin_address` wrote it,
    in either resolver's form), or None."""
    value = dnscache.get(connection_name(host))
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value:
        return getattr(value[0], "host", None)
    return None
