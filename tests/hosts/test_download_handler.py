"""The add-on's HTTP handler: Twisted's pool does not re-send, failures reach RetryMiddleware."""

from __future__ import annotations

import pytest
from scrapy.exceptions import DownloadFailedError
from scrapy.settings import Settings, default_settings
from scrapy.utils.misc import build_from_crawler, load_object
from scrapy.utils.test import get_crawler
from twisted.internet.error import ConnectionDone
from twisted.python.failure import Failure
from twisted.web.client import RequestTransmissionFailed

from scrapy_irl.hosts.download import (
    PATH,
    PoliteHTTP11DownloadHandler,
    other_http_handlers,
    retryable_transmission_failure,
)

STOCK = "scrapy.core.downloader.handlers.http11.HTTP11DownloadHandler"


def test_the_pool_does_not_resend_but_the_stock_one_does():
    crawler = get_crawler()
    ours = build_from_crawler(PoliteHTTP11DownloadHandler, crawler)
    stock = build_from_crawler(load_object(STOCK), crawler)
    assert ours._pool.retryAutomatically is False
    assert stock._pool.retryAutomatically is True  # what the subclass is for


def test_a_transmission_failure_becomes_an_error_retry_middleware_retries():
    retried = tuple(load_object(e) if isinstance(e, str) else e for e in default_settings.RETRY_EXCEPTIONS)
    with pytest.raises(DownloadFailedError) as caught, retryable_transmission_failure():
        raise RequestTransmissionFailed([Failure(ConnectionDone())])
    assert isinstance(caught.value, retried)
    assert isinstance(caught.value.__cause__, RequestTransmissionFailed)


def test_other_http_handlers_names_what_is_not_ours():
    def settings(handlers: dict) -> Settings:
        return Settings({"DOWNLOAD_HANDLERS": handlers})

    assert other_http_handlers(settings({"http": PATH, "https": PoliteHTTP11DownloadHandler})) == {}
    assert other_http_handlers(settings({})) == {"http": STOCK, "https": STOCK}
    assert other_http_handlers(settings({"http": PATH, "https": None})) == {}  # https off

    class Subclassed(PoliteHTTP11DownloadHandler):
        pass

    assert other_http_handlers(settings({"http": Subclassed, "https": "no.such.Handler"})) == {
        "https": "no.such.Handler"
    }
