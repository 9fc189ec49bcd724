"""docs/stats.rst (and the ``irl_warc/*`` table of docs/warc.rst) list the stats the code writes.

Two real crawls, then the source:

* the example project's ``broad`` spider on a tiny simweb (IRL scheduler, robots.txt and
  DNS middlewares, WARC extension, report sampler, progress line): every key it leaves
  under one of our prefixes, and every ``scheduler/``, ``robotstxt/`` and ``dupefilter/``
  key (ours write those too), must be documented;
* the DRUM dupefilter under Scrapy's own scheduler on a loopback site, for ``urlseen/*``;
* statically, the keys written only on rare events (full disk, damaged records...): every
  key named in ``inc_value``/``set_value`` calls, the scheduler's ``counts[...]``, the
  robots middleware's ``_inc``, the caches' ``_event`` and the ``stats()`` dicts of BEAST,
  STAR and the politeness log; and every documented key must be written somewhere.

Keys with a variable part are documented as patterns: ``irl_dns/failures/<exception class>``.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.crawl_runner import crawl_in_subprocess
from tests.loopback_site import loopback_site

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ROOT / "example_project"
#: Prefixes of the keys scrapy-irl writes.
OURS = ("irl_sched/", "irl_robots/", "irl_hosts/", "irl_dns/", "irl_warc/", "urlseen/", "broad/")
#: Scrapy's prefixes whose keys our scheduler, dupefilter and robots middleware write
#: in place of Scrapy's components (checked in the IRL crawl only: under Scrapy's own
#: scheduler, ``scheduler/enqueued/memory`` and the like are Scrapy's).
REPLACED = ("scheduler/", "robotstxt/", "dupefilter/")
REFERENCE = [ROOT / "docs" / "stats.rst", ROOT / "docs" / "warc.rst"]


def documented_keys() -> set[str]:
    """Every ``key`` literal with one of the prefixes in the reference pages."""
    keys = set()
    for page in REFERENCE:
        for literal in re.findall(r"``([^`]+)``", page.read_text(encoding="utf-8")):
            if literal.startswith(OURS + REPLACED) and "*" not in literal and " " not in literal.split("<")[0]:
                keys.add(literal)
    return keys


DOCUMENTED = documented_keys()


def _pattern(key: str) -> re.Pattern[str]:
    parts = re.split(r"(<[^>]*>)", key)
    return re.compile("".join("[^/]+" if p.startswith("<") else re.escape(p) for p in parts) + "$")


PATTERNS = {key: _pattern(key) for key in DOCUMENTED}


def undocumented(keys: set[str]) -> list[str]:
    return sorted(k for k in keys if not any(p.match(k) for p in PATTERNS.values()))


def test_the_reference_is_read() -> None:
    for prefix in OURS + REPLACED:
        assert any(k.startswith(prefix) for k in DOCUMENTED), prefix
    assert "irl_dns/failures/<exception class>" in DOCUMENTED
    assert len(DOCUMENTED) > 120


# -- the crawls ------------------------------------------------------------------------------
def _broad_crawl_stats(tmp: Path) -> dict[str, object]:
    dump = tmp / "stats.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PROJECT), str(ROOT)])}
    proc = subprocess.run(
        [sys.executable, "-m", "scrapy", "crawl", "broad",
         "-s", "IRL_SIMWEB_SIZE=tiny", "-s", "CLOSESPIDER_PAGECOUNT=150",
         "-s", "CLOSESPIDER_TIMEOUT=40", "-s", f"JOBDIR={tmp / 'job'}",
         "-s", "IRL_HOST_DELAY=1", "-s", "IRL_HOST_DELAY_MIN=0.5",
         "-s", "IRL_IP_DELAY=0.2", "-s", "IRL_IP_DELAY_MIN=0.1",
         "-s", "IRL_REPORT_AT_CLOSE=False",  # the plots take seconds and write no stats
         "-s", "STATS_CLASS=tests.stats_dump.JsonDumpStatsCollector",
         "-s", f"STATS_DUMP_FILE={dump}"],
        cwd=PROJECT, env=env, capture_output=True, text=True, timeout=150,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(dump.read_text())


def _dupefilter_crawl_stats(tmp: Path) -> dict[str, object]:
    with loopback_site(size=60) as site:
        stats, _ = crawl_in_subprocess({
            "start": [f"{site.base_url}/page/1"],
            "settings": {"ADDONS": {"scrapy_irl.Addon": 0},
                         "SCHEDULER": "scrapy.core.scheduler.Scheduler",
                         "JOBDIR": str(tmp / "job"),
                         # tiny buckets: merges mid-crawl, every urlseen/* key written
                         "IRL_URLSEEN_BUCKETS": 2, "IRL_URLSEEN_BUFFER_BYTES": 90,
                         "IRL_URLSEEN_BUCKET_BYTES": 400},
        })  # fmt: skip
    return stats


@pytest.fixture(scope="module")
def crawl_stats(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict]:
    return (
        _broad_crawl_stats(tmp_path_factory.mktemp("broad")),
        _dupefilter_crawl_stats(tmp_path_factory.mktemp("dupefilter")),
    )


@pytest.mark.slow
def test_every_stat_of_real_crawls_is_documented(crawl_stats: tuple[dict, dict]) -> None:
    irl, stock = crawl_stats
    written = {k for k in irl if k.startswith(OURS + REPLACED)}
    written |= {k for k in stock if k.startswith(OURS)}
    # the crawls did write what they should: a check of nothing passes
    for prefix, least in (("irl_sched/", 45), ("irl_robots/", 4), ("irl_dns/", 3),
                          ("irl_warc/", 6), ("urlseen/", 8), ("robotstxt/", 3)):  # fmt: skip
        assert sum(k.startswith(prefix) for k in written) >= least, (prefix, sorted(written))
    missing = undocumented(written)
    assert not missing, f"written by a crawl, missing from docs/stats.rst: {missing}"


# -- the source ------------------------------------------------------------------------------
#: Calls that write a stat whose key is their first argument, beyond ``stats.*_value``:
#: (module, how the call is named, prefix it adds).
INDIRECT = [
    ("scrapy_irl.robots.middleware", "_inc", "irl_robots/"),
    ("scrapy_irl.robots.cache", "_event", "irl_robots/cache/"),
    ("scrapy_irl.hosts.dns", "_event", "irl_dns/"),
]
#: The scheduler's counters (published as ``irl_sched/<name>``), written by the modules of
#: its stages (``self.counts[...]``), and the ``stats()`` dicts it publishes under a prefix.
COUNTS = ("scrapy_irl.scheduler", "irl_sched/")
COUNTING_MODULES = ("scheduler", "intake", "routing", "robots_gate", "robots_hops", "tracking",
                    "reporting", "unparking")  # fmt: skip
STATS_DICTS = [
    ("scrapy_irl.scheduler.beast", "irl_sched/beast/"),
    ("scrapy_irl.scheduler.star", "irl_sched/star/"),
    ("scrapy_irl.scheduler.parking", "irl_sched/parked/"),
    ("scrapy_irl.scheduler.start_log", "irl_sched/politeness_log/"),
]
STAT_CALLS = {"inc_value", "set_value", "max_value", "min_value"}


def _source(module: str) -> tuple[ast.Module, dict[str, object]]:
    path = Path(importlib.import_module(module).__file__ or "")
    return ast.parse(path.read_text(encoding="utf-8")), vars(importlib.import_module(module))


def _keys(node: ast.expr, names: dict[str, object], local: dict[str, list[ast.expr]]) -> set[str]:
    """The keys a string, an f-string, ``a if c else b`` or a local variable set to those
    builds; a module-level constant (``STAT``) is filled in, any other value becomes ``<>``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.IfExp):
        return _keys(node.body, names, local) | _keys(node.orelse, names, local)
    if isinstance(node, ast.Name) and node.id in local:
        return set().union(*(_keys(v, names, {}) for v in local[node.id]))
    if not isinstance(node, ast.JoinedStr):
        return set()
    out = []
    for part in node.values:
        if isinstance(part, ast.Constant):
            out.append(str(part.value))
        elif isinstance(part, ast.FormattedValue) and isinstance(part.value, ast.Name) \
                and isinstance(names.get(part.value.id), str) and part.value.id.isupper():  # fmt: skip
            out.append(str(names[part.value.id]))
        else:
            out.append("<>")
    return {"".join(out)}


