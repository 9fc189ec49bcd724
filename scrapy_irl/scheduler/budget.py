"""Budget functions F(d_x): PLD in-degree -> pages per BEAST period (thesis chapter VI).

Every PLD starts at B_0 and its budget grows with its in-degree d_x (distinct linking
PLDs). ``constant`` gives every PLD B_0 (round robin); ``linear`` adds ``per_degree`` pages
per linking PLD; ``log`` grows with log2(1 + d) (the default: reputation matters, but a
PLD with 1000 linking PLDs is not given 1000x the pages). A user callable (``"pkg.func"``
taking d and returning a budget) is accepted too. Budgets are clamped to [1, ``maximum``].
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field

KINDS = ("constant", "linear", "log")
#: Largest budget BEAST can store with a URL (32 bits).
MAX_BUDGET = 2**32 - 1

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BudgetPolicy:
    kind: str = "log"
    base: float = 10.0  # B_0
    per_degree: float = 10.0
    maximum: float = 10_000.0
    function: Callable[[int], float] | None = None
    #: Calls of ``function`` that raised mid-crawl (those PLDs got B_0); one-item list so a
    #: frozen policy can count.
    failures: list[int] = field(default_factory=lambda: [0], compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.function is None and self.kind not in KINDS:
            raise ValueError(
                f"IRL_BUDGET_FUNCTION must be one of {KINDS} or a dotted path, got {self.kind!r}"
            )
        if self.base < 1 or self.maximum < self.base or self.per_degree < 0:
            raise ValueError(
                f"need 1 <= IRL_BUDGET_BASE <= IRL_BUDGET_MAX and IRL_BUDGET_PER_DEGREE >= 0, got "
                f"{self.base}, {self.maximum}, {self.per_degree}"
            )
        if self.maximum > MAX_BUDGET:
            raise ValueError(
                f"IRL_BUDGET_MAX must be at most {MAX_BUDGET} (BEAST stores B_x in 32 "
                f"bits), got {self.maximum}"
            )
        if self.function is not None:
            self._probe()

    def _probe(self) -> None:
        """Call a user function at start-up: a wrong signature or a non-number return fails
        here, with the setting named, not on every budget lookup mid-crawl."""
        for degree in (0, 1, 10, 1000):
            try:
                float(self.function(degree))  # type: ignore[misc]
            except Exception as exc:  # noqa: BLE001 - any failure of user code is reported
                raise ValueError(
                    f"IRL_BUDGET_FUNCTION {self.kind}: calling it with in-degree {degree} "
                    f"failed ({exc!r}); it must take one int and return a number"
                ) from None

    def __call__(self, indegree: int) -> int:
        d = max(0, int(indegree))
        if self.function is not None:
            value = self._call_user(d)
        elif self.kind == "constant":
            value = self.base
        elif self.kind == "linear":
            value = self.base + self.per_degree * d
        else:
            value = self.base + self.per_degree * math.log2(1 + d)
        if not math.isfinite(value):
            value = self.maximum
        return int(min(self.maximum, max(1.0, value)))

    def _call_user(self, degree: int) -> float:
        """The user function's budget; if it raises for some in-degree the start-up probe
        did not try, B_0 (logged once, counted), rather than a failing STAR merge."""
        try:
            return float(self.function(degree))  # type: ignore[misc]
        except Exception as exc:  # noqa: BLE001 - user code; the crawl goes on
            self.failures[0] += 1
            if self.failures[0] == 1:
                logger.error("IRL_BUDGET_FUNCTION %s failed for in-degree %d (%r); PLDs it "
                             "fails for get B_0 = %s (further failures are not logged)",
                             self.kind, degree, exc, self.base)  # fmt: skip
            return self.base
