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
