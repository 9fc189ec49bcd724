"""Session-id parameters are removed; everything else in the URL is kept."""

from __future__ import annotations

import pytest

from scrapy_irl import settings as defaults
from scrapy_irl.scheduler.urlnorm import SessionStripper

S = SessionStripper(["sid", "PHPSESSID", "jsessionid"])


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://a.test/p/1.html?sid=0a1b2c3d4e", "http://a.test/p/1.html"),
        ("http://a.test/x?page=2&SID=9f8e7d6c5b&q=a", "http://a.test/x?page=2&q=a"),
        ("http://a.test/x?phpsessid=1#top", "http://a.test/x#top"),
        ("http://a.test/app;jsessionid=ABC123?x=1", "http://a.test/app?x=1"),
        ("http://a.test/x?side=1&sidebar=2", None),
        ("http://a.test/plain", None),
    ],
)
def test_strip(url, expected):
    assert S(url) == expected


def test_empty_list_keeps_everything():
    assert SessionStripper([])("http://a.test/?sid=1") is None


@pytest.mark.parametrize(
    "url",
    [
        "http://a.test/modules.php?name=News&file=article&sid=1234",  # PHP-Nuke's story id
        "http://a.test/article.pl?sid=07/08/13/1632218",  # Slashdot's
        "http://a.test/view?sid=20240101",  # a number, however long
        "http://a.test/view?sid=",
    ],
)
def test_a_sid_that_is_no_session_token_is_kept(url):
    # ``sid`` names content as often as sessions: stripped, every story of a PHP-Nuke
    # site was the same URL (one fetched, the others dropped as its duplicates).
    assert S(url) is None


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://a.test/t?t=5&sid=0123456789abcdef0123456789abcdef", "http://a.test/t?t=5"),
        ("http://a.test/p/1.html?sid=00a1b2c3d4e5", "http://a.test/p/1.html"),  # simweb's
        ("http://a.test/x?PHPSESSID=1", "http://a.test/x"),  # unambiguous names: any value
    ],
)
def test_a_sid_that_looks_like_a_session_token_is_stripped(url, expected):
    assert S(url) == expected


DEFAULT = SessionStripper(defaults.IRL_SESSION_PARAMS)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        # a conference's talk, a course's class: content, stripped every talk was one URL
        # (a user probe, 2026-11-28: 8 pages scraped by stock Scrapy, 2 with the add-on)
        ("http://a.test/talk?session_id=12", None),
        ("http://a.test/talk?sessionid=20240101", None),
        ("http://a.test/talk?session_id=k3j2h4g5f6d7s8a9&x=1", "http://a.test/talk?x=1"),
        ("http://a.test/x?CFID=12345&CFTOKEN=67890123&p=2", "http://a.test/x?p=2"),
        ("http://a.test/x?jsessionid=7", "http://a.test/x"),
        # the shop platforms' own names (a trap probe, 2026-11-29: osCsid kept)
        ("http://a.test/product_info.php?products_id=7&osCsid=f3a8c2e1b4d5", "http://a.test/product_info.php?products_id=7"),
        ("http://a.test/index.php?main_page=x&zenid=9a8b7c6d5e4f", "http://a.test/index.php?main_page=x"),
        ("http://a.test/?s=my+search", None),  # WordPress's search, not vBulletin's session
    ],
)
def test_the_default_names_strip_content_ids_only_under_a_platforms_session_name(url, expected):
    assert DEFAULT(url) == expected


def test_the_first_url_changed_is_logged_once(tmp_path, caplog):
    # only a stat counted it: a user saw pages vanish with no word why (a probe)
    import logging

    from scrapy import Request

    from tests.scheduler.test_scheduler_lifecycle import opened

    sched = opened(JOBDIR=str(tmp_path))
    try:
        with caplog.at_level(logging.INFO, logger="scrapy_irl.scheduler.intake"):
            for n in range(3):
                sched.enqueue_request(Request(f"http://a.test/p{n}?PHPSESSID=k3j2h4g5f6"))
        lines = [r.getMessage() for r in caplog.records if "session-id" in r.getMessage()]
        assert len(lines) == 1, lines
        assert "http://a.test/p0?PHPSESSID=k3j2h4g5f6 -> http://a.test/p0" in lines[0]
        assert sched.counts["session_params_stripped"] == 3
    finally:
        sched.close("finished")
