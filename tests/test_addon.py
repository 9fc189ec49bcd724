"""The add-on switches scrapy-irl's components on without overriding the project."""

from __future__ import annotations

import pytest
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


def enabled(settings: Settings, kind: str = "DOWNLOADER_MIDDLEWARES") -> list[str]:
    """What Scrapy's middleware managers build: keys normalized to classes first."""
    from scrapy.utils.conf import build_component_list

    built = build_component_list(settings.get_component_priority_dict_with_base(kind))
    return [k if isinstance(k, str) else f"{k.__module__}.{k.__qualname__}" for k in built]


def test_project_choices_keyed_by_class_win():
    """A project may key DOWNLOADER_MIDDLEWARES by class, as Scrapy allows: the add-on
    used to look for the path only and override the project (switching back on what it
    had switched off, switching off the stock robots middleware it had placed)."""
    from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware

    from scrapy_irl.linksource import LinkSourceMiddleware
    from scrapy_irl.robots.crawl_delay import CrawlDelayMiddleware

    settings = build({"DOWNLOADER_MIDDLEWARES": {CrawlDelayMiddleware: None, RobotsTxtMiddleware: 100},
                      "SPIDER_MIDDLEWARES": {LinkSourceMiddleware: None}})  # fmt: skip
    assert "scrapy_irl.robots.crawl_delay.CrawlDelayMiddleware" not in enabled(settings)
    assert STOCK_ROBOTS in enabled(settings)
    assert "scrapy_irl.linksource.LinkSourceMiddleware" not in enabled(settings, "SPIDER_MIDDLEWARES")


def test_stock_robots_middleware_is_really_off_and_no_warning_says_otherwise():
    """The scheduler warned on every add-on crawl with ROBOTSTXT_OBEY that Scrapy's
    RobotsTxtMiddleware was enabled next to ours (and counted irl_sched/fighting_settings):
    it read the middlewares without normalizing keys, so the add-on's class-keyed None
    sat next to the base's path-keyed 100."""
    from scrapy_irl.scheduler.scheduler import _stock_robots_enabled

    settings = build({"ROBOTSTXT_OBEY": True})
    assert STOCK_ROBOTS not in enabled(settings)
    assert not _stock_robots_enabled(settings)
    both = build({"ROBOTSTXT_OBEY": True, "DOWNLOADER_MIDDLEWARES": {STOCK_ROBOTS: 100}})
    assert _stock_robots_enabled(both)


def test_a_commands_dupefilter_is_kept():
    """``scrapy shell`` sets BaseDupeFilter at the "command" priority, below the add-on's:
    it used to be replaced by DrumDupeFilter, and the shell could not fetch a page twice."""
    from scrapy_irl import Addon

    settings = Settings()
    settings.set("DUPEFILTER_CLASS", "scrapy.dupefilters.BaseDupeFilter", priority="command")
    Addon().update_settings(settings)
    assert settings["DUPEFILTER_CLASS"] == "scrapy.dupefilters.BaseDupeFilter"
    assert build({})["DUPEFILTER_CLASS"] == "scrapy_irl.dupefilter.DrumDupeFilter"


def test_reactorless_mode_is_refused_by_name():
    """Scrapy's TWISTED_REACTOR_ENABLED=False forbids importing the reactor, which every
    scrapy-irl component runs on: the crawl died with an ImportError from the DNS
    middleware ("Import of twisted.internet.reactor is forbidden")."""
    from scrapy_irl import Addon

    settings = Settings({"TWISTED_REACTOR_ENABLED": False})
    with pytest.raises(RuntimeError, match="TWISTED_REACTOR_ENABLED=False is not supported"):
        Addon().update_settings(settings)


def http_handlers(settings: Settings) -> dict:
    return {k: v for k, v in settings.getwithbase("DOWNLOAD_HANDLERS").items() if k in ("http", "https")}


def test_addon_installs_the_http_handler_that_leaves_resending_to_the_scheduler():
    """Scrapy's handler let Twisted re-send a request that failed on a reused connection
    at once, past tau_h (tests/hosts/test_resend_crawl.py)."""
    from scrapy_irl.hosts.download import PATH

    settings = build({"DOWNLOAD_HANDLERS": {"s3": None}})
    assert http_handlers(settings) == {"http": PATH, "https": PATH}
    assert settings.getwithbase("DOWNLOAD_HANDLERS")["s3"] is None  # the project's entry stays
    assert settings.getpriority("DOWNLOAD_HANDLERS") == 20  # "project", as it was


def test_a_projects_own_http_handlers_are_kept():
    """scrapy-playwright and the like: the project's choice wins, per scheme, wherever
    it was made (a class key, Scrapy's handler named explicitly, ``None``, the base)."""
    from scrapy_irl.hosts.download import PATH

    custom = "myproject.handlers.BrowserHandler"  # never imported by the add-on
    assert http_handlers(build({"DOWNLOAD_HANDLERS": {"https": custom}})) == {"http": PATH, "https": custom}
    stock = "scrapy.core.downloader.handlers.http11.HTTP11DownloadHandler"
    assert http_handlers(build({"DOWNLOAD_HANDLERS": {"http": stock, "https": None}})) == {
        "http": stock, "https": None}  # fmt: skip
    base = dict(Settings().getdict("DOWNLOAD_HANDLERS_BASE"), http=custom)
    assert http_handlers(build({"DOWNLOAD_HANDLERS_BASE": base})) == {"http": custom, "https": PATH}


