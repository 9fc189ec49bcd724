#!/usr/bin/env python3
"""simweb server throughput: requests/s from a loopback keep-alive load generator.

    python benchmarks/simweb_server.py                       # 8 s, 64 connections
    python benchmarks/simweb_server.py --seconds 5 --connections 32 --json

The server runs in its own process (``python -m scrapy_irl.simweb --port 0``, default
size, request log on) so the load generator and the server each get a core. Each client
connection picks a random listed host, sends GETs for its pages over one keep-alive
connection (to the host's own IP) and reads full Content-Length framed responses. The run is
bounded by ``--seconds`` and ``--max-requests``; the server is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scrapy_irl.simweb.config import SIZES
from scrapy_irl.simweb.model import web_for
from scrapy_irl.simweb.report import load_config

START_TIMEOUT = 30.0


async def client(
    web, port: int, deadline: float, budget: list[int], rng: random.Random, stats: dict
) -> None:
    hosts = [h for h in web.hosts.values() if h.robots != "slow"]
    while (
        time.monotonic() < deadline and budget[0] > 0
    ):  # bounded by time and request budget
        host = rng.choice(hosts)
        reader, writer = await asyncio.open_connection(host.ip, port)
        try:
            for _ in range(100):  # a fresh host every 100 requests
                if time.monotonic() >= deadline or budget[0] <= 0:
                    break
                budget[0] -= 1
                n = rng.randrange(host.pages)
                path = f"/p/{n}.html" if n else "/"
                writer.write(
                    f"GET {path} HTTP/1.1\r\nHost: {host.name}:{port}\r\n\r\n".encode()
                )
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.split(b"Content-Length: ", 1)[1].split(b"\r\n", 1)[0])
                await reader.readexactly(length)
                stats["requests"] += 1
                stats["bytes"] += length
        finally:
            writer.close()


async def load(
    web, port: int, seconds: float, connections: int, max_requests: int
) -> dict:
    stats = {"requests": 0, "bytes": 0}
    budget = [max_requests]
    start = time.monotonic()
    deadline = start + seconds
    rngs = [random.Random(i) for i in range(connections)]
    await asyncio.gather(
        *(
            client(web, port, deadline, budget, rngs[i], stats)
            for i in range(connections)
        )
    )
    elapsed = time.monotonic() - start
    return {**stats, "seconds": round(elapsed, 2), "requests_per_s": round(stats["requests"] / elapsed, 1),
            "MB_per_s": round(stats["bytes"] / elapsed / 1e6, 2), "connections": connections}  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--connections", type=int, default=64)
    p.add_argument("--max-requests", type=int, default=1_000_000)
    p.add_argument("--size", choices=sorted(SIZES), default="default")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cfg_path = Path(tmp) / "web.json"
        server = subprocess.Popen(
            [sys.executable, "-m", "scrapy_irl.simweb", "--size", args.size, "--port", "0", "--quiet",
             "--log", str(Path(tmp) / "requests.log"), "--config-out", str(cfg_path),
             "--duration", str(args.seconds + 60)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + START_TIMEOUT
            while not cfg_path.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(0.2)
            config = load_config(cfg_path)
            result = asyncio.run(
                load(
                    web_for(config),
                    config.port,
                    args.seconds,
                    args.connections,
                    args.max_requests,
                )
            )
        finally:
            server.terminate()
            server.wait(10)
        result["logged_lines"] = (
            len((Path(tmp) / "requests.log").read_text().splitlines()) - 1
        )
    print(
        json.dumps(result)
        if args.json
        else "\n".join(f"{k:<16} {v}" for k, v in result.items())
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
