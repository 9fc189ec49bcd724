"""pytest plugin loaded into Scrapy's own test suite: points it at scrapy-irl's components.

Copied next to Scrapy's ``tests/`` (from its source distribution) and loaded with
``-p irl_swap_plugin``. After collection it rebinds the module globals the tests build
their objects from, so the unchanged tests exercise our classes; every test runs in its
own working directory, so each gets a fresh host store (``.scrapy/irl/hosts``).
"""

from __future__ import annotations

import sys

import pytest

SWAPS = {
    "tests.test_downloadermiddleware_robotstxt": {
        "RobotsTxtMiddleware": "scrapy_irl.robots.middleware.RobotsCacheMiddleware",
    },
}


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
