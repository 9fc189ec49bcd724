"""Binary layouts of the records kept in the host store (robots v1, DNS v2).

Every record starts with a version byte so that a newer layout is recognised rather
than misread; a record that does not decode raises :class:`RecordError`, which callers
count and treat as a cache miss (the data is refetched, never trusted).
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, replace

RECORD_VERSION = 1


class RecordError(ValueError):
    """A stored record is truncated, of an unknown version, or otherwise undecodable."""


class RobotsKind(enum.IntEnum):
    """What a robots.txt fetch decided for an origin (RFC 9309 section 2.3.1)."""

    RULES = 1  # 2xx: the (truncated) body is parsed and obeyed
    ALLOW_ALL = 2  # 4xx, or too many redirects: no restrictions
    DISALLOW_ALL = (
        3  # 5xx, timeout, network error and no fresh-enough copy: crawl nothing
    )


_ROBOTS = struct.Struct("<BBhdddI")


@dataclass(frozen=True)
class RobotsRecord:
    """robots.txt state of one origin (scheme://host:port).

    ``fetched_at`` is when ``body`` was obtained (wall clock, so it survives restarts);
    ``expires_at`` when the origin must be asked again: the TTL for a good answer, the
    back-off for a failure. ``failures`` counts consecutive failed fetches.
    """

    kind: RobotsKind
    status: int
    fetched_at: float
    checked_at: float
    expires_at: float
    failures: int = 0
    body: bytes = b""

    def encode(self) -> bytes:
        head = _ROBOTS.pack(
            RECORD_VERSION,
            int(self.kind),
            # A server can send any number as its status (99999 was seen); the kind already
            # says what it meant, the stored number only has to fit its 16 bits.
            max(-32768, min(32767, int(self.status))),
            self.fetched_at,
            self.checked_at,
            self.expires_at,
            self.failures,
        )
        return head + self.body

    @classmethod
    def decode(cls, data: bytes) -> RobotsRecord:
        if len(data) < _ROBOTS.size:
            raise RecordError(f"robots record of {len(data)} bytes is truncated")
        version, kind, status, fetched, checked, expires, failures = (
            _ROBOTS.unpack_from(data)
        )
        if version != RECORD_VERSION:
            raise RecordError(
                f"robots record version {version} is not {RECORD_VERSION}"
            )
        try:
            robots_kind = RobotsKind(kind)
        except ValueError:
            raise RecordError(f"robots record has unknown kind {kind}") from None
        return cls(
            robots_kind,
            status,
            fetched,
            checked,
            expires,
            failures,
            data[_ROBOTS.size :],
        )

    def is_fresh(self, now: float) -> bool:
        return now < self.expires_at

    def with_expiry(self, expires_at: float, **changes: object) -> RobotsRecord:
        return replace(self, expires_at=expires_at, **changes)  # type: ignore[arg-type]


#: DNS records have their own version: 2 added ``failures`` (a trailing byte); version 1
#: records (no such byte) still decode, a failed one as one failure.
DNS_RECORD_VERSION = 2
_DNS_V1 = struct.Struct("<BBddH")
_DNS = struct.Struct("<BBddHB")


@dataclass(frozen=True)
class DnsRecord:
    """DNS result of one host name: its addresses, or a negative answer and why."""

    ips: tuple[str, ...]
    resolved_at: float
    expires_at: float
    error: str = ""  # exception class name of a failed lookup; empty when resolved
    failures: int = 0  # consecutive failed lookups of this name (0 once resolved)

    @property
    def ok(self) -> bool:
        return bool(self.ips) and not self.error

    @property
    def ip(self) -> str | None:
        return self.ips[0] if self.ips else None

    def is_fresh(self, now: float) -> bool:
        return now < self.expires_at

    def encode(self) -> bytes:
        ips = ",".join(self.ips).encode("ascii")
        error = self.error.encode("utf-8")[:255]
        head = _DNS.pack(DNS_RECORD_VERSION, len(error), self.resolved_at,
                         self.expires_at, len(ips), min(255, max(0, self.failures)))  # fmt: skip
        return head + error + ips

    @classmethod
    def decode(cls, data: bytes) -> DnsRecord:
        version = data[0] if data else None
        layout = _DNS if version == DNS_RECORD_VERSION else _DNS_V1
        if len(data) < layout.size:
            raise RecordError(f"DNS record of {len(data)} bytes is truncated")
        if version not in (1, DNS_RECORD_VERSION):
            raise RecordError(
                f"DNS record version {version} is not 1 or {DNS_RECORD_VERSION}"
            )
        fields = layout.unpack_from(data)
        _, error_len, resolved, expires, ips_len = fields[:5]
        if len(data) != layout.size + error_len + ips_len:
            raise RecordError("DNS record length does not match its header")
        start = layout.size
        try:
            error = data[start : start + error_len].decode("utf-8")
            ips_text = data[start + error_len :].decode("ascii")
        except UnicodeDecodeError:
            raise RecordError("DNS record holds undecodable text") from None
        ips = tuple(ips_text.split(",")) if ips_text else ()
        failures = fields[5] if layout is _DNS else int(bool(error))
        return cls(ips, resolved, expires, error, failures)
