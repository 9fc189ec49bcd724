"""One server, one URL: a link spelling out the default port does not make a page new.

Scrapy's fingerprint keeps ``a.test:80`` apart from ``a.test``; the heaps and robots.txt
treat them as one server, but URLseen did not, and one link in the long form made every
relative link of the page it led to a new URL (a probe, 2026-11-28: a site's pages
fetched twice). A redirect from one form to the other is fetched, not dropped as its own
duplicate, once. A trailing dot is not folded: another authority, and an IP literal with
one cannot be fetched (folded, the real page was lost as its duplicate). The tests work
on the scheduler itself: a test server cannot listen on port 80.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from scrapy import Request

from scrapy_irl.scheduler.urlnorm import plain_host_spelling


@pytest.mark.parametrize(
    ("url", "plain"),
    [("http://a.test:80/p", "http://a.test/p"), ("http://a.test:80/p?q#f", "http://a.test/p?q#f"),
     ("https://a.test:443/", "https://a.test/"), ("http://a.test:80", "http://a.test"),
     ("http://127.0.0.1:80/y", "http://127.0.0.1/y"),
     ("http://a.test./p", None), ("http://127.0.0.1.:8080/y", None), ("http://a.test/p", None),
     ("http://a.test:8080/p", None), ("https://a.test:80/p", None), ("http://a.test:080/p", None),
     ("http://user@a.test:80/p", None), ("http://[::1]:80/p", None), ("http://:80/p", None),
     ("data:text/plain,a.test:80", None)],
)  # fmt: skip
def test_plain_host_spelling(url: str, plain: str | None) -> None:
    assert plain_host_spelling(url) == plain


def test_the_default_port_spelled_out_is_a_duplicate_and_a_trailing_dot_is_not(tmp_path: Path) -> None:
    from tests.scheduler.test_scheduler_lifecycle import opened

    sched = opened(JOBDIR=str(tmp_path))
    try:
        for url in ("http://a.test/p", "http://a.test:80/p", "https://a.test:443/q",
                    "https://a.test/q", "http://a.test./p", "http://127.0.0.1.:8080/y",
                    "http://127.0.0.1:8080/y"):  # fmt: skip
            sched.enqueue_request(Request(url))
        sched.urlseen.merge()
        stats = sched.crawler.stats
        assert stats.get_value("dupefilter/filtered") == 2  # :80 and :443 only
        assert sched.counts["host_spellings_folded"] == 2
    finally:
        sched.close("finished")


def test_a_redirect_to_the_other_spelling_is_fetched_once_per_source(tmp_path: Path) -> None:
    """Folded, a redirect from ``a.test:80/p`` to ``a.test/p`` is its own duplicate: it is
    fetched instead, once. A spider copying ``response.meta`` into its links carries
    ``redirect_urls`` along: every later link to the page looked like that redirect again
    and was fetched outside URLseen (a review: one page fetched 58 times)."""
    from tests.scheduler.test_scheduler_lifecycle import opened

    sched = opened(JOBDIR=str(tmp_path))
    try:
        meta = {"redirect_urls": ["http://a.test:80/p"]}
        assert sched._spelling_redirect(Request("http://a.test/p", meta=meta))
        assert not sched._spelling_redirect(Request("http://a.test/p", meta=dict(meta)))
        assert not sched._spelling_redirect(Request("http://a.test/other", meta=dict(meta)))
        assert not sched._spelling_redirect(Request("http://a.test:80/p", meta=dict(meta)))
        assert sched.counts["spelling_redirects_followed"] == 1
    finally:
        sched.close("finished")
