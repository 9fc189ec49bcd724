"""Exception tree of scrapy-irl: one root, so callers can catch everything we raise."""

from __future__ import annotations


class IrlError(Exception):
    """Root of every error raised by scrapy-irl."""


class DrumError(IrlError):
    """A DRUM repository was used wrongly (bad key, closed store, wrong parameters)."""


class DrumCorruptionError(DrumError):
    """On-disk DRUM state failed validation and cannot be resumed safely.

    Raised on open or during a merge when a file is truncated in a way a crash cannot
    explain, a checksum does not match, or the manifest disagrees with the files. The
    message names the file and what was wrong; nothing is modified when it is raised.
    """


class HostStoreError(IrlError):
    """The LevelDB host store (robots.txt and DNS records) cannot be opened or used.

    Raised when the directory is locked by another process, the database is corrupt, or
    it was written by a newer format version than this scrapy-irl understands.
    """


class HostStoreLockedError(HostStoreError):
    """The host store directory is held by another process (LevelDB's lock)."""


class FrontierCorruptionError(IrlError):
    """A BEAST queue file or its STATE failed validation (bad checksum, impossible cursor)."""


class SpiderStateError(IrlError):
    """``JOBDIR/spider.state`` exists but cannot be read back as a pickle (truncated or
    overwritten): refused before the crawl starts rather than run with an empty state."""


class StoreAccessError(IrlError):
    """A store's file cannot be opened, read or written (a directory where a file should
    be, no permission, a full disk): the operating system refused, so nothing is damaged
    and nothing is repaired; the message names the file and the system's reason."""

    @classmethod
    def from_os_error(cls, exc: OSError, where: object) -> StoreAccessError:
        """Name the file ``exc`` is about (else ``where``) and the system's reason."""
        name = exc.filename if exc.filename is not None else where
        reason = exc.strerror or str(exc) or type(exc).__name__
        return cls(
            f"{name}: cannot be opened, read or written ({type(exc).__name__}: {reason}); "
            "check that it is a regular file (a directory for a store) that this user may "
            "read and write, and that the disk has room"
        )


class HostStoreAccessError(HostStoreError, StoreAccessError):
    """The system refused the host store's directory (a file where it should be, no
    permission): a :class:`HostStoreError`, as the host store documents, and a
    :class:`StoreAccessError`, as the crawl's one-line refusal reports it."""
