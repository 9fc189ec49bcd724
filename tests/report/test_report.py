"""The crawl report: StatsSampler lines, tolerant reading, plots + HTML, the command."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from scrapy.exceptions import NotConfigured
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler
from twisted.internet import task

from scrapy_irl.report import command, render
from scrapy_irl.report.sampler import StatsSampler, data_dir, numeric_stats

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


# -- sampler -------------------------------------------------------------------------------
class FakeStats:
    def __init__(self) -> None:
        self.values: dict = {"start_time": object(), "finish_reason": "x", "flag": True}

    def get_stats(self) -> dict:
        return dict(self.values)


class FakeStar:
    def top(self, n: int) -> list[tuple[str, int, int, int]]:
        return [(f"pld{i}.com", 100 - i, 10, 5 * i + 1) for i in range(min(n, 3))]


def fake_crawler(star: object = None) -> SimpleNamespace:
    scheduler = SimpleNamespace(star=star) if star is not None else SimpleNamespace()
    return SimpleNamespace(
        stats=FakeStats(), engine=SimpleNamespace(scheduler=scheduler)
    )


def test_sampler_appends_one_line_per_interval_and_a_final_one(tmp_path: Path) -> None:
    clock = task.Clock()
    crawler = fake_crawler(FakeStar())
    sampler = StatsSampler(
        crawler, tmp_path / "irl", 5.0, clock=clock, now=clock.seconds
    )
    sampler.spider_opened()
    for step in range(3):
        crawler.stats.values["response_received_count"] = 10 * (step + 1)
        crawler.stats.values["irl_sched/beast/qf"] = 1.5
        clock.advance(5)
    crawler.stats.values["response_received_count"] = 42
    clock.advance(2)
    sampler.spider_closed(reason="finished")
    assert not clock.getDelayedCalls()  # the loop is stopped
    lines = (tmp_path / "irl" / "stats.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["t"] for r in records] == [5, 10, 15, 17]
    assert [r["stats"]["response_received_count"] for r in records] == [10, 20, 30, 42]
    assert records[0]["stats"] == {
        "response_received_count": 10,
        "irl_sched/beast/qf": 1.5,
    }
    assert all("time" in r for r in records)
    table = json.loads((tmp_path / "irl" / "pld_table.json").read_text())
    assert table[0] == {"pld": "pld0.com", "indegree": 100, "budget": 10, "admitted": 1}
    assert len(table) == 3


def test_sampler_without_star_writes_no_pld_table_and_appends(tmp_path: Path) -> None:
    for _ in range(2):  # a second run appends to the same file
        sampler = StatsSampler(fake_crawler(), tmp_path, 5.0, clock=task.Clock())
        sampler.spider_opened()
        sampler.spider_closed()
    assert len((tmp_path / "stats.jsonl").read_text().splitlines()) == 2
    assert not (tmp_path / "pld_table.json").exists()
    # no engine at all either
    s = StatsSampler(SimpleNamespace(stats=FakeStats()), tmp_path, 5.0)
    assert s.write_pld_table() is False


def test_sampler_without_jobdir_starts_the_file_afresh(tmp_path: Path) -> None:
    for _ in range(2):  # two unrelated runs: the second replaces the first's series
        sampler = StatsSampler(fake_crawler(), tmp_path, 5.0, clock=task.Clock(), append=False)
        sampler.spider_opened()
        sampler.sample()
        sampler.spider_closed()
    assert len((tmp_path / "stats.jsonl").read_text().splitlines()) == 2


def test_sampler_builds_the_report_at_close(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = task.Clock()
    crawler = fake_crawler(FakeStar())
    sampler = StatsSampler(crawler, tmp_path, 5.0, clock=clock, now=clock.seconds,
                           report_at_close=True)  # fmt: skip
    sampler.spider_opened()
    crawler.stats.values["response_received_count"] = 10
    clock.advance(5)
    crawler.stats.values["response_received_count"] = 30
    clock.advance(5)
    with caplog.at_level("INFO"):
        sampler.spider_closed(reason="finished")
    assert sampler.report_index == tmp_path / "report" / "index.html"
    for name in render.PLOTS.values():
        assert (tmp_path / "report" / name).read_bytes()[:8] == PNG_SIGNATURE
    assert "IRL crawl report" in caplog.text and "pld0.com" in caplog.text


def test_sampler_report_failure_is_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sampler = StatsSampler(fake_crawler(), tmp_path, 5.0, clock=task.Clock(),
                           report_at_close=True)  # fmt: skip
    sampler.spider_opened()
    (tmp_path / "report").write_text("a file where the report directory should go")
    sampler.spider_closed()
    assert sampler.report_index is None
    assert "could not build the report" in caplog.text


def test_numeric_stats_keeps_only_finite_numbers() -> None:
    assert numeric_stats(
        {"a": 1, "b": 2.5, "c": True, "d": "x", "e": float("nan")}
    ) == {"a": 1, "b": 2.5}


def test_a_bad_interval_stops_the_crawl_instead_of_dropping_the_report() -> None:
    with pytest.raises(ValueError, match="IRL_REPORT_INTERVAL must be > 0"):
        StatsSampler.from_crawler(
            get_crawler(settings_dict={"IRL_REPORT_ENABLED": True, "IRL_REPORT_INTERVAL": 0})
        )


def test_listing_it_is_enough_the_setting_turns_it_off_and_it_picks_the_directory(
    tmp_path: Path,
) -> None:
    with pytest.raises(NotConfigured):
        StatsSampler.from_crawler(get_crawler(settings_dict={"IRL_REPORT_ENABLED": False}))
    ext = StatsSampler.from_crawler(
        get_crawler(
            settings_dict={
                "IRL_REPORT_INTERVAL": 2,
                "JOBDIR": str(tmp_path / "job"),
            }
        )
    )
    assert ext.interval == 2.0
    assert ext.directory == tmp_path / "job" / "irl"
    assert (
        data_dir(Settings({"IRL_REPORT_DIR": str(tmp_path / "x"), "JOBDIR": "j"}))
        == tmp_path / "x"
    )
    assert data_dir(Settings()) == Path("irl-report-data")


# -- synthetic data ------------------------------------------------------------------------
def write_synthetic(d: Path, torn: bool = False, plds: bool = True) -> None:
    """11 samples 5 s apart: 10 pages/s (one interval 20/s), p = 0.5 then 0.2 at the end."""
    d.mkdir(parents=True, exist_ok=True)
    pages = enq = uniq = 0
    lines = []
    for i in range(11):
        if i:
            pages += 100 if i == 4 else 50
            enq += 100
            uniq += 20 if i == 10 else 50
        stats = {
            "response_received_count": pages,
            "scheduler/enqueued": enq,
            "irl_sched/unique": uniq,
            "irl_sched/urlseen_pending": 7 * i,
            "irl_sched/beast/queued": 1000 - 10 * i,
            "irl_sched/beast/qf": 3,
            "irl_sched/ram_requests": 200,
        }
        lines.append(json.dumps({"t": 5.0 * i, "time": 1e9 + 5 * i, "stats": stats}))
    text = "\n".join(lines) + "\n"
    if torn:
        text += '{"t": 55.0, "time": 1000000055, "stats": {"respon'
    (d / "stats.jsonl").write_text(text)
    if plds:
        rows = [
            {
                "pld": f"site{i}.org",
                "indegree": 2**i,
                "budget": 10 + i,
                "admitted": 3 * 2**i,
            }
            for i in range(15)
        ]
        (d / "pld_table.json").write_text(json.dumps(rows))


def test_reader_skips_and_counts_a_torn_last_line(tmp_path: Path) -> None:
    write_synthetic(tmp_path, torn=True)
    samples = render.read_samples(tmp_path / "stats.jsonl")
    assert len(samples) == 11
    assert samples.skipped == 1 and samples.torn_last_line
    assert "1 undecodable line(s) skipped" in render.summary_text(tmp_path)


def test_reader_continues_time_across_a_restarted_crawl(tmp_path: Path) -> None:
    lines = [
        {"t": t, "time": 0, "stats": {"response_received_count": c}}
        for t, c in [(0, 0), (10, 100), (20, 200), (0, 0), (10, 50)]
    ]
    (tmp_path / "stats.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    samples = render.read_samples(tmp_path / "stats.jsonl")
    assert samples.t == [0, 10, 20, 20, 30]
    assert render.total(samples, "response_received_count") == 250
    assert render.download_rate(samples) == ([10, 20, 30], [10.0, 10.0, 5.0])


def test_a_resumed_run_is_a_new_segment_even_when_t_does_not_go_back(tmp_path: Path) -> None:
    # A first run stopped after 2 s samples once at its close (t=2); the resumed run's
    # first sample comes one interval (3 s) in: t never went back, so the two runs were
    # read as one and the first run's pages were lost from the totals.
    for pages_at in ([2], [3, 6]):
        clock = task.Clock()
        crawler = fake_crawler()
        sampler = StatsSampler(crawler, tmp_path, 3.0, clock=clock, now=clock.seconds)
        sampler.spider_opened()
        for step, pages in enumerate(pages_at):
            crawler.stats.values["response_received_count"] = pages * 10
            clock.advance(pages - (pages_at[step - 1] if step else 0))
        sampler.spider_closed()
        sampler._run += "-later"  # two real runs never share an id (start time, pid)
    samples = render.read_samples(tmp_path / "stats.jsonl")
    assert samples.segment == [0, 1, 1, 1]
    assert render.total(samples, "response_received_count") == 20 + 60


def test_a_clock_set_back_within_a_run_does_not_count_its_pages_twice(tmp_path: Path) -> None:
    # t comes from time.time: NTP stepping the clock back 1 s made t go back within one
    # run, which started a new segment, and total() added the same counter twice (until
    # 2026-11-29 the summary said 50 pages for 30).
    times = iter([1000.0, 1005.0, 1010.0, 1009.0, 1014.0])
    crawler = fake_crawler()
    sampler = StatsSampler(crawler, tmp_path, 5.0, now=lambda: next(times))
    sampler.open()
    for pages in (10, 20, 25, 30):
        crawler.stats.values["response_received_count"] = pages
        sampler.sample()
    sampler.close()
    samples = render.read_samples(tmp_path / "stats.jsonl")
    assert samples.segment == [0, 0, 0, 0]
    assert samples.t == [5, 10, 10, 15]  # held, not gone back
    assert render.total(samples, "response_received_count") == 30
    assert render.summarize(samples).pages == 30
    assert dict(render.summary_rows(render.summarize(samples)))["pages (responses received)"] == "30"
    assert render.download_rate(samples) == ([10, 15], [2.0, 1.0])


def test_the_short_interval_at_close_does_not_set_the_peak(tmp_path: Path) -> None:
    # A crawl of 1 page in 2 s, sampled every second: the page arrived 3 ms before the
    # close, between the last timed sample and the one spider_closed takes. Until
    # 2026-11-29 that 3 ms interval alone was the "peak": 333 pages/s.
    times = iter([1000.0, 1001.0, 1002.0, 1002.003])
    crawler = fake_crawler()
    sampler = StatsSampler(crawler, tmp_path, 1.0, now=lambda: next(times))
    sampler.open()
    for pages in (0, 0, 1):
        crawler.stats.values["response_received_count"] = pages
        sampler.sample()
    sampler.close()
    samples = render.read_samples(tmp_path / "stats.jsonl")
    summary = render.summarize(samples)
    assert summary.pages == 1 and summary.peak_rate == pytest.approx(1 / 1.003)
    ts, rates = render.download_rate(samples)
    assert ts == [2.003] and rates == [pytest.approx(1 / 1.003)]
    # intervals of the usual length are kept apart, and a short one after a restart
    # (nothing before it in its segment) stands alone
    ts, dts, ds = render.merge_short_intervals([10, 20, 20.01, 30.5], [10, 10, 0.01, 0.5],
                                               [5, 6, 1, 2])  # fmt: skip
    assert (ts, ds) == ([10, 20.01, 30.5], [5, 7, 2])
    assert dts == [10, pytest.approx(10.01), 0.5]


def test_a_killed_runs_torn_line_is_ended_before_the_next_run_appends(tmp_path: Path) -> None:
    (tmp_path / "stats.jsonl").write_text(
        json.dumps({"t": 5, "run": "a", "stats": {"response_received_count": 100}})
        + '\n{"t": 10, "run": "a", "sta'
    )
    crawler = fake_crawler()
    sampler = StatsSampler(crawler, tmp_path, 5.0, clock=task.Clock())
    sampler.spider_opened()
    crawler.stats.values["response_received_count"] = 7
    sampler.spider_closed()
    samples = render.read_samples(tmp_path / "stats.jsonl")
    assert samples.skipped == 1 and not samples.torn_last_line
    assert render.total(samples, "response_received_count") == 107


def test_build_report_writes_four_pngs_html_and_right_summary(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_synthetic(data, torn=True)
    index = render.build_report(data, tmp_path / "out")
    assert index == tmp_path / "out" / "index.html"
    for name in render.PLOTS.values():
        png = tmp_path / "out" / name
        assert png.read_bytes()[:8] == PNG_SIGNATURE, name
        assert f'src="{name}"' in index.read_text()
    s = render.summarize(
        render.read_samples(data / "stats.jsonl"),
        render.read_pld_table(data / "pld_table.json"),
    )
    assert s.duration == 50
    assert s.pages == 550
    assert s.mean_rate == pytest.approx(11.0)
    assert s.peak_rate == pytest.approx(20.0)
    assert s.final_p == pytest.approx(0.2)
    assert s.overall_p == pytest.approx(470 / 1000)
    assert s.queues == {
        "irl_sched/urlseen_pending": 70,
        "irl_sched/beast/queued": 900,
        "irl_sched/beast/qf": 3,
        "irl_sched/ram_requests": 200,
    }
    assert [r["pld"] for r in s.top_plds] == [f"site{i}.org" for i in range(14, 4, -1)]
    text = render.summary_text(data)
    assert "550" in text and "11" in text and "20" in text and "0.200" in text
    assert "site14.org" in text and "site4.org" not in text
    html = index.read_text()
    assert "site14.org" in html and "0.200" in html


def test_missing_keys_give_no_data_plots(tmp_path: Path) -> None:
    (tmp_path / "stats.jsonl").write_text(
        json.dumps({"t": 0, "time": 0, "stats": {"x": 1}}) + "\n"
    )
    index = render.build_report(tmp_path, tmp_path / "out")
    for name in render.PLOTS.values():
        assert (tmp_path / "out" / name).read_bytes()[:8] == PNG_SIGNATURE
    assert "n/a" in index.read_text()
    assert "(no PLD table)" in render.summary_text(tmp_path)


# -- command -------------------------------------------------------------------------------
def run_command(argv: list[str]) -> command.Command:
    cmd = command.Command()
    cmd.settings = Settings()
    parser = argparse.ArgumentParser()
    cmd.add_options(parser)
    opts, args = parser.parse_known_args(argv)
    cmd.process_options(args, opts)
    cmd.run(args, opts)
    return cmd


def test_command_errors_clearly_on_an_empty_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert run_command([str(tmp_path)]).exitcode == 1
    err = capsys.readouterr().err
    assert "no stats.jsonl" in err and "IRL_REPORT_ENABLED" in err
    assert command.main([str(tmp_path / "missing")]) == 1
    assert not (tmp_path / "report").exists()


def test_command_accepts_a_jobdir_or_the_data_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    write_synthetic(tmp_path / "job" / "irl", plds=False)
    assert run_command([str(tmp_path / "job")]).exitcode == 0
    out = capsys.readouterr().out
    assert "mean pages/s" in out
    assert f"report: {tmp_path / 'job' / 'irl' / 'report' / 'index.html'}" in out
    buf = io.StringIO()
    assert command.report(tmp_path / "job" / "irl", tmp_path / "o", out=buf) == 0
    assert (tmp_path / "o" / "index.html").is_file()
    assert command.main([str(tmp_path / "job"), "-o", str(tmp_path / "o2")]) == 0
    assert (tmp_path / "o2" / "queues.png").is_file()


def test_command_errors_clearly_on_an_output_it_cannot_write(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    # until 2026-11-29 each of these ended in a traceback
    write_synthetic(tmp_path / "irl", plds=False)
    (tmp_path / "file").write_text("x")
    (tmp_path / "taken" / "index.html").mkdir(parents=True)  # a directory where the page goes
    for output in (tmp_path / "file", tmp_path / "file" / "sub", tmp_path / "taken"):
        assert command.main([str(tmp_path), "-o", str(output)]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"irl-report: cannot write the report to {output}: "), err
        assert "Traceback" not in err
    assert run_command([str(tmp_path), "-o", str(tmp_path / "file")]).exitcode == 1
    assert (tmp_path / "file").read_text() == "x"


def test_command_says_which_side_failed_when_the_data_cannot_be_read(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stats.jsonl it may not read was reported as "cannot write the report" (a review,
    2026-11-29)."""
    write_synthetic(tmp_path / "irl", plds=False)
    stats = tmp_path / "irl" / "stats.jsonl"

    def unreadable(path: Path) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(render, "read_samples", unreadable)
    assert command.main([str(tmp_path), "-o", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"irl-report: cannot read the crawl's data in {tmp_path / 'irl'}: "), err
    assert str(stats) in err


def test_p_is_unique_over_offered_when_the_data_has_it(tmp_path: Path) -> None:
    """Since 2026-11-25 ``scheduler/enqueued`` counts only the requests the scheduler
    kept, as Scrapy's does; p divides by every request offered (``irl_sched/offered``).
    Data written before has only ``scheduler/enqueued``, which counted the same."""
    lines = []
    for i in range(3):
        stats = {"irl_sched/offered": 100 * i, "scheduler/enqueued": 25 * i,
                 "irl_sched/unique": 25 * i}  # fmt: skip
        lines.append(json.dumps({"t": 5.0 * i, "time": 1e9 + 5 * i, "stats": stats}))
    (tmp_path / "stats.jsonl").write_text("\n".join(lines) + "\n")
    s = render.summarize(render.read_samples(tmp_path / "stats.jsonl"))
    assert s.overall_p == pytest.approx(0.25)
    assert s.final_p == pytest.approx(0.25)


@pytest.mark.slow
def test_a_crawl_with_the_add_on_and_a_jobdir_alone_can_be_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Issue 6: ``scrapy irl-report JOBDIR`` from the crawl's stats log. Until 2026-11-27
    only a crawl that listed StatsSampler and switched it on left one."""
    from tests.loopback_site import serving
    from tests.scheduler.test_unusual_requests import _Site, crawl

    job = tmp_path / "job"
    with serving(_Site()) as site:
        stats = crawl([{"url": f"{site.base_url}/p{n}"} for n in range(3)], tmp_path,
                      JOBDIR=str(job))  # fmt: skip
    assert stats["finish_reason"] == "finished"
    assert (job / "irl" / "stats.jsonl").is_file()
    assert command.main([str(job)]) == 0
    assert (job / "irl" / "report" / "index.html").is_file()
    assert "pages" in capsys.readouterr().out


def test_a_crawl_refused_before_its_spider_opened_samples_nothing(tmp_path: Path) -> None:
    """A second crawl refused on a JOBDIR in use still closes its spider: its sampler
    appended an empty sample to the live crawl's stats.jsonl (a probe, 2026-11-27)."""
    job = tmp_path / "job"
    live = job / "irl" / "stats.jsonl"
    live.parent.mkdir(parents=True)
    live.write_text('{"t": 0.0, "time": 1.0, "run": "live", "stats": {"a": 1}}\n')
    refused = StatsSampler.from_crawler(get_crawler(settings_dict={"JOBDIR": str(job)}))
    refused.spider_closed(reason="shutdown")  # no spider_opened before it
    assert live.read_text() == '{"t": 0.0, "time": 1.0, "run": "live", "stats": {"a": 1}}\n'
    assert not (job / "irl" / "pld_table.json").exists()


def test_damaged_rows_of_the_pld_table_are_skipped_not_fatal(tmp_path: Path, caplog) -> None:
    """A row with a count that is not a whole number (``"indegree": "many"``, a null
    budget) stopped ``irl-report`` with ``ValueError: invalid literal for int()`` (found
    by a probe, 2026-11-27); it is skipped with a warning, the good rows are reported."""
    data = tmp_path / "data"
    write_synthetic(data)
    rows = [
        {"pld": "good.org", "indegree": 9, "budget": 4, "admitted": 3},
        {"pld": "many.org", "indegree": "many", "budget": 4, "admitted": 3},
        {"pld": "null.org", "indegree": 2, "budget": None, "admitted": 1},
        {"pld": "neg.org", "indegree": -1, "budget": 1, "admitted": 1},
        {"pld": "nan.org", "indegree": 1.5, "budget": 1, "admitted": 1},
        {"pld": 7, "indegree": 1, "budget": 1, "admitted": 1},
        ["tuple.org", 5, 2, 2.0],
        "garbage",
    ]
    (data / "pld_table.json").write_text(json.dumps(rows))
    table = render.read_pld_table(data / "pld_table.json")
    assert [(r["pld"], r["indegree"], r["budget"], r["admitted"]) for r in table] == [
        ("good.org", 9, 4, 3), ("tuple.org", 5, 2, 2)]  # fmt: skip
    assert "skipped 6 row(s)" in caplog.text
    index = render.build_report(data, tmp_path / "out")
    assert "good.org" in index.read_text() and "many.org" not in index.read_text()


def test_a_short_first_interval_of_a_run_is_not_merged_into_the_last_runs(tmp_path: Path) -> None:
    """A run's time starts where the last one ended, so its first interval looked like
    the continuation of the last run's final one, and was merged into it (a review,
    2026-11-29: peak 5.45 pages/s for 50 pages in 1 s)."""
    lines = [{"t": t, "run": run, "stats": {"response_received_count": pages}}
             for run, t, pages in [("r1", 0, 0), ("r1", 10, 10), ("r1", 20, 20),
                                   ("r2", 0.0, 0), ("r2", 1.0, 50)]]  # fmt: skip
    (tmp_path / "stats.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    samples = render.read_samples(tmp_path / "stats.jsonl")
    ts, rates = render.download_rate(samples)
    assert rates == [pytest.approx(1.0), pytest.approx(1.0), pytest.approx(50.0)]
    assert render.summarize(samples).peak_rate == pytest.approx(50.0)
