"""Requests to a dead name fail in the download handler, as in stock Scrapy, but at once.

Stock Scrapy fails such a request in its download handler: the request has passed every
downloader middleware's ``process_request``, the downloader's ``request_reached_downloader``
and ``request_left_downloader`` signals fire, ``downloader/request_count`` counts it, and the
failure goes back through each middleware's ``process_exception``. ``HostDnsMiddleware``
used to raise the DNS error from its own ``process_request`` at priority 90, before the
project's middlewares: a proxy they set (``meta["proxy"]``) was never seen, Scrapy's HTTP
cache never answered (a replay when the name no longer resolves), and the downloader's
signals and stats missed the request (a probe running Scrapy's own suite with the add-on,
2026-11-28: ``test_request_left.py::test_noconnect``).

Now the middleware runs last (after ``HttpCacheMiddleware``) and marks a request whose
name it knows is dead; the add-on's HTTP and FTP handlers fail a marked request with
Scrapy's DNS error before connecting, with no lookup of their own. The mark is kept here,
keyed weakly by the request object, not in ``meta``: a retry or a copy of the meta must
not carry a verdict on another request.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

try:  # Scrapy >= 2.14 wraps DNS failures in its own exception
    from scrapy.exceptions import CannotResolveHostError as DnsError
except ImportError:  # pragma: no cover - older Scrapy
    from twisted.internet.error import DNSLookupError as DnsError  # type: ignore[assignment]

from twisted.internet.error import DNSLookupError

if TYPE_CHECKING:
    from scrapy import Request

#: The exceptions a failed lookup reaches a caller as (Scrapy's, and Twisted's below it).
DNS_ERRORS: tuple[type[BaseException], ...] = (DnsError, DNSLookupError)

#: Who marked a request: its own lookup (HostDnsMiddleware, which looks again on the
#: request's next pass), or its robots.txt fetch (RobotsCacheMiddleware: binding, so a
#: lookup that succeeds in between cannot send the page unchecked).
BY_LOOKUP = "lookup"
BY_ROBOTS = "robots"

_failed: weakref.WeakKeyDictionary[Request, tuple[str, str]] = weakref.WeakKeyDictionary()
#: Requests the IRL scheduler handed out because this machine's DNS gave up on their name.
_handed_out_dead: weakref.WeakSet[Request] = weakref.WeakSet()


def mark_dns_failed(request: Request, message: str, by: str = BY_LOOKUP) -> None:
    """The handler is to fail ``request`` with ``message`` instead of connecting."""
    _failed[request] = (by, message)


def dns_failure(request: Request) -> tuple[str, str] | None:
    """(who marked it, message) of a marked ``request``, or None."""
    return _failed.get(request)


def clear_dns_failure(request: Request) -> None:
    _failed.pop(request, None)


def raise_if_dns_failed(request: Request) -> None:
    """In a download handler: fail a marked request with Scrapy's DNS error."""
    marked = _failed.pop(request, None)
    if marked is not None:
        raise DnsError(marked[1])


def note_handed_out_dead(request: Request) -> None:
    """The IRL scheduler hands ``request`` out at once: its name did not resolve here."""
    _handed_out_dead.add(request)


def handed_out_dead(request: Request) -> bool:
    return request in _handed_out_dead
