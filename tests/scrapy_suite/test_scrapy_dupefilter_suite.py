"""Scrapy's own dupefilter, scheduler, engine and crawl tests with DrumDupeFilter swapped in.

``DrumDupeFilter`` claims to be a drop-in ``DUPEFILTER_CLASS`` for Scrapy's stock scheduler.
This runs the tests of Scrapy's source distribution that build a scheduler or crawl the
mock server, with the default ``DUPEFILTER_CLASS`` pointed at it (tests that name their
own dupefilter keep it). The differences are listed below with their reasons.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scrapy_suite.test_scrapy_robots_suite import check_swapped

FILES = (
    "tests/test_dupefilters.py",
    "tests/test_scheduler.py",
    "tests/test_engine.py",
    "tests/test_engine_loop.py",
    "tests/test_crawl.py",
    "tests/test_spider_crawl.py",
    "tests/test_closespider.py",
    "tests/test_request_attribute_binding.py",
    "tests/test_request_left.py",
    "tests/test_pipeline_crawl.py",
)

NOT_RUN = {
    # Runs ``scrapy fetch http://toscrape.com`` in a subprocess: the swap does not reach
    # it, and the name is outside this machine.
    "test_engine.py::TestEngine::test_short_timeout",
}

DELIBERATE = {
    # It cuts a byte off RFPDupeFilter's ``JOBDIR/requests.seen``, a file DRUM does not
    # write: URLseen lives in ``JOBDIR/irl/urlseen/``, CRC-framed bucket files and a sorted
    # cache; torn tails and corruption are tested in tests/drum and tests/test_dupefilter.py.
    "test_dupefilters.py::TestRFPDupeFilter::test_seenreq_truncated",
    # RFPDupeFilter's deprecated in-memory ``fingerprints`` set: the point of DRUM is that
    # there is no such set.
    "test_dupefilters.py::TestRFPDupeFilter::test_fingerprints_deprecation",
}


@pytest.mark.slow
def test_scrapy_dupefilter_and_crawl_tests_with_drum_dupefilter(tmp_path: Path) -> None:
    check_swapped(tmp_path, "IRL_SWAP_DUPEFILTER", FILES, not_run=NOT_RUN, deliberate=DELIBERATE,
                  min_passed=170)  # fmt: skip
