"""RobotsCacheMiddleware against a fake engine: RFC 9309 rules, persistence, one fetch per origin."""

from __future__ import annotations

import pytest
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import Request
from scrapy.http.request import NO_CALLBACK
from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectionRefusedError, TimeoutError

from scrapy_irl.hosts.store import HostStore
from scrapy_irl.robots.cache import charged_size
from scrapy_irl.robots.middleware import (
    CHECKED_META,
    REFUSED_META,
    RobotsCacheMiddleware,
    robots_for,
)
from scrapy_irl.robots.reduce import AgentRules
from tests.robots.fakes import FakeClock, FakeWeb, fake_crawler, outcome, result_of, run

RULES = b"User-agent: *\nDisallow: /private/\nCrawl-delay: 2\n"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make(tmp_path, clock):
    made: list[RobotsCacheMiddleware] = []

    def build(web: FakeWeb, **settings) -> RobotsCacheMiddleware:
        mw = RobotsCacheMiddleware(fake_crawler(web, tmp_path, **settings), clock=clock)
        made.append(mw)
        return mw

    yield build
    for mw in made:
        mw._spider_closed()


def stat(mw: RobotsCacheMiddleware, key: str) -> int:
    return mw.crawler.stats.get_value(key, 0)


def test_needs_robotstxt_obey(tmp_path):
    crawler = fake_crawler(FakeWeb(), tmp_path)
    crawler.settings.set("ROBOTSTXT_OBEY", False)
    with pytest.raises(NotConfigured):
        RobotsCacheMiddleware(crawler)


@pytest.mark.parametrize(("name", "value", "message"), [
    ("IRL_ROBOTS_TTL", 0, "IRL_ROBOTS_TTL must be > 0"),
    ("IRL_ROBOTS_RETRY_DELAY", -5, "IRL_ROBOTS_RETRY_DELAY must be > 0"),
    ("IRL_ROBOTS_MAX_BYTES", "lots", "invalid IRL_ROBOTS_MAX_BYTES='lots'"),
    ("IRL_ROBOTS_MAX_DECODED_BYTES", 1000, "IRL_ROBOTS_MAX_DECODED_BYTES >= IRL_ROBOTS_MAX_BYTES"),
    ("IRL_ROBOTS_RETRY_MAX_DELAY", 1, "IRL_ROBOTS_RETRY_DELAY <= IRL_ROBOTS_RETRY_MAX_DELAY"),
])
def test_a_bad_setting_stops_the_crawl_instead_of_switching_robots_off(tmp_path, name, value, message):
    crawler = fake_crawler(FakeWeb(), tmp_path)
    crawler.settings.set(name, value)
    with pytest.raises(ValueError, match=message):  # NotConfigured would mean: robots.txt ignored
        RobotsCacheMiddleware(crawler)


def test_rules_obeyed_and_fetched_once(make):
    web = FakeWeb({"http://a.test/robots.txt": (200, RULES)})
    mw = make(web)
    assert outcome(mw, "http://a.test/page") == "allowed"
    assert outcome(mw, "http://a.test/private/x") == "Forbidden by robots.txt"
    assert outcome(mw, "http://A.test:80/other") == "allowed"  # same origin
    assert web.urls == ["http://a.test/robots.txt"]
    request = web.requested[0]
    assert request.callback is NO_CALLBACK
    assert request.meta["dont_obey_robotstxt"] and request.meta["dont_redirect"]
    assert stat(mw, "robotstxt/forbidden") == 1
    assert stat(mw, "robotstxt/request_count") == 1
    assert stat(mw, "robotstxt/response_status_count/200") == 1
    assert stat(mw, "irl_robots/cache/memory_hit") == 2
    mw.crawler.signals.send_catch_log_async.assert_awaited_once()


def test_origins_differ_by_scheme_and_port(make):
    web = FakeWeb()
    mw = make(web)
    for url in ("http://a.test/", "https://a.test/", "http://a.test:8080/", "http://user@a.test/x"):
        outcome(mw, url)
    assert web.urls == [
        "http://a.test/robots.txt",
        "https://a.test/robots.txt",
        "http://a.test:8080/robots.txt",
    ]


def test_concurrent_requests_wait_for_one_fetch(make):
    answer: Deferred = Deferred()
    web = FakeWeb({"http://a.test/robots.txt": answer})
    mw = make(web)
    waiting = [run(mw.process_request(Request(f"http://a.test/{p}"))) for p in ("x", "private/y", "z")]
    assert len(web.requested) == 1
    assert not any(d.called for d in waiting)
    answer.callback((200, RULES))
    assert result_of(waiting[0]) is None
    with pytest.raises(IgnoreRequest):
        result_of(waiting[1])
    assert result_of(waiting[2]) is None
    assert stat(mw, "irl_robots/waited") == 2


