"""Render any simweb response from ``(web, host, request target)``: a pure function.

Legitimate hosts serve ``/`` and ``/p/<n>.html`` (a 4-ary tree plus random in-site links,
cross-PLD links from the PLD graph) and a catalogue of bad inputs under fixed paths, listed
in ``docs/simweb.rst``. Blog, blog-index and spam hosts have their own generators. Nothing
here keeps state: the same arguments always give the same bytes.
"""

from __future__ import annotations

import html
import random
from dataclasses import dataclass, field
from functools import lru_cache

from scrapy_irl.simweb.model import Host, Web

WORDS = [
    "crawler",
    "web",
    "page",
    "link",
    "site",
    "host",
    "domain",
    "server",
    "robots",
    "politeness",
    "budget",
    "queue",
    "disk",
    "frontier",
    "spam",
    "trap",
    "calendar",
    "session",
    "archive",
    "news",
    "shop",
    "forum",
    "docs",
    "blog",
    "search",
    "index",
    "market",
    "river",
    "mountain",
    "garden",
    "library",
    "music",
    "travel",
    "recipe",
    "weather",
    "science",
    "history",
]
SPAM_WORDS = [
    "cheap",
    "pills",
    "casino",
    "free",
    "bonus",
    "win",
    "loans",
    "replica",
    "viagra",
    "poker",
    "deals",
]
REDIRECT_CHAIN_MAX = 20
LONG_URL_MAX = 16000
ERROR_STATUSES = (400, 403, 404, 410, 429, 500, 502, 503)
#: Statuses whose /status/ page carries ``Retry-After: <config.retry_after>``.
RETRY_AFTER_STATUSES = (429, 503)
REASONS = {
    200: "OK", 301: "Moved Permanently", 302: "Found", 400: "Bad Request", 403: "Forbidden",
    404: "Not Found", 410: "Gone", 414: "URI Too Long", 421: "Misdirected Request",
    429: "Too Many Requests", 431: "Request Header Fields Too Large", 500: "Internal Server Error",
    501: "Not Implemented", 502: "Bad Gateway", 503: "Service Unavailable",
}  # fmt: skip
HTML_UTF8 = "text/html; charset=utf-8"
HUGE_ROBOTS_LIMIT = 500 * 1024


@dataclass
class Reply:
    """A response the server sends: ``delay`` seconds before it, or dripped slowly."""

    status: int
    body: bytes = b""
    content_type: str | None = HTML_UTF8
    headers: list[tuple[str, str]] = field(default_factory=list)
    delay: float = 0.0
    drip: bool = False


def respond(web: Web, host: Host, target: str) -> Reply:
    """The response of ``host`` to a GET of ``target`` (path and query, dot segments removed)."""
    path, _, query = target.partition("?")
    if path == "/robots.txt":
        return robots(web, host)
    if path == "/robots-moved.txt":
        return Reply(200, b"User-agent: *\nDisallow: /private/\n", "text/plain")
    if host.kind == "spam":
        return spam_page(web, host, path)
    if host.kind == "blog":
        return blog_page(web, host, path)
    if host.kind == "blogindex":
        return blog_index(web, host, path)
    return legit(web, host, path, query)


# -- robots.txt ------------------------------------------------------------------------------
_MALFORMED_ROBOTS = (
    b"\xef\xbb\xbfUser-agent *\nDisalow: /p/2\nDisallow /nocolon\n<html><body>oops</body></html>\n"
    b"User-agent: *\r\nDisallow: /private/\r\n\x00\xff\xfe garbage line\n"
    b"Crawl-delay: soon\nAllow:\nSitemap: not a url\n   Disallow:    /p/3   # comment\n"
)


@lru_cache(maxsize=1)
def huge_robots() -> bytes:
    """> 500 KiB: real rules first, junk after, and ``Disallow: /`` past the 500 KiB limit."""
    lines = [b"User-agent: *\nDisallow: /private/\n"]
    size = len(lines[0])
    i = 0
    while size < HUGE_ROBOTS_LIMIT + 8 * 1024:
        line = b"Disallow: /junk/%08d/\n" % i
        lines.append(line)
        size += len(line)
        i += 1
    lines.append(b"Disallow: /\n")
    return b"".join(lines)


