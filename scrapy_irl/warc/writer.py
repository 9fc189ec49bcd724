"""``RotatingWarcWriter``: WARC 1.1 files of bounded size that survive a kill -9.

WebBase (``shared/seeds/000_*.txt`` section 3) stores crawled pages compressed and
concatenated in very large *containers*, with an offset index for random access. WARC is
today's standard container: one gzip member per record, so any record can be read from its
offset alone. The file being written is ``<name>.open``; it is flushed, fsynced and renamed
to ``<name>`` when it reaches ``max_bytes`` or is closed, so a final name always means a
finished file. Each record reaches the OS in a single ``write`` (no user-space buffer), so
a killed process loses at most the record being written; the next writer in the same
directory cuts that torn tail off and renames the file (see :func:`recover_open_files`).
"""

from __future__ import annotations

import base64
import hashlib
import io
import logging
import os
import re
import socket
import time
import uuid
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warcio.archiveiterator import ArchiveIterator
from warcio.recordloader import ArcWarcRecord
from warcio.statusandheaders import StatusAndHeaders
from warcio.timeutils import datetime_to_iso_date
from warcio.warcwriter import WARCWriter

from scrapy_irl import __version__
from scrapy_irl.dirlock import DirectoryLock

if TYPE_CHECKING:
    from typing import Self

logger = logging.getLogger(__name__)

SOFTWARE = f"scrapy-irl/{__version__}"
WARC_FORMAT = "WARC File Format 1.1"
CONFORMS_TO = (
    "http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"
)
OPEN_SUFFIX = ".open"
#: Suffix of the copy a warcinfo rewrite builds beside a ``.open`` file (see
#: :func:`_name_in_warcinfo`); a stale one is a rewrite a kill interrupted.
REWRITE_SUFFIX = ".rewrite"
#: Suffix of a ``.open`` file set aside untouched: damaged before intact records, which no
#: kill leaves (see :func:`recover_open_file`).
DAMAGED_SUFFIX = ".damaged"
#: Most candidate record starts tried after a damaged one (bounds the search).
_MAX_CANDIDATES = 10_000
#: Attempts at a fresh file name when one is taken (same clock tick); bounds the loop.
_NAME_ATTEMPTS = 100
_READ_CHUNK = 1 << 20


def warc_date(timestamp: float) -> str:
    """A WARC 1.1 date (ISO 8601, UTC, microseconds) for a POSIX timestamp."""
    moment = datetime.fromtimestamp(timestamp, UTC).replace(tzinfo=None)
    return datetime_to_iso_date(moment, use_micros=True)


def file_timestamp(timestamp: float) -> str:
    """``YYYYmmddHHMMSSffffff`` in UTC, the timestamp part of a WARC file name."""
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y%m%d%H%M%S%f")


class RawHttpHeaders(StatusAndHeaders):
    """An HTTP status line and headers stored byte for byte, as received or sent.

    warcio turns bytes headers into ``str`` through Latin-1 and, when writing, %-encodes any
    value that is not ASCII (RFC 8187), so a raw UTF-8 ``filename="naïve.txt"`` or a stray
    high byte would be stored as percent-escaped mojibake, not as the message received
    (WARC 1.1: a ``response`` block *is* the HTTP response). Latin-1 maps each byte to one
    code point, so encoding the text back as Latin-1 gives the original bytes. Only a
    ``str`` value beyond Latin-1 (never one from Scrapy's bytes headers) gets warcio's way.
    """

    def compute_headers_buffer(
        self, header_filter: Callable[[tuple[str, str]], Any] | None = None
    ) -> None:
        try:
            text = self.to_str(header_filter).encode("latin-1")
        except UnicodeEncodeError:
            super().compute_headers_buffer(header_filter)
            return
        self.headers_buff = text + b"\r\n"


