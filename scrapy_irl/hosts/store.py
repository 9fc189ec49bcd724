"""``HostStore``: the LevelDB database (via plyvel) holding robots.txt and DNS records.

One database per directory, shared by every component of a process that names the same
directory (LevelDB allows one opener per directory, so :meth:`HostStore.open_shared`
hands out one handle with a reference count). Keys are ``b"R" + origin`` for robots.txt
records and ``b"D" + host`` for DNS records; ``b"\\x00format"`` holds the format version.

Crash safety comes from LevelDB itself: each put is appended to its write-ahead log with
one ``write()`` before it returns, so a kill -9 loses nothing already put; recovery on the
next open replays the log. ``sync=True`` also survives power loss, at an fsync per put.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar, Self

import plyvel

from scrapy_irl.exceptions import (
    HostStoreAccessError,
    HostStoreError,
    HostStoreLockedError,
    StoreAccessError,
)
from scrapy_irl.hosts.records import DnsRecord, RecordError, RobotsRecord
from scrapy_irl.startfail import release_failed_starts
from scrapy_irl.tempdirs import remove_temporary_directory

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
FORMAT_KEY = b"\x00format"
ROBOTS_PREFIX = b"R"
DNS_PREFIX = b"D"
#: LevelDB's numbered data files: write-ahead logs and tables (``LOG`` is its text log).
_DATA_FILE = re.compile(r"\d+\.(log|ldb|sst)")


def headless_data(path: Path) -> list[str]:
    """LevelDB data files in ``path`` when its ``CURRENT`` file is missing, else [].

    Without ``CURRENT``, ``create_if_missing`` makes a new, empty database there and
    LevelDB then deletes the table files it does not list (replaying only the logs): the
    store would come back silently emptied, or as "not a scrapy-irl host store".
    """
    if (path / "CURRENT").exists():
        return []
    try:
        names = os.listdir(path)
    except OSError:
        return []
    return sorted(name for name in names if _DATA_FILE.fullmatch(name))


#: What LevelDB says when its LOCK is held: by another process (flock), or by this one.
_LOCK_HELD = ("Resource temporarily unavailable", "already held by process")
#: System errors in LevelDB's messages that are about access, not damage.
_ACCESS_ERRORS = ("Permission denied", "Is a directory", "Not a directory",
                  "Read-only file system", "No space left on device")  # fmt: skip


def _open_failure(path: Path, exc: Exception) -> HostStoreError:
    """Why LevelDB would not open: the lock (another crawl) or the file system."""
    text = str(exc)
    if any(held in text for held in _LOCK_HELD):
        return HostStoreLockedError(
            f"cannot open host store {path}: {text}: another crawl is using it; give "
            "each concurrent process its own IRL_HOSTS_DIR (or JOBDIR).")  # fmt: skip
    # (a LOCK that is a directory said "another crawl is using it": a fuzz, 2026-11-27)
    return HostStoreError(
        f"cannot open host store {path}: {text}. Check that the directory and its files "
        "are readable and writable by this user and the disk not full (IRL_HOSTS_DIR, "
        "JOBDIR).")  # fmt: skip


def _damaged(path: Path, exc: Exception) -> HostStoreError:
    """A store LevelDB opened but could not read: damaged, unless the system refused
    access (a table file this user may not read was called corrupt, and the advice to
    move the store away would have thrown a sound cache out)."""
    if isinstance(exc, plyvel.IOError) and any(e in str(exc) for e in _ACCESS_ERRORS):
        return _open_failure(path, exc)
    return HostStoreError(
        f"host store {path} is corrupt ({exc}); move it away to start a "
        "fresh cache (robots.txt and DNS data are refetched)"
    )


class DiscardLog:
    """Says which undecodable records were discarded, the first few by name: a damaged
    table file holds thousands, and a line each flooded the log (5 262 warnings in 6 s
    of a fuzzed crawl). Each is still counted by the caller."""

    SHOWN = 10

    def __init__(self, what: str, stat: str) -> None:
        self.what, self.stat, self.count = what, stat, 0

    def discarded(self, key: str, exc: Exception) -> None:
        self.count += 1
        if self.count <= self.SHOWN:
            logger.warning("Discarding undecodable %s record of %s: %s", self.what, key, exc)
        if self.count == self.SHOWN:
            logger.warning(
                "%(n)d undecodable %(what)s records so far: the host store may be damaged "
                "(robots.txt and DNS data are refetched; move the store away to start a "
                "fresh cache). Further ones are counted in %(stat)s, not logged.",
                {"n": self.count, "what": self.what, "stat": self.stat},
            )  # fmt: skip


def _refuse_empty(path: str | os.PathLike[str]) -> None:
    """``Path("")`` and ``realpath("")`` are the working directory: surely a mistake."""
    if not os.fspath(path):
        raise HostStoreError("host store path is empty; name the directory to use")


class HostStore:
    """Typed access to the robots.txt and DNS records of one LevelDB directory."""

    _shared: ClassVar[dict[str, tuple[HostStore, int]]] = {}
    #: Re-entrant: opening a store (inside open_shared) may first give back the stores of
    #: crawls of this process that failed to start (release, which takes it too).
    _shared_lock: ClassVar[threading.RLock] = threading.RLock()
    #: Directories a store of this process has open. LevelDB's own lock is a POSIX
    #: record lock, held per process: a second open in the same process is refused, but
    #: refusing closes LevelDB's handle on LOCK, and that drops the process's lock, so
    #: another process could then open the store and the two overwrote each other's
    #: records (a probe lost 3 000 of them, 2026-11-28). Refused here, before LevelDB.
    _open_paths: ClassVar[set[str]] = set()
    _open_paths_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        cache_bytes: int = 8 * 1024 * 1024,
        write_buffer_bytes: int = 4 * 1024 * 1024,
        sync: bool = False,
    ) -> None:
        _refuse_empty(path)
        self.path = Path(path).absolute()  # LevelDB locks by path string: one spelling
        self.sync = sync
        self.write_errors = 0  # puts that failed (full disk, I/O error); see _put
        #: Keys discarded as undecodable: read as absent until written again, even when
        #: the delete could not be written (LevelDB fails every write once a compaction
        #: met a damaged table, and each request of the origin read and discarded its
        #: record again: 112 times for one origin in 6 s of a fuzz). Bounded.
        self._discarded: set[bytes] = set()
        #: A private store made because the shared one was locked: deleted at close.
        self.remove_on_close = False
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a file in the way, no permission: the documented error
            message = str(StoreAccessError.from_os_error(exc, self.path))
            raise HostStoreAccessError(message) from exc
        self._key = os.path.realpath(self.path)
        if orphans := headless_data(self.path):
            raise HostStoreError(
                f"host store {self.path} is corrupt (its CURRENT file is missing but it "
                f"holds LevelDB data: {', '.join(orphans[:5])}); move it away to start a "
                "fresh cache (robots.txt and DNS data are refetched)"
            )
        if self._key in self._open_paths:
            # Held by a crawl of this process that failed to start? Given back now.
            release_failed_starts()
        with self._open_paths_lock:
            if self._key in self._open_paths:
                raise HostStoreLockedError(
                    f"cannot open host store {self.path}: another crawl is using it (in "
                    "this process); share it (HostStore.open_shared) or give each crawl "
                    "its own IRL_HOSTS_DIR (or JOBDIR).")  # fmt: skip
            self._open_paths.add(self._key)
        try:
            self._open(cache_bytes, write_buffer_bytes)
        except BaseException:
            self._forget_path(self._key)
            raise
        # A store dropped without close() (plyvel closes it when collected) frees its path
        # too: left registered, the directory could never be opened again in this process.
        self._unregister = weakref.finalize(self, self._forget_path, self._key)

    @classmethod
    def _forget_path(cls, key: str) -> None:
        with cls._open_paths_lock:
            cls._open_paths.discard(key)

    def _open(self, cache_bytes: int, write_buffer_bytes: int) -> None:
        try:
            self._db: Any = plyvel.DB(
                str(self.path),
                create_if_missing=True,
                paranoid_checks=True,
                lru_cache_size=cache_bytes,
                write_buffer_size=write_buffer_bytes,
            )
        except plyvel.CorruptionError as exc:
            raise _damaged(self.path, exc) from exc
        except plyvel.IOError as exc:
            raise _open_failure(self.path, exc) from exc
        try:
            self._check_format()
        except (plyvel.CorruptionError, plyvel.IOError) as exc:
            # A table file cut short (a copy or a disk that failed) reads as an I/O error
            # in LevelDB, not as corruption: the same damage, the same clear refusal.
            self._db.close()
            raise _damaged(self.path, exc) from exc
        except BaseException:
            self._db.close()
            raise

    def _check_format(self) -> None:
        stored = self._db.get(FORMAT_KEY)
        if stored is None:
            if next(self._db.iterator(include_value=False), None) is not None:
                raise HostStoreError(
                    f"{self.path} holds a LevelDB database that is not a scrapy-irl host store"
                )
            self._db.put(FORMAT_KEY, str(FORMAT_VERSION).encode(), sync=True)
            return
        try:
            version = int(stored)
        except ValueError:
            raise HostStoreError(
                f"host store {self.path} has an unreadable format marker"
            ) from None
        if version > FORMAT_VERSION:
            raise HostStoreError(
                f"host store {self.path} was written by format version {version}; this "
                f"scrapy-irl reads version {FORMAT_VERSION} and older. Upgrade scrapy-irl "
                "or point IRL_HOSTS_DIR elsewhere."
            )

    # -- sharing within a process ----------------------------------------------------------
    @classmethod
    def open_shared(cls, path: str | os.PathLike[str], **options: Any) -> HostStore:
        """The process-wide store for ``path``, opened on first use; pair with :meth:`release`."""
        _refuse_empty(path)
        key = os.path.realpath(path)
        with cls._shared_lock:
            store, refs = cls._shared.get(key, (None, 0))
            if store is None or store.closed:
                store, refs = cls(path, **options), 0
            cls._shared[key] = (store, refs + 1)
            return store

    def release(self) -> None:
        """Drop one reference from :meth:`open_shared`; the last one closes the database."""
        key = os.path.realpath(self.path)
        with self._shared_lock:
            store, refs = self._shared.get(key, (None, 0))
            if store is not self:
                self.close()
                return
            if refs <= 1:
                del self._shared[key]
                self.close()
                if self.remove_on_close:
                    remove_temporary_directory(self.path)
            else:
                self._shared[key] = (store, refs - 1)

    # -- records ---------------------------------------------------------------------------
    def _live(self) -> Any:
        """The open database; a closed store raises :class:`HostStoreError` (plyvel's own
        RuntimeError escaped before, outside the documented exception tree)."""
        if self._db.closed:
            raise HostStoreError(f"host store {self.path} is closed")
        return self._db

    def _get(self, key: bytes) -> bytes | None:
        db = self._live()
        try:
            # Checksums verified: a flipped byte in a table file otherwise came back as
            # a different robots.txt body, without a word (a fuzz, 2026-11-27).
            return db.get(key, verify_checksums=True)  # type: ignore[no-any-return]
        except (plyvel.CorruptionError, plyvel.IOError) as exc:
            # A damaged block, or a table file cut short (LevelDB says I/O error): lose
            # this entry, not the crawl.
            raise RecordError(
                f"LevelDB block holding {key!r} is corrupt: {exc}"
            ) from exc

    def get_robots(self, origin: str) -> RobotsRecord | None:
        """The record of ``origin``; raises RecordError if it does not decode."""
        key = ROBOTS_PREFIX + origin.encode("utf-8")
        data = None if key in self._discarded else self._get(key)
        return None if data is None else RobotsRecord.decode(data)

    def put_robots(self, origin: str, record: RobotsRecord) -> None:
        self._put(ROBOTS_PREFIX + origin.encode("utf-8"), record.encode())

    def _put(self, key: bytes, value: bytes) -> None:
        """Store a record; a failed write (full disk) is logged once and counted, not raised:
        the store is a cache, the record stays in the callers' RAM caches and is refetched
        by a later run, and the crawl (or the frontier's own error) decides what follows."""
        put = self._live().put
        self._discarded.discard(key)
        self._write(put, key, value)

    def _discard(self, key: bytes) -> None:
        delete = self._live().delete
        if len(self._discarded) >= 100_000:  # a store that damaged: re-read, RAM bounded
            self._discarded.clear()
        self._discarded.add(key)
        self._write(delete, key)

    def _write(self, operation: Any, key: bytes, *value: bytes) -> None:
        try:
            operation(key, *value, sync=self.sync)
        except plyvel.Error as exc:
            self.write_errors += 1
            if self.write_errors == 1:
                logger.error("Host store %s: a write failed (%s); robots.txt and DNS records "
                             "are kept in RAM only until it works again (further failures "
                             "are counted, not logged)", self.path, exc)  # fmt: skip

    def delete_robots(self, origin: str) -> None:
        # Through _write: once LevelDB has met a damaged table in a compaction, every
        # later write fails with that error; a cache must go on without storing.
        self._discard(ROBOTS_PREFIX + origin.encode("utf-8"))

    def get_dns(self, host: str) -> DnsRecord | None:
        key = DNS_PREFIX + host.encode("utf-8")
        data = None if key in self._discarded else self._get(key)
        return None if data is None else DnsRecord.decode(data)

    def put_dns(self, host: str, record: DnsRecord) -> None:
        self._put(DNS_PREFIX + host.encode("utf-8"), record.encode())

    def delete_dns(self, host: str) -> None:
        self._discard(DNS_PREFIX + host.encode("utf-8"))

    def robots_origins(self) -> Iterator[str]:
        """Every origin with a robots record, in key order (a full scan: tools and tests).

        A damaged block raises :class:`HostStoreError` (a scan cannot step over it)."""
        yield from self._scan(ROBOTS_PREFIX)

    def dns_hosts(self) -> Iterator[str]:
        """Every host with a DNS record, in key order (a full scan, as :meth:`robots_origins`)."""
        yield from self._scan(DNS_PREFIX)

    def _scan(self, prefix: bytes) -> Iterator[str]:
        db = self._live()
        try:
            for key in db.iterator(prefix=prefix, include_value=False):
                yield key[1:].decode("utf-8", "replace")
        except (plyvel.CorruptionError, plyvel.IOError) as exc:
            # It used to escape as plyvel's own exception: a traceback from the CLI's --list.
            raise _damaged(self.path, exc) from exc

    # -- lifetime --------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return bool(self._db.closed)

    def close(self) -> None:
        if not self._db.closed:
            self._db.close()
            self._unregister()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
