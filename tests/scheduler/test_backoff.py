"""Server back-off: a 429 or 503 makes its host wait (IRL_BACKOFF_HTTP_CODES, IRL_BACKOFF_MAX).

Unit tests of the wait (Retry-After in seconds or as a date, doubling without it, the
cap), of the host heap holding a backed-off host, and of the politeness log keeping the
wait across a restart; crawls against a loopback server measure the gaps it sees.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from scrapy.settings import Settings

from scrapy_irl import config
from scrapy_irl.scheduler.backoff import BackoffPolicy, parse_retry_after
from scrapy_irl.scheduler.politeness import Politeness
from scrapy_irl.scheduler.start_log import PolitenessMemory, StartLog
from tests.loopback_site import LoopbackServer, send_answer, serving
from tests.scheduler.test_unusual_requests import crawl

NOW = 1_800_000_000.0


# -- the wait ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (b"120", 120.0),
        (" 7 ", 7.0),
        (b"1.5", 1.5),  # not RFC 9110's grammar, but sent by some servers
        (b"-3", 0.0),
        (formatdate(NOW + 90, usegmt=True).encode(), 90.0),  # IMF-fixdate
        (formatdate(NOW - 90, usegmt=True).encode(), 0.0),  # a date past: no extra wait
        (time.strftime("%a %b %d %H:%M:%S %Y", time.gmtime(NOW + 30)).encode(), 30.0),  # asctime
        (None, None),
        (b"", None),
        (b"soon", None),
        (b"nan", None),
        (b"inf", None),
        (b"9" * 65, None),  # longer than any real value: not parsed
        (b"\xff\xfe", None),
        (b"\xb2", None),  # Latin-1 superscript two: str.isdigit() says yes, int() says no
        (b"1e3", None),
        (b"+5", None),
        (b"Sunday, 06-Nov-94 08:49:37 GMT", 0.0),  # RFC 850, obsolete but allowed; past
    ],
)
def test_retry_after_is_read_as_seconds_or_an_http_date(
    value: bytes | str | None, seconds: float | None
) -> None:
    assert parse_retry_after(value, NOW) == seconds


def test_without_retry_after_the_wait_doubles_from_tau_h_up_to_the_maximum() -> None:
    policy = BackoffPolicy(frozenset({429, 503}), maximum=20.0, max_factor=64)
    waits = [policy.wait(2.0, k, None, NOW) for k in range(1, 7)]
    assert [w.seconds for w in waits] == [2.0, 4.0, 8.0, 16.0, 20.0, 20.0]
    assert {w.source for w in waits} == {"exponential"}
    assert not any(w.capped or w.unreadable for w in waits)
    assert policy.wait(2.0, 5000, None, NOW).seconds == 20.0  # no overflow, however long


def test_the_doubling_stops_at_max_factor_times_tau_h() -> None:
    policy = BackoffPolicy(frozenset({503}), maximum=600.0, max_factor=4)
    assert [policy.wait(3.0, k, None, NOW).seconds for k in range(1, 6)] == [3, 6, 12, 12, 12]
    assert BackoffPolicy().max_factor == 16 and BackoffPolicy().maximum == 120
    with pytest.raises(ValueError, match="IRL_BACKOFF_MAX_FACTOR"):
        BackoffPolicy(max_factor=0.5)


def test_retry_after_is_honoured_within_tau_h_and_the_maximum() -> None:
    policy = BackoffPolicy(frozenset({503}), maximum=60.0)
    asked = policy.wait(2.0, 1, b"30", NOW)
    assert (asked.seconds, asked.source, asked.capped) == (30.0, "retry_after", False)
    assert policy.wait(2.0, 1, b"0", NOW).seconds == 2.0  # never sooner than tau_h
    capped = policy.wait(2.0, 1, b"86400", NOW)
    assert (capped.seconds, capped.capped) == (60.0, True)
    garbled = policy.wait(2.0, 3, b"tomorrow", NOW)  # falls back to doubling, counted
    assert (garbled.seconds, garbled.source, garbled.unreadable) == (8.0, "exponential", True)
    assert policy.applies(503) and not policy.applies(429) and not policy.applies(200)


def test_a_request_without_an_answer_waits_one_doubling_more_than_an_error_page() -> None:
    policy = BackoffPolicy(maximum=100.0, max_factor=16.0)
    waits = [policy.silence(2.0, k) for k in range(1, 6)]
    assert [w.seconds for w in waits] == [4.0, 8.0, 16.0, 32.0, 32.0]  # 2^k, up to 16 x tau_h
    assert {w.source for w in waits} == {"no_answer"}
    assert policy.silence(10.0, 5).seconds == 100.0  # and never past the maximum
    assert policy.silence(10.0, 1).seconds == 20.0
    assert BackoffPolicy(maximum=0.0).silence(3.0, 4).seconds == 3.0  # never below tau_h


@pytest.mark.parametrize(
    ("codes", "maximum", "message"),
    [
        ("429,abc", 600, "IRL_BACKOFF_HTTP_CODES"),
        ([429, 5030], 600, "IRL_BACKOFF_HTTP_CODES"),
        ([True], 600, "IRL_BACKOFF_HTTP_CODES"),
        ({"429": 1}, 600, "IRL_BACKOFF_HTTP_CODES"),
        ([429], -1, "IRL_BACKOFF_MAX"),
    ],
)
def test_bad_settings_are_refused_by_name(codes: Any, maximum: float, message: str) -> None:
    settings = Settings({"IRL_BACKOFF_HTTP_CODES": codes, "IRL_BACKOFF_MAX": maximum})
    with pytest.raises(ValueError, match=message):
        BackoffPolicy(
            frozenset(config.getintlist(settings, "IRL_BACKOFF_HTTP_CODES")),
            config.getfloat(settings, "IRL_BACKOFF_MAX", minimum=0),
        )


def test_codes_may_be_given_as_a_comma_separated_string_or_emptied() -> None:
    assert config.getintlist(Settings({"IRL_BACKOFF_HTTP_CODES": "429, 503"}),
                             "IRL_BACKOFF_HTTP_CODES") == [429, 503]  # fmt: skip
    assert config.getintlist(Settings({"IRL_BACKOFF_HTTP_CODES": []}),
                             "IRL_BACKOFF_HTTP_CODES") == []  # fmt: skip


# -- the host heap ----------------------------------------------------------------------
def test_a_backed_off_host_is_not_handed_out_before_its_wait_ends() -> None:
    polite = Politeness(max_in_flight_per_ip=1)
    host = polite.add_host("a.test", "10.0.0.1", 1.0, 0.1)
    other = polite.add_host("b.test", "10.0.0.1", 1.0, 0.1)
    for name in ("a.test", "a.test", "b.test"):
        polite.push(name, name)
    assert polite.pop(0.0) == (host, "a.test")
    host.not_before = 10.0  # what the scheduler sets on a 429/503 before freeing the host
    polite.finished(host, 0.5)
    assert polite.pop(1.0) == (other, "b.test")  # the IP serves its other host meanwhile
    polite.finished(other, 1.1)
    assert polite.pop(5.0) is None and polite.next_due() == 10.0
    assert polite.pop(10.0) == (host, "a.test")


def test_a_backed_off_host_is_not_forgotten_before_its_wait_ends() -> None:
    polite = Politeness()
    host = polite.add_host("a.test", "10.0.0.1", 1.0, 0.1)
    polite.push("a.test", 1)
    polite.pop(0.0)
    host.not_before = 30.0
    polite.finished(host, 0.2)
    assert polite.forget_idle(5.0) == 0 and "a.test" in polite.hosts
    assert polite.forget_idle(30.0) == 1


def test_a_host_in_a_run_of_back_offs_outlives_its_wait_by_streak_memory() -> None:
    """The retry of its last page comes back from disk; a host forgotten before that
    started its run again at one tau_h."""
    polite = Politeness(streak_memory=60.0)
    host = polite.add_host("a.test", "10.0.0.1", 1.0, 0.1)
    calm = polite.add_host("b.test", "10.0.0.1", 1.0, 0.1)
    for each in (host, calm):
        polite.push(each.name, 1)
        polite.pop(0.0 if each is host else 0.5)
        polite.finished(each, 0.6)
    host.not_before, host.backoff_streak = 30.0, 2
    assert polite.forget_idle(31.0) == 1 and set(polite.hosts) == {"a.test"}  # b is gone
    assert polite.forget_idle(89.0) == 0
    assert polite.forget_idle(90.0) == 1 and not polite.hosts


# -- across a restart -------------------------------------------------------------------
class _Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _remembering(path: Path, wall: _Clock, mono: _Clock) -> tuple[Politeness, PolitenessMemory]:
    """Heaps and their politeness log, as a JOBDIR run opens them (back-offs up to 600 s)."""
    polite = Politeness()
    return polite, PolitenessMemory(StartLog(path, horizon=10, ahead=600, wall=wall), polite, mono)


def test_a_back_off_is_kept_across_a_kill_and_capped_at_the_maximum(tmp_path: Path) -> None:
    wall, mono = _Clock(NOW), _Clock(100.0)
    path = tmp_path / "politeness.log"
    polite, memory = _remembering(path, wall, mono)
    waiting = polite.add_host("a.test", "10.0.0.1", 1.0, 0.1)
    waiting.not_before = 100.0 + 300  # Retry-After: 300
    memory.backed_off(waiting)
    greedy = polite.add_host("b.test", "10.0.0.2", 1.0, 0.1)
    greedy.not_before = 100.0 + 5000
    memory.backed_off(greedy)
    # kill -9: no close, no rewrite; a torn and a damaged line follow
    with open(path, "ab") as f:
        f.write(b'["b","c.test",1e999]\n["b","d.test"]\n["b","e.te')
    wall.t, mono.t = NOW + 60, 7.0  # the next run, a minute later, a new monotonic clock
    fresh = Politeness()
    log = StartLog(path, horizon=10, ahead=600, wall=wall)
    recalled = log.load()
    assert recalled.backoffs == {"a.test": NOW + 300, "b.test": NOW + 60 + 600}
    assert recalled.damaged_lines == 2
    memory = PolitenessMemory(log, fresh, mono)
    again = fresh.add_host("a.test", "10.0.0.1", 1.0, 0.1)
    memory.apply(again)
    assert again.not_before == pytest.approx(7.0 + 240)  # the 4 minutes left of its wait
    assert memory.stats()["recalled_backoffs"] == 2


def test_a_rewrite_keeps_only_back_offs_still_running(tmp_path: Path) -> None:
    wall, mono = _Clock(NOW), _Clock(50.0)
    path = tmp_path / "politeness.log"
    polite, memory = _remembering(path, wall, mono)
    running = polite.add_host("a.test", "10.0.0.1", 1.0, 0.1)
    running.not_before = 50.0 + 100
    over = polite.add_host("b.test", "10.0.0.1", 1.0, 0.1)
    over.not_before = 50.0 - 1
    memory.close()  # a graceful stop rewrites the log from the heaps
    assert b'"b","a.test"' in path.read_bytes() and b'"b.test"' not in path.read_bytes()
    recalled = StartLog(path, horizon=10, ahead=600, wall=wall).load()
    assert recalled.backoffs == {"a.test": pytest.approx(NOW + 100)}


def _a_logged_run_of_three(tmp_path: Path) -> tuple[_Clock, _Clock, Path, Politeness, PolitenessMemory]:
    """A JOBDIR's politeness log where a.test is in a run of 3 back-offs, its wait 8 s."""
    wall, mono = _Clock(NOW), _Clock(100.0)
    path = tmp_path / "politeness.log"
    polite, memory = _remembering(path, wall, mono)
    failing = polite.add_host("a.test", "10.0.0.1", 1.0, 0.1)
    failing.backoff_streak, failing.not_before = 3, 100.0 + 8
    memory.backed_off(failing)
    return wall, mono, path, polite, memory


