"""One clear ERROR line when a component refuses to start on a damaged or busy store.

Scrapy builds middlewares and extensions while the crawl starts; an exception there
reaches the user as "Task exception was never retrieved" and two tracebacks, the
store's own message ("...is corrupt...; move it away") only on their last line (found by
a kill -9 probe, 2026-11-27). The IRL scheduler logs "Refusing to start the crawl" first;
the host store, WARC and URLseen components do the same through :func:`refusing_start`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from scrapy_irl.exceptions import IrlError, StoreAccessError

logger = logging.getLogger(__name__)


@contextmanager
def refusing_start(component: str, crawler: Any) -> Iterator[None]:
    """Log a store refusal (any :class:`IrlError`) raised inside as one ERROR line that
    names ``component`` and says what to do, then let it propagate (the crawl stops)."""
    try:
        yield
    except OSError as exc:  # a file the system will not open: not damage, say so
        refusal = StoreAccessError.from_os_error(exc, component)
        _log(component, refusal, crawler)
        raise refusal from exc
    except IrlError as exc:
        _log(component, exc, crawler)
        raise


def _log(component: str, exc: IrlError, crawler: Any) -> None:
    logger.error(
        "Refusing to start the crawl: %(component)s: %(error)s (%(kind)s). Its files "
        "are left as they are.",
        {"component": component, "error": exc, "kind": type(exc).__name__},
        extra={"spider": getattr(crawler, "spider", None)},
    )
