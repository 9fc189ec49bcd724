"""A component that cannot open its store says so in one ERROR line before the crawl stops.

Scrapy reports an exception raised while it builds middlewares and extensions as "Task
exception was never retrieved" and two tracebacks; the store's own advice came only on
their last line (found by a kill -9 probe, 2026-11-27).
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from scrapy.utils.test import get_crawler

from scrapy_irl.dirlock import DirectoryInUseError
from scrapy_irl.exceptions import IrlError
from scrapy_irl.hosts.store import HostStore


def _refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.ERROR and r.getMessage().startswith("Refusing to start")]  # fmt: skip


@pytest.mark.parametrize("path", ["scrapy_irl.hosts.middleware.HostDnsMiddleware",
                                  "scrapy_irl.robots.middleware.RobotsCacheMiddleware"])  # fmt: skip
def test_a_damaged_host_store_is_refused_in_one_clear_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, path: str
) -> None:
    from scrapy.utils.misc import load_object

    store = tmp_path / "hosts"
    with HostStore(store):
        pass  # an empty store is enough
    (store / "CURRENT").write_bytes(b"")  # what a probe did to a live store
    crawler = get_crawler(settings_dict={"IRL_HOSTS_DIR": str(store), "ROBOTSTXT_OBEY": True})
    with pytest.raises(IrlError):
        load_object(path).from_crawler(crawler)
    [line] = _refusals(caplog)
    assert path.rsplit(".", 1)[1] in line and "host store" in line and str(store) in line


def test_a_warc_directory_in_use_is_refused_in_one_clear_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from scrapy_irl.warc.extension import WarcExtension
    from scrapy_irl.warc.writer import RotatingWarcWriter

    live = RotatingWarcWriter(tmp_path, "scrapy-irl", 10**9)
    try:
        with pytest.raises(DirectoryInUseError):
            WarcExtension.from_crawler(get_crawler(settings_dict={"IRL_WARC_DIR": str(tmp_path)}))
    finally:
        live.release()
    [line] = _refusals(caplog)
    assert "WarcExtension" in line and "in use by another crawl" in line


def test_a_damaged_urlseen_store_is_refused_in_one_clear_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from scrapy_irl.dupefilter import DrumDupeFilter

    crawler = get_crawler(settings_dict={"JOBDIR": str(tmp_path)})
    DrumDupeFilter.from_crawler(crawler).close("finished")
    manifest = tmp_path / "irl" / "urlseen" / "MANIFEST"
    manifest.write_bytes(b"not a manifest")
    with pytest.raises(IrlError):
        DrumDupeFilter.from_crawler(get_crawler(settings_dict={"JOBDIR": str(tmp_path)}))
    [line] = _refusals(caplog)
    assert "DrumDupeFilter" in line and "MANIFEST" in line


def test_a_store_path_the_system_refuses_is_refused_in_one_clear_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A file where the host store's directory should be: the OSError escaped raw."""
    from scrapy_irl.exceptions import StoreAccessError
    from scrapy_irl.hosts.middleware import HostDnsMiddleware

    (tmp_path / "hosts").write_text("not a directory")
    crawler = get_crawler(settings_dict={"IRL_HOSTS_DIR": str(tmp_path / "hosts")})
    with pytest.raises(StoreAccessError, match="cannot be opened, read or written"):
        HostDnsMiddleware.from_crawler(crawler)
    [line] = _refusals(caplog)
    assert "HostDnsMiddleware" in line and str(tmp_path / "hosts") in line


def _error_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if " ERROR: " in line or " CRITICAL: " in line]


