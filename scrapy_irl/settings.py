"""Every ``IRL_*`` default of scrapy-irl, grouped by component, one comment each; no logic.

Components read these in ``from_crawler`` (``crawler.settings.get*``); the add-on
(:class:`scrapy_irl.Addon`) only switches components on. Each value is documented in
``docs/settings.rst`` with its type, default and the IRLbot thesis symbol it stands for.
"""

# --- DRUM (shared by every DRUM-backed structure) -----------------------------------------
# Seconds between write-outs of DRUM's RAM bucket buffers to the bucket files: the longest
# window of accepted tuples a kill -9 can lose.
IRL_DRUM_FLUSH_INTERVAL = 1.0
# fsync merged files and the manifest before a merge commits (protects against power loss,
# not only process kills).
IRL_DRUM_FSYNC = True
# Verify the CRC32 of the whole sorted disk cache Z when a DRUM store is opened.
IRL_DRUM_VERIFY_ON_OPEN = True

# --- URLseen (the DRUM dupefilter) --------------------------------------------------------
# Directory of the URLseen store; empty means JOBDIR/irl/urlseen, or a temporary
# directory removed at close when there is no JOBDIR.
IRL_URLSEEN_DIR = ""
# k: number of disk buckets Q_i^H / Q_i^T (a power of two; keys split by bit prefix).
IRL_URLSEEN_BUCKETS = 16
# M: bytes of RAM buffer per bucket before it is written to its bucket file.
IRL_URLSEEN_BUFFER_BYTES = 64 * 1024
# r: bytes a bucket file may reach before all buckets are merged with Z in one pass.
IRL_URLSEEN_BUCKET_BYTES = 128 * 1024
# Delta: bytes of Z read per chunk during a merge.
IRL_URLSEEN_MERGE_CHUNK_BYTES = 4 * 1024 * 1024
# Fingerprint requests with scrapy_irl.fingerprint's byte-identical shortcut of Scrapy's
# default fingerprint (used only when the crawler's fingerprinter is the stock one, checked
# at start-up, and not with HTTPCACHE_ENABLED); False calls the fingerprinter as is.
IRL_FAST_FINGERPRINT = True

# --- Host store (LevelDB: robots.txt and DNS records, kept across runs) --------------------
# Directory of the host store; empty means JOBDIR/irl/hosts, or the project's
# .scrapy/irl/hosts when there is no JOBDIR (shared by later runs and other spiders).
IRL_HOSTS_DIR = ""
# fsync every put (survives power loss); without it a kill -9 still loses nothing.
IRL_HOSTS_FSYNC = False
# Bytes of LevelDB block cache for the host store.
IRL_HOSTS_CACHE_BYTES = 8 * 1024 * 1024

