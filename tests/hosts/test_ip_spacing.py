"""The wire check of IRL_IP_DELAY_MIN (``scrapy_irl.hosts.spacing``): writes to one
address come at least the gap apart, whoever sent them.

Unit tests on a fake clock, then a crawl whose spider downloads with
``engine.download_async`` (as FilesPipeline does): the heaps never see those requests,
and before the check all of them reached the server within milliseconds.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.test import get_crawler
from twisted.internet.defer import Deferred, succeed
from twisted.internet.task import Clock

from scrapy_irl.hosts.download import PoliteHTTP11DownloadHandler, wire_keys
from scrapy_irl.hosts.spacing import PRUNE_EVERY, SendPlan, SendSpacing, spaced_connections
from tests.crawl_runner import crawl_in_subprocess
from tests.loopback_site import LoopbackServer, send_body, serving

GAP = 0.2  # tau_s0
HOST_GAP = 0.5  # tau_h0
DIRECT = 5


class _Now:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _ip(address: str, gap: float = 0.5) -> list[tuple[str, float]]:
    return [(f"ip {address}", gap)]


def test_reservations_to_one_address_queue_up_a_gap_apart() -> None:
    now = _Now()
    spacing = SendSpacing(now)
    waits = [spacing.reserve(_ip("10.0.0.1")) for _ in range(3)]
    assert waits == [0.0, 0.5, 1.0]
    waits.append(spacing.reserve(_ip("10.0.0.2")))
    assert waits[-1] == 0.0  # another server: not held
    now.t += 0.7
    waits.append(spacing.reserve(_ip("10.0.0.1")))
    assert waits[-1] == pytest.approx(0.8)  # behind the booked 101.0
    held = [w for w in waits if w > 0]
    assert len(held) == 3 and max(held) == pytest.approx(1.0)


def test_a_write_waits_for_the_latest_of_its_keys() -> None:
    now = _Now()
    spacing = SendSpacing(now)
    spacing.reserve([("host a.test", 2.0), ("ip 10.0.0.1", 0.5)])
    # another host on the same server: tau_s; the same host on another server: tau_h
    assert spacing.reserve([("host b.test", 2.0), ("ip 10.0.0.1", 0.5)]) == 0.5
    assert spacing.reserve([("host a.test", 2.0), ("ip 10.0.0.2", 0.5)]) == 2.0
    # the first wrote at 100.0, b.test at 100.5, a.test's second at 102.0: the server's
    # next write follows b.test's, a.test's third follows its second
    assert spacing.reserve([("host a.test", 2.0), ("ip 10.0.0.1", 0.5)]) == 4.0
    assert spacing.reserve([("host c.test", 0.0), ("ip 10.0.0.3", 0.0)]) == 0.0  # no gap


def test_a_write_long_after_the_last_is_not_held() -> None:
    now = _Now()
    spacing = SendSpacing(now)
    spacing.reserve(_ip("10.0.0.1"))
    now.t += 0.5
    assert spacing.reserve(_ip("10.0.0.1")) == 0.0  # not held


def test_past_entries_are_pruned() -> None:
    now = _Now()
    spacing = SendSpacing(now)
    for n in range(3 * PRUNE_EVERY):
        spacing.reserve(_ip(f"10.0.{n // 256}.{n % 256}", 0.1))
        now.t += 0.01
    assert len(spacing) <= PRUNE_EVERY + 10  # the last ten are within the gap


class _Connection:
    def __init__(self, peer: str, state: str = "QUIESCENT") -> None:
        self.peer = peer
        self.state = state
        self.lost = False
        self.transport = self

    def loseConnection(self) -> None:  # noqa: N802 (Twisted's name)
        self.lost = True


def _plan() -> tuple[Clock, SendPlan, list[tuple[float, str]]]:
    clock = Clock()
    return clock, SendPlan(clock, clock.seconds), []


def _line_up(plan: SendPlan, clock: Clock, sent: list[tuple[float, str]], name: str,
             keys: list[tuple[str, float]], *, front: bool = False) -> Deferred[None] | None:  # fmt: skip
    waiting = plan.wait(keys, front=front)
    if waiting is None:
        sent.append((clock.seconds(), name))
    else:
        waiting.addCallback(lambda _: sent.append((clock.seconds(), name)))
    return waiting


def _run(clock: Clock, seconds: float) -> None:
    """Advance to each pending call in turn, for at most ``seconds`` (bounded)."""
    end = clock.seconds() + seconds
    for _ in range(10_000):
        calls = [c.getTime() for c in clock.getDelayedCalls()]
        if not calls or min(calls) > end:
            break
        clock.advance(max(0.0, min(calls) - clock.seconds()))
    clock.advance(max(0.0, end - clock.seconds()))


def test_a_plan_lets_one_hosts_requests_go_a_host_gap_apart() -> None:
    clock, plan, sent = _plan()
    x = [("host x", 1.0), ("ip a", 0.1)]
    for n in range(5):
        _line_up(plan, clock, sent, f"x{n}", x)
    _run(clock, 5)
    assert [(round(t, 3), name) for t, name in sent] == [
        (0.0, "x0"), (1.0, "x1"), (2.0, "x2"), (3.0, "x3"), (4.0, "x4")]
    assert len(plan) == 0


def test_another_host_of_the_server_goes_between_a_busy_hosts_requests() -> None:
    """Booked behind the busy host's whole queue under their shared IP, it waited for
    all of it (a probe: 19 s)."""
    clock, plan, sent = _plan()
    for n in range(10):
        _line_up(plan, clock, sent, f"x{n}", [("host x", 1.0), ("ip a", 0.1)])
    clock.advance(0.05)
    _line_up(plan, clock, sent, "y0", [("host y", 1.0), ("ip a", 0.1)])
    _line_up(plan, clock, sent, "w0", [("host w", 1.0), ("ip b", 0.1)])  # another server
    _run(clock, 2)
    times = {name: round(t, 3) for t, name in sent}
    assert times["w0"] == 0.05 and times["y0"] == 0.1 and times["x1"] == 1.0


def test_a_request_the_heaps_timed_goes_ahead_of_the_hosts_queue() -> None:
    """A page behind 40 files of its host waited 39 s, its server held by the heaps
    meanwhile (a probe, 2026-11-29). It waits only for the host's last start's gap."""
    clock, plan, sent = _plan()
    x = [("host x", 1.0), ("ip a", 0.1)]
    for n in range(10):
        _line_up(plan, clock, sent, f"file{n}", x)
    clock.advance(0.3)
    _line_up(plan, clock, sent, "page", x, front=True)
    _run(clock, 3)
    assert [name for _, name in sent][:3] == ["file0", "page", "file1"]
    assert round(sent[1][0], 3) == 1.0 and round(sent[2][0], 3) == 2.0
    _run(clock, 20)
    assert len(plan) == 0 and len(sent) == 11
    assert _line_up(plan, clock, sent, "late page", x, front=True) is None  # due: goes at once


def test_a_cancelled_wait_leaves_the_line() -> None:
    clock, plan, sent = _plan()
    x = [("host x", 1.0)]
    _line_up(plan, clock, sent, "a", x)
    b = _line_up(plan, clock, sent, "b", x)
    _line_up(plan, clock, sent, "c", x)
    assert b is not None
    b.addErrback(lambda failure: None)
    b.cancel()  # the crawl stops, or the download is cancelled, while it waits
    _run(clock, 2)
    assert [(round(t, 3), name) for t, name in sent] == [(0.0, "a"), (1.0, "c")]
    assert len(plan) == 0


def test_a_plan_forgets_keys_quiet_for_longer_than_its_longest_gap() -> None:
    clock, plan, sent = _plan()
    for n in range(PRUNE_EVERY + 1):
        _line_up(plan, clock, sent, f"h{n}", [(f"host h{n}", 1.0)])
        clock.advance(0.01)
    assert len(plan._last) < PRUNE_EVERY
    assert len(sent) == PRUNE_EVERY + 1  # none waited: each host's first


def _pool(clock: Clock, connections: list[Any]) -> Any:
    calls: list[Any] = []

    def get(key: Any, endpoint: Any) -> Deferred[Any]:
        calls.append(key)
        got = connections.pop(0)
        return got if isinstance(got, Deferred) else succeed(got)

    def keys(key: Any, connection: _Connection) -> list[tuple[str, float]] | None:
        return None if key == "proxy" else _ip(connection.peer, GAP)

    waits: list[float] = []
    spaced = spaced_connections(get, SendSpacing(clock.seconds), clock, keys=keys,
                                waited=waits.append)  # fmt: skip
    return spaced, calls, waits


def _results(deferreds: list[Deferred[Any]]) -> list[Any]:
    got: list[Any] = [None] * len(deferreds)
    for n, d in enumerate(deferreds):
        d.addBoth(lambda r, n=n: got.__setitem__(n, r))
    return got


def test_connections_to_one_peer_are_handed_over_a_gap_apart() -> None:
    clock = Clock()
    first, second, other = _Connection("10.0.0.1"), _Connection("10.0.0.1"), _Connection("10.0.0.2")
    get, _, waits = _pool(clock, [first, second, other])
    got = _results([get("k", None), get("k", None), get("k2", None)])
    assert got == [first, None, other]
    clock.advance(GAP - 0.01)
    assert got[1] is None
    clock.advance(0.01)
    assert got[1] is second
    assert waits == [pytest.approx(GAP)]


def test_a_connection_closed_during_the_hold_is_swapped_for_a_fresh_one() -> None:
    clock = Clock()
    closing, fresh = _Connection("10.0.0.1", state="CONNECTION_LOST"), _Connection("10.0.0.1")
    get, calls, _ = _pool(clock, [_Connection("10.0.0.1"), closing, fresh])
    got = _results([get("k", None), get("k", None)])
    clock.advance(GAP)
    assert got[1] is fresh and len(calls) == 3


def test_a_cancelled_hold_closes_its_connection() -> None:
    clock = Clock()
    held = _Connection("10.0.0.1")
    get, _, _ = _pool(clock, [_Connection("10.0.0.1"), held])
    get("k", None)
    waiting = get("k", None)
    waiting.addErrback(lambda failure: None)
    waiting.cancel()
    assert held.lost
    assert not clock.getDelayedCalls()


def test_a_cancel_while_a_fresh_connection_is_on_its_way_cancels_it() -> None:
    clock = Clock()
    cancelled: list[bool] = []
    on_its_way: Deferred[Any] = Deferred(lambda d: cancelled.append(True))
    closing = _Connection("10.0.0.1", state="CONNECTION_LOST")
    get, _, _ = _pool(clock, [_Connection("10.0.0.1"), closing, on_its_way])
    get("k", None)
    waiting = get("k", None)
    waiting.addErrback(lambda failure: None)
    clock.advance(GAP)
    waiting.cancel()
    assert cancelled == [True]


def test_a_proxy_key_is_not_held() -> None:
    clock = Clock()
    get, _, waits = _pool(clock, [_Connection("10.0.0.9"), _Connection("10.0.0.9")])
    got = _results([get("proxy", None), get("proxy", None)])
    assert None not in got and waits == []


def test_a_request_through_a_proxy_is_planned_under_its_host_name() -> None:
    """Behind a proxy the server's address is unknown, but not its host: such requests
    were not planned at all, and FilesPipeline's files through a proxy reached one host
    within 7 ms at tau_h0 1 s (a probe, 2026-11-29)."""
    from scrapy import Request

    from scrapy_irl.hosts.download import plan_keys

    proxied = Request("http://Files.Example/a.bin", meta={"proxy": "http://127.0.0.1:3128"})
    assert plan_keys(proxied, GAP, HOST_GAP) == [("host files.example", HOST_GAP)]
    now = _Now()
    plan = SendPlan(Clock(), now=now)
    assert plan.wait(plan_keys(proxied, GAP, HOST_GAP)) is None
    second = Request("http://files.example/b.bin", meta={"proxy": "http://127.0.0.1:3128"})
    assert plan.wait(plan_keys(second, GAP, HOST_GAP)) is not None  # tau_h0 after the first


def test_the_handler_checks_only_under_the_irl_scheduler() -> None:
    irl = {"SCHEDULER": "scrapy_irl.scheduler.IrlScheduler"}
    handler = build_from_crawler(PoliteHTTP11DownloadHandler, get_crawler(
        settings_dict={**irl, "IRL_IP_DELAY_MIN": 0.3, "IRL_HOST_DELAY_MIN": 1.5}))  # fmt: skip
    assert handler.spacing is not None and handler.host_gap == 1.5 and handler.ip_gap == 0.3
    stock = get_crawler(settings_dict={"IRL_IP_DELAY_MIN": 0.3})
    assert build_from_crawler(PoliteHTTP11DownloadHandler, stock).spacing is None
    zero = get_crawler(settings_dict={**irl, "IRL_IP_DELAY_MIN": 0, "IRL_HOST_DELAY_MIN": 0})
    assert build_from_crawler(PoliteHTTP11DownloadHandler, zero).spacing is None
    irlbot = get_crawler(settings_dict={**irl, "IRL_ROBOTS_HOST_DELAY": False})
    assert build_from_crawler(PoliteHTTP11DownloadHandler, irlbot).host_gap == 0.0


def test_a_write_is_booked_under_its_peer_and_its_host_as_the_heaps_spell_it() -> None:
    keys = wire_keys(0.25, 2.0)
    assert keys((b"https", b"WWW.A.Test.", 443), _Peer("10.0.0.1")) == [
        ("host www.a.test", 2.0), ("ip 10.0.0.1", 0.25)]
    assert keys((b"http", b"[::1]", 80), _Peer("::1"))[0] == ("host ::1", 2.0)
    assert keys(("http-proxy", b"proxy", 3128), _Peer("10.0.0.9")) is None


class _Peer:
    def __init__(self, host: str) -> None:
        self.transport = self
        self.host = host

    def getPeer(self) -> _Peer:  # noqa: N802 (Twisted's name)
        return self


class _LoggingHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Site

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        with self.server.lock:
            self.server.log.append((time.monotonic(), self.path))
        if (self.path == "/robots.txt" and self.server.robots is not None
                and self.headers.get("Host", "").startswith("localhost")):  # fmt: skip
            send_body(self, self.server.robots.encode(), "text/plain")
            return
        send_body(self, b"<html><body>page</body></html>")

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Site(LoopbackServer):
    def __init__(self) -> None:
        super().__init__(_LoggingHandler)
        self.lock = threading.Lock()
        self.log: list[tuple[float, str]] = []
        self.robots: str | None = None


def _direct_crawl(site: _Site, tmp_path: Path, files: int, *, files_host: str = "",
                  **settings: Any) -> dict[str, Any]:  # fmt: skip
    base = site.base_url.replace("127.0.0.1", files_host) if files_host else site.base_url
    stats, _ = crawl_in_subprocess({
        "start": f"{site.base_url}/",
        "direct": [f"{base}/file/{n}" for n in range(files)],
        "settings": {
            "ADDONS": {"scrapy_irl.Addon": 0}, "IRL_HOSTS_DIR": str(tmp_path / "hosts"),
            "IRL_HOST_DELAY": HOST_GAP, "IRL_HOST_DELAY_MIN": HOST_GAP,
            "IRL_IP_DELAY": GAP, "IRL_IP_DELAY_MIN": GAP, "CLOSESPIDER_TIMEOUT": 60,
            **settings,
        }}, timeout=90, module="tests.hosts.direct_download_spider")  # fmt: skip
    return stats


@pytest.mark.slow
def test_downloads_that_bypass_the_scheduler_keep_the_ip_gap(tmp_path: Path) -> None:
    with serving(_Site()) as site:
        stats = _direct_crawl(site, tmp_path, DIRECT)
    assert stats["direct/answered"] == DIRECT, stats
    arrivals = sorted(t for t, _ in site.log)
    assert len(arrivals) == DIRECT + 1, site.log
    gaps = [round(b - a, 3) for a, b in pairwise(arrivals)]
    # one host: tau_h0 apart (the server's clock: a thread's wake-up of slack)
    assert min(gaps) >= HOST_GAP - 0.05, gaps
    assert stats["irl_hosts/send_plan_waits"] >= DIRECT - 1, stats


@pytest.mark.slow
def test_a_queue_of_downloads_to_one_host_waits_outside_the_download_timeout(tmp_path: Path) -> None:
    """Held at the wire, each waiting file held a connection inside DOWNLOAD_TIMEOUT: a
    probe's page of 40 files on one host lost 30 to timeouts (2026-11-29). Here 12 files
    at tau_h0 0.5 s take 5.5 s, against a 2 s DOWNLOAD_TIMEOUT."""
    files = 12
    with serving(_Site()) as site:
        stats = _direct_crawl(site, tmp_path, files, DOWNLOAD_TIMEOUT=2, RETRY_ENABLED=False)
    assert stats["direct/answered"] == files, stats
    assert "downloader/exception_type_count/twisted.internet.error.TimeoutError" not in stats
    arrivals = sorted(t for t, path in site.log if path.startswith("/file/"))
    assert len(arrivals) == files
    gaps = [round(b - a, 3) for a, b in pairwise(arrivals)]
    assert min(gaps) >= HOST_GAP - 0.05, gaps
    assert stats["irl_hosts/send_plan_waits"] >= files - 1, stats
    assert stats["irl_hosts/send_plan_longest_wait"] >= (files - 1) * HOST_GAP - 0.5, stats


@pytest.mark.slow
def test_downloads_that_bypass_the_heaps_keep_the_crawl_delay_or_are_refused(tmp_path: Path) -> None:
    """Files ignored Crawl-delay, and were fetched from an origin whose Crawl-delay is
    above IRL_CRAWL_DELAY_MAX, whose pages the scheduler refuses (a probe, 2026-11-29)."""
    with serving(_Site()) as site:  # robots.txt of localhost only; the page on 127.0.0.1
        site.robots = "User-agent: *\nCrawl-delay: 1\n"
        stats = _direct_crawl(site, tmp_path / "delay", 4, files_host="localhost",
                              ROBOTSTXT_OBEY=True)  # fmt: skip
        arrivals = sorted(t for t, path in site.log if path.startswith("/file/"))
        assert stats["direct/answered"] == 4, stats
        gaps = [round(b - a, 3) for a, b in pairwise(arrivals)]
        assert len(arrivals) == 4 and min(gaps) >= 1.0, gaps  # with IRL_POLITENESS_MARGIN
        site.log.clear()
        site.robots = "User-agent: *\nCrawl-delay: 120\n"
        stats = _direct_crawl(site, tmp_path / "slow", 4, files_host="localhost",
                              ROBOTSTXT_OBEY=True)  # fmt: skip
        assert not [path for _, path in site.log if path.startswith("/file/")], site.log
        assert stats["irl_robots/crawl_delay_refused"] == 4, stats
        assert "direct/answered" not in stats  # each download failed: IgnoreRequest


@pytest.mark.slow
def test_a_resumed_crawl_waits_tau_h0_after_the_last_runs_file_to_its_host(tmp_path: Path) -> None:
    """Files (``engine.download``) bypass the heaps, so their starts were not in the
    JOBDIR's politeness log: a restart sent the file host's next request at once (a
    documented gap until 2026-11-29). Two runs of one JOBDIR, each a page on its own host
    and one file on ``files.steady.test``: the second file waits tau_h0 after the first."""
    gap = 6.0
    with serving(_Site()) as site:
        port = site.base_url.rsplit(":", 1)[1]
        for page_host in ("a.steady.test", "b.steady.test"):
            stats, _ = crawl_in_subprocess({
                "start": f"http://{page_host}:{port}/",
                "direct": [f"http://files.steady.test:{port}/file/1"],
                "settings": {
                    "ADDONS": {"scrapy_irl.Addon": 0}, "IRL_HOSTS_DIR": str(tmp_path / "hosts"),
                    "JOBDIR": str(tmp_path / "job"), "CLOSESPIDER_TIMEOUT": 60,
                    "IRL_HOST_DELAY": gap, "IRL_HOST_DELAY_MIN": gap,
                    "IRL_IP_DELAY": GAP, "IRL_IP_DELAY_MIN": GAP,
                    "TWISTED_DNS_RESOLVER": "tests.scheduler.flaky_resolver.FlakyResolver",
                }}, timeout=90, module="tests.hosts.direct_download_spider")  # fmt: skip
            assert stats["direct/answered"] == 1, stats
    files = sorted(t for t, path in site.log if path.startswith("/file/"))
    assert len(files) == 2, site.log
    assert files[1] - files[0] >= gap - 0.05, files
