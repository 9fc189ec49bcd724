#!/usr/bin/env python3
"""A site that answers "come back later", or not at all: stock Scrapy against scrapy-irl's
server back-off.

    python benchmarks/retry_after.py                    # 64 pages, Retry-After: 2
    python benchmarks/retry_after.py --pages 200 --retry-after 5 --runs 3

One loopback host serves ``/page/<n>`` (page n links to 2n and 2n+1, so the crawl goes
level by level). Every fourth page (n % 4 == 1) answers its first two requests with 503
and ``Retry-After``; every fourth other one (n % 4 == 3) with 429 and no header; and
pages n % 4 == 2 close the connection of their first two requests without a byte of
answer (a server that is down or drowning); after that each answers 200, so with
Scrapy's two retries every page is fetched in the end. The server logs each request and
judges, per crawl:

* *Retry-After violations*: requests to the host that started after a 503 answer was
  complete and less than its ``Retry-After`` later (the server asked for that pause);
* *requests within tau after a 429*: requests that started less than ``--tau`` after a
  header-less 429 was complete (no rule was given; a polite crawler at least slows down);
* *requests within 2 tau after no answer*: requests that started less than 2 x ``--tau``
  after a connection was closed unanswered (Polybot section 3.4: a host that does not
  respond waits "for some time, and for an even longer time if it is down on the second
  try"; the IRL scheduler's first wait is 2 tau_h);
* pages fetched (all must be), requests, and the crawl's ``elapsed_time_seconds``.

Crawls, interleaved run by run: ``stock`` (Scrapy's defaults: eight requests at once per
domain, retries sent at once), ``stock-delay`` (``DOWNLOAD_DELAY`` = ``--tau``, one request
at a time: a polite stock setup at the IRL crawl's pace) and ``irl`` (the add-on with
tau_h = ``--tau``, :confval:`IRL_BACKOFF_HTTP_CODES` and
:confval:`IRL_BACKOFF_ON_DOWNLOAD_ERROR` at their defaults).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.crawl_runner import crawl_in_subprocess  # noqa: E402
from tests.loopback_site import LoopbackServer, send_answer, serving  # noqa: E402

REFUSALS = 2  # answers before a page gives 200 (Scrapy retries twice by default)
NO_ANSWER = 0  # the status logged for a connection closed unanswered


class _Handler(BaseHTTPRequestHandler):
    server: RefusingSite

    def do_GET(self) -> None:
        site = self.server
        start = time.monotonic()
        parts = self.path.strip("/").split("/")
        if len(parts) != 2 or parts[0] != "page" or not parts[1].isdigit():
            self._answer(404, {}, b"", start)
            return
        n = int(parts[1])
        with site.lock:
            site.hits[n] = seen = site.hits.get(n, 0) + 1
        if n < site.pages and seen <= REFUSALS and n % 4 in (1, 2, 3):
            if n % 4 == 1:
                self._answer(503, {"Retry-After": str(site.retry_after)}, b"busy", start)
            elif n % 4 == 2:
                self._drop(start)
            else:
                self._answer(429, {}, b"slow down", start)
            return
        links = "".join(f'<a href="/page/{m}">p{m}</a>\n' for m in (2 * n, 2 * n + 1)
                        if m < site.pages)  # fmt: skip
        self._answer(200, {}, f"<html><body>{links}</body></html>".encode(), start)

    def _answer(self, status: int, headers: dict[str, str], body: bytes, start: float) -> None:
        send_answer(self, status, body, headers=headers)
        with self.server.lock:
            self.server.log.append((start, time.monotonic(), self.path, status))

    def _drop(self, start: float) -> None:
        """Close the connection without answering (logged with status 0)."""
        self.close_connection = True
        with self.server.lock:
            self.server.log.append((start, time.monotonic(), self.path, NO_ANSWER))

    def log_message(self, format: str, *args: object) -> None:
        pass


class RefusingSite(LoopbackServer):
    def __init__(self, pages: int, retry_after: int) -> None:
        super().__init__(_Handler)
        self.pages = pages
        self.retry_after = retry_after
        self.lock = threading.Lock()
        self.hits: dict[int, int] = {}
        self.log: list[tuple[float, float, str, int]] = []

    def reset(self) -> None:
        with self.lock:
            self.hits.clear()
            self.log.clear()


def judge(log: list[tuple[float, float, str, int]], retry_after: float, tau: float) -> dict[str, int]:
    """Violations in a crawl's server log (start, end, path, status), sorted by start."""
    log = sorted(log)
    # (answer end, pause end) of every 503 and 429 so far: requests may overlap (stock
    # Scrapy sends eight at once), so any earlier answer can be the one a request ignores
    pauses: list[tuple[float, float]] = []
    slows: list[tuple[float, float]] = []
    silences: list[tuple[float, float]] = []
    broken = hasty = pressing = 0
    for start, end, _, status in log:
        broken += any(done <= start < until for done, until in pauses)
        hasty += any(done <= start < until for done, until in slows)
        pressing += any(done <= start < until for done, until in silences)
        if status == 503:
            pauses.append((end, end + retry_after))
        elif status == 429:
            slows.append((end, end + tau))
        elif status == NO_ANSWER:
            silences.append((end, end + 2 * tau))
    pages = len({path for _, _, path, status in log if status == 200})
    return {"requests": len(log), "pages": pages, "retry_after_violations": broken,
            "within_tau_after_429": hasty, "within_2tau_after_no_answer": pressing}  # fmt: skip


