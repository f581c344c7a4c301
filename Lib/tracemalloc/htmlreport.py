"""Write a tracemalloc snapshot as a self-contained HTML report.

The report is one file that works offline: its style sheet, its script and
its data are inline, and a Content-Security-Policy forbids any request.  It
holds

* an icicle graph of live memory by call path (the root on top, callers
  above callees), each box as wide as the bytes allocated under that call
  path, with click to zoom and a search box;
* sortable tables of the top allocation sites by line, by file and by
  traceback;
* with a *base* snapshot, the change since that snapshot: the graph is
  coloured by growth and the tables gain the differences.

All the aggregation happens here, in Python, before anything is written:
identical call paths are merged into one tree, and the call paths too small
to ever be seen are merged, under each caller, into one "other" box whose
size is the exact sum of what it replaces.  The page therefore receives at
most a few tens of thousands of boxes whatever the size of the snapshot,
while every box's size stays exact.

Only the public Snapshot API is used (``statistics('traceback')``, the
Traceback and Frame objects), so any Snapshot, loaded from a file or taken
by another version of the module, can be reported.
"""

import gc
import html
import json
import linecache
import os
import re

__all__ = ['write_html']

# The graph keeps at most this many call-path boxes (before adding the
# "other" boxes, at most one per kept box).  Ten thousand boxes are far more
# than a screen shows at once, enough to zoom several levels deep, and
# cheap for a browser to lay out.
_MAX_BOXES = 10_000
# A call path smaller than this fraction of the total is always merged into
# "other": even zoomed a hundred times it would be thinner than a pixel.
_MIN_FRACTION = 1e-6
# Rows kept per table; the rest is summed into one closing row.
_MAX_TABLE_ROWS = {'lineno': 500, 'filename': 500, 'traceback': 200}
# Source lines shown in tooltips and tables are cut to this many characters.
_MAX_SOURCE_LINE = 160

# How the page names a frame that is not a frame.
_ROOT_FRAME = -1
_OTHER_FRAME = -2
_UNKNOWN_FRAME = ('<unknown>', 0)
# Put above the oldest frame of a traceback that reached the traceback
# limit: its older calls were not recorded, so its oldest frame is not where
# the program started, and it must not be merged with tracebacks that do
# start there.
_LIMIT_FRAME = ('<older calls beyond the traceback limit>', 0)


# A node of the call tree is a list, for speed (a snapshot may hold 10^5
# distinct tracebacks of 25 frames):
#     [size, count, base_size, base_count, children, frame]
# *size* and *count* include the children's; a node's own bytes (allocated
# with its frame as the most recent one) are what its children leave.
# *children* is a list of nodes; *frame* a (filename, lineno) pair.
_SIZE, _COUNT, _BASE_SIZE, _BASE_COUNT, _CHILDREN, _FRAME = range(6)


def _traceback_totals(snapshot):
    """Return [(frames, size, count)] per distinct traceback of *snapshot*.

    *frames* is a tuple of (filename, lineno) pairs, oldest call first.
    """
    limit = getattr(snapshot, 'traceback_limit', None)
    if not isinstance(limit, int) or limit <= 1:
        # With one frame per traceback, all of them are cut: saying so in
        # every box would add nothing.
        limit = None
    totals = []
    for stat in snapshot.statistics('traceback'):
        # Raw frames: a C frame (native frames) keeps its function and
        # library.
        frames = tuple([frame._frame if hasattr(frame, "_frame")
                        else (frame.filename, frame.lineno)
                        for frame in stat.traceback])
        if not frames:
            frames = (_UNKNOWN_FRAME,)
        elif (limit is not None and len(frames[0]) == 2
              and sum(len(f) == 2 for f in frames) >= limit):
            # The limit counts Python frames (C frames of native frames
            # come in addition; a stack whose root is a C frame is whole).
            frames = (_LIMIT_FRAME,) + frames
        totals.append((frames, stat.size, stat.count))
    return totals


def _build_tree(totals, base_totals):
    """Merge the tracebacks of both snapshots into one call tree.

    Return (root, sizes of all the nodes).  The tracebacks are sorted, so
    that each one shares its longest common prefix with the one before:
    a sweep then only compares frames, and creates each node once, without
    looking anything up.
    """
    rows = [(frames, size, count, 0, 0) for frames, size, count in totals]
    rows += [(frames, 0, 0, size, count)
             for frames, size, count in base_totals]
    rows.sort(key=lambda row: row[0])

    root = [0, 0, 0, 0, [], None]
    sizes = []
    path = [root]           # the nodes of the previous traceback
    previous = ()

    def close(keep):
        # Finish the nodes below path[keep]: add each one's totals to its
        # parent's, now that all its descendants have been seen.
        while len(path) > keep + 1:
            node = path.pop()
            parent = path[-1]
            parent[_SIZE] += node[_SIZE]
            parent[_COUNT] += node[_COUNT]
            parent[_BASE_SIZE] += node[_BASE_SIZE]
            parent[_BASE_COUNT] += node[_BASE_COUNT]
            sizes.append(node[_SIZE])

    for frames, size, count, base_size, base_count in rows:
        common = 0
        limit = min(len(frames), len(previous))
        while common < limit and frames[common] == previous[common]:
            common += 1
        close(common)
        for frame in frames[common:]:
            node = [0, 0, 0, 0, [], frame]
            path[-1][_CHILDREN].append(node)
            path.append(node)
        leaf = path[-1]
        leaf[_SIZE] += size
        leaf[_COUNT] += count
        leaf[_BASE_SIZE] += base_size
        leaf[_BASE_COUNT] += base_count
        previous = frames
    close(0)
    sizes.append(root[_SIZE])
    return root, sizes


