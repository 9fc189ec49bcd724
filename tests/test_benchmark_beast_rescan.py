"""benchmarks/beast_rescan.py: the sliced re-read needs more, shorter calls than one go."""

from __future__ import annotations

import pytest

from benchmarks.beast_rescan import main


def test_the_sliced_re_read_takes_several_calls(capsys: pytest.CaptureFixture[str]) -> None:
    results = main(["--entries", "5000"])
    assert results["one go"]["calls"] <= 3  # the whole re-read in the call that reached it
    assert results["sliced"]["calls"] >= 5000 // 2000
    assert "one go / sliced" in capsys.readouterr().out
