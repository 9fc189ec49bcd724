"""The LevelDB host store: record layouts, format version, locking, kill -9 durability."""

from __future__ import annotations

import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scrapy_irl.exceptions import HostStoreError
from scrapy_irl.hosts.records import DnsRecord, RecordError, RobotsKind, RobotsRecord
from scrapy_irl.hosts.store import FORMAT_KEY, HostStore
from tests.hosts.store_workload import record

ROOT = Path(__file__).resolve().parents[2]


@given(
    kind=st.sampled_from(list(RobotsKind)),
    status=st.integers(-32768, 32767),
    times=st.tuples(st.floats(allow_nan=False), st.floats(allow_nan=False), st.floats(allow_nan=False)),
    failures=st.integers(0, 2**32 - 1),
    body=st.binary(max_size=2000),
)
def test_robots_record_roundtrip(kind, status, times, failures, body):
    rec = RobotsRecord(kind, status, *times, failures, body)
    assert RobotsRecord.decode(rec.encode()) == rec


@given(
    ips=st.lists(st.ip_addresses().map(str), max_size=4).map(tuple),
    error=st.text(max_size=40).filter(lambda s: len(s.encode()) < 255),
    failures=st.integers(0, 255),
)
def test_dns_record_roundtrip(ips, error, failures):
    rec = DnsRecord(ips, 1.5, 2.5, error, failures)
    assert DnsRecord.decode(rec.encode()) == rec


def test_dns_records_of_version_1_still_decode():
    """Stores written before ``failures`` existed: a failed record counts as one failure."""
    v1 = struct.Struct("<BBddH")
    failed = v1.pack(1, 14, 1.0, 2.0, 0) + b"DNSLookupError"
    resolved = v1.pack(1, 0, 1.0, 2.0, 9) + b"127.0.0.3"
    assert DnsRecord.decode(failed) == DnsRecord((), 1.0, 2.0, "DNSLookupError", 1)
    assert DnsRecord.decode(resolved) == DnsRecord(("127.0.0.3",), 1.0, 2.0, "", 0)


@pytest.mark.parametrize(
    "data",
    [b"", b"\x01\x01", b"\x02" + bytes(40), b"\x01\x09" + bytes(40)],
    ids=["empty", "truncated", "newer-version", "unknown-kind"],
)
def test_bad_robots_records_raise(data):
    with pytest.raises(RecordError):
        RobotsRecord.decode(data)


def test_bad_dns_records_raise():
    good = DnsRecord(("127.0.0.1",), 1.0, 2.0).encode()
    for data in (good[:5], good[:-1], b"\x05" + good[1:], good + b"x"):
        with pytest.raises(RecordError):
            DnsRecord.decode(data)


def test_put_get_delete_and_scan(tmp_path):
    with HostStore(tmp_path / "h") as store:
        store.put_robots("http://a.test", record(1))
        store.put_dns("a.test", DnsRecord(("127.0.0.2",), 1.0, 2.0))
        assert store.get_robots("http://a.test") == record(1)
        assert store.get_dns("a.test").ip == "127.0.0.2"
        assert store.get_robots("http://b.test") is None
        assert list(store.robots_origins()) == ["http://a.test"]
        assert list(store.dns_hosts()) == ["a.test"]
        store.delete_robots("http://a.test")
        assert store.get_robots("http://a.test") is None


def test_newer_format_refused(tmp_path):
    with HostStore(tmp_path / "h") as store:
        store._db.put(FORMAT_KEY, b"2")
    with pytest.raises(HostStoreError, match="format version 2"):
        HostStore(tmp_path / "h")


def test_foreign_leveldb_refused(tmp_path):
    import plyvel

    db = plyvel.DB(str(tmp_path / "other"), create_if_missing=True)
    db.put(b"key", b"value")
    db.close()
    with pytest.raises(HostStoreError, match="not a scrapy-irl host store"):
        HostStore(tmp_path / "other")


