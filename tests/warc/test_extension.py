"""WarcExtension: records built from Scrapy objects, error handling, then real crawls on loopback."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
from ipaddress import ip_address
from pathlib import Path

import pytest
from scrapy import Request
from scrapy.exceptions import NotConfigured
from scrapy.http import HtmlResponse, Response
from scrapy.utils.test import get_crawler
from warcio.archiveiterator import ArchiveIterator

from scrapy_irl.warc.extension import WarcExtension, warc_dir
from tests.warc.site import CHUNKS, HTML, LONG, PNG, RAW_HEADERS, REFRESH, TEXT, TRUNCATED, warc_site
from tests.warc.test_writer import listing

ROOT = Path(__file__).resolve().parents[2]
EXTENSION = "scrapy_irl.warc.extension.WarcExtension"


def make_extension(tmp_path: Path, **settings: object) -> WarcExtension:
    crawler = get_crawler(settings_dict={"IRL_WARC_ENABLED": True, "IRL_WARC_DIR": str(tmp_path),
                                         "IRL_WARC_PREFIX": "t", **settings})
    return WarcExtension.from_crawler(crawler)


def records_in(directory: Path) -> list:
    """(type, uri, warc headers, http headers, payload) of every record of every finished file."""
    out = []
    for path in sorted(directory.glob("*.warc*")):
        assert not path.name.endswith(".open"), path
        with open(path, "rb") as handle:
            for record in ArchiveIterator(handle):
                out.append((record.rec_type, record.rec_headers.get_header("WARC-Target-URI"),
                            record.rec_headers, record.http_headers, record.raw_stream.read()))  # stored bytes
    return out


def blocks_in(directory: Path) -> dict[tuple[str, str], bytes]:
    """The raw block (HTTP head and body, unparsed) of every request and response record."""
    out = {}
    for path in sorted(directory.glob("*.warc*")):
        with open(path, "rb") as handle:
            for record in ArchiveIterator(handle, no_record_parse=True):
                if record.rec_type in ("request", "response"):
                    uri = record.rec_headers.get_header("WARC-Target-URI")
                    out[record.rec_type, uri] = record.raw_stream.read()
    return out


def checked_records(directory: Path) -> list:
    """Every record parsed, its block and payload digests checked (warcio raises on a bad one)."""
    out = []
    for path in sorted(directory.glob("*.warc*")):
        with open(path, "rb") as handle:
            for record in ArchiveIterator(handle, check_digests="raise"):
                body = record.content_stream().read()
                assert record.digest_checker.passed is not False, record.digest_checker.problems
                out.append((record, body))
    return out


def sha1_digest(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


def stat(ext: WarcExtension, key: str) -> object:
    return ext.stats.get_value(f"irl_warc/{key}")


def test_listing_it_is_enough_and_the_setting_switches_it_off(tmp_path: Path):
    """Issue 6: an extension "other projects can enable alone". Until 2026-11-27 listing it
    in EXTENSIONS wrote nothing unless IRL_WARC_ENABLED was set too."""
    with pytest.raises(NotConfigured):
        WarcExtension.from_crawler(get_crawler(settings_dict={"IRL_WARC_ENABLED": False}))
    ext = WarcExtension.from_crawler(get_crawler(settings_dict={"IRL_WARC_DIR": str(tmp_path)}))
    assert ext.writer.directory == tmp_path
    ext.spider_closed()


def test_directory_defaults(tmp_path: Path):
    assert warc_dir(get_crawler(settings_dict={"IRL_WARC_DIR": "/x/y"}).settings) == "/x/y"
    jobdir = tmp_path / "job"
    assert warc_dir(get_crawler(settings_dict={"JOBDIR": str(jobdir)}).settings) == str(jobdir / "warc")
    assert warc_dir(get_crawler(settings_dict={}).settings) == "warc"


def test_invalid_settings_stop_the_crawl_with_a_reason(tmp_path: Path):
    # not NotConfigured: WARC output that was asked for must not vanish silently
    with pytest.raises(ValueError, match="IRL_WARC"):
        make_extension(tmp_path, IRL_WARC_MAX_BYTES=0)


def test_records_of_a_response(tmp_path: Path):
    ext = make_extension(tmp_path, IRL_WARC_GZIP=False)
    request = Request("http://a.example:8080/p;x?q=1#frag", method="POST", body=b"k=v",
                      headers={"User-Agent": "ua", "Proxy-Authorization": "Basic c2VjcmV0",
                               "Cookie": "a=b"})
    response = HtmlResponse(
        "http://a.example:8080/p;x?q=1", status=200, request=request, body=b"<html>decoded</html>",
        headers={"Content-Type": "text/html", "Transfer-Encoding": "chunked",
                 "Content-Length": "5", "Set-Cookie": ["a=1", "b=2"]},
        ip_address=ip_address("127.0.0.1"), protocol="HTTP/1.1",
    )
    ext.response_downloaded(response, request, None)
    ext.spider_closed(None)
    (_, _, _, _, info), resp, req = records_in(tmp_path)
    assert b"http-header-user-agent: " in info and b"robots: " in info
    assert resp[0] == "response" and req[0] == "request"
    assert resp[1] == req[1] == "http://a.example:8080/p;x?q=1"
    assert resp[2].get_header("WARC-IP-Address") == req[2].get_header("WARC-IP-Address") == "127.0.0.1"
    assert req[2].get_header("WARC-Concurrent-To") == resp[2].get_header("WARC-Record-ID")
    assert resp[2].get_header("WARC-Date") == req[2].get_header("WARC-Date")
    assert resp[3].protocol == "HTTP/1.1" and resp[3].statusline == "200 OK"
    assert resp[3].get_header("Transfer-Encoding") is None
    assert resp[3].get_header("Content-Length") == str(len(b"<html>decoded</html>"))
    assert [v for k, v in resp[3].headers if k == "Set-Cookie"] == ["a=1", "b=2"]
    assert resp[4] == b"<html>decoded</html>"
    assert req[3].protocol == "POST" and req[3].statusline == "/p;x?q=1 HTTP/1.1"
    assert req[3].get_header("Host") == "a.example:8080"
    assert req[3].get_header("Cookie") == "a=b" and req[3].get_header("Proxy-Authorization") is None
    assert req[3].get_header("Content-Length") == "3" and req[4] == b"k=v"
    assert (stat(ext, "records"), stat(ext, "files"), stat(ext, "write_errors")) == (2, 1, 0)
    assert stat(ext, "bytes") == sum(p.stat().st_size for p in listing(tmp_path))


def test_head_keeps_content_length_and_odd_status_and_non_http_urls(tmp_path: Path):
    ext = make_extension(tmp_path)
    head = Request("https://a.example/", method="HEAD")
    ext.response_downloaded(Response("https://a.example/", status=599, request=head,
                                   headers={"Content-Length": "1234"}), head, None)
    encoded = Request("http://a.example/br")  # HttpCompressionMiddleware off, or unknown coding
    ext.response_downloaded(Response("http://a.example/br", body=b"\x8b\x00", request=encoded,
                                   headers={"Content-Encoding": "br"}), encoded, None)
    data = Request("data:text/plain,hello")
    ext.response_downloaded(Response("data:text/plain,hello", body=b"hello", request=data,
                                   headers={"Content-Type": "text/plain"}), data, None)
    ext.spider_closed(None)
    _, resp, req, br, _, resource = records_in(tmp_path)
    assert br[3].get_header("Content-Encoding") == "br" and br[4] == b"\x8b\x00"
    assert br[3].get_header("Content-Length") == "2"
    assert resp[3].statusline == "599" and resp[3].get_header("Content-Length") == "1234"
    assert resp[2].get_header("WARC-IP-Address") is None
    assert req[3].protocol == "HEAD" and req[3].get_header("Host") == "a.example"
    assert resource[0] == "resource" and resource[4] == b"hello"
    assert resource[2].get_header("Content-Type") == "text/plain"
    assert stat(ext, "records") == 5


def test_bodiless_statuses_keep_the_servers_content_length(tmp_path: Path):
    # A 204 must not carry Content-Length (RFC 9110 8.6; Scrapy's HTTP/1.1 handler adds a
    # "0" of its own) and a 304's describes the 200 it stands for: "0" was written over them.
    ext = make_extension(tmp_path)
    request = Request("http://a.example/")
    for status, headers in [(204, {"Content-Length": "0"}), (304, {"Content-Length": "1234"}),
                            (200, {})]:
        ext.response_downloaded(Response(f"http://a.example/{status}", status=status, request=request,
                                       headers=headers), request, None)
    # Scrapy's HTTP/1.1 handler writes "Content-Length: 0" on every 304 and on a HEAD
    # response without one: until 2026-11-29 it was archived as the server's (only the
    # 204's was left out), saying the page a GET would get is empty.
    head = Request("http://a.example/", method="HEAD")
    for name, status, request in [("304-none", 304, Request("http://a.example/")),
                                  ("head-none", 200, head), ("head-404", 404, head)]:
        ext.response_downloaded(Response(f"http://a.example/{name}", status=status, request=request,
                                       headers={"Content-Length": "0"}), request, None)
    ext.response_downloaded(Response("http://a.example/head-sent", request=head,
                                   headers={"Content-Length": "77"}), head, None)
    ext.spider_closed(None)
    responses = {
        uri: http for kind, uri, _, http, _ in records_in(tmp_path) if kind == "response"}
    assert responses["http://a.example/204"].get_header("Content-Length") is None
    assert responses["http://a.example/304"].get_header("Content-Length") == "1234"
    assert responses["http://a.example/200"].get_header("Content-Length") == "0"
    for name in ("304-none", "head-none", "head-404"):
        assert responses[f"http://a.example/{name}"].get_header("Content-Length") is None, name
    assert responses["http://a.example/head-sent"].get_header("Content-Length") == "77"


def test_a_truncated_response_is_marked_and_a_cached_one_is_not_archived(tmp_path: Path):
    ext = make_extension(tmp_path)
    request = Request("http://a.example/")
    # DOWNLOAD_FAIL_ON_DATALOSS=False: the connection dropped before the announced length
    cut = Response("http://a.example/cut", body=b"part", request=request, flags=["dataloss"],
                   headers={"Content-Length": "1000"})
    # no Content-Length, the body ended with the connection: may be whole, not marked
    closed = Response("http://a.example/closed", body=b"all", request=request, flags=["partial"])
    # from HttpCacheMiddleware: no fetch happened now, so no capture to record
    cached = Response("http://a.example/cached", body=b"old", request=request, flags=["cached"])
    for response in (cut, closed, cached):
        ext.response_downloaded(response, request, None)
    ext.spider_closed(None)
    records = {(kind, uri): (warc, http, body) for kind, uri, warc, http, body in records_in(tmp_path)
               if kind != "warcinfo"}  # fmt: skip
    assert set(records) == {(k, f"http://a.example/{p}") for k in ("request", "response")
                            for p in ("cut", "closed")}  # fmt: skip
    warc, http, body = records["response", "http://a.example/cut"]
    assert warc.get_header("WARC-Truncated") == "disconnect" and body == b"part"
    # what the server announced, not the 4 bytes stored (until 2026-11-29 "4": the record
    # claimed the part was the whole); warcio still reads it by the record's own length
    assert http.get_header("Content-Length") == "1000"
    assert records["response", "http://a.example/closed"][0].get_header("WARC-Truncated") is None
    assert records["request", "http://a.example/cut"][0].get_header("WARC-Truncated") is None
    assert stat(ext, "truncated") == 1 and stat(ext, "cached_skipped") == 1
    assert stat(ext, "records") == 4


def test_a_stopped_download_is_marked_truncated_with_the_servers_length(tmp_path: Path):
    # StopDownload(fail=False) from a bytes_received/headers_received handler: Scrapy flags
    # the response download_stopped. Until 2026-11-29 it was archived as a whole page, its
    # Content-Length overwritten with the length of the part that had arrived.
    ext = make_extension(tmp_path)
    plain, robots, head = Request("http://a.example/"), Request("http://a.example/"), \
        Request("http://a.example/", method="HEAD")
    robots.meta["irl_warc_truncated"] = "length"  # what the robots middleware's cap sets
    cases = [
        ("cut", plain, {"Content-Length": "1000"}, b"part"),
        ("robots", robots, {"Content-Length": "1000"}, b"User-agent: *"),
        ("chunked", plain, {}, b"some chunks"),  # no length announced: none invented
        ("whole", plain, {"Content-Length": "4"}, b"all!"),  # stopped after the last byte
        ("head", head, {"Content-Length": "1234"}, b""),  # empty by HTTP's rules
    ]
    for name, request, headers, body in cases:
        ext.response_downloaded(Response(f"http://a.example/{name}", body=body, request=request,
                                         headers=headers, flags=["download_stopped"]),
                                request, None)  # fmt: skip
    ext.spider_closed(None)
    responses = {uri.rsplit("/", 1)[1]: (warc, http, body)
                 for kind, uri, warc, http, body in records_in(tmp_path) if kind == "response"}
    truncated = {name: warc.get_header("WARC-Truncated") for name, (warc, _, _) in responses.items()}
    assert truncated == {"cut": "unspecified", "robots": "length", "chunked": "unspecified",
                         "whole": None, "head": None}
    lengths = {name: http.get_header("Content-Length") for name, (_, http, _) in responses.items()}
    assert lengths == {"cut": "1000", "robots": "1000", "chunked": None, "whole": "4",
                       "head": "1234"}
    assert responses["cut"][2] == b"part" and responses["chunked"][2] == b"some chunks"
    assert stat(ext, "truncated") == 3
    checked_records(tmp_path)  # digests of the stored bytes; still parsed by warcio


def test_header_bytes_that_are_not_ascii_are_stored_as_received(tmp_path: Path):
    # warcio %-encodes such values (of their Latin-1 decoding): the block was not the message
    ext = make_extension(tmp_path)
    request = Request("http://a.example/f", headers={"X-Name": "café", "X-Raw": b"\xff\x80"})
    response = Response("http://a.example/f", body=b"data", request=request,
                        headers=[(k, v) for k, v in RAW_HEADERS])
    ext.response_downloaded(response, request, None)
    ext.spider_closed(None)
    blocks = blocks_in(tmp_path)
    assert blocks["response", "http://a.example/f"] == (
        b"HTTP/1.1 200 OK\r\n" + b"".join(k + b": " + v + b"\r\n" for k, v in RAW_HEADERS)
        + b"Content-Length: 4\r\n\r\ndata")  # fmt: skip
    request_head = blocks["request", "http://a.example/f"].split(b"\r\n\r\n")[0]
    assert b"\r\nX-Name: caf\xc3\xa9\r\n" in request_head + b"\r\n"
    assert b"\r\nX-Raw: \xff\x80\r\n" in request_head + b"\r\n"
    _, (resp, body), (req, _) = checked_records(tmp_path)  # still parses, digests right
    assert body == b"data" and resp.rec_headers.get_header("WARC-Payload-Digest") == sha1_digest(b"data")
    assert resp.http_headers.get_header("Content-Disposition") == 'attachment; filename="naïve.txt"'
    assert req.http_headers.get_header("X-Name") == "café"
    assert stat(ext, "write_errors") == 0


def test_write_errors_are_counted_logged_once_and_never_raise(tmp_path: Path, caplog):
    directory = tmp_path / "warc"
    ext = make_extension(directory, IRL_WARC_MAX_BYTES=1)  # a new file for every response
    request = Request("http://a.example/")
    response = Response("http://a.example/", body=b"x", request=request)
    ext.response_downloaded(response, request, None)
    shutil.rmtree(directory)
    with caplog.at_level(logging.ERROR, logger="scrapy_irl.warc.extension"):
        for _ in range(3):
            ext.response_downloaded(response, request, None)
        ext.spider_closed(None)
    assert stat(ext, "write_errors") == 3
    assert stat(ext, "write_errors/FileNotFoundError") == 3
    assert stat(ext, "records") == 2
    assert len([r for r in caplog.records if "WARC write failed" in r.getMessage()]) == 1


def test_unserialisable_record_is_counted(tmp_path: Path):
    ext = make_extension(tmp_path)
    request = Request("http://a.example/")
    response = Response("http://a.example/", body=b"x", request=request)
    ext.records_for = lambda *a: [object()]  # type: ignore[method-assign]
    ext.response_downloaded(response, request, None)
    ext.spider_closed(None)
    assert stat(ext, "write_errors") == 1 and stat(ext, "records") == 0
    assert listing(tmp_path) == []


def test_recovery_stats(tmp_path: Path):
    ext = make_extension(tmp_path, IRL_WARC_GZIP=False)
    request = Request("http://a.example/")
    for n in range(2):
        ext.response_downloaded(Response(f"http://a.example/{n}", body=b"x", request=request),
                              request, None)
    [open_file] = tmp_path.glob("*.open")
    data = open_file.read_bytes()
    open_file.write_bytes(data[:-10])  # the run is killed mid-record
    (tmp_path / "t-20200101000000000000-00009.warc.gz.open").write_bytes(b"\x1f\x8b torn")
    ext.writer._abandon()
    ext.writer._lock.release()  # the process died: its lock went with it
    again = make_extension(tmp_path, IRL_WARC_GZIP=False)
    assert stat(again, "recovered_files") == 1 and stat(again, "recovered_files_removed") == 1
    last_request = data.rfind(b"WARC/1.1\r\n", 0, data.rfind(b"WARC-Type: request"))  # torn
    assert stat(again, "recovered_bytes_cut") == (len(data) - 10 - last_request) + len(b"\x1f\x8b torn")
    again.spider_closed(None)


# -- real crawls -----------------------------------------------------------------------------
def crawl(config: dict, cwd: Path) -> tuple[dict, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "tests.warc.crawl_runner", json.dumps(config)],
        capture_output=True, text=True, timeout=60, cwd=cwd, env=env, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [l for l in proc.stdout.splitlines() if l.startswith("STATS ")][-1]
    return json.loads(line[6:]), proc.stderr


def closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_real_crawl_archives_every_response(tmp_path: Path):
    dead = f"http://127.0.0.1:{closed_port()}/refused"
    with warc_site() as site:
        base = site.base_url
        paths = ["/", "/img.png", "/missing", "/gzip", "/chunked"]
        stats, _ = crawl({"get": [base + p for p in paths] + [dead], "post": [[base + "/form", "a=1&b=2"]],
                          "settings": {"EXTENSIONS": {EXTENSION: 0}, "IRL_WARC_ENABLED": True,
                                       "JOBDIR": str(tmp_path / "job"), "IRL_WARC_PREFIX": "t"}},
                         cwd=tmp_path)
    directory = tmp_path / "job" / "warc"
    records = records_in(directory)
    assert records[0][0] == "warcinfo"
    responses = {uri: (warc, http, body) for kind, uri, warc, http, body in records if kind == "response"}
    requests = {uri: (warc, http, body) for kind, uri, warc, http, body in records if kind == "request"}
    assert set(responses) == set(requests) == {base + p for p in [*paths, "/form"]}
    for uri, (warc, http, _) in responses.items():
        assert requests[uri][0].get_header("WARC-Concurrent-To") == warc.get_header("WARC-Record-ID")
        assert warc.get_header("WARC-IP-Address") == "127.0.0.1"
        assert http.get_header("Content-Length") == str(len(responses[uri][2]))
        assert http.get_header("Transfer-Encoding") is None
    assert responses[base + "/"][2] == HTML
    png_http, png_body = responses[base + "/img.png"][1:]
    assert png_body == PNG and png_http.get_header("Content-Type") == "image/png"
    assert responses[base + "/missing"][1].statusline == "404 Not Found"
    assert responses[base + "/missing"][2] == b"not here"
    # Kept as sent: gzip-encoded, with the Content-Encoding that says so (until 2026-11-26
    # the records were written after HttpCompressionMiddleware had decoded the body).
    gz_http, gz_body = responses[base + "/gzip"][1:]
    assert gz_http.get_header("Content-Encoding") == "gzip" and gzip.decompress(gz_body) == TEXT
    assert responses[base + "/chunked"][2] == b"".join(CHUNKS)
    assert responses[base + "/form"][2] == b"got a=1&b=2"
    form_request = requests[base + "/form"]
    assert form_request[1].protocol == "POST" and form_request[2] == b"a=1&b=2"
    assert requests[base + "/gzip"][1].get_header("Accept-Encoding")  # added by Scrapy
    assert requests[base + "/"][1].get_header("Host") == base.removeprefix("http://")
    assert stats["irl_warc/records"] == 12 and stats["irl_warc/files"] == 1
    assert stats["irl_warc/write_errors"] == 0 and stats["finish_reason"] == "finished"
    assert stats["irl_warc/bytes"] == sum(p.stat().st_size for p in listing(directory))
    # the refused connection has no response: nothing archived (the 404 reaches the errback too)
    assert stats["downloader/exception_count"] == 1 and stats["test/failed"] == 2


@pytest.mark.slow
def test_real_crawl_archives_the_redirects_it_follows(tmp_path: Path):
    """A 301 that RedirectMiddleware follows and a page whose meta refresh
    MetaRefreshMiddleware follows never reach the engine. Archived on response_received,
    neither was in the WARC files, only the pages they led to."""
    with warc_site() as site:
        base = site.base_url
        stats, _ = crawl({"get": [base + "/moved", base + "/refresh"],
                          "settings": {"EXTENSIONS": {EXTENSION: 0}}},  # listing it is enough
                         cwd=tmp_path)  # fmt: skip
    assert stats["finish_reason"] == "finished" and stats["test/parsed"] == 2, stats
    records = records_in(tmp_path / "warc")
    responses = {uri: (http, body) for kind, uri, _, http, body in records if kind == "response"}
    requests = {uri for kind, uri, *_ in records if kind == "request"}
    assert set(responses) == requests == {base + p for p in ("/moved", "/", "/refresh", "/img.png")}
    moved_http, _ = responses[base + "/moved"]
    assert moved_http.statusline == "301 Moved Permanently"
    assert moved_http.get_header("Location") == "/"
    assert responses[base + "/refresh"][1] == REFRESH
    assert responses[base + "/"][1] == HTML and responses[base + "/img.png"][1] == PNG
    assert stats["irl_warc/records"] == 8 and stats["irl_warc/write_errors"] == 0


@pytest.mark.slow
def test_real_crawl_stores_header_bytes_as_sent(tmp_path: Path):
    with warc_site() as site:
        url = site.base_url + "/raw-headers"
        stats, _ = crawl({"get": [url], "headers": {"X-Name": "café"},
                          "settings": {"EXTENSIONS": {EXTENSION: 0}, "IRL_WARC_ENABLED": True}},
                         cwd=tmp_path)  # fmt: skip
    assert stats["irl_warc/records"] == 2 and stats["irl_warc/write_errors"] == 0
    blocks = blocks_in(tmp_path / "warc")
    head, body = blocks["response", url].split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")[1:]
    for name, value in RAW_HEADERS:
        assert name + b": " + value in lines, lines
    sent = b"X-Name: caf\xc3\xa9"
    assert body == sent  # the server got the UTF-8 bytes...
    assert sent in blocks["request", url].split(b"\r\n")  # ... and the request record has them
    [resp] = [(r, b) for r, b in checked_records(tmp_path / "warc") if r.rec_type == "response"]
    assert resp[1] == sent and resp[0].rec_headers.get_header("WARC-Payload-Digest") == sha1_digest(sent)


@pytest.mark.slow
def test_real_crawl_survives_write_errors(tmp_path: Path):
    with warc_site() as site:
        urls = [f"{site.base_url}/missing?{n}" for n in range(6)]
        stats, stderr = crawl({"get": urls, "settings": {
            "EXTENSIONS": {"tests.warc.crawl_runner.FlakyWarcExtension": 0},
            "IRL_WARC_ENABLED": True, "IRL_WARC_MAX_BYTES": 1500, "CONCURRENT_REQUESTS": 1}},
            cwd=tmp_path)
    assert stats["finish_reason"] == "finished"
    assert stats["downloader/response_count"] == 6
    assert stats["irl_warc/write_errors"] == 3 and stats["irl_warc/records"] == 6
    assert stderr.count("WARC write failed") == 1
    records = records_in(tmp_path / "warc")  # the default directory, in the current one
    assert len([r for r in records if r[0] == "response"]) == 3
    assert stats["irl_warc/files"] == len(listing(tmp_path / "warc")) >= 2


@pytest.mark.slow
def test_real_crawl_marks_a_cut_body_and_keeps_a_204_as_sent(tmp_path: Path):
    with warc_site() as site:
        cut, empty = site.base_url + "/truncated", site.base_url + "/nocontent"
        unchanged = site.base_url + "/notmodified"
        stats, _ = crawl({"get": [cut, empty, unchanged], "settings": {
            "EXTENSIONS": {EXTENSION: 0}, "IRL_WARC_ENABLED": True,
            "DOWNLOAD_FAIL_ON_DATALOSS": False}}, cwd=tmp_path)
    responses = {uri: (warc, http, body) for kind, uri, warc, http, body
                 in records_in(tmp_path / "warc") if kind == "response"}  # fmt: skip
    warc, http, body = responses[cut]
    assert body == TRUNCATED and warc.get_header("WARC-Truncated") == "disconnect"
    assert http.get_header("Content-Length") == "1000"  # as announced (the part is shorter)
    assert responses[empty][1].statusline == "204 No Content"
    assert responses[empty][1].get_header("Content-Length") is None
    assert responses[empty][0].get_header("WARC-Truncated") is None
    # the server sent no Content-Length; Scrapy's handler added "0" (kept until 2026-11-29)
    assert responses[unchanged][1].statusline == "304 Not Modified"
    assert responses[unchanged][1].get_header("Content-Length") is None
    assert stats["irl_warc/truncated"] == 1 and stats["irl_warc/records"] == 6
    checked_records(tmp_path / "warc")


@pytest.mark.slow
def test_real_crawl_marks_a_download_a_handler_stopped(tmp_path: Path):
    with warc_site() as site:
        url = site.base_url + "/long"
        stats, _ = crawl({"get": [url], "settings": {
            "EXTENSIONS": {EXTENSION: 0, "tests.warc.crawl_runner.StopLongDownloads": 0}}},
            cwd=tmp_path)
    [(warc, http, body)] = [(warc, http, body) for kind, uri, warc, http, body
                            in records_in(tmp_path / "warc") if kind == "response"]
    assert 0 < len(body) < len(LONG) and LONG.startswith(body)
    assert warc.get_header("WARC-Truncated") == "unspecified"
    assert http.get_header("Content-Length") == str(len(LONG))  # the server's, not len(body)
    assert stats["irl_warc/truncated"] == 1 and stats["test/parsed"] == 1
    checked_records(tmp_path / "warc")


@pytest.mark.slow
def test_real_crawl_does_not_archive_responses_from_the_http_cache(tmp_path: Path):
    # The second run reads every page from HttpCacheMiddleware's cache: writing them again
    # would date a second "capture" of each page at a time no request was sent.
    with warc_site() as site:
        urls = [site.base_url + p for p in ("/", "/img.png", "/missing")]
        settings = {"EXTENSIONS": {EXTENSION: 0}, "IRL_WARC_ENABLED": True, "HTTPCACHE_ENABLED": True,
                    "HTTPCACHE_DIR": str(tmp_path / "cache"), "IRL_WARC_DIR": str(tmp_path / "warc")}
        first, _ = crawl({"get": urls, "settings": settings}, cwd=tmp_path)
        second, _ = crawl({"get": urls, "settings": settings}, cwd=tmp_path)
    assert first["irl_warc/records"] == 6 and "irl_warc/cached_skipped" not in first
    # A page read from the cache is not downloaded: response_downloaded is not sent for it.
    assert second["httpcache/hit"] == 3 and "irl_warc/cached_skipped" not in second
    assert second["irl_warc/records"] == 0 and second["irl_warc/files"] == 0
    responses = [uri for kind, uri, *_ in records_in(tmp_path / "warc") if kind == "response"]
    assert sorted(responses) == sorted(urls)
