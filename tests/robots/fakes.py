"""A fake crawler whose engine answers robots.txt requests from a table, without a reactor.

Coroutines are driven with ``Deferred.fromCoroutine``: with no asyncio reactor installed,
``maybe_deferred_to_future`` hands back plain Deferreds, so a test runs synchronously
until it waits on a Deferred the test fires itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from unittest import mock

from scrapy.http import Request, Response, TextResponse
from scrapy.settings import Settings
from scrapy.statscollectors import MemoryStatsCollector
from twisted.internet.defer import Deferred

Answer = tuple[int, bytes] | tuple[int, bytes, dict[str, str]] | BaseException | Deferred


class FakeClock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class FakeWeb:
    """url -> answer; unknown URLs answer 404. Records every requested URL."""

    def __init__(self, answers: dict[str, Answer] | None = None) -> None:
        self.answers: dict[str, Answer] = dict(answers or {})
        self.requested: list[Request] = []

    @property
    def urls(self) -> list[str]:
        return [r.url for r in self.requested]

    async def download(self, request: Request) -> Response:
        self.requested.append(request)
        answer = self.answers.get(request.url, (404, b"not found"))
        if isinstance(answer, Deferred):
            answer = await answer
        if isinstance(answer, BaseException):
            raise answer
        status, body, *rest = answer
        headers = rest[0] if rest else {}
        return TextResponse(request.url, status=status, body=body, headers=headers, encoding="utf-8")


def fake_crawler(web: FakeWeb, tmp_path: Any, **settings: Any) -> mock.MagicMock:
    crawler = mock.MagicMock()
    crawler.settings = Settings({"ROBOTSTXT_OBEY": True, "IRL_HOSTS_DIR": str(tmp_path / "hosts"), **settings})
    crawler.stats = MemoryStatsCollector(crawler)
    crawler.engine.download_async = mock.AsyncMock(side_effect=web.download)
    crawler.signals.send_catch_log_async = mock.AsyncMock(return_value=[])
    return crawler


def run(coro: Any) -> Deferred:
    """Start a coroutine now; returns its Deferred (already fired unless it is waiting)."""
    return Deferred.fromCoroutine(coro)


def result_of(d: Deferred) -> Any:
    """The result of a fired Deferred, re-raising its failure."""
    box: list[Any] = []
    d.addBoth(box.append)
    assert box, "the coroutine is still waiting"
    value = box[0]
    if hasattr(value, "raiseException"):
        value.raiseException()
    return value


def outcome(middleware: Any, url: str, **meta: Any) -> str:
    """'allowed' or the IgnoreRequest message for one request through the middleware."""
    from scrapy.exceptions import IgnoreRequest

    try:
        result_of(run(middleware.process_request(Request(url, meta=meta))))
    except IgnoreRequest as exc:
        return str(exc)
    return "allowed"


Factory = Callable[..., Any]
