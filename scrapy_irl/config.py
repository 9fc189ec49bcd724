"""Typed getters for ``IRL_*`` settings that fall back to :mod:`scrapy_irl.settings`.

Components may be enabled one by one (``DUPEFILTER_CLASS = ...`` without the add-on), so
they cannot rely on the add-on having copied the defaults into the crawler's settings.
A name missing from :mod:`scrapy_irl.settings` is a programming error and raises.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy_irl import settings as defaults

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings


def _default(name: str) -> Any:
    try:
        return getattr(defaults, name)
    except AttributeError:
        raise KeyError(f"{name} is not an scrapy-irl setting (see scrapy_irl/settings.py)") from None


def get(settings: BaseSettings, name: str) -> Any:
    return settings.get(name, _default(name))


def getbool(settings: BaseSettings, name: str) -> bool:
    return settings.getbool(name, _default(name))


def getint(settings: BaseSettings, name: str) -> int:
    return settings.getint(name, _default(name))


def getfloat(settings: BaseSettings, name: str) -> float:
    return settings.getfloat(name, _default(name))


def getlist(settings: BaseSettings, name: str) -> list[str]:
    return settings.getlist(name, _default(name))
