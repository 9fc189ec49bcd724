"""simweb in its own process plus crawls of it with ``benchmarks/simweb_spider.py``.

A server in its own process timestamps requests without competing for the crawler's GIL,
so the judge's gaps are what the network saw.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def simweb_server(
    tmp: Path, size: str = "tiny", duration: int = 600, seed: int = 1, web: Sequence[str] = ()
) -> Iterator[tuple[Path, Path]]:
    """``web``: ``FIELD=VALUE`` overrides of the web's config (simweb's ``--web``)."""
    cfg, log = tmp / "web.json", tmp / "requests.log"
    overrides = [arg for item in web for arg in ("--web", item)]
    with open(tmp / "simweb.stderr", "w") as errors:
        yield from _served(cfg, log, errors, [
            sys.executable, "-m", "scrapy_irl.simweb", "--size", size, "--seed", str(seed),
            "--port", "0", "--quiet", "--log", str(log), "--config-out", str(cfg),
            "--duration", str(duration), *overrides])  # fmt: skip


def _served(cfg: Path, log: Path, errors: Any, command: list[str]) -> Iterator[tuple[Path, Path]]:
    server = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=errors)
    try:
        for _ in range(300):
            if cfg.exists() or server.poll() is not None:
                break
            time.sleep(0.1)
        if not cfg.exists():  # say why: its stderr, not only that it failed
            errors.flush()
            said = Path(errors.name).read_text(errors="replace")[-3000:]
            raise AssertionError(f"simweb did not start (exit status {server.poll()}):\n{said}")
        yield cfg, log
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(30)


def spider_command(cfg: Path, settings: dict[str, Any]) -> list[str]:
    return [sys.executable, str(ROOT / "benchmarks" / "simweb_spider.py"), "--config", str(cfg),
            "--settings", json.dumps(settings)]  # fmt: skip


def crawl(cfg: Path, settings: dict[str, Any], timeout: int = 240) -> tuple[dict[str, Any], str]:
    proc = subprocess.run(spider_command(cfg, settings), cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = next(l for l in proc.stdout.splitlines() if l.startswith("STATS "))
    return json.loads(line[6:]), proc.stderr


def judged(cfg: Path, log: Path, **kwargs: Any) -> dict[str, Any]:
    from scrapy_irl.simweb.log import read_log
    from scrapy_irl.simweb.model import web_for
    from scrapy_irl.simweb.report import judge, load_config

    time.sleep(0.5)  # the server flushes its log every few hundred ms
    _, records = read_log(log)
    return judge(records, web_for(load_config(cfg)), **kwargs)


def close_pairs(log: Path, tau_s: float) -> list[tuple[str, str, str, float]]:
    """Consecutive requests to one IP less than ``tau_s`` apart (for failure messages)."""
    from collections import defaultdict

    from scrapy_irl.simweb.log import read_log

    _, records = read_log(log)
    by_ip = defaultdict(list)
    for r in records:
        by_ip[r.ip].append(r)
    pairs = []
    for ip, rs in by_ip.items():
        rs.sort(key=lambda r: r.start)
        pairs += [(ip, f"{a.host}{a.target}", f"{b.host}{b.target}", round(b.start - a.start, 4))
                  for a, b in zip(rs, rs[1:]) if b.start - a.start < tau_s]  # fmt: skip
    return pairs
