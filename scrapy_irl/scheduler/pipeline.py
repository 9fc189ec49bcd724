"""Build URLseen, STAR and BEAST for a scheduler from ``IRL_*`` settings, wired to each other."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from scrapy.utils.misc import load_object

from scrapy_irl import config
from scrapy_irl.drum import Drum
from scrapy_irl.drum.store import MAX_BUCKETS, ResultsCallback
from scrapy_irl.scheduler.beast import Beast
from scrapy_irl.scheduler.budget import KINDS, BudgetPolicy
from scrapy_irl.scheduler.codec import record_url
from scrapy_irl.scheduler.items import host_key
from scrapy_irl.scheduler.star import Star


def budget_function(value: Any) -> tuple[str, Callable[[int], float] | None]:
    """``IRL_BUDGET_FUNCTION`` as (kind, user function): a name of :data:`KINDS` (any case),
    a callable, or the dotted path of one; anything else is a ValueError saying so."""
    if callable(value):
        return "custom", value
    if isinstance(value, str) and value.strip().lower() in KINDS:
        return value.strip().lower(), None
    expected = f"one of {', '.join(KINDS)}, or the dotted path of a function d -> budget"
    if not isinstance(value, str):
        raise TypeError(f"IRL_BUDGET_FUNCTION must be {expected}, or a callable; got {value!r}")
    if "." not in value.strip(".") or " " in value.strip():
        raise ValueError(f"IRL_BUDGET_FUNCTION must be {expected}; got {value!r}")
    try:
        function = load_object(value)
    except (ImportError, AttributeError, NameError, ValueError) as exc:
        raise ValueError(
            f"IRL_BUDGET_FUNCTION={value!r} cannot be imported ({exc}); expected {expected}"
        ) from None
    if not callable(function):
        raise TypeError(f"IRL_BUDGET_FUNCTION={value!r} is not callable; expected {expected}")
    return value, function


def budget_policy(settings: Any) -> BudgetPolicy:
    kind, function = budget_function(config.get(settings, "IRL_BUDGET_FUNCTION"))
    return BudgetPolicy(
        kind=kind,
        base=config.getfloat(settings, "IRL_BUDGET_BASE"),
        per_degree=config.getfloat(settings, "IRL_BUDGET_PER_DEGREE"),
        maximum=config.getfloat(settings, "IRL_BUDGET_MAX"),
        function=function,
    )


def beast_options(settings: Any) -> dict[str, int]:
    """BEAST's ``IRL_BEAST_*`` values, checked together (one reading for the check at
    start and the store built at ``open()``)."""
    initial = config.getint(settings, "IRL_BEAST_QUEUES")
    most = config.getint(settings, "IRL_BEAST_MAX_QUEUES")
    if not 2 <= initial <= most:
        raise ValueError(
            f"need 2 <= IRL_BEAST_QUEUES <= IRL_BEAST_MAX_QUEUES, got {initial}, {most}"
        )
    return {"initial_queues": initial, "max_queues": most}


def urlseen_options(settings: Any) -> dict[str, int]:
    """The frontier URLseen's DRUM sizes from ``IRL_*`` settings, each checked by name."""
    return {
        "buckets": config.getpowerof2(settings, "IRL_URLSEEN_BUCKETS", maximum=MAX_BUCKETS),
        "buffer_bytes": config.getint(settings, "IRL_URLSEEN_BUFFER_BYTES", minimum=1),
        "bucket_bytes": config.getint(settings, "IRL_FRONTIER_URLSEEN_BUCKET_BYTES", minimum=1),
        "merge_chunk_bytes": config.getint(settings, "IRL_URLSEEN_MERGE_CHUNK_BYTES", minimum=1),
        "delivery_slice": config.getint(settings, "IRL_URLSEEN_DELIVERY_SLICE", minimum=1),
    }


def star_cache_entries(settings: Any) -> int:
    return config.getint(settings, "IRL_STAR_CACHE_ENTRIES", minimum=0)


def check_settings(settings: Any) -> None:
    """Refuse bad ``IRL_*`` values of the stores built at ``open()`` (and of the DNS
    resolver) when the scheduler is created, naming the setting: found only by ``open()``,
    they failed after the frontier directory had been locked and partly written, with a
    message naming no setting (``buckets must be a power of two``). The same readers
    build the stores, so the check and the build cannot disagree."""
    from scrapy_irl.hosts.download import keepalive_max_idle
    from scrapy_irl.hosts.middleware import dns_options

    keepalive_max_idle(settings)  # read by the download handler, built at the first request
    # read at open(): a bad one raised there, in a burst of Scrapy's follow-on tracebacks
    # without the one "Refusing to start" line (a user probe, 2026-11-28)
    for flag in ("IRL_DRUM_FSYNC", "IRL_DRUM_VERIFY_ON_OPEN", "IRL_FAST_FINGERPRINT",
                 "IRL_BUDGET_COUNTS_NEW_HOSTS"):  # fmt: skip
        config.getbool(settings, flag)
    beast_options(settings)
    urlseen_options(settings)
    star_cache_entries(settings)
    dns_options(settings)


def build_star_and_beast(
    path: Path, settings: Any, *, fsync: bool
) -> tuple[Star, Beast]:
    from urllib.parse import urlsplit

    star_holder: list[Star] = []

    def rebudget(record: bytes) -> int | None:
        # the host as intake and the heaps key it (an IPv6 literal in one spelling)
        host = host_key(urlsplit(record_url(record)).hostname)
        return star_holder[0].known_budget(host) if host and star_holder else None

    beast = Beast(
        path / "beast",
        **beast_options(settings),
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
        cache_entries=star_cache_entries(settings),
        on_durable=beast.save,
        applied=beast.applied,
        charge_new_hosts=config.getbool(settings, "IRL_BUDGET_COUNTS_NEW_HOSTS"),
    )
    star_holder.append(star)
    return star, beast


def build_urlseen(
    path: Path, settings: Any, star: Star, on_results: ResultsCallback, *, fsync: bool
) -> Drum:
    """URLseen, whose unique URLs ``on_results`` hands to ``star``.

    URLs handed to STAR sit in its RAM buffers until written out, so URLseen writes them
    out before it acknowledges (forgets) a merge's results: a kill in between would lose
    URLs enqueued long before it.
    """
    return Drum(
        path / "urlseen",
        **urlseen_options(settings),
        store_aux=True,
        on_results=on_results,
        before_ack=star.write_out,
        flush_interval=config.getfloat(settings, "IRL_DRUM_FLUSH_INTERVAL"),
        fsync=fsync,
        verify_on_open=config.getbool(settings, "IRL_DRUM_VERIFY_ON_OPEN"),
    )
