"""Requests without a host (``data:``, ``about:``, ``file:``, an unknown scheme) skip the heaps but
not URLseen: each distinct one is handed out once, as Scrapy's own scheduler does. They
were handed out as they came, so a ``javascript:`` link on every page of a broad crawl
was one failed download per page. Saved at a graceful stop, they come back after it."""

from __future__ import annotations

from pathlib import Path

from scrapy import Request, Spider
from scrapy.utils.test import get_crawler

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