def _size_cutoff(total, sizes):
    """Return the size at or below which a call path goes into "other"."""
    cutoff = total * _MIN_FRACTION
    if len(sizes) > _MAX_BOXES:
        # A child is never bigger than its parent, so keeping the sizes
        # strictly above the (MAX+1)-th largest keeps a connected tree of at
        # most _MAX_BOXES nodes.
        sizes.sort(reverse=True)
        cutoff = max(cutoff, sizes[_MAX_BOXES])
    return cutoff


class _Emitter:
    """Numbers frames and files, and flattens the tree for the page."""

    def __init__(self, with_base):
        self.with_base = with_base
        self.files = []
        self.file_index = {}
        self.frames = []
        self.frame_index = {}
        self.tree = []
        # {box index: how many call paths an "other" box stands for}
        self.others = {}

    def file(self, filename):
        index = self.file_index.get(filename)
        if index is None:
            index = self.file_index[filename] = len(self.files)
            self.files.append(filename)
        return index

    def frame(self, frame):
        index = self.frame_index.get(frame)
        if index is None:
            filename, lineno = frame[0], frame[1]
            source = linecache.getline(filename, lineno).strip()
            if len(frame) > 2:
                # A C frame: its function and library, then its source.
                where = f"{frame[2]}() [{os.path.basename(frame[3])}]"
                source = f"{where} {source}" if source else where
            if len(source) > _MAX_SOURCE_LINE:
                source = source[:_MAX_SOURCE_LINE - 3] + '...'
            index = self.frame_index[frame] = len(self.frames)
            self.frames.append([self.file(filename), lineno, source])
        return index

    def box(self, frame_index, size, count, base_size, base_count,
            nchildren):
        # Flat pre-order list, one fixed-width record per box: the page
        # rebuilds the tree from the child counts.
        self.tree.extend((frame_index, size, count, nchildren))
        if self.with_base:
            self.tree.extend((base_size, base_count))
        return len(self.tree) // self.stride - 1

    @property
    def stride(self):
        return 6 if self.with_base else 4

    def emit_tree(self, root, cutoff):
        # Children are sorted biggest first, so the eye finds the big ones
        # at the left of their parent; "other" comes last.  Iterative, as a
        # traceback may be deeper than Python's recursion limit.
        stack = [(root, _ROOT_FRAME)]
        while stack:
            node, frame_index = stack.pop()
            if node is None:
                # An "other" box: frame_index carries its totals.
                size, count, base_size, base_count, merged = frame_index
                index = self.box(_OTHER_FRAME, size, count,
                                 base_size, base_count, 0)
                self.others[index] = merged
                continue
            kept = []
            other = [0, 0, 0, 0, 0]
            for child in node[_CHILDREN]:
                if child[_SIZE] > cutoff:
                    kept.append(child)
                else:
                    other[0] += child[_SIZE]
                    other[1] += child[_COUNT]
                    other[2] += child[_BASE_SIZE]
                    other[3] += child[_BASE_COUNT]
                    other[4] += 1
            kept.sort(key=lambda child: (-child[_SIZE], child[_FRAME]))
            has_other = other[0] > 0 or (self.with_base and other[2] > 0)
            self.box(frame_index, node[_SIZE], node[_COUNT],
                     node[_BASE_SIZE], node[_BASE_COUNT],
                     len(kept) + has_other)
            # Push in reverse so that the biggest child is emitted first.
            if has_other:
                stack.append((None, other))
            for child in reversed(kept):
                stack.append((child, self.frame(child[_FRAME])))


def _group_rows(totals, base_totals, key_of):
    """Sum traceback totals per key: {key: [size, count, base_size,
    base_count]}."""
    rows = {}
    for totals_list, offset in ((totals, 0), (base_totals, 2)):
        for frames, size, count in totals_list:
            key = key_of(frames)
            row = rows.get(key)
            if row is None:
                row = rows[key] = [0, 0, 0, 0]
            row[offset] += size
            row[offset + 1] += count
    return rows


def _table(emitter, totals, base_totals, key_type):
    """Return the page's table for *key_type*: kept rows and the rest."""
    if key_type == 'lineno':
        def key_of(frames):
            return frames[-1]
    elif key_type == 'filename':
        def key_of(frames):
            return frames[-1][0]
    else:
        def key_of(frames):
            return frames
    rows = _group_rows(totals, base_totals, key_of)
    items = list(rows.items())
    if emitter.with_base:
        # Biggest change first, then biggest size.
        def order(item):
            size, count, base_size, base_count = item[1]
            return (-abs(size - base_size), -size, -count)
    else:
        def order(item):
            return (-item[1][0], -item[1][1])
    items.sort(key=order)
    limit = _MAX_TABLE_ROWS[key_type]
    shown, rest = items[:limit], items[limit:]

    out_rows = []
    for key, values in shown:
        if key_type == 'lineno':
            ref = emitter.frame(key)
        elif key_type == 'filename':
            ref = emitter.file(key)
        else:
            # Most recent call first, as the page lists it.
            ref = [emitter.frame(frame) for frame in reversed(key)]
        out_rows.append([ref] + (values if emitter.with_base
                                 else values[:2]))
    rest_totals = [sum(values[i] for _, values in rest) for i in range(4)]
    return {
        'rows': out_rows,
        'rest': {'rows': len(rest),
                 'values': (rest_totals if emitter.with_base
                            else rest_totals[:2])},
    }