def _scopes(tree: ast.Module) -> list[tuple[ast.AST, dict[str, list[ast.expr]]]]:
    """Each function with the values its local names are assigned (and the module)."""
    out: list[tuple[ast.AST, dict[str, list[ast.expr]]]] = [(tree, {})]
    for func in ast.walk(tree):
        if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            local: dict[str, list[ast.expr]] = {}
            for node in ast.walk(func):
                if isinstance(node, ast.Assign):
                    for target in node.targets:
                        if isinstance(target, ast.Name):
                            local.setdefault(target.id, []).append(node.value)
            out.append((func, local))
    return out


def _called(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call) and node.args:
        if isinstance(node.func, ast.Attribute):
            return node.func.attr
        if isinstance(node.func, ast.Name):
            return node.func.id
    return None


def _call_keys(tree: ast.Module, names: dict[str, object], wanted: set[str]) -> set[str]:
    """Keys of the calls named in ``wanted``, or of local aliases of them
    (``s = self.stats.set_value; s(f"{STAT}/x", ...)``)."""
    keys: set[str] = set()
    for scope, local in _scopes(tree):
        aliases = {name for name, values in local.items()
                   if any(isinstance(v, ast.Attribute) and v.attr in wanted for v in values)}  # fmt: skip
        for node in ast.walk(scope):
            if _called(node) in wanted | aliases:
                keys |= _keys(node.args[0], names, local)  # type: ignore[attr-defined]
    return keys


