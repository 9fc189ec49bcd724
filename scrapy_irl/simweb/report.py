"""The judge: ``python -m scrapy_irl.simweb.report LOG`` scores a crawl from the server's log.

All numbers come from the request log plus the model's ground truth (never from the
crawler's own stats), so every crawler is judged the same way. Definitions, in the order
printed, are in ``docs/simweb.rst``; in short:

* *pages*: distinct (host, target) fetched, robots.txt and 421 answers excluded, any
  status; *duplicate fetches*: the rest of those requests.
* *spam/trap share*: requests the model classifies as spam-farm hosts / calendar,
  session-id or path-loop URLs, over all requests.
* *robots violations*: non-robots requests to a target the host's served robots.txt
  (after redirects, first 500 KiB, Protego) disallows for ``--user-agent``.
* *politeness*: per host and per IP, gaps between consecutive request starts, robots.txt
  included (a server sees a robots.txt request like any other; IRLbot's host heap let
  robots.txt through, scrapy-irl's does not by default). A request "breaks tau" when it
  starts less than tau after the previous one; a Crawl-delay is broken likewise, counted
  from the host's previous request, robots.txt included.
* *Retry-After violations*: requests to a host that start after its 429 or 503 page
  (``/status/...``, sent with ``Retry-After``) was complete and less than that many
  seconds after it.
* *Spearman*: rank correlation, over every PLD of the model, of true PLD in-degree with
  pages fetched from the PLD; *top coverage*: share of the ``--top`` highest in-degree PLDs
  with at least ``--min-pages`` pages.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from scrapy_irl.simweb.config import WebConfig
from scrapy_irl.simweb.log import LogRecord, read_log
from scrapy_irl.robots.matching import remove_dot_segments
from scrapy_irl.simweb.model import ROBOTS_PATHS, Web, web_for
from scrapy_irl.simweb.pages import RETRY_AFTER_STATUSES
from scrapy_irl.simweb.robots_truth import RobotsTruth

#: The host the server logs for a request without a Host header (answered 400).
NO_HOST = "-"
DEFAULT_TAU_H = 2.0
DEFAULT_TAU_S = 0.5
#: Log times are rounded to microseconds: a request this much early is not counted.
RETRY_AFTER_SLACK = 0.001


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho with average ranks for ties; None when either side is constant."""
    if len(x) != len(y) or len(x) < 2:
        return None
    rx, ry = _ranks(np.asarray(x, float)), _ranks(np.asarray(y, float))
    if rx.std() == 0 or ry.std() == 0:
        return None
    return float(np.corrcoef(rx, ry)[0, 1])


