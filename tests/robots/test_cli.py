"""``python -m scrapy_irl.robots``: the persisted robots.txt cache asked without Scrapy."""

from __future__ import annotations

import json
import time
from pathlib import Path

from scrapy_irl.hosts.records import RobotsKind, RobotsRecord
from scrapy_irl.hosts.store import HostStore
from scrapy_irl.robots.__main__ import main

RULES = b"User-agent: *\nDisallow: /private/\nCrawl-delay: 3\n\nUser-agent: mybot\nDisallow: /\n"


def make_store(path: Path) -> None:
    now = time.time()
    with HostStore(path) as store:
        store.put_robots("http://a.test", RobotsRecord(RobotsKind.RULES, 200, now, now, now + 3600, 0, RULES))
        store.put_robots("https://b.test:8443", RobotsRecord(RobotsKind.ALLOW_ALL, 404, now, now, now + 3600))
        store.put_robots("http://c.test", RobotsRecord(RobotsKind.DISALLOW_ALL, 503, now - 99, now - 99,
                                                       now - 1, 2))  # fmt: skip


def store_rules(path: Path, origin: str, body: bytes) -> None:
    """One fresh RULES record of ``origin`` in the store at ``path``."""
    now = time.time()
    with HostStore(path) as store:
        store.put_robots(origin, RobotsRecord(RobotsKind.RULES, 200, now, now, now + 3600, 0, body))


