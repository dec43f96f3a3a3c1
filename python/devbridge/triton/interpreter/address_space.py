"""Which addresses of this process are mapped memory: the check that keeps a
wild address of an interpreted kernel from reaching Triton's interpreter's
C++, which would dereference it and kill the process (memory.py raises a
Python error instead, as a GPU raises an illegal-address fault).

The table is the process's mappings as Linux lists them in /proc/self/maps
(proc(5)): read once, kept as two sorted lists of disjoint intervals, the
readable ones ("r" in the permissions) and the writable ones ("r" and "w":
stores and atomics), adjacent mappings merged so that an access straddling
two of them counts as inside. An access is checked by element: each active
lane's [address, address + element size) must lie in one interval.

Speed (every load, store and atomic of every program goes through it): the
common case is one min and one max of the active lanes' addresses, compared
with the interval that held the previous access (or one bisect to find it);
only accesses whose lanes span several mappings take numpy's vectorised
searchsorted. An address outside the table re-reads /proc/self/maps before
it is called bad, since memory mapped after the last read (a new allocation)
is not in it yet.

Limits, by design: the check is at mapping granularity, as a GPU's fault is at
page granularity: an out-of-bounds access that lands in other mapped memory
(the heap past a small tensor) is not caught, on a GPU it is not either. Memory
unmapped or protected since the last read still counts as mapped until
refresh() (a kernel using memory freed back to the system crashes as before;
re-reading per launch would cost about a millisecond each). Not on Linux (no
/proc/self/maps), nothing is checked: unmapped() always answers None.
"""

from __future__ import annotations

import bisect
import sys
import threading

import numpy as np

_MAPS = "/proc/self/maps"
_ALL_ONES = np.uint64(2**64 - 1)


class _Intervals:
    """Disjoint, sorted [start, end) intervals: as lists (bisect) and as numpy arrays (searchsorted)."""

    __slots__ = ("starts", "ends", "start_array", "end_array", "last")

    def __init__(self, intervals):
        merged = []
        for start, end in intervals:  # sorted by start, as the kernel lists them
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        self.starts = [start for start, _ in merged]
        self.ends = [end for _, end in merged]
        self.start_array = np.array(self.starts, dtype=np.uint64)
        self.end_array = np.array(self.ends, dtype=np.uint64)
        self.last = (0, 0)  # the interval that held the previous access

    def holds(self, low: int, high: int) -> bool:
        """Whether [low, high) lies in one interval."""
        start, end = self.last
        if start <= low and high <= end:
            return True
        i = bisect.bisect_right(self.starts, low) - 1
        if i < 0 or high > self.ends[i]:
            return False
        self.last = (self.starts[i], self.ends[i])
        return True

    def outside(self, addresses: np.ndarray, size: int) -> np.ndarray:
        """For each address, whether [address, address + size) is not inside one interval."""
        if not self.starts:
            return np.ones(addresses.shape, dtype=bool)
        index = np.searchsorted(self.start_array, addresses, side="right").astype(np.int64) - 1
        # ends are page multiples, never below `size`: `end - size` cannot wrap, `address + size` could
        inside = (index >= 0) & (addresses <= self.end_array[np.maximum(index, 0)] - np.uint64(size))
        return ~inside


class _Table:
    __slots__ = ("readable", "writable")

    def __init__(self, text: str):
        readable, writable = [], []
        for line in text.splitlines():
            span, _, rest = line.partition(" ")
            start, _, end = span.partition("-")
            if not end or len(rest) < 2:
                continue
            interval = (int(start, 16), int(end, 16))
            if rest[0] == "r":
                readable.append(interval)
                if rest[1] == "w":
                    writable.append(interval)
        self.readable = _Intervals(readable)
        self.writable = _Intervals(writable)


_lock = threading.Lock()
_table: _Table | None = None
_enabled = sys.platform.startswith("linux")


def _read() -> _Table | None:
    """A fresh table, or None where this system has no /proc/self/maps (checks then stop)."""
    global _table, _enabled
    try:
        with open(_MAPS) as maps:
            text = maps.read()
    except OSError:
        _enabled = False
        return None
    table = _Table(text)
    _table = table  # one assignment: a reader sees the old table or the new one
    return table


def refresh() -> None:
    """Read the mappings again now: for code that unmapped or protected memory
    a kernel may still name (the table would otherwise count it mapped until
    its next miss)."""
    if _enabled:
        with _lock:
            _read()


def unmapped(addresses: np.ndarray, active: np.ndarray | None, size: int, write: bool):
    """None where every active lane's [address, address + size) is mapped
    memory (readable; writable too when `write`), else (how many active lanes
    are not, the first such address in lane order, whether that one is
    mapped read-only). `active` is a bool array of the addresses' shape, or
    None when every lane is active. Where no table can be read, None."""
    if not _enabled or addresses.size == 0:
        return None
    if addresses.dtype != np.uint64:  # the interpreter's pointers are uint64; anything else compares as one
        addresses = addresses.astype(np.uint64)
    table = _table
    if table is None:
        with _lock:
            table = _table or _read()
        if table is None:
            return None
    if active is None:
        low, high = int(addresses.min()), int(addresses.max())
    else:
        low = int(np.minimum.reduce(addresses, axis=None, where=active, initial=_ALL_ONES))
        high = int(np.maximum.reduce(addresses, axis=None, where=active, initial=0))
        if low > high:
            return None  # no active lane
    intervals = table.writable if write else table.readable
    if intervals.holds(low, high + size):
        return None
    lanes = addresses.ravel() if active is None else addresses[active]
    if not intervals.outside(lanes, size).any():
        return None  # the lanes span several mappings, each inside one
    with _lock:  # memory mapped since the last read: read again before calling an address bad
        table = _read()
    if table is None:
        return None
    outside = (table.writable if write else table.readable).outside(lanes, size)
    if not outside.any():
        return None
    first = lanes[np.argmax(outside)]
    read_only = write and not table.readable.outside(first.reshape(1), size)[0]
    return int(outside.sum()), int(first), bool(read_only)


__all__ = ["refresh", "unmapped"]
