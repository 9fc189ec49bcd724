"""Stage 1 of the IRL scheduler: ``enqueue_request`` -> URLseen -> STAR.

Every request becomes a record (URL + serialized request) checked against URLseen by DRUM
``check+update``; its link's PLD edge goes to STAR. Unique URLs reach STAR (budget B_x,
admitted P_x) and from there BEAST; duplicates are counted and ``request_dropped`` is sent
for them when the batch merges. Requests that cannot be serialized wait in RAM for the
merge's verdict. Thesis chapters IV (DRUM) and VI (STAR)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import numpy as np
from pydispatch.dispatcher import getAllReceivers, liveReceivers
from scrapy import signals
from scrapy.http import Request
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.request import referer_str
from w3lib.url import canonicalize_url

from scrapy_irl.drum import CHECK
from scrapy_irl.hosts.names import refused_by_twisted
from scrapy_irl.linksource import SOURCE_META_KEY
from scrapy_irl.robots.middleware import INVALID_HOST_META
from scrapy_irl.scheduler.codec import (
    pack_record,
    record_blob,
    record_url,
)
from scrapy_irl.scheduler.items import (
    RAM_PREFIX,
    host_key,
    url_parts,
    without_host,
)
from scrapy_irl.scheduler.urlnorm import plain_host_spelling

if TYPE_CHECKING:
    from scrapy_irl.drum.store import DrumBatch

logger = logging.getLogger(__name__)
#: Source URLs whose redirect to another spelling was fetched undeduplicated (see
#: ``_spelling_redirect``): at most this many remembered.
SPELLING_REDIRECTS_KEPT = 10_000
#: Where Scrapy's scheduler has its dupefilter log duplicates (see scrapy_irl.dupefilter).
dupes_logger = logging.getLogger("scrapy.dupefilters")


class Intake:
    """IrlScheduler's enqueue side (a mixin: the state is IrlScheduler's, set in its __init__)."""

    def _enqueue(self, request: Request) -> bool:
        parts = urlparse_cached(request)
        host = host_key(parts.hostname)
        no_host = without_host(parts.scheme, host, self._polite_schemes)
        if no_host or self._refused_host(parts, request):
            # data:, file:, unknown schemes: no host to be polite to; the downloader
            # handles (or rejects) them, so they are handed out in RAM, unchanged (what
            # follows a data: URL's comma is content, not a query). Still filtered, as by
            # Scrapy's scheduler: the same data: or unknown-scheme link on every page
            # of a broad crawl was otherwise one failed download per page. A host name
            # Twisted refuses reaches no server either: it fails as in stock Scrapy.
            self.counts["no_host" if no_host else "invalid_host"] += 1
            if request.dont_filter or not self.filtering:
                self._direct.append(request)
                self.stats.inc_value("scheduler/enqueued")
                return True
            self._check_in_ram(request, None, self._key(self._fingerprint(request)))
            return True
        # A URL asked for by name (dont_filter: start URLs, retries, ``scrapy fetch``; or
        # nothing filtered: ``scrapy shell``) is fetched as given: stripping serves
        # deduplication, and replacing the request lost the object the shell waits on.
        exempt = request.dont_filter or not self.filtering or self._spelling_redirect(request)
        stripped = None if exempt else self.strip_session(request.url)
        if stripped is not None and self._redirected_to_add_session(request, stripped):
            # A server that puts the session id in the URL (a servlet without its
            # cookie) redirects each page to itself with one: stripped, the target is
            # its own source again, a duplicate (or, with dont_filter, a redirect loop
            # until REDIRECT_MAX_TIMES), and the page was never fetched. Kept as is; its
            # links are stripped like any other.
            self.counts["session_redirects_kept"] += 1
            stripped = None
        if stripped is not None:
            if not self.counts["session_params_stripped"]:
                # once: a count alone left a user wondering where pages went (a probe)
                logger.info(
                    "IRL scheduler: removing session-id parameters from URLs before they "
                    "are deduplicated and fetched, e.g. %(url)s -> %(stripped)s "
                    "(IRL_SESSION_PARAMS; [] keeps URLs unchanged; counted in "
                    "irl_sched/session_params_stripped)",
                    {"url": request.url, "stripped": stripped}, extra={"spider": self.spider},
                )  # fmt: skip
            self.counts["session_params_stripped"] += 1
            request = request.replace(url=stripped)
            parts = urlparse_cached(request)
        # The page the link was found on (LinkSourceMiddleware), dropped from meta so the
        # record on disk does not carry it; the Referer header when the middleware is off.
        source = request.meta.pop(SOURCE_META_KEY, None) or request.headers.get(b"Referer")
        if not request.dont_filter and self.trap_rule.active:
            trap = self.trap_rule(parts.path)
            if trap is not None:
                # Refused before URLseen: a trap URL costs no disk and no budget. False
                # makes the engine send request_dropped, as for any refused request.
                self.counts[f"trap_dropped/{trap}"] += 1
                logger.debug("Dropped %(url)s: path looks like a crawler trap (%(why)s)",
                             {"url": request.url, "why": trap}, extra={"spider": self.spider})  # fmt: skip
                return False
        if source:
            self._record_link(source, host)
        if request.dont_filter:
            self.counts["dont_filter"] += 1
        elif not self.filtering:
            self.counts["not_filtered"] += 1
        fingerprint = self._dedup_fingerprint(request)
        if exempt:
            self._remember_without_session(request)
        try:
            record = pack_record(request.url, self.codec.encode(request))
        except ValueError as exc:
            self._enqueue_in_ram(request, host, self._key(fingerprint), exc)
            return True
        self._live[record] = request
        if exempt:
            # Not filtered, but remembered: a later ordinary link to it is a duplicate
            # (Scrapy's scheduler fetches it again; docs/scheduler.rst, "Start URLs are
            # remembered").
            # Outside the budgets, yet on disk like the rest (start URLs can be millions,
            # and a retry must survive a kill -9): BEAST's front queue, read first.
            self._mark_seen(self._key(fingerprint))
            self.beast.push_front(record)
            self.stats.inc_value("scheduler/enqueued")
            return True
        self.urlseen.check_update(self._key(fingerprint), None, record)
        return True

    def _mark_seen(self, key: int) -> None:
        """URLseen ``update`` of a key fetched without its check (``dont_filter``, a URL's
        form without its session id): counted apart, as no request waits behind it (a
        ``dont_filter`` request counted twice in ``len(scheduler)`` until the merge)."""
        merges = self.urlseen.stats.merges
        if merges != self._marks_merge:
            self._marks_merge, self._marks = merges, 0
        self._marks += 1
        self.urlseen.update(key)

    def _urlseen_requests(self) -> int:
        """URLseen's pending tuples that are requests: its seen-marks left out."""
        marks = self._marks if self.urlseen.stats.merges == self._marks_merge else 0
        return max(0, self.urlseen.pending_tuples - marks)

    def _dedup_fingerprint(self, request: Request) -> bytes:
        """The fingerprint URLseen keys ``request`` on: of its URL without its scheme's
        default port (:func:`plain_host_spelling`), so that ``a.test:80/p`` and
        ``a.test/p`` are one URL. The request is fetched as given."""
        plain = plain_host_spelling(request.url)
        if plain is None:
            return self._fingerprint(request)
        self.counts["host_spellings_folded"] += 1
        return self._fingerprint(request.replace(url=plain))

    def _spelling_redirect(self, request: Request) -> bool:
        """``request`` is a redirect to another spelling of the URL it came from (a server
        moving ``a.test:80`` to ``a.test``): one URL to deduplication, so it would be
        dropped as its own duplicate and the page never fetched. It is fetched as given
        instead, like a ``dont_filter`` request, once per source URL: a spider that copies
        ``response.meta`` into its links carries ``redirect_urls`` along, and every later
        link to the page looked like that redirect again (a review: one page fetched 58
        times)."""
        sources = request.meta.get("redirect_urls")
        if not sources or not isinstance(sources, list) or str(sources[-1]) == request.url:
            return False
        source, target = str(sources[-1]), request.url
        folded = canonicalize_url(plain_host_spelling(source) or source)
        if folded != canonicalize_url(plain_host_spelling(target) or target):
            return False
        if folded in self._spelling_redirected:
            return False
        if len(self._spelling_redirected) >= SPELLING_REDIRECTS_KEPT:
            self._spelling_redirected.clear()  # bounded; a repeat then costs one fetch
        self._spelling_redirected.add(folded)
        self.counts["spelling_redirects_followed"] += 1
        return True

    def _remember_without_session(self, request: Request) -> None:
        """A URL fetched as given with a session id: its links elsewhere are stripped, so
        its stripped form is recorded too (a later link to it is a duplicate)."""
        stripped = self.strip_session(request.url)
        if stripped is not None:
            self._mark_seen(self._key(self._dedup_fingerprint(request.replace(url=stripped))))

    def _redirected_to_add_session(self, request: Request, stripped: str) -> bool:
        """``request`` is a redirect whose target, stripped of session ids, is the URL it
        was redirected from (RedirectMiddleware's ``redirect_urls``)."""
        sources = request.meta.get("redirect_urls")
        if not sources or not isinstance(sources, list):
            return False
        source = str(sources[-1])
        return (self.strip_session(source) or source) == stripped

    def _request_of(self, record: bytes, *, take: bool = True) -> Request:
        """The request a record was written from, if its caller still holds that object
        (as Scrapy's memory queues hand out the very object enqueued); else rebuilt.

        ``scrapy shell`` calls ``engine.crawl(request)`` and only then sets the callback
        that delivers the response to the console, on that object: a rebuilt copy has no
        such callback, so every shell fetch hung. Usually nothing holds a request once it
        is enqueued, and its entry goes with it; each entry serves one hand-out.
        ``take=False``: only a look (a gate that may still hold or queue the record); the
        entry stays for the hand-out, which :meth:`_queue_direct` and ``_pop`` take.
        """
        if not self._live:
            request = None
        elif take:
            request = self._live.pop(record, None)
        else:
            request = self._live.get(record)
        if request is not None:
            return request
        return self.codec.decode(record_blob(record))

    def _record_link(self, source: str | bytes, host: str) -> None:
        """STAR's PLD edge from the page ``source`` to ``host``; a source that is not a
        URL (a malformed Referer header) is counted and ignored, never an error."""
        if isinstance(source, bytes):
            source = source.decode("latin-1")
        try:
            src_host = host_key(url_parts(source).hostname)
        except ValueError:
            self.counts["link_source_unparseable"] += 1
            return
        if src_host:
            self.star.record_link(src_host, host)

    def _enqueue_in_ram(self, request: Request, host: str, key: int, why: Exception) -> None:
        """A request that cannot be written to disk stays in RAM, as in Scrapy's own
        scheduler, but is still filtered: URLseen checks its key like any other (the aux
        names the waiting request), and only a URL never seen before is routed.
        ``SCHEDULER_DEBUG`` logs the first one, as Scrapy's scheduler does."""
        self.stats.inc_value("scheduler/unserializable")
        if self.log_unserializable:
            self.log_unserializable = False
            logger.warning(
                "Unable to serialize request: %(request)s - reason: %(why)s - it waits in "
                "RAM (lost if the crawl is killed); no more unserializable requests will "
                "be logged (counted in scheduler/unserializable)",
                {"request": request, "why": why}, extra={"spider": self.spider},
            )  # fmt: skip
        if request.dont_filter or not self.filtering:
            self._mark_seen(key)
            self.stats.inc_value("scheduler/enqueued")
            self._route(request, host)
            self._note_ram_peak()
            return
        self._check_in_ram(request, host, key)

    def _maybe_refused(self, parts: Any) -> bool:
        """The URL's part of :meth:`_refused_host`, without the request (cached per name)."""
        return parts.scheme in self._twisted_schemes and refused_by_twisted(
            parts.scheme, parts.netloc
        )

    def _refused_host(self, parts: Any, request: Request) -> bool:
        """A URL whose host name Twisted's HTTP client refuses before sending a byte
        (``user@host``, a ``%`` in the name): no robots.txt to fetch (its fetch
        would fail the same way, held through every retry), no politeness to book, no
        host to back off for it (:func:`~scrapy_irl.hosts.names.refused_by_twisted`).
        Not for a proxied request (the proxy is connected to) nor another handler's."""
        if not self._maybe_refused(parts):
            return False
        if self.proxies.proxied(parts.scheme, parts.hostname, request.meta):
            return False
        if not self._told_invalid_host:
            self._told_invalid_host = True
            logger.info(
                "%(url)s: Twisted refuses this host name (user info, or a character no "
                "DNS name has): such URLs go to the downloader at once and fail there, as "
                "in stock Scrapy, without a robots.txt fetch or a politeness turn. "
                "Counted in irl_sched/invalid_host.",
                {"url": request.url}, extra={"spider": self.spider},
            )  # fmt: skip
        request.meta[INVALID_HOST_META] = True  # RobotsCacheMiddleware: no robots.txt for it
        return True

    def _check_in_ram(self, request: Request, host: str | None, key: int) -> None:
        """URLseen checks ``key``; the request waits in RAM for the verdict (the aux names
        it). ``host`` None: a request without a host, handed out directly if unique."""
        self._ram_check_ids += 1
        token = self._ram_check_ids
        self._ram_checks[token] = (request, host)
        self.urlseen.check_update(key, None, RAM_PREFIX + token.to_bytes(8, "little"))

    def _take_ram_check(self, aux: bytes) -> tuple[Request, str | None] | None:
        """The waiting request a URLseen aux names, if it is a RAM check still known here
        (after a restart it is not: the request died with the process, as it would have
        in Scrapy's scheduler, and is counted)."""
        if not aux.startswith(RAM_PREFIX):
            return None
        got = self._ram_checks.pop(_ram_token(aux), None)
        if got is None:
            self.counts["unserializable_lost_at_restart"] += 1
        return got

    def _on_urlseen_results(self, batch: DrumBatch) -> None:
        checked = (batch.ops & CHECK).astype(
            bool
        )  # UPDATE-only tuples: dont_filter marks
        unique = 0
        for i in np.flatnonzero(batch.unique & checked):
            record = batch.aux(int(i))
            unique += 1
            if record.startswith(RAM_PREFIX):
                waiting = self._take_ram_check(record)
                if waiting is not None:
                    self.stats.inc_value("scheduler/enqueued")
                    request, waiting_host = waiting
                    if waiting_host is None:  # no host: nothing to be polite to
                        self._direct.append(request)
                    else:
                        self._route(request, waiting_host)  # in RAM, outside the budgets
                    self._note_ram_peak()
                continue
            host = host_key(url_parts(record_url(record)).hostname)
            self.stats.inc_value("scheduler/enqueued")
            # STAR hands it to BEAST with (B_x, P_x); the origin makes a delivery again
            # after a kill queue it once
            self.star.admit(record, host, (batch.epoch, batch.bucket, batch.start + int(i)))
        duplicates = int(np.count_nonzero(checked)) - unique
        if duplicates:
            self.stats.inc_value("dupefilter/filtered", duplicates)
            if self.log_next_duplicate or self.log_every_duplicate:
                self._log_duplicates(batch, checked)
            self._signal_dropped(batch, checked)
        self.counts["unique"] += unique

    def _log_duplicates(self, batch: DrumBatch, checked: np.ndarray) -> None:
        """Scrapy's duplicate lines, under its logger: the first duplicate of the crawl, or
        each one with DUPEFILTER_DEBUG (then each costs an unpickle, as a debug run may)."""
        for i in np.flatnonzero(~batch.unique & checked):
            request = self._duplicate_request(batch.aux(int(i)))
            if request is None:
                continue
            if self.log_every_duplicate:
                dupes_logger.debug(
                    "Filtered duplicate request: %(request)s (referer: %(referer)s)",
                    {"request": request, "referer": referer_str(request)},
                    extra={"spider": self.spider},
                )
                continue
            dupes_logger.debug(
                "Filtered duplicate request: %(request)s - no more duplicates will be "
                "shown (see DUPEFILTER_DEBUG to show all duplicates)",
                {"request": request}, extra={"spider": self.spider},
            )  # fmt: skip
            self.log_next_duplicate = False
            return

    def _duplicate_request(self, aux: bytes) -> Request | None:
        """The request a duplicate's URLseen aux names: waiting in RAM (left there), or
        rebuilt from its record; None if it is gone or does not decode."""
        if aux.startswith(RAM_PREFIX):
            waiting = self._ram_checks.get(_ram_token(aux))
            return waiting[0] if waiting is not None else None
        try:
            return self.codec.decode(record_blob(aux))
        except ValueError:
            return None

    def _signal_dropped(self, batch: DrumBatch, checked: np.ndarray) -> None:
        """``request_dropped`` for each duplicate, rebuilt from its record.

        The engine could not send it: ``enqueue_request`` returned True before the batch
        merged. Rebuilding a request costs an unpickle, so it is done only while some
        receiver is connected to the signal (Scrapy itself connects none).
        """
        sender = self.crawler.signals.sender
        duplicates = np.flatnonzero(~batch.unique & checked)
        # Duplicates of requests waiting in RAM are forgotten here; the scan is skipped
        # (as on every merge of a crawl without such requests) when none is waiting.
        ram = []
        if self._ram_checks:
            auxes = (batch.aux(int(i)) for i in duplicates)
            ram = [self._take_ram_check(aux) for aux in auxes if aux.startswith(RAM_PREFIX)]
        if not any(True for _ in liveReceivers(getAllReceivers(sender, signals.request_dropped))):
            return
        for waiting in ram:
            if waiting is not None:
                self.crawler.signals.send_catch_log(
                    signals.request_dropped, request=waiting[0], spider=self.spider
                )
        for i in duplicates:
            aux = batch.aux(int(i))
            if aux.startswith(RAM_PREFIX):
                continue
            try:
                request = self.codec.decode(record_blob(aux))
            except ValueError:
                self.counts["dropped_signal_undecodable"] += 1
                continue
            self.crawler.signals.send_catch_log(
                signals.request_dropped, request=request, spider=self.spider
            )


def _ram_token(aux: bytes) -> int:
    """The key of the RAM-waiting request a URLseen aux (``RAM_PREFIX`` + 8 bytes) names."""
    return int.from_bytes(aux[len(RAM_PREFIX) :], "little")