def robots(web: Web, host: Host) -> Reply:
    kind = host.robots
    text = "text/plain"
    if kind == "allow":
        return Reply(200, b"User-agent: *\nDisallow:\n", text)
    if kind == "disallow":
        body = b"User-agent: *\nDisallow: /private/\nDisallow: /p/1\n\nUser-agent: BadBot\nDisallow: /\n"
        return Reply(200, body, text)
    if kind == "crawl_delay":
        delay = 5 + web.hash("cd", host.name) % 6
        return Reply(
            200, b"User-agent: *\nCrawl-delay: %d\nDisallow: /private/\n" % delay, text
        )
    if kind == "notfound":
        return Reply(404, b"<html><body>no robots here</body></html>")
    if kind == "error":
        return Reply(503, b"<html><body>try later</body></html>")
    if kind == "slow":
        return Reply(
            200,
            b"User-agent: *\nDisallow: /private/\n",
            text,
            delay=web.config.slow_seconds,
        )
    if kind == "huge":
        return Reply(200, huge_robots(), text)
    if kind == "malformed":
        return Reply(200, _MALFORMED_ROBOTS, "text/plain; charset=utf-8")
    if kind == "redirect":
        return redirect(web, host, "/robots-moved.txt", 301)
    if kind == "disallow_all":
        return Reply(200, b"User-agent: *\nDisallow: /\n", text)
    raise ValueError(f"unknown robots kind {kind!r}")


# -- helpers ---------------------------------------------------------------------------------
def redirect(web: Web, host: Host, location: str, status: int = 302) -> Reply:
    if location.startswith("/"):
        location = web.url(host.name, location)
    body = (
        b'<html><body><a href="%s">moved</a></body></html>'
        % html.escape(location).encode()
    )
    return Reply(status, body, headers=[("Location", location)])


def error(status: int, note: str = "") -> Reply:
    return Reply(
        status,
        f"<html><body><h1>{status} {REASONS.get(status, '')}</h1>{note}</body></html>".encode(),
    )


def _text(
    rng: random.Random, n: int, words: tuple[str, ...] | list[str] = WORDS
) -> str:
    return " ".join(rng.choices(words, k=n))


def document(
    title: str, text: str, hrefs: list[str], charset_meta: str | None = "utf-8"
) -> str:
    meta = f'<meta charset="{charset_meta}">' if charset_meta else ""
    items = "".join(
        f'<li><a href="{html.escape(h, quote=True)}">link {i}</a></li>'
        for i, h in enumerate(hrefs)
    )
    return (
        f"<!DOCTYPE html><html><head>{meta}<title>{html.escape(title)}</title></head>"
        f"<body><h1>{html.escape(title)}</h1><p>{text}</p><ul>{items}</ul></body></html>"
    )


def entry_url(web: Web, pld_index: int, rng: random.Random) -> str:
    """A link into another PLD: a host's home or an early page, or a blog user or spam host."""
    pld = web.plds[pld_index]
    port = web.config.port
    if pld.kind == "blog":
        user = int(web.config.blog_users * rng.random() ** 2)
        return f"http://u{user}.{pld.display}:{port}/"
    if pld.kind == "spam":
        return f"http://{rng.getrandbits(40):010x}.{pld.name}:{port}/{rng.getrandbits(32):08x}.html"
    hosts = web.hosts_of[pld_index]
    name = hosts[rng.randrange(len(hosts))]
    host = web.hosts[name]
    display = name[: -len(pld.name)] + pld.display
    if rng.random() < 0.7:
        return f"http://{display}:{port}/"
    return f"http://{display}:{port}/p/{1 + rng.randrange(max(1, min(host.pages - 1, 20)))}.html"


