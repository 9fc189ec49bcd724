"""The Python example of docs/drum.rst runs as written (the page had none before)."""

from __future__ import annotations

from pathlib import Path

from scrapy_irl.drum import Drum
from tests.robots.test_cli import python_blocks


def test_the_python_example_of_the_docs_runs(tmp_path: Path, monkeypatch) -> None:
    blocks = python_blocks(Path(__file__).resolve().parents[2] / "docs" / "drum.rst")
    assert len(blocks) == 1
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks[0], "docs/drum.rst", "exec"), {})  # noqa: S102
    values: list[int] = []
    with Drum(tmp_path / "counts.drum", value_dtype="<u4",
              on_results=lambda b: values.extend(int(v) for v in b.values)) as drum:  # fmt: skip
        drum.check(7)
        drum.merge()
    assert values == [7]  # "Reopening counts.drum later finds key 7 at 7"
