"""Installed as ``sitecustomize`` in Scrapy's extracted test suite: DNS stays on this machine.

Some of Scrapy's tests, and its mock server at every start, look up names that must not
exist (``non-existing-host``, ``dns.resolution.invalid.``, ``thereisdefinetelynosuchdomain.com``).
Each lookup is a query to the machine's DNS server, which is not on loopback. With this
module on ``PYTHONPATH`` as ``sitecustomize`` (so every Python process of the run, the
mock servers included, loads it before anything else), only loopback names and IP
literals resolve; any other name fails at once with ``EAI_NONAME``, as on a machine
without DNS: the tests see the error they expect, and no packet leaves the machine.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from typing import Any

LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost"})


def is_local(name: str | bytes | None) -> bool:
    """A name that resolves without asking a DNS server (None: the wildcard address)."""
    if name is None:
        return True
    text = name.decode("ascii", "replace") if isinstance(name, bytes) else name
    if text.lower() in LOOPBACK_NAMES:
        return True
    try:
        ipaddress.ip_address(text.strip("[]").split("%")[0])
    except ValueError:
        return False
    return True


def _guard(lookup: Callable[..., Any]) -> Callable[..., Any]:
    def guarded(host: Any, *args: Any, **kwargs: Any) -> Any:
        if is_local(host):
            return lookup(host, *args, **kwargs)
        raise socket.gaierror(socket.EAI_NONAME, f"{host!r} not looked up: loopback-only test run")

    guarded.__wrapped__ = lookup  # type: ignore[attr-defined]
    return guarded


def install() -> None:
    for name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex"):
        current = getattr(socket, name)
        if not hasattr(current, "__wrapped__"):
            setattr(socket, name, _guard(current))


install()
