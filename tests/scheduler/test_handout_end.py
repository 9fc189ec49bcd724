"""A request that ends without reaching the downloader frees its host at once.

Downloader middlewares end requests early all the time: HttpCacheMiddleware answers from
its cache, OffsiteMiddleware raises IgnoreRequest. Neither sends the downloader's
signals, so the scheduler used to keep the host "in flight" until IRL_HANDOUT_TIMEOUT
(60 s) ran out: one page a minute from a cache, and a crawl that could not close.
"""

from __future__ import annotations

from pathlib import Path

from tests.crawl_runner import crawl_in_subprocess as crawl
from tests.loopback_site import _Server, serving
from tests.scheduler.test_robots_expiry import done, fake_time, hand_out  # noqa: F401

#: Zero delays: what is measured is only whether a host is freed, not politeness.
FAST = {
    "ADDONS": {"scrapy_irl.Addon": 0},
    "IRL_HOST_DELAY": 0.0, "IRL_HOST_DELAY_MIN": 0.0, "IRL_IP_DELAY": 0.0,
    "IRL_IP_DELAY_MIN": 0.0, "IRL_POLITENESS_MARGIN": 0.0,
    # Well under the 60 s a stuck hand-out would hold its host: a crawl that waits for
    # one is stopped by the timeout instead of finishing.
    "CLOSESPIDER_TIMEOUT": 45,
}  # fmt: skip


def test_requests_refused_or_answered_by_a_middleware_free_their_host(tmp_path: Path) -> None:
    with serving(_Server(size=40)) as server:
        stats, _ = crawl({
            "start": [f"{server.base_url}/page/{n}" for n in range(40)],
            "settings": {
                **FAST, "IRL_HOSTS_DIR": str(tmp_path / "hosts"),
                "DOWNLOADER_MIDDLEWARES": {"tests.scheduler.short_circuit.ShortCircuitMiddleware": 950},
            },
        })  # fmt: skip
    assert stats["finish_reason"] == "finished"
    # Of the 40 pages, the middleware refuses the 20 odd ones and answers 9 (4, 8, ..., 36),
    # so only the 11 others reach the server (their links are all duplicates).
    assert stats["irl_sched/handouts_ended_before_download"] == 20
    assert stats["irl_sched/handouts_answered_by_middleware"] == 9
    assert stats.get("irl_sched/handouts_expired", 0) == 0
    pages = {path for path in server.hits if path.startswith("/page/")}
    assert pages == {f"/page/{n}" for n in range(40) if n % 2 == 0 and not (n and n % 4 == 0)}


def test_a_crawl_served_from_the_http_cache_is_not_held_back(tmp_path: Path) -> None:
    settings = {**FAST, "IRL_HOSTS_DIR": str(tmp_path / "hosts"), "HTTPCACHE_ENABLED": True,
                "HTTPCACHE_DIR": str(tmp_path / "httpcache")}  # fmt: skip
    with serving(_Server(size=30)) as server:
        first, _ = crawl({"start": [f"{server.base_url}/page/1"], "settings": settings})
        fetched = sum(server.hits.values())
        second, _ = crawl({"start": [f"{server.base_url}/page/1"], "settings": settings})
        assert sum(server.hits.values()) == fetched  # the second crawl asked nothing
    assert first["finish_reason"] == second["finish_reason"] == "finished"
    assert second["httpcache/hit"] == first["httpcache/miss"] >= 29  # /page/1.. and robots
    assert second["irl_sched/handouts_answered_by_middleware"] == second["scheduler/dequeued"]
    assert second.get("irl_sched/handouts_expired", 0) == 0


def test_a_page_answered_by_a_middleware_gives_its_host_and_ip_their_turn_back(fake_time):
    # Nothing reached the server, yet its start counted: a replay from HTTPCACHE went at
    # one page per tau_h (10 s by default) with no request sent.
    from scrapy import Request
    from scrapy.http import Response

    sched, robots, web, clock = fake_time  # tau_h 10 s, tau_s 1 s
    for n in range(4):
        sched.enqueue_request(Request(f"http://a.test/p{n}", dont_filter=True))
    assert hand_out(sched, clock, 1000.0) is None  # robots.txt first
    for n in range(3):
        request = hand_out(sched, clock, 1001.0)
        assert request is not None and request.url == f"http://a.test/p{n}"
        if n < 2:
            sched._answered(Response(request.url, flags=["cached"]), request)  # a cache hit
    sched._reached(request)  # this one went to the server
    sched._downloaded(Response(request.url), request)
    done(sched, request)
    assert hand_out(sched, clock, 1010.9) is None  # tau_h counts from the page sent
    assert sched.polite.hosts["a.test"].due_at() == 1011.0


