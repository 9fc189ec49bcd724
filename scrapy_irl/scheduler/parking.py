"""The parked store: URLs whose host or IP already has enough work in RAM, on disk by IP
and host until that IP and host can take more.

Lazy loading (Polybot section 3.5) keeps in RAM only the work that can start soon; a URL
read from BEAST for a host or IP with ``IRL_RAM_BACKLOG_SECONDS`` of work queued waits
here instead. It must come back when *its* host and IP drain, which one sequential queue
cannot do without re-reading every parked URL (a 28-minute crawl re-parked 63 000 URLs a
minute that way against 7 000-10 000 requests). So the store is sorted by IP, then host,
then arrival: the scheduler asks for an IP's URLs when that IP has room, and takes from
each of its hosts only what the host has room for; the rest is skipped by a seek, not
read. These are Mercator's per-host back-end queues, kept on disk.

LevelDB (plyvel, already the host store's engine) gives the sorted key space with range
reads, atomic write batches, and a log it recovers after a kill -9. Keys::

    b"q" <u16 len><ip> <u16 len><host> <u32 run epoch><u64 seq>  -> BEAST record
    b"c" <ip>                                                    -> u64 records of that IP
    b"n" <u32 run epoch><u64 seq>                                -> key of a fresh park
    b"v" <u32 run epoch><u64 seq>                                -> key of a record moved
    b"m:format", b"m:epoch"                                      -> u32
    b"m:open"                                                    -> present while open

The per-IP counts change in the same batch as the records, so they are exact after a
crash. Every open counts the records' keys (one pass, RAM per IP; about 1.3-1.4 s per
million) against them and repairs the counts that disagree, with a warning: a count above
its records kept a crawl open for ever, one below them left records that were never read.
After a run that did not close cleanly (``m:open`` still there: a kill, a crash, or a
write that failed, which may still have reached the disk) a failed write explains it;
after a clean close it is a bookkeeping error or damage the checksums did not catch, and
the warning says so (the records, all read, are the truth).

Every read verifies LevelDB's checksums, and every range is read through
:class:`_CheckedRange`: until 2026-11-29 the reads at open did not verify (LevelDB then
cached the block they read unverified, and the verified reads after them reused it), and
plyvel's iterators end a range without a word at a block they cannot read (they check
LevelDB's status only while they yield). A probe flipping one bit of a compacted store of
60 records found 2 325 of 4 233 copies opened with 60 URLs counted and none readable (a
crawl that never ended), 6 with one URL lost without a word, and one raw
``UnicodeDecodeError``; each is now refused as damaged.

A record handed back by :meth:`ParkedStore.take` stays on disk until the scheduler
:meth:`release` s it and the next :meth:`apply_releases` (after BEAST's save, so a record
moved into a BEAST retry queue is durable there before it is deleted here): a kill while
it is in RAM loses nothing. Records taken and not released yet are *out*: a host's out
records are the first ones of its range, skipped by seeking past the last one taken.

A record parked fresh from BEAST stays owed there until BEAST's next save (the scheduler
lets BEAST forget it only after :meth:`sync`), but the store's write survives a kill -9 at
once: a kill in between left the URL in both places, and the restart fetched it twice (a
soak of 2026-11-29: 69 pages fetched again 14-184 s after a first fetch soon after a
resume). So each fresh park also writes a marker, ``b"n" <u32 epoch><u64 seq> -> record
key``, in the same batch; :meth:`sync` notes the last sequence BEAST may forget
(:attr:`flushed_mark`, which BEAST saves in its STATE); markers up to the mark BEAST
saved are deleted after that save (:meth:`forget_marks`), and an open deletes the records
of markers past it (:meth:`drop_unsaved_parks`): BEAST, which still owes them, reads them
again.

A record taken back and moved into a BEAST retry queue (its host's DNS lookup or
robots.txt fetch is retried) is in the other position: BEAST holds it once its next save
is over, and the store deletes it only after that save (:meth:`apply_releases`). A kill
between the two left it in both. So :meth:`sync`, right before each BEAST save, writes a
marker ``b"v" <u32 epoch><u64 seq> -> record key`` for each record moved since the last
one, and :attr:`flushed_mark` covers them: an open deletes the records of move markers up
to the mark BEAST saved (BEAST holds them), keeps those past it (BEAST's save did not
happen), and deletes every marker; :meth:`apply_releases` deletes a record with its marker.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import Any

import plyvel

from scrapy_irl.exceptions import FrontierCorruptionError, StoreAccessError

FORMAT = 1
_RECORD = b"q"
_COUNT = b"c"
_MARK = b"n"  # a fresh park not yet forgotten by a saved BEAST STATE -> the record's key
_MOVED = b"v"  # a record moved into a BEAST retry queue, not deleted yet -> the record's key
_FORMAT_KEY = b"m:format"
_EPOCH_KEY = b"m:epoch"
_OPEN_KEY = b"m:open"
_LEN = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_SUFFIX = struct.Struct(">IQ")  # run epoch, sequence: arrival order within a host
#: Past every suffix of a host's range (seek here to skip the host).
_AFTER_HOST = b"\xff" * (_SUFFIX.size + 1)
_ACCESS_ERRORS = ("Permission denied", "Is a directory", "Not a directory",
                  "Read-only file system", "No space left on device")  # fmt: skip


logger = logging.getLogger(__name__)


def _segment(text: str) -> bytes:
    data = text.encode("utf-8", "surrogatepass")
    if len(data) >= 0xFFFF:
        raise ValueError(f"name of {len(data)} bytes cannot be parked: {text[:80]!r}...")
    return _LEN.pack(len(data)) + data


def ip_prefix(ip: str) -> bytes:
    """Every record of ``ip`` starts with this (length-prefixed: no IP's prefix starts
    another's)."""
    return _RECORD + _segment(ip)


def host_prefix(ip: str, host: str) -> bytes:
    return ip_prefix(ip) + _segment(host)


def split_key(key: bytes) -> tuple[str, str]:
    """The (ip, host) a record key belongs to (ValueError or struct.error: not one)."""
    ip_len = _LEN.unpack_from(key, 1)[0]
    ip = key[3 : 3 + ip_len].decode("utf-8", "surrogatepass")
    at = 3 + ip_len
    host_len = _LEN.unpack_from(key, at)[0]
    host = key[at + 2 : at + 2 + host_len].decode("utf-8", "surrogatepass")
    if key[:1] != _RECORD or len(key) != at + 2 + host_len + _SUFFIX.size:
        raise ValueError(f"not a parked record's key: {key[:80]!r}")
    return ip, host


#: What reading a damaged key or value raises (a bad length, bytes that are not UTF-8).
_DECODE_ERRORS = (ValueError, struct.error)


def _past(prefix: bytes) -> bytes:
    """The first key after every key starting with ``prefix`` (a one-byte prefix)."""
    return bytes([prefix[0] + 1])


class _CheckedRange:
    """The keys (and values) from ``start`` to ``stop``, checksums verified, raising
    plyvel.CorruptionError at a block LevelDB could not read.

    plyvel's ``iterator()`` checks LevelDB's status only when it yields a key: a damaged
    block at the end of the records ended the range without a word (a verified iterator
    over a store's 60 records yielded none, where a verified get of one of them raised
    "block checksum mismatch"). Its raw iterator checks the status after every step."""

    def __init__(self, db: Any, start: bytes, stop: bytes, *, values: bool = True) -> None:
        self._it = db.raw_iterator(verify_checksums=True)
        self._start = start
        self._stop = stop
        self._values = values
        self._it.seek(start)

    def __iter__(self) -> _CheckedRange:
        return self

    def __next__(self) -> Any:
        it = self._it
        if not it.valid():
            raise StopIteration
        key = it.key()
        if key >= self._stop:
            raise StopIteration
        item = (key, it.value()) if self._values else key
        it.next()  # (raises if the step met a block it could not read)
        return item

    def seek(self, target: bytes) -> None:
        self._it.seek(max(target, self._start))

    def close(self) -> None:
        self._it.close()


def _host_part(key: bytes) -> bytes:
    return key[: -_SUFFIX.size]


#: How many records of a host to take: called with the host's name; 0 skips it.
HostAllowance = Callable[[str], int]


class ParkedStore:
    """Records parked by IP and host (see the module docstring)."""

    def __init__(self, path: Path, *, fsync: bool = False) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self._db: Any = _open(self.path)
        #: IPs whose count disagreed with their records at open (repaired)
        self.counts_repaired = 0
        self._write_failed = False  # a write failed in this run: the next open repairs
        try:
            unclean = self._get(_OPEN_KEY) is not None
            self._check_format()
            #: records on disk per IP (out ones included); a dict in rotation order
            self._by_ip: dict[str, int] = self._read_counts()
            # before m:open is written: a store refused here is refused again next time,
            # not taken for one that stopped uncleanly and repaired
            self._recount(repair=unclean)
            self._epoch = self._start_epoch()
            self._seq = 0
        except (plyvel.CorruptionError, plyvel.IOError, *_DECODE_ERRORS) as exc:
            self._db.close()
            raise _damaged(self.path, exc) from exc
        except BaseException:
            self._db.close()
            raise
        self._total = sum(self._by_ip.values())
        #: out records per host range: [how many, the last key taken]
        self._out: dict[bytes, list[Any]] = {}
        self._out_by_ip: dict[str, int] = {}
        self._out_total = 0
        self._releases: list[bytes] = []
        #: per IP, where its next take starts (past the host served last)
        self._ip_cursor: dict[str, bytes] = {}
        self.parked_total = 0
        self.taken_total = 0
        self.reparked_total = 0
        #: fresh parks whose marker is still stored: record key -> marker key
        self._marks: dict[bytes, bytes] = {}
        #: (epoch, seq) of the last fresh park BEAST may forget (see :meth:`sync`)
        self._flushed = (self._epoch, 0)
        self.unsaved_dropped = 0
        #: released records moved into a BEAST retry queue, marker not written yet
        self._moving: list[bytes] = []
        #: their markers once written (by :meth:`sync`): record key -> marker key
        self._moves: dict[bytes, bytes] = {}
        self.moved_dropped = 0

    # -- open --------------------------------------------------------------------------------
    def _get(self, key: bytes) -> bytes | None:
        """One value, its checksum verified: a block read unverified stays in LevelDB's
        cache, and the verified reads after it used it unchecked."""
        return self._db.get(key, verify_checksums=True)

    def _check_format(self) -> None:
        stored = self._get(_FORMAT_KEY)
        if stored is not None and _U32.unpack(stored)[0] > FORMAT:
            raise FrontierCorruptionError(
                f"{self.path}: parked store format {_U32.unpack(stored)[0]}, written by a "
                f"newer scrapy-irl; this one reads format {FORMAT}. Upgrade scrapy-irl or "
                "use a new JOBDIR."
            )

    def _start_epoch(self) -> int:
        previous = self._get(_EPOCH_KEY)
        epoch = (_U32.unpack(previous)[0] + 1) if previous is not None else 0
        if epoch > 0xFFFFFFFF:
            raise FrontierCorruptionError(f"{self.path}: run epoch overflow")
        with self._db.write_batch(sync=self.fsync) as batch:
            batch.put(_FORMAT_KEY, _U32.pack(FORMAT))
            batch.put(_EPOCH_KEY, _U32.pack(epoch))
            batch.put(_OPEN_KEY, b"")
        return epoch

    def _read_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for key, value in _CheckedRange(self._db, _COUNT, _past(_COUNT)):
            if len(value) != _U64.size:
                raise FrontierCorruptionError(
                    f"{self.path}: a parked count of {len(value)} bytes (8 expected); the "
                    "store is damaged. Restore it, or delete the whole frontier to start afresh."
                )
            count = _U64.unpack(value)[0]
            if count:
                counts[key[1:].decode("utf-8", "surrogatepass")] = count
        return counts

    def _recount(self, *, repair: bool) -> None:
        """Count every IP's records (keys only, one pass; RAM per IP) against the stored
        counts and repair those that disagree, with a warning. ``repair``: the last run
        stopped uncleanly, where a failed write explains a disagreement; after a clean
        close the warning says it is a bookkeeping error or damage."""
        found: dict[str, int] = {}
        for key in _CheckedRange(self._db, _RECORD, _past(_RECORD), values=False):
            ip = split_key(key)[0]
            found[ip] = found.get(ip, 0) + 1
        wrong = {ip for ip in found.keys() | self._by_ip.keys()
                 if found.get(ip, 0) != self._by_ip.get(ip, 0)}  # fmt: skip
        if not wrong:
            return
        example = sorted(wrong)[0]
        # After a clean close a disagreement is not a failed write: a bookkeeping error,
        # or damage LevelDB's checksums did not catch. Every record was read (a block it
        # could not read raised above), so the records are the truth: repaired, loudly.
        # Refused, the frontier was lost whole for a count (a review, 2026-11-29).
        why = ("the last run did not close cleanly (a write that failed, or a damaged file)"
               if repair else "after a clean close: a bookkeeping error or undetected damage; "
               "URLs counted but not readable are gone")  # fmt: skip
        logger.warning(
            "%(path)s: the parked URL counts of %(n)d IPs disagreed with the URLs stored "
            "(%(ip)s: %(said)d counted, %(has)d stored), repaired; %(why)s",
            {"path": self.path, "n": len(wrong), "ip": example,
             "said": self._by_ip.get(example, 0), "has": found.get(example, 0), "why": why},
        )  # fmt: skip
        repaired = {ip: found.get(ip, 0) for ip in wrong}
        with self._db.write_batch(sync=self.fsync) as batch:
            for ip, count in repaired.items():
                _write_count(batch, ip, count)
        self._apply_counts(repaired)
        self.counts_repaired = len(wrong)

    # -- sizes -------------------------------------------------------------------------------
    def __len__(self) -> int:
        """Records on disk, those taken and not released included."""
        return self._total

    def floor(self) -> int:
        """Records that stay on disk until BEAST's next save: those not released now.
        BEAST's STATE keeps it (:meth:`check_floor`); deletions happen only after a save."""
        return self._total - len(self._releases)

    def check_floor(self, floor: int | None) -> None:
        """Refuse a store holding fewer records than BEAST's last save counted in it.

        LevelDB refuses a checksum it cannot match, but a log file deleted, emptied or cut
        short (a copy, outside damage, a power loss with fsync off) only takes it back to
        its last compaction: the records parked since then were gone without a word, and
        BEAST, which forgot them once they were parked, cannot bring them back."""
        if floor is not None and self._total < floor:
            raise FrontierCorruptionError(
                f"{self.path}: the parked store holds {self._total} URLs, but the "
                f"frontier's last save counted {floor} in it: part of it was lost (a "
                "LevelDB log file deleted, emptied or cut short). Restore the frontier, "
                "or delete the whole directory to start afresh."
            )

    @property
    def available(self) -> int:
        """Records :meth:`take` can hand out (not out already)."""
        return self._total - self._out_total

    @property
    def out(self) -> int:
        return self._out_total

    def ips(self) -> int:
        return len(self._by_ip)

    # -- writes ------------------------------------------------------------------------------
    def park(self, ip: str, host: str, record: bytes, *, replaces: bytes | None = None) -> None:
        """Write ``record`` for ``host`` on ``ip``, at the end of the host's range.

        ``replaces``: the key of an out record this one is (a record taken and parked
        again): deleted in the same batch, so a kill leaves exactly one of the two."""
        self._seq += 1
        key = host_prefix(ip, host) + _SUFFIX.pack(self._epoch, self._seq)
        changed: dict[str, int] = {}
        mark = None
        with self._writing():
            batch = self._db.write_batch()
            batch.put(key, record)
            if replaces is None:
                self._add(batch, changed, ip, 1)
                mark = _MARK + _SUFFIX.pack(self._epoch, self._seq)
                batch.put(mark, key)  # BEAST still owes it (see the module docstring)
            else:
                old_ip, _ = split_key(replaces)
                batch.delete(replaces)
                if old_ip != ip:  # its host moved to another address meanwhile
                    self._add(batch, changed, old_ip, -1)
                    self._add(batch, changed, ip, 1)
                mark = self._marks.get(replaces)
                if mark is not None:  # still owed to BEAST: the marker follows the record
                    batch.put(mark, key)
            batch.write()
        self._apply_counts(changed)
        if mark is not None:
            if replaces is not None:
                del self._marks[replaces]
            self._marks[key] = mark
        if replaces is not None:
            self._settle(replaces)
            self.reparked_total += 1
        else:
            self._total += 1
        self.parked_total += 1

    def _add(self, batch: Any, changed: dict[str, int], ip: str, delta: int) -> None:
        """Write ``ip``'s count changed by ``delta`` into ``batch``; RAM follows only once
        the batch is written (:meth:`_apply_counts`): a write that failed (a full disk)
        left RAM's count off by its change, and the next write of the IP stored that."""
        count = changed.get(ip, self._by_ip.get(ip, 0)) + delta
        changed[ip] = count
        _write_count(batch, ip, count)

    def _apply_counts(self, changed: dict[str, int]) -> None:
        for ip, count in changed.items():
            if count > 0:
                self._by_ip[ip] = count
            else:
                self._by_ip.pop(ip, None)
                self._ip_cursor.pop(ip, None)

    def release(self, key: bytes, *, moved: bool = False) -> None:
        """The out record ``key`` left RAM for good (fetched, dropped, ``moved`` into a
        BEAST retry queue): it is deleted at the next :meth:`apply_releases`, and stays out
        until then. A moved one gets a marker at the next :meth:`sync` (module docstring)."""
        self._releases.append(key)
        if moved:
            self._moving.append(key)

    def apply_releases(self) -> int:
        """Delete the released records (call after BEAST's save: see the module docstring)."""
        if not self._releases:
            return 0
        keys = self._releases
        changed: dict[str, int] = {}
        with self._writing():
            batch = self._db.write_batch()
            for key in keys:
                batch.delete(key)
                self._add(batch, changed, split_key(key)[0], -1)
                moved = self._moves.get(key)
                if moved is not None:
                    batch.delete(moved)
            batch.write()
        self._releases = []  # (kept for the next try if the write failed)
        self._apply_counts(changed)
        for key in keys:
            self._settle(key)
            self._moves.pop(key, None)
        if self._moving:  # released before any save marked them (not the scheduler's way)
            gone = set(keys)
            self._moving = [key for key in self._moving if key not in gone]
        self._total -= len(keys)
        return len(keys)

    def _settle(self, key: bytes) -> None:
        """``key`` is no longer out."""
        part = _host_part(key)
        out = self._out.get(part)
        if out is not None:
            out[0] -= 1
            if out[0] <= 0:
                del self._out[part]
        ip = split_key(key)[0]
        left = self._out_by_ip.get(ip, 0) - 1
        if left > 0:
            self._out_by_ip[ip] = left
        else:
            self._out_by_ip.pop(ip, None)
        self._out_total -= 1

    def sync(self) -> None:
        """Write the markers of the records moved into BEAST since the last call, make
        every write so far durable (LevelDB's log synced) when fsync is on, and move
        :attr:`flushed_mark` past every fresh park and move so far: the scheduler calls it
        right before each BEAST save (which forgets those parks and holds those moves),
        and BEAST saves the mark with that."""
        if self._moving:
            marks: dict[bytes, bytes] = {}
            with self._writing():
                batch = self._db.write_batch()
                for key in self._moving:
                    self._seq += 1
                    marks[key] = _MOVED + _SUFFIX.pack(self._epoch, self._seq)
                    batch.put(marks[key], key)
                batch.write()
            self._moves.update(marks)
            self._moving = []
        if self.fsync:
            with self._writing():
                self._db.put(_EPOCH_KEY, _U32.pack(self._epoch), sync=True)
        self._flushed = (self._epoch, self._seq)

    @property
    def flushed_mark(self) -> list[int]:
        """[epoch, seq] of the last fresh park BEAST may forget (saved in its STATE)."""
        return list(self._flushed)

    def forget_marks(self, saved: list[int] | None) -> int:
        """Delete the markers of fresh parks up to ``saved``, the mark of BEAST's last
        saved STATE (call after that save): BEAST forgot those records durably. Returns
        how many."""
        if saved is None or not self._marks:
            return 0
        limit = _mark_key(saved)
        gone = [(key, mark) for key, mark in self._marks.items() if mark <= limit]
        if not gone:
            return 0
        with self._writing():
            batch = self._db.write_batch()
            for _key, mark in gone:
                batch.delete(mark)
            batch.write()
        for key, _mark in gone:
            del self._marks[key]
        return len(gone)

    def drop_unsaved_parks(self, saved: list[int] | None) -> int:
        """At open, before anything is taken: delete the records parked fresh after the
        mark of BEAST's last saved STATE (``saved``; None: BEAST saved none, or before
        marks existed), which BEAST still owes and reads again; the records moved into a
        BEAST retry queue up to that mark, which that save holds (:attr:`moved_dropped`);
        and every marker. Returns how many records parked fresh were deleted."""
        limit = None if saved is None else _mark_key(saved)
        changed: dict[str, int] = {}
        deleted: set[bytes] = set()  # a record can have both markers
        dropped = moved = 0
        try:
            with self._writing():
                batch = self._db.write_batch(sync=self.fsync)
                for prefix in (_MARK, _MOVED):
                    for mark, key in _CheckedRange(self._db, prefix, _past(prefix)):
                        batch.delete(mark)
                        if prefix == _MARK:
                            stale = limit is None or mark > limit  # BEAST still owes it
                        else:
                            stale = limit is not None and mark[1:] <= limit[1:]  # BEAST has it
                        ip = split_key(key)[0]  # (a record's key, or the store is damaged)
                        if not stale or key in deleted or self._get(key) is None:
                            continue
                        batch.delete(key)
                        self._add(batch, changed, ip, -1)
                        deleted.add(key)
                        if prefix == _MARK:
                            dropped += 1
                        else:
                            moved += 1
                batch.write()
        except (plyvel.CorruptionError, *_DECODE_ERRORS) as exc:
            raise _damaged(self.path, exc) from exc
        self._apply_counts(changed)
        self._total -= len(deleted)
        self.unsaved_dropped = dropped
        self.moved_dropped = moved
        return dropped

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """LevelDB reports damage it found in the background on the next write: a
        FrontierCorruptionError, which closes the crawl cleanly (a bare CorruptionError
        was taken for a bad request, and the URL dropped)."""
        try:
            yield
        except plyvel.CorruptionError as exc:  # (plyvel.IOError is an OSError: a disk error)
            self._write_failed = True
            raise _damaged(self.path, exc) from exc
        except BaseException:
            # A failed write may still reach the disk (an error while syncing the log):
            # the close then keeps m:open, so the next open recounts.
            self._write_failed = True
            raise

    # -- reads -------------------------------------------------------------------------------
    def ips_with_work(self, limit: int) -> list[str]:
        """Up to ``limit`` IPs with records to take, in rotation: each one returned goes to
        the back, so a sweep that stops early starts with the others next time."""
        chosen: list[str] = []
        for ip in list(islice(self._by_ip, max(0, limit) * 2 + 16)):
            if len(chosen) >= limit:
                break
            count = self._by_ip.pop(ip)
            self._by_ip[ip] = count
            if count > self._out_by_ip.get(ip, 0):
                chosen.append(ip)
        return chosen

    def take(self, ip: str, allowance: HostAllowance, limit: int) -> list[tuple[bytes, str, bytes]]:
        """Up to ``limit`` records of ``ip`` as (key, host, record), oldest first within
        each host, at most ``allowance(host)`` of each host; they are out until released."""
        if limit <= 0 or self._by_ip.get(ip, 0) <= self._out_by_ip.get(ip, 0):
            return []
        taken: list[tuple[bytes, str, bytes]] = []
        prefix = ip_prefix(ip)
        end = prefix + b"\xff\xff"  # past every host of the IP (names are < 0xFFFF bytes)
        # Hosts after the one served last come first, then the IP's range from its start:
        # in key order alone, the first hosts of a busy IP took its whole allowance at
        # every tick and the last ones waited (a review: 37 pages against 1 in 400 s).
        after = self._ip_cursor.get(ip)
        ranges = [(prefix, end)] if after is None else [(after, end), (prefix, after)]
        try:
            for start, stop in ranges:
                if len(taken) >= limit:
                    break
                iterator = _CheckedRange(self._db, start, stop)
                try:
                    self._take_from(iterator, allowance, limit, taken)
                finally:
                    iterator.close()
        except plyvel.CorruptionError as exc:  # (plyvel.IOError is an OSError: a disk error)
            raise _damaged(self.path, exc) from exc
        if taken:
            self._ip_cursor[ip] = _host_part(taken[-1][0]) + _AFTER_HOST
        for key, _host, _record in taken:
            part = _host_part(key)
            out = self._out.setdefault(part, [0, b""])
            out[0] += 1
            out[1] = key
            self._out_by_ip[ip] = self._out_by_ip.get(ip, 0) + 1
        self._out_total += len(taken)
        self.taken_total += len(taken)
        return taken

    def _take_from(self, iterator: Any, allowance: HostAllowance, limit: int,
                   taken: list[tuple[bytes, str, bytes]]) -> None:  # fmt: skip
        host_left = 0
        current: bytes | None = None
        # bounded: each turn takes a record, or seeks past a host's out records or the host
        for _ in range(3 * self._total + 3):
            try:
                key, record = next(iterator)
            except StopIteration:
                return
            part = _host_part(key)
            if part != current:
                current = part
                out = self._out.get(part)
                if out is not None and key <= out[1]:
                    iterator.seek(out[1] + b"\x00")  # its first records are out already
                    current = None  # re-evaluated at the next key (maybe another host)
                    continue
                host_left = allowance(split_key(key)[1])
                if host_left <= 0:
                    iterator.seek(part + _AFTER_HOST)
                    continue
            taken.append((key, split_key(key)[1], bytes(record)))
            host_left -= 1
            if len(taken) >= limit:
                return
            if host_left <= 0:
                iterator.seek(part + _AFTER_HOST)

    def scan(self) -> Iterator[tuple[bytes, str, str, bytes]]:
        """Every record as (key, ip, host, record), out ones included (tests, tools)."""
        for key, record in _CheckedRange(self._db, _RECORD, _past(_RECORD)):
            ip, host = split_key(key)
            yield key, ip, host, record

    def stats(self) -> dict[str, int]:
        return {"stored": self._total, "out": self._out_total, "ips": len(self._by_ip),
                "parked_total": self.parked_total, "taken_total": self.taken_total,
                "reparked_total": self.reparked_total,
                "counts_repaired": self.counts_repaired,
                "unsaved_dropped": self.unsaved_dropped,
                "moved_dropped": self.moved_dropped}  # fmt: skip

    def close(self, *, apply_releases: bool = True) -> None:
        """Apply the pending releases (unless the caller's save failed: a released record
        may be in a BEAST retry queue that was not saved), then close; idempotent."""
        if self._db.closed:
            return
        try:
            if apply_releases:
                self.apply_releases()
            if not self._write_failed:
                with self._writing():
                    self._db.delete(_OPEN_KEY, sync=self.fsync)  # the counts are exact
        finally:
            self._db.close()


def _mark_key(mark: list[int]) -> bytes:
    epoch, seq = mark
    return _MARK + _SUFFIX.pack(int(epoch), int(seq))


def _write_count(batch: Any, ip: str, count: int) -> None:
    """Put ``ip``'s record count into ``batch`` (its key deleted at 0)."""
    key = _COUNT + ip.encode("utf-8", "surrogatepass")
    if count > 0:
        batch.put(key, _U64.pack(count))
    else:
        batch.delete(key)


def _open(path: Path) -> Any:
    try:
        return plyvel.DB(str(path), create_if_missing=True, paranoid_checks=True)
    except plyvel.CorruptionError as exc:
        raise _damaged(path, exc) from exc
    except plyvel.IOError as exc:
        raise _damaged(path, exc) from exc


def _damaged(path: Path, exc: Exception | str) -> Exception:
    """LevelDB could not open or read the store: the system refused, or it is damaged (a
    str: what the store found wrong; a decoding error: a key or value it cannot read)."""
    text = str(exc) if not isinstance(exc, _DECODE_ERRORS) else f"{type(exc).__name__}: {exc}"
    if isinstance(exc, plyvel.IOError) and any(e in text for e in _ACCESS_ERRORS):
        return StoreAccessError(
            f"{path}: the parked store cannot be opened, read or written ({text}); check "
            "that this user may read and write it and that the disk has room"
        )
    if isinstance(exc, plyvel.IOError) and "lock" in text.lower():
        return StoreAccessError(f"{path}: the parked store is in use by another process ({text})")
    return FrontierCorruptionError(
        f"{path}: the parked store (LevelDB) is damaged ({text}). Its URLs cannot be read "
        "back: restore the frontier, or delete the whole directory to start afresh."
    )
