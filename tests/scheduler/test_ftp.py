"""``ftp:`` URLs in the host and IP heaps, downloaded by the add-on's FTP handler.

Until 2026-11-27 they skipped the heaps: a probe saw the 13 ``ftp://`` links of one page
reach the host's FTP server within 1 ms. Routing them through the heaps needed an FTP
handler whose downloads end (Scrapy's has no timeout: one stalled transfer held its host
for the rest of the crawl) and that tells a refusing server from a silent one.
"""

from __future__ import annotations

import time
from itertools import pairwise
from pathlib import Path

from scrapy.settings import Settings

from scrapy_irl.hosts.download import polite_schemes
from scrapy_irl.hosts.ftp import PATH, PoliteFTPDownloadHandler, answered
from scrapy_irl.scheduler.items import without_host
from tests.ftp_server import FtpServer
from tests.loopback_site import serving
from tests.scheduler.test_unusual_requests import _Site, crawl

FILES = {f"/f{n}": f"file {n}".encode() for n in range(4)}


def retrieved(server: FtpServer) -> list[tuple[float, str | None]]:
    return [(session.arrived, session.retrieved) for session in server.sessions]


def test_ftp_links_wait_for_their_hosts_turn(tmp_path: Path) -> None:
    with FtpServer(FILES) as server:
        stats = crawl([{"url": server.url(path)} for path in FILES], tmp_path,
                      IRL_HOST_DELAY=0.4, IRL_HOST_DELAY_MIN=0.4, ROBOTSTXT_OBEY=True)  # fmt: skip
        sessions = retrieved(server)
    assert sorted(path for _, path in sessions) == sorted(FILES), (sessions, stats)
    assert min(later - earlier for (earlier, _), (later, _) in pairwise(sessions)) >= 0.4
    assert stats["downloader/response_status_count/200"] == 4
    # robots.txt is read over http(s) only: neither the gate nor the middleware fetches one
    assert stats["irl_sched/robots_other_scheme"] == 4
    assert stats["irl_robots/other_scheme"] == 4
    assert "irl_sched/no_host" not in stats


def test_a_stalled_ftp_transfer_ends_at_its_timeout_and_frees_its_host_and_ip(
    tmp_path: Path,
) -> None:
    """One FTP server that never sends a file held its host, and with one request in
    flight per IP every host of that IP, until the crawl was killed: with Scrapy's FTP
    handler this crawl ran into CLOSESPIDER_TIMEOUT and then waited for the transfer."""
    with FtpServer(FILES, stall=frozenset({"/f1"})) as server, serving(_Site()) as site:
        pages = [{"url": f"{site.base_url}/p{n}"} for n in range(3)]
        started = time.monotonic()
        stats = crawl([{"url": server.url("/f1")}, {"url": server.url("/f2")}, *pages],
                      tmp_path, DOWNLOAD_TIMEOUT=2, CLOSESPIDER_TIMEOUT=60)  # fmt: skip
        took = time.monotonic() - started
        sessions = retrieved(server)
    assert sorted(path for _, path in sessions) == ["/f1", "/f2"], sessions
    assert len(site.pages()) == 3, site.log
    assert stats["listed/errback/DownloadTimeoutError"] == 1
    assert stats["downloader/response_status_count/200"] == 4
    assert stats["finish_reason"] == "finished"
    assert took < 30, took
    assert stats["irl_sched/backoff/no_answer"] == 1  # a silent server is backed off


def test_ftp_hosts_of_one_server_share_its_ip_turns_whatever_proxy_is_named(
    tmp_path: Path,
) -> None:
    """Scrapy's FTP handler ignores ``meta["proxy"]``: taken as proxied, each host was
    timed on an address of its own, and two names of one server got gaps of 0.29 s at
    tau_s 1.5 s (found by review, 2026-11-27)."""
    with FtpServer(FILES) as server:
        requests = [{"url": f"ftp://{name}:{server.port}{path}",
                     "meta": {"proxy": "http://127.0.0.1:9"}}
                    for name, path in zip(["localhost", "127.0.0.1"] * 2, FILES)]  # fmt: skip
        stats = crawl(requests, tmp_path, IRL_IP_DELAY=0.6, IRL_IP_DELAY_MIN=0.6)
        sessions = retrieved(server)
    assert sorted(path for _, path in sessions) == sorted(FILES), (sessions, stats)
    assert min(later - earlier for (earlier, _), (later, _) in pairwise(sessions)) >= 0.6
    assert "irl_sched/proxied_hosts_added" not in stats


