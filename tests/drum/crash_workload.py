"""A DRUM workload that a crash test runs in a child process and kills with SIGKILL.

The tuple sequence of a round is a pure function of the round number, so the parent can
regenerate it. The child acts as a consumer that logs every delivered batch as one line
(``epoch bucket start aux:unique:value ...``) and, after each explicit write-out, records how
many tuples it has submitted (a lower bound of what is durable) in ``marker-<round>``.
"""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

import numpy as np

from scrapy_irl.drum import CHECK, CHECK_UPDATE, UPDATE, Drum, DrumBatch

BUCKETS = 4
KEY_SPACE = 300
MAX_TUPLES = 10_000_000  # never reached: the parent kills the child within 1.5 s


def key_for(n: int) -> int:
    return (n * 0x9E3779B97F4A7C15 + 12345) & ((1 << 64) - 1)


def tuples(round_no: int):
    """The deterministic (aux, key, op) sequence of a round; every value is 1 (counting)."""
    rng = random.Random(round_no)
    for i in range(MAX_TUPLES):
        key = key_for(rng.randrange(KEY_SPACE))
        op = rng.choice((CHECK, UPDATE, CHECK_UPDATE, CHECK_UPDATE))
        yield f"{round_no}:{i}".encode(), key, op


class Consumer:
    """Appends each delivered batch as one line (a single write) to ``results.log``."""

    def __init__(self, directory: Path) -> None:
        self.fd = os.open(directory / "results.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT)

    def __call__(self, batch: DrumBatch) -> None:
        items = " ".join(
            f"{batch.aux(i).decode()}:{int(batch.unique[i])}:{int(batch.values[i])}"
            for i in range(len(batch))
        )
        os.write(self.fd, f"{batch.epoch} {batch.bucket} {batch.start} {items}\n".encode())


def open_store(directory: Path, consumer: Consumer) -> Drum:
    return Drum(
        directory / "store",
        buckets=BUCKETS,
        value_dtype="<u4",
        buffer_bytes=200,
        bucket_bytes=3000,
        merge_chunk_bytes=256,
        merge=lambda old, new: old + new,
        on_results=consumer,
        fsync=False,
    )


def run(directory: Path, round_no: int, seconds: float) -> None:
    drum = open_store(directory, Consumer(directory))
    drum.deliver()
    marker = directory / f"marker-{round_no}"
    one = (1).to_bytes(4, "little")
    rng = random.Random(-round_no)
    deadline = time.monotonic() + seconds
    for count, (aux, key, op) in enumerate(tuples(round_no), 1):
        if op == CHECK:
            drum.check(key, aux)
        elif op == UPDATE:
            drum.update(key, one, aux)
        else:
            drum.check_update(key, one, aux)
        roll = rng.random()
        if roll < 0.02:
            drum.write_out()
            tmp = marker.with_suffix(".tmp")
            tmp.write_text(str(count))
            os.replace(tmp, marker)
        elif roll < 0.025:
            drum.merge()
        if time.monotonic() > deadline:
            break
    np.zeros(1)  # keep numpy imported for the store's use in the child
    drum.close()


if __name__ == "__main__":
    run(Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]))
