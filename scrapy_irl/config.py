"""Typed getters for ``IRL_*`` settings that fall back to :mod:`scrapy_irl.settings`.

Components may be enabled one by one (``DUPEFILTER_CLASS = ...`` without the add-on), so
they cannot rely on the add-on having copied the defaults into the crawler's settings.
A name missing from :mod:`scrapy_irl.settings` is a programming error and raises.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from scrapy_irl import settings as defaults

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings


def _default(name: str) -> Any:
    try:
        return getattr(defaults, name)
    except AttributeError:
        raise KeyError(f"{name} is not an scrapy-irl setting (see scrapy_irl/settings.py)") from None


def _bad(name: str, value: Any, expected: str) -> ValueError:
    return ValueError(f"invalid {name}={value!r}: expected {expected}")


def _check_range(name: str, value: float, minimum: float | None, above: float | None) -> None:
    if minimum is not None and not value >= minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    if above is not None and not value > above:
        raise ValueError(f"{name} must be > {above}, got {value!r}")


def get(settings: BaseSettings, name: str) -> Any:
    return settings.get(name, _default(name))


def getbool(settings: BaseSettings, name: str) -> bool:
    try:
        return settings.getbool(name, _default(name))
    except (ValueError, TypeError):
        raise _bad(name, settings.get(name), "True/False, 1/0 or 'true'/'false'") from None


def _number(read: Any, name: str, expected: str, minimum: float | None,
            above: float | None) -> Any:  # fmt: skip
    try:
        value = read(name, _default(name))
    except (ValueError, TypeError, OverflowError):
        raise _bad(name, read.__self__.get(name), expected) from None
    if isinstance(value, float) and math.isnan(value):  # NaN passes no bound check
        raise _bad(name, value, expected)
    _check_range(name, value, minimum, above)
    return value


def getint(
    settings: BaseSettings, name: str, *, minimum: int | None = None, above: int | None = None
) -> int:
    """``name`` as an int; a value that is not one, or out of range, is a ValueError naming it."""
    return int(_number(settings.getint, name, "an integer", minimum, above))


def getfloat(
    settings: BaseSettings, name: str, *, minimum: float | None = None, above: float | None = None
) -> float:
    """``name`` as a float; NaN, a non-number or a value out of range is a ValueError naming it."""
    return float(_number(settings.getfloat, name, "a number", minimum, above))


def getlist(settings: BaseSettings, name: str) -> list[str]:
    value = settings.get(name, _default(name))
    if value is None or isinstance(value, str | list | tuple):
        return settings.getlist(name, _default(name))
    raise _bad(name, value, "a list or a comma-separated string")


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
