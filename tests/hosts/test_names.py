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
