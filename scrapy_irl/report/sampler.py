"""``StatsSampler``: numeric crawl stats as a time series, one JSON line per interval.

Enabled by ``EXTENSIONS = {"scrapy_irl.report.sampler.StatsSampler": 0}`` (the add-on
lists it for a crawl with a JOBDIR; ``IRL_REPORT_ENABLED = False`` turns it off). Every ``IRL_REPORT_INTERVAL`` seconds (and once more at
close) one line ``{"t": ..., "time": ..., "stats": {...}}`` is appended to
``stats.jsonl`` in the data directory (``IRL_REPORT_DIR``, else ``JOBDIR/irl``, else
``./irl-report-data``) and flushed, so a killed crawl leaves at most a torn last line. A
crawl without a JOBDIR cannot resume, so it starts the file afresh. At close the
scheduler's top-PLD table (``scheduler.star.top(n)``), when it has one, goes to
``pld_table.json``, and with ``IRL_REPORT_AT_CLOSE`` the report itself is built. Sampling
never breaks the crawl: write errors are logged once.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.job import job_dir
from twisted.internet import task

from scrapy_irl import config
from scrapy_irl import settings as defaults
from scrapy_irl.refusal import refusing_bad_settings

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

STATS_FILE = "stats.jsonl"
PLD_FILE = "pld_table.json"
DEFAULT_DIR_NAME = "irl-report-data"
#: PLDs written to ``pld_table.json`` at close.
PLD_TABLE_SIZE = 500

#: Defaults of the ``IRL_REPORT_*`` settings (read through :mod:`scrapy_irl.config`, which
#: falls back to them without the add-on and names a bad value's setting).
DEFAULT_ENABLED = defaults.IRL_REPORT_ENABLED
DEFAULT_DIR = defaults.IRL_REPORT_DIR
DEFAULT_AT_CLOSE = defaults.IRL_REPORT_AT_CLOSE


def data_dir(settings: BaseSettings) -> Path:
    """``IRL_REPORT_DIR``, else ``JOBDIR/irl``, else ``./irl-report-data``."""
    explicit = config.getpath(settings, "IRL_REPORT_DIR")
    if explicit:
        return Path(explicit)
    jobdir = job_dir(settings)
    if jobdir:
        return Path(jobdir) / "irl"
    return Path(DEFAULT_DIR_NAME)


def numeric_stats(stats: dict[str, Any]) -> dict[str, int | float]:
    """The stats whose values are finite numbers (bools and datetimes left out)."""
    out: dict[str, int | float] = {}
    for key, value in stats.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if isinstance(value, float) and not math.isfinite(value):
            continue
        out[str(key)] = value
    return out


class StatsSampler:
    """Appends the crawler's numeric stats to ``stats.jsonl`` every interval."""

    def __init__(self, crawler: Crawler, directory: Path, interval: float,
                 clock: Any = None, now: Any = None, *, append: bool = True,
                 report_at_close: bool = False) -> None:  # fmt: skip
        self.crawler = crawler
        self.directory = Path(directory)
        self.interval = interval
        # A JOBDIR crawl may resume, so its series goes on in the same file; a crawl without
        # one cannot, and appending would splice an unrelated earlier run into its report.
        self.append = append
        self.report_at_close = report_at_close
        self.report_index: Path | None = None
        self.clock = (
            clock  # a reactor (or task.Clock in tests); None: the global reactor
        )
        self._now = now or time.time
        self._start: float | None = None
        self._file: Any = None
        self._loop: task.LoopingCall | None = None
        self._failed = False
        self._file_opened = False
        # Names this process's samples, so a reader tells one run of a resumed JOBDIR from
        # the next even when ``t`` does not go back (a first run shorter than an interval).
        self._run = f"{time.time():.6f}-{os.getpid()}"
        self.samples = 0

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        with refusing_bad_settings("StatsSampler", crawler):
            return cls._configured(crawler)

    @classmethod
    def _configured(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        if not config.getbool(settings, "IRL_REPORT_ENABLED"):
            raise NotConfigured("IRL_REPORT_ENABLED is off")
        config.require_reactor(settings, "scrapy_irl.report.sampler.StatsSampler")
        # A bad value raises (not NotConfigured): a report asked for must not vanish.
        interval = config.getfloat(settings, "IRL_REPORT_INTERVAL", above=0)
        ext = cls(crawler, data_dir(settings), interval,
                  append=bool(job_dir(settings)),
                  report_at_close=config.getbool(settings, "IRL_REPORT_AT_CLOSE"))
        crawler.signals.connect(ext.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        return ext

    @property
    def stats_path(self) -> Path:
        return self.directory / STATS_FILE

    @property
    def pld_path(self) -> Path:
        return self.directory / PLD_FILE

    # -- signals -----------------------------------------------------------------------------
    def spider_opened(self, spider: Spider | None = None) -> None:
        self.open()
        self._loop = task.LoopingCall(self.sample)
        if self.clock is not None:
            self._loop.clock = self.clock
        # now=False: the first sample one interval in (stats are empty at open).
        self._loop.start(self.interval, now=False).addErrback(self._loop_failed)

    def spider_closed(
        self, spider: Spider | None = None, reason: str | None = None
    ) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None
        if not self._file_opened and not self._failed:
            # The spider never opened (a crawl refused at start, e.g. its JOBDIR in use by
            # another crawl): nothing to sample, and the data directory may be that
            # crawl's (a refused second crawl appended an empty sample to it).
            return
        self.sample()
        self.write_pld_table()
        self.close()
        if self.report_at_close:
            self.build_report()

    # -- work --------------------------------------------------------------------------------
    def open(self) -> None:
        self._start = self._now()
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            mode = "a" if self.append or self._file_opened else "w"
            self._file = open(self.stats_path, mode, encoding="utf-8")  # noqa: SIM115
            self._file_opened = True
            if mode == "a" and _ends_torn(self.stats_path):
                # A killed run's half-written last line: end it, so the first sample of
                # this run is a line of its own (the reader skips the fragment).
                self._file.write("\n")
        except OSError as exc:
            self._fail(exc)

    def sample(self) -> dict[str, Any] | None:
        """Append one line now; returns the record (None if the file is not writable)."""
        if self._file is None:
            if self._failed:
                return None
            self.open()
            if self._file is None:
                return None
        now = self._now()
        if self._start is None:
            self._start = now
        stats = self.crawler.stats.get_stats() if self.crawler.stats is not None else {}
        record = {"t": round(now - self._start, 3), "time": round(now, 3), "run": self._run,
                  "stats": numeric_stats(stats)}  # fmt: skip
        try:
            self._file.write(json.dumps(record, sort_keys=True) + "\n")
            self._file.flush()
        except (OSError, ValueError) as exc:
            self._fail(exc)
            return None
        self.samples += 1
        return record

    def write_pld_table(self) -> bool:
        """``pld_table.json`` from ``engine.scheduler.star.top()``; False when there is none."""
        engine = getattr(self.crawler, "engine", None)
        scheduler = getattr(engine, "scheduler", None) if engine is not None else None
        star = getattr(scheduler, "star", None) if scheduler is not None else None
        top = getattr(star, "top", None) if star is not None else None
        if not callable(top):
            return False
        try:
            rows = [
                {
                    "pld": str(pld),
                    "indegree": int(d),
                    "budget": int(b),
                    "admitted": int(p),
                }
                for pld, d, b, p in top(PLD_TABLE_SIZE)
            ]
            self.directory.mkdir(parents=True, exist_ok=True)
            tmp = self.pld_path.with_suffix(".json.tmp")
            tmp.write_text(json.dumps(rows, indent=1), encoding="utf-8")
            os.replace(tmp, self.pld_path)
        except Exception as exc:  # noqa: BLE001  # the report must never break the crawl's close
            logger.warning("IRL report: could not write %s: %s", self.pld_path, exc)
            return False
        return True

    def build_report(self) -> Path | None:
        """``scrapy irl-report`` at close: the plots and ``index.html``, summary in the log."""
        if self.samples == 0:
            return None
        try:
            # matplotlib is imported only when a report is built
            from scrapy_irl.report.render import build_report, summary_text

            index = build_report(self.directory, self.directory / "report")
            logger.info("IRL crawl report: %(index)s\n%(summary)s",
                        {"index": index.resolve(), "summary": summary_text(self.directory)})
        except Exception as exc:  # noqa: BLE001  # the report must never break the crawl's close
            logger.warning("IRL report: could not build the report in %s: %r",
                           self.directory / "report", exc)
            return None
        self.report_index = index
        return index

    def close(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass
            self._file = None

    def _fail(self, exc: BaseException) -> None:
        if not self._failed:
            logger.warning(
                "IRL report: cannot write %s (%s); sampling stopped",
                self.stats_path,
                exc,
            )
        self._failed = True
        self.close()

    def _loop_failed(self, failure: Any) -> None:
        logger.error("IRL report: sampling loop failed: %s", failure.getErrorMessage())


def _ends_torn(path: Path) -> bool:
    """Whether the file is non-empty and its last byte is not a newline."""
    try:
        with open(path, "rb") as handle:
            if handle.seek(0, os.SEEK_END) == 0:
                return False
            handle.seek(-1, os.SEEK_END)
            return handle.read(1) != b"\n"
    except OSError:
        return False
