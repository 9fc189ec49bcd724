"""benchmarks/dupefilter.py: the interleaved measurement compares like with like."""

from __future__ import annotations

from benchmarks.dupefilter import interleaved, stream


def test_interleaved_modes_see_the_same_stream_and_agree():
    n = 3_000
    per_request, unique = interleaved(n, chunk=500)
    assert set(per_request) == {"null", "stock", "drum-sync", "drum-scrapyfp"}
    assert all(seconds > 0 for seconds in per_request.values())
    expected = len(set(stream(n)))  # the stream's distinct URLs, as every filter must count
    assert unique == {"stock": expected, "drum-sync": expected, "drum-scrapyfp": expected}
    assert 0 < expected < n  # the stream does repeat URLs