def run(capsys, *argv: str) -> tuple[int, list[str], str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out.splitlines(), out.err


def test_urls_are_judged_by_the_stored_rules(tmp_path: Path, capsys) -> None:
    make_store(tmp_path / "irl" / "hosts")  # a JOBDIR is accepted as well as the store
    code, lines, _ = run(capsys, str(tmp_path), "http://A.test/x", "http://a.test/private/y",
                         "https://b.test:8443/z", "http://c.test/", "http://d.test/", "nope",
                         "ftp://a.test/x")  # fmt: skip
    assert code == 1  # "nope" is not a URL: said in the status too (it was 0)
    assert lines[0] == ("http://A.test/x: allowed by http://a.test/robots.txt (rules, HTTP 200, "
                        "fresh, Crawl-delay 3 s)")  # fmt: skip
    assert lines[1].startswith("http://a.test/private/y: DISALLOWED by http://a.test/robots.txt")
    assert lines[2].startswith("https://b.test:8443/z: allowed by") and "allow all, HTTP 404" in lines[2]
    assert "DISALLOWED" in lines[3] and "expired (the crawl would fetch it again)" in lines[3]
    assert lines[4] == "http://d.test/: nothing cached for http://d.test (the crawl would fetch it)"
    assert lines[5] == "nope: not a URL with a host"
    # The crawl lets ftp: through unchecked; "nothing cached (the crawl would fetch it)"
    # was said before.
    assert lines[6] == ("ftp://a.test/x: not checked (the crawl obeys robots.txt for http "
                        "and https URLs only, and lets this one through)")
    code, lines, _ = run(capsys, str(tmp_path), "http://a.test/x", "ftp://a.test/x", "--json")
    assert code == 0 and json.loads(lines[1]) == {"url": "ftp://a.test/x", "origin": "ftp://a.test",
                                                  "checked": False}  # fmt: skip


def test_user_agent_json_and_list(tmp_path: Path, capsys) -> None:
    make_store(tmp_path)
    code, lines, _ = run(capsys, str(tmp_path), "http://a.test/x", "--user-agent", "mybot", "--json")
    info = json.loads(lines[0])
    assert code == 0 and info["allowed"] is False and info["kind"] == "rules" and info["fresh"]
    code, lines, _ = run(capsys, str(tmp_path), "--list")
    assert code == 0 and sorted(lines) == [
        "http://a.test: rules, HTTP 200, fresh",
        "http://c.test: disallow all, HTTP 503, expired",
        "https://b.test:8443: allow all, HTTP 404, fresh",
    ]


def test_a_missing_or_busy_store_is_a_clear_error(tmp_path: Path, capsys) -> None:
    code, _, err = run(capsys, str(tmp_path / "none"), "http://a.test/")
    assert code == 2 and "holds no host store" in err
    assert not (tmp_path / "none").exists()  # not created empty
    make_store(tmp_path)
    with HostStore(tmp_path):  # a crawl holding it
        code, _, err = run(capsys, str(tmp_path), "http://a.test/")
    assert code == 2 and "another crawl is using it" in err
    assert "to read it while the crawl runs, copy the directory" in err


def test_non_ascii_hosts_are_looked_up_as_the_crawl_stored_them(tmp_path: Path, capsys) -> None:
    # Scrapy's Request makes the host IDNA (https://xn--bcher-kva.de), so the crawl stores
    # that origin; the command looked up https://bücher.de and said nothing was cached.
    store_rules(tmp_path, "https://xn--bcher-kva.de", b"User-agent: *\nDisallow: /%C3%A4\n")
    code, lines, _ = run(capsys, str(tmp_path), "https://bücher.de/ä", "https://BÜCHER.de:443/b")
    assert code == 0
    assert lines[0].startswith("https://bücher.de/ä: DISALLOWED by https://xn--bcher-kva.de/robots.txt")
    assert lines[1].startswith("https://BÜCHER.de:443/b: allowed by https://xn--bcher-kva.de/robots.txt")


def test_a_damaged_store_is_an_error_message_not_a_traceback(tmp_path: Path, capsys) -> None:
    path = tmp_path / "hosts"
    now = time.time()
    with HostStore(path) as store:
        for i in range(3000):
            store.put_robots(f"http://h{i}.test", RobotsRecord(
                RobotsKind.RULES, 200, now, now, now + 3600, 0, b"User-agent: *\nDisallow: /%d\n" % i))
        store._db.compact_range()
    for table in path.glob("*.ldb"):  # one damaged block: --list used to end in plyvel's traceback
        data = bytearray(table.read_bytes())
        data[len(data) // 3 : len(data) // 3 + 8] = b"\xff" * 8
        table.write_bytes(bytes(data))
    code, _, err = run(capsys, str(path), "--list")
    assert code == 2 and err.startswith("error: host store") and "is corrupt" in err
    (path / "CURRENT").unlink()  # was "holds no host store", as if the directory were empty
    code, _, err = run(capsys, str(path), "--list")
    assert code == 2 and "is corrupt (its CURRENT file is missing" in err


def test_a_damaged_record_is_reported_as_damaged_not_as_nothing_cached(tmp_path: Path, capsys) -> None:
    # It printed "nothing cached ... (the crawl would fetch it)" and exited 0, while the
    # docs promise a damaged store is reported as such with exit status 2.
    make_store(tmp_path)
    with HostStore(tmp_path) as store:
        store._db.put(b"R" + b"http://a.test", b"\x00not a record")
    code, lines, err = run(capsys, str(tmp_path), "http://a.test/x", "https://b.test:8443/z")
    assert code == 2
    assert lines[0] == ("http://a.test/x: the record of http://a.test is damaged (dropped; "
                        "the crawl would fetch robots.txt again)")  # fmt: skip
    assert "allowed by" in lines[1]  # the sound records are still answered
    assert "is damaged: 1 robots.txt record(s) could not be read" in err
    with HostStore(tmp_path) as store:
        store._db.put(b"R" + b"http://a.test", b"\x00not a record")
    code, lines, err = run(capsys, str(tmp_path), "http://a.test/x", "http://a.test/y")
    assert code == 2 and all("is damaged" in line for line in lines)  # the 2nd URL too
    code, lines, err = run(capsys, str(tmp_path), "http://a.test/x")
    assert (code, err) == (0, "") and "nothing cached" in lines[0]  # dropped, as documented
    with HostStore(tmp_path) as store:
        store._db.put(b"R" + b"http://a.test", b"\x00not a record")
    code, lines, err = run(capsys, str(tmp_path), "--list", "--json")
    assert code == 2 and "is damaged" in err
    assert {"origin": "http://a.test", "damaged": True} in [json.loads(line) for line in lines]
    assert len(lines) == 3


def python_blocks(rst: Path) -> list[str]:
    """The ``::`` literal blocks of an .rst file that start with a Python import."""
    import textwrap

    blocks, lines = [], rst.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if not line.rstrip().endswith("::"):
            continue
        body = []
        for follow in lines[i + 1 :]:
            if follow.strip() and not follow.startswith(" "):
                break
            body.append(follow)
        code = textwrap.dedent("\n".join(body)).strip()
        if code.startswith(("import ", "from ")):
            blocks.append(code)
    return blocks


def test_the_python_example_of_the_docs_runs(tmp_path: Path, monkeypatch) -> None:
    # It used an undefined parse() and time without importing it.
    blocks = python_blocks(Path(__file__).resolve().parents[2] / "docs" / "robots.rst")
    assert len(blocks) == 1
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks[0], "docs/robots.rst", "exec"), {})  # noqa: S102
    assert (tmp_path / "job" / "irl" / "hosts" / "CURRENT").is_file()