def test_persisted_across_runs(make, tmp_path):
    web = FakeWeb({"http://a.test/robots.txt": (200, RULES)})
    first = make(web)
    outcome(first, "http://a.test/")
    first._spider_closed()
    second = make(web)
    assert outcome(second, "http://a.test/private/1") == "Forbidden by robots.txt"
    assert web.urls == ["http://a.test/robots.txt"]
    assert stat(second, "irl_robots/cache/store_hit") == 1


def test_ttl_expiry_refetches(make, clock):
    web = FakeWeb({"http://a.test/robots.txt": (200, RULES)})
    mw = make(web, IRL_ROBOTS_TTL=100)
    outcome(mw, "http://a.test/")
    clock.now += 99
    outcome(mw, "http://a.test/")
    assert len(web.requested) == 1
    web.answers["http://a.test/robots.txt"] = (200, b"User-agent: *\nDisallow: /\n")
    clock.now += 2
    assert outcome(mw, "http://a.test/") == "Forbidden by robots.txt"
    assert len(web.requested) == 2
    assert stat(mw, "irl_robots/cache/expired") == 1


@pytest.mark.parametrize("answer", [(200, RULES), (503, b"")])
def test_a_ttl_lowered_for_the_next_run_applies_to_stored_records(make, clock, answer):
    """The store kept the expiry the writing run computed: after a run with the default
    day, a run with IRL_ROBOTS_TTL 100 went on using the old rules for a day
    (docs/quickstart.rst advises lowering it while testing your own site). A failed
    fetch's back-off is likewise capped by the next run's IRL_ROBOTS_RETRY_* settings."""
    web = FakeWeb({"http://a.test/robots.txt": answer})
    first = make(web, IRL_ROBOTS_RETRY_DELAY=3600)
    outcome(first, "http://a.test/")
    first._spider_closed()
    web.answers["http://a.test/robots.txt"] = (200, b"User-agent: *\nDisallow: /\n")
    clock.now += 101
    second = make(web, IRL_ROBOTS_TTL=100, IRL_ROBOTS_RETRY_DELAY=50,
                  IRL_ROBOTS_RETRY_MAX_DELAY=50)  # fmt: skip
    assert outcome(second, "http://a.test/") == "Forbidden by robots.txt"
    assert len(web.requested) == 2
    assert stat(second, "irl_robots/cache/expired") == 1


def test_a_ttl_raised_for_the_next_run_leaves_stored_expiries_alone(make, clock):
    web = FakeWeb({"http://a.test/robots.txt": (200, RULES)})
    first = make(web, IRL_ROBOTS_TTL=100)
    outcome(first, "http://a.test/")
    first._spider_closed()
    clock.now += 101
    second = make(web, IRL_ROBOTS_TTL=1000)
    outcome(second, "http://a.test/")
    assert len(web.requested) == 2  # expired by the TTL it was fetched under


@pytest.mark.parametrize("status", [401, 403, 404, 410, 451])
def test_4xx_allows_everything(make, status):
    mw = make(FakeWeb({"http://a.test/robots.txt": (status, RULES)}))
    assert outcome(mw, "http://a.test/private/x") == "allowed"


@pytest.mark.parametrize(
    "answer", [(500, b""), (503, RULES), TimeoutError(), ConnectionRefusedError()], ids=str
)
def test_unreachable_disallows_then_retries_with_backoff(make, clock, answer):
    web = FakeWeb({"http://a.test/robots.txt": answer})
    mw = make(web, IRL_ROBOTS_RETRY_DELAY=10, IRL_ROBOTS_RETRY_MAX_DELAY=25)
    assert outcome(mw, "http://a.test/x").startswith("Forbidden by robots.txt: unreachable")
    assert stat(mw, "irl_robots/unreachable_dropped") == 1
    assert stat(mw, "robotstxt/forbidden") == 1  # RFC 9309: "complete disallow"
    clock.now += 9
    assert outcome(mw, "http://a.test/x").startswith("Forbidden by robots.txt: unreachable")
    assert len(web.requested) == 1  # still backing off
    clock.now += 2
    outcome(mw, "http://a.test/x")
    assert len(web.requested) == 2  # retried after 10 s; next back-off 20 s
    clock.now += 19
    outcome(mw, "http://a.test/x")
    assert len(web.requested) == 2
    clock.now += 2
    outcome(mw, "http://a.test/x")
    clock.now += 24  # capped at 25 s, not 40 s
    outcome(mw, "http://a.test/x")
    assert len(web.requested) == 3
    clock.now += 2
    outcome(mw, "http://a.test/x")
    assert len(web.requested) == 4
    web.answers["http://a.test/robots.txt"] = (200, RULES)
    clock.now += 26
    assert outcome(mw, "http://a.test/x") == "allowed"