# -- legitimate hosts --------------------------------------------------------------------------
def legit(web: Web, host: Host, path: str, query: str) -> Reply:
    if path == "/":
        return page(web, host, 0)
    parts = path.split("/")
    head = parts[1] if len(parts) > 1 else ""
    if head == "p" and len(parts) == 3 and parts[2].endswith(".html"):
        n = _int(parts[2][:-5])
        if n is not None and 1 <= n < host.pages:
            return page(web, host, n)
        return error(404)
    if head == "private" and len(parts) == 3:
        rng = web.rng("private", host.name, path)
        return Reply(200, document("private", _text(rng, 30), ["/"]).encode())
    if head == "calendar" and host.calendar:
        return calendar(web, host, parts[2:])
    if head == "docs" and host.loop and path.endswith("/"):
        return docs_loop(web, host, path)
    if head == "long":
        if len(path) > LONG_URL_MAX:
            return error(414)
        return Reply(200, document("a very long URL", "long", ["/"]).encode())
    if head == "files" and path.endswith(".pdf"):
        rng = web.rng("pdf", path)
        return Reply(
            200,
            b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n" + rng.randbytes(2048) + b"\n%%EOF\n",
            "application/pdf",
        )
    if head == "img" and path.endswith(".jpg"):
        return Reply(
            200,
            b"\xff\xd8\xff\xe0\x00\x10JFIF\x00"
            + web.rng("jpg", path).randbytes(1500)
            + b"\xff\xd9",
            "image/jpeg",
        )
    if head == "data" and path.endswith(".txt"):
        return Reply(
            200, b'plain text, not <a href="/p/1.html">a link</a>\n', "text/plain"
        )
    if head == "data" and path.endswith(".json"):
        return Reply(200, b'{"links": ["/p/1.html"]}', "application/json")
    if head == "status" and len(parts) == 3:
        code = _int(parts[2])
        if code in RETRY_AFTER_STATUSES and web.config.retry_after:
            return Reply(code, error(code).body,
                         headers=[("Retry-After", str(web.config.retry_after))])  # fmt: skip
        return error(code) if code in ERROR_STATUSES else error(404)
    if head == "redirect":
        return redirects(web, host, parts[2:])
    if head == "slow":
        return Reply(
            200,
            document("slow", "slow page", ["/"]).encode(),
            delay=web.config.slow_seconds,
        )
    if head == "drip" and host.drip:
        return Reply(200, document("drip", "x" * 4096, ["/"]).encode(), drip=True)
    return error(404)


def _int(text: str) -> int | None:
    return (
        int(text)
        if text.isdigit() and len(text) < 10 and str(int(text)) == text
        else None
    )


def redirects(web: Web, host: Host, rest: list[str]) -> Reply:
    if len(rest) == 2 and rest[0] == "chain":
        k = _int(rest[1])
        if k is None or k > REDIRECT_CHAIN_MAX:
            return error(404)
        return redirect(web, host, f"/redirect/chain/{k - 1}" if k > 0 else "/")
    if len(rest) == 2 and rest[0] == "loop" and rest[1] in ("a", "b"):
        return redirect(web, host, "/redirect/loop/" + ("b" if rest[1] == "a" else "a"))
    if rest == ["host"]:
        siblings = web.hosts_of[host.pld.index]
        other = next((h for h in siblings if h != host.name), host.name)
        return Reply(301, b"", headers=[("Location", web.url(other, "/"))])
    return error(404)


def calendar(web: Web, host: Host, rest: list[str]) -> Reply:
    """The infinite calendar trap: every month and day links to its neighbours."""
    nums = [int(x) if x.isdigit() and len(x) <= 5 else None for x in rest if x]
    if not 2 <= len(nums) <= 3 or None in nums:
        return error(404)
    y, m = nums[0], nums[1]
    d = nums[2] if len(nums) == 3 else None
    if not (1 <= y <= 9999 and 1 <= m <= 12 and (d is None or 1 <= d <= 28)):  # type: ignore[operator]
        return error(404)
    assert y is not None and m is not None
    prev_m = (y, m - 1) if m > 1 else (y - 1, 12)
    next_m = (y, m + 1) if m < 12 else (y + 1, 1)
    hrefs = [f"/calendar/{a}/{b:02d}/" for a, b in (prev_m, next_m)]
    if d is None:
        hrefs += [f"/calendar/{y}/{m:02d}/{day:02d}/" for day in (1, 8, 15, 22)]
    else:
        hrefs += [
            f"/calendar/{y}/{m:02d}/{day:02d}/"
            for day in (d - 1, d + 1)
            if 1 <= day <= 28
        ]
    rng = web.rng("cal", host.name, y, m, d)
    return Reply(200, document(f"Events {y}-{m:02d}", _text(rng, 20), hrefs).encode())


