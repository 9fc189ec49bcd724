"""One process per job directory: an ``flock`` taken before anything in it is opened.

The stores inside a frontier directory lock themselves too, but only once they are open,
and opening one may already change files (BEAST drops queue files its STATE does not name,
WARC recovery renames ``.open`` files). A second crawl started on the same ``JOBDIR`` would
do that to the live crawl's files before a store refused it. This lock is taken first, so
the second crawl is refused before it touches anything. ``flock`` locks die with the
process, so a ``kill -9`` never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Self

from scrapy_irl.exceptions import IrlError
from scrapy_irl.startfail import release_failed_starts


class DirectoryInUseError(IrlError):
    """Another process (or another open crawl in this one) holds the directory's lock."""


class DirectoryUnusableError(IrlError):
    """The directory cannot be created or written (a file in its place, no permission)."""


def _locked(fd: int) -> bool:
    """Take the lock on ``fd``; if it is held, once more after giving back what crawls of
    this process that failed to start still hold (their components heard no close)."""
    return _flocked(fd) or (release_failed_starts() > 0 and _flocked(fd))


def _flocked(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


class DirectoryLock:
    """An exclusive, non-blocking ``flock`` on ``directory/name``, held until :meth:`release`."""

    def __init__(self, directory: str | os.PathLike[str], name: str = "LOCK", *, what: str) -> None:
        self.path = Path(directory, name)
        self.what = what
        self._fd: int | None = None

    def acquire(self) -> Self:
        """Take the lock or raise :class:`DirectoryInUseError` naming the directory."""
        if self._fd is not None:
            return self
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:  # a file where the directory should be, no permission, ...
            raise DirectoryUnusableError(
                f"{self.path.parent}: cannot use it as a {self.what} ({exc.strerror or exc}); "
                "point JOBDIR (or the IRL_* directory setting) at a directory this process "
                "can create and write"
            ) from exc
        if not _locked(fd):
            os.close(fd)
            raise DirectoryInUseError(
                f"{self.path.parent}: this {self.what} is in use by another crawl (its lock "
                f"{self.path.name} is held); two crawls cannot share it. Stop the other crawl "
                "or give this one another JOBDIR."
            ) from None
        self._fd = fd
        return self

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Give the lock up (the file stays: removing it would race with a new opener)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> Self:
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()
