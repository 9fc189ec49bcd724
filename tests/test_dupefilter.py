"""DrumDupeFilter: unit behaviour through a real crawler, then real crawls on loopback."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from scrapy import Request
from scrapy.core.scheduler import Scheduler
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.test import get_crawler

from scrapy_irl import Addon
from scrapy_irl.dupefilter import DrumDupeFilter
from tests.crawl_runner import crawl_in_subprocess
from tests.loopback_site import loopback_site


def make_filter(**settings: object) -> DrumDupeFilter:
    crawler = get_crawler(settings_dict={"DUPEFILTER_CLASS": "scrapy_irl.dupefilter.DrumDupeFilter", **settings})
    scheduler = build_from_crawler(Scheduler, crawler)
    assert isinstance(scheduler.df, DrumDupeFilter)
    return scheduler.df


def test_filters_duplicates_by_fingerprint():
    df = make_filter()
    try:
        assert not df.request_seen(Request("http://a.example/x?b=2&a=1"))
        assert df.request_seen(Request("http://a.example/x?a=1&b=2"))  # canonical form
        assert df.request_seen(Request("http://a.example/x?a=1&b=2#frag"))
        assert not df.request_seen(Request("http://a.example/x?a=1&b=2", method="POST"))
        assert not df.request_seen(Request("http://b.example/x"))
    finally:
        df.close("finished")


class UrlFingerprinter:
    """A project's own fingerprinter: the URL itself (every fingerprint starts ``http://``)."""

    def fingerprint(self, request: Request) -> bytes:
        return request.url.encode()


class ShortFingerprinter:
    """A 4-byte fingerprint (CRC-32 of the URL): shorter than a DRUM key."""

    def fingerprint(self, request: Request) -> bytes:
        import zlib

        return zlib.crc32(request.url.encode()).to_bytes(4, "big")


@pytest.mark.parametrize("fingerprinter", [UrlFingerprinter, ShortFingerprinter])
def test_a_projects_own_fingerprints_are_hashed_into_keys(fingerprinter: type) -> None:
    """Keyed by their first 8 bytes, URL fingerprints all collided (every URL after the
    first was a duplicate) and 4-byte ones raised on every request."""
    df = make_filter(REQUEST_FINGERPRINTER_CLASS=fingerprinter)
    try:
        urls = [f"http://site.example/page{i}" for i in range(50)]
        assert [df.request_seen(Request(u)) for u in urls] == [False] * 50
        assert [df.request_seen(Request(u)) for u in urls] == [True] * 50
        assert df.request_fingerprint(Request(urls[0])) == fingerprinter().fingerprint(Request(urls[0])).hex()
    finally:
        df.close("finished")


def test_request_fingerprint_matches_the_stock_filter():
    from scrapy.dupefilters import RFPDupeFilter

    df = make_filter()
    crawler = get_crawler(settings_dict={})
    stock = RFPDupeFilter.from_crawler(crawler)
    try:
        for url in ("http://a.example/x?b=2&a=1", "http://a.example/x?a=1&b=2#f", "http://b.example/"):
            request = Request(url)
            assert df.request_fingerprint(request) == stock.request_fingerprint(request)
            assert len(df.request_fingerprint(request)) == 40  # SHA-1 hex of the default fingerprinter
        assert df.request_fingerprint(Request("http://a.example/x?b=2&a=1")) != df.request_fingerprint(
            Request("http://a.example/x?b=2&a=1", method="POST")
        )
    finally:
        df.close("finished")
        stock.close("finished")


def test_without_jobdir_uses_a_temporary_store_removed_at_close():
    df = make_filter()
    path = df.path
    assert df.temporary and path.exists()
    df.request_seen(Request("http://a.example/"))
    df.close("finished")
    assert not path.exists()


def test_jobdir_keeps_the_seen_set(tmp_path: Path):
    df = make_filter(JOBDIR=str(tmp_path))
    assert df.path == tmp_path / "irl" / "urlseen"
    urls = [f"http://h{i % 7}.example/p/{i}" for i in range(3000)]
    assert not any(df.request_seen(Request(u)) for u in urls)
    df.urlseen.merge()
    df.request_seen(Request("http://late.example/"))  # pending only, written out at close
    df.close("shutdown")
    df2 = make_filter(JOBDIR=str(tmp_path))
    try:
        assert all(df2.request_seen(Request(u)) for u in urls)
        assert df2.request_seen(Request("http://late.example/"))
        assert not df2.request_seen(Request("http://new.example/"))
    finally:
        df2.close("finished")
    assert (tmp_path / "irl" / "urlseen" / "MANIFEST").exists()


