"""The test run's DNS guard (tests/loopback_dns.py, installed by conftest.py) holds."""

from __future__ import annotations

import socket

import pytest


def test_loopback_names_and_ip_literals_resolve() -> None:
    assert socket.getaddrinfo("localhost", 80)
    assert socket.gethostbyname("127.0.0.5") == "127.0.0.5"
    assert socket.getaddrinfo("::1", 80, socket.AF_INET6)


@pytest.mark.parametrize("name", ["no-such-host", "dns.resolution.invalid.", "pypi.org"])
def test_other_names_fail_at_once_without_a_query(name: str) -> None:
    # The message tells the guard's refusal from a real NXDOMAIN answer (which would have
    # taken a query to the DNS server).
    with pytest.raises(socket.gaierror, match="loopback-only"):
        socket.getaddrinfo(name, 80)
    with pytest.raises(socket.gaierror, match="loopback-only"):
        socket.gethostbyname(name)


def test_reverse_lookups_other_than_localhost_are_refused() -> None:
    with pytest.raises(socket.herror, match="loopback-only"):
        socket.gethostbyaddr("127.0.0.2")
    assert socket.getfqdn("127.0.0.2") == "127.0.0.2"  # http.server's bind copes
