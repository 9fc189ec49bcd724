"""``RobotsCache``: parsed robots.txt rules in a bounded LRU in front of the host store.

RAM holds at most ``memory_entries`` parsed rule sets and at most ``memory_bytes`` of
their estimated size, whatever the number of hosts cached on disk; a miss re-parses the
stored body (cheap next to a fetch). The byte bound matters because rule sets differ in
size by three orders of magnitude: a 500 KiB robots.txt parses to about 5 MB of Python
objects, so a count bound alone lets a few thousand such hosts take gigabytes. A parser
that knows its size (``estimated_bytes``, as the reduced rules of
:mod:`scrapy_irl.robots.reduce` do) is charged that; others by their body's length. A record
that fails to decode is counted, deleted and reported as a miss, so it is fetched again.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from scrapy_irl.hosts.records import RecordError, RobotsKind, RobotsRecord
from scrapy_irl.hosts.store import DiscardLog, HostStore
from scrapy_irl.robots.matching import urls_for_rules

logger = logging.getLogger(__name__)

#: Estimated RAM of cached robots.txt state. Every origin costs ORIGIN_BYTES (its key,
#: record and LRU slot); a distinct robots.txt body costs, once however many origins
#: serve it, RULES_OVERHEAD_BYTES plus BYTES_PER_BODY_BYTE per byte. Measured with
#: tracemalloc on Scrapy's Protego parser after a lookup (it builds its index lazily):
#: 9-14 bytes per body byte, plus the body itself.
ORIGIN_BYTES = 512
RULES_OVERHEAD_BYTES = 2048
BYTES_PER_BODY_BYTE = 16


def estimated_rules_size(body: bytes) -> int:
    """RAM charged to one parsed robots.txt body (an upper estimate)."""
    return RULES_OVERHEAD_BYTES + BYTES_PER_BODY_BYTE * len(body)


def _digest(body: bytes) -> bytes:
    """Identity of a robots.txt body for sharing its parse (not a security boundary)."""
    return hashlib.sha1(body, usedforsecurity=False).digest()


@dataclass
class _SharedRules:
    """One parsed body, the RAM charged for it, and the number of cached origins using it."""

    body: bytes
    rules: Any
    size: int
    users: int = 0


def charged_size(body: bytes, rules: Any) -> int:
    """RAM charged to a parsed body: the parser's own estimate if it has one (reduced rule
    sets, :class:`~scrapy_irl.robots.reduce.AgentRules`), else :func:`estimated_rules_size`."""
    size = getattr(rules, "estimated_bytes", None)
    return int(size) if isinstance(size, int) and size > 0 else estimated_rules_size(body)


class RuleSet(Protocol):
    """What the cache needs of a parser: Scrapy's ``RobotParser.allowed`` interface."""

    def allowed(self, url: str | bytes, user_agent: str | bytes) -> bool: ...


class _Everything:
    """Rules of an origin whose robots.txt is unavailable (allow) or unreachable (disallow)."""

    def __init__(self, allow: bool) -> None:
        self._allow = allow

    def allowed(self, url: str | bytes, user_agent: str | bytes) -> bool:
        return self._allow

    def crawl_delay(self, user_agent: str | bytes) -> float | None:
        return None

    def __repr__(self) -> str:
        return "<allow all>" if self._allow else "<disallow all>"


ALLOW_ALL = _Everything(True)
DISALLOW_ALL = _Everything(False)


@dataclass
class CachedRobots:
    """A record and its parsed rules."""

    record: RobotsRecord
    rules: Any  # RuleSet; Any because Scrapy's RobotParser classes are not typed as one
    digest: bytes | None = None  # of record.body for RULES records built by the cache

    def allowed(self, url: str | bytes, user_agent: str | bytes) -> bool:
        """Whether the rules let ``user_agent`` fetch ``url`` (text or UTF-8 bytes, as
        Scrapy's robots parsers take them)."""
        return all(self.rules.allowed(form, user_agent) for form in urls_for_rules(_text(url)))

    def crawl_delay(self, user_agent: str | bytes) -> float | None:
        """Seconds between requests asked by Crawl-delay or Request-rate (the larger)."""
        delays: list[float] = []
        crawl_delay = getattr(self.rules, "crawl_delay", None)
        if crawl_delay is None:  # a wrapper with Protego as .rp (docs/robots.rst's Rules)
            crawl_delay = getattr(getattr(self.rules, "rp", None), "crawl_delay", None)
        if crawl_delay is not None:
            value = _safe_call(crawl_delay, user_agent)
            if value is not None:
                delays.append(float(value))
        request_rate = getattr(self.rules, "request_rate", None)  # AgentRules
        if request_rate is None:  # Scrapy's ProtegoRobotParser wraps Protego as .rp
            request_rate = getattr(getattr(self.rules, "rp", None), "request_rate", None)
        if request_rate is not None:
            rate = _safe_call(request_rate, _text(user_agent))
            if rate is not None and rate.requests:
                delays.append(float(rate.seconds) / float(rate.requests))
        delays = [d for d in delays if not math.isnan(d) and d > 0]
        return max(delays) if delays else None