def docs_loop(web: Web, host: Host, path: str) -> Reply:
    """The path loop trap: a template with a relative link, served for any path below.

    A site that answers /docs/<anything>/ with its docs page (path info ignored) and links
    ``more/`` relatively grows the path by one step per hop: /docs/more/more/... forever,
    the same page under endless URLs.
    """
    if len(path) > LONG_URL_MAX:
        return error(414)
    rng = web.rng("docs", host.name)
    return Reply(
        200, document("Documentation", _text(rng, 40), ["more/", "/"]).encode()
    )


def page(web: Web, host: Host, n: int) -> Reply:
    """Page ``n`` of a legitimate host, with its links and maybe a bad-input variant."""
    rng = web.rng("page", host.name, n)
    hrefs = links(web, host, n, rng)
    title = f"{host.name} page {n}"
    text = _text(rng, 60)
    variant = web.hash("variant", host.name, n) % 100 if n else 99
    if (
        variant < 3
    ):  # malformed HTML: unquoted, unclosed, stray tags; links still findable
        items = "".join(f"<li><a href={h}>x<div><td>" for h in hrefs)
        body = f'<html><head><title>{title}<body></table></div><p>{text}<ul>{items}<a href="/p/1.html"'.encode()
        return Reply(200, body)
    if variant < 5:  # header says UTF-8, body is Latin-1 (invalid UTF-8 bytes)
        doc = document(title, "café naïve " + text, hrefs, charset_meta=None)
        return Reply(200, doc.encode("latin-1", "replace"))
    if variant < 6:  # no charset anywhere, Latin-1 bytes
        doc = document(title, "señor façade " + text, hrefs, charset_meta=None)
        return Reply(200, doc.encode("latin-1", "replace"), "text/html")
    if variant < 7:  # meta claims windows-1251, body is UTF-8
        doc = document(title, "Grüße " + text, hrefs, charset_meta="windows-1251")
        return Reply(200, doc.encode(), "text/html")
    if variant < 8:  # no Content-Type header at all
        return Reply(200, document(title, text, hrefs).encode(), None)
    return Reply(200, document(title, text, hrefs).encode())


def _same_host_href(web: Web, host: Host, n: int, m: int, rng: random.Random) -> str:
    path = "/" if m == 0 else f"/p/{m}.html"
    style = rng.random()
    if m and style < 0.15:
        href = f"{m}.html" if n else f"p/{m}.html"  # relative to /p/ or /
    elif m and style < 0.25:
        href = f"../p/{m}.html"  # dot segments
    elif style < 0.4:
        href = web.url(host.name, path)
    else:
        href = path
    if host.session:
        href += f"?sid={web.hash('sid', host.name, n, m, rng.random()) % 16**12:012x}"
    return href


def links(web: Web, host: Host, n: int, rng: random.Random) -> list[str]:
    """The hrefs of page ``n``: tree children, random in-site pages, siblings, other PLDs, bad links."""
    count = host.pages
    targets = [c for c in range(4 * n + 1, 4 * n + 5) if c < count]
    targets += [rng.randrange(count) for _ in range(3)] + [0]
    hrefs = [_same_host_href(web, host, n, m, rng) for m in targets]
    pld = host.pld
    siblings = web.hosts_of[pld.index]
    if len(siblings) > 1 and rng.random() < 0.3:
        other = siblings[rng.randrange(len(siblings))]
        hrefs.append(web.url(other[: -len(pld.name)] + pld.display, "/"))
    outs = web.out_links[pld.index]
    primary = siblings[0] == host.name
    if n == 0 and primary:
        hrefs += [entry_url(web, t, rng) for t in outs]
    elif outs and rng.random() < 0.25:
        hrefs.append(entry_url(web, outs[rng.randrange(len(outs))], rng))
    if n == 0 and host.calendar:
        hrefs.append("/calendar/2025/01/")
    if n == 0 and host.drip:
        hrefs.append("/drip/0")
    if n == 0 and host.loop:
        hrefs.append("/docs/")
    if rng.random() < 0.2:
        hrefs.append(f"/private/{rng.randrange(50)}.html")
    if rng.random() < 0.15 or n == 0:
        hrefs.append(bad_link(web, host, rng))
    return hrefs