@dataclass(frozen=True)
class RecoveredFile:
    """What recovery did with one ``.open`` file left by a killed writer."""

    #: The ``.open`` file found.
    open_path: Path
    #: Its new name, or None when it held no complete record besides warcinfo and was removed.
    final_path: Path | None
    #: Complete records kept (the warcinfo record included).
    records: int
    #: Bytes cut off the end (the whole file when it was removed).
    bytes_cut: int
    #: warcio's complaint about the first record not kept, if it raised one (a torn header
    #: or damaged data; records after a damaged one are cut too).
    error: str | None = None
    #: Set aside untouched (``.damaged``): intact records follow the damage.
    set_aside: bool = False

    @property
    def removed(self) -> bool:
        return self.final_path is None


@dataclass
class _Scan:
    end: int = 0  # offset just past the last complete record
    records: int = 0
    payload_records: int = 0  # complete records other than warcinfo
    error: str | None = None
    first_end: int = 0  # offset just past the first record, if complete
    first_filename: str | None = None  # its WARC-Filename, if it is a warcinfo record


def _scan(path: Path, gzipped: bool, limit: int | None = None) -> _Scan:
    """Find the end of the last complete record of ``path``; never raises on bad data.

    warcio's ArchiveIterator parses the records and gives each one's offset and length; a
    record counts as complete when its block has all ``Content-Length`` bytes, matches its
    ``WARC-Block-Digest`` and is followed by the ``CRLF CRLF`` separator, and, in a gzip
    file, when its gzip member decompresses to its end (trailer and CRC included): warcio
    itself reads a torn member without complaint. The digest is what catches damage inside
    an uncompressed record whose lengths are intact (a hole of zeros after a power loss).
    ``limit`` stops after that many complete records.
    """
    scan = _Scan()
    with open(path, "rb") as raw:
        iterator = ArchiveIterator(raw, no_record_parse=True)
        try:
            for record in iterator:
                expected = int(record.rec_headers.get_header("Content-Length") or -1)
                digest = record.rec_headers.get_header("WARC-Block-Digest")
                hasher = _hasher(digest)
                got = 0
                while chunk := record.raw_stream.read(_READ_CHUNK):
                    got += len(chunk)
                    if hasher is not None:
                        hasher.update(chunk)
                offset = iterator.get_record_offset()
                length = iterator.get_record_length()
                if got != expected or offset != scan.end:
                    break
                if hasher is not None and not _digest_matches(digest, hasher):
                    scan.error = f"WARC-Block-Digest mismatch in the record at offset {offset}"
                    break
                end = (
                    _gzip_member_end(raw, offset, length)
                    if gzipped
                    else _separator_end(raw, offset + length)
                )
                if end is None:
                    break
                scan.end = end
                scan.records += 1
                if scan.records == 1:
                    _note_first(scan, record)
                if record.rec_type != "warcinfo":
                    scan.payload_records += 1
                if scan.records == limit:
                    break
        except Exception as exc:  # noqa: BLE001 - damaged data ends the kept prefix
            # bytes of the file can be in the message: escaped, so a log stays text
            scan.error = _printable(f"{type(exc).__name__}: {exc}"[:300])
        finally:
            iterator.close()
    return scan


def _printable(text: str) -> str:
    """``text`` with every character that is not printable ASCII escaped (``\\x1f``)."""
    return "".join(c if " " <= c <= "~" else ascii(c)[1:-1] for c in text)


def _note_first(scan: _Scan, record: ArcWarcRecord) -> None:
    scan.first_end = scan.end
    if record.rec_type == "warcinfo":
        scan.first_filename = record.rec_headers.get_header("WARC-Filename")


def _hasher(digest: str | None) -> Any:
    """A hashlib object for a ``WARC-Block-Digest`` (``sha1:BASE32``), None if unknown."""
    algorithm, _, value = (digest or "").partition(":")
    if not value:
        return None
    try:
        return hashlib.new(algorithm.strip().lower().replace("-", ""))
    except ValueError:  # an algorithm hashlib does not know: not checked
        return None


def _digest_matches(digest: str, hasher: Any) -> bool:
    value = digest.partition(":")[2].strip().upper()
    raw = hasher.digest()
    return value in (base64.b32encode(raw).decode(), raw.hex().upper())


