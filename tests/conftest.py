"""Shared fixtures for scrapy-irl's tests."""

from __future__ import annotations

import os

import tests.loopback_dns  # noqa: F401 - installs the loopback-only DNS guard

# Every test talks to servers it starts on loopback, by names only its own resolver knows:
# a proxy from the environment (as CI machines often set for package downloads) would
# receive those requests instead. Crawls in subprocesses inherit this environment; a
# test of proxies sets its own (tests/scheduler/test_proxy_crawl.py).
for _name in [n for n in os.environ if n.lower() in ("http_proxy", "https_proxy", "all_proxy")]:
    del os.environ[_name]

# --- simweb ---
pytest_plugins = ["scrapy_irl.simweb.testing"]
