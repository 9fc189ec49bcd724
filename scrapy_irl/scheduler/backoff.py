"""How long a host waits after it answered "too many requests" or "unavailable".

tau_h and Crawl-delay are the crawler's idea of a host's pace; a 429 (Too Many Requests)
or 503 (Service Unavailable) is the server saying that pace is too fast now, often with
a ``Retry-After`` header naming when to come back (RFC 9110 section 10.2.3: seconds, or
an HTTP date). The papers predate the header; IRLbot's answer to servers that struggle
is its delays (thesis chapter VII section 1), and this module stretches them for one
host at a time: the host's next request waits ``Retry-After`` when the server gave one,
else ``tau_h x 2^(k-1)`` for its k-th such answer in a row (tau_h, 2 tau_h, 4 tau_h, ...:
one error page costs nothing extra, a server that keeps refusing is asked less and less
often; any other answer resets k) up to ``max_factor`` x tau_h
(``IRL_BACKOFF_MAX_FACTOR``), never less than tau_h and never more than ``maximum``
(``IRL_BACKOFF_MAX``), so a server cannot park a host for ever with a huge value. The
bounds matter for a crawl that should end: Scrapy retries each such page twice, so a
host answering 503 to all its U pages is asked 3U times, each after the full wait.

A request that gets no answer at all (a timeout, a refused or dropped connection) is the
server down or drowning, so it waits one step more: ``tau_h x 2^k``, from 2 tau_h the
first time. Polybot's manager does the same (section 3.4: "if a host is not responding,
we put the host into the waiting queue for some time, and for an even longer time if it
is down on the second try"). Both kinds count in the same run k.

Pure functions of numbers and header bytes; no Scrapy, no clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime

#: Longest header value read: a real Retry-After is a few digits or a 29-byte date.
MAX_HEADER = 64
#: ASCII digits only: str.isdigit() also takes "²", which int() refuses.
_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_NEGATIVE = re.compile(r"-[0-9]+(?:\.[0-9]+)?")


@dataclass(frozen=True)
class Backoff:
    """One decision: how long the host waits, and what it was derived from."""

    seconds: float
    source: str  # "retry_after" (the server's header), "exponential" or "no_answer"
    capped: bool  # the server's Retry-After exceeded the maximum
    unreadable: bool  # a Retry-After header was there but could not be read


def parse_retry_after(value: bytes | str | None, now_wall: float) -> float | None:
    """Seconds from ``now_wall`` (Unix time) that a ``Retry-After`` value asks for.

    None when absent or unreadable; 0 for a date in the past or a negative number.
    """
    if value is None:
        return None
    if isinstance(value, bytes):
        if len(value) > MAX_HEADER:
            return None
        value = value.decode("latin-1")
    text = value.strip()
    if not text or len(text) > MAX_HEADER:
        return None
    if _SECONDS.fullmatch(text):  # delta-seconds (1*DIGIT), or a decimal some servers send
        return float(text)
    if _NEGATIVE.fullmatch(text):  # not RFC's grammar: read as "now"
        return 0.0
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # asctime and "-0000" dates: HTTP dates are all GMT
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - now_wall)


@dataclass(frozen=True)
class BackoffPolicy:
    """Which statuses (and whether unanswered requests) make a host wait, and how long at most."""

    statuses: frozenset[int] = frozenset({429, 503})
    maximum: float = 120.0
    max_factor: float = 16.0
    on_download_error: bool = True

    def __post_init__(self) -> None:
        if not self.maximum >= 0:
            raise ValueError(f"IRL_BACKOFF_MAX cannot be negative, got {self.maximum}")
        if not self.max_factor >= 1:
            raise ValueError(f"IRL_BACKOFF_MAX_FACTOR must be >= 1, got {self.max_factor}")
        bad = [s for s in self.statuses if not 100 <= s <= 599]
        if bad:
            raise ValueError(f"IRL_BACKOFF_HTTP_CODES must be HTTP statuses, got {bad}")

    def applies(self, status: int) -> bool:
        return status in self.statuses

    def wait(self, host_delay: float, streak: int, retry_after: bytes | str | None,
             now_wall: float) -> Backoff:  # fmt: skip
        """The wait after the ``streak``-th back-off answer in a row (1 for the first),
        for a host whose tau_h is ``host_delay``."""
        asked = parse_retry_after(retry_after, now_wall)
        unreadable = retry_after is not None and asked is None
        if asked is not None:
            wanted, source = asked, "retry_after"
        else:
            wanted, source = self._doubled(host_delay, streak - 1), "exponential"
        seconds = max(host_delay, min(wanted, self.maximum))
        capped = source == "retry_after" and wanted > self.maximum
        return Backoff(seconds, source, capped, unreadable)

    def silence(self, host_delay: float, streak: int) -> Backoff:
        """The wait after a request that got no answer, the ``streak``-th unanswered or
        refused request of the host in a row: one doubling more than an error page."""
        wanted = self._doubled(host_delay, streak)
        return Backoff(max(host_delay, min(wanted, self.maximum)), "no_answer", False, False)

    def _doubled(self, host_delay: float, doublings: int) -> float:
        # 2^k overflows a float only past ~1000 answers in a row; bound k first
        return host_delay * min(2.0 ** min(max(doublings, 0), 64), self.max_factor)
