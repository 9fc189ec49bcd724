"""Temporary directories removed when the process exits, if nothing removed them before.

The frontier of a crawl without JOBDIR and the stand-in host store are removed at close.
``scrapy shell`` exits without closing the engine, so no close ran: every shell session
left its frontier (about 50 KB) in the temporary directory (found by a probe of Scrapy's
commands, 2026-11-27). A kill -9 still leaves one behind; nothing runs then.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

_handlers: dict[str, Callable[[], None]] = {}
_removed_at_exit: set[str] = set()
_lock = threading.Lock()


def make_temporary_directory(prefix: str) -> Path:
    """A new directory under the system's temporary directory, removed at exit unless
    :func:`remove_temporary_directory` removed it first."""
    path = Path(tempfile.mkdtemp(prefix=prefix))

    def remove() -> None:
        with _lock:
            _removed_at_exit.add(str(path))
        shutil.rmtree(path, ignore_errors=True)

    with _lock:
        _handlers[str(path)] = remove
    atexit.register(remove)
    return path


def remove_temporary_directory(path: Path | str) -> None:
    """Remove ``path`` now and drop its exit handler."""
    shutil.rmtree(path, ignore_errors=True)
    with _lock:
        handler = _handlers.pop(str(path), None)
    if handler is not None:
        atexit.unregister(handler)


def removed_at_exit(path: Path | str) -> bool:
    """Whether the exit handler removed ``path``: the process is ending without a close
    (``scrapy shell``), while its reactor thread may still be using the directory."""
    with _lock:
        return str(path) in _removed_at_exit
