"""pytest plugin loaded into Scrapy's own test suite: points it at scrapy-irl's components.

Copied next to Scrapy's ``tests/`` (from its source distribution) and loaded with
``-p irl_swap_plugin``. ``IRL_SWAP_SCHEDULER=1`` and ``IRL_SWAP_DUPEFILTER=1`` in the
environment change Scrapy's default settings. After collection it rebinds the module
globals the tests build their objects from, so the unchanged tests exercise our classes;
every test runs in its
own working directory, so each gets a fresh host store (``.scrapy/irl/hosts``). The run
asks no DNS server: ``loopback_dns`` is installed as the suite's ``sitecustomize``.
"""

from __future__ import annotations

import sys

import pytest

SWAPS = {
    "tests.test_downloadermiddleware_robotstxt": {
        "RobotsTxtMiddleware": "scrapy_irl.robots.middleware.RobotsCacheMiddleware",
    },
}


#: With IRL_SWAP_SCHEDULER=1, every crawler of the suite gets the IRL scheduler by default,
#: with politeness delays at zero: Scrapy's tests crawl one mock server and time themselves.
SCHEDULER_DEFAULTS = {
    "SCHEDULER": "scrapy_irl.scheduler.IrlScheduler",
    "IRL_HOST_DELAY": 0.0,
    "IRL_HOST_DELAY_MIN": 0.0,
    "IRL_IP_DELAY": 0.0,
    "IRL_IP_DELAY_MIN": 0.0,
    "IRL_POLITENESS_MARGIN": 0.0,
    "IRL_IP_MAX_IN_FLIGHT": 16,
    "IRL_IDLE_MERGE_INTERVAL": 0.0,
    # Scrapy's RetryMiddleware retries a DNS error at once; ours waits 10 s, then 20 s.
    "IRL_DNS_RETRY_DELAY": 0.2,
}


#: With IRL_SWAP_DUPEFILTER=1, Scrapy's own scheduler filters with DRUM's URLseen instead of
#: RFPDupeFilter wherever a test leaves DUPEFILTER_CLASS at its default.
DUPEFILTER = "scrapy_irl.dupefilter.DrumDupeFilter"


def pytest_configure(config: pytest.Config) -> None:
    import os
    import socket

    if hasattr(socket.getaddrinfo, "__wrapped__"):  # sitecustomize = loopback_dns loaded
        print("irl_swap_plugin: DNS lookups limited to loopback")

    if os.environ.get("IRL_SWAP_SCHEDULER") == "1":
        from scrapy.settings import default_settings

        for name, value in SCHEDULER_DEFAULTS.items():
            setattr(default_settings, name, value)
        print("irl_swap_plugin: IRL_SWAP_SCHEDULER -> SCHEDULER = scrapy_irl.scheduler.IrlScheduler")

    if os.environ.get("IRL_SWAP_DUPEFILTER") == "1":
        from scrapy.settings import default_settings

        default_settings.DUPEFILTER_CLASS = DUPEFILTER
        print(f"irl_swap_plugin: IRL_SWAP_DUPEFILTER -> DUPEFILTER_CLASS = {DUPEFILTER}")


def pytest_collection_finish(session: pytest.Session) -> None:
    from scrapy.utils.misc import load_object

    for module_name, names in SWAPS.items():
        module = sys.modules.get(module_name)
        if module is None:
            continue
        for name, path in names.items():
            setattr(module, name, load_object(path))
            print(f"irl_swap_plugin: {module_name}.{name} -> {path}")


@pytest.fixture(autouse=True)
def _fresh_host_store(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