def test_recent_copy_stays_in_force_when_unreachable(make, clock):
    web = FakeWeb({"http://a.test/robots.txt": (200, RULES)})
    mw = make(web, IRL_ROBOTS_TTL=100, IRL_ROBOTS_STALE_TTL=1000)
    outcome(mw, "http://a.test/")
    web.answers["http://a.test/robots.txt"] = (503, b"")
    clock.now += 101
    assert outcome(mw, "http://a.test/page") == "allowed"
    assert outcome(mw, "http://a.test/private/1") == "Forbidden by robots.txt"
    assert stat(mw, "irl_robots/stale_used") == 1
    clock.now += 1000  # the copy is now too old
    assert outcome(mw, "http://a.test/page").startswith("Forbidden by robots.txt: unreachable")


def test_redirects_followed_up_to_five(make):
    answers = {
        f"http://a.test/r{i}": (301, b"", {"Location": f"/r{i + 1}"}) for i in range(1, 5)
    }
    answers["http://a.test/robots.txt"] = (301, b"", {"Location": "http://b.test/r1"})
    answers["http://b.test/r1"] = (302, b"", {"Location": "http://a.test/r2"})
    answers["http://a.test/r5"] = (200, b"User-agent: *\nDisallow: /\n")
    mw = make(FakeWeb(answers))
    assert outcome(mw, "http://a.test/x") == "Forbidden by robots.txt"  # 5 redirects: followed
    assert stat(mw, "irl_robots/redirects") == 5


@pytest.mark.parametrize("status", [300, 304, 305])
def test_a_status_that_is_not_a_redirect_is_not_followed_for_its_location(make, status):
    # A 304 with a Location was followed (any 3xx was), and the target's rules replaced
    # the copy in hand; Scrapy's RedirectMiddleware follows 301, 302, 303, 307, 308 only.
    web = FakeWeb({"http://a.test/robots.txt": (status, b"", {"Location": "http://a.test/other"}),
                   "http://a.test/other": (200, b"User-agent: *\nDisallow: /\n")})  # fmt: skip
    mw = make(web)
    assert outcome(mw, "http://a.test/page") == "allowed"
    assert web.urls == ["http://a.test/robots.txt"]


def test_a_redirect_to_another_origins_robots_txt_serves_that_origin_too(make):
    # http -> https, the commonest redirect: the answer at the end of the chain is the
    # https origin's own robots.txt, so its pages need no second fetch.
    web = FakeWeb({"http://a.test/robots.txt": (301, b"", {"Location": "https://a.test/robots.txt"}),
                   "https://a.test/robots.txt": (200, RULES)})  # fmt: skip
    mw = make(web)
    assert outcome(mw, "http://a.test/private/x") == "Forbidden by robots.txt"
    assert outcome(mw, "https://a.test/private/x") == "Forbidden by robots.txt"
    assert outcome(mw, "https://a.test/page") == "allowed"
    assert web.urls == ["http://a.test/robots.txt", "https://a.test/robots.txt"]
    assert stat(mw, "irl_robots/redirect_target_stored") == 1
    # Only the http origin was a request's miss; the look at the target is not counted.
    assert stat(mw, "irl_robots/cache/miss") == 1


@pytest.mark.parametrize(("final_url", "answer"), [
    ("https://a.test/robots.txt", (503, b"")),  # a failure belongs to the origin asked
    ("https://a.test/robots.txt?v=2", (200, RULES)),  # not that origin's robots.txt
    ("https://a.test/files/robots.txt", (200, RULES)),
])  # fmt: skip
def test_only_a_final_answer_of_the_targets_own_robots_txt_is_shared(make, final_url, answer):
    web = FakeWeb({"http://a.test/robots.txt": (301, b"", {"Location": final_url}),
                   final_url: answer})  # fmt: skip
    mw = make(web)
    outcome(mw, "http://a.test/page")
    assert web.urls == ["http://a.test/robots.txt", final_url]
    web.answers["https://a.test/robots.txt"] = (200, b"User-agent: *\nDisallow: /\n")
    assert outcome(mw, "https://a.test/page") == "Forbidden by robots.txt"  # its own file
    assert web.urls[-1] == "https://a.test/robots.txt" and len(web.urls) == 3
    assert stat(mw, "irl_robots/redirect_target_stored") == 0


