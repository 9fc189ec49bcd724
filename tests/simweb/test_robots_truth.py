"""simweb's judge reads each host's robots.txt as a Scrapy crawl obeying it would."""

from __future__ import annotations

import pytest
from scrapy.robotstxt import ProtegoRobotParser

from scrapy_irl.robots.policy import RobotsPolicy
from scrapy_irl.simweb.config import WebConfig
from scrapy_irl.simweb.model import Web
from scrapy_irl.simweb.pages import HUGE_ROBOTS_LIMIT, respond
from scrapy_irl.simweb.robots_truth import fetch_served

WEB = Web(WebConfig.sized("tiny"))


def crawl_verdict(body: bytes, url: str) -> bool:
    """What the crawl decides: its policy's byte limit, then Scrapy's default parser."""
    kept = RobotsPolicy(max_bytes=HUGE_ROBOTS_LIMIT)._within_limit(body)
    return bool(ProtegoRobotParser.from_crawler(None, kept).allowed(url, "*"))


def host_with(robots: str) -> str:
    return next(h.name for h in WEB.hosts.values() if h.robots == robots)


@pytest.mark.parametrize("path", ["/p/2", "/p/3", "/private/x", "/nocolon", "/p/1", "/"])
def test_the_malformed_robots_txt_is_judged_as_the_crawl_obeys_it(path: str) -> None:
    # Its byte order mark hid the first line's group from the judge, which then allowed
    # /p/2 (a misspelt "Disalow:" Protego obeys) while every Scrapy crawl kept off it.
    name = host_with("malformed")
    served, url = fetch_served(WEB, name), f"http://{name}{path}"
    assert served is not None and served.status == 200
    assert served.allowed(url) == crawl_verdict(served.body, url)
    assert not served.allowed(f"http://{name}/p/2")


def test_the_huge_robots_txt_is_judged_as_the_crawl_obeys_it() -> None:
    name = host_with("huge")
    served = fetch_served(WEB, name)
    assert served is not None and len(served.body) > HUGE_ROBOTS_LIMIT
    assert served.body == respond(WEB, WEB.hosts[name], "/robots.txt").body
    for path in ("/private/", "/junk/00000001/", "/page"):
        url = f"http://{name}{path}"
        assert served.allowed(url) == crawl_verdict(served.body, url)
    assert served.allowed(f"http://{name}/page")  # its Disallow: / lies past the limit


def test_a_line_cut_by_the_byte_limit_is_not_read() -> None:
    from scrapy_irl.simweb.robots_truth import parsed_text

    # Half of "Disallow: /secret-area/" is "Disallow: /": the whole site.
    body = b"User-agent: *\n" + b"#" * 980 + b"\nDisallow: /secret-area/\n"
    assert parsed_text(body, limit=1000) == "User-agent: *\n" + "#" * 980 + "\n"
    on_a_line_end = b"User-agent: *\nDisallow: /a/\n"
    assert parsed_text(on_a_line_end + b"Disallow: /\n", limit=len(on_a_line_end)).endswith("/a/\n")
    assert parsed_text(b"\xef\xbb\xbfUser-agent: *\n\xffDisallow: /b/\n") == "User-agent: *\nDisallow: /b/\n"
