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


@pytest.mark.slow
def test_set_reaches_the_crawl_and_one_busy_ip_fills_the_parked_store(tmp_path: Path) -> None:
    saved = tmp_path / "probes.json"
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "frontier.py"), "--urls", "120000",
         "--seconds", "150", "--hosts", "200", "--only", "irl", "--save", str(saved),
         "--set", "IRL_IP_DELAY=0.1", "--set", "IRL_IP_DELAY_MIN=0.05"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert "settings: IRL_IP_DELAY=0.1, IRL_IP_DELAY_MIN=0.05" in out.stdout
    probes = json.loads(saved.read_text())["probes"]["irl"]
    assert max(probe["parked"] for probe in probes) > 50_000


def test_set_values_are_read_as_json_else_as_strings() -> None:
    import argparse

    sys.path.insert(0, str(ROOT))
    from benchmarks.frontier import setting_override

    assert setting_override("IRL_IP_DELAY=0.1") == ("IRL_IP_DELAY", 0.1)
    assert setting_override("LOG_LEVEL=DEBUG") == ("LOG_LEVEL", "DEBUG")
    assert setting_override(" A = [1, 2]") == ("A", [1, 2])
    for bad in ("IRL_IP_DELAY", "=3"):
        with pytest.raises(argparse.ArgumentTypeError):
            setting_override(bad)
