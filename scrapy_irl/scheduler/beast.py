"""BEAST: budget enforcement with disk queues Q_1..Q_j and Q_F (thesis chapter VII section 2).

Each entry carries the (B_x, P_x) STAR attached to its URL. While Q_c is read, an entry
with k = floor(P_x / B_x) goes to the k-th queue after Q_c (wrapping around the ring), if
k < j - 1, else to Q_F: the first B_x URLs of a PLD to the next queue, the next B_x to the
one after, and so on. When the last queue of the ring has been read, Q_F is re-read and
split into j new queues (j doubles, up to ``max_queues``) with budgets recomputed; entries
that still do not fit form the new Q_F. Q_F is thus re-read at exponentially growing
intervals, and nothing is discarded for budget reasons (at the cap, what a re-read
leaves in Q_F has the ring pass just read taken off its k, so the window moves on as
doubling moves it before). When every queue is empty the
cycle is fast-forwarded, and the split of Q_F starts at its smallest k, so the crawl
always progresses. The *parked* queue holds what a frontier written before 2026-11-28
parked here for a backlog (the scheduler parks in :mod:`.parking` now): out of
:meth:`Beast.pop`'s reach until :meth:`Beast.unpark`, which the scheduler calls once, at
open. A record whose host waits for a retry of its DNS
lookup or robots.txt fetch is parked apart (:meth:`Beast.park_for_retry`), in a queue of
records due in the same time bucket (at most an eighth of the wait wide, at least 1 s),
and comes back when its bucket is due (:meth:`Beast.release_retries`): not a whole unpark
period late, and without re-reading the backlog or records not due yet. Records outside
the budgets (``dont_filter``
requests, and RAM saved at a graceful stop) go to the *front* queue, read first.

On disk (``directory``): one append-only file per queue, ``q<id>.beast``, of CRC-framed
batches (see :mod:`scrapy_irl.drum.records`), each entry ``<B_x u32><P_x u32><record>``;
and ``STATE``, a checksummed JSON written atomically, with the ring, Q_F, the parked
queue, the retry queues (their due times are not kept: a restart reads them at once)
and the unparked ones still being read, and per queue
the read position of its oldest entry still held in RAM by the caller plus the entries
after it already finished (so a restart re-reads exactly what was not finished). Writes
are buffered and made durable by :meth:`sync` (the scheduler calls it every
``IRL_DRUM_FLUSH_INTERVAL``). STATE records each queue's length: what follows it (frames
written after the last save, a torn tail) is cut on open, since a Q_F re-read or a park
after the save copies records whose originals STATE still owes; a bad checksum raises :class:`~scrapy_irl.exceptions.FrontierCorruptionError`.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import os
import struct
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from scrapy_irl.drum.manifest import fsync_directory
from scrapy_irl.drum.records import (
    FRAME_HEADER,
    decode_aux,
    encode_aux,
    encode_frame,
    iter_frames,
    scan_frames_streaming,
)
from scrapy_irl.exceptions import DrumCorruptionError, FrontierCorruptionError

MAGIC = b"BQE1"
#: 2 (2026-11-27): retry queues. An older scrapy-irl refuses a version 2 STATE by name
#: rather than delete the retry queues' files as strays (their URLs would be lost).
#: 3 (2026-11-27): a queue's finished entries as one bitmap per frame (see
#: :class:`FinishedMarks`); an older scrapy-irl would misread them.
STATE_VERSION = 4
#: Q_F entries a re-read handles per call (see :meth:`Beast._split_slice`): about 50 ms of
#: the reactor's time at 25 us an entry (a PLD lookup each).
SPLIT_SLICE = 2_000
_ENTRY = struct.Struct("<II")
#: Longest wait of a record parked for a retry (seconds; a day): a due time beyond it, or
#: infinite, would make a bucket no clock reaches.
MAX_RETRY_WAIT = 86_400.0
#: A fully read front queue whose file has reached this size is replaced by a new one.
FRONT_ROTATE_BYTES = 4 * 1024 * 1024

logger = logging.getLogger(__name__)

Token = tuple[int, int, int]  # queue id, frame offset, index in frame
Rebudget = Callable[[bytes], "int | None"]


class FinishedMarks:
    """Entries finished past a queue's cursor: one bit per entry, an int per frame.

    A record held long (a slow download, a host waiting its turn) keeps its queue's cursor
    back while every entry read after it finishes, so the marks grow with the crawl rate
    times the longest hold. Kept as a set of (offset, index) pairs, each save sorted and
    wrote all of them (330 ms at 100 000 marks, every second). A frame's marks are one
    int here, written to STATE as hex: a few hundred bytes per frame of ~1 000 entries.
    """

    __slots__ = ("_frames", "count")

    def __init__(self) -> None:
        self._frames: dict[int, int] = {}  # frame offset -> bit i set: entry i finished
        self.count = 0

    def __contains__(self, key: tuple[int, int]) -> bool:
        offset, index = key
        return bool((self._frames.get(offset, 0) >> index) & 1)

    def __len__(self) -> int:
        return self.count

    def add(self, offset: int, index: int) -> None:
        mask = self._frames.get(offset, 0)
        bit = 1 << index
        if not mask & bit:
            self._frames[offset] = mask | bit
            self.count += 1

    def discard(self, offset: int, index: int) -> None:
        mask = self._frames.get(offset, 0)
        bit = 1 << index
        if mask & bit:
            mask &= ~bit
            if mask:
                self._frames[offset] = mask
            else:
                del self._frames[offset]
            self.count -= 1

    def cut(self, offset: int, index: int) -> None:
        """Forget the marks before entry ``index`` of the frame at ``offset``."""
        for frame in [f for f in self._frames if f <= offset]:
            mask = self._frames.pop(frame)
            self.count -= mask.bit_count()
            if frame == offset:
                mask = (mask >> index) << index
                if mask:
                    self._frames[frame] = mask
                    self.count += mask.bit_count()

    def count_from(self, offset: int) -> int:
        """How many marks lie in frames at ``offset`` or later."""
        return sum(m.bit_count() for f, m in self._frames.items() if f >= offset)

    def encode(self, offset: int, index: int) -> list[list[Any]]:
        """The marks from entry ``index`` of the frame at ``offset`` on, for STATE:
        ``[[frame offset, "hex bitmap"], ...]`` in frame order."""
        out = []
        for frame in sorted(self._frames):
            mask = self._frames[frame]
            if frame == offset:
                mask = (mask >> index) << index
            if frame >= offset and mask:
                out.append([frame, format(mask, "x")])
        return out

    @classmethod
    def decode(cls, saved: list[Any]) -> FinishedMarks:
        """Read :meth:`encode`'s form, or version 1-2's ``[[offset, index], ...]``."""
        marks = cls()
        for frame, bits in saved:
            frame = int(frame)
            if isinstance(bits, str):
                mask = int(bits, 16)
                if frame < 0 or mask < 0:
                    raise ValueError(f"bad finished marks {frame!r}: {bits!r}")
                marks._frames[frame] = marks._frames.get(frame, 0) | mask
            else:
                if int(bits) < 0:
                    raise ValueError(f"bad finished mark {frame!r}, {bits!r}")
                marks._frames[frame] = marks._frames.get(frame, 0) | (1 << int(bits))
        marks.count = sum(m.bit_count() for m in marks._frames.values())
        return marks


class _Queue:
    """One queue file: buffered appends, a read cursor, and the entries handed out."""

    def __init__(self, directory: Path, qid: int, *, read_at: int = 0, skip_index: int = 0,
                 finished: FinishedMarks | None = None,
                 durable_length: int | None = None) -> None:  # fmt: skip
        self.qid = qid
        self.path = directory / f"q{qid:08d}.beast"
        self.buffer: list[bytes] = []
        self.buffer_bytes = 0
        self.read_offset = read_at  # next frame to load
        self.frame: list[bytes] = []
        self.frame_offset = read_at
        self.frame_index = 0
        self.skip_index = skip_index  # entries of the first frame already finished
        self._first_offset = read_at if skip_index else -1
        self.finished = (
            finished if finished is not None else FinishedMarks()
        )  # (frame offset, index) finished past the cursor
        self.outstanding: OrderedDict[tuple[int, int], None] = OrderedDict()
        self.size = 0  # entries written and not yet read
        self.unsynced = False  # written since the last fsync
        self.torn_bytes = 0
        self.unsaved_bytes = 0  # whole frames after the saved length, cut on open
        self.length = 0  # bytes of whole frames in the file (what STATE records at a save)
        if self.path.exists():
            self._recover(durable_length)
        elif durable_length:
            raise FrontierCorruptionError(
                f"{self.path}: missing, but STATE says {durable_length} bytes of this queue "
                "were written before it was saved (a kill cannot delete a file); refusing "
                "to resume without part of the frontier. Restore the file, or delete the "
                "whole frontier directory to start afresh."
            )
        else:
            self.path.touch()

    def _recover(self, durable_length: int | None) -> None:
        """Count the entries left to read and cut what follows the saved length (a torn
        tail, frames written after the last save; RAM: one frame at a time).

        Only what was written after the last STATE can be torn: whole frames shorter than
        the length STATE recorded mean the file was cut or damaged, which is refused.
        """
        try:
            with open(self.path, "rb") as handle:
                scan = scan_frames_streaming(handle, MAGIC, str(self.path), aux_layout=True)
        except DrumCorruptionError as exc:
            raise FrontierCorruptionError(str(exc)) from exc
        if durable_length is not None and scan.valid_length < durable_length:
            raise FrontierCorruptionError(
                f"{self.path}: {scan.valid_length} bytes of whole frames, but STATE says "
                f"{durable_length} were written before it was saved: the file was truncated "
                "or damaged after that (a kill only tears what follows); refusing to resume "
                "without part of the frontier."
            )
        frames = scan.frames
        end = scan.valid_length
        if durable_length is not None and end > durable_length:
            # Whole frames written after the last save are not part of it: a Q_F re-read
            # or a park after the save copies records whose originals STATE still owes
            # (Q_F's cursor, the parked record's token), so reading them too hands those
            # records out twice. Only the write-out window is lost (nothing acknowledged).
            frames = [frame for frame in frames if frame.end <= durable_length]
            if (frames[-1].end if frames else 0) != durable_length:
                raise FrontierCorruptionError(
                    f"{self.path}: STATE says {durable_length} bytes were written before "
                    "it was saved, which is not a frame boundary of the file; refusing "
                    "to guess where the saved queue ends."
                )
            self.unsaved_bytes = end - durable_length
            end = durable_length
        self.length = end
        if end < scan.valid_length + scan.torn_bytes:
            self.torn_bytes = scan.torn_bytes
            with open(self.path, "r+b") as handle:
                handle.truncate(end)
        start = 0
        for frame in frames:
            if start >= self.read_offset:
                self.size += frame.count
            start = frame.end
        if self.read_offset > end:
            raise FrontierCorruptionError(
                f"{self.path}: STATE points past the end of the queue"
            )
        self.size -= self.skip_index + self.finished.count_from(self.read_offset)

    def append(self, entry: bytes) -> None:
        self.buffer.append(entry)
        self.buffer_bytes += len(entry)
        self.size += 1

    def write_buffer(self) -> int:
        if not self.buffer:
            return 0
        frame = encode_frame(MAGIC, len(self.buffer), encode_aux(self.buffer))
        with open(self.path, "ab") as handle:
            handle.write(frame)
        self.length += len(frame)
        self.buffer, self.buffer_bytes = [], 0
        self.unsynced = True
        return len(frame)

    def _load_frame(self) -> bool:
        self.write_buffer()  # reading must see everything pushed so far
        with open(self.path, "rb") as handle:
            handle.seek(self.read_offset)
            head = handle.read(16)
            if len(head) < 16:
                return False
            magic, count, length, crc = struct.unpack("<4sIII", head)
            payload = handle.read(length)
        if magic != MAGIC or len(payload) != length or zlib.crc32(payload) != crc:
            raise FrontierCorruptionError(
                f"{self.path}: bad frame at offset {self.read_offset}"
            )
        try:
            offsets, blob = decode_aux(payload, count, str(self.path))
        except DrumCorruptionError as exc:
            raise FrontierCorruptionError(str(exc)) from exc
        self.frame = [blob[offsets[i] : offsets[i + 1]] for i in range(count)]
        self.frame_offset = self.read_offset
        self.frame_index = 0
        self.read_offset += 16 + length
        return True

    def pop(self) -> tuple[bytes, Token] | None:
        for _ in range(1 << 20):  # bounded: each turn consumes an entry or a frame
            if self.frame_index < len(self.frame):
                index = self.frame_index
                self.frame_index += 1
                # Read past: the frame keeps no copy. A retired queue lives while one of
                # its records is held in RAM, and kept every entry of its last frame (up
                # to buffer_bytes): with hosts waiting on a busy IP, hundreds of such
                # queues, 100 MiB per million URLs parked (frontier benchmark, 2026-11-28).
                entry, self.frame[index] = self.frame[index], b""
                if self._skipped(self.frame_offset, index):
                    if not self.outstanding:
                        # The mark is below any cursor from now on. With an older entry
                        # still owed, the cursor stays before it and the mark must stay.
                        self.finished.discard(self.frame_offset, index)
                    continue
                self.size -= 1
                key = (self.frame_offset, index)
                self.outstanding[key] = None
                return entry, (self.qid, self.frame_offset, index)
            if not self._load_frame():
                return None
        return None

    def _skipped(self, offset: int, index: int) -> bool:
        return (offset == self._first_offset and index < self.skip_index) or (
            offset,
            index,
        ) in self.finished

    def unread(self) -> Iterator[bytes]:
        """The entries :meth:`pop` would return, in order, without taking them.

        Streams the file one frame at a time, so a pass over a Q_F of any size needs the
        RAM of one frame.
        """
        self.write_buffer()
        for index in range(self.frame_index, len(self.frame)):
            if not self._skipped(self.frame_offset, index):
                yield self.frame[index]
        offset = self.read_offset
        with open(self.path, "rb") as handle:
            handle.seek(offset)
            try:
                for frame in iter_frames(handle, MAGIC, str(self.path)):
                    offsets, blob = decode_aux(frame.payload, frame.count, str(self.path))
                    for index in range(frame.count):
                        if not self._skipped(offset, index):
                            yield blob[offsets[index] : offsets[index + 1]]
                    offset += FRAME_HEADER.size + len(frame.payload)
            except DrumCorruptionError as exc:
                raise FrontierCorruptionError(str(exc)) from exc

    def cursor(self) -> tuple[int, int]:
        """(frame offset, skip index) to resume from."""
        if self.outstanding:
            offset, index = next(iter(self.outstanding))
        elif self.frame_index < len(self.frame):
            offset, index = self.frame_offset, self.frame_index
        elif self.read_offset == self._first_offset:
            # Restored and not read since: the first frame's finished entries still count
            # (dropping them made a second kill re-read, and re-fetch, those entries).
            offset, index = self.read_offset, self.skip_index
        else:
            offset, index = self.read_offset, 0
        return offset, index

    def saved_cursor(self) -> list[Any]:
        """STATE's ``[frame offset, skip index, finished marks past it]``."""
        offset, index = self.cursor()
        return [offset, index, self.finished.encode(offset, index)]

    def done(self, offset: int, index: int) -> None:
        self.outstanding.pop((offset, index), None)
        if self.outstanding:
            first = next(iter(self.outstanding))
            if (offset, index) > first:
                self.finished.add(offset, index)
                return
        # nothing older is outstanding: drop finished marks below the new cursor
        self.finished.cut(*self.cursor())

    @property
    def exhausted(self) -> bool:
        return self.size <= 0 and not self.buffer

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)


