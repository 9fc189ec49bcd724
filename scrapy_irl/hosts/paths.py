"""Where the host store lives (``IRL_HOSTS_DIR``, else ``JOBDIR/irl/hosts``, else the
project's data dir), and opening it with a process's settings."""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from scrapy.utils.job import job_dir
from scrapy.utils.project import data_path

from scrapy_irl import config
from scrapy_irl.exceptions import HostStoreLockedError
from scrapy_irl.hosts.store import HostStore
from scrapy_irl.tempdirs import make_temporary_directory

logger = logging.getLogger(__name__)

#: Locked default stores of this process -> the private store used instead (see below).
_stand_ins: dict[str, str] = {}
_stand_ins_lock = threading.Lock()


def hosts_dir(settings: Any) -> str:
    """The host store directory for these settings.

    Without ``JOBDIR`` the store is ``.scrapy/irl/hosts`` of the project (or of the current
    directory outside a project), so robots.txt and DNS data are reused by later runs and
    by other spiders of the project.
    """
    explicit = config.getpath(settings, "IRL_HOSTS_DIR")
    if explicit:
        return explicit
    jobdir = job_dir(settings)
    if jobdir:
        return os.path.join(jobdir, "irl", "hosts")
    return data_path(os.path.join("irl", "hosts"), createdir=True)


def open_host_store(settings: Any) -> HostStore:
    """The process-wide host store for ``settings`` (release it with ``store.release()``).

    LevelDB lets one process open a directory. When the project's default store (no
    ``IRL_HOSTS_DIR``, no ``JOBDIR``) is held by another process, typically a crawl
    while ``scrapy shell`` or ``scrapy fetch`` runs in the same project, this process
    gets a private temporary store instead, deleted at close, with a WARNING: it starts
    without the shared robots.txt and DNS data and keeps nothing. A directory the user
    chose is never swapped: its lock is a clear error (two crawls in one JOBDIR).
    """
    path = hosts_dir(settings)
    options = {
        "sync": config.getbool(settings, "IRL_HOSTS_FSYNC"),
        "cache_bytes": config.getint(settings, "IRL_HOSTS_CACHE_BYTES", minimum=0),
    }
    chosen = bool(config.getpath(settings, "IRL_HOSTS_DIR") or job_dir(settings))
    with _stand_ins_lock:
        stand_in = _stand_ins.get(os.path.realpath(path))
        if stand_in is not None and os.path.isdir(stand_in):
            return HostStore.open_shared(stand_in, **options)
        try:
            return HostStore.open_shared(path, **options)
        except HostStoreLockedError as exc:
            if chosen:
                raise
            reason = exc
        stand_in = str(make_temporary_directory("scrapy-irl-hosts-"))
        store = HostStore.open_shared(stand_in, **options)
        store.remove_on_close = True
        _stand_ins[os.path.realpath(path)] = stand_in
    logger.warning(
        "The project's host store is in use by another process (%(reason)s). This one "
        "uses a temporary host store, %(stand_in)s, removed at close: robots.txt and DNS "
        "data are fetched again and not kept.", {"reason": reason, "stand_in": stand_in})  # fmt: skip
    return store
