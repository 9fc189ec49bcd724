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