class Beast:
    """The ring of queues Q_1..Q_j plus Q_F, persisted in ``directory``."""

    def __init__(
        self,
        directory: Path,
        *,
        initial_queues: int = 2,
        max_queues: int = 64,
        buffer_bytes: int = 256 * 1024,
        fsync: bool = True,
        rebudget: Rebudget | None = None,
    ) -> None:
        if not 2 <= initial_queues <= max_queues:
            raise ValueError(
                f"need 2 <= IRL_BEAST_QUEUES <= IRL_BEAST_MAX_QUEUES, got {initial_queues}, {max_queues}"
            )
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.max_queues = max_queues
        self.buffer_bytes = buffer_bytes
        self.fsync = fsync
        self.rebudget = rebudget
        self.rescans = 0
        self.placed_in_qf = 0
        self.requeued = 0
        self.front_pushed = 0
        self.retry_parked_total = 0
        #: Records parked for a retry, one queue per due bucket: (bucket width, index)
        #: -> queue, due at width x index (the caller's clock). The due times are not
        #: saved: a restart reads the queues at once.
        self._retry_buckets: dict[tuple[float, int], _Queue] = {}
        #: Per producer, the last result epoch whose records this STATE holds (STAR's
        #: pld_indegree): saved with the queues, so a producer whose acknowledgement a
        #: kill prevented can tell, when it delivers that epoch again, that its records
        #: are already queued (see :class:`~scrapy_irl.scheduler.star.Star`).
        self.applied: dict[str, int] = {}
        self._queues: dict[int, _Queue] = {}
        self._draining: list[_Queue] = []
        self._resumed: list[_Queue] = []
        self._returning: list[_Queue] = []  # parked queues handed back by unpark()
        #: A re-read of Q_F under way (see :meth:`_rescan`): the old Q_F being split, the
        #: k its first new queue takes, the first new queue's index, how many there are.
        self._split: _Split | None = None
        #: The read-only pass finding the smallest k before a re-read into an empty ring:
        #: (Q_F's entries still to look at, smallest k so far). Not saved: a restart
        #: begins it again.
        self._finding: tuple[Iterator[bytes], int | None] | None = None
        #: how many URLs the parked store must hold at least, saved with each STATE (the
        #: scheduler sets it), and the value the last run's STATE saved (None: not saved)
        self.parked_floor: Callable[[], int] | None = None
        self.saved_parked_floor: int | None = None
        #: the parked store's [epoch, seq] of the last fresh park this BEAST forgot, saved
        #: with each STATE (the scheduler sets it), and the value of the last STATE saved
        #: or read (None: none, or written before 2026-11-29)
        self.parked_mark: Callable[[], list[int]] | None = None
        self.saved_parked_mark: list[int] | None = None
        #: called at the start and the end of every save (the scheduler's: let BEAST
        #: forget what the parked store holds durably, then delete from the store what
        #: this save made durable elsewhere), whoever asked for the save
        self.before_save: Callable[[], None] | None = None
        self.after_save: Callable[[], None] | None = None
        state = self._read_state()
        if state is None:
            self._refuse_orphan_queues()
            self._next_id = 0
            self.ring = [self._new_queue() for _ in range(initial_queues)]
            self.current = 0
            self.qf = self._new_queue()
            self.front = self._new_queue()  # requeued at a graceful stop: read first
            self.parked = self._new_queue()  # a legacy frontier's backlog (see unpark)
            self.save()
        else:
            try:
                self._restore(state)
            except (KeyError, IndexError, TypeError, ValueError) as exc:
                # A STATE whose checksum matches but whose content does not (edited by
                # hand, or written by a buggy version): refuse, naming it.
                raise FrontierCorruptionError(
                    f"{self._state_path()}: inconsistent BEAST state ({exc!r})"
                ) from exc
        self._remove_strays()

    # -- state -----------------------------------------------------------------------------
    @property
    def j(self) -> int:
        return len(self.ring)

    def _new_queue(self, **cursor: Any) -> _Queue:
        qid = self._next_id
        self._next_id += 1
        # A new id is never a queue STATE knows; a file of that name is a stray (frames a
        # killed run wrote after its last save). Before the strays are removed at open (a
        # STATE of an older version gets its missing queues made here), it would be taken
        # for this queue's contents, copies of records STATE still owes.
        (self.directory / f"q{qid:08d}.beast").unlink(missing_ok=True)
        queue = _Queue(self.directory, qid, **cursor)
        self._queues[qid] = queue
        return queue

    def _state_path(self) -> Path:
        return self.directory / "STATE"

    def _read_state(self) -> dict[str, Any] | None:
        path = self._state_path()
        if not path.exists():
            return None
        try:
            wrapper = json.loads(path.read_text())
            body = wrapper["body"]
            if (
                zlib.crc32(json.dumps(body, sort_keys=True).encode())
                != wrapper["crc32"]
            ):
                raise ValueError("checksum mismatch")
        except (ValueError, KeyError, TypeError) as exc:
            raise FrontierCorruptionError(
                f"{path}: unreadable BEAST state ({exc})"
            ) from exc
        if body.get("version", 0) > STATE_VERSION:
            raise FrontierCorruptionError(
                f"{path}: written by BEAST format {body['version']}; this scrapy-irl reads {STATE_VERSION}"
            )
        return body  # type: ignore[no-any-return]

    def _restore(self, state: dict[str, Any]) -> None:
        self._next_id = state["next_id"]
        cursors = state["cursors"]

        # Bytes each queue held when STATE was saved (absent in STATEs of earlier versions).
        lengths: dict[str, int] = state.get("lengths", {})

        def load(qid: int, retired: bool = False) -> _Queue:
            offset, skip, finished = cursors.get(str(qid), (0, 0, []))
            durable = lengths.get(str(qid))
            path = self.directory / f"q{qid:08d}.beast"
            if (retired and offset and (durable is None or offset >= durable)
                    and (not path.exists() or path.stat().st_size == 0)):  # fmt: skip
                # A read-out queue deleted after a commit that still named it (the order
                # of earlier versions): nothing in it is owed.
                logger.warning("BEAST queue %s was deleted after being read out; resuming "
                               "without it", path)  # fmt: skip
                offset, skip, finished, durable = 0, 0, [], None
            queue = _Queue(self.directory, qid, read_at=offset, skip_index=skip,
                           finished=FinishedMarks.decode(finished),
                           durable_length=durable)  # fmt: skip
            self._queues[qid] = queue
            return queue

        self.ring = [load(q) for q in state["ring"]]
        self.current = state["current"]
        if not (isinstance(self.current, int) and 0 <= self.current < len(self.ring)):
            raise ValueError(f"current queue {self.current!r} is not in a ring of {self.j}")
        self.qf = load(state["qf"])
        self.front = load(state["front"])
        self.parked = load(state["parked"]) if "parked" in state else self._new_queue()
        self._returning = [load(q) for q in state.get("returning", [])]
        # Retry queues of the last run: due times unknown, so readable at once (their
        # records are parked again if their retry is still ahead). Absent before version 2.
        retrying = state.get("retrying", [])
        # (a single id: the one retry queue of a development build of 2026-11-27)
        self._returning += [load(q) for q in ([retrying] if isinstance(retrying, int) else retrying)]
        self._draining = [load(q, retired=True) for q in state["draining"]]
        # Retired queues still owing records (held in RAM when the last run stopped).
        self._resumed = [q for q in self._draining if q.size > 0]
        self.rescans = state.get("rescans", 0)
        split = state.get("split")  # absent before version 4, and between re-reads
        if split is not None:
            old = load(split["from"])
            self._split = _Split(old, int(split["shift"]), int(split["first_new"]),
                                 int(split["slots"]))  # fmt: skip
            if not 0 <= self._split.first_new <= self._split.first_new + self._split.slots <= self.j:
                raise ValueError(f"re-read into queues {split!r} outside a ring of {self.j}")
        floor = state.get("parked_floor")  # absent before 2026-11-28
        if floor is not None and not isinstance(floor, int):
            raise TypeError(f"parked_floor {floor!r} is not an integer")
        self.saved_parked_floor = floor
        mark = state.get("parked_mark")  # absent before 2026-11-29
        if mark is not None and not (isinstance(mark, list) and len(mark) == 2
                                     and all(isinstance(n, int) and n >= 0 for n in mark)):  # fmt: skip
            raise TypeError(f"parked_mark {mark!r} is not a pair of counts")
        self.saved_parked_mark = mark
        applied = state.get("applied", {})  # absent in STATEs of earlier versions
        if not isinstance(applied, dict):
            raise TypeError(f"applied {applied!r} is not a mapping")
        self.applied.update({str(k): int(v) for k, v in applied.items()})

    def _refuse_orphan_queues(self) -> None:
        """Queue files with data but no STATE: the frontier lost its index, not its data.
        Starting afresh would delete them (strays), so refuse, as DRUM does without MANIFEST."""
        orphans = [p.name for p in sorted(self.directory.glob("q*.beast")) if p.stat().st_size]
        if orphans:
            raise FrontierCorruptionError(
                f"{self._state_path()}: missing, but {len(orphans)} queue files with data "
                f"are present ({', '.join(orphans[:3])}{', ...' if len(orphans) > 3 else ''}); "
                "refusing to guess which entries are owed. Restore STATE, or delete the "
                "whole frontier directory to start afresh."
            )

    def _remove_strays(self) -> None:
        known = {q.path.name for q in self._queues.values()}
        for path in self.directory.glob("q*.beast"):
            if path.name not in known:
                path.unlink()

    def save(self) -> None:
        """Write buffered entries, then commit STATE atomically (call at least every second).

        Retired queues that are read out and owe nothing leave STATE in this commit and
        their files are deleted after it: a STATE never names a deleted file (deleting
        before a commit that still named it let a kill between the two leave a STATE
        pointing into a missing queue).
        """
        if self.before_save is not None:
            self.before_save()
        retired = [q for q in self._draining if not q.outstanding and q.exhausted]
        for queue in retired:
            self._draining.remove(queue)
            del self._queues[queue.qid]
        if retired and self._resumed:
            # A queue a resumed run still owed can be read out and finished before pop()
            # looks at it again: it must not be asked for another frame of a deleted file.
            self._resumed = [q for q in self._resumed if q not in retired]
        for queue in self._queues.values():
            queue.write_buffer()
        if self.fsync:
            for queue in self._queues.values():
                if not queue.unsynced:
                    continue  # nothing written since its last fsync
                fd = os.open(queue.path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
                queue.unsynced = False
        body = {
            "version": STATE_VERSION,
            "next_id": self._next_id,
            "ring": [q.qid for q in self.ring],
            "current": self.current,
            "qf": self.qf.qid,
            "front": self.front.qid,
            "parked": self.parked.qid,
            "retrying": [q.qid for q in self._retry_buckets.values()],
            "returning": [q.qid for q in self._returning],
            "draining": [q.qid for q in self._draining],
            "rescans": self.rescans,
            "split": None if self._split is None else {
                "from": self._split.old.qid, "shift": self._split.shift,
                "first_new": self._split.first_new, "slots": self._split.slots,
            },
            "applied": self.applied,
            "cursors": {str(q.qid): q.saved_cursor() for q in self._queues.values()},
            "lengths": {str(q.qid): q.length for q in self._queues.values()},
        }
        # Without a parked store wired in (an open that failed before it was: a floor
        # refused, a full disk), the last STATE's values are kept: saved as None, the
        # next start skipped the floor's check and took every marked park for owed.
        floor = self.parked_floor() if self.parked_floor is not None else self.saved_parked_floor
        if floor is not None:
            body["parked_floor"] = int(floor)
        mark = self.parked_mark() if self.parked_mark is not None else self.saved_parked_mark
        if mark is not None:
            body["parked_mark"] = [int(n) for n in mark]
        text = json.dumps(
            {
                "body": body,
                "crc32": zlib.crc32(json.dumps(body, sort_keys=True).encode()),
            }
        )
        tmp = self._state_path().with_suffix(".tmp")
        with open(tmp, "w") as handle:
            handle.write(text)
            if self.fsync:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, self._state_path())
        if self.fsync:
            fsync_directory(self.directory)
        if "parked_mark" in body:
            self.saved_parked_mark = body["parked_mark"]
        for queue in retired:
            queue.delete()
        if self.after_save is not None:
            self.after_save()

    sync = save

    # -- placement -------------------------------------------------------------------------
    def push(self, record: bytes, budget: int, admitted: int) -> None:
        """Place a unique URL's record by its PLD's budget B_x and admitted count P_x."""
        budget = max(1, int(budget))
        k = int(admitted) // budget
        entry = _ENTRY.pack(budget, min(int(admitted), 0xFFFFFFFF)) + record
        if k < self.j - 1:
            target = self.ring[(self.current + 1 + k) % self.j]
        else:
            target = self.qf
            self.placed_in_qf += 1
        self._append(target, entry)

    def unpark(self) -> int:
        """Make everything parked so far for a backlog readable again (before the ring);
        returns how many. Records parked for a retry wait for :meth:`release_retries`."""
        count = self.parked.size
        if count <= 0:
            return 0
        self._returning.append(self.parked)
        self.parked = self._new_queue()
        return count

    def park_for_retry(self, record: bytes, due: float, now: float) -> None:
        """Hold a record back until ``due`` (the caller's clock, now ``now``): its host
        waits for a retry of its DNS lookup or of its robots.txt fetch.

        It joins the queue of its due bucket: at most an eighth of the wait wide (a power
        of two of seconds, at least 1 s), so records come back at most that late, each
        bucket is one file, and a crawl with failures spread over hours keeps a few dozen
        of them (eight to sixteen per doubling of the wait). A wait is capped at
        MAX_RETRY_WAIT."""
        due = min(due, now + MAX_RETRY_WAIT) if math.isfinite(now) else due
        width = 2.0 ** max(0, math.floor(math.log2(max(1.0, (due - now) / 8))))
        key = (width, math.ceil(due / width))
        queue = self._retry_buckets.get(key)
        if queue is None:
            queue = self._retry_buckets[key] = self._new_queue()
        self.retry_parked_total += 1
        self._append(queue, _ENTRY.pack(1, 0) + record)

    @property
    def retry_due(self) -> float:
        """When the earliest retry bucket is due (the caller's clock; inf: none)."""
        return min((width * index for width, index in self._retry_buckets), default=math.inf)

    def release_retries(self, now: float = math.inf) -> int:
        """Make the records of every retry bucket due at ``now`` readable again (all of
        them by default); returns how many."""
        count = 0
        for key in [k for k in self._retry_buckets if k[0] * k[1] <= now]:
            queue = self._retry_buckets.pop(key)
            count += queue.size
            self._returning.append(queue)
        return count

    def requeue(self, record: bytes) -> None:
        """Put back a record taken from BEAST but not crawled (graceful stop): read first."""
        self.requeued += 1
        self._append(self.front, _ENTRY.pack(1, 0) + record)

    def push_front(self, record: bytes) -> None:
        """Queue a record outside the budgets (``dont_filter``: retries, start URLs).

        On disk like every other record, so a flood of them does not grow RAM and a
        kill -9 loses none older than the write-out window; read before the ring.
        """
        self.front_pushed += 1
        self._append(self.front, _ENTRY.pack(1, 0) + record)

    def _rotate_front(self) -> None:
        """Retire a fully read front queue once its file is large, so it cannot grow forever.

        The front queue is appended to while it is read (records pushed with
        :meth:`push_front`); like any retired queue, its file is deleted once no record
        read from it is still held in RAM.
        """
        if self.front.exhausted and self.front.read_offset >= FRONT_ROTATE_BYTES:
            self._draining.append(self.front)
            self.front = self._new_queue()

    def _append(self, queue: _Queue, entry: bytes) -> None:
        queue.append(entry)
        if queue.buffer_bytes >= self.buffer_bytes:
            queue.write_buffer()

    # -- reading ---------------------------------------------------------------------------
    def pop(self) -> tuple[bytes, Token] | None:
        """The next record to crawl and its token (pass it to :meth:`done` once it left RAM)."""
        got = self.front.pop()
        if got is not None:
            return got[0][_ENTRY.size :], got[1]
        self._rotate_front()
        while self._resumed:  # records a previous run took but never finished: first
            got = self._resumed[0].pop()
            if got is not None:
                return got[0][_ENTRY.size :], got[1]
            self._resumed.pop(0)
        while self._returning:  # unparked: read before the ring, like the front queue
            got = self._returning[0].pop()
            if got is not None:
                return got[0][_ENTRY.size :], got[1]
            self._draining.append(self._returning.pop(0))
        if self._finding is not None and not self._find_slice():
            return None  # the smallest k is not known yet: the next call goes on
        if self._split is not None:
            self._split_slice()
        if sum(q.size for q in self.ring) + self.qf.size <= 0:
            return None  # nothing queued: do not spin the ring (it would churn files)
        for _ in range(4 * self.max_queues + 4):  # bounded: a few full cycles at most
            if self._split is not None and self.current >= self._split.first_new:
                return None  # a queue the re-read still fills: read once it is over
            queue = self.ring[self.current]
            got = queue.pop()
            if got is not None:
                return got[0][_ENTRY.size :], got[1]
            if self._split is None and not self.qf.exhausted and all(q.exhausted for q in self.ring):
                self._fast_forward()
                if self._finding is not None or self._split is not None:
                    return None  # begun: it goes on at the next calls
                continue
            self._advance()
            if all(q.exhausted for q in self.ring) and self.qf.exhausted:
                return None
        return None

    def _fast_forward(self) -> None:
        """Every queue of the ring is empty and Q_F is not: re-read Q_F now.

        Walking to the end of the ring (:meth:`_advance` per queue) retired each empty
        queue and created a file for its successor: up to j file creations and reads per
        Q_F re-read, when only Q_F holds work (every PLD over its budget, as with a few
        big sites), 6 800 in 30 s of a 3-site crawl. Only queues that were written to are
        retired here (read-out files must not grow forever); never-used ones stay.
        The re-read starts at the smallest k in Q_F, found by a read-only pass first,
        a slice per call (:meth:`_find_slice`).
        """
        for i, queue in enumerate(self.ring):
            if queue.length or queue.outstanding:
                self._draining.append(queue)
                self.ring[i] = self._new_queue()
        self.current = 0
        self._finding = (self.qf.unread(), None)
        self._find_slice()

    def _find_slice(self) -> bool:
        """Look at the next SPLIT_SLICE entries of Q_F for the smallest k; at the end,
        begin the re-read from it. True when the pass and the re-read are both over."""
        assert self._finding is not None
        entries, smallest = self._finding
        seen = 0
        for entry in itertools.islice(entries, SPLIT_SLICE):
            seen += 1
            k = self._placed(entry)[0]
            smallest = k if smallest is None else min(smallest, k)
        if seen == SPLIT_SLICE:
            self._finding = (entries, smallest)
            return False
        self._finding = None
        still_empty = self.current == 0 and all(q.exhausted for q in self.ring)
        # URLs placed in the ring meanwhile: an ordinary re-read, after them
        self._rescan(shift=(smallest or 0) if still_empty else None)
        return self._split is None

    def _advance(self) -> None:
        """Q_c is empty: retire its file and move on; past Q_j, re-read Q_F."""
        old = self.ring[self.current]
        self._draining.append(old)
        self.ring[self.current] = self._new_queue()
        self.current += 1
        if self.current == self.j:
            self.current = 0
            if not self.qf.exhausted and self._split is None:
                self._rescan()

    def _rescan(self, shift: int | None = None) -> None:
        """Split Q_F into j new queues (j doubles, capped) and a new Q_F.

        Streams: Q_F is never held in RAM. Each entry's budget is recomputed (STAR's
        in-degrees grew since it was placed); its k = floor(P_x / B_x) then picks its queue,
        counted from the first new one. An entry whose k now falls before the new queues
        (its PLD gained budget) goes to the first of them, not back to Q_F. When every
        queue is empty, a first read-only pass finds the smallest k (``shift``), so the
        split starts there (the crawl fast-forwards instead of spinning through empty
        queues).

        The split itself goes a slice per :meth:`pop` (:meth:`_split_slice`), and the ring
        is read once it is over; a STATE saved meanwhile names the old Q_F and where it
        stands, so a restart goes on with it. In one go, a Q_F of 446 000 entries held the
        reactor 14.4 s (a probe of 2026-11-29: a spam farm's over-budget URLs), with no
        request sent meanwhile.
        """
        self.rescans += 1
        old_qf, old_j = self.qf, self.j
        everything_empty = shift is not None
        self.qf = self._new_queue()
        grow = min(old_j, self.max_queues - old_j)
        first_new = old_j
        if grow > 0:
            self.ring.extend(self._new_queue() for _ in range(grow))
        else:
            first_new = 0  # at the cap: split into the existing ring, from Q_1
        if first_new:
            self.current = first_new if everything_empty else 0
        self._split = _Split(old_qf, shift if everything_empty else old_j - 1, first_new,
                             self.j - first_new)  # fmt: skip
        self._split_slice()

    def _split_slice(self) -> bool:
        """Place the next SPLIT_SLICE entries of the old Q_F; True when it is all placed."""
        split = self._split
        assert split is not None
        for _ in range(SPLIT_SLICE):
            got = split.old.pop()
            if got is None:
                self._draining.append(split.old)
                self._split = None
                return True
            entry, token = got
            split.old.done(token[1], token[2])
            k, placed = self._placed(entry)
            offset = max(0, k - split.shift)
            if offset < split.slots:
                self._append(self.ring[split.first_new + offset], placed)
            else:
                self._append(self.qf, self._aged(placed, split.shift + split.slots))
        return False

    def _aged(self, entry: bytes, reached: int) -> bytes:
        """A Q_F entry the split left in Q_F, brought ``reached - (j - 1)`` queues closer.

        The next normal re-read places k from j - 1 on. Before the cap that is exactly
        where this split stopped (``reached``: j doubled), so nothing changes. At the cap
        (j stays) the window would stay put, and an entry with k >= 2j - 1 went back to
        Q_F at every re-read, never crawled while other sites kept the ring busy (a
        probe of 2026-11-29: P_x 7..39 of a B_x = 1 site after 625 re-reads with j = 4).
        Taking the ring pass just read off its k (each PLD had j more budgets of URLs
        meanwhile) moves the window on instead: a PLD's URLs keep their spacing of B_x a
        queue, and each comes within reach after finitely many re-reads (thesis VII.2:
        nothing is lost, the whole web is crawled in the end). A fast-forward's jump to
        the smallest k is taken off the same way. A fast-forward that started below
        j - 1 (budgets grew) stopped below the next window: what it left is moved up to
        it (negative age), or every k between would land in the window's first queue,
        more than B_x of a PLD in one queue."""
        age = reached - (self.j - 1)
        if age == 0:
            return entry
        budget, admitted = _ENTRY.unpack_from(entry)
        admitted = min(0xFFFFFFFF, max(0, admitted - age * budget))
        return _ENTRY.pack(budget, admitted) + entry[_ENTRY.size :]

    def _placed(self, entry: bytes) -> tuple[int, bytes]:
        """(k, entry with its budget recomputed) for a Q_F entry. In-degrees only grow, so
        a budget never shrinks here: a rebudget that does not know the PLD (None, or a
        smaller value) keeps the one stored with the entry."""
        budget, admitted = _ENTRY.unpack_from(entry)
        record = entry[_ENTRY.size :]
        if self.rebudget is not None:
            fresh = self.rebudget(record)
            if fresh:
                budget = max(1, budget, int(fresh))
        return admitted // budget, _ENTRY.pack(budget, admitted) + record

    def done(self, token: Token) -> None:
        """The record of ``token`` left RAM (crawled, dropped or requeued)."""
        queue = self._queues.get(token[0])
        if queue is not None:
            queue.done(token[1], token[2])

    # -- sizes -----------------------------------------------------------------------------
    def __len__(self) -> int:
        return self.readable + self.parked.size + self.retrying

    @property
    def retrying(self) -> int:
        """Records parked for a retry, in all buckets."""
        return sum(q.size for q in self._retry_buckets.values())

    @property
    def rescanning(self) -> bool:
        """A re-read of Q_F is under way: :meth:`pop` goes on with it a slice a call, and
        reads the ring once it is over."""
        return self._finding is not None or self._split is not None

    @property
    def readable(self) -> int:
        """Records :meth:`pop` can return now (everything but the parked ones)."""
        owed = sum(q.size for q in self._resumed) + sum(q.size for q in self._returning)
        splitting = self._split.old.size if self._split is not None else 0
        return sum(q.size for q in self.ring) + self.qf.size + self.front.size + owed + splitting

    def stats(self) -> dict[str, int]:
        out = {"j": self.j, "current": self.current + 1, "qf": self.qf.size, "queued": len(self),
               "rescans": self.rescans, "placed_in_qf": self.placed_in_qf,
               "parked": self.parked.size,
               "retrying": self.retrying, "retry_parked_total": self.retry_parked_total,
               "retry_buckets": len(self._retry_buckets),
               "front": self.front.size, "front_pushed": self.front_pushed}  # fmt: skip
        for i, queue in enumerate(self.ring):
            out[f"q{i + 1}"] = queue.size
        return out

    def close(self) -> None:
        self._finding = None  # a read-only pass: begun again at the next start
        self.save()


class _Split:
    """A re-read of Q_F under way: the old Q_F, the k of the first new queue, the index of
    the first new queue in the ring and how many new queues there are."""

    __slots__ = ("first_new", "old", "shift", "slots")

    def __init__(self, old: _Queue, shift: int, first_new: int, slots: int) -> None:
        self.old = old
        self.shift = shift
        self.first_new = first_new
        self.slots = slots

