#!/usr/bin/env python3
"""How high can Spearman(PLD in-degree, pages) and top-N coverage go on a simweb?

    python benchmarks/spearman_ceiling.py RUN.requests.log   # a log kept by crawl.py --keep

The judge's coefficient ranks every PLD of the model by its true in-degree and by the
pages a crawl fetched from it. A site can only give the pages it has and its robots.txt
allows, so even a crawler that knew every in-degree in advance could not reach 1. This
prints the crawl's coefficient (over all PLDs, and over legitimate PLDs only) next to
those of ideal allocations of the same number of pages: PLD x gets
min(allowed_x, c * f(d_x)) pages, d_x its true in-degree, allowed_x its pages that its
robots.txt allows (0 when robots.txt answers 5xx or disallows everything; unbounded for
the spam farm and the blog platform), c chosen so the pages add up to the crawl's, f linear or the default
log budget, with the spam farm given its share or nothing. Needs no server: the model
and its robots.txt answers are rebuilt from the log's header.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scrapy_irl.simweb.log import read_log  # noqa: E402
from scrapy_irl.simweb.model import ROBOTS_PATHS, Web, web_for  # noqa: E402
from scrapy_irl.simweb.report import NO_HOST, as_served, spearman, top_plds  # noqa: E402
from scrapy_irl.simweb.robots_truth import RobotsTruth  # noqa: E402

UNBOUNDED = 1 << 40


def allowed_pages(web: Web, user_agent: str) -> list[int]:
    """Per PLD: pages ``/`` and ``/p/<n>.html`` of its hosts that robots.txt allows."""
    truth = RobotsTruth(web)
    out = []
    for pld in web.plds:
        if (
            pld.kind != "legit"
        ):  # spam farm, blog platform: more than any crawl here fetches
            out.append(UNBOUNDED)
            continue
        total = 0
        for name in web.hosts_of[pld.index]:
            host = web.hosts[name]
            served = truth.get(name)
            if served is not None and served.unavailable:
                continue
            paths = ["/"] + [f"/p/{n}.html" for n in range(1, host.pages)]
            if served is None:
                total += len(paths)
            else:
                total += sum(
                    served.allowed(web.url(name, p), user_agent) for p in paths
                )
        out.append(total)
    return out


def ideal(web: Web, allowed: Sequence[int], total: int, f: Callable[[int], float],
          spam: bool) -> list[int]:  # fmt: skip
    """Pages per PLD of the best allocation of ``total`` pages in proportion to f(d_x)."""
    degree = web.in_degree
    caps = [
        0 if (p.kind == "spam" and not spam) else allowed[p.index] for p in web.plds
    ]

    def pages(c: float) -> list[int]:
        return [min(cap, int(c * f(d))) for cap, d in zip(caps, degree)]

    low, high = 0.0, float(total)
    for _ in range(100):  # bisection on c: the total is monotone in it
        mid = (low + high) / 2
        if sum(pages(mid)) > total:
            high = mid
        else:
            low = mid
    return pages(low)


def crawled_pages(web: Web, log: Path) -> list[int]:
    """Distinct non-robots targets fetched per PLD, as the judge counts them."""
    _, records = read_log(log)
    seen: set[tuple[str, str]] = set()
    per: Counter[int] = Counter()
    for r in records:
        host, target = as_served(r.host, r.target)
        if r.status == 421 or host == NO_HOST or target.partition("?")[0] in ROBOTS_PATHS:
            continue
        pld = web.pld_of(host)
        if pld is None or (host, target) in seen:
            continue
        seen.add((host, target))
        per[pld.index] += 1
    return [per.get(p.index, 0) for p in web.plds]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "log", type=Path, help="simweb request log (crawl.py --keep DIR)"
    )
    parser.add_argument("--user-agent", default="*")
    parser.add_argument("--budget-base", type=float, default=10.0)
    parser.add_argument("--budget-per-degree", type=float, default=10.0)
    parser.add_argument("--top", type=int, default=50, help="the judge's top-N coverage")
    parser.add_argument("--min-pages", type=int, default=10)
    args = parser.parse_args(argv)
    config, _ = read_log(args.log)
    if config is None:
        parser.error(f"{args.log}: no simweb header; is it a simweb request log?")
    web = web_for(config)
    crawl = crawled_pages(web, args.log)
    total = sum(crawl)
    allowed = allowed_pages(web, args.user_agent)
    degree = web.in_degree
    legit = [p.index for p in web.plds if p.kind == "legit"]

    def both(pages: Sequence[int]) -> tuple[str, str, str]:
        spam = sum(pages[p.index] for p in web.plds if p.kind == "spam")
        rho_all = spearman(degree, pages)
        rho_legit = spearman([degree[i] for i in legit], [pages[i] for i in legit])
        return (f"{rho_all:.3f}" if rho_all is not None else "-",
                f"{rho_legit:.3f}" if rho_legit is not None else "-",
                f"{spam / total:.1%}" if total else "-")  # fmt: skip

    def log_budget(d: int) -> float:
        return args.budget_base + args.budget_per_degree * math.log2(1 + d)

    def linear(d: int) -> float:
        return float(d)

    rows = [("this crawl", both(crawl))]
    for name, f in (("linear in d_x", linear), ("log budget F(d_x)", log_budget)):
        rows.append(
            (
                f"ideal, {name}, spam gets its share",
                both(ideal(web, allowed, total, f, True)),
            )
        )
        rows.append(
            (f"ideal, {name}, no spam", both(ideal(web, allowed, total, f, False)))
        )
    print(
        f"{args.log}: {total} pages over {len(web.plds)} PLDs ({len(legit)} legitimate)\n"
    )
    print(f"{'allocation':44s} {'rho all':>8s} {'rho legit':>10s} {'spam pages':>11s}")
    for name, (rho_all, rho_legit, spam) in rows:
        print(f"{name:44s} {rho_all:>8s} {rho_legit:>10s} {spam:>11s}")
    print()
    print(top_coverage_ceiling(web, allowed, crawl, args.top, args.min_pages))
    return 0


def top_coverage_ceiling(web: Web, allowed: Sequence[int], crawl: Sequence[int], top: int,
                         min_pages: int) -> str:  # fmt: skip
    """The judge's top-N coverage next to what robots.txt and the spam farm leave possible.

    The top N PLDs are ranked as the judge ranks them (true in-degree, then name). A PLD
    whose robots.txt allows fewer than ``min_pages`` pages cannot be covered by a polite
    crawler (an upper bound: allowed pages may also be unreachable), and covering a spam
    PLD costs spam requests.
    """
    ranked = top_plds(web, top)
    kinds = Counter(web.plds[i].kind for i in ranked)
    blocked = [web.plds[i].name for i in ranked
               if web.plds[i].kind == "legit" and allowed[i] < min_pages]  # fmt: skip
    covered = sum(1 for i in ranked if crawl[i] >= min_pages)
    covered_spam = sum(1 for i in ranked if crawl[i] >= min_pages and web.plds[i].kind == "spam")
    possible = len(ranked) - len(blocked) - kinds["spam"]
    return (
        f"top-{top} PLDs with >= {min_pages} pages: this crawl {covered}/{len(ranked)} "
        f"({covered_spam} of them spam); {kinds['spam']} of the top {top} are spam PLDs and "
        f"{len(blocked)} legitimate ones allow fewer than {min_pages} pages in robots.txt "
        f"({', '.join(blocked) or 'none'}), so at most {possible}/{len(ranked)} "
        f"({possible / len(ranked):.0%}) can be covered without crawling spam"
    )


if __name__ == "__main__":
    raise SystemExit(main())
