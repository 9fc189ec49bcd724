"""benchmarks/crawl.py: ``--set`` settings reach the irl runs with their JSON types."""

from __future__ import annotations

import argparse

import pytest

from benchmarks.crawl import _setting


def test_set_values_are_parsed_as_json_when_they_can_be():
    parser = argparse.ArgumentParser()
    assert _setting("IRL_HOST_DELAY=2.5", parser) == ("IRL_HOST_DELAY", 2.5)
    assert _setting("IRL_RAM_BACKLOG_SECONDS=0", parser) == ("IRL_RAM_BACKLOG_SECONDS", 0)
    assert _setting("IRL_BUDGET_FUNCTION=linear", parser) == ("IRL_BUDGET_FUNCTION", "linear")
    assert _setting('ADDONS={"a.B": 1}', parser) == ("ADDONS", {"a.B": 1})
    assert _setting("X=a=b", parser) == ("X", "a=b")  # only the first = splits


@pytest.mark.parametrize("item", ["IRL_HOST_DELAY", "=3"])
def test_set_without_a_name_and_value_is_refused(item):
    parser = argparse.ArgumentParser()
    with pytest.raises(SystemExit):
        _setting(item, parser)


def test_median_result_takes_each_numeric_row_median_over_the_rounds():
    from benchmarks.crawl import median_result

    rounds = [
        {"requests_per_s": 70.0, "spam_trap_share": 0.0232, "finish_reason": "closespider_timeout",
         "stalled_while_due": None, "broke_tau_h": 0},
        {"requests_per_s": 75.0, "spam_trap_share": 0.0165, "finish_reason": "closespider_timeout",
         "stalled_while_due": None, "broke_tau_h": 3},
        {"requests_per_s": 60.0, "spam_trap_share": 0.0238, "finish_reason": "shutdown",
         "stalled_while_due": None, "broke_tau_h": 0},
    ]
    merged = median_result(rounds)
    assert merged["requests_per_s"] == 70.0
    assert merged["spam_trap_share"] == 0.0232
    assert merged["broke_tau_h"] == 0
    assert merged["stalled_while_due"] is None  # stock has no such meter: stays None
    assert merged["finish_reason"] is None  # the rounds disagree: no single value


def test_median_result_of_one_round_is_that_round():
    from benchmarks.crawl import median_result

    result = {"requests_per_s": 55.7, "top_coverage": 0.86, "finish_reason": "closespider_timeout"}
    assert median_result([result]) == result


def test_relaxed_ratio_pairs_the_runs_of_each_round():
    from benchmarks.crawl import relaxed_ratios

    results = {
        "stock": [{"requests_per_s": 50.0}, {"requests_per_s": 40.0}],
        "irl-relaxed": [{"requests_per_s": 100.0}, {"requests_per_s": 100.0}],
    }
    assert relaxed_ratios(results) == [2.0, 2.5]
    assert relaxed_ratios({"irl": [{"requests_per_s": 1.0}]}) == []


def test_the_judge_checks_the_delays_a_set_gives_the_irl_run():
    from benchmarks.crawl import IRL, judge_taus

    assert judge_taus({}) == (IRL["IRL_HOST_DELAY_MIN"], IRL["IRL_IP_DELAY_MIN"])
    assert judge_taus({"IRL_HOST_DELAY_MIN": 3, "IRL_IP_DELAY_MIN": 0.75}) == (3.0, 0.75)
