#!/usr/bin/env python3
"""RSS while the frontier grows to millions of URLs: stock Scrapy vs the IRL scheduler.

    python benchmarks/frontier.py                      # up to 1 M URLs enqueued per run (about 15 min)
    python benchmarks/frontier.py --urls 500000 --only irl

A loopback server (its own process, 127.0.0.1 only) serves pages of ``--fanout`` links
each, to random URLs on ``--hosts`` host names (``w.s<n>.com``: one PLD each). A small
resolver maps exactly those names to 127.0.0.1 and fails every other name, so nothing
leaves the machine. Every link is new, so the frontier (URLs enqueued and not yet handed
out) grows by about ``fanout`` per page while politeness lets only a few pages a second
through: the shape of a broad crawl's frontier, compressed into minutes.

Each run is a separate crawl process that prints one probe line every ``--probe`` seconds
(RSS from ``/proc/self/statm``, split into anonymous and mapped-file pages from
``/proc/self/status``, ``scheduler/enqueued`` and ``scheduler/dequeued``, URLs in the IRL
scheduler's parked store) and stops when ``--urls`` URLs were enqueued or after ``--seconds``. Runs:

* ``stock``: Scrapy's scheduler with its default memory queues and RFPDupeFilter;
* ``stock-jobdir``: the same with a JOBDIR (disk queues; fingerprints still in a set);
* ``irl``: the add-on (URLseen, STAR, BEAST on disk; at most IRL_FRONTIER_RAM_REQUESTS
  requests in RAM).

Prints RSS at frontier milestones for each run, its split, and the growth per million URLs
between the first and the last milestone (of RSS, and of its anonymous part). Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
HOST_RE = re.compile(r"^w\.s(\d+)\.com$")
LINK_RE = re.compile(rb'href="([^"]+)"')


# -- the server ----------------------------------------------------------------------------
def page(path: str, port: int, fanout: int, hosts: int) -> bytes:
    """``fanout`` links to fresh random URLs; deterministic in ``path``."""
    rng = random.Random(path)
    links = "".join(
        f'<a href="http://w.s{rng.randrange(hosts)}.com:{port}/p/{rng.getrandbits(48):x}">x</a>\n'
        for _ in range(fanout)
    )
    return f"<html><body>{links}</body></html>".encode()


async def serve(port_file: Path, fanout: int, hosts: int, duration: float) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
                path = head.split(b" ", 2)[1].decode("latin-1")
                if path == "/robots.txt":
                    status, body = b"404 Not Found", b""
                else:
                    status, body = b"200 OK", page(path, port, fanout, hosts)
                writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Type: text/html\r\n"
                             b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)  # fmt: skip
                await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError, IndexError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
    port = server.sockets[0].getsockname()[1]
    port_file.write_text(str(port))
    async with server:
        await asyncio.sleep(duration)


# -- the crawl process ---------------------------------------------------------------------
def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE_SIZE


def rss_split() -> dict[str, int]:
    """RSS split as the kernel counts it: ``anon`` (heap, numpy buffers, LevelDB's own
    caches) and ``file`` (pages of mapped files: LevelDB maps the table files it reads,
    and those pages count in RSS although the kernel may drop them at any time)."""
    fields = {"RssAnon": "anon", "RssFile": "file"}
    split = {}
    with open("/proc/self/status") as f:
        for line in f:
            name, _, value = line.partition(":")
            if name in fields:
                split[fields[name]] = int(value.split()[0]) * 1024
    return split


def crawl(port: int, settings: dict[str, Any], urls: int, seconds: float, probe: float) -> None:
    import scrapy
    from scrapy import signals
    from scrapy.crawler import CrawlerProcess
    from scrapy.resolver import CachingThreadedResolver, dnscache
    from twisted.internet import defer, task
    from twisted.internet.error import DNSLookupError

    class BenchResolver(CachingThreadedResolver):
        """``w.s<n>.com`` -> 127.0.0.1; every other name fails (never system DNS)."""

        @classmethod
        def from_crawler(cls, crawler: Any, reactor: Any) -> BenchResolver:
            return cls(reactor, 10000, 60.0)

        def getHostByName(self, name: str, timeout: Any = ()) -> Any:  # noqa: N802
            if not HOST_RE.match(name):
                return defer.fail(DNSLookupError(f"benchmark: no such host {name!r}"))
            dnscache[name] = "127.0.0.1"
            return defer.succeed("127.0.0.1")

    sys.modules["frontier_resolver"] = type(sys)("frontier_resolver")
    sys.modules["frontier_resolver"].BenchResolver = BenchResolver  # type: ignore[attr-defined]

    class FanoutSpider(scrapy.Spider):
        name = "fanout"

        async def start(self) -> Any:
            for n in range(8):
                yield scrapy.Request(f"http://w.s{n}.com:{port}/p/start{n}")

        def parse(self, response: Any) -> Any:
            for href in LINK_RE.findall(response.body):
                yield scrapy.Request(href.decode())

    class Probe:
        def __init__(self, crawler: Any) -> None:
            self.crawler = crawler
            self.started = time.monotonic()
            self.loop = task.LoopingCall(self.sample)
            crawler.signals.connect(self.opened, signals.spider_opened)
            crawler.signals.connect(self.closed, signals.spider_closed)
            self.stopping = False

        @classmethod
        def from_crawler(cls, crawler: Any) -> Probe:
            return cls(crawler)

        def opened(self, spider: Any) -> None:
            self.loop.start(probe, now=True)

        def closed(self, spider: Any) -> None:
            if self.loop.running:
                self.loop.stop()
            self.sample()

        def sample(self) -> None:
            stats = self.crawler.stats
            # Every request offered: the IRL scheduler counts in scheduler/enqueued only
            # those URLseen has accepted (as Scrapy's does after its dupefilter), and
            # URLs still in a URLseen batch are in its frontier too.
            enq = stats.get_value("irl_sched/offered", stats.get_value("scheduler/enqueued", 0))
            deq = stats.get_value("scheduler/dequeued", 0)
            line = {"t": round(time.monotonic() - self.started, 1), "rss": rss_bytes(),
                    **rss_split(), "enqueued": enq, "dequeued": deq,
                    "parked": stats.get_value("irl_sched/parked/stored", 0),
                    "pages": stats.get_value("response_received_count", 0)}  # fmt: skip
            print("PROBE " + json.dumps(line), flush=True)
            if enq >= urls and not self.stopping:
                self.stopping = True
                self.crawler.engine.close_spider(self.crawler.spider, "frontier_target")

    sys.modules["frontier_probe"] = type(sys)("frontier_probe")
    sys.modules["frontier_probe"].Probe = Probe  # type: ignore[attr-defined]
    process = CrawlerProcess({
        "TELNETCONSOLE_ENABLED": False,
        "REMOTE_CONTROL_ENABLED": False,
        "LOG_LEVEL": "WARNING",
        "ROBOTSTXT_OBEY": False,
        "COOKIES_ENABLED": False,
        "RETRY_ENABLED": False,
        "CONCURRENT_REQUESTS": 32,
        "CLOSESPIDER_TIMEOUT": seconds,
        "TWISTED_DNS_RESOLVER": "frontier_resolver.BenchResolver",
        "EXTENSIONS": {"frontier_probe.Probe": 0},
        **settings,
    })  # fmt: skip
    process.crawl(FanoutSpider)
    process.start()


# -- the driver ----------------------------------------------------------------------------
RUNS: dict[str, dict[str, Any]] = {
    "stock": {},
    "stock-jobdir": {"JOBDIR": "{tmp}/job"},
    "irl": {"ADDONS": {"scrapy_irl.Addon": 0}, "JOBDIR": "{tmp}/job",
            # politeness as in benchmarks/crawl.py's relaxed run: the frontier, not the
            # delays, is under test; one IP serves every host
            "IRL_HOST_DELAY": 0.05, "IRL_HOST_DELAY_MIN": 0.01, "IRL_IP_DELAY": 0.01,
            "IRL_IP_DELAY_MIN": 0.005, "IRL_POLITENESS_MARGIN": 0.0,
            "IRL_IP_MAX_IN_FLIGHT": 8, "IRL_IDLE_SAMPLE_INTERVAL": 0},
}  # fmt: skip


def run(name: str, args: argparse.Namespace) -> tuple[list[dict[str, Any]], str]:
    """The probes of one crawl, and a note when it did not end by itself."""
    with tempfile.TemporaryDirectory(prefix="irl-frontier-") as tmp:
        port_file = Path(tmp) / "port"
        server = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(port_file), "--fanout", str(args.fanout),
             "--hosts", str(args.hosts), "--seconds", str(args.seconds + 300)],
        )  # fmt: skip
        out_path, err_path = Path(tmp) / "stdout", Path(tmp) / "stderr"
        note = ""
        try:
            for _ in range(100):
                if port_file.exists() and port_file.read_text():
                    break
                time.sleep(0.1)
            port = int(port_file.read_text())
            settings = json.loads(json.dumps(RUNS[name]).replace("{tmp}", tmp))
            settings.update(args.set)
            with open(out_path, "w") as out, open(err_path, "w") as err:
                proc = subprocess.Popen(
                    [sys.executable, __file__, "--crawl", json.dumps(settings), "--port",
                     str(port), "--urls", str(args.urls), "--seconds", str(args.seconds),
                     "--probe", str(args.probe)],
                    stdout=out, stderr=err,
                )  # fmt: skip
                returncode = watch(proc, out_path, deadline=args.seconds + 120,
                                   silence=max(60.0, 10 * args.probe))  # fmt: skip
                if returncode is None:
                    note = "stopped probing (hung); killed"
            stdout, stderr = out_path.read_text(), err_path.read_text()
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(30)
    if "Too many open files" in stderr:
        note = ("crashed: Too many open files (a disk queue file per download slot); "
                + note).rstrip("; ")  # fmt: skip
    elif returncode not in (0, None):
        note = f"exit {returncode}"
    probes = [json.loads(line[6:]) for line in stdout.splitlines() if line.startswith("PROBE ")]
    if not probes:
        sys.stderr.write(stderr[-3000:])
        raise SystemExit(f"{name}: crawl produced no probe ({note or 'no output'})")
    return probes, note


def watch(proc: subprocess.Popen[bytes], out_path: Path, deadline: float,
          silence: float) -> int | None:  # fmt: skip
    """Wait for the crawl; kill it (None) past ``deadline`` or when its probes stop for
    ``silence`` seconds (a crawl whose reactor hangs never ends by itself)."""
    started = last_change = time.monotonic()
    size = -1
    while True:
        try:
            return proc.wait(1.0)
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        current = out_path.stat().st_size
        if current != size:
            size, last_change = current, now
        if now - started > deadline or now - last_change > silence:
            proc.kill()
            proc.wait()
            return None


def setting_override(text: str) -> tuple[str, Any]:
    """``NAME=VALUE`` of ``--set``: the value as JSON (numbers, true, lists), else as given."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        return name.strip(), json.loads(value)
    except ValueError:
        return name.strip(), value


