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
