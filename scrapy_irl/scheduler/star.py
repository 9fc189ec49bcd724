"""STAR: per-PLD budgets from PLD in-degree, kept in DRUM (thesis chapter VI, Fig. 4).

Two DRUM stores, so RAM does not grow with the number of PLDs:

* ``pld_edges``: one key per distinct (source PLD, target PLD) link; ``check+update``
  tells whether a link is new. Self-links are ignored.
* ``pld_indegree`` (PLDindegree): per PLD a uint64 packing d_x (high 32 bits, distinct
  linking PLDs) and P_x (low 32 bits, URLs admitted to BEAST), with "add" as the update
  merge. A new edge adds ``1 << 32``; a unique URL does ``check+update`` adding 1 and gets
  the value *before* it: (d_x, P_x), hence B_x = F(d_x), on its way to BEAST.

A bounded LRU of recent in-degrees answers ``budget(host)`` synchronously (for tau_h);
PLDs not in it get B_0 until they are seen again, and ``known_budget`` tells a miss
apart, so a host or a Q_F re-read keeps the budget it had rather than drop to B_0. A bounded table tracks the PLDs with
the largest in-degree for the close-time report.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from scrapy_irl.drum import Drum
from scrapy_irl.scheduler.budget import BudgetPolicy
from scrapy_irl.scheduler.pld import pld_of

DEGREE_ONE = np.uint64(1 << 32)
ADMIT_ONE = np.uint64(1)
_LOW = (1 << 32) - 1
_ADMIT = b"A"
_EDGE = b"E"
#: The key of pld_indegree's epochs in the consumer's ``applied`` ledger.
APPLIED_KEY = "star/pld_indegree"

Admitted = Callable[[bytes, int, int], None]  # record, B_x, P_x


def hash64(text: str) -> int:
    return int.from_bytes(
        hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big"
    )


def _add(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    return old + new


class Star:
    """The PLD graph, in-degrees, budgets and admitted counts."""

    def __init__(
        self,
        path: Path,
        policy: BudgetPolicy,
        on_admitted: Admitted,
        *,
        drum_options: dict[str, Any] | None = None,
        cache_entries: int = 100_000,
        top_entries: int = 1000,
        on_durable: Callable[[], None] | None = None,
        applied: dict[str, int] | None = None,
    ) -> None:
        options = {
            "buckets": 4,
            "buffer_bytes": 32 * 1024,
            "bucket_bytes": 256 * 1024,
            **(drum_options or {}),
        }
        self.policy = policy
        self.on_admitted = on_admitted
        self.cache_entries = cache_entries
        self.top_entries = top_entries
        self._degree: OrderedDict[str, int] = OrderedDict()
        self._top: dict[str, list[int]] = {}  # pld -> [d_x, P_x]
        self.links_seen = 0
        self.new_edges = 0
        self.admitted = 0
        self.redelivered_skipped = 0
        # pld_indegree's last result epoch whose admissions ``on_durable`` made durable,
        # kept by the consumer in the same commit as the admitted records (BEAST's
        # STATE). A kill after that commit and before pld_indegree's acknowledgement makes
        # it deliver the epoch again at the next start: its admissions are then skipped,
        # where they used to be queued a second time (each URL of the epoch fetched twice).
        self._applied = applied if applied is not None else {}
        self._on_durable = on_durable
        self._delivered_epoch: int | None = None
        # Acknowledging a delivered epoch deletes its results, so what they produced must
        # be on disk first: new edges' degree updates in pld_indegree's bucket files, and
        # admitted URLs in BEAST (``on_durable``, BEAST's save).
        self.edges = Drum(path / "pld_edges", store_aux=True, on_results=self._on_edges,
                          before_ack=self._edges_durable, **options)  # fmt: skip
        self.plds = Drum(
            path / "pld_indegree",
            value_dtype="<u8",
            merge=_add,
            store_aux=True,
            on_results=self._on_plds,
            before_ack=self._plds_durable,
            **options,
        )

    # -- input -----------------------------------------------------------------------------
    def record_link(self, src_host: str, dst_host: str) -> None:
        """A link from a page on ``src_host`` to a URL on ``dst_host`` was seen."""
        src, dst = pld_of(src_host), pld_of(dst_host)
        self.links_seen += 1
        if src != dst:
            self.edges.check_update(
                hash64(f"{src}\x00{dst}"), None, dst.encode("utf-8")
            )

    def admit(self, record: bytes, host: str) -> None:
        """A unique URL enters budget enforcement; ``on_admitted`` fires after the merge."""
        pld = pld_of(host)
        aux = _ADMIT + pld.encode("utf-8") + b"\x00" + record
        self.plds.check_update(hash64(pld), ADMIT_ONE.tobytes(), aux)

    # -- DRUM results ----------------------------------------------------------------------
    def _edges_durable(self) -> None:
        self.plds.write_out()

    def _on_edges(self, batch: Any) -> None:
        for i in np.flatnonzero(batch.unique):
            self.new_edges += 1
            dst = batch.aux(int(i))
            self.plds.update(
                hash64(dst.decode("utf-8")), DEGREE_ONE.tobytes(), _EDGE + dst
            )

    def _plds_durable(self) -> None:
        if self._delivered_epoch is not None:
            self._applied[APPLIED_KEY] = max(self._delivered_epoch, self._applied.get(APPLIED_KEY, -1))
        if self._on_durable is not None:
            self._on_durable()

    def _on_plds(self, batch: Any) -> None:
        values = batch.values
        self._delivered_epoch = batch.epoch
        already = batch.epoch <= self._applied.get(APPLIED_KEY, -1)
        for i in range(len(batch)):
            aux = batch.aux(i)
            before = int(values[i])
            degree, admitted = before >> 32, before & _LOW
            if aux[:1] == _EDGE:
                self._remember(aux[1:].decode("utf-8"), degree + 1, None)
                continue
            name, _, record = aux[1:].partition(b"\x00")
            pld = name.decode("utf-8")
            self._remember(pld, degree, admitted + 1)
            if already:  # queued before the kill that prevented the acknowledgement
                self.redelivered_skipped += 1
                continue
            self.admitted += 1
            self.on_admitted(record, self.policy(degree), admitted)

    def _remember(self, pld: str, degree: int, admitted: int | None) -> None:
        self._degree[pld] = degree
        self._degree.move_to_end(pld)
        if len(self._degree) > self.cache_entries:
            self._degree.popitem(last=False)
        entry = self._top.get(pld)
        if entry is None:
            if len(self._top) >= 2 * self.top_entries:
                keep = sorted(self._top.items(), key=lambda kv: -kv[1][0])[
                    : self.top_entries
                ]
                self._top = dict(keep)
            entry = self._top[pld] = [degree, 0]
        entry[0] = degree
        if admitted is not None:
            entry[1] = admitted

    # -- queries ---------------------------------------------------------------------------
    def indegree(self, host: str) -> int:
        return self._degree.get(pld_of(host), 0)

    def budget(self, host: str) -> int:
        return self.policy(self.indegree(host))

    def known_budget(self, host: str) -> int | None:
        """B_x of ``host``'s PLD if its in-degree is in the RAM cache, else None (not 0:
        a PLD evicted from the cache still has its in-degree on disk)."""
        degree = self._degree.get(pld_of(host))
        return None if degree is None else self.policy(degree)

    def top(self, n: int) -> list[tuple[str, int, int, int]]:
        """(PLD, d_x, B_x, P_x) of the ``n`` PLDs with the largest in-degree seen."""
        ranked = sorted(self._top.items(), key=lambda kv: (-kv[1][0], kv[0]))[:n]
        return [(pld, d, self.policy(d), p) for pld, (d, p) in ranked]

    # -- lifecycle -------------------------------------------------------------------------
    def flush(self) -> None:
        """Merge new edges, then the PLD table: budgets and admissions are delivered."""
        self.edges.merge()
        self.plds.merge()

    def write_out(self) -> None:
        self.edges.write_out()
        self.plds.write_out()

    @property
    def pending(self) -> int:
        return (
            self.edges.pending_tuples
            + self.plds.pending_tuples
            + self.edges.pending_deliveries
            + self.plds.pending_deliveries
        )

    def stats(self) -> dict[str, int]:
        return {
            "links_seen": self.links_seen,
            "pld_edges": self.new_edges,
            "admitted": self.admitted,
            "redelivered_skipped": self.redelivered_skipped,
            "plds": len(self.plds),
            "pending": self.pending,
            "merges": self.edges.stats.merges + self.plds.stats.merges,
            "budget_function_failures": self.policy.failures[0],
        }

    def close(self) -> None:
        self.edges.close()
        self.plds.close()