def split_cell(probe: dict[str, Any]) -> str:
    """``anon / file parked`` of one probe (probes saved before the split: ``-``)."""
    if "anon" not in probe:
        return "-"
    return f"{probe['anon'] / 2**20:.0f} / {probe['file'] / 2**20:.0f}  {probe.get('parked', 0):,}"


def at_frontier(probes: list[dict[str, Any]], size: int) -> dict[str, Any] | None:
    """The first probe whose frontier (enqueued - dequeued) reached ``size``."""
    for p in probes:
        if p["enqueued"] - p["dequeued"] >= size:
            return p
    return None


def main() -> int:
    from scrapy_irl.simweb.runner import bypass_proxies

    bypass_proxies()  # every site here is on loopback
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--urls", type=int, default=1_000_000, help="stop a run at this many enqueued")
    p.add_argument("--seconds", type=float, default=600, help="stop a run after this long")
    p.add_argument("--fanout", type=int, default=400, help="links per page")
    p.add_argument("--hosts", type=int, default=200_000, help="distinct host names (PLDs)")
    p.add_argument("--probe", type=float, default=2.0, help="seconds between probes")
    p.add_argument("--only", nargs="*", choices=sorted(RUNS), help="runs to do")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   type=setting_override,
                   help="a Scrapy setting for every run (VALUE read as JSON, else a string; "
                        "IRL_* settings only matter to the irl run), e.g. IRL_IP_DELAY=0.1")
    p.add_argument("--json", action="store_true", help="print the probes as JSON instead")
    p.add_argument("--save", help="also write the probes as JSON to this file")
    p.add_argument("--serve", help=argparse.SUPPRESS)
    p.add_argument("--crawl", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve:
        asyncio.run(serve(Path(args.serve), args.fanout, args.hosts, args.seconds))
        return 0
    if args.crawl:
        crawl(args.port, json.loads(args.crawl), args.urls, args.seconds, args.probe)
        return 0
    names = [n for n in RUNS if not args.only or n in args.only]
    runs = {name: run(name, args) for name in names}
    results = {name: probes for name, (probes, _) in runs.items()}
    dump = json.dumps({"command": " ".join(sys.argv), "probes": results,
                       "notes": {n: note for n, (_, note) in runs.items()}})  # fmt: skip
    if args.save:
        Path(args.save).write_text(dump)
    if args.json:
        print(dump)
        return 0
    marks = [m for m in (100_000, 250_000, 500_000, 1_000_000, 2_000_000, 3_000_000, 5_000_000,
                         10_000_000) if m <= args.urls]  # fmt: skip
    print(f"fanout {args.fanout} links/page, {args.hosts} hosts; RSS (MiB) when the frontier "
          f"(enqueued - dequeued) first reached:\n")
    if args.set:
        print("settings: " + ", ".join(f"{k}={v!r}" for k, v in args.set) + "\n")
    print(f"{'frontier':>12}" + "".join(f"{n:>14}" for n in names))
    for m in marks:
        row = []
        for n in names:
            hit = at_frontier(results[n], m)
            row.append(f"{hit['rss'] / 2**20:.0f}" if hit else "-")
        print(f"{m:>12,}" + "".join(f"{v:>14}" for v in row))
    print("\nof which anonymous / mapped files (MiB), and URLs in the parked store:\n")
    print(f"{'frontier':>12}" + "".join(f"{n:>22}" for n in names))
    for m in marks:
        row = []
        for n in names:
            hit = at_frontier(results[n], m)
            row.append(split_cell(hit) if hit else "-")
        print(f"{m:>12,}" + "".join(f"{v:>22}" for v in row))
    print()
    for n in names:
        probes = results[n]
        last = probes[-1]
        peak = max(p["rss"] for p in probes) / 2**20
        first = at_frontier(probes, marks[0]) if marks else None
        line = (f"{n:>12}: {last['enqueued']:,} enqueued, {last['pages']:,} pages in "
                f"{last['t']:.0f} s; peak RSS {peak:.0f} MiB")  # fmt: skip
        reached = [at_frontier(probes, m) for m in marks]
        reached = [(m, h) for m, h in zip(marks, reached) if h]
        if first and len(reached) > 1:
            (m0, h0), (m1, h1) = reached[0], reached[-1]
            per_m = (h1["rss"] - h0["rss"]) / 2**20 / ((m1 - m0) / 1e6)
            line += f"; growth {per_m:.1f} MiB per million URLs ({m0:,} -> {m1:,})"
            if "anon" in h0 and "anon" in h1:
                anon_m = (h1["anon"] - h0["anon"]) / 2**20 / ((m1 - m0) / 1e6)
                line += f", anonymous {anon_m:.1f}"
        if runs[n][1]:
            line += f" [{runs[n][1]}]"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
