"""``WarcExtension``: every response Scrapy downloads, kept in rotating WARC 1.1 files.

The WebBase page repository (``shared/seeds/000_*.txt`` section 3) for Scrapy, on any
project: ``EXTENSIONS = {"scrapy_irl.warc.extension.WarcExtension": 0}`` is enough
(``IRL_WARC_ENABLED = False`` turns it off). Each response the download handler returns (any status, any
content type, robots.txt included) becomes a ``response`` record and its request a
``request`` record pointing to it with ``WARC-Concurrent-To``. Records are written on
Scrapy's ``response_downloaded`` signal, before the downloader middlewares see the
response: redirects that ``RedirectMiddleware`` or ``MetaRefreshMiddleware`` follow, and
responses a middleware drops, are archived too, and bodies are kept as sent (still
``Content-Encoding``-encoded; only the chunked framing is gone, see ``docs/warc.rst``).
Responses served from HttpCacheMiddleware's cache are not downloaded, so not archived;
bodies cut short (a dropped connection, or a download a handler stopped) are marked
``WARC-Truncated``. Writing never breaks the crawl: errors are
logged once per kind and counted.
"""

from __future__ import annotations

import io
import logging
import os
import time
from collections.abc import Callable
from http import HTTPStatus
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.job import job_dir

from scrapy_irl import config
from scrapy_irl import settings as defaults
from scrapy_irl.refusal import refusing_start
from scrapy_irl.startfail import release_if_start_fails
from scrapy_irl.warc.writer import RawHttpHeaders, RotatingWarcWriter, warc_date

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Headers, Response
    from scrapy.settings import BaseSettings
    from warcio.recordloader import ArcWarcRecord

logger = logging.getLogger(__name__)

STAT_PREFIX = "irl_warc"

#: Defaults of the ``IRL_WARC_*`` settings: :mod:`scrapy_irl.config` falls back to
#: :mod:`scrapy_irl.settings`, so the extension works in any project, with or without the
#: add-on, and a bad value is refused at start with the setting named.
DEFAULT_ENABLED = defaults.IRL_WARC_ENABLED
DEFAULT_DIR = defaults.IRL_WARC_DIR
DEFAULT_PREFIX = defaults.IRL_WARC_PREFIX
DEFAULT_MAX_BYTES = defaults.IRL_WARC_MAX_BYTES
DEFAULT_GZIP = defaults.IRL_WARC_GZIP

#: Response headers describing the transfer framing (chunked) Twisted has already removed.
_DROPPED_RESPONSE_HEADERS = frozenset({b"transfer-encoding"})
#: Request headers not meant for the target server (credentials for a proxy).
_DROPPED_REQUEST_HEADERS = frozenset({b"proxy-authorization"})
_HTTP_SCHEMES = ("http", "https")
#: Statuses that must not carry ``Content-Length`` (RFC 9110 8.6). Scrapy's HTTP/1.1 handler
#: adds ``Content-Length: 0`` to them itself (from Twisted's body length), which is not
#: what the server sent.
_NO_CONTENT_LENGTH_STATUSES = frozenset({204, *range(100, 200)})
#: A 304's ``Content-Length``, like a HEAD response's, describes the body of a 200 to a GET,
#: not this message's (empty) body: it is kept as Scrapy has it, except a ``0``. Twisted
#: gives these responses a body length of 0, which Scrapy's HTTP/1.1 handler writes as
#: ``Content-Length: 0`` whether or not the server sent one; a server's own value replaces
#: it for HEAD (Twisted keeps it as an entity header), while a 304's never reaches Scrapy
#: from that handler (Twisted consumes it). A ``0`` is the handler's, or a server's that
#: cannot be told from it, and is left out.
_NOT_MODIFIED = 304
#: The ``Content-Length`` value Scrapy's HTTP/1.1 handler invents for an empty body.
_INVENTED_LENGTH = b"0"
#: Scrapy's flag on a response cut short: DOWNLOAD_FAIL_ON_DATALOSS=False lets the handler
#: deliver a body shorter than its Content-Length (or chunked framing) announced.
_DATALOSS_FLAG = "dataloss"
#: Scrapy's flag on a response whose download a ``bytes_received`` or ``headers_received``
#: handler stopped with ``StopDownload(fail=False)``: the body is what had arrived then.
_STOPPED_FLAG = "download_stopped"
#: ``request.meta`` key where the code that stops a download may give the WARC-Truncated
#: reason (the robots middleware's IRL_ROBOTS_MAX_BYTES cap sets ``"length"``); any other
#: stop is ``"unspecified"``: Scrapy does not say why a handler stopped.
TRUNCATED_META = "irl_warc_truncated"
#: The WARC-Truncated values of WARC 1.1 section 5.13.
TRUNCATED_REASONS = frozenset({"length", "time", "disconnect", "unspecified"})
#: HttpCacheMiddleware's flag on a response read from its cache, not from the network.
_CACHED_FLAG = "cached"


