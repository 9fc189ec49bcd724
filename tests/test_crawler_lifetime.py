"""A finished crawl is freed: a process that runs crawls in a loop keeps flat memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FAST = {"IRL_HOST_DELAY": 0.0, "IRL_HOST_DELAY_MIN": 0.0, "IRL_IP_DELAY": 0.0,
        "IRL_IP_DELAY_MIN": 0.0, "ROBOTSTXT_OBEY": True}  # fmt: skip


def live_crawlers_after(crawls: int, settings: dict) -> int:
    proc = subprocess.run(
        [sys.executable, "-m", "tests.sequential_crawls", json.dumps({"crawls": crawls, "settings": settings})],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    [line] = [x for x in proc.stdout.splitlines() if x.startswith(("LIVE", "FAILED"))]
    assert line.startswith("LIVE "), proc.stdout[-3000:]
    return int(line.split()[1])


@pytest.mark.parametrize("jobdir", [False, True])
def test_sequential_crawls_with_the_addon_leave_no_crawler_alive(tmp_path: Path, jobdir: bool) -> None:
    # The DNS middleware's shared resolver (a WeakKeyDictionary value) held the crawler's
    # stats, so each entry kept its own key alive: 12 crawls, 12 live crawlers with their
    # engines and robots caches, until the process exited (a probe, 2026-11-28).
    settings = {"ADDONS": {"scrapy_irl.Addon": 0}, "IRL_HOSTS_DIR": str(tmp_path / "hosts"), **FAST}
    if jobdir:
        settings["JOBDIR"] = str(tmp_path / "job")
    assert live_crawlers_after(3, settings) == 0