def test_a_fresh_record_of_the_target_serves_the_redirecting_origin(make, clock):
    # The https origin's robots.txt was fetched first; the http origin's redirects to it.
    # That file was fetched a second time for the http origin (found crawling a loopback
    # web, 2026-11-27): its fresh copy serves both, as long as it is fresh.
    web = FakeWeb({"https://a.test/robots.txt": (200, b"User-agent: *\nDisallow: /\n"),
                   "http://a.test/robots.txt": (301, b"", {"Location": "https://a.test/robots.txt"})})  # fmt: skip
    mw = make(web)
    assert outcome(mw, "https://a.test/page") == "Forbidden by robots.txt"
    web.answers["https://a.test/robots.txt"] = (200, b"User-agent: *\nAllow: /\n")  # changed since
    assert outcome(mw, "http://a.test/page") == "Forbidden by robots.txt"  # the fresh copy
    assert web.urls == ["https://a.test/robots.txt", "http://a.test/robots.txt"]
    assert stat(mw, "irl_robots/redirect_target_reused") == 1
    assert stat(mw, "irl_robots/redirect_target_stored") == 0
    clock.now += 25 * 3600  # both expired: the redirect is followed again
    assert outcome(mw, "http://a.test/page") == "allowed"
    assert web.urls[-2:] == ["http://a.test/robots.txt", "https://a.test/robots.txt"]


def test_an_unreachable_target_is_asked_again_not_reused(make):
    web = FakeWeb({"https://a.test/robots.txt": (503, b""),
                   "http://a.test/robots.txt": (301, b"", {"Location": "https://a.test/robots.txt"})})  # fmt: skip
    mw = make(web)
    outcome(mw, "https://a.test/page")
    web.answers["https://a.test/robots.txt"] = (200, b"User-agent: *\nAllow: /\n")  # back
    assert outcome(mw, "http://a.test/page") == "allowed"
    assert web.urls == ["https://a.test/robots.txt", "http://a.test/robots.txt",
                        "https://a.test/robots.txt"]  # fmt: skip
    assert stat(mw, "irl_robots/redirect_target_reused") == 0


def test_more_than_five_redirects_mean_unavailable(make):
    answers = {f"http://a.test/r{i}": (301, b"", {"Location": f"/r{i + 1}"}) for i in range(1, 10)}
    answers["http://a.test/robots.txt"] = (301, b"", {"Location": "/r1"})
    web = FakeWeb(answers)
    mw = make(web)
    assert outcome(mw, "http://a.test/x") == "allowed"
    assert len(web.requested) == 6
    assert stat(mw, "irl_robots/redirect_limit") == 1


def test_only_first_max_bytes_are_parsed(make):
    head = b"User-agent: *\nDisallow: /private/\n"
    body = head + b"# filler\n" * 2000 + b"Disallow: /\n"
    mw = make(FakeWeb({"http://a.test/robots.txt": (200, body)}), IRL_ROBOTS_MAX_BYTES=len(head) + 100)
    assert outcome(mw, "http://a.test/page") == "allowed"
    assert outcome(mw, "http://a.test/private/") == "Forbidden by robots.txt"
    assert stat(mw, "irl_robots/truncated") == 1


@pytest.mark.parametrize(
    "body",
    [b"", b"GIF89a\xd3\x00\xfe\x00\xa2", b"\xff\xfe\x00garbage<html>", b"<html><body>Disallow is a word</body></html>"],
)
def test_garbage_means_no_rules(make, body):
    mw = make(FakeWeb({"http://a.test/robots.txt": (200, body)}))
    assert outcome(mw, "http://a.test/private/x") == "allowed"


def test_ignored_robots_request_allows_without_caching(make):
    from scrapy.exceptions import IgnoreRequest as Ignore

    web = FakeWeb({"http://a.test/robots.txt": Ignore("offsite")})
    mw = make(web)
    assert outcome(mw, "http://a.test/x") == "allowed"
    assert outcome(mw, "http://a.test/y") == "allowed"
    assert len(web.requested) == 2
    assert stat(mw, "irl_robots/fetch_ignored") == 2


def test_meta_data_and_file_urls_skip_robots(make):
    web = FakeWeb({"http://a.test/robots.txt": (200, b"User-agent: *\nDisallow: /\n")})
    mw = make(web)
    assert outcome(mw, "http://a.test/x", dont_obey_robotstxt=True) == "allowed"
    assert outcome(mw, "data:text/plain,hi") == "allowed"
    assert outcome(mw, "file:///etc/hostname") == "allowed"
    # a host name Twisted refuses (the IRL scheduler flags it): it fails in the
    # downloader before a byte is sent, and robots.txt was fetched for it for nothing
    assert outcome(mw, "http://u@a.test/x", irl_invalid_host=True) == "allowed"
    assert web.requested == []