def test_a_run_of_back_offs_is_resumed_after_a_kill_where_it_left_off(tmp_path: Path) -> None:
    """The run counts how often the wait doubled: without it, a restarted crawl asked a
    server that kept failing at 2 tau_h again, however long it had been down."""
    wall, mono, path, polite, memory = _a_logged_run_of_three(tmp_path)
    recovered = polite.add_host("b.test", "10.0.0.1", 1.0, 0.1)
    recovered.backoff_streak, recovered.not_before = 2, 100.0 + 4
    memory.backed_off(recovered)
    recovered.backoff_streak = 0  # then it answered: the run is over
    memory.backed_off(recovered)
    with open(path, "ab") as f:  # a log of the version before runs were written; damaged runs
        f.write(b'["b","old.test",%.3f]\n["b","c.test",%.3f,-1]\n["b","d.test",%.3f,true]\n'
                % (NOW + 30, NOW + 30, NOW + 30))
    # kill -9; the next run starts a minute later: every wait is over, the runs are not
    wall.t, mono.t = NOW + 60, 7.0
    log = StartLog(path, horizon=10, ahead=600, wall=wall)
    recalled = log.load()
    assert recalled.runs == {"a.test": (3, NOW + 8), "old.test": (1, NOW + 30)}
    assert recalled.backoffs == {} and recalled.damaged_lines == 2
    fresh = Politeness()
    memory = PolitenessMemory(log, fresh, mono)
    again = fresh.add_host("a.test", "10.0.0.1", 1.0, 0.1)
    memory.apply(again)
    assert again.backoff_streak == 3 and again.due_at() <= mono.t  # its wait is over
    assert BackoffPolicy().silence(again.delay, again.backoff_streak + 1).seconds == 16.0
    back = fresh.add_host("b.test", "10.0.0.1", 1.0, 0.1)
    memory.apply(back)
    assert back.backoff_streak == 0
    assert memory.stats()["recalled_runs"] == 2
    # a run whose wait ended longer ago than the longest back-off is over
    wall.t = NOW + 30 + 601
    assert StartLog(path, horizon=10, ahead=600, wall=wall).load().runs == {}


