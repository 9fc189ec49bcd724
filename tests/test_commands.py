"""Scrapy's command-line tools in a project that enables the add-on (found 2026-11-25 by
running each of them on a loopback site)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.loopback_site import RobotsHandler, _Server, loopback_site, send_answer, send_body, serving

ROOT = Path(__file__).resolve().parents[1]

SETTINGS = """
BOT_NAME = "proj"
SPIDER_MODULES = ["proj.spiders"]
ADDONS = {"scrapy_irl.Addon": 0}
ROBOTSTXT_OBEY = True
TELNETCONSOLE_ENABLED = False
REMOTE_CONTROL_ENABLED = False
IRL_HOST_DELAY = 0.0
IRL_HOST_DELAY_MIN = 0.0
IRL_IP_DELAY = 0.0
IRL_IP_DELAY_MIN = 0.0
IRL_POLITENESS_MARGIN = 0.0
"""


def project(tmp_path: Path, extra_settings: str = "") -> Path:
    """A Scrapy project with the add-on; every process started in it asks no DNS server
    (``tests/loopback_dns`` as its ``sitecustomize``)."""
    root = tmp_path / "proj"
    (root / "proj" / "spiders").mkdir(parents=True)
    (root / "scrapy.cfg").write_text("[settings]\ndefault = proj.settings\n")
    (root / "proj" / "__init__.py").write_text("")
    (root / "proj" / "spiders" / "__init__.py").write_text("")
    (root / "proj" / "settings.py").write_text(
        SETTINGS + f"IRL_HOSTS_DIR = {str(tmp_path / 'hosts')!r}\n" + extra_settings
    )
    guard = tmp_path / "guard"
    guard.mkdir()
    shutil.copy(ROOT / "tests" / "loopback_dns.py", guard / "sitecustomize.py")
    return root


def scrapy(root: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    guard = root.parent / "guard"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(guard), str(root), str(ROOT)])}
    return subprocess.run(
        [sys.executable, "-m", "scrapy", *args],
        cwd=root, env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def test_scrapy_shell_gets_its_response(tmp_path: Path) -> None:
    """The shell hands the engine a request and then sets, on that object, the callback
    that brings the response back to the console. The IRL scheduler handed out a copy
    rebuilt from disk: the response went to the default spider's ``parse``
    (NotImplementedError) and the shell waited for ever."""
    root = project(tmp_path)
    with loopback_site(8) as site:
        proc = scrapy(root, "shell", "-c", "(response.status, response.url)",
                      f"{site.base_url}/page/1", timeout=45)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"(200, '{site.base_url}/page/1')" in proc.stdout
    assert "NotImplementedError" not in proc.stderr


def test_scrapy_shell_can_fetch_a_page_twice(tmp_path: Path) -> None:
    """``scrapy shell`` sets DUPEFILTER_CLASS = BaseDupeFilter so that ``fetch(request)``
    works for a page fetched before. The add-on replaced it (its priority is above a
    command's) and URLseen dropped the second request: the shell waited for ever."""
    root = project(tmp_path)
    with loopback_site(8) as site:
        page = f"{site.base_url}/page/2"
        code = f"(fetch(scrapy.Request({page!r})), fetch(scrapy.Request({page!r})), response.url)"
        proc = scrapy(root, "shell", "-c", code, f"{site.base_url}/page/1", timeout=45)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"(None, None, {page!r})" in proc.stdout
    assert site.hits["/page/2"] == 2


def test_scheduler_stats_keep_scrapys_meaning(tmp_path: Path) -> None:
    """``scheduler/enqueued`` counted every request offered, duplicates included: a
    finished crawl ended with 193 enqueued and 64 dequeued where Scrapy's scheduler
    shows 64 and 64, as if 129 requests had been lost in the frontier."""
    from tests.crawl_runner import crawl_in_subprocess

    with loopback_site(64) as site:
        stats, _ = crawl_in_subprocess({
            "start": [f"{site.base_url}/page/1"],
            "unfiltered": [f"{site.base_url}/page/1"],
            "settings": {"ADDONS": {"scrapy_irl.Addon": 0}, "IRL_HOST_DELAY": 0.0,
                         "IRL_HOST_DELAY_MIN": 0.0, "IRL_IP_DELAY": 0.0,
                         "IRL_IP_DELAY_MIN": 0.0, "IRL_HOSTS_DIR": str(tmp_path / "hosts")},
        })  # fmt: skip
    assert stats["finish_reason"] == "finished"
    assert stats["response_received_count"] == 65  # 64 pages, one of them twice
    assert stats["scheduler/enqueued"] == stats["scheduler/dequeued"] == 65
    assert stats["irl_sched/offered"] == 65 + stats["dupefilter/filtered"]


def test_scrapy_fetch_runs_while_a_crawl_holds_the_projects_host_store(tmp_path: Path) -> None:
    """Without IRL_HOSTS_DIR and JOBDIR every process of a project shares one host store,
    and LevelDB lets one process open it: ``scrapy fetch`` during a crawl failed with a
    lock error. It now gets a temporary store (WARNING), removed when it ends."""
    root = project(tmp_path, 'IRL_HOSTS_DIR = ""\n')
    shared = root / ".scrapy" / "irl" / "hosts"
    shared.mkdir(parents=True)
    holder = subprocess.Popen(  # stands for the crawl: holds the lock for at most 60 s
        [sys.executable, "-c", "import plyvel, sys, time; db = plyvel.DB(sys.argv[1], "
         "create_if_missing=True); print('held', flush=True); time.sleep(60)", str(shared)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with loopback_site(8) as site:
            proc = scrapy(root, "fetch", f"{site.base_url}/page/1", timeout=45)
    finally:
        holder.kill()
        holder.wait(timeout=10)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "/page/2" in proc.stdout  # the page's body, with its links
    assert "uses a temporary host store" in proc.stderr
    stand_in = proc.stderr.split("uses a temporary host store, ", 1)[1].split(",", 1)[0]
    assert stand_in.startswith(tempfile.gettempdir()) and not os.path.exists(stand_in)


def test_scrapy_shell_fetches_a_url_with_a_session_id_as_given(tmp_path: Path) -> None:
    """Session ids were stripped from the shell's request too: the stripped copy was not
    the object the shell waits on, and it waited for ever."""
    root = project(tmp_path)
    with loopback_site(8) as site:
        url = f"{site.base_url}/page/1?PHPSESSID=0123456789abcdef0123456789abcdef"
        proc = scrapy(root, "shell", "-c", "(response.status, response.url)", url, timeout=45)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f", {url!r})" in proc.stdout  # (the site ignores the query: any status)


def flaky_robots_site(failures: int) -> Any:
    """The loopback site whose ``/robots.txt`` answers 503 ``failures`` times, then 200."""

    class FlakyRobots(RobotsHandler):
        def send_robots(self) -> None:
            if self.server.hits["/robots.txt"] <= failures:
                send_answer(self, 503, b"try later")
                return
            send_body(self, b"User-agent: *\nAllow: /\n", content_type="text/plain")

    server = _Server(8)
    server.RequestHandlerClass = FlakyRobots
    return serving(server)


def test_scrapy_shell_gets_its_response_after_robots_txt_recovers(tmp_path: Path) -> None:
    """A page whose robots.txt failed waits for the re-fetch parked on disk; the gate
    had taken the shell's own request object out of the live table to look at it, so the
    page came back rebuilt from its record, without the shell's callback: the response
    went to the default spider's ``parse`` and the shell waited for ever (a user probe)."""
    root = project(tmp_path, "IRL_ROBOTS_RETRY_DELAY = 0.5\n")
    with flaky_robots_site(2) as site:
        proc = scrapy(root, "shell", "-c", "(response.status, response.url)",
                      f"{site.base_url}/page/1", timeout=45)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"(200, '{site.base_url}/page/1')" in proc.stdout
    assert site.hits["/robots.txt"] == 3 and site.hits["/page/1"] == 1
    assert "NotImplementedError" not in proc.stderr


def test_scrapy_shell_returns_when_robots_txt_stays_unreachable(tmp_path: Path) -> None:
    """Past IRL_ROBOTS_UNREACHABLE_RETRIES the page is refused; the refusal must fail the
    shell's own request (it failed a rebuilt copy, and the shell waited for ever). The
    shell then returns without a response, as it does for any failed fetch."""
    root = project(tmp_path, "IRL_ROBOTS_RETRY_DELAY = 0.5\nIRL_ROBOTS_RETRY_MAX_DELAY = 1\n"
                             "IRL_ROBOTS_UNREACHABLE_RETRIES = 1\n")  # fmt: skip
    with flaky_robots_site(100) as site:
        proc = scrapy(root, "shell", "-c", "response", f"{site.base_url}/page/1", timeout=45)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "None"  # no response, as for any failure
    assert "robots.txt of <GET " + site.base_url + "/page/1> is unreachable" in proc.stderr
    assert site.hits["/robots.txt"] == 2 and site.hits["/page/1"] == 0
    assert site.hits["/page/1"] == 0
