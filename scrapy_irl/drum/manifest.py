"""DRUM's manifest: the single file whose atomic replacement commits a merge.

The manifest names the current epoch (which Z files and bucket files are live), the
parameters the store was created with, and the epochs whose results are still owed to
the consumer. It is written to ``MANIFEST.tmp``, fsynced, renamed over ``MANIFEST`` and
the directory is fsynced: a reader sees either the old or the new version, never a mix.
A CRC32 over its body catches hand edits and bit rot.
"""

from __future__ import annotations

import json
import os
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

from scrapy_irl.exceptions import DrumCorruptionError, DrumError

FORMAT_NAME = "scrapy-irl-drum"
FORMAT_VERSION = 1
MANIFEST_NAME = "MANIFEST"


@dataclass
class Manifest:
    epoch: int
    buckets: int
    value_descr: object  # numpy dtype description (np.lib.format.dtype_to_descr)
    store_aux: bool
    cache_count: int = 0
    cache_keys_crc: int = 0
    cache_vals_crc: int = 0
    pending_delivery: list[int] = field(default_factory=list)

    def to_bytes(self) -> bytes:
        body = {"format": FORMAT_NAME, "version": FORMAT_VERSION, **asdict(self)}
        text = json.dumps(body, sort_keys=True)
        wrapper = {"body": body, "crc32": zlib.crc32(text.encode())}
        return json.dumps(wrapper, sort_keys=True, indent=1).encode()

    @classmethod
    def from_bytes(cls, data: bytes, path: Path) -> Manifest:
        try:
            wrapper = json.loads(data)
            body = wrapper["body"]
            crc = wrapper["crc32"]
        except (ValueError, KeyError, TypeError) as exc:
            raise DrumCorruptionError(f"{path}: unreadable manifest ({exc})") from exc
        if zlib.crc32(json.dumps(body, sort_keys=True).encode()) != crc:
            raise DrumCorruptionError(f"{path}: manifest checksum mismatch")
        if body.get("format") != FORMAT_NAME:
            raise DrumError(f"{path}: not a scrapy-irl DRUM manifest")
        version = body.get("version")
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise DrumError(
                f"{path}: written by DRUM format version {version}; this scrapy-irl reads "
                f"up to version {FORMAT_VERSION}. Upgrade scrapy-irl or use a new directory."
            )
        fields = {k: body[k] for k in cls.__dataclass_fields__ if k in body}
        try:
            return cls(**fields)
        except TypeError as exc:
            raise DrumCorruptionError(f"{path}: incomplete manifest ({exc})") from exc


def read_manifest(directory: Path) -> Manifest | None:
    path = directory / MANIFEST_NAME
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return Manifest.from_bytes(data, path)


def write_manifest(directory: Path, manifest: Manifest, *, fsync: bool) -> None:
    path = directory / MANIFEST_NAME
    tmp = directory / (MANIFEST_NAME + ".tmp")
    with open(tmp, "wb") as handle:
        handle.write(manifest.to_bytes())
        handle.flush()
        if fsync:
            os.fsync(handle.fileno())
    os.replace(tmp, path)
    if fsync:
        fsync_directory(directory)


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
