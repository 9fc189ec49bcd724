"""scrapy-irl: IRLbot's disk-based crawl machinery (DRUM, STAR, BEAST, politeness) for Scrapy."""

from __future__ import annotations

__version__ = "0.1.0"

from scrapy_irl.addon import Addon

__all__ = ["Addon", "__version__"]
