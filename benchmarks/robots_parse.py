#!/usr/bin/env python3
"""Parsing one large robots.txt: Scrapy's ``ProtegoRobotParser`` vs scrapy-irl's ``AgentRules``.

    python benchmarks/robots_parse.py [--repeat 5]

For each body (all under the 500 KiB that both keep), the time to parse and answer one
``allowed`` query (median of ``--repeat`` runs, no tracing) and the RAM the parsed object
keeps (tracemalloc, a separate run), for the stock parser (whole file) and for ours
(the file reduced to the group of the asking agent, then parsed by the same Protego).
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scrapy.robotstxt import ProtegoRobotParser

from scrapy_irl.robots.reduce import AgentRules

AGENT = "Scrapy/2.19 (+https://scrapy.org)"
LIMIT = 500 * 1024


def bodies() -> dict[str, bytes]:
    rng = random.Random(7)
    paths = "".join(
        f"Disallow: /{rng.randrange(10**9)}/{rng.randrange(10**6)}/\n"
        for _ in range(20_000)
    )
    many_agents = "".join(f"User-agent: bot{i}\n" for i in range(200))
    groups = "".join(
        f"User-agent: bot{i}\nDisallow: /x{i}/\nDisallow: /y{i}/\n\n"
        for i in range(9_000)
    )
    return {
        "one group, 20k paths": ("User-agent: *\n" + paths).encode()[:LIMIT],
        "200 agents share 20k paths": (
            many_agents + "User-agent: *\n" + paths
        ).encode()[:LIMIT],
        "9k groups, ours last": (
            groups + "User-agent: *\nDisallow: /private/\n"
        ).encode()[-LIMIT:],
        "20k wildcard rules": (
            "User-agent: *\n"
            + "".join(f"Disallow: /*{i}*.php$\n" for i in range(30_000))
        ).encode()[:LIMIT],
        "500 KiB of comments": ("# " + "x" * 60 + "\n").encode() * 8_000
        + b"User-agent: *\nDisallow: /p/\n",
    }


def stock(body: bytes) -> Any:
    parser = ProtegoRobotParser(body, None)
    parser.allowed("http://h/a/b", AGENT)
    return parser


def ours(body: bytes) -> Any:
    parser = AgentRules(body, None, AGENT)
    parser.allowed("http://h/a/b", AGENT)
    return parser


def seconds(
    builds: list[Callable[[bytes], Any]], body: bytes, repeat: int
) -> list[float]:
    """Median time of each build; the order rotates each round and garbage is collected
    before each run, so neither pays for the other's freed objects."""
    times: list[list[float]] = [[] for _ in builds]
    for round_ in range(repeat):
        for k in range(len(builds)):
            i = (k + round_) % len(builds)
            gc.collect()
            start = time.perf_counter()
            builds[i](body)
            times[i].append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


def kept_bytes(build: Callable[[bytes], Any], body: bytes) -> int:
    tracemalloc.start()
    parser = build(body)
    kept = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del parser
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"{'body':<28} {'KiB':>5} {'stock ms':>9} {'ours ms':>8} {'speed-up':>8} "
          f"{'stock MB':>9} {'ours MB':>8}")  # fmt: skip
    for name, body in bodies().items():
        t_stock, t_ours = seconds([stock, ours], body, args.repeat)
        m_stock, m_ours = kept_bytes(stock, body), kept_bytes(ours, body)
        print(f"{name:<28} {len(body) / 1024:>5.0f} {t_stock * 1e3:>9.1f} {t_ours * 1e3:>8.1f} "
              f"{t_stock / t_ours:>7.2f}x {m_stock / 1e6:>9.2f} {m_ours / 1e6:>8.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
