"""Requests without a host (``data:``, ``about:``, ``file:``, an unknown scheme) skip the heaps but
not URLseen: each distinct one is handed out once, as Scrapy's own scheduler does. They
were handed out as they came, so a ``javascript:`` link on every page of a broad crawl
was one failed download per page. Saved at a graceful stop, they come back after it."""

from __future__ import annotations

from pathlib import Path

from scrapy import Request, Spider
from scrapy.utils.test import get_crawler

from scrapy_irl.robots.middleware import INVALID_HOST_META
from scrapy_irl.scheduler import IrlScheduler


def opened(directory: Path) -> IrlScheduler:
    crawler = get_crawler(Spider, settings_dict={"JOBDIR": str(directory)})
    crawler.spider = crawler._create_spider("hostless")
    sched = IrlScheduler.from_crawler(crawler)
    sched.open(crawler.spider)
    return sched


def handed_out(sched: IrlScheduler, limit: int = 100) -> list[str]:
    urls = []
    for _ in range(limit):  # bounded
        request = sched.next_request()
        if request is None:
            break
        urls.append(request.url)
    return urls


def test_duplicates_without_a_host_are_filtered(tmp_path: Path) -> None:
    sched = opened(tmp_path)
    for url in ["about:blank", "data:,x", "about:blank", "bad:://x",
                "data:,x", "bad:://x", "bad:://x"]:  # fmt: skip
        assert sched.enqueue_request(Request(url)) is True
    for _ in range(2):
        sched.enqueue_request(Request("data:,again", dont_filter=True))
    assert sched.has_pending_requests()
    sched.urlseen.merge()
    got = handed_out(sched)
    assert sorted(got) == sorted(["about:blank", "data:,x", "bad:://x",
                                  "data:,again", "data:,again"])  # fmt: skip
    stats = sched.crawler.stats
    assert stats.get_value("dupefilter/filtered") == 4
    assert stats.get_value("scheduler/enqueued") == 5
    assert not sched.has_pending_requests()
    sched.close("finished")


def test_a_graceful_stop_saves_them_and_the_next_run_hands_them_out(tmp_path: Path) -> None:
    sched = opened(tmp_path)
    sched.enqueue_request(Request("data:,merged"))
    sched.urlseen.merge()  # checked: waits in the direct queue
    sched.enqueue_request(Request("data:,unchecked"))  # still waits for URLseen
    sched.close("shutdown")
    again = opened(tmp_path)
    again.urlseen.merge()
    assert sorted(handed_out(again)) == ["data:,merged", "data:,unchecked"]
    assert again.crawler.stats.get_value("irl_sched/lost_unserializable_at_close") is None
    again.close("finished")


def test_host_names_twisted_refuses_are_handed_out_at_once_and_filtered(tmp_path: Path) -> None:
    """``http://user@host/`` or a ``%`` in the name: Twisted's client fails them
    before sending a byte. Through the heaps they waited for a robots.txt fetch that
    failed the same way (held through every retry), and a page of a working host
    written with user info backed that host off as if it had not answered."""
    sched = opened(tmp_path)
    for url in ("http://u@www.example.test/a", "http://u:pw@www.example.test:8080/b",
                "http://a_b.example.test/c", "http://www.ex%61mple.test/d",
                "http://u@www.example.test/a"):  # fmt: skip  (a_b: fetchable, see below)
        sched.enqueue_request(Request(url))
    sched.enqueue_request(Request("http://u@proxied.test/e", meta={"proxy": "http://127.0.0.1:9"}))
    sched.enqueue_request(Request("http://www.example.test/f"))
    sched.urlseen.merge()
    got = []
    for _ in range(100):  # bounded
        request = sched.next_request()
        if request is None:
            break
        got.append(request)
    direct = sorted(r.url for r in got if "irl_host" not in r.meta)
    assert direct == ["http://u:pw@www.example.test:8080/b", "http://u@www.example.test/a",
                      "http://www.ex%61mple.test/d"]  # fmt: skip
    # flagged for RobotsCacheMiddleware, which then fetches no robots.txt for them
    assert all(r.meta.get(INVALID_HOST_META) for r in got if "irl_host" not in r.meta)
    # the proxied one (the proxy is what Twisted connects to) goes through the heaps
    # (a_b.example.test too, if this process resolves it: its DNS lookup decides)
    assert "http://u@proxied.test/e" in [r.url for r in got if "irl_host" in r.meta]
    stats = sched.crawler.stats
    assert sched.counts["invalid_host"] == 4
    assert stats.get_value("dupefilter/filtered") == 1
    sched.close("shutdown")


def test_an_underscore_in_a_host_name_is_not_refused_as_scrapys_handler_fetches_it() -> None:
    """Scrapy's HTTP/1.1 handler patches Twisted, when it is built, to accept ``a_b.test``.
    Judged before that (as a crawl's start URLs are), the name was taken as refused, and
    the URL would have gone out without robots.txt or a politeness turn; in the test
    suite the verdict depended on whether an earlier test had built a handler."""
    from scrapy_irl.hosts.names import refused_by_twisted

    assert not refused_by_twisted("http", "a_b.example.test")
    assert not refused_by_twisted("https", "www.under_score.test:8443")
    assert refused_by_twisted("http", "u@a_b.example.test")


def test_another_download_handler_keeps_such_urls_on_the_usual_path(tmp_path: Path) -> None:
    """A browser handler may fetch a name Twisted refuses: no shortcut then."""
    crawler = get_crawler(Spider, settings_dict={
        "JOBDIR": str(tmp_path),
        "DOWNLOAD_HANDLERS": {"http": "scrapy.core.downloader.handlers.datauri.DataURIDownloadHandler"}})  # fmt: skip
    crawler.spider = crawler._create_spider("hostless")
    sched = IrlScheduler.from_crawler(crawler)
    sched.open(crawler.spider)
    sched.enqueue_request(Request("http://u@www.example.test/a"))
    sched.urlseen.merge()
    assert handed_out(sched) == []
    assert sched.counts["invalid_host"] == 0
    sched.close("shutdown")
