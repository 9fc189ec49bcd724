"""STAR: in-degree counts distinct linking PLDs; (B_x, P_x) handed to BEAST."""

from __future__ import annotations

import pytest

from scrapy_irl.scheduler.budget import BudgetPolicy
from scrapy_irl.scheduler.pld import pld_of
from scrapy_irl.scheduler.star import Star


@pytest.mark.parametrize(
    ("host", "pld"),
    [("www.bbc.co.uk", "bbc.co.uk"), ("a.b.example.com", "example.com"), ("127.0.0.1", "127.0.0.1"),
     ("h1.unknown-tld-xyz", "h1.unknown-tld-xyz"), ("WWW.Example.COM.", "example.com"),
     ("u7.blogverse.com", "blogverse.com"),
     # Suffixes the list does not know take its default rule "*": the last two labels.
     ("s1.farm.test", "farm.test"), ("a.b.c.internal", "c.internal"), ("localhost", "localhost"),
     ("site1.localhost", "site1.localhost"), ("::1", "::1"), ("co.uk", "co.uk")],
)
def test_pld_of(host, pld):
    assert pld_of(host) == pld


def run(tmp_path, policy=BudgetPolicy(kind="linear", base=10, per_degree=5), *, charge_new_hosts=False):
    admitted: list[tuple[bytes, int, int]] = []
    star = Star(tmp_path, policy, lambda r, b, p: admitted.append((r, b, p)),
                drum_options={"fsync": False, "buckets": 2, "buffer_bytes": 64, "bucket_bytes": 128},
                charge_new_hosts=charge_new_hosts)  # fmt: skip
    return star, admitted


def test_indegree_counts_distinct_linking_plds_only(tmp_path):
    star, _ = run(tmp_path)
    star.record_link("a.one.com", "www.target.org")
    star.record_link("b.one.com", "x.target.org")  # same source PLD: not counted again
    star.record_link("two.net", "target.org")
    star.record_link("www.target.org", "blog.target.org")  # self-link: ignored
    star.record_link("three.co.uk", "target.org")
    star.flush()
    assert star.indegree("target.org") == 3
    assert star.budget("www.target.org") == 10 + 5 * 3
    star.record_link("two.net", "target.org")
    star.flush()
    assert star.indegree("target.org") == 3


def test_a_subdomain_farm_under_an_unknown_suffix_is_one_linking_pld(tmp_path):
    """Under a suffix the list does not know, each subdomain used to be a PLD of its own:
    twenty farm subdomains gave the target (and each other) an in-degree of 20."""
    star, _ = run(tmp_path)
    for i in range(20):
        star.record_link(f"s{i}.farm.test", "www.target.test")
        star.record_link(f"s{i}.farm.test", f"s{i + 1}.farm.test")
    star.record_link("other.test", "target.test")
    star.flush()
    assert star.indegree("target.test") == 2
    assert star.indegree("farm.test") == 0


def test_admitted_count_and_budget_per_url(tmp_path):
    star, admitted = run(tmp_path)
    star.record_link("one.com", "t.org")
    star.flush()
    for i in range(4):
        star.admit(f"u{i}".encode(), "www.t.org")
    star.admit(b"other", "z.net")
    star.flush()
    assert admitted == [(b"u0", 15, 0), (b"u1", 15, 1), (b"u2", 15, 2), (b"u3", 15, 3), (b"other", 10, 0)]
    assert star.top(1) == [("t.org", 1, 15, 4)]


def test_each_new_host_costs_its_pld_one_more_admission_once(tmp_path):
    """IRL_BUDGET_COUNTS_NEW_HOSTS: a host's robots.txt fetch and DNS lookup count in its
    PLD's P_x, one merge after the host's first URL; the same host again costs nothing."""
    star, admitted = run(tmp_path, charge_new_hosts=True)
    star.admit(b"a1", "a.farm.com")
    star.admit(b"a2", "a.farm.com")
    star.admit(b"b1", "b.farm.com")
    star.flush()
    assert [p for _, _, p in admitted] == [0, 1, 2]  # the charges land after these
    star.admit(b"a3", "A.farm.com")  # a host known in another case: no charge
    star.admit(b"c1", "c.farm.com")
    star.flush()
    assert [p for _, _, p in admitted[3:]] == [3 + 2, 4 + 2]
    star.admit(b"a4", "a.farm.com")
    star.flush()
    assert admitted[-1][2] == 5 + 3
    assert star.top(1)[0][3] == 6 + 3
    assert star.stats()["new_hosts_charged"] == 3
    star.close()
    star, admitted = run(tmp_path, charge_new_hosts=True)  # hosts_seen is kept on disk
    star.admit(b"b2", "b.farm.com")
    star.flush()
    star.admit(b"b3", "b.farm.com")
    star.flush()
    assert [p for _, _, p in admitted] == [9, 10]


def test_without_the_host_charge_p_x_counts_urls_only(tmp_path):
    star, admitted = run(tmp_path)
    for i in range(5):
        star.admit(f"u{i}".encode(), f"s{i}.farm.com")
        star.flush()
    assert [p for _, _, p in admitted] == [0, 1, 2, 3, 4]
    assert star.hosts is None and not (tmp_path / "hosts_seen").exists()


def test_state_survives_reopen(tmp_path):
    star, _ = run(tmp_path)
    star.record_link("one.com", "t.org")
    star.record_link("two.com", "t.org")
    star.admit(b"u", "t.org")
    star.flush()
    star.close()
    star, admitted = run(tmp_path)
    star.record_link("one.com", "t.org")  # already known
    star.admit(b"v", "t.org")
    star.flush()
    assert admitted == [(b"v", 20, 1)]  # d = 2 kept, P = 1 kept


