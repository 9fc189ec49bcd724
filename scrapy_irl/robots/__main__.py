"""Ask a persisted robots.txt cache about URLs, without Scrapy running.

    python -m scrapy_irl.robots STORE URL [URL ...] [--user-agent UA] [--json] [--ttl S]
    python -m scrapy_irl.robots STORE --list [--json] [--ttl S]

``STORE`` is a host store directory (``IRL_HOSTS_DIR``, ``JOBDIR/irl/hosts``, or a
project's ``.scrapy/irl/hosts``); a JOBDIR is accepted too. For each URL: its origin,
what the cache holds for it (rules, allow all, disallow all, or nothing), whether that
record is still fresh, whether the user agent may fetch the URL by it, and its
Crawl-delay. Nothing is fetched (an undecodable record is dropped, as a crawl would). LevelDB lets one process open a
store: while a crawl holds it, this refuses and says so (copy the directory to read it).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from scrapy_irl.exceptions import HostStoreError, HostStoreLockedError
from scrapy_irl.hosts.records import RobotsKind, RobotsRecord
from scrapy_irl.hosts.store import HostStore, headless_data
from scrapy_irl.robots.cache import CachedRobots, RobotsCache
from scrapy_irl.robots.origin import HTTP_ORIGINS, origin_of
from scrapy_irl.robots.policy import RobotsPolicy
from scrapy_irl.settings import IRL_CRAWL_DELAY_MAX, IRL_ROBOTS_TTL

KIND_NAMES = {RobotsKind.RULES: "rules", RobotsKind.ALLOW_ALL: "allow all",
              RobotsKind.DISALLOW_ALL: "disallow all"}  # fmt: skip


def store_path(given: str) -> Path:
    """The host store in ``given`` (itself, or a JOBDIR's ``irl/hosts``); a clear error
    for a directory that holds none (opening would create an empty one)."""
    path = Path(given)
    for candidate in (path, path / "irl" / "hosts"):
        # A store whose CURRENT is gone is still a store: HostStore says it is damaged.
        if (candidate / "CURRENT").is_file() or headless_data(candidate):
            return candidate
    raise HostStoreError(
        f"{given} holds no host store (no LevelDB CURRENT file in it or in its irl/hosts)"
    )


def _parse(body: bytes) -> Any:
    """Decoded as Scrapy's ProtegoRobotParser decodes it (a UTF-8 BOM dropped, undecodable
    bytes ignored): with ``decode("utf-8")`` a BOM glued to the first line hid its rule,
    and this command said "allowed" where the crawl had refused (a probe, 2026-11-28)."""
    from protego import Protego
    from scrapy.robotstxt import decode_robotstxt

    return _ProtegoRules(Protego.parse(decode_robotstxt(body, None)))


class _ProtegoRules:
    """Protego as a RuleSet (as Scrapy's ProtegoRobotParser, without a crawler)."""

    def __init__(self, rp: Any) -> None:
        self.rp = rp

    def allowed(self, url: str | bytes, user_agent: str | bytes) -> bool:
        return bool(self.rp.can_fetch(_text(url), _text(user_agent)))

    def crawl_delay(self, user_agent: str | bytes) -> float | None:
        value = self.rp.crawl_delay(_text(user_agent))
        return None if value is None else float(value)


def _seconds(text: str) -> float:
    """A non-negative, finite number of seconds (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"need 0 <= seconds < inf, got {text!r}")
    return value


def _positive_seconds(text: str) -> float:
    """A positive, finite number of seconds (argparse type)."""
    value = _seconds(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"need seconds > 0, got {text!r}")
    return value


def _text(value: str | bytes) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


class _DamageCount:
    """Counts the records the cache dropped as undecodable: a damaged record read as
    "nothing cached" and the command exited 0 on a store it should call damaged."""

    def __init__(self) -> None:
        self.records = 0
        #: Origins found damaged: dropped from the store by the first read, a second URL
        #: of the origin read as "nothing cached".
        self.origins: set[str] = set()

    def __call__(self, event: str) -> None:
        if event == "corrupt_record":
            self.records += 1


def describe(
    cache: RobotsCache, url: str, user_agent: str, now: float, damage: _DamageCount | None = None,
    crawl_delay_max: float | None = None,
) -> dict[str, Any]:
    """What the cache says about ``url`` for ``user_agent`` (JSON-ready); with ``damage``
    (the cache's event counter), a record that failed to decode is marked ``damaged``."""
    # As Scrapy's Request does (safe_url_string): a crawl stores https://bücher.de/ under
    # https://xn--bcher-kva.de and matches rules against the percent-encoded path.
    safe = _idna_url(url)
    try:
        origin = origin_of(urlsplit(safe))
    except ValueError:
        origin = None
    if origin is None:
        return {"url": url, "error": "not a URL with a host"}
    if not origin.startswith(HTTP_ORIGINS):
        # the crawl lets such URLs through unchecked (irl_robots/other_scheme): "nothing
        # cached (the crawl would fetch it)" told a user it would fetch a robots.txt
        return {"url": url, "origin": origin, "checked": False}
    before = damage.records if damage is not None else 0
    cached = cache.get(origin)
    if cached is None:
        damaged = damage is not None and (damage.records > before or origin in damage.origins)
        if damaged:
            damage.origins.add(origin)  # type: ignore[union-attr]
        return {"url": url, "origin": origin, "cached": False, **({"damaged": True} if damaged else {})}
    delay = cached.crawl_delay(user_agent)
    info = {"url": url, "origin": origin, "cached": True, **_record(cached, now),
            "allowed": cached.allowed(safe, user_agent), "crawl_delay": delay}  # fmt: skip
    if crawl_delay_max is not None and delay is not None and delay > crawl_delay_max:
        # The crawl refuses the origin's URLs (IRL_CRAWL_DELAY_OVER_MAX "skip"): "allowed"
        # alone told a user the opposite of what the crawl does.
        info["crawl_delay_over_max"] = True
    return info


def _idna_url(url: str) -> str:
    """``url`` with its host in IDNA (punycode), as the crawl that filled the store saw it."""
    try:
        from w3lib.url import safe_url_string
    except ImportError:  # pragma: no cover (w3lib comes with Scrapy)
        return url
    try:
        return safe_url_string(url)
    except (ValueError, UnicodeError):
        return url


def _record(cached: CachedRobots, now: float) -> dict[str, Any]:
    record = cached.record
    return {
        "kind": KIND_NAMES[record.kind],
        "status": record.status,
        "fresh": record.is_fresh(now),
        "fetched_at": record.fetched_at,
        "expires_at": record.expires_at,
        "failures": record.failures,
        "bytes": len(record.body),
    }


def _line(info: dict[str, Any]) -> str:
    if "error" in info:
        return f"{info['url']}: {info['error']}"
    if info.get("checked") is False:
        return (f"{info['url']}: not checked (the crawl obeys robots.txt for http and https "
                "URLs only, and lets this one through)")  # fmt: skip
    if info.get("damaged"):
        return (f"{info['url']}: the record of {info['origin']} is damaged (dropped; the crawl "
                "would fetch robots.txt again)")  # fmt: skip
    if not info["cached"]:
        return f"{info['url']}: nothing cached for {info['origin']} (the crawl would fetch it)"
    verdict = "allowed" if info["allowed"] else "DISALLOWED"
    state = "fresh" if info["fresh"] else "expired (the crawl would fetch it again)"
    delay = f", Crawl-delay {info['crawl_delay']:g} s" if info["crawl_delay"] else ""
    line = (f"{info['url']}: {verdict} by {info['origin']}/robots.txt ({info['kind']}, "
            f"HTTP {info['status']}, {state}{delay})")  # fmt: skip
    if info.get("crawl_delay_over_max") and info["allowed"]:
        line += ("; but its Crawl-delay is above --crawl-delay-max (IRL_CRAWL_DELAY_MAX): "
                 "with IRL_CRAWL_DELAY_OVER_MAX 'skip', the default, the crawl refuses it")
    return line


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scrapy_irl.robots", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("store", help="host store directory (or a JOBDIR)")
    parser.add_argument("urls", nargs="*", help="URLs to check")
    parser.add_argument("--user-agent", default="*", help="user agent to check for (default *)")
    parser.add_argument("--list", action="store_true", help="list every cached origin instead")
    parser.add_argument("--json", action="store_true", help="one JSON object a line")
    parser.add_argument(
        "--crawl-delay-max", type=_seconds, default=IRL_CRAWL_DELAY_MAX, metavar="SECONDS",
        help="the crawl's IRL_CRAWL_DELAY_MAX: a longer Crawl-delay is flagged, as the crawl "
             f"refuses such an origin's URLs by default (default {IRL_CRAWL_DELAY_MAX:g})",
    )  # fmt: skip
    parser.add_argument(
        "--ttl", type=_positive_seconds, default=IRL_ROBOTS_TTL, metavar="SECONDS",
        help="the crawl's IRL_ROBOTS_TTL: a record checked longer ago is shown expired, as "
             f"the crawl fetches it again (default {IRL_ROBOTS_TTL:g})",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if not args.urls and not args.list:
        parser.error("give URLs to check, or --list")
    now = time.time()
    damage = _DamageCount()
    bad_urls = 0
    try:
        with HostStore(store_path(args.store)) as store:
            cache = RobotsCache(store, _parse, on_event=damage,
                                reread=_answers_within(args.ttl))  # fmt: skip
            if args.list:
                _list(store, cache, now, as_json=args.json)
            else:
                for url in args.urls:
                    info = describe(cache, url, args.user_agent, now, damage, args.crawl_delay_max)
                    print(json.dumps(info) if args.json else _line(info))
                    bad_urls += "error" in info
    except HostStoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        if isinstance(exc, HostStoreLockedError):  # its advice is for crawls, not readers
            print(f"to read it while the crawl runs, copy the directory (cp -r {args.store} "
                  "COPY) and give the copy", file=sys.stderr)  # fmt: skip
        return 2
    if damage.records:
        print(f"error: host store {args.store} is damaged: {damage.records} robots.txt "
              "record(s) could not be read (a crawl drops and refetches them; move the "
              "store away to start a fresh cache)", file=sys.stderr)  # fmt: skip
        return 2
    if bad_urls:  # each named above; a script must see it in the status too
        return 1
    return 0


def _answers_within(ttl: float) -> Callable[[RobotsRecord], RobotsRecord]:
    """A record's expiry as a crawl with IRL_ROBOTS_TTL ``ttl`` reads it (see
    ``RobotsPolicy.within_limits``). A failed fetch keeps its stored back-off: it depends
    on IRL_ROBOTS_RETRY_* settings the command does not take."""
    policy = RobotsPolicy(ttl=ttl)

    def reread(record: RobotsRecord) -> RobotsRecord:
        return policy.within_limits(record) if record.failures == 0 else record

    return reread


def _list(store: HostStore, cache: RobotsCache, now: float, *, as_json: bool) -> None:
    for origin in store.robots_origins():
        cached = cache.get(origin)
        if cached is None:  # dropped as damaged: counted, reported at the end
            row: dict[str, Any] = {"origin": origin, "damaged": True}
            print(json.dumps(row) if as_json else f"{origin}: damaged record (dropped)")
            continue
        row = {"origin": origin, **_record(cached, now)}
        print(json.dumps(row) if as_json else
              f"{row['origin']}: {row['kind']}, HTTP {row['status']}, "
              f"{'fresh' if row['fresh'] else 'expired'}")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
