"""How often the downloader had a free slot while the scheduler held a due request.

Issue goal: downloader idle time while work is due < 5 %. The engine asks the scheduler
for work only when a slot frees or it is woken; a missed wake-up, a slow hand-out path or
a late merge shows up here as samples where a request was due (its host and its IP both
past their delays) and the downloader could have taken it, yet had not. Sampled on a
fixed period in the reactor thread, so it sees the same state the engine sees.

Two numbers, because a busy reactor always needs a moment to run the engine's next call
(by Little's law, at 60 hand-outs/s a 3 ms reaction alone makes ~18 % of instants "due"):

* ``idle_while_due``: instants with a free slot and due work (reaction time included);
* ``stalled``: such instants after which nothing at all was handed out for ``confirm``
  seconds while the state persisted: the downloader really stood idle next to due work.

Neither sees a reactor that stands still: Twisted's ``LoopingCall`` takes the first
sample due meanwhile late and skips the rest. So the meter also times its own gaps: a
gap of more than two periods between samples is a *pause* of the reactor thread (a long
merge, a slow callback), counted as the gap less one period, during which no request was
handed out and no response was read. A lower bound: a block that began part-way through
a period is counted up to one period short, and one shorter than a period or two is not
seen at all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class IdleMeter:
    """Counts samples; the shares are ``idle_while_due / samples`` and ``stalled / samples``."""

    work_due: Callable[[float], bool]  # now -> a request could be handed out
    free_slot: Callable[[], bool]  # the downloader would accept one more request
    handouts: Callable[[], int]  # requests handed out so far
    call_later: Callable[..., Any] | None = None  # (delay, fn, *args); None: no stall check
    active: Callable[[], bool] = lambda: True  # False: not sampled (e.g. the spider closes)
    clock: Callable[[], float] | None = None  # for the recheck; None: sample time + confirm
    confirm: float = 0.05
    samples: int = 0
    free: int = 0
    due: int = 0
    idle_while_due: int = 0
    stalled: int = 0
    interval: float = 0.0  # the sampling period; 0: pauses are not timed
    pauses: int = 0
    paused_seconds: float = 0.0
    longest_pause: float = 0.0
    _last_sample: float | None = None

    def sample(self, now: float) -> bool:
        """Take one sample; True when the downloader idled while work was due."""
        if not self.active():
            self._last_sample = None  # a stretch not sampled on purpose is no pause
            return False
        self._time_pause(now)
        self.samples += 1
        free = self.free_slot()
        due = self.work_due(now)
        self.free += free
        self.due += due
        idle = free and due
        if idle:
            self.idle_while_due += 1
            if self.call_later is not None:
                self.call_later(self.confirm, self._confirm, self.handouts(), now)
        return idle

    def _time_pause(self, now: float) -> None:
        last, self._last_sample = self._last_sample, now
        if last is None or self.interval <= 0:
            return
        gap = now - last
        if gap > 2 * self.interval:
            pause = gap - self.interval
            self.pauses += 1
            self.paused_seconds += pause
            self.longest_pause = max(self.longest_pause, pause)

    def _confirm(self, handouts_then: int, sampled_at: float) -> None:
        # the recheck runs when the reactor gets to it, possibly well after ``confirm``
        now = self.clock() if self.clock is not None else sampled_at + self.confirm
        if (
            self.active()
            and self.handouts() == handouts_then
            and self.free_slot()
            and self.work_due(now)
        ):
            self.stalled += 1

    @property
    def share(self) -> float:
        return self.idle_while_due / self.samples if self.samples else 0.0

    @property
    def stalled_share(self) -> float:
        return self.stalled / self.samples if self.samples else 0.0
