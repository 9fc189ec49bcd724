#!/usr/bin/env python3
"""The stock-Scrapy baseline: Scrapy's own scheduler, dupefilter and robots middleware with the
broad-crawl settings of Scrapy's docs, crawling simweb for a fixed number of pages, judged by
``scrapy_irl.simweb.report``.

    python benchmarks/baseline_stock.py                    # default web, 5000 pages
    python benchmarks/baseline_stock.py --pages 1000 --size small --json

Three processes: the simweb server (``python -m scrapy_irl.simweb``, port chosen free), the
crawl (``benchmarks/simweb_spider.py``, simweb resolver installed) and this driver, which
stops the server after the crawl and prints the judge's table and a few Scrapy stats.
Everything is bounded: the crawl by CLOSESPIDER_PAGECOUNT and CLOSESPIDER_TIMEOUT, the
subprocess by a wall-clock timeout.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scrapy_irl.simweb.config import SIZES
from scrapy_irl.simweb.log import read_log
from scrapy_irl.simweb.model import web_for
from scrapy_irl.simweb.report import format_table, judge, load_config

#: docs/topics/broad-crawls.rst of Scrapy 2.19 (AJAXCRAWL_ENABLED no longer exists in 2.19;
#: DownloaderAwarePriorityQueue is already the default). Redirects stay on: robots.txt
#: redirects must be followed. Nothing here touches politeness: DOWNLOAD_DELAY stays 0 and
#: CONCURRENT_REQUESTS_PER_DOMAIN 8, Scrapy's defaults.
BROAD_CRAWL = {
    "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.DownloaderAwarePriorityQueue",
    "CONCURRENT_REQUESTS": 100,
    "REACTOR_THREADPOOL_MAXSIZE": 20,
    "LOG_LEVEL": "INFO",
    "COOKIES_ENABLED": False,
    "RETRY_ENABLED": False,
    "DOWNLOAD_TIMEOUT": 15,
    "DEPTH_PRIORITY": 1,
    "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue",
    "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
    "ROBOTSTXT_OBEY": True,
}
SHOWN_STATS = (
    "finish_reason", "elapsed_time_seconds", "response_received_count", "downloader/request_count",
    "dupefilter/filtered", "robotstxt/request_count", "robotstxt/forbidden", "offsite/filtered",
    "downloader/exception_count", "log_count/ERROR", "memusage/max",
)  # fmt: skip


def main() -> int:
    from scrapy_irl.simweb.runner import bypass_proxies

    bypass_proxies()  # every site here is on loopback
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--pages", type=int, default=5000, help="CLOSESPIDER_PAGECOUNT (default 5000)"
    )
    p.add_argument(
        "--timeout",
        type=int,
        default=300,
        help="CLOSESPIDER_TIMEOUT seconds (default 300)",
    )
    p.add_argument("--size", choices=sorted(SIZES), default="default")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--tau-h", type=float, default=2.0)
    p.add_argument("--tau-s", type=float, default=0.5)
    p.add_argument(
        "--keep", help="copy the request log and crawl output to this directory"
    )
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmpd = Path(tmp)
        cfg_path, log_path = tmpd / "web.json", tmpd / "requests.log"
        server = subprocess.Popen(
            [sys.executable, "-m", "scrapy_irl.simweb", "--size", args.size, "--seed", str(args.seed),
             "--port", "0", "--quiet", "--log", str(log_path), "--config-out", str(cfg_path),
             "--duration", str(args.timeout + 120)],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            for _ in range(300):  # up to 30 s for the server to come up
                if cfg_path.exists():
                    break
                time.sleep(0.1)
            settings = {
                **BROAD_CRAWL,
                "CLOSESPIDER_PAGECOUNT": args.pages,
                "CLOSESPIDER_TIMEOUT": args.timeout,
            }
            started = time.monotonic()
            crawl = subprocess.run(
                [sys.executable, str(ROOT / "benchmarks" / "simweb_spider.py"), "--config", str(cfg_path),
                 "--settings", json.dumps(settings)],
                cwd=ROOT, check=False, capture_output=True, text=True, timeout=args.timeout + 120,
            )  # fmt: skip
            wall = time.monotonic() - started
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(30)
        if crawl.returncode != 0:
            print(crawl.stderr[-5000:], file=sys.stderr)
            return 1
        stats = json.loads(
            next(l for l in crawl.stdout.splitlines() if l.startswith("STATS "))[6:]
        )
        config = load_config(cfg_path)
        _, records = read_log(log_path)
        result = judge(records, web_for(config), tau_h=args.tau_h, tau_s=args.tau_s)
        if args.keep:
            keep = Path(args.keep)
            keep.mkdir(parents=True, exist_ok=True)
            (keep / "requests.log").write_bytes(log_path.read_bytes())
            (keep / "web.json").write_bytes(cfg_path.read_bytes())
            (keep / "crawl.stderr").write_text(crawl.stderr)
    scrapy_stats = {k: stats.get(k) for k in SHOWN_STATS}
    if args.json:
        print(json.dumps({"judge": result, "scrapy": scrapy_stats, "wall_s": round(wall, 1),
                          "settings": settings, "size": args.size, "seed": args.seed}, indent=1))  # fmt: skip
    else:
        print(
            f"stock Scrapy on simweb size={args.size} seed={args.seed}, {args.pages} pages, wall {wall:.1f} s\n"
        )
        print(format_table(result))
        print("\nScrapy stats:")
        print("\n".join(f"  {k:<26} {v}" for k, v in scrapy_stats.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
