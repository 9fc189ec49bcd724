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