def test_user_agent_groups(make):
    body = b"User-agent: irlbot\nDisallow: /\n\nUser-agent: *\nDisallow: /private/\n"
    web = FakeWeb({"http://a.test/robots.txt": (200, body)})
    mw = make(web, ROBOTSTXT_USER_AGENT="IRLbot")
    assert outcome(mw, "http://a.test/page") == "Forbidden by robots.txt"
    other = make(web, USER_AGENT="OtherBot/1.0", IRL_HOSTS_DIR=str(mw.store.path) + "-2")
    assert outcome(other, "http://a.test/page") == "allowed"


def test_ram_is_bounded_by_the_lru(make):
    web = FakeWeb({f"http://h{i}.test/robots.txt": (200, RULES) for i in range(200)})
    mw = make(web, IRL_ROBOTS_MEMORY_ENTRIES=16)
    for i in range(200):
        assert outcome(mw, f"http://h{i}.test/private/x") == "Forbidden by robots.txt"
    assert len(mw.cache) == 16
    for i in range(200):  # evicted origins come back from LevelDB, not the network
        assert outcome(mw, f"http://h{i}.test/ok") == "allowed"
    assert len(web.requested) == 200
    assert stat(mw, "irl_robots/cache/store_hit") >= 184


def test_ram_is_bounded_by_bytes_for_huge_robots(make):
    """A few huge robots.txt files must not fill RAM under the (large) count bound."""
    huge = b"User-agent: *\nDisallow: /private/\n" + b"".join(
        b"Disallow: /section-%06d/\n" % i for i in range(18_000)  # 468 KB: under IRL_ROBOTS_MAX_BYTES
    )
    # distinct bodies: identical ones would share one parse
    bodies = [huge + b"Disallow: /only-h%02d/\n" % i for i in range(12)]
    web = FakeWeb({f"http://h{i}.test/robots.txt": (200, bodies[i]) for i in range(12)})
    # room for three parsed huge rule sets (each ~6 MB: the body plus 18 002 rules)
    one = 512 + charged_size(bodies[0], AgentRules(bodies[0], None, "Scrapy"))
    assert one > 18_000 * 320
    limit = 3 * one + 1000
    mw = make(web, IRL_ROBOTS_MEMORY_BYTES=limit)
    for i in range(12):
        assert outcome(mw, f"http://h{i}.test/private/x") == "Forbidden by robots.txt"
        assert mw.cache.held_bytes <= limit
    assert len(mw.cache) == 3
    assert stat(mw, "irl_robots/cache/evicted") == 9
    for i in range(12):  # evicted rules come back from LevelDB and still apply
        assert outcome(mw, f"http://h{i}.test/section-000123/") == "Forbidden by robots.txt"
        assert outcome(mw, f"http://h{i}.test/public") == "allowed"
    assert len(web.requested) == 12
    assert mw.cache.held_bytes <= limit


def test_one_entry_over_the_byte_bound_is_still_used(make):
    web = FakeWeb({"http://a.test/robots.txt": (200, RULES), "http://b.test/robots.txt": (200, RULES)})
    mw = make(web, IRL_ROBOTS_MEMORY_BYTES=1)
    assert outcome(mw, "http://a.test/private/x") == "Forbidden by robots.txt"
    assert outcome(mw, "http://b.test/private/x") == "Forbidden by robots.txt"
    assert len(mw.cache) == 1  # only the newest is kept


def test_crawl_delay_and_request_rate(make):
    web = FakeWeb(
        {
            "http://a.test/robots.txt": (200, RULES),
            "http://b.test/robots.txt": (200, b"User-agent: *\nRequest-rate: 1/5\nCrawl-delay: 1\n"),
            "http://c.test/robots.txt": (200, b"User-agent: *\nDisallow: /x\n"),
        }
    )
    mw = make(web)
    for host in "abc":
        outcome(mw, f"http://{host}.test/")
    assert mw.crawl_delay(Request("http://a.test/")) == 2.0
    assert mw.crawl_delay(Request("http://b.test/")) == 5.0
    assert mw.crawl_delay(Request("http://c.test/")) is None
    assert mw.crawl_delay(Request("http://unknown.test/")) is None
    assert robots_for(mw.crawler) is mw


def test_corrupt_record_is_refetched(make):
    web = FakeWeb({"http://a.test/robots.txt": (200, RULES)})
    first = make(web)
    outcome(first, "http://a.test/")
    first.store._db.put(b"Rhttp://a.test", b"\x07junk")  # a record of an unknown version
    first.cache._lru.clear()
    assert outcome(first, "http://a.test/private/") == "Forbidden by robots.txt"
    assert len(web.requested) == 2
    assert stat(first, "irl_robots/cache/corrupt_record") == 1


