"""The sorted disk cache Z: writing it during a merge, reading it in chunks, searching it.

Z is two flat files per epoch, ``z.<epoch>.keys.drum`` (sorted little-endian uint64 keys)
and ``z.<epoch>.vals.drum`` (the values in the same order; absent when values are 0 bytes).
Keeping keys apart from values lets the synchronous lookup path binary-search a
memory-mapped key array directly. Record count and CRC32 of each file live in the manifest,
so truncation and bit rot are detected.
"""

from __future__ import annotations

import bisect
import os
import sys
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np

from scrapy_irl.drum.records import KEY_DTYPE
from scrapy_irl.exceptions import DrumCorruptionError


def cache_paths(directory: Path, epoch: int) -> tuple[Path, Path]:
    """(keys file, values file) of Z in ``epoch``."""
    stem = f"z.{epoch:010d}"
    return directory / f"{stem}.keys.drum", directory / f"{stem}.vals.drum"


class CacheWriter:
    """Streams the new Z to ``*.tmp`` files while a merge runs; :meth:`commit` renames them."""

    def __init__(self, directory: Path, epoch: int, value_dtype: np.dtype) -> None:
        self.keys_path, self.vals_path = cache_paths(directory, epoch)
        self._has_values = value_dtype.itemsize > 0
        self._keys_tmp = self.keys_path.with_suffix(".tmp")
        self._vals_tmp = self.vals_path.with_suffix(".tmp")
        # Held open across add() calls; close() or abort() closes them.
        self._keys: BinaryIO = open(self._keys_tmp, "wb")  # noqa: SIM115
        self._vals: BinaryIO | None = open(self._vals_tmp, "wb") if self._has_values else None  # noqa: SIM115
        self.count = 0
        self.keys_crc = 0
        self.vals_crc = 0
        self.bytes_written = 0

    def write(self, keys: np.ndarray, values: np.ndarray | None) -> None:
        if not len(keys):
            return
        raw = keys.astype(KEY_DTYPE, copy=False).tobytes()
        self._keys.write(raw)
        self.keys_crc = zlib.crc32(raw, self.keys_crc)
        self.bytes_written += len(raw)
        if self._vals is not None and values is not None:
            vraw = values.tobytes()
            self._vals.write(vraw)
            self.vals_crc = zlib.crc32(vraw, self.vals_crc)
            self.bytes_written += len(vraw)
        self.count += len(keys)

    def commit(self, *, fsync: bool) -> None:
        """Close, optionally fsync, and move the files to their final names."""
        for handle, tmp, final in (
            (self._keys, self._keys_tmp, self.keys_path),
            (self._vals, self._vals_tmp, self.vals_path),
        ):
            if handle is None:
                continue
            handle.flush()
            if fsync:
                os.fsync(handle.fileno())
            handle.close()
            os.replace(tmp, final)

    def abort(self) -> None:
        for handle, tmp in ((self._keys, self._keys_tmp), (self._vals, self._vals_tmp)):
            if handle is not None:
                handle.close()
                tmp.unlink(missing_ok=True)


