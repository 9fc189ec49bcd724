"""robots.txt reduced to one user agent's group answers exactly like the whole file."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from protego import Protego
from scrapy.robotstxt import ProtegoRobotParser

from scrapy_irl.robots import reduce
from scrapy_irl.robots.reduce import AgentRules, matching_token, reduce_for_agent

pytestmark = pytest.mark.skipif(
    not reduce.AVAILABLE, reason="Protego without _extract_directive"
)

TOKENS = ["*", "bot", "mybot", "Bot*", "scrapy", "irlbot", "googlebot", "other-bot", "b*t", "*bot", "",
          "foo", "bar"]  # fmt: skip
AGENT_FIELDS = ["User-agent", "user-agent", "useragent", "User agent", "USER-AGENT"]
RULE_FIELDS = ["Disallow", "disallow", "Allow", "dissallow", "disalow", "Crawl-delay", "crawl delay",
               "Request-rate", "request rate", "Visit-time", "Sitemap", "Host", "Noindex", "Unknown"]  # fmt: skip
VALUES = ["/", "/a", "/a/", "/a*", "/*.php$", "/b$", "", "5", "0.5", "-1", "1/10", "3/1m 0100-0500",
          "0400-0845", "x", "/a%2Fb", "/ä", "/c?q=1", "*"]  # fmt: skip
SEPARATORS = [": ", ":", " ", " : "]
AGENTS = ["Scrapy/2.19 (+https://scrapy.org)", "mybot", "Bot/1.0", "IRLbot", "googlebot", "x",
          "other-bot/2", "b*t", "Mozilla/5.0 (compatible; mybot/1.0)", "*",
          "foo bar/1.0"]  # equal scores: the token met first wins  # fmt: skip
URLS = ["http://h/", "http://h/a", "http://h/a/b", "http://h/x.php", "http://h/b", "http://h/bb",
        "http://h/robots.txt", "http://h/ä", "http://h/a%2Fb", "http://h/c?q=1", "http://h/a*"]  # fmt: skip

agent_line = st.builds(lambda f, s, t: f"{f}{s}{t}", st.sampled_from(AGENT_FIELDS),
                       st.sampled_from(SEPARATORS), st.sampled_from(TOKENS))  # fmt: skip
rule_line = st.builds(lambda f, s, v: f"{f}{s}{v}", st.sampled_from(RULE_FIELDS),
                      st.sampled_from(SEPARATORS), st.sampled_from(VALUES))  # fmt: skip
other_line = st.sampled_from(["", "   ", "# comment", "Disallow: /x # trailing comment", "garbage line",
                              "#User-agent: *", "User-agent: bot # named", "\tAllow: /a"])  # fmt: skip
robots_text = st.lists(
    st.one_of(agent_line, rule_line, rule_line, other_line), max_size=40
).map("\n".join)


def answers(parser: Protego, agent: str) -> tuple:
    return (
        tuple(parser.can_fetch(url, agent) for url in URLS),
        parser.crawl_delay(agent),
        parser.request_rate(agent),
        parser.visit_time(agent),
    )


@settings(max_examples=600, deadline=None)
@given(text=robots_text, agent=st.sampled_from(AGENTS))
def test_the_reduced_file_answers_like_the_whole_file(text, agent):
    reduced = reduce_for_agent(text, agent)
    assert answers(Protego.parse(reduced), agent) == answers(
        Protego.parse(text), agent
    ), reduced


def test_groups_of_the_same_agent_merge_and_the_best_token_wins():
    text = (
        "User-agent: *\nDisallow: /all\n\n"
        "User-agent: bot\nUser-agent: mybot\nDisallow: /one\nCrawl-delay: 3\n\n"
        "User-agent: other\nDisallow: /other\n\n"
        "User-agent: mybot\nAllow: /one/ok\nDisallow: /two\n"
    )
    assert matching_token(text, "Mozilla/5.0 (compatible; mybot/1.0)") == "mybot"
    assert reduce_for_agent(text, "mybot/1.0") == (
        "User-agent: mybot\nDisallow: /one\nCrawl-delay: 3\nAllow: /one/ok\nDisallow: /two\n"
    )
    assert reduce_for_agent(text, "Scrapy/2.19") == "User-agent: *\nDisallow: /all\n"
    assert matching_token(text, "robot") == "*"  # "bot" is not at a token boundary
    assert reduce_for_agent("User-agent: other\nDisallow: /\n", "mybot") == ""


def test_equal_scores_go_to_the_token_met_first_as_in_protego():
    text = "User-agent: bar\nDisallow: /b\n\nUser-agent: foo\nDisallow: /f\n"
    agent = "foo bar/1.0"  # both tokens score 3
    assert matching_token(text, agent) == "bar"
    assert Protego.parse(text).can_fetch("http://h/f", agent)  # bar's rules apply
    assert reduce_for_agent(text, agent) == "User-agent: bar\nDisallow: /b\n"


def test_a_file_naming_many_agents_keeps_one_copy_of_our_rules():
    """The case Protego amplifies: 200 agents share one group of 5 000 rules."""
    agents = "".join(f"User-agent: bot{i}\n" for i in range(200))
    rules = "".join(f"Disallow: /s{i}/\n" for i in range(5_000))
    body = (agents + "User-agent: *\n" + rules).encode()
    full = Protego.parse(body.decode())
    assert sum(len(rs._rules) for rs in full._user_agents.values()) == 201 * 5_000
    ours = AgentRules(body, None, "Scrapy/2.19")
    assert ours.kept_lines == 1 + 5_000  # the user-agent line and one copy of the rules
    # 5 000 rules, and "User-agent: *" charged like a wildcard rule (an upper estimate)
    assert ours.estimated_bytes == (
        len(body)
        + reduce.OVERHEAD_BYTES
        + 5_000 * reduce.BYTES_PER_RULE
        + reduce.BYTES_PER_PATTERN_RULE
    )
    assert not ours.allowed("http://h/s17/x", "Scrapy/2.19")
    assert ours.allowed("http://h/t/x", "Scrapy/2.19")
    bot7 = AgentRules(b"User-agent: bot7\nDisallow: /\n" + body, None, "bot7/1.0")
    assert bot7.kept_lines == 1 + 1 + 5_000


def test_agent_rules_match_scrapys_protego_parser_and_bound_their_agents():
    body = (
        b"User-agent: *\nDisallow: /private/\nCrawl-delay: 2\nRequest-rate: 1/10s\n\n"
        b"User-agent: badbot\nDisallow: /\n"
    )
    ours, stock = AgentRules(body, None, "Scrapy/2.19"), ProtegoRobotParser(body, None)
    for agent in [
        "Scrapy/2.19",
        "badbot/1",
        b"Scrapy/2.19",
        "a1",
        "a2",
        "a3",
        "a4",
        "a5",
    ]:
        for url in ["http://h/private/x", "http://h/ok", b"http://h/ok"]:
            assert ours.allowed(url, agent) == stock.allowed(url, agent)
        assert ours.crawl_delay(agent) == stock.crawl_delay(agent)
        assert ours.request_rate(agent) == stock.rp.request_rate(
            agent if isinstance(agent, str) else agent.decode()
        )
    assert len(ours._parsed) == reduce.MAX_AGENTS


@pytest.mark.parametrize("line_end", ["\n", "\r\n", "\r"])
def test_the_memory_charge_counts_lines_as_protego_splits_them(line_end):
    """Old Mac line ends (CR only) are lines to Protego (str.splitlines): a one-group file
    of 2 000 wildcard rules parses to megabytes whatever its line ends, and must be
    charged so (it was charged as one line, 60 times too little for IRL_ROBOTS_MEMORY_BYTES)."""
    lines = ["User-agent: *"] + [f"Disallow: /p{i}/*.pdf$" for i in range(2_000)]
    body = line_end.join(lines).encode()
    ours = AgentRules(body, None, "Scrapy/2.19")
    assert not ours.allowed("http://h/p7/a.pdf", "Scrapy/2.19")
    assert ours.kept_lines == 1 + 2_000
    assert ours.estimated_bytes == len(body) + reduce.OVERHEAD_BYTES + 2_001 * reduce.BYTES_PER_PATTERN_RULE
