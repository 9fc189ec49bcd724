"""RFC 9309 rules as pure functions: what a robots.txt fetch outcome means, and for how long.

No Scrapy and no clock inside: callers pass ``now`` (wall-clock seconds), so every rule is
tested with made-up times. The rules (RFC 9309 section 2.3.1; IRLbot and Polybot cache
robots.txt for a day):

* 2xx: obey the first ``max_bytes`` of the body; ask again after ``ttl``.
* 3xx after ``max_redirects`` redirects, or a 4xx other than 429: the file is
  *unavailable*: allow all, ask again after ``ttl``.
* 304 Not Modified (never asked for: no conditional request is sent) to a fetch that
  had rules or an allow all: the copy in hand is current, kept for another ``ttl``.
* 5xx, 429, timeouts, DNS and network errors: the file is *unreachable*: disallow all, unless a
  copy fetched less than ``stale_ttl`` ago exists, which stays in force. Either way ask
  again after a back-off of ``retry_delay`` doubling per consecutive failure up to
  ``retry_max_delay``.
"""

from __future__ import annotations

from dataclasses import dataclass

from scrapy_irl.hosts.records import RobotsKind, RobotsRecord

#: Status recorded for a fetch that produced no HTTP response (timeout, DNS, refused...).
NO_RESPONSE = 0
TOO_MANY_REQUESTS = 429
NOT_MODIFIED = 304


@dataclass(frozen=True)
class RobotsPolicy:
    """The tunable numbers of the rules above (``IRL_ROBOTS_*`` settings)."""

    ttl: float = 24 * 3600.0
    max_bytes: int = 500 * 1024
    max_decoded_bytes: int = 8 * 1024 * 1024
    max_redirects: int = 5
    retry_delay: float = 60.0
    retry_max_delay: float = 6 * 3600.0
    stale_ttl: float = 7 * 24 * 3600.0

    def __post_init__(self) -> None:
        # Written as "not (x > 0)": NaN fails every comparison, and a NaN TTL made every
        # record expire at NaN, never fresh and never stale.
        if not self.ttl > 0:
            raise ValueError(f"robots.txt TTL must be positive, got {self.ttl}")
        if self.max_bytes < 1:
            raise ValueError(
                f"robots.txt byte limit must be positive, got {self.max_bytes}"
            )
        if self.max_decoded_bytes < self.max_bytes:
            raise ValueError(
                "need IRL_ROBOTS_MAX_DECODED_BYTES >= IRL_ROBOTS_MAX_BYTES, got "
                f"{self.max_decoded_bytes} and {self.max_bytes}"
            )
        if self.max_redirects < 0:
            raise ValueError(
                f"redirect limit cannot be negative, got {self.max_redirects}"
            )
        if not 0 < self.retry_delay <= self.retry_max_delay:
            raise ValueError(
                "robots.txt retry delays need 0 < IRL_ROBOTS_RETRY_DELAY <= "
                f"IRL_ROBOTS_RETRY_MAX_DELAY, got {self.retry_delay} and {self.retry_max_delay}"
            )
        if not self.stale_ttl >= 0:
            raise ValueError(f"stale TTL cannot be negative, got {self.stale_ttl}")

    @staticmethod
    def is_unreachable_status(status: int) -> bool:
        """Statuses that mean "the server could not answer": 5xx, anything non-HTTP, and
        429. RFC 9309 lists 4xx as "unavailable" (allow all), but 429 Too Many Requests is
        the server asking for less load, not saying there are no rules: read as allow all
        for a day, it would unleash the crawl on the one server that asked it to slow
        down. Google's crawlers treat it as a server error too; so does this policy."""
        return status == TOO_MANY_REQUESTS or not 200 <= status < 500

    def on_response(
        self, status: int, body: bytes, now: float, previous: RobotsRecord | None
    ) -> RobotsRecord:
        """The record for a final response (redirects already followed by the caller)."""
        if 200 <= status < 300:
            return RobotsRecord(
                RobotsKind.RULES,
                status,
                now,
                now,
                now + self.ttl,
                0,
                self._within_limit(body),
            )
        if status == NOT_MODIFIED and previous is not None and previous.kind in (
            RobotsKind.RULES, RobotsKind.ALLOW_ALL
        ):
            # Read as allow all, a server answering 304 to the re-fetch threw its rules
            # away: a probe's /private/ pages were fetched after the TTL (2026-11-28).
            # Confirmed current now: a later outage keeps it in force for stale_ttl from here.
            return previous.with_expiry(now + self.ttl, fetched_at=now, checked_at=now, failures=0)
        if 300 <= status < 500 and status != TOO_MANY_REQUESTS:
            return RobotsRecord(
                RobotsKind.ALLOW_ALL, status, now, now, now + self.ttl, 0
            )
        return self.on_failure(status, now, previous)

    def _within_limit(self, body: bytes) -> bytes:
        """The first ``max_bytes`` of ``body``, ending at a line end: a line cut in two
        can say something else (``Disallow: /secret-area/`` cut to ``Disallow: /``
        disallowed the whole site, found by a probe, 2026-11-28). RFC 9309 sets the limit
        on what is parsed, not on the rules' meaning."""
        if len(body) <= self.max_bytes:
            return body
        cut = body[: self.max_bytes]
        if body[self.max_bytes : self.max_bytes + 1] in (b"\n", b"\r"):
            return cut  # the cut falls on a line end: the last line is whole
        return cut[: max(cut.rfind(b"\n"), cut.rfind(b"\r")) + 1]

    def on_failure(
        self, status: int, now: float, previous: RobotsRecord | None
    ) -> RobotsRecord:
        """Unreachable: back off; keep a recent good copy in force, else disallow all."""
        failures = (previous.failures if previous else 0) + 1
        expires = now + self.backoff(failures)
        if previous is not None and self.usable_when_unreachable(previous, now):
            return previous.with_expiry(expires, checked_at=now, failures=failures)
        return RobotsRecord(
            RobotsKind.DISALLOW_ALL, status, now, now, expires, failures
        )

    def backoff(self, failures: int) -> float:
        """Seconds to wait after the ``failures``-th consecutive failure."""
        exponent = min(max(failures - 1, 0), 60)
        return min(self.retry_delay * (2.0**exponent), self.retry_max_delay)

    def within_limits(self, record: RobotsRecord) -> RobotsRecord:
        """``record`` as read back from the store, expiring no later than these settings
        allow: the TTL after its last check for an answer, the back-off of its failure
        count for a failed fetch. The store keeps the expiry the writing run computed, so
        a TTL lowered for the next run (docs/quickstart.rst's advice while testing your
        own site) was ignored until the old one ran out, a day by default."""
        limit = self.ttl if record.failures == 0 else self.backoff(record.failures)
        latest = record.checked_at + limit
        if record.expires_at <= latest:
            return record
        return record.with_expiry(latest)

    def usable_when_unreachable(self, record: RobotsRecord, now: float) -> bool:
        return (
            record.kind != RobotsKind.DISALLOW_ALL
            and now - record.fetched_at <= self.stale_ttl
        )
