"""Give freed heap memory back to the OS after a merge (glibc only; a no-op elsewhere).

A merge allocates and frees arrays of a few MB. glibc then raises its mmap and trim
thresholds to that size, so the freed space stays in the process's heap and shows up as RSS
that never goes down, although nothing uses it. ``malloc_trim(0)`` after each merge returns
it, which keeps DRUM's RSS what its parameters say it is.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable


def _find_malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        return ctypes.CDLL(name).malloc_trim  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None


_MALLOC_TRIM = _find_malloc_trim()


def release_free_heap() -> None:
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)
