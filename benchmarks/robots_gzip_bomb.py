#!/usr/bin/env python3
"""Peak RSS of a crawl whose robots.txt is a gzip bomb: stock Scrapy against scrapy-irl.

    python benchmarks/robots_gzip_bomb.py                # 400 MB inflated, ~390 KB on the wire
    python benchmarks/robots_gzip_bomb.py --inflate-mb 800

A loopback site (``tests/loopback_site.py``) answers ``/robots.txt`` with a small rule
followed by ``--inflate-mb`` MB of comment bytes, gzip-encoded (``Content-Encoding:
gzip``): under :confval:`IRL_ROBOTS_MAX_BYTES` on the wire. Each crawl runs in its own
process with Scrapy's defaults (``DOWNLOAD_MAXSIZE`` 1 GiB): ``stock`` with Scrapy's
``RobotsTxtMiddleware``, ``irl`` with ``RobotsCacheMiddleware`` alone (Scrapy's scheduler,
so only the robots.txt handling differs). Printed per crawl: Scrapy's ``memusage/max``
(the process's peak RSS, sampled every 0.1 s from ``getrusage``, so the high-water mark
of the inflation is caught) minus ``memusage/startup``, and how robots.txt ended.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import zlib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.crawl_runner import crawl_in_subprocess
from tests.loopback_site import gzip_robots_site, serving

RULES = b"User-agent: *\nDisallow: /page/3\n"
MIB = 1024 * 1024
ROBOTS = {
    "stock": {},
    "irl": {"DOWNLOADER_MIDDLEWARES": {
        "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
        "scrapy_irl.robots.middleware.RobotsCacheMiddleware": 100}},
}  # fmt: skip


def gzip_bomb(inflate_mb: int) -> bytes:
    """RULES and ``inflate_mb`` MB of '#', gzip-framed, compressed in 1 MB steps (the
    benchmark's own process never holds the inflated body)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b"#" * 1_000_000
    parts = [packer.compress(RULES)]
    parts += [packer.compress(chunk) for _ in range(inflate_mb)]
    parts.append(packer.flush())
    return b"".join(parts)


def crawl_once(base_url: str, mode: str, hosts_dir: str) -> dict[str, Any]:
    settings = {"ROBOTSTXT_OBEY": True, "LOG_LEVEL": "WARNING", "CONCURRENT_REQUESTS": 1,
                "DOWNLOAD_DELAY": 0.3, "MEMUSAGE_ENABLED": True,
                "MEMUSAGE_CHECK_INTERVAL_SECONDS": 0.1, "IRL_HOSTS_DIR": hosts_dir,
                **ROBOTS[mode]}  # fmt: skip
    stats, _ = crawl_in_subprocess({"start": [base_url + "/page/1"], "settings": settings},
                                   timeout=300)  # fmt: skip
    return stats


def main(argv: list[str] | None = None) -> dict[str, float]:
    from scrapy_irl.simweb.runner import bypass_proxies

    bypass_proxies()  # every site here is on loopback
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inflate-mb", type=int, default=400,
                        help="MB the robots.txt inflates to (default 400)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.inflate_mb < 1:
        parser.error("--inflate-mb must be >= 1")
    body = gzip_bomb(args.inflate_mb)
    print(f"robots.txt: {len(body)} bytes on the wire, {args.inflate_mb} MB inflated")
    grown: dict[str, float] = {}
    with serving(gzip_robots_site(body)) as server, tempfile.TemporaryDirectory() as work:
        for mode in ROBOTS:
            stats = crawl_once(server.base_url, mode, str(Path(work) / mode))
            grown[mode] = (stats.get("memusage/max", 0) - stats.get("memusage/startup", 0)) / MIB
            ended = {k: v for k, v in sorted(stats.items())
                     if k.startswith(("irl_robots/response_dropped", "irl_robots/truncated",
                                      "robotstxt/response_count"))}  # fmt: skip
            print(f"{mode:6} peak RSS growth {grown[mode]:8.1f} MiB   {ended}")
    if grown["irl"] > 0:
        print(f"stock / irl peak RSS growth: {grown['stock'] / grown['irl']:.1f}x")
    return grown


if __name__ == "__main__":
    main()
