"""A real crawl in which a host name moves to another server mid-crawl, judged by the
two servers' own logs: the host's requests follow it to its new address, tau_s holds
there between it and the host that always lived there, and every page comes once."""

from __future__ import annotations

import errno
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import pairwise
from pathlib import Path

import pytest

from tests.crawl_runner import crawl_in_subprocess
from tests.loopback_site import send_body, serving
from tests.scheduler.moving_resolver import NEW, OLD

SIZE = {"moved.test": 14, "fixed.test": 10}  # pages /page/0 .. /page/<size - 1>
TAU_S = 1.0
TOLERANCE = 0.1
TTL = 1.5  # IRL_DNS_TTL


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        host = self.headers.get("Host", "").split(":")[0]
        with self.server.lock:
            self.server.log.append((time.monotonic(), host, self.path))
        parts = self.path.strip("/").split("/")
        size = self.server.sizes.get(host, 0)
        if len(parts) != 2 or parts[0] != "page" or not parts[1].isdigit() or int(parts[1]) >= size:
            self.send_error(404)
            return
        n = int(parts[1])
        links = [m for m in (2 * n, 2 * n + 1, n, 0) if m < size]
        body = "".join(f'<a href="/page/{m}">p{m}</a>\n' for m in links)
        send_body(self, f"<html><body>{body}</body></html>".encode())

    def log_message(self, format: str, *args: object) -> None:
        pass


class _KeepAliveHandler(_Handler):
    """HTTP/1.1: the connection stays open after each answer, for the next request."""

    protocol_version = "HTTP/1.1"


class _Server(ThreadingHTTPServer):
    """The same site on ``address``; logs (monotonic time, host, path) of each request.
    HTTP/1.0 (the handler's default): no connection outlives its request, so a request
    reaches the server its name resolved to when it was sent; ``keep_alive``: HTTP/1.1,
    and a moved name's kept-alive connection still leads to the old server."""

    daemon_threads = True

    def __init__(self, address: str, port: int, sizes: dict[str, int] = SIZE,
                 keep_alive: bool = False) -> None:  # fmt: skip
        super().__init__((address, port), _KeepAliveHandler if keep_alive else _Handler)
        self.sizes = sizes
        self.lock = threading.Lock()
        self.log: list[tuple[float, str, str]] = []


def _two_servers(sizes: dict[str, int] = SIZE, keep_alive: bool = False) -> tuple[_Server, _Server]:
    """Servers on 127.0.0.2 and 127.0.0.3 sharing one port (URLs carry it), serving the
    sites of ``sizes`` (host: pages)."""
    for _ in range(20):  # bounded: a port free on one address is nearly always free on both
        old = _Server(OLD, 0, sizes, keep_alive)
        try:
            return old, _Server(NEW, old.server_address[1], sizes, keep_alive)
        except OSError as exc:
            old.server_close()
            if exc.errno != errno.EADDRINUSE:
                raise
    raise AssertionError("no port free on both loopback addresses")


def _settings(tmp_path: Path, **changes: object) -> dict[str, object]:
    """The crawl's settings: the moving resolver, tau_s = TAU_S, no retries. The crawls
    take about 27 s (24 pages at tau_s plus IRL_POLITENESS_MARGIN); one closed on the
    50 s CLOSESPIDER_TIMEOUT once in CI (2026-11-27) and never in 40 runs here, under CPU
    and fsync load too: 80 s, and a failure shows what the crawl was doing."""
    return {
        "ADDONS": {"scrapy_irl.Addon": 0},
        "TWISTED_DNS_RESOLVER": "tests.scheduler.moving_resolver.MovingResolver",
        "IRL_HOSTS_DIR": str(tmp_path / "hosts"),
        "IRL_IP_DELAY": TAU_S, "IRL_IP_DELAY_MIN": TAU_S,
        "RETRY_ENABLED": False, "CLOSESPIDER_TIMEOUT": 80, **changes,
    }  # fmt: skip


