"""Which files make a frontier directory whole, so a lost store is refused, not recreated.

Each store recreates itself empty when its directory is missing: right for a new crawl,
silent loss of the frontier (BEAST), of dedup (URLseen) or of the in-degrees (STAR) when
a directory was deleted or not copied along. After the first start creates all of them,
the scheduler writes ``FRONTIER``; from then on every store's index file must exist.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from scrapy_irl.drum.manifest import fsync_directory
from scrapy_irl.exceptions import FrontierCorruptionError, IrlError

MARKER = "FRONTIER"
#: 2 (2026-11-27): STAR's tuples carry their origin (tags ``a``, ``e``, ``u``), which
#: version 1 would read as admissions (a correction as an empty record). Version 2 reads
#: version 1 frontiers and marks them 2 at open, so an older scrapy-irl refuses them.
#: 3 (2026-11-28): the parked store (``parked/``, LevelDB) holds URLs BEAST has
#: forgotten; an older scrapy-irl would not read them. Version 3 reads version 1 and 2
#: frontiers (their parked URLs are in BEAST) and creates the store.
#: 4 (2026-11-29): ``pld_indegree`` holds new hosts' charges to P_x (tag ``h``,
#: IRL_BUDGET_COUNTS_NEW_HOSTS), which version 3 would read as admissions of empty
#: records. ``star/hosts_seen`` is not required: losing it costs each host one more
#: charge, not a URL. Version 4 reads versions 1 to 3.
FORMAT = 4
#: The index file of each store, relative to the frontier directory.
REQUIRED = ("beast/STATE", "urlseen/MANIFEST", "star/pld_edges/MANIFEST",
            "star/pld_indegree/MANIFEST", "parked/CURRENT")  # fmt: skip
#: Stores a frontier of an earlier layout version did not have yet.
ADDED_IN = {"parked/CURRENT": 3}


def _holds_data(path: Path) -> bool:
    """Whether a store directory holds entries (DRUM data files, BEAST queue frames)."""
    if not path.is_dir():
        return False
    return any(
        p.stat().st_size for p in path.rglob("*") if p.suffix in (".drum", ".beast") and p.is_file()
    )


def _marked_version(marker: Path) -> int | None:
    """The layout version ``marker`` names, None without a marker; raises on garbage."""
    try:
        version = json.loads(marker.read_text(encoding="utf-8"))["format"]
    except FileNotFoundError:
        return None
    # Only what this module writes: int() read true as 1, 1.9 as 1 and "3" as 3.
    if type(version) is not int or version < 1:
        raise ValueError(f"format {version!r} is not a layout version")
    return version


def _check_marker(marker: Path) -> None:
    """The marker must be one this version wrote or can read: a newer layout (other
    stores, other meanings) is refused, like a newer STATE or DRUM manifest."""
    try:
        version = _marked_version(marker)
    except (OSError, ValueError, KeyError, TypeError, OverflowError) as exc:
        raise FrontierCorruptionError(
            f"{marker}: unreadable ({exc!r}); it should name this frontier's layout. "
            "Restore it, or delete the whole directory to start afresh."
        ) from None
    if version is not None and version > FORMAT:
        raise FrontierCorruptionError(
            f"{marker}: frontier layout version {version}, written by a newer scrapy-irl; "
            f"this one reads version {FORMAT}. Upgrade scrapy-irl or use a new JOBDIR."
        )


def check_frontier(path: Path) -> None:
    """Raise :class:`FrontierCorruptionError` if the frontier's layout is newer than this
    version's, or a store of a created frontier is missing."""
    version = None
    if (path / MARKER).exists():
        _check_marker(path / MARKER)
        version = _marked_version(path / MARKER)
    # a store added later is required once the marker says this frontier has it
    required = [name for name in REQUIRED if name not in ADDED_IN
                or (version is not None and ADDED_IN[name] <= version)]  # fmt: skip
    present = [name for name in required if (path / name).exists()]
    missing = [name for name in required if name not in present]
    if not missing:
        return
    if (path / MARKER).exists():
        raise FrontierCorruptionError(
            f"{path}: {', '.join(missing)} missing, but {MARKER} says every store of this "
            "frontier was created; recreating it empty would silently lose queued URLs, "
            "dedup or budgets. Restore it, or delete the whole directory to start afresh."
        )
    # No marker: a new frontier, a first start killed while creating the stores (they are
    # empty then), or a directory of an earlier version or of the DRUM dupefilter alone.
    stores = {name.split("/")[0] for name in present}
    if any(_holds_data(path / store) for store in stores):
        raise FrontierCorruptionError(
            f"{path}: holds data of {', '.join(sorted(stores))} but has no "
            f"{', '.join(missing)}. If this JOBDIR was crawled with the DRUM dupefilter and "
            "Scrapy's scheduler, the IRL scheduler cannot resume it (it has no queued "
            "requests to resume): use a new JOBDIR. Otherwise a store was deleted: restore "
            "it, or delete the whole directory to start afresh."
        )


def check_no_stock_queue(jobdir: str | None) -> None:
    """Refuse a JOBDIR whose Scrapy scheduler queue still holds requests.

    The IRL scheduler cannot read ``requests.queue``; starting would leave those requests
    there unfetched, without a word.
    """
    if not jobdir:
        return
    active = Path(jobdir, "requests.queue", "active.json")
    if not active.exists():
        return
    try:
        pending = json.loads(active.read_text(encoding="utf-8")) not in ([], {})
    except (ValueError, OSError):
        pending = True
    if pending:
        raise IrlError(
            f"{active.parent}: Scrapy's scheduler left requests queued in this JOBDIR, and "
            "the IRL scheduler cannot read its queue. Finish that crawl with Scrapy's "
            "scheduler, use a new JOBDIR, or delete requests.queue to drop those requests."
        )


def mark_frontier(path: Path, *, fsync: bool) -> None:
    """Record that every store exists, in this version's layout (idempotent; atomic
    rename, as the stores' indexes). An earlier layout's marker is raised to this one:
    from now on the stores may hold what only this version reads."""
    marker = path / MARKER
    if _marked_version(marker) == FORMAT:  # check_frontier refused newer or garbage
        return
    tmp = marker.with_suffix(".tmp")
    with open(tmp, "w") as handle:
        json.dump({"format": FORMAT, "created": time.time(), "stores": list(REQUIRED)}, handle)
        if fsync:
            handle.flush()
            os.fsync(handle.fileno())
    os.replace(tmp, marker)
    if fsync:
        fsync_directory(path)
