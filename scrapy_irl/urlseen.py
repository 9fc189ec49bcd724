"""URLseen (IRLbot Fig. 2): the set of every URL hash the crawl has met, kept in DRUM.

Keys are the first 8 bytes of a request fingerprint (H = 8 in the thesis), or of its
BLAKE2b hash when the fingerprint's own bytes may not be uniform (:func:`hashed_key_of`);
the value is empty. Two ways in: :meth:`URLSeen.seen` answers at once (Scrapy's synchronous dupefilter
contract), :meth:`URLSeen.submit` queues a ``check+update`` with the serialized request as
aux and reports the unique ones after the next merge (the batch path of the IRL
scheduler). No Scrapy imports here.
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Callable, Sequence

import numpy as np

from scrapy_irl.drum import CHECK_UPDATE, Drum, DrumBatch, DrumStats

#: Receives (merge epoch, aux of every unique tuple in FIFO order per bucket).
UniqueCallback = Callable[[int, list[bytes]], None]


#: ``unpack_key(fingerprint)[0]`` is :func:`key_of` without its length check (it raises
#: ``struct.error`` on fingerprints under 8 bytes): the form of the per-request hot path.
unpack_key = struct.Struct(">Q").unpack_from


def key_of(fingerprint: bytes) -> int:
    """The 8-byte DRUM key of a request fingerprint (its first 8 bytes, big-endian)."""
    if len(fingerprint) < 8:
        raise ValueError(f"fingerprint must have at least 8 bytes, got {len(fingerprint)}")
    return unpack_key(fingerprint)[0]  # type: ignore[no-any-return]


def hashed_key_of(fingerprint: bytes) -> int:
    """The DRUM key of a fingerprint whose bytes may not be uniform: 8 bytes of its BLAKE2b.

    A fingerprint that is the URL itself, or starts with a constant, would give every
    request the same first 8 bytes (all but one dropped as duplicates), and one shorter
    than 8 bytes has no key at all; hashed, both spread like a SHA-1 digest's prefix.
    A ``str`` is keyed as its UTF-8 bytes: fingerprinters written for Scrapy < 2.7
    return hex strings, which Scrapy's own dupefilter accepts.
    """
    if not isinstance(fingerprint, bytes):
        fingerprint = _fingerprint_bytes(fingerprint)
    return unpack_key(hashlib.blake2b(fingerprint, digest_size=8).digest())[0]  # type: ignore[no-any-return]


def _fingerprint_bytes(fingerprint: object) -> bytes:
    if isinstance(fingerprint, str):
        return fingerprint.encode("utf-8")
    if isinstance(fingerprint, (bytearray, memoryview)):
        return bytes(fingerprint)
    raise TypeError(
        "the fingerprint() method of REQUEST_FINGERPRINTER_CLASS must return bytes, "
        f"got {type(fingerprint).__name__}: {fingerprint!r:.100}"
    )


class URLSeen:
    """A DRUM store of URL hashes with a synchronous and a batch interface."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        buckets: int = 16,
        buffer_bytes: int = 64 * 1024,
        bucket_bytes: int = 128 * 1024,
        merge_chunk_bytes: int = 4 * 1024 * 1024,
        flush_interval: float = 1.0,
        fsync: bool = True,
        verify_on_open: bool = True,
        on_unique: UniqueCallback | None = None,
        store_aux: bool = False,
    ) -> None:
        self._on_unique = on_unique
        self.drum = Drum(
            path,
            buckets=buckets,
            buffer_bytes=buffer_bytes,
            bucket_bytes=bucket_bytes,
            merge_chunk_bytes=merge_chunk_bytes,
            store_aux=store_aux or on_unique is not None,
            sync_index=True,
            on_results=self._deliver if on_unique is not None else None,
            flush_interval=flush_interval,
            fsync=fsync,
            verify_on_open=verify_on_open,
        )

    def seen(self, fingerprint: bytes) -> bool:
        """True if the fingerprint was seen before; records it otherwise."""
        return self.drum.check_update_sync(key_of(fingerprint))

    def submit(self, fingerprint: bytes, aux: bytes) -> None:
        """Queue a batch ``check+update``; ``aux`` comes back via ``on_unique`` if new."""
        self.drum.check_update(key_of(fingerprint), None, aux)

    def submit_many(self, keys: np.ndarray, aux: Sequence[bytes]) -> None:
        """Queue many precomputed keys at array speed."""
        self.drum.submit(keys, CHECK_UPDATE, None, aux)

    def _deliver(self, batch: DrumBatch) -> None:
        assert self._on_unique is not None
        self._on_unique(batch.epoch, list(batch.unique_aux()))

    def merge(self) -> int:
        return self.drum.merge()

    def write_out(self) -> int:
        return self.drum.write_out()

    @property
    def stats(self) -> DrumStats:
        return self.drum.stats

    @property
    def pending(self) -> int:
        return self.drum.pending_tuples

    def __len__(self) -> int:
        return len(self.drum)

    def close(self) -> None:
        self.drum.close()
