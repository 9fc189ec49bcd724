"""Where the host store lives: ``IRL_HOSTS_DIR``, else ``JOBDIR/irl/hosts``, else the project's data dir."""

from __future__ import annotations

import os
from typing import Any

from scrapy.utils.job import job_dir
from scrapy.utils.project import data_path

from scrapy_irl import config


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
