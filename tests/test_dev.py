"""``dev.py test`` runs the suite on pytest-xdist workers unless the caller chose otherwise."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load_dev():
    spec = importlib.util.spec_from_file_location("scrapy_irl_dev", ROOT / "dev.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_default_run_uses_workers_one_file_each() -> None:
    dev = load_dev()
    assert dev.pytest_args([]) == ["-n", dev.TEST_WORKERS, "--dist", "loadfile"]
    assert dev.pytest_args(["tests/test_dev.py", "-x"])[-2:] == ["tests/test_dev.py", "-x"]


@pytest.mark.parametrize("args", [["-n", "0"], ["-n4"], ["--numprocesses=3"], ["-p", "no:xdist"],
                                  ["-k", "x", "-n", "auto"]])  # fmt: skip
def test_a_callers_choice_of_workers_is_kept(args: list[str]) -> None:
    assert load_dev().pytest_args(args) == args


def test_xdist_is_in_the_test_extra() -> None:
    extra = (ROOT / "setup.cfg").read_text().split("test =", 1)[1].split("docs =", 1)[0]
    assert "pytest-xdist" in extra
