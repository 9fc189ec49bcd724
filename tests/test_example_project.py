"""The example project's ``broad`` spider crawls simweb end to end and reports the judge."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ROOT / "example_project"


def run_broad(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PROJECT), str(ROOT)])}
    return subprocess.run(
        [sys.executable, "-m", "scrapy", "crawl", "broad",
         "-s", "IRL_SIMWEB_SIZE=tiny", "-s", "CLOSESPIDER_PAGECOUNT=150",
         "-s", "CLOSESPIDER_TIMEOUT=60", "-s", f"JOBDIR={tmp_path / 'job'}",
         # short politeness delays keep these crawls quick; the judge checks them elsewhere
         "-s", "IRL_HOST_DELAY=1", "-s", "IRL_HOST_DELAY_MIN=0.5",
         "-s", "IRL_IP_DELAY=0.2", "-s", "IRL_IP_DELAY_MIN=0.1",
         "-a", f"requests_log={tmp_path / 'requests.log'}", *args],
        cwd=PROJECT, env=env, capture_output=True, text=True, timeout=180,
    )


@pytest.mark.slow
def test_broad_crawls_simweb_and_judges_it(tmp_path: Path) -> None:
    proc = run_broad(tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = proc.stderr
    assert "'finish_reason': 'closespider_pagecount'" in log
    assert "simweb judge for this crawl" in log and "robots violations" in log
    assert "Task was destroyed" not in log  # simweb shut down cleanly
    assert "spider_exceptions" not in log
    assert (tmp_path / "requests.log").stat().st_size > 0
    assert (tmp_path / "job" / "irl" / "urlseen" / "MANIFEST").exists()
    assert (tmp_path / "job" / "irl" / "beast" / "STATE").exists()


@pytest.mark.slow
def test_broad_reports_bad_seed_lines(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("# comment\n\nnot a url\nftp://x.example/\nhttp://127.0.0.1:9/\n")
    proc = run_broad(tmp_path, "-a", f"seeds={seeds}", "-s", "CLOSESPIDER_TIMEOUT=10")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "line 3 is not an http(s) URL: 'not a url'" in proc.stderr
    assert "line 4 is not an http(s) URL" in proc.stderr
    assert "'broad/seeds_rejected': 2" in proc.stderr