def test_a_robots_txt_with_a_byte_order_mark_is_judged_as_the_crawl_judges_it(
    tmp_path: Path, capsys
) -> None:
    # decode("utf-8") kept the BOM glued to "User-agent": the group was lost and the
    # command said "allowed" where the crawl (Scrapy's decoding, BOM dropped) refused.
    now = time.time()
    body = b"\xef\xbb\xbfUser-agent: *\nDisallow: /private\n"
    with HostStore(tmp_path) as store:
        store.put_robots("http://a.test", RobotsRecord(RobotsKind.RULES, 200, now, now, now + 3600, 0, body))
    code, lines, _ = run(capsys, str(tmp_path), "http://a.test/private/x", "http://a.test/x")
    assert code == 0
    assert lines[0].startswith("http://a.test/private/x: DISALLOWED"), lines
    assert lines[1].startswith("http://a.test/x: allowed"), lines


def test_a_crawl_delay_the_crawl_refuses_is_flagged(tmp_path: Path, capsys) -> None:
    # "allowed" alone, for an origin whose Crawl-delay (a day) makes the crawl refuse
    # every URL of it (IRL_CRAWL_DELAY_OVER_MAX "skip"): a probe read it as fetchable.
    store_rules(tmp_path, "http://slow.test", b"User-agent: *\nCrawl-delay: 86400\n")
    code, lines, _ = run(capsys, str(tmp_path), "http://slow.test/x", "http://a.test/y")
    assert code == 0 and "Crawl-delay 86400 s); but its Crawl-delay is above --crawl-delay-max" in lines[0]
    code, lines, _ = run(capsys, str(tmp_path), "http://slow.test/x", "--crawl-delay-max", "100000", "--json")
    assert "crawl_delay_over_max" not in json.loads(lines[0])
    code, lines, _ = run(capsys, str(tmp_path), "http://slow.test/x", "--json")
    assert json.loads(lines[0])["crawl_delay_over_max"] is True


def test_ttl_shows_a_record_checked_longer_ago_expired(tmp_path: Path, capsys) -> None:
    """A crawl with a lowered IRL_ROBOTS_TTL fetches again a record checked longer ago
    (RobotsPolicy.within_limits); --ttl answers as that crawl would."""
    now = time.time()
    with HostStore(tmp_path) as store:
        store.put_robots("http://a.test", RobotsRecord(RobotsKind.RULES, 200, now - 600, now - 600,
                                                       now + 86000, 0, RULES))  # fmt: skip
    code, lines, _ = run(capsys, str(tmp_path), "http://a.test/x")
    assert code == 0 and ", fresh, " in lines[0]
    code, lines, _ = run(capsys, str(tmp_path), "http://a.test/x", "--ttl", "300")
    assert code == 0 and "expired (the crawl would fetch it again)" in lines[0]
    code, lines, _ = run(capsys, str(tmp_path), "--list", "--ttl", "300", "--json")
    assert json.loads(lines[0])["fresh"] is False
    code, lines, _ = run(capsys, str(tmp_path), "--list", "--ttl", "900")
    assert lines == ["http://a.test: rules, HTTP 200, fresh"]
