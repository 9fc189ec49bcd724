"""Pay-level domains with tldextract's bundled Public Suffix List (never a network fetch)."""

from __future__ import annotations

from functools import lru_cache

import tldextract

_EXTRACT = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


@lru_cache(maxsize=65536)
def pld_of(host: str) -> str:
    """``www.bbc.co.uk`` -> ``bbc.co.uk``; IPs and names under unknown suffixes stay whole."""
    host = host.lower().rstrip(".")
    parts = _EXTRACT(host)
    if hasattr(parts, "top_domain_under_public_suffix"):
        domain = parts.top_domain_under_public_suffix
    else:  # tldextract < 5.3
        domain = parts.registered_domain
    return domain or host
