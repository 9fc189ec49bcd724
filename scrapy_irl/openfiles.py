"""Room for the descriptors a component keeps open: raise the soft limit, or say why not.

A DRUM store keeps two files open per bucket for a whole epoch (up to 8 192 at its 4 096
buckets) and simweb one listening socket per address: both ran into the usual soft
limit of 1 024 with a raw "Too many open files" in the middle of their work. They ask
for room here first, and refuse at the start with the numbers when there is none.
DRUM opens its bucket files lazily, at its first write-out, so stores opened one after
the other each saw room for itself alone: each *reserves* its files here until it
closes, and the next one's room counts them.
"""

from __future__ import annotations

import logging
import os
import resource

logger = logging.getLogger(__name__)


def open_descriptors() -> int:
    """Descriptors this process has open now (0 where the system does not list them)."""
    for listing in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(listing))
        except OSError:
            continue
    return 0


def make_room(needed: int, what: str) -> str | None:
    """Raise this process's open-file limit to ``needed`` if it is lower (up to the hard
    limit). None when ``needed`` fit (or now fit); else why not, as the end of an error
    message. ``what`` names the component in the log line of a raise."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return None
    if hard != resource.RLIM_INFINITY and hard < needed:
        return f"this process may open at most {hard} (ulimit -Hn)"
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    except (ValueError, OSError) as exc:  # macOS: above kern.maxfilesperproc
        return f"its limit of {soft} could not be raised ({exc})"
    logger.info("%s raised its open-file limit from %d to %d", what, soft, needed)
    return None


#: Descriptors reserved by open components that open them lazily (:func:`reserve`).
_reserved = 0


def reserve(count: int, spare: int, what: str) -> str | None:
    """Make room for ``count`` more descriptors beside those open now, those reserved by
    others and not opened yet, and ``spare``; on success they stay reserved until
    :func:`release`. None when there is room, else why not (as :func:`make_room`). A
    reserved descriptor the component opens leaves the reservation while it is open
    (:func:`opened`, :func:`closed`): it is then among those open now."""
    global _reserved
    why_not = make_room(open_descriptors() + _reserved + count + spare, what)
    if why_not is None:
        _reserved += count
    return why_not


def release(count: int) -> None:
    """Give back descriptors reserved with :func:`reserve` (closed ones included)."""
    global _reserved
    _reserved -= count


def opened(count: int = 1) -> None:
    """``count`` reserved descriptors were opened: counted among the open ones now."""
    global _reserved
    _reserved -= count


def closed(count: int = 1) -> None:
    """``count`` of them were closed again: reserved again (they may be reopened)."""
    global _reserved
    _reserved += count