# --- robots.txt (RobotsCacheMiddleware, RFC 9309) -----------------------------------------
# Seconds a fetched robots.txt (or a 4xx "allow all") stays valid before it is refetched.
IRL_ROBOTS_TTL = 24 * 3600.0
# Bytes of a robots.txt body that are parsed and stored; the rest is ignored.
IRL_ROBOTS_MAX_BYTES = 500 * 1024
# Largest robots.txt body once decompressed (Content-Encoding): a gzip bomb is refused
# (unavailable) here instead of inflating in RAM up to DOWNLOAD_MAXSIZE.
IRL_ROBOTS_MAX_DECODED_BYTES = 8 * 1024 * 1024
# Redirects followed when fetching robots.txt; past them the file counts as unavailable.
IRL_ROBOTS_MAX_REDIRECTS = 5
# Seconds before the first retry of an unreachable robots.txt (5xx, timeout, network).
IRL_ROBOTS_RETRY_DELAY = 60.0
# Longest back-off between retries (the delay doubles per consecutive failure).
IRL_ROBOTS_RETRY_MAX_DELAY = 6 * 3600.0
# A copy fetched at most this many seconds ago stays in force while robots.txt is unreachable.
IRL_ROBOTS_STALE_TTL = 7 * 24 * 3600.0
# robots.txt re-fetches (after the back-off) during which the IRL scheduler keeps the URLs
# of an origin whose robots.txt is unreachable; after that they are dropped.
IRL_ROBOTS_UNREACHABLE_RETRIES = 2
# Parse only the group of robots.txt that applies to our user agent (Protego parser only):
# a file naming many agents otherwise costs a copy of its rules per agent.
IRL_ROBOTS_REDUCE = True
# Parsed robots.txt rule sets kept in RAM (LRU); the rest is re-read from the host store.
IRL_ROBOTS_MEMORY_ENTRIES = 10_000
# Estimated RAM of those rule sets: 512 B per origin, plus 2 KiB + 16 B per robots.txt byte
# for each distinct body (origins serving identical robots.txt share one parse).
IRL_ROBOTS_MEMORY_BYTES = 64 * 2**20
# CrawlDelayMiddleware: raise a host's download-slot delay to its Crawl-delay/Request-rate.
IRL_CRAWL_DELAY_ENABLED = True
# Upper bound in seconds on an honoured Crawl-delay.
IRL_CRAWL_DELAY_MAX = 60.0
# An origin asking for more: "skip" refuses its URLs (counted, errback), "cap" fetches them
# IRL_CRAWL_DELAY_MAX apart (faster than asked, counted).
IRL_CRAWL_DELAY_OVER_MAX = "skip"

# --- DNS (HostResolver: one lookup per host per TTL, results in the host store) -----------
# Seconds a successful lookup is reused.
IRL_DNS_TTL = 3600.0
# Seconds a name that failed IRL_DNS_RETRIES + 1 lookups in a row counts as dead.
IRL_DNS_NEGATIVE_TTL = 300.0
# Lookups retried after a failure (NXDOMAIN, timeout) before the name counts as dead.
IRL_DNS_RETRIES = 2
# Seconds before the first retry of a failed lookup; doubles with each further failure.
IRL_DNS_RETRY_DELAY = 10.0
# Lookups in flight at once.
IRL_DNS_CONCURRENCY = 32
# Seconds before a lookup is abandoned as failed.
IRL_DNS_TIMEOUT = 10.0
# DNS records kept in RAM (LRU) in front of the host store.
IRL_DNS_MEMORY_ENTRIES = 10_000
# True: every http(s) request goes through a proxy, also one a downloader middleware sets
# after the scheduler has seen the request: no name is looked up here, hosts are timed by name.
IRL_ALWAYS_PROXIED = False

# --- HTTP connections (scrapy_irl.hosts.download.PoliteHTTP11DownloadHandler) -------------
# Seconds an idle keep-alive connection stays pooled for reuse; then it is closed.
IRL_KEEPALIVE_MAX_IDLE = 4.0

