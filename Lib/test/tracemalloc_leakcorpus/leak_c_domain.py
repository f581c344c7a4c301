"""A C-level leak reported through PyTraceMalloc_Track() in its own domain.

Extensions that manage memory outside of Python's allocators (numpy's
buffers, for one) report their blocks to tracemalloc in a domain of their
own.  _testcapi.tracemalloc_track() calls PyTraceMalloc_Track(): this
module "allocates" a 2 KiB block per call and never untracks it.
"""

import itertools
import tracemalloc

import _testcapi

DOMAIN = 4242
_BASE = 0x7E0000000000
_addresses = itertools.count(_BASE, 4096)
_tracked = []


def run():
    if not tracemalloc.is_tracing():
        return              # PyTraceMalloc_Track() fails: nothing to track
    address = next(_addresses)
    _testcapi.tracemalloc_track(DOMAIN, address, 2048)  # LEAK
    _tracked.append(address)


def reset():
    # Untracking fails once tracing stopped, which forgot the blocks.
    for address in _tracked:
        try:
            _testcapi.tracemalloc_untrack(DOMAIN, address)
        except RuntimeError:
            break
    _tracked.clear()