def test_a_rewrite_keeps_runs_whose_wait_is_over_for_as_long_as_ram_does(tmp_path: Path) -> None:
    wall, mono = _Clock(NOW), _Clock(50.0)
    path = tmp_path / "politeness.log"
    polite, memory = _remembering(path, wall, mono)
    in_run = polite.add_host("a.test", "10.0.0.1", 1.0, 0.1)
    in_run.backoff_streak, in_run.not_before = 2, 50.0 - 30
    ended = polite.add_host("b.test", "10.0.0.1", 1.0, 0.1)
    ended.backoff_streak, ended.not_before = 0, 50.0 - 30
    stale = polite.add_host("c.test", "10.0.0.1", 1.0, 0.1)
    stale.backoff_streak, stale.not_before = 4, 50.0 - 700
    memory.close()
    recalled = StartLog(path, horizon=10, ahead=600, wall=wall).load()
    assert recalled.runs == {"a.test": (2, pytest.approx(NOW - 30))}
    assert b'"b.test"' not in path.read_bytes() and b'"c.test"' not in path.read_bytes()
    # recalled runs of hosts not back in the heaps survive the next rewrite too
    fresh = Politeness()
    memory = PolitenessMemory(StartLog(path, horizon=10, ahead=600, wall=wall), fresh, mono)
    memory.close()
    assert StartLog(path, horizon=10, ahead=600, wall=wall).load().runs == {
        "a.test": (2, pytest.approx(NOW - 30))}


