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


def test_a_frontier_removed_at_exit_under_a_running_scheduler_logs_no_error(
    tmp_path: Path, caplog
) -> None:
    """``scrapy shell`` runs the engine in a daemon thread: at exit the handler removes
    the frontier while the scheduler's tick still writes to it. A probe saw three ERROR
    lines and a traceback (a storage error closing the spider, then its close failing)
    after most shell sessions; the process is ending, nothing is lost, nothing to say."""
    import logging

    from scrapy import Request, Spider
    from scrapy.utils.test import get_crawler

    from scrapy_irl import tempdirs
    from scrapy_irl.scheduler import IrlScheduler

    crawler = get_crawler(Spider, settings_dict={"IRL_HOSTS_DIR": str(tmp_path / "hosts")})
    crawler.spider = crawler._create_spider("shell")
    sched = IrlScheduler.from_crawler(crawler)
    sched.open(crawler.spider)
    for n in range(5):
        sched.enqueue_request(Request(f"http://a.test/p{n}"))
    with caplog.at_level(logging.DEBUG):
        tempdirs._handlers[str(sched.path)]()  # what atexit runs
        assert not sched.path.exists()
        sched._on_tick()
        sched.enqueue_request(Request("http://a.test/late"))
        assert sched.next_request() is None
        sched.close("shutdown")
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, errors
    assert sched.counts["storage_errors"] == 0
