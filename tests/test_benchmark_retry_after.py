"""benchmarks/retry_after.py: every crawl fetches the whole site; the server's judge counts."""

from __future__ import annotations

import pytest

from benchmarks.retry_after import judge, main


def test_the_judge_counts_requests_inside_the_pause_the_server_asked_for() -> None:
    log = [
        # start, end, path, status
        (0.0, 0.1, "/page/1", 503),  # asks for 2 s from 0.1
        (0.05, 0.2, "/page/2", 200),  # sent before the 503 was complete: not counted
        (1.0, 1.1, "/page/1", 503),  # too soon; asks again, until 3.1
        (2.5, 2.6, "/page/3", 429),  # too soon
        (2.65, 2.7, "/page/3", 200),  # too soon after the 503 and within tau of the 429
        (3.2, 3.3, "/page/1", 200),
        (3.4, 3.5, "/page/6", 0),  # closed unanswered: 2 tau = 0.4 s from 3.5
        (3.8, 3.9, "/page/6", 0),  # too soon
        (4.4, 4.5, "/page/6", 200),  # 0.5 s after: not counted
    ]
    assert judge(log, retry_after=2, tau=0.2) == {
        "requests": 9, "pages": 4, "retry_after_violations": 3, "within_tau_after_429": 1,
        "within_2tau_after_no_answer": 1,
    }  # fmt: skip


def test_overlapping_answers_are_judged_each_on_its_own() -> None:
    # a long 503 still being sent when a short one's pause is over: not a violation
    assert judge([(0.0, 20.0, "/page/1", 503), (1.0, 1.1, "/page/5", 503),
                  (12.0, 12.1, "/page/2", 200)], retry_after=2, tau=0.2)["retry_after_violations"] == 0
    # inside the pause of an earlier answer, though a later one is not complete yet
    assert judge([(0.0, 1.0, "/page/1", 503), (0.5, 2.8, "/page/5", 503),
                  (1.5, 1.6, "/page/2", 200)], retry_after=2, tau=0.2)["retry_after_violations"] == 1


@pytest.mark.slow
def test_irl_keeps_the_pauses_stock_scrapy_does_not(capsys: pytest.CaptureFixture[str]) -> None:
    results = main(["--pages", "8", "--retry-after", "1", "--tau", "0.1"])
    assert {name: runs[0]["pages"] for name, runs in results.items()} == {
        "stock": 7, "stock-delay": 7, "irl": 7,
    }  # fmt: skip
    assert results["irl"][0]["retry_after_violations"] == 0
    assert results["irl"][0]["within_tau_after_429"] == 0
    assert results["irl"][0]["within_2tau_after_no_answer"] == 0
    assert results["stock"][0]["within_2tau_after_no_answer"] > 0
    assert results["stock"][0]["retry_after_violations"] > 0  # retried at once
    assert "within_2tau_after_no_answer" in capsys.readouterr().out
