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
import re
import secrets
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
_TEMPORARY = re.compile(re.escape(TEMPORARY_PREFIX) + r"([0-9]+)\.[0-9a-f]{8}")


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
    temporary = path.with_name(f"{TEMPORARY_PREFIX}{os.getpid()}.{secrets.token_hex(4)}")
    # 0o666 less the umask, as open() gives (mkstemp's 0600 replaced the file's mode)
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            _keep_mode(handle.fileno(), path)
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


def _keep_mode(descriptor: int, path: Path) -> None:
    """Give the new file the old one's mode, if there is one; best effort (a file system
    without modes refuses, and the save must not fail for it)."""
    try:
        os.fchmod(descriptor, path.stat().st_mode & 0o777)
    except OSError:
        pass


def remove_leftovers(directory: Path) -> None:
    """Remove the temporary files of saves killed before their rename: named by our
    pattern, and of a process that is gone (not a save under way in another one)."""
    for leftover in directory.glob(TEMPORARY_PREFIX + "*"):
        match = _TEMPORARY.fullmatch(leftover.name)
        if match is not None and not _alive(int(match.group(1))):
            leftover.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return False  # this process saves nothing before it has loaded
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


class CrashSafeSpiderState:
    """Loads ``spider.state`` before the crawl starts and saves it atomically at close."""

    def __init__(self, jobdir: str) -> None:
        self.path = Path(jobdir, STATE_FILE)
        self.state = load_state(self.path)
        remove_leftovers(self.path.parent)

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
