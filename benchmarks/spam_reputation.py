#!/usr/bin/env python3
"""Would a trust-propagating reputation keep a spam farm out better than PLD in-degree?

    python benchmarks/spam_reputation.py                       # the default simweb
    python benchmarks/spam_reputation.py --seed 23 --web out_links=20 --web spam_plds=150

STAR budgets a PLD by its in-degree d_x (distinct linking PLDs). A farm whose PLDs link to
one another earns budgets like ordinary sites, so once its hosts are spread over many
addresses (tau_s no longer holds it back) it gets about its share of all budgets. The
thesis (chapter VI) rejects PageRank-like ranks as too disk-intensive at its scale and as
open to manipulation; TrustRank (PageRank whose random jumps go only to trusted seeds)
is the standard answer to the second point. This compares, on a simweb's true PLD graph
(no crawl, no server), the farm's share of all budget under the default ``log`` F with
d_x, with PageRank-scaled d_x and with TrustRank-scaled d_x (seeds: the PLDs of simweb's
seed URLs; d_x multiplied by min(1, N * score_x)), and how many legitimate PLDs lose more
than a fifth of their budget to the scaling.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scrapy_irl.scheduler.budget import BudgetPolicy
from scrapy_irl.scheduler.pld import pld_of
from scrapy_irl.simweb.config import SIZES, WebConfig
from scrapy_irl.simweb.model import Web


def link_rank(out_links: list[list[int]], jump: np.ndarray, *, damping: float = 0.85,
              iterations: int = 60) -> np.ndarray:  # fmt: skip
    """Power iteration of PageRank with jump vector ``jump`` (dangling mass jumps too)."""
    n = len(out_links)
    rank = jump.copy()
    for _ in range(iterations):  # bounded: a fixed number of sweeps
        flow = np.zeros(n)
        for source, targets in enumerate(out_links):
            targets = [t for t in targets if t != source]
            if targets:
                flow[targets] += rank[source] / len(targets)
            else:
                flow += rank[source] * jump
        rank = (1 - damping) * jump + damping * flow
    return rank


def compare(web: Web, seeds: int = 10) -> dict[str, dict[str, float]]:
    """Per reputation: the farm's share of all budget (%) and legit PLDs cut by > 20 %."""
    n = len(web.plds)
    policy = BudgetPolicy(kind="log")
    degree = np.asarray(web.in_degree, dtype=float)
    spam = np.array([p.kind == "spam" for p in web.plds])
    base = np.array([policy(int(d)) for d in degree], dtype=float)
    trusted = {
        web.pld_by_name[pld_of(url.split("/")[2].split(":")[0])].index
        for url in web.seed_urls(seeds)
    }
    jump_seeds = np.zeros(n)
    jump_seeds[list(trusted)] = 1 / len(trusted)
    results = {}
    for name, score in (
        ("in-degree", None),
        ("PageRank", link_rank(web.out_links, np.full(n, 1 / n))),
        ("TrustRank", link_rank(web.out_links, jump_seeds)),
    ):
        scaled = degree if score is None else degree * np.minimum(1.0, n * score)
        budget = np.array([policy(round(d)) for d in scaled], dtype=float)
        results[name] = {
            "spam_share": 100 * budget[spam].sum() / budget.sum(),
            "legit_cut": int(((budget < 0.8 * base) & ~spam).sum()),
            "legit": int((~spam).sum()),
        }
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--size", choices=sorted(SIZES), default="default")
    parser.add_argument("--web", action="append", default=[], metavar="FIELD=VALUE",
                        help="override a field of the simweb config, repeatable")  # fmt: skip
    args = parser.parse_args(argv)
    overrides = {}
    for item in args.web:
        field, _, value = item.partition("=")
        overrides[field] = float(value) if "." in value else int(value)
    web = Web(WebConfig.sized(args.size, seed=args.seed, **overrides))
    print(f"simweb size={args.size} seed={args.seed} {overrides or ''}: "
          f"{len(web.spam_plds)} farm PLDs of {len(web.plds)}")  # fmt: skip
    print(f"{'reputation':<12} {'farm share of budget':>22} {'legit PLDs cut > 20 %':>24}")
    for name, row in compare(web).items():
        print(f"{name:<12} {row['spam_share']:>21.1f}% {row['legit_cut']:>17} of {row['legit']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
