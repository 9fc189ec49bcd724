"""A Scrapy project that runs broad crawls with scrapy-irl.

scrapy-irl is switched on by the ADDONS line; everything else here is ordinary Scrapy
broad-crawl tuning. ``scrapy crawl broad`` with no arguments crawls the bundled simulated
web (simweb) on loopback; ``scrapy crawl broad -a seeds=FILE`` crawls from your own list
(then remove TWISTED_DNS_RESOLVER below, which only knows simweb's names).
"""

BOT_NAME = "example"
SPIDER_MODULES = ["example.spiders"]
NEWSPIDER_MODULE = "example.spiders"

ADDONS = {"scrapy_irl.Addon": 0}

# The one setting a simweb crawl needs: simweb's names resolve to its 127.x addresses and
# nothing else resolves, so the demo can never leave this machine. It is a reactor setting:
# it must be here or on the command line (-s), not in a spider.
TWISTED_DNS_RESOLVER = "scrapy_irl.simweb.resolver.SimwebResolver"
IRL_SIMWEB_SIZE = "default"
IRL_SIMWEB_SEED = 1

ROBOTSTXT_OBEY = True
USER_AGENT = "scrapy-irl-example (+https://example.invalid/bot)"

# Broad-crawl tuning from Scrapy's "Broad Crawls" guide.
CONCURRENT_REQUESTS = 64
CONCURRENT_REQUESTS_PER_DOMAIN = 2
DOWNLOAD_DELAY = 0.5
REACTOR_THREADPOOL_MAXSIZE = 20
COOKIES_ENABLED = False
RETRY_ENABLED = False
DOWNLOAD_TIMEOUT = 15
DOWNLOAD_MAXSIZE = 2 * 1024 * 1024
REDIRECT_MAX_TIMES = 5
DEPTH_PRIORITY = 1
SCHEDULER_DISK_QUEUE = "scrapy.squeues.PickleFifoDiskQueue"
SCHEDULER_MEMORY_QUEUE = "scrapy.squeues.FifoMemoryQueue"
LOG_LEVEL = "INFO"

# The demo stops by itself; raise or remove these for a real crawl.
CLOSESPIDER_TIMEOUT = 150
CLOSESPIDER_PAGECOUNT = 20000

TELNETCONSOLE_ENABLED = False
REMOTE_CONTROL_ENABLED = False

# scrapy-irl knobs (defaults shown; see docs/settings.rst):
# IRL_URLSEEN_BUCKETS = 16              # k, DRUM disk buckets of the URLseen dupefilter
# IRL_URLSEEN_BUCKET_BYTES = 131072     # r, bucket size that triggers a merge with Z
# IRL_DRUM_FLUSH_INTERVAL = 1.0         # seconds of accepted URLs a kill -9 may lose