def _text(value: str | bytes) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _safe_call(func: Callable[[Any], Any], arg: Any) -> Any:
    try:
        return func(arg)
    except Exception:  # a parser choking on odd input must not break the crawl
        logger.debug("robots.txt parser failed on %r", arg, exc_info=True)
        return None


class RobotsCache:
    """Look up and store robots.txt state of origins (``scheme://host:port``)."""

    def __init__(
        self,
        store: HostStore,
        parse: Callable[[bytes], Any],
        *,
        memory_entries: int = 10_000,
        memory_bytes: int = 64 * 2**20,
        on_event: Callable[[str], None] | None = None,
        reread: Callable[[RobotsRecord], RobotsRecord] | None = None,
    ) -> None:
        """``reread``: applied to each record read from the store (not to those put in
        this run): the middleware passes its policy's ``within_limits``, so a record
        written under a longer TTL expires by the current one."""
        if memory_entries < 1:
            raise ValueError(f"memory_entries must be positive, got {memory_entries}")
        if memory_bytes < 1:
            raise ValueError(f"memory_bytes must be positive, got {memory_bytes}")
        self.store = store
        self._parse = parse
        self.memory_entries = memory_entries
        self.memory_bytes = memory_bytes
        self._lru: OrderedDict[str, CachedRobots] = OrderedDict()
        self._discards = DiscardLog("robots.txt", "irl_robots/cache/corrupt_record")
        #: Parsed rules by body digest: origins serving byte-identical robots.txt (the
        #: subdomains of a hosting platform, mirrors) share one parse and one body.
        self._shared: dict[bytes, _SharedRules] = {}
        self.held_bytes = 0  # estimated RAM of _lru and _shared (see ORIGIN_BYTES)
        self._event = on_event or (lambda name: None)
        self._reread = reread

    def __len__(self) -> int:
        """Entries held in RAM (not the number stored on disk)."""
        return len(self._lru)

    def get(self, origin: str, *, count: bool = True) -> CachedRobots | None:
        """Cached state of ``origin`` (fresh or not), or None if never fetched.

        ``count=False``: a look that serves no request (hits and misses are not counted,
        so ``cache/miss`` keeps meaning "a request's origin never fetched before")."""
        cached = self._lru.get(origin)
        if cached is not None:
            self._lru.move_to_end(origin)
            if count:
                self._event("memory_hit")
            return cached
        try:
            record = self.store.get_robots(origin)
        except RecordError as exc:
            self._event("corrupt_record")
            self._discards.discarded(origin, exc)
            self.store.delete_robots(origin)
            return None
        if record is None:
            if count:
                self._event("miss")
            return None
        if count:
            self._event("store_hit")
        if self._reread is not None:
            record = self._reread(record)
        return self._remember(origin, self._build(record))

    def put(self, origin: str, record: RobotsRecord) -> CachedRobots:
        """Persist ``record`` and return it parsed."""
        self.store.put_robots(origin, record)
        return self._remember(origin, self._build(record))

    @property
    def distinct_rule_sets(self) -> int:
        """Parsed robots.txt bodies in RAM (each shared by one or more origins)."""
        return len(self._shared)

    def _build(self, record: RobotsRecord) -> CachedRobots:
        if record.kind == RobotsKind.RULES:
            digest = _digest(record.body)
            shared = self._shared.get(digest)
            if shared is not None:  # same body as a cached origin: no parse, one copy
                self._event("shared_rules")
                return CachedRobots(replace(record, body=shared.body), shared.rules, digest)
            return CachedRobots(record, self._parse(record.body), digest)
        if record.kind == RobotsKind.ALLOW_ALL:
            return CachedRobots(record, ALLOW_ALL)
        return CachedRobots(record, DISALLOW_ALL)

    def _remember(self, origin: str, cached: CachedRobots) -> CachedRobots:
        if origin in self._lru:
            self._forget(origin)
        self.held_bytes += ORIGIN_BYTES
        if cached.digest is not None:  # RULES (see _build): count its body once
            shared = self._shared.get(cached.digest)
            if shared is None:
                body = cached.record.body
                size = charged_size(body, cached.rules)
                shared = self._shared[cached.digest] = _SharedRules(body, cached.rules, size)
                self.held_bytes += size
            shared.users += 1
        self._lru[origin] = cached
        # The newest entry always stays (its caller holds it anyway), even if alone it
        # is over the byte bound.
        while len(self._lru) > 1 and (
            len(self._lru) > self.memory_entries or self.held_bytes > self.memory_bytes
        ):
            self._forget(next(iter(self._lru)))
            self._event("evicted")
        return cached

    def _forget(self, origin: str) -> None:
        digest = self._lru.pop(origin).digest
        self.held_bytes -= ORIGIN_BYTES
        if digest is not None:
            shared = self._shared[digest]
            shared.users -= 1
            if shared.users == 0:
                del self._shared[digest]
                self.held_bytes -= shared.size
