"""open_host_store: a locked default store is swapped for a private one, a chosen one never."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import plyvel
import pytest
from scrapy.settings import Settings

from scrapy_irl.exceptions import HostStoreLockedError
from scrapy_irl.hosts.paths import hosts_dir, open_host_store
from scrapy_irl.hosts.records import DnsRecord


def test_a_locked_default_store_gives_one_private_stand_in_removed_at_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.chdir(tmp_path)  # outside a project: the default is ./.scrapy/irl/hosts
    settings = Settings()
    default = Path(hosts_dir(settings)).resolve()
    holder = plyvel.DB(str(default), create_if_missing=True)  # another opener: the lock
    try:
        with caplog.at_level(logging.WARNING):
            first = open_host_store(settings)
            second = open_host_store(settings)  # the robots middleware, the scheduler...
        assert first is second  # every component of the process shares the stand-in
        assert Path(first.path).resolve() != default and first.remove_on_close
        assert caplog.text.count("uses a temporary host store") == 1
        first.put_dns("a.test", DnsRecord(("127.0.0.1",), resolved_at=0.0, expires_at=60.0))
        first.release()
        assert os.path.isdir(first.path)  # still held by the second component
        second.release()
        assert not os.path.exists(first.path)
        assert not list(holder.iterator(prefix=b"D"))  # nothing reached the shared store
    finally:
        holder.close()
    reopened = open_host_store(settings)  # lock free again: the shared store itself
    try:
        assert Path(reopened.path).resolve() == default and not reopened.remove_on_close
    finally:
        reopened.release()


@pytest.mark.parametrize("setting", ["IRL_HOSTS_DIR", "JOBDIR"])
def test_a_locked_store_the_user_chose_is_an_error(tmp_path: Path, setting: str) -> None:
    settings = Settings({setting: str(tmp_path / "chosen")})
    path = hosts_dir(settings)
    os.makedirs(path, exist_ok=True)
    holder = plyvel.DB(path, create_if_missing=True)
    try:
        with pytest.raises(HostStoreLockedError, match="another crawl is using it"):
            open_host_store(settings)
    finally:
        holder.close()