class CacheReader:
    """Sequential reader of Z in chunks of at most Delta bytes, checking CRCs as it goes.

    :meth:`chunks_below` hands out the records with key < ``upper`` (one bucket's key
    range) and keeps the rest buffered for the next bucket, so one pass over Z serves all
    k buckets, as in the thesis.
    """

    def __init__(
        self,
        keys_path: Path | None,
        vals_path: Path | None,
        *,
        count: int,
        keys_crc: int,
        vals_crc: int,
        value_dtype: np.dtype,
        chunk_bytes: int,
    ) -> None:
        self.value_dtype = value_dtype
        self._has_values = value_dtype.itemsize > 0
        self._remaining = count
        self._expected = (keys_crc, vals_crc)
        self._paths = (keys_path, vals_path)
        # Held open across chunked reads; close() closes them.
        self._keys = open(keys_path, "rb") if (keys_path and count) else None  # noqa: SIM115
        self._vals = open(vals_path, "rb") if (vals_path and count and self._has_values) else None  # noqa: SIM115
        self._chunk_records = max(1, chunk_bytes // (KEY_DTYPE.itemsize + value_dtype.itemsize))
        self._crc = [0, 0]
        self._pending_keys = np.empty(0, dtype=KEY_DTYPE)
        self._pending_vals: np.ndarray | None = None
        self.bytes_read = 0

    def _read_chunk(self) -> bool:
        if not self._remaining or self._keys is None:
            return False
        n = min(self._chunk_records, self._remaining)
        raw = self._keys.read(n * KEY_DTYPE.itemsize)
        if len(raw) != n * KEY_DTYPE.itemsize:
            raise DrumCorruptionError(f"{self._paths[0]}: file shorter than its record count")
        self._crc[0] = zlib.crc32(raw, self._crc[0])
        self.bytes_read += len(raw)
        self._pending_keys = np.frombuffer(raw, dtype=KEY_DTYPE)
        if self._vals is not None:
            vraw = self._vals.read(n * self.value_dtype.itemsize)
            if len(vraw) != n * self.value_dtype.itemsize:
                raise DrumCorruptionError(f"{self._paths[1]}: file shorter than its record count")
            self._crc[1] = zlib.crc32(vraw, self._crc[1])
            self.bytes_read += len(vraw)
            self._pending_vals = np.frombuffer(vraw, dtype=self.value_dtype)
        self._remaining -= n
        if not self._remaining:
            self._verify()
        return True

    def _verify(self) -> None:
        if self._crc[0] != self._expected[0]:
            raise DrumCorruptionError(f"{self._paths[0]}: CRC32 mismatch (file was altered)")
        if self._has_values and self._crc[1] != self._expected[1]:
            raise DrumCorruptionError(f"{self._paths[1]}: CRC32 mismatch (file was altered)")

    def chunks_below(
        self, upper: int | None
    ) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
        """Yield (keys, values) chunks, in order, of every remaining record with key < upper.

        Values are None when the store keeps no values.
        """
        while True:
            if not len(self._pending_keys) and not self._read_chunk():
                return
            keys, vals = self._pending_keys, self._pending_vals
            cut = len(keys) if upper is None else int(np.searchsorted(keys, np.uint64(upper)))
            if cut:
                yield keys[:cut], (vals[:cut] if vals is not None else None)
            self._pending_keys = keys[cut:]
            self._pending_vals = vals[cut:] if vals is not None else None
            if cut < len(keys):
                return

    def close(self) -> None:
        for handle in (self._keys, self._vals):
            if handle is not None:
                handle.close()


def verify_cache_file(path: Path, expected_size: int, expected_crc: int | None) -> None:
    """Check a Z file's size (and CRC if given) against the manifest."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        if expected_size == 0:
            return
        raise DrumCorruptionError(
            f"{path}: missing, the manifest expects {expected_size} bytes"
        ) from None
    if size != expected_size:
        raise DrumCorruptionError(
            f"{path}: {size} bytes on disk, the manifest expects {expected_size}"
        )
    if expected_crc is None:
        return
    crc = 0
    with open(path, "rb") as handle:
        while block := handle.read(1 << 22):
            crc = zlib.crc32(block, crc)
    if crc != expected_crc:
        raise DrumCorruptionError(f"{path}: CRC32 mismatch (file was altered)")


_PAGE_BYTES = 4096
_PAGE_KEYS = _PAGE_BYTES // KEY_DTYPE.itemsize
_NATIVE_LITTLE = sys.byteorder == "little"
#: Z keys read per step while building the index (a multiple of a page's keys).
_SCAN_KEYS = 1 << 19
#: The filter aims at this many bits per Z key (3 bits set per key: ~3% false positives)...
_FILTER_BITS_PER_KEY = 8
#: ...and is not built when the byte cap leaves fewer than this (it would pass nearly all).
_FILTER_MIN_BITS_PER_KEY = 3
#: Default cap of the filter's size: its RAM never exceeds this, whatever Z holds.
FILTER_MAX_BYTES = 1 << 20


class CacheIndex:
    """Synchronous membership test against Z for callers that cannot batch.

    A fence list holds the first key of every 4 KiB page of the keys file (1/512 of the
    keys, ~0.07 bytes of RAM per stored key); it names the one page a key can be on, which
    is read with a single ``pread`` and binary-searched. The kernel's page cache keeps hot
    pages in RAM, but outside the process: RSS does not grow with Z. (A memory-mapped Z was
    tried first and measured: with large page-cache folios a few hundred lookups mapped the
    whole file into the process's RSS.)

    In front of the ``pread`` sits a blocked Bloom filter of Z's keys: one 64-bit word per
    key, named by the key's top bits, with three bits chosen by its low bits. Most keys
    that are not in Z (every new URL) are then answered without a system call. It takes
    about a byte per key, at most ``filter_max_bytes`` (a fixed bound, 1 MiB by default);
    if that leaves under 3 bits a key, Z is too large for it to help and it is not built.
    Keys are hashes, so these bits are uniform; the filter is rebuilt from Z by each
    merge (Z is read sequentially, which also yields the fence).
    """

    def __init__(
        self, keys_path: Path, count: int, *, filter_max_bytes: int = FILTER_MAX_BYTES
    ) -> None:
        self.count = count
        self._fd: int | None = None
        self._fence: list[int] = []
        self._filter: np.ndarray | None = None
        self._filter_shift = 64
        # One reusable page buffer and its uint64 view: no allocation per lookup.
        self._page = bytearray(_PAGE_BYTES)
        self._page_list = [self._page]
        self._page_keys = memoryview(self._page).cast("Q") if _NATIVE_LITTLE else None
        if count:
            self._fd = os.open(keys_path, os.O_RDONLY)
            words_log2 = max(0, (count * _FILTER_BITS_PER_KEY - 1).bit_length() - 6)
            while words_log2 and (8 << words_log2) > filter_max_bytes:
                words_log2 -= 1
            if (64 << words_log2) >= count * _FILTER_MIN_BITS_PER_KEY:
                self._fence = self._scan(keys_path, count, words_log2)
            else:
                self._fence = self._read_fence(keys_path, count)
        #: ``contains(key)``: the membership test, a closure over the index's state so a
        #: lookup does no attribute lookups (the sync dupefilter calls it per request).
        self.contains = self._make_contains()

    @staticmethod
    def _read_fence(keys_path: Path, count: int) -> list[int]:
        fence: list[int] = []
        with open(keys_path, "rb", buffering=0) as handle:
            for page in range((count + _PAGE_KEYS - 1) // _PAGE_KEYS):
                handle.seek(page * _PAGE_BYTES)
                fence.append(int.from_bytes(handle.read(8), "little"))
        return fence

    def _scan(self, keys_path: Path, count: int, words_log2: int) -> list[int]:
        """Read Z once: collect the fence and build the filter (2**words_log2 words)."""
        shift = 64 - words_log2
        words = np.zeros(1 << words_log2, dtype=np.uint64)
        fence: list[int] = []
        one = np.uint64(1)
        six = np.uint64(63)
        with open(keys_path, "rb") as handle:
            remaining = count
            while remaining:
                n = min(_SCAN_KEYS, remaining)
                raw = handle.read(n * KEY_DTYPE.itemsize)
                if len(raw) != n * KEY_DTYPE.itemsize:
                    raise DrumCorruptionError(f"{keys_path}: file shorter than its record count")
                remaining -= n
                keys = np.frombuffer(raw, dtype=KEY_DTYPE)
                fence.extend(keys[::_PAGE_KEYS].tolist())
                bits = (
                    (one << (keys & six))
                    | (one << ((keys >> np.uint64(6)) & six))
                    | (one << ((keys >> np.uint64(12)) & six))
                )
                # Z is sorted, so the word index (top bits) is too: OR each run at once.
                slot = keys >> np.uint64(shift) if shift < 64 else np.zeros(n, dtype=np.uint64)
                starts = np.flatnonzero(np.diff(slot, prepend=~slot[:1]))
                words[slot[starts]] |= np.bitwise_or.reduceat(bits, starts)
                del raw, keys, bits, slot
        self._filter = words
        self._filter_shift = shift
        return fence

    def _make_contains(self) -> Callable[[int], bool]:
        fd = self._fd
        if fd is None:
            return _absent
        fence = self._fence
        first = fence[0]
        buffers = self._page_list
        keys = self._page_keys
        preadv = os.preadv
        bisect_left = bisect.bisect_left
        bisect_right = bisect.bisect_right
        page_bytes = _PAGE_BYTES
        if keys is None:  # pragma: no cover  (big-endian hosts)
            page_buffer = self._page

            def contains_portable(key: int) -> bool:
                if key < first:
                    return False
                page = bisect_right(fence, key) - 1
                got = preadv(fd, buffers, page * page_bytes) >> 3
                window = np.frombuffer(page_buffer, dtype=KEY_DTYPE, count=got)
                i = int(np.searchsorted(window, np.uint64(key)))
                return i < got and int(window[i]) == key

            return contains_portable

        if self._filter is None:

            def contains(key: int) -> bool:
                if key < first:
                    return False
                page = bisect_right(fence, key) - 1
                got = preadv(fd, buffers, page * page_bytes) >> 3
                i = bisect_left(keys, key, 0, got)
                return i < got and keys[i] == key

            return contains

        words = memoryview(self._filter)  # type: ignore[arg-type]  # ndarray is a buffer
        shift = self._filter_shift

        def contains_filtered(key: int) -> bool:
            bits = (1 << (key & 63)) | (1 << (key >> 6 & 63)) | (1 << (key >> 12 & 63))
            if words[key >> shift] & bits != bits or key < first:
                return False
            page = bisect_right(fence, key) - 1
            got = preadv(fd, buffers, page * page_bytes) >> 3
            i = bisect_left(keys, key, 0, got)
            return i < got and keys[i] == key

        return contains_filtered

    def __contains__(self, key: int) -> bool:
        if self._fd is None:
            return False
        return self.contains(key)

    def close(self) -> None:
        self.contains = _absent
        self._filter = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._page_keys is not None:
            self._page_keys.release()
            self._page_keys = None


def _absent(key: int) -> bool:
    return False
