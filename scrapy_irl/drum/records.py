"""Record layouts and checksummed framing shared by DRUM's bucket, cache and result files.

Everything DRUM writes is little-endian and framed so that a reader can tell a torn tail
(the process died in the middle of a write: the file simply ends early) from corruption (a
complete frame whose checksum does not match), which must never be silently accepted.
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

from scrapy_irl.exceptions import DrumError

#: Operation codes stored with every tuple. ``CHECK_UPDATE`` is the bitwise union, so
#: ``op & UPDATE`` tells whether a tuple inserts/updates its key.
CHECK = 1
UPDATE = 2
CHECK_UPDATE = CHECK | UPDATE

#: H in the thesis: keys are 8-byte hashes, kept as unsigned 64-bit integers.
KEY_DTYPE = np.dtype("<u8")

#: Frame header: magic, number of records, payload length, CRC32 of the payload.
FRAME_HEADER = struct.Struct("<4sIII")

MAGIC_KV = b"DQH1"  # a batch of <key, op, value> records in a bucket file Q_i^H
MAGIC_AUX = b"DQT1"  # the aux strings of the same batch, in Q_i^T
MAGIC_RESULT = b"DRS1"  # per-tuple results of one bucket after a merge


def record_dtype(value_dtype: np.dtype) -> np.dtype:
    """The packed numpy dtype of one bucket record for values of ``value_dtype``."""
    fields: list[tuple[str, object]] = [("key", KEY_DTYPE), ("op", "u1")]
    if value_dtype.itemsize:
        fields.append(("value", value_dtype))
    return np.dtype(fields)


def result_dtype(value_dtype: np.dtype) -> np.dtype:
    """The packed dtype of one merge result: whether the key was new, and its prior value."""
    fields: list[tuple[str, object]] = [("unique", "u1")]
    if value_dtype.itemsize:
        fields.append(("value", value_dtype))
    return np.dtype(fields)


#: Largest count or payload length a frame header can hold (32-bit fields).
FRAME_FIELD_MAX = 0xFFFFFFFF


def encode_frame(magic: bytes, count: int, payload: bytes) -> bytes:
    """Header plus payload as one bytes object, so it is written with a single write().

    A count or length the 32-bit header cannot hold raises DrumError before anything is
    written (callers split larger batches; this is the last line of defence).
    """
    if len(payload) > FRAME_FIELD_MAX or count > FRAME_FIELD_MAX:
        raise DrumError(
            f"a {magic.decode()} frame of {count} records and {len(payload)} bytes does not "
            f"fit the 32-bit frame header (at most {FRAME_FIELD_MAX} of each)"
        )
    return FRAME_HEADER.pack(magic, count, len(payload), zlib.crc32(payload)) + payload


def encode_aux(aux: list[bytes]) -> bytes:
    """Aux payload: ``count`` uint32 lengths followed by the concatenated strings."""
    lengths = np.fromiter((len(a) for a in aux), dtype="<u4", count=len(aux))
    return lengths.tobytes() + b"".join(aux)


@dataclass(frozen=True)
class Frame:
    """One valid frame read back from a file."""

    count: int
    payload: bytes
    end: int  # file offset just past this frame


class FrameScan:
    """Result of scanning a framed file: its valid frames and where a torn tail starts."""

    def __init__(self, frames: list[Frame], valid_length: int, torn_bytes: int) -> None:
        self.frames = frames
        self.valid_length = valid_length
        self.torn_bytes = torn_bytes


def scan_frames(data: bytes, magic: bytes, name: str, *, aux_layout: bool = False,
                record_size: int | None = None) -> FrameScan:  # fmt: skip
    """Parse every frame in ``data``; raise on corruption, report a torn tail.

    A tail shorter than its header or payload claims is what a kill during ``write()``
    leaves behind (or, after power loss, a zero-filled tail), so it is reported as torn.
    A complete frame with a wrong magic or checksum cannot come from a crash: it raises
    :class:`~scrapy_irl.exceptions.DrumCorruptionError` naming the file and offset. So
    does a header whose length a crash cannot explain: not ``count x record_size`` for
    fixed-size records, or longer than the whole frame its length table and checksum
    vouch for (``aux_layout``), which would otherwise read as a torn tail and cut every
    frame after it.
    """
    return _scan(io.BytesIO(data), magic, name, keep_payload=True, aux_layout=aux_layout,
                 record_size=record_size)  # fmt: skip


def scan_frames_streaming(
    handle: BinaryIO, magic: bytes, name: str, *, aux_layout: bool = False
) -> FrameScan:
    """:func:`scan_frames` over an open file, one frame in RAM at a time.

    For files that can grow without bound (BEAST's queues): the returned frames carry
    their count and end offset but an empty payload.
    """
    return _scan(handle, magic, name, keep_payload=False, aux_layout=aux_layout)


def _scan(handle: BinaryIO, magic: bytes, name: str, *, keep_payload: bool,
          aux_layout: bool = False, record_size: int | None = None) -> FrameScan:  # fmt: skip
    """The checksum covers the payload only, so a frame's record count and length are
    checked where something else can vouch for them: fixed-size records (``record_size``)
    fix the length from the count; ``aux_layout`` payloads (aux frames, BEAST's queues)
    start with one length per record, which must add up to the rest."""
    from scrapy_irl.exceptions import DrumCorruptionError

    frames: list[Frame] = []
    pos = 0
    header_size = FRAME_HEADER.size
    while True:
        header = handle.read(header_size)
        if len(header) < header_size:
            break
        got_magic, count, length, crc = FRAME_HEADER.unpack(header)
        if got_magic != magic:
            if not any(header) and _rest_is_zero(handle):  # space allocated, never written
                break
            raise DrumCorruptionError(
                f"{name}: bad frame magic {got_magic!r} at offset {pos} (expected {magic!r})"
            )
        if record_size is not None and length != count * record_size:
            raise DrumCorruptionError(
                f"{name}: the frame at offset {pos} claims {count} records of "
                f"{record_size} bytes in {length} bytes (damaged header)"
            )
        payload = handle.read(length)
        if len(payload) < length:
            if aux_layout and _whole_frame_inside(payload, count, crc):
                raise DrumCorruptionError(
                    f"{name}: the frame at offset {pos} claims {length} bytes, but its "
                    "records and checksum make a whole frame of fewer (damaged header, "
                    "not a torn write)"
                )
            break
        if zlib.crc32(payload) != crc:
            raise DrumCorruptionError(
                f"{name}: checksum mismatch in the frame at offset {pos} ({count} records)"
            )
        if aux_layout and not _lengths_add_up(payload, count):
            raise DrumCorruptionError(
                f"{name}: the frame at offset {pos} claims {count} records, but its length "
                "table does not add up to its payload (damaged header)"
            )
        pos += header_size + length
        frames.append(Frame(count, payload if keep_payload else b"", pos))
    size = handle.seek(0, 2)
    return FrameScan(frames, pos, size - pos)


def _aux_payload_size(payload: bytes, count: int) -> int | None:
    """The payload size an aux-layout frame of ``count`` records has by its length table
    (the table plus the strings), or None when ``payload`` is shorter than the table."""
    head = 4 * count
    if len(payload) < head:
        return None
    return head + int(np.frombuffer(payload, dtype="<u4", count=count).sum(dtype=np.int64))


def _lengths_add_up(payload: bytes, count: int) -> bool:
    return _aux_payload_size(payload, count) == len(payload)


def _whole_frame_inside(payload: bytes, count: int, crc: int) -> bool:
    """Whether the bytes after a header, too few for the length it claims, start with a
    whole frame of ``count`` records (by its length table) whose checksum matches: the
    length field was damaged, since a torn write never holds the whole payload."""
    size = _aux_payload_size(payload, count)
    return size is not None and size <= len(payload) and zlib.crc32(payload[:size]) == crc


def _rest_is_zero(handle: BinaryIO, chunk: int = 1 << 20) -> bool:
    for _ in range(1 << 40):  # bounded by the file's size
        data = handle.read(chunk)
        if not data:
            return True
        if data.count(0) != len(data):
            return False
    return False


def decode_aux(payload: bytes, count: int, name: str) -> tuple[np.ndarray, bytes]:
    """Split an aux payload into (offsets array of length count+1, blob)."""
    from scrapy_irl.exceptions import DrumCorruptionError

    head = 4 * count
    if len(payload) < head:
        raise DrumCorruptionError(f"{name}: aux frame shorter than its length table")
    lengths = np.frombuffer(payload, dtype="<u4", count=count)
    offsets = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    blob = payload[head:]
    if offsets[-1] != len(blob):
        raise DrumCorruptionError(f"{name}: aux lengths do not add up to the frame size")
    return offsets, blob


def iter_frames(handle: BinaryIO, magic: bytes, name: str) -> Iterator[Frame]:
    """Stream the frames of an open file one at a time (RAM: one frame).

    Used where the file is known to be complete (it was fully written before a merge
    committed), so a short frame here is corruption, not a torn tail.
    """
    from scrapy_irl.exceptions import DrumCorruptionError

    pos = 0
    while True:
        header = handle.read(FRAME_HEADER.size)
        if not header:
            return
        if len(header) < FRAME_HEADER.size:
            raise DrumCorruptionError(f"{name}: truncated frame header at offset {pos}")
        got_magic, count, length, crc = FRAME_HEADER.unpack(header)
        if got_magic != magic:
            raise DrumCorruptionError(f"{name}: bad frame magic {got_magic!r} at offset {pos}")
        payload = handle.read(length)
        if len(payload) != length:
            raise DrumCorruptionError(f"{name}: truncated frame at offset {pos}")
        if zlib.crc32(payload) != crc:
            raise DrumCorruptionError(f"{name}: checksum mismatch in the frame at offset {pos}")
        pos += FRAME_HEADER.size + length
        yield Frame(count, payload, pos)
