"""``RobotsCache``: parsed robots.txt rules in a bounded LRU in front of the host store.

RAM holds at most ``memory_entries`` parsed rule sets, whatever the number of hosts
cached on disk; a miss re-parses the stored body (cheap next to a fetch). A record that
fails to decode is counted, deleted and reported as a miss, so it is fetched again.
"""

from __future__ import annotations

import logging
import math
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from scrapy_irl.hosts.records import RecordError, RobotsKind, RobotsRecord
from scrapy_irl.hosts.store import HostStore

logger = logging.getLogger(__name__)


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

    def allowed(self, url: str, user_agent: str | bytes) -> bool:
        return bool(self.rules.allowed(url, user_agent))

    def crawl_delay(self, user_agent: str | bytes) -> float | None:
        """Seconds between requests asked by Crawl-delay or Request-rate (the larger)."""
        delays: list[float] = []
        crawl_delay = getattr(self.rules, "crawl_delay", None)
        if crawl_delay is not None:
            value = _safe_call(crawl_delay, user_agent)
            if value is not None:
                delays.append(float(value))
        protego = getattr(
            self.rules, "rp", None
        )  # Scrapy's ProtegoRobotParser wraps Protego
        request_rate = getattr(protego, "request_rate", None)
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
        on_event: Callable[[str], None] | None = None,
    ) -> None:
        if memory_entries < 1:
            raise ValueError(f"memory_entries must be positive, got {memory_entries}")
        self.store = store
        self._parse = parse
        self.memory_entries = memory_entries
        self._lru: OrderedDict[str, CachedRobots] = OrderedDict()
        self._event = on_event or (lambda name: None)

    def __len__(self) -> int:
        """Entries held in RAM (not the number stored on disk)."""
        return len(self._lru)

    def get(self, origin: str) -> CachedRobots | None:
        """Cached state of ``origin`` (fresh or not), or None if never fetched."""
        cached = self._lru.get(origin)
        if cached is not None:
            self._lru.move_to_end(origin)
            self._event("memory_hit")
            return cached
        try:
            record = self.store.get_robots(origin)
        except RecordError as exc:
            self._event("corrupt_record")
            logger.warning(
                "Discarding undecodable robots.txt record of %s: %s", origin, exc
            )
            self.store.delete_robots(origin)
            return None
        if record is None:
            self._event("miss")
            return None
        self._event("store_hit")
        return self._remember(origin, self._build(record))

    def put(self, origin: str, record: RobotsRecord) -> CachedRobots:
        """Persist ``record`` and return it parsed."""
        self.store.put_robots(origin, record)
        previous = self._lru.get(origin)
        if (
            previous is not None
            and previous.record.body == record.body
            and previous.record.kind == record.kind
        ):
            cached = CachedRobots(record, previous.rules)  # same rules: skip re-parsing
        else:
            cached = self._build(record)
        return self._remember(origin, cached)

    def _build(self, record: RobotsRecord) -> CachedRobots:
        if record.kind == RobotsKind.RULES:
            return CachedRobots(record, self._parse(record.body))
        if record.kind == RobotsKind.ALLOW_ALL:
            return CachedRobots(record, ALLOW_ALL)
        return CachedRobots(record, DISALLOW_ALL)

    def _remember(self, origin: str, cached: CachedRobots) -> CachedRobots:
        self._lru[origin] = cached
        self._lru.move_to_end(origin)
        while len(self._lru) > self.memory_entries:
            self._lru.popitem(last=False)
        return cached
