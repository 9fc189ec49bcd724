"""Kill -9 a DRUM workload at random moments, reopen, and check it against a model.

After every kill the next round reopens the same store (recovery runs) and goes on with
new tuples. At the end the parent reopens it once more, merges, and checks that:

* no tuple's result was delivered twice (a consumer that dedupes by (epoch, bucket, start) sees
  each tuple once) and every tuple written out before its round's marker was merged;
* within a round, the merged tuples of each bucket are a prefix of that bucket's tuples
  (only an unwritten tail may be lost);
* replaying exactly the merged tuples through a dict model gives the same unique flags,
  the same values before each tuple, and the same final counters (values are added, so
  a tuple merged twice would show up as a wrong count).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from scrapy_irl.drum import UPDATE
from tests.drum import crash_workload as workload

ROUNDS = 12


def _read_results(path: Path) -> dict[bytes, tuple[bool, int]]:
    delivered: dict[bytes, tuple[bool, int]] = {}
    seen_batches: set[tuple[int, int, int]] = set()
    if not path.exists():
        return delivered
    for line in path.read_bytes().split(b"\n"):
        parts = line.split(b" ")
        if len(parts) < 4:
            continue  # empty or torn last line
        batch = (int(parts[0]), int(parts[1]), int(parts[2]))
        if batch in seen_batches:
            continue  # redelivery of a batch applied before the crash
        seen_batches.add(batch)
        for item in parts[3:]:
            aux_text, unique, value = item.rsplit(b":", 2)
            assert aux_text not in delivered, f"{aux_text!r} delivered in two batches"
            delivered[aux_text] = (unique == b"1", int(value))
    return delivered


@pytest.mark.slow
def test_kill9_at_random_points_then_resume(tmp_path: Path) -> None:
    rng = random.Random(2024)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for round_no in range(ROUNDS):
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.drum.crash_workload", str(tmp_path), str(round_no), "20"],
            env=env,
            cwd=Path(__file__).resolve().parents[2],
        )
        time.sleep(rng.uniform(0.4, 1.5))
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL, "the workload ended before the kill"

    consumer = workload.Consumer(tmp_path)
    drum = workload.open_store(tmp_path, consumer)
    drum.merge()
    drum.close()
    delivered = _read_results(tmp_path / "results.log")
    assert delivered, "nothing was ever merged"

    last_merged: dict[int, int] = defaultdict(lambda: -1)
    for aux in delivered:
        round_text, index_text = aux.split(b":")
        last_merged[int(round_text)] = max(last_merged[int(round_text)], int(index_text))

    model: dict[int, int] = {}
    total_merged = 0
    for round_no in range(ROUNDS):
        marker = tmp_path / f"marker-{round_no}"
        durable = int(marker.read_text()) if marker.exists() else 0
        scan_until = max(durable, last_merged[round_no] + 1)
        per_bucket_gap: dict[int, bool] = defaultdict(bool)
        for index, (aux, key, op) in enumerate(workload.tuples(round_no)):
            if index >= scan_until:
                break
            bucket = key >> (64 - 2)
            result = delivered.get(aux)
            if result is None:
                assert index >= durable, f"{aux!r} was written out (marker {durable}) but lost"
                per_bucket_gap[bucket] = True
                continue
            assert not per_bucket_gap[bucket], f"{aux!r} merged after a lost tuple of its bucket"
            before = model.get(key)
            assert result == (before is None, before or 0), (aux, result, before)
            if op & UPDATE:
                model[key] = (before or 0) + 1
            total_merged += 1
    assert total_merged == len(delivered), "results delivered for tuples never submitted"

    check = workload.open_store(tmp_path, consumer)
    try:
        for key in model:
            check.check(key, b"final")
        final: dict[int, int] = {}
        check.on_results = lambda batch: final.update(
            (int(k), int(v)) for k, v in zip(batch.keys, batch.values)
        )
        check.merge()
    finally:
        check.close()
    assert final == model
