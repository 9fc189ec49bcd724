"""The shell commands written in README.md and docs/*.rst take the options they are shown with.

Every ``python benchmarks/X.py ...``, ``python -m MODULE ...``, ``scrapy irl-report ...``
and ``python3 dev.py ...`` found in a code block or an inline literal is parsed by that
program's own argparse parser (``tests/argparse_probe.py``: the program stops at its
parse, nothing runs). A command with placeholders (``LOG``, ``FILE``, ``[--tau-h 2.0]``,
``NAME=VALUE``) only has its option names checked; a concrete one must parse whole, values
and choices included. A bare option in the prose (````--only irl````) must belong to a
documented program. ``--web FIELD=VALUE`` overrides must name a field of simweb's
config, ``--set NAME=VALUE`` of an ``IRL_*`` setting one that exists.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.rst"))]

#: How a command starts: ``python benchmarks/X.py``, ``python -m MODULE``,
#: ``scrapy irl-report``, ``python3 dev.py``.
START = re.compile(
    r"^(?:python3?\s+(?:-m\s+(?P<module>[\w.]+)|(?P<script>[\w./-]+\.py))"
    r"|scrapy\s+(?P<scrapy>irl-report))(?=\s|$)(?P<rest>.*)$",
    re.S,
)
#: An argument that stands for something: LOG, FILE, N, JOBDIR_OR_DATA_DIR, [--tau-h 2.0],
#: NAME=VALUE, ...
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*$|[\[\]|]|\.\.\.|^[A-Z]+=[A-Z]+$")


@dataclass
class Command:
    where: str  # file:line
    target: str  # what tests/argparse_probe.py runs
    argv: list[str]
    template: bool  # has placeholders: check option names only
    extra_targets: list[str] = field(default_factory=list)


def _literals(path: Path) -> list[tuple[int, str, bool]]:
    """(line, text, in_block) of every code-block line and inline literal of a doc."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    out: list[tuple[int, str, bool]] = []
    # code blocks: rst ``::`` / ``.. code-block::`` followed by an indented block, and
    # markdown fences
    in_block, fence, indent = False, False, 0
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if path.suffix == ".md" and stripped.startswith("```"):
            fence = not fence
            continue
        if fence:
            out.append((number, stripped, True))
            continue
        if in_block:
            if stripped and len(line) - len(line.lstrip()) <= indent:
                in_block = False
            elif stripped:
                out.append((number, stripped, True))
                continue
            else:
                continue
        if path.suffix == ".rst" and (stripped.endswith("::") or stripped.startswith(".. code-block::")):
            in_block, indent = True, len(line) - len(line.lstrip())
    # inline literals (rst ``...``, markdown `...`), which may wrap within a paragraph
    if path.suffix == ".md":  # fences are code blocks, read above
        text = re.sub(r"^```.*?^```", lambda m: "\n" * m.group().count("\n"), text, flags=re.S | re.M)
    pattern = r"``(.+?)``" if path.suffix == ".rst" else r"`([^`]+)`"
    for match in re.finditer(pattern, text, re.S):
        literal = match.group(1)
        if "\n\n" in literal:
            continue
        number = text.count("\n", 0, match.start()) + 1
        out.append((number, " ".join(literal.split()), False))
    return out


def _command(where: str, text: str) -> Command | None:
    match = START.match(text)
    if match is None:
        return None
    try:
        argv = shlex.split(match["rest"], comments=True)
    except ValueError:
        argv = match["rest"].split()
    template = any(PLACEHOLDER.search(a) for a in argv)
    if match["scrapy"]:
        # Scrapy's parser for the options, the module's own main() for the whole line
        return Command(where, f"scrapy:{match['scrapy']}", argv, template,
                       extra_targets=["-m:scrapy_irl.report.command"])  # fmt: skip
    if match["module"]:
        return Command(where, f"-m:{match['module']}", argv, template)
    return Command(where, match["script"], argv, template)


def doc_commands() -> tuple[list[Command], list[tuple[str, str]]]:
    """The commands of every doc, and its bare option literals (``--only irl``)."""
    commands: list[Command] = []
    bare: list[tuple[str, str]] = []
    for path in DOCS:
        for number, text, in_block in _literals(path):
            where = f"{path.relative_to(ROOT)}:{number}"
            command = _command(where, text)
            if command is not None:
                if not in_block and (not command.argv or command.argv[-1].startswith("-")):
                    # "(``python -m scrapy_irl.simweb.report``)", "written by ``python -m
                    # scrapy_irl.simweb --config-out``": mentions, not whole command lines
                    command.template = True
                commands.append(command)
            elif re.match(r"^--[a-z]", text):
                bare.append((where, text))
    return commands, bare


COMMANDS, BARE = doc_commands()