def _why_unfinished(stats: dict[str, object], stderr: str, *servers: _Server) -> str:
    """What a crawl that did not finish was doing: its scheduler's counts, the servers'
    request timeline (seconds from the first request) and the log's Progress lines.
    Pytest truncates a stats dict to its first keys, which say nothing."""
    keys = ("finish_reason", "elapsed_time_seconds", "downloader/request_count", "irl_sched/unique",
            "irl_sched/in_flight", "irl_sched/ready_hosts", "irl_sched/held_hosts",
            "irl_sched/dns_waiting_hosts", "irl_sched/dns_renewing_hosts", "irl_sched/idle_merges",
            "irl_sched/idle_merges_fruitless", "irl_sched/idle_merge_seconds",
            "irl_sched/idle/idle_while_due", "irl_sched/idle/stalled", "irl_sched/urlseen_pending",
            "irl_sched/star/pending", "irl_sched/beast/queued", "irl_sched/beast/parked")  # fmt: skip
    counts = {key: stats.get(key) for key in keys}
    counts.update({key: value for key, value in stats.items() if key.startswith("irl_dns/")})
    requests = sorted(entry for server in servers for entry in server.log)
    first = requests[0][0] if requests else 0.0
    timeline = [(round(t - first, 2), host, path) for t, host, path in requests]
    progress = [line for line in stderr.splitlines() if "Progress:" in line or "ERROR" in line]
    return f"{counts}\nrequests: {timeline}\nlog: {progress[-8:]}"


@pytest.mark.slow
@pytest.mark.parametrize(("dnscache", "keep_alive"), [(True, False), (False, False), (True, True)],
                         ids=["dnscache", "no-dnscache", "keep-alive"])  # fmt: skip
def test_a_host_that_moves_mid_crawl_is_polite_to_its_new_server(
    tmp_path: Path, dnscache: bool, keep_alive: bool
) -> None:
    """Before HostResolver's renewals went past Scrapy's dnscache, the moved host stayed on
    its old server for good (``dnscache``); without a cache in the way, the downloader
    followed the name but the heaps still timed the host's requests by its old IP, so
    they came within tau_s of fixed.test's at the new server (``no-dnscache``). Over
    HTTP/1.1, Twisted's pool kept sending the moved host's requests over its kept-alive
    connection to the old server (``keep-alive``, found by a probe 2026-11-27)."""
    old, new = _two_servers(keep_alive=keep_alive)
    port = old.server_address[1]
    settings = _settings(tmp_path, DNSCACHE_ENABLED=dnscache, TEST_DNS_MOVE_AFTER=5.0,
                         IRL_DNS_TTL=TTL, IRL_HOST_DELAY=0.5, IRL_HOST_DELAY_MIN=0.5)  # fmt: skip
    start = [f"http://{name}:{port}/page/0" for name in SIZE]
    with serving(old), serving(new):
        stats, stderr = crawl_in_subprocess({"start": start, "settings": settings}, timeout=110)
    assert stats["finish_reason"] == "finished", _why_unfinished(stats, stderr, old, new)
    moved_old = [t for t, host, _ in old.log if host == "moved.test"]
    moved_new = [t for t, host, _ in new.log if host == "moved.test"]
    # The name was followed: its first requests went to the old server, the rest (after
    # the move) to the new one, none back to the old.
    assert moved_old and moved_new, (old.log, new.log)
    assert max(moved_old) < min(moved_new), (old.log, new.log)
    assert len(moved_new) >= 4, new.log  # enough to share the new server with fixed.test
    assert not [entry for entry in old.log if entry[1] != "moved.test"], old.log
    # tau_s at the new server: between fixed.test and the host that moved in. Without a
    # dnscache the downloader asks the name server at each connection and follows the
    # move at once, the heaps once the host's record expires: moved.test requests sent
    # within IRL_DNS_TTL of the move may still be booked on the old address.
    unaware_until = -1.0 if dnscache else min(moved_new) + TTL + TOLERANCE
    starts = sorted(new.log)
    close = [(a, b) for a, b in pairwise(starts) if b[0] - a[0] < TAU_S - TOLERANCE
             and not any(e[1] == "moved.test" and e[0] < unaware_until for e in (a, b))]  # fmt: skip
    assert not close, close
    # Nothing lost, nothing twice.
    fetched = Counter((host, path) for _, host, path in old.log + new.log)
    assert fetched == Counter({(host, f"/page/{n}"): 1 for host, size in SIZE.items()
                               for n in range(size)}), fetched  # fmt: skip
    assert stats.get("irl_sched/dns_moved_hosts", 0) >= 1, stats
    assert "scrapy_irl/scheduler" not in stderr, stderr[-3000:]


