"""simweb: a deterministic simulated web on loopback for tests, demos and benchmarks.

See ``docs/simweb.rst``. Modules: :mod:`.config` (parameters), :mod:`.model` (structure and
ground truth), :mod:`.pages` (rendering), :mod:`.server`, :mod:`.log`, :mod:`.resolver`
(Scrapy DNS), :mod:`.report` (the judge), :mod:`.runner` (server in a thread), :mod:`.testing` (pytest
fixture).
"""

from __future__ import annotations

from scrapy_irl.simweb.config import SIZES, WebConfig
from scrapy_irl.simweb.model import Web, web_for

__all__ = ["SIZES", "Web", "WebConfig", "web_for"]