# --- IRL scheduler (scrapy_irl.scheduler.IrlScheduler) -------------------------------------
# Directory of the frontier (URLseen, STAR, BEAST); empty means JOBDIR/irl, or a temporary
# directory removed at close when there is no JOBDIR.
IRL_FRONTIER_DIR = ""
# tau_h: seconds between request starts to one host, for PLDs with the base budget B_0.
IRL_HOST_DELAY = 10.0
# tau_h^0: the smallest tau_h, reached by high-budget PLDs (a host's Crawl-delay can raise it).
IRL_HOST_DELAY_MIN = 2.0
# tau_s: seconds between request starts to one IP, for servers of base-budget PLDs.
IRL_IP_DELAY = 1.0
# tau_s^0: the smallest tau_s, for servers whose PLDs have large budgets.
IRL_IP_DELAY_MIN = 0.25
# Seconds added to tau_h and tau_s: the scheduler records a start when the request reaches
# Scrapy's downloader, a few milliseconds before its bytes reach the server.
IRL_POLITENESS_MARGIN = 0.1
# Requests in flight at once to one IP address (1: the next request to a server is timed
# from the measured start of the previous one, so tau_s holds even when the reactor lags).
IRL_IP_MAX_IN_FLIGHT = 1
# robots.txt fetches and their redirect hops count as requests to their host: the host's
# next request waits tau_h after them (False: as IRLbot, only the IP heap limits them, and
# a new host's first page follows its robots.txt after tau_s).
IRL_ROBOTS_HOST_DELAY = True
# Statuses after which a host waits longer than tau_h (server back-off): its Retry-After
# header, else tau_h x 2^(k-1) for its k-th such answer in a row. [] turns it off.
IRL_BACKOFF_HTTP_CODES = [429, 503]
# Upper bound in seconds on that wait (a larger Retry-After is capped and counted).
IRL_BACKOFF_MAX = 120.0
# The doubling (no Retry-After) stops at this multiple of tau_h.
IRL_BACKOFF_MAX_FACTOR = 16.0
# A page download that ends without any answer (timeout, refused or dropped connection)
# makes its host wait too: tau_h x 2^k for its k-th unanswered or refused request in a row.
IRL_BACKOFF_ON_DOWNLOAD_ERROR = True
# Which due host a shared server serves next: "budget" (shares in proportion to the hosts'
# budgets, weighted fair queueing) or "fifo" (round-robin: equal shares).
IRL_IP_SHARE = "budget"
# F(d_x): "log", "linear", "constant", or the dotted path of a function d -> budget.
IRL_BUDGET_FUNCTION = "log"
# B_0: budget of a PLD nobody links to (pages per BEAST queue period).
IRL_BUDGET_BASE = 10
# Pages added per linking PLD ("linear") or per doubling of in-degree ("log").
IRL_BUDGET_PER_DEGREE = 10
# Largest budget any PLD gets.
IRL_BUDGET_MAX = 10_000
# P_x also counts each new host name of the PLD (one more admission: the host's robots.txt
# fetch and DNS lookup). False: the thesis' rule, P_x counts URLs only.
IRL_BUDGET_COUNTS_NEW_HOSTS = True
# PLD in-degrees kept in RAM (LRU) for tau_h scaling; a new host of a PLD not in it gets B_0
# until the PLD is seen again (hosts in the heaps and Q_F re-reads keep their budget).
IRL_STAR_CACHE_ENTRIES = 100_000
# j at the start: BEAST queues Q_1..Q_j (doubles at each re-read of Q_F).
IRL_BEAST_QUEUES = 2
# Largest j.
IRL_BEAST_MAX_QUEUES = 64
# Requests held in RAM in host queues and DNS/robots waits (lazy loading bound).
IRL_FRONTIER_RAM_REQUESTS = 5_000
# Seconds of work (items x tau_h per host, items x tau_s per IP) RAM may hold for one host
# or IP; further URLs of it are parked on disk and re-read this often (0: never park).
IRL_RAM_BACKLOG_SECONDS = 60.0
# r of the scheduler's URLseen: bucket bytes that trigger a merge (larger batches, fewer passes).
IRL_FRONTIER_URLSEEN_BUCKET_BYTES = 1024 * 1024
# Tuples of a scheduler's URLseen merge handed to STAR per reactor turn (a large merge
# is delivered over several turns instead of holding the reactor for seconds).
IRL_URLSEEN_DELIVERY_SLICE = 5_000
# Seconds after which a handed-out request that never reached the downloader frees its host.
IRL_HANDOUT_TIMEOUT = 60.0
# Least seconds between merges forced because the downloader would idle.
IRL_IDLE_MERGE_INTERVAL = 1.0
# Longest seconds URLs may wait in a partial URLseen batch while the crawl is busy with
# older work (0: only size and idle merges).
IRL_URLSEEN_MAX_BATCH_AGE = 30.0
# Seconds between samples of "downloader has a free slot while a request is due" (0: off).
IRL_IDLE_SAMPLE_INTERVAL = 0.1
# Crawler-trap paths refused before URLseen: more non-empty path segments than this (0: no
# limit). dont_filter requests are exempt from both trap rules.
IRL_TRAP_MAX_PATH_SEGMENTS = 20
# ... or one segment or group of segments repeated more than this many times in a row
# (/a/b/a/b/a/b/: a relative link looping; 0: no limit, 1 is refused as it would catch dates).
IRL_TRAP_MAX_SEGMENT_REPEATS = 2
# Query parameters (case-insensitive) removed from URLs before dedup and fetch: session ids
# turn one page into endless URL variants. "jsessionid" also strips ";jsessionid=" path
# parameters. An empty list keeps URLs as they are.
IRL_SESSION_PARAMS = ["sid", "sessionid", "session_id", "phpsessid", "jsessionid", "aspsessionid", "cfid", "cftoken",
                      "oscsid", "zenid"]
