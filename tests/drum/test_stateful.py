"""Hypothesis state machine: DRUM against a dict model.

Random single tuples and mixed batches of all three operations, write-outs, merges and
reopens, on tiny buffers and buckets so merges (automatic and explicit) happen often.
Every merge's delivered results and the set of stored keys are compared with the model.
"""

from __future__ import annotations

import shutil
import tempfile

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from scrapy_irl.drum import CHECK, CHECK_UPDATE, UPDATE, Drum, DrumBatch

KEYS = [0, 1, 2, (1 << 64) - 1, 1 << 63, (1 << 62) + 5, 3 << 60, (5 << 59) + 1] + [
    (i * 0x9E3779B97F4A7C15) & ((1 << 64) - 1) for i in range(1, 17)
]
OPS = st.sampled_from([CHECK, UPDATE, CHECK_UPDATE])
VALUES = st.integers(0, 1000)
TUPLE = st.tuples(st.sampled_from(KEYS), OPS, VALUES)


class DrumMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="drum-stateful-")
        self.model: dict[int, int] = {}  # merged state: key -> value
        self.pending: list[tuple[bytes, int, int, int]] = []  # aux, key, op, value
        self.delivered: dict[bytes, tuple[bool, int]] = {}
        self.expected: dict[bytes, tuple[bool, int]] = {}
        self.counter = 0
        self.buckets = 4
        self.drum = self._open()

    def _open(self) -> Drum:
        return Drum(
            self.dir,
            buckets=self.buckets,
            value_dtype="<u4",
            buffer_bytes=40,
            bucket_bytes=150,
            merge_chunk_bytes=64,
            merge=lambda old, new: old + new,
            sync_index=True,
            on_results=self._on_results,
            fsync=False,
        )

    def _on_results(self, batch: DrumBatch) -> None:
        for i in range(len(batch)):
            aux = batch.aux(i)
            assert aux not in self.delivered, f"{aux!r} delivered twice"
            self.delivered[aux] = (bool(batch.unique[i]), int(batch.values[i]))
        self._settle()

    def _settle(self) -> None:
        """Apply the model to every pending tuple that DRUM has now merged (FIFO)."""
        still = []
        for aux, key, op, value in self.pending:
            if aux not in self.delivered:
                still.append((aux, key, op, value))
                continue
            before = self.model.get(key)
            self.expected[aux] = (before is None, before or 0)
            if op & UPDATE:
                self.model[key] = value if before is None else before + value
        self.pending = still

    def _next_aux(self) -> bytes:
        self.counter += 1
        return str(self.counter).encode()

    @rule(item=TUPLE)
    def single(self, item: tuple[int, int, int]) -> None:
        key, op, value = item
        aux = self._next_aux()
        self.pending.append((aux, key, op, value))
        raw = value.to_bytes(4, "little")
        if op == CHECK:
            self.drum.check(key, aux)
        elif op == UPDATE:
            self.drum.update(key, raw, aux)
        else:
            self.drum.check_update(key, raw, aux)

    @rule(items=st.lists(TUPLE, min_size=1, max_size=40))
    def mixed_batch(self, items: list[tuple[int, int, int]]) -> None:
        auxes = [self._next_aux() for _ in items]
        for aux, (key, op, value) in zip(auxes, items):
            self.pending.append((aux, key, op, value))
        self.drum.submit(
            np.array([k for k, _, _ in items], dtype=np.uint64),
            np.array([o for _, o, _ in items], dtype=np.uint8),
            np.array([v for _, _, v in items], dtype="<u4"),
            auxes,
        )

    @rule()
    def write_out(self) -> None:
        self.drum.write_out()

    @rule()
    def merge(self) -> None:
        self.drum.merge()
        assert not self.pending, "a merge left tuples unmerged"

    @rule()
    def reopen(self) -> None:
        self.drum.close()
        self.drum = self._open()

    @rule(key=st.sampled_from(KEYS))
    def sync_lookup(self, key: int) -> None:
        will_exist = key in self.model or any(
            k == key and op & UPDATE for _, k, op, _ in self.pending
        )
        assert self.drum.contains(key) == will_exist

    @invariant()
    def results_match_model(self) -> None:
        for aux, want in self.expected.items():
            assert self.delivered[aux] == want, aux
        assert len(self.drum) == len(self.model)

    @invariant()
    def pending_count_matches(self) -> None:
        assert self.drum.pending_tuples == len(self.pending)

    def teardown(self) -> None:
        self.drum.close()
        shutil.rmtree(self.dir, ignore_errors=True)


DrumMachine.TestCase.settings = settings(
    max_examples=200,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestDrumStateful = DrumMachine.TestCase
