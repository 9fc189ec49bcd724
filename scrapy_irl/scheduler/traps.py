"""Recognise URL paths that only a crawler trap produces, before they cost a URLseen entry.

IRLbot bounds traps by budgets alone (a trap host gets B_x URLs per BEAST queue), which
keeps an infinite site from snowballing but still pays for it forever. Two shapes of URL
are produced almost only by traps, and production crawlers refuse them outright (the
rules Heritrix calls ``PathologicalPathDecideRule`` and ``TooManyPathSegmentsDecideRule``;
Yuntis ``003_*.txt`` 5.2.5 on breadth-first traps):

* a segment, or a group of segments, repeated many times in a row (``/a/b/a/b/a/b/``):
  a relative link such as ``href="b/"`` on a page the server answers for any path, which
  grows the path by one step per hop, forever;
* very many segments: the same loop when the repetition is not exact (a counter, a date).

Both checks look at the path only, cost O(segments) per URL, and can be switched off.
"""

from __future__ import annotations

#: Longest group of segments whose repetition is looked for: a loop through more
#: distinct directories than this is left to the segment-count limit.
MAX_GROUP = 10

TOO_MANY_SEGMENTS = "too_many_segments"
REPEATED_SEGMENTS = "repeated_segments"


class PathTrapRule:
    """``rule(path)`` -> why the path looks like a trap, or None.

    ``max_segments``: most non-empty path segments allowed (0: no limit).
    ``max_repeats``: most times one segment or group of segments may occur in a row
    (0: no limit); 2 allows ``/2024/11/11/`` and refuses ``/a/a/a/`` and ``/a/b/a/b/a/b/``.
    """

    def __init__(self, max_segments: int = 20, max_repeats: int = 2) -> None:
        if max_segments < 0 or max_repeats < 0:
            raise ValueError(
                "IRL_TRAP_MAX_PATH_SEGMENTS and IRL_TRAP_MAX_SEGMENT_REPEATS cannot be "
                f"negative, got {max_segments} and {max_repeats}"
            )
        if max_repeats == 1:
            raise ValueError(
                "IRL_TRAP_MAX_SEGMENT_REPEATS = 1 would refuse /a/a/ and every date like "
                "/2024/11/11/; use 0 (off) or >= 2"
            )
        self.max_segments = max_segments
        self.max_repeats = max_repeats

    @property
    def active(self) -> bool:
        return bool(self.max_segments or self.max_repeats)

    def __call__(self, path: str) -> str | None:
        segments = [s for s in path.split("/") if s]
        if self.max_segments and len(segments) > self.max_segments:
            return TOO_MANY_SEGMENTS
        if self.max_repeats and repeats_in_a_row(segments, self.max_repeats):
            return REPEATED_SEGMENTS
        return None


def repeats_in_a_row(segments: list[str], limit: int) -> bool:
    """True if a group of 1..MAX_GROUP segments occurs more than ``limit`` times in a row.

    A group of g segments occurs r times in a row exactly where g * (r - 1) consecutive
    positions i have ``segments[i] == segments[i + g]`` (the path is g-periodic there).
    """
    n = len(segments)
    for group in range(1, min(MAX_GROUP, n // (limit + 1)) + 1):
        needed = group * limit  # periodic positions for limit + 1 occurrences
        run = 0
        for i in range(n - group):
            if segments[i] == segments[i + group]:
                run += 1
                if run >= needed:
                    return True
            else:
                run = 0
    return False
