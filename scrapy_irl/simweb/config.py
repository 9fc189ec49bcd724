"""Parameters of a simulated web: everything the model is a pure function of.

A :class:`WebConfig` (seed, sizes, port, timings) fully determines the web, so the server,
the resolver and the judge agree on it by sharing a config, never per-page state. The
server writes it as the first line of its request log; the judge reads it back from there.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

#: Named sizes: ``tiny`` for unit tests, ``small`` for crawl tests, ``default`` for demos
#: and the baseline, ``big`` for long runs. Any field can still be overridden.
SIZES: dict[str, dict[str, Any]] = {
    "tiny": {"plds": 30, "blog_users": 100, "spam_plds": 5, "max_pages": 300},
    "small": {"plds": 100, "blog_users": 500, "spam_plds": 12, "max_pages": 5000},
    "default": {},
    "big": {"plds": 3000, "blog_users": 30000, "spam_plds": 200, "max_pages": 200000},
}

#: Bounds of ``plds``. The upper one keeps a build to seconds (100,000 PLDs: about 6 s and
#: 190,000 hosts on a 2-core machine; time grows linearly) and well inside the 63,750
#: simweb addresses (about plds / 3 are needed; each is a listening socket, so an open file:
#: see :func:`~scrapy_irl.simweb.server.ensure_open_files`); a typo with extra zeros is
#: refused at once.
MIN_PLDS = 5
MAX_PLDS = 100_000


@dataclass(frozen=True)
class WebConfig:
    """The seed and knobs of one simulated web (see ``docs/simweb.rst``)."""

    seed: int = 1
    #: Legitimate pay-level domains (the blog platform and the spam farm come on top).
    plds: int = 300
    #: Hosts per legitimate PLD are 1..this.
    max_hosts_per_pld: int = 4
    #: User subdomains of the blog platform.
    blog_users: int = 3000
    #: PLDs of the spam link farm.
    spam_plds: int = 40
    #: Addresses the spam farm's hosts are spread over (by a hash of the host name). Few
    #: addresses let a per-IP delay hold the farm back; many leave it to budgets alone.
    spam_ips: int = 3
    #: Cap and floor of pages per legitimate host (Pareto in between).
    max_pages: int = 50000
    min_pages: int = 5
    #: Pareto tail exponent of pages per host (smaller = heavier tail).
    pages_alpha: float = 0.8
    #: Mean number of cross-PLD out-links of a PLD in the PLD graph.
    out_links: int = 6
    #: Share of legitimate hosts with a path loop: their /docs/ page links relatively to
    #: ``more/`` and every deeper /docs/more/.../ path answers the same page (0: none, the
    #: default, so the webs measured so far are unchanged; 0.05 with ``--web loop_share=0.05``).
    loop_share: float = 0.0
    #: The one TCP port every address listens on; it appears in every absolute link.
    port: int = 8080
    #: Delay of "slow" pages and slow robots.txt, seconds.
    slow_seconds: float = 2.0
    #: The drip page sends one small chunk per ``drip_interval`` for at most ``drip_seconds``.
    drip_interval: float = 0.5
    drip_seconds: float = 20.0
    #: ``Retry-After`` seconds sent with the 429 and 503 pages under ``/status/`` (0: no
    #: header); the judge counts requests to such a host sooner than that after the answer.
    retry_after: int = 10

    def __post_init__(self) -> None:
        if not MIN_PLDS <= self.plds <= MAX_PLDS:
            raise ValueError(f"plds must be within {MIN_PLDS}..{MAX_PLDS}, got {self.plds}")
        if self.spam_plds < 2 or self.blog_users < 2:
            raise ValueError("spam_plds and blog_users must be >= 2")
        if self.spam_ips < 1:
            raise ValueError(f"spam_ips must be >= 1, got {self.spam_ips}")
        if not 0 <= self.retry_after <= 86400:
            raise ValueError(f"retry_after must be within 0..86400, got {self.retry_after}")
        if not 0 <= self.port < 65536:  # 0: the server picks a free port
            raise ValueError(f"port out of range: {self.port}")
        if not 0 <= self.loop_share <= 1:
            raise ValueError(f"loop_share must be within [0, 1], got {self.loop_share}")
        if self.min_pages < 1 or self.max_pages < self.min_pages:
            raise ValueError("need 1 <= min_pages <= max_pages")

    @classmethod
    def sized(cls, size: str = "default", **overrides: Any) -> WebConfig:
        """A config from a named size plus explicit overrides (``None`` values ignored)."""
        if size not in SIZES:
            raise ValueError(
                f"unknown simweb size {size!r}; choose from {sorted(SIZES)}"
            )
        fields = {
            **SIZES[size],
            **{k: v for k, v in overrides.items() if v is not None},
        }
        return cls(**fields)

    def replace(self, **changes: Any) -> WebConfig:
        return dataclasses.replace(self, **changes)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def parse_override(cls, item: str) -> tuple[str, Any]:
        """``"spam_plds=120"`` -> ``("spam_plds", 120)``, typed like the field; clear errors."""
        name, sep, text = item.partition("=")
        name = name.strip().replace("-", "_")
        types = {f.name: f.type for f in dataclasses.fields(cls)}
        if not sep or name not in types:
            raise ValueError(
                f"expected FIELD=VALUE with FIELD one of {sorted(types)}, got {item!r}"
            )
        if name in ("seed", "port"):
            raise ValueError(f"{name} has its own option (--{name}), got {item!r}")
        is_float = types[name] in (float, "float")
        try:
            return name, float(text) if is_float else int(text)
        except ValueError:
            wanted = "a number" if is_float else "a whole number"
            raise ValueError(f"{name} needs {wanted}, got {text!r}") from None

    @classmethod
    def from_json(cls, text: str) -> WebConfig:
        data = json.loads(text)
        known = {f.name for f in dataclasses.fields(cls)}
        data.setdefault("retry_after", 0)  # a log recorded before the header was sent
        return cls(**{k: v for k, v in data.items() if k in known})
