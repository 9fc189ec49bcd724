"""Scrapy's default request fingerprint, computed byte for byte the same but faster.

Every URL a crawl discovers is fingerprinted once, on the scheduler's hot path.
``scrapy.utils.request.fingerprint`` spends about a third of its time outside URL
canonicalisation: it memoises each result in a ``WeakKeyDictionary`` (a weak reference
and a dict per request, for a dupefilter that sees each ``Request`` once), builds a dict
and serialises it with ``json.dumps(sort_keys=True)``. For the fingerprinter's fixed
shape (no headers included, fragments dropped) that JSON text is a constant frame around
three JSON strings, so :func:`default_fingerprint` writes it directly and hashes it.

:func:`fingerprint_function` hands a caller this shortcut only when the crawler's
fingerprinter is Scrapy's own ``RequestFingerprinter`` with its stock function, and only
after checking, at start-up, that both give identical bytes on a set of probe requests
(methods, bodies, fragments, non-ASCII, ``verbatim_url``, which recent Scrapy releases honour
and older ones ignore: the variant matching the installed Scrapy is chosen); otherwise,
and when ``IRL_FAST_FINGERPRINT`` is off, the caller gets ``fingerprinter.fingerprint``.
The one behaviour not kept is the memo: a later component that fingerprints the same
``Request`` object (Scrapy's HTTP cache does) computes it again, so the shortcut is also
left off when ``HTTPCACHE_ENABLED`` is set.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from json.encoder import encode_basestring_ascii
from typing import TYPE_CHECKING

from scrapy import Request
from scrapy.utils import request as scrapy_request
from w3lib.url import canonicalize_url

from scrapy_irl import config

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.utils.request import RequestFingerprinterProtocol

logger = logging.getLogger(__name__)

# The encoder json.dumps itself applies to a str under its default ensure_ascii=True.
_json_string: Callable[[str], str] = encode_basestring_ascii

_sha1 = hashlib.sha1


def default_fingerprint(request: Request) -> bytes:
    """``scrapy.utils.request.fingerprint(request)`` with no headers and no fragments."""
    url = request.url
    if not request.meta.get("verbatim_url"):
        url = canonicalize_url(url)
    return _hash_frame(request, url)


def canonical_url_fingerprint(request: Request) -> bytes:
    """:func:`default_fingerprint` for Scrapy releases that ignore ``verbatim_url``."""
    return _hash_frame(request, canonicalize_url(request.url))


def _hash_frame(request: Request, url: str) -> bytes:
    body = request.body
    # json.dumps({"method", "url", "body", "headers": {}}, sort_keys=True), written out.
    text = (
        '{"body": "'
        + (body.hex() if body else "")
        + '", "headers": {}, "method": '
        + _json_string(request.method)
        + ', "url": '
        + _json_string(url)
        + "}"
    )
    return _sha1(text.encode()).digest()


def _probe_requests() -> list[Request]:
    """Requests covering every field the JSON frame carries, and the characters it escapes."""
    return [
        Request("http://www.example.com/a/b?z=1&a=2#frag"),
        Request("https://Example.COM:443/%7Euser/p%61th;params?q=a+b&q=%20c"),
        Request("http://example.org/caf\u00e9/\u65e5\u672c?x=\u00fc\u00f1#\u00e9"),
        Request('http://example.net/quote"back\\slash/\ttab'),
        Request("http://example.com/post", method="POST", body=b"a=1&b=\x00\xff"),
        Request("http://example.com/put", method="PUT", body="\u00e9t\u00e9"),
        Request("http://example.com/empty", method="DELETE", body=b""),
        Request("http://example.com/x?b=2&a=1#keep", meta={"verbatim_url": True}),
        Request("http://example.com/h", headers={"Cookie": "s=1", "Accept": "x"}),
        Request("http://xn--bcher-kva.example/\U0001f600?e=\U0001f600"),
    ]


def _agrees(
    fingerprint: Callable[[Request], bytes], shortcut: Callable[[Request], bytes]
) -> bool:
    for probe in _probe_requests():
        # Fresh objects for each side: the stock function memoises per Request object.
        if shortcut(probe.replace()) != fingerprint(probe.replace()):
            logger.warning(
                "IRL_FAST_FINGERPRINT: the shortcut disagrees with this Scrapy's "
                "fingerprint for %(url)s; using the crawler's fingerprinter as is",
                {"url": probe.url},
            )
            return False
    return True


def _shortcut_for(fingerprint: Callable[[Request], bytes]) -> Callable[[Request], bytes]:
    """The shortcut variant matching this Scrapy's handling of ``verbatim_url``."""
    url = "http://example.com/x?b=2&a=1"
    verbatim = Request(url, meta={"verbatim_url": True})
    if fingerprint(verbatim) == fingerprint(Request(url)):
        return canonical_url_fingerprint
    return default_fingerprint


def is_stock_fingerprinter(fingerprinter: object) -> bool:
    """True for an instance of Scrapy's ``RequestFingerprinter`` using its stock function."""
    stock_class = getattr(scrapy_request, "RequestFingerprinter", None)
    return (
        stock_class is not None
        and type(fingerprinter) is stock_class
        and getattr(fingerprinter, "_fingerprint", None) is scrapy_request.fingerprint
    )


def fingerprint_function(
    fingerprinter: RequestFingerprinterProtocol, *, fast: bool = True
) -> Callable[[Request], bytes]:
    """The function to fingerprint requests with: the shortcut where it gives the same bytes.

    ``fast=False`` (``IRL_FAST_FINGERPRINT = False``) always returns the fingerprinter's
    own bound method.
    """
    if fast and is_stock_fingerprinter(fingerprinter):
        shortcut = _shortcut_for(fingerprinter.fingerprint)
        if _agrees(fingerprinter.fingerprint, shortcut):
            logger.info(
                "Request fingerprints: %(name)s, byte-identical to Scrapy's default "
                "fingerprint (IRL_FAST_FINGERPRINT)",
                {"name": f"scrapy_irl.fingerprint.{shortcut.__name__}"},
            )
            return shortcut
    return fingerprinter.fingerprint


def fingerprint_function_for(crawler: Crawler) -> Callable[[Request], bytes]:
    """:func:`fingerprint_function` configured from a crawler's settings."""
    settings = crawler.settings
    fast = config.getbool(settings, "IRL_FAST_FINGERPRINT") and not settings.getbool(
        "HTTPCACHE_ENABLED"
    )
    return fingerprint_function(crawler.request_fingerprinter, fast=fast)


def key_function(fingerprinter: object) -> Callable[[bytes], int]:
    """How URLseen turns this fingerprinter's fingerprints into 8-byte DRUM keys.

    Scrapy's stock fingerprint is a SHA-1 digest, whose first 8 bytes are as good a key
    as any (the thesis' H = 8). Nothing says a project's own fingerprinter is uniform (a
    URL, a database id, a common prefix, fewer than 8 bytes), so its fingerprints are
    hashed first (:func:`scrapy_irl.urlseen.hashed_key_of`).
    """
    from scrapy_irl.urlseen import hashed_key_of, key_of

    return key_of if is_stock_fingerprinter(fingerprinter) else hashed_key_of
