"""What the IRL scheduler's stages pass between them: a BEAST record held in RAM, a
request handed to the engine, a robots.txt redirect hop held in the heaps, the marker
that queues a robots.txt fetch, and the URL helpers of the hot path (one ``urlsplit`` per
routed record, no per-call import)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from scrapy.http import Request

from scrapy_irl.exceptions import DrumError, FrontierCorruptionError
from scrapy_irl.hosts.names import canonical_host
from scrapy_irl.scheduler.codec import record_url
from scrapy_irl.scheduler.politeness import Host

STAT = "irl_sched"
#: A frontier write failed (full disk, I/O error) or a frontier file read back damaged:
#: the crawl closes cleanly (IrlScheduler._on_storage_error) rather than lose URLs.
FRONTIER_FAILURES = (OSError, DrumError, FrontierCorruptionError)


class Held:
    """A BEAST record in RAM, with the token that releases it from BEAST once finished."""

    __slots__ = ("record", "robots_refetched", "token")

    def __init__(self, record: bytes, token: tuple[int, int, int]) -> None:
        self.record = record
        self.token = token
        # Its origin's robots.txt was fetched again at its hand-out (it had expired while
        # the record waited): not a second time, so a tiny IRL_ROBOTS_TTL cannot loop.
        self.robots_refetched = False


class ParkedHeld(Held):
    """A record taken back from the parked store: on disk there until released (its key)."""

    __slots__ = ("key",)

    def __init__(self, record: bytes, key: bytes) -> None:
        super().__init__(record, (-1, -1, -1))
        self.key = key


class Handout:
    """A request handed to the engine: its host stays busy until the request is over."""

    __slots__ = ("answered", "host", "item", "reached", "request", "when")

    def __init__(self, host: Host, when: float, item: Any, request: Request) -> None:
        self.host = host
        self.when = when  # hand-out time (scheduler clock)
        self.reached = False  # request_reached_downloader seen
        self.answered = False  # headers_received or response_downloaded seen
        self.item = item  # what RAM held (Held record or Request), released at the end
        self.request = request


class Hop:
    """A robots.txt redirect hop: waiting to claim its host and IP, then booked on them."""

    __slots__ = ("gate", "host", "host_lender", "host_slot", "in_cycle", "ip", "ip_lender",
                 "ip_slot", "origin", "reached", "since", "start", "url")  # fmt: skip

    def __init__(self, url: str, host: Host, ip: str, origin: str | None, *,
                 host_slot: bool, ip_slot: bool, since: float, gate: Any) -> None:  # fmt: skip
        self.url = url
        self.host = host
        self.ip = ip  # where it is booked: ``host.ip``, or a fresh address (record expired)
        self.origin = origin  # the origin whose robots.txt fetch it belongs to
        # What it holds in flight (what the fetch does not hold already); False for both
        # once it gave up waiting (IRL_HANDOUT_TIMEOUT) and was only booked.
        self.host_slot = host_slot
        self.ip_slot = ip_slot
        self.since = since  # when it started waiting (scheduler clock)
        self.start = since  # when it was booked to start, once claimed
        self.gate = gate  # the Deferred the robots middleware waits on
        self.reached = False  # request_reached_downloader seen
        # Sent under the idle hold of another fetch in a wait-for cycle (its origin): the
        # host or IP slot that fetch holds, which this hop uses instead of claiming one.
        self.host_lender: str | None = None
        self.ip_lender: str | None = None
        self.in_cycle = False  # found in a wait-for cycle (counted once)


class RobotsMarker:
    """Host-queue item meaning "fetch robots.txt of this origin before anything else"."""

    __slots__ = ("origin",)

    def __init__(self, origin: str) -> None:
        self.origin = origin


def url_of(item: Any) -> str:
    if isinstance(item, Request):
        return item.url
    return record_url(item.record)


url_parts = urlsplit  # hot path (every routed record): no per-call import


def renewal_margin(lifetime: float) -> float:
    """How long before its expiry a record (robots.txt, DNS) is renewed at a hand-out: a
    tenth of its life, at most 1 s. The request reaches the downloader middlewares, which
    would renew it themselves outside the heaps, a little after its hand-out; a record
    fetched just now is always fresh enough, so nothing loops."""
    return min(1.0, max(0.0, lifetime) / 10)


def robots_margin(record: Any) -> float:
    return renewal_margin(record.expires_at - record.checked_at)


def without_host(scheme: str, host: str, polite: frozenset[str]) -> bool:
    """A URL the heaps do not handle: no host (``data:``, ``file:``), or a scheme not in
    ``polite`` (:func:`scrapy_irl.hosts.download.polite_schemes`: http(s), and ``ftp``
    when a handler with a timeout serves it; not ``s3:``, a typo such as ``htp:``):
    there is no server to be polite to, or no download known to end, and the downloader
    serves or rejects it."""
    return not host or scheme not in polite


def host_key(hostname: str | None) -> str:
    """The politeness key of a URL's host: lower case, without the root's trailing dot
    (``site.test.`` and ``site.test`` are one DNS name, one server to be polite to), an
    IPv6 literal in one spelling (:func:`scrapy_irl.hosts.names.canonical_host`)."""
    return canonical_host(hostname)


#: URLseen aux of a request that cannot be written to disk (a lambda callback, a URL of
#: 64 KiB or more): a record with an empty URL, which no real record has, then the key of
#: the request waiting in RAM for the merge's verdict.
RAM_PREFIX = b"\x00\x00RAM"