def test_store_shared_between_middlewares_of_a_process(make):
    web = FakeWeb({"http://a.test/robots.txt": (200, RULES)})
    one, two = make(web), make(web)
    assert one.store is two.store
    outcome(one, "http://a.test/")
    assert outcome(two, "http://a.test/private/") == "Forbidden by robots.txt"
    assert len(web.requested) == 1
    one._spider_closed()
    assert not two.store.closed
    two._spider_closed()
    assert isinstance(two.store, HostStore) and two.store.closed


def test_identical_bodies_share_one_parse(make):
    """Subdomains serving one robots.txt cost one parsed rule set, not one each."""
    body = b"User-agent: *\nDisallow: /private/\n" + b"".join(
        b"Disallow: /section-%06d/\n" % i for i in range(5_000)
    )
    web = FakeWeb({f"http://u{i}.blog.test/robots.txt": (200, body) for i in range(50)})
    web.answers["http://other.test/robots.txt"] = (200, RULES)
    parses = []
    mw = make(web)
    parse = mw._parse
    mw.cache._parse = lambda b: parses.append(len(b)) or parse(b)
    for i in range(50):
        assert outcome(mw, f"http://u{i}.blog.test/private/x") == "Forbidden by robots.txt"
    assert outcome(mw, "http://other.test/private/x") == "Forbidden by robots.txt"
    assert parses == [len(body), len(RULES)]
    assert mw.cache.distinct_rule_sets == 2
    assert stat(mw, "irl_robots/cache/shared_rules") == 49
    sizes = sorted(shared.size for shared in mw.cache._shared.values())
    assert mw.cache.held_bytes == sum(sizes) + 51 * 512  # the big body is charged once
    assert sizes[-1] >= len(body) + 5_001 * 320


def test_byte_accounting_returns_to_zero_after_evictions(make):
    """Shared and private rule sets are released exactly once when their origins go."""
    bodies = [b"User-agent: *\nDisallow: /p%d/\n" % (i % 3) for i in range(40)]
    web = FakeWeb({f"http://h{i}.test/robots.txt": (200, bodies[i]) for i in range(40)})
    mw = make(web, IRL_ROBOTS_MEMORY_ENTRIES=4)
    for i in range(40):
        assert outcome(mw, f"http://h{i}.test/p{i % 3}/x") == "Forbidden by robots.txt"
        held = {cached.digest for cached in mw.cache._lru.values()}
        expected = 512 * len(mw.cache) + sum(mw.cache._shared[d].size for d in held)
        assert mw.cache.held_bytes == expected
        assert set(mw.cache._shared) == held


def test_protego_bodies_are_reduced_to_our_group_unless_switched_off(make, tmp_path):
    """A file naming many agents costs one copy of our group's rules, not one per agent."""
    agents = b"".join(b"User-agent: bot%d\n" % i for i in range(300))
    body = agents + b"User-agent: *\n" + b"".join(b"Disallow: /s%d/\n" % i for i in range(2_000))
    web = FakeWeb({"http://a.test/robots.txt": (200, body)})
    mw = make(web)
    assert outcome(mw, "http://a.test/s5/x") == "Forbidden by robots.txt"
    assert outcome(mw, "http://a.test/t/x") == "allowed"
    rules = mw.cache.get("http://a.test").rules
    assert isinstance(rules, AgentRules) and rules.kept_lines == 1 + 2_000
    assert mw.cache.held_bytes == 512 + len(body) + 2048 + 2_000 * 320 + 2048  # "*" line: 2048
    for settings in ({"IRL_ROBOTS_REDUCE": False},
                     {"ROBOTSTXT_PARSER": "scrapy.robotstxt.PythonRobotParser"}):  # fmt: skip
        whole = make(web, IRL_HOSTS_DIR=str(tmp_path / f"h{len(settings)}{len(str(settings))}"), **settings)
        assert outcome(whole, "http://a.test/s5/x") == "Forbidden by robots.txt"
        assert not isinstance(whole.cache.get("http://a.test").rules, AgentRules)


@pytest.mark.parametrize("target", ["file:///etc/hostname", "data:text/plain,Disallow", "ftp://a.test/robots.txt"])
def test_redirects_away_from_http_are_not_followed(make, target):
    # Following them read local files (a FIFO hung the crawl); Scrapy's RedirectMiddleware
    # refuses them too. The origin counts as a bad redirect: allowed, like a 4xx.
    web = FakeWeb({"http://a.test/robots.txt": (302, b"", {"Location": target})})
    mw = make(web)
    assert outcome(mw, "http://a.test/x") == "allowed"
    assert web.urls == ["http://a.test/robots.txt"]
    assert stat(mw, "irl_robots/bad_redirect") == 1


