"""A temporary frontier is removed at exit even when the scheduler never closed
(``scrapy shell`` exits without closing the engine: every session left one)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from scrapy_irl.tempdirs import make_temporary_directory, remove_temporary_directory

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import sys
from twisted.internet import reactor  # installed, as a crawl's process has it
from scrapy import Spider
from scrapy.utils.test import get_crawler
from scrapy_irl.scheduler import IrlScheduler

crawler = get_crawler(Spider, settings_dict={"IRL_HOSTS_DIR": sys.argv[1], "TWISTED_REACTOR_ENABLED": True})
crawler.spider = crawler._create_spider("shell")
sched = IrlScheduler.from_crawler(crawler)
sched.open(crawler.spider)
print(sched.path, flush=True)
# no close(): the process ends, as scrapy shell's does
"""


def test_a_frontier_never_closed_is_removed_at_exit(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "hosts")],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    frontier = Path(done.stdout.strip().splitlines()[-1])
    assert frontier.name.startswith("scrapy-irl-frontier-")
    assert not frontier.exists()


def test_removing_one_directory_keeps_the_exit_handlers_of_others() -> None:
    first, second = make_temporary_directory("t-a-"), make_temporary_directory("t-b-")
    remove_temporary_directory(first)
    assert not first.exists() and second.exists()
    remove_temporary_directory(second)
    assert not second.exists()
    remove_temporary_directory(second)  # twice: nothing left to do
