"""Which requests go through an HTTP proxy: their names are the proxy's to resolve.

Through a proxy Scrapy connects to the proxy and never looks the target's name up; the
names of such a crawl may mean nothing to this machine's DNS (an intranet seen through a
gateway, a simulated web behind a test proxy). Resolving them anyway failed every host
and dropped all its URLs. The rule is Scrapy's own (``HttpProxyMiddleware`` and the HTTP
download handler): ``meta["proxy"]`` decides when the key is present (``None``: direct);
otherwise the ``*_proxy`` environment variables apply, unless ``no_proxy`` lists the host
or the middleware is switched off (``HTTPPROXY_ENABLED``, or its entry set to ``None``).
``ftp:`` requests never go through one: Scrapy's FTP handler connects directly.
A proxy a downloader middleware sets comes too late for the IRL scheduler, which times a
host when its first URL arrives: ``IRL_ALWAYS_PROXIED = True`` says every http(s) request
goes through one (unless its ``meta["proxy"]`` is ``None``).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any
from urllib.request import getproxies, proxy_bypass

from scrapy.downloadermiddlewares.httpproxy import HttpProxyMiddleware
from scrapy.utils.conf import build_component_list
from scrapy.utils.misc import load_object

#: The politeness "address" of a host reached through a proxy: its own name, since the
#: crawler cannot know which server stands behind it (see :func:`server_key`).
PROXIED_PREFIX = "proxied:"


#: Schemes whose download handler connects to the host itself whatever proxy was named
#: (Scrapy's FTP handler, and the add-on's built on it, ignore ``meta["proxy"]``): their
#: hosts are resolved and timed on their own address like any other.
DIRECT_SCHEMES = frozenset({"ftp"})


class ProxyRoutes:
    """``proxied(scheme, host, meta)``: does a request go through a proxy?"""

    def __init__(
        self, env_schemes: frozenset[str], *, middleware_on: bool, always: bool = False
    ) -> None:
        # Schemes with a proxy in the environment, as HttpProxyMiddleware read them.
        self.env_schemes = env_schemes if middleware_on else frozenset()
        #: IRL_ALWAYS_PROXIED: every http(s) request without ``"proxy": None`` is proxied.
        self.always = always
        # proxy_bypass re-reads the environment at every call (~60 us): once per host.
        self._bypassed = lru_cache(maxsize=4096)(lambda host: bool(proxy_bypass(host)))

    @classmethod
    def from_settings(cls, settings: Any) -> ProxyRoutes:
        from scrapy_irl import config

        return cls(frozenset(getproxies()), middleware_on=_middleware_on(settings),
                   always=config.getbool(settings, "IRL_ALWAYS_PROXIED"))  # fmt: skip

    def proxied(self, scheme: str, host: str | None, meta: Mapping[str, Any]) -> bool:
        if scheme in DIRECT_SCHEMES:
            return False
        if "proxy" in meta:
            return bool(meta["proxy"])
        if self.always and scheme in ("http", "https"):
            return True
        if scheme not in self.env_schemes:
            return False
        # As the middleware: no_proxy is honoured for http(s) only.
        return scheme not in ("http", "https") or not (host and self._bypassed(host))


def _middleware_on(settings: Any) -> bool:
    """HttpProxyMiddleware is enabled and in DOWNLOADER_MIDDLEWARES (a subclass counts)."""
    if not settings.getbool("HTTPPROXY_ENABLED", True):
        return False
    for path in build_component_list(settings.getwithbase("DOWNLOADER_MIDDLEWARES")):
        try:
            component = load_object(path) if isinstance(path, str) else path
        except (ImportError, ValueError, NameError, AttributeError):
            continue  # Scrapy itself reports a middleware it cannot load
        if isinstance(component, type) and issubclass(component, HttpProxyMiddleware):
            return True
    return False


def server_key(host: str) -> str:
    """The politeness heaps' address for a proxied host: one per host name."""
    return PROXIED_PREFIX + host


def robots_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    """What a robots.txt request made for a page takes from the page's meta: its proxy
    choice, so the rules come the way the page will (Scrapy's own robots middleware
    drops it, and fetches robots.txt of a ``meta["proxy"]`` crawl directly)."""
    return {"proxy": meta["proxy"]} if "proxy" in meta else {}
