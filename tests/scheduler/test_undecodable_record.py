"""A queued record that no longer decodes (a damaged or foreign pickle) is dropped at its
hand-out, counted and logged, and costs its host nothing: no request reached the server,
so the host's next URL waits for the IP's tau_s only, not for tau_h."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from scrapy import Request, Spider
from scrapy.utils.test import get_crawler

from scrapy_irl.scheduler import IrlScheduler
from scrapy_irl.scheduler.codec import pack_record

HOST = "127.0.0.9"  # an IP literal: routed without a lookup, nothing is ever sent


def test_an_undecodable_record_is_dropped_without_spending_its_hosts_delay(
    tmp_path: Path, caplog
) -> None:
    crawler = get_crawler(Spider, settings_dict={
        "JOBDIR": str(tmp_path), "IRL_HOST_DELAY": 10.0, "IRL_HOST_DELAY_MIN": 10.0,
        "IRL_IP_DELAY": 1.0, "IRL_IP_DELAY_MIN": 1.0, "IRL_POLITENESS_MARGIN": 0.0})  # fmt: skip
    crawler.spider = crawler._create_spider("undecodable")
    sched = IrlScheduler.from_crawler(crawler)
    sched.open(crawler.spider)
    now = [1000.0]
    sched.clock = lambda: now[0]
    try:
        sched.beast.push_front(pack_record(f"http://{HOST}/damaged", b"not a pickle"))
        sched.enqueue_request(Request(f"http://{HOST}/good", dont_filter=True))
        with caplog.at_level(logging.ERROR):
            assert sched.next_request() is None  # the damaged one went first: dropped
        assert sched.counts["undecodable_dropped"] == 1
        assert "Dropping a queued request" in caplog.text
        host = sched.polite.hosts[HOST]
        assert not host.in_flight
        now[0] += 1.5  # past tau_s (1 s), far before tau_h (10 s)
        request = sched.next_request()
        assert request is not None and request.url == f"http://{HOST}/good"
    finally:
        sched.close("finished")


class _TwoArgumentError(Exception):
    """Pickles (as Exception does: its args) but does not unpickle: __init__ wants two."""

    def __init__(self, code: int, text: str) -> None:
        super().__init__(f"{code}: {text}")


def test_a_request_whose_meta_pickles_but_does_not_unpickle_waits_in_ram(
    tmp_path: Path, caplog
) -> None:
    """Written to BEAST, it was dropped as undecodable at its hand-out: lost, no callback,
    no errback (found by a probe, 2026-11-27). The codec reads such records back once."""
    from scrapy_irl.scheduler.codec import RequestCodec

    odd = Request(f"http://{HOST}/odd", meta={"why": _TwoArgumentError(1, "x")})
    with pytest.raises(ValueError, match="cannot read"):
        RequestCodec(None).encode(odd)
    crawler = get_crawler(Spider, settings_dict={"JOBDIR": str(tmp_path)})
    crawler.spider = crawler._create_spider("undecodable")
    sched = IrlScheduler.from_crawler(crawler)
    sched.open(crawler.spider)
    try:
        assert sched.enqueue_request(odd)
        sched.urlseen.merge()
        assert sched.next_request() is odd  # the very object, kept in RAM
        assert sched.counts.get("undecodable_dropped", 0) == 0
        assert crawler.stats.get_value("scheduler/unserializable") == 1
    finally:
        sched.close("finished")


class _NeedsToken(Request):
    """Serializes like any request, but request_from_dict cannot build it again: its
    __init__ wants an argument the dict does not hold."""

    def __init__(self, url: str, token: str, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(url, **kwargs)
        self.token = token


class _Spider(Spider):
    name = "nested"

    class Inner(Request):
        """Saved as ``module.Inner``, a path that does not import."""


@pytest.mark.parametrize("jobdir", [True, False])
def test_a_request_subclass_that_cannot_be_rebuilt_waits_in_ram(tmp_path: Path, jobdir) -> None:
    """Encoded fine, it was dropped as undecodable at its hand-out, without a JOBDIR too
    (where Scrapy's memory queues hand it out unchanged): no callback, no errback (a
    probe, 2026-11-29). The codec rebuilds requests of other classes than Scrapy's once."""
    import gc

    from scrapy_irl.scheduler.codec import RequestCodec

    needs = _NeedsToken(f"http://{HOST}/needs", token="t")
    inner = _Spider.Inner("http://127.0.0.10/inner")  # another host and IP: both go at once
    for request in (needs, inner):
        with pytest.raises(ValueError, match="cannot rebuild"):
            RequestCodec(None).encode(request)
    crawler = get_crawler(_Spider, settings_dict={"JOBDIR": str(tmp_path)} if jobdir else {})
    crawler.spider = crawler._create_spider()
    sched = IrlScheduler.from_crawler(crawler)
    sched.open(crawler.spider)
    now = [1000.0]
    sched.clock = lambda: now[0]
    try:
        assert sched.enqueue_request(needs) and sched.enqueue_request(inner)
        del needs, inner
        gc.collect()
        sched.urlseen.merge()
        got = []
        for _ in range(40):  # bounded
            request = sched.next_request()
            if request is not None:
                got.append(request)
            if len(got) == 2:
                break
            now[0] += 1.0
        assert sorted(type(r).__name__ for r in got) == ["Inner", "_NeedsToken"]
        assert sched.counts.get("undecodable_dropped", 0) == 0
        assert crawler.stats.get_value("scheduler/unserializable") == 2
    finally:
        sched.close("finished")
