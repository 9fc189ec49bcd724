"""``broad``: follow every link from a seed list, or crawl the bundled simulated web.

    scrapy crawl broad                      # start simweb on loopback and crawl it
    scrapy crawl broad -a seeds=seeds.txt   # one URL a line; '#' comments and blanks skipped
    scrapy crawl broad -a start_urls=http://localhost:8000/,http://127.0.0.2:8000/
    scrapy crawl broad -a simweb=1 -a requests_log=simweb.log

With simweb, the server runs in a thread of this process and logs every request it serves;
when the spider closes, simweb's judge scores the crawl from that log (spam and trap share,
politeness gaps, robots violations, ...) and logs the table. simweb starts when the spider
opens; if it cannot (a resumed JOBDIR's port is taken), the spider closes before the engine
hands out a single request (``finish_reason`` ``simweb_unavailable``) and the frontier
stays in the JOBDIR for the next run.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import scrapy
from scrapy import signals
from scrapy.exceptions import CloseSpider
from scrapy.http import HtmlResponse, Response, XmlResponse
from scrapy.linkextractors import LinkExtractor
from w3lib.url import safe_url_string

logger = logging.getLogger(__name__)


def _read_port(path: Path) -> int | None:
    """The simweb port an earlier run of this JOBDIR used, if it left a readable one.

    Only the file as :func:`_write_port` writes it, digits and a newline: a file cut
    short ("4123" of "41234\n") read as another port, and the frontier was spent against
    it (a JOBDIR damage probe, 2026-11-28)."""
    try:
        text = path.read_text(encoding="ascii")
    except (OSError, ValueError):
        return None
    if re.fullmatch(r"[0-9]{1,5}\n", text) is None:
        return None
    port = int(text)
    return port if 0 < port < 65536 else None


def _write_port(path: Path, port: int) -> None:
    """Write the port whole or not at all (a temporary file renamed over it): a kill while
    ``write_text`` truncated then wrote left an empty file, and the next run picked a
    new port under a frontier that names the old one."""
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "w") as handle:
        handle.write(f"{port}\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def switch_argument(name: str, value: str) -> bool:
    """A spider argument meant as on/off (``-a simweb=0`` is off: ``bool("0")`` is not)."""
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"-a {name}={value!r}: expected 1/0, true/false, yes/no or on/off")


def read_seeds(path: Path) -> tuple[list[str], list[tuple[int, str]]]:
    """Valid http(s) URLs of a seed file, and the (line number, text) of rejected lines."""
    # utf-8-sig: a byte-order mark (as some editors save) is not part of the first URL.
    return parse_seeds(path.read_text(encoding="utf-8-sig", errors="replace").splitlines())


def parse_seeds(lines: list[str]) -> tuple[list[str], list[tuple[int, str]]]:
    """Valid http(s) URLs among ``lines``, and the (number, text) of rejected ones."""
    from urllib.parse import urlsplit

    good: list[str] = []
    bad: list[tuple[int, str]] = []
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            parts = urlsplit(line)
            valid = parts.scheme in ("http", "https") and bool(parts.hostname)
            url = safe_url_string(line) if valid else ""  # checks the port, too
        except ValueError:
            valid = False
        if valid:
            good.append(url)
        else:
            bad.append((number, line[:200]))
    return good, bad


class BroadSpider(scrapy.Spider):
    name = "broad"

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> BroadSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        # Scrapy logs every over-long link at INFO with the whole URL (simweb serves 2 KB+
        # ones on purpose); they are counted in 'urllength/request_ignored_count' anyway.
        logging.getLogger("scrapy.spidermiddlewares.urllength").setLevel(logging.WARNING)
        # After every spider_closed handler: the WARC writer has renamed its last file.
        crawler.signals.connect(spider._list_warc_files, signal=signals.engine_stopped)
        crawler.signals.connect(spider._open_simweb, signal=signals.spider_opened)
        return spider

    def __init__(
        self,
        seeds: str | None = None,
        start_urls: str | None = None,
        simweb: str | None = None,
        requests_log: str = "simweb-requests.log",
        simweb_seeds: str = "10",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.seeds_path = Path(seeds) if seeds else None
        # -a start_urls=URL,URL (Scrapy would set the string as the attribute as is)
        self.given_urls = (start_urls or "").replace(",", " ").split()
        nothing_given = self.seeds_path is None and not self.given_urls
        wanted = None if simweb is None else switch_argument("simweb", simweb)
        if wanted is False and nothing_given:
            raise ValueError("-a simweb=0 needs seeds (-a seeds=FILE) or -a start_urls=URL,...: "
                             "there is nothing else to crawl")  # fmt: skip
        self.use_simweb = wanted is True or nothing_given
        self.requests_log = Path(requests_log)
        self.simweb_seeds = int(simweb_seeds)
        self.links = LinkExtractor()
        self._simweb: contextlib.ExitStack | None = None
        self._running: Any = None
        self._simweb_seeds: list[str] = []

    def _open_simweb(self) -> None:
        """Start simweb at spider_opened, before the engine runs: a crawl without it closes
        there, and a resumed frontier (every URL names simweb's port) is never fetched.

        When a spider_opened handler raises CloseSpider, Scrapy's engine (2.19:
        ``open_spider_async``) closes the spider without starting: no request is handed out,
        and the scheduler's close keeps the frontier. A close asked from ``start()`` came
        too late: the engine had already handed out ~14 requests from the frontier.
        """
        if not self.use_simweb:
            return
        try:
            self._simweb_seeds = self._start_simweb()
        except RuntimeError as exc:  # its port is taken: a crawl without a web is useless
            logger.error("%(error)s", {"error": exc})
            raise CloseSpider("simweb_unavailable") from exc
        except Exception as exc:
            logger.exception("simweb could not start")
            raise CloseSpider("simweb_unavailable") from exc

    async def start(self) -> AsyncIterator[Any]:
        for url in self._simweb_seeds:
            yield self._request(url)
        good: list[str] = []
        rejected = 0
        if self.given_urls:
            urls, bad = parse_seeds(self.given_urls)
            for number, text in bad:
                logger.warning("start_urls item %(n)d is not an http(s) URL: %(text)r",
                               {"n": number, "text": text})
            good += urls
            rejected += len(bad)
        if self.seeds_path is not None:
            urls, bad = read_seeds(self.seeds_path)
            for number, text in bad:
                logger.warning("Seed file %(path)s line %(n)d is not an http(s) URL: %(text)r",
                               {"path": self.seeds_path, "n": number, "text": text})
            good += urls
            rejected += len(bad)
        if self.given_urls or self.seeds_path is not None:
            self.crawler.stats.set_value("broad/seeds", len(good))
            self.crawler.stats.set_value("broad/seeds_rejected", rejected)
        for url in good:
            yield self._request(url)

    def parse(self, response: Response) -> Any:
        if not isinstance(response, (HtmlResponse, XmlResponse)):
            # images, JSON, plain text...: stored in the WARC files, but no links to follow
            self.crawler.stats.inc_value("broad/not_markup_responses")
            return
        try:
            links = self.links.extract_links(response)
        except Exception as exc:  # malformed input must not stop the crawl
            self.crawler.stats.inc_value("broad/link_extraction_errors")
            logger.warning("No links extracted from %(url)s: %(error)r",
                           {"url": response.url, "error": exc})
            return
        for link in links:
            yield self._request(link.url)

    def _request(self, url: str) -> scrapy.Request:
        # simweb is on this machine's loopback addresses: a proxy from the environment
        # (http_proxy, as many CI machines set) would get its requests instead.
        meta = {"proxy": None} if self.use_simweb else None
        return scrapy.Request(url, errback=self.on_error, meta=meta)

    def on_error(self, failure: Any) -> None:
        """Dead hosts, DNS failures and timeouts are part of a broad crawl: count them."""
        self.crawler.stats.inc_value(f"broad/errors/{failure.type.__name__}")
        logger.debug("Fetch failed: %(request)s: %(error)s",
                     {"request": failure.request, "error": failure.value})

    def _list_warc_files(self) -> None:
        """Say where the page repository went (the WARC extension may still be finishing)."""
        from scrapy_irl.warc.extension import WarcExtension, warc_dir

        settings = self.crawler.settings
        extensions = getattr(self.crawler.extensions, "middlewares", ())
        if not any(isinstance(extension, WarcExtension) for extension in extensions):
            return  # not in EXTENSIONS, or switched off (IRL_WARC_ENABLED = False)

        directory = Path(warc_dir(settings))
        files = sorted(p.name for p in directory.glob("*.warc*")) if directory.is_dir() else []
        logger.info("WARC files in %(dir)s: %(files)s",
                    {"dir": directory.resolve(), "files": ", ".join(files) or "none"})

    def _start_simweb(self) -> list[str]:
        from scrapy_irl.simweb.resolver import config_from_settings
        from scrapy_irl.simweb.runner import serve_in_thread

        from scrapy_irl import config as irl_config

        config = config_from_settings(self.crawler.settings)
        port_file = self._simweb_port_file()
        if not irl_config.getint(self.crawler.settings, "IRL_SIMWEB_PORT"):
            # Any free port; a resumed JOBDIR crawl needs the port of its first run, since
            # every URL in its frontier names it.
            saved = _read_port(port_file) if port_file is not None else None
            # URLs the resumed frontier holds (a kill between the frontier's creation and
            # the port file's write leaves none: nothing names the lost port then)
            resumed = self.crawler.stats.get_value("irl_sched/resumed_pending")
            if saved is None and port_file is not None and (port_file.exists() or resumed):
                # On a new port every queued URL would be refused and used up (a probe:
                # 216 refused in 6 s, and the new port written over the lost one; a
                # fuzz deleted the file: 441 refused connections in 8 s).
                state = "damaged" if port_file.exists() else "missing"
                raise RuntimeError(
                    f"{port_file} is {state}, so the port the JOBDIR's frontier names is "
                    "unknown; set IRL_SIMWEB_PORT to it (the port in the queued URLs), or "
                    "delete the JOBDIR to start afresh"
                )
            config = config.replace(port=saved or 0)
        self.requests_log.unlink(missing_ok=True)
        self._simweb = contextlib.ExitStack()
        try:
            self._running = self._simweb.enter_context(serve_in_thread(config, self.requests_log))
        except OSError as exc:
            self._simweb.close()
            self._simweb = None
            raise RuntimeError(
                f"simweb cannot listen on port {config.port} ({exc}); the JOBDIR's frontier "
                f"names that port ({port_file}). Free the port, or set IRL_SIMWEB_PORT."
            ) from exc
        if port_file is not None:
            _write_port(port_file, self._running.port)
        logger.info("simweb serves %(hosts)d addresses on port %(port)d; request log %(log)s",
                    {"hosts": len(self._running.server.addresses), "port": self._running.port,
                     "log": self.requests_log})
        return self._running.web.seed_urls(self.simweb_seeds)

    def _simweb_port_file(self) -> Path | None:
        from scrapy.utils.job import job_dir

        directory = job_dir(self.crawler.settings)
        return Path(directory, "simweb.port") if directory else None

    def closed(self, reason: str) -> None:
        if self._simweb is None:
            return
        try:
            from scrapy_irl.simweb.report import format_table, judge

            result = judge(self._running.records(), self._running.web)
            logger.info("simweb judge for this crawl:\n%(table)s\n(again: python -m "
                        "scrapy_irl.simweb.report %(log)s)",
                        {"table": format_table(result), "log": self.requests_log})
        finally:
            self._simweb.close()