def plans(tau: float) -> dict[str, dict[str, Any]]:
    return {
        "stock": {},
        "stock-delay": {"DOWNLOAD_DELAY": tau, "RANDOMIZE_DOWNLOAD_DELAY": False,
                        "CONCURRENT_REQUESTS_PER_DOMAIN": 1},  # fmt: skip
        "irl": {"ADDONS": {"scrapy_irl.Addon": 0}, "IRL_HOST_DELAY": tau,
                "IRL_HOST_DELAY_MIN": tau, "IRL_IP_DELAY": tau / 4, "IRL_IP_DELAY_MIN": tau / 4,
                "IRL_POLITENESS_MARGIN": 0},  # fmt: skip
    }


@contextmanager
def _site(pages: int, retry_after: int) -> Iterator[RefusingSite]:
    with serving(RefusingSite(pages, retry_after)) as site:
        yield site


def main(argv: list[str] | None = None) -> dict[str, list[dict[str, Any]]]:
    from scrapy_irl.simweb.runner import bypass_proxies

    bypass_proxies()  # the site is on loopback
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pages", type=int, default=64)
    p.add_argument("--retry-after", type=int, default=2, help="seconds the 503s ask for")
    p.add_argument("--tau", type=float, default=0.2, help="tau_h of the irl crawl, the stock-delay crawl's delay")
    p.add_argument("--runs", type=int, default=1)
    args = p.parse_args(argv)
    if args.pages < 2 or args.runs < 1 or args.retry_after < 0 or args.tau <= 0:
        p.error("need --pages >= 2, --runs >= 1, --retry-after >= 0, --tau > 0")
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in plans(args.tau)}
    with _site(args.pages, args.retry_after) as site:
        for run in range(args.runs):
            for name, settings in plans(args.tau).items():  # interleaved: one machine
                site.reset()
                stats, _ = crawl_in_subprocess(
                    {"start": [site.base_url + "/page/1"],
                     "settings": {"LOG_LEVEL": "WARNING", "CLOSESPIDER_TIMEOUT": 600, **settings}},
                    timeout=660,
                )  # fmt: skip
                if stats.get("finish_reason") != "finished":
                    raise SystemExit(f"{name} run {run + 1}: closed as {stats.get('finish_reason')}")
                result = judge(list(site.log), args.retry_after, args.tau)
                result["seconds"] = round(stats["elapsed_time_seconds"], 2)
                results[name].append(result)
    refusing = sum(1 for n in range(1, args.pages) if n % 4 in (1, 2, 3))
    print(f"{args.pages - 1} pages from /page/1, {refusing} of them refuse twice first "
          f"(503 with Retry-After: {args.retry_after}, 429 without, or no answer); "
          f"tau = {args.tau} s; {args.runs} run(s), medians")
    keys = ("pages", "requests", "retry_after_violations", "within_tau_after_429",
            "within_2tau_after_no_answer", "seconds")
    print(f"{'':<28}" + "".join(f"{name:>13}" for name in results))
    for key in keys:
        cells = "".join(f"{statistics.median(r[key] for r in runs):>13g}" for runs in results.values())
        print(f"{key:<28}{cells}")
    return results


if __name__ == "__main__":
    main()
