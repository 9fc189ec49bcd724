"""DRUM: Disk Repository with Update Management (IRLbot thesis, chapter IV, Fig. 1).

A stream of ``<key, value, aux>`` tuples with operations ``check``, ``update`` and
``check+update`` is spread over k buckets by the key's top bits. Each bucket buffers M bytes
in RAM, then appends them to its bucket files (Q_i^H for key/op/value, Q_i^T for aux, in the
same FIFO order). When the largest bucket file reaches r bytes, or on :meth:`Drum.merge`,
all buckets are merged with the sorted disk cache Z in *one* sequential pass: each bucket
is read and sorted, Z is read in chunks of Delta bytes and compared, the updated Z is
written out, the bucket's original order is restored and each tuple's result (unique or
duplicate, stored value, aux) is handed to the owner in FIFO order.

Disk layout of a store directory (format version 1, see ``docs/drum.rst``)::

    LOCK                                   flock: one process per store
    MANIFEST                               JSON + CRC32; replaced atomically to commit
    z.<epoch>.keys.drum                    Z keys: sorted little-endian uint64
    z.<epoch>.vals.drum                    Z values in key order (absent if 0-byte values)
    bucket-<i>.<epoch>.kv.drum             Q_i^H: CRC-framed <key, op, value> records
    bucket-<i>.<epoch>.aux.drum            Q_i^T: CRC-framed aux strings
    res.<epoch>.drum                       per-tuple results owed to the consumer

Crash safety: a merge writes the next epoch's Z (and the results) to temporary files,
renames them, then commits by replacing MANIFEST; files of other epochs are garbage and
are removed on the next open. So a kill at any moment either keeps the old epoch (and the
merge reruns from the untouched bucket files) or the new one: every tuple written out to
a bucket file is merged exactly once. Results stay on disk until the consumer's callback
returns for the whole epoch (redelivered after a crash with the same epoch number, so a
consumer can drop an epoch it already applied). Tuples still in RAM buffers when the
process dies are lost; they are written out at least every ``flush_interval`` seconds
while tuples arrive (the clock is read on the append path: a caller that goes quiet calls
:meth:`Drum.write_out` on a timer, as the dupefilter and the scheduler do).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import operator
import os
import re
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

import numpy as np

from scrapy_irl.drum.bucket import MAX_FRAME_PAYLOAD, Bucket
from scrapy_irl.drum.cache import (
    CacheIndex,
    CacheReader,
    CacheWriter,
    cache_paths,
    verify_cache_file,
)
from scrapy_irl.drum.heap import release_free_heap
from scrapy_irl.drum.manifest import Manifest, read_manifest, write_manifest
from scrapy_irl.drum.merge import MergeFunction
from scrapy_irl.drum.merge_pass import merge_bucket
from scrapy_irl.drum.pending import PendingKeys
from scrapy_irl.drum.records import (
    CHECK,
    CHECK_UPDATE,
    KEY_DTYPE,
    MAGIC_RESULT,
    UPDATE,
    encode_frame,
    record_dtype,
    result_dtype,
    scan_frames,
)
from scrapy_irl.exceptions import DrumCorruptionError, DrumError
from scrapy_irl.openfiles import release, reserve

logger = logging.getLogger(__name__)

#: Most buckets a DRUM splits its keys into (bucket files are named with four digits).
MAX_BUCKETS = 4096
#: Descriptors left free beside a store's bucket files (merge reads, Z, the lock, the
#: rest of the crawl).
SPARE_FILES = 64

#: The dtype of "no value" (the thesis' "-"): zero bytes per tuple.
NO_VALUE = np.dtype([])

_OUR_FILE = re.compile(r"^(z\.\d{10}\.(keys|vals)|bucket-\d{4}\.\d{10}\.(kv|aux)|res\.\d{10})\.(drum|tmp)$")
_EPOCH = re.compile(r"\.(\d{10})\.")
_KEY_LIMIT = 1 << 64

#: Largest aux string, and largest ``buffer_bytes``. A frame's length field is 32 bits: a
#: write-out larger than ``bucket.MAX_FRAME_PAYLOAD`` (one ``submit()`` can buffer any
#: amount) is split into several frames, and one tuple, never split, must fit in one.
MAX_AUX_BYTES = 1 << 30
MAX_BUFFER_BYTES = 1 << 30
assert 4 + MAX_AUX_BYTES <= MAX_FRAME_PAYLOAD < 1 << 32


@dataclass
class DrumBatch:
    """Results of consecutive tuples of one bucket of one merge, in arrival order.

    ``(epoch, bucket, start)`` identifies a batch: after a crash, an owed epoch is
    delivered again in the same batches, so a consumer can skip those it applied.
    """

    epoch: int
    bucket: int
    start: int  # index of the first tuple of this batch within its bucket
    keys: np.ndarray  # uint64
    ops: np.ndarray  # CHECK / UPDATE / CHECK_UPDATE per tuple
    unique: np.ndarray  # bool: key absent before this tuple
    values: np.ndarray | None  # value stored before this tuple (zeros when absent)
    aux_offsets: np.ndarray | None
    aux_blob: bytes

    def __len__(self) -> int:
        return len(self.keys)

    def aux(self, i: int) -> bytes:
        if self.aux_offsets is None:
            return b""
        return self.aux_blob[self.aux_offsets[i] : self.aux_offsets[i + 1]]

    def unique_aux(self) -> Iterator[bytes]:
        """Aux of every unique tuple, in FIFO order (what URLseen sends downstream)."""
        for i in np.flatnonzero(self.unique):
            yield self.aux(int(i))


ResultsCallback = Callable[[DrumBatch], None]

#: What :meth:`Drum.update` accepts as a value: raw bytes, or a number of the value dtype.
Value = bytes | bytearray | memoryview | int | float | np.generic | None


@dataclass
class DrumStats:
    """Counters for the overhead analysis of Theorem 2 (all cumulative since open)."""

    tuples_appended: int = 0
    merges: int = 0
    merged_tuples: int = 0
    checked: int = 0
    updated: int = 0
    unique: int = 0
    duplicate: int = 0
    inserted: int = 0
    sync_lookups: int = 0
    sync_hits: int = 0
    bytes_appended: int = 0  # bucket files (Q^H + Q^T)
    merge_bytes_read: int = 0  # buckets, aux and Z read by merges/deliveries
    merge_bytes_written: int = 0  # new Z and results written by merges
    merge_seconds: float = 0.0
    torn_tuples_dropped: int = 0
    cache_keys: int = 0
    last_merge: dict[str, float] = field(default_factory=dict)


class Drum:
    """A DRUM store in one directory. Not thread-safe; one process per directory.

    Parameters map to the thesis (chapter IV, Theorem 2): ``buckets`` is k (a power of
    two), ``buffer_bytes`` is M, ``bucket_bytes`` is r, ``merge_chunk_bytes`` is Delta,
    keys are H = 8 bytes. RAM use is about ``2 * k * M`` for buffers plus, during a merge,
    one bucket (<= r + M bytes, expanded ~3x by the sort) and two Z chunks of Delta bytes,
    independent of how many keys Z holds.

    ``value_dtype`` fixes the value size (None: no values). ``merge`` combines an old and
    a new value on update (None: overwrite). ``on_results`` receives each bucket's
    :class:`DrumBatch` after a merge commits; without it results are not kept.
    ``before_ack`` is called once an epoch's results were all handed over and before the
    epoch is acknowledged (its results deleted): a consumer that buffers what it got
    writes it out there, so a kill between the two repeats the delivery instead of
    losing it.
    ``sync_index`` enables :meth:`contains` / :meth:`check_update_sync`, which need the
    keys pending in buckets in RAM (8 bytes each, bounded by k * r).
    ``delivery_slice`` (None: all at once) caps the tuples of one :class:`DrumBatch` and
    what :meth:`merge` delivers before it returns; the rest stays owed for
    :meth:`deliver` calls, which go on where the last one stopped. An owner on an event
    loop delivers a large merge over several turns instead of blocking for all of it.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        value_dtype: np.dtype | str | None = None,
        buckets: int = 16,
        buffer_bytes: int = 256 * 1024,
        bucket_bytes: int = 32 * 1024 * 1024,
        merge_chunk_bytes: int = 4 * 1024 * 1024,
        merge: MergeFunction | None = None,
        store_aux: bool = True,
        sync_index: bool = False,
        on_results: ResultsCallback | None = None,
        before_ack: Callable[[], None] | None = None,
        flush_interval: float = 1.0,
        fsync: bool = True,
        verify_on_open: bool = True,
        auto_merge: bool = True,
        delivery_slice: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if delivery_slice is not None and (
            isinstance(delivery_slice, bool) or not isinstance(delivery_slice, int)
            or delivery_slice < 1
        ):  # fmt: skip
            raise DrumError(f"delivery_slice must be None or an integer >= 1, got {delivery_slice!r}")
        try:
            buckets = operator.index(buckets)  # numpy integers too; not 2.0
        except TypeError:
            raise DrumError(f"buckets must be an integer, got {buckets!r}") from None
        if buckets < 1 or buckets & (buckets - 1) or buckets > MAX_BUCKETS:
            raise DrumError(f"buckets must be a power of two in 1..{MAX_BUCKETS}, got {buckets!r}")
        if buffer_bytes < 1 or bucket_bytes < 1 or merge_chunk_bytes < 1:
            raise DrumError("buffer_bytes, bucket_bytes and merge_chunk_bytes must be positive")
        if buffer_bytes > MAX_BUFFER_BYTES:
            raise DrumError(f"buffer_bytes must be at most {MAX_BUFFER_BYTES} (1 GiB), got {buffer_bytes}")
        try:
            self.value_dtype = np.dtype(value_dtype) if value_dtype is not None else NO_VALUE
        except (TypeError, ValueError) as exc:
            raise DrumError(f"value_dtype must be a numpy dtype: {exc}") from None
        if self.value_dtype.hasobject:
            # Its bytes are pointers: stored, they are addresses, and every merge after
            # failed on them, for good (a probe, 2026-11-28).
            raise DrumError(f"value_dtype must be fixed-size, without Python objects: {self.value_dtype}")
        # Two files a bucket (one without aux) stay open for an epoch: 8 192 at 4 096
        # buckets, past the usual soft limit of 1 024. Found out at the first write-out,
        # it was a raw OSError there and at every one after, close() included (the
        # store's lock was never released: a probe, 2026-11-29).
        self.path = Path(path)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a file in the way, no permission
            raise DrumError(f"cannot make the DRUM directory {self.path}: {exc}") from exc
        self.has_values = self.value_dtype.itemsize > 0
        self.k = buckets
        self.buffer_bytes = buffer_bytes
        self.bucket_bytes = bucket_bytes
        self.merge_chunk_bytes = merge_chunk_bytes
        self.merge_function = merge
        self.store_aux = store_aux
        self.sync_index = sync_index
        self.on_results = on_results
        self.before_ack = before_ack
        self.flush_interval = flush_interval
        self.fsync = fsync
        self.auto_merge = auto_merge
        self.delivery_slice = delivery_slice
        self._clock = clock
        self._shift = 64 - (buckets.bit_length() - 1)
        self._record_dtype = record_dtype(self.value_dtype)
        self._result_dtype = result_dtype(self.value_dtype)
        self._zero_value = bytes(self.value_dtype.itemsize)
        self.stats = DrumStats()
        self._closed = False
        self._merging = False
        self._delivering = False
        # the epoch being delivered in slices, and the rest of its batches
        self._cursor: tuple[int, Generator[DrumBatch, None, None]] | None = None
        self._appends_since_clock = 0
        self._last_write_out = clock()
        self._pending = PendingKeys(buckets)
        # The sync hot path uses these bound once (the objects live as long as the store).
        self._pending_recent = self._pending.recent
        self._pending_older = self._pending.older_contains if sync_index else _no_sync_index
        self._check_update_suffix = _OP_BYTES[CHECK_UPDATE] + self._zero_value
        self._cache_index: CacheIndex | None = None
        self._lock_fd = self._acquire_lock()
        try:
            self._manifest = self._open_manifest(verify_on_open)
            self._buckets = self._make_buckets(self._manifest.epoch)
            self._recover()
            self._reserve_bucket_files()
        except BaseException:
            os.close(self._lock_fd)
            raise

    def _reserve_bucket_files(self) -> None:
        """Make room for the bucket files, kept open for an epoch (two a bucket with aux,
        8 192 at 4 096 buckets, past the usual soft limit of 1 024), and reserve it until
        close: they are opened at the first write-out, so the next store's room must
        count them. Found out there, the limit was a raw OSError at every write-out,
        close() included (the store's lock never released: a probe, 2026-11-29)."""
        files = self.k * (2 if self.store_aux else 1)
        why_not = reserve(files, SPARE_FILES, "DRUM")
        if why_not is not None:
            raise DrumError(
                f"a DRUM store of {self.k} buckets keeps {files} files open, but {why_not}: "
                "use fewer buckets or raise the limit (ulimit -n)"
            )
        self._reserved_files = files

    # -- opening and recovery --------------------------------------------------------------

    def _acquire_lock(self) -> int:
        fd = os.open(self.path / "LOCK", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            # flock is per open file: a second store on the directory in this process
            # (two crawls of a CrawlerProcess) is refused too, and "another process"
            # sent its user looking for one that did not exist (a probe, 2026-11-29).
            raise DrumError(
                f"{self.path}: DRUM store is in use (its LOCK is held by another process, or "
                "by another open store in this one, e.g. a second crawl of the same "
                "CrawlerProcess); two users cannot share a store: give each its own directory"
            ) from None
        return fd

    def _open_manifest(self, verify: bool) -> Manifest:
        manifest = read_manifest(self.path)
        descr = np.lib.format.dtype_to_descr(self.value_dtype)
        if manifest is None:
            leftovers = [p.name for p in self.path.iterdir() if _OUR_FILE.match(p.name)]
            if any(name.endswith(".drum") for name in leftovers):
                raise DrumCorruptionError(
                    f"{self.path}: DRUM data files present but MANIFEST is missing; "
                    "refusing to guess which epoch is valid"
                )
            manifest = Manifest(epoch=0, buckets=self.k, value_descr=descr, store_aux=self.store_aux)
            write_manifest(self.path, manifest, fsync=self.fsync)
            return manifest
        stored = np.lib.format.descr_to_dtype(_tuplify(manifest.value_descr))  # type: ignore[arg-type]
        if stored != self.value_dtype:
            raise DrumError(
                f"{self.path}: store holds {_values_name(stored)}, opened with "
                f"{_values_name(self.value_dtype)}; reopen with the original value_dtype"
            )
        if manifest.buckets != self.k:
            raise DrumError(
                f"{self.path}: store was created with {manifest.buckets} buckets, opened "
                f"with {self.k}; reopen with the original bucket count"
            )
        if manifest.store_aux != self.store_aux:
            raise DrumError(
                f"{self.path}: store was created with store_aux={manifest.store_aux}, "
                f"opened with store_aux={self.store_aux}"
            )
        keys_path, vals_path = cache_paths(self.path, manifest.epoch)
        count = manifest.cache_count
        verify_cache_file(keys_path, count * 8, manifest.cache_keys_crc if verify else None)
        if self.has_values:
            verify_cache_file(
                vals_path,
                count * self.value_dtype.itemsize,
                manifest.cache_vals_crc if verify else None,
            )
        self._remove_stale_files(manifest)
        return manifest

    def _manifest_on_disk(self) -> Manifest | None:
        """MANIFEST as it is on disk now, after a failed write (None if unreadable)."""
        try:
            return read_manifest(self.path)
        except (OSError, DrumError):
            return None

    def _remove_stale_files(self, manifest: Manifest) -> None:
        """Delete files of epochs the manifest does not reference (interrupted merges)."""
        live_buckets = {manifest.epoch, *manifest.pending_delivery}
        for entry in self.path.iterdir():
            name = entry.name
            if not _OUR_FILE.match(name):
                continue
            match = _EPOCH.search(name)
            epoch = int(match.group(1)) if match else -1
            keep = name.endswith(".drum") and (
                (name.startswith("z.") and epoch == manifest.epoch)
                or (name.startswith("bucket-") and epoch in live_buckets)
                or (name.startswith("res.") and epoch in manifest.pending_delivery)
            )
            if not keep:
                logger.debug("DRUM %s: removing stale file %s", self.path, name)
                entry.unlink()

    def _make_buckets(self, epoch: int) -> list[Bucket]:
        return [
            Bucket(self.path, i, epoch, record_dtype=self._record_dtype, store_aux=self.store_aux)
            for i in range(self.k)
        ]

    def _recover(self) -> None:
        dropped = sum(bucket.recover() for bucket in self._buckets)
        #: Tuples of ``update`` alone among those found pending at open (a consumer that
        #: counts its seen-marks apart from its checks: the IRL scheduler's ``len``).
        self.recovered_updates = sum(bucket.recovered_updates for bucket in self._buckets)
        #: The epoch current at open: results of earlier (owed) epochs come from tuples an
        #: earlier run submitted.
        self.recovered_epoch = self._manifest.epoch
        if dropped:
            logger.warning(
                "DRUM %s: dropped %d tuples of a batch torn by a crash", self.path, dropped
            )
        self.stats.torn_tuples_dropped += dropped
        self.stats.cache_keys = self._manifest.cache_count
        for epoch in self._manifest.pending_delivery:
            buckets = self._make_buckets(epoch)
            for bucket in buckets:
                bucket.recover(repair=False)  # merged whole: nothing a kill could tear
            self._check_results(epoch, [bucket.file_records for bucket in buckets])
        if self.sync_index:
            for bucket in self._buckets:
                self._pending.add_many(self._updating_keys(bucket.read_records()))
            self._open_cache_index()

    def _check_results(self, epoch: int, records: list[int]) -> None:
        """An owed epoch's results file holds one whole frame per bucket, each as long as
        its bucket. It is written whole before MANIFEST owes it, so anything else is
        damage: refused at open. Found only at the first delivery, it closed every run
        after its first requests, each adding to the batch the next run owed (a probe,
        2026-11-28)."""
        path = self.path / f"res.{epoch:010d}.drum"
        if not path.exists():
            raise DrumCorruptionError(
                f"{path}: missing, but MANIFEST owes the results of epoch {epoch} (a kill "
                "cannot delete it)"
            )
        scan = scan_frames(path.read_bytes(), MAGIC_RESULT, str(path),
                           record_size=self._result_dtype.itemsize)  # fmt: skip
        counts = [frame.count for frame in scan.frames]
        if scan.torn_bytes or counts != records:
            raise DrumCorruptionError(
                f"{path}: results for {counts} tuples per bucket with {scan.torn_bytes} "
                f"bytes after the last whole frame, but the buckets of epoch {epoch} hold "
                f"{records} (it was written whole before the merge was committed: "
                "truncated or damaged since)"
            )

    def _open_cache_index(self) -> None:
        if self._cache_index is not None:
            self._cache_index.close()
        keys_path, _ = cache_paths(self.path, self._manifest.epoch)
        self._cache_index = CacheIndex(keys_path, self._manifest.cache_count)

    @staticmethod
    def _updating_keys(records: np.ndarray) -> np.ndarray:
        return records["key"][(records["op"] & UPDATE).astype(bool)]

    # -- appending tuples ------------------------------------------------------------------

    def check(self, key: int, aux: bytes = b"") -> None:
        """Queue a ``check`` of ``key``; its result arrives with the next merge.

        ``key`` is an int (or numpy integer) in ``0 .. 2**64-1``; ``aux`` a bytes string of
        at most :data:`MAX_AUX_BYTES`, handed back with the result. Anything else raises
        :class:`DrumError` and queues nothing.
        """
        self._append(key, CHECK, self._zero_value, aux)

    def update(self, key: int, value: Value = None, aux: bytes = b"") -> None:
        """Queue an ``update`` (insert, or combine with the stored value) of ``key``.

        ``value``: exactly ``value_dtype.itemsize`` bytes, or a number / numpy scalar of
        the value dtype (``5``, ``np.uint32(5)``); None stores zeros.
        """
        self._append(key, UPDATE, self._value_bytes(value), aux)

    def check_update(self, key: int, value: Value = None, aux: bytes = b"") -> None:
        """Queue a ``check+update``: the result tells whether the key existed before."""
        self._append(key, CHECK_UPDATE, self._value_bytes(value), aux)

    def _value_bytes(self, value: object) -> bytes:
        if value is None:
            return self._zero_value
        if isinstance(value, (bytes, bytearray, memoryview)):
            raw = bytes(value)
            if len(raw) != len(self._zero_value):
                raise DrumError(f"value must be {len(self._zero_value)} bytes, got {len(raw)}")
            return raw
        if not self.has_values:
            raise DrumError("this store keeps no values (value_dtype=None); pass no value")
        array = self._as_values(value)
        if array.ndim:
            raise DrumError(f"value must be one {self.value_dtype} value, got shape {array.shape}")
        return array.tobytes()

    def _as_values(self, values: object) -> np.ndarray:
        """``values`` as an array of the value dtype; a cast that would change a value
        (float to integer, a negative or too large integer) is refused, not wrapped."""
        try:
            array = np.asarray(values)
        except (TypeError, ValueError, OverflowError) as exc:
            raise DrumError(f"values must be {self.value_dtype} values: {exc}") from None
        target = self.value_dtype
        if array.dtype == target:
            return array
        if array.size == 0:
            return array.astype(target)
        if target.kind in "iu" and array.dtype.kind in "iu":
            info = np.iinfo(target)
            low, high = int(array.min()), int(array.max())
            if low < info.min or high > info.max:
                raise DrumError(f"values out of range for {target}: {low}..{high}")
            return array.astype(target)
        if not np.can_cast(array.dtype, target, "same_kind"):
            raise DrumError(f"values of dtype {array.dtype} cannot be stored as {target} values")
        if target.names is not None or array.dtype.names is not None:
            return array.astype(target)  # structured: numpy converts field by field
        if target.kind in "SVU" or array.dtype.kind in "SVU":
            if array.dtype.kind not in "SVU":
                # numpy writes a number into an S store as its decimal text, cut to size
                raise DrumError(f"values of dtype {array.dtype} cannot be stored as {target} values")
            if array.dtype.itemsize != target.itemsize:
                # numpy pads b"ab" to b"ab\x00" for V3: update() refused what submit() padded
                raise DrumError(f"values must be {target.itemsize} bytes each, got {array.dtype}")
            return array.astype(target)  # the same bytes
        with np.errstate(all="ignore"):
            converted = array.astype(target)
            unchanged = np.array_equal(converted.astype(array.dtype), array,
                                       equal_nan=array.dtype.kind in "fc")  # fmt: skip
        if not unchanged:  # 2**53 + 1 as <f8, 1e300 as <f4 (inf): rounded without a word
            raise DrumError(f"values of dtype {array.dtype} would change as {target} values")
        return converted

    def _append(self, key: int, op: int, value: bytes, aux: bytes) -> None:
        if self._closed:
            raise DrumError("DRUM store is closed")
        if key.__class__ is not int or not 0 <= key < _KEY_LIMIT:
            key = _as_key(key)
        if aux.__class__ is not bytes or len(aux) > MAX_AUX_BYTES:
            aux = _as_aux(aux)  # a str in the buffer would fail every later write-out
        bucket = self._buckets[key >> self._shift]
        bucket.append(key.to_bytes(8, "little") + _OP_BYTES[op] + value, aux)
        self.stats.tuples_appended += 1
        if self.sync_index and op & UPDATE:
            self._pending.add(key)
        self._after_append(bucket)

    def submit(
        self,
        keys: np.ndarray | Sequence[int],
        op: int | np.ndarray = CHECK_UPDATE,
        values: np.ndarray | Sequence[int] | None = None,
        aux: Sequence[bytes] | None = None,
    ) -> None:
        """Queue many tuples at array speed (the batch path).

        ``keys``: unsigned 64-bit integers (a uint64 array, or any integer array or
        sequence without negative keys); ``op`` one operation for all tuples or an array
        of one per tuple (a mixed batch); ``values`` an array of the value dtype (or one
        numpy can cast to it without changing a value), only for a store with values;
        ``aux`` one bytes string per tuple. Invalid input raises :class:`DrumError` and
        queues nothing. Results arrive, per bucket in submission order, with a merge.
        """
        if self._closed:
            raise DrumError("DRUM store is closed")
        keys = _as_keys(keys)
        n = len(keys)
        ops = np.asarray(op)
        if ops.ndim > 1 or ops.dtype.kind not in "iu" or not np.isin(ops, _VALID_OPS).all():
            raise DrumError(f"unknown DRUM operation in {op!r} (use CHECK, UPDATE or CHECK_UPDATE)")
        ops = ops.astype(np.uint8)
        if ops.ndim and len(ops) != n:
            raise DrumError(f"{n} keys but {len(ops)} operations")
        if aux is not None:
            if len(aux) != n:
                raise DrumError(f"{n} keys but {len(aux)} aux strings")
            if n and (set(map(type, aux)) != {bytes} or max(map(len, aux)) > MAX_AUX_BYTES):
                aux = [_as_aux(a) for a in aux]
        records = np.zeros(n, dtype=self._record_dtype)
        records["key"] = keys
        records["op"] = ops
        if values is not None:
            if not self.has_values:
                raise DrumError("this store keeps no values (value_dtype=None); pass values=None")
            values = self._as_values(values)
            if values.ndim != 1 or len(values) != n:
                raise DrumError(f"{n} keys but values of shape {values.shape}")
            records["value"] = values
        bucket_ids = (keys >> np.uint64(self._shift)).astype(np.int64) if self.k > 1 else np.zeros(n, dtype=np.int64)
        order = np.argsort(bucket_ids, kind="stable")
        bounds = np.searchsorted(bucket_ids[order], np.arange(self.k + 1))
        sorted_records = records[order]
        for i in range(self.k):
            lo, hi = bounds[i], bounds[i + 1]
            if lo == hi:
                continue
            part_aux = [aux[j] for j in order[lo:hi]] if (aux is not None and self.store_aux) else None
            self._buckets[i].append_many(sorted_records[lo:hi].tobytes(), int(hi - lo), part_aux)
        self.stats.tuples_appended += n
        if self.sync_index and n:
            inserting = keys[(ops & UPDATE).astype(bool)] if ops.ndim else (keys if ops & UPDATE else keys[:0])
            self._pending.add_many(inserting)
        for i in range(self.k):  # by index: a merge replaces self._buckets
            self._after_append(self._buckets[i], timed=False)
        self._maybe_timed_write_out()

    def _after_append(self, bucket: Bucket, *, timed: bool = True) -> None:
        if bucket.buffered_bytes >= self.buffer_bytes:
            self.stats.bytes_appended += bucket.write_out()
            if self.auto_merge and bucket.file_bytes >= self.bucket_bytes:
                self.merge()
                return
        if timed:
            self._appends_since_clock += 1
            if self._appends_since_clock >= 64:
                self._maybe_timed_write_out()

    def _maybe_timed_write_out(self) -> None:
        self._appends_since_clock = 0
        if self._clock() - self._last_write_out >= self.flush_interval:
            self.write_out()

    def write_out(self) -> int:
        """Write every RAM buffer to its bucket file (bounds what a kill can lose).

        Timed write-outs grow bucket files too (buffers may never fill up when tuples
        trickle in), so a bucket that reaches r here triggers the merge as well.
        """
        if self._closed:
            raise DrumError("DRUM store is closed")
        written = 0
        for bucket in self._buckets:
            written += bucket.write_out()
        self.stats.bytes_appended += written
        self._last_write_out = self._clock()
        if self.auto_merge and not self._merging and self.largest_bucket_bytes >= self.bucket_bytes:
            self.merge()
        return written

    @property
    def pending_tuples(self) -> int:
        """Tuples accepted but not merged yet (in RAM buffers or bucket files)."""
        return sum(b.buffered_records + b.file_records for b in self._buckets)

    def aux_on_disk(self) -> Iterator[bytes]:
        """Aux strings of every tuple in a bucket file: not merged yet, or merged in an
        epoch whose results are still owed (RAM buffers not included). For a consumer
        that must find what it submitted before a kill; reads every bucket file."""
        if self._closed:
            raise DrumError("DRUM store is closed")
        if not self.store_aux:
            raise DrumError("aux_on_disk() needs a store created with store_aux=True")
        for epoch in [*self._manifest.pending_delivery, self._manifest.epoch]:
            for bucket in self._make_buckets(epoch):
                for count, offsets, blob in bucket.iter_aux(self.merge_chunk_bytes):
                    for i in range(count):
                        yield blob[offsets[i] : offsets[i + 1]]

    @property
    def pending_deliveries(self) -> int:
        return len(self._manifest.pending_delivery)

    @property
    def largest_bucket_bytes(self) -> int:
        return max(b.file_bytes + b.buffered_bytes for b in self._buckets)

    # -- the synchronous path --------------------------------------------------------------

    def contains(self, key: int) -> bool:
        """True if ``key`` is in Z or inserted by a tuple not merged yet.

        Keys only *checked* (not updated) are not counted. Needs ``sync_index=True``.
        """
        if not self.sync_index:
            raise DrumError("contains() needs a store opened with sync_index=True")
        if self._closed:
            raise DrumError("DRUM store is closed")
        stats = self.stats
        stats.sync_lookups += 1
        if key.__class__ is not int:
            key = _as_key(key)
        if not 0 <= key < _KEY_LIMIT:
            return False  # a membership test: no such key can be in the store
        if key in self._pending or self._cache_index.contains(key):  # type: ignore[union-attr]
            stats.sync_hits += 1
            return True
        return False

    def check_update_sync(self, key: int) -> bool:
        """``check+update`` answered at once: True if ``key`` was seen before.

        A new key is queued for the next merge like any other tuple. This is the path of
        Scrapy's synchronous ``request_seen``; batch callers should use :meth:`submit`.
        It is the hot path of a crawl, hence written out flat.
        """
        if self._closed:  # before the RAM sets, which still answer after close
            raise DrumError("DRUM store is closed")
        stats = self.stats
        stats.sync_lookups += 1
        if key.__class__ is not int:  # numpy integers (to_bytes below needs an int)
            key = _as_key(key)
        recent = self._pending_recent
        if key in recent:  # the newest keys: most repeats end here
            stats.sync_hits += 1
            return True
        try:
            if self._pending_older(key) or self._cache_index.contains(key):  # type: ignore[union-attr]
                stats.sync_hits += 1
                return True
        except (IndexError, TypeError, AttributeError):  # e.g. a key >= 2**64: past the buckets
            if not self.sync_index:
                raise DrumError("check_update_sync() needs a store opened with sync_index=True") from None
            raise DrumError(f"key must be an unsigned 64-bit integer, got {key!r}") from None
        if key < 0:
            raise DrumError(f"key must be an unsigned 64-bit integer, got {key!r}")
        bucket = self._buckets[key >> self._shift]
        bucket.append(key.to_bytes(8, "little") + self._check_update_suffix, b"")
        stats.tuples_appended += 1
        recent.add(key)
        if len(recent) >= self._pending.fold_at:
            self._pending.fold()
        if bucket.buffered_bytes >= self.buffer_bytes or self._appends_since_clock >= 63:
            self._after_append(bucket)
        else:
            self._appends_since_clock += 1
        return False

    # -- merging ---------------------------------------------------------------------------

    def merge(self) -> int:
        """Merge every bucket with Z in one pass, commit, then deliver results.

        Returns the number of tuples merged. Safe to call at any time (a no-op when
        nothing is pending, apart from delivering results a crash left owed).
        """
        if self._closed:
            raise DrumError("DRUM store is closed")
        if self._merging:
            return 0
        self._merging = True
        try:
            self.write_out()
            merged = 0
            if any(b.file_records for b in self._buckets):
                merged = self._merge_epoch()
        finally:
            self._merging = False
        self.deliver(self.delivery_slice)
        return merged

    def flush(self) -> int:
        """Write out every buffer and merge now: the thesis' explicit flush (same as merge)."""
        return self.merge()

    def _merge_epoch(self) -> int:
        started = time.perf_counter()
        old = self._manifest
        new_epoch = old.epoch + 1
        keys_path, vals_path = cache_paths(self.path, old.epoch)
        reader = CacheReader(
            keys_path,
            vals_path,
            count=old.cache_count,
            keys_crc=old.cache_keys_crc,
            vals_crc=old.cache_vals_crc,
            value_dtype=self.value_dtype,
            chunk_bytes=self.merge_chunk_bytes,
        )
        writer = CacheWriter(self.path, new_epoch, self.value_dtype)
        results_path = self.path / f"res.{old.epoch:010d}.drum"
        results_tmp = results_path.with_suffix(".tmp")
        results_file = open(results_tmp, "wb") if self.on_results is not None else None  # noqa: SIM115 (closed after the merge)
        counters = {"tuples": 0, "checked": 0, "updated": 0, "unique": 0, "inserted": 0}
        bucket_bytes_read = 0
        results_written = 0
        try:
            for i, bucket in enumerate(self._buckets):
                upper = None if i == self.k - 1 else (i + 1) << self._shift
                records = bucket.read_records()
                bucket_bytes_read += bucket.file_bytes
                unique, before, inserted = merge_bucket(
                    records, reader, writer, upper, self.value_dtype, self.merge_function
                )
                counters["tuples"] += len(records)
                ops = records["op"]
                counters["checked"] += int(np.count_nonzero(ops & CHECK))
                counters["updated"] += int(np.count_nonzero(ops & UPDATE))
                counters["unique"] += int(np.count_nonzero(unique))
                counters["inserted"] += inserted
                if results_file is not None:
                    out = np.zeros(len(records), dtype=self._result_dtype)
                    out["unique"] = unique
                    if before is not None:
                        out["value"] = before
                    frame = encode_frame(MAGIC_RESULT, len(out), out.tobytes())
                    results_file.write(frame)
                    results_written += len(frame)
            for chunk_keys, chunk_values in reader.chunks_below(None):  # nothing should be left
                writer.write(chunk_keys, chunk_values)
            writer.commit(fsync=self.fsync)
            if results_file is not None:
                results_file.flush()
                if self.fsync:
                    os.fsync(results_file.fileno())
                results_file.close()
                os.replace(results_tmp, results_path)
        except BaseException:
            writer.abort()
            if results_file is not None:
                results_file.close()
                results_tmp.unlink(missing_ok=True)
            raise
        finally:
            reader.close()

        pending = list(old.pending_delivery)
        if self.on_results is not None:
            pending.append(old.epoch)
        manifest = Manifest(
            epoch=new_epoch,
            buckets=self.k,
            value_descr=old.value_descr,
            store_aux=self.store_aux,
            cache_count=writer.count,
            cache_keys_crc=writer.keys_crc,
            cache_vals_crc=writer.vals_crc,
            pending_delivery=pending,
        )
        try:
            write_manifest(self.path, manifest, fsync=self.fsync)  # the commit point
        except BaseException as exc:
            # A full disk (or any error) before the rename: the merge did not happen.
            # Keep the old epoch in RAM as on disk, and take the new epoch's files away,
            # so the next merge() redoes this one from the untouched bucket files.
            # (Until 2026-11-25 the new manifest was kept in RAM: the next merge merged
            # the same bucket files a second time and the store was left corrupt.)
            on_disk = self._manifest_on_disk()
            committed = None if on_disk is None else on_disk.epoch
            if committed != new_epoch:
                if committed == old.epoch:  # (unknown: leave the files to the next open)
                    for path in (*cache_paths(self.path, new_epoch), results_path):
                        with contextlib.suppress(OSError):
                            path.unlink(missing_ok=True)
                raise
            if not isinstance(exc, Exception):
                raise
            # The rename happened and only the directory fsync failed: committed.
            logger.warning("DRUM %s: merge committed, but syncing the directory failed",
                           self.path, exc_info=True)  # fmt: skip
        self._manifest = manifest

        # Everything below is cleanup that the next open would also do.
        for path in cache_paths(self.path, old.epoch):
            path.unlink(missing_ok=True)
        for bucket in self._buckets:
            if self.on_results is None:
                bucket.delete()
            else:
                bucket.close()
        self._buckets = self._make_buckets(new_epoch)
        if self.sync_index:
            self._pending.clear()
            self._open_cache_index()
        release_free_heap()

        seconds = time.perf_counter() - started
        bytes_read = reader.bytes_read + bucket_bytes_read
        bytes_written = writer.bytes_written + results_written
        stats = self.stats
        stats.merges += 1
        stats.merged_tuples += counters["tuples"]
        stats.checked += counters["checked"]
        stats.updated += counters["updated"]
        stats.unique += counters["unique"]
        stats.duplicate += counters["tuples"] - counters["unique"]
        stats.inserted += counters["inserted"]
        stats.merge_bytes_read += bytes_read
        stats.merge_bytes_written += bytes_written
        stats.merge_seconds += seconds
        stats.cache_keys = writer.count
        stats.last_merge = {
            "tuples": counters["tuples"],
            "unique": counters["unique"],
            "bytes_read": bytes_read,
            "bytes_written": bytes_written,
            "seconds": seconds,
            "cache_keys": writer.count,
        }
        logger.debug(
            "DRUM %s: merged %d tuples (%d unique) into %d keys in %.3fs",
            self.path, counters["tuples"], counters["unique"], writer.count, seconds,
        )
        return counters["tuples"]

    # -- delivering results ----------------------------------------------------------------

    def deliver(self, max_tuples: int | None = None, *, epochs: int | None = None) -> int:
        """Hand owed results to ``on_results``, oldest epoch first; returns batches delivered.

        With ``max_tuples``, stops between batches once that many tuples were delivered:
        the rest stays owed, and the next call goes on with the next batch. With
        ``epochs``, stops once that many epochs were acknowledged. An epoch is
        acknowledged (its files deleted) only after the callback returned for all its
        buckets; if the callback raises, the epoch stays owed and is delivered again from
        its first batch next time, with the same epoch number and batches.
        """
        if self._closed:
            raise DrumError("DRUM store is closed")
        if self.on_results is None or self._delivering or not self._manifest.pending_delivery:
            return 0
        self._delivering = True  # a callback that submits and merges must not re-enter
        delivered = tuples = acknowledged = 0
        try:
            while self._manifest.pending_delivery and (epochs is None or acknowledged < epochs):
                epoch = self._manifest.pending_delivery[0]
                if self._cursor is None or self._cursor[0] != epoch:
                    self._drop_cursor()
                    self._cursor = (epoch, self._epoch_batches(epoch))
                batches = self._cursor[1]
                finished = False
                try:
                    while max_tuples is None or tuples < max_tuples:
                        batch = next(batches, None)
                        if batch is None:
                            finished = True
                            break
                        self.on_results(batch)
                        delivered += 1
                        tuples += len(batch)
                        if self._cursor is None or self._cursor[1] is not batches:
                            break  # the callback closed the store: this epoch stays owed
                except BaseException:
                    self._drop_cursor()  # owed again from the epoch's first batch
                    raise
                if not finished:
                    break
                self._drop_cursor()
                if self.before_ack is not None:
                    self.before_ack()  # the consumer makes what it got durable first
                self._manifest.pending_delivery.remove(epoch)
                try:
                    write_manifest(self.path, self._manifest, fsync=self.fsync)
                except BaseException:
                    # Not acknowledged on disk (a full disk): still owed in RAM too, so
                    # the files stay and the epoch is delivered again, as after a crash.
                    on_disk = self._manifest_on_disk()
                    if on_disk is not None and epoch in on_disk.pending_delivery:
                        self._manifest.pending_delivery.insert(0, epoch)
                    raise
                for bucket in self._make_buckets(epoch):
                    bucket.delete()
                (self.path / f"res.{epoch:010d}.drum").unlink(missing_ok=True)
                acknowledged += 1
        finally:
            self._delivering = False
        return delivered

    def finish_epoch(self) -> int:
        """Deliver the rest of the epoch a sliced delivery is part-way through, if any;
        returns batches delivered.

        For a graceful stop: left owed, the epoch is delivered again from its first batch
        at the next open, and a consumer counting what it gets counts those batches twice.
        """
        if self._closed:
            raise DrumError("DRUM store is closed")
        if self._cursor is None:
            return 0
        return self.deliver(epochs=1)

    def _drop_cursor(self) -> None:
        """Forget the epoch delivered in slices (closing its open aux file)."""
        if self._cursor is not None:
            cursor, self._cursor = self._cursor[1], None
            cursor.close()

    def _epoch_batches(self, epoch: int) -> Generator[DrumBatch, None, None]:
        """The batches of ``epoch``'s results, bucket by bucket, in arrival order: one per
        aux slice of Delta bytes, each cut to at most ``delivery_slice`` tuples."""
        path = self.path / f"res.{epoch:010d}.drum"
        data = path.read_bytes() if path.exists() else b""
        scan = scan_frames(data, MAGIC_RESULT, str(path),
                           record_size=self._result_dtype.itemsize)  # fmt: skip
        if scan.torn_bytes or len(scan.frames) != self.k:
            raise DrumCorruptionError(
                f"{path}: expected {self.k} complete result frames, found {len(scan.frames)}"
            )
        self.stats.merge_bytes_read += len(data)
        for i, (bucket, frame) in enumerate(zip(self._make_buckets(epoch), scan.frames)):
            if not frame.count:
                continue
            records = bucket.read_records()
            results = np.frombuffer(frame.payload, dtype=self._result_dtype)
            if len(records) != len(results):
                raise DrumCorruptionError(
                    f"{bucket.kv_path}: {len(records)} tuples but {len(results)} results"
                )
            slices: Iterator[tuple[int, np.ndarray | None, bytes]]
            if self.store_aux:
                slices = bucket.iter_aux(self.merge_chunk_bytes)
            else:
                slices = iter([(len(records), None, b"")])
            start = 0
            for count, offsets, blob in slices:
                end = start + count
                if end > len(records):
                    raise DrumCorruptionError(f"{bucket.aux_path}: more aux strings than tuples")
                step = self.delivery_slice or count
                for a in range(0, count, step):
                    b = min(count, a + step)
                    yield DrumBatch(
                        epoch=epoch,
                        bucket=i,
                        start=start + a,
                        keys=records["key"][start + a : start + b],
                        ops=records["op"][start + a : start + b],
                        unique=results["unique"][start + a : start + b].astype(bool),
                        values=results["value"][start + a : start + b] if self.has_values else None,
                        aux_offsets=None if offsets is None else offsets[a : b + 1],
                        aux_blob=blob,
                    )
                start = end
            if start != len(records):
                raise DrumCorruptionError(
                    f"{bucket.aux_path}: {start} aux strings for {len(records)} tuples"
                )
            self.stats.merge_bytes_read += bucket.bytes_read

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Write out buffers and release the store (pending tuples stay for the next open)."""
        if self._closed:
            return
        self.write_out()  # (may merge, and deliver a slice)
        # What a consumer submitted from that delivery (a callback may feed its own
        # store) is still in RAM: written out too, unmerged (lost until 2026-11-29)
        self.stats.bytes_appended += sum(bucket.write_out() for bucket in self._buckets)
        self._drop_cursor()  # the epoch stays owed: delivered again from its start
        for bucket in self._buckets:
            if self.fsync:
                bucket.fsync()
            bucket.close()
        if self._cache_index is not None:
            self._cache_index.close()
            self._cache_index = None
        self._closed = True
        release(self._reserved_files)
        os.close(self._lock_fd)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        """Keys in Z (merged); pending tuples are not counted."""
        return self._manifest.cache_count


_OP_BYTES = {op: bytes([op]) for op in (CHECK, UPDATE, CHECK_UPDATE)}


def _no_sync_index(key: int) -> bool:
    raise TypeError("no sync index")
_VALID_OPS = np.array([CHECK, UPDATE, CHECK_UPDATE], dtype=np.uint8)


def _values_name(dtype: np.dtype) -> str:
    return f"values of dtype {dtype}" if dtype.itemsize else "no values (value_dtype=None)"


def _as_key(key: object) -> int:
    """``key`` as an int in 0..2**64-1 (numpy integers accepted), else DrumError."""
    try:
        value = operator.index(key)  # type: ignore[arg-type]
    except TypeError:
        value = -1
    if not 0 <= value < _KEY_LIMIT:
        raise DrumError(f"key must be an unsigned 64-bit integer, got {key!r}")
    return value


def _as_keys(keys: object) -> np.ndarray:
    """A 1-d uint64 array of ``keys``; negative, too large or non-integer keys are
    refused (numpy would wrap -1 to 2**64-1 and cut 1.5 to 1 without a word)."""
    try:
        array = np.asarray(keys)
        # Python ints on both sides of 2**63 make float64 (or object) arrays: convert
        # them exactly (out of range raises), but never cut a float to an int.
        if (array.ndim == 1 and array.dtype.kind in "fO" and not isinstance(keys, np.ndarray)
                and all(isinstance(k, (int, np.integer)) for k in keys)):  # type: ignore[union-attr]
            array = np.array(keys, dtype=KEY_DTYPE)
    except (TypeError, ValueError, OverflowError):
        raise DrumError("keys must be unsigned 64-bit integers (0 <= key < 2**64)") from None
    if array.ndim != 1:
        raise DrumError(f"keys must be a sequence or 1-d array, got shape {array.shape}")
    if array.dtype == KEY_DTYPE or array.size == 0:
        return array.astype(KEY_DTYPE, copy=False)
    if array.dtype.kind == "i" and array.min() >= 0 or array.dtype.kind == "u":
        return array.astype(KEY_DTYPE)
    raise DrumError(f"keys must be unsigned 64-bit integers, got dtype {array.dtype}"
                    + (f" with negative keys (min {array.min()})" if array.dtype.kind == "i" else ""))  # fmt: skip


def _as_aux(aux: object) -> bytes:
    try:
        view = memoryview(aux)  # type: ignore[arg-type]
    except TypeError:
        raise DrumError(f"aux must be bytes, got {type(aux).__name__}") from None
    if view.nbytes > MAX_AUX_BYTES:
        raise DrumError(f"aux of {view.nbytes} bytes is over the {MAX_AUX_BYTES}-byte limit")
    return view.tobytes()


def _tuplify(descr: object) -> object:
    """JSON turns the tuples of a numpy dtype description into lists; undo that."""
    if isinstance(descr, list):
        return [tuple(_tuplify(x) for x in item) if isinstance(item, list) else item for item in descr]
    return descr
