"""spider.state survives a kill at any moment of its save, and a damaged one is refused."""

from __future__ import annotations

import logging
import os
import pickle
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from scrapy import Spider
from scrapy.utils.test import get_crawler

from scrapy_irl.exceptions import SpiderStateError, StoreAccessError
from scrapy_irl.spiderstate import STATE_FILE, CrashSafeSpiderState, load_state, save_state


def _extension(jobdir: Path) -> CrashSafeSpiderState:
    return CrashSafeSpiderState.from_crawler(get_crawler(settings_dict={"JOBDIR": str(jobdir)}))


def test_state_round_trips_and_starts_empty(tmp_path):
    spider = Spider("s")
    extension = _extension(tmp_path)
    extension.spider_opened(spider)
    assert spider.state == {}
    spider.state["seen"] = [1, 2, 3]
    extension.spider_closed(spider)
    again = Spider("s")
    _extension(tmp_path).spider_opened(again)
    assert again.state == {"seen": [1, 2, 3]}
    assert [p.name for p in tmp_path.iterdir()] == [STATE_FILE]  # no temporary left


def test_the_file_is_stock_scrapys_format(tmp_path):
    """A JOBDIR saved by Scrapy's own SpiderState resumes with ours, and back."""
    from scrapy.extensions.spiderstate import SpiderState

    (tmp_path / STATE_FILE).write_bytes(pickle.dumps({"n": 7}, protocol=4))
    spider = Spider("s")
    _extension(tmp_path).spider_opened(spider)
    assert spider.state == {"n": 7}
    spider.state["n"] = 8
    CrashSafeSpiderState(str(tmp_path)).spider_closed(spider)
    stock = SpiderState(str(tmp_path))
    back = Spider("s")
    stock.spider_opened(back)
    assert back.state == {"n": 8}


@pytest.mark.parametrize("damage", [b"", b"\x80\x04\x95\x10", b"not a pickle at all"])
def test_a_damaged_file_is_refused_by_name(tmp_path, damage, caplog):
    (tmp_path / STATE_FILE).write_bytes(pickle.dumps({"n": 1})[:0] + damage)
    with caplog.at_level(logging.ERROR), pytest.raises(SpiderStateError, match="move it away"):
        _extension(tmp_path)
    assert "Refusing to start the crawl: CrashSafeSpiderState" in caplog.text
    assert str(tmp_path / STATE_FILE) in caplog.text
    assert (tmp_path / STATE_FILE).read_bytes() == damage  # left as it was


def test_a_file_the_system_refuses_is_an_access_error(tmp_path):
    (tmp_path / STATE_FILE).mkdir()
    with pytest.raises(StoreAccessError, match="spider.state"):
        _extension(tmp_path)


def test_a_failed_save_keeps_the_previous_state(tmp_path, caplog):
    save_state(tmp_path / STATE_FILE, {"kept": True})
    spider = Spider("s")
    spider.state = {"unpicklable": lambda: None}
    with caplog.at_level(logging.ERROR):
        CrashSafeSpiderState(str(tmp_path)).spider_closed(spider)
    assert "spider.state not saved" in caplog.text
    assert load_state(tmp_path / STATE_FILE) == {"kept": True}
    assert [p.name for p in tmp_path.iterdir()] == [STATE_FILE]


_SAVER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from scrapy_irl.spiderstate import save_state
    path = Path(sys.argv[1])
    print("ready", flush=True)
    for i in range(1_000_000):
        save_state(path, {"round": i, "payload": "x" * 200_000})
    """
)


def test_a_kill_during_saves_leaves_a_loadable_state(tmp_path):
    """kill -9 of a process saving in a loop, at several moments: every time the file
    loads (Scrapy's in-place write would leave it empty or cut)."""
    path = tmp_path / STATE_FILE
    save_state(path, {"round": -1, "payload": ""})
    for delay in (0.05, 0.13, 0.21, 0.37):
        process = subprocess.Popen([sys.executable, "-c", _SAVER, str(path)],
                                   stdout=subprocess.PIPE)  # fmt: skip
        try:
            assert process.stdout.readline() == b"ready\n"
            subprocess.run(["sleep", str(delay)], check=True, timeout=10)
        finally:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        state = load_state(path)
        assert state["round"] >= -1 and len(state["payload"]) in (0, 200_000)


def test_a_killed_saves_temporary_file_is_removed_and_the_mode_kept(tmp_path):
    """Review, 2026-11-27: mkstemp's 0600 replaced the file's mode, and a kill during a
    save left its temporary file in the JOBDIR for good. A new file gets what open()
    gives (the umask applies); a user's own ``.spider.state.bak`` and the temporary file
    of a live process's save are left alone."""
    path = tmp_path / STATE_FILE
    old_umask = os.umask(0o077)
    try:
        save_state(path, {"n": 1})
    finally:
        os.umask(old_umask)
    assert path.stat().st_mode & 0o777 == 0o600
    path.chmod(0o640)
    save_state(path, {"n": 2})
    assert path.stat().st_mode & 0o777 == 0o640
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    (tmp_path / f".{STATE_FILE}.{gone}.0123abcd").write_bytes(b"half a pickle")
    (tmp_path / f".{STATE_FILE}.1.0123abcd").write_bytes(b"pid 1 is alive")
    (tmp_path / f".{STATE_FILE}.bak").write_bytes(b"the user's")
    assert _extension(tmp_path).state == {"n": 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f".{STATE_FILE}.1.0123abcd", f".{STATE_FILE}.bak", STATE_FILE]
