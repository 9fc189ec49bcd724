"""Shared fixtures for scrapy-irl's tests."""

from __future__ import annotations

import tests.loopback_dns  # noqa: F401 - installs the loopback-only DNS guard
from scrapy_irl.simweb.runner import bypass_proxies

# Every test talks to servers it starts on loopback, by names only its own resolver knows:
# a proxy from the environment would receive those requests instead. Crawls in
# subprocesses inherit this environment; a test of proxies sets its own
# (tests/scheduler/test_proxy_crawl.py).
bypass_proxies()

# --- simweb ---
pytest_plugins = ["scrapy_irl.simweb.testing"]
