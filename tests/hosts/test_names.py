"""The plain-name fast path of ``refused_by_twisted`` agrees with Twisted's own parse."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_irl.hosts.names import _refused, plain_netloc, refused_by_twisted

ALPHABET = "abcxyz0189-._ABZ\u212a\u017f%@"  # the Kelvin sign and long s fold to k and s


@settings(max_examples=3000, deadline=None)
@given(st.text(ALPHABET, min_size=1, max_size=24),
       st.one_of(st.none(), st.integers(0, 99999)), st.sampled_from(["http", "https"]))  # fmt: skip
def test_a_name_the_fast_path_passes_is_one_twisted_takes(name: str, port: int | None,
                                                          scheme: str) -> None:  # fmt: skip
    netloc = name if port is None else f"{name}:{port}"
    if plain_netloc(netloc):
        assert not _refused(f"{scheme}://{netloc}/"), netloc
    assert refused_by_twisted(scheme, netloc) == _refused(f"{scheme}://{netloc}/")


def test_the_fast_path_covers_ordinary_names_and_leaves_the_rest_to_twisted() -> None:
    for netloc in ("www.example.com", "WWW.Example.COM", "a-b.c0.test:8080", "127.0.0.1",
                   "x" * 63 + ".test", "localhost"):  # fmt: skip
        assert plain_netloc(netloc), netloc
    for netloc in ("a_b.test", "ab--cd.test", "xn--nxasmq6b.test", "a..b", "-a.test",
                   "a-.test", "a.test.", "u@a.test", "a%41.test", "x" * 64 + ".test",
                   "\u212aelvin.test", "\u017fite.test", ".".join(["a" * 60] * 5)):  # fmt: skip
        assert not plain_netloc(netloc), netloc
    # left to Twisted, which refuses these before sending a byte
    assert refused_by_twisted("http", "u@a.test") and refused_by_twisted("http", "a%41.test")


def test_random_label_soup_agrees_with_twisted() -> None:
    rng = random.Random(7)
    for _ in range(3000):
        netloc = "".join(rng.choice("abc019-.AZ") for _ in range(rng.randrange(1, 16)))
        assert refused_by_twisted("http", netloc) == _refused(f"http://{netloc}/"), netloc


def _agent_refuses(netloc: str) -> bool:
    """What Twisted's Agent (Scrapy's HTTP/1.1 handler) does with the URL: the endpoint it
    builds for it, with Scrapy's IDNA fallbacks installed, marks a bad host name."""
    from twisted.internet.testing import MemoryReactorClock
    from twisted.web.client import URI, _StandardEndpointFactory

    from scrapy_irl.hosts.names import _as_scrapys_handler_sees_names

    _as_scrapys_handler_sees_names()
    factory = _StandardEndpointFactory(MemoryReactorClock(), None, None, None)
    return bool(factory.endpointForURI(URI.fromBytes(f"http://{netloc}/".encode("ascii")))._badHostname)


def test_the_verdict_is_the_agents_own() -> None:
    """Judged on the bytes of the name, ACE labels IDNA 2008 will not decode (``xn--zz``,
    ``xn--``) were taken as refused, while the Agent, which passes the name as text, sends
    them: a probe's server got 25 requests for two such hosts, none for robots.txt, and
    the unscheduled burst held a shared IP's other hosts up to 19 s (2026-11-29)."""
    for netloc in ("xn--zz.test:8001", "xn--.test", "a.xn--zz", "xn--bcher-kva.de",
                   "u@a.test", "a%41.test", "a b.test", "a_b.test", "[::1]:80", "a..b",
                   "ok.test"):  # fmt: skip
        assert refused_by_twisted("http", netloc) == _agent_refuses(netloc), netloc
    assert not refused_by_twisted("http", "xn--zz.test:8001")
    rng = random.Random(11)
    for _ in range(2000):
        netloc = "".join(rng.choice("abx019-.%@_n") for _ in range(rng.randrange(1, 14)))
        assert refused_by_twisted("http", netloc) == _agent_refuses(netloc), netloc
