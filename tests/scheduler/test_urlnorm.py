"""Session-id parameters are removed; everything else in the URL is kept."""

from __future__ import annotations

import pytest

from scrapy_irl.scheduler.urlnorm import SessionStripper

S = SessionStripper(["sid", "PHPSESSID", "jsessionid"])


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://a.test/p/1.html?sid=0a1b2c", "http://a.test/p/1.html"),
        ("http://a.test/x?page=2&SID=9&q=a", "http://a.test/x?page=2&q=a"),
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
