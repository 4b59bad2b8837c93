"""Memory: the contiguous KV arena (first fit over a sorted free-extent list).

The paged allocator needs no code of its own: it is a block counter in the loop.
The contiguous allocator keeps free extents ``fl[0, i]`` (start block) and
``fl[1, i]`` (length in blocks), sorted by start and coalesced, ``nf`` of them.
Fragmentation (docs/model.md, section 3.5): with ``need`` the blocks of the next
waiting request, ``k = floor(free / need)`` copies would fit in the free memory
if it were one extent and ``j = sum(floor(len_i / need))`` fit in the extents as
they are; fragmentation = 1 - j / k (0 when k = 0).  It is 0 for one request size
when every extent is a multiple of it, and always in [0, 1].
"""
from __future__ import annotations

from numba import njit


@njit(cache=True, nogil=True, _nrt=False)
def ext_alloc(fl, nf, need):
    """First fit. Returns (start, new nf); start = -1 when no extent is large enough."""
    for i in range(nf):
        if fl[1, i] >= need:
            s = fl[0, i]
            fl[0, i] += need
            fl[1, i] -= need
            if fl[1, i] == 0:
                for j in range(i, nf - 1):
                    fl[0, j] = fl[0, j + 1]
                    fl[1, j] = fl[1, j + 1]
                nf -= 1
            return s, nf
    return -1, nf


@njit(cache=True, nogil=True, _nrt=False)
def ext_free(fl, nf, start, length):
    """Return [start, start + length) to the free list, coalescing neighbours. Returns new nf."""
    if length <= 0:
        return nf
    # position: first extent starting after `start`
    lo, hi = 0, nf
    while lo < hi:
        mid = (lo + hi) >> 1
        if fl[0, mid] < start:
            lo = mid + 1
        else:
            hi = mid
    i = lo
    merge_prev = i > 0 and fl[0, i - 1] + fl[1, i - 1] == start
    merge_next = i < nf and start + length == fl[0, i]
    if merge_prev and merge_next:
        fl[1, i - 1] += length + fl[1, i]
        for j in range(i, nf - 1):
            fl[0, j] = fl[0, j + 1]
            fl[1, j] = fl[1, j + 1]
        return nf - 1
    if merge_prev:
        fl[1, i - 1] += length
        return nf
    if merge_next:
        fl[0, i] = start
        fl[1, i] += length
        return nf
    for j in range(nf, i, -1):
        fl[0, j] = fl[0, j - 1]
        fl[1, j] = fl[1, j - 1]
    fl[0, i] = start
    fl[1, i] = length
    return nf + 1


@njit(cache=True, nogil=True, _nrt=False)
def ext_free_total(fl, nf):
    s = 0
    for i in range(nf):
        s += fl[1, i]
    return s


@njit(cache=True, nogil=True, _nrt=False)
def fragmentation(fl, nf, need):
    """Share of the request-sized slots free memory could hold that its extents cannot."""
    if need <= 0:
        return 0.0
    total = 0
    fit = 0
    for i in range(nf):
        total += fl[1, i]
        fit += fl[1, i] // need
    k = total // need
    if k == 0:
        return 0.0
    return 1.0 - fit / k