def _gzip_member_end(raw: io.BufferedReader, offset: int, length: int) -> int | None:
    """``offset + length`` if one whole gzip member ending in CRLF CRLF lies there, else None."""
    position = raw.tell()
    decompressor = zlib.decompressobj(zlib.MAX_WBITS | 16)
    tail = b""  # the last bytes of the decompressed record
    try:
        raw.seek(offset)
        left = length
        while left > 0:  # in chunks: a record may be as large as a response body
            data = raw.read(min(left, _READ_CHUNK))
            if not data:
                return None
            left -= len(data)
            tail = (tail + decompressor.decompress(data))[-4:]
        tail = (tail + decompressor.flush())[-4:]
    except zlib.error:
        return None
    finally:
        raw.seek(position)
    if not decompressor.eof or decompressor.unused_data or tail != b"\r\n\r\n":
        return None
    return offset + length


def _separator_end(raw: io.BufferedReader, block_end: int) -> int | None:
    """The offset past the CRLF CRLF after an uncompressed record's block, or None if torn."""
    position = raw.tell()
    try:
        raw.seek(block_end)
        separator = raw.read(4)
    finally:
        raw.seek(position)
    return block_end + 4 if separator == b"\r\n\r\n" else None


def _fsync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # e.g. platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _free_name(path: Path) -> Path:
    """``path`` if unused, else ``<stem>-recovered-<n><suffixes>`` (never overwrite a WARC)."""
    if not path.exists():
        return path
    base, dot, extension = path.name.partition(".warc")
    for n in range(1, _NAME_ATTEMPTS + 1):
        candidate = path.with_name(f"{base}-recovered-{n}{dot}{extension}")
        if not candidate.exists():
            return candidate
    raise FileExistsError(f"no free name for {path}")


def _warcinfo_renamed(head: bytes, name: str, gzipped: bool) -> bytes:
    """The warcinfo record ``head`` serialised again with ``WARC-Filename: name``.

    Only a header changes, so the block (and its digest) is the same; the record gets a
    new ``WARC-Record-ID``, as it is a different record (nothing refers to a warcinfo ID).
    """
    records = ArchiveIterator(io.BytesIO(head))
    try:
        record = next(records)
        block = record.raw_stream.read()
        headers = record.rec_headers
    finally:
        records.close()
    builder = WARCWriter(None, gzip=gzipped, warc_version="1.1")
    headers.replace_header("WARC-Filename", name)
    headers.replace_header("WARC-Record-ID", f"<urn:uuid:{uuid.uuid4()}>")
    headers.remove_header("WARC-Block-Digest")  # recomputed from the block
    rebuilt = builder.create_warc_record(
        "", "warcinfo", payload=io.BytesIO(block), length=len(block), warc_headers=headers
    )
    buffer = io.BytesIO()
    builder.out = buffer
    builder.write_record(rebuilt)
    return buffer.getvalue()


def _name_in_warcinfo(path: Path, name: str, gzipped: bool, first_end: int) -> None:
    """Make the warcinfo record of the ``.open`` file ``path`` say ``WARC-Filename: name``.

    Its length changes, so the file is copied: the new warcinfo, then every byte after the
    old one, to ``<path>.rewrite``, fsynced and renamed over ``path``. A kill before that
    rename leaves ``path`` as it was (recovery removes the stale copy); after it, ``path``
    already names ``name``.
    """
    temporary = path.with_name(path.name + REWRITE_SUFFIX)
    with open(path, "rb") as source, open(temporary, "wb") as target:
        target.write(_warcinfo_renamed(source.read(first_end), name, gzipped))
        while chunk := source.read(_READ_CHUNK):
            target.write(chunk)
        target.flush()
        os.fsync(target.fileno())
    os.replace(temporary, path)
    _fsync_directory(path.parent)


