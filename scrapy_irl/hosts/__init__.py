"""Per-host data that outlives a crawl: robots.txt records and DNS results in LevelDB.

IRLbot's RobotsCache (thesis chapter IV section 3) keeps robots.txt and DNS data on disk,
so that RAM does not grow with the number of hosts ever seen.
"""

from scrapy_irl.hosts.records import DnsRecord, RecordError, RobotsKind, RobotsRecord
from scrapy_irl.hosts.store import HostStore

__all__ = ["DnsRecord", "HostStore", "RecordError", "RobotsKind", "RobotsRecord"]
