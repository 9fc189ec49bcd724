"""A Scrapy ``TWISTED_DNS_RESOLVER`` answering simweb hostnames from the model, never from DNS.

Settings (process settings: Scrapy reads ``TWISTED_DNS_RESOLVER`` only there)::

    TWISTED_DNS_RESOLVER = "scrapy_irl.simweb.resolver.SimwebResolver"
    IRL_SIMWEB_CONFIG = "/path/simweb.json"   # written by ``python -m scrapy_irl.simweb``
    # or, without a file: IRL_SIMWEB_SIZE / IRL_SIMWEB_SEED / IRL_SIMWEB_PLDS

Names outside the web fail with :class:`~twisted.internet.error.DNSLookupError`, as for
NXDOMAIN, so a crawl cannot leave loopback through DNS; but ``localhost`` and its
subdomains (RFC 6761), and names the hosts file (``/etc/hosts``, or
``IRL_SIMWEB_HOSTS_FILE``) maps to a loopback address, resolve to that address: a project that keeps this resolver can still crawl a
test site of its own on loopback (``-a seeds=...``). Nothing is ever asked of a DNS server.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy.resolver import CachingThreadedResolver, dnscache
from twisted.internet import defer
from twisted.internet.error import DNSLookupError
from twisted.python.filepath import FilePath

from scrapy_irl import config
from scrapy_irl.simweb.config import MAX_PLDS, MIN_PLDS, SIZES, WebConfig
from scrapy_irl.simweb.model import Web, web_for

if TYPE_CHECKING:
    from collections.abc import Sequence

    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)


def config_from_settings(settings: BaseSettings) -> WebConfig:
    """The web a crawl targets: ``IRL_SIMWEB_CONFIG`` file if set, else size/seed/plds settings.

    Every bad value is a ValueError naming its setting, raised before the web is built.
    """
    path = config.getpath(settings, "IRL_SIMWEB_CONFIG")
    if path:
        return _config_file(path)
    size = config.getstr(settings, "IRL_SIMWEB_SIZE", choices=SIZES)
    seed = config.getint(settings, "IRL_SIMWEB_SEED")
    plds = config.getint(settings, "IRL_SIMWEB_PLDS", minimum=0, maximum=MAX_PLDS)
    if 0 < plds < MIN_PLDS:
        raise ValueError(f"IRL_SIMWEB_PLDS must be 0 (the size's number) or within "
                         f"{MIN_PLDS}..{MAX_PLDS}, got {plds!r}")  # fmt: skip
    port = config.getint(settings, "IRL_SIMWEB_PORT", minimum=0, maximum=65535)
    return WebConfig.sized(size, seed=seed, plds=plds or None, port=port or None)


def _config_file(path: str) -> WebConfig:
    """The ``IRL_SIMWEB_CONFIG`` file; a missing or unreadable one names the setting."""
    try:
        return WebConfig.from_json(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        raise ValueError(f"invalid IRL_SIMWEB_CONFIG={path!r}: {exc}") from exc


class SimwebResolver(CachingThreadedResolver):
    """Resolves simweb names to their 127.x address synchronously; everything else NXDOMAIN."""

    def __init__(
        self, reactor: Any, web: Web, cache_size: int = 10000, timeout: float = 60.0,
        hosts_file: str | Path = "/etc/hosts",
    ) -> None:  # fmt: skip
        super().__init__(reactor, cache_size, timeout)
        self.web = web
        self.hosts_file = FilePath(str(hosts_file))

    @classmethod
    def from_crawler(cls, crawler: Crawler, reactor: Any) -> SimwebResolver:
        settings = crawler.settings
        cache_size = (
            settings.getint("DNSCACHE_SIZE")
            if settings.getbool("DNSCACHE_ENABLED")
            else 0
        )
        web = web_for(config_from_settings(settings))
        hosts_file = config.getpath(settings, "IRL_SIMWEB_HOSTS_FILE") or "/etc/hosts"
        return cls(reactor, web, cache_size, settings.getfloat("DNS_TIMEOUT"), hosts_file)

    def resolve(self, name: str) -> str | None:
        """The address of ``name``: loopback IP literals as themselves, simweb names from
        the model, then localhost names and loopback entries of the hosts file."""
        try:
            literal = ipaddress.ip_address(name)
        except ValueError:
            pass
        else:
            return str(literal) if literal.is_loopback else None
        ip = self.web.resolve(name)
        if ip is not None:
            return ip
        lowered = name.lower().rstrip(".")
        if lowered == "localhost" or lowered.endswith(".localhost"):
            return "127.0.0.1"
        return self._hosts_file_loopback(lowered)

    def _hosts_file_loopback(self, name: str) -> str | None:
        """``name``'s address in the hosts file if it is a loopback one (read at each
        lookup: answers are cached by Scrapy's dnscache and the host store anyway)."""
        from twisted.names.hosts import searchFileForAll

        try:
            found = searchFileForAll(self.hosts_file, name.encode("idna"))
        except (OSError, UnicodeError, ValueError):
            return None
        for address in found:
            try:
                if ipaddress.ip_address(address).is_loopback:
                    return address
            except ValueError:
                continue
        return None

    def getHostByName(
        self, name: str, timeout: Sequence[int] = ()
    ) -> defer.Deferred[str]:
        ip = self.resolve(name)
        if ip is None:
            return defer.fail(DNSLookupError(f"simweb: no such host {name!r}"))
        dnscache[name] = ip
        return defer.succeed(ip)


def write_config(config: WebConfig, path: str | Path) -> None:
    """Write the JSON file ``IRL_SIMWEB_CONFIG`` points at, whole or not at all: written
    beside it, then renamed, so a reader that waits for the file to exist never reads
    it half written (a test harness did, once: JSONDecodeError, 2026-11-28)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(json.loads(config.to_json()), indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)