def test_a_location_that_is_no_url_is_a_bad_redirect(make):
    # urljoin raised out of the fetch: every request to the origin failed, nothing cached.
    web = FakeWeb({"http://a.test/robots.txt": (302, b"", {"Location": "http://[bad/robots.txt"})})
    mw = make(web)
    assert outcome(mw, "http://a.test/x") == "allowed"
    assert outcome(mw, "http://a.test/y") == "allowed"
    assert web.urls == ["http://a.test/robots.txt"]
    assert stat(mw, "irl_robots/bad_redirect") == 1


@pytest.mark.parametrize("target", ["http://user:pw@b.test/robots.txt", "http://:8434/robots.txt"])
def test_a_redirect_to_a_host_the_client_refuses_is_a_bad_redirect(make, target):
    # Twisted fails such a URL before sending ("invalid hostname"): read as an unreachable
    # server, the site's every URL was held through the retries and then dropped.
    web = FakeWeb({"http://a.test/robots.txt": (301, b"", {"Location": target}),
                   target: ValueError("invalid hostname: b''")})  # fmt: skip
    mw = make(web)
    assert outcome(mw, "http://a.test/x") == "allowed"
    assert web.urls == ["http://a.test/robots.txt"]
    assert stat(mw, "irl_robots/bad_redirect") == 1


def test_a_redirect_to_userinfo_through_a_proxy_is_followed(make):
    # The proxy is connected to, not the host Twisted would refuse: the rules are real.
    target = "http://user@b.test/robots.txt"
    web = FakeWeb({"http://a.test/robots.txt": (301, b"", {"Location": target}),
                   target: (200, b"User-agent: *\nDisallow: /x\n")})  # fmt: skip
    mw = make(web)
    assert outcome(mw, "http://a.test/x", proxy="http://127.0.0.1:3128") == "Forbidden by robots.txt"
    assert web.urls == ["http://a.test/robots.txt", target]


def test_a_utf8_location_is_read_as_scrapy_reads_it(make):
    web = FakeWeb({
        "http://a.test/robots.txt": (301, b"", {"Location": "/rüles.txt"}),
        "http://a.test/r%C3%BCles.txt": (200, b"User-agent: *\nDisallow: /\n"),
    })  # fmt: skip
    mw = make(web)
    assert outcome(mw, "http://a.test/page") == "Forbidden by robots.txt"
    assert web.urls[1] == "http://a.test/r%C3%BCles.txt"


@pytest.mark.parametrize("status", [99999, 40000, 32768])
def test_a_status_beyond_16_bits_is_stored(make, status):
    # The record's 16-bit status field made storing it raise: every request failed.
    web = FakeWeb({"http://a.test/robots.txt": (status, b"")})
    mw = make(web)
    assert outcome(mw, "http://a.test/x").startswith("Forbidden by robots.txt: unreachable")
    assert outcome(mw, "http://a.test/y").startswith("Forbidden by robots.txt: unreachable")
    assert len(web.requested) == 1  # cached: asked once


# -- requests the IRL scheduler checked at hand-out (CHECKED_META) ---------------------------
def _expired_rules(make, clock) -> tuple[FakeWeb, RobotsCacheMiddleware]:
    """A middleware whose record of http://a.test (RULES) expired a second ago."""
    web = FakeWeb({"http://a.test/robots.txt": (200, RULES)})
    mw = make(web, IRL_ROBOTS_TTL=3)
    outcome(mw, "http://a.test/")
    clock.now += 4
    return web, mw


def test_a_checked_request_is_judged_by_the_expired_record_without_a_fetch(make, clock):
    # The scheduler renewed robots.txt in the host's turn, then the URL waited longer than
    # the TTL for its IP: fetching here went outside the heaps, the page right behind it.
    web, mw = _expired_rules(make, clock)
    checked = {CHECKED_META: ("http://a.test", clock.now + 60)}
    assert outcome(mw, "http://a.test/page", **checked) == "allowed"
    assert outcome(mw, "http://a.test/private/x", **checked) == "Forbidden by robots.txt"
    assert web.urls == ["http://a.test/robots.txt"]  # not fetched again
    assert stat(mw, "irl_robots/expired_but_checked") == 2
    assert stat(mw, "irl_robots/cache/expired") == 0
    assert outcome(mw, "http://a.test/page") == "allowed"  # unflagged: fetched as before
    assert len(web.requested) == 2


