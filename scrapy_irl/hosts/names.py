"""One spelling per host: what politeness, robots.txt and DNS records are keyed by.

A server is one server however its URL writes it. DNS names are case-insensitive and
``site.test.`` is ``site.test``; an IPv6 literal has many spellings (``[::1]``,
``[0:0:0:0:0:0:0:1]``, ``[::0001]``) that never reach a resolver to be made one. Keyed as
typed, each spelling was a host and an IP of its own: its own robots.txt fetch, its own
tau_h and tau_s, and requests to the one server 0.3 ms apart (found by a probe,
2026-11-27). IPv4 literals need nothing: Python's ``ipaddress`` accepts only the dotted
quad without leading zeros, which is already the one spelling, and the other forms
(``127.1``, ``2130706433``) go through the resolver, which answers in that form.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache


def canonical_host(hostname: str | None) -> str:
    """Lower case, without the root's trailing dot, an IPv6 literal in RFC 5952 form
    (without brackets, as ``urlsplit(...).hostname`` gives it). Cheap for names: the
    ``ipaddress`` parse runs only for hosts with a colon."""
    host = (hostname or "").lower().rstrip(".")
    if ":" in host:
        try:
            return ipaddress.IPv6Address(host).compressed
        except ValueError:
            return host
    return host


def refused_by_twisted(scheme: str, netloc: str) -> bool:
    """Whether Twisted's HTTP client fails a URL of this scheme and netloc before sending
    a byte ("invalid hostname"): a netloc with userinfo (``user@host``), a ``%`` or ``_``
    in the name, an empty label, anything IDNA refuses.

    Such a URL reaches no server: its robots.txt fetch fails the same way (held through
    every robots.txt retry as if the host were down), and a page of it counted as a host
    that did not answer (a probe's four ``http://u@host/`` links backed a working host off
    for 2, 4, 8 and 18 s). Twisted's own parse decides, so a name it accepts is never
    taken for one it refuses; cached per netloc (a crawl has one per host)."""
    return _refused(f"{scheme}://{netloc}/")


@lru_cache(maxsize=16_384)
def _refused(url: str) -> bool:
    from twisted.internet.endpoints import HostnameEndpoint
    from twisted.web.client import URI

    try:
        host = URI.fromBytes(url.encode("ascii")).host
        return bool(HostnameEndpoint._hostAsBytesAndText(host)[0])
    except Exception:  # noqa: BLE001 - not Twisted's to judge here (non-ASCII, a bad port): the usual path
        return False