def test_second_process_gets_a_clear_error(tmp_path):
    path = tmp_path / "h"
    HostStore(path).close()
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys,time; from scrapy_irl.hosts.store import HostStore; "
         "s = HostStore(sys.argv[1]); print('open', flush=True); time.sleep(30)", str(path)],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )
    try:
        assert child.stdout.readline().strip() == "open"
        with pytest.raises(HostStoreError, match="another crawl"):
            HostStore(path)
    finally:
        child.kill()
        child.wait(10)


def test_a_file_system_error_is_not_blamed_on_another_crawl(tmp_path, monkeypatch):
    import plyvel

    def read_only(*args, **kwargs):
        raise plyvel.IOError(b"IO error: " + str(tmp_path).encode() + b"/h/LOCK: Read-only file system")

    monkeypatch.setattr(plyvel, "DB", read_only)
    with pytest.raises(HostStoreError, match="writable by this user and the disk not full") as info:
        HostStore(tmp_path / "h")
    assert "another crawl" not in str(info.value).lower()


def test_a_lock_file_that_is_a_directory_is_not_blamed_on_another_crawl(tmp_path):
    """LevelDB says "IO error: lock .../LOCK: Is a directory": that read as "another
    crawl is using it" (a fuzz of a JOBDIR, 2026-11-27)."""
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "LOCK").mkdir()
    with pytest.raises(HostStoreError, match="Is a directory.*readable and writable") as info:
        HostStore(tmp_path / "h")
    assert "another crawl" not in str(info.value).lower()


def test_a_table_file_the_system_will_not_read_is_not_called_corrupt(tmp_path, monkeypatch):
    """A table file this user may not read: "is corrupt; move it away to start a fresh
    cache" would have thrown a sound cache out."""
    import plyvel

    with HostStore(tmp_path / "h") as store:
        store.put_dns("a.test", DnsRecord(("127.0.0.1",), 1.0, 2.0))

    class Unreadable:
        def __init__(self, real):
            self.real = real

        def get(self, *args, **kwargs):
            raise plyvel.IOError(b"IO error: " + str(tmp_path).encode() + b"/h/000005.ldb: Permission denied")

        def close(self):
            self.real.close()

    real_db = plyvel.DB
    monkeypatch.setattr(plyvel, "DB", lambda *a, **k: Unreadable(real_db(*a, **k)))
    with pytest.raises(HostStoreError, match="Permission denied.*readable and writable") as info:
        HostStore(tmp_path / "h")
    assert "corrupt" not in str(info.value)


