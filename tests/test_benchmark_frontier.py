"""benchmarks/frontier.py: a short irl run probes RSS and its anonymous / mapped-file split."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_a_short_irl_run_reports_rss_and_its_split(tmp_path: Path) -> None:
    saved = tmp_path / "probes.json"
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "frontier.py"), "--urls", "250000",
         "--seconds", "150", "--only", "irl", "--save", str(saved)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    probes = json.loads(saved.read_text())["probes"]["irl"]
    assert probes[-1]["enqueued"] >= 250_000
    for probe in probes:
        # statm's resident pages are the anonymous, file and shared-memory pages together
        assert 0 < probe["anon"] <= probe["rss"]
        assert probe["anon"] + probe["file"] <= probe["rss"] + 2**20
        assert probe["parked"] >= 0
    assert "of which anonymous / mapped files" in out.stdout
    assert "250,000" in out.stdout
    assert "MiB per million URLs (100,000 -> 250,000), anonymous" in out.stdout
