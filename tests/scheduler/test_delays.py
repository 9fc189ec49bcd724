"""tau_h and tau_s scale down with budgets to their minimums; Crawl-delay raises tau_h."""

from __future__ import annotations

import pytest

from scrapy_irl.scheduler.delays import DelayPolicy

D = DelayPolicy(host_delay=40, host_delay_min=2, ip_delay=1, ip_delay_min=0.25, base_budget=10, margin=0)


def test_host_delay_scales_with_budget():
    assert D.host(10) == 40 and D.host(5) == 40  # low-ranked: tau_h
    assert D.host(40) == 10
    assert D.host(10_000) == 2  # floor tau_h^0


def test_crawl_delay_raises_and_is_capped():
    assert D.host(10_000, crawl_delay=7) == 7
    assert D.host(10, crawl_delay=7) == 40
    assert D.host(10_000, crawl_delay=1e6) == 60


def test_ip_delay():
    assert D.ip(10) == 1 and D.ip(20) == 0.5 and D.ip(1000) == 0.25


def test_margin_added():
    assert DelayPolicy(margin=0.1).host(10) == pytest.approx(10.1)


def test_margin_is_at_most_half_the_delay_it_pads():
    # A flat 0.1 s made relaxed delays of 0.01 s into 0.11 s gaps (~9 requests/s per IP).
    tiny = DelayPolicy(host_delay=0.05, host_delay_min=0.05, ip_delay=0.01, ip_delay_min=0.01,
                       margin=0.1)  # fmt: skip
    assert tiny.ip(10) == pytest.approx(0.015)
    assert tiny.host(10) == pytest.approx(0.075)
    assert DelayPolicy(margin=0.1).ip(1000) == pytest.approx(0.25 + 0.1)  # defaults: as before
    assert DelayPolicy(host_delay_min=0, host_delay=0, margin=0.1).host(10) == 0.0


@pytest.mark.parametrize("kwargs", [{"host_delay": 1, "host_delay_min": 2}, {"ip_delay_min": -1}, {"margin": -1}])
def test_invalid(kwargs):
    with pytest.raises(ValueError):
        DelayPolicy(**kwargs)
