"""``DrumDupeFilter``: a drop-in ``DUPEFILTER_CLASS`` whose seen-set lives in DRUM.

Scrapy's ``RFPDupeFilter`` keeps every fingerprint in a Python set (about 120 bytes of
RAM per unique URL, forever). This filter keeps them in URLseen on disk: RAM holds only
the bucket buffers and the keys not merged yet, bounded by ``IRL_URLSEEN_*`` settings.

Job directory contents
======================

With ``JOBDIR`` the store is ``JOBDIR/irl/urlseen/`` (see ``docs/drum.rst`` for its
format), so a resumed job keeps its seen set; without it, a temporary directory removed
at close. ``IRL_URLSEEN_DIR`` overrides both (kept after close).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from scrapy.dupefilters import BaseDupeFilter
from scrapy.utils.job import job_dir
from scrapy.utils.request import referer_str
from twisted.internet import task

from scrapy_irl import config
from scrapy_irl.drum.store import MAX_BUCKETS
from scrapy_irl.fingerprint import fingerprint_function_for, key_function
from scrapy_irl.refusal import refusing_bad_settings, refusing_start
from scrapy_irl.tempdirs import make_temporary_directory, remove_temporary_directory
from scrapy_irl.urlseen import URLSeen, key_of, unpack_key

_key_of = unpack_key

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector
    from scrapy.utils.request import RequestFingerprinterProtocol

logger = logging.getLogger(__name__)
#: Duplicates are logged where Scrapy's RFPDupeFilter logs them, so a project's logging
#: set-up for them (and tests written against Scrapy's) applies to ours unchanged.
dupes_logger = logging.getLogger("scrapy.dupefilters")


class DrumDupeFilter(BaseDupeFilter):
    """Duplicate filter on DRUM URLseen; same contract and stats as ``RFPDupeFilter``."""

    def __init__(
        self,
        path: Path,
        *,
        temporary: bool,
        fingerprinter: RequestFingerprinterProtocol,
        stats: StatsCollector | None = None,
        debug: bool = False,
        buckets: int = 16,
        buffer_bytes: int = 64 * 1024,
        bucket_bytes: int = 128 * 1024,
        merge_chunk_bytes: int = 4 * 1024 * 1024,
        flush_interval: float = 1.0,
        fsync: bool = True,
        verify_on_open: bool = True,
        fingerprint: Callable[[Request], bytes] | None = None,
        key: Callable[[bytes], int] | None = None,
    ) -> None:
        self.path = path
        self.temporary = temporary
        self.fingerprinter = fingerprinter
        self.stats = stats
        self.debug = debug
        self.logdupes = True
        self.flush_interval = flush_interval
        self.urlseen = URLSeen(
            path,
            buckets=buckets,
            buffer_bytes=buffer_bytes,
            bucket_bytes=bucket_bytes,
            merge_chunk_bytes=merge_chunk_bytes,
            flush_interval=flush_interval,
            fsync=fsync and not temporary,
            verify_on_open=verify_on_open,
        )
        self._drum = self.urlseen.drum
        # Bound once: request_seen runs per request, so no attribute chains there.
        # fingerprint: the caller's choice of function (scrapy_irl.fingerprint's shortcut
        # when from_crawler finds it identical); by default the fingerprinter's own.
        self._fingerprint = fingerprint or fingerprinter.fingerprint
        # How a fingerprint becomes its DRUM key (scrapy_irl.fingerprint.key_function); None
        # for its first 8 bytes, read by the struct shortcut in request_seen.
        key = key if key is not None else key_function(fingerprinter)
        self._key = None if key is key_of else key
        self._check_update = self._drum.check_update_sync
        self._timer: task.LoopingCall | None = None
        if len(self.urlseen) or self.urlseen.pending:
            logger.info(
                "Resuming URLseen at %(path)s: %(keys)d URLs seen, %(pending)d pending merge",
                {"path": path, "keys": len(self.urlseen), "pending": self.urlseen.pending},
            )

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        config.require_reactor(settings, "scrapy_irl.dupefilter.DrumDupeFilter")  # its write-out timer
        with refusing_bad_settings("DrumDupeFilter", crawler):
            configured = config.getpath(settings, "IRL_URLSEEN_DIR")
        jobdir = job_dir(settings)
        temporary = False
        if configured:
            path = Path(configured)
        elif jobdir:
            path = Path(jobdir, "irl", "urlseen")
        else:
            path = make_temporary_directory("scrapy-irl-urlseen-")
            temporary = True
        with refusing_start("DrumDupeFilter (URLseen store)", crawler):
            return cls._opened(crawler, path, temporary)

    @classmethod
    def _opened(cls, crawler: Crawler, path: Path, temporary: bool) -> Self:
        settings = crawler.settings
        return cls(
            path,
            temporary=temporary,
            fingerprinter=crawler.request_fingerprinter,
            fingerprint=fingerprint_function_for(crawler),
            key=key_function(crawler.request_fingerprinter),
            stats=crawler.stats,
            debug=settings.getbool("DUPEFILTER_DEBUG"),
            buckets=config.getpowerof2(settings, "IRL_URLSEEN_BUCKETS", maximum=MAX_BUCKETS),
            buffer_bytes=config.getint(settings, "IRL_URLSEEN_BUFFER_BYTES", minimum=1),
            bucket_bytes=config.getint(settings, "IRL_URLSEEN_BUCKET_BYTES", minimum=1),
            merge_chunk_bytes=config.getint(settings, "IRL_URLSEEN_MERGE_CHUNK_BYTES", minimum=1),
            flush_interval=config.getfloat(settings, "IRL_DRUM_FLUSH_INTERVAL", above=0),
            fsync=config.getbool(settings, "IRL_DRUM_FSYNC"),
            verify_on_open=config.getbool(settings, "IRL_DRUM_VERIFY_ON_OPEN"),
        )

    def request_seen(self, request: Request) -> bool:
        # The DRUM key is the fingerprint's first 8 bytes, big-endian (urlseen.key_of);
        # a precompiled struct reads it without slicing a copy first.
        fingerprint = self._fingerprint(request)
        if self._key is not None:
            return self._check_update(self._key(fingerprint))
        try:
            key = _key_of(fingerprint)[0]
        except struct.error:
            key = key_of(fingerprint)  # raises ValueError: under 8 bytes
        return self._check_update(key)

    def request_fingerprint(self, request: Request) -> str:
        """The request's fingerprint as hex, as ``RFPDupeFilter.request_fingerprint`` gives it.

        For code written against the stock filter's public API; the filter itself keys
        URLseen by the fingerprint's first 8 bytes and never calls this.
        """
        return self._fingerprint(request).hex()

    def open(self) -> None:
        # Bounds the crash window: RAM buffers reach the bucket files at least this often
        # even when no requests arrive to trigger the check on the append path.
        if self.flush_interval > 0:
            self._timer = task.LoopingCall(self._tick)
            self._timer.start(self.flush_interval, now=False)

    def _tick(self) -> None:
        self._drum.write_out()
        self._publish_stats()

    def _publish_stats(self) -> None:
        if self.stats is None:
            return
        s = self.urlseen.stats
        self.stats.set_value("urlseen/keys", s.cache_keys)
        self.stats.set_value("urlseen/pending", self.urlseen.pending)
        self.stats.set_value("urlseen/merges", s.merges)
        self.stats.set_value("urlseen/lookups", s.sync_lookups)
        self.stats.set_value("urlseen/merge_seconds", round(s.merge_seconds, 3))
        self.stats.set_value("urlseen/merge_bytes_read", s.merge_bytes_read)
        self.stats.set_value("urlseen/merge_bytes_written", s.merge_bytes_written)
        self.stats.set_value("urlseen/bytes_appended", s.bytes_appended)
        if s.torn_tuples_dropped:
            self.stats.set_value("urlseen/torn_tuples_dropped", s.torn_tuples_dropped)

    def close(self, reason: str) -> None:
        if self._timer is not None and self._timer.running:
            self._timer.stop()
        self.urlseen.close()
        self._publish_stats()  # after: close's write-out (and merge) counted too
        if self.temporary:
            remove_temporary_directory(self.path)

    def log(self, request: Request, spider: Spider) -> None:
        if self.debug:
            msg = "Filtered duplicate request: %(request)s (referer: %(referer)s)"
            args = {"request": request, "referer": referer_str(request)}
            dupes_logger.debug(msg, args, extra={"spider": spider})
        elif self.logdupes:
            msg = (
                "Filtered duplicate request: %(request)s"
                " - no more duplicates will be shown"
                " (see DUPEFILTER_DEBUG to show all duplicates)"
            )
            dupes_logger.debug(msg, {"request": request}, extra={"spider": spider})
            self.logdupes = False
        if self.stats is not None:
            self.stats.inc_value("dupefilter/filtered")
