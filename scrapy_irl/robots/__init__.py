"""robots.txt for broad crawls: a persistent cache (LevelDB), one fetch per origin, RFC 9309.

:class:`~scrapy_irl.robots.middleware.RobotsCacheMiddleware` replaces Scrapy's
``RobotsTxtMiddleware``; :class:`~scrapy_irl.robots.crawl_delay.CrawlDelayMiddleware`
honours Crawl-delay and Request-rate when Scrapy's own scheduler is used.
"""

from scrapy_irl.robots.cache import CachedRobots, RobotsCache
from scrapy_irl.robots.policy import RobotsPolicy

__all__ = ["CachedRobots", "RobotsCache", "RobotsPolicy"]
