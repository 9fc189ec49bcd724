"""URLseen's batch path: check+update with aux; only never-seen URLs come back."""

from __future__ import annotations

from hashlib import sha1

import numpy as np
import pytest

from scrapy_irl.urlseen import URLSeen, hashed_key_of, key_of


def fp(url: str) -> bytes:
    return sha1(url.encode()).digest()


def test_batch_reports_each_new_url_once_in_fifo_order(tmp_path):
    got: list[tuple[int, list[bytes]]] = []
    seen = URLSeen(tmp_path, buckets=1, on_unique=lambda epoch, aux: got.append((epoch, aux)))
    try:
        for url in ["a", "b", "a", "c", "b"]:
            seen.submit(fp(url), url.encode())
        assert seen.merge() == 5
        assert got == [(0, [b"a", b"b", b"c"])]
        seen.submit(fp("a"), b"a")
        seen.submit(fp("d"), b"d")
        seen.merge()
        assert got[-1] == (1, [b"d"])
        assert seen.seen(fp("d")) and not seen.seen(fp("e"))  # sync and batch share the set
    finally:
        seen.close()


def test_submit_many_with_precomputed_keys(tmp_path):
    got: list[bytes] = []
    seen = URLSeen(tmp_path, on_unique=lambda epoch, aux: got.extend(aux))
    try:
        urls = [f"u{i % 300}" for i in range(1000)]
        keys = np.array([key_of(fp(u)) for u in urls], dtype=np.uint64)
        seen.submit_many(keys, [u.encode() for u in urls])
        seen.merge()
        assert sorted(got) == sorted({u.encode() for u in urls})
        assert len(seen) == 300
    finally:
        seen.close()


def test_key_of_needs_eight_bytes():
    assert key_of(b"\x00" * 7 + b"\x01" + b"rest") == 1
    with pytest.raises(ValueError):
        key_of(b"short")


def test_key_of_is_the_big_endian_prefix():
    from scrapy_irl.urlseen import key_of, unpack_key

    fingerprint = bytes(range(1, 21))
    assert key_of(fingerprint) == int.from_bytes(fingerprint[:8], "big")
    assert unpack_key(fingerprint)[0] == key_of(fingerprint)


def test_a_projects_hex_string_fingerprints_are_keyed_as_their_bytes():
    # Fingerprinters written for Scrapy < 2.7 (request_fingerprint()) return hex strings,
    # which Scrapy's own dupefilter keeps in its set; URLseen raised "Strings must be
    # encoded before hashing" and the crawl shut down at its first request.
    assert hashed_key_of("0a1b2c") == hashed_key_of(b"0a1b2c")
    assert hashed_key_of(bytearray(b"xyz")) == hashed_key_of(b"xyz")


def test_a_fingerprint_of_another_type_is_refused_by_name():
    with pytest.raises(TypeError, match="REQUEST_FINGERPRINTER_CLASS.*must return bytes.*int"):
        hashed_key_of(42)  # type: ignore[arg-type]
