"""A downloader middleware for tests: ends some requests before the downloader sees them.

``/page/<n>`` with odd ``n`` is refused with IgnoreRequest (as OffsiteMiddleware does);
with ``n`` a multiple of 4 (but not 0) it is answered by the middleware itself (as
HttpCacheMiddleware does). Neither reaches the downloader, so neither fires
``request_reached_downloader`` / ``request_left_downloader``.
"""

from __future__ import annotations

from scrapy.exceptions import IgnoreRequest
from scrapy.http import HtmlResponse


class ShortCircuitMiddleware:
    def process_request(self, request, spider=None):
        tail = request.url.rstrip("/").rsplit("/", 1)[-1]
        if not tail.isdigit():
            return None
        n = int(tail)
        if n % 2:
            raise IgnoreRequest(f"refused by the test middleware: {request.url}")
        if n and n % 4 == 0:
            return HtmlResponse(request.url, body=b"<html>answered by a middleware</html>",
                                request=request)  # fmt: skip
        return None