# -- crawls: the server measures ------------------------------------------------------------
class _ScriptedHandler(BaseHTTPRequestHandler):
    server: _ScriptedSite

    def do_GET(self) -> None:
        with self.server.lock:
            self.server.log.append((time.monotonic(), self.path))
            script = self.server.script.get(self.path)
            status, headers = script.pop(0) if script else (200, {})
        if status == HANG:
            time.sleep(self.server.hang)  # longer than the crawl's DOWNLOAD_TIMEOUT
        if status in (DROP, HANG):  # close without a byte of answer
            self.close_connection = True
            return
        if status == BIG:  # an answer, too large for the crawl's DOWNLOAD_MAXSIZE
            send_answer(self, 200, b"x" * 100_000)
            return
        send_answer(self, status, b"<html><body>a page</body></html>", headers=headers)

    def log_message(self, format: str, *args: object) -> None:
        pass


#: Script entries that get no answer: the connection closed at once, or after ``hang`` s;
#: and one answered with 100 kB.
DROP, HANG, BIG = 0, -1, -2


class _ScriptedSite(LoopbackServer):
    """Answers each path from its script (status, headers) in order, then 200."""

    def __init__(self, script: dict[str, list[tuple[int, dict[str, str]]]],
                 hang: float = 0.0) -> None:  # fmt: skip
        super().__init__(_ScriptedHandler)
        self.script = script
        self.hang = hang
        self.lock = threading.Lock()
        self.log: list[tuple[float, str]] = []


def _gap_after(log: list[tuple[float, str]], index: int) -> float:
    return log[index + 1][0] - log[index][0]


RETRY = {"RETRY_ENABLED": True, "RETRY_TIMES": 3}


def test_retry_after_of_a_503_holds_the_hosts_next_request(tmp_path: Path) -> None:
    site = _ScriptedSite({"/a": [(503, {"Retry-After": "2"})]})
    with serving(site):
        stats = crawl([{"url": f"{site.base_url}/a"}, {"url": f"{site.base_url}/b"}],
                      tmp_path, **RETRY)  # fmt: skip
    assert stats["finish_reason"] == "finished"
    assert site.log[0][1] == "/a" and sorted(p for _, p in site.log[1:]) == ["/a", "/b"]
    assert _gap_after(site.log, 0) >= 2.0, site.log  # tau_h is 0.1 s here
    assert stats["irl_sched/backoff/retry_after"] == 1


def test_retry_after_of_a_503_to_robots_txt_holds_the_host(tmp_path: Path) -> None:
    """Only pages backed off: a robots.txt answered "503, Retry-After" was asked again at
    the robots retry delay, and with a recent copy of the rules in force the host's pages
    went on at tau_h meanwhile (a probe, 2026-11-28)."""
    robots = [(503, {"Retry-After": "3"})]
    site = _ScriptedSite({"/robots.txt": robots})
    with serving(site):
        stats = crawl([{"url": f"{site.base_url}/a"}], tmp_path, ROBOTSTXT_OBEY=True,
                      IRL_ROBOTS_RETRY_DELAY=0.5, IRL_ROBOTS_RETRY_MAX_DELAY=1.0)  # fmt: skip
    assert stats["finish_reason"] == "finished"
    assert [p for _, p in site.log] == ["/robots.txt", "/robots.txt", "/a"], site.log
    assert _gap_after(site.log, 0) >= 3.0, site.log  # not the 0.5 s retry delay
    assert stats["irl_sched/backoff/retry_after"] == 1