def source_keys() -> dict[str, set[str]]:
    """Keys (``<>`` for a variable part) the source writes, by where they were found."""
    found: dict[str, set[str]] = {}
    modules = sorted({".".join(p.relative_to(ROOT).with_suffix("").parts)
                      for p in (ROOT / "scrapy_irl").rglob("*.py")})  # fmt: skip
    for module in modules:
        if module.startswith("scrapy_irl.simweb") or module.endswith("__main__"):
            continue  # simweb writes no crawl stats
        tree, names = _source(module)
        if keys := _call_keys(tree, names, STAT_CALLS):
            found[f"{module}.stats"] = keys
    for module, call_name, prefix in INDIRECT:
        tree, names = _source(module)
        found[f"{module}.{call_name}"] = {prefix + k for k in _call_keys(tree, names, {call_name})}
    counts = set()
    for module in COUNTING_MODULES:
        tree, names = _source(f"{COUNTS[0]}.{module}")
        for scope, local in _scopes(tree):
            for node in ast.walk(scope):
                if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) \
                        and node.value.attr == "counts":  # fmt: skip
                    counts |= {COUNTS[1] + k for k in _keys(node.slice, names, local)}
    found[f"{COUNTS[0]}.counts"] = counts
    for module, prefix in STATS_DICTS:
        tree, names = _source(module)
        keys = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == "stats":
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Dict):
                        for k in inner.keys:
                            keys |= _keys(k, names, {}) if k is not None else set()
                    elif isinstance(inner, ast.Subscript) and isinstance(inner.ctx, ast.Store):
                        keys |= _keys(inner.slice, names, {})
        found[f"{module}.dict"] = {prefix + k for k in keys}
    # the example project's spider
    spider = PROJECT / "example" / "spiders" / "broad.py"
    found["example.spiders.broad"] = _call_keys(
        ast.parse(spider.read_text(encoding="utf-8")), {}, STAT_CALLS
    )
    return found


