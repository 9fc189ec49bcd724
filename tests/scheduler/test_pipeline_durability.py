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
            origin = (batch.epoch, batch.bucket, batch.start + int(i))  # as the intake's
            star.admit(record, urlsplit(record_url(record)).hostname, origin)

    urlseen = build_urlseen(Path(path), settings(), star, to_star, fsync=False)
    return urlseen, star, beast


def reopen_and_drain(directory: Path, *, close: bool = False) -> tuple[list[str], Any]:
    """Open the pipeline again, merge what it owes, and pop BEAST dry: the URLs queued
    (``close``: then close it; STAR's counters stay readable)."""
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
    if close:
        urlseen.close(), star.close(), beast.close()
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
    abandon(urlseen, *star.drums)

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


def crash_at_ack(monkeypatch, drum) -> None:
    """Make ``drum``'s next acknowledgement (a MANIFEST with nothing owed) a kill."""
    from scrapy_irl.drum import store

    real = store.write_manifest

    def dying(path, manifest, fsync=True):
        if Path(path) == drum.path and not manifest.pending_delivery:
            raise Crash
        return real(path, manifest, fsync=fsync)

    monkeypatch.setattr(store, "write_manifest", dying)


def admitted_counts(directory: Path, monkeypatch) -> dict[str, tuple[int, int]]:
    """Reopen, admit one new URL per PLD, and read the (d_x, P_x) it is given: what
    pld_indegree holds on disk for each PLD."""
    from urllib.parse import urlsplit

    from scrapy_irl.scheduler.pld import pld_of

    urlseen, star, beast = open_pipeline(str(directory))
    urlseen.merge()
    star.flush()
    got: dict[str, tuple[int, int]] = {}
    real = star.on_admitted

    def spy(record, budget, admitted):
        pld = pld_of(urlsplit(record_url(record)).hostname)
        got[pld] = (star.indegree(urlsplit(record_url(record)).hostname), admitted)
        real(record, budget, admitted)

    star.on_admitted = spy
    for j in range(11):
        urlseen.check_update(10_000 + j, None, pack_record(f"http://new.example{j}.com/", b"r"))
    urlseen.merge()
    star.flush()
    return got


def true_admitted(*, hosts_charged: bool = True) -> dict[str, int]:
    """P_x of each PLD after the N URLs: one per URL, and one per host name of the PLD
    (IRL_BUDGET_COUNTS_NEW_HOSTS), each once however many times it was delivered."""
    from scrapy_irl.scheduler.pld import pld_of

    counts: dict[str, int] = {}
    hosts = set()
    for i in range(N):
        host = f"h{i % 37}.example{i % 11}.com"
        pld = pld_of(host)
        counts[pld] = counts.get(pld, 0) + 1 + (hosts_charged and host not in hosts)
        hosts.add(host)
    return counts


def kill_at_urlseens_ack(directory: Path, monkeypatch) -> None:
    """URLseen delivers N URLs to STAR, STAR writes them out (before_ack), and the kill
    comes before URLseen's acknowledgement: the next start delivers them again."""
    urlseen, star, beast = open_pipeline(str(directory))
    for i in range(N):
        urlseen.check_update(i + 1, None, url(i))
    crash_at_ack(monkeypatch, urlseen)
    with pytest.raises(Crash):
        urlseen.merge()
    monkeypatch.undo()
    assert star.plds.pending_tuples == N  # written out, not merged
    abandon(urlseen, *star.drums)


def test_urls_urlseen_delivers_again_after_a_kill_are_queued_and_counted_once(tmp_path: Path, monkeypatch):
    """Until 2026-11-27 each URL of the epoch was queued twice (fetched twice) and
    counted twice in its PLD's P_x, which pushed later URLs of the PLD to later queues."""
    kill_at_urlseens_ack(tmp_path, monkeypatch)
    got, star = reopen_and_drain(tmp_path, close=True)
    assert sorted(got) == sorted(record_url(url(i)) for i in range(N))
    assert star.duplicates_undone == N
    counts = admitted_counts(tmp_path, monkeypatch)
    for pld, n in true_admitted().items():
        assert counts[pld] == (0, n), pld


def test_a_delivery_again_after_star_already_queued_the_first_copies(tmp_path: Path, monkeypatch):
    """The first copies are merged, queued and saved by a first restart, which is killed
    too; the second restart gets URLseen's delivery again: what tells the copies apart
    must have been saved with BEAST's STATE."""
    kill_at_urlseens_ack(tmp_path, monkeypatch)
    urlseen, star, beast = open_pipeline(str(tmp_path))
    star.flush()  # the first copies: merged, queued in BEAST, saved, acknowledged
    assert star.admitted == N
    abandon(urlseen, *star.drums)  # killed again before URLseen delivers

    got, star = reopen_and_drain(tmp_path, close=True)
    assert sorted(got) == sorted(record_url(url(i)) for i in range(N))
    assert star.admitted == 0 and star.duplicates_undone == N
    counts = admitted_counts(tmp_path, monkeypatch)
    for pld, n in true_admitted().items():
        assert counts[pld][1] == n, pld


