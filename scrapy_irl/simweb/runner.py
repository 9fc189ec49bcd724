"""Run a simweb server on its own event loop in a background thread.

Used by the ``simweb`` pytest fixture (:mod:`scrapy_irl.simweb.testing`), by the ``broad``
example spider and by anyone who wants a simulated web inside another program.
"""

from __future__ import annotations

import asyncio
import http.client
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from scrapy_irl.simweb.config import WebConfig
from scrapy_irl.simweb.log import LogRecord, read_log
from scrapy_irl.simweb.model import Web
from scrapy_irl.simweb.server import SimwebServer

START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
#: The fixture's web: tiny, and fast to time out (slow pages 0.3 s, drips stop after 1.5 s).
FIXTURE_CONFIG = WebConfig.sized(
    "tiny", port=0, slow_seconds=0.3, drip_interval=0.1, drip_seconds=1.5
)


@dataclass
class RunningWeb:
    """A server running in a thread: its web (with the real port), log path and addresses."""

    server: SimwebServer
    loop: asyncio.AbstractEventLoop
    log_path: Path | None

    @property
    def web(self) -> Web:
        return self.server.web

    @property
    def config(self) -> WebConfig:
        return self.server.config

    @property
    def port(self) -> int:
        return self.server.port

    def url(self, host: str, path: str = "/") -> str:
        return self.web.url(host, path)

    def get(
        self, host: str, target: str = "/", ip: str | None = None, timeout: float = 10.0
    ) -> tuple[int, dict[str, str], bytes]:
        """GET ``target`` from ``host`` on its own address (or ``ip``): status, headers, body."""
        address = ip or self.web.resolve(host)
        if address is None:
            raise LookupError(f"{host} does not resolve in this web")
        conn = http.client.HTTPConnection(address, self.port, timeout=timeout)
        try:
            conn.putrequest("GET", target, skip_host=True, skip_accept_encoding=True)
            conn.putheader("Host", f"{host}:{self.port}")
            conn.endheaders()
            response = conn.getresponse()
            return (
                response.status,
                {k.lower(): v for k, v in response.getheaders()},
                response.read(),
            )
        finally:
            conn.close()

    def records(self) -> list[LogRecord]:
        """The log so far (flushed first)."""
        if self.log_path is None or self.server.log is None:
            raise RuntimeError("this server has no request log")
        done = asyncio.run_coroutine_threadsafe(_flush(self.server), self.loop)
        done.result(STOP_TIMEOUT)
        return read_log(self.log_path)[1]


async def _flush(server: SimwebServer) -> None:
    if server.log:
        server.log.flush()


@contextmanager
def serve_in_thread(
    config: WebConfig, log_path: str | Path | None = None
) -> Iterator[RunningWeb]:
    """Start a :class:`SimwebServer` on its own event loop in a daemon thread; stop it on exit."""
    loop = asyncio.new_event_loop()
    server = SimwebServer(config, log_path)
    thread = threading.Thread(target=loop.run_forever, name="simweb", daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(server.start(), loop).result(START_TIMEOUT)
        yield RunningWeb(server, loop, Path(log_path) if log_path else None)
    finally:
        try:
            asyncio.run_coroutine_threadsafe(server.close(), loop).result(STOP_TIMEOUT)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(STOP_TIMEOUT)
            if not thread.is_alive():
                loop.close()


#: The environment variables that send Scrapy's (and urllib's) requests through a proxy.
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy")


def bypass_proxies() -> list[str]:
    """Remove proxy variables from this process's environment (its children inherit it).

    simweb and the benchmarks' sites are on loopback: with ``http_proxy`` set, as CI
    machines often have it for package downloads, every request of a crawl would go to
    the proxy, stock Scrapy's and scrapy-irl's alike. Returns the names removed.
    """
    names = [name for name in os.environ if name.lower() in PROXY_VARIABLES]
    for name in names:
        del os.environ[name]
    return names
