"""``LinkSourceMiddleware``: tells STAR which page each link was found on.

STAR counts a PLD's in-degree from PLD->PLD links, so every request a callback yields needs
the host of the page it came from. The ``Referer`` header is not a reliable carrier: a
page's ``Referrer-Policy`` header (``no-referrer``, ``same-origin``, which Scrapy's
RefererMiddleware obeys), a project's ``REFERRER_POLICY`` or ``REFERER_ENABLED = False``,
and every https -> http link under the default policy remove it, and with it exactly
the cross-site links that budgets are made of. This spider middleware writes the source
page's URL into ``meta["irl_source"]``, which the IRL scheduler reads first (and drops,
so the record on disk does not carry it); it never overwrites a value the spider set.
With another ``SCHEDULER`` it switches itself off (nothing would read the key).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.exceptions import NotConfigured
from scrapy.spidermiddlewares.base import BaseSpiderMiddleware

from scrapy_irl import config

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

#: The meta key the IRL scheduler takes a link's source page from.
SOURCE_META_KEY = "irl_source"


class LinkSourceMiddleware(BaseSpiderMiddleware):
    """Stamp each request yielded from a response with that response's URL."""

    def __init__(self, crawler: Crawler) -> None:
        if not config.uses_irl_scheduler(crawler.settings):
            # A project may keep the add-on with its own SCHEDULER: expected, so INFO, not
            # the WARNING Scrapy logs for a NotConfigured that carries a message.
            logger.info("LinkSourceMiddleware off: only the IRL scheduler reads the link "
                        "source (SCHEDULER is %s)", crawler.settings.get("SCHEDULER"))  # fmt: skip
            raise NotConfigured
        super().__init__(crawler)

    def get_processed_request(
        self, request: Request, response: Response | None
    ) -> Request | None:
        if response is not None and SOURCE_META_KEY not in request.meta:
            request.meta[SOURCE_META_KEY] = response.url
        return request
