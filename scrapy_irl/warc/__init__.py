"""A WARC page repository for Scrapy: every response received, in rotating WARC 1.1 files."""

from __future__ import annotations

from scrapy_irl.warc.writer import (
    RawHttpHeaders,
    RecoveredFile,
    RotatingWarcWriter,
    recover_open_files,
)

__all__ = ["RawHttpHeaders", "RecoveredFile", "RotatingWarcWriter", "recover_open_files"]
