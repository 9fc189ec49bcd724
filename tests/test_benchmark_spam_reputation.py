"""benchmarks/spam_reputation.py: the link ranks it compares are computed right."""

from __future__ import annotations

import numpy as np

from benchmarks.spam_reputation import compare, link_rank
from scrapy_irl.simweb.config import WebConfig
from scrapy_irl.simweb.model import Web


def test_link_rank_of_a_cycle_is_uniform_and_sums_to_one():
    rank = link_rank([[1], [2], [0]], np.full(3, 1 / 3))
    assert np.allclose(rank, 1 / 3)


def test_trust_reaches_a_closed_farm_only_through_its_entry_link():
    # 0 -> 1 -> 0 is the trusted site pair; 1 -> 2 enters a farm 2 <-> 3 that never links out.
    out = [[1], [0, 2], [3], [2]]
    seeds = np.array([1.0, 0, 0, 0])
    trust = link_rank(out, seeds)
    page = link_rank(out, np.full(4, 0.25))
    assert abs(trust.sum() - 1) < 1e-9 and abs(page.sum() - 1) < 1e-9
    # Without trusted jumps the closed farm is a rank sink and holds most of the mass.
    assert page[2:].sum() > 0.5
    assert trust[2:].sum() < page[2:].sum()


def test_in_degree_row_is_the_unscaled_budget():
    rows = compare(Web(WebConfig.sized("tiny")))
    assert set(rows) == {"in-degree", "PageRank", "TrustRank"}
    assert rows["in-degree"]["legit_cut"] == 0
    assert all(0 < row["spam_share"] < 100 for row in rows.values())