def bad_link(web: Web, host: Host, rng: random.Random) -> str:
    """One href from the bad-input catalogue (all on loopback names or unresolvable ones)."""
    port = web.config.port
    k = rng.randrange(1000)
    choice = rng.randrange(19)
    return [
        "javascript:void(0)",
        f"mailto:info@{host.pld.name}",
        "/long/" + "x" * (1500 + rng.randrange(4000)),
        f"/files/{k}.pdf",
        f"/img/{k}.jpg",
        f"/data/{k}.txt",
        f"/data/{k}.json",
        f"/status/{ERROR_STATUSES[k % len(ERROR_STATUSES)]}",
        f"/redirect/chain/{3 + k % 6}",
        "/redirect/loop/a",
        "/redirect/host",
        f"/slow/{k}"
        if k % 4 == 0
        else f"/p/../p/{1 + k % max(1, host.pages - 1)}.html",
        f"http://gone{k}.{host.pld.name}:{port}/",
        f"http://dead{k}-nowhere.com:{port}/",
        f"http://{web.plds[web.idn_plds[0]].display}:{port}/"
        if web.idn_plds
        else "#idn",
        "#top",
        "",
        "http://",
        "tel:+100000000",
    ][choice]


# -- blog platform -------------------------------------------------------------------------
def blog_page(web: Web, host: Host, path: str) -> Reply:
    user = int(host.name.split(".", 1)[0][1:])
    if path == "/":
        n = 0
    elif path.startswith("/post/") and path.endswith(".html"):
        n = _int(path[6:-5]) or -1
        if not 1 <= n < host.pages:
            return error(404)
    else:
        return error(404)
    rng = web.rng("blog", user, n)
    hrefs = [f"/post/{m}.html" for m in range(1, min(host.pages, 8))] + ["/"]
    port = web.config.port
    for _ in range(3):
        other = int(web.config.blog_users * rng.random() ** 2)
        hrefs.append(f"http://u{other}.{host.pld.name}:{port}/")
    outs = [t for t in web.out_links[host.pld.index]]
    if outs and rng.random() < 0.3:
        hrefs.append(entry_url(web, outs[rng.randrange(len(outs))], rng))
    elif rng.random() < 0.3:
        hrefs.append(entry_url(web, rng.randrange(web.config.plds), rng))
    return Reply(
        200, document(f"u{user}'s blog, post {n}", _text(rng, 80), hrefs).encode()
    )


def blog_index(web: Web, host: Host, path: str) -> Reply:
    if path == "/":
        k = 0
    elif path.startswith("/dir/") and path.endswith(".html"):
        k = _int(path[5:-5]) or -1
        if not 1 <= k < host.pages:
            return error(404)
    else:
        return error(404)
    port = web.config.port
    users = range(50 * k, min(50 * (k + 1), web.config.blog_users))
    hrefs = [f"http://u{u}.{host.pld.name}:{port}/" for u in users]
    hrefs += [f"/dir/{j}.html" for j in (k - 1, k + 1) if 1 <= j < host.pages]
    return Reply(
        200, document(f"blog directory {k}", "all our bloggers", hrefs).encode()
    )


# -- spam farm ---------------------------------------------------------------------------------
def spam_page(web: Web, host: Host, path: str) -> Reply:
    """Every path exists; each page links to fresh subdomains of its own and other farm PLDs."""
    rng = web.rng("spam", host.name, path)
    own = host.pld.index
    outs = web.out_links[own]
    port = web.config.port
    hrefs = []
    for _ in range(20):
        target = (
            own if rng.random() < 0.5 or not outs else outs[rng.randrange(len(outs))]
        )
        name = web.plds[target].name
        hrefs.append(
            f"http://{rng.getrandbits(40):010x}.{name}:{port}/{rng.getrandbits(32):08x}.html"
        )
    return Reply(
        200,
        document(
            _text(rng, 6, SPAM_WORDS), _text(rng, 200, SPAM_WORDS), hrefs
        ).encode(),
    )
