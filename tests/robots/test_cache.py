"""RobotsCache over a damaged host store."""

from __future__ import annotations

from scrapy_irl.hosts.store import HostStore
def test_a_damaged_store_is_read_once_per_record_and_logged_in_a_few_lines(tmp_path, caplog):
    """A table file cut short: LevelDB fails every read of its records and, once a
    compaction met it, every write, so deleting a discarded record failed and each
    request of the origin read and discarded it again (112 times for one origin, 5 262
    warnings in 6 s of a fuzzed crawl)."""
    import logging

    import plyvel

    from scrapy_irl.hosts.store import DiscardLog
    from scrapy_irl.robots.cache import RobotsCache

    store = HostStore(tmp_path / "h")

    class Damaged:
        """Reads of R keys fail as a cut table does; every write fails."""

        def __init__(self, real):
            self.real = real

        def get(self, key, *args, **kwargs):
            if key.startswith(b"R"):
                raise plyvel.IOError(b"IO error: 000012.ldb: Invalid argument")
            return self.real.get(key, *args, **kwargs)

        def put(self, *args, **kwargs):
            raise plyvel.IOError(b"IO error: 000012.ldb: Invalid argument")

        delete = put

        def __getattr__(self, name):
            return getattr(self.real, name)

    real, store._db = store._db, Damaged(store._db)
    events: list[str] = []
    cache = RobotsCache(store, parse=lambda body: None, on_event=events.append)
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            for n in range(30):
                assert cache.get(f"http://h{n}.test") is None
    assert events.count("corrupt_record") == 30  # once per record, not per request
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == DiscardLog.SHOWN + 1
    assert "may be damaged" in warnings[-1] and "irl_robots/cache/corrupt_record" in warnings[-1]
    store._db = real
    store.close()


def test_crawl_delay_is_read_through_a_protego_wrapper_as_request_rate_is():
    """docs/robots.rst's ``Rules`` wrapper keeps Protego as ``.rp``: Request-rate was read
    through it but Crawl-delay was not (None for ``Crawl-delay: 5``; found by an API
    probe, 2026-11-27)."""
    from protego import Protego

    from scrapy_irl.hosts import RobotsKind, RobotsRecord
    from scrapy_irl.robots.cache import CachedRobots

    class Rules:
        def __init__(self, body: bytes) -> None:
            self.rp = Protego.parse(body.decode())

        def allowed(self, url, user_agent) -> bool:
            return self.rp.can_fetch(url, user_agent)

    def delay(body: bytes) -> float | None:
        record = RobotsRecord(RobotsKind.RULES, 200, 0.0, 0.0, 1.0, 0, body)
        return CachedRobots(record, Rules(body)).crawl_delay("bot")

    assert delay(b"User-agent: *\nCrawl-delay: 5\n") == 5.0
    assert delay(b"User-agent: *\nCrawl-delay: 30\nRequest-rate: 2/20\n") == 30.0
    assert delay(b"User-agent: *\nRequest-rate: 2/20\n") == 10.0
    assert delay(b"User-agent: *\nDisallow: /x\n") is None


def test_a_url_given_as_bytes_is_judged_as_its_text():
    """Scrapy's robots parsers take the URL as text or bytes; ``CachedRobots.allowed``
    raised TypeError on bytes (its dot-segment check searched bytes for a str)."""
    from scrapy.robotstxt import ProtegoRobotParser

    from scrapy_irl.hosts import RobotsKind, RobotsRecord
    from scrapy_irl.robots.cache import CachedRobots

    body = b"User-agent: *\nDisallow: /private/\n"
    record = RobotsRecord(RobotsKind.RULES, 200, 0.0, 0.0, 3600.0, 0, body)
    cached = CachedRobots(record, ProtegoRobotParser.from_crawler(None, body))
    assert cached.allowed(b"http://a.test/private/x", "bot") is False
    assert cached.allowed(b"http://a.test/a/../private/x", b"bot") is False
    assert cached.allowed(b"http://a.test/public", "bot") is True