# PLDs listed in the close-time table (largest in-degree first).
IRL_REPORT_TOP_PLDS = 20

# --- WARC page repository (scrapy_irl.warc.extension.WarcExtension) ----------------------
# Write every received response (and its request) to WARC files, once the extension is in
# EXTENSIONS (listing it is enough); False turns it off where a base settings module lists it.
IRL_WARC_ENABLED = True
# Directory of the WARC files; empty means JOBDIR/warc, or "warc" in the current directory.
IRL_WARC_DIR = ""
# First part of every WARC file name: {prefix}-{UTC timestamp}-{serial:05d}.warc.gz.
IRL_WARC_PREFIX = "scrapy-irl"
# Bytes on disk at which a WARC file is finished (renamed) and the next one starts.
IRL_WARC_MAX_BYTES = 1_000_000_000
# Compress each record as its own gzip member (.warc.gz); False writes plain .warc.
IRL_WARC_GZIP = True

# --- Progress (scrapy_irl.progress.IrlProgress) --------------------------------------------
# Log a progress line with the frontier sizes (enabled by the add-on).
IRL_PROGRESS_ENABLED = True
# Seconds between progress lines.
IRL_PROGRESS_INTERVAL = 10.0
# Also redraw a one-line progress bar every second when stderr is a terminal.
IRL_PROGRESS_BAR = True

# --- Crawl report (scrapy_irl.report.sampler.StatsSampler, scrapy irl-report) -------------
# Sample crawl stats for the report, once the extension is in EXTENSIONS (listing it is
# enough; the add-on lists it for a crawl with a JOBDIR); False turns it off.
IRL_REPORT_ENABLED = True
# Seconds between two samples.
IRL_REPORT_INTERVAL = 5.0
# Report data directory; empty means JOBDIR/irl, or ./irl-report-data without a JOBDIR.
IRL_REPORT_DIR = ""
# Build the report (PNGs, index.html in <data dir>/report) at close and log its summary.
IRL_REPORT_AT_CLOSE = False

# --- simweb (the simulated web; read by its DNS resolver and the broad spider) ------------
# JSON file describing the web (written by ``python -m scrapy_irl.simweb --config-out``);
# when set it wins over the size/seed/plds/port settings below.
IRL_SIMWEB_CONFIG = ""
# Named size of the web: "tiny", "small", "default" or "big".
IRL_SIMWEB_SIZE = "default"
# Seed of the web: the same seed always gives the same web.
IRL_SIMWEB_SEED = 1
# Number of legitimate pay-level domains; 0 keeps the named size's number.
IRL_SIMWEB_PLDS = 0
# TCP port every simweb address listens on; 0 keeps the web's default (8080).
IRL_SIMWEB_PORT = 0
# Hosts file (the /etc/hosts format) whose loopback entries the simweb resolver answers
# besides simweb's names and localhost: a test web of one's own, without root.
IRL_SIMWEB_HOSTS_FILE = "/etc/hosts"
