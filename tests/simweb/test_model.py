"""The web model: deterministic, realistic in shape, and consistent with what it serves."""

from __future__ import annotations

import dataclasses
import re
import statistics
from collections import Counter

import pytest
import tldextract

from scrapy_irl.simweb.config import WebConfig
from scrapy_irl.simweb.model import BLOG_PLD, ROBOTS_KINDS, SPAM_ENTRIES, Web
from scrapy_irl.simweb.pages import respond

TINY = WebConfig.sized("tiny")
HREF = re.compile(r'href="?([^" >]*)')


def _sample_bodies(web: Web) -> list[bytes]:
    out = []
    for name in sorted(web.hosts)[:20]:
        host = web.hosts[name]
        for target in (
            "/",
            "/robots.txt",
            "/p/1.html",
            "/p/3.html",
            "/calendar/2025/01/",
        ):
            out.append(respond(web, host, target).body)
    return out


def test_same_seed_same_web() -> None:
    a, b = Web(TINY), Web(WebConfig.sized("tiny"))
    assert a.ground_truth() == b.ground_truth()
    assert _sample_bodies(a) == _sample_bodies(b)


def test_different_seed_different_web() -> None:
    a, b = Web(TINY), Web(TINY.replace(seed=2))
    assert [p.name for p in a.plds] != [p.name for p in b.plds]
    assert a.in_degree != b.in_degree or a.out_links != b.out_links


def test_pld_names_parse_offline_with_tldextract() -> None:
    web = Web(WebConfig.sized("small"))
    extract = tldextract.TLDExtract(suffix_list_urls=())
    suffixes = Counter()
    for host in web.hosts.values():
        parsed = extract(host.name)
        assert parsed.top_domain_under_public_suffix == host.pld.name, host.name
        suffixes[parsed.suffix] += 1
    assert {"com", "org", "co.uk", "com.au", "de"} <= set(suffixes)
    spam_host = f"x1.{web.spam_plds[0].name}"
    assert extract(spam_host).top_domain_under_public_suffix == web.spam_plds[0].name


def test_shape_at_default_size() -> None:
    web = Web(WebConfig())
    legit = web.in_degree[: web.config.plds]
    assert len(legit) >= 300
    assert max(legit) >= 10 * statistics.median(legit), (
        "PLD in-degree should be heavy-tailed"
    )
    pages = sorted(
        (h.pages for h in web.hosts.values() if h.kind == "legit"), reverse=True
    )
    assert pages[0] >= 10_000 and pages[2] >= 10_000, (
        "a few sites with tens of thousands of pages"
    )
    assert statistics.median(pages) < 100
    hosts_per_pld = Counter(h.pld.name for h in web.hosts.values() if h.kind == "legit")
    assert min(hosts_per_pld.values()) == 1 and max(hosts_per_pld.values()) >= 3
    # the blog platform is among the best-linked PLDs
    ranked = sorted(range(len(web.plds)), key=lambda i: -web.in_degree[i])
    assert web.blog.index in ranked[:10]


def test_addresses_loopback_shared_and_never_127_0_0_x() -> None:
    web = Web(TINY)
    ips = Counter(h.ip for h in web.hosts.values())
    for ip in web.ips:
        assert ip.startswith("127.") and not ip.startswith("127.0.0.")
    assert set(ips) <= set(web.ips)
    assert max(ips.values()) >= 3, "virtual hosting: many hosts share an IP"
    assert web.host(f"u7.{BLOG_PLD}").ip in web.blog_ips


def test_every_robots_kind_and_trap_present() -> None:
    web = Web(TINY)
    hosts = list(web.hosts.values())
    assert {k for k, _ in ROBOTS_KINDS} <= {h.robots for h in hosts}
    assert (
        any(h.calendar for h in hosts)
        and any(h.session for h in hosts)
        and any(h.drip for h in hosts)
    )


def test_resolution_rules() -> None:
    web = Web(TINY)
    spam = web.spam_plds[0].name
    assert web.resolve(f"u0.{BLOG_PLD}") and web.resolve(
        f"u{TINY.blog_users - 1}.{BLOG_PLD}"
    )
    assert web.resolve(f"u{TINY.blog_users}.{BLOG_PLD}") is None
    assert web.resolve(f"u007.{BLOG_PLD}") is None
    assert web.resolve(f"anything-123.{spam}") in web.spam_ips
    assert web.resolve(f"a.b.{spam}") is None
    assert web.resolve("gone5." + web.plds[0].name) is None
    assert web.resolve("example.com") is None and web.resolve("localhost") is None
    name = web.hosts_of[0][0]
    assert web.resolve(name.upper() + ".") == web.resolve(name)


def test_ground_truth_in_degree_is_what_home_pages_serve() -> None:
    """Cross-PLD links on primary home pages are exactly the PLD graph's out-links."""
    web = Web(TINY)
    for pld in web.plds[: TINY.plds]:
        host = web.hosts[web.hosts_of[pld.index][0]]
        body = respond(web, host, "/").body.decode("utf-8", "replace")
        linked = set()
        for href in HREF.findall(body):
            if href.startswith("http://") and "@" not in href:
                name = href[7:].split("/")[0].rsplit(":", 1)[0].encode("idna").decode()
                target = web.pld_of(name)
                if target is not None and target.index != pld.index:
                    linked.add(target.index)
        assert set(web.out_links[pld.index]) <= linked | {pld.index}
    sources = Counter()
    for src, outs in enumerate(web.out_links):
        for t in set(outs) - {src}:
            sources[t] += 1
    assert [sources[i] for i in range(len(web.plds))] == web.in_degree


