"""The IRL scheduler's stats (``irl_sched/...``) and its close-time PLD table."""

from __future__ import annotations

import logging

from scrapy_irl.scheduler.items import STAT
from scrapy_irl.scheduler.politeness import FORGET_SCAN_RATE

logger = logging.getLogger(__name__)


class StatsReporting:
    """IrlScheduler's stats publishing (a mixin: the state is IrlScheduler's)."""

    def _publish_stats(self) -> None:
        s = self.stats.set_value
        s(f"{STAT}/urlseen_pending", self.urlseen.pending_tuples)
        s(f"{STAT}/urlseen_merges", self.urlseen.stats.merges)
        s(f"{STAT}/ram_requests", self._ram_items())
        s(f"{STAT}/ram_requests_peak", self.ram_peak)
        s(f"{STAT}/hosts_in_ram", len(self.polite.hosts))
        now = self.clock()
        if self._closed or now >= self._next_ready_count:
            # a sum over every IP: at most every IPs / FORGET_SCAN_RATE seconds
            s(f"{STAT}/ready_hosts", self.polite.ready_hosts())
            self._next_ready_count = now + len(self.polite.ips) / FORGET_SCAN_RATE
        s(f"{STAT}/dns_waiting_hosts", len(self._dns_wait))
        s(f"{STAT}/dns_renewing_hosts", self.polite.resolving)
        s(f"{STAT}/held_hosts", len(self._held))
        s(f"{STAT}/robots_waiting_origins", len(self._robots_wait))
        s(f"{STAT}/in_flight", len(self._handed))
        for key, value in self.beast.stats().items():
            s(f"{STAT}/beast/{key}", value)
        for key, value in self.parked.stats().items():
            s(f"{STAT}/parked/{key}", value)
        for key, value in self.star.stats().items():
            s(f"{STAT}/star/{key}", value)
        if self.memory is not None:
            for key, value in self.memory.stats().items():
                s(f"{STAT}/politeness_log/{key}", value)
        for key, value in self.counts.items():
            s(f"{STAT}/{key}", value)
        if self.idle.samples:
            s(f"{STAT}/idle/samples", self.idle.samples)
            s(f"{STAT}/idle/downloader_free", self.idle.free)
            s(f"{STAT}/idle/work_due", self.idle.due)
            s(f"{STAT}/idle/idle_while_due", self.idle.idle_while_due)
            s(f"{STAT}/idle/idle_while_due_share", round(self.idle.share, 4))
            s(f"{STAT}/idle/stalled", self.idle.stalled)
            s(f"{STAT}/idle/stalled_share", round(self.idle.stalled_share, 4))
            s(f"{STAT}/idle/reactor_pauses", self.idle.pauses)
            s(f"{STAT}/idle/reactor_pause_seconds", round(self.idle.paused_seconds, 3))
            s(f"{STAT}/idle/reactor_pause_max_seconds", round(self.idle.longest_pause, 3))

    def _log_top_plds(self) -> None:
        top = self.star.top(self.top_plds)
        if not top:
            return
        lines = "\n".join(
            f"  {pld:<40} in-degree {d:>6}  budget {b:>6}  admitted {p:>7}"
            for pld, d, b, p in top
        )
        logger.info(
            "Top PLDs by in-degree:\n%(lines)s",
            {"lines": lines},
            extra={"spider": self.spider},
        )
