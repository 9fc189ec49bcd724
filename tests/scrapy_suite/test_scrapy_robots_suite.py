"""Scrapy's own robots middleware tests, run against RobotsCacheMiddleware.

The tests come from the source distribution of the installed Scrapy version (fetched
from PyPI into a cache directory), unchanged; ``irl_swap_plugin`` rebinds the class
they test. The outcome must be exactly: every test passes except the listed deliberate
differences, which must fail (so the list stays true).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import scrapy

HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("IRL_SCRAPY_SDIST_CACHE", Path.home() / ".cache" / "scrapy-irl" / "sdist"))

#: Tests whose stock behaviour we change on purpose, and why (also in docs/robots.rst).
DELIBERATE = {
    # A robots.txt fetch that fails on its name's DNS fails the page with the same DNS
    # error, in the add-on's download handler (the page then passes every middleware and
    # the downloader's signals, as in stock) or, under another handler (as in this unit
    # test), here: stock lets it go on to a fresh lookup, which may send it unchecked.
    # It says so at INFO, since the page's own DNS error follows; stock logs an ERROR.
    "test_robotstxt_error": "a robots.txt DNS failure is logged at INFO, not as an ERROR",
    "test_robotstxt_immediate_error": "its page fails with the DNS error (no handler of ours)",
}


def scrapy_sdist_tests(work: Path) -> Path:
    """Scrapy's tests/, conftest.py and pyproject.toml of the installed version, in ``work``."""
    version = scrapy.__version__
    archive = CACHE / f"scrapy-{version}.tar.gz"
    if not archive.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", f"scrapy=={version}", "--no-deps",
             "--no-binary", ":all:", "-d", str(CACHE), "-q"],
            check=True, timeout=300,
        )
    root = f"scrapy-{version}"
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers()
                   if m.name.startswith((f"{root}/tests/", f"{root}/conftest.py", f"{root}/pyproject.toml"))]
        tar.extractall(work, members=members, filter="data")
    suite = work / root
    shutil.copy(HERE / "irl_swap_plugin.py", suite / "irl_swap_plugin.py")
    shutil.copy(HERE.parent / "loopback_dns.py", suite / "sitecustomize.py")
    return suite


def suite_env(suite: Path) -> dict[str, str]:
    """The environment of a run of Scrapy's suite: its root first on ``PYTHONPATH``, so
    every Python process of the run loads ``sitecustomize`` (``tests/loopback_dns``) and asks
    no DNS server. pytest-xdist's variables are left out: under them, Scrapy's conftest
    expects a mock server shared by the workers of a run that this one is not part of."""
    env = {k: v for k, v in os.environ.items()
           if k != "PYTHONPATH" and not k.startswith("PYTEST_XDIST_")}
    env["PYTHONPATH"] = str(suite)
    return env


def check_swapped(
    tmp_path: Path,
    switch: str,
    files: tuple[str, ...],
    *,
    not_run: set[str],
    deliberate: set[str],
    min_passed: int,
) -> None:
    """Run ``files`` of Scrapy's suite with the environment switch ``switch`` (for example
    ``IRL_SWAP_DUPEFILTER``) set and ``not_run`` deselected. Exactly the ``deliberate``
    tests (ids without their ``tests/`` prefix) must fail, and at least ``min_passed``
    pass; the plugin must have made the swap and installed the DNS guard."""
    suite = scrapy_sdist_tests(tmp_path)
    env = suite_env(suite)
    env[switch] = "1"
    deselect = [arg for test in sorted(not_run) for arg in ("--deselect", f"tests/{test}")]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "irl_swap_plugin", "-p", "no:cacheprovider",
         "-rA", "-q", "-s", "--timeout=120", *deselect, *files],
        cwd=suite, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    out = proc.stdout
    assert "DNS lookups limited to loopback" in out, out[-3000:]
    assert f"irl_swap_plugin: {switch} ->" in out, out[-3000:]
    assert f"{len(not_run)} deselected" in out, out[-3000:]
    failed = set(re.findall(r"^FAILED tests/(\S+?)(?: - |$)", out, re.MULTILINE))
    assert failed == deliberate, (sorted(failed ^ deliberate), out[-4000:])
    assert len(re.findall(r"^PASSED ", out, re.MULTILINE)) >= min_passed, out[-3000:]


def test_scrapy_robotstxt_middleware_tests(tmp_path: Path) -> None:
    suite = scrapy_sdist_tests(tmp_path)
    env = suite_env(suite)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "irl_swap_plugin", "-p", "no:cacheprovider",
         "-rA", "-q", "-s", "tests/test_downloadermiddleware_robotstxt.py"],
        cwd=suite, env=env, capture_output=True, text=True, timeout=600, check=False,
    )
    out = proc.stdout
    assert "DNS lookups limited to loopback" in out, out[-3000:]
    assert "RobotsTxtMiddleware -> scrapy_irl.robots.middleware.RobotsCacheMiddleware" in out, out[-3000:]
    passed = set(re.findall(r"^PASSED \S+::TestRobotsTxtMiddleware::(\w+)", out, re.MULTILINE))
    failed = set(re.findall(r"^FAILED \S+::TestRobotsTxtMiddleware::(\w+)", out, re.MULTILINE))
    assert failed == set(DELIBERATE), out[-5000:]
    assert len(passed) >= 12, out[-3000:]
    assert not passed & failed