def test_new_edges_pld_edges_delivers_again_after_a_kill_count_once(tmp_path: Path, monkeypatch):
    """pld_edges' new edges reach pld_indegree's buffers, which are written out
    (before_ack), and the kill comes before pld_edges' acknowledgement. Until 2026-11-27
    the edges were added again at the next start: each PLD's in-degree d_x counted every
    linking PLD twice, and its budget followed."""
    urlseen, star, beast = open_pipeline(str(tmp_path))
    sources = [f"src{k}.org" for k in range(7)]
    for target in range(11):
        for src in sources[: target % 7 + 1]:  # example<t>.com: t % 7 + 1 linking PLDs
            star.record_link(f"www.{src}", f"h1.example{target}.com")
            star.record_link(f"other.{src}", f"h2.example{target}.com")  # same PLD pair
    crash_at_ack(monkeypatch, star.edges)
    with pytest.raises(Crash):
        star.flush()
    monkeypatch.undo()
    abandon(urlseen, *star.drums)

    urlseen, star, beast = open_pipeline(str(tmp_path))
    star.flush()
    assert star.duplicates_undone == sum(t % 7 + 1 for t in range(11))
    for target in range(11):
        assert star.indegree(f"example{target}.com") == target % 7 + 1
    star.close(), beast.close(), urlseen.close()
    counts = admitted_counts(tmp_path, monkeypatch)
    for target in range(11):
        assert counts[f"example{target}.com"] == (target % 7 + 1, 0)


def test_new_hosts_hosts_seen_delivers_again_after_a_kill_are_charged_once(tmp_path: Path, monkeypatch):
    """hosts_seen's new hosts charge pld_indegree (written out before its
    acknowledgement) and the kill comes before that acknowledgement: the next start
    delivers the hosts again, and each must still cost its PLD one admission, not two."""
    urlseen, star, beast = open_pipeline(str(tmp_path))
    for i in range(N):
        urlseen.check_update(i + 1, None, url(i))
    urlseen.merge()
    crash_at_ack(monkeypatch, star.hosts)
    with pytest.raises(Crash):
        star.flush()
    monkeypatch.undo()
    abandon(urlseen, *star.drums)

    got, star = reopen_and_drain(tmp_path, close=True)
    assert sorted(got) == sorted(record_url(url(i)) for i in range(N))
    assert star.duplicates_undone == len({f"h{i % 37}.example{i % 11}" for i in range(N)})
    counts = admitted_counts(tmp_path, monkeypatch)
    for pld, n in true_admitted().items():
        assert counts[pld] == (0, n), pld


def test_results_delivered_again_after_a_failed_delivery_are_not_taken_for_copies(tmp_path: Path, monkeypatch):
    """BEAST refuses a record halfway through a pld_indegree epoch (a full disk), a
    timed save then commits the records queued so far, and a kill follows: the epoch is
    delivered again. Its first records were queued (skip them, once) but merged once
    (take nothing back from P_x): the positions of results, not only the origins of
    tuples, tell the two cases apart."""
    urlseen, star, beast = open_pipeline(str(tmp_path))
    for i in range(N):
        urlseen.check_update(i + 1, None, url(i))
    urlseen.merge()
    real, calls = star.on_admitted, []

    def full_disk(record, budget, admitted):
        if len(calls) == N // 2:
            raise OSError(28, "No space left on device")
        calls.append(record)
        real(record, budget, admitted)

    star.on_admitted = full_disk
    with pytest.raises(OSError):
        star.flush()
    beast.save()  # the scheduler's timed save
    abandon(urlseen, *star.drums)

    got, star = reopen_and_drain(tmp_path, close=True)
    assert sorted(got) == sorted(record_url(url(i)) for i in range(N))
    assert star.redelivered_skipped == N // 2 and star.duplicates_undone == 0
    counts = admitted_counts(tmp_path, monkeypatch)
    for pld, n in true_admitted().items():
        assert counts[pld][1] == n, pld


def second_copies_killed_in_beasts_save(directory: Path, *, nested_merge: bool = False) -> None:
    """A restart gets URLseen's delivery again; pld_indegree merges the second copies,
    STAR writes their corrections out, and the kill comes inside BEAST's save (before
    STATE says the corrections were made). ``nested_merge``: the corrections' write-out
    fills a bucket, and pld_indegree merges them into an epoch of their own first."""
    urlseen, star, beast = open_pipeline(str(directory))
    urlseen.merge()
    if nested_merge:
        star.plds.bucket_bytes = 1

    def killed_in_save():
        assert star.plds.pending_deliveries >= (2 if nested_merge else 1)
        raise Crash

    star._on_durable = killed_in_save
    with pytest.raises(Crash):
        star.flush()
    assert star.duplicates_undone == N
    abandon(urlseen, *star.drums)


