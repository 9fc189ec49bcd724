"""Strip session-id query parameters: the same page under endless URL variants.

Sites that put a session id into every link (``?sid=...``, ``;jsessionid=...``) turn each
visit into new URLs: URLseen sees no duplicates and the crawl circles one site (a crawler
trap; Yuntis ``003_*.txt`` section on breadth-first traps). Like production crawlers
(Heritrix's canonicalisation rules), the scheduler removes the parameters named in
``IRL_SESSION_PARAMS`` (case-insensitive) and ``;jsessionid=`` path parameters before a
URL is deduplicated and fetched.

``sid`` is also what many sites call a story or section id (PHP-Nuke's
``modules.php?name=News&file=article&sid=1234``, Slashdot's ``?sid=07/08/13/1632218``):
it is removed only when its value looks like a session token (:data:`AMBIGUOUS`), as
Heritrix's ``StripSessionIDs`` rule removes only 32-character ``sid`` values. Before,
every story of such a site was one URL: one fetched, the rest dropped as duplicates.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

_JSESSIONID = re.compile(r";jsessionid=[^/?#]*", re.IGNORECASE)
#: Names that also carry content ids: removed only with a session-token value, at
#: least 8 letters and digits, not all digits (a number, a date path, a short id stay).
AMBIGUOUS = frozenset({"sid"})
_TOKEN = re.compile(r"(?=[0-9]*[A-Za-z])[0-9A-Za-z]{8,}")


def _is_session(param: str, names: frozenset[str]) -> bool:
    name, _, value = param.partition("=")
    name = name.lower()
    if name not in names:
        return False
    return name not in AMBIGUOUS or _TOKEN.fullmatch(value) is not None


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
            kept = [p for p in query.split("&") if not _is_session(p, self.names)]
            query = "&".join(kept)
        if path == parts.path and query == parts.query:
            return None
        return urlunsplit((parts.scheme, parts.netloc, path, query, parts.fragment))
