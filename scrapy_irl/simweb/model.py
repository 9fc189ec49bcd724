"""The simulated web's structure: PLDs, hosts, addresses, the PLD link graph, ground truth.

Everything is a pure function of a :class:`~scrapy_irl.simweb.config.WebConfig`. Per-PLD and
per-host facts (a few thousand entries) are computed once at construction; pages are never
stored: :mod:`scrapy_irl.simweb.pages` renders each one from ``(seed, host, path)``. Blog
user hosts and spam hosts are infinite or numerous, so they are recognised by name pattern
instead of being listed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import random
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from scrapy_irl.simweb.config import WebConfig

logger = logging.getLogger(__name__)

LEGIT_SUFFIXES: tuple[tuple[str, int], ...] = (
    ("com", 40), ("org", 10), ("net", 8), ("de", 8), ("co.uk", 6), ("com.au", 4),
    ("fr", 4), ("co.jp", 3), ("com.br", 3), ("nl", 3), ("org.uk", 2), ("edu", 2),
    ("ca", 2), ("it", 2), ("es", 2), ("ac.uk", 1),
)  # fmt: skip
SPAM_SUFFIXES = ("info", "biz", "xyz", "top", "online", "site")
SYLLABLES = [
    "ka",
    "ro",
    "mi",
    "tu",
    "ne",
    "so",
    "la",
    "vi",
    "pe",
    "do",
    "ra",
    "zu",
    "mo",
    "ki",
    "be",
    "na",
    "li",
    "to",
    "fa",
    "gu",
]
IDN_STEMS = ("bücher", "café", "köln", "zürich", "niño")
HOST_LABELS = ("www", "", "blog", "shop", "news", "docs", "forum", "m")
BLOG_PLD = "blogverse.com"
#: robots.txt behaviours and their weights among legitimate hosts.
ROBOTS_KINDS: tuple[tuple[str, int], ...] = (
    ("allow", 40), ("disallow", 20), ("crawl_delay", 10), ("notfound", 10), ("error", 5),
    ("slow", 3), ("huge", 2), ("malformed", 5), ("redirect", 3), ("disallow_all", 2),
)  # fmt: skip
#: Every ``n``-th PLD gets an internationalised (IDN) name.
IDN_EVERY = 23
#: Legitimate PLDs whose home page links into the spam farm.
SPAM_ENTRIES = 3
#: Other spam PLDs each spam PLD links to.
SPAM_OUT = 5
#: Probability that a legitimate PLD links to the blog platform.
BLOG_LINK_P = 0.25
_LABEL = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
_BLOG_USER = re.compile(r"^u(\d+)$")

#: Paths simweb answers with a robots.txt: its own, and the target of its robots redirect.
ROBOTS_PATHS = ("/robots.txt", "/robots-moved.txt")


@dataclass(frozen=True)
class Pld:
    """A pay-level domain: ``name`` is the ASCII (punycode) form, ``display`` the Unicode one."""

    index: int
    name: str
    display: str
    kind: str  # "legit" | "blog" | "spam"


@dataclass(frozen=True)
class Host:
    """One hostname and what the server does for it."""

    name: str
    pld: Pld
    ip: str
    kind: str  # "legit" | "blog" | "blogindex" | "spam"
    pages: int  # pages /, /p/1.html ... ; 0 means unbounded (spam)
    robots: str  # one of ROBOTS_KINDS' names
    calendar: bool = False  # serves the infinite /calendar/ trap
    session: bool = False  # appends ?sid=... to every same-host link (URL-variant trap)
    drip: bool = False  # links to the byte-dripping page
    loop: bool = False  # /docs/ links relatively to more/, at any depth (path loop)


def ip_address(index: int) -> str:
    """The ``index``-th simweb address: 127.0.1.1, 127.0.1.2, ... (never 127.0.0.x)."""
    if not 0 <= index < 250 * 255:
        raise ValueError(f"simweb address index out of range: {index}")
    return f"127.0.{1 + index // 250}.{1 + index % 250}"


class Web:
    """A deterministic simulated web built from a :class:`WebConfig`."""

    def __init__(self, config: WebConfig) -> None:
        self.config = config
        self._key = str(config.seed).encode()[:64]
        self._ip_count = 0
        self.plds: list[Pld] = []
        self.pld_by_name: dict[str, Pld] = {}
        self._build_plds()
        self.out_links: list[list[int]] = [[] for _ in self.plds]
        self._build_graph()
        self.in_degree: list[int] = self._in_degrees()
        self.hosts: dict[str, Host] = {}
        self.hosts_of: list[list[str]] = [[] for _ in self.plds]
        self._build_hosts()
        self.ips: list[str] = [ip_address(i) for i in range(self._ip_count)]

    # -- deterministic randomness ---------------------------------------------------------
    def hash(self, *parts: object) -> int:
        """A 64-bit hash of ``parts`` keyed by the seed: the only source of randomness."""
        data = "\x1f".join(map(str, parts)).encode()
        return int.from_bytes(
            hashlib.blake2b(data, digest_size=8, key=self._key).digest(), "big"
        )

    def unit(self, *parts: object) -> float:
        """A uniform number in (0, 1] from ``parts``."""
        return (self.hash(*parts) + 1) / 2.0**64

    def rng(self, *parts: object) -> random.Random:
        return random.Random(self.hash(*parts))

    def _new_ip(self) -> str:
        self._ip_count += 1
        return ip_address(self._ip_count - 1)

    # -- construction ---------------------------------------------------------------------
    def _add_pld(self, name: str, display: str, kind: str) -> None:
        pld = Pld(len(self.plds), name, display, kind)
        self.plds.append(pld)
        self.pld_by_name[name] = pld

    def _build_plds(self) -> None:
        cfg = self.config
        rng = self.rng("plds")
        suffixes = [s for s, _ in LEGIT_SUFFIXES]
        weights = [w for _, w in LEGIT_SUFFIXES]
        for i in range(cfg.plds):
            suffix = rng.choices(suffixes, weights)[0]
            if i % IDN_EVERY == IDN_EVERY // 2:
                display = f"{IDN_STEMS[(i // IDN_EVERY) % len(IDN_STEMS)]}{i}.{suffix}"
                name = display.encode("idna").decode("ascii")
            else:
                stem = "".join(rng.choices(SYLLABLES, k=rng.randint(2, 3)))
                name = display = f"{stem}{i}.{suffix}"
            self._add_pld(name, display, "legit")
        self._add_pld(BLOG_PLD, BLOG_PLD, "blog")
        for j in range(cfg.spam_plds):
            a, b = rng.choices(SYLLABLES, k=2), rng.choices(SYLLABLES, k=2)
            name = (
                f"{''.join(a)}-{''.join(b)}{j}.{SPAM_SUFFIXES[j % len(SPAM_SUFFIXES)]}"
            )
            self._add_pld(name, name, "spam")

    @property
    def idn_plds(self) -> list[int]:
        """Indexes of the PLDs with internationalised names."""
        return [p.index for p in self.plds if p.name != p.display]

    @property
    def blog(self) -> Pld:
        return self.plds[self.config.plds]

    @property
    def spam_plds(self) -> list[Pld]:
        return self.plds[self.config.plds + 1 :]

    def _build_graph(self) -> None:
        """Price-style preferential attachment over legit PLDs plus the blog platform.

        PLDs arrive in a seeded order; each picks about ``out_links`` earlier PLDs, mostly
        with probability proportional to their in-degree so far (the list of link
        endpoints), so PLD in-degree is heavy-tailed; each newcomer also gets one link from
        a uniformly chosen earlier PLD so that every PLD is reachable.
        """
        cfg = self.config
        rng = self.rng("graph")
        nodes = list(range(cfg.plds + 1))
        rng.shuffle(nodes)
        out: list[set[int]] = [set() for _ in self.plds]
        endpoints: list[int] = []
        seed_n = 3
        for a in nodes[:seed_n]:
            for b in nodes[:seed_n]:
                if a != b:
                    out[a].add(b)
                    endpoints.append(b)
        for t in range(seed_n, len(nodes)):
            v = nodes[t]
            m = min(t, 1 + int(rng.expovariate(1.0 / max(cfg.out_links - 1, 0.5))))
            for _ in range(20 * m):  # bounded: duplicates are retried a few times
                if len(out[v]) >= m:
                    break
                u = (
                    rng.choice(endpoints)
                    if rng.random() < 0.8
                    else nodes[rng.randrange(t)]
                )
                if u not in out[v]:
                    out[v].add(u)
                    endpoints.append(u)
            parent = nodes[rng.randrange(t)]
            if v not in out[parent]:
                out[parent].add(v)
                endpoints.append(v)
        blog = self.blog.index
        for i in range(cfg.plds):
            if rng.random() < BLOG_LINK_P:
                out[i].add(blog)
        spam = [p.index for p in self.spam_plds]
        self.spam_entries: list[int] = rng.sample(range(cfg.plds), SPAM_ENTRIES)
        for k, i in enumerate(self.spam_entries):
            out[i].add(spam[k % len(spam)])
        for k, s in enumerate(spam):
            others = [x for x in spam if x != s]
            out[s].add(spam[(k + 1) % len(spam)])
            out[s].update(rng.sample(others, min(SPAM_OUT - 1, len(others))))
        self.out_links = [sorted(o) for o in out]

    def _in_degrees(self) -> list[int]:
        deg = [0] * len(self.plds)
        for src, targets in enumerate(self.out_links):
            for t in targets:
                if t != src:
                    deg[t] += 1
        return deg

    def _build_hosts(self) -> None:
        cfg = self.config
        rng = self.rng("hosts")
        shared = [self._new_ip() for _ in range(max(2, cfg.plds // 3))]
        legit: list[Host] = []
        kinds = [k for k, _ in ROBOTS_KINDS]
        weights = [w for _, w in ROBOTS_KINDS]
        for pld in self.plds[: cfg.plds]:
            n_hosts = min(
                cfg.max_hosts_per_pld,
                1 + int(cfg.max_hosts_per_pld * self.unit("nh", pld.name) ** 2),
            )
            ip = shared[self.hash("ip", pld.name) % len(shared)]
            split = self.unit("split", pld.name) < 0.15
            boost = math.sqrt(1 + self.in_degree[pld.index])
            for j, label in enumerate(HOST_LABELS[:n_hosts]):
                name = f"{label}.{pld.name}" if label else pld.name
                u = self.unit("pages", name)
                pages = (
                    cfg.min_pages
                    * u ** (-1.0 / cfg.pages_alpha)
                    * (boost if j == 0 else 1.0)
                )
                host_ip = (
                    shared[self.hash("ip2", name) % len(shared)] if split and j else ip
                )
                legit.append(
                    Host(
                        name=name,
                        pld=pld,
                        ip=host_ip,
                        kind="legit",
                        pages=int(min(cfg.max_pages, max(cfg.min_pages, pages))),
                        robots=rng.choices(kinds, weights)[0],
                        calendar=rng.random() < 0.03,
                        session=rng.random() < 0.03,
                        drip=rng.random() < 0.02,
                        # a hash, not rng: the other hosts' draws stay as they were
                        loop=self.hash("loop", name) % 10_000 < cfg.loop_share * 10_000,
                    )
                )
        # Guarantee every behaviour exists at least once, on hosts picked by the seed.
        order = list(range(len(legit)))
        rng.shuffle(order)
        special = (
            [("robots", k) for k in kinds]
            + [
                ("calendar", True),
                ("session", True),
                ("drip", True),
            ]
            + ([("loop", True)] if cfg.loop_share > 0 else [])
        )
        for pos, (field, value) in zip(order, special):
            legit[pos] = _with(legit[pos], field, value)
        for host in legit:
            self._add_host(host)
        self.blog_ips = [self._new_ip(), self._new_ip()]
        blog = self.blog
        index_pages = 1 + cfg.blog_users // 50
        for name in (f"www.{blog.name}", blog.name):
            self._add_host(
                Host(name, blog, self.blog_ips[0], "blogindex", index_pages, "allow")
            )
        self.spam_ips = [self._new_ip() for _ in range(cfg.spam_ips)]
        for pld in self.spam_plds:
            self.hosts_of[pld.index].append(pld.name)

    def _add_host(self, host: Host) -> None:
        self.hosts[host.name] = host
        self.hosts_of[host.pld.index].append(host.name)

    # -- lookups --------------------------------------------------------------------------
    @lru_cache(maxsize=65536)  # noqa: B019 (the Web lives as long as its users)
    def host(self, name: str) -> Host | None:
        """The host called ``name`` (ASCII, any case), or None if it does not resolve."""
        name = name.lower().rstrip(".")
        found = self.hosts.get(name)
        if found is not None:
            return found
        label, _, rest = name.partition(".")
        if rest == BLOG_PLD:
            m = _BLOG_USER.match(label)
            if (
                m
                and str(int(m.group(1))) == m.group(1)
                and int(m.group(1)) < self.config.blog_users
            ):
                return self._blog_host(name, int(m.group(1)))
            return None
        spam = self.pld_by_name.get(rest) or self.pld_by_name.get(name)
        if (
            spam is not None
            and spam.kind == "spam"
            and (rest == spam.name and _LABEL.match(label) or name == spam.name)
        ):
            ip = self.spam_ips[self.hash("spamip", name) % len(self.spam_ips)]
            return Host(name, spam, ip, "spam", 0, "allow")
        return None

    def _blog_host(self, name: str, user: int) -> Host:
        u = self.unit("blogpages", user)
        pages = int(min(200, 1 + 3 * u ** (-1.0 / 1.2)))
        robots = "crawl_delay" if self.hash("blogrobots", user) % 10 == 0 else "allow"
        return Host(name, self.blog, self.blog_ips[user % 2], "blog", pages, robots)

    def resolve(self, name: str) -> str | None:
        """The IPv4 address of ``name``, or None (NXDOMAIN)."""
        host = self.host(name)
        return host.ip if host is not None else None

    def pld_of(self, name: str) -> Pld | None:
        """The PLD of a resolvable host (the model knows it by construction)."""
        host = self.host(name)
        return host.pld if host is not None else None

    def url(self, host: str, path: str = "/") -> str:
        return f"http://{host}:{self.config.port}{path}"

    def seed_urls(self, count: int = 10) -> list[str]:
        """Home pages of ``count`` legitimate PLDs chosen by the seed: a crawl's start list."""
        rng = self.rng("seeds")
        picks = rng.sample(range(self.config.plds), min(count, self.config.plds))
        return [self.url(self.hosts_of[i][0]) for i in picks]

    # -- ground truth ---------------------------------------------------------------------
    def classify(self, host: str, target: str) -> str:
        """What a request is: robots, spam, trap, page, or unresolvable (for the judge)."""
        h = self.host(host)
        if h is None:
            return "unresolvable"
        path, _, query = target.partition("?")
        if path in ROBOTS_PATHS:
            return "robots"
        if h.kind == "spam":
            return "spam"
        if h.calendar and path.startswith("/calendar/"):
            return "trap"
        if h.session and "sid=" in query:
            return "trap"
        if h.loop and path.startswith("/docs/more/"):
            return "trap"
        return "page"

    def ground_truth(self) -> dict[str, Any]:
        """Everything a judge needs, as JSON-able data (``--ground-truth`` files)."""
        return {
            "config": json.loads(self.config.to_json()),
            "plds": [
                {
                    "name": p.name,
                    "display": p.display,
                    "kind": p.kind,
                    "in_degree": self.in_degree[p.index],
                    "out_links": [self.plds[t].name for t in self.out_links[p.index]],
                    "hosts": self.hosts_of[p.index] if p.kind == "legit" else None,
                }
                for p in self.plds
            ],
            "hosts": {
                h.name: {
                    "ip": h.ip,
                    "pages": h.pages,
                    "robots": h.robots,
                    "calendar": h.calendar,
                    "session": h.session,
                    "drip": h.drip,
                    "loop": h.loop,
                }
                for h in self.hosts.values()
            },
            "blog_users": {"count": self.config.blog_users, "pattern": f"u<N>.{BLOG_PLD}", "ips": self.blog_ips},
            "spam": {"plds": [p.name for p in self.spam_plds], "ips": self.spam_ips,
                     "entries": [self.plds[i].name for i in self.spam_entries]},
            "ips": self.ips,
        }  # fmt: skip


def _with(host: Host, field: str, value: Any) -> Host:
    changes: dict[str, Any] = {field: value}
    return dataclasses.replace(host, **changes)


@lru_cache(maxsize=4)
def web_for(config: WebConfig) -> Web:
    """A shared :class:`Web` per config (building one takes tens of milliseconds)."""
    return Web(config)
