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


def test_an_interpreter_older_than_supported_is_refused_with_what_to_run() -> None:
    dev = load_dev()
    with pytest.raises(dev.SetupError, match=r"needs Python 3\.11 or newer; this is 3\.10"):
        dev.check_python((3, 10, 12))
    dev.check_python((3, 11, 0))
    dev.check_python((3, 13, 1))


class _Setup:
    """dev.py with its commands recorded instead of run; ``pip`` fails until LevelDB's
    headers are "installed" (as on Python 3.13, where plyvel has no wheel)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, root: bool) -> None:
        self.dev = dev = load_dev()
        self.calls: list[tuple[str, ...]] = []
        self.headers = False
        monkeypatch.setattr(dev, "_call", self.call)
        monkeypatch.setattr(dev, "plyvel_installed", lambda: False)
        monkeypatch.setattr(dev, "leveldb_headers", lambda: self.headers)
        monkeypatch.setattr(dev, "can_apt_install", lambda: root)

    def call(self, *cmd: object) -> int:
        self.calls.append(tuple(str(c) for c in cmd))
        if cmd[0] == "apt-get" and cmd[1] == "install":
            self.headers = True
            return 0
        return 0 if self.headers or cmd[0] == "apt-get" else 1


def test_missing_leveldb_headers_are_installed_as_root_and_pip_retried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    setup = _Setup(monkeypatch, root=True)
    setup.dev.install_package()
    pip = [c for c in setup.calls if c[1:4] == ("-m", "pip", "install")]
    assert len(pip) == 2
    assert ("apt-get", "install", "-y", "-q", "libleveldb-dev", "g++") in setup.calls


def test_missing_leveldb_headers_without_root_say_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    setup = _Setup(monkeypatch, root=False)
    with pytest.raises(setup.dev.SetupError, match="apt-get install libleveldb-dev g\\+\\+"):
        setup.dev.install_package()
    assert not [c for c in setup.calls if c[0] == "apt-get"]


def test_a_pip_failure_with_leveldb_present_is_reported_not_retried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    setup = _Setup(monkeypatch, root=True)
    setup.headers = True
    monkeypatch.setattr(setup.dev, "_call", lambda *cmd: setup.calls.append(cmd) or 1)
    with pytest.raises(setup.dev.SetupError, match="pip could not install"):
        setup.dev.install_package()
    assert len(setup.calls) == 1


def test_main_prints_a_setup_error_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    dev = load_dev()

    def refuse() -> None:
        raise dev.SetupError("plyvel has no binary wheel")

    monkeypatch.setattr(dev, "setup", refuse)
    assert dev.main(["crawl"]) == 2
    assert "dev.py crawl: plyvel has no binary wheel" in capsys.readouterr().err


def test_a_venv_that_cannot_be_made_is_removed_and_explained(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    dev = load_dev()
    venv = tmp_path / "venv"

    def half_made(*cmd: object) -> int:  # Debian's python3 without python3-venv
        (venv / "bin").mkdir(parents=True)
        (venv / "bin" / "python").write_text("")
        return 1

    monkeypatch.setattr(dev, "VENV", venv)
    monkeypatch.setattr(dev, "_call", half_made)
    with pytest.raises(dev.SetupError, match="apt-get install python3-venv"):
        dev.create_venv()
    assert not venv.exists()
