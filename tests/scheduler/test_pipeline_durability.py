"""URLseen -> STAR -> BEAST: a kill right after a delivery loses nothing.

Each DRUM forgets an epoch's results once it acknowledged them; the next stage holds what
it got in RAM buffers for up to a second. Unless that next stage is made durable first
(``before_ack``), a kill between the two loses URLs enqueued long before the kill. The
crawl runs in a child process that ends with ``os._exit`` (no close, no flush: a kill -9
as far as files are concerned) right after the merges.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from scrapy.settings import Settings

from scrapy_irl.scheduler.codec import pack_record, record_url
from scrapy_irl.scheduler.pipeline import build_star_and_beast, build_urlseen

ROOT = Path(__file__).resolve().parents[2]
N = 300

CHILD = f"""
import os, sys
sys.path.insert(0, {str(ROOT)!r})
from tests.scheduler.test_pipeline_durability import open_pipeline, url
urlseen, star, beast = open_pipeline(sys.argv[1])
for i in range({N}):
    urlseen.check_update(i + 1, None, url(i))
urlseen.merge()  # delivered to STAR, acknowledged
if sys.argv[2] == "star":
    star.flush()  # STAR delivered to BEAST, acknowledged
os._exit(0)  # killed: nothing closed, no timed write-out or save after this
"""


def url(i: int) -> bytes:
    return pack_record(f"http://h{i % 37}.example{i % 11}.com/p/{i}", b"request")


def settings() -> Settings:
    return Settings({"IRL_DRUM_FLUSH_INTERVAL": 3600})  # no timed write-outs


def open_pipeline(path: str):
    """The scheduler's own URLseen, STAR and BEAST; URLseen's unique URLs go to STAR."""
    from urllib.parse import urlsplit

    star, beast = build_star_and_beast(Path(path), settings(), fsync=False)

    def to_star(batch):
        for i in batch.unique.nonzero()[0]:
            record = batch.aux(int(i))
            star.admit(record, urlsplit(record_url(record)).hostname)

    urlseen = build_urlseen(Path(path), settings(), star, to_star, fsync=False)
    return urlseen, star, beast


def reopen_and_drain(directory: Path) -> tuple[list[str], Any]:
    """Open the pipeline again, merge what it owes, and pop BEAST dry: the URLs queued."""
    urlseen, star, beast = open_pipeline(str(directory))
    urlseen.merge()
    star.flush()
    got = []
    for _ in range(10 * N):  # bounded
        item = beast.pop()
        if item is None:
            break
        got.append(record_url(item[0]))
        beast.done(item[1])
    return got, star


@pytest.mark.parametrize("merged", ["urlseen", "star"])
def test_a_kill_right_after_the_merges_loses_no_url(tmp_path: Path, merged: str):
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path), merged],
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    got, _ = reopen_and_drain(tmp_path)
    assert set(got) == {record_url(url(i)) for i in range(N)}


class Crash(BaseException):
    """Stands for SIGKILL: nothing after it runs (BaseException skips except Exception)."""


def abandon(*drums) -> None:
    """Release what the kernel releases when a process dies; write nothing."""
    for drum in drums:
        for bucket in drum._buckets:
            bucket.close()
        os.close(drum._lock_fd)


def test_a_kill_after_beast_saved_stars_results_queues_no_url_twice(tmp_path: Path, monkeypatch):
    """pld_indegree's results reach BEAST, BEAST saves (before_ack), and the kill comes
    before pld_indegree's acknowledgement: the next start delivers that epoch again. Its
    URLs were queued once more (every URL of the epoch fetched twice after one kill)."""
    from scrapy_irl.drum import store

    urlseen, star, beast = open_pipeline(str(tmp_path))
    for i in range(N):
        urlseen.check_update(i + 1, None, url(i))
    urlseen.merge()  # delivered to STAR, acknowledged
    real = store.write_manifest

    def dying(path, manifest, fsync=True):
        if Path(path) == star.plds.path and not manifest.pending_delivery:
            raise Crash  # the acknowledgement, after BEAST's save
        return real(path, manifest, fsync=fsync)

    monkeypatch.setattr(store, "write_manifest", dying)
    with pytest.raises(Crash):
        star.flush()
    monkeypatch.undo()
    abandon(urlseen, star.edges, star.plds)

    got, star = reopen_and_drain(tmp_path)
    assert sorted(got) == sorted(record_url(url(i)) for i in range(N))
    assert star.redelivered_skipped == N


def test_a_q_f_rebudget_asks_star_for_the_host_as_the_heaps_key_it(tmp_path: Path) -> None:
    """An IPv6 literal is keyed in one spelling everywhere; the budget of a record re-read
    from Q_F was asked under the URL's own spelling, a PLD with in-degree 0 (review)."""
    star, beast = build_star_and_beast(tmp_path, settings(), fsync=False)
    asked = []
    star.known_budget = lambda host: asked.append(host) or 10  # type: ignore[method-assign]
    try:
        assert beast.rebudget(pack_record("http://[0:0:0:0:0:0:0:1]:8080/x", b"r")) == 10
        assert beast.rebudget(pack_record("http://Example.COM./y", b"r")) == 10
    finally:
        beast.close()
        star.close()
    assert asked == ["::1", "example.com"]
