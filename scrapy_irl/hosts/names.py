"""One spelling per host: what politeness and DNS records are keyed by (robots.txt
records too, but by :func:`authority_host`, which keeps the root's trailing dot).

A server is one server however its URL writes it. DNS names are case-insensitive and
``site.test.`` is ``site.test``; an IPv6 literal has many spellings (``[::1]``,
``[0:0:0:0:0:0:0:1]``, ``[::0001]``) that never reach a resolver to be made one. Keyed as
typed, each spelling was a host and an IP of its own: its own robots.txt fetch, its own
tau_h and tau_s, and requests to the one server 0.3 ms apart (found by a probe,
2026-11-27). IPv4 literals need nothing: Python's ``ipaddress`` accepts only the dotted
quad without leading zeros, which is already the one spelling, and the other forms
(``127.1``, ``2130706433``) go through the resolver, which answers in that form. An
IPv4-mapped IPv6 literal (``[::ffff:127.0.0.7]``) reaches the IPv4 server it names, and
is keyed as that IPv4 address: kept as an IPv6 one, it was another host and IP, and one
server got 12 requests with gaps down to 0.29 s at tau_s 1 s (found by a probe,
2026-11-27).
"""

from __future__ import annotations

import ipaddress
import re
from functools import lru_cache

#: host[:port] of letters, digits and inner hyphens only, labels of 1-63: names IDNA
#: takes as they are, so Twisted refuses none of them (checked against its own parse by
#: ``tests/hosts/test_names.py``). ASCII only: under IGNORECASE alone, ``[a-z]`` also
#: matches the Kelvin sign and the long s.
_PLAIN_NETLOC = re.compile(
    r"(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
    r"(?::[0-9]{1,5})?",
    re.ASCII | re.IGNORECASE,
)


def canonical_host(hostname: str | None) -> str:
    """Lower case, without the root's trailing dot, an IPv6 literal in RFC 5952 form
    (without brackets, as ``urlsplit(...).hostname`` gives it), an IPv4-mapped one as
    its IPv4 address. Cheap for names: the
    ``ipaddress`` parse runs only for hosts with a colon."""
    host = (hostname or "").lower().rstrip(".")
    if ":" in host:
        try:
            address = ipaddress.IPv6Address(host)
        except ValueError:
            return host
        mapped = address.ipv4_mapped
        return str(mapped) if mapped is not None else address.compressed
    return host


def authority_host(hostname: str | None) -> str:
    """The host as an authority (RFC 9309's robots.txt origin, URLseen's URL): as
    :func:`canonical_host`, but a name keeps the root's trailing dot. ``a.test.`` is
    ``a.test`` to DNS and to the heaps, yet another ``Host:`` header, which many servers
    answer apart (their own robots.txt included)."""
    host = canonical_host(hostname)
    if host and ":" not in host and (hostname or "").endswith("."):
        return host + "."
    return host


def refused_by_twisted(scheme: str, netloc: str) -> bool:
    """Whether Scrapy's Twisted HTTP client fails a URL of this scheme and netloc before
    sending a byte ("invalid hostname"): a netloc with userinfo (``user@host``), a ``%``
    or a space in the name, anything IDNA refuses that Scrapy does not let through.

    Such a URL reaches no server: its robots.txt fetch fails the same way (held through
    every robots.txt retry as if the host were down), and a page of it counted as a host
    that did not answer (a probe's four ``http://u@host/`` links backed a working host off
    for 2, 4, 8 and 18 s). Twisted's own parse decides, with the fallbacks Scrapy's
    HTTP/1.1 handler installs when it is built (Scrapy 2.19 lets underscores and emoji
    labels through), installed here first: judged before the handler exists, a name with
    an underscore was taken as refused and would have gone out without robots.txt or a
    politeness turn. Cached per netloc (a crawl has one per host).

    A plain name (:func:`plain_netloc`) is answered without Twisted's parse: that parse
    took about 34 us for each new host, 44 % of ``enqueue_request`` in a broad crawl
    where most links name a host not met before."""
    if plain_netloc(netloc):
        return False
    return _refused(f"{scheme}://{netloc}/")


def plain_netloc(netloc: str) -> bool:
    """A host[:port] Twisted takes as it is (:data:`_PLAIN_NETLOC`, no ``--``, which IDNA
    reserves, at most 253 characters)."""
    return len(netloc) <= 253 and "--" not in netloc and _PLAIN_NETLOC.fullmatch(netloc) is not None


def _as_scrapys_handler_sees_names() -> None:
    """Scrapy's patch of Twisted's IDNA functions (idempotent; absent in other Scrapy
    versions, whose handlers use Twisted's as they are)."""
    try:
        from scrapy.core.downloader._idna_patch import _install_twisted_idna_fallbacks
    except ImportError:
        return
    _install_twisted_idna_fallbacks()


@lru_cache(maxsize=16_384)
def _refused(url: str) -> bool:
    from twisted.internet.endpoints import HostnameEndpoint
    from twisted.web.client import URI

    try:
        _as_scrapys_handler_sees_names()
        host = URI.fromBytes(url.encode("ascii")).host
        # As text, as Twisted's Agent hands it to HostnameEndpoint (endpointForURI:
        # nativeString(uri.host)). Judged as bytes, an ACE label IDNA 2008 will not decode
        # (``xn--zz``) counted as refused, yet the handler's text path, with Scrapy's
        # IDNA 2003 fallback, fetches it: such a host went out with no robots.txt and
        # no politeness turn (a probe of 2026-11-29).
        return bool(HostnameEndpoint._hostAsBytesAndText(host.decode("ascii"))[0])
    except Exception:  # noqa: BLE001 - not Twisted's to judge here (non-ASCII, a bad port): the usual path
        return False
