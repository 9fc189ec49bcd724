"""robots.txt reduced to the one group that applies to a user agent, before Protego parses it.

Protego gives every user-agent token of a group its own copy of the group's rules and
builds a pattern object per rule. A 500 KiB robots.txt that names 200 user agents over
20 000 Disallow lines therefore parses to 262 MB of objects in 7.6 s of CPU
(``benchmarks/robots_parse.py``), while a crawler only ever asks about its own agent.
Protego answers a query from exactly one rule set: the token that scores highest against
the agent (ties: the token met first), holding every rule of every group that listed it.
:func:`reduce_for_agent` finds that token with Protego's own line reader and grouping
rules and writes a robots.txt of one group with those rules in their order, so parsing it
gives the same answers to ``can_fetch``, ``crawl_delay``, ``request_rate`` and
``visit_time`` for that agent (tested against the full parse with Hypothesis) at the cost
of the rules that concern us. Lines are read with Protego's ``_extract_directive`` (the
same tolerance for misspellings and missing colons); if a future Protego drops it,
:data:`AVAILABLE` is False and the whole file is parsed as before.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from protego import Protego
from scrapy.robotstxt import decode_robotstxt
from scrapy.utils.python import to_unicode

try:  # Protego's private line reader and directive names: the grouping must match its own.
    from protego._protego import (
        _ALLOW_DIRECTIVE,
        _CRAWL_DELAY_DIRECTIVE,
        _DISALLOW_DIRECTIVE,
        _REQUEST_RATE_DIRECTIVE,
        _SITE_WIDE_DIRECTIVES,
        _USER_AGENT_DIRECTIVE,
        _VISIT_TIME_DIRECTIVE,
        _extract_directive,
    )

    AVAILABLE = True
except ImportError:  # pragma: no cover - depends on the installed Protego
    AVAILABLE = False

#: RAM charged per rule line kept (measured with tracemalloc on Protego 0.7: about 270 B
#: for a plain path, about 1.6 KB for a pattern with ``*`` or ``$``), rounded up.
BYTES_PER_RULE = 320
BYTES_PER_PATTERN_RULE = 2048
OVERHEAD_BYTES = 2048
#: Distinct user agents whose reductions one robots.txt keeps (a crawl normally has one).
MAX_AGENTS = 4


_AGENT = re.compile("agent", re.IGNORECASE)


def _directives(text: str) -> Iterator[tuple[str, str]]:
    """(field, value) of each line as Protego reads it (comments and blanks skipped)."""
    for raw in text.splitlines():
        line = raw
        hash_pos = line.find("#")
        if hash_pos != -1:
            line = line[0:hash_pos].strip()
        line = line.strip()
        if not line:
            continue
        parsed = _extract_directive(line)
        if parsed is not None:
            yield parsed


def _tokens(value: str) -> list[str]:
    """The rule-set keys Protego files a ``User-agent`` value under (wildcards dropped too)."""
    agent = value.strip().lower()
    keys = [agent]
    if agent != "*" and "*" in agent:
        keys.append(agent.replace("*", ""))
    return [key for key in keys if key]


def _score(token: str, robot_name: str) -> int:
    """Protego's ``applies_to``: 1 for ``*``, else the token's length if it occurs in the
    lowercased agent at a product-token boundary, else 0."""
    if token == "*":
        return 1
    index = robot_name.find(token)
    while index != -1:
        if index == 0 or not (
            robot_name[index - 1].isalnum() or robot_name[index - 1] in "-_"
        ):
            return len(token)
        index = robot_name.find(token, index + 1)
    return 0


def _canonical(field: str) -> str | None:
    """The spelling to write a rule line of the chosen group with; None: not a group rule."""
    if field in _DISALLOW_DIRECTIVE:
        return "Disallow"
    if field in _ALLOW_DIRECTIVE:
        return "Allow"
    if field in _CRAWL_DELAY_DIRECTIVE:
        return "Crawl-delay"
    if field in _REQUEST_RATE_DIRECTIVE:
        return "Request-rate"
    if field in _VISIT_TIME_DIRECTIVE:
        return "Visit-time"
    return None


def _agent_tokens(text: str) -> list[str]:
    """Every user-agent token of the file, in the order Protego files them.

    Only lines containing "agent" (any case) can be user-agent lines, so only those are
    read in full: a cheap first pass even over 500 KiB of rules.
    """
    tokens: dict[str, None] = {}
    line_end = -1
    for match in _AGENT.finditer(text):
        if match.start() < line_end:
            continue  # a second "agent" on a line already read
        line_start = text.rfind("\n", 0, match.start()) + 1
        line_end = text.find("\n", match.end())
        if line_end == -1:
            line_end = len(text)
        for field, value in _directives(text[line_start:line_end]):
            if field in _USER_AGENT_DIRECTIVE and value:
                tokens.update(dict.fromkeys(_tokens(value)))
    return list(tokens)


def _best(tokens: list[str], user_agent: str) -> str | None:
    robot_name = user_agent.strip().lower()
    best, best_score = None, 0
    for token in tokens:
        score = _score(token, robot_name)
        if score > best_score:  # strictly: the first of equal scores wins, as in max()
            best, best_score = token, score
    return best


def matching_token(text: str, user_agent: str) -> str | None:
    """The user-agent token whose rules Protego would apply to ``user_agent``, or None."""
    return _best(_agent_tokens(text), user_agent)


def reduce_for_agent(text: str, user_agent: str) -> str:
    """A robots.txt with only the rules Protego would apply to ``user_agent``, in order.

    A file with a single user-agent token is returned whole when it applies (its one
    group is ours): nothing to drop, so no second pass.
    """
    tokens = _agent_tokens(text)
    token = _best(tokens, user_agent)
    if token is None:
        return ""
    if len(tokens) == 1:
        return text
    out = [f"User-agent: {token}"]
    current: set[str] = set()
    previous: str | None = None
    for field, value in _directives(text):
        is_agent = field in _USER_AGENT_DIRECTIVE
        if is_agent and previous is not None and previous not in _USER_AGENT_DIRECTIVE:
            current = set()  # a user-agent line after rules starts a new group
        if field not in _SITE_WIDE_DIRECTIVES:
            previous = field
        if not value:
            continue
        if is_agent:
            current.update(_tokens(value))
        elif token in current:
            name = _canonical(field)
            if name is not None:
                out.append(f"{name}: {value}")
    return "\n".join(out) + "\n"


def estimated_bytes(reduced: str) -> int:
    """RAM charged for a parse of ``reduced`` (see BYTES_PER_RULE): an upper estimate
    that counts every line that is not blank or a comment as a rule.

    Lines are split as Protego splits them (``str.splitlines``: CR-only and other line
    ends too), so a file with old Mac line ends is not charged as one line."""
    total = OVERHEAD_BYTES
    for line in reduced.splitlines():
        content = line.strip()
        if not content or content.startswith("#"):
            continue
        pattern = "*" in line or "$" in line
        total += BYTES_PER_PATTERN_RULE if pattern else BYTES_PER_RULE
    return total


class AgentRules:
    """Scrapy's ``RobotParser`` interface over per-agent reductions of one robots.txt body.

    ``allowed``, ``crawl_delay`` and ``request_rate`` answer from a Protego parse of the
    body reduced to the asking agent's group; the reduction for ``default_agent`` is made
    at once (and sized in :attr:`estimated_bytes`), others when first asked, at most
    :data:`MAX_AGENTS` kept. The body is held by reference, not copied.
    """

    def __init__(self, body: bytes, spider: Any, default_agent: str) -> None:
        self._body = body
        self._spider = spider
        self._parsed: OrderedDict[str, Protego] = OrderedDict()
        reduced = self._reduce(default_agent)
        self._parsed[default_agent] = Protego.parse(reduced)
        self.kept_lines = len(reduced.splitlines())
        self.estimated_bytes = len(body) + estimated_bytes(reduced)

    def _reduce(self, agent: str) -> str:
        return reduce_for_agent(decode_robotstxt(self._body, self._spider), agent)

    def _for(self, user_agent: str | bytes) -> Protego:
        agent = to_unicode(user_agent)
        parsed = self._parsed.get(agent)
        if parsed is None:
            parsed = self._parsed[agent] = Protego.parse(self._reduce(agent))
            while len(self._parsed) > MAX_AGENTS:
                self._parsed.popitem(last=False)
        else:
            self._parsed.move_to_end(agent)
        return parsed

    def allowed(self, url: str | bytes, user_agent: str | bytes) -> bool:
        return self._for(user_agent).can_fetch(to_unicode(url), to_unicode(user_agent))

    def crawl_delay(self, user_agent: str | bytes) -> float | None:
        delay = self._for(user_agent).crawl_delay(to_unicode(user_agent))
        return None if delay is None else float(delay)

    def request_rate(self, user_agent: str | bytes) -> Any:
        return self._for(user_agent).request_rate(to_unicode(user_agent))

    def visit_time(self, user_agent: str | bytes) -> Any:
        return self._for(user_agent).visit_time(to_unicode(user_agent))