def _give_final_name(path: Path, gzipped: bool, first: _Scan | None = None) -> Path:
    """Rename the whole ``.open`` file ``path`` to a free final name its warcinfo names.

    The name is ``path`` without ``.open``, or ``-recovered-<n>`` when that is taken (a
    WARC file is never overwritten); in that case the warcinfo record is rewritten first,
    so ``WARC-Filename`` is the name of the file the record is in (WARC 1.1, 5.4).
    ``first``: a scan of ``path`` that found its first record, if the caller has one.
    """
    final = _free_name(path.with_name(path.name[: -len(OPEN_SUFFIX)]))
    if first is None:
        first = _scan(path, gzipped, limit=1)
    if first.first_filename is not None and first.first_filename != final.name:
        _name_in_warcinfo(path, final.name, gzipped, first.first_end)
    os.rename(path, final)
    _fsync_directory(path.parent)
    return final


def _intact_record_after(path: Path, start: int, gzipped: bool) -> int | None:
    """The offset of a record after ``start`` from which complete records run to the end
    of the file (the last may be torn), or None.

    A kill cuts the file once, inside its last record: after the torn record there is
    nothing. So intact records further on mean damage of another kind (a flipped byte, a
    hole), and they must not be cut away with it. Asking for a chain to the end, not one
    record, keeps a torn record that quotes WARC records in its payload (a crawled
    ``.warc``) from passing for damage: the quoted text stops making records before the
    end of the file.
    """
    marker = b"\x1f\x8b\x08" if gzipped else b"\r\n\r\nWARC/1."
    size = path.stat().st_size
    tried = 0
    with open(path, "rb") as raw:
        raw.seek(start + 1)  # not the torn (or damaged) record at ``start`` itself
        position, carry = start + 1, b""
        while tried < _MAX_CANDIDATES and (chunk := raw.read(_READ_CHUNK)):
            data = carry + chunk
            base = position - len(carry)
            found = data.find(marker)
            while found != -1 and tried < _MAX_CANDIDATES:
                tried += 1
                offset = base + found + (0 if gzipped else 4)
                if _records_reach_the_end(path, offset, gzipped, size):
                    return offset
                found = data.find(marker, found + 1)
            carry = data[-(len(marker) - 1):]
            position += len(chunk)
    return None


def _records_reach_the_end(path: Path, offset: int, gzipped: bool, size: int) -> bool:
    """Whether complete records follow one another from ``offset`` to the end of the
    file, the last one possibly torn (cut by a kill). The first must be complete."""
    first = True
    while offset < size:
        state, end = _record_at(path, offset, gzipped, size)
        if state == "bad" or (state == "torn" and first):
            return False
        if state == "torn":
            return True
        offset, first = end, False
    return not first


#: A ``Content-Length`` longer than this many digits is no record of ours (and ``int()``
#: refuses strings of thousands of digits).
_MAX_LENGTH_DIGITS = 19


def _record_at(path: Path, offset: int, gzipped: bool, size: int) -> tuple[str, int]:
    """What starts at ``offset`` and where it ends: ``"complete"`` (a whole gzip member,
    CRC checked, whose text begins ``WARC/1.``; or a ``WARC/1.`` header whose
    ``Content-Length`` block and ``CRLF CRLF`` end inside the file), ``"torn"`` (such a
    start that runs past the end of the file without a fault), or ``"bad"``."""
    with open(path, "rb") as raw:
        raw.seek(offset)
        if gzipped:
            return _member_at(raw, offset)
        head = raw.read(1 << 16)
        if not head.startswith(b"WARC/1."[: len(head)]):
            return "bad", offset
        blank = head.find(b"\r\n\r\n")
        if blank == -1:
            return ("torn" if offset + len(head) >= size else "bad"), offset
        length = None
        for line in head[:blank].split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            value = value.strip()
            if name.strip().lower() == b"content-length":
                digits = value.isdigit() and len(value) <= _MAX_LENGTH_DIGITS
                length = int(value) if digits else None
        if length is None:
            return "bad", offset
        end = offset + blank + 4 + length + 4
        if end > size:
            return "torn", end
        raw.seek(end - 4)
        return ("complete" if raw.read(4) == b"\r\n\r\n" else "bad"), end


