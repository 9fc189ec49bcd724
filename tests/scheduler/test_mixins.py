"""IrlScheduler is split into mixins (one stage each) that share its state: a method of
the same name in two of them silently replaces one. Found 2026-11-27: a ``_refuse``
added to the scheduler for its start-up refusal line replaced the robots gate's
``_refuse(item, request, verdict)``, and every URL refused by robots.txt was dropped
with a TypeError (no errback, no ``robotstxt/forbidden``; ``scrapy shell`` of a
disallowed URL hung)."""

from __future__ import annotations

from scrapy_irl.scheduler import IrlScheduler


def test_no_method_name_is_defined_twice_across_the_scheduler_and_its_mixins() -> None:
    seen: dict[str, str] = {}
    clashes = []
    for cls in IrlScheduler.__mro__:
        if not cls.__module__.startswith("scrapy_irl"):
            continue
        for name in cls.__dict__:
            if name.startswith("__") and name.endswith("__"):
                continue
            if name in seen:
                clashes.append(f"{name}: {seen[name]} and {cls.__name__}")
            else:
                seen[name] = cls.__name__
    assert not clashes, clashes
