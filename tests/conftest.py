"""Shared fixtures for scrapy-irl's tests."""

from __future__ import annotations
