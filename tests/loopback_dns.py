"""DNS stays on this machine during the tests: only loopback names and IP literals resolve.

Every lookup of another name is a query to the machine's DNS server, which is not on
loopback; so is a reverse lookup of an address /etc/hosts does not list (``http.server``
does one for the address it binds, through ``socket.getfqdn``). Importing this module
makes those fail at once (``EAI_NONAME`` / ``herror``), as on a machine without DNS: code
under test sees the error it would see there, and no packet leaves the machine.

``tests/conftest.py`` imports it for the test process. Scrapy's own suite gets it as
``sitecustomize`` on ``PYTHONPATH`` (``tests/scrapy_suite``), so every Python process of
that run loads it first, mock servers included: some of Scrapy's tests, and its mock
server at every start, look up names that must not exist (``non-existing-host``,
``dns.resolution.invalid.``, ``thereisdefinetelynosuchdomain.com``).
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


#: Addresses whose reverse lookup /etc/hosts answers on any machine.
LOOPBACK_ADDRESSES = frozenset({"127.0.0.1", "::1"})


def _guard_reverse(lookup: Callable[..., Any]) -> Callable[..., Any]:
    def guarded(address: str, *args: Any, **kwargs: Any) -> Any:
        if address in LOOPBACK_ADDRESSES or str(address).lower() in LOOPBACK_NAMES:
            return lookup(address, *args, **kwargs)
        raise socket.herror(1, f"{address!r}: reverse lookup refused in a loopback-only test run")

    guarded.__wrapped__ = lookup  # type: ignore[attr-defined]
    return guarded


def install() -> None:
    for name, guard in (("getaddrinfo", _guard), ("gethostbyname", _guard),
                        ("gethostbyname_ex", _guard), ("gethostbyaddr", _guard_reverse)):  # fmt: skip
        current = getattr(socket, name)
        if not hasattr(current, "__wrapped__"):
            setattr(socket, name, guard(current))


install()
