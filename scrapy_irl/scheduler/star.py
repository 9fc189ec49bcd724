"""STAR: per-PLD budgets from PLD in-degree, kept in DRUM (thesis chapter VI, Fig. 4).

Three DRUM stores, so RAM does not grow with the number of PLDs or hosts:

* ``pld_edges``: one key per distinct (source PLD, target PLD) link; ``check+update``
  tells whether a link is new. Self-links are ignored.
* ``pld_indegree`` (PLDindegree): per PLD a uint64 packing d_x (high 32 bits, distinct
  linking PLDs) and P_x (low 32 bits, URLs admitted to BEAST), with "add" as the update
  merge. A new edge adds ``1 << 32``; a unique URL does ``check+update`` adding 1 and gets
  the value *before* it: (d_x, P_x), hence B_x = F(d_x), on its way to BEAST.
* ``hosts_seen`` (with ``charge_new_hosts``): one key per host name admitted;
  ``check+update`` tells a new one, whose PLD's P_x then grows by one more: a new host
  costs a robots.txt fetch and a DNS lookup before its first page, so a PLD that spreads
  its URLs over endless subdomains (a spam farm's way around per-host limits) gets half
  the pages per BEAST queue, not twice the requests. The thesis counts URLs only; the
  charge lands one merge later than the host's first URL, like a new edge's degree.

Exactly once, across kills. Each producer (URLseen for admissions, ``pld_edges`` for new
edges, ``hosts_seen`` for new hosts) delivers an epoch again when a kill came between STAR's write-out and its
acknowledgement; pld_indegree likewise delivers its own results again when the kill came
between BEAST's save and its acknowledgement. So every tuple carries its *origin*, its
position in the producer's delivery (epoch, bucket, index: increasing over a store's life),
and BEAST's ``STATE`` keeps, in the same commit as the URLs it holds, per pld_indegree
bucket: the last position whose result was applied (``at``) and, per producer, the
highest origin applied (``seen``). A result at or before ``at`` is a delivery again:
skipped. A tuple whose origin is at or before ``seen`` is a second copy that was merged
too: skipped, and its addition to d_x or P_x is taken back by a negative update. Within a
bucket, tuples arrive in the order they were submitted, so one number per bucket and
producer is enough: no per-URL memory.

A bounded LRU of recent in-degrees answers ``budget(host)`` synchronously (for tau_h);
PLDs not in it get B_0 until they are seen again, and ``known_budget`` tells a miss
apart, so a host or a Q_F re-read keeps the budget it had rather than drop to B_0. A bounded table tracks the PLDs with
the largest in-degree for the close-time report.
"""

from __future__ import annotations

import hashlib
import struct
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
_MOD = 1 << 64
#: Tags of pld_indegree's aux strings. Upper case: written before origins existed (read,
#: never deduplicated); lower case: followed by the producer's origin; ``u``: a
#: correction that takes a duplicate's addition back.
_ADMIT = b"A"
_EDGE = b"E"
_ADMIT_FROM = b"a"
_EDGE_FROM = b"e"
_UNDO = b"u"
_HOST_FROM = b"h"  # a new host's charge to its PLD's P_x
_ORIGIN = struct.Struct("<QQ")  # producer epoch, (bucket << 40) | index
_INDEX_BITS = 40
#: The key of pld_indegree's epochs in the consumer's ``applied`` ledger (STATEs written
#: before per-bucket positions; still honoured).
APPLIED_KEY = "star/pld_indegree"
_AT = "star/at/"  # + pld_indegree bucket: last result position applied
_SEEN = {
    _ADMIT_FROM: "star/seen/urlseen/",
    _EDGE_FROM: "star/seen/pld_edges/",
    _HOST_FROM: "star/seen/hosts_seen/",
}

#: Where a tuple came from in its producer's delivery: (epoch, bucket, index).
Origin = tuple[int, int, int]