def _member_at(raw: Any, offset: int) -> tuple[str, int]:
    """A gzip member read from ``raw``'s position (``offset``), its output discarded in
    bounded pieces (a member can inflate to gigabytes)."""
    decompressor = zlib.decompressobj(wbits=31)
    text = b""
    consumed = 0
    try:
        while not decompressor.eof and (chunk := raw.read(1 << 16)):
            consumed += len(chunk)
            data = chunk
            while data and not decompressor.eof:
                out = decompressor.decompress(data, 1 << 20)
                data = decompressor.unconsumed_tail
                if len(text) < 16:
                    text += out[:16]
                    if not b"WARC/1.".startswith(text[:7]):
                        return "bad", offset
    except zlib.error:
        return "bad", offset
    if not decompressor.eof:
        return "torn", offset + consumed
    end = offset + consumed - len(decompressor.unused_data)
    return ("complete" if text.startswith(b"WARC/1.") else "bad"), end


def _set_aside(path: Path) -> Path:
    """Rename ``path`` to a free ``<name>.damaged``, bytes untouched."""
    target = path.with_name(path.name[: -len(OPEN_SUFFIX)] + DAMAGED_SUFFIX)
    n = 1
    while target.exists() and n <= _NAME_ATTEMPTS:
        target = path.with_name(f"{path.name[: -len(OPEN_SUFFIX)]}-{n}{DAMAGED_SUFFIX}")
        n += 1
    if target.exists():
        raise FileExistsError(f"no free name to set {path} aside")
    os.rename(path, target)
    _fsync_directory(path.parent)
    return target


def recover_open_file(path: Path) -> RecoveredFile:
    """Cut a ``.open`` WARC file after its last complete record and give it its final name.

    What a kill leaves, a torn last record, is cut. A file with no complete record
    besides warcinfo is removed: it holds no page. Damage followed by intact records is
    no kill's doing (a flipped byte, a hole): cutting there would delete the intact
    records after it (a probe: one flipped byte cost 238 intact pages, one in the first
    header a whole file of 447), so the file is set aside untouched as
    ``<name>.damaged`` for WARC tools to salvage, and the crawl goes on in a new file.
    """
    gzipped = path.name.endswith(".gz" + OPEN_SUFFIX)
    path.with_name(path.name + REWRITE_SUFFIX).unlink(missing_ok=True)  # a killed rewrite
    size = path.stat().st_size
    scan = _scan(path, gzipped)
    if scan.end < size:
        intact = _intact_record_after(path, scan.end, gzipped)
        if intact is not None:
            aside = _set_aside(path)
            error = f"damaged at offset {scan.end}, an intact record at {intact}"
            if scan.error:
                error += f" ({scan.error})"
            return RecoveredFile(path, aside, scan.records, 0, error, set_aside=True)
    if scan.payload_records == 0:
        path.unlink()
        return RecoveredFile(path, None, 0, size, scan.error)
    if scan.end < size:
        with open(path, "r+b") as handle:
            handle.truncate(scan.end)
            handle.flush()
            os.fsync(handle.fileno())
    final = _give_final_name(path, gzipped, scan)
    return RecoveredFile(path, final, scan.records, size - scan.end, scan.error)


def recover_open_files(directory: str | os.PathLike[str], prefix: str) -> list[RecoveredFile]:
    """Recover every ``{prefix}-{timestamp}-{serial}.warc[.gz].open`` of ``directory``.

    A file that cannot be recovered (permissions, I/O error) is logged and left in place.
    """
    directory = Path(directory)  # a str too, as RotatingWarcWriter takes it
    recovered = []
    # Exactly our names: prefix "a" must not claim the files of a writer with prefix "a-b".
    pattern = re.compile(
        rf"{re.escape(prefix)}-\d{{20}}-\d{{5,}}\.warc(\.gz)?{re.escape(OPEN_SUFFIX)}"
    )
    for path in sorted(directory.iterdir()):
        if not pattern.fullmatch(path.name):
            continue
        try:
            result = recover_open_file(path)
        except OSError as exc:
            logger.error("Could not recover the WARC file %s: %s", path, exc)
            continue
        recovered.append(result)
        if result.set_aside:
            logger.error(
                "%s is damaged before intact records, which no kill leaves: set aside "
                "untouched as %s (%s); salvage it with WARC tools. The crawl writes on "
                "in a new file.", path, result.final_path, result.error,
            )  # fmt: skip
        elif result.removed:
            logger.warning(
                "Removed %s: no complete WARC record (%d bytes)", path, result.bytes_cut
            )
        else:
            logger.warning(
                "Recovered %s as %s: %d complete records kept, %d bytes cut%s",
                path,
                result.final_path.name if result.final_path else "",
                result.records,
                result.bytes_cut,
                f" ({result.error})" if result.error else "",
            )
    return recovered


