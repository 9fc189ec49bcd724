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
