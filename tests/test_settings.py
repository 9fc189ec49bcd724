"""Every IRL_* default is documented, and the add-on keeps a project's own values."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from scrapy.utils.misc import load_object

from scrapy_irl import config
from scrapy_irl import settings as defaults

DOCS = Path(__file__).resolve().parents[1] / "docs" / "settings.rst"
NAMES = sorted(n for n in dir(defaults) if n.startswith("IRL_"))


@pytest.mark.parametrize("name", NAMES)
def test_setting_documented_with_its_default(name: str) -> None:
    text = DOCS.read_text()
    match = re.search(rf"\.\. confval:: {name}\n((?:   .*\n|\n)+)", text)
    assert match, f"{name} is not documented in docs/settings.rst"
    value = getattr(defaults, name)
    shown = match.group(1)
    spellings = {repr(value), str(value), json.dumps(value)}
    assert any(f":default: ``{s}``" in shown for s in spellings), (
        f"{name}: docs disagree with the default {value!r}"
    )


def test_config_falls_back_to_defaults_and_rejects_unknown_names() -> None:
    from scrapy.settings import Settings

    assert config.getint(Settings(), "IRL_URLSEEN_BUCKETS") == defaults.IRL_URLSEEN_BUCKETS
    assert config.getint(Settings({"IRL_URLSEEN_BUCKETS": 4}), "IRL_URLSEEN_BUCKETS") == 4
    with pytest.raises(KeyError, match="IRL_NOT_A_SETTING"):
        config.get(Settings(), "IRL_NOT_A_SETTING")


@pytest.mark.parametrize("value", [1.5, 0.5, 4.7, float("nan")])
def test_an_integer_setting_refuses_a_float_with_a_fraction_naming_it(value: float) -> None:
    from scrapy.settings import Settings

    # Scrapy's getint truncates: 1.5 was taken as 1, and 0.5 refused as "got 0"
    with pytest.raises(ValueError, match=f"IRL_IP_MAX_IN_FLIGHT={value!r}"):
        config.getint(Settings({"IRL_IP_MAX_IN_FLIGHT": value}), "IRL_IP_MAX_IN_FLIGHT", minimum=1)


def test_an_integer_setting_takes_a_whole_float() -> None:
    from scrapy.settings import Settings

    assert config.getint(Settings({"IRL_IP_MAX_IN_FLIGHT": 2.0}), "IRL_IP_MAX_IN_FLIGHT") == 2


def _from_crawler(path: str, *args: Any) -> Callable[[Any], Any]:
    """A builder of the component at ``path``, as Scrapy builds it at start."""

    def build(crawler: Any) -> Any:
        return load_object(path).from_crawler(crawler, *args)

    return build


_warc = _from_crawler("scrapy_irl.warc.extension.WarcExtension")
_report = _from_crawler("scrapy_irl.report.sampler.StatsSampler")
_urlseen = _from_crawler("scrapy_irl.dupefilter.DrumDupeFilter")
_scheduler = _from_crawler("scrapy_irl.scheduler.scheduler.IrlScheduler")
_hosts = _from_crawler("scrapy_irl.hosts.middleware.HostDnsMiddleware")
_robots = _from_crawler("scrapy_irl.robots.middleware.RobotsCacheMiddleware")
_simweb = _from_crawler("scrapy_irl.simweb.resolver.SimwebResolver", None)


#: (setting, bad value, the component reading it at start). Each used to fail with a bare
#: Python error (``invalid literal for int()``, ``expected str ... not int``, ``unhashable
#: type``), with an error naming a constructor argument, or not at all (a directory
#: called ``5``; a web of 150,000 PLDs built for many seconds).
BAD_VALUES = [
    ("IRL_WARC_ENABLED", "maybe", _warc),
    ("IRL_WARC_ENABLED", [1], _warc),
    ("IRL_WARC_GZIP", "maybe", _warc),
    ("IRL_WARC_GZIP", [1], _warc),
    ("IRL_WARC_MAX_BYTES", "abc", _warc),
    ("IRL_WARC_MAX_BYTES", float("inf"), _warc),
    ("IRL_WARC_MAX_BYTES", [1], _warc),
    ("IRL_WARC_MAX_BYTES", 0, _warc),
    ("IRL_WARC_PREFIX", 5, _warc),
    ("IRL_WARC_PREFIX", "a/b", _warc),
    ("IRL_WARC_DIR", 5, _warc),
    ("IRL_WARC_DIR", ["a"], _warc),
    ("IRL_REPORT_ENABLED", "maybe", _report),
    ("IRL_REPORT_ENABLED", [1], _report),
    ("IRL_REPORT_AT_CLOSE", "maybe", _report),
    ("IRL_REPORT_AT_CLOSE", [1], _report),
    ("IRL_REPORT_DIR", 5, _report),
    ("IRL_REPORT_DIR", ["a"], _report),
    ("IRL_URLSEEN_DIR", 5, _urlseen),
    ("IRL_URLSEEN_DIR", {"x": 1}, _urlseen),
    ("IRL_URLSEEN_BUCKETS", 3, _urlseen),
    ("IRL_URLSEEN_BUCKETS", 8192, _urlseen),
    ("IRL_URLSEEN_BUFFER_BYTES", 0, _urlseen),
    ("IRL_URLSEEN_MERGE_CHUNK_BYTES", -1, _urlseen),
    ("IRL_FRONTIER_DIR", 5, _scheduler),
    ("IRL_FRONTIER_DIR", ["a"], _scheduler),
    ("IRL_BUDGET_BASE", -1, _scheduler),
    # read at open(): refused there in a burst of Scrapy's tracebacks (a user probe)
    ("IRL_DRUM_FSYNC", "maybe", _scheduler),
    ("IRL_FAST_FINGERPRINT", "maybe", _scheduler),
    ("IRL_DRUM_VERIFY_ON_OPEN", "maybe", _scheduler),
    # infinite delays were taken: a crawl that never fetched, without a word (a probe)
    ("IRL_HOST_DELAY", float("inf"), _scheduler),
    ("IRL_IP_DELAY", "inf", _scheduler),
    ("IRL_BACKOFF_MAX", float("inf"), _scheduler),
    ("IRL_IP_SHARE", "x", _scheduler),
    # read by the download handler, which Scrapy builds at the first request: until
    # 2026-11-27 every request then failed ("Unsupported URL scheme 'http'")
    ("IRL_KEEPALIVE_MAX_IDLE", 0, _scheduler),
    ("IRL_KEEPALIVE_MAX_IDLE", "abc", _scheduler),
    ("IRL_SESSION_PARAMS", ["sid", 5], _scheduler),
    ("IRL_HOSTS_DIR", 5, _hosts),
    ("IRL_HOSTS_DIR", ["a"], _hosts),
    ("IRL_DNS_TTL", 0, _hosts),
    ("IRL_DNS_CONCURRENCY", 0, _hosts),
    ("IRL_DNS_MEMORY_ENTRIES", -1, _hosts),
    ("IRL_ROBOTS_MEMORY_ENTRIES", 0, _robots),
    ("IRL_ROBOTS_MEMORY_BYTES", -1, _robots),
    ("IRL_SIMWEB_CONFIG", 5, _simweb),
    ("IRL_SIMWEB_CONFIG", "no-such-simweb.json", _simweb),
    ("IRL_SIMWEB_SIZE", "huge", _simweb),
    ("IRL_SIMWEB_SIZE", ["tiny"], _simweb),
    ("IRL_SIMWEB_SEED", "abc", _simweb),
    ("IRL_SIMWEB_PLDS", 3, _simweb),
    ("IRL_SIMWEB_PLDS", -1, _simweb),
    ("IRL_SIMWEB_PLDS", 150_000, _simweb),
    ("IRL_SIMWEB_PORT", 70_000, _simweb),
    ("IRL_SIMWEB_PORT", -1, _simweb),
]


@pytest.mark.parametrize(("name", "bad", "build"), BAD_VALUES,
                         ids=[f"{n}={b!r}" for n, b, _ in BAD_VALUES])  # fmt: skip
def test_bad_value_is_refused_at_start_naming_setting_and_value(
    name: str, bad: Any, build: Callable[[Any], Any], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    from scrapy.utils.test import get_crawler

    monkeypatch.chdir(tmp_path)  # a directory wrongly named after the value lands here
    settings = {
        "JOBDIR": str(tmp_path / "job"), "IRL_HOSTS_DIR": str(tmp_path / "hosts"),
        "IRL_WARC_ENABLED": True, "IRL_REPORT_ENABLED": True, "ROBOTSTXT_OBEY": True,
        "IRL_SIMWEB_SIZE": "tiny", name: bad,
    }  # fmt: skip
    with pytest.raises(ValueError) as refused:
        build(get_crawler(settings_dict=settings))
    message = str(refused.value)
    assert name in message, message
    assert repr(bad) in message or str(bad) in message, message


def test_valid_paths_and_strings_are_kept() -> None:
    """``os.PathLike`` works for a path setting, and empty / None mean "not set"."""
    from scrapy.settings import Settings

    assert config.getpath(Settings({"IRL_WARC_DIR": Path("/x/y")}), "IRL_WARC_DIR") == "/x/y"
    assert config.getpath(Settings({"IRL_WARC_DIR": None}), "IRL_WARC_DIR") == ""
    assert config.getpath(Settings(), "IRL_FRONTIER_DIR") == ""
    assert config.getstr(Settings(), "IRL_SIMWEB_SIZE", choices=("default",)) == "default"
    assert config.getlist(Settings({"IRL_SESSION_PARAMS": "a,b"}), "IRL_SESSION_PARAMS") == [
        "a", "b"
    ]  # fmt: skip
    assert config.getpowerof2(Settings(), "IRL_URLSEEN_BUCKETS", maximum=4096) == (
        defaults.IRL_URLSEEN_BUCKETS
    )


def test_a_setting_the_scheduler_refuses_is_logged_before_scrapys_follow_on_errors(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    # Scrapy builds the scheduler as the engine opens; its failure path then raised
    # "RuntimeError: Engine slot not assigned", the last line of the traceback.
    from scrapy.utils.test import get_crawler

    crawler = get_crawler(settings_dict={"JOBDIR": str(tmp_path / "job"),
                                         "IRL_HOST_DELAY": 1, "IRL_HOST_DELAY_MIN": 5})  # fmt: skip
    with pytest.raises(ValueError):
        _scheduler(crawler)
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert errors == ["Refusing to start the crawl: need 0 <= IRL_HOST_DELAY_MIN <= "
                      "IRL_HOST_DELAY, got 5.0, 1.0"]  # fmt: skip
    assert not (tmp_path / "job" / "irl").exists()  # refused before the frontier's directory


#: A bad value each component reads at start, and the class named in the refusal line.
REFUSAL_LINES = [
    ("IRL_PROGRESS_INTERVAL", "x", "scrapy_irl.progress.IrlProgress", "IrlProgress"),
    ("IRL_REPORT_INTERVAL", "x", "scrapy_irl.report.sampler.StatsSampler", "StatsSampler"),
    ("IRL_DNS_TIMEOUT", "x", "scrapy_irl.hosts.middleware.HostDnsMiddleware", "HostDnsMiddleware"),
    ("IRL_HOSTS_CACHE_BYTES", "x", "scrapy_irl.hosts.middleware.HostDnsMiddleware",
     "HostDnsMiddleware"),
    ("IRL_ROBOTS_TTL", "inf", "scrapy_irl.robots.middleware.RobotsCacheMiddleware",
     "RobotsCacheMiddleware"),
    ("IRL_URLSEEN_DIR", 5, "scrapy_irl.dupefilter.DrumDupeFilter", "DrumDupeFilter"),
    ("IRL_CRAWL_DELAY_MAX", "x", "scrapy_irl.robots.crawl_delay.CrawlDelayMiddleware",
     "CrawlDelayMiddleware"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "bad", "path", "component"), REFUSAL_LINES,
                         ids=[f"{n}={b!r}" for n, b, _, _ in REFUSAL_LINES])  # fmt: skip
def test_a_bad_value_read_by_a_component_gets_the_one_refusal_line(
    name: str, bad: Any, path: str, component: str, tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    """Raised raw from a middleware's or extension's start, a refused value reached the
    user as Scrapy's tracebacks, without the "Refusing to start the crawl" line the
    scheduler's own settings get (a user probe, 2026-11-28)."""
    from scrapy.utils.test import get_crawler

    settings = {"JOBDIR": str(tmp_path / "job"), "IRL_HOSTS_DIR": str(tmp_path / "hosts"),
                "ROBOTSTXT_OBEY": True, "IRL_REPORT_ENABLED": True, name: bad}  # fmt: skip
    with pytest.raises(config.SettingError):
        _from_crawler(path)(get_crawler(settings_dict=settings))
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"Refusing to start the crawl: invalid {name}={bad!r}"), errors
    assert errors[0].endswith(f"(read by {component})"), errors


def test_a_setting_read_as_the_scheduler_opens_gets_the_one_refusal_line(
    caplog: pytest.LogCaptureFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every value is read when the scheduler is created (check_settings); one that only
    # open() reads still gets the line, not only Scrapy's tracebacks
    from scrapy import Spider
    from scrapy.utils.test import get_crawler

    from scrapy_irl.scheduler import pipeline

    crawler = get_crawler(settings_dict={"JOBDIR": str(tmp_path / "job"),
                                         "IRL_HOSTS_DIR": str(tmp_path / "hosts")})  # fmt: skip
    sched = _scheduler(crawler)

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise config.SettingError("invalid IRL_BEAST_QUEUES=1: expected 2 or more")

    monkeypatch.setattr(pipeline, "build_star_and_beast", refused)
    with pytest.raises(config.SettingError):
        sched.open(Spider(name="s"))
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert errors == ["Refusing to start the crawl: invalid IRL_BEAST_QUEUES=1: expected 2 "
                      "or more"]  # fmt: skip
