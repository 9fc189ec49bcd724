"""Build STAR and BEAST for a scheduler from ``IRL_*`` settings, wired to each other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scrapy.utils.misc import load_object

from scrapy_irl import config
from scrapy_irl.scheduler.beast import Beast
from scrapy_irl.scheduler.budget import KINDS, BudgetPolicy
from scrapy_irl.scheduler.codec import record_url
from scrapy_irl.scheduler.star import Star


def budget_policy(settings: Any) -> BudgetPolicy:
    kind = config.get(settings, "IRL_BUDGET_FUNCTION")
    function = None
    if callable(kind):
        function, kind = kind, "custom"
    elif kind not in KINDS:
        function = load_object(kind)
    return BudgetPolicy(
        kind=kind,
        base=config.getfloat(settings, "IRL_BUDGET_BASE"),
        per_degree=config.getfloat(settings, "IRL_BUDGET_PER_DEGREE"),
        maximum=config.getfloat(settings, "IRL_BUDGET_MAX"),
        function=function,
    )


def build_star_and_beast(
    path: Path, settings: Any, *, fsync: bool
) -> tuple[Star, Beast]:
    from urllib.parse import urlsplit

    star_holder: list[Star] = []

    def rebudget(record: bytes) -> int | None:
        host = urlsplit(record_url(record)).hostname
        return star_holder[0].budget(host) if host and star_holder else None

    beast = Beast(
        path / "beast",
        initial_queues=config.getint(settings, "IRL_BEAST_QUEUES"),
        max_queues=config.getint(settings, "IRL_BEAST_MAX_QUEUES"),
        fsync=fsync,
        rebudget=rebudget,
    )
    star = Star(
        path / "star",
        budget_policy(settings),
        beast.push,
        drum_options={
            "flush_interval": config.getfloat(settings, "IRL_DRUM_FLUSH_INTERVAL"),
            "fsync": fsync,
            "verify_on_open": config.getbool(settings, "IRL_DRUM_VERIFY_ON_OPEN"),
        },
        cache_entries=config.getint(settings, "IRL_STAR_CACHE_ENTRIES"),
        on_durable=beast.save,
    )
    star_holder.append(star)
    return star, beast
