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

# The page repository: every response and its request, in rotating WARC files
# (JOBDIR/warc, or ./warc without a JOBDIR). Listing an extension switches it on.
EXTENSIONS = {
    "scrapy_irl.warc.extension.WarcExtension": 0,
    # data for `scrapy irl-report` (the add-on lists it itself only with a JOBDIR)
    "scrapy_irl.report.sampler.StatsSampler": 0,
}
IRL_REPORT_AT_CLOSE = True  # plots + index.html in irl-report-data/report (JOBDIR/irl/report)

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
# Politeness is the IRL scheduler's job (host heap tau_h, IP heap tau_s); the downloader
# adds no delay (the add-on sets DOWNLOAD_DELAY = 0 and turns AutoThrottle off).
# IRLbot's defaults are tau_h = 40 s and tau_s = 1 s; simweb's judge checks these values:
IRL_HOST_DELAY = 10.0  # tau_h for PLDs with the base budget
IRL_HOST_DELAY_MIN = 2.0  # tau_h^0, for the best-linked PLDs
IRL_IP_DELAY = 1.0  # tau_s
IRL_IP_DELAY_MIN = 0.5  # tau_s^0
# IRL_BUDGET_FUNCTION = "log"  # F(d_x): "log", "linear", "constant" or "pkg.func"
# IRL_BUDGET_BASE = 10  # B_0
REACTOR_THREADPOOL_MAXSIZE = 20
COOKIES_ENABLED = False
RETRY_ENABLED = False
DOWNLOAD_TIMEOUT = 15
DOWNLOAD_MAXSIZE = 2 * 1024 * 1024
REDIRECT_MAX_TIMES = 5
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
