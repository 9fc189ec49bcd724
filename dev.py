#!/usr/bin/env python3
"""The project's two entry points, usable on a fresh machine that has only Python 3.11+.

    python3 dev.py crawl   set up .venv, run the demo broad crawl of the bundled simulated web
    python3 dev.py test    set up .venv, run the whole test suite on two pytest-xdist workers
                           (what .ci/run calls; ``python3 dev.py test -n 0`` runs it in one process)

Setting up means: create ``.venv`` next to this file if it is missing and install the
package with its test extra into it; a stamp file skips the install when ``setup.cfg`` has
not changed since the last one.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = Path(os.environ.get("IRL_VENV", ROOT / ".venv"))
PYTHON = VENV / "bin" / "python"


def _run(*cmd: str | Path, cwd: Path = ROOT) -> None:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], cwd=cwd, check=True)


def setup() -> None:
    """Create the virtualenv and install scrapy-irl with its test extra (idempotent)."""
    if not PYTHON.exists():
        _run(sys.executable, "-m", "venv", VENV)
        _run(PYTHON, "-m", "pip", "install", "-q", "--upgrade", "pip")
    digest = hashlib.sha256((ROOT / "setup.cfg").read_bytes()).hexdigest()
    stamp = VENV / ".scrapy-irl-installed"
    if stamp.exists() and stamp.read_text() == digest:
        return
    _run(PYTHON, "-m", "pip", "install", "-q", "-e", f"{ROOT}[test]")
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
    if command == "setup":
        setup()
        return 0
    return test(rest) if command == "test" else crawl(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
