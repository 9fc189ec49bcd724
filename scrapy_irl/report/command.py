"""``scrapy irl-report [options] JOBDIR_OR_DATA_DIR``: the crawl report from the shell.

Registered as a Scrapy command through the ``scrapy.commands`` entry point
(``irl-report = scrapy_irl.report.command:Command``); also runnable without Scrapy's
command line as ``python -m scrapy_irl.report.command DIR [-o OUT]`` (:func:`main`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, ClassVar, TextIO

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from scrapy_irl.report.sampler import STATS_FILE

SYNTAX = "[options] JOBDIR_OR_DATA_DIR"
DESCRIPTION = (
    "Build the scrapy-irl crawl report (download rate, probability of uniqueness, pages per "
    "PLD vs in-degree, queue sizes) from the stats that StatsSampler wrote: JOBDIR/irl, or "
    "the data directory itself (IRL_REPORT_DIR). Prints a summary and the path of index.html."
)


def resolve_data_dir(path: Path | str) -> Path | None:
    """The directory holding ``stats.jsonl``: ``path`` itself or ``path/irl``; None if neither."""
    p = Path(path)
    for candidate in (p, p / "irl"):
        if (candidate / STATS_FILE).is_file():
            return candidate
    return None


def report(path: Path | str, output: Path | str | None = None,
           out: TextIO | None = None, err: TextIO | None = None) -> int:  # fmt: skip
    """Build the report; prints the summary and the HTML path. Returns an exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    data = resolve_data_dir(path)
    if data is None:
        print(
            f"irl-report: no {STATS_FILE} in {path} or {Path(path) / 'irl'} (was the crawl run "
            "with a JOBDIR and the scrapy-irl add-on, or with EXTENSIONS including "
            "scrapy_irl.report.sampler.StatsSampler, and not with IRL_REPORT_ENABLED = False?)",
            file=err,
        )
        return 1
    # matplotlib is imported only here, once there is something to plot
    from scrapy_irl.report.render import build_report, summary_text

    target = Path(output) if output else data / "report"
    try:
        index = build_report(data, target)
    except OSError as exc:  # -o names a file, an unwritable place...: a reason, not a traceback
        if _under(exc.filename, target):
            print(f"irl-report: cannot write the report to {target}: {exc}", file=err)
        else:  # the crawl's files (no permission to read stats.jsonl, an I/O error)
            print(f"irl-report: cannot read the crawl's data in {data}: {exc}", file=err)
        return 1
    print(summary_text(data), file=out)
    print(f"\nreport: {index}", file=out)
    return 0


def _under(filename: object, directory: Path) -> bool:
    """Whether an OSError's ``filename`` is ``directory`` or a path in it (or unknown)."""
    if not isinstance(filename, (str, bytes, Path)):
        return True
    path = Path(filename.decode() if isinstance(filename, bytes) else filename)
    return path == directory or directory in path.parents


class Command(ScrapyCommand):
    requires_project = False
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return SYNTAX

    def short_desc(self) -> str:
        return "Build the scrapy-irl crawl report (plots + index.html) from a JOBDIR"

    def long_desc(self) -> str:
        return DESCRIPTION

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("-o", "--output", metavar="DIR", default=None,
                            help="directory of the report (default: <data dir>/report)")  # fmt: skip

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("give one JOBDIR or report data directory")
        self.exitcode = report(args[0], getattr(opts, "output", None))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="irl-report", usage=f"%(prog)s {SYNTAX}", description=DESCRIPTION
    )
    parser.add_argument("path", metavar="JOBDIR_OR_DATA_DIR")
    parser.add_argument("-o", "--output", metavar="DIR", default=None,
                        help="directory of the report (default: <data dir>/report)")  # fmt: skip
    ns = parser.parse_args(argv)
    return report(ns.path, ns.output)


if __name__ == "__main__":
    sys.exit(main())
