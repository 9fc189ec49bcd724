"""benchmarks/robots_gzip_bomb.py: both crawls run; the IRL one refuses the inflated body."""

from __future__ import annotations

import pytest

from benchmarks.robots_gzip_bomb import main


@pytest.mark.slow
def test_both_crawls_run_and_irl_refuses_the_bomb(capsys: pytest.CaptureFixture[str]) -> None:
    grown = main(["--inflate-mb", "20"])  # past the 8 MiB IRL_ROBOTS_MAX_DECODED_BYTES
    assert set(grown) == {"stock", "irl"}
    out = capsys.readouterr().out
    irl_line = next(line for line in out.splitlines() if line.startswith("irl "))
    assert "'irl_robots/response_dropped': 1" in irl_line, out
    stock_line = next(line for line in out.splitlines() if line.startswith("stock "))
    assert "'robotstxt/response_count': 1" in stock_line, out
