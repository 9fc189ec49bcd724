"""The add-on switches scrapy-irl's components on without overriding the project."""

from __future__ import annotations

from scrapy.settings import Settings
from scrapy.utils.misc import load_object
from scrapy.utils.test import get_crawler

from scrapy_irl.addon import DOWNLOADER_MIDDLEWARES, SPIDER_MIDDLEWARES, STOCK_ROBOTS


def build(settings: dict) -> Settings:
    crawler = get_crawler(settings_dict={"ADDONS": {"scrapy_irl.Addon": 0}, **settings})
    crawler._apply_settings()
    return crawler.settings


def middlewares(settings: Settings, kind: str = "DOWNLOADER_MIDDLEWARES") -> dict:
    merged = settings.getwithbase(kind)
    return {(k if isinstance(k, str) else f"{k.__module__}.{k.__qualname__}"): v for k, v in merged.items()}


def test_addon_swaps_robots_middleware_and_adds_ours():
    settings = build({})
    mws = middlewares(settings)
    assert mws[STOCK_ROBOTS] is None
    for path, priority in DOWNLOADER_MIDDLEWARES.items():
        assert mws[path] == priority
        load_object(path)
    assert settings["DUPEFILTER_CLASS"] == "scrapy_irl.dupefilter.DrumDupeFilter"
    spider_mws = middlewares(settings, "SPIDER_MIDDLEWARES")
    for path, priority in SPIDER_MIDDLEWARES.items():
        assert spider_mws[path] == priority
        load_object(path)


def test_project_choices_win():
    settings = build({"DOWNLOADER_MIDDLEWARES": {"scrapy_irl.robots.crawl_delay.CrawlDelayMiddleware": None}})
    assert middlewares(settings)["scrapy_irl.robots.crawl_delay.CrawlDelayMiddleware"] is None


def test_project_can_switch_the_link_source_middleware_off():
    path = "scrapy_irl.linksource.LinkSourceMiddleware"
    settings = build({"SPIDER_MIDDLEWARES": {path: None}})
    assert middlewares(settings, "SPIDER_MIDDLEWARES")[path] is None