def _ranks(a: np.ndarray) -> np.ndarray:
    order = np.argsort(a, kind="stable")
    ranks = np.empty(len(a))
    sorted_a = a[order]
    i = 0
    while i < len(a):  # bounded by len(a): j always advances
        j = i
        while j + 1 < len(a) and sorted_a[j + 1] == sorted_a[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1
        i = j + 1
    return ranks


def _gaps(times_by_key: dict[str, list[float]], tau: float) -> tuple[float | None, int]:
    """Smallest gap between consecutive starts of any key, and how many gaps are < tau."""
    smallest: float | None = None
    broken = 0
    for times in times_by_key.values():
        if len(times) < 2:
            continue
        d = np.diff(np.sort(np.asarray(times)))
        m = float(d.min())
        smallest = m if smallest is None else min(smallest, m)
        broken += int((d < tau).sum())
    return smallest, broken


def _inside_a_pause(holds: dict[str, list[tuple[float, float]]], host: str, start: float) -> bool:
    """Whether a request to ``host`` at ``start`` falls in a pause one of its answers
    asked for: after that answer was complete (only then could its header be read), less
    than its Retry-After later. Pauses over by ``start`` are dropped (starts come sorted)."""
    live = [(end, until) for end, until in holds[host] if until - RETRY_AFTER_SLACK > start]
    if live:
        holds[host] = live
    else:
        del holds[host]
    return any(end <= start for end, _ in live)


def as_served(host: str, target: str) -> tuple[str, str]:
    """(host, target) as the server served them: the name without the root's trailing
    dot (the model's one host), the path without dot segments (the server resolves them:
    ``/x/../private/1.html`` is ``/private/1.html``, judged against robots.txt as such)."""
    path, mark, query = target.partition("?")
    if path.startswith("/"):
        path = remove_dot_segments(path)
    return host.rstrip(".") or host, path + mark + query


def _overlaps(spans: dict[str, list[tuple[float, float]]]) -> int:
    """Requests that started before an earlier request to their host had been answered
    (start, end as the server saw them; ends rounded in the log, hence the slack)."""
    count = 0
    for intervals in spans.values():
        intervals.sort()
        answered_by = -math.inf
        for start, end in intervals:
            if start < answered_by - RETRY_AFTER_SLACK:
                count += 1
            answered_by = max(answered_by, end)
    return count


def _canonical(target: str) -> str:
    path, _, query = target.partition("?")
    kept = [p for p in query.split("&") if p and not p.startswith("sid=")]
    return path + ("?" + "&".join(kept) if kept else "")


def judge(
    records: Sequence[LogRecord],
    web: Web,
    *,
    tau_h: float = DEFAULT_TAU_H,
    tau_s: float = DEFAULT_TAU_S,
    top: int = 50,
    min_pages: int = 10,
    user_agent: str = "*",
) -> dict[str, Any]:
    """Every judge number for ``records`` (sorted by start or not) on ``web``."""
    records = sorted(records, key=lambda r: r.start)
    truth = RobotsTruth(web)
    kinds: Counter[str] = Counter()
    statuses: Counter[str] = Counter()
    robots_per_host: Counter[str] = Counter()
    first_robots: dict[str, float] = {}
    host_times: dict[str, list[float]] = defaultdict(list)
    ip_times: dict[str, list[float]] = defaultdict(list)
    seen: set[tuple[str, str]] = set()
    content: set[tuple[str, str]] = set()
    pages_per_pld: Counter[int] = Counter()
    violations = before_robots = on_robots_5xx = crawl_delay_broken = misdirected = no_host = 0
    robots_hops = 0
    last_on_host: dict[str, float] = {}
    retry_after = web.config.retry_after
    holds: dict[str, list[tuple[float, float]]] = defaultdict(list)  # host -> (end, until)
    spans: dict[str, list[tuple[float, float]]] = defaultdict(list)  # host -> (start, end)
    retry_after_broken = 0
    for r in records:
        statuses[f"{r.status // 100}xx"] += 1
        host, target = as_served(r.host, r.target)
        if host in holds:
            retry_after_broken += _inside_a_pause(holds, host, r.start)
        if (retry_after and r.status in RETRY_AFTER_STATUSES
                and target.startswith("/status/")):  # fmt: skip
            end = r.start + r.duration
            holds[host].append((end, end + retry_after))
        ip_times[r.ip].append(r.start)
        if r.status == 421:  # not served as that host: load on the IP only
            misdirected += 1
            continue
        if host == NO_HOST:  # no Host header (answered 400): no host's, the IP's load only
            no_host += 1
            continue
        kind = web.classify(host, target)
        kinds[kind] += 1
        path = target.partition("?")[0]
        host_times[host].append(r.start)
        spans[host].append((r.start, r.start + r.duration))
        if path in ROBOTS_PATHS:  # its own robots.txt, or the target of its redirect
            if path == ROBOTS_PATHS[0]:
                robots_per_host[host] += 1
                first_robots.setdefault(host, r.start)
            else:  # a hop of that fetch, not a fetch of its own
                robots_hops += 1
            last_on_host[host] = r.start
            continue
        key = (host, target)
        if key not in seen:
            seen.add(key)
            pld = web.pld_of(host)
            if pld is not None:
                pages_per_pld[pld.index] += 1
        content.add((host, _canonical(target)))
        if host not in first_robots:
            before_robots += 1
        served = truth.get(host)
        if served is not None:
            if served.unavailable:
                on_robots_5xx += 1
            elif not served.allowed(web.url(host, target), user_agent):
                violations += 1
            delay = served.crawl_delay(user_agent)
            prev = last_on_host.get(host)
            if delay and prev is not None and r.start - prev < delay:
                crawl_delay_broken += 1
        last_on_host[host] = r.start
    n = len(records)
    non_robots = n - misdirected - no_host - robots_hops - sum(robots_per_host.values())
    min_gap_host, broke_h = _gaps(host_times, tau_h)
    min_gap_ip, broke_s = _gaps(ip_times, tau_s)
    degree = web.in_degree
    per_pld = [pages_per_pld.get(p.index, 0) for p in web.plds]
    ranked = top_plds(web, top)
    covered = sum(1 for i in ranked if per_pld[i] >= min_pages)
    span = records[-1].start - records[0].start if n > 1 else 0.0
    pages_by_kind: Counter[str] = Counter()
    for i, count in pages_per_pld.items():
        pages_by_kind[web.plds[i].kind] += count
    return {
        "requests": n,
        "duration_s": round(span, 3),
        "requests_per_s": round(n / span, 1) if span > 0 else None,
        "status": dict(sorted(statuses.items())),
        "pages": len(seen),
        "unique_content": len(content),
        "duplicate_fetches": non_robots - len(seen),
        "spam_requests": kinds["spam"],
        "spam_share": _share(kinds["spam"], n),
        "trap_requests": kinds["trap"],
        "trap_share": _share(kinds["trap"], n),
        "misdirected_421": misdirected,
        "without_host_header": no_host,
        "pages_by_pld_kind": dict(sorted(pages_by_kind.items())),
        "robots_fetches": sum(robots_per_host.values()),
        "robots_hosts": len(robots_per_host),
        "robots_fetches_max_per_host": max(robots_per_host.values(), default=0),
        "robots_hosts_refetched": sum(1 for c in robots_per_host.values() if c > 1),
        "robots_violations": violations,
        "requests_before_robots": before_robots,
        "requests_on_robots_5xx_hosts": on_robots_5xx,
        "crawl_delay_violations": crawl_delay_broken,
        "retry_after_violations": retry_after_broken,
        "tau_h": tau_h,
        "tau_s": tau_s,
        "min_gap_per_host_s": _round(min_gap_host),
        "broke_tau_h": broke_h,
        "min_gap_per_ip_s": _round(min_gap_ip),
        "broke_tau_s": broke_s,
        "overlapping_per_host": _overlaps(spans),
        "hosts_fetched": len(host_times),
        "ips_fetched": len(ip_times),
        "plds_fetched": sum(1 for c in per_pld if c),
        "spearman_indegree_pages": _round(spearman(degree, per_pld)),
        "top": top,
        "min_pages": min_pages,
        "top_coverage": _share(covered, len(ranked)),
    }


def top_plds(web: Web, top: int) -> list[int]:
    """Indexes of the ``top`` PLDs with the highest true in-degree (ties by name)."""
    degree = web.in_degree
    return sorted(range(len(web.plds)), key=lambda i: (-degree[i], web.plds[i].name))[:top]


def _share(a: int, b: int) -> float:
    return round(a / b, 4) if b else 0.0


def _round(x: float | None) -> float | None:
    return None if x is None or math.isnan(x) else round(x, 6)


def format_table(result: dict[str, Any]) -> str:
    """The judgement as an aligned two-column text table."""
    rows = [
        ("requests", result["requests"]),
        ("duration (s), requests/s", f"{result['duration_s']}, {result['requests_per_s']}"),
        ("status classes", " ".join(f"{k}={v}" for k, v in result["status"].items())),
        ("pages (distinct URLs)", result["pages"]),
        ("unique content (sid stripped)", result["unique_content"]),
        ("duplicate fetches", result["duplicate_fetches"]),
        ("spam requests (share)", f"{result['spam_requests']} ({result['spam_share']:.2%})"),
        ("trap requests (share)", f"{result['trap_requests']} ({result['trap_share']:.2%})"),
        ("misdirected (421)", result["misdirected_421"]),
        ("without a Host header (400)", result.get("without_host_header", 0)),
        ("pages by PLD kind", " ".join(f"{k}={v}" for k, v in result["pages_by_pld_kind"].items())),
        ("robots.txt fetches / hosts", f"{result['robots_fetches']} / {result['robots_hosts']}"),
        ("robots fetches max per host", result["robots_fetches_max_per_host"]),
        ("hosts with robots refetched", result["robots_hosts_refetched"]),
        ("robots violations", result["robots_violations"]),
        ("requests before host's robots", result["requests_before_robots"]),
        ("requests on robots-5xx hosts", result["requests_on_robots_5xx_hosts"]),
        ("Crawl-delay violations", result["crawl_delay_violations"]),
        ("Retry-After violations", result.get("retry_after_violations", 0)),
        ("min gap per host (s)", result["min_gap_per_host_s"]),
        (f"requests breaking tau_h={result['tau_h']}s", result["broke_tau_h"]),
        ("min gap per IP (s)", result["min_gap_per_ip_s"]),
        (f"requests breaking tau_s={result['tau_s']}s", result["broke_tau_s"]),
        ("requests while one to the host was answered", result["overlapping_per_host"]),
        ("hosts / IPs / PLDs fetched", f"{result['hosts_fetched']} / {result['ips_fetched']} / {result['plds_fetched']}"),
        ("Spearman(PLD in-degree, pages)", result["spearman_indegree_pages"]),
        (f"top-{result['top']} in-degree PLDs with >= {result['min_pages']} pages", f"{result['top_coverage']:.2%}"),
    ]  # fmt: skip
    if "skipped_lines" in result:  # added by the CLI, which reads the log
        rows.append(("malformed log lines skipped", result["skipped_lines"]))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def strict_json(value: Any) -> Any:
    """``value`` with every NaN or infinite float made ``None``: ``json.dumps`` would print
    ``NaN``/``Infinity``, which is not JSON and breaks strict readers (``jq``, browsers)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    return value


def _count(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number >= ``minimum`` (a bad one exits 2 with a message)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse


def _seconds(text: str) -> float:
    """An argparse type: a finite delay >= 0 (NaN breaks no gap, inf breaks every one)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def load_config(path: str | Path) -> WebConfig:
    """A config from a ``--config-out`` file or a ground-truth file (its ``config`` key)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return WebConfig.from_json(json.dumps(data.get("config", data)))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m scrapy_irl.simweb.report", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("log", help="request log written by the simweb server")
    p.add_argument(
        "--tau-h",
        type=_seconds,
        default=DEFAULT_TAU_H,
        help=f"per-host delay to check (default {DEFAULT_TAU_H})",
    )
    p.add_argument(
        "--tau-s",
        type=_seconds,
        default=DEFAULT_TAU_S,
        help=f"per-IP delay to check (default {DEFAULT_TAU_S})",
    )
    p.add_argument(
        "--config", help="web config or ground-truth JSON (default: the log's header)"
    )
    p.add_argument(
        "--size", help="named size, with --seed/--plds, instead of the log header"
    )
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--plds", type=int, default=None)
    p.add_argument(
        "--top",
        type=_count(1),
        default=50,
        help="how many best-linked PLDs the coverage looks at",
    )
    p.add_argument(
        "--min-pages",
        type=_count(0),
        default=10,
        help="pages a top PLD needs to count as covered",
    )
    p.add_argument(
        "--user-agent", default="*", help="user agent robots.txt rules are checked for"
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = p.parse_args(argv)
    try:
        skipped: list[int] = []
        header, records = read_log(args.log, skipped)
        if args.config:
            config = load_config(args.config)
        elif args.size:
            config = WebConfig.sized(args.size, seed=args.seed, plds=args.plds)
        elif header is not None:
            config = header
        else:
            p.error("the log has no simweb header: pass --config or --size/--seed")
        if header is not None and not args.size:  # --seed/--plds override the header's
            overrides = {"seed": args.seed, "plds": args.plds}
            config = config.replace(**{k: v for k, v in overrides.items() if v is not None})
    except (OSError, ValueError, TypeError) as exc:
        p.error(str(exc))  # a clear message and exit status 2, not a traceback
    result = judge(records, web_for(config), tau_h=args.tau_h, tau_s=args.tau_s, top=args.top,
                   min_pages=args.min_pages, user_agent=args.user_agent)  # fmt: skip
    result["skipped_lines"] = len(skipped)
    if args.json:
        print(json.dumps(strict_json(result), indent=1, allow_nan=False))
    else:
        print(format_table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
