"""Strip session-id query parameters: the same page under endless URL variants.

Sites that put a session id into every link (``?sid=...``, ``;jsessionid=...``) turn each
visit into new URLs: URLseen sees no duplicates and the crawl circles one site (a crawler
trap; Yuntis ``003_*.txt`` section on breadth-first traps). Like production crawlers
(Heritrix's canonicalisation rules), the scheduler removes the parameters named in
``IRL_SESSION_PARAMS`` (case-insensitive) and ``;jsessionid=`` path parameters before a
URL is deduplicated and fetched.

``sid`` is also what many sites call a story or section id (PHP-Nuke's
``modules.php?name=News&file=article&sid=1234``, Slashdot's ``?sid=07/08/13/1632218``),
and ``session_id`` / ``sessionid`` what a conference or course site calls a talk or a
class (``?session_id=12``): they are removed only when the value looks like a session
token (:data:`AMBIGUOUS`), as Heritrix's ``StripSessionIDs`` rule removes only
32-character ``sid`` values. Before, every story of such a site was one URL: one
fetched, the rest dropped as duplicates (``sid`` until 2026-11-25, ``session_id`` until
2026-11-28, found by a user probe). The platforms' own names (``PHPSESSID``,
``jsessionid``, ``ASPSESSIONID``, ColdFusion's ``CFID`` and ``CFTOKEN``, whose values
are numbers, osCommerce's ``osCsid`` and Zen Cart's ``zenid``) name nothing but a
session and are always removed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

_JSESSIONID = re.compile(r";jsessionid=[^/?#]*", re.IGNORECASE)
#: Names that also carry content ids: removed only with a session-token value, at
#: least 8 letters and digits, not all digits (a number, a date path, a short id stay).
AMBIGUOUS = frozenset({"sid", "session_id", "sessionid"})
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


_DEFAULT_PORTS = {"http": "80", "https": "443"}


def plain_host_spelling(url: str) -> str | None:
    """``url`` without its scheme's default port (``:80`` for http, ``:443`` for https);
    None when it has none (the common case, decided by a few string operations).
    Deduplication keys on this form: RFC 3986 (6.2.3) makes ``a.test:80`` and ``a.test``
    one authority, the heaps and robots.txt already took them for one server, and one
    link in the long form otherwise made every relative link of the page it led to a new
    URL (a probe, 2026-11-28). A trailing dot is not folded: ``a.test.`` is another
    authority to the URL rules, many servers answer it differently, and an IP literal
    with one cannot be fetched at all (folded, the real page was lost as its duplicate)."""
    scheme, sep, rest = url.partition("://")
    default = _DEFAULT_PORTS.get(scheme.lower()) if sep else None
    if default is None:
        return None
    end = min((found for found in map(rest.find, "/?#") if found != -1), default=len(rest))
    host, colon, port = rest[:end].rpartition(":")
    if not colon or port != default or not host or "@" in host or "[" in host:
        return None
    return f"{scheme}://{host}{rest[end:]}"
