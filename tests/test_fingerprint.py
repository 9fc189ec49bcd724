"""The fingerprint shortcut gives Scrapy's bytes exactly, and is used only where it may be."""

from __future__ import annotations

import logging

from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scrapy import Request
from scrapy.utils.request import RequestFingerprinter, fingerprint
from scrapy.utils.test import get_crawler

from scrapy_irl.fingerprint import (
    _agrees,
    _shortcut_for,
    canonical_url_fingerprint,
    default_fingerprint,
    fingerprint_function,
    fingerprint_function_for,
    is_stock_fingerprinter,
)

# Any character a URL, a path, a query or a fragment may carry, escaped or not.
_url_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    max_size=30,
)


@st.composite
def requests(draw: st.DrawFn) -> Request:
    scheme = draw(st.sampled_from(["http", "https", "HTTP"]))
    host = draw(st.sampled_from(["a.example", "WWW.Example.COM", "xn--bcher-kva.example", "127.0.0.1:8080", "b\u00fccher.example"]))
    path = draw(_url_text)
    query = draw(st.lists(st.tuples(_url_text, _url_text), max_size=4))
    fragment = draw(st.one_of(st.none(), _url_text))
    url = f"{scheme}://{host}/{path}"
    if query:
        url += "?" + "&".join(f"{k}={v}" for k, v in query)
    if fragment is not None:
        url += "#" + fragment
    method = draw(st.sampled_from(["GET", "POST", "put", "HEAD", "M\u00e9THOD"]))
    body = draw(st.one_of(st.just(b""), st.binary(max_size=40)))
    meta = draw(st.sampled_from([{}, {"verbatim_url": True}, {"verbatim_url": False}]))
    try:
        return Request(url, method=method, body=body, meta=meta)
    except ValueError:
        assume(False)
        raise


@settings(max_examples=400, deadline=None)
@given(requests())
def test_shortcut_gives_scrapys_fingerprint_bytes(request: Request) -> None:
    # Each side gets its own Request object: Scrapy's function memoises per object.
    assert default_fingerprint(request.replace()) == fingerprint(request.replace())


def test_known_cases_match_and_differ_where_scrapy_does() -> None:
    same = ["http://a.example/x?b=2&a=1", "http://a.example/x?a=1&b=2#f", "HTTP://A.EXAMPLE/x?a=1&b=2"]
    fps = {default_fingerprint(Request(u)) for u in same}
    assert fps == {fingerprint(Request(same[0]))}
    assert default_fingerprint(Request(same[0], method="POST")) != fingerprint(Request(same[0]))
    verbatim = Request(same[0], meta={"verbatim_url": True})
    assert default_fingerprint(verbatim) == fingerprint(verbatim.replace())
    assert default_fingerprint(verbatim) != fingerprint(Request(same[0]))


def test_used_only_for_scrapys_own_fingerprinter() -> None:
    stock = RequestFingerprinter()
    assert is_stock_fingerprinter(stock)
    assert fingerprint_function(stock) is default_fingerprint
    assert fingerprint_function(stock, fast=False) == stock.fingerprint

    class Custom(RequestFingerprinter):
        def fingerprint(self, request: Request) -> bytes:
            return b"c" * 20

    custom = Custom()
    assert not is_stock_fingerprinter(custom)
    assert fingerprint_function(custom) == custom.fingerprint

    class Unrelated:
        def fingerprint(self, request: Request) -> bytes:
            return b"u" * 20

    unrelated = Unrelated()
    assert fingerprint_function(unrelated) == unrelated.fingerprint  # type: ignore[arg-type]

    patched = RequestFingerprinter()
    patched._fingerprint = lambda request: b"p" * 20  # type: ignore[assignment]
    assert not is_stock_fingerprinter(patched)


def test_disagreement_at_start_up_falls_back_with_a_warning(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="scrapy_irl.fingerprint"):
        assert not _agrees(lambda request: b"x" * 20, default_fingerprint)
    assert "disagrees" in caplog.text
    assert _agrees(fingerprint, default_fingerprint)
    # The verbatim_url probe tells the two variants apart.
    assert not _agrees(fingerprint, canonical_url_fingerprint)


def test_variant_follows_the_installed_scrapys_verbatim_url_handling() -> None:
    assert _shortcut_for(fingerprint) is default_fingerprint  # this Scrapy honours it

    def ignoring_verbatim(request: Request) -> bytes:  # as older Scrapy releases do
        return fingerprint(request.replace(meta={}))

    assert _shortcut_for(ignoring_verbatim) is canonical_url_fingerprint
    assert _agrees(ignoring_verbatim, canonical_url_fingerprint)


def test_the_choice_is_logged(caplog) -> None:
    with caplog.at_level(logging.INFO, logger="scrapy_irl.fingerprint"):
        fingerprint_function(RequestFingerprinter())
    assert "scrapy_irl.fingerprint.default_fingerprint, byte-identical" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="scrapy_irl.fingerprint"):
        fingerprint_function(RequestFingerprinter(), fast=False)
    assert caplog.text == ""


def test_settings_switch_it_off() -> None:
    assert fingerprint_function_for(get_crawler(settings_dict={})) is default_fingerprint
    off = get_crawler(settings_dict={"IRL_FAST_FINGERPRINT": False})
    assert fingerprint_function_for(off) == off.request_fingerprinter.fingerprint
    # Scrapy's HTTP cache fingerprints the same Request again and relies on the memo.
    cached = get_crawler(settings_dict={"HTTPCACHE_ENABLED": True})
    assert fingerprint_function_for(cached) == cached.request_fingerprinter.fingerprint
