"""The Python example of docs/simweb.rst runs as written (until 2026-11-27 it asked for a
host that the web it builds does not have, and raised LookupError)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "simweb.rst"


def test_the_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("From Python and from pytest", 1)[1]
    block = re.search(r"\.\. code-block:: python\n\n((?:    .*\n|\n)+)", section)
    assert block, "the example's code block is gone"
    code = textwrap.dedent(block.group(1))
    monkeypatch.chdir(tmp_path)  # it writes requests.log to the current directory
    namespace: dict = {}
    exec(compile(code, str(DOC), "exec"), namespace)  # noqa: S102 - our own docs
    assert namespace["status"] == 200 and namespace["body"]
    assert len(namespace["records"]) == 1
    assert (tmp_path / "requests.log").exists()
