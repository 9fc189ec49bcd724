"""``spider.state`` kept in ``JOBDIR`` so that a kill at any moment leaves a loadable file.

Scrapy's ``SpiderState`` extension rewrites ``JOBDIR/spider.state`` in place at close
(open for writing, which empties it, then pickle): a kill -9 during that write, or a full
disk, leaves a truncated pickle, and the next start logs a traceback from a signal
handler and runs with no ``spider.state`` at all (then fails again at close). This one
writes a new file next to it, flushes it to disk and renames it over the old one, so the
file is always either the previous state or the new one; a file damaged anyway (another
tool, a disk error) is refused before the crawl starts, in one line that names it, as the
scheduler refuses a damaged frontier.

The add-on puts it in place of Scrapy's (same ``EXTENSIONS`` order, 0), unless the
project placed either one itself.
"""

from __future__ import annotations

import logging
import os
import pickle
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy import Spider, signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.job import job_dir

from scrapy_irl.exceptions import SpiderStateError
from scrapy_irl.refusal import refusing_start

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

#: The file name Scrapy's ``SpiderState`` uses: a JOBDIR of a crawl without the add-on
#: resumes with it, and the other way round.
STATE_FILE = "spider.state"
#: Names of the temporary files of a save; a kill can leave one, removed at the next start.
TEMPORARY_PREFIX = f".{STATE_FILE}."


def load_state(path: Path) -> dict[str, Any] | Any:
    """The pickled state at ``path``, ``{}`` when there is none; :class:`SpiderStateError`
    when the file cannot be read back (truncated, overwritten, not a pickle)."""
    try:
        with path.open("rb") as handle:
            return pickle.load(handle)  # noqa: S301 - our own file, as Scrapy's extension
    except FileNotFoundError:
        return {}
    except OSError:
        raise  # not damage: refusing_start reports it as the system's refusal
    except Exception as exc:  # noqa: BLE001 - unpickling can raise almost anything
        raise SpiderStateError(
            f"{path}: the saved spider.state cannot be read back ({type(exc).__name__}: "
            f"{exc}): the file is damaged, or holds objects of classes this code no "
            "longer has; move it away to start this job with an empty spider.state"
        ) from exc


def save_state(path: Path, state: Any) -> None:
    """Write ``state`` to ``path`` so that a kill leaves either the old file or the new
    one: a temporary file in the same directory, fsync, rename, fsync of the directory
    (a failure of that last step is only logged: the new state is in place)."""
    descriptor, temporary = tempfile.mkstemp(prefix=TEMPORARY_PREFIX, dir=path.parent)
    try:
        # mkstemp makes it 0600; keep the old file's mode, else what open() would give
        os.fchmod(descriptor, path.stat().st_mode & 0o777 if path.exists() else 0o644)
        with os.fdopen(descriptor, "wb") as handle:
            pickle.dump(state, handle, protocol=4)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    try:
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    except OSError as exc:
        logger.warning("spider.state saved to %s, but its directory could not be synced "
                       "(%s): a power loss may still bring back the previous one", path, exc)


class CrashSafeSpiderState:
    """Loads ``spider.state`` before the crawl starts and saves it atomically at close."""

    def __init__(self, jobdir: str) -> None:
        self.path = Path(jobdir, STATE_FILE)
        self.state = load_state(self.path)
        for leftover in self.path.parent.glob(TEMPORARY_PREFIX + "*"):  # a killed save's
            leftover.unlink(missing_ok=True)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        jobdir = job_dir(crawler.settings)
        if not jobdir:
            raise NotConfigured
        with refusing_start("CrashSafeSpiderState (spider.state)", crawler):
            extension = cls(jobdir)
        crawler.signals.connect(extension.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(extension.spider_closed, signal=signals.spider_closed)
        return extension

    def spider_opened(self, spider: Spider) -> None:
        spider.state = self.state  # type: ignore[attr-defined]

    def spider_closed(self, spider: Spider) -> None:
        state = getattr(spider, "state", self.state)
        try:
            save_state(self.path, state)
        except Exception as exc:  # noqa: BLE001 - the old file is intact; say so, go on
            logger.error(
                "spider.state not saved to %(path)s (%(error)s: %(detail)s); the file "
                "keeps the state saved before this run",
                {"path": self.path, "error": type(exc).__name__, "detail": exc},
                extra={"spider": spider},
            )