@pytest.mark.parametrize("path", [
    "scrapy_irl.scheduler.IrlScheduler",
    "scrapy_irl.dupefilter.DrumDupeFilter",
    "scrapy_irl.hosts.middleware.HostDnsMiddleware",
    "scrapy_irl.progress.IrlProgress",
])  # fmt: skip
def test_components_enabled_one_by_one_refuse_reactorless_mode_by_name(path: str) -> None:
    """Without the add-on (``SCHEDULER = "scrapy_irl.scheduler.IrlScheduler"``), Scrapy's
    reactorless mode crashed the crawl with an ImportError, or, under AsyncCrawlerRunner,
    the import installed a reactor that never runs and the crawl hung on its first host
    name (found by running Scrapy's own reactorless tests with the scheduler swapped in)."""
    from types import SimpleNamespace

    # Scrapy's test crawler refuses reactorless mode itself: only the settings are read
    crawler = SimpleNamespace(settings=Settings({"TWISTED_REACTOR_ENABLED": False}), spider=None)
    with pytest.raises(RuntimeError, match=f"{path} needs a Twisted reactor"):
        load_object(path).from_crawler(crawler)


def test_every_irl_default_is_in_the_crawlers_settings_below_the_projects_values():
    """Issue 2: ``ADDONS`` is all a project needs; its settings then read like Scrapy's own
    (``crawler.settings.get("IRL_HOST_DELAY")`` was None, found by an audit 2026-11-27)."""
    from scrapy_irl import settings as defaults

    settings = build({"IRL_HOST_DELAY": 30.0})
    names = [name for name in dir(defaults) if name.startswith("IRL_")]
    assert len(names) > 50
    for name in names:
        if name != "IRL_HOST_DELAY":
            assert settings.get(name) == getattr(defaults, name), name
            assert settings.getpriority(name) == 0, name  # Scrapy's "default" priority
    assert settings.getfloat("IRL_HOST_DELAY") == 30.0  # the project's value wins
    assert settings.getfloat("IRL_HOST_DELAY_MIN") == 2.0


def test_the_report_sampler_is_listed_for_a_crawl_with_a_jobdir_only(tmp_path):
    """``scrapy irl-report JOBDIR`` must have samples to read after a crawl with the add-on
    alone; without a JOBDIR nothing is written to the current directory unasked."""
    sampler = "scrapy_irl.report.sampler.StatsSampler"
    assert sampler in enabled(build({"JOBDIR": str(tmp_path)}), "EXTENSIONS")
    assert sampler not in enabled(build({}), "EXTENSIONS")
    # listed by the project (by path or switched off): kept as it is, not listed twice
    assert enabled(build({"JOBDIR": str(tmp_path), "EXTENSIONS": {sampler: 5}}),
                   "EXTENSIONS").count(sampler) == 1  # fmt: skip
    assert sampler not in enabled(build({"JOBDIR": str(tmp_path), "EXTENSIONS": {sampler: None}}),
                                  "EXTENSIONS")  # fmt: skip


def test_per_domain_concurrency_is_raised_to_the_global_limit_unless_higher():
    """Issue 5: the add-on sets "per-domain concurrency high enough": a download slot must
    never queue what the heaps handed out (many hosts may share one ``download_slot``)."""
    assert build({"CONCURRENT_REQUESTS": 64}).getint("CONCURRENT_REQUESTS_PER_DOMAIN") == 64
    assert build({}).getint("CONCURRENT_REQUESTS_PER_DOMAIN") == 16  # Scrapy's default global
    assert build({"CONCURRENT_REQUESTS": 4, "CONCURRENT_REQUESTS_PER_DOMAIN": 100}).getint(
        "CONCURRENT_REQUESTS_PER_DOMAIN") == 100  # fmt: skip


def test_spider_state_is_saved_by_the_crash_safe_extension_unless_the_project_chose():
    """Scrapy's SpiderState rewrites JOBDIR/spider.state in place (a kill at close leaves
    it truncated); the add-on puts ours at its place, and leaves a project's choice."""
    from scrapy_irl.addon import SPIDER_STATE, STOCK_SPIDER_STATE

    built = enabled(build({}), "EXTENSIONS")
    assert SPIDER_STATE in built and STOCK_SPIDER_STATE not in built
    # the project's choice of either one is kept: switched off, ours leaves Scrapy's on
    for choice in ({STOCK_SPIDER_STATE: 0}, {SPIDER_STATE: None}):
        built = enabled(build({"EXTENSIONS": choice}), "EXTENSIONS")
        assert STOCK_SPIDER_STATE in built and SPIDER_STATE not in built


@pytest.mark.parametrize("value", [0, -1, "soon"])
def test_a_bad_keepalive_idle_is_refused_at_start_under_any_scheduler(value, caplog) -> None:
    """Our HTTP handler reads it when Scrapy builds the handler, at the first request:
    with Scrapy's own scheduler a bad value failed every request of the crawl instead
    of stopping it before it started."""
    with pytest.raises(ValueError, match="IRL_KEEPALIVE_MAX_IDLE"):
        build({"IRL_KEEPALIVE_MAX_IDLE": value, "SCHEDULER": "scrapy.core.scheduler.Scheduler"})
    assert "Refusing to start the crawl" in caplog.text


def test_the_keepalive_idle_is_not_checked_when_the_projects_own_handlers_serve_http() -> None:
    # Nothing reads it then: refusing the crawl for it would be wrong.
    own = "scrapy.core.downloader.handlers.http11.HTTP11DownloadHandler"
    settings = build({"IRL_KEEPALIVE_MAX_IDLE": 0, "DOWNLOAD_HANDLERS": {"http": own, "https": own}})
    assert settings.getwithbase("DOWNLOAD_HANDLERS")["http"] == own
