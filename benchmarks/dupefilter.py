#!/usr/bin/env python3
"""URLseen benchmark: stock RFPDupeFilter vs DRUM dupefilter (sync) vs DRUM batch.

    python benchmarks/dupefilter.py                 # N = 1M and 10M, prints a table
    python benchmarks/dupefilter.py --sizes 1000000 --repeat 3
    python benchmarks/dupefilter.py --interleave 1000000   # sync path vs stock, one process

Every measurement runs in a fresh subprocess (a clean RSS baseline) over the same
synthetic request stream: N URLs over a Zipf-distributed population of hosts with ~70-byte
paths, about 1 in 7 of them never seen before (IRLbot's p), the rest repeats of earlier
URLs with a popularity skew. URLs are computed from their index, so the generator itself
holds no per-URL state and does not pollute the RSS numbers.

Modes:
  null        generate URL + Request + Scrapy's fingerprint only: stock's floor
  stock       scrapy.dupefilters.RFPDupeFilter.request_seen (no JOBDIR: in-memory set)
  drum-sync   scrapy_irl DrumDupeFilter.request_seen (temporary store, fsync off), with
              the byte-identical fingerprint shortcut it uses by default
              (scrapy_irl.fingerprint, IRL_FAST_FINGERPRINT)
  drum-batch  URLSeen.submit_many(keys fingerprinted as the IRL scheduler does, aux = URL)
              + merges
  drum-keys   Drum.submit of precomputed uint64 keys (no aux): pure DRUM keys/s
Requests/s include building the Request and its fingerprint (except drum-keys).
RSS growth per unique URL = (RSS after the stream - RSS before it) / unique URLs.

``--interleave N`` measures the synchronous path's speed alone, with less noise: one process
runs null, stock, drum-sync and drum-scrapyfp (drum-sync calling Scrapy's fingerprinter as
is, IRL_FAST_FINGERPRINT off: DRUM's own cost) over the same stream in chunks of 2 000
URLs, each mode with its own fresh ``Request`` objects, the order of the modes rotating
from chunk to chunk, so load from other processes and the machine's speed drift hit every
mode alike. It prints microseconds per request and each mode's ratio to stock.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

UNIQUE_EVERY = 7
HOSTS = 200_000
CHUNK = 65_536
_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"


def _mix(x: int) -> int:
    """splitmix64: a cheap deterministic hash of an index."""
    x = (x + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return x ^ (x >> 31)


def _make_words() -> list[str]:
    words = []
    y = 12345
    for _ in range(1024):
        y = _mix(y)
        words.append("".join(_ALPHABET[(y >> (5 * i)) % 36] for i in range(3 + y % 10)))
    return words


_WORDS = _make_words()


def url_of(u: int) -> str:
    """The u-th unique URL: a heavy-tailed host and a ~70-byte path."""
    h = _mix(u)
    g = _mix(h)
    host_rank = int(HOSTS ** ((h & 0xFFFF) / 0xFFFF))  # log-uniform: heavy-tailed hosts
    tld = ".com" if host_rank % 3 else ".co.uk"
    w = _WORDS
    return (
        f"http://www.site{host_rank}.example{tld}/{w[(h >> 16) & 1023]}/{w[(h >> 26) & 1023]}"
        f"/{w[(h >> 36) & 1023]}/{g:x}-{u}.html?id={(h >> 46) & 0xFFFF}"
    )


def stream(n: int):
    """N URLs: each is new with probability 1/7, else a repeat of an earlier one."""
    unique = 0
    for i in range(n):
        r = _mix(i ^ 0x5DEECE66D)
        if unique == 0 or r % UNIQUE_EVERY == 0:
            yield url_of(unique)
            unique += 1
        else:
            # popularity skew: recent and low-numbered URLs repeat more often
            back = int(unique ** (((r >> 8) & 0xFFFF) / 0xFFFF))
            yield url_of(unique - back if back <= unique else 0)


def _rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def run_one(mode: str, n: int) -> dict:
    """Executed in the child process."""
    from scrapy import Request
    from scrapy.utils.test import get_crawler

    crawler = get_crawler(settings_dict={"IRL_DRUM_FSYNC": False})
    fingerprinter = crawler.request_fingerprinter
    fingerprint = fingerprinter.fingerprint
    workdir = tempfile.mkdtemp(prefix="irl-bench-")
    result: dict = {"mode": mode, "n": n}
    uniques = 0
    if mode == "drum-keys":
        from scrapy_irl.drum import CHECK_UPDATE, Drum

        keys = np.fromiter(
            (int.from_bytes(fingerprint(Request(u))[:8], "big") for u in stream(n)),
            dtype="<u8",
            count=n,
        )
        drum = Drum(workdir, fsync=False, store_aux=False, on_results=None)
        rss0 = _rss()
        t0 = time.perf_counter()
        for lo in range(0, n, 1 << 20):
            drum.submit(keys[lo : lo + (1 << 20)], CHECK_UPDATE)
        drum.merge()
        elapsed = time.perf_counter() - t0
        uniques = drum.stats.unique
        result.update(_drum_io(drum, n, 0.0))
        drum.close()
    elif mode == "drum-batch":
        from scrapy_irl.urlseen import URLSeen

        counted = [0]

        def on_unique(epoch: int, aux: list[bytes]) -> None:
            counted[0] += len(aux)

        from scrapy_irl.fingerprint import fingerprint_function_for

        fingerprint = fingerprint_function_for(crawler)
        seen = URLSeen(workdir, fsync=False, bucket_bytes=32 << 20, buffer_bytes=256 << 10,
                       on_unique=on_unique)
        rss0 = _rss()
        t0 = time.perf_counter()
        keys = np.empty(CHUNK, dtype="<u8")
        batch_aux: list[bytes] = []
        aux_bytes = 0
        for url in stream(n):
            keys[len(batch_aux)] = int.from_bytes(fingerprint(Request(url))[:8], "big")
            batch_aux.append(url.encode())
            if len(batch_aux) == CHUNK:
                aux_bytes += sum(map(len, batch_aux))
                seen.submit_many(keys, batch_aux)
                batch_aux = []
        if batch_aux:
            aux_bytes += sum(map(len, batch_aux))
            seen.submit_many(keys[: len(batch_aux)], batch_aux)
        seen.merge()
        elapsed = time.perf_counter() - t0
        uniques = counted[0]
        result.update(_drum_io(seen.drum, n, aux_bytes / n))
        seen.close()
    else:
        dupefilter = None
        if mode == "stock":
            from scrapy.dupefilters import RFPDupeFilter

            dupefilter = RFPDupeFilter.from_crawler(crawler)
        elif mode == "drum-sync":
            from scrapy_irl.dupefilter import DrumDupeFilter

            dupefilter = DrumDupeFilter.from_crawler(crawler)
        rss0 = _rss()
        t0 = time.perf_counter()
        if dupefilter is None:
            for url in stream(n):
                fingerprint(Request(url))
        else:
            seen = dupefilter.request_seen
            for url in stream(n):
                if not seen(Request(url)):
                    uniques += 1
        elapsed = time.perf_counter() - t0
        if mode == "drum-sync":
            result.update(_drum_io(dupefilter.urlseen.drum, n, 0.0))
        if dupefilter is not None:
            rss_end = _rss()
            dupefilter.close("finished")
            result["rss_growth"] = rss_end - rss0
    result.setdefault("rss_growth", _rss() - rss0)
    result["seconds"] = elapsed
    result["rate"] = n / elapsed
    result["unique"] = uniques
    result["rss_per_unique"] = result["rss_growth"] / uniques if uniques else None
    import resource

    result["peak_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return result


def interleaved(n: int, chunk: int = 2_000) -> tuple[dict[str, float], dict[str, int]]:
    """Seconds per request of each mode, measured chunk by chunk in turn.

    Modes: null (Scrapy's fingerprint only), stock, drum-sync (as a crawl configures it:
    with scrapy_irl.fingerprint's shortcut) and drum-scrapyfp (IRL_FAST_FINGERPRINT off).
    Also returns the new URLs each filter reported: they must agree.
    """
    from scrapy import Request
    from scrapy.dupefilters import RFPDupeFilter
    from scrapy.utils.test import get_crawler

    from scrapy_irl.dupefilter import DrumDupeFilter

    crawler = get_crawler(settings_dict={"IRL_DRUM_FSYNC": False})
    fingerprint = crawler.request_fingerprinter.fingerprint
    drum = DrumDupeFilter.from_crawler(crawler)
    # The same filter calling the crawler's fingerprinter as is: DRUM's own cost alone.
    drum_scrapy_fp = DrumDupeFilter.from_crawler(
        get_crawler(settings_dict={"IRL_DRUM_FSYNC": False, "IRL_FAST_FINGERPRINT": False})
    )
    modes = {
        "null": fingerprint,
        "stock": RFPDupeFilter.from_crawler(crawler).request_seen,
        "drum-sync": drum.request_seen,
        "drum-scrapyfp": drum_scrapy_fp.request_seen,
    }
    names = list(modes)
    spent = dict.fromkeys(names, 0.0)
    unique = dict.fromkeys(names[1:], 0)
    urls = stream(n)
    rotation = 0
    clock = time.perf_counter
    while True:
        batch = [url for _, url in zip(range(chunk), urls)]
        if not batch:
            break
        order = names[rotation:] + names[:rotation]
        rotation = (rotation + 1) % len(names)
        for name in order:
            call = modes[name]
            requests = [Request(url) for url in batch]  # fresh: no cached fingerprints
            start = clock()
            answers = [call(request) for request in requests]
            spent[name] += clock() - start
            if name in unique:
                unique[name] += answers.count(False)
    drum.close("finished")
    drum_scrapy_fp.close("finished")
    return {name: seconds / n for name, seconds in spent.items()}, unique


def _print_interleaved(n: int, per_request: dict[str, float], unique: dict[str, int]) -> None:
    print(f"\nmachine: {os.cpu_count()} cores; python {sys.version.split()[0]}; N = {n:,d},"
          f" one process, modes interleaved in chunks of 2 000; new URLs {unique}")
    print(f"{'mode':13} {'us/request':>10} {'req/s':>9} {'vs stock':>8}")
    for name, seconds in per_request.items():
        print(f"{name:13} {seconds * 1e6:>10.2f} {1 / seconds:>9,.0f} "
              f"{per_request['stock'] / seconds:>8.3f}")


def _drum_io(drum, n: int, aux_per_tuple: float) -> dict:
    s = drum.stats
    return {
        "merges": s.merges,
        "disk_bytes": s.bytes_appended + s.merge_bytes_read + s.merge_bytes_written,
        "bytes_appended": s.bytes_appended,
        "merge_bytes_read": s.merge_bytes_read,
        "merge_bytes_written": s.merge_bytes_written,
        "merge_seconds": s.merge_seconds,
        "aux_per_tuple": aux_per_tuple,
        "unique_keys": s.cache_keys,
        "k": drum.k,
        "r": drum.bucket_bytes,
    }


def theorem2_bytes(n: int, unique: int, b: float, merges: int) -> float:
    """Disk bytes predicted by eq. (14) of the thesis for this run's n, p, b and merges.

    omega = sum over the merges of (2f + 2krb/H + 2kr + 2krp*i - krp) with U = 0, where
    kr is the key bytes per merge. Our records carry one op byte, so H_rec = 9 for the
    bucket terms while Z stores H = 8 bytes per key. The final p*b*n term (appending
    unique URLs to the crawl queue) belongs to the consumer and is left out, as DRUM
    does not write it.
    """
    H, h_rec = 8, 9
    p = unique / n
    m = max(1, merges)
    per_merge = n / m  # tuples per merge iteration
    total = 0.0
    for i in range(1, m + 1):
        z_before = p * per_merge * (i - 1) * H
        total += 2 * z_before + p * per_merge * H  # read old Z, write it plus new keys
        total += 2 * per_merge * (h_rec + (4 + b if b else 0))  # buckets and aux, w + r
    return total


def main() -> int:
    from scrapy_irl.simweb.runner import bypass_proxies

    bypass_proxies()  # every site here is on loopback
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--repeat", type=int, default=1, help="runs per cell; medians shown")
    modes = ["null", "stock", "drum-sync", "drum-batch", "drum-keys"]
    parser.add_argument("--modes", nargs="+", choices=modes, default=modes)
    parser.add_argument("--json", help="also write raw results to this file")
    parser.add_argument("--interleave", type=int, metavar="N",
                        help="only the synchronous modes over N URLs in one process (see above)")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.interleave:
        _print_interleaved(args.interleave, *interleaved(args.interleave))
        return 0
    if args.child:
        print(json.dumps(run_one(args.child[0], int(args.child[1]))))
        return 0

    rows = []
    for n in args.sizes:
        # Interleave the modes (stock, drum, stock, drum, ...) so that load from other
        # processes on a shared machine hits every mode alike; report the medians.
        runs: dict[str, list[dict]] = {mode: [] for mode in args.modes}
        for _ in range(args.repeat):
            for mode in args.modes:
                out = subprocess.run(
                    [sys.executable, __file__, "--child", mode, str(n)],
                    capture_output=True, text=True, check=True,
                )
                runs[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(f"  {mode:10s} N={n:>10,d} {runs[mode][-1]['rate']:>12,.0f} req/s",
                      file=sys.stderr, flush=True)
        for mode in args.modes:
            row = dict(runs[mode][0])
            for key in ("rate", "rss_growth", "seconds", "peak_rss"):
                row[key] = statistics.median(r[key] for r in runs[mode])
            row["rss_per_unique"] = row["rss_growth"] / row["unique"] if row["unique"] else None
            row["runs"] = len(runs[mode])
            rows.append(row)
    _print_table(rows)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)
    return 0


def _print_table(rows: list[dict]) -> None:
    print(f"\nmachine: {os.cpu_count()} cores; python {sys.version.split()[0]}; medians of runs")
    header = f"{'N':>11} {'mode':10} {'req/s':>11} {'vs stock':>8} {'unique':>10} {'RSS B/uniq':>10} {'peak RSS MB':>11} {'merges':>6} {'alpha meas':>10} {'alpha model':>11}"
    print(header)
    print("-" * len(header))
    stock = {r["n"]: r["rate"] for r in rows if r["mode"] == "stock"}
    for r in rows:
        ratio = r["rate"] / stock[r["n"]] if r["n"] in stock else float("nan")
        per = r["rss_per_unique"]
        alpha_m = alpha_t = ""
        if "disk_bytes" in r and r["unique"]:
            b = r["aux_per_tuple"] or 8.0
            alpha_m = f"{r['disk_bytes'] / (b * r['n']):.2f}"
            model = theorem2_bytes(r["n"], r["unique"], r["aux_per_tuple"], r["merges"])
            alpha_t = f"{model / (b * r['n']):.2f}"
        print(
            f"{r['n']:>11,d} {r['mode']:10} {r['rate']:>11,.0f} {ratio:>8.2f} {r['unique']:>10,d} "
            f"{(f'{per:.2f}' if per is not None else '-'):>10} {r['peak_rss'] / 2**20:>11.1f} "
            f"{r.get('merges', ''):>6} {alpha_m:>10} {alpha_t:>11}"
        )
    print("alpha = disk bytes / (b * n), b = mean aux (URL) bytes, or 8 when no aux is stored;"
          " model = thesis eq. (14) with this run's n, p, b and merge count")


if __name__ == "__main__":
    sys.exit(main())
