"""One clear ERROR line when a component refuses to start on a damaged or busy store.

Scrapy builds middlewares and extensions while the crawl starts; an exception there
reaches the user as "Task exception was never retrieved" and two tracebacks, the
store's own message ("...is corrupt...; move it away") only on their last line (found by
a kill -9 probe, 2026-11-27). The IRL scheduler logs "Refusing to start the crawl" first;
the host store, WARC and URLseen components do the same through :func:`refusing_start`.

Scrapy then logs the errors a crawl that never opened causes ("Scraper close failure",
CoreStats meeting stats that never opened, asyncio's "Task exception was never retrieved"
with the refusal's own traceback): three more ERROR lines, read as the cause. After a
refusal they are logged at DEBUG, marked as following it (:func:`quiet_follow_on_errors`).
"""

from __future__ import annotations

import logging
import weakref
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from scrapy_irl.config import SettingError
from scrapy_irl.exceptions import IrlError, StoreAccessError

logger = logging.getLogger(__name__)


@contextmanager
def refusing_start(component: str, crawler: Any) -> Iterator[None]:
    """Log a store refusal (any :class:`IrlError`) or a refused setting raised inside as
    one ERROR line that names ``component`` and says what to do, then let it propagate
    (the crawl stops)."""
    try:
        with refusing_bad_settings(component, crawler):
            yield
    except OSError as exc:  # a file the system will not open: not damage, say so
        refusal = StoreAccessError.from_os_error(exc, component)
        _log(component, refusal, crawler)
        raise refusal from exc
    except IrlError as exc:
        _log(component, exc, crawler)
        raise


@contextmanager
def refusing_bad_settings(component: str, crawler: Any) -> Iterator[None]:
    """Log a refused ``IRL_*`` value (:class:`~scrapy_irl.config.SettingError`) raised
    inside as the one "Refusing to start the crawl" line, then let it propagate: raised
    raw from a middleware's or extension's ``from_crawler``, it reached the user as
    Scrapy's tracebacks (a user probe, 2026-11-28: ``IRL_PROGRESS_INTERVAL=x``)."""
    try:
        yield
    except SettingError as exc:
        _log_setting(component, exc, crawler)
        raise


def _log_setting(component: str, exc: SettingError, crawler: Any) -> None:
    log_refusal(
        logger, "%(error)s (read by %(component)s)",
        {"error": exc, "component": component.partition(" (")[0]},
        spider=getattr(crawler, "spider", None), refused=exc,
    )  # fmt: skip


def _log(component: str, exc: IrlError, crawler: Any) -> None:
    log_refusal(
        logger, "%(component)s: %(error)s (%(kind)s). Its files are left as they are.",
        {"component": component, "error": exc, "kind": type(exc).__name__},
        spider=getattr(crawler, "spider", None), refused=exc,
    )  # fmt: skip


def log_refusal(
    log: logging.Logger, reason: str, args: dict[str, Any], *, spider: Any, refused: BaseException
) -> None:
    """The one ERROR line "Refusing to start the crawl: ``reason``" (formatted with
    ``args``) on ``log``; the errors Scrapy then logs because the crawl never opened are
    logged at DEBUG (:func:`quiet_follow_on_errors`)."""
    log.error("Refusing to start the crawl: " + reason, args, extra={"spider": spider})
    quiet_follow_on_errors(spider, refused)


#: Where Scrapy logs the errors that follow a failed start: the engine's close of parts
#: that never opened, signal handlers (CoreStats), and the crawl's failure nobody awaited
#: (asyncio's unretrieved task, or Twisted's unhandled Deferred under CrawlerProcess).
FOLLOW_ON_LOGGERS = ("scrapy.core.engine", "scrapy.utils.signal", "scrapy.core.scraper",
                     "asyncio", "twisted")  # fmt: skip
#: Twisted logs an unhandled Deferred's failure as this line, then one with its traceback
#: as text (no exception attached: the traceback's last line is matched instead).
UNHANDLED_DEFERRED = "Unhandled error in Deferred:"


class FollowOnErrors(logging.Filter):
    """Logs at DEBUG, marked, the errors a refused start causes: ERROR records of the refused
    spider, and any record whose exception is (or was caused by) the refusal. Other
    crawls of the process keep theirs (another spider, another exception), except
    Twisted's one-line "Unhandled error in Deferred:" header, which names no cause: the
    traceback line after it stays an error unless it ends in the refusal."""

    PREFIX = "After the refusal to start above (a consequence, not another fault): "

    def __init__(self, spider: Any, refused: BaseException) -> None:
        super().__init__()
        # Neither is kept alive: the filter stays on its loggers for the process's life,
        # and the refusal's traceback holds the whole crawler.
        self._spider = weakref.ref(spider) if spider is not None else None
        self._refused = (id(refused), type(refused), refused.args)
        self._refused_line = f"{type(refused).__name__}: {refused}"

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR and self._follows(record):
            record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
            record.msg = self.PREFIX + str(record.msg)
        return True

    def _follows(self, record: logging.LogRecord) -> bool:
        spider = self._spider() if self._spider is not None else None
        if spider is not None and getattr(record, "spider", None) is spider:
            return True
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None:
            return any((id(link), type(link), link.args) == self._refused for link in _chain(exc))
        if record.name != "twisted":
            return False
        text = record.getMessage()
        return text == UNHANDLED_DEFERRED or self._refused_line in text


def _chain(exc: BaseException | None) -> Iterable[BaseException]:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen and len(seen) < 100:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


#: The filters of the latest refusals; older ones are removed (their crawls are long
#: over), so a service retrying a damaged job forever does not grow its loggers' filter
#: lists, which every log record walks (a probe: 41 refusals, 164 filters).
KEPT_FILTERS = 16
_installed: deque[FollowOnErrors] = deque()


def quiet_follow_on_errors(spider: Any, refused: BaseException) -> None:
    """After the one refusal line, log the errors Scrapy adds because the crawl never
    opened at DEBUG (see :class:`FollowOnErrors`)."""
    follow_on = FollowOnErrors(spider, refused)
    _installed.append(follow_on)
    while len(_installed) > KEPT_FILTERS:
        oldest = _installed.popleft()
        for name in FOLLOW_ON_LOGGERS:
            logging.getLogger(name).removeFilter(oldest)
    for name in FOLLOW_ON_LOGGERS:
        logging.getLogger(name).addFilter(follow_on)
