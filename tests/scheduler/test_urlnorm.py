"""Session-id parameters are removed; everything else in the URL is kept."""

from __future__ import annotations

import pytest

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
