"""Wake Scrapy's engine when the next host or IP becomes due.

When ``next_request`` returns None the engine polls again only on its next event or
heartbeat (5 s). We keep one timer for the earliest due time and call the engine's
``nextcall.schedule()`` when it fires. ``nextcall.schedule(delay)`` itself is not used:
it ignores calls while one is pending, so a delayed one would swallow immediate wake-ups.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class EngineWaker:
    """One pending wake-up at a time, always for the earliest requested moment."""

    def __init__(
        self,
        engine_nextcall: Callable[[], Any],
        call_later: Callable[..., Any],
        clock: Callable[[], float],
    ) -> None:
        self._nextcall = engine_nextcall
        self._call_later = call_later
        self._clock = clock
        self._timer: Any = None
        self._at = float("inf")
        self.wakeups = 0

    def wake_at(self, when: float) -> None:
        """Make sure the engine polls the scheduler at ``when`` (monotonic seconds) or earlier."""
        if self._timer is not None and self._timer.active() and self._at <= when:
            return
        self.cancel()
        self._at = when
        self._timer = self._call_later(max(0.0, when - self._clock()), self._fire)

    def _fire(self) -> None:
        self._timer = None
        self._at = float("inf")
        self.wakeups += 1
        self._nextcall()

    def cancel(self) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        self._at = float("inf")
