"""Shared fixtures for scrapy-irl's tests."""

from __future__ import annotations

import tests.loopback_dns  # noqa: F401 - installs the loopback-only DNS guard

# --- simweb ---
pytest_plugins = ["scrapy_irl.simweb.testing"]
