"""Memory budgets: the peak of traced memory of one call, against a limit.

Shared by the pytest plugin (@pytest.mark.tracemalloc_limit,
--tracemalloc-limit), tracemalloc.testing.memory_limit() and
``python -m tracemalloc run --fail-over-peak``.

The measured peak is the *increase* of traced memory over the start of the
call: reset_peak() and the current size when the call starts, the peak of
get_traced_memory() when it ends, minus that start.  What was live before
the call (the harness, the fixtures) does not count; a temporary buffer
freed before the call returns does.
"""

import os
import re

import tracemalloc
from tracemalloc import _leakcore

# Sites of the peak snapshot that a failure message shows.
TOP_SITES = 5
# Frames of each site's traceback that it shows (the most recent first).
SITE_FRAMES = 3

SIZE_SUFFIXES = {'': 1, 'b': 1, 'k': 1024, 'kb': 1000, 'kib': 1024,
             'm': 1024 ** 2, 'mb': 1000 ** 2, 'mib': 1024 ** 2,
             'g': 1024 ** 3, 'gb': 1000 ** 3, 'gib': 1024 ** 3}
SIZE_PATTERN = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)\s*$")


def parse_size(value):
    """A limit in bytes: an int >= 0, or a text such as "24 MB", "512KiB",
    "1.5G".  Raise ValueError with a message for anything else."""
    if isinstance(value, bool):
        raise ValueError(f"a memory limit must be a size such as 1000, "
                         f"512KiB or '24 MB', not {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"a memory limit must not be negative, "
                             f"not {value!r}")
        return value
    if not isinstance(value, str):
        raise ValueError(f"a memory limit must be a size such as 1000, "
                         f"512KiB or '24 MB', not {value!r}")
    match = SIZE_PATTERN.match(value.lower())
    if match is None or match[2] not in SIZE_SUFFIXES:
        raise ValueError(f"a memory limit must be a size such as 1000, "
                         f"512KiB or '24 MB' (suffixes: K, KB, KiB, M, "
                         f"MB, MiB, G, GB, GiB), not {value!r}")
    size = float(match[1]) * SIZE_SUFFIXES[match[2]]
    if not size < float('inf'):
        raise ValueError(f"a memory limit must be a finite size, "
                         f"not {value!r}")
    return int(size)


def format_bytes(size):
    return f"{_leakcore.format_size(size)} ({size:,} B)"


class Measure:
    """Measure the peak of traced memory over a block::

        with Measure(limit) as measure:
            call()
        if measure.over:
            print(measure.format("the call"))

    Tracing starts if it is off (and stays on).  When the peak is over
    *limit*, a peak snapshot is taken at the end of the block, before
    anything else is freed: its top sites go into the message.
    """

    def __init__(self, limit, nframe=None):
        self.limit = limit
        self.nframe = nframe or _leakcore.DEFAULT_NFRAME
        self.peak = None
        self.sample = None
        self.snapshot = None

    def __enter__(self):
        if not tracemalloc.is_tracing():
            tracemalloc.start(self.nframe)
        self.sample = tracemalloc.get_sample()
        tracemalloc.reset_peak()
        self._start = tracemalloc.get_traced_memory()[0]
        return self

    def __exit__(self, *exc_info):
        if not tracemalloc.is_tracing():
            # The block stopped tracing: no measure.
            return False
        peak = tracemalloc.get_traced_memory()[1]
        self.peak = max(peak - self._start, 0)
        if self.over:
            self.snapshot = tracemalloc.take_snapshot(peak=True)
        return False

    @property
    def over(self):
        return (self.peak is not None and self.limit is not None
                and self.peak > self.limit)

    @property
    def estimated(self):
        return self.sample is not None

    def headline(self, what):
        verb = "is estimated at" if self.estimated else "was"
        line = (f"tracemalloc: the peak memory of {what} {verb} "
                f"{format_bytes(self.peak)}, over its limit of "
                f"{format_bytes(self.limit)}")
        if self.estimated:
            line += (f" (an estimate: tracemalloc is sampling, one sample "
                     f"per {self.sample} bytes on average, and a sampled "
                     f"peak is an upper bound)")
        return line

    def format(self, what, top=TOP_SITES, frames=SITE_FRAMES,
               skip_frame=None):
        """The failure message: the headline, then the top sites of the
        peak snapshot (what was live at the peak, including what was live
        before the call), each with a few frames of its traceback, the
        frames for which *skip_frame(filename)* is true left out."""
        lines = [self.headline(what)]
        if self.snapshot is None:
            return "\n".join(lines)
        # What tracemalloc's own code allocated (the check's, the plugin's
        # data) is not the test's: left out.
        own = _leakcore.package_files()
        stats = [stat for stat in self.snapshot.statistics('traceback')
                 if stat.traceback[-1].filename not in own]
        estimate = "about " if self.estimated else ""
        lines.append(f"top {min(top, len(stats))} of {len(stats)} sites "
                     f"live at the peak (the sizes include what was live "
                     f"before the call):")
        for stat in stats[:top]:
            # A traceback iterates oldest first: most recent first here.
            shown = [frame for frame in reversed(list(stat.traceback))
                     if frame.filename not in own
                     and not (skip_frame and skip_frame(frame.filename))]
            if not shown:
                shown = list(stat.traceback)[-1:]
            first = shown[0]
            lines.append(f"  {first.filename}:{first.lineno}: "
                         f"size={estimate}"
                         f"{_leakcore.format_size(stat.size)}, "
                         f"count={estimate}{stat.count}")
            for frame in shown[1:frames]:
                lines.append(f"      {frame.filename}:{frame.lineno}")
        return "\n".join(lines)


def harness_skipper(roots):
    """A skip_frame() for format(): the frames under the directories
    *roots* (the test harness's)."""
    roots = tuple(os.path.join(root, '') for root in roots)

    def skip(filename):
        return filename.startswith(roots)
    return skip
