"""Strip session-id query parameters: the same page under endless URL variants.

Sites that put a session id into every link (``?sid=...``, ``;jsessionid=...``) turn each
visit into new URLs: URLseen sees no duplicates and the crawl circles one site (a crawler
trap; Yuntis ``003_*.txt`` section on breadth-first traps). Like production crawlers
(Heritrix's canonicalisation rules), the scheduler removes the parameters named in
``IRL_SESSION_PARAMS`` (case-insensitive) and ``;jsessionid=`` path parameters before a
URL is deduplicated and fetched.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

_JSESSIONID = re.compile(r";jsessionid=[^/?#]*", re.IGNORECASE)


class SessionStripper:
    """Removes session-id parameters from URLs; returns None when nothing changes."""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = frozenset(n.lower() for n in names)

    def __call__(self, url: str) -> str | None:
        if not self.names:
            return None
        parts = urlsplit(url)
        path = (
            _JSESSIONID.sub("", parts.path)
            if "jsessionid" in self.names
            else parts.path
        )
        query = parts.query
        if query:
            kept = [
                p
                for p in query.split("&")
                if p.split("=", 1)[0].lower() not in self.names
            ]
            query = "&".join(kept)
        if path == parts.path and query == parts.query:
            return None
        return urlunsplit((parts.scheme, parts.netloc, path, query, parts.fragment))
