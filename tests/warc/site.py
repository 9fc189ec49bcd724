"""A loopback HTTP site with one response of each kind the WARC tests look for.

``/`` is HTML, ``/img.png`` a PNG, ``/missing`` a 404, ``/gzip`` a gzip-encoded text,
``/chunked`` a chunked body, ``/truncated`` announces 1000 bytes and closes the connection
after ``TRUNCATED``, ``/long`` is ``LONG`` (1 MiB), ``/nocontent`` is a 204 and ``/notmodified`` a 304, both without ``Content-Length``, ``POST /form``
echoes its body, ``/raw-headers`` sends header values that are not ASCII (``RAW_HEADERS``)
and echoes the raw bytes of the request's ``X-Name`` header, ``/moved`` is a 301 to ``/``
and ``/refresh`` a page whose meta refresh leads to ``/img.png``. Served on 127.0.0.1 only.
"""

from __future__ import annotations

import gzip
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler

from tests.loopback_site import LoopbackServer, serving

#: A 1x1 PNG, with a NUL and high bytes to prove binary bodies are kept byte for byte.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c63000100000500010d0a2db40000000049454e44ae426082"
)
HTML = b'<html><body><a href="/img.png">img</a> <a href="/missing">x</a></body></html>'
TEXT = b"plain text, sent gzip-encoded " * 20
REFRESH = b'<html><head><meta http-equiv="refresh" content="0; url=/img.png"></head></html>'
CHUNKS = [b"first chunk;", b"second chunk;", b"third"]
TRUNCATED = b"the first bytes of a longer body"
#: ``/long``: sent whole with its Content-Length, for a crawler that stops reading it.
LONG = b"0123456789abcdef" * 65536
#: Header lines sent raw by ``/raw-headers``: UTF-8 in a quoted filename, then bytes that
#: are not UTF-8 at all (RFC 9110 allows obs-text, 0x80-0xFF, in field values).
RAW_HEADERS = [
    (b"Content-Disposition", b'attachment; filename="na\xc3\xafve.txt"'),
    (b"X-Raw", b"\xff\xfe\x80 end"),
]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _send(self, status: int, content_type: str, body: bytes, *extra: tuple[str, str]) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for name, value in extra:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/":
            self._send(200, "text/html; charset=utf-8", HTML)
        elif self.path == "/img.png":
            self._send(200, "image/png", PNG)
        elif self.path == "/gzip":
            self._send(200, "text/plain", gzip.compress(TEXT), ("Content-Encoding", "gzip"))
        elif self.path == "/raw-headers":
            # http.server encodes header text as Latin-1: one byte per code point, sent as is
            raw = [(k.decode(), v.decode("latin-1")) for k, v in RAW_HEADERS]
            name = (self.headers.get("X-Name") or "").encode("latin-1")
            self._send(200, "text/plain", b"X-Name: " + name, *raw)
        elif self.path == "/chunked":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for chunk in [*CHUNKS, b""]:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        elif self.path == "/truncated":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(TRUNCATED)
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
        elif self.path == "/moved":
            self._send(301, "text/html", b"<a href='/'>moved</a>", ("Location", "/"))
        elif self.path == "/refresh":
            self._send(200, "text/html", REFRESH)
        elif self.path == "/long":
            self._send(200, "text/plain", LONG)
        elif self.path == "/nocontent":
            self.send_response(204)
            self.end_headers()
        elif self.path == "/notmodified":
            self.send_response(304)
            self.send_header("ETag", '"v1"')
            self.end_headers()
        else:
            self._send(404, "text/plain", b"not here")

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._send(200, "text/plain", b"got " + body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def warc_site() -> Iterator[LoopbackServer]:
    with serving(LoopbackServer(_Handler)) as server:
        yield server
