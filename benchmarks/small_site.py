#!/usr/bin/env python3
"""A small site crawled to the end, with politeness off: stock Scrapy against scrapy-irl.

    python benchmarks/small_site.py                 # 64 pages, 3 runs each, interleaved
    python benchmarks/small_site.py --pages 1000 --runs 5

The loopback site of the tests (``tests/loopback_site.py``: page n links to 2n, 2n+1, n
and 0, so the crawl goes level by level) is crawled from ``/page/1`` until Scrapy closes
the spider as finished. The IRL crawl has every delay at 0: what is left is the cost of
the pipeline itself, mostly how soon URLseen's partial batch reaches BEAST when the crawl
runs dry (:confval:`IRL_IDLE_MERGE_INTERVAL`). Printed: Scrapy's ``elapsed_time_seconds``
of each run and the medians.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.crawl_runner import crawl_in_subprocess
from tests.loopback_site import loopback_site

ZERO_DELAYS = {"ADDONS": {"scrapy_irl.Addon": 0}, "IRL_HOST_DELAY": 0, "IRL_HOST_DELAY_MIN": 0,
               "IRL_IP_DELAY": 0, "IRL_IP_DELAY_MIN": 0, "IRL_POLITENESS_MARGIN": 0,
               "IRL_IP_MAX_IN_FLIGHT": 16}  # fmt: skip
PLAN = {"stock": {}, "irl": ZERO_DELAYS}


def crawl_once(base_url: str, settings: dict[str, Any]) -> dict[str, Any]:
    stats, _ = crawl_in_subprocess(
        {"start": [base_url + "/page/1"], "settings": {"LOG_LEVEL": "WARNING", **settings}}
    )
    return stats


def main(argv: list[str] | None = None) -> dict[str, list[float]]:
    from scrapy_irl.simweb.runner import bypass_proxies

    bypass_proxies()  # every site here is on loopback
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pages", type=int, default=64)
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args(argv)
    if args.pages < 1 or args.runs < 1:
        p.error("--pages and --runs must be at least 1")
    seconds: dict[str, list[float]] = {name: [] for name in PLAN}
    with loopback_site(args.pages) as site:
        for run in range(args.runs):
            for name, settings in PLAN.items():  # interleaved: both see the same machine
                stats = crawl_once(site.base_url, settings)
                if stats.get("finish_reason") != "finished":
                    raise SystemExit(f"{name} run {run + 1}: closed as {stats.get('finish_reason')}")
                if stats.get("response_received_count") != args.pages:
                    raise SystemExit(f"{name} run {run + 1}: {stats.get('response_received_count')} "
                                     f"pages of {args.pages}")  # fmt: skip
                seconds[name].append(round(stats["elapsed_time_seconds"], 2))
    print(f"{args.pages} pages, {args.runs} runs each (elapsed_time_seconds)")
    for name, values in seconds.items():
        print(f"{name:<6} median {statistics.median(values):6.2f} s   runs {values}")
    ratio = statistics.median(seconds["irl"]) / statistics.median(seconds["stock"])
    print(f"irl / stock: {ratio:.2f}x the time")
    return seconds


if __name__ == "__main__":
    main()
