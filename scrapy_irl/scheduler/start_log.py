"""When each host and IP last took a request, on disk, so politeness holds across a restart.

The host and IP heaps (:mod:`scrapy_irl.scheduler.politeness`) live in RAM. Without this
log a resumed crawl would treat every host as new, and a host fetched just before a stop
could be asked again sooner than its tau_h or Crawl-delay (the guarantee of thesis
chapter VII section 1 is per host, whatever happens to the crawler).

On disk: ``politeness.log`` in the frontier directory, one JSON array per line:

* ``["s", host, ip]``: a page request of ``host`` was handed out; it is in flight.
* ``["r", host, ip]``: a robots.txt fetch of ``host`` on ``ip`` was handed out; it is in
  flight (the same as ``"s"``; written apart for whoever reads the log).
* ``["e", host, ip, host_ref, ip_ref]``: that request is over; the next one to ``host``
  may start ``tau_h`` after the wall-clock time ``host_ref``, the next to ``ip`` ``tau_s``
  after ``ip_ref`` (``null``: no constraint). Both are what the heaps hold after the end.
* ``["h", host, ip, host_ref, ip_ref]``: a robots.txt redirect hop to ``host`` on ``ip``
  was booked (:meth:`Politeness.claim_hop`), or ended; or the HTTP handler's wire check
  booked a write to ``host`` (:meth:`PolitenessMemory.wire_started`; ``ip`` may be
  null): the same times, without a start or an end to pair.
* ``["i", since, until]``: the log read at ``since`` was incomplete (missing, cut or
  damaged): until ``until`` every host and IP it does not name counts as started at
  ``since``. Kept by the rewrites while it runs, so a second stop within it keeps it
  (before 2026-11-29 the rewrite at the load dropped it, found by a probe).
* ``["b", host, until, run]``: ``host`` answered 429 or 503, or did not answer (server
  back-off, :mod:`scrapy_irl.scheduler.backoff`): its next request waits until the
  wall-clock time ``until``, however long its tau_h; ``run`` is how many such answers it
  gave in a row, so the next one after a restart doubles the wait where the run left it.
  ``run`` 0 (``until``: the wait that is over) ends the run: the host answered. Logs of
  earlier versions have no ``run``; it is read as 1.

Each event is one ``os.write`` of a whole line with no buffer in between: a kill -9 at
any moment loses no event already written, since the kernel keeps the page (a power
loss can lose the tail, but a reboot takes longer than any delay). On load, a request
still in flight (a start without its end) counts as started at the load: the kill came
before it, so waiting its delay from then is safe. A torn last line is skipped; other
damaged lines (NUL bytes, garbage, lines longer than any event) are skipped and counted,
reading in bounded RAM whatever the file's size. A log that cannot be read or replaced
(a directory in its place, no permission) is logged and counted, never raised: it costs
the restart its recall, not the crawl. The file is rewritten from the heaps' state
(write, then atomic rename) at every open and when it has grown past ``max_bytes`` and
twice its size after the last rewrite, keeping only entries younger than the longest
possible delay: with many hosts in the heaps a rewrite is large, and rewriting it again
before as many bytes were appended would cost O(hosts) per tick, not O(1) per event.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from scrapy_irl.drum.manifest import fsync_directory
from scrapy_irl.scheduler.politeness import Host, Politeness

logger = logging.getLogger(__name__)

FILENAME = "politeness.log"
#: Longest line read as an event: far beyond any line written (two names of at most 64 KiB
#: of URL, JSON-escaped), so a damaged line of gigabytes is skipped in bounded RAM.
MAX_LINE = 1 << 20
_CHUNK = 1 << 16


@dataclass
class Recalled:
    """Wall-clock times after which the last request of each host and IP is counted."""

    hosts: dict[str, float] = field(default_factory=dict)
    ips: dict[str, float] = field(default_factory=dict)
    backoffs: dict[str, float] = field(default_factory=dict)  # host -> wait until (wall)
    # host -> (back-off answers in a row, until): runs not ended, whose wait ended less
    # than ``ahead`` ago (how long a host in a run stays in RAM after its wait)
    runs: dict[str, tuple[int, float]] = field(default_factory=dict)
    in_flight: int = 0  # requests that were in flight at the stop (counted from the load)
    damaged_lines: int = 0  # skipped lines other than a torn last one
    torn_tail: bool = False
    unreadable: str | None = None  # why the log could not be read (past what was read)
    # (since, until) wall clock: an incomplete log's blind window still running ("i")
    blind: tuple[float, float] | None = None


class StartLog:
    """Append-only log of request starts and ends per host and IP (see module docstring)."""

    def __init__(
        self,
        path: Path,
        *,
        horizon: float,
        ahead: float = 0.0,
        max_bytes: int = 1 << 20,
        fsync: bool = False,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path)
        self.horizon = horizon  # the longest delay any host or IP can have
        self.ahead = ahead  # the longest server back-off (a recalled one is capped at it)
        self.max_bytes = max_bytes
        self.fsync = fsync
        self.wall = wall
        self._fd: int | None = None
        self._broken = False  # the last rewrite failed: appends have no file to go to
        self.size = 0
        self._limit = max_bytes  # size past which the next rewrite is due
        self.write_errors = 0
        self.rewrites = 0

    # -- reading ---------------------------------------------------------------------------
    def load(self) -> Recalled:
        """Read the log left by the previous run; entries older than ``horizon`` are dropped."""
        recalled = Recalled()
        host_ref: dict[str, float] = {}
        ip_ref: dict[str, float] = {}
        host_open: dict[str, bool] = {}
        ip_open: dict[str, int] = {}
        backoffs: dict[str, float] = {}
        runs: dict[str, tuple[int, float]] = {}
        try:
            with open(self.path, "rb") as handle:
                lines = _Lines(handle, MAX_LINE)
                for line in lines:
                    event = None if line is None else _parse(line)
                    if event is None:
                        recalled.damaged_lines += 1
                        continue
                    if event[0] == "b":
                        backoffs[event[1]] = max(event[2], backoffs.get(event[1], event[2]))
                        runs[event[1]] = (event[3] if len(event) == 4 else 1, event[2])
                        continue
                    if event[0] == "i":
                        if recalled.blind is None or event[2] > recalled.blind[1]:
                            recalled.blind = (event[1], event[2])
                        continue
                    _replay(event, host_ref, ip_ref, host_open, ip_open)
                recalled.torn_tail = lines.torn  # a kill cut the last write
        except FileNotFoundError:
            return recalled
        except OSError as exc:  # a directory in its place, no permission, an I/O error
            recalled.unreadable = str(exc)  # what was read still counts (all safe to apply)
        now = self.wall()
        recalled.in_flight = sum(host_open.values())
        for name, flying in host_open.items():
            if flying:
                host_ref[name] = now
        for ip, count in ip_open.items():
            if count:
                ip_ref[ip] = now
        oldest = now - self.horizon
        # A clock set back since the stop makes times lie ahead: capped at now (the safe side).
        recalled.hosts = {h: min(t, now) for h, t in host_ref.items() if t > oldest}
        recalled.ips = {i: min(t, now) for i, t in ip_ref.items() if t > oldest}
        # Back-offs lie ahead by nature; capped at the longest one this run allows.
        recalled.backoffs = {h: min(t, now + self.ahead) for h, t in backoffs.items() if t > now}
        recalled.runs = {h: (run, min(t, now + self.ahead)) for h, (run, t) in runs.items()
                         if run and t > now - self.ahead}  # fmt: skip
        if recalled.blind is not None:
            since, until = recalled.blind
            # A clock set back: the window no longer than the horizon from now, since no later.
            until = min(until, now + self.horizon)
            recalled.blind = (min(since, now), until) if until > now else None
        return recalled

    # -- writing ---------------------------------------------------------------------------
    def started(self, host: str, ip: str, *, robots: bool = False) -> None:
        self._append(["r" if robots else "s", host, ip])

    def ended(self, host: str | None, ip: str | None, host_ref: float | None, ip_ref: float | None) -> None:
        self._append(["e", host, ip, _rounded(host_ref), _rounded(ip_ref)])

    def hopped(self, host: str, ip: str, host_ref: float | None, ip_ref: float | None) -> None:
        self._append(["h", host, ip, _rounded(host_ref), _rounded(ip_ref)])

    def backed_off(self, host: str, until: float, run: int) -> None:
        self._append(["b", host, _rounded(until), run])

    def blind(self, since: float, until: float) -> None:
        self._append(["i", _rounded(since), _rounded(until)])

    def _append(self, event: list[object]) -> None:
        if self._fd is None:
            if self._broken:
                self.write_errors += 1  # the event is lost (the failure was logged)
            return
        line = json.dumps(event, separators=(",", ":")).encode() + b"\n"
        try:
            written = os.write(self._fd, line)
        except OSError as exc:
            self._write_failed(exc)
            return
        self.size += written
        if written != len(line):
            self._write_failed(OSError(f"short write ({written} of {len(line)} bytes)"))

    def _write_failed(self, exc: OSError) -> None:
        self.write_errors += 1
        if self.write_errors == 1:
            logger.error(
                "Cannot write %(path)s (%(exc)s): after a restart, hosts fetched since "
                "may be asked again sooner than their delay",
                {"path": self.path, "exc": exc},
            )

    def rewrite(
        self,
        hosts: Iterable[tuple[str, str, float | None, bool]],
        ips: Iterable[tuple[str, float | None]],
        backoffs: Iterable[tuple[str, float, int]] = (),
        blind: tuple[float, float] | None = None,
    ) -> None:
        """Replace the log by the heaps' state, then append to the new file: per IP
        (ip, ip_ref), per host (name, ip, host_ref, in flight), per host backing off or in
        a run of back-offs (name, until, run), and an incomplete log's blind window
        (since, until) while it runs.

        Written to a temporary file and renamed over the log: a kill leaves one or the
        other, both complete up to their last line.
        """
        oldest = self.wall() - self.horizon
        lines: list[list[object]] = []
        if blind is not None and blind[1] > self.wall():
            lines.append(["i", _rounded(blind[0]), _rounded(blind[1])])
        for ip, i_ref in ips:
            if i_ref is not None and i_ref > oldest:
                lines.append(["e", None, ip, None, _rounded(i_ref)])
        for name, ip, h_ref, flying in hosts:
            if h_ref is not None and h_ref > oldest:
                lines.append(["e", name, None, _rounded(h_ref), None])
            if flying:
                lines.append(["s", name, ip])
        now = self.wall()
        for name, until, run in backoffs:
            if until > now or (run and until > now - self.ahead):
                lines.append(["b", name, _rounded(until), run])
        data = b"".join(json.dumps(line, separators=(",", ":")).encode() + b"\n" for line in lines)
        try:
            self._replace(data)
        except OSError as exc:
            self._write_failed(exc)
            self._limit = max(self.max_bytes, 2 * self.size)  # not again at the next tick
            return
        self._broken = False
        self.size = len(data)
        self._limit = max(self.max_bytes, 2 * len(data))
        self.rewrites += 1

    def _replace(self, data: bytes) -> None:
        """Put ``data`` in place of the log atomically and reopen it for appending; on a
        failure, keep appending to the old log if it can still be opened."""
        tmp = self.path.with_suffix(".tmp")
        try:
            with open(tmp, "wb") as handle:
                handle.write(data)
                if self.fsync:
                    handle.flush()
                    os.fsync(handle.fileno())
            self.close()
            os.replace(tmp, self.path)
            if self.fsync:
                fsync_directory(self.path.parent)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        except OSError:
            _remove_quietly(tmp)
            if self._fd is None:
                self._reopen()
            raise

    def _reopen(self) -> None:
        """Append to the old log again (its replacement failed). A kill may have torn its
        last line: that line is ended first, or the next event would be glued to it and
        lost with it."""
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND)
        except OSError:
            self._broken = True
            return
        try:
            size = os.fstat(self._fd).st_size
            if size and os.pread(self._fd, 1, size - 1) != b"\n":
                self.size += os.write(self._fd, b"\n")
        except OSError:
            pass  # the next append fails the same way, and is counted

    def needs_rewrite(self) -> bool:
        """Past ``max_bytes`` and twice the last rewrite: amortised O(1) per appended event."""
        return self.size > self._limit

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _remove_quietly(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


class _Lines:
    """The complete lines of a binary file, read in chunks: a line longer than ``limit``
    comes as None (skipped without being held in RAM). What follows the last newline is
    not a line: ``torn`` tells whether there was any (a write cut by a kill)."""

    def __init__(self, handle: BinaryIO, limit: int) -> None:
        self.handle = handle
        self.limit = limit
        self.torn = False

    def __iter__(self) -> Iterator[bytes | None]:
        partial = b""
        too_long = False
        while chunk := self.handle.read(_CHUNK):
            pieces = chunk.split(b"\n")
            for piece in pieces[:-1]:
                too_long = too_long or len(partial) + len(piece) > self.limit
                yield None if too_long else partial + piece
                partial, too_long = b"", False
            too_long = too_long or len(partial) + len(pieces[-1]) > self.limit
            partial = b"" if too_long else partial + pieces[-1]
        self.torn = too_long or bool(partial)


def _replay(
    event: list[Any],
    host_ref: dict[str, float],
    ip_ref: dict[str, float],
    host_open: dict[str, bool],
    ip_open: dict[str, int],
) -> None:
    """Apply one event to the state :meth:`StartLog.load` builds (types checked by _parse)."""
    kind, host, ip = event[0], event[1], event[2]
    if kind in ("s", "r"):  # a robots.txt fetch is a request to its host too
        host_open[host] = True
        ip_open[ip] = ip_open.get(ip, 0) + 1
        return
    h_ref, i_ref = event[3], event[4]
    if host is not None:
        if kind == "e":  # a hop ("h") neither opens nor closes a request
            host_open[host] = False
        if h_ref is not None:
            host_ref[host] = max(h_ref, host_ref.get(host, h_ref))
    if ip is not None:
        if kind == "e":
            ip_open[ip] = max(0, ip_open.get(ip, 0) - 1)
        if i_ref is not None:
            ip_ref[ip] = max(i_ref, ip_ref.get(ip, i_ref))


def _parse(line: bytes) -> list[Any] | None:
    """One event, or None when the line is not one this module writes."""
    try:
        event = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: brackets nested thousands deep
        return None
    if not isinstance(event, list) or not event:
        return None
    kind = event[0]
    if kind == "b":
        if (len(event) in (3, 4) and isinstance(event[1], str)
                and isinstance(event[2], (int, float)) and not isinstance(event[2], bool)
                and math.isfinite(event[2])
                and (len(event) == 3 or (type(event[3]) is int and event[3] >= 0))):  # fmt: skip
            return event
        return None
    if kind in ("s", "r"):
        if len(event) == 3 and isinstance(event[1], str) and isinstance(event[2], str):
            return event
        return None
    if kind == "i":
        if len(event) == 3 and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                   and math.isfinite(v) for v in event[1:]):  # fmt: skip
            return event
        return None
    if kind in ("e", "h") and len(event) == 5:
        names_ok = all(v is None or isinstance(v, str) for v in event[1:3])
        times_ok = all(
            v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(v))
            for v in event[3:5]
        )
        if names_ok and times_ok:
            return event
    return None


class PolitenessMemory:
    """The heaps' link to a :class:`StartLog`: recalls the last run's starts and logs this one's.

    The heaps count in the scheduler's clock (monotonic); the log in wall-clock time, which
    is what two runs share. The two are converted with the offset between them at that
    moment, not one taken at the start: the wall clock can step during a run (NTP, a
    suspended machine, whose monotonic clock stands still), and a time logged with a
    stale offset would look older than it is to the next run. A recalled start is
    applied when its host or IP enters the heaps again (:meth:`apply`), so the first
    request after a restart waits out the delay of the last request before it; recalls
    whose delay has passed anyway are dropped.
    """

    def __init__(self, log: StartLog, polite: Politeness, clock: Callable[[], float]) -> None:
        self.log = log
        self.polite = polite
        self.clock = clock
        recalled = log.load()
        self.loaded = recalled
        offset = self._offset()
        self.hosts = {name: t - offset for name, t in recalled.hosts.items()}
        self.ips = {ip: t - offset for ip, t in recalled.ips.items()}
        # Per host, the end of its last back-off wait and its run of them (0: none): a
        # wait still running, or a run whose wait ended less than ``ahead`` ago, or both.
        self.backoffs: dict[str, tuple[float, int]] = {
            name: (t - offset, 0) for name, t in recalled.backoffs.items()}  # fmt: skip
        for name, (run, t) in recalled.runs.items():
            until = max(t - offset, self.backoffs.get(name, (t - offset, 0))[0])
            self.backoffs[name] = (until, run)
        self.applied = 0
        self.loaded_at = clock()
        # The last run's starts as the HTTP handler's send plan asks for them
        # (:meth:`sent_before`): ``hosts`` and ``ips`` are taken by the heaps.
        self._plan_hosts = dict(self.hosts)
        self._plan_ips = dict(self.ips)
        # This run's writes booked at the wire (:meth:`wire_started`), oldest first, so
        # that :meth:`tick` drops the expired ones from the front, not by a full scan.
        self.wire_hosts: OrderedDict[str, float] = OrderedDict()
        self.wire_ips: OrderedDict[str, float] = OrderedDict()
        # Until then, a host or IP the log does not name counts as started at
        # ``blind_since`` (see recall_incomplete); -inf: the log is whole. A window an
        # earlier load opened is still running after a second stop within it.
        self.blind_since = self.loaded_at
        self.blind_until = float("-inf")
        if recalled.blind is not None:
            self.blind_since = recalled.blind[0] - offset
            self.blind_until = recalled.blind[1] - offset
        self.blind_starts = 0
        self.rewrite()

    def recall_incomplete(self, longest: float) -> None:
        """The log was missing, cut or damaged: a host it does not name may have been
        fetched just before the stop. For ``longest`` (the longest delay) from the load,
        every such host and IP counts as started at the load, as a request in flight at
        the stop does: its first request waits out its delay from this start. After that,
        any start before the stop is older than any delay. The window is logged, so a
        second stop within it keeps it."""
        self.blind_since = self.loaded_at
        self.blind_until = max(self.blind_until, self.loaded_at + longest)
        self.log.blind(self._wall(self.blind_since), self._wall(self.blind_until))  # type: ignore[arg-type]

    def _blind_start(self) -> float | None:
        if self.clock() < self.blind_until:
            self.blind_starts += 1
            return self.blind_since
        return None

    def apply(self, host: Host) -> None:
        """``host`` was added to the heaps: its and its IP's last starts of the last run count."""
        start = self.hosts.pop(host.name, None)
        if start is None:
            start = self._blind_start()
        if start is not None and start > host.last_start:
            host.last_start = start
            self.applied += 1
        until, run = self.backoffs.pop(host.name, (float("-inf"), 0))
        if until > host.not_before:
            # A wait still running; or one that is over, which leaves when the host is due
            # alone but is the log's reference for its run: a rewrite keeps the run, and
            # the answer that ends it is logged (both were lost: found by review).
            self.applied += until > self.clock()
            host.not_before = until
        if run > host.backoff_streak:
            host.backoff_streak = run
            self.applied += 1
        self.apply_ip(host.ip)

    def started(self, host: Host, *, robots: bool) -> None:
        self.log.started(host.name, host.ip, robots=robots)

    def apply_ip(self, ip: str) -> None:
        """``ip`` was added to the heaps without a host (a redirect hop booked on a host's
        new address): its last start of the last run counts."""
        address = self.polite.ips[ip]
        start = self.ips.pop(ip, None)
        if start is None:
            start = self._blind_start()
        if start is not None and start > address.last_start:
            address.last_start = start
            self.applied += 1

    def hopped(self, host: Host, ip: str | None = None) -> None:
        """A robots.txt redirect hop to ``host`` on ``ip`` (default: its IP) was booked
        (:meth:`Politeness.claim_hop`), or ended: the host's pages and the IP count from
        its start, or its end, after a kill too."""
        ip = host.ip if ip is None else ip
        address = self.polite.ips.get(ip)
        self.log.hopped(host.name, ip, self._wall(host.hop_start),
                        self._wall(address.last_start if address else float("-inf")))  # fmt: skip

    def wire_started(self, host: str, ip: str | None, wait: float = 0.0) -> None:
        """The HTTP handler's wire check booked a write to ``host`` on ``ip`` (None: not
        known) ``wait`` s from now. Logged as a hop is, with that start as both times: a
        restart right after it waits the host's and IP's delays from it, in the heaps and
        in the next run's send plan and wire check. The heaps log their own requests, but
        requests that bypass them (``engine.download``: FilesPipeline, ImagesPipeline)
        were not logged before 2026-11-29, and a file host's next request after a kill -9
        could go at once."""
        now = self.clock() + max(0.0, wait)
        self.wire_hosts[host] = now
        self.wire_hosts.move_to_end(host)
        if ip is not None:
            self.wire_ips[ip] = now
            self.wire_ips.move_to_end(ip)
        wall = self._wall(now)
        self.log.hopped(host, ip, wall, wall if ip is not None else None)  # type: ignore[arg-type]

    def sent_before(self, *, host: str | None = None, ip: str | None = None) -> float | None:
        """When the last run last started a request to ``host`` (or ``ip``), in this run's
        clock, for the send plan: None if it did not within the longest delay. While an
        incomplete log is read blind (:meth:`recall_incomplete`), an unnamed one counts as
        started at ``blind_since`` (the load that found the log incomplete)."""
        recalls, key = (self._plan_hosts, host) if host is not None else (self._plan_ips, ip)
        start = recalls.get(key)  # type: ignore[arg-type]
        if start is None and self.clock() < self.blind_until:
            return self.blind_since
        return start

    def backed_off(self, host: Host) -> None:
        """``host`` waits until ``host.not_before`` (a 429, a 503, no answer), the
        ``host.backoff_streak``-th in a row, or its run ended (0): after a kill too."""
        until = self._wall(host.not_before)
        if until is not None:
            self.log.backed_off(host.name, until, host.backoff_streak)

    def ended(self, host: Host) -> None:
        address = self.polite.ips.get(host.ip)
        self.log.ended(host.name, host.ip, self._wall(host.last_start),
                       self._wall(address.last_start if address else float("-inf")))  # fmt: skip

    def tick(self) -> None:
        """Forget recalls whose delay has passed; compact the log once it is large."""
        now = self.clock()
        oldest = now - self.log.horizon
        for recalls in (self.hosts, self.ips, self._plan_hosts, self._plan_ips):
            for key in [k for k, t in recalls.items() if t <= oldest]:
                del recalls[key]
        for writes in (self.wire_hosts, self.wire_ips):
            # In booking order: a write booked with a wait may stand before a newer one
            # for a tick or two, never for longer than its wait.
            while writes and next(iter(writes.values())) <= oldest:
                writes.popitem(last=False)
        for key in [k for k, (t, run) in self.backoffs.items()
                    if t <= (now - self.log.ahead if run else now)]:  # fmt: skip
            del self.backoffs[key]
        if self.log.needs_rewrite():
            self.rewrite()

    def rewrite(self) -> None:
        offset = self._offset()
        # Each host and IP once, with the later of its heap and wire starts: listed twice,
        # a compaction wrote every heap host twice (a review, 2026-11-29).
        wire_hosts, wire_ips = self.wire_hosts, self.wire_ips
        inf = float("-inf")
        ips = [(ip, self._wall(max(a.last_start, wire_ips.get(ip, inf))))
               for ip, a in self.polite.ips.items()]  # fmt: skip
        ips += [(ip, t + offset) for ip, t in wire_ips.items() if ip not in self.polite.ips]
        ips += [(ip, t + offset) for ip, t in self.ips.items() if ip not in self.polite.ips]
        hosts = [(h.name, h.ip, self._wall(max(h.last_start, h.hop_start, wire_hosts.get(h.name, inf))),
                  h.in_flight) for h in self.polite.hosts.values()]  # fmt: skip
        hosts += [(name, "", t + offset, False) for name, t in wire_hosts.items()
                  if name not in self.polite.hosts]  # fmt: skip
        hosts += [(name, "", t + offset, False) for name, t in self.hosts.items()
                  if name not in self.polite.hosts]  # fmt: skip
        backoffs = [(h.name, h.not_before + offset, h.backoff_streak)
                    for h in self.polite.hosts.values() if h.not_before != float("-inf")]  # fmt: skip
        backoffs += [(name, t + offset, run) for name, (t, run) in self.backoffs.items()
                     if name not in self.polite.hosts]  # fmt: skip
        blind = None
        if self.blind_until > self.clock():
            blind = (self.blind_since + offset, self.blind_until + offset)
        self.log.rewrite(hosts, ips, backoffs, blind)

    def close(self) -> None:
        try:
            self.rewrite()
        finally:
            self.log.close()

    def stats(self) -> dict[str, int]:
        return {
            "recalled_hosts": len(self.loaded.hosts),
            "recalled_ips": len(self.loaded.ips),
            "recalled_backoffs": len(self.loaded.backoffs),
            "recalled_runs": len(self.loaded.runs),
            "in_flight_at_stop": self.loaded.in_flight,
            "damaged_lines": self.loaded.damaged_lines,
            "applied": self.applied,
            "blind_starts": self.blind_starts,
            "rewrites": self.log.rewrites,
            "write_errors": self.log.write_errors,
        }

    def _offset(self) -> float:
        """wall = clock + offset, now."""
        return self.log.wall() - self.clock()

    def _wall(self, start: float) -> float | None:
        return None if start == float("-inf") else start + self._offset()
