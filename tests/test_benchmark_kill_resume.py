"""benchmarks/kill_resume.py end to end, small: two kill -9s, both restarts resume."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_irl_resumes_after_every_kill_and_refetches_nothing_older_than_the_window():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "kill_resume.py"), "--kills", "2",
         "--last", "5", "--size", "tiny", "--only", "irl", "--json",
         # a loaded CI machine can lag the crawler's bookkeeping behind the server; the
         # faults this guards against re-fetched pages finished seconds before a kill
         "--window", "3"],
        cwd=ROOT, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    irl = json.loads(proc.stdout)["irl"]
    assert irl["kills"] == 2 and irl["resumed"] == 2 and irl["refused"] == 0, irl
    assert irl["pages"] > 50, irl
    assert irl["refetched_older"] == 0, irl


def test_the_benchmark_spider_exits_non_zero_when_a_store_refuses_the_start(tmp_path: Path):
    """A refused restart exited 0 (benchmarks/simweb_spider.py ignored Scrapy's
    ``bootstrap_failed``), so kill_resume.py counted it as neither resumed nor refused
    (found by a kill -9 probe, 2026-11-28). An empty FRONTIER marker is refused."""
    from tests.scheduler.simweb_process import simweb_server, spider_command

    job = tmp_path / "job"
    (job / "irl").mkdir(parents=True)
    (job / "irl" / "FRONTIER").write_bytes(b"")
    settings = {"ADDONS": {"scrapy_irl.Addon": 0}, "JOBDIR": str(job),
                "IRL_HOSTS_DIR": str(tmp_path / "hosts"), "CLOSESPIDER_TIMEOUT": 20}  # fmt: skip
    with simweb_server(tmp_path, duration=60) as (cfg, _):
        proc = subprocess.run(spider_command(cfg, settings), cwd=ROOT, capture_output=True,
                              text=True, timeout=120, check=False)  # fmt: skip
    assert "Refusing to start the crawl" in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 1, proc.stderr[-3000:]
