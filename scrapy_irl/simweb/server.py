"""The simweb HTTP/1.1 server: one asyncio process listening on every simweb address.

Each hostname is served only on its own 127.x address (any other gets ``421 Misdirected
Request``), like name-based virtual hosting on shared servers. The parser is deliberately
minimal (GET/HEAD, Content-Length framing, keep-alive) because its job is to be fast enough
never to be a crawl's bottleneck. It binds loopback addresses only and refuses anything else.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import logging
import time
from pathlib import Path

from scrapy_irl.openfiles import make_room
from scrapy_irl.robots.matching import remove_dot_segments
from scrapy_irl.simweb.config import WebConfig
from scrapy_irl.simweb.log import LogRecord, RequestLog
from scrapy_irl.simweb.model import Web, web_for
from scrapy_irl.simweb.pages import REASONS, Reply, error, respond

logger = logging.getLogger(__name__)

#: Largest request head accepted (long URLs up to pages.LONG_URL_MAX fit).
HEAD_LIMIT = 64 * 1024
#: Largest request body read and discarded.
BODY_LIMIT = 1 << 20
#: Attempts to find a port free on every address when port 0 is asked for.
PORT_ATTEMPTS = 20
DRIP_CHUNK = 16
#: Open files kept free beyond the listening sockets: client connections, the log.
SPARE_FILES = 1024


def check_loopback(ip: str) -> None:
    if not ipaddress.ip_address(ip) in ipaddress.ip_network("127.0.0.0/8"):
        raise ValueError(f"simweb only listens on 127.0.0.0/8, not {ip}")


class SimwebServer:
    """Serves a :class:`Web` on all its addresses; ``await start()`` then ``await close()``.

    With ``config.port == 0`` a port free on every address is chosen at start and
    :attr:`web` is rebuilt for it (links carry the port).
    """

    def __init__(
        self,
        config: WebConfig,
        log_path: str | Path | None = None,
        *,
        idle_timeout: float = 30.0,
        max_requests_per_connection: int = 100_000,
    ) -> None:
        self.config = config
        self.web: Web = web_for(config)
        self.log_path = Path(log_path) if log_path else None
        self.log: RequestLog | None = None
        self.idle_timeout = idle_timeout
        self.max_requests_per_connection = max_requests_per_connection
        self._servers: list[asyncio.base_events.Server] = []
        self._writers: set[asyncio.StreamWriter] = set()
        self._connections: set[asyncio.Task[None]] = set()
        self._flusher: asyncio.Task[None] | None = None
        self._closing = False
        self.requests = 0

    @property
    def port(self) -> int:
        return self.config.port

    @property
    def addresses(self) -> list[str]:
        return list(self.web.ips)

    async def start(self) -> None:
        for ip in self.web.ips:
            check_loopback(ip)
        ensure_open_files(len(self.web.ips) + SPARE_FILES, len(self.web.ips))
        if self.config.port == 0:
            await self._bind_free_port()
        else:
            await self._bind_all(self.config.port)
        if self.log_path:
            self.log = RequestLog(self.log_path, self.config)
            self._flusher = asyncio.create_task(self._flush_loop())
        logger.info("simweb serving %d hosts' addresses (%d IPs) on port %d",
                    len(self.web.hosts), len(self.web.ips), self.config.port)  # fmt: skip

    async def _bind_free_port(self) -> None:
        last: OSError | None = None
        for _ in range(PORT_ATTEMPTS):
            first = await asyncio.start_server(
                self._serve, self.web.ips[0], 0, limit=HEAD_LIMIT
            )
            port = first.sockets[0].getsockname()[1]
            self._servers.append(first)
            try:
                await self._bind_all(port, skip_first=True)
            except OSError as exc:
                await self._close_servers()
                if exc.errno in (errno.EMFILE, errno.ENFILE):
                    raise  # out of files, not a port taken: another port will not help
                last = exc
                continue
            self.config = self.config.replace(port=port)
            self.web = web_for(self.config)
            return
        raise OSError(
            f"no port free on all {len(self.web.ips)} simweb addresses"
        ) from last

    async def _bind_all(self, port: int, skip_first: bool = False) -> None:
        try:
            for ip in self.web.ips[1 if skip_first else 0 :]:
                server = await asyncio.start_server(
                    self._serve,
                    ip,
                    port,
                    limit=HEAD_LIMIT,
                    reuse_address=True,
                    backlog=1024,
                )
                self._servers.append(server)
        except OSError:
            await self._close_servers()
            raise

    async def _close_servers(self) -> None:
        for server in self._servers:
            server.close()
        for server in self._servers:
            await server.wait_closed()
        self._servers = []

    async def close(self) -> None:
        """Stop listening, drop open connections, flush and close the log."""
        self._closing = True
        for server in self._servers:
            server.close()
        for writer in list(self._writers):
            writer.close()
        # Cancel and await every connection handler, so none is left pending (and no
        # "Task was destroyed" noise) when the event loop stops.
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await self._close_servers()
        if self._flusher:
            self._flusher.cancel()
            await asyncio.gather(self._flusher, return_exceptions=True)
        if self.log:
            self.log.close()

    async def _flush_loop(self) -> None:
        while not self._closing:  # ends with close()
            await asyncio.sleep(0.5)
            if self.log:
                self.log.flush()

    # -- one connection ---------------------------------------------------------------------
    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self._writers.add(writer)
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        local_ip = writer.get_extra_info("sockname")[0]
        try:
            for _ in range(self.max_requests_per_connection):
                try:
                    head = await asyncio.wait_for(
                        reader.readuntil(b"\r\n\r\n"), self.idle_timeout
                    )
                except asyncio.LimitOverrunError:
                    await self._send(writer, error(431), False, True)
                    break
                except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
                    break
                start = time.time()
                keep = await self._request(reader, writer, local_ip, head, start)
                if not keep or self._closing:
                    break
        except (ConnectionError, asyncio.CancelledError, asyncio.IncompleteReadError,
                TimeoutError):  # fmt: skip
            pass  # the client went away, or sent less than it announced in time
        finally:
            self._writers.discard(writer)
            if task is not None:
                self._connections.discard(task)
            writer.close()

    async def _request(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        ip: str,
        head: bytes,
        start: float,
    ) -> bool:
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            await self._send(writer, error(400), False, True)
            self._log(start, ip, "-", lines[0][:200], 400, 0)
            return False
        method, target, version = parts
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        length = headers.get("content-length", "0")
        if length.isdigit() and 0 < int(length) <= BODY_LIMIT:
            # Bounded like the head: a client announcing a body it never sends would
            # otherwise hold the connection forever.
            await asyncio.wait_for(reader.readexactly(int(length)), self.idle_timeout)
        connection = headers.get("connection", "").lower()
        keep = (
            "close" not in connection
            if version == "HTTP/1.1"
            else "keep-alive" in connection
        )
        hostname = headers.get("host", "").rsplit(":", 1)[0].strip("[]").lower()
        if target.startswith(("http://", "https://")):  # absolute-form (proxies)
            rest = target.split("://", 1)[1]
            authority, slash, path = rest.partition("/")
            hostname, target = authority.rsplit(":", 1)[0].lower(), slash + path
        try:
            reply = self._route(ip, hostname, method, target)
        except Exception:  # a model bug must not kill the connection loop silently
            logger.exception("simweb failed to render %s %s", hostname, target[:200])
            reply = error(500)
        if reply.delay:
            await asyncio.sleep(min(reply.delay, 60.0))
        sent = await self._send(
            writer, reply, keep and not reply.drip, method != "HEAD"
        )
        self._log(start, ip, hostname or "-", target, reply.status, sent)
        return keep and not reply.drip

    def _route(self, ip: str, hostname: str, method: str, target: str) -> Reply:
        if method not in ("GET", "HEAD"):
            return error(501)
        if not hostname:
            return error(400, "Host header required")
        host = self.web.host(hostname)
        if host is None or host.ip != ip:
            return error(421, "this host is not served on this address")
        if not target.startswith("/"):
            return error(400)
        path, q, query = target.partition("?")
        path = remove_dot_segments(path)
        return respond(self.web, host, path + q + query)

    async def _send(
        self, writer: asyncio.StreamWriter, reply: Reply, keep: bool, body: bool
    ) -> int:
        head = [f"HTTP/1.1 {reply.status} {REASONS.get(reply.status, 'Unknown')}", "Server: simweb",
                f"Content-Length: {len(reply.body)}", f"Connection: {'keep-alive' if keep else 'close'}"]  # fmt: skip
        if reply.content_type:
            head.append(f"Content-Type: {reply.content_type}")
        head += [f"{k}: {v}" for k, v in reply.headers]
        data = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1")
        if not body:
            writer.write(data)
            await asyncio.wait_for(writer.drain(), self.idle_timeout)
            return 0
        if reply.drip:
            return await self._drip(writer, data, reply.body)
        writer.write(data + reply.body)
        if writer.transport.get_write_buffer_size() > 256 * 1024:
            # A client that sends (pipelines) but never reads: bounded, then dropped.
            await asyncio.wait_for(writer.drain(), self.idle_timeout)
        return len(reply.body)

    async def _drip(
        self, writer: asyncio.StreamWriter, head: bytes, payload: bytes
    ) -> int:
        """The delay attack: a few bytes per interval, for a bounded total time, then close."""
        writer.write(head)
        deadline = time.monotonic() + self.config.drip_seconds
        sent = 0
        while sent < len(payload) and time.monotonic() < deadline and not self._closing:
            writer.write(payload[sent : sent + DRIP_CHUNK])
            sent += len(payload[sent : sent + DRIP_CHUNK])
            try:
                await asyncio.wait_for(writer.drain(), self.idle_timeout)
            except (ConnectionError, TimeoutError):
                break  # the client gave up (its download timeout): logged with what it got
            await asyncio.sleep(self.config.drip_interval)
        return sent

    def _log(
        self, start: float, ip: str, host: str, target: str, status: int, nbytes: int
    ) -> None:
        self.requests += 1
        if self.log:
            self.log.write(
                LogRecord(start, ip, host, target, status, nbytes, time.time() - start)
            )


def ensure_open_files(needed: int, addresses: int) -> None:
    """Raise this process's open-file limit to ``needed`` if it is lower (up to the hard
    limit), or refuse with a clear error: simweb listens on one socket per address, and a
    web of 60 000 PLDs (20 000 addresses) died on ``ulimit -n`` 20 000 with "Too many open
    files" under its config file's write, which a harness reported only as "did not
    start" (a probe, 2026-11-29)."""
    why_not = make_room(needed, "simweb")
    if why_not is not None:
        raise OSError(
            errno.EMFILE,
            f"simweb needs about {needed} open files (one listening socket for each of its "
            f"{addresses} addresses, plus {SPARE_FILES} for connections), but {why_not}: "
            "use fewer PLDs (about 3 per address) or raise the limit",
        )


async def serve(
    config: WebConfig, log_path: str | Path | None, duration: float = 0.0
) -> None:
    """Run until cancelled (or for ``duration`` seconds if > 0)."""
    server = SimwebServer(config, log_path)
    await server.start()
    try:
        if duration > 0:
            await asyncio.sleep(duration)
        else:
            await asyncio.Event().wait()
    finally:
        await server.close()
