"""benchmarks/spearman_ceiling.py: the best Spearman an allocation of N pages can reach."""

from __future__ import annotations

from benchmarks.spearman_ceiling import (
    allowed_pages,
    crawled_pages,
    ideal,
    main,
    top_coverage_ceiling,
)
from scrapy_irl.simweb.config import WebConfig
from scrapy_irl.simweb.log import LogRecord, RequestLog
from scrapy_irl.simweb.model import web_for
from scrapy_irl.simweb.report import top_plds


def _web():
    return web_for(WebConfig.sized("tiny"))


def test_ideal_allocation_spends_the_pages_in_degree_order_within_caps():
    web = _web()
    allowed = allowed_pages(web, "*")
    pages = ideal(web, allowed, 200, float, spam=False)
    assert 190 <= sum(pages) <= 200  # bisection spends (almost) all, never more
    degree = web.in_degree
    for p in web.plds:
        assert pages[p.index] <= allowed[p.index]
        if p.kind == "spam":
            assert pages[p.index] == 0
    uncapped = [
        i
        for i in range(len(pages))
        if pages[i] < allowed[i] and web.plds[i].kind != "spam"
    ]
    for a in uncapped:  # below their caps, more in-degree never gets fewer pages
        for b in uncapped:
            if degree[a] > degree[b]:
                assert pages[a] >= pages[b]


def test_robots_limits_are_counted():
    web = _web()
    allowed = allowed_pages(web, "*")
    closed = open_ = 0
    for p in web.plds:
        if p.kind != "legit":
            continue
        hosts = [web.hosts[h] for h in web.hosts_of[p.index]]
        kinds = {h.robots for h in hosts}
        if kinds <= {"error", "disallow_all"}:  # 5xx or "Disallow: /": nothing allowed
            assert allowed[p.index] == 0
            closed += 1
        elif kinds <= {"allow", "notfound"}:  # everything allowed
            assert allowed[p.index] == sum(h.pages for h in hosts)
            open_ += 1
        else:
            assert 0 <= allowed[p.index] <= sum(h.pages for h in hosts)
    assert closed and open_  # the seeded tiny web has both kinds


def test_crawl_pages_counted_like_the_judge_and_report_printed(tmp_path, capsys):
    web = _web()
    log = RequestLog(tmp_path / "run.log", web.config)
    host = web.hosts_of[0][0]
    for t, target in enumerate(["/robots.txt", "/", "/", "/p/1.html"]):
        log.write(LogRecord(float(t), "127.0.0.1", host, target, 200, 10))
    log.close()
    per = crawled_pages(web, tmp_path / "run.log")
    assert per[0] == 2 and sum(per) == 2  # robots.txt and the repeat not counted
    assert main([str(tmp_path / "run.log")]) == 0
    out = capsys.readouterr().out
    assert "2 pages over" in out and "ideal, linear in d_x, no spam" in out


def test_top_coverage_ceiling_counts_spam_and_robots_blocked_plds():
    web = _web()
    allowed = allowed_pages(web, "*")
    ranked = top_plds(web, 10)
    spam = sum(1 for i in ranked if web.plds[i].kind == "spam")
    blocked = [i for i in ranked if web.plds[i].kind == "legit" and allowed[i] < 10]
    crawl = [0] * len(web.plds)
    crawl[ranked[0]] = 10  # one covered PLD, and one short of the threshold
    crawl[ranked[1]] = 9
    line = top_coverage_ceiling(web, allowed, crawl, 10, 10)
    possible = 10 - spam - len(blocked)
    assert f"this crawl 1/10 ({int(web.plds[ranked[0]].kind == 'spam')} of them spam)" in line
    assert f"{spam} of the top 10 are spam PLDs" in line
    assert f"{len(blocked)} legitimate ones" in line
    assert f"at most {possible}/10" in line
    for i in blocked:
        assert web.plds[i].name in line