@pytest.mark.parametrize("flag", [
    ("http://b.test", 2e9),  # copied into a request for another origin (a redirect, meta=response.meta)
    ("https://a.test", 2e9),  # another scheme: another robots.txt
    "http://a.test",  # malformed
    None,
])  # fmt: skip
def test_a_flag_for_another_origin_or_malformed_fetches_as_before(make, clock, flag):
    web, mw = _expired_rules(make, clock)
    assert outcome(mw, "http://a.test/page", **{CHECKED_META: flag}) == "allowed"
    assert len(web.requested) == 2
    assert stat(mw, "irl_robots/expired_but_checked") == 0


def test_a_flag_past_its_time_fetches_and_is_counted(make, clock):
    web, mw = _expired_rules(make, clock)
    late = {CHECKED_META: ("http://a.test", clock.now - 1)}
    assert outcome(mw, "http://a.test/page", **late) == "allowed"
    assert len(web.requested) == 2
    assert stat(mw, "irl_robots/checked_too_late") == 1


def test_a_checked_request_still_fetches_when_nothing_is_cached(make, clock):
    web = FakeWeb({"http://a.test/robots.txt": (200, RULES)})
    mw = make(web)
    checked = {CHECKED_META: ("http://a.test", clock.now + 60)}
    assert outcome(mw, "http://a.test/private/x", **checked) == "Forbidden by robots.txt"
    assert web.urls == ["http://a.test/robots.txt"]


def test_a_checked_request_waits_for_a_fetch_in_flight_rather_than_old_rules(make, clock):
    web, mw = _expired_rules(make, clock)
    answer: Deferred = Deferred()
    web.answers["http://a.test/robots.txt"] = answer
    first = run(mw.process_request(Request("http://a.test/x")))  # fetches: rules expired
    checked = {CHECKED_META: ("http://a.test", clock.now + 60)}
    second = run(mw.process_request(Request("http://a.test/y", meta=checked)))
    assert not second.called  # the new answer is coming: no reason to use the old one
    answer.callback((200, b"User-agent: *\nDisallow: /y\n"))
    assert result_of(first) is None
    with pytest.raises(IgnoreRequest):
        result_of(second)
    assert len(web.requested) == 2


def test_a_request_the_scheduler_refused_fails_whatever_the_cache_says(make):
    # The IRL scheduler hands such a request out only for its errback: even if robots.txt
    # was renewed (or never cached here) meanwhile, nothing is fetched.
    web = FakeWeb({"http://a.test/robots.txt": (200, b"")})  # allows everything
    mw = make(web)
    assert outcome(mw, "http://a.test/p", **{REFUSED_META: "forbidden"}) == "Forbidden by robots.txt"
    assert outcome(mw, "http://a.test/q", **{REFUSED_META: "unreachable"}) == (
        "Forbidden by robots.txt: unreachable (5xx, timeout or network error)"
    )
    assert web.urls == []
    assert stat(mw, "robotstxt/forbidden") == 2  # an unreachable robots.txt forbids all
    assert stat(mw, "irl_robots/unreachable_dropped") == 1


def test_a_redirect_a_middleware_will_not_follow_is_cached_as_unavailable(make):
    # robots.txt redirected to a host an offsite filter refuses: the server answered, but
    # nothing was stored, so every request to the origin fetched robots.txt again (under
    # the IRL scheduler: once in the host's turn, then again right before the page).
    from scrapy.exceptions import IgnoreRequest as Ignore

    web = FakeWeb({
        "http://a.test/robots.txt": (302, b"", {"Location": "http://elsewhere.test/robots.txt"}),
        "http://elsewhere.test/robots.txt": Ignore("offsite"),
    })  # fmt: skip
    mw = make(web)
    assert outcome(mw, "http://a.test/x") == "allowed"
    assert outcome(mw, "http://a.test/y") == "allowed"
    assert web.urls == ["http://a.test/robots.txt", "http://elsewhere.test/robots.txt"]
    assert stat(mw, "irl_robots/redirect_ignored") == 1
    assert stat(mw, "irl_robots/fetch_ignored") == 0


def test_a_failure_whose_text_is_empty_is_logged_with_its_class(make, caplog):
    # "robots.txt of ... unreachable: " and nothing more, for a body cut short (Scrapy's
    # ResponseDataLossError has no text; found by a probe, 2026-11-27).
    class SilentError(Exception):
        def __str__(self) -> str:
            return ""

    mw = make(FakeWeb({"http://a.test/robots.txt": SilentError()}))
    assert outcome(mw, "http://a.test/x").startswith("Forbidden by robots.txt: unreachable")
    assert "robots.txt of http://a.test unreachable: SilentError" in caplog.text