def test_a_refused_ftp_login_does_not_back_off_its_hosts_http_pages(tmp_path: Path) -> None:
    """The server answered (530): its host is up, and its http pages keep their pace. A
    refused login reached the scheduler as a download that got no answer, and the host
    waited 2, 4, 8... tau_h."""
    with FtpServer(FILES, refuse_login=True) as server, serving(_Site()) as site:
        stats = crawl([{"url": server.url(path)} for path in FILES]
                      + [{"url": f"{site.base_url}/p{n}"} for n in range(3)], tmp_path)  # fmt: skip
    assert len(server.sessions) == 4 and len(site.pages()) == 3
    assert stats["listed/errback/ConnectionLost"] == 4
    assert not [key for key in stats if key.startswith("irl_sched/backoff/")], stats


def test_a_failed_ftp_command_does_not_back_its_host_off_as_an_http_503(tmp_path: Path) -> None:
    """Scrapy's FTP handler answers every failed command but 550 with status 503: not an
    HTTP server's "come back later" (IRL_BACKOFF_HTTP_CODES), so no back-off."""
    with FtpServer(FILES, broken=frozenset(FILES)) as server:
        stats = crawl([{"url": server.url(path)} for path in FILES], tmp_path)
    assert len(server.sessions) == 4
    assert stats["downloader/response_status_count/503"] == 4
    assert not [key for key in stats if key.startswith("irl_sched/backoff/")], stats


def test_ftp_joins_the_heaps_only_with_a_handler_whose_downloads_end() -> None:
    def schemes(handlers: dict) -> frozenset[str]:
        return polite_schemes(Settings({"DOWNLOAD_HANDLERS": handlers}))

    class Subclassed(PoliteFTPDownloadHandler):
        pass

    assert schemes({"ftp": PATH}) == {"http", "https", "ftp"}
    assert schemes({"ftp": Subclassed}) == {"http", "https", "ftp"}
    assert schemes({}) == {"http", "https"}  # Scrapy's own: no timeout
    assert schemes({"ftp": None}) == {"http", "https"}
    assert schemes({"ftp": "no.such.Handler"}) == {"http", "https"}
    polite = schemes({"ftp": PATH})
    assert not without_host("ftp", "h.test", polite)
    assert without_host("ftp", "h.test", schemes({}))
    assert without_host("s3", "bucket", polite) and without_host("htp", "h.test", polite)
    assert without_host("ftp", "", polite)


def test_the_addon_installs_the_ftp_handler_unless_the_project_chose_one() -> None:
    from scrapy.utils.test import get_crawler

    def handler(settings: dict) -> object:
        crawler = get_crawler(settings_dict={"ADDONS": {"scrapy_irl.Addon": 0}, **settings})
        return crawler.settings.getwithbase("DOWNLOAD_HANDLERS").get("ftp")

    assert handler({}) == PATH
    assert handler({"DOWNLOAD_HANDLERS": {"ftp": None}}) is None
    assert handler({"DOWNLOAD_HANDLERS": {"ftp": "my.Handler"}}) == "my.Handler"


def test_a_server_that_replied_is_told_from_a_silent_one_and_421_means_later() -> None:
    from twisted.protocols.ftp import CommandFailed, ConnectionLost
    from twisted.python.failure import Failure

    assert answered(CommandFailed(["451 Local error."]))
    assert answered(ConnectionLost("FTP connection lost", Failure(CommandFailed(["530 No."]))))
    # 421, "service not available": backed off like a server that did not answer
    assert not answered(CommandFailed(["421 Too many users."]))
    assert not answered(ConnectionLost("FTP connection lost", Failure(CommandFailed(["421 Busy."]))))
    assert not answered(ConnectionLost("FTP connection lost"))
