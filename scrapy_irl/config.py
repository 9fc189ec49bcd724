"""Typed getters for ``IRL_*`` settings that fall back to :mod:`scrapy_irl.settings`.

Components may be enabled one by one (``DUPEFILTER_CLASS = ...`` without the add-on), so
they cannot rely on the add-on having copied the defaults into the crawler's settings.
A name missing from :mod:`scrapy_irl.settings` is a programming error and raises.
"""

from __future__ import annotations

import math
import os
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from scrapy_irl import settings as defaults

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings


def _default(name: str) -> Any:
    try:
        return getattr(defaults, name)
    except AttributeError:
        raise KeyError(f"{name} is not an scrapy-irl setting (see scrapy_irl/settings.py)") from None


class SettingError(ValueError):
    """An ``IRL_*`` setting with a value the component reading it refuses. A ValueError,
    as Scrapy's own getters raise; its own type lets a component's start say "Refusing to
    start the crawl" once (:func:`scrapy_irl.refusal.refusing_start`) instead of leaving
    it to a traceback."""


def _bad(name: str, value: Any, expected: str) -> SettingError:
    return SettingError(f"invalid {name}={value!r}: expected {expected}")


def _check_range(name: str, value: float, minimum: float | None, above: float | None,
                 maximum: float | None = None) -> None:  # fmt: skip
    if minimum is not None and not value >= minimum:
        raise SettingError(f"{name} must be >= {minimum}, got {value!r}")
    if above is not None and not value > above:
        raise SettingError(f"{name} must be > {above}, got {value!r}")
    if maximum is not None and not value <= maximum:
        raise SettingError(f"{name} must be <= {maximum}, got {value!r}")


def require_reactor(settings: BaseSettings, component: str) -> None:
    """Refuse Scrapy's reactorless mode (``TWISTED_REACTOR_ENABLED = False``) by name.

    It forbids importing Twisted's reactor, which ``component``'s timers (and DNS
    lookups) run on: without this check the crawl died with an ImportError from
    whichever component came first, or, under ``AsyncCrawlerRunner``, the import quietly
    installed a reactor that never runs and the crawl hung on its first host name.
    """
    if not settings.getbool("TWISTED_REACTOR_ENABLED", True):
        raise RuntimeError(
            f"{component} needs a Twisted reactor: TWISTED_REACTOR_ENABLED=False is not "
            f"supported (keep the reactor, or leave {component} out)"
        )


def get(settings: BaseSettings, name: str) -> Any:
    return settings.get(name, _default(name))


def getbool(settings: BaseSettings, name: str) -> bool:
    try:
        return settings.getbool(name, _default(name))
    except (ValueError, TypeError):
        raise _bad(name, settings.get(name), "True/False, 1/0 or 'true'/'false'") from None


def _number(read: Any, name: str, expected: str, minimum: float | None,
            above: float | None, maximum: float | None = None) -> Any:  # fmt: skip
    try:
        value = read(name, _default(name))
    except (ValueError, TypeError, OverflowError):
        raise _bad(name, read.__self__.get(name), expected) from None
    if isinstance(value, float) and not math.isfinite(value):
        # NaN passes every bound check; infinity passes a minimum, and an infinite delay
        # or interval is a crawl that never fetches (IRL_HOST_DELAY=inf: 0 requests until
        # CLOSESPIDER_TIMEOUT, a user probe, 2026-11-28) or a timer Twisted cannot set
        raise _bad(name, read.__self__.get(name, value), f"{expected} (finite)")
    _check_range(name, value, minimum, above, maximum)
    return value


