"""robots.txt rules are matched against the path the server serves: without dot segments."""

from __future__ import annotations

import pytest

from scrapy_irl.robots.matching import remove_dot_segments, url_for_rules, urls_for_rules
from tests.robots.fakes import FakeWeb, outcome


@pytest.mark.parametrize(("path", "resolved"), [
    ("/./private/x", "/private/x"),
    ("/x/../private/y", "/private/y"),
    ("/a/%2E%2E/private", "/private"),
    ("/a/%2e/b", "/a/b"),
    ("/a/b/.", "/a/b/"),
    ("/a/b/..", "/a/"),
    ("/../../x/./y/..", "/x/"),
    ("/..", "/"),
    ("/", "/"),
    ("/a/.hidden/..b/c.", "/a/.hidden/..b/c."),
    ("/a//../b", "/a/b"),
])  # fmt: skip
def test_remove_dot_segments_as_rfc_3986_says(path: str, resolved: str) -> None:
    assert remove_dot_segments(path) == resolved


def test_url_for_rules_touches_only_the_path() -> None:
    url = "http://h.test/a.html?next=/./x#top"
    assert url_for_rules(url) is url
    assert url_for_rules("http://h.test/x/../private/y?q=/../z") == "http://h.test/private/y?q=/../z"


@pytest.fixture
def make(tmp_path):
    from scrapy_irl.robots.middleware import RobotsCacheMiddleware
    from tests.robots.fakes import fake_crawler

    made = []

    def build(web: FakeWeb) -> RobotsCacheMiddleware:
        mw = RobotsCacheMiddleware(fake_crawler(web, tmp_path))
        made.append(mw)
        return mw

    yield build
    for mw in made:
        mw._spider_closed()


def test_dot_segments_do_not_get_past_a_disallow(make) -> None:
    """Links written ``/./private/x`` or ``/x/../private/y``: the server serves
    ``/private/...``, and the rules were matched against the path as written (a probe
    fetched both pages, in stock Scrapy too)."""
    web = FakeWeb({"http://a.test/robots.txt": (200, b"User-agent: *\nDisallow: /private\n")})
    mw = make(web)
    for url in ("http://a.test/./private/x", "http://a.test/x/../private/y",
                "http://a.test/a/%2e%2e/private/z"):  # fmt: skip
        assert outcome(mw, url).startswith("Forbidden by robots.txt"), url
    assert outcome(mw, "http://a.test/private/../public/x") == "allowed"
    assert outcome(mw, "http://a.test/./public") == "allowed"


@pytest.mark.parametrize(("url", "forms"), [
    ("http://h.test/a/b?next=http://x//y", ("http://h.test/a/b?next=http://x//y",)),
    ("http://h.test//private//x/", ("http://h.test//private//x/", "http://h.test/private/x/")),
    ("http://h.test/a/.//b", ("http://h.test/a//b", "http://h.test/a/b")),
    ("http://h.test//", ("http://h.test//", "http://h.test/")),
    # merged first, as nginx and http.server do, ".." climbs out of /a: /private/x
    ("http://h.test/a//../private/x", ("http://h.test/a/private/x", "http://h.test/private/x")),
])  # fmt: skip
def test_a_path_with_repeated_slashes_is_matched_in_both_forms(url: str, forms: tuple) -> None:
    assert urls_for_rules(url) == forms


def test_repeated_slashes_do_not_get_past_a_disallow(make) -> None:
    """nginx and http.server serve ``//private/x`` as ``/private/x``: a probe of
    2026-11-29 found ``Disallow: /private/`` did not match it. A rule written with the
    slashes doubled still matches the path as written."""
    web = FakeWeb({"http://a.test/robots.txt": (200, b"User-agent: *\nDisallow: /private/\n"
                                                      b"Disallow: /raw//path\n")})  # fmt: skip
    mw = make(web)
    for url in ("http://a.test//private/x", "http://a.test/private//x",
                "http://a.test///private///", "http://a.test/raw//path",
                "http://a.test/a//../private/x"):  # fmt: skip
        assert outcome(mw, url).startswith("Forbidden by robots.txt"), url
    assert outcome(mw, "http://a.test//public//x") == "allowed"


def test_the_cache_api_matches_both_forms_too(tmp_path) -> None:
    from scrapy_irl.robots.cache import CachedRobots

    class Rules:  # Disallow: /private/
        def allowed(self, url: str, agent: str) -> bool:
            return not url.partition("//")[2].partition("/")[2].startswith("private/")

    cached = CachedRobots(record=None, rules=Rules())  # type: ignore[arg-type]
    assert not cached.allowed("http://a.test//private//x", "*")
    assert cached.allowed("http://a.test//public//x", "*")
