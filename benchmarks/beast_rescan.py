#!/usr/bin/env python3
"""How long one ``Beast.pop`` holds the reactor while BEAST re-reads a large Q_F.

    python benchmarks/beast_rescan.py [--entries 200000]

Q_F is filled with the over-budget URLs of an endless-subdomain spam farm (every URL on a
host of its own, as IRLbot met them), and the ring holds one record, so the next ring end
re-reads Q_F: re-budgets each entry with a PLD lookup, as the scheduler's STAR does, and
splits it into the ring. Popped until two records came out, once with the re-read in
slices (``SPLIT_SLICE``, the default) and once in one go (the way before 2026-11-29),
in the same run. Stock Scrapy has no Q_F to compare with: the one-go run is the baseline.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scrapy_irl.scheduler import beast as beast_module
from scrapy_irl.scheduler.beast import Beast
from scrapy_irl.scheduler.codec import record_url
from scrapy_irl.scheduler.items import host_key
from scrapy_irl.scheduler.pld import pld_of

BUDGET = 3
QUEUES = 64


def _record(url: str) -> bytes:
    encoded = url.encode()
    return len(encoded).to_bytes(2, "little") + encoded + b"x" * 300  # ~ a pickled request


def _rebudget(record: bytes) -> int | None:
    host = host_key(urlsplit(record_url(record)).hostname)
    return BUDGET if host and pld_of(host) else None


def measure(entries: int, slice_size: int) -> dict[str, float]:
    """Pop calls, the longest and their total (seconds) until two records came out."""
    rng = random.Random(1)
    saved = beast_module.SPLIT_SLICE
    beast_module.SPLIT_SLICE = slice_size
    try:
        with tempfile.TemporaryDirectory() as directory:
            beast = Beast(Path(directory), initial_queues=QUEUES, max_queues=QUEUES,
                          fsync=False, rebudget=_rebudget)  # fmt: skip
            for n in range(entries):
                url = f"http://a{rng.randrange(10**9)}.farm{n % 3}.zz/p{n}"
                beast.push(_record(url), BUDGET, BUDGET * QUEUES + n % 5000)  # Q_F
            beast.push(_record("http://legit.example/"), 100, 0)
            beast.save()
            pauses: list[float] = []
            got = 0
            while got < 2 and len(pauses) < entries + 10:
                started = time.perf_counter()
                record = beast.pop()
                pauses.append(time.perf_counter() - started)
                if record is not None:
                    got += 1
                    beast.done(record[1])
            beast.close()
    finally:
        beast_module.SPLIT_SLICE = saved
    return {"calls": len(pauses), "longest": max(pauses), "total": sum(pauses)}


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=200_000, help="URLs in Q_F")
    args = parser.parse_args(argv)
    results = {
        "sliced": measure(args.entries, beast_module.SPLIT_SLICE),
        "one go": measure(args.entries, args.entries + 1),
    }
    print(f"Q_F re-read of {args.entries} entries, j = {QUEUES}")
    print(f"{'':<10}{'pop calls':>10}{'longest (s)':>13}{'total (s)':>11}")
    for name, row in results.items():
        print(f"{name:<10}{row['calls']:>10}{row['longest']:>13.3f}{row['total']:>11.2f}")
    ratio = results["one go"]["longest"] / max(results["sliced"]["longest"], 1e-9)
    print(f"longest hold, one go / sliced: {ratio:.1f}x")
    return results


if __name__ == "__main__":
    main()