def warc_dir(settings: BaseSettings) -> str:
    """``IRL_WARC_DIR``, else ``JOBDIR/warc``, else ``warc`` in the current directory."""
    explicit = config.getpath(settings, "IRL_WARC_DIR")
    if explicit:
        return explicit
    jobdir = job_dir(settings)
    return os.path.join(jobdir, "warc") if jobdir else "warc"


def warc_prefix(settings: BaseSettings) -> str:
    """``IRL_WARC_PREFIX``: the first part of every file name, so no ``/`` and not empty."""
    prefix = config.getstr(settings, "IRL_WARC_PREFIX")
    if not prefix or "/" in prefix or os.sep in prefix:
        raise ValueError(
            f"invalid IRL_WARC_PREFIX={prefix!r}: expected a non-empty file name part without '/'"
        )
    return prefix


def _header_lines(
    headers: Headers, dropped: frozenset[bytes]
) -> list[tuple[bytes, bytes]]:
    return [
        (name, value)
        for name, values in headers.items()
        if name.lower() not in dropped
        for value in values
    ]


def _content_length(headers: Headers) -> int | None:
    value = headers.get(b"Content-Length")
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _bodiless(response: Response, request: Request) -> bool:
    """Whether HTTP's rules give this response an empty body (RFC 9110 6.4.1)."""
    return (
        request.method == "HEAD"
        or response.status in _NO_CONTENT_LENGTH_STATUSES
        or response.status == _NOT_MODIFIED
    )


def truncated_reason(response: Response, request: Request) -> str | None:
    """The ``WARC-Truncated`` value of ``response``'s record, None for a whole body.

    ``disconnect`` for Scrapy's ``dataloss`` flag (the connection dropped before the
    announced end). A ``download_stopped`` response (``StopDownload(fail=False)``) is cut
    by a choice of the crawler, not by the network: its reason is ``request.meta``'s
    :data:`TRUNCATED_META` when that is a WARC 1.1 value (the robots middleware's byte cap
    sets ``length``), else ``unspecified``. A stopped response is whole, and not marked,
    when its body is empty by HTTP's rules or already has the announced Content-Length.
    """
    if _DATALOSS_FLAG in response.flags:
        return "disconnect"
    if _STOPPED_FLAG not in response.flags or _bodiless(response, request):
        return None
    announced = _content_length(response.headers)
    if announced is not None and len(response.body) >= announced:
        return None
    reason = request.meta.get(TRUNCATED_META)
    return reason if reason in TRUNCATED_REASONS else "unspecified"


def _replace(lines: list[tuple[bytes, bytes]], name: bytes, value: bytes) -> None:
    lines[:] = [(k, v) for k, v in lines if k.lower() != name.lower()]
    lines.append((name, value))