def test_retry_after_of_a_503_to_robots_txt_holds_pages_under_a_recent_copy(tmp_path: Path) -> None:
    """A recent copy of the rules stays in force while robots.txt is unreachable: the
    host's pages went on at tau_h, as if the server had not asked for a pause."""
    site = _ScriptedSite({"/robots.txt": [(200, {}), (503, {"Retry-After": "3"})]})
    with serving(site):
        stats = crawl([{"url": f"{site.base_url}/p{n}", "pause": 0.3 * n} for n in range(8)],
                      tmp_path / "stale", ROBOTSTXT_OBEY=True, IRL_ROBOTS_TTL=0.5,
                      IRL_HOST_DELAY=0.2, IRL_HOST_DELAY_MIN=0.2)  # fmt: skip
    assert stats["finish_reason"] == "finished"
    refused = [i for i, (_, p) in enumerate(site.log) if p == "/robots.txt"][1]
    assert refused + 1 < len(site.log), site.log
    assert _gap_after(site.log, refused) >= 3.0, site.log


def test_robots_txt_answered_between_a_pages_refusals_does_not_end_their_run(tmp_path: Path) -> None:
    """Only a page's answer ends a run of refusals: a robots.txt re-fetched (and served)
    while the pages are rate-limited reset the doubling, every gap stayed ~tau_h (a
    review, 2026-11-28: gaps 0.92, 0.91, 0.91, 0.91 s instead of 0.91, 1.21, 1.82, 3.01)."""
    site = _ScriptedSite({"/a": [(429, {})] * 4})
    with serving(site):
        stats = crawl([{"url": f"{site.base_url}/a"}], tmp_path, ROBOTSTXT_OBEY=True,
                      IRL_ROBOTS_TTL=0.2, IRL_HOST_DELAY=0.3, IRL_HOST_DELAY_MIN=0.3,
                      RETRY_ENABLED=True, RETRY_TIMES=5)  # fmt: skip
    assert stats["finish_reason"] == "finished"
    pages = [t for t, p in site.log if p == "/a"]
    assert len(pages) == 5 and sum(p == "/robots.txt" for _, p in site.log) >= 2, site.log
    gaps = [later - earlier for earlier, later in zip(pages, pages[1:])]
    assert gaps[1] >= 0.6 and gaps[2] >= 1.2 and gaps[3] >= 2.4, gaps


def test_a_host_that_keeps_answering_429_is_asked_exponentially_less_often(
    tmp_path: Path,
) -> None:
    site = _ScriptedSite({"/a": [(429, {})] * 3})
    with serving(site):
        stats = crawl([{"url": f"{site.base_url}/a"}], tmp_path, IRL_HOST_DELAY=0.3,
                      IRL_HOST_DELAY_MIN=0.3, **RETRY)  # fmt: skip
    assert stats["finish_reason"] == "finished"
    assert [p for _, p in site.log] == ["/a"] * 4
    gaps = [_gap_after(site.log, i) for i in range(3)]
    assert gaps[0] >= 0.3 and gaps[1] >= 0.6 and gaps[2] >= 1.2, gaps
    assert stats["irl_sched/backoff/exponential"] == 3


def test_a_huge_retry_after_is_capped(tmp_path: Path) -> None:
    site = _ScriptedSite({"/a": [(503, {"Retry-After": "86400"})]})
    with serving(site):
        stats = crawl([{"url": f"{site.base_url}/a"}], tmp_path, IRL_BACKOFF_MAX=1.0, **RETRY)
    assert stats["finish_reason"] == "finished"
    assert len(site.log) == 2 and 1.0 <= _gap_after(site.log, 0) < 5.0, site.log
    assert stats["irl_sched/backoff/retry_after_capped"] == 1


def test_an_empty_code_list_turns_back_off_off(tmp_path: Path) -> None:
    site = _ScriptedSite({"/a": [(503, {"Retry-After": "2"})]})
    with serving(site):
        stats = crawl([{"url": f"{site.base_url}/a"}], tmp_path, IRL_BACKOFF_HTTP_CODES=[],
                      **RETRY)  # fmt: skip
    assert stats["finish_reason"] == "finished"
    assert len(site.log) == 2 and _gap_after(site.log, 0) < 1.5, site.log
    assert not any(key.startswith("irl_sched/backoff/") for key in stats)


def test_a_host_that_drops_its_connections_is_asked_less_and_less_often(
    tmp_path: Path,
) -> None:
    site = _ScriptedSite({"/a": [(DROP, {})] * 3})
    with serving(site):
        stats = crawl([{"url": f"{site.base_url}/a"}], tmp_path, IRL_HOST_DELAY=0.3,
                      IRL_HOST_DELAY_MIN=0.3, **RETRY)  # fmt: skip
    assert stats["finish_reason"] == "finished"
    assert [p for _, p in site.log] == ["/a"] * 4  # the 4th try is answered
    gaps = [_gap_after(site.log, i) for i in range(3)]
    # 2, 4, 8 x tau_h: each unanswered try one doubling ahead of an error page
    assert gaps[0] >= 0.6 and gaps[1] >= 1.2 and gaps[2] >= 2.4, gaps
    assert stats["irl_sched/backoff/no_answer"] == 3
    assert stats["downloader/response_status_count/200"] == 1


def test_a_timed_out_request_holds_its_host_beyond_the_timeout(tmp_path: Path) -> None:
    site = _ScriptedSite({"/a": [(HANG, {})]}, hang=3.0)
    with serving(site):
        stats = crawl([{"url": f"{site.base_url}/a"}, {"url": f"{site.base_url}/b"}], tmp_path,
                      IRL_HOST_DELAY=0.5, IRL_HOST_DELAY_MIN=0.5, DOWNLOAD_TIMEOUT=1, **RETRY)  # fmt: skip
    assert stats["finish_reason"] == "finished"
    assert site.log[0][1] == "/a" and sorted(p for _, p in site.log[1:]) == ["/a", "/b"]
    # the timeout (1 s, started a little before the server logs the request), then
    # 2 tau_h from the moment the request gave up; tau_h alone gives about 1.5 s
    assert _gap_after(site.log, 0) >= 1.85, site.log
    assert stats["irl_sched/backoff/no_answer"] == 1
    assert stats["downloader/exception_type_count/scrapy.exceptions.DownloadTimeoutError"] == 1


def test_a_download_cancelled_after_the_headers_came_is_not_held_against_its_host(
    tmp_path: Path,
) -> None:
    site = _ScriptedSite({"/big": [(BIG, {})]})
    with serving(site):
        stats = crawl([{"url": f"{site.base_url}/big"}, {"url": f"{site.base_url}/b", "pause": 0.1}],
                      tmp_path, IRL_HOST_DELAY=1.0, IRL_HOST_DELAY_MIN=1.0,
                      DOWNLOAD_MAXSIZE=10_000, **RETRY)  # fmt: skip
    assert stats["finish_reason"] == "finished"
    assert [p for _, p in site.log] == ["/big", "/b"]
    # not 2 tau_h: the server did answer (the margin below 2 s absorbs a loaded machine)
    assert _gap_after(site.log, 0) < 1.8, site.log
    assert stats["downloader/exception_type_count/scrapy.exceptions.DownloadCancelledError"] == 1
    assert not any(key.startswith("irl_sched/backoff/") for key in stats)


def test_unanswered_requests_do_not_back_off_when_turned_off(tmp_path: Path) -> None:
    site = _ScriptedSite({"/a": [(DROP, {})] * 2})
    with serving(site):
        stats = crawl([{"url": f"{site.base_url}/a"}], tmp_path, IRL_HOST_DELAY=0.3,
                      IRL_HOST_DELAY_MIN=0.3, IRL_BACKOFF_ON_DOWNLOAD_ERROR=False, **RETRY)  # fmt: skip
    assert stats["finish_reason"] == "finished"
    assert [p for _, p in site.log] == ["/a"] * 3
    assert _gap_after(site.log, 1) < 1.2, site.log  # 4 x tau_h had it backed off
    assert not any(key.startswith("irl_sched/backoff/") for key in stats)


# -- the scheduler's side: the answer, the log, robots.txt redirect hops -------------------
@pytest.fixture
def opened_scheduler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """An opened IrlScheduler on a JOBDIR, with its own clock and a recorded callLater."""
    from twisted.internet import reactor

    from tests.scheduler.test_scheduler_lifecycle import opened

    calls: list[tuple[float, Any]] = []

    def call_later(delay: float, f: Any, *args: Any, **kwargs: Any) -> _Call:
        calls.append((delay, f))
        return _Call()

    # only while it opens (pytest-twisted runs the test itself through callLater)
    with monkeypatch.context() as patch:
        patch.setattr(reactor, "callLater", call_later)
        scheduler = opened(JOBDIR=str(tmp_path / "job"), IRL_HOSTS_DIR=str(tmp_path / "hosts"),
                           IRL_HOST_DELAY=2.0, IRL_HOST_DELAY_MIN=2.0, IRL_POLITENESS_MARGIN=0.0)  # fmt: skip
    scheduler._call_later = call_later
    clock = _Clock(1000.0)
    scheduler.clock = scheduler.memory.clock = clock
    scheduler.test_clock, scheduler.test_calls = clock, calls
    try:
        yield scheduler
    finally:
        scheduler.close("finished")


class _Call:
    def active(self) -> bool:
        return True

    def cancel(self) -> None:
        pass


def _answer(scheduler: Any, host: Any, status: int, headers: dict[str, str] | None = None) -> None:
    """Hand out a page of ``host`` and deliver the server's answer, as the signals do."""
    from scrapy import Request
    from scrapy.http import Response

    from scrapy_irl.scheduler.items import Handout

    request = Request(f"http://{host.name}/page")
    scheduler._handed[id(request)] = Handout(host, scheduler.clock(), None, request)
    scheduler._downloaded(Response(request.url, status=status, headers=headers), request)
    del scheduler._handed[id(request)]


def test_any_other_answer_ends_the_run_of_429s(opened_scheduler: Any) -> None:
    scheduler, clock = opened_scheduler, opened_scheduler.test_clock
    host = scheduler._add_host("a.test", "10.0.0.1", None)
    waits = []
    for status in (429, 429, 200, 429):
        _answer(scheduler, host, status)
        waits.append(host.not_before - clock())
        clock.t = max(clock.t, host.not_before) + 0.5  # the next request, after the wait
    assert host.delay == pytest.approx(2.0)
    assert waits[0] == pytest.approx(2.0) and waits[1] == pytest.approx(4.0)
    assert waits[3] == pytest.approx(2.0)  # not 8 s: the 200 between started the count again
    assert scheduler.counts["backoff/exponential"] == 3


def _no_answer(scheduler: Any, host: Any) -> None:
    """Hand out a page of ``host`` that reaches the downloader and leaves it unanswered."""
    from scrapy import Request

    from scrapy_irl.scheduler.items import Handout

    request = Request(f"http://{host.name}/page")
    scheduler.polite.push(host.name, "a page")
    assert scheduler.polite.pop(scheduler.clock()) == (host, "a page")  # host and IP booked
    handout = Handout(host, scheduler.clock(), None, request)
    handout.reached = True
    scheduler._handed[id(request)] = handout
    scheduler._wake_engine = lambda: None  # no engine in these tests
    scheduler._left(request)


def test_a_run_of_unanswered_requests_doubles_the_wait_until_an_answer(
    opened_scheduler: Any,
) -> None:
    scheduler, clock = opened_scheduler, opened_scheduler.test_clock
    host = scheduler._add_host("a.test", "10.0.0.1", None)
    waits = []
    for answer in (None, None, 503, 200, None):
        before = clock()
        if answer is None:
            _no_answer(scheduler, host)
        else:
            _answer(scheduler, host, answer)
        waits.append(host.not_before - before if host.not_before > before else 0.0)
        clock.t = max(clock.t, host.not_before) + 0.5
    # tau_h 2 s: 2 x, 4 x tau_h; the 503 is the third in the run (4 x); the 200 ends it
    assert waits == [pytest.approx(4.0), pytest.approx(8.0), pytest.approx(8.0), 0.0,
                     pytest.approx(4.0)]  # fmt: skip
    assert scheduler.counts["backoff/no_answer"] == 3


def test_each_back_off_reaches_the_politeness_log_at_once(opened_scheduler: Any) -> None:
    scheduler = opened_scheduler
    host = scheduler._add_host("a.test", "10.0.0.1", None)
    _answer(scheduler, host, 503, {"Retry-After": "30"})
    log = scheduler.path / "politeness.log"
    backoffs = [line for line in map(json.loads, log.read_text().splitlines()) if line[0] == "b"]
    # read as a restart after a kill -9 would, right now: 30 s to go
    recalled = StartLog(log, horizon=10, ahead=scheduler.backoff.maximum).load()
    assert [b[1] for b in backoffs] == ["a.test"]
    assert recalled.backoffs["a.test"] == pytest.approx(time.time() + 30, abs=2.0)
    assert scheduler.counts["backoff/retry_after"] == 1


def test_the_run_and_its_end_reach_the_politeness_log_at_once(opened_scheduler: Any) -> None:
    scheduler, clock = opened_scheduler, opened_scheduler.test_clock
    host = scheduler._add_host("a.test", "10.0.0.1", None)
    log = scheduler.path / "politeness.log"
    for _ in range(2):
        _no_answer(scheduler, host)
        clock.t = host.not_before + 0.5
    # read as a restart after a kill -9 would: the run of two is recalled
    assert StartLog(log, horizon=10, ahead=scheduler.backoff.maximum).load().runs["a.test"][0] == 2
    _answer(scheduler, host, 200)
    runs = [line[3] for line in map(json.loads, log.read_text().splitlines()) if line[0] == "b"]
    assert runs == [1, 2, 0]
    assert StartLog(log, horizon=10, ahead=scheduler.backoff.maximum).load().runs == {}
    _answer(scheduler, host, 200)  # no run to end: nothing more is written
    assert log.read_text().count('"b"') == 3


def test_a_robots_txt_hop_to_a_backed_off_host_does_not_hold_its_ip(opened_scheduler: Any) -> None:
    """Booked at once, the hop would take its IP until the back-off is over, and every
    other host of the IP would wait with it (found by review, 2026-11-27)."""
    scheduler, clock = opened_scheduler, opened_scheduler.test_clock
    backing_off = scheduler._add_host("a.test", "10.0.0.1", None)
    neighbour = scheduler._add_host("b.test", "10.0.0.1", None)
    backing_off.not_before = clock() + 100
    gate = scheduler._hop_when_due(backing_off, "http://a.test/robots.txt")
    assert not gate.called and "http://a.test/robots.txt" not in scheduler._hop_claims
    assert (100.0, scheduler._grant_hops) in scheduler.test_calls  # tried again at the end
    scheduler.polite.push("b.test", "page of b")
    clock.t += 1
    assert scheduler.polite.pop(clock()) == (neighbour, "page of b")  # the IP serves b
    scheduler.polite.finished(neighbour, clock())
    clock.t = backing_off.not_before
    scheduler._grant_hops()
    assert "http://a.test/robots.txt" in scheduler._hop_claims  # booked once the wait is over


@pytest.mark.slow
def test_a_restart_waits_out_the_back_off_of_the_run_before(tmp_path: Path) -> None:
    """The retry of a 503 page is still queued when the crawl stops; the next run on the
    JOBDIR must not send it before the server's Retry-After is over."""
    site = _ScriptedSite({"/a": [(503, {"Retry-After": "15"})]})
    job = {"JOBDIR": str(tmp_path / "job"), **RETRY}
    with serving(site):
        first = crawl([{"url": f"{site.base_url}/a"}], tmp_path, CLOSESPIDER_TIMEOUT=3, **job)
        assert [p for _, p in site.log] == ["/a"] and first["finish_reason"] == "closespider_timeout"
        second = crawl([{"url": f"{site.base_url}/a"}], tmp_path, **job)
    assert second["finish_reason"] == "finished"
    assert [p for _, p in site.log] == ["/a", "/a"]
    assert _gap_after(site.log, 0) >= 15.0, site.log
    assert second["irl_sched/politeness_log/recalled_backoffs"] == 1


def test_ready_hosts_are_published_as_a_stat(opened_scheduler: Any) -> None:
    """The issue's queue sizes include the ready hosts: due, waiting for their IP's turn."""
    scheduler, clock = opened_scheduler, opened_scheduler.test_clock
    for name in ("a.test", "b.test", "c.test"):
        scheduler._add_host(name, "10.0.0.1", None)
        scheduler.polite.push(name, f"page of {name}")
    scheduler._add_host("d.test", "10.0.0.2", None).not_before = clock() + 100  # backing off
    scheduler.polite.push("d.test", "page of d")
    assert scheduler.polite.pop(clock()) is not None  # one of the three goes; two wait
    scheduler._publish_stats()
    assert scheduler.stats.get_value("irl_sched/ready_hosts") == 2
    assert scheduler.stats.get_value("irl_sched/hosts_in_ram") == 4
    for name in ("a.test", "b.test", "c.test", "d.test"):
        scheduler.polite.drain(name)  # (strings, not requests: nothing to save at close)


def test_a_recalled_run_outlives_the_next_rewrite_and_its_end_is_logged(tmp_path: Path) -> None:
    """A host given back its run (its wait over) has no wait of its own: the next rewrite
    (a graceful stop, a compaction) dropped the run, and the answer that ended it wrote
    nothing, so a kill recalled the ended run again (found by review, 2026-11-27)."""
    wall, mono, path, polite, memory = _a_logged_run_of_three(tmp_path)
    wall.t, mono.t = NOW + 60, 7.0  # kill -9; the next run a minute later
    fresh = Politeness()
    memory = PolitenessMemory(StartLog(path, horizon=10, ahead=600, wall=wall), fresh, mono)
    again = fresh.add_host("a.test", "10.0.0.1", 1.0, 0.1)
    memory.apply(again)
    assert again.backoff_streak == 3 and again.due_at() <= 7.0  # due now: the wait is over
    memory.close()  # a graceful stop rewrites the log
    assert StartLog(path, horizon=10, ahead=600, wall=wall).load().runs == {
        "a.test": (3, pytest.approx(NOW + 8))}
    memory = PolitenessMemory(StartLog(path, horizon=10, ahead=600, wall=wall), fresh, mono)
    again.backoff_streak = 0  # it answered (tracking does this, then logs it)
    memory.backed_off(again)
    assert StartLog(path, horizon=10, ahead=600, wall=wall).load().runs == {}
