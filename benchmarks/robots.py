#!/usr/bin/env python3
"""robots.txt handling: stock ``RobotsTxtMiddleware`` vs scrapy-irl's ``RobotsCacheMiddleware``.

    python benchmarks/robots.py                       # both parts, default sizes
    python benchmarks/robots.py --pages 3000 --rss-hosts 1000000

Part 1 crawls the same simweb (same seed and port, a fresh server and request log per run)
with Scrapy's own scheduler and dupefilter three times: stock robots middleware; ours with
an empty host store; ours again on the store the previous run left (a second run of the
same project). The server's log is judged (robots fetches per host, violations, requests
to hosts whose robots.txt answers 5xx).

Part 2 measures RAM with N distinct hosts cached: each middleware, in its own process,
gets one request per host through ``process_request`` with a fake engine answering a
~150-byte robots.txt; RSS growth per host is reported. Stock keeps a parser per netloc in
a dict forever; ours keeps ``IRL_ROBOTS_MEMORY_ENTRIES`` parsers plus LevelDB's caches.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.baseline_stock import BROAD_CRAWL
from scrapy_irl.simweb.config import SIZES

NOT_OURS = {
    "scrapy_irl.robots.middleware.RobotsCacheMiddleware": None,
    "scrapy_irl.robots.crawl_delay.CrawlDelayMiddleware": None,
    "scrapy_irl.hosts.middleware.HostDnsMiddleware": None,
}
ROWS = (
    ("pages", "pages"),
    ("robots.txt fetches", "robots_fetches"),
    ("hosts asked for robots.txt", "robots_hosts"),
    ("robots fetches max per host", "robots_fetches_max_per_host"),
    ("robots violations", "robots_violations"),
    ("requests on robots-5xx hosts", "requests_on_robots_5xx_hosts"),
    ("requests before host's robots", "requests_before_robots"),
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def crawl(tmp: Path, name: str, args: argparse.Namespace, port: int, extra: dict) -> dict:
    from scrapy_irl.simweb.log import read_log
    from scrapy_irl.simweb.model import web_for
    from scrapy_irl.simweb.report import judge, load_config

    cfg_path, log_path = tmp / f"{name}.json", tmp / f"{name}.log"
    server = subprocess.Popen(
        [sys.executable, "-m", "scrapy_irl.simweb", "--size", args.size, "--seed", str(args.seed),
         "--port", str(port), "--quiet", "--log", str(log_path), "--config-out", str(cfg_path),
         "--duration", str(args.timeout + 120)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(300):
            if cfg_path.exists():
                break
            time.sleep(0.1)
        settings = {**BROAD_CRAWL, "CLOSESPIDER_PAGECOUNT": args.pages, "CLOSESPIDER_TIMEOUT": args.timeout,
                    "DUPEFILTER_CLASS": "scrapy.dupefilters.RFPDupeFilter", **extra}  # fmt: skip
        started = time.monotonic()
        proc = subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / "simweb_spider.py"), "--config", str(cfg_path),
             "--settings", json.dumps(settings)],
            cwd=ROOT, capture_output=True, text=True, timeout=args.timeout + 120, check=False,
        )  # fmt: skip
        wall = time.monotonic() - started
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)
    if args.keep:
        Path(args.keep).mkdir(parents=True, exist_ok=True)
        (Path(args.keep) / f"{name}.stderr").write_text(proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"{name} crawl failed:\n{proc.stderr[-4000:]}")
    stats = json.loads(next(l for l in proc.stdout.splitlines() if l.startswith("STATS "))[6:])
    _, records = read_log(log_path)
    result = judge(records, web_for(load_config(cfg_path)))
    result["wall_s"] = round(wall, 1)
    result["robotstxt/request_count"] = stats.get("robotstxt/request_count", 0)
    result["irl_robots/cache/store_hit"] = stats.get("irl_robots/cache/store_hit", 0)
    return result


def part_crawl(args: argparse.Namespace) -> dict:
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        hosts = str(tmp / "hosts")
        stock_mw = {**NOT_OURS, "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": 100}
        ours = {"ADDONS": {"scrapy_irl.Addon": 0}, "IRL_HOSTS_DIR": hosts}
        return {
            "stock": crawl(tmp, "stock", args, port, {"ADDONS": {"scrapy_irl.Addon": 0},
                                                       "DOWNLOADER_MIDDLEWARES": stock_mw}),
            "irl cold": crawl(tmp, "cold", args, port, ours),
            "irl warm": crawl(tmp, "warm", args, port, ours),
        }


# -- part 2: RAM per cached host --------------------------------------------------------------
def _rss_child(kind: str, hosts: int, store_dir: str) -> None:
    import gc
    from types import SimpleNamespace

    import psutil
    from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
    from scrapy.http import Request, TextResponse
    from scrapy.settings import Settings
    from scrapy.statscollectors import MemoryStatsCollector
    from twisted.internet.defer import Deferred

    from scrapy_irl.drum.heap import release_free_heap
    from scrapy_irl.robots.middleware import RobotsCacheMiddleware

    async def download(request):
        host = request.url.split("/")[2]
        body = f"User-agent: *\nDisallow: /private/\nDisallow: /{host}/tmp/\nDisallow: /cgi-bin/\nAllow: /cgi-bin/ok\n"
        return TextResponse(request.url, body=body.encode(), encoding="utf-8")

    async def no_handlers(**kwargs):
        return []

    # Plain objects, not mocks: a mock would keep every call (and request) it saw.
    crawler = SimpleNamespace(
        settings=Settings({"ROBOTSTXT_OBEY": True, "IRL_HOSTS_DIR": store_dir}),
        engine=SimpleNamespace(download_async=download),
        signals=SimpleNamespace(send_catch_log_async=no_handlers, connect=lambda *a, **k: None),
        spider=None,
    )
    crawler.stats = MemoryStatsCollector(crawler)
    cls = RobotsTxtMiddleware if kind == "stock" else RobotsCacheMiddleware
    mw = cls(crawler)
    for warm in range(200):  # warm up imports, allocator and the LRU machinery
        Deferred.fromCoroutine(mw.process_request(Request(f"http://warm{warm}.test/")))
    gc.collect()
    release_free_heap()
    proc = psutil.Process()
    before = proc.memory_info().rss
    started = time.perf_counter()
    for i in range(hosts):
        Deferred.fromCoroutine(mw.process_request(Request(f"http://h{i}.example{i % 997}.com/page")))
    elapsed = time.perf_counter() - started
    gc.collect()
    release_free_heap()
    after = proc.memory_info().rss
    print(json.dumps({"kind": kind, "hosts": hosts, "rss_growth": after - before,
                      "us_per_host": elapsed / hosts * 1e6}))  # fmt: skip


def part_rss(hosts: int) -> list[dict]:
    results = []
    for kind in ("stock", "irl"):
        with tempfile.TemporaryDirectory() as store:
            proc = subprocess.run(
                [sys.executable, __file__, "--rss-child", kind, str(hosts), store],
                cwd=ROOT, capture_output=True, text=True, timeout=3600, check=False,
            )
            if proc.returncode != 0:
                raise SystemExit(proc.stderr[-4000:])
            results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return results


def main() -> int:
    from scrapy_irl.simweb.runner import bypass_proxies

    bypass_proxies()  # every site here is on loopback
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pages", type=int, default=3000, help="CLOSESPIDER_PAGECOUNT per crawl")
    p.add_argument("--timeout", type=int, default=240, help="CLOSESPIDER_TIMEOUT per crawl")
    p.add_argument("--size", choices=sorted(SIZES), default="default")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--rss-hosts", type=int, default=200_000, help="hosts cached in part 2 (0: skip)")
    p.add_argument("--skip-crawl", action="store_true")
    p.add_argument("--json", action="store_true")
    p.add_argument("--keep", help="save each crawl's log in this directory")
    p.add_argument("--rss-child", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.rss_child:
        kind, hosts, store = args.rss_child
        _rss_child(kind, int(hosts), store)
        return 0
    out: dict = {"command": " ".join(sys.argv)}
    if not args.skip_crawl:
        out["crawl"] = part_crawl(args)
    if args.rss_hosts:
        out["rss"] = part_rss(args.rss_hosts)
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    if "crawl" in out:
        runs = out["crawl"]
        print(f"simweb size={args.size} seed={args.seed}, {args.pages} pages per crawl, Scrapy's scheduler\n")
        print(f"{'':32}" + "".join(f"{name:>12}" for name in runs))
        for label, key in (*ROWS, ("robots.txt requests (Scrapy stat)", "robotstxt/request_count"),
                           ("robots records from LevelDB", "irl_robots/cache/store_hit"), ("wall s", "wall_s")):
            print(f"{label:32}" + "".join(f"{runs[name].get(key, 0)!s:>12}" for name in runs))
    if "rss" in out:
        print(f"\nRAM with {args.rss_hosts} hosts' robots.txt cached (RSS growth, one process each)")
        for r in out["rss"]:
            print(f"  {r['kind']:6} {r['rss_growth'] / 2**20:9.1f} MiB  {r['rss_growth'] / r['hosts']:8.1f} B/host"
                  f"  {r['us_per_host']:7.1f} us/host")
        stock, irl = out["rss"]
        print(f"  ratio stock/irl: {stock['rss_growth'] / max(irl['rss_growth'], 1):.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
