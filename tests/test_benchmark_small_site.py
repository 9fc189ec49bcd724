"""benchmarks/small_site.py: both crawls reach every page and finish."""

from __future__ import annotations

import pytest

from benchmarks.small_site import main


@pytest.mark.slow
def test_both_crawls_fetch_the_whole_site(capsys: pytest.CaptureFixture[str]) -> None:
    seconds = main(["--pages", "16", "--runs", "1"])
    assert set(seconds) == {"stock", "irl"}
    assert all(len(values) == 1 and values[0] > 0 for values in seconds.values())
    assert "irl / stock" in capsys.readouterr().out
