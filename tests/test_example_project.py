"""The example project's ``broad`` spider crawls simweb end to end and reports the judge."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ROOT / "example_project"


ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PROJECT), str(ROOT)])}


def run_broad(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scrapy", "crawl", "broad",
         "-s", "IRL_SIMWEB_SIZE=tiny", "-s", "CLOSESPIDER_PAGECOUNT=150",
         "-s", "CLOSESPIDER_TIMEOUT=60", "-s", f"JOBDIR={tmp_path / 'job'}",
         # short politeness delays keep these crawls quick; the judge checks them elsewhere
         "-s", "IRL_HOST_DELAY=1", "-s", "IRL_HOST_DELAY_MIN=0.5",
         "-s", "IRL_IP_DELAY=0.2", "-s", "IRL_IP_DELAY_MIN=0.1",
         "-a", f"requests_log={tmp_path / 'requests.log'}", *args],
        cwd=PROJECT, env=env or ENV, capture_output=True, text=True, timeout=180,
    )


@pytest.mark.slow
def test_broad_crawls_simweb_and_judges_it(tmp_path: Path) -> None:
    proc = run_broad(tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = proc.stderr
    assert "'finish_reason': 'closespider_pagecount'" in log
    assert "simweb judge for this crawl" in log and "robots violations" in log
    assert "Task was destroyed" not in log  # simweb shut down cleanly
    assert "spider_exceptions" not in log
    assert (tmp_path / "requests.log").stat().st_size > 0
    assert (tmp_path / "job" / "irl" / "urlseen" / "MANIFEST").exists()
    assert (tmp_path / "job" / "irl" / "beast" / "STATE").exists()
    # the page repository: WARC files listed at the end
    warcs = sorted((tmp_path / "job" / "warc").glob("*.warc.gz"))
    assert warcs and "WARC files in" in log and warcs[0].name in log
    # the crawl report, built at close (IRL_REPORT_AT_CLOSE in the example settings) ...
    report_dir = tmp_path / "job" / "irl" / "report"
    assert "IRL crawl report" in log and str(report_dir / "index.html") in log
    for png in ("download_rate.png", "uniqueness.png", "pld_pages.png", "queues.png"):
        assert (report_dir / png).read_bytes()[:4] == b"\x89PNG", png
    plds = json.loads((tmp_path / "job" / "irl" / "pld_table.json").read_text())
    assert plds and plds[0]["indegree"] >= plds[-1]["indegree"]
    # ... and again from the shell, the way a user runs it on a JOBDIR
    proc = subprocess.run(
        [sys.executable, "-m", "scrapy", "irl-report", str(tmp_path / "job"),
         "-o", str(tmp_path / "again")],
        cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "mean pages/s" in proc.stdout and plds[0]["pld"] in proc.stdout
    assert (tmp_path / "again" / "index.html").is_file()


@pytest.mark.slow
def test_broad_reports_bad_seed_lines(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("# comment\n\nnot a url\nftp://x.example/\nhttp://127.0.0.1:9/\n")
    proc = run_broad(tmp_path, "-a", f"seeds={seeds}", "-s", "CLOSESPIDER_TIMEOUT=10")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "line 3 is not an http(s) URL: 'not a url'" in proc.stderr
    assert "line 4 is not an http(s) URL" in proc.stderr
    assert "'broad/seeds_rejected': 2" in proc.stderr


@pytest.mark.slow
def test_a_simweb_crawl_ignores_a_proxy_in_the_environment(tmp_path: Path) -> None:
    # With http_proxy set (as on many CI machines), every simweb request went to the
    # proxy, which cannot know simweb's names: here a closed port, so nothing was fetched.
    env = {**ENV, "http_proxy": "http://127.0.0.1:9", "no_proxy": ""}
    proc = run_broad(tmp_path, "-s", "CLOSESPIDER_PAGECOUNT=40", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "'finish_reason': 'closespider_pagecount'" in proc.stderr, proc.stderr[-3000:]
    assert "irl_dns/proxied_requests" not in proc.stderr


@pytest.mark.slow
def test_broad_crawls_start_urls_on_a_loopback_site_by_name(tmp_path: Path) -> None:
    # -a start_urls= was ignored (simweb was crawled instead), and the project's simweb
    # resolver refused "localhost": a site of one's own on loopback could not be crawled.
    from tests.loopback_site import loopback_site

    with loopback_site(size=12) as site:
        port = site.server_address[1]
        proc = run_broad(tmp_path, "-a", f"start_urls=http://localhost:{port}/page/1,not-a-url",
                         "-s", "CLOSESPIDER_TIMEOUT=30")  # fmt: skip
        hits = dict(site.hits)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert {f"/page/{n}" for n in range(12)} <= set(hits), hits  # all of it, by name
    assert "start_urls item 2 is not an http(s) URL: 'not-a-url'" in proc.stderr
    assert "'broad/seeds': 1" in proc.stderr and "'broad/seeds_rejected': 1" in proc.stderr
    assert "simweb serves" not in proc.stderr


@pytest.mark.slow
def test_a_resumed_jobdir_crawl_serves_simweb_on_the_same_port(tmp_path: Path) -> None:
    """Every URL in a JOBDIR's frontier names simweb's port: a resumed run must reuse it
    (it used to pick a new free port, so the resumed frontier pointed at nothing)."""
    first = run_broad(tmp_path, "-s", "CLOSESPIDER_PAGECOUNT=30")
    assert first.returncode == 0, first.stderr[-3000:]
    port = int((tmp_path / "job" / "simweb.port").read_text())
    assert f"on port {port};" in first.stderr
    second = run_broad(tmp_path, "-s", "CLOSESPIDER_PAGECOUNT=60")
    assert second.returncode == 0, second.stderr[-3000:]
    assert "Resuming crawl" in second.stderr
    assert f"on port {port};" in second.stderr
    assert "Connection was refused" not in second.stderr
    # A port another program holds: a clear error, and the crawl stops at once.
    import socket

    from scrapy_irl.simweb.model import ip_address

    with socket.socket() as holder:  # on simweb's first loopback address
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind((ip_address(0), port))
        holder.listen()
        third = run_broad(tmp_path)
    assert third.returncode == 0, third.stderr[-3000:]
    assert f"simweb cannot listen on port {port}" in third.stderr
    assert "'finish_reason': 'simweb_unavailable'" in third.stderr
    assert "Traceback" not in third.stderr
    # ... before the engine hands out a request: the close used to come a reactor turn
    # late, after ~14 frontier requests had gone to the downloader (and failed).
    assert "'downloader/request_count'" not in third.stderr
    assert "'scheduler/dequeued'" not in third.stderr
    # The frontier stays whole in the JOBDIR: the next run resumes exactly what it held.
    fourth = run_broad(tmp_path, "-s", "CLOSESPIDER_PAGECOUNT=5")
    assert fourth.returncode == 0, fourth.stderr[-3000:]
    assert f"on port {port};" in fourth.stderr
    assert _resumed(third.stderr) == _resumed(fourth.stderr) != ""
    assert "'downloader/response_count'" in fourth.stderr
    # A damaged port file (a kill used to be able to leave it empty): refused, not a new
    # port under URLs that name the old one (found by a kill -9 probe, 2026-11-27).
    (tmp_path / "job" / "simweb.port").write_text("")
    fifth = run_broad(tmp_path)
    assert fifth.returncode == 0, fifth.stderr[-3000:]
    assert "simweb.port is damaged" in fifth.stderr and "IRL_SIMWEB_PORT" in fifth.stderr
    assert "'finish_reason': 'simweb_unavailable'" in fifth.stderr
    assert "'downloader/request_count'" not in fifth.stderr
    assert (tmp_path / "job" / "simweb.port").read_text() == ""  # left for the user to see
    # Deleted (a fuzz of the JOBDIR, 2026-11-27): the frontier still names the old port.
    (tmp_path / "job" / "simweb.port").unlink()
    sixth = run_broad(tmp_path)
    assert sixth.returncode == 0, sixth.stderr[-3000:]
    assert "simweb.port is missing" in sixth.stderr and "IRL_SIMWEB_PORT" in sixth.stderr
    assert "'downloader/request_count'" not in sixth.stderr
    assert not (tmp_path / "job" / "simweb.port").exists()


def _resumed(log: str) -> str:
    """The frontier a run resumed: "N URLs queued in BEAST, P parked, M awaiting URLseen"."""
    match = re.search(
        r"Resuming crawl from .*?: (\d+ URLs queued in BEAST, \d+ parked, \d+ awaiting URLseen)", log
    )
    return match.group(1) if match else ""


def test_seed_file_bad_ports_and_a_byte_order_mark(tmp_path):
    # A bad port raised out of read_seeds and aborted every seed (start_error); a BOM
    # made the first URL a rejected line.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "example_project"))
    from example.spiders.broad import read_seeds

    seeds = tmp_path / "seeds.txt"
    seeds.write_bytes("\ufeffhttp://a.example/\nhttp://b.example:99999/\nhttp://c.example:abc/\n"
                      "http://d.example/x\n".encode())  # fmt: skip
    good, bad = read_seeds(seeds)
    assert good == ["http://a.example/", "http://d.example/x"]
    assert [number for number, _ in bad] == [2, 3]


def test_a_simweb_port_file_cut_short_is_damaged_not_another_port(tmp_path):
    # "4123" of "41234\n" read as port 4123, and a resumed frontier was spent against it
    # (JOBDIR damage probe, 2026-11-28): only digits and the newline the writer adds count.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "example_project"))
    from example.spiders.broad import _read_port, _write_port

    port_file = tmp_path / "simweb.port"
    _write_port(port_file, 41234)
    assert _read_port(port_file) == 41234
    for damaged in (b"4123", b"41234", b"", b"\n", b" 41234\n", b"41234\n\n", b"70000\n",
                    b"0\n", b"4\xff\n", b"+4123\n"):  # fmt: skip
        port_file.write_bytes(damaged)
        assert _read_port(port_file) is None, damaged
    port_file.unlink()
    assert _read_port(port_file) is None


def test_simweb_failing_to_start_closes_the_spider_at_open(caplog):
    # Raised from the spider_opened handler, CloseSpider stops the crawl before the engine
    # starts; any failure (not only a taken port) must do so, or a resumed frontier is fetched.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "example_project"))
    from example.spiders.broad import BroadSpider
    from scrapy.exceptions import CloseSpider

    spider = BroadSpider()
    for error in (RuntimeError("simweb cannot listen on port 1"), ValueError("bad size")):
        def fail(error: Exception = error) -> list[str]:
            raise error

        spider._start_simweb = fail  # type: ignore[method-assign]
        with pytest.raises(CloseSpider) as raised:
            spider._open_simweb()
        assert raised.value.reason == "simweb_unavailable"
    assert "simweb cannot listen on port 1" in caplog.text and "bad size" in caplog.text
    spider._start_simweb = lambda: ["http://127.0.0.1:1/"]  # type: ignore[method-assign]
    spider._open_simweb()

    async def start_urls() -> list[str]:
        return [request.url async for request in spider.start()]

    assert asyncio.run(start_urls()) == ["http://127.0.0.1:1/"]  # simweb's seeds


def test_the_simweb_argument_is_read_as_a_switch(tmp_path):
    # bool("0") is True: -a simweb=0 started simweb (found by an audit, 2026-11-27).
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "example_project"))
    from example.spiders.broad import BroadSpider

    urls = "http://127.0.0.1:1/"
    assert BroadSpider().use_simweb  # nothing given: simweb
    assert BroadSpider(simweb="1", start_urls=urls).use_simweb
    assert BroadSpider(simweb="yes", start_urls=urls).use_simweb
    assert not BroadSpider(simweb="0", start_urls=urls).use_simweb
    assert not BroadSpider(simweb="false", start_urls=urls).use_simweb
    assert not BroadSpider(start_urls=urls).use_simweb
    with pytest.raises(ValueError, match="nothing else to crawl"):
        BroadSpider(simweb="0")
    with pytest.raises(ValueError, match="simweb='maybe'"):
        BroadSpider(simweb="maybe", start_urls=urls)


@pytest.mark.slow
def test_a_jobdir_killed_before_its_port_file_starts_afresh_when_its_frontier_is_empty(
    tmp_path: Path,
) -> None:
    """A kill between the frontier's creation and ``simweb.port``'s write left a JOBDIR
    that every later start refused (found by a kill -9 probe, 2026-11-27), though no
    queued URL named the lost port. An empty frontier now starts afresh on a free port."""
    from scrapy import Spider
    from scrapy.utils.test import get_crawler

    from scrapy_irl.scheduler import IrlScheduler

    crawler = get_crawler(Spider, settings_dict={"JOBDIR": str(tmp_path / "job")})
    crawler.spider = crawler._create_spider("broad")
    frontier = IrlScheduler.from_crawler(crawler)
    frontier.open(crawler.spider)  # the frontier exists, holds nothing; no port file
    frontier.close("killed")
    assert not (tmp_path / "job" / "simweb.port").exists()
    proc = run_broad(tmp_path, "-s", "CLOSESPIDER_PAGECOUNT=10")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "simweb.port is missing" not in proc.stderr
    assert "'downloader/response_count'" in proc.stderr
    assert (tmp_path / "job" / "simweb.port").exists()
