"""Trap paths: looping relative links and runaway depth are refused before URLseen."""

from __future__ import annotations

import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from scrapy_irl.scheduler.traps import (
    MAX_GROUP,
    REPEATED_SEGMENTS,
    TOO_MANY_SEGMENTS,
    PathTrapRule,
    repeats_in_a_row,
)
from tests.crawl_runner import crawl_in_subprocess as crawl
from tests.loopback_site import LoopbackServer, send_body, serving

RULE = PathTrapRule(max_segments=20, max_repeats=2)


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "",
        "/p/1.html",
        "/2024/11/11/",  # a date repeats a part twice: allowed
        "/a/a/",
        "/a/b/a/b/",
        "/docs/v1/api/v1/api/x.html",
        "/x/y/z/x/y/z/",
        "/" + "/".join(f"d{i}" for i in range(20)),  # 20 distinct segments: the limit
        "/a//////b",  # empty segments do not count
    ],
)
def test_ordinary_paths_pass(path):
    assert RULE(path) is None


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("/a/a/a/", REPEATED_SEGMENTS),
        ("/loop/more/more/more/page.html", REPEATED_SEGMENTS),
        ("/a/b/a/b/a/b/", REPEATED_SEGMENTS),
        ("/s/x/y/z/x/y/z/x/y/z/t", REPEATED_SEGMENTS),
        ("/" + "/".join(f"d{i}" for i in range(21)), TOO_MANY_SEGMENTS),
    ],
)
def test_trap_paths_are_named(path, why):
    assert RULE(path) == why


def test_limits_are_settings_and_zero_turns_them_off():
    assert PathTrapRule(max_repeats=3)("/a/a/a/") is None
    assert PathTrapRule(max_repeats=3)("/a/a/a/a/") == REPEATED_SEGMENTS
    assert PathTrapRule(max_segments=3)("/a/b/c/d") == TOO_MANY_SEGMENTS
    off = PathTrapRule(max_segments=0, max_repeats=0)
    assert not off.active
    assert off("/a/a/a/a/a/" + "x/" * 500) is None


@pytest.mark.parametrize(("segments", "repeats"), [(-1, 2), (20, -1), (20, 1)])
def test_bad_limits_are_refused(segments, repeats):
    with pytest.raises(ValueError, match="IRL_TRAP_MAX"):
        PathTrapRule(max_segments=segments, max_repeats=repeats)


def test_repetition_against_a_brute_force_definition():
    """Every path over a 3-letter alphabet up to length 7, against the definition itself."""
    import itertools

    def brute(segments, limit):
        n = len(segments)
        for group in range(1, MAX_GROUP + 1):
            for start in range(n):
                block = segments[start : start + group]
                if len(block) < group:
                    break
                times = 1
                while (
                    segments[start + times * group : start + (times + 1) * group]
                    == block
                ):
                    times += 1
                if times > limit:
                    return True
        return False

    checked = 0
    for length in range(8):
        for word in itertools.product("abc", repeat=length):
            for limit in (2, 3):
                assert repeats_in_a_row(list(word), limit) == brute(
                    list(word), limit
                ), word
                checked += 1
    assert checked == 2 * sum(3**k for k in range(8))


class _LoopHandler(BaseHTTPRequestHandler):
    """Answers every path with a page linking relatively to ``more/`` and ``n<depth>/``.

    Without a trap rule the crawl never ends: each page makes two new, deeper URLs.
    """

    server: _LoopServer

    def do_GET(self) -> None:
        with self.server.lock:
            self.server.hits[self.path] += 1
        depth = self.path.count("/")
        send_body(self, f'<a href="more/">more</a> <a href="n{depth}/">next</a>'.encode())

    def log_message(self, format: str, *args: object) -> None:
        pass


class _LoopServer(LoopbackServer):
    def __init__(self) -> None:
        super().__init__(_LoopHandler)
        self.hits: Counter[str] = Counter()
        self.lock = threading.Lock()


@pytest.mark.slow
def test_a_looping_site_is_crawled_to_its_limits_and_the_crawl_ends(tmp_path: Path):
    with serving(_LoopServer()) as server:
        stats, _ = crawl({
            "start": [f"{server.base_url}/loop/"],
            "settings": {
                "ADDONS": {"scrapy_irl.Addon": 0}, "IRL_HOSTS_DIR": str(tmp_path / "hosts"),
                "IRL_HOST_DELAY": 0.0, "IRL_HOST_DELAY_MIN": 0.0, "IRL_IP_DELAY": 0.0,
                "IRL_IP_DELAY_MIN": 0.0, "IRL_POLITENESS_MARGIN": 0.0,
                "IRL_TRAP_MAX_PATH_SEGMENTS": 8, "CLOSESPIDER_TIMEOUT": 90,
            },
        })  # fmt: skip
    assert stats["finish_reason"] == "finished"  # ran dry, not stopped by the timeout
    paths = list(server.hits)
    assert max(p.strip("/").count("/") + 1 for p in paths) == 8  # the segment limit
    assert not any(
        RULE(p) == REPEATED_SEGMENTS for p in paths
    )  # never /more/more/more/
    assert "/loop/more/more/" in paths  # twice in a row is allowed
    too_many = stats.get("irl_sched/trap_dropped/too_many_segments", 0)
    repeated = stats.get("irl_sched/trap_dropped/repeated_segments", 0)
    assert too_many > 0 and repeated > 0
    # Pages have distinct children, so every link is new: the start URL plus two links per
    # fetched page were each either fetched once or refused, none lost, none twice.
    assert all(count == 1 for count in server.hits.values())
    assert len(paths) + too_many + repeated == 1 + 2 * len(paths)