def _report_data(snapshot, base, title, leaks=None):
    totals = _traceback_totals(snapshot)
    base_totals = _traceback_totals(base) if base is not None else []
    with_base = base is not None

    root, sizes = _build_tree(totals, base_totals)
    cutoff = _size_cutoff(root[_SIZE], sizes)
    del sizes

    emitter = _Emitter(with_base)
    emitter.emit_tree(root, cutoff)
    tables = {key_type: _table(emitter, totals, base_totals, key_type)
              for key_type in ('lineno', 'filename', 'traceback')}
    return {
        'title': title,
        'traceback_limit': getattr(snapshot, 'traceback_limit', None),
        'sample': getattr(snapshot, 'sample', None),
        'total': {'size': root[_SIZE], 'count': root[_COUNT],
                  'tracebacks': len(totals)},
        'base_total': ({'size': root[_BASE_SIZE],
                        'count': root[_BASE_COUNT],
                        'tracebacks': len(base_totals)}
                       if with_base else None),
        'cutoff': cutoff,
        'files': emitter.files,
        'frames': emitter.frames,
        'tree': {'stride': emitter.stride, 'values': emitter.tree},
        'others': {str(index): merged
                   for index, merged in emitter.others.items()},
        'tables': tables,
        'leaks': leaks,
    }


def _script_json(data):
    """Encode *data* for a <script> element: no '<' can end it early."""
    text = json.dumps(data, ensure_ascii=True, separators=(',', ':'))
    return text.replace('<', '\\u003c')


def write_html(snapshot, path, *, base=None, title=None, leaks=None):
    """Write *snapshot* as a self-contained HTML report.

    *path* is a file name (str, bytes or os.PathLike) or a text file object.
    With *base*, an older Snapshot, the report also shows what changed since
    *base*: the graph is coloured by growth and the tables list differences.
    *title* names the report (default: "tracemalloc report").
    *leaks*, the sites of a leak check (``LeakSite`` objects, or their
    ``as_dict()``), adds a section above the graph: each site's growth and
    the chains that hold its objects (``LeakSite.retention``), with their
    type counts.

    The file needs no network and no other file: open it in any browser.
    """
    if title is None:
        title = "tracemalloc report"
    # The aggregation creates a few hundred thousand small containers that
    # all stay alive until it ends: collecting meanwhile would only walk the
    # snapshot's million traces again and again.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        if leaks is not None:
            leaks = [site if isinstance(site, dict) else site.as_dict()
                     for site in leaks]
        data = _report_data(snapshot, base, str(title), leaks)
    finally:
        if gc_was_enabled:
            gc.enable()
    # One pass, so that nothing inserted is searched for markers again.
    parts = {'TITLE': html.escape(str(title)), 'STYLE': _STYLE,
             'SCRIPT': _SCRIPT, 'DATA': _script_json(data)}
    document = re.sub('@(TITLE|STYLE|SCRIPT|DATA)@',
                      lambda match: parts[match.group(1)], _PAGE)
    if hasattr(path, 'write'):
        path.write(document)
    else:
        with open(path, 'w', encoding='utf-8',
                  errors='xmlcharrefreplace') as file:
            file.write(document)


# --------------------------------------------------------------------------
# The page.  Everything below is static: the data goes into the one
# application/json script element, and the script builds the page with
# textContent only, so no name from a snapshot is ever parsed as HTML.

_PAGE = """\
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; \
style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>@TITLE@</title>
<style>
@STYLE@
</style>
</head>
<body>
<header>
<h1 id="title">@TITLE@</h1>
<p id="summary"></p>
</header>
<section id="leaks-section" aria-label="Leaking sites" hidden>
<h2>Leaking sites</h2>
<ol id="leaks"></ol>
</section>
<section id="graph-section" aria-label="Memory by call path">
<div class="controls">
<input id="search" type="search" placeholder="Search file, line or code"
 aria-label="Search call paths" autocomplete="off">
<button id="reset-zoom" type="button">Reset zoom</button>
<label id="colour-choice" hidden>Colour:
<select id="colour-mode">
<option value="growth">by growth</option>
<option value="file">by file</option>
</select></label>
<span id="status" role="status"></span>
</div>
<div id="legend" hidden></div>
<div id="graph"></div>
<p class="hint">Each box is a call site; its width is the memory still
allocated under that call path, callers above callees.  Click a box to zoom
in, a box above it to zoom out; Escape resets.</p>
</section>
<section id="tables-section" aria-label="Top allocation sites">
<div class="tabs" role="tablist">
<button type="button" role="tab" data-table="lineno"
 aria-selected="true">By line</button>
<button type="button" role="tab" data-table="filename"
 aria-selected="false">By file</button>
<button type="button" role="tab" data-table="traceback"
 aria-selected="false">By traceback</button>
</div>
<div id="table-holder"></div>
</section>
<div id="tooltip" hidden></div>
<script type="application/json" id="report-data">@DATA@</script>
<script>
@SCRIPT@
</script>
</body>
</html>
"""