def probe(target: str, argvs: list[list[str]]) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "argparse_probe.py"), target, json.dumps(argvs)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    lines = [x for x in proc.stdout.splitlines() if x.startswith("PROBE ")]
    assert lines, f"{target}: no probe result\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    result = json.loads(lines[-1][6:])
    assert "error" not in result, result["error"]
    return result


def _option_names(argv: list[str]) -> list[str]:
    names = []
    for arg in argv:
        for part in re.split(r"[\[\]|]", arg):
            if re.match(r"^--?[A-Za-z]", part):
                names.append(part.split("=", 1)[0])
    return names


def test_the_docs_show_commands() -> None:
    # the extraction itself: a change of markup must not leave this test checking nothing
    targets = {c.target for c in COMMANDS}
    assert {"benchmarks/crawl.py", "benchmarks/dupefilter.py", "-m:scrapy_irl.simweb",
            "-m:scrapy_irl.simweb.report", "scrapy:irl-report", "dev.py"} <= targets, targets  # fmt: skip
    assert len(COMMANDS) >= 50 and len(BARE) >= 10


def test_every_script_and_module_exists() -> None:
    import importlib.util

    for command in COMMANDS:
        if command.target.startswith("-m:"):
            name = command.target[3:]
            assert importlib.util.find_spec(name) is not None, f"{command.where}: no module {name}"
        elif not command.target.startswith("scrapy:"):
            assert (ROOT / command.target).is_file(), f"{command.where}: no {command.target}"


def test_dev_py_subcommands() -> None:
    tree = ast.parse((ROOT / "dev.py").read_text())
    known: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Set) and all(isinstance(e, ast.Constant) for e in node.elts):
            known |= {e.value for e in node.elts}  # type: ignore[misc]
    assert {"test", "crawl"} <= known
    for command in COMMANDS:
        if command.target == "dev.py":
            assert command.argv and command.argv[0] in known, f"{command.where}: {command.argv}"


def _argparse_targets() -> list[str]:
    return sorted({t for c in COMMANDS if c.target != "dev.py" for t in [c.target, *c.extra_targets]})


@pytest.mark.parametrize("target", _argparse_targets())
def test_documented_commands_parse(target: str) -> None:
    commands = [c for c in COMMANDS if target in (c.target, *c.extra_targets)]
    concrete = [c for c in commands if not c.template]
    result = probe(target, [c.argv for c in concrete])
    options = set(result["options"])
    problems = []
    for command, error in zip(concrete, result["results"], strict=True):
        if error is not None:
            problems.append(f"{command.where}: {shlex.join(command.argv)}: {error}")
    for command in commands:
        for name in _option_names(command.argv):
            if name not in options:
                problems.append(f"{command.where}: {name} is not an option of {target}")
    assert not problems, "\n".join(problems)


def test_bare_options_belong_to_a_documented_command() -> None:
    """``--only irl`` in benchmarks.rst: an option that one of the documented programs takes
    (and, when it has no placeholder and ends with a value, a line that one of them parses)."""
    targets = _argparse_targets()
    argvs = {where: shlex.split(text) for where, text in BARE}
    concrete = sorted(where for where, argv in argvs.items()
                      if not any(PLACEHOLDER.search(a) for a in argv) and not argv[-1].startswith("-"))  # fmt: skip
    options: set[str] = set()
    parsed: dict[str, list[str | None]] = {where: [] for where in concrete}
    for target in targets:
        result = probe(target, [argvs[where] for where in concrete])
        options |= set(result["options"])
        for where, error in zip(concrete, result["results"], strict=True):
            parsed[where].append(error)
    problems = []
    for where, text in BARE:
        for name in _option_names(argvs[where]):
            if name not in options:
                problems.append(f"{where}: {name} is not an option of any documented command")
        if where in parsed and all(parsed[where]):
            problems.append(f"{where}: no documented command parses {text!r}: {sorted(set(parsed[where]))}")
    assert not problems, "\n".join(problems)


def _values(flag: str) -> list[tuple[str, str]]:
    out = []
    for where, argv in [(c.where, c.argv) for c in COMMANDS] + [(w, t.split()) for w, t in BARE]:
        out += [(where, b) for a, b in zip(argv, argv[1:]) if a == flag]
    return out


def test_web_overrides_name_fields_of_simweb_config() -> None:
    from scrapy_irl.simweb.config import WebConfig

    problems = []
    for where, item in _values("--web"):
        if PLACEHOLDER.search(item):
            continue
        try:
            WebConfig.parse_override(item)
        except ValueError as exc:
            problems.append(f"{where}: --web {item}: {exc}")
    assert _values("--web") and not problems, "\n".join(problems)


def test_set_names_existing_irl_settings() -> None:
    from scrapy_irl import settings as defaults

    problems = []
    for where, item in _values("--set"):
        name = item.split("=", 1)[0]
        if name.startswith("IRL_") and not hasattr(defaults, name):
            problems.append(f"{where}: --set {item}: no such setting")
    assert _values("--set") and not problems, "\n".join(problems)
