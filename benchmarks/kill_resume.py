#!/usr/bin/env python3
"""kill -9 a JOBDIR crawl of simweb again and again: does each restart resume, and what
does a kill cost? Stock Scrapy and scrapy-irl, the same kill schedule.

    python benchmarks/kill_resume.py                      # 8 kills, small web, both
    python benchmarks/kill_resume.py --kills 14 --only irl

For each crawler: one simweb server process, then ``--kills`` crawls with the same
``JOBDIR``, each killed with SIGKILL after a random 3-14 s (``--run-seconds``; seeded, so
both crawlers get the same schedule), then one last crawl that runs ``--last`` seconds and closes normally.
Printed per crawler: restarts that resumed (or were refused: exited with an error before
the kill), distinct pages at the end, and every page fetched again after a kill,
classified by how long before the kill its earlier fetch ended:

* ``<= 1.5 s``: requests in flight at the kill and the 1 s write-out window (allowed);
* start URLs: ``dont_filter`` seeds, which Scrapy's ``start()`` yields again at each start;
* retries: the earlier fetch failed (a retried status or a timeout) and its retry was due;
* older: pages the restart should have known were done (0 is the goal).

Also counted: pages fetched twice within one crawl (goal 0), leaving out retries of failed
fetches (those the server saw fail, and those the crawler retried: ``--retried-log``) and
start URLs. A resume that queued a URL twice shows here when both copies are
fetched before the next kill (a soak of 2026-11-29 found 69: URLs parked after BEAST's
last save were in BEAST and in the parked store). The log passes from one crawl to the
next at the next crawl's first request, not at the kill (:func:`crawl_cuts`).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from itertools import pairwise
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.baseline_stock import BROAD_CRAWL
from benchmarks.crawl import _setting
from scrapy_irl.simweb.config import SIZES
from scrapy_irl.simweb.log import read_log
from scrapy_irl.simweb.model import web_for
from scrapy_irl.simweb.report import load_config
from tests.scheduler.simweb_process import simweb_server, spider_command

IRL = {
    "ADDONS": {"scrapy_irl.Addon": 0}, "ROBOTSTXT_OBEY": True, "DOWNLOAD_TIMEOUT": 5,
    "IRL_HOST_DELAY": 1.0, "IRL_HOST_DELAY_MIN": 0.3, "IRL_IP_DELAY": 0.3,
    "IRL_IP_DELAY_MIN": 0.1, "LOG_LEVEL": "INFO",
}  # fmt: skip
SEEDS = 10  # benchmarks/simweb_spider.py's default --seeds
WINDOW = 1.5  # seconds before a kill: in flight, or inside the 1 s write-out window
RETRIED = {408, 429, 500, 502, 503, 504, 522, 524}  # Scrapy's RETRY_HTTP_CODES
TIMEOUT = 5.0  # DOWNLOAD_TIMEOUT of both crawls here
#: How much shorter than TIMEOUT the server may log a fetch the crawler timed out and
#: retried (see :func:`_failed`).
TIMEOUT_SLACK = 0.5


def run_one(name: str, settings: dict[str, Any], args: argparse.Namespace, work: Path) -> dict[str, Any]:
    rng = random.Random(args.seed)
    (work / name).mkdir(parents=True)
    job = work / name / "job"
    settings = {**settings, "JOBDIR": str(job), "IRL_HOSTS_DIR": str(work / name / "hosts"),
                "CONCURRENT_REQUESTS": args.concurrency, "CLOSESPIDER_TIMEOUT": 3600}  # fmt: skip
    kills: list[float] = []
    ended: list[float] = []  # crawls before the last that ended without a kill
    retried_log = work / name / "retried.txt"  # URLs RetryMiddleware scheduled again
    first_log = work / name / "first-requests.txt"  # each crawl's first request (crawl_cuts)
    resumed = refused = 0
    with simweb_server(work / name, size=args.size, duration=3600) as (cfg, log):
        seeds = {(urlsplit(u).hostname, urlsplit(u).path or "/")
                 for u in web_for(load_config(cfg)).seed_urls(SEEDS)}  # fmt: skip
        for round_ in range(args.kills + 1):
            last = round_ == args.kills
            run_settings = {**settings, "CLOSESPIDER_TIMEOUT": args.last} if last else settings
            err = work / name / f"stderr{round_}.log"
            with open(err, "w") as handle:
                command = spider_command(cfg, run_settings) + [
                    "--retried-log", str(retried_log), "--first-request-log", str(first_log)]
                proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL,
                                        stderr=handle)  # fmt: skip
                if last:
                    proc.wait(args.last + 120)
                else:
                    deadline = time.monotonic() + rng.uniform(*args.run_seconds)
                    while time.monotonic() < deadline and proc.poll() is None:
                        time.sleep(0.05)
                    if proc.poll() is None:
                        os.kill(proc.pid, signal.SIGKILL)
                        kills.append(time.time())
                    else:  # ended by itself (refused, crashed): its log ends here too
                        ended.append(time.time())
                    proc.wait(30)
            text = err.read_text(errors="replace")
            if round_:
                resumed += "Resuming crawl" in text
            if proc.returncode not in (0, -signal.SIGKILL):  # a refusal exits 1
                refused += 1
        time.sleep(1.0)  # the server flushes its log every few hundred ms
        _, records = read_log(log)
    # start URLs and URLs the crawler retried: their second fetch is no copy
    expected_again = seeds | {(urlsplit(u).hostname, _target(u)) for u in _lines(retried_log)}
    cuts = crawl_cuts(sorted(kills + ended), [float(t) for t in _lines(first_log)])
    counts = classify_fetches(records, cuts, seeds, expected_again, args.window,
                              show=name if args.show else None)  # fmt: skip
    return {"kills": len(kills), "resumed": resumed, "refused": refused,
            "requests": len(records), **counts}  # fmt: skip


def crawl_cuts(kills: list[float], first_requests: list[float]) -> list[tuple[float, float]]:
    """Each kill's time (or the end of a crawl that stopped by itself before it), and
    where the server's log passes from that crawl to the next: the next crawl's first
    request to its downloader (``--first-request-log``).

    Not the kill's own time: a request sent in the last milliseconds before a kill is read
    by a busy server after it (0.04-0.8 ms in a probe of 2026-11-29), and was counted as
    fetched twice within the crawl that fetched it again after the restart (14 of 14 such
    pages in 17 runs), or, measured against the next kill, as an older re-fetch. A request
    of the next crawl cannot reach the server before that crawl handed one to its
    downloader. A kill followed by no request (the next crawl killed or refused before
    it sent one) cuts at the next request of any later crawl."""
    firsts = sorted(first_requests)
    cuts = []
    for kill in kills:
        later = [t for t in firsts if t > kill]
        cuts.append((kill, later[0] if later else float("inf")))
    return cuts


def classify_fetches(records: list[Any], cuts: list[tuple[float, float]],
                     seeds: set[tuple[str, str]], expected_again: set[tuple[str, str]],
                     window: float, show: str | None = None) -> dict[str, int]:  # fmt: skip
    """Count distinct pages and every page fetched again, by kind (see the module
    docstring); ``cuts`` from :func:`crawl_cuts`; ``show``: the crawler's name, to list
    the older re-fetches and the pages fetched twice in one crawl on stderr."""
    fetches: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for record in sorted(records, key=lambda r: r.start):
        if not record.target.startswith(("/robots.txt", "/robots-moved.txt")):  # not pages
            fetches[(record.host, record.target)].append(record)
    window_n = start_urls = retries = older = twice_in_a_run = 0
    for (host, target), seen in fetches.items():
        for before, after in pairwise(seen):
            crossed = [kill for kill, cut in cuts if before.start < cut <= after.start]
            if not crossed:
                if (host, target) not in expected_again and not _failed(before):
                    # neither a retry nor a start URL (a timeout the server did not see,
                    # the crawler under load, is a retry the crawler logged)
                    twice_in_a_run += 1
                    if show:
                        print(f"{show}: {host}{target} fetched twice in one crawl, at "
                              f"{before.start:.3f} and {after.start:.3f} (status "
                              f"{before.status}, {after.status})", file=sys.stderr)  # fmt: skip
                continue
            if crossed[0] - (before.start + before.duration) <= window:  # ended late
                window_n += 1
            elif (host, target) in seeds:
                start_urls += 1
            elif _failed(before, retried=(host, target) in expected_again):
                retries += 1  # RetryMiddleware's retry of a failed fetch, pending at the kill
            else:
                older += 1
                if show:
                    print(f"{show}: {host}{target} started {crossed[0] - before.start:.1f} s "
                          f"before a kill (status {before.status}), again after it",
                          file=sys.stderr)  # fmt: skip
    return {"pages": len(fetches), "refetched_window": window_n,
            "refetched_start_urls": start_urls, "refetched_retries": retries,
            "refetched_older": older, "fetched_twice_in_a_run": twice_in_a_run}


def _lines(path: Path) -> list[str]:
    return path.read_text(errors="replace").split() if path.exists() else []


def _target(url: str) -> str:
    """A URL's request target as the server logs it: path and query."""
    parts = urlsplit(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def _failed(record: Any, retried: bool = False) -> bool:
    """A fetch RetryMiddleware retries: a retried status, or a timeout. ``retried``: the
    crawler logged a retry of the URL. The server then logs a client's time-out up to
    TIMEOUT_SLACK short of it (it sees the request after the client's timer started: a
    probe of 2026-11-29 saw 4.81 s for a 5 s time-out, counted as an older re-fetch)."""
    limit = TIMEOUT - TIMEOUT_SLACK if retried else TIMEOUT
    return record.status in RETRIED or record.duration >= limit


def main() -> None:
    from scrapy_irl.simweb.runner import bypass_proxies

    bypass_proxies()  # every site here is on loopback
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kills", type=int, default=8)
    p.add_argument("--last", type=int, default=20, help="seconds of the last, unkilled crawl")
    p.add_argument("--size", choices=sorted(SIZES), default="small")
    p.add_argument("--seed", type=int, default=1, help="kill schedule")
    p.add_argument("--run-seconds", type=float, nargs=2, default=(3.0, 14.0), metavar=("MIN", "MAX"),
                   help="each killed crawl runs a random time between these (default 3 14); "
                        "longer runs let the frontier park URLs before a kill")  # fmt: skip
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--only", nargs="*", choices=("stock", "irl"), help="runs to do")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="a setting for the irl crawls (VALUE parsed as JSON if it can be), "
                        "repeatable: e.g. IRL_HOST_DELAY=2 parks more URLs")  # fmt: skip
    p.add_argument("--json", action="store_true")
    p.add_argument("--show", action="store_true",
                   help="list the older re-fetches and the pages fetched twice in one crawl")
    p.add_argument("--window", type=float, default=WINDOW,
                   help="seconds before a kill counted as in flight or write-out window")  # fmt: skip
    args = p.parse_args()
    extra = dict(_setting(item, p) for item in args.set)
    plan = {"stock": {**BROAD_CRAWL, "DOWNLOAD_TIMEOUT": TIMEOUT}, "irl": {**IRL, **extra}}
    work = Path(tempfile.mkdtemp(prefix="kill-resume-"))
    results = {}
    try:
        for name, settings in plan.items():
            if args.only and name not in args.only:
                continue
            results[name] = run_one(name, settings, args, work)
            print(f"{name}: {json.dumps(results[name])}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    rows = [("kills", "kills"), ("restarts that resumed", "resumed"), ("restarts refused", "refused"),
            ("requests", "requests"), ("distinct pages", "pages"),
            (f"re-fetched: in flight or done <= {args.window} s before", "refetched_window"),
            ("re-fetched: start URLs", "refetched_start_urls"),
            ("re-fetched: retries of failed fetches", "refetched_retries"),
            ("re-fetched: older (goal 0)", "refetched_older"),
            ("fetched twice in one crawl (goal 0)", "fetched_twice_in_a_run")]  # fmt: skip
    names = list(results)
    print(f"{'':<48}" + "".join(f"{n:>12}" for n in names))
    for label, key in rows:
        print(f"{label:<48}" + "".join(f"{results[n][key]:>12}" for n in names))


if __name__ == "__main__":
    main()
