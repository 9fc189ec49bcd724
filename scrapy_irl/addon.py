"""The scrapy-irl add-on: ``ADDONS = {"scrapy_irl.Addon": 0}`` switches the components on.

Values are written at the ``"addon"`` priority, so a project's own settings still win;
components read their ``IRL_*`` settings themselves in ``from_crawler``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings


class Addon:
    """Turns on every scrapy-irl component built so far."""

    def update_settings(self, settings: BaseSettings) -> None:
        settings.set(
            "DUPEFILTER_CLASS", "scrapy_irl.dupefilter.DrumDupeFilter", priority="addon"
        )
