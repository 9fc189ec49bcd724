"""The IRL scheduler: URLseen -> STAR -> BEAST -> robots.txt/DNS -> host and IP heaps."""

from scrapy_irl.scheduler.scheduler import IrlScheduler

__all__ = ["IrlScheduler"]