class WarcExtension:
    """Writes a request and a response record for every response received."""

    def __init__(
        self, crawler: Crawler, *, clock: Callable[[], float] = time.time
    ) -> None:
        settings = crawler.settings
        if not config.getbool(settings, "IRL_WARC_ENABLED"):
            raise NotConfigured
        self.crawler = crawler
        self.stats = crawler.stats
        self.clock = clock
        self._logged: set[str] = set()
        self._closed = False
        self.writer = self._make_writer(settings)
        # Given back at close, or by a failed start (then no close comes); registered
        # first, so that nothing between here and the end can keep the lock held.
        self._give_back_writer = release_if_start_fails(crawler, self.writer.release)
        found = self.writer.recovered
        recovered = [r for r in found if not r.removed and not r.set_aside]
        self.stats.set_value(f"{STAT_PREFIX}/recovered_files", len(recovered))
        self.stats.set_value(
            f"{STAT_PREFIX}/recovered_files_removed", sum(r.removed for r in found)
        )
        self.stats.set_value(
            f"{STAT_PREFIX}/damaged_files_set_aside", sum(r.set_aside for r in found)
        )
        self.stats.set_value(
            f"{STAT_PREFIX}/recovered_bytes_cut",
            sum(r.bytes_cut for r in self.writer.recovered),
        )
        self._update_stats()
        self.stats.set_value(f"{STAT_PREFIX}/write_errors", 0)
        crawler.signals.connect(
            self.response_downloaded, signal=signals.response_downloaded
        )
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        with refusing_start("WarcExtension (WARC directory)", crawler):
            return cls(crawler)

    def _make_writer(self, settings: BaseSettings) -> RotatingWarcWriter:
        """The writer (and the recovery of ``.open`` files); subclasses may swap it."""
        info = {
            "http-header-user-agent": str(settings.get("USER_AGENT") or ""),
            "robots": "obey" if settings.getbool("ROBOTSTXT_OBEY") else "ignore",
        }
        # Read before the writer: a bad value is a ValueError naming its own setting.
        directory, prefix = warc_dir(settings), warc_prefix(settings)
        max_bytes = config.getint(settings, "IRL_WARC_MAX_BYTES", above=0)
        gzip = config.getbool(settings, "IRL_WARC_GZIP")
        try:
            return RotatingWarcWriter(directory, prefix=prefix, max_bytes=max_bytes, gzip=gzip,
                                      clock=self.clock, info=info)  # fmt: skip
        except ValueError as exc:
            # Not NotConfigured: an enabled WARC output must not vanish without a word.
            raise ValueError(f"invalid IRL_WARC_* setting: {exc}") from exc

    # -- signals ---------------------------------------------------------------------------
    def response_downloaded(
        self, response: Response, request: Request, spider: Spider | None = None
    ) -> None:
        """Archive ``response`` as the download handler returned it. Scrapy sends
        ``response_downloaded`` before any downloader middleware's ``process_response``:
        a redirect followed inside the downloader never reaches ``response_received``, and
        ``HttpCompressionMiddleware`` has not decoded the body yet."""
        if self._closed:
            return
        if _CACHED_FLAG in response.flags:
            # Not a capture (a handler serving a cache): a record would claim a fetch at
            # this date that never happened.
            self.stats.inc_value(f"{STAT_PREFIX}/cached_skipped")
            return
        try:
            records = self.records_for(response, request)
            self.writer.write(*records)
        except Exception as exc:  # noqa: BLE001 - the archive must never break the crawl
            self._write_error(exc, response.url)
            return
        if truncated_reason(response, request) is not None:
            self.stats.inc_value(f"{STAT_PREFIX}/truncated")
        self._update_stats()

    def spider_closed(self, spider: Spider | None = None) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._give_back_writer()
        except Exception as exc:  # noqa: BLE001
            self._write_error(exc, "closing the file")
        self._update_stats()
        logger.info(
            "WARC: %(records)d records, %(bytes)d bytes in %(files)d files under %(dir)s",
            {
                "records": self.writer.records,
                "bytes": self.writer.bytes,
                "files": self.writer.files,
                "dir": self.writer.directory,
            },
            extra={"spider": self.crawler.spider},
        )

    # -- records ---------------------------------------------------------------------------
    def records_for(self, response: Response, request: Request) -> list[ArcWarcRecord]:
        """A response record then its request record, or a resource record for non-HTTP URLs."""
        date = warc_date(self.clock())
        warc_headers = {"WARC-Date": date}
        if response.ip_address is not None:
            warc_headers["WARC-IP-Address"] = str(response.ip_address)
        body = response.body
        if urlparse_cached(response).scheme not in _HTTP_SCHEMES:
            content_type = response.headers.get(b"Content-Type")
            return [
                self.writer.create_record(
                    response.url,
                    "resource",
                    payload=io.BytesIO(body),
                    length=len(body),
                    warc_content_type=(
                        content_type.decode("latin-1")
                        if content_type
                        else "application/octet-stream"
                    ),
                    warc_headers_dict=warc_headers,
                )
            ]
        truncated = truncated_reason(response, request)
        if truncated is not None:
            # WARC 1.1 section 5.13: the payload is shorter than what the server sent or
            # announced; without it the record would pass for a whole page.
            warc_headers["WARC-Truncated"] = truncated
        response_record = self.writer.create_record(
            response.url,
            "response",
            payload=io.BytesIO(body),
            length=len(body),
            warc_headers_dict=warc_headers,
            http_headers=self._response_headers(response, request),
        )
        request_headers = {
            "WARC-Date": date,
            "WARC-Concurrent-To": response_record.rec_headers.get_header(
                "WARC-Record-ID"
            ),
        }
        if "WARC-IP-Address" in warc_headers:
            request_headers["WARC-IP-Address"] = warc_headers["WARC-IP-Address"]
        request_body = request.body or b""
        request_record = self.writer.create_record(
            response.url,
            "request",
            payload=io.BytesIO(request_body),
            length=len(request_body),
            warc_headers_dict=request_headers,
            http_headers=self._request_headers(request),
        )
        return [response_record, request_record]

    @staticmethod
    def _protocol(response: Response) -> str:
        protocol = response.protocol or ""
        return protocol if protocol.startswith("HTTP/") else "HTTP/1.1"

    def _response_headers(
        self, response: Response, request: Request
    ) -> RawHttpHeaders:
        lines = _header_lines(response.headers, _DROPPED_RESPONSE_HEADERS)
        if response.status in _NO_CONTENT_LENGTH_STATUSES:
            lines = [(k, v) for k, v in lines if k.lower() != b"content-length"]
        elif request.method == "HEAD" or response.status == _NOT_MODIFIED:
            lines = [(k, v) for k, v in lines
                     if k.lower() != b"content-length" or v.strip() != _INVENTED_LENGTH]  # fmt: skip
        elif truncated_reason(response, request) is None:
            _replace(lines, b"Content-Length", str(len(response.body)).encode())
        # else truncated: the length the server announced is kept (none if it sent none),
        # not that of the bytes that arrived; WARC-Truncated says the payload is shorter.
        try:
            reason = HTTPStatus(response.status).phrase
        except ValueError:
            reason = ""
        status = f"{response.status} {reason}".rstrip()
        return RawHttpHeaders(status, lines, protocol=self._protocol(response))

    def _request_headers(self, request: Request) -> RawHttpHeaders:
        url = urlparse_cached(request)
        target = url.path or "/"
        if url.params:
            target += ";" + url.params
        if url.query:
            target += "?" + url.query
        lines = _header_lines(request.headers, _DROPPED_REQUEST_HEADERS)
        if not any(k.lower() == b"host" for k, _ in lines):
            host = url.hostname or ""
            if ":" in host:  # IPv6 literal
                host = f"[{host}]"
            if url.port is not None:
                host += f":{url.port}"
            lines.insert(0, (b"Host", host.encode()))
        if request.body and not any(k.lower() == b"content-length" for k, _ in lines):
            lines.append((b"Content-Length", str(len(request.body)).encode()))
        return RawHttpHeaders(
            f"{request.method} {target} HTTP/1.1", lines, is_http_request=True
        )

    # -- bookkeeping -----------------------------------------------------------------------
    def _update_stats(self) -> None:
        self.stats.set_value(f"{STAT_PREFIX}/records", self.writer.records)
        self.stats.set_value(f"{STAT_PREFIX}/bytes", self.writer.bytes)
        self.stats.set_value(f"{STAT_PREFIX}/files", self.writer.files)

    def _write_error(self, exc: Exception, what: str) -> None:
        kind = type(exc).__name__
        self.stats.inc_value(f"{STAT_PREFIX}/write_errors")
        self.stats.inc_value(f"{STAT_PREFIX}/write_errors/{kind}")
        if kind in self._logged:
            return
        self._logged.add(kind)
        logger.error(
            "WARC write failed for %(what)s: %(exc)r; the crawl goes on, further %(kind)s "
            "errors are only counted in %(stat)s",
            {
                "what": what,
                "exc": exc,
                "kind": kind,
                "stat": f"{STAT_PREFIX}/write_errors",
            },
            exc_info=exc,
            extra={"spider": self.crawler.spider},
        )