@pytest.mark.parametrize(("kills", "nested_merge"), [(1, False), (2, False), (1, True)])
def test_a_correction_written_out_before_a_kill_in_beasts_save_is_not_made_twice(
    tmp_path: Path, monkeypatch, kills: int, nested_merge: bool
):
    """Found by review on 2026-11-27: the epoch with the second copies is delivered
    again, STATE's old marks take them for copies again, and a second correction was
    written next to the first: P_x too low by the number of copies, and after two such
    kills below zero, which borrowed from d_x (a PLD nobody links to got d_x 2**32 - 1)."""
    kill_at_urlseens_ack(tmp_path, monkeypatch)
    urlseen, star, beast = open_pipeline(str(tmp_path))
    star.flush()  # the first copies: merged, queued in BEAST, saved, acknowledged
    abandon(urlseen, *star.drums)
    for _ in range(kills):
        second_copies_killed_in_beasts_save(tmp_path, nested_merge=nested_merge)

    got, star = reopen_and_drain(tmp_path, close=True)
    assert sorted(got) == sorted(record_url(url(i)) for i in range(N))
    counts = admitted_counts(tmp_path, monkeypatch)
    for pld, n in true_admitted().items():
        assert counts[pld] == (0, n), pld


def test_a_correction_whose_write_out_fails_is_not_made_twice(tmp_path: Path, monkeypatch):
    """Found by review on 2026-11-27: a correction's update fills a pld_indegree bucket, and the
    merge that this triggers fails (a full disk) after the correction was written out.
    The epoch stays owed and is delivered again in the same process; the result whose
    correction raised is applied again, and a second correction was written for it."""
    kill_at_urlseens_ack(tmp_path, monkeypatch)
    urlseen, star, beast = open_pipeline(str(tmp_path))
    star.flush()  # the first copies: merged, queued in BEAST, saved, acknowledged
    abandon(urlseen, *star.drums)

    urlseen, star, beast = open_pipeline(str(tmp_path))
    urlseen.merge()  # URLseen's delivery again: the second copies reach pld_indegree
    plds = star.plds
    real_merge_epoch, failed = plds._merge_epoch, []

    def full_disk():
        if plds._delivering and not failed:
            failed.append(1)
            raise OSError(28, "No space left on device")
        return real_merge_epoch()

    monkeypatch.setattr(plds, "_merge_epoch", full_disk)
    sizes = plds.buffer_bytes, plds.bucket_bytes
    plds.buffer_bytes = plds.bucket_bytes = 1  # the first correction's update merges
    with pytest.raises(OSError):
        star.flush()
    assert failed and star.duplicates_undone == 0
    plds.buffer_bytes, plds.bucket_bytes = sizes
    star.flush()  # the owed epoch, delivered again in the same process
    assert star.duplicates_undone == N
    got = []
    while (item := beast.pop()) is not None:
        got.append(record_url(item[0]))
        beast.done(item[1])
    assert sorted(got) == sorted(record_url(url(i)) for i in range(N))
    urlseen.close(), star.close(), beast.close()
    counts = admitted_counts(tmp_path, monkeypatch)
    for pld, n in true_admitted().items():
        assert counts[pld] == (0, n), pld


def test_a_partly_applied_batch_after_a_kill_keeps_the_corrections_of_its_prefix(
    tmp_path: Path, monkeypatch
):
    """Found by review on 2026-11-27: second copies are undone in a pld_indegree epoch, BEAST
    refuses a later URL of the same epoch (a full disk), the timed save commits the
    prefix, and a kill follows. The next start skips the applied prefix, and with it
    the corrections it made to the values of the rest of the merge: the URLs after it
    are handed to BEAST with P_x counting every second copy (2 n instead of n)."""
    from urllib.parse import urlsplit

    from scrapy_irl.scheduler.pld import pld_of

    kill_at_urlseens_ack(tmp_path, monkeypatch)
    urlseen, star, beast = open_pipeline(str(tmp_path))
    urlseen.merge()  # the second copies, behind the first ones in pld_indegree's files
    for j in range(11):  # then one new URL per PLD
        urlseen.check_update(10_000 + j, None, pack_record(f"http://new.example{j}.com/", b"r"))
    urlseen.merge()
    real = star.on_admitted

    def full_disk(record, budget, admitted):
        if record_url(record).startswith("http://new."):
            raise OSError(28, "No space left on device")
        real(record, budget, admitted)

    star.on_admitted = full_disk
    with pytest.raises(OSError):
        star.flush()
    assert star.duplicates_undone > 0
    star.write_out(), beast.save()  # the scheduler's tick
    abandon(urlseen, *star.drums)

    urlseen, star, beast = open_pipeline(str(tmp_path))
    got: dict[str, int] = {}
    real = star.on_admitted

    def spy(record, budget, admitted):
        if record_url(record).startswith("http://new."):
            got[pld_of(urlsplit(record_url(record)).hostname)] = admitted
        real(record, budget, admitted)

    star.on_admitted = spy
    urlseen.merge()
    star.flush()
    assert len(got) == 11
    # the hosts' charges follow these admissions in pld_indegree's merge (hosts_seen is
    # merged at the flush, after URLseen handed them to STAR): not counted yet
    for pld, n in true_admitted(hosts_charged=False).items():
        assert got[pld] == n, pld