def test_a_flipped_byte_in_a_table_never_reads_as_another_record(tmp_path):
    """Reads did not verify LevelDB's block checksums: one flipped byte in a table file
    gave a robots.txt body with other rules in it, and no warning (a fuzz, 2026-11-27).
    Each record now reads as it was written or raises RecordError (refetched)."""
    import random

    path = tmp_path / "h"
    rng = random.Random(5)
    written = {}
    with HostStore(path, write_buffer_bytes=64 * 1024) as store:
        for i in range(400):  # incompressible bodies: blocks stored as they are
            body = bytes(rng.getrandbits(8) for _ in range(600))
            written[f"http://h{i}.test"] = RobotsRecord(RobotsKind.RULES, 200, 1.0, 2.0, 3.0, 0, body)
            store.put_robots(f"http://h{i}.test", written[f"http://h{i}.test"])
        store._db.compact_range()
    table = max(path.glob("*.ldb"), key=lambda p: p.stat().st_size)
    data = bytearray(table.read_bytes())
    data[len(data) // 3] ^= 0x01
    table.write_bytes(bytes(data))
    damaged = 0
    with HostStore(path) as store:
        for origin, original in written.items():
            try:
                got = store.get_robots(origin)
            except RecordError:
                damaged += 1
                continue
            assert got == original, origin
    assert damaged  # the flip was seen


def test_a_failed_write_is_counted_and_logged_once_not_raised(tmp_path, caplog):
    import plyvel

    store = HostStore(tmp_path / "h")

    class FullDisk:
        def put(self, *args, **kwargs):
            raise plyvel.IOError(b"IO error: No space left on device")

        def __getattr__(self, name):
            return getattr(real, name)

    real, store._db = store._db, FullDisk()
    store.put_dns("a.example", DnsRecord(("127.0.0.1",), 1.0, 60.0, "", 0))
    store.put_robots("http://a.example", record(1))
    assert store.write_errors == 2
    assert [r.levelname for r in caplog.records].count("ERROR") == 1
    store._db = real
    store.close()


def test_corrupt_table_file_is_reported(tmp_path):
    path = tmp_path / "h"
    with HostStore(path, write_buffer_bytes=64 * 1024) as store:
        for i in range(3000):
            store.put_robots(f"http://h{i}.test", record(i))
    tables = sorted(path.glob("*.ldb"))
    assert tables, "expected LevelDB to have written table files"
    for table in tables:
        data = bytearray(table.read_bytes())
        for offset in range(100, len(data) - 100, 997):
            data[offset] ^= 0xFF
        table.write_bytes(bytes(data))
    with pytest.raises((HostStoreError, RecordError)):
        with HostStore(path) as store:  # paranoid checks: the open or the reads must fail
            for i in range(3000):
                assert store.get_robots(f"http://h{i}.test") == record(i)


@pytest.mark.parametrize("compact", [True, False], ids=["tables", "log-only"])
def test_a_missing_current_file_is_refused_not_emptied(tmp_path, compact):
    # Without CURRENT, create_if_missing made a new database there: LevelDB deleted the
    # table files it did not list, so the store came back empty (or, with records left in
    # the log, as "not a scrapy-irl host store").
    path = tmp_path / "h"
    with HostStore(path) as store:
        for i in range(50):
            store.put_robots(f"http://h{i}.test", record(i))
        if compact:
            store._db.compact_range()
    before = sorted(p.name for p in path.iterdir() if p.suffix in (".ldb", ".log"))
    (path / "CURRENT").unlink()
    with pytest.raises(HostStoreError, match=r"corrupt \(its CURRENT file is missing.*move it away"):
        HostStore(path)
    assert sorted(p.name for p in path.iterdir() if p.suffix in (".ldb", ".log")) == before


def test_an_empty_directory_or_an_interrupted_creation_opens(tmp_path):
    (tmp_path / "empty").mkdir()
    with HostStore(tmp_path / "empty") as store:
        store.put_robots("http://a.test", record(1))
    # A kill between LevelDB writing its first MANIFEST and CURRENT: nothing stored yet.
    (tmp_path / "young").mkdir()
    for name in ("LOCK", "LOG", "MANIFEST-000001"):
        (tmp_path / "young" / name).write_bytes(b"")
    with HostStore(tmp_path / "young") as store:
        assert store.get_robots("http://a.test") is None


def test_shared_handle_is_reference_counted(tmp_path):
    one = HostStore.open_shared(tmp_path / "h")
    two = HostStore.open_shared(str(tmp_path / "h"))
    assert one is two
    one.release()
    assert not two.closed
    two.release()
    assert two.closed
    three = HostStore.open_shared(tmp_path / "h")
    assert three is not one and not three.closed
    three.release()


@pytest.mark.parametrize("round_", range(4))
def test_kill_9_during_writes_loses_nothing_acknowledged(tmp_path, round_):
    path = tmp_path / "h"
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.hosts.store_workload", str(path)],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )
    written = -1
    deadline = time.monotonic() + 20
    target = 300 + 700 * round_
    while written < target and time.monotonic() < deadline:
        line = child.stdout.readline()
        if not line:
            break
        written = int(line)
    os.kill(child.pid, signal.SIGKILL)
    child.wait(10)
    assert written >= target, "the writer did not get going"
    with HostStore(path) as store:
        for i in range(written + 1):
            assert store.get_robots(f"http://h{i}.test") == record(i)
            assert store.get_dns(f"h{i}.test") is not None
        # The child may have written more than the pipe told us; all of it must decode.
        for origin in store.robots_origins():
            assert store.get_robots(origin) == record(int(origin[len("http://h") : -len(".test")]))


def test_a_table_file_cut_short_is_refused_or_lost_entry_by_entry(tmp_path, caplog):
    # LevelDB reports a table cut short as an I/O error, not as corruption: it escaped as
    # plyvel.IOError from the open or from every later lookup (and, once a compaction
    # had met it, from every write).
    from scrapy_irl.robots.cache import RobotsCache

    base = tmp_path / "base"
    with HostStore(base, write_buffer_bytes=64 * 1024) as store:
        for i in range(3000):
            store.put_robots(f"http://h{i}.test", record(i))
    tables = sorted(base.glob("*.ldb"))
    assert len(tables) >= 2
    outcomes = set()
    for table in tables:
        case = tmp_path / table.stem
        shutil.copytree(base, case)
        cut = case / table.name
        os.truncate(cut, cut.stat().st_size // 2)
        try:
            store = HostStore(case)
        except HostStoreError as exc:
            assert "corrupt" in str(exc)
            outcomes.add("refused")
            continue
        cache = RobotsCache(store, lambda body: None)
        for i in range(3000):
            got = cache.get(f"http://h{i}.test")
            assert got is None or got.record == record(i)
        store.put_robots("http://new.test", record(1))  # counted if it fails, never raised
        store.close()
        outcomes.add("opened")
    assert "opened" in outcomes


def test_a_second_open_in_the_same_process_keeps_the_lock_held(tmp_path: Path) -> None:
    """LevelDB's lock is a POSIX record lock, per process: refusing a second open in the
    holder's process closed LevelDB's handle on LOCK and dropped the lock, so another
    process opened the store too and the two overwrote each other's records (a probe
    lost 3 000, 2026-11-28). The second open is refused before LevelDB sees it."""
    import subprocess
    import sys

    from scrapy_irl.exceptions import HostStoreLockedError

    path = tmp_path / "hosts"
    other = ("import sys\nfrom scrapy_irl.hosts.store import HostStore\n"
             "from scrapy_irl.exceptions import HostStoreLockedError\n"
             "try:\n    HostStore(sys.argv[1]).close()\nexcept HostStoreLockedError:\n"
             "    sys.exit(3)\n")  # fmt: skip
    with HostStore(path):
        for _ in range(2):
            with pytest.raises(HostStoreLockedError, match="another crawl is using it"):
                HostStore(path)
        done = subprocess.run([sys.executable, "-c", other, str(path)], capture_output=True,
                              text=True, timeout=60, check=False)  # fmt: skip
        assert done.returncode == 3, done.stderr[-2000:]  # still locked
    HostStore(path).close()  # closed: free again in this process


def test_a_store_dropped_without_close_frees_its_directory(tmp_path: Path) -> None:
    # plyvel closes a collected database; the process's registry of open directories
    # must forget it too, or the directory could never be opened again here.
    import gc

    store = HostStore(tmp_path / "hosts")
    del store
    gc.collect()
    HostStore(tmp_path / "hosts").close()


def test_a_closed_store_raises_the_documented_error(tmp_path: Path) -> None:
    # plyvel's RuntimeError("Database is closed") escaped the IrlError tree before.
    store = HostStore(tmp_path / "hosts")
    store.put_dns("a.test", DnsRecord(("127.0.0.1",), 1.0, 2.0))
    store.close()
    calls = [
        lambda: store.get_dns("a.test"),
        lambda: store.get_robots("http://a.test"),
        lambda: store.put_dns("a.test", DnsRecord(("127.0.0.1",), 1.0, 2.0)),
        lambda: store.delete_robots("http://a.test"),
        lambda: list(store.dns_hosts()),
    ]
    for call in calls:
        with pytest.raises(HostStoreError, match="is closed"):
            call()
    assert store.write_errors == 0  # refused, not counted as a failed write
    store.close()  # a second close is harmless


def test_an_empty_path_is_refused_not_read_as_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(HostStoreError, match="path is empty"):
        HostStore("")
    with pytest.raises(HostStoreError, match="path is empty"):
        HostStore.open_shared("")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    shared = HostStore.open_shared(".")
    try:  # realpath("") is the working directory: open_shared handed its store out
        with pytest.raises(HostStoreError, match="path is empty"):
            HostStore.open_shared("")
    finally:
        shared.release()