SOURCE = source_keys()


def _shape(key: str) -> str:
    return re.sub(r"<[^>]*>", "<>", key)


def test_the_source_scan_finds_the_writers() -> None:
    # a renamed helper must fail here, not leave the check below checking nothing
    for where, least in ((f"{COUNTS[0]}.counts", 25), ("scrapy_irl.robots.middleware._inc", 12),
                         ("scrapy_irl.robots.cache._event", 5), ("scrapy_irl.hosts.dns._event", 8),
                         ("scrapy_irl.scheduler.beast.dict", 10), ("scrapy_irl.scheduler.star.dict", 6),
                         ("scrapy_irl.scheduler.start_log.dict", 6),
                         ("scrapy_irl.scheduler.reporting.stats", 20), ("example.spiders.broad", 5)):  # fmt: skip
        assert len(SOURCE.get(where, ())) >= least, (where, SOURCE.get(where))


def test_every_key_the_source_names_is_documented() -> None:
    shapes = {_shape(k) for k in DOCUMENTED}
    missing = []
    for where, keys in sorted(SOURCE.items()):
        for key in sorted(keys):
            if not key.startswith(OURS + REPLACED):
                continue
            rest = key.split("/", 1)[1]
            if rest.replace("<>", "").strip("/") == "":
                continue  # f"{STAT}/{key}" of a loop: its keys are checked where they come from
            if key.endswith("/<>") and any(k.startswith(key[:-2]) for k in DOCUMENTED):
                continue  # f"cache/{name}": names forwarded from a cache, documented one by one
            if _shape(key) not in shapes and not any(p.match(key) for p in PATTERNS.values()):
                missing.append(f"{key} ({where})")
    assert not missing, f"written, missing from docs/stats.rst: {missing}"


def test_every_documented_key_is_written() -> None:
    written = {_shape(k) for keys in SOURCE.values() for k in keys}
    # what the code publishes through f"{STAT}/..." loops and literal _publish_stats lines
    # is in SOURCE too; Scrapy's keys the docs recall are written by Scrapy
    stale = sorted(k for k in DOCUMENTED if _shape(k) not in written
                   and not (k.startswith(REPLACED) and _scrapy_writes(k)))  # fmt: skip
    assert not stale, f"documented, written nowhere (renamed? removed?): {stale}"


def _scrapy_writes(key: str) -> bool:
    """Scrapy's own components write this key (``scheduler/enqueued`` ...)."""
    import scrapy

    stem = re.sub(r"/?<[^>]*>$", "", key)
    root = Path(scrapy.__file__).parent
    return any(stem in p.read_text(encoding="utf-8", errors="replace")
               for p in (root / "core" / "scheduler.py", root / "dupefilters.py",
                         root / "downloadermiddlewares" / "robotstxt.py"))  # fmt: skip


def test_keys_named_elsewhere_in_the_docs_are_in_the_reference() -> None:
    """A key another page names (``irl_sched/trap_dropped/<reason>`` in scheduler.rst) is
    one the reference lists: a rename must reach every page."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.rst"))]
    prefixes = "|".join(re.escape(p) for p in OURS + REPLACED)
    problems = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for match in re.finditer(rf"(?<![\w/.])(?:{prefixes})[\w/<>-]*(?:<[^>]*>)?", text):
            key = match.group().rstrip("/")
            after = text[match.end():match.end() + 2]
            if "/" not in key or after[:1] == "*" or (after[:1] == "." and after[1:].isalpha()):
                continue  # irl_sched/*: the family, not a key; scheduler/star.py: a file
            if not any(p.match(key) for p in PATTERNS.values()):
                line = text.count("\n", 0, match.start()) + 1
                problems.append(f"{page.relative_to(ROOT)}:{line}: {key}")
    assert not problems, "keys not in docs/stats.rst:\n" + "\n".join(problems)
