#!/usr/bin/env python3
"""The project's two entry points, usable on a fresh machine that has only Python 3.11+.

    python3 dev.py crawl   set up .venv, run the demo broad crawl of the bundled simulated web
    python3 dev.py test    set up .venv, run the whole test suite on two pytest-xdist workers
                           (what .ci/run calls; ``python3 dev.py test -n 0`` runs it in one process)

Setting up means: create ``.venv`` next to this file if it is missing and install the
package with its test extra into it; a stamp file skips the install when ``setup.cfg`` has
not changed since the last one. plyvel ships binary wheels for Python 3.11 and 3.12 only;
elsewhere (3.13, or a platform without wheels) pip builds it against LevelDB's headers,
which setup installs with apt-get when it runs as root on Debian or Ubuntu, and otherwise
names the package to install.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = Path(os.environ.get("IRL_VENV", ROOT / ".venv"))
PYTHON = VENV / "bin" / "python"
MIN_PYTHON = (3, 11)
#: Where a LevelDB development package puts ``leveldb/db.h`` (Debian/Ubuntu, source
#: builds, Homebrew): plyvel's build from source needs it.
LEVELDB_INCLUDE_DIRS = ("/usr/include", "/usr/local/include", "/opt/homebrew/include")
LEVELDB_APT_PACKAGES = ("libleveldb-dev", "g++")


class SetupError(Exception):
    """Setting up cannot go on; the message says what to do."""


def _call(*cmd: str | Path) -> int:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    return subprocess.run([str(c) for c in cmd], cwd=ROOT).returncode


def check_python(version: tuple[int, ...] = tuple(sys.version_info)) -> None:
    """Refuse an interpreter older than the package supports before building anything."""
    if version[:2] < MIN_PYTHON:
        raise SetupError(
            f"scrapy-irl needs Python {MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer; this is "
            f"{version[0]}.{version[1]}. Run this script with a newer interpreter, e.g. "
            "python3.12 dev.py ..."
        )


def leveldb_headers() -> bool:
    return any(Path(d, "leveldb", "db.h").exists() for d in LEVELDB_INCLUDE_DIRS)


def plyvel_installed() -> bool:
    probe = [str(PYTHON), "-c", "import plyvel"]
    return subprocess.run(probe, capture_output=True).returncode == 0


def can_apt_install() -> bool:
    return os.geteuid() == 0 and shutil.which("apt-get") is not None


def install_leveldb_headers() -> None:
    """apt-get the LevelDB headers and a C++ compiler (a fresh image may need ``update``)."""
    install = ("apt-get", "install", "-y", "-q", *LEVELDB_APT_PACKAGES)
    if _call(*install) != 0 and (_call("apt-get", "update", "-q") != 0 or _call(*install) != 0):
        raise SetupError(f"apt-get could not install {' '.join(LEVELDB_APT_PACKAGES)} (see above)")


def install_package() -> None:
    """pip-install the package; when that fails because plyvel had to be built and LevelDB's
    headers are missing, install them (root with apt-get) and try once more, or say how."""
    pip = (PYTHON, "-m", "pip", "install", "-q", "-e", f"{ROOT}[test]")
    if _call(*pip) == 0:
        return
    if plyvel_installed() or leveldb_headers():
        raise SetupError("pip could not install scrapy-irl (its output is above)")
    where = f"Python {sys.version_info[0]}.{sys.version_info[1]} on this platform"
    if not can_apt_install():
        raise SetupError(
            f"plyvel (LevelDB for Python) has no binary wheel for {where}, and building it "
            "needs LevelDB's headers and a C++ compiler: install them (Debian/Ubuntu: "
            f"apt-get install {' '.join(LEVELDB_APT_PACKAGES)}; macOS: brew install leveldb) "
            "and run this again, or use Python 3.11 or 3.12, for which plyvel ships wheels"
        )
    print(f"plyvel has no binary wheel for {where}: installing LevelDB's headers "
          "to build it", flush=True)  # fmt: skip
    install_leveldb_headers()
    if _call(*pip) != 0:
        raise SetupError("pip could not install scrapy-irl (its output is above)")


def create_venv() -> None:
    """``python -m venv`` with pip; a half-made one (Debian's python3 without its venv
    package stops after creating ``bin/python``) is removed, or the next run would take
    it for done."""
    if _call(sys.executable, "-m", "venv", VENV) != 0:
        shutil.rmtree(VENV, ignore_errors=True)
        raise SetupError(
            f"could not create {VENV} (output above); on Debian or Ubuntu install the "
            f"venv module first: apt-get install python3-venv (or python3.X-venv for the "
            "interpreter you run)"
        )
    if _call(PYTHON, "-m", "pip", "install", "-q", "--upgrade", "pip") != 0:
        raise SetupError("pip could not be upgraded in the new virtualenv (output above)")


def setup() -> None:
    """Create the virtualenv and install scrapy-irl with its test extra (idempotent)."""
    check_python()
    if not PYTHON.exists():
        create_venv()
    digest = hashlib.sha256((ROOT / "setup.cfg").read_bytes()).hexdigest()
    stamp = VENV / ".scrapy-irl-installed"
    if stamp.exists() and stamp.read_text() == digest:
        return
    install_package()
    stamp.write_text(digest)


#: pytest-xdist workers of ``dev.py test``. Most of the suite's time is real crawls
#: waiting out politeness delays on loopback, so two workers halve it even on two cores
#: (927 s serial, 437 s on two workers, 2026-11-26). Each test file runs whole on one
#: worker (``--dist loadfile``): a file's crawls share fixtures and timing assumptions.
TEST_WORKERS = "2"


def pytest_args(args: list[str]) -> list[str]:
    """``args`` with the default workers added, unless the caller chose (``-n N``,
    ``-n 0`` for one process, ``-p no:xdist``)."""
    chosen = any(a == "no:xdist" or a.startswith(("-n", "--numprocesses")) for a in args)
    return args if chosen else ["-n", TEST_WORKERS, "--dist", "loadfile", *args]


def test(args: list[str]) -> int:
    setup()
    return subprocess.run([str(PYTHON), "-m", "pytest", *pytest_args(args)], cwd=ROOT).returncode


def crawl(args: list[str]) -> int:
    setup()
    scrapy = VENV / "bin" / "scrapy"
    return subprocess.run(
        [str(scrapy), "crawl", "broad", *args], cwd=ROOT / "example_project"
    ).returncode


def main(argv: list[str]) -> int:
    if len(argv) < 1 or argv[0] not in {"test", "crawl", "setup"}:
        print(__doc__)
        return 2
    command, rest = argv[0], argv[1:]
    try:
        if command == "setup":
            setup()
            return 0
        return test(rest) if command == "test" else crawl(rest)
    except SetupError as exc:
        print(f"dev.py {command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