def getint(
    settings: BaseSettings, name: str, *, minimum: int | None = None, above: int | None = None,
    maximum: int | None = None,
) -> int:
    """``name`` as an int; a value that is not one, or out of range, is a :class:`SettingError`
    naming it.

    A float with a fraction (1.5) is refused: Scrapy's ``getint`` would truncate it to 1
    without a word, and 0.5 would be refused as "got 0"."""
    raw = settings.get(name, _default(name))
    if isinstance(raw, float) and not (math.isfinite(raw) and raw.is_integer()):
        raise _bad(name, raw, "an integer")
    return int(_number(settings.getint, name, "an integer", minimum, above, maximum))


def getpowerof2(settings: BaseSettings, name: str, *, maximum: int) -> int:
    """``name`` as a power of two in 1..``maximum`` (DRUM splits keys into buckets by their
    top bits), so a bad count is refused naming the setting, not deep inside the store."""
    value = getint(settings, name, minimum=1, maximum=maximum)
    if value & (value - 1):
        raise _bad(name, value, f"a power of two in 1..{maximum}")
    return value


def getfloat(
    settings: BaseSettings, name: str, *, minimum: float | None = None, above: float | None = None
) -> float:
    """``name`` as a float; NaN, infinity, a non-number or a value out of range is a
    :class:`SettingError` naming it (a very long delay or TTL is written as a large number)."""
    return float(_number(settings.getfloat, name, "a number", minimum, above))


def getlist(settings: BaseSettings, name: str) -> list[str]:
    """``name`` as a list of strings (a comma-separated string is split); an item that is
    not a string is refused here rather than failing later on ``.lower()``."""
    value = settings.get(name, _default(name))
    if value is None or isinstance(value, str | list | tuple):
        items = settings.getlist(name, _default(name))
        if all(isinstance(item, str) for item in items):
            return items
    raise _bad(name, value, "a list of strings or a comma-separated string")


def getintlist(settings: BaseSettings, name: str) -> list[int]:
    """``name`` as a list of integers (``[429, 503]``, ``"429,503"``, ``[]``); anything
    else is a ValueError naming it."""
    value = settings.get(name, _default(name))
    if value is None or isinstance(value, str | list | tuple):
        items = settings.getlist(name, _default(name))
        try:
            return [_integer(item) for item in items]
        except ValueError:
            pass
    raise _bad(name, value, "a list of integers or a comma-separated string of them")


def _integer(item: object) -> int:
    if isinstance(item, bool):
        raise ValueError(item)
    if isinstance(item, int):
        return item
    if isinstance(item, str) and item.strip().isdigit():
        return int(item.strip())
    raise ValueError(item)


def getstr(settings: BaseSettings, name: str, *, choices: Collection[str] | None = None) -> str:
    """``name`` as a str (one of ``choices`` when given): a number or a list would otherwise
    fail later, inside whatever builds a file name or looks the value up, without the name."""
    value = settings.get(name, _default(name))
    if not isinstance(value, str):
        raise _bad(name, value, "a string")
    if choices is not None and value not in choices:
        raise _bad(name, value, "one of " + ", ".join(repr(c) for c in sorted(choices)))
    return value


def getpath(settings: BaseSettings, name: str) -> str:
    """``name`` as a path, ``""`` when unset (empty or None): a str or an ``os.PathLike``.

    ``Path(5)`` fails deep inside a store with no setting named, and ``str(["a"])`` would
    quietly create a directory called ``['a']``; both are refused here instead.
    """
    value = settings.get(name, _default(name))
    if value is None:
        return ""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise _bad(name, value, "a path (a str or os.PathLike)")
    return value


def uses_irl_scheduler(settings: BaseSettings) -> bool:
    """Whether ``SCHEDULER`` is the IRL scheduler (or a subclass): components that only
    serve it, or that it replaces, switch themselves on or off by this."""
    from scrapy.utils.misc import load_object

    from scrapy_irl.scheduler import IrlScheduler

    try:
        scheduler = load_object(settings.get("SCHEDULER"))
    except (ImportError, ValueError, NameError, TypeError):
        return False
    return isinstance(scheduler, type) and issubclass(scheduler, IrlScheduler)