def test_budget_functions():
    assert BudgetPolicy(kind="constant", base=7)(1000) == 7
    assert BudgetPolicy(kind="linear", base=10, per_degree=2)(5) == 20
    assert BudgetPolicy(kind="log", base=10, per_degree=10)(3) == 30
    assert BudgetPolicy(kind="linear", base=10, per_degree=10, maximum=50)(100) == 50
    assert BudgetPolicy(function=lambda d: d * 3)(4) == 12
    assert BudgetPolicy(function=lambda d: float("nan"), maximum=99)(1) == 99
    with pytest.raises(ValueError):
        BudgetPolicy(kind="quadratic")
    with pytest.raises(ValueError):
        BudgetPolicy(base=0)
    # BEAST keeps B_x in 32 bits: a larger maximum failed at the first URL placed
    assert BudgetPolicy(kind="constant", base=2**32 - 1, maximum=2**32 - 1)(0) == 2**32 - 1
    with pytest.raises(ValueError, match="IRL_BUDGET_MAX must be at most 4294967295"):
        BudgetPolicy(kind="constant", base=5e9, maximum=5e9)


def test_a_user_function_failing_mid_crawl_gives_b0_and_is_counted(caplog):
    def picky(d: int) -> float:
        if d == 37:
            raise ZeroDivisionError("no budget for 37")
        return 5 + d

    policy = BudgetPolicy(kind="mypkg.picky", base=8, function=picky)  # the probe passes
    assert policy(36) == 41
    assert policy(37) == 8 and policy(37) == 8
    assert policy.failures == [2]
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and "in-degree 37" in errors[0]


def test_a_user_function_failing_at_start_up_is_refused():
    with pytest.raises(ValueError, match="calling it with in-degree 1000 failed"):
        BudgetPolicy(kind="mypkg.small", function=lambda d: 1 / (d < 1000))


def test_known_budget_tells_an_evicted_pld_from_one_without_links(tmp_path):
    # budget() reads the RAM cache of in-degrees: an evicted PLD reads as in-degree 0.
    # Q_F re-reads and hosts' tau_h used it, and dropped such PLDs to B_0.
    star = Star(tmp_path, BudgetPolicy(kind="linear", base=10, per_degree=5),
                lambda r, b, p: None, drum_options={"fsync": False}, cache_entries=1)  # fmt: skip
    for n in range(3):
        star.record_link(f"src{n}.com", "target.org")
    star.flush()
    assert star.known_budget("www.target.org") == 25
    star.record_link("src0.com", "other.org")  # its in-degree takes the cache's one entry
    star.flush()
    assert star.indegree("target.org") == 0  # evicted: not known, though 3 on disk
    assert star.known_budget("www.target.org") is None
    assert star.known_budget("other.org") == 15
    star.close()


def test_a_host_keeps_its_budget_when_its_pld_leaves_the_cache(tmp_path):
    from tests.scheduler.test_scheduler_lifecycle import opened

    sched = opened(JOBDIR=str(tmp_path / "job"), IRL_IDLE_SAMPLE_INTERVAL=0,
                   IRL_HOST_DELAY=10, IRL_HOST_DELAY_MIN=2)  # fmt: skip
    try:
        host = sched._add_host("www.target.org", "10.0.0.1", None)
        sched._apply_budget(host, 50)  # B_x 50: tau_h 2 s
        assert host.delay < 3
        sched.star._degree.clear()  # the PLD's in-degree was evicted from RAM
        sched._refresh_budget(host)  # (at each finished request)
        assert host.budget == 50 and host.delay < 3  # not B_0's 10 s
    finally:
        sched.close("finished")


def test_admits_pending_comes_back_to_0_when_an_admission_merges_at_once(tmp_path):
    # (a review, 2026-11-29) counted after the check_update, an admission that merged
    # and came back inside it was counted down first (at 0: dropped), then up for good
    admitted = []
    star = Star(tmp_path, BudgetPolicy(kind="linear", base=10, per_degree=5),
                lambda r, b, p: admitted.append(r),
                drum_options={"fsync": False, "buckets": 2, "buffer_bytes": 64,
                              "bucket_bytes": 128})  # fmt: skip
    for i in range(40):
        star.admit(b"http://h%d.example/p" % i, f"h{i}.example")
    star.flush()
    assert len(admitted) == 40 and star.plds.stats.merges > 1
    assert star.admits_pending == 0


def test_admits_pending_counts_an_epoch_delivered_again_in_the_same_run_once(tmp_path):
    # (a review, 2026-11-29) a delivery that failed halfway is delivered again: the
    # admissions applied the first time were counted down a second time
    calls = []

    def on_admitted(record, budget, admitted):
        calls.append(record)
        if len(calls) == 3:
            raise RuntimeError("BEAST push failed once")

    star = Star(tmp_path, BudgetPolicy(kind="linear", base=10, per_degree=5), on_admitted,
                drum_options={"fsync": False, "buckets": 1, "buffer_bytes": 1 << 20,
                              "bucket_bytes": 1 << 20})  # fmt: skip
    for i in range(5):
        star.admit(b"r%d" % i, f"h{i}.example")
    with pytest.raises(RuntimeError):
        star.plds.merge()  # 2 applied, the 3rd raised: the epoch stays owed
    for i in range(5, 10):
        star.admit(b"r%d" % i, f"h{i}.example")
    assert star.admits_pending == 8
    star.plds.deliver()  # the owed epoch again: 2 skipped as applied, 3 applied now
    assert star.admits_pending == 5
