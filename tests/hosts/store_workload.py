"""Child process for the kill -9 test: puts numbered records forever, printing each count.

    python -m tests.hosts.store_workload DIR
"""

from __future__ import annotations

import sys

from scrapy_irl.hosts.records import DnsRecord, RobotsKind, RobotsRecord
from scrapy_irl.hosts.store import HostStore


def record(i: int) -> RobotsRecord:
    body = (f"User-agent: *\nDisallow: /p{i}/\n" + "#" * (i % 997)).encode()
    return RobotsRecord(RobotsKind.RULES, 200, float(i), float(i), float(i) + 86400, 0, body)


def main() -> None:
    store = HostStore(sys.argv[1])
    for i in range(10_000_000):
        store.put_robots(f"http://h{i}.test", record(i))
        store.put_dns(f"h{i}.test", DnsRecord((f"127.0.{i % 250}.{i % 200 + 1}",), i, i + 60.0))
        sys.stdout.write(f"{i}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