@pytest.mark.slow
def test_an_address_kept_from_an_earlier_run_is_looked_up_again(tmp_path: Path) -> None:
    """The host store kept moved.test -> 127.0.0.2 from a run an hour ago, within
    IRL_DNS_TTL; the name now resolves to 127.0.0.3, where fixed.test lives. The
    downloader connects where Scrapy's resolver says now (its cache lives in RAM, one per
    process), so the heaps must time the host on that address too. They used the stored
    one: the new server saw requests of both hosts closer than tau_s."""
    from scrapy_irl.hosts.records import DnsRecord
    from scrapy_irl.hosts.store import HostStore

    old, new = _two_servers()
    port = old.server_address[1]
    store = HostStore(tmp_path / "hosts")
    earlier = time.time() - 3600
    store.put_dns("moved.test", DnsRecord((OLD,), earlier, earlier + 86_400))
    store.release()
    # TEST_DNS_MOVE_AFTER=0: moved already, 127.0.0.3 from the start.
    settings = _settings(tmp_path, TEST_DNS_MOVE_AFTER=0.0, IRL_DNS_TTL=86_400,
                         IRL_HOST_DELAY=0.3, IRL_HOST_DELAY_MIN=0.3)  # fmt: skip
    start = [f"http://{name}:{port}/page/0" for name in SIZE]
    with serving(old), serving(new):
        stats, stderr = crawl_in_subprocess({"start": start, "settings": settings}, timeout=110)
    assert stats["finish_reason"] == "finished", _why_unfinished(stats, stderr, old, new)
    assert not old.log, old.log  # the stored address was never connected to
    starts = sorted(new.log)
    close = [(a, b) for a, b in pairwise(starts) if b[0] - a[0] < TAU_S - TOLERANCE]
    assert not close, close
    assert len(starts) == sum(SIZE.values()), starts
    assert stats["irl_dns/revalidated"] >= 1, stats


def _round_robin_crawl(tmp_path: Path, sizes: dict[str, int], **changes: object):
    """Crawl ``sizes``' sites (rr.test answering both servers in turn) and judge it by the
    servers: no gap under tau_s at either, every page once. Returns (old, new, stats)."""
    old, new = _two_servers(sizes)
    port = old.server_address[1]
    settings = _settings(tmp_path, IRL_HOST_DELAY=0.3, IRL_HOST_DELAY_MIN=0.3, **changes)
    start = [f"http://{name}:{port}/page/0" for name in sizes]
    with serving(old), serving(new):
        stats, stderr = crawl_in_subprocess({"start": start, "settings": settings}, timeout=110)
    assert stats["finish_reason"] == "finished", _why_unfinished(stats, stderr, old, new)
    assert "scrapy_irl/scheduler" not in stderr, stderr[-3000:]
    for server in (old, new):
        starts = sorted(server.log)
        close = [(a, b) for a, b in pairwise(starts) if b[0] - a[0] < TAU_S - TOLERANCE]
        assert not close, close
    fetched = Counter((host, path) for _, host, path in old.log + new.log)
    assert fetched == Counter({(host, f"/page/{n}"): 1 for host, size in sizes.items()
                               for n in range(size)}), fetched  # fmt: skip
    return old, new, stats


@pytest.mark.slow
def test_a_round_robin_name_is_fetched_from_the_address_it_is_timed_on(tmp_path: Path) -> None:
    """rr.test answers 127.0.0.2 and 127.0.0.3 in turn, one per lookup; fixed.test lives on
    127.0.0.3. Scrapy's DNS cache holds one name here (``DNSCACHE_SIZE``, 10 000 by
    default, is outgrown by any crawl of more hosts), so each of fixed.test's lookups drops
    rr.test from it. Before the DNS middleware pinned each request's address in that cache,
    the downloader asked the name again at rr.test's next connection and half its requests
    went to the server its heaps were not timing: both servers saw rr.test."""
    old, new, stats = _round_robin_crawl(tmp_path, {"rr.test": 14, "fixed.test": 10},
                                         DNSCACHE_SIZE=1)
    servers_of_rr = {name for name, server in (("old", old), ("new", new))
                     if any(host == "rr.test" for _, host, _ in server.log)}  # fmt: skip
    assert len(servers_of_rr) == 1, (old.log, new.log)
    assert "irl_dns/unpinned_requests" not in stats, stats


@pytest.mark.slow
def test_a_round_robin_name_renewed_mid_crawl_stays_on_the_address_it_is_timed_on(
    tmp_path: Path,
) -> None:
    """rr.test answers 127.0.0.2 and 127.0.0.3 in turn, and its record expires every
    IRL_DNS_TTL: the scheduler renews it in the host's turn and moves the host's queue if
    the answer changed. The DNS middleware had a resolver of its own, whose copy of the
    record expired too: it looked the name up again, got the other address, and pinned
    that one for the downloader while the heaps timed the host on the first. The
    requests then reached a server the heaps were not timing, within tau_s of fixed.test's."""
    _, _, stats = _round_robin_crawl(tmp_path, {"rr.test": 16, "fixed.test": 16},
                                     IRL_DNS_TTL=1.5)
    assert stats.get("irl_dns/expired", 0) >= 1, stats
