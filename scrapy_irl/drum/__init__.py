"""DRUM, the Disk Repository with Update Management of IRLbot (thesis chapter IV).

Pure storage and algorithms: this package imports no Scrapy.
"""

from __future__ import annotations

from scrapy_irl.drum.records import CHECK, CHECK_UPDATE, UPDATE
from scrapy_irl.drum.store import NO_VALUE, Drum, DrumBatch, DrumStats
from scrapy_irl.exceptions import DrumCorruptionError, DrumError

__all__ = [
    "CHECK",
    "CHECK_UPDATE",
    "NO_VALUE",
    "UPDATE",
    "Drum",
    "DrumBatch",
    "DrumCorruptionError",
    "DrumError",
    "DrumStats",
]