_STYLE = """\
:root { --row: 18px; font: 13px/1.4 system-ui, sans-serif; color: #222; }
body { margin: 0 16px 24px; background: #fafafa; }
h1 { font-size: 20px; margin: 12px 0 2px; }
#summary { margin: 0 0 8px; color: #444; }
h2 { font-size: 15px; margin: 10px 0 4px; }
#leaks { margin: 0 0 10px; padding-left: 2em; font: 12px/1.5 monospace; }
#leaks .site { font-weight: bold; }
#leaks .chain { color: #7a1a12; }
#leaks .under { color: #555; padding-left: 2em; }
.controls { display: flex; gap: 8px; align-items: center; flex-wrap: wrap;
  margin: 6px 0; }
#search { width: 22em; padding: 3px 6px; }
#status { color: #444; }
#legend { margin: 4px 0; font-size: 12px; }
#legend span { display: inline-block; width: 2.5em; height: 10px;
  vertical-align: middle; margin: 0 4px; border: 1px solid #999; }
#graph { position: relative; overflow: hidden; background: #fff;
  border: 1px solid #ccc; min-height: var(--row); }
/* No padding or border: a box must be exactly as wide as its bytes, even
   below a pixel.  The inset shadow separates neighbours without taking
   room. */
.box { position: absolute; height: calc(var(--row) - 1px);
  box-shadow: inset -1px 0 #fff; overflow: hidden; white-space: nowrap;
  text-overflow: ellipsis; font: 11px/17px monospace; text-indent: 3px;
  cursor: pointer; color: #111; }
.box.ancestor { opacity: 0.65; }
.box.other { background-image: repeating-linear-gradient(45deg,
  transparent 0 4px, rgba(255,255,255,0.5) 4px 6px); }
#graph.searching .box { opacity: 0.35; }
#graph.searching .box.match { opacity: 1; outline: 2px solid #b0128a;
  outline-offset: -2px; }
.box:hover { filter: brightness(0.92); }
.hint { color: #666; font-size: 12px; margin: 4px 0 16px; }
.tabs button { padding: 4px 12px; border: 1px solid #bbb;
  background: #eee; cursor: pointer; }
.tabs button[aria-selected="true"] { background: #fff;
  border-bottom-color: #fff; font-weight: bold; }
table { border-collapse: collapse; width: 100%; background: #fff; }
th, td { border: 1px solid #ddd; padding: 2px 6px; text-align: left;
  vertical-align: top; }
th { background: #f0f0f0; cursor: pointer; user-select: none;
  white-space: nowrap; }
th[aria-sort="descending"]::after { content: " \\25BC"; }
th[aria-sort="ascending"]::after { content: " \\25B2"; }
td.num { text-align: right; font-variant-numeric: tabular-nums;
  white-space: nowrap; }
td.grow { color: #b3261e; }
td.shrink { color: #1f5fbf; }
td.where { font-family: monospace; word-break: break-all; }
td.where .code { color: #555; display: block; }
tr.rest td { color: #666; font-style: italic; }
.find { cursor: pointer; text-decoration: underline dotted; }
details summary { cursor: pointer; }
#tooltip { position: fixed; z-index: 10; max-width: 60em;
  background: #fffff0; border: 1px solid #888; padding: 4px 8px;
  font: 12px/1.4 monospace; pointer-events: none;
  box-shadow: 2px 2px 6px rgba(0,0,0,0.2); white-space: pre-wrap; }
"""

