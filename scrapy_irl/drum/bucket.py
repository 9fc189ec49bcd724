"""One DRUM disk bucket: the pair of files Q_i^H (key/op/value records) and Q_i^T (aux).

Tuples are collected in a RAM buffer of M bytes and appended to the bucket files as
checksummed frames, one pair per write-out (several when it is larger than
:data:`MAX_FRAME_PAYLOAD`). Each aux frame is written before its key frame, so a key
frame on disk always has its aux on disk too; a crash can leave at most one torn frame at
the end of each file, which :meth:`Bucket.recover` cuts off.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from scrapy_irl import openfiles
from scrapy_irl.drum.records import (
    FRAME_HEADER,
    MAGIC_AUX,
    MAGIC_KV,
    UPDATE,
    decode_aux,
    encode_aux,
    encode_frame,
    iter_frames,
    scan_frames,
)
from scrapy_irl.exceptions import DrumCorruptionError

#: Largest payload of one bucket frame. A frame's length field is 32 bits, and one
#: ``submit()`` can put any amount into a buffer before it is written out, so a larger
#: write-out is split into several frame pairs (a tuple is never split: its aux string,
#: at most 1 GiB, always fits). Tests lower it to split small write-outs.
MAX_FRAME_PAYLOAD = 1 << 31


def bucket_paths(directory: Path, index: int, epoch: int) -> tuple[Path, Path]:
    """File names of bucket ``index`` in ``epoch``: (Q_i^H, Q_i^T)."""
    stem = f"bucket-{index:04d}.{epoch:010d}"
    return directory / f"{stem}.kv.drum", directory / f"{stem}.aux.drum"


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


class Bucket:
    """RAM buffer plus append-only files for the tuples of one key prefix in one epoch."""

    def __init__(
        self,
        directory: Path,
        index: int,
        epoch: int,
        *,
        record_dtype: np.dtype,
        store_aux: bool,
    ) -> None:
        self.index = index
        self.epoch = epoch
        self.record_dtype = record_dtype
        self.store_aux = store_aux
        self.kv_path, self.aux_path = bucket_paths(directory, index, epoch)
        self._kv_buffer = bytearray()
        self._aux_buffer: list[bytes] = []
        self._aux_buffered_bytes = 0
        self.buffered_records = 0
        self.file_bytes = 0  # bytes of Q_i^H on disk (the thesis' bucket size)
        self.file_records = 0
        #: Of the records found at open (:meth:`recover`), those of ``update`` alone.
        self.recovered_updates = 0
        self.bytes_read = 0  # bytes read back by read_records/read_aux
        self._kv_fd: int | None = None
        self._aux_fd: int | None = None

    # -- appending -------------------------------------------------------------------------

    def append(self, record: bytes, aux: bytes) -> None:
        """Buffer one packed record and its aux string (hot path: no numpy)."""
        self._kv_buffer += record
        if self.store_aux:
            self._aux_buffer.append(aux)
            self._aux_buffered_bytes += 4 + len(aux)
        self.buffered_records += 1

    def append_many(self, records: bytes, count: int, aux: list[bytes] | None) -> None:
        """Buffer ``count`` packed records at once (the vectorised batch path)."""
        self._kv_buffer += records
        if self.store_aux:
            if aux is None:
                aux = [b""] * count
            self._aux_buffer.extend(aux)
            self._aux_buffered_bytes += 4 * count + sum(map(len, aux))
        self.buffered_records += count

    @property
    def buffered_bytes(self) -> int:
        """RAM held by this bucket's buffers: records plus aux strings (what M bounds)."""
        return len(self._kv_buffer) + self._aux_buffered_bytes

    def write_out(self) -> int:
        """Append the RAM buffer to the bucket files; returns bytes written.

        One aux frame and one key frame per group of :meth:`_frame_groups`, in order, so
        the files keep the one-to-one pairing recovery checks. A group is dropped from the
        buffer once both its frames are written: an error leaves the rest buffered.
        """
        written = 0
        for count in self._frame_groups():
            written += self._write_group(count)
        return written

    def _frame_groups(self) -> list[int]:
        """Tuple counts of consecutive groups whose frames stay within MAX_FRAME_PAYLOAD."""
        count = self.buffered_records
        limit = MAX_FRAME_PAYLOAD
        if not count or max(len(self._kv_buffer), self._aux_buffered_bytes) <= limit:
            return [count] if count else []
        size = self.record_dtype.itemsize
        cost = np.full(count, size, dtype=np.int64)
        if self.store_aux:  # the aux frame: a 4-byte length and the string, per tuple
            lengths = np.fromiter(map(len, self._aux_buffer), dtype=np.int64, count=count)
            cost = np.maximum(cost, lengths + 4)  # both frames of a group stay in the limit
        ends = np.cumsum(cost)
        groups, start, done = [], 0, 0
        while start < count:
            stop = int(np.searchsorted(ends, done + limit, side="right"))
            stop = max(stop, start + 1)  # a tuple alone may exceed a lowered limit
            groups.append(stop - start)
            start, done = stop, int(ends[stop - 1])
        return groups

    def _write_group(self, count: int) -> int:
        """Write the first ``count`` buffered tuples as one frame pair, then drop them."""
        size = self.record_dtype.itemsize
        written = 0
        aux_start = None
        if self.store_aux:
            frame = encode_frame(MAGIC_AUX, count, encode_aux(self._aux_buffer[:count]))
            aux_start = self._file_length(aux=True)
            written += self._write(frame, aux=True)
        frame = encode_frame(MAGIC_KV, count, _head(self._kv_buffer, count * size))
        try:
            written += self._write(frame, aux=False)
        except OSError:
            # The group stays buffered and is written again: its aux frame must not be
            # there twice (a later key frame would be paired with the wrong strings).
            if aux_start is not None:
                self._cut(aux=True, length=aux_start)
            raise
        self.file_bytes += len(frame)
        self.file_records += count
        self._drop_buffered(count)
        return written

    def _drop_buffered(self, count: int) -> None:
        if count == self.buffered_records:
            self._kv_buffer.clear()
            self._aux_buffer.clear()
            self._aux_buffered_bytes = 0
        else:
            del self._kv_buffer[: count * self.record_dtype.itemsize]
            if self.store_aux:
                self._aux_buffered_bytes -= 4 * count + sum(map(len, self._aux_buffer[:count]))
                del self._aux_buffer[:count]
        self.buffered_records -= count

    def _fd(self, *, aux: bool) -> int:
        fd = self._aux_fd if aux else self._kv_fd
        if fd is None:
            path = self.aux_path if aux else self.kv_path
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            openfiles.opened()  # one of its store's reserved files, open now
            if aux:
                self._aux_fd = fd
            else:
                self._kv_fd = fd
        return fd

    def _file_length(self, *, aux: bool) -> int:
        return os.fstat(self._fd(aux=aux)).st_size

    def _cut(self, *, aux: bool, length: int) -> None:
        """Take a failed write's partial frame back off the file (best effort: if even
        that fails, the next open finds a torn tail, which recovery cuts)."""
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd(aux=aux), length)

    def _write(self, frame: bytes, *, aux: bool) -> int:
        """Append ``frame`` whole, or not at all: a write that fails part-way (a full
        disk) is cut back, so the buffered batch can be written again once there is room
        instead of leaving a broken frame in the middle of the file."""
        fd = self._fd(aux=aux)
        start = os.fstat(fd).st_size
        view = memoryview(frame)
        try:
            while view:  # a regular-file write() may be short; finish it
                view = view[os.write(fd, view) :]
        except OSError:
            self._cut(aux=aux, length=start)
            raise
        return len(frame)

    # -- reading back ----------------------------------------------------------------------

    def recover(self, *, repair: bool = True) -> int:
        """Validate both files after a restart, cut torn tails; returns records dropped.

        Called on open for the current epoch's buckets. A torn kv frame drops its batch
        (it was never fully written out); a surplus aux frame (its kv frame never made it)
        is cut too. Anything a crash cannot explain raises DrumCorruptionError.

        ``repair=False`` (the buckets of an epoch whose results are still owed): the files
        were whole when the epoch was merged, so no kill can have torn them since; a torn
        tail or a surplus aux frame is damage, refused without cutting anything.
        """
        kv_data = _read(self.kv_path)
        kv_scan = scan_frames(kv_data, MAGIC_KV, str(self.kv_path),
                              record_size=self.record_dtype.itemsize)  # fmt: skip
        dropped = 0
        keep_frames = len(kv_scan.frames)
        aux_torn = 0
        if self.store_aux:
            aux_data = _read(self.aux_path)
            aux_scan = scan_frames(aux_data, MAGIC_AUX, str(self.aux_path), aux_layout=True)
            if aux_scan.torn_bytes:
                aux_torn = _torn_count(aux_data, aux_scan.valid_length)
            if len(aux_scan.frames) < keep_frames:
                raise DrumCorruptionError(
                    f"{self.kv_path}: {keep_frames} key frames but only "
                    f"{len(aux_scan.frames)} aux frames in {self.aux_path.name}"
                )
            for kv_frame, aux_frame in zip(kv_scan.frames, aux_scan.frames):
                if kv_frame.count != aux_frame.count:
                    raise DrumCorruptionError(
                        f"{self.kv_path}: frame of {kv_frame.count} records paired with "
                        f"an aux frame of {aux_frame.count}"
                    )
            surplus = aux_scan.frames[keep_frames:]
            if len(surplus) > 1:
                # A kill between the two writes of one write-out leaves one aux frame
                # without its kv frame; more means the key file lost whole frames.
                raise DrumCorruptionError(
                    f"{self.kv_path}: {keep_frames} key frames but {len(aux_scan.frames)} "
                    f"aux frames in {self.aux_path.name}; a crash leaves at most one aux "
                    "frame ahead, so key frames were lost (file truncated or replaced)"
                )
            if not repair and (aux_scan.torn_bytes or surplus):
                raise DrumCorruptionError(
                    f"{self.aux_path}: {aux_scan.torn_bytes} bytes after the last whole frame "
                    f"and {len(surplus)} aux frames without key frames, in an epoch merged "
                    "with its results still owed (its files were whole at the merge: damaged "
                    "since, not torn by a kill)"
                )
            dropped += sum(f.count for f in surplus)
            aux_end = aux_scan.frames[keep_frames - 1].end if keep_frames else 0
            if aux_scan.torn_bytes or surplus:
                os.truncate(self.aux_path, aux_end)
        rec_size = self.record_dtype.itemsize
        for frame in kv_scan.frames:
            if len(frame.payload) != frame.count * rec_size:
                raise DrumCorruptionError(
                    f"{self.kv_path}: frame of {frame.count} records has "
                    f"{len(frame.payload)} bytes (record size {rec_size})"
                )
        # A kill leaves at most one batch unfinished (aux frame first, then key frame):
        # a whole aux frame without its key frame was counted above; otherwise a torn key
        # frame, or a torn aux frame, tells how many records the lost batch held.
        if not repair and kv_scan.torn_bytes:
            raise DrumCorruptionError(
                f"{self.kv_path}: {kv_scan.torn_bytes} bytes after the last whole frame, in "
                "an epoch merged with its results still owed (its files were whole at the "
                "merge: truncated or damaged since, not torn by a kill)"
            )
        if not dropped:
            if kv_scan.torn_bytes:
                dropped = _torn_count(kv_data, kv_scan.valid_length)
            elif aux_torn:
                dropped = aux_torn
        if kv_scan.torn_bytes:
            os.truncate(self.kv_path, kv_scan.valid_length)
        self.file_bytes = kv_scan.valid_length
        self.file_records = sum(f.count for f in kv_scan.frames)
        self.recovered_updates = sum(
            int(np.count_nonzero(np.frombuffer(f.payload, dtype=self.record_dtype)["op"] == UPDATE))
            for f in kv_scan.frames
        )
        return dropped

    def read_records(self) -> np.ndarray:
        """All records on disk in FIFO order (call :meth:`write_out` first)."""
        data = _read(self.kv_path)
        self.bytes_read += len(data)
        scan = scan_frames(data, MAGIC_KV, str(self.kv_path),
                           record_size=self.record_dtype.itemsize)  # fmt: skip
        if scan.torn_bytes:
            raise DrumCorruptionError(
                f"{self.kv_path}: {scan.torn_bytes} trailing bytes after the last frame"
            )
        payload = b"".join(f.payload for f in scan.frames)
        return np.frombuffer(payload, dtype=self.record_dtype)

    def iter_aux(self, max_bytes: int) -> Iterator[tuple[int, np.ndarray, bytes]]:
        """Aux strings in FIFO order as (count, offsets of length count+1, blob) slices.

        Read frame by frame and grouped up to about ``max_bytes`` per slice, so delivering a
        bucket whose aux file is much larger than RAM budgets allow stays bounded (the
        thesis reads Q_i^T "in blocks of size Delta").
        """
        try:
            handle = open(self.aux_path, "rb")  # noqa: SIM115 (closed by the with below)
        except FileNotFoundError:
            return
        with handle:
            counts: list[int] = []
            offsets: list[np.ndarray] = []
            blobs: list[bytes] = []
            size = 0
            for frame in iter_frames(handle, MAGIC_AUX, str(self.aux_path)):
                self.bytes_read += len(frame.payload)
                frame_offsets, blob = decode_aux(frame.payload, frame.count, str(self.aux_path))
                counts.append(frame.count)
                offsets.append(frame_offsets[1:] + size)
                blobs.append(blob)
                size += len(blob)
                if size >= max_bytes:
                    yield _aux_slice(counts, offsets, blobs)
                    counts, offsets, blobs, size = [], [], [], 0
            if counts:
                yield _aux_slice(counts, offsets, blobs)

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        for fd in (self._kv_fd, self._aux_fd):
            if fd is not None:
                os.close(fd)
                openfiles.closed()
        self._kv_fd = self._aux_fd = None

    def fsync(self) -> None:
        for fd in (self._kv_fd, self._aux_fd):
            if fd is not None:
                os.fsync(fd)

    def delete(self) -> None:
        self.close()
        for path in (self.kv_path, self.aux_path):
            path.unlink(missing_ok=True)


def _head(buffer: bytearray, length: int) -> bytes:
    """The first ``length`` bytes of ``buffer`` in one copy (a bytearray slice makes two)."""
    if length == len(buffer):
        return bytes(buffer)
    with memoryview(buffer) as view:  # released before the buffer is resized
        return bytes(view[:length])


def _aux_slice(
    counts: list[int], offsets: list[np.ndarray], blobs: list[bytes]
) -> tuple[int, np.ndarray, bytes]:
    return sum(counts), np.concatenate([np.zeros(1, dtype=np.int64), *offsets]), b"".join(blobs)


def _torn_count(data: bytes, start: int) -> int:
    """Records a torn frame at ``start`` claimed (1 if not even its header is whole: at
    least one batch of unknown size was lost)."""
    if len(data) - start < FRAME_HEADER.size:
        return 1
    return int(FRAME_HEADER.unpack_from(data, start)[1]) or 1
