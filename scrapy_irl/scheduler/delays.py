"""tau_h and tau_s from budgets (thesis chapter VII section 1).

IRLbot keeps tau_h = 40 s for low-ranked PLDs and scales it down in proportion to the
budget B_x for high-ranked ones, to a minimum tau_h^0; tau_s (1 s by default) shrinks with
the average budget of the PLDs on a server, to tau_s^0. A host's Crawl-delay raises its
tau_h. Pure functions of numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The margin is at most this share of the delay it pads: 0.1 s on a 2 s or 0.5 s delay
#: as before, but 0.005 s on a 0.01 s one. A flat 0.1 s made "tiny" delays 0.11 s (one
#: server at most ~9 requests a second), however small they were set.
MARGIN_SHARE = 0.5


@dataclass(frozen=True)
class DelayPolicy:
    host_delay: float = 10.0  # tau_h for a PLD with the base budget B_0
    host_delay_min: float = 2.0  # tau_h^0
    ip_delay: float = 1.0  # tau_s for servers whose PLDs have the base budget
    ip_delay_min: float = 0.25  # tau_s^0
    base_budget: float = 10.0  # B_0
    crawl_delay_max: float = 60.0
    margin: float = (
        0.1  # added to both delays (at most MARGIN_SHARE of them): bookkeeping happens
    )  # before bytes hit the wire

    def __post_init__(self) -> None:
        if not 0 <= self.host_delay_min <= self.host_delay:
            raise ValueError(
                f"need 0 <= IRL_HOST_DELAY_MIN <= IRL_HOST_DELAY, got {self.host_delay_min}, {self.host_delay}"
            )
        if not 0 <= self.ip_delay_min <= self.ip_delay:
            raise ValueError(
                f"need 0 <= IRL_IP_DELAY_MIN <= IRL_IP_DELAY, got {self.ip_delay_min}, {self.ip_delay}"
            )
        if self.margin < 0:
            raise ValueError(
                f"IRL_POLITENESS_MARGIN cannot be negative, got {self.margin}"
            )
        if self.base_budget <= 0:
            raise ValueError(
                f"the base budget must be positive, got {self.base_budget}"
            )

    def host(self, budget: float, crawl_delay: float | None = None) -> float:
        """tau_h: host_delay * B_0 / B_x, clamped to [tau_h^0, tau_h], raised by Crawl-delay."""
        scaled = self.host_delay * self.base_budget / max(budget, self.base_budget)
        delay = max(self.host_delay_min, min(self.host_delay, scaled))
        if crawl_delay:
            delay = max(delay, min(crawl_delay, self.crawl_delay_max))
        return self._padded(delay)

    def ip(self, average_budget: float) -> float:
        """tau_s: ip_delay * B_0 / (average budget of the server's PLDs), clamped."""
        scaled = (
            self.ip_delay * self.base_budget / max(average_budget, self.base_budget)
        )
        return self._padded(max(self.ip_delay_min, min(self.ip_delay, scaled)))

    def _padded(self, delay: float) -> float:
        return delay + min(self.margin, MARGIN_SHARE * delay)

    def longest(self) -> float:
        """The longest delay any host or IP can get (how long a last start matters)."""
        return max(self.host_delay, self.crawl_delay_max, self.ip_delay) + self.margin
