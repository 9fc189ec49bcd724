#!/usr/bin/env python3
"""Stock Scrapy vs scrapy-irl crawling the same simweb, judged by the server.

    python benchmarks/crawl.py                         # default web, 120 s per crawl
    python benchmarks/crawl.py --seconds 60 --size small --json
    python benchmarks/crawl.py --seed 7 --only irl       # another web of the same size
    python benchmarks/crawl.py --web spam_plds=150 --web out_links=12   # another shape
    python benchmarks/crawl.py --only irl --rounds 3   # medians of 3 runs (noisy machines)

Runs, one after the other, each with a fresh simweb server process (same seed and size)
and the same CONCURRENT_REQUESTS:

* ``stock``: Scrapy's scheduler, dupefilter and robots middleware with the broad-crawl
  settings of Scrapy's docs (``benchmarks/baseline_stock.py``);
* ``irl``: the add-on (IRL scheduler, robots/DNS cache) with the politeness delays below;
* ``irl-relaxed``: the add-on with tiny delays, to compare raw pages/s with stock.

With ``--rounds N`` the whole plan runs N times, interleaved (stock, irl, irl-relaxed, then
again), and the table gives each row's median over the rounds; the relaxed/stock ratio is
the median of the ratios of each round's two runs (measured side by side, on a machine that
was equally busy for both). The per-round values of the goal rows follow the table.

The judge checks politeness at tau_h = IRL_HOST_DELAY_MIN and tau_s = IRL_IP_DELAY_MIN of
the ``irl`` run. Stock applies no delay at all (Scrapy's defaults); its violations show
what an unconfigured broad crawl does to servers.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.baseline_stock import BROAD_CRAWL  # noqa: E402
from scrapy_irl.simweb.config import SIZES, WebConfig  # noqa: E402
from tests.scheduler.simweb_process import crawl, judged, simweb_server  # noqa: E402

IRL = {
    "ADDONS": {"scrapy_irl.Addon": 0},
    "ROBOTSTXT_OBEY": True,
    "COOKIES_ENABLED": False,
    "RETRY_ENABLED": False,
    "DOWNLOAD_TIMEOUT": 15,
    "LOG_LEVEL": "INFO",
    "IRL_HOST_DELAY": 10.0,
    "IRL_HOST_DELAY_MIN": 2.0,
    "IRL_IP_DELAY": 1.0,
    "IRL_IP_DELAY_MIN": 0.5,
}
RELAXED = {**IRL, "IRL_HOST_DELAY": 0.05, "IRL_HOST_DELAY_MIN": 0.01, "IRL_IP_DELAY": 0.01,
           "IRL_IP_DELAY_MIN": 0.005, "IRL_POLITENESS_MARGIN": 0.0, "IRL_IP_MAX_IN_FLIGHT": 8}  # fmt: skip
ROWS = (
    ("requests", "requests"),
    ("pages (distinct URLs)", "pages"),
    ("requests/s", "requests_per_s"),
    ("spam share", "spam_share"),
    ("trap share", "trap_share"),
    ("spam+trap share", "spam_trap_share"),
    ("duplicate fetches", "duplicate_fetches"),
    ("robots violations", "robots_violations"),
    ("requests on robots-5xx hosts", "requests_on_robots_5xx_hosts"),
    ("Crawl-delay violations", "crawl_delay_violations"),
    ("Retry-After violations", "retry_after_violations"),
    ("requests breaking tau_h", "broke_tau_h"),
    ("requests breaking tau_s", "broke_tau_s"),
    ("requests overlapping one to their host", "overlapping_per_host"),
    ("Spearman(in-degree, pages)", "spearman_indegree_pages"),
    ("top-50 PLDs with >= 10 pages", "top_coverage"),
    ("downloader stalled, work due", "stalled_while_due"),
    ("instants with due work waiting", "idle_while_due"),
    ("reactor paused, seconds", "reactor_pause_s"),
    ("longest reactor pause, seconds", "reactor_pause_max_s"),
    ("peak RSS MiB", "peak_rss_mib"),
)


def run(name: str, settings: dict, args: argparse.Namespace, tau_h: float, tau_s: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        full = {**settings, "CONCURRENT_REQUESTS": args.concurrency, "CLOSESPIDER_TIMEOUT": args.seconds,
                "IRL_HOSTS_DIR": str(tmp / "hosts")}  # fmt: skip
        with simweb_server(tmp, size=args.size, duration=args.seconds + 300, seed=args.seed, web=args.web) as (cfg, log):
            started = time.monotonic()
            stats, stderr = crawl(cfg, full, timeout=args.seconds + 240)
            wall = time.monotonic() - started
        result = judged(cfg, log, tau_h=tau_h, tau_s=tau_s)
        if args.keep:  # the crawl's log, the server's request log and the web, for a re-judge
            keep = Path(args.keep)
            keep.mkdir(parents=True, exist_ok=True)
            (keep / f"{name}.stderr").write_text(stderr)
            shutil.copyfile(log, keep / f"{name}.requests.log")
            shutil.copyfile(cfg, keep / f"{name}.web.json")
    result["spam_trap_share"] = round(result["spam_share"] + result["trap_share"], 4)
    # sampled by the IRL scheduler (IRL_IDLE_SAMPLE_INTERVAL); stock has no such meter
    result["idle_while_due"] = stats.get("irl_sched/idle/idle_while_due_share")
    result["stalled_while_due"] = stats.get("irl_sched/idle/stalled_share")
    result["reactor_pause_s"] = stats.get("irl_sched/idle/reactor_pause_seconds")
    result["reactor_pause_max_s"] = stats.get("irl_sched/idle/reactor_pause_max_seconds")
    # the crawl process's own VmHWM: memusage/max also counts the RSS this parent had
    # when it spawned the crawl (see simweb_spider.peak_rss_bytes)
    peak = stats.get("process/peak_rss_bytes") or stats.get("memusage/max", 0)
    result["peak_rss_mib"] = round(peak / 2**20, 1)
    result["wall_s"] = round(wall, 1)
    result["finish_reason"] = stats.get("finish_reason")
    return result


#: Rows whose value in each round is printed under a ``--rounds`` table.
ROUND_ROWS = ("requests_per_s", "spam_trap_share", "spearman_indegree_pages", "top_coverage")


def median_result(rounds: list[dict]) -> dict:
    """One run's rounds -> a result of medians: numbers are the median over the rounds that
    have one; a value that is not a number (a finish reason, a meter stock lacks) is kept
    only when every round agrees, else None."""
    merged: dict = {}
    for key in dict.fromkeys(k for result in rounds for k in result):
        values = [result.get(key) for result in rounds]
        numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if numbers:
            merged[key] = round(statistics.median(numbers), 4)
        else:
            merged[key] = values[0] if all(v == values[0] for v in values) else None
    return merged


def relaxed_ratios(results: dict[str, list[dict]]) -> list[float]:
    """requests/s of irl-relaxed over stock, per round (the two runs of one round)."""
    pairs = zip(results.get("irl-relaxed", []), results.get("stock", []))
    return [relaxed["requests_per_s"] / max(stock["requests_per_s"], 1e-9) for relaxed, stock in pairs]


def _setting(item: str, parser: argparse.ArgumentParser) -> tuple[str, object]:
    name, sep, text = item.partition("=")
    if not sep or not name:
        parser.error(f"--set needs NAME=VALUE, got {item!r}")
    try:
        return name, json.loads(text)
    except ValueError:
        return name, text


def judge_taus(extra: dict[str, object]) -> tuple[float, float]:
    """tau_h and tau_s the judge checks: the irl run's IRL_HOST_DELAY_MIN and
    IRL_IP_DELAY_MIN, including a ``--set`` of either (the defaults of IRL were judged
    whatever --set said)."""
    irl = {**IRL, **extra}
    return float(irl["IRL_HOST_DELAY_MIN"]), float(irl["IRL_IP_DELAY_MIN"])  # type: ignore[arg-type]


def main() -> int:
    from scrapy_irl.simweb.runner import bypass_proxies

    bypass_proxies()  # every site here is on loopback
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=int, default=120, help="CLOSESPIDER_TIMEOUT of each crawl")
    p.add_argument("--size", choices=sorted(SIZES), default="default")
    p.add_argument("--seed", type=int, default=1, help="the simweb's seed (another web, same size)")
    p.add_argument("--concurrency", type=int, default=64, help="CONCURRENT_REQUESTS of every run")
    p.add_argument("--only", nargs="*", choices=("stock", "irl", "irl-relaxed"), help="runs to do")
    p.add_argument("--keep", help="save each crawl's log, request log and web config here")
    p.add_argument("--json", action="store_true")
    p.add_argument("--rounds", type=int, default=1,
                   help="run the plan this many times, interleaved, and report medians")
    p.add_argument("--web", action="append", default=[], metavar="FIELD=VALUE",
                   help="override a field of the simweb config (spam_plds=120, out_links=12, ...), repeatable")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="a setting for the irl runs (VALUE parsed as JSON if it can be), repeatable")
    args = p.parse_args()
    for item in args.web:  # fail here, not in a server process that never starts
        try:
            WebConfig.parse_override(item)
        except ValueError as exc:
            p.error(str(exc))
    extra = dict(_setting(item, p) for item in args.set)
    if "CONCURRENT_REQUESTS" in extra:  # it was overwritten by --concurrency, silently
        p.error("set CONCURRENT_REQUESTS with --concurrency: the three runs share it")
    tau_h, tau_s = judge_taus(extra)
    plan = {"stock": {**BROAD_CRAWL, "CONCURRENT_REQUESTS": args.concurrency}, "irl": {**IRL, **extra},
            "irl-relaxed": {**RELAXED, **extra}}  # fmt: skip
    if args.rounds < 1:
        p.error(f"--rounds must be >= 1, got {args.rounds}")
    names = [name for name in plan if not args.only or name in args.only]
    results: dict[str, list[dict]] = {name: [] for name in names}
    for number in range(1, args.rounds + 1):
        for name in names:
            label = name if args.rounds == 1 else f"{name}.round{number}"  # --keep file names
            results[name].append(run(label, plan[name], args, tau_h, tau_s))
    table = {name: median_result(rounds) for name, rounds in results.items()}
    ratios = relaxed_ratios(results)
    if args.json:
        print(json.dumps({"command": " ".join(sys.argv), "rounds": results, "results": table,
                          "relaxed_over_stock": ratios}, indent=1, default=str))  # fmt: skip
        return 0
    print(f"simweb size={args.size}, seed={args.seed}" + "".join(f", {w}" for w in args.web) + f", {args.seconds} s per crawl, CONCURRENT_REQUESTS={args.concurrency}; "
          f"judged at tau_h={tau_h} s, tau_s={tau_s} s" + (f"; irl settings {extra}" if extra else "")
          + (f"; medians of {args.rounds} interleaved rounds" if args.rounds > 1 else "") + "\n")  # fmt: skip
    print(f"{'':32}" + "".join(f"{n:>13}" for n in table))
    for label, key in ROWS:
        print(f"{label:32}" + "".join(f"{table[n].get(key)!s:>13}" for n in table))
    if args.rounds > 1:
        print("\nper round:")
        for name, rounds in results.items():
            for key in ROUND_ROWS:
                print(f"  {name:12} {key:24} " + "  ".join(str(r.get(key)) for r in rounds))
    if ratios:
        each = " (rounds: " + ", ".join(f"{r:.2f}" for r in ratios) + ")" if len(ratios) > 1 else ""
        print(f"\nrequests/s irl-relaxed / stock: {statistics.median(ratios):.2f}x{each}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
