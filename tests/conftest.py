"""Shared fixtures for scrapy-irl's tests."""

from __future__ import annotations

# --- simweb ---
pytest_plugins = ["scrapy_irl.simweb.testing"]
