"""A stats collector that also writes the final stats as JSON, for tests that read them.

``STATS_CLASS = "tests.stats_dump.JsonDumpStatsCollector"`` and ``STATS_DUMP_FILE = path``:
at close, after every ``spider_closed`` handler has written its keys, the collector writes
the stats whose values JSON can hold (others, like datetimes, as their ``str``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from scrapy.statscollectors import MemoryStatsCollector


class JsonDumpStatsCollector(MemoryStatsCollector):
    def _persist_stats(self, stats: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        super()._persist_stats(stats, *args, **kwargs)
        path = self._crawler.settings.get("STATS_DUMP_FILE")
        if path:
            Path(path).write_text(json.dumps(stats, default=str, sort_keys=True))
