"""Parse command lines with a program's own argparse parser, without running the program.

    python tests/argparse_probe.py TARGET '[["--opt", "value"], ...]'

TARGET is a script path (``benchmarks/crawl.py``), ``-m:MODULE`` (``-m:scrapy_irl.simweb``)
or ``scrapy:COMMAND`` (a Scrapy command, here ``irl-report``, found through its
``scrapy.commands`` entry point, its parser built the way ``scrapy.cmdline`` builds it).
The program runs until its first ``parse_args``/``parse_known_args`` call, which parses
every given argv instead, and the probe prints one JSON line and exits::

    PROBE {"options": ["--size", ...], "results": [null, "error message", ...]}

(``null``: that argv parses). Nothing after the parse runs: no crawl, no server.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
from pathlib import Path
from typing import Any


class _Refused(Exception):
    pass


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return sorted(parser._option_string_actions)  # noqa: SLF001 - argparse keeps them only here


def _parse_each(
    parser: argparse.ArgumentParser, argvs: list[list[str]], known: bool = False
) -> list[str | None]:
    def refuse(message: str) -> None:
        raise _Refused(message)

    parser.error = refuse  # type: ignore[method-assign]
    results: list[str | None] = []
    for argv in argvs:
        try:
            if known:
                _, rest = _ORIGINAL_KNOWN(parser, argv)
                unknown = [a for a in rest if a.startswith("-")]
                results.append(f"unrecognized arguments: {' '.join(unknown)}" if unknown else None)
            else:
                _ORIGINAL_PARSE(parser, argv)
                results.append(None)
        except _Refused as exc:
            results.append(str(exc))
        except SystemExit as exc:  # e.g. --help
            results.append(f"exit {exc.code}")
    return results


def _report(parser: argparse.ArgumentParser, results: list[str | None]) -> None:
    print("PROBE " + json.dumps({"options": _options(parser), "results": results}), flush=True)
    os._exit(0)  # noqa: SLF001 - nothing of the program may run after its parse


_ORIGINAL_PARSE = argparse.ArgumentParser.parse_args
_ORIGINAL_KNOWN = argparse.ArgumentParser.parse_known_args


def main() -> None:
    target, argvs = sys.argv[1], json.loads(sys.argv[2])
    if target.startswith("scrapy:"):
        from importlib.metadata import entry_points

        from scrapy.cmdline import ScrapyArgumentParser

        name = target.split(":", 1)[1]
        (point,) = [e for e in entry_points(group="scrapy.commands") if e.name == name]
        from scrapy.settings import Settings

        command = point.load()()
        command.settings = Settings(command.default_settings)  # as scrapy.cmdline sets it
        parser = ScrapyArgumentParser(conflict_handler="resolve")
        command.add_options(parser)
        _report(parser, _parse_each(parser, argvs, known=True))  # as scrapy.cmdline parses

    def intercept(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> Any:
        argparse.ArgumentParser.parse_args = _ORIGINAL_PARSE  # type: ignore[method-assign]
        argparse.ArgumentParser.parse_known_args = _ORIGINAL_KNOWN  # type: ignore[method-assign]
        _report(self, _parse_each(self, argvs))

    argparse.ArgumentParser.parse_args = intercept  # type: ignore[method-assign,assignment]
    argparse.ArgumentParser.parse_known_args = intercept  # type: ignore[method-assign,assignment]
    if target.startswith("-m:"):
        module = target[3:]
        sys.argv = [module]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    else:
        path = Path(target).resolve()
        sys.argv = [str(path)]
        sys.path.insert(0, str(path.parent))  # as ``python path/script.py`` does
        runpy.run_path(str(path), run_name="__main__")
    print("PROBE " + json.dumps({"error": f"{target} returned without parsing arguments"}))


if __name__ == "__main__":
    main()
