"""The URL robots.txt rules are matched against: its path without dot segments.

A link may carry ``.`` and ``..`` segments (``http://h/./private/x``,
``http://h/x/../private/y``): Scrapy keeps them in an absolute URL, and robots.txt
parsers (Protego, Scrapy's own) match the path as written, so ``Disallow: /private``
did not match, while the server, resolving the segments as RFC 3986 section 5.2.4 says
(Apache, nginx and Python's ``http.server`` do), served ``/private/x``. A probe fetched two
such pages in stock Scrapy and in scrapy-irl alike. Rules are matched here against the
path the server will serve; the request itself is sent unchanged.

Empty segments likewise: nginx (``merge_slashes``, on by default) and ``http.server``
serve ``//private/x`` as ``/private/x``, which ``Disallow: /private/`` did not match (a
probe, 2026-11-29), while others (Apache) serve it as written. A URL whose path has
repeated slashes is therefore allowed only if both forms are (:func:`urls_for_rules`).
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

_DOT = frozenset({".", "%2e"})
_DOTDOT = frozenset({"..", ".%2e", "%2e.", "%2e%2e"})


def remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4 for an absolute path (``%2E`` counts as ``.``)."""
    segments = path.split("/")
    out: list[str] = []
    for segment in segments:
        low = segment.lower()
        if low in _DOT:
            continue
        if low in _DOTDOT:
            if len(out) > 1:  # never above the root
                out.pop()
            continue
        out.append(segment)
    resolved = "/".join(out)
    if segments[-1].lower() in _DOT or segments[-1].lower() in _DOTDOT:
        resolved += "/"  # "/a/." and "/a/b/.." name a directory
    if not resolved.startswith("/"):
        resolved = "/" + resolved
    return resolved


def url_for_rules(url: str) -> str:
    """``url`` with dot segments removed from its path; unchanged (the same object) when
    it has none, the common case, at the cost of three substring tests."""
    if "/." not in url and "/%2e" not in url and "/%2E" not in url:
        return url
    parts = urlsplit(url)
    path = parts.path
    if not path.startswith("/"):
        return url
    lowered = path.lower()
    if "/." not in lowered and "/%2e" not in lowered:
        return url
    return urlunsplit(parts._replace(path=remove_dot_segments(path)))


def urls_for_rules(url: str) -> tuple[str, ...]:
    """The URLs whose paths the rules must all allow: :func:`url_for_rules`, and, when
    the path repeats slashes, the forms a server that merges them may serve: merged
    before the dot segments are resolved (nginx, ``http.server``: ``/a//../private/x`` is
    ``/private/x``) and after (``/a/.//b`` is ``/a/b``)."""
    resolved = url_for_rules(url)
    start = url.find("://")
    if url.find("//", start + 3 if start >= 0 else 0) < 0:
        return (resolved,)  # the common case: no repeated slash anywhere after the scheme
    parts = urlsplit(url)
    if "//" not in parts.path or not parts.path.startswith("/"):
        return (resolved,)  # in the query ("?next=http://...") or the fragment
    forms = [resolved]
    for path in (remove_dot_segments(_merged(parts.path)),
                 _merged(remove_dot_segments(parts.path))):  # fmt: skip
        form = urlunsplit(parts._replace(path=path))
        if form not in forms:
            forms.append(form)
    return tuple(forms)


def _merged(path: str) -> str:
    """``path`` with each run of slashes made one."""
    merged = "/" + "/".join(segment for segment in path.split("/") if segment)
    if path.endswith("/") and merged != "/":
        merged += "/"
    return merged
