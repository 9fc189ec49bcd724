"""RFC 9309 decisions of RobotsPolicy, with made-up times."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scrapy_irl.hosts.records import RobotsKind
from scrapy_irl.robots.policy import NO_RESPONSE, RobotsPolicy

P = RobotsPolicy(ttl=100, max_bytes=10, retry_delay=5, retry_max_delay=60, stale_ttl=500)


@pytest.mark.parametrize(
    ("status", "kind"),
    [(200, RobotsKind.RULES), (204, RobotsKind.RULES), (301, RobotsKind.ALLOW_ALL),
     (404, RobotsKind.ALLOW_ALL), (403, RobotsKind.ALLOW_ALL), (500, RobotsKind.DISALLOW_ALL),
     (429, RobotsKind.DISALLOW_ALL),
     (503, RobotsKind.DISALLOW_ALL), (NO_RESPONSE, RobotsKind.DISALLOW_ALL), (999, RobotsKind.DISALLOW_ALL)],
)
def test_status_classes(status, kind):
    record = P.on_response(status, b"x" * 10 + b"\n" + b"x" * 39, 1000.0, None)
    assert record.kind == kind
    if kind != RobotsKind.DISALLOW_ALL:
        assert record.expires_at == 1100.0
    if kind == RobotsKind.RULES:
        assert record.body == b"x" * 10


def test_backoff_doubles_and_caps():
    assert [P.backoff(n) for n in range(1, 7)] == [5, 10, 20, 40, 60, 60]
    assert P.backoff(10_000) == 60


@given(st.integers(1, 200))
def test_failure_sequence_expiry(failures):
    record = None
    for _ in range(failures):
        record = P.on_failure(503, 0.0, record)
    assert record.failures == failures
    assert record.expires_at == P.backoff(failures)


def test_good_copy_kept_until_stale_then_disallow():
    good = P.on_response(200, b"rules", 0.0, None)
    kept = P.on_failure(503, 400.0, good)
    assert kept.kind == RobotsKind.RULES and kept.body == b"rules" and kept.failures == 1
    assert kept.expires_at == 405.0 and kept.fetched_at == 0.0
    gone = P.on_failure(503, 501.0, kept)
    assert gone.kind == RobotsKind.DISALLOW_ALL and gone.failures == 2 and gone.expires_at == 511.0


def test_success_resets_failures():
    failed = P.on_failure(NO_RESPONSE, 0.0, None)
    assert P.on_response(200, b"", 10.0, failed).failures == 0


@pytest.mark.parametrize(
    "kwargs",
    [{"ttl": 0}, {"max_bytes": 0}, {"max_redirects": -1}, {"retry_delay": 0},
     {"retry_delay": 10, "retry_max_delay": 5}, {"stale_ttl": -1},
     # NaN fails every comparison: it passed "ttl <= 0" and made records that were
     # never fresh and never stale.
     {"ttl": float("nan")}, {"stale_ttl": float("nan")}, {"retry_delay": float("nan")}],
)
def test_invalid_settings_are_refused(kwargs):
    with pytest.raises(ValueError):
        RobotsPolicy(**kwargs)


@pytest.mark.parametrize(
    ("body", "kept"),  # P keeps 10 bytes
    [(b"ab: /\nDisallow: /s\n", b"ab: /\n"),  # cut inside a line: the line goes
     (b"Allow: /x\nDisallow: /", b"Allow: /x\n"),  # the cut falls right after a line end
     (b"Allow: /\r\nDisallow: /", b"Allow: /\r\n"),
     (b"0123456789\nAllow: /", b"0123456789"),  # the byte after the cut ends the line
     (b"0123456789abcdef", b""),  # one line longer than the limit: nothing whole
     (b"short\n", b"short\n")],  # within the limit: all of it
)
def test_a_body_cut_at_max_bytes_keeps_whole_lines_only(body, kept):
    # Cutting "Disallow: /secret-area/" to "Disallow: /" disallowed a whole site.
    record = P.on_response(200, body, 0.0, None)
    assert record.body == kept


def test_not_modified_keeps_the_copy_in_hand():
    # No conditional request is sent, but a server answering 304 means "unchanged": read
    # as allow all, it threw the rules away at the first re-fetch (a probe, 2026-11-28).
    rules = P.on_response(200, b"A: /p\n", 1000.0, None)  # within max_bytes=10
    kept = P.on_response(304, b"", 1200.0, rules)
    assert (kept.kind, kept.body, kept.status) == (RobotsKind.RULES, b"A: /p\n", 200)
    assert (kept.fetched_at, kept.checked_at, kept.expires_at) == (1200.0, 1200.0, 1300.0)
    allow = P.on_response(404, b"", 1000.0, None)
    assert P.on_response(304, b"", 1200.0, allow).kind == RobotsKind.ALLOW_ALL
    # nothing to keep, or only a failure's disallow all: as any other 3xx, allow all
    assert P.on_response(304, b"", 1200.0, None).kind == RobotsKind.ALLOW_ALL
    failed = P.on_response(503, b"", 1000.0, None)
    assert P.on_response(304, b"", 1200.0, failed).kind == RobotsKind.ALLOW_ALL


@given(
    status=st.sampled_from([200, 404, 503, NO_RESPONSE]),
    failures_before=st.integers(0, 6),
    now=st.floats(0, 1e9),
)
def test_within_limits_leaves_this_policys_records_alone_and_caps_a_longer_ttls(
    status, failures_before, now
):
    """Every record this policy writes is already within its limits; one written by a
    policy with a day's TTL and an hour's back-off expires by this one's."""
    longer = RobotsPolicy(ttl=86400, retry_delay=3600, retry_max_delay=86400)
    previous = None
    for _ in range(failures_before):
        previous = longer.on_failure(NO_RESPONSE, now, previous)
    for policy in (P, longer):
        record = policy.on_response(status, b"x", now, previous)
        assert policy.within_limits(record) == record
    record = longer.on_response(status, b"x", now, previous)
    capped = P.within_limits(record)
    limit = P.ttl if record.failures == 0 else P.backoff(record.failures)
    assert capped.expires_at == now + limit
    assert (capped.kind, capped.body, capped.failures) == (record.kind, record.body, record.failures)