class RotatingWarcWriter:
    """Appends WARC records to ``{prefix}-{UTC timestamp}-{serial:05d}.warc.gz`` files.

    A file is opened (and starts with a warcinfo record) on the first write after
    construction or rotation, and is finished once it reaches ``max_bytes``, so files exceed
    it by at most one :meth:`write` call. Not thread-safe; one writer per directory and
    prefix at a time, enforced by an ``flock`` on ``.{prefix}.lock`` taken before recovery
    (which treats every ``.open`` file of the prefix as abandoned); :meth:`release` gives
    it up.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        prefix: str = "scrapy-irl",
        max_bytes: int = 1_000_000_000,
        gzip: bool = True,
        clock: Callable[[], float] = time.time,
        *,
        info: Mapping[str, str] | None = None,
        recover: bool = True,
    ) -> None:
        if max_bytes <= 0:
            raise ValueError(f"max_bytes must be positive, not {max_bytes}")
        if not prefix or "/" in prefix or os.sep in prefix:
            raise ValueError(f"invalid WARC file prefix {prefix!r}")
        self.directory = Path(directory)
        self.prefix = prefix
        self.max_bytes = max_bytes
        self.gzip = gzip
        self.clock = clock
        self.info: dict[str, str] = dict(info or {})
        #: warcio's record builder: ``writer.builder.create_warc_record(...)``.
        self.builder = WARCWriter(None, gzip=gzip, warc_version="1.1")
        self.hostname = socket.gethostname()
        self.directory.mkdir(parents=True, exist_ok=True)
        # Before recovery, which renames every .open file of the prefix: a second writer
        # must not "recover" the file a live one is still appending to.
        self._lock = DirectoryLock(self.directory, f".{prefix}.lock", what="WARC output directory")
        self._lock.acquire()
        #: What recovery did at construction, one entry per ``.open`` file found.
        try:
            self.recovered: list[RecoveredFile] = (
                recover_open_files(self.directory, prefix) if recover else []
            )
        except BaseException:
            self._lock.release()
            raise
        self.serial = 0  # serial of the next file
        self.records = 0  # records written by write() (warcinfo records not included)
        self.bytes = 0  # bytes written to files (warcinfo included)
        self.files = 0  # files opened
        self.finished: list[Path] = []  # files finished (renamed) by this writer
        self._file: io.FileIO | None = None
        self._path: Path | None = None  # final name of the open file
        self._size = 0

    # -- public API -------------------------------------------------------------------------
    @property
    def extension(self) -> str:
        return ".warc.gz" if self.gzip else ".warc"

    @property
    def current_path(self) -> Path | None:
        """The ``.open`` path of the file being written, if any."""
        return self._open_path(self._path) if self._path is not None else None

    def create_record(self, uri: str, record_type: str, **kwargs: Any) -> ArcWarcRecord:
        """warcio's ``create_warc_record`` (WARC/1.1 headers)."""
        return self.builder.create_warc_record(uri, record_type, **kwargs)

    def write(self, *records: ArcWarcRecord) -> int:
        """Append ``records`` to the current file, in order, in the same file; return bytes.

        A record that cannot be serialised raises before anything is written. An I/O error
        cuts the file back to its last whole record (or abandons it as ``.open`` for the
        next run's recovery) and is raised; the next call starts afresh.
        """
        if not records:
            return 0
        # Not joined into one bytes object: that would copy a body of up to
        # DOWNLOAD_MAXSIZE once more. Each record is still one write() call.
        chunks = [self._serialize(record) for record in records]
        if self._file is None:
            self._open_new()
        self._append(*chunks)
        self.records += len(records)
        if self._size >= self.max_bytes:
            self._finish()
        return sum(len(chunk) for chunk in chunks)

    def close(self) -> None:
        """Finish the current file (flush, fsync, rename); later writes open a new one."""
        if self._file is not None:
            self._finish()

    def release(self) -> None:
        """Finish the current file and give up the directory lock: the writer is done."""
        try:
            self.close()
        finally:
            self._lock.release()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    # -- internals --------------------------------------------------------------------------
    def _serialize(self, record: ArcWarcRecord) -> bytes:
        buffer = io.BytesIO()
        self.builder.out = buffer
        try:
            self.builder.write_record(record)
        finally:
            self.builder.out = None
        return buffer.getvalue()

    @staticmethod
    def _open_path(path: Path) -> Path:
        return path.with_name(path.name + OPEN_SUFFIX)

    def _open_new(self) -> None:
        if not self._lock.held:
            raise RuntimeError(f"{self.directory}: WARC writer used after release()")
        stamp = file_timestamp(self.clock())
        for _ in range(_NAME_ATTEMPTS):
            path = (
                self.directory
                / f"{self.prefix}-{stamp}-{self.serial:05d}{self.extension}"
            )
            self.serial += 1
            if path.exists():
                continue
            try:
                handle = open(self._open_path(path), "xb", buffering=0)  # noqa: SIM115
            except FileExistsError:
                continue
            break
        else:
            raise FileExistsError(f"no free WARC file name for {self.prefix}-{stamp}")
        assert isinstance(handle, io.FileIO)
        self._file, self._path, self._size = handle, path, 0
        try:
            self._append(self._serialize(self._warcinfo(path.name)))
        except BaseException:
            # Nothing but (part of) a warcinfo record: remove it rather than leave it to
            # recovery, or a full disk would leave one empty .open file per response.
            self._abandon()
            try:
                self._open_path(path).unlink()
            except OSError:
                pass  # left as .open: the next run's recovery removes it
            raise
        self.files += 1

    def _warcinfo(self, filename: str) -> ArcWarcRecord:
        info = {
            "software": SOFTWARE,
            "hostname": self.hostname,
            "format": WARC_FORMAT,
            "conformsTo": CONFORMS_TO,
            **self.info,
        }
        record = self.builder.create_warcinfo_record(filename, info)
        record.rec_headers.replace_header("WARC-Date", warc_date(self.clock()))
        return record

    def _append(self, *chunks: bytes) -> None:
        """Write ``chunks`` in order; on any error, cut the file back to before the first."""
        assert self._file is not None
        try:
            for data in chunks:
                view = memoryview(data)
                while view:  # FileIO.write may write less than asked; each pass makes progress
                    written = self._file.write(view)
                    if not written:
                        raise OSError(f"could not write to {self.current_path}")
                    view = view[written:]
        except BaseException:
            self._rollback()
            raise
        size = sum(len(data) for data in chunks)
        self._size += size
        self.bytes += size

    def _rollback(self) -> None:
        """Cut a failed append off, or abandon the file to recovery if that fails too."""
        assert self._file is not None
        try:
            self._file.truncate(self._size)
            self._file.seek(self._size)
        except OSError:
            self._abandon()

    def _abandon(self) -> None:
        handle, self._file, self._path = self._file, None, None
        if handle is not None:
            try:
                handle.close()
            except OSError:
                pass

    def _finish(self) -> None:
        handle, path = self._file, self._path
        assert handle is not None and path is not None
        self._file, self._path = None, None
        try:
            handle.flush()
            os.fsync(handle.fileno())
        finally:
            handle.close()
        self.finished.append(_give_final_name(self._open_path(path), self.gzip))