_SCRIPT = r"""
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("report-data").textContent);
  const withBase = data.base_total !== null;
  const MIN_BOX_PX = 0.5;       // thinner boxes are not drawn
  const LABEL_PX = 36;          // narrower boxes get no text
  const ROW_PX = 18;

  // ---- numbers ----------------------------------------------------------
  const UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];
  function formatSize(size, sign) {
    const plus = sign && size > 0 ? "+" : "";
    let value = size;
    for (let i = 0; i < UNITS.length; i++) {
      const magnitude = Math.abs(value);
      if (i > 0 && magnitude < 100) {
        return plus + value.toFixed(1) + " " + UNITS[i];
      }
      if (magnitude < 10 * 1024 || i === UNITS.length - 1) {
        return plus + value.toFixed(0) + " " + UNITS[i];
      }
      value /= 1024;
    }
  }
  function formatCount(count, sign) {
    return (sign && count > 0 ? "+" : "") + count.toLocaleString("en-US");
  }
  function percent(part, whole) {
    return whole ? (100 * part / whole).toFixed(1) + "%" : "-";
  }

  // ---- frames -----------------------------------------------------------
  function basename(path) {
    const cut = Math.max(path.lastIndexOf("/"), path.lastIndexOf("\\"));
    return path.slice(cut + 1);
  }
  function frameFile(f) { return data.files[data.frames[f][0]]; }
  // Line 0 is not a line: "<unknown>", or the traceback limit's marker.
  function frameWhere(f) {
    const line = data.frames[f][1];
    return frameFile(f) + (line ? ":" + line : "");
  }
  function frameShort(f) {
    const line = data.frames[f][1];
    return line ? basename(frameFile(f)) + ":" + line : frameFile(f);
  }
  function frameSource(f) { return data.frames[f][2]; }

  // ---- the tree, rebuilt from its pre-order records -----------------------
  const values = data.tree.values;
  const stride = data.tree.stride;
  const n = values.length / stride;
  const frameOf = new Int32Array(n);
  const size = new Float64Array(n);
  const count = new Float64Array(n);
  const baseSize = new Float64Array(n);
  const baseCount = new Float64Array(n);
  const parent = new Int32Array(n);
  const depth = new Int32Array(n);
  const children = new Array(n);
  {
    const open = [];            // [box, children still to come]
    for (let i = 0; i < n; i++) {
      const at = i * stride;
      frameOf[i] = values[at];
      size[i] = values[at + 1];
      count[i] = values[at + 2];
      if (withBase) {
        baseSize[i] = values[at + 4];
        baseCount[i] = values[at + 5];
      }
      children[i] = [];
      if (open.length) {
        const top = open[open.length - 1];
        parent[i] = top[0];
        depth[i] = depth[top[0]] + 1;
        children[top[0]].push(i);
        if (--top[1] === 0) open.pop();
      } else {
        parent[i] = -1;
      }
      if (values[at + 3] > 0) open.push([i, values[at + 3]]);
    }
  }
  const ROOT = 0;
  const isOther = (i) => frameOf[i] === -2;

  function label(i) {
    if (i === ROOT) {
      return "all: " + formatSize(size[i]) + " in " +
        formatCount(count[i]) + " blocks";
    }
    if (isOther(i)) {
      return "other (" + formatCount(data.others[i]) + " smaller paths)";
    }
    const source = frameSource(frameOf[i]);
    return frameShort(frameOf[i]) + (source ? "  " + source : "");
  }
  // What the search box matches against.
  const searchText = new Array(n);
  for (let i = 0; i < n; i++) {
    const f = frameOf[i];
    searchText[i] = f >= 0
      ? (frameWhere(f) + " " + frameSource(f)).toLowerCase() : null;
  }

  // ---- colours ----------------------------------------------------------
  let colourMode = withBase ? "growth" : "file";
  function hashHue(text) {
    let h = 2166136261;
    for (let k = 0; k < text.length; k++) {
      h ^= text.charCodeAt(k);
      h = Math.imul(h, 16777619);
    }
    return (h >>> 0) % 360;
  }
  // The colour scale runs from the biggest change either way; the legend
  // names the biggest growth and the biggest release that there are.
  let maxGrew = 0, maxShrank = 0;
  for (let i = 1; i < n; i++) {
    const growth = size[i] - baseSize[i];
    if (growth > maxGrew) maxGrew = growth;
    if (-growth > maxShrank) maxShrank = -growth;
  }
  const maxGrowth = Math.max(maxGrew, maxShrank);
  function colour(i) {
    if (i === ROOT) return "hsl(210, 15%, 80%)";
    if (isOther(i)) return "hsl(0, 0%, 78%)";
    if (colourMode === "growth") {
      const growth = size[i] - baseSize[i];
      const t = maxGrowth ? Math.sqrt(Math.abs(growth) / maxGrowth) : 0;
      const lightness = (96 - 46 * t).toFixed(1);
      return growth >= 0 ? "hsl(5, 85%, " + lightness + "%)"
                         : "hsl(215, 80%, " + lightness + "%)";
    }
    return "hsl(" + hashHue(frameFile(frameOf[i])) + ", 60%, 76%)";
  }

  // ---- summary ----------------------------------------------------------
  {
    const t = data.total;
    let text = formatSize(t.size) + " in " + formatCount(t.count) +
      " blocks, " + formatCount(t.tracebacks) + " distinct tracebacks";
    if (data.traceback_limit !== null) {
      text += ", up to " + data.traceback_limit + " frames each";
    }
    if (data.sample) {
      text += " (estimated from samples, one per " +
        formatSize(data.sample) + " allocated on average)";
    }
    if (withBase) {
      const b = data.base_total;
      text += "; base: " + formatSize(b.size) + " in " +
        formatCount(b.count) + " blocks; change: " +
        formatSize(t.size - b.size, true) + ", " +
        formatCount(t.count - b.count, true) + " blocks";
    }
    text += ". The graph has " + formatCount(n) + " boxes";
    if (data.cutoff > 0) {
      text += "; call paths of " + formatSize(Math.floor(data.cutoff)) +
        " or less are merged into \u201cother\u201d";
    }
    document.getElementById("summary").textContent = text + ".";
  }

  // ---- leaking sites (a leak check's report) ----------------------------
  if (data.leaks && data.leaks.length) {
    document.getElementById("leaks-section").hidden = false;
    const list = document.getElementById("leaks");
    const line = function (parent, className, text) {
      const div = document.createElement("div");
      div.className = className;
      div.textContent = text;
      parent.appendChild(div);
    };
    for (const site of data.leaks) {
      const item = document.createElement("li");
      line(item, "site", site.filename + ":" + site.lineno + ": grew " +
           formatSize(site.size) + " in " + formatCount(site.count) +
           " blocks over " + site.sizes.length + " measured rounds (in " +
           site.rounds_grown + " of them)");
      const retention = site.retention;
      if (retention) {
        for (const chain of retention.chains) {
          line(item, "chain", "held by: " + chain.text);
          const types = Object.entries(chain.types)
            .sort(function (a, b) { return b[1] - a[1]; })
            .map(function (t) { return t[0] + " " + t[1]; }).join(", ");
          line(item, "under", formatCount(chain.count) + " objects, " +
               formatSize(chain.size) + " under it (" + types + ")");
        }
        if (retention.holders > retention.chains.length) {
          line(item, "under", (retention.holders - retention.chains.length) +
               " more holders not shown");
        }
      } else if (site.retention_error) {
        line(item, "chain", "held by: unknown: the search failed (" +
             site.retention_error + ")");
      }
      list.appendChild(item);
    }
  }

  // ---- the graph --------------------------------------------------------
  const graph = document.getElementById("graph");
  const statusLine = document.getElementById("status");
  const searchBox = document.getElementById("search");
  const tooltip = document.getElementById("tooltip");
  let zoomed = ROOT;
  let matches = null;           // Uint8Array, or null without a search

  function addBox(fragment, i, row, x, width, extraClass) {
    const box = document.createElement("div");
    box.className = "box" + extraClass;
    if (matches !== null && matches[i]) box.className += " match";
    box.style.left = (100 * x) + "%";
    box.style.width = (100 * width) + "%";
    box.style.top = (row * ROW_PX) + "px";
    box.style.backgroundColor = colour(i);
    box.dataset.box = i;
    box.dataset.size = size[i];
    box.dataset.depth = depth[i];
    if (withBase) box.dataset.growth = size[i] - baseSize[i];
    if (width * graphWidth >= LABEL_PX) box.textContent = label(i);
    fragment.appendChild(box);
  }

  let graphWidth = 1000;
  function render() {
    const start = performance.now();
    graphWidth = graph.clientWidth || 1000;
    const fragment = document.createDocumentFragment();
    const chain = [];
    for (let a = zoomed; a !== -1; a = parent[a]) chain.push(a);
    chain.reverse();
    chain.forEach(function (a, row) {
      addBox(fragment, a, row, 0, 1,
             (a === zoomed ? " zoomed" : " ancestor") +
             (isOther(a) ? " other" : ""));
    });
    const top = chain.length - 1;
    const whole = size[zoomed] || 1;
    let rows = chain.length;
    let drawn = chain.length;
    // Iterative walk: [box, x of its left edge, as a fraction of the view]
    const stack = [[zoomed, 0]];
    while (stack.length) {
      const item = stack.pop();
      const i = item[0];
      let x = item[1];
      const row = depth[i] - depth[zoomed] + top + 1;
      for (const c of children[i]) {
        const width = size[c] / whole;
        if (width * graphWidth >= MIN_BOX_PX) {
          addBox(fragment, c, row, x, width, isOther(c) ? " other" : "");
          drawn++;
          rows = Math.max(rows, row + 1);
          if (children[c].length) stack.push([c, x]);
        }
        x += width;
      }
    }
    graph.textContent = "";
    graph.style.height = (rows * ROW_PX) + "px";
    graph.appendChild(fragment);
    graph.dataset.zoomed = zoomed;
    graph.dataset.drawn = drawn;
    graph.dataset.renderMs = (performance.now() - start).toFixed(1);
    updateStatus();
  }

  function zoom(i) {
    zoomed = i;
    render();
  }

  // ---- search -----------------------------------------------------------
  function search(text) {
    const query = text.trim().toLowerCase();
    if (!query) {
      matches = null;
      graph.classList.remove("searching");
    } else {
      matches = new Uint8Array(n);
      for (let i = 0; i < n; i++) {
        if (searchText[i] !== null && searchText[i].includes(query)) {
          matches[i] = 1;
        }
      }
      graph.classList.add("searching");
    }
    render();
  }

  // Bytes under the zoomed box that a matching call path holds; a match
  // inside another match is not counted twice.
  function matchedBytes() {
    let total = 0;
    let boxes = 0;
    const stack = [zoomed];
    while (stack.length) {
      const i = stack.pop();
      if (matches[i]) {
        total += size[i];
        boxes++;
        continue;
      }
      for (const c of children[i]) stack.push(c);
    }
    return [total, boxes];
  }

  function updateStatus() {
    let text = "";
    if (zoomed !== ROOT) {
      text = "zoomed on " + label(zoomed) + ": " + formatSize(size[zoomed]) +
        " (" + percent(size[zoomed], size[ROOT]) + " of all)";
    }
    if (matches !== null) {
      const found = matchedBytes();
      if (text) text += "; ";
      text += "search matches " + formatSize(found[0]) + " (" +
        percent(found[0], size[zoomed]) + " of the view)";
      graph.dataset.matchedBytes = found[0];
    } else {
      delete graph.dataset.matchedBytes;
    }
    statusLine.textContent = text;
  }

  function boxOf(target) {
    const box = target.closest ? target.closest(".box") : null;
    return box ? Number(box.dataset.box) : -1;
  }

  graph.addEventListener("click", function (event) {
    const i = boxOf(event.target);
    if (i >= 0) zoom(i);
  });
  graph.addEventListener("mousemove", function (event) {
    const i = boxOf(event.target);
    if (i < 0) { tooltip.hidden = true; return; }
    const lines = [];
    if (i === ROOT) {
      lines.push("all memory traced");
    } else if (isOther(i)) {
      lines.push(formatCount(data.others[i]) +
                 " call paths too small to draw, merged");
    } else {
      const f = frameOf[i];
      lines.push(frameWhere(f));
      if (frameSource(f)) lines.push("    " + frameSource(f));
    }
    let own = size[i];
    for (const c of children[i]) own -= size[c];
    lines.push("size: " + formatSize(size[i]) + " in " +
               formatCount(count[i]) + " blocks (" +
               percent(size[i], size[ROOT]) + " of all, " +
               percent(size[i], size[zoomed]) + " of the view)");
    if (!isOther(i) && children[i].length) {
      lines.push("allocated on this line itself: " + formatSize(own));
    }
    if (withBase) {
      lines.push("base: " + formatSize(baseSize[i]) + " in " +
                 formatCount(baseCount[i]) + " blocks; change: " +
                 formatSize(size[i] - baseSize[i], true) + ", " +
                 formatCount(count[i] - baseCount[i], true) + " blocks");
    }
    tooltip.textContent = lines.join("\n");
    tooltip.hidden = false;
    const x = Math.min(event.clientX + 14,
                       window.innerWidth - tooltip.offsetWidth - 4);
    let y = event.clientY + 16;
    if (y + tooltip.offsetHeight > window.innerHeight) {
      y = event.clientY - tooltip.offsetHeight - 8;
    }
    tooltip.style.left = Math.max(0, x) + "px";
    tooltip.style.top = Math.max(0, y) + "px";
  });
  graph.addEventListener("mouseleave", function () { tooltip.hidden = true; });

  let searchTimer = 0;
  searchBox.addEventListener("input", function () {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(function () { search(searchBox.value); }, 120);
  });
  searchBox.addEventListener("keydown", function (event) {
    if (event.key === "Enter") {
      clearTimeout(searchTimer);
      search(searchBox.value);
    }
  });
  document.getElementById("reset-zoom").addEventListener("click",
    function () { zoom(ROOT); });
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape") {
      if (document.activeElement === searchBox && searchBox.value) {
        searchBox.value = "";
        search("");
      } else {
        zoom(ROOT);
      }
    }
  });
  let lastWidth = 0;
  window.addEventListener("resize", function () {
    if (graph.clientWidth !== lastWidth) {
      lastWidth = graph.clientWidth;
      render();
    }
  });

  if (withBase) {
    document.getElementById("colour-choice").hidden = false;
    const select = document.getElementById("colour-mode");
    select.addEventListener("change", function () {
      colourMode = select.value;
      updateLegend();
      render();
    });
  }
  function updateLegend() {
    const legend = document.getElementById("legend");
    if (!withBase || colourMode !== "growth") { legend.hidden = true; return; }
    legend.hidden = false;
    legend.textContent = "";
    function shade(hue, change) {
      const t = maxGrowth ? Math.sqrt(change / maxGrowth) : 0;
      return "hsl(" + hue + ", " + (hue === 5 ? "85%" : "80%") + ", " +
             (96 - 46 * t).toFixed(1) + "%)";
    }
    const parts = [];
    if (maxShrank > 0) {
      parts.push(["shrank by up to " + formatSize(maxShrank),
                  shade(215, maxShrank)]);
    }
    parts.push(["unchanged", "hsl(5, 85%, 96%)"]);
    if (maxGrew > 0) {
      parts.push(["grew by up to " + formatSize(maxGrew),
                  shade(5, maxGrew)]);
    }
    for (const [text, background] of parts) {
      const swatch = document.createElement("span");
      swatch.style.backgroundColor = background;
      legend.appendChild(swatch);
      legend.appendChild(document.createTextNode(text));
    }
  }

  // ---- tables -----------------------------------------------------------
  const holder = document.getElementById("table-holder");
  const tables = {};

  function cell(tr, text, className) {
    const td = document.createElement("td");
    td.textContent = text;
    if (className) td.className = className;
    tr.appendChild(td);
    return td;
  }
  function whereCell(tr, keyType, ref) {
    const td = document.createElement("td");
    td.className = "where";
    let find = null;
    if (keyType === "filename") {
      const name = document.createElement("span");
      name.className = "find";
      name.textContent = data.files[ref];
      td.appendChild(name);
      find = data.files[ref];
    } else {
      const frames = keyType === "lineno" ? [ref] : ref;
      const head = document.createElement("span");
      head.textContent = frameWhere(frames[0]);
      find = frameWhere(frames[0]);
      if (keyType === "traceback" && frames.length > 1) {
        const details = document.createElement("details");
        const summary = document.createElement("summary");
        summary.appendChild(head);
        details.appendChild(summary);
        for (const f of frames) {
          const line = document.createElement("div");
          line.textContent = frameWhere(f);
          details.appendChild(line);
          if (frameSource(f)) {
            const code = document.createElement("span");
            code.className = "code";
            code.textContent = "    " + frameSource(f);
            details.appendChild(code);
          }
        }
        td.appendChild(details);
      } else {
        td.appendChild(head);
        if (frameSource(frames[0])) {
          const code = document.createElement("span");
          code.className = "code";
          code.textContent = frameSource(frames[0]);
          td.appendChild(code);
        }
      }
      head.classList.add("find");
    }
    td.dataset.find = find;
    td.title = "click to search the graph for this";
    tr.appendChild(td);
  }

  // Column definitions: [title, value of a row, how to show it, class]
  function columns(keyType) {
    const cols = [
      ["Where", null],
      ["Size", (r) => r[1], (v) => formatSize(v), "num"],
      ["Blocks", (r) => r[2], (v) => formatCount(v), "num"],
      ["Average", (r) => r[2] ? r[1] / r[2] : 0,
       (v) => formatSize(Math.round(v)), "num"],
    ];
    if (withBase) {
      cols.push(["Change", (r) => r[1] - r[3], (v) => formatSize(v, true),
                 "num"]);
      cols.push(["Blocks change", (r) => r[2] - r[4],
                 (v) => formatCount(v, true), "num"]);
      cols.push(["Base size", (r) => r[3], (v) => formatSize(v), "num"]);
    }
    return cols;
  }

  function buildTable(keyType) {
    const table = data.tables[keyType];
    const cols = columns(keyType);
    const element = document.createElement("table");
    element.id = "table-" + keyType;
    const head = element.createTHead().insertRow();
    const body = element.createTBody();
    const state = {sortColumn: withBase ? 4 : 1, descending: true};
    cols.forEach(function (col, k) {
      const th = document.createElement("th");
      th.textContent = col[0];
      th.dataset.column = k;
      th.setAttribute("role", "columnheader");
      th.addEventListener("click", function () {
        if (state.sortColumn === k) {
          state.descending = !state.descending;
        } else {
          state.sortColumn = k;
          state.descending = k !== 0;
        }
        fill();
      });
      head.appendChild(th);
    });
    function sortKey(row, k) {
      if (k === 0) {
        const ref = row[0];
        if (keyType === "filename") return data.files[ref];
        return frameWhere(keyType === "lineno" ? ref : ref[0]);
      }
      return cols[k][1](row);
    }
    function fill() {
      const k = state.sortColumn;
      const sign = state.descending ? -1 : 1;
      const rows = table.rows.slice();
      rows.sort(function (a, b) {
        let ka = sortKey(a, k), kb = sortKey(b, k);
        if (withBase && k === 4) { ka = Math.abs(ka); kb = Math.abs(kb); }
        return ka < kb ? -sign : ka > kb ? sign : 0;
      });
      Array.from(head.children).forEach(function (th, c) {
        if (c === k) {
          th.setAttribute("aria-sort",
                          state.descending ? "descending" : "ascending");
        } else {
          th.removeAttribute("aria-sort");
        }
      });
      body.textContent = "";
      for (const row of rows) {
        const tr = body.insertRow();
        whereCell(tr, keyType, row[0]);
        for (let c = 1; c < cols.length; c++) {
          const v = cols[c][1](row);
          let cls = cols[c][3];
          if (withBase && c >= 4 && c <= 5 && v !== 0) {
            cls += v > 0 ? " grow" : " shrink";
          }
          const td = cell(tr, cols[c][2](v), cls);
          td.dataset.value = v;
        }
      }
      if (table.rest.rows) {
        const tr = body.insertRow();
        tr.className = "rest";
        const r = [null].concat(table.rest.values);
        cell(tr, formatCount(table.rest.rows) + " more rows, not listed");
        for (let c = 1; c < cols.length; c++) {
          cell(tr, cols[c][2](cols[c][1](r)), cols[c][3]);
        }
      }
    }
    body.addEventListener("click", function (event) {
      const target = event.target.closest(".find");
      if (!target) return;
      searchBox.value = target.closest("td.where").dataset.find;
      search(searchBox.value);
      graph.scrollIntoView({block: "nearest"});
    });
    fill();
    return element;
  }

  function showTable(keyType) {
    for (const tab of document.querySelectorAll(".tabs button")) {
      tab.setAttribute("aria-selected",
                       String(tab.dataset.table === keyType));
    }
    if (!tables[keyType]) tables[keyType] = buildTable(keyType);
    holder.textContent = "";
    holder.appendChild(tables[keyType]);
  }
  for (const tab of document.querySelectorAll(".tabs button")) {
    tab.addEventListener("click", function () {
      showTable(tab.dataset.table);
    });
  }

  // ---- start ------------------------------------------------------------
  updateLegend();
  render();
  lastWidth = graph.clientWidth;
  showTable("lineno");
  // For scripts driving the page (the tests use it to read the tree).
  window.tracemallocReport = {
    data: data,
    size: size,
    parent: parent,
    zoom: zoom,
    search: function (text) { searchBox.value = text; search(text); },
  };
  document.body.dataset.ready = "true";
})();
"""
