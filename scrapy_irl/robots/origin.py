"""The origin a robots.txt applies to: scheme, host and port (RFC 9309 section 2.3)."""

from __future__ import annotations

from urllib.parse import ParseResult, SplitResult

from scrapy_irl.hosts.names import authority_host, canonical_host

DEFAULT_PORTS = {"http": 80, "https": 443}
#: Prefixes of the origins whose robots.txt is fetched (over http(s) only).
HTTP_ORIGINS = ("http://", "https://")


def origin_of(parts: SplitResult | ParseResult) -> str | None:
    """``scheme://host[:port]`` with the default port left out; None without a host.

    Userinfo is dropped and the host lowercased, so ``http://U@Example.com:80/x`` and
    ``http://example.com/y`` share one robots.txt; an IPv6 literal is written one way
    (``[0:0::1]`` is ``[::1]``). The root's trailing dot is kept: ``example.com.`` is
    another authority with a robots.txt of its own (:func:`authority_host`), though one
    host to the heaps (:func:`origin_host`). A malformed port gives None.
    """
    host = authority_host(parts.hostname)
    if not host:
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    if port is None or port == DEFAULT_PORTS.get(scheme):
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"


def origin_host(origin: str) -> str:
    """The host of an origin from :func:`origin_of`, spelled as the politeness key
    (:func:`scrapy_irl.scheduler.items.host_key`: an IPv6 literal without brackets, a
    name without the root's trailing dot)."""
    rest = origin.partition("://")[2]
    if rest.startswith("["):
        return rest[1:rest.index("]")]
    return canonical_host(rest.partition(":")[0])