def test_spam_farm_reached_from_few_legit_pages() -> None:
    web = Web(TINY)
    spam = {p.index for p in web.spam_plds}
    legit_into_spam = [i for i in range(TINY.plds) if spam & set(web.out_links[i])]
    assert len(legit_into_spam) == SPAM_ENTRIES
    s = web.spam_plds[0]
    page = respond(web, web.host(f"abc.{s.name}"), "/x.html").body.decode()
    hosts = {h.split("/")[2].rsplit(":", 1)[0] for h in HREF.findall(page)}
    assert len(hosts) >= 15 and all(web.host(h).kind == "spam" for h in hosts)


@pytest.mark.parametrize(
    ("target", "kind"),
    [("/robots.txt", "robots"), ("/p/1.html", "page"), ("/calendar/2025/01/", "trap")],
)
def test_classify(target: str, kind: str) -> None:
    web = Web(TINY)
    cal = next(h for h in web.hosts.values() if h.calendar)
    assert web.classify(cal.name, target) == kind
    sess = next(h for h in web.hosts.values() if h.session)
    assert web.classify(sess.name, "/p/1.html?sid=abc") == "trap"
    assert web.classify(f"zz.{web.spam_plds[1].name}", "/") == "spam"
    assert web.classify("nowhere.example", "/") == "unresolvable"


def test_config_overrides_from_the_command_line() -> None:
    from scrapy_irl.simweb.__main__ import parse_args

    args = parse_args(
        ["--size", "tiny", "--web", "spam_plds=9", "--web", "pages_alpha=1.5"]
    )
    assert args.web == {"spam_plds": 9, "pages_alpha": 1.5}
    assert isinstance(args.web["spam_plds"], int)
    web = Web(WebConfig.sized("tiny", **args.web))
    assert sum(1 for p in web.plds if p.kind == "spam") == 9


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("bogus=1", "FIELD one of"),
        ("spam_plds", "FIELD one of"),
        ("spam_plds=x", "whole number"),
        ("pages_alpha=fast", "a number"),
        ("seed=3", "own option"),
    ],
)
def test_config_override_errors_are_clear(item: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        WebConfig.parse_override(item)


def test_path_loop_trap_is_opt_in_and_changes_nothing_else() -> None:
    plain, looped = Web(TINY), Web(TINY.replace(loop_share=0.2))
    assert not any(h.loop for h in plain.hosts.values())
    loops = [h for h in looped.hosts.values() if h.loop]
    assert loops  # at least one, whatever the share
    for name, host in plain.hosts.items():  # every other property as before
        assert dataclasses.replace(looped.hosts[name], loop=False) == host
    host = loops[0]
    home = respond(looped, host, "/").body.decode()
    assert 'href="/docs/"' in home
    docs = respond(looped, host, "/docs/").body.decode()
    assert 'href="more/"' in docs
    deep = respond(looped, host, "/docs/" + "more/" * 30)
    assert deep.status == 200 and deep.body == respond(looped, host, "/docs/").body
    assert looped.classify(host.name, "/docs/") == "page"
    assert looped.classify(host.name, "/docs/more/more/") == "trap"
    other = next(h for h in looped.hosts.values() if h.kind == "legit" and not h.loop)
    assert respond(looped, other, "/docs/more/").status == 404
    with pytest.raises(ValueError, match="loop_share"):
        WebConfig.sized("tiny", loop_share=1.5)


def test_spam_farm_addresses_are_configurable() -> None:
    """``spam_ips`` spreads the farm's hosts over that many addresses of their own; the
    default (3) leaves every other address, and so the default web, as it was."""
    spread = Web(dataclasses.replace(TINY, spam_ips=7))
    default = Web(TINY)
    assert len(default.spam_ips) == 3 and len(spread.spam_ips) == 7
    farm = [f"w{i}.{pld.name}" for pld in spread.spam_plds for i in range(40)]
    used = {spread.resolve(name) for name in farm}
    assert used == set(spread.spam_ips)
    others = {host.ip for host in spread.hosts.values()} | set(spread.blog_ips)
    assert not others & used
    assert {n: h.ip for n, h in spread.hosts.items()} == {
        n: h.ip for n, h in default.hosts.items()
    }
    with pytest.raises(ValueError, match="spam_ips"):
        WebConfig(spam_ips=0)


@pytest.mark.parametrize("plds", ["3", "100001", "1000000"])
def test_plds_out_of_bounds_is_refused_before_any_build(
    plds: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A million PLDs used to be built for a minute (and then run out of addresses); now
    the config refuses it, and the server CLI exits 2 with the message, no traceback."""
    from scrapy_irl.simweb.__main__ import parse_args
    from scrapy_irl.simweb.config import MAX_PLDS

    with pytest.raises(ValueError, match=f"plds must be within 5..{MAX_PLDS}, got {plds}"):
        WebConfig(plds=int(plds))
    with pytest.raises(SystemExit) as stopped:
        parse_args(["--plds", plds])
    assert stopped.value.code == 2
    assert f"got {plds}" in capsys.readouterr().err
    assert WebConfig(plds=MAX_PLDS).plds == MAX_PLDS  # the bound itself is valid
