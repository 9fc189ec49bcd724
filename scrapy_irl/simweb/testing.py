"""The ``simweb`` pytest fixture: a tiny simulated web on a free port for one test.

Register it with ``pytest_plugins = ["scrapy_irl.simweb.testing"]``. It serves the ``tiny``
web with short slow/drip timings and stops at teardown.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from scrapy_irl.simweb.runner import FIXTURE_CONFIG, RunningWeb, serve_in_thread

__all__ = ["FIXTURE_CONFIG", "RunningWeb", "serve_in_thread", "simweb"]


@pytest.fixture
def simweb(tmp_path: Path) -> Iterator[RunningWeb]:
    """A tiny simweb on a free port with a request log in ``tmp_path``."""
    with serve_in_thread(FIXTURE_CONFIG, tmp_path / "simweb.log") as running:
        yield running