Admitted = Callable[[bytes, int, int], None]  # record, B_x, P_x


def hash64(text: str) -> int:
    return int.from_bytes(
        hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big"
    )


def _add(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    return old + new  # uint64 wraps: adding 2**64 - n takes n back


def _pack_origin(origin: Origin) -> bytes:
    epoch, bucket, index = origin
    return _ORIGIN.pack(epoch, (bucket << _INDEX_BITS) | index)


def _where(batch_at: Origin, i: int) -> bytes:
    """The ``i``-th result of a batch starting at ``batch_at``, as a correction names it."""
    epoch, bucket, start = batch_at
    return _pack_origin((epoch, bucket, start + i))


def _addition(tag: bytes) -> int:
    """What a tuple with ``tag`` adds to its PLD's packed (d_x, P_x)."""
    return int(DEGREE_ONE) if tag in (_EDGE, _EDGE_FROM) else int(ADMIT_ONE)


def _position(epoch: int, index: int) -> int:
    """One integer ordering (epoch, index) pairs as tuples are ordered."""
    return (epoch << 64) | index


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
        charge_new_hosts: bool = False,
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
        self.hosts_charged = 0
        self.redelivered_skipped = 0
        self.duplicates_undone = 0
        #: URLs admitted whose result (their way to BEAST) has not come back yet: between
        #: URLseen and BEAST, for ``len(scheduler)``. Set at open below: the check+update
        #: tuples found pending (admissions; link and host tuples are updates). Those of an
        #: epoch owed at open (a kill between a merge and its acknowledgement) are not
        #: counted.
        self.admits_pending = 0
        self._corrections: dict[int, int] = {}  # key -> addition to take back, this epoch
        self._corrections_epoch = -1
        # Results (positions) whose correction is already in pld_indegree's files although
        # STATE does not say so yet: not written twice (see ``_undone_on_disk``).
        self._undone: set[bytes] = set()
        # Those of them read at open and not yet counted in ``_corrections``: a result
        # skipped as applied still takes its correction off the rest of the merge.
        self._restored: set[bytes] = set()
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
                          before_ack=self._updates_durable, **options)  # fmt: skip
        self.hosts: Drum | None = None
        if charge_new_hosts:
            self.hosts = Drum(path / "hosts_seen", store_aux=True, on_results=self._on_hosts,
                              before_ack=self._updates_durable, **options)  # fmt: skip
        self.plds = Drum(
            path / "pld_indegree",
            value_dtype="<u8",
            merge=_add,
            store_aux=True,
            on_results=self._on_plds,
            before_ack=self._plds_durable,
            **options,
        )
        self.admits_pending = self.plds.pending_tuples - self.plds.recovered_updates
        if self.plds.pending_deliveries:
            self._undone = self._undone_on_disk()
            self._restored = set(self._undone)

    def _undone_on_disk(self) -> set[bytes]:
        """Corrections written out before a kill that came before BEAST's save: the
        epoch they correct is owed again (it is acknowledged only after that save), and
        they are in a bucket file of it, of a later owed epoch, or of the current one."""
        return {aux[1:] for aux in self.plds.aux_on_disk() if aux[:1] == _UNDO and len(aux) > 1}

    # -- input -----------------------------------------------------------------------------
    def record_link(self, src_host: str, dst_host: str) -> None:
        """A link from a page on ``src_host`` to a URL on ``dst_host`` was seen."""
        src, dst = pld_of(src_host), pld_of(dst_host)
        self.links_seen += 1
        if src != dst:
            self.edges.check_update(
                hash64(f"{src}\x00{dst}"), None, dst.encode("utf-8")
            )

    def admit(self, record: bytes, host: str, origin: Origin | None = None) -> None:
        """A unique URL enters budget enforcement; ``on_admitted`` fires after the merge.

        ``origin``: where URLseen delivered it (epoch, bucket, index), so a copy delivered
        again after a kill is queued and counted in P_x once.
        """
        pld = pld_of(host)
        tag = _ADMIT if origin is None else _ADMIT_FROM + _pack_origin(origin)
        aux = tag + pld.encode("utf-8") + b"\x00" + record
        # counted first: the check_update may merge and deliver it at once
        self.admits_pending += 1
        self.plds.check_update(hash64(pld), ADMIT_ONE.tobytes(), aux)
        if self.hosts is not None:
            # the same host again (a copy URLseen delivered again after a kill included)
            # is a duplicate here: charged once
            self.hosts.check_update(hash64(host.lower()), None, pld.encode("utf-8"))

    # -- DRUM results ----------------------------------------------------------------------
    def _updates_durable(self) -> None:
        """Before pld_edges or hosts_seen forget a merge's results: the degree updates and
        charges those results made are in pld_indegree's bucket files."""
        self.plds.write_out()

    def _on_edges(self, batch: Any) -> None:
        for i in np.flatnonzero(batch.unique):
            self.new_edges += 1
            dst = batch.aux(int(i))
            origin = _pack_origin((batch.epoch, batch.bucket, batch.start + int(i)))
            self.plds.update(
                hash64(dst.decode("utf-8")), DEGREE_ONE.tobytes(), _EDGE_FROM + origin + dst
            )

    def _on_hosts(self, batch: Any) -> None:
        for i in np.flatnonzero(batch.unique):
            pld = batch.aux(int(i))
            origin = _pack_origin((batch.epoch, batch.bucket, batch.start + int(i)))
            self.plds.update(hash64(pld.decode("utf-8")), ADMIT_ONE.tobytes(), _HOST_FROM + origin + pld)

    def _plds_durable(self) -> None:
        if self._delivered_epoch is not None:
            self._applied[APPLIED_KEY] = max(self._delivered_epoch, self._applied.get(APPLIED_KEY, -1))
        self.plds.write_out()  # corrections first: STATE is about to say they were made
        if self._on_durable is not None:
            self._on_durable()
        self._undone.clear()  # STATE now holds their positions: never made again
        self._restored.clear()

    def _on_plds(self, batch: Any) -> None:
        self._delivered_epoch = batch.epoch
        if batch.epoch != self._corrections_epoch:
            self._corrections, self._corrections_epoch = {}, batch.epoch
        count = len(batch)
        at_key = f"{_AT}{batch.bucket}"
        base = _position(batch.epoch, batch.start)
        if batch.epoch <= self._applied.get(APPLIED_KEY, -1):
            first = count  # the whole epoch was applied (STATE of an earlier version)
        else:
            first = min(count, max(0, self._applied.get(at_key, -1) - base + 1))
        at = (batch.epoch, batch.bucket, batch.start)
        for i in range(first):  # applied before the kill that prevented the ack
            tag = batch.aux(i)[:1]
            if tag in (_ADMIT, _ADMIT_FROM):
                self.redelivered_skipped += 1
                # not counted down: applied earlier in this run (counted down then) or
                # in an epoch owed at open (never counted up)
            if self._restored and tag in _SEEN:  # a copy undone before the kill?
                where = _where(at, i)
                if where in self._restored:
                    self._restored.discard(where)
                    key = int(batch.keys[i])
                    self._corrections[key] = self._corrections.get(key, 0) + _addition(tag)
        if first == count:
            return
        keys, values = batch.keys.tolist(), batch.values.tolist()
        seen = {tag: f"{prefix}{batch.bucket}" for tag, prefix in _SEEN.items()}
        done = first
        try:
            for i in range(first, count):
                self._apply(batch.aux(i), keys[i], values[i], seen, at, i)
                done = i + 1
        finally:  # a result that raised, and those after it, stay owed
            if done > first:
                self._applied[at_key] = base + done - 1

    def _apply(self, aux: bytes, key: int, value: int, seen: dict[bytes, str],
               at: Origin, i: int) -> None:  # fmt: skip
        before = value - self._corrections.get(key, 0)
        degree, admitted = before >> 32, before & _LOW
        tag, body = aux[:1], aux[1:]
        seen_key, origin = None, -1
        if tag in seen:
            epoch, seq = _ORIGIN.unpack_from(aux, 1)
            seen_key, origin = seen[tag], _position(epoch, seq)
            body = aux[1 + _ORIGIN.size :]
            if origin <= self._applied.get(seen_key, -1):
                if tag == _ADMIT_FROM:
                    self._admit_back(at[0])
                self._undo(key, tag, body, before, _where(at, i))
                return
        if tag == _UNDO:
            return
        if tag in (_EDGE, _EDGE_FROM):
            self._remember(body.decode("utf-8"), degree + 1, None)
        elif tag == _HOST_FROM:
            self._remember(body.decode("utf-8"), degree, admitted + 1)
            self.hosts_charged += 1
        else:
            name, _, record = body.partition(b"\x00")
            self._remember(name.decode("utf-8"), degree, admitted + 1)
            self.on_admitted(record, self.policy(degree), admitted)
            self.admitted += 1
            self._admit_back(at[0])
        if seen_key is not None:  # after: a tuple that raised is owed
            self._applied[seen_key] = origin

    def _undo(self, key: int, tag: bytes, body: bytes, before: int, where: bytes) -> None:
        """A second copy of a tuple whose first copy was applied (its producer delivered
        it again after a kill): queue nothing, and take its addition back, at once for
        the rest of this merge and on disk by a negative update naming the result it
        corrects (``where``), so a kill before BEAST's save does not make it twice."""
        added = _addition(tag)
        if where not in self._undone:
            # marked first: an update that raises once the tuple is buffered (its
            # write-out or the merge it starts fails) leaves the correction made
            self._undone.add(where)
            self.plds.update(key, np.uint64(_MOD - added).tobytes(), _UNDO + where)
        self._restored.discard(where)
        self._corrections[key] = self._corrections.get(key, 0) + added
        self.duplicates_undone += 1
        if tag == _EDGE_FROM:
            self._remember(body.decode("utf-8"), before >> 32, None)
        else:
            pld = body.partition(b"\x00")[0].decode("utf-8")
            self._remember(pld, before >> 32, before & _LOW)

    def _admit_back(self, epoch: int) -> None:
        """An admission's result of ``epoch`` came back (queued, skipped as applied, or
        undone): counted down, unless its epoch was owed at open (not counted up)."""
        if epoch >= self.plds.recovered_epoch and self.admits_pending:
            self.admits_pending -= 1

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
        """Merge new edges and new hosts, then the PLD table: budgets and admissions are
        delivered."""
        self.edges.merge()
        if self.hosts is not None:
            self.hosts.merge()
        self.plds.merge()

    def write_out(self) -> None:
        self.edges.write_out()
        if self.hosts is not None:
            self.hosts.write_out()
        self.plds.write_out()

    @property
    def drums(self) -> list[Drum]:
        """STAR's DRUM stores, the table of PLDs last."""
        return [self.edges, self.plds] if self.hosts is None else [self.edges, self.hosts, self.plds]

    @property
    def pending(self) -> int:
        return sum(d.pending_tuples + d.pending_deliveries for d in self.drums)

    def stats(self) -> dict[str, int]:
        return {
            "links_seen": self.links_seen,
            "pld_edges": self.new_edges,
            "admitted": self.admitted,
            "new_hosts_charged": self.hosts_charged,
            "redelivered_skipped": self.redelivered_skipped,
            "duplicates_undone": self.duplicates_undone,
            "plds": len(self.plds),
            "pending": self.pending,
            "merges": sum(d.stats.merges for d in self.drums),
            "budget_function_failures": self.policy.failures[0],
        }

    def close(self) -> None:
        for drum in self.drums:
            drum.close()