def test_stats_at_close_count_closes_own_write_out(tmp_path: Path):
    # Published before the store's close, the stats missed its last write-out: a short
    # crawl ended with urlseen/bytes_appended 0 and 159 bytes in the bucket files.
    df = make_filter(JOBDIR=str(tmp_path))
    for i in range(5):
        df.request_seen(Request(f"http://a.example/{i}"))  # in RAM buffers only
    df.close("finished")
    on_disk = sum(f.stat().st_size for f in (tmp_path / "irl" / "urlseen").glob("bucket-*"))
    stats = df.stats.get_stats()
    assert on_disk > 0 and stats["urlseen/bytes_appended"] == on_disk
    assert stats["urlseen/pending"] == 5


def test_settings_reach_the_store(tmp_path: Path):
    df = make_filter(IRL_URLSEEN_DIR=str(tmp_path / "seen"), IRL_URLSEEN_BUCKETS=4,
                     IRL_URLSEEN_BUCKET_BYTES=1000, IRL_URLSEEN_BUFFER_BYTES=100)
    try:
        assert df.path == tmp_path / "seen" and not df.temporary
        drum = df.urlseen.drum
        assert (drum.k, drum.bucket_bytes, drum.buffer_bytes) == (4, 1000, 100)
        for i in range(500):
            df.request_seen(Request(f"http://x.example/{i}"))
        assert drum.stats.merges > 0  # r = 1000 bytes forces merges
    finally:
        df.close("finished")
    assert (tmp_path / "seen").exists()  # an explicit directory is kept


def test_log_counts_and_logs_once(caplog: pytest.LogCaptureFixture):
    crawler = get_crawler(settings_dict={"DUPEFILTER_CLASS": "scrapy_irl.dupefilter.DrumDupeFilter"})
    crawler.spider = crawler._create_spider("test")
    df = build_from_crawler(Scheduler, crawler).df
    try:
        with caplog.at_level(logging.DEBUG):
            for _ in range(3):
                df.log(Request("http://a.example/"), crawler.spider)
        assert crawler.stats.get_value("dupefilter/filtered") == 3
        messages = [r.getMessage() for r in caplog.records if "Filtered duplicate" in r.getMessage()]
        assert len(messages) == 1 and "DUPEFILTER_DEBUG" in messages[0]
    finally:
        df.close("finished")


def test_addon_selects_the_filter():
    from scrapy.settings import Settings

    settings = Settings()
    Addon().update_settings(settings)
    assert settings["DUPEFILTER_CLASS"] == "scrapy_irl.dupefilter.DrumDupeFilter"
    settings = Settings({"DUPEFILTER_CLASS": "my.Filter"}, priority="project")
    Addon().update_settings(settings)
    assert settings["DUPEFILTER_CLASS"] == "my.Filter"  # the project's choice wins


#: These crawls test the dupefilter under Scrapy's own scheduler (the add-on selects ours).
STOCK_SCHEDULER = "scrapy.core.scheduler.Scheduler"


def crawl(config: dict) -> dict:
    return crawl_in_subprocess(config)[0]


@pytest.mark.slow
def test_real_crawl_drops_duplicates_and_honours_dont_filter(tmp_path: Path):
    with loopback_site(size=200) as site:
        stats = crawl({
            "start": [f"{site.base_url}/page/1"],
            "again": [f"{site.base_url}/page/1"],
            "settings": {"ADDONS": {"scrapy_irl.Addon": 0}, "SCHEDULER": STOCK_SCHEDULER,
                         "IRL_URLSEEN_BUCKETS": 2, "IRL_URLSEEN_BUFFER_BYTES": 90,
                         "IRL_URLSEEN_BUCKET_BYTES": 400},  # tiny M and r: merges mid-crawl
        })
        pages = {p: n for p, n in site.hits.items() if p.startswith("/page/")}
    assert set(pages) == {f"/page/{n}" for n in range(200)}
    assert pages["/page/1"] == 2  # once normally, once dont_filter
    assert all(n == 1 for p, n in pages.items() if p != "/page/1")
    links = sum(len({m for m in (2 * n, 2 * n + 1, n, 0) if m < 200}) for n in range(200))
    assert stats["dupefilter/filtered"] == 1 + links - 200  # start + links - unique pages
    assert stats["urlseen/merges"] >= 1


@pytest.mark.slow
def test_jobdir_resume_does_not_refetch(tmp_path: Path):
    jobdir = str(tmp_path / "job")
    settings = {"ADDONS": {"scrapy_irl.Addon": 0}, "SCHEDULER": STOCK_SCHEDULER, "JOBDIR": jobdir}
    with loopback_site(size=40) as site:
        crawl({"start": [f"{site.base_url}/page/1"], "settings": settings})
        first = dict(site.hits)
        stats = crawl({"start": [f"{site.base_url}/page/{n}" for n in range(40)],
                       "settings": settings})
        second = {p: site.hits[p] - first.get(p, 0) for p in site.hits}
    assert sum(n for p, n in first.items() if p.startswith("/page/")) == 40
    assert not any(n for p, n in second.items() if p.startswith("/page/")), second
    assert stats["dupefilter/filtered"] == 40
