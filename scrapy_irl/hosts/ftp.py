"""``PoliteFTPDownloadHandler``: Scrapy's FTP handler, bounded by ``DOWNLOAD_TIMEOUT``.

The IRL scheduler times ``ftp:`` URLs in the host and IP heaps like http(s) ones (an
FTP server is a server to be polite to: a page listing 13 ``ftp://`` links had them all
reach its host within 1 ms when they skipped the heaps). A host is served again only
after its request left the downloader, so a download must end. Scrapy's FTP handler
applies no timeout at all: a server that accepts the connection and then says nothing
held its host, and with :confval:`IRL_IP_MAX_IN_FLIGHT` 1 every host of its IP, for the
rest of the crawl. This handler ends the download after ``download_timeout`` (the
request's meta, else ``DOWNLOAD_TIMEOUT``) with Scrapy's ``DownloadTimeoutError``, which
RetryMiddleware retries through the scheduler as it does an HTTP timeout.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from scrapy.core.downloader.handlers.ftp import FTPDownloadHandler
from scrapy.exceptions import DownloadTimeoutError
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet import defer
from twisted.python.failure import Failure

from scrapy_irl.hosts.dnsfail import raise_if_dns_failed

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

#: The handler's import path, as the add-on installs it for ``ftp``.
PATH = f"{__name__}.PoliteFTPDownloadHandler"
#: The scheme it serves.
FTP_SCHEME = "ftp"
#: Signal (``request=``): the FTP server answered, with a failure (a refused login, a
#: failed command) that reaches the spider as an exception. The server is up: the IRL
#: scheduler does not back its host off as one that did not answer.
ftp_server_answered = object()


class PoliteFTPDownloadHandler(FTPDownloadHandler):
    """Every FTP download ends within its ``download_timeout``."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self.default_timeout = crawler.settings.getfloat("DOWNLOAD_TIMEOUT")

    async def download_request(self, request: Request) -> Response:
        # Imported here, as Scrapy's handler does: twisted.protocols.ftp installs the
        # default reactor when imported, and the scheduler imports this module early.
        from twisted.internet import reactor
        from twisted.protocols import ftp as ftp_protocol

        raise_if_dns_failed(request)  # a dead name: failed here, as Scrapy's handler would
        timeout = download_timeout(request, self.default_timeout)
        download = deferred_from_coro(super().download_request(request))
        expired = []

        def expire() -> None:
            # Cancels what the download waits on (the connection, or the transfer);
            # Scrapy's handler then closes its control connection.
            expired.append(True)
            download.cancel()

        timer = reactor.callLater(timeout, expire) if timeout > 0 else None
        try:
            return await maybe_deferred_to_future(download)
        except (ftp_protocol.CommandFailed, ftp_protocol.ConnectionLost) as exc:
            if answered(exc):
                self.crawler.signals.send_catch_log(ftp_server_answered, request=request)
            raise
        except (defer.CancelledError, asyncio.CancelledError) as exc:
            # Under the asyncio reactor the download is a task, cancelled as one.
            if not expired:
                raise
            raise DownloadTimeoutError(
                f"Getting {request.url} took longer than {timeout:g} seconds."
            ) from exc
        finally:
            if timer is not None and timer.active():
                timer.cancel()


def download_timeout(request: Request, default: float) -> float:
    """The request's ``download_timeout`` meta (Scrapy's DownloadTimeoutMiddleware sets
    it), else ``default`` (``DOWNLOAD_TIMEOUT``), read as Scrapy's HTTP handler reads it.
    An unreadable meta value falls back to ``default``; 0 or less means no timeout."""
    value = request.meta.get("download_timeout") or default
    try:
        return float(value)
    except (TypeError, ValueError):
        return float(default)


def answered(exc: BaseException) -> bool:
    """Did the server reply, other than with 421 ("service not available": come back
    later, backed off like a server that did not answer)? ``CommandFailed`` carries its
    reply; Twisted's FTP client fails a refused login as ``ConnectionLost`` around the
    ``CommandFailed``."""
    from twisted.protocols import ftp as ftp_protocol

    failed = exc if isinstance(exc, ftp_protocol.CommandFailed) else next(
        (arg.value for arg in getattr(exc, "args", ())
         if isinstance(arg, Failure) and arg.check(ftp_protocol.CommandFailed) is not None),
        None,
    )  # fmt: skip
    if failed is None:
        return False
    reply = failed.args[0] if failed.args else None
    first = reply[0] if isinstance(reply, list) and reply else reply
    return not str(first).startswith(UNAVAILABLE)


#: FTP's reply "service not available, closing control connection" (RFC 959).
UNAVAILABLE = "421"