def test_other_middleware_answers_and_timed_out_hand_outs_keep_their_turn(fake_time):
    # A middleware may fetch the page itself (a browser, a render service) and answer
    # with it; a hand-out freed by IRL_HANDOUT_TIMEOUT may still be on its way. Given
    # back like a cache hit, five pages of one host went in 2 s at tau_h 10 s (review).
    from scrapy import Request
    from scrapy.http import Response

    sched, robots, web, clock = fake_time  # tau_h 10 s, tau_s 1 s
    for n in range(3):
        sched.enqueue_request(Request(f"http://a.test/p{n}", dont_filter=True))
    assert hand_out(sched, clock, 1000.0) is None  # robots.txt first
    first = hand_out(sched, clock, 1001.0)
    sched._answered(Response(first.url), first)  # fetched by the middleware itself
    assert hand_out(sched, clock, 1010.9) is None
    assert hand_out(sched, clock, 1011.0) is None  # robots.txt renewed (its TTL is 3 s)
    second = hand_out(sched, clock, 1012.0)
    assert second is not None and second.url == "http://a.test/p1"
    # the engine's in-progress set cannot be read here: the timeout frees the host ...
    sched._expire_handouts(1012.0 + sched.handout_timeout + 1)
    assert sched.counts["handouts_expired"] == 1
    host = sched.polite.hosts["a.test"]
    assert host.due_at() == 1022.0  # ... and its booked start stands
    clock.now = 1100.0
    sched._reached(second)  # it went out after all, late
    assert sched.counts["handouts_reached_after_timeout"] == 1
    assert host.due_at() == 1110.0


def test_urls_parked_behind_a_queue_a_cache_emptied_come_back_at_the_next_tick(fake_time):
    # Lazy loading parks a host's URLs beyond IRL_RAM_BACKLOG_SECONDS (60 s) of its tau_h
    # (10 s here): its 7th queued URL on. Answered from a cache, the queue empties at once,
    # and the parked URLs waited for the periodic unpark: a probe's replay of a 100-page
    # site from HTTPCACHE stood still for a minute, twice. The tick's sweep sees the room.
    from scrapy import Request
    from scrapy.http import Response

    sched, robots, web, clock = fake_time
    for n in range(12):
        sched.enqueue_request(Request(f"http://a.test/p{n}", dont_filter=True))
    assert hand_out(sched, clock, 1000.0) is None  # robots.txt first
    served = []
    for _ in range(12):
        request = hand_out(sched, clock, 1001.0)
        if request is None:
            break
        served.append(request.url)
        sched._answered(Response(request.url, flags=["cached"]), request)
    assert 0 < len(served) < 12 and sched.parked.available == 12 - len(served)
    clock.now = 1002.0
    sched._next_forget = float("inf")  # the tick keeps a.test (this fake has no DNS to ask)
    sched._on_tick()  # a.test's queue is empty: its parked URLs come back
    assert sched.counts["unparked"] == 12 - len(served)
    for step in range(30):  # their robots.txt (TTL 3 s) is fetched again on the way
        request = hand_out(sched, clock, 1002.0 + step)
        if request is not None:
            served.append(request.url)
            sched._answered(Response(request.url, flags=["cached"]), request)
    assert sorted(served) == sorted(f"http://a.test/p{n}" for n in range(12))
    assert sched.counts["parked_again"] == 0  # taken back only as many as a.test had room for
    sched._on_tick()  # the served records leave the store once BEAST has saved
    assert len(sched.parked) == 0


def test_urls_parked_behind_a_long_back_off_are_not_reread_at_every_tick(fake_time):
    # A host backing off for longer than IRL_RAM_BACKLOG_SECONDS (up to IRL_BACKOFF_MAX,
    # 120 s) parks every URL read for it, so RAM stays empty: an early unpark parked them
    # all again, and the next tick did it again (a review measured 0.5 s of CPU a tick
    # with 20 000 URLs parked). The sweep skips the host without reading its URLs until
    # the back-off's end is within the horizon.
    from scrapy import Request

    sched, robots, web, clock = fake_time
    sched.polite.hosts["a.test"].not_before = 1200.0  # backing off: nothing goes before
    sched._next_forget = float("inf")
    for n in range(12):
        sched.enqueue_request(Request(f"http://a.test/p{n}", dont_filter=True))
    for step in range(10):
        assert hand_out(sched, clock, 1001.0 + step) is None
        sched._on_tick()
    assert sched.parked.available == 12
    assert sched.parked.taken_total == 0 and sched.parked.parked_total == 12
    for step in range(200):  # within 60 s of the back-off's end, they come back, by tau_h
        clock.now = 1011.0 + step
        sched._on_tick()
    assert 0 < sched.parked.taken_total <= 12 and sched.counts["parked_again"] == 0