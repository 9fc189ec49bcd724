"""The judge's numbers on hand-made logs whose right answers are worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scrapy_irl.simweb.config import WebConfig
from scrapy_irl.simweb.log import HEADER, LogRecord, read_log_text
from scrapy_irl.simweb.model import Web, web_for
from scrapy_irl.simweb.report import judge, main, spearman

CONFIG = WebConfig.sized("tiny")


@pytest.fixture(scope="module")
def web() -> Web:
    return web_for(CONFIG)


def _legit(web: Web, **want: object):
    return next(
        h
        for h in web.hosts.values()
        if h.kind == "legit" and all(getattr(h, k) == v for k, v in want.items())
    )


def test_spearman_known_values() -> None:
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # ties: ranks x = 1, 2.5, 2.5, 4 against 1..4: 4.5 / sqrt(4.5 * 5)
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(4.5 / (4.5 * 5) ** 0.5)
    assert spearman([1, 1, 1], [1, 2, 3]) is None


def test_hand_made_log(web: Web) -> None:
    dis = _legit(web, robots="disallow")  # Disallow: /private/ and /p/1 (prefix)
    cd = _legit(web, robots="crawl_delay")
    cal = _legit(web, calendar=True)
    spam = f"abc.{web.spam_plds[0].name}"
    d_ip, cd_ip, cal_ip, spam_ip = (
        web.resolve(h) for h in (dis.name, cd.name, cal.name, spam)
    )
    delay = web.hash("cd", cd.name) % 6 + 5  # the Crawl-delay that host serves
    t = 1000.0
    rows = [
        # start, ip, host, target, status
        (t + 0.0, d_ip, dis.name, "/robots.txt", 200),
        (t + 1.0, d_ip, dis.name, "/", 200),
        (t + 1.5, d_ip, dis.name, "/private/3.html", 200),  # violation
        (t + 4.0, d_ip, dis.name, "/p/12.html", 200),  # violation (prefix /p/1)
        (t + 4.5, d_ip, dis.name, "/", 200),  # duplicate fetch
        (t + 10.0, cd_ip, cd.name, "/", 200),  # before its robots.txt
        (t + 10.2, cd_ip, cd.name, "/robots.txt", 200),
        (t + 11.0, cd_ip, cd.name, "/p/2.html", 200),  # 0.8 s < Crawl-delay
        (t + 20.0, cal_ip, cal.name, "/calendar/2025/01/", 200),  # trap
        (t + 30.0, spam_ip, spam, "/x.html", 200),  # spam
        (t + 30.1, spam_ip, spam, "/y.html", 200),  # spam
        (t + 40.0, d_ip, cd.name, "/", 421),  # wrong IP, if the IPs differ
    ]
    records = [LogRecord(s, ip, h, p, st, 100) for s, ip, h, p, st in rows]
    r = judge(
        records[::-1], web, tau_h=1.0, tau_s=0.3
    )  # order of lines must not matter
    assert r["requests"] == 12
    assert r["misdirected_421"] == 1
    assert (
        r["robots_fetches"] == 2
        and r["robots_hosts"] == 2
        and r["robots_fetches_max_per_host"] == 1
    )
    assert (
        r["pages"] == 8 and r["duplicate_fetches"] == 1
    )  # 9 non-robots, non-421 requests
    assert r["spam_requests"] == 2 and r["spam_share"] == pytest.approx(
        round(2 / 12, 4)
    )
    assert r["trap_requests"] == 1
    assert r["robots_violations"] == 2
    assert r["requests_before_robots"] == 1 + 1 + 2  # cd's "/", calendar host, 2 spam
    assert r["crawl_delay_violations"] == (1 if 0.8 < delay else 0)  # after its robots.txt
    # per host, all starts (robots.txt included: the server sees it): dis 0,1.0,1.5,4.0,4.5
    # -> gaps 1.0 .5 2.5 .5; cd 10,10.2,11 -> .2 .8; spam 0.1
    assert r["min_gap_per_host_s"] == pytest.approx(0.1)
    assert r["broke_tau_h"] == 5  # .5, .5, .2, .8, .1 (1.0 is not < 1.0)
    assert len({d_ip, cd_ip, cal_ip, spam_ip}) == 4  # true for the tiny web of seed 1
    # per IP, all requests: d_ip 0,1,1.5,4,4.5,40 -> 1,.5,2.5,.5,35.5 ; cd_ip 10,10.2,11 -> .2,.8 ; spam .1
    assert r["min_gap_per_ip_s"] == pytest.approx(0.1)
    assert r["broke_tau_s"] == 2  # 0.2 and 0.1
    assert r["hosts_fetched"] == 4


def test_retry_after_violations_count_requests_sent_too_soon_after_the_answer(web: Web) -> None:
    host = _legit(web)
    ip = web.resolve(host.name)
    wait = CONFIG.retry_after
    rows = [
        # start, target, status, duration
        (0.0, "/status/503", 503, 0.5),  # complete at 0.5: the host waits until 0.5 + wait
        (0.2, "/", 200, 0.1),  # sent before the answer was complete: not counted
        (0.5 + wait - 1, "/p/2.html", 200, 0.1),  # too soon
        (0.5 + wait + 0.01, "/status/429", 429, 0.0),  # after the wait; a new one starts
        (0.5 + wait + 1, "/robots.txt", 200, 0.0),  # too soon, robots.txt included
        (0.5 + 2 * wait + 0.02, "/p/3.html", 200, 0.0),
        (0.5 + 2 * wait + 0.03, "/status/500", 500, 0.0),  # no Retry-After on a 500
        (0.5 + 2 * wait + 0.04, "/p/4.html", 200, 0.0),
    ]
    records = [LogRecord(1000 + t, ip, host.name, p, st, 10, d) for t, p, st, d in rows]
    assert judge(records, web)["retry_after_violations"] == 2
    # overlapping answers (a crawler with several requests to a host at once)
    overlapping = [(0.0, "/status/503", 503, 20.0), (1.0, "/status/429", 429, 0.1),
                   (1.2 + wait, "/p/5.html", 200, 0.0),  # the 429's pause is over, the 503 not sent yet
                   (25.0, "/status/503", 503, 0.0),  # inside the first 503's pause (20-30)
                   (25.5, "/status/429", 429, 1.0),  # likewise
                   (31.0, "/p/6.html", 200, 0.0)]  # inside the pause of the 503 of 25.0  # fmt: skip
    records = [LogRecord(1000 + t, ip, host.name, p, st, 10, d) for t, p, st, d in overlapping]
    assert judge(records, web)["retry_after_violations"] == 3
    header = json.loads(CONFIG.to_json())
    del header["retry_after"]
    old_log = WebConfig.from_json(json.dumps(header))
    assert old_log.retry_after == 0  # recorded before the header existed: nothing to judge
    assert judge(records, web_for(old_log))["retry_after_violations"] == 0


def test_coverage_and_correlation(web: Web) -> None:
    order = sorted(
        range(len(web.plds)), key=lambda i: (-web.in_degree[i], web.plds[i].name)
    )
    top, second = order[0], order[1]
    records = []
    t = 0.0
    for rank, (pld, count) in enumerate(((top, 12), (second, 5))):
        host = (
            web.hosts_of[pld][0]
            if web.plds[pld].kind == "legit" or web.hosts_of[pld]
            else None
        )
        host = host or f"u{rank}.{web.plds[pld].name}"
        for k in range(count):
            t += 1
            records.append(
                LogRecord(t, web.resolve(host), host, f"/p/{k}.html", 200, 10)
            )
    r = judge(records, web, top=2, min_pages=10)
    assert r["top_coverage"] == 0.5  # the top PLD has 12 pages, the second only 5
    assert r["plds_fetched"] == 2
    degree = web.in_degree
    per = [0] * len(web.plds)
    per[top], per[second] = 12, 5
    assert r["spearman_indegree_pages"] == pytest.approx(
        spearman(degree, per), abs=1e-6
    )
    assert r["spearman_indegree_pages"] > 0


def test_session_variants_are_traps_and_same_content(web: Web) -> None:
    sess = _legit(web, session=True)
    ip = web.resolve(sess.name)
    records = [
        LogRecord(float(i), ip, sess.name, f"/p/1.html?sid={i:012x}", 200, 10)
        for i in range(5)
    ]
    r = judge(records, web)
    assert r["trap_requests"] == 5 and r["pages"] == 5 and r["unique_content"] == 1


def test_cli_reads_header_and_prints_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], web: Web
) -> None:
    host = _legit(web, robots="allow")
    ip = web.resolve(host.name)
    lines = [HEADER + CONFIG.to_json() + "\n"]
    lines += [
        LogRecord(5.0 + i, ip, host.name, f"/p/{i}.html", 200, 10).line()
        for i in range(3)
    ]
    lines.append("garbage line\n")
    log = tmp_path / "x.log"
    log.write_text("".join(lines))
    config, records = read_log_text(log.read_text())
    assert config == CONFIG and len(records) == 3
    assert main([str(log), "--json", "--tau-h", "1.5"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (
        out["requests"] == 3
        and out["broke_tau_h"] == 2
        and out["min_gap_per_host_s"] == 1.0
    )
    assert main([str(log)]) == 0
    assert "robots violations" in capsys.readouterr().out


def test_cli_survives_damaged_bytes_and_refuses_a_bad_header_clearly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], web: Web
) -> None:
    host = _legit(web, robots="allow")
    ip = web.resolve(host.name)
    good = [LogRecord(5.0 + i, ip, host.name, f"/p/{i}.html", 200, 10).line() for i in range(3)]
    log = tmp_path / "x.log"
    # A byte that is not UTF-8 cost the whole judge (UnicodeDecodeError): now its line.
    log.write_bytes((HEADER + CONFIG.to_json() + "\n" + good[0]).encode() + b"\xff\xfe junk\n"
                    + "".join(good[1:]).encode())  # fmt: skip
    assert main([str(log), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["requests"] == 3
    for header in ('{"plds": "30"', '{"plds": "30"}', "[1, 2]"):
        log.write_text(HEADER + header + "\n" + "".join(good))
        with pytest.raises(SystemExit) as stopped:
            main([str(log)])
        assert stopped.value.code == 2
        assert "header is unreadable" in capsys.readouterr().err
    log.write_text("".join(good))  # no header: --size names the web
    with pytest.raises(SystemExit):
        main([str(log), "--size", "nosuch"])
    assert "unknown simweb size" in capsys.readouterr().err


def _strict(text: str) -> dict:
    """``text`` parsed as strict JSON: ``NaN``/``Infinity`` are not JSON."""

    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def _log(tmp_path: Path, web: Web, starts: list[str]) -> Path:
    host = _legit(web, robots="allow")
    ip = web.resolve(host.name)
    lines = [HEADER + CONFIG.to_json() + "\n"]
    lines += [f"{s}\t{ip}\t{host.name}\t/p/{i}.html\t200\t10\t0.001\n" for i, s in enumerate(starts)]
    log = tmp_path / "x.log"
    log.write_text("".join(lines))
    return log


@pytest.mark.parametrize(
    "option",
    ["--top=-1", "--top=0", "--top=x", "--min-pages=-3", "--tau-h=nan", "--tau-h=-1",
     "--tau-h=inf", "--tau-s=nan", "--tau-s=-0.5", "--tau-s=-inf", "--plds=3"],
)  # fmt: skip
def test_cli_refuses_a_bad_option_with_status_2_naming_it(
    option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], web: Web
) -> None:
    """These used to run (``--top -1`` slices off the last PLD, NaN taus break no gap) or,
    for ``--plds`` overriding the log header, end in a traceback."""
    log = _log(tmp_path, web, ["5.0", "6.0"])
    with pytest.raises(SystemExit) as stopped:
        main([str(log), "--json", option])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    name, _, value = option.partition("=")
    assert name.lstrip("-") in err and value in err, err


def test_cli_json_is_strict_and_skips_non_finite_times(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], web: Web
) -> None:
    """A NaN or infinite start (damage: the server writes none) is skipped and counted; it
    used to sort anywhere and make ``duration_s`` NaN, printed as ``NaN`` (not JSON)."""
    log = _log(tmp_path, web, ["nan", "5.0", "inf", "6.0", "-inf", "7.5"])
    assert main([str(log), "--json"]) == 0
    out = _strict(capsys.readouterr().out)
    assert out["requests"] == 3 and out["skipped_lines"] == 3
    assert out["duration_s"] == 2.5 and out["min_gap_per_host_s"] == 1.0
    assert main([str(log)]) == 0
    assert "malformed log lines skipped" in capsys.readouterr().out


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_cli_json_prints_an_overflowing_number_as_null(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], web: Web
) -> None:
    """Finite but absurd starts overflow the span to inf: null, never ``Infinity``."""
    log = _log(tmp_path, web, ["-1e308", "1e308"])
    assert main([str(log), "--json"]) == 0
    out = _strict(capsys.readouterr().out)
    assert out["requests"] == 2 and out["duration_s"] is None


def test_a_line_with_bytes_that_are_not_utf8_is_skipped_and_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], web: Web
) -> None:
    """The server writes UTF-8 only; a damaged byte in a line's host was read as U+FFFD
    and counted as a request to a host of no web (found by a probe, 2026-11-27). A host
    written with Latin-1 characters, which the server can log, still counts."""
    log = _log(tmp_path, web, ["5.0", "6.0", "7.0"])
    lines = log.read_bytes().split(b"\n")
    ip, host = lines[2].split(b"\t")[1:3]
    lines[2] = lines[2].replace(host, host[:3] + b"\xff\xfe" + host[3:])
    lines.insert(3, b"6.5\t" + ip + b"\t" + "caf\u00e9.test".encode() + b"\t/\t404\t0\t0.001")
    log.write_bytes(b"\n".join(lines))
    assert main([str(log), "--json"]) == 0
    out = _strict(capsys.readouterr().out)
    assert out["requests"] == 3 and out["skipped_lines"] == 1


def test_requests_are_judged_as_the_server_served_them(web: Web) -> None:
    """A probe of 2026-11-29: the server resolves dot segments and serves ``host.`` as
    ``host``, but the judge read the raw log: ``/x/../private/3.html`` was no robots
    violation, ``/p/../p/2.html`` another page, ``WWW.X.`` another host, the target of
    a robots.txt redirect a page, and requests without a Host header one host across IPs."""
    dis = _legit(web, robots="disallow")  # Disallow: /private/
    ip = web.resolve(dis.name)
    other_ip = next(i for i in web.ips if i != ip)
    rows = [
        (0.0, ip, dis.name, "/robots.txt", 200),
        (3.0, ip, dis.name + ".", "/x/../private/3.html", 200),  # violation, host with a dot
        (6.0, ip, dis.name, "/p/../p/2.html", 200),
        (9.0, ip, dis.name, "/p/2.html", 200),  # a duplicate of the one above
        (12.0, ip, dis.name, "/robots-moved.txt", 200),  # robots, not a page
        (15.0, ip, dis.name + ".", "/robots-moved.txt", 200),
        (20.0, ip, "-", "/", 400),  # no Host header: the IP only
        (20.1, other_ip, "-", "/", 400),
    ]
    r = judge([LogRecord(1000 + s, i, h, p, st, 10) for s, i, h, p, st in rows], web,
              tau_h=2.0, tau_s=0.05)  # fmt: skip
    assert r["robots_violations"] == 1
    assert (r["pages"], r["duplicate_fetches"]) == (2, 1)
    assert (r["robots_fetches"], r["robots_hosts"]) == (1, 1)  # the redirect's target: hops
    assert r["hosts_fetched"] == 1 and r["broke_tau_h"] == 0
    assert r["without_host_header"] == 2 and r["misdirected_421"] == 0


def test_a_request_sent_while_its_host_answers_another_is_counted(web: Web) -> None:
    """Gaps between starts miss a request sent 3 s after one that took 30 s."""
    host = _legit(web)
    ip = web.resolve(host.name)
    rows = [(0.0, "/", 30.0), (3.0, "/p/1.html", 0.1), (6.0, "/p/2.html", 0.1),
            (30.0, "/p/3.html", 0.1), (33.0, "/p/4.html", 0.1)]  # fmt: skip
    records = [LogRecord(1000 + s, ip, host.name, p, 200, 10, d) for s, p, d in rows]
    r = judge(records, web, tau_h=2.0, tau_s=0.5)
    assert r["broke_tau_h"] == 0 and r["overlapping_per_host"] == 2
