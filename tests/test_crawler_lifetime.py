"""A finished crawl is freed, and one that failed to start gives back what it took: a
process that runs crawls in a loop keeps flat memory and can retry a failed one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
FAST = {"IRL_HOST_DELAY": 0.0, "IRL_HOST_DELAY_MIN": 0.0, "IRL_IP_DELAY": 0.0,
        "IRL_IP_DELAY_MIN": 0.0, "ROBOTSTXT_OBEY": True}  # fmt: skip


def sequential(runs: list[dict[str, Any]], settings: dict[str, Any]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "tests.sequential_crawls", json.dumps({"runs": runs, "settings": settings})],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    [line] = [x for x in proc.stdout.splitlines() if x.startswith("REPORT ")]
    report = json.loads(line[7:])
    assert "failed" not in report, report["failed"]
    return report


@pytest.mark.parametrize("jobdir", [False, True])
def test_sequential_crawls_with_the_addon_leave_no_crawler_alive(tmp_path: Path, jobdir: bool) -> None:
    # The DNS middleware's shared resolver (a WeakKeyDictionary value) held the crawler's
    # stats, so each entry kept its own key alive: 12 crawls, 12 live crawlers with their
    # engines and robots caches, until the process exited (a probe, 2026-11-28).
    settings = {"ADDONS": {"scrapy_irl.Addon": 0}, "IRL_HOSTS_DIR": str(tmp_path / "hosts"), **FAST}
    if jobdir:
        settings["JOBDIR"] = str(tmp_path / "job")
    report = sequential([{}, {}, {}], settings)
    assert report["runs"] == ["finished"] * 3
    assert report["live"] == 0 and report["host_stores_held"] == {}


def test_a_crawl_that_failed_to_start_gives_back_its_locks_and_store(tmp_path: Path) -> None:
    """A pipeline failing in from_crawler stops the crawl before its engine exists, so
    Scrapy sends no spider_closed: the WARC directory stayed locked and the host store
    held until the process exited, and the retry was refused ("in use by another crawl")."""
    settings = {"ADDONS": {"scrapy_irl.Addon": 0}, "IRL_HOSTS_DIR": str(tmp_path / "hosts"),
                "JOBDIR": str(tmp_path / "job"),
                "EXTENSIONS": {"scrapy_irl.warc.extension.WarcExtension": 0}, **FAST}  # fmt: skip
    failing = {"ITEM_PIPELINES": {"tests.sequential_crawls.FailingPipeline": 100}}
    report = sequential([failing, {}], settings)
    assert report["runs"] == ["ConnectionError", "finished"]
    assert report["live"] == 0 and report["host_stores_held"] == {}
    assert list((tmp_path / "job" / "warc").glob("*.warc.gz"))  # the retry wrote its pages
    report = sequential([failing], settings)  # and then nothing is held at all
    assert report["runs"] == ["ConnectionError"] and report["host_stores_held"] == {}
