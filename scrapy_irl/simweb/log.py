"""The request log: one tab-separated line per request, written by the server, read by the judge.

The first line is ``# simweb-log v1 <WebConfig JSON>`` so a log names the web it was
recorded on. Each request line holds::

    start  ip  host  target  status  bytes  duration

``start`` is the wall-clock time (``time.time()``, microseconds) at which the request's
header had arrived, i.e. the request *start*: politeness is measured between starts.
``bytes`` counts body bytes actually sent; ``duration`` is seconds until the last byte.
Lines are appended when a response ends, so they are not sorted by ``start``.
"""

from __future__ import annotations

import io
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from scrapy_irl.simweb.config import WebConfig

logger = logging.getLogger(__name__)

HEADER = "# simweb-log v1 "
#: What reading the log with ``errors="replace"`` puts for a byte that is not UTF-8.
REPLACED = "\ufffd"


@dataclass(frozen=True)
class LogRecord:
    """One served request."""

    start: float
    ip: str
    host: str
    target: str
    status: int
    nbytes: int
    duration: float = 0.0

    def line(self) -> str:
        target = (
            self.target.replace("\t", "%09").replace("\n", "%0A").replace("\r", "%0D")
        )
        host = self.host.replace("\t", " ").replace("\n", " ").replace("\r", " ")
        return f"{self.start:.6f}\t{self.ip}\t{host}\t{target}\t{self.status}\t{self.nbytes}\t{self.duration:.6f}\n"

    @classmethod
    def parse(cls, line: str) -> LogRecord:
        """One request line; a ValueError for anything the server cannot have written,
        including a NaN or infinite time (it would sort anywhere and poison every gap) and
        U+FFFD, which :func:`read_log` puts for bytes that are not UTF-8: the server decodes
        requests as Latin-1 and writes UTF-8, so it never writes one (until 2026-11-27 such
        a line counted as a request to a host that does not exist)."""
        if REPLACED in line:
            raise ValueError(f"damaged bytes in {line[:200]!r}")
        start, ip, host, target, status, nbytes, duration = line.rstrip("\n").split(
            "\t"
        )
        times = float(start), float(duration)
        if not all(math.isfinite(t) for t in times):
            raise ValueError(f"non-finite time in {line[:200]!r}")
        return cls(times[0], ip, host, target, int(status), int(nbytes), times[1])


class RequestLog:
    """Appends :class:`LogRecord` lines to a file; buffered, flushed by :meth:`flush`."""

    def __init__(self, path: str | Path, config: WebConfig) -> None:
        self.path = Path(path)
        self._file: TextIO = open(self.path, "w", encoding="utf-8", buffering=1 << 20)  # noqa: SIM115
        self._file.write(HEADER + config.to_json() + "\n")
        self.count = 0

    def write(self, record: LogRecord) -> None:
        self._file.write(record.line())
        self.count += 1

    def flush(self) -> None:
        if not self._file.closed:
            self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()


def read_log(
    source: str | Path | TextIO, skipped: list[int] | None = None
) -> tuple[WebConfig | None, list[LogRecord]]:
    """The config named in the header (None if absent) and the records sorted by start time.

    Malformed lines are logged and skipped; their numbers go to ``skipped`` when given, so
    a judge can say how many requests it could not count.
    """
    if isinstance(source, (str, Path)):
        # errors="replace": a damaged byte costs its line (skipped below), not the judge.
        with open(source, encoding="utf-8", errors="replace") as f:
            return read_log(f, skipped)
    config = None
    records = []
    for number, line in enumerate(source, 1):
        if line.startswith(HEADER):
            try:
                config = WebConfig.from_json(line[len(HEADER) :])
            except (ValueError, TypeError, AttributeError) as exc:
                raise ValueError(
                    f"line {number}: the simweb config in the log's header is unreadable "
                    f"({exc}); judge with --config FILE instead"
                ) from None
        elif line.strip() and not line.startswith("#"):
            try:
                records.append(LogRecord.parse(line))
            except ValueError:
                logger.warning("skipping malformed log line %d: %r", number, line[:200])
                if skipped is not None:
                    skipped.append(number)
    records.sort(key=lambda r: r.start)
    return config, records


def read_log_text(text: str) -> tuple[WebConfig | None, list[LogRecord]]:
    return read_log(io.StringIO(text))
