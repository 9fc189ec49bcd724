"""Pay-level domains with tldextract's bundled Public Suffix List (never a network fetch)."""

from __future__ import annotations

import ipaddress
from functools import lru_cache

import tldextract

_EXTRACT = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


@lru_cache(maxsize=65536)
def pld_of(host: str) -> str:
    """``www.bbc.co.uk`` -> ``bbc.co.uk``; IP literals and single labels stay whole.

    A name under a suffix the list does not know (``a.b.corp``, ``x.farm.test``) gets the
    list's own default rule, ``*``: its last label is the public suffix, so its PLD is its
    last two labels (``b.corp``, ``farm.test``). Taking the whole host instead would make
    every subdomain of such a site a PLD of its own, and a farm of subdomains could link
    itself into budgets STAR is meant to deny it.
    """
    host = host.lower().rstrip(".")
    parts = _EXTRACT(host)
    if hasattr(parts, "top_domain_under_public_suffix"):
        domain = parts.top_domain_under_public_suffix
    else:  # tldextract < 5.3
        domain = parts.registered_domain
    if domain:
        return domain
    if parts.suffix or _is_ip_literal(host):
        return host  # a name that is a public suffix itself, or an address
    return ".".join(host.split(".")[-2:])


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True
