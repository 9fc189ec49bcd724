"""A tiny threaded HTTP site on 127.0.0.1 for crawl tests: a link graph full of duplicates.

``/page/<n>`` links to pages ``2n``, ``2n+1``, ``n`` itself and ``0`` (so most links are
duplicates), for n below ``size``. Every request path is logged, so tests can count
fetches on the server side.
"""

from __future__ import annotations

import datetime
import ssl
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TypeVar


def send_body(
    handler: BaseHTTPRequestHandler, body: bytes, content_type: str = "text/html; charset=utf-8"
) -> None:
    """Answer 200 with ``body`` and its length (the test sites' one way to reply)."""
    send_answer(handler, 200, body, content_type)


def send_answer(
    handler: BaseHTTPRequestHandler, status: int, body: bytes,
    content_type: str = "text/html; charset=utf-8", headers: dict[str, str] | None = None,
) -> None:  # fmt: skip
    """Answer ``status`` with ``body``, its length and any extra ``headers``."""
    handler.send_response(status)
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self.server.hits[self.path] += 1
        parts = self.path.strip("/").split("/")
        if len(parts) != 2 or parts[0] != "page" or not parts[1].isdigit():
            self.send_error(404)
            return
        n = int(parts[1])
        links = [m for m in (2 * n, 2 * n + 1, n, 0) if m < self.server.size]
        body = "".join(f'<a href="/page/{m}">p{m}</a>\n' for m in links)
        send_body(self, f"<html><body>{body}</body></html>".encode())

    def log_message(self, format: str, *args: object) -> None:
        pass


class LoopbackServer(ThreadingHTTPServer):
    """A threaded HTTP server on 127.0.0.1, any free port (the tests' sites share this)."""

    daemon_threads = True

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Server(LoopbackServer):
    def __init__(self, size: int) -> None:
        super().__init__(_Handler)
        self.size = size
        self.hits: Counter[str] = Counter()


_S = TypeVar("_S", bound=LoopbackServer)


@contextmanager
def serving(server: _S) -> Iterator[_S]:
    """Run ``server`` in a thread for the ``with`` block; shut it down and close it after."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@contextmanager
def loopback_site(size: int = 64) -> Iterator[_Server]:
    with serving(_Server(size)) as server:
        yield server


class RobotsHandler(_Handler):
    """The site, with ``/robots.txt`` answered by :meth:`send_robots` (counted in hits)."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        if self.path != "/robots.txt":
            super().do_GET()
            return
        self.server.hits[self.path] += 1
        self.send_robots()

    def send_robots(self) -> None:
        raise NotImplementedError


def gzip_robots_site(body: bytes, size: int = 16) -> _Server:
    """The site, its ``/robots.txt`` answered with ``body`` sent as ``Content-Encoding:
    gzip`` (a robots.txt that inflates far beyond its size on the wire). Not started."""

    class GzipRobotsHandler(RobotsHandler):
        def send_robots(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = _Server(size)
    server.RequestHandlerClass = GzipRobotsHandler
    return server


def serve_tls(server: LoopbackServer, directory: Path, name: str) -> str:
    """Make ``server`` speak HTTPS with a fresh self-signed certificate for ``name``
    (written to ``directory``; Scrapy does not verify certificates by default). Call
    before :func:`serving`; returns the site's ``https://`` base URL under ``name``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .sign(key, hashes.SHA256()))  # fmt: skip
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_path, key_path)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    return f"https://{name}:{server.server_address[1]}"