@pytest.mark.parametrize("damage", ["frontier", "warc"])
def test_a_refused_crawl_logs_one_error_line_not_scrapys_follow_on_errors(
    tmp_path: Path, damage: str
) -> None:
    """After the refusal, Scrapy logged "Scraper close failure", CoreStats' failed
    spider_closed handler and asyncio's "Task exception was never retrieved", each with
    tracebacks, as ERRORs: four error lines, three of them read as the cause. They are
    now DEBUG lines marked as following the refusal."""
    from tests.crawl_runner import crawl_in_subprocess
    from tests.loopback_site import loopback_site

    settings = {"ADDONS": {"scrapy_irl.Addon": 0}, "JOBDIR": str(tmp_path / "job"),
                "IRL_HOSTS_DIR": str(tmp_path / "hosts"), "IRL_HOST_DELAY": 0.0,
                "IRL_HOST_DELAY_MIN": 0.0, "IRL_IP_DELAY": 0.0, "IRL_IP_DELAY_MIN": 0.0,
                "CLOSESPIDER_TIMEOUT": 30}  # fmt: skip
    with loopback_site(size=4) as site:
        start = [f"{site.base_url}/page/1"]
        first, log = crawl_in_subprocess({"start": start, "settings": settings})
        assert first["finish_reason"] == "finished" and not _error_lines(log)
        if damage == "frontier":
            (tmp_path / "job" / "irl" / "beast" / "STATE").write_bytes(b"garbage")
            settings["LOG_LEVEL"] = "DEBUG"
        else:
            settings["EXTENSIONS"] = {"scrapy_irl.warc.extension.WarcExtension": 0}
            settings["IRL_WARC_DIR"] = str(tmp_path / "warc")
            (tmp_path / "warc").write_text("a file where the WARC directory should be")
        hits = sum(site.hits.values())
        _, log = crawl_in_subprocess({"start": start, "settings": settings})
        assert sum(site.hits.values()) == hits  # refused: nothing fetched
    errors = _error_lines(log)
    assert len(errors) == 1, "\n".join(errors)
    [line] = errors
    assert "Refusing to start the crawl" in line
    assert ("beast/STATE" if damage == "frontier" else "WarcExtension") in line
    if damage == "frontier":  # still in the log, at DEBUG, saying what they are
        assert "DEBUG: After the refusal to start above (a consequence, not another fault): " \
               "Scraper close failure" in log


def test_the_follow_on_filter_spares_other_crawls_and_keeps_nothing_alive() -> None:
    import gc
    import weakref

    from scrapy_irl.refusal import FollowOnErrors

    class Spider:
        pass

    refused_spider, other_spider = Spider(), Spider()
    refused = IrlError("damaged")
    follow_on = FollowOnErrors(refused_spider, refused)

    def record(spider: object = None, exc: BaseException | None = None,
               level: int = logging.ERROR) -> logging.LogRecord:  # fmt: skip
        made = logging.LogRecord("scrapy.core.engine", level, __file__, 1, "boom", None,
                                 (type(exc), exc, None) if exc else None)  # fmt: skip
        if spider is not None:
            made.spider = spider
        return made

    caused = RuntimeError("slot not assigned")
    caused.__context__ = refused
    for demoted in (record(refused_spider), record(exc=refused), record(exc=caused)):
        assert follow_on.filter(demoted) and demoted.levelno == logging.DEBUG
        assert demoted.getMessage().startswith(FollowOnErrors.PREFIX)
    for kept in (record(other_spider), record(exc=IrlError("damaged")),
                 record(refused_spider, level=logging.INFO)):  # fmt: skip
        level = kept.levelno
        assert follow_on.filter(kept) and kept.levelno == level and kept.getMessage() == "boom"
    # CrawlerProcess: Twisted logs the unawaited failure as text, with no exception attached
    twisted = [logging.LogRecord("twisted", logging.CRITICAL, __file__, 1, text, None, None)
               for text in ("Unhandled error in Deferred:",
                            "Traceback ...\nscrapy_irl.exceptions.IrlError: damaged\n",
                            "Traceback ...\nValueError: another crawl's fault\n")]  # fmt: skip
    assert [follow_on.filter(r) and r.levelno for r in twisted] == [logging.DEBUG, logging.DEBUG,
                                                                    logging.CRITICAL]  # fmt: skip
    gone = weakref.ref(refused_spider)
    del refused_spider, kept, demoted
    gc.collect()
    assert gone() is None  # the filter outlives the crawl, not the crawl's objects


def test_refusals_without_end_keep_a_bounded_number_of_filters() -> None:
    # A service retrying a damaged job added four filters per refusal, for good.
    from scrapy_irl.refusal import FOLLOW_ON_LOGGERS, KEPT_FILTERS, FollowOnErrors, quiet_follow_on_errors

    for n in range(3 * KEPT_FILTERS):
        quiet_follow_on_errors(None, IrlError(f"damaged {n}"))
    for name in FOLLOW_ON_LOGGERS:
        kept = [f for f in logging.getLogger(name).filters if isinstance(f, FollowOnErrors)]
        assert len(kept) == KEPT_FILTERS
