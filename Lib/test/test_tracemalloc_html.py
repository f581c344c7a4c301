"""Tests of tracemalloc's HTML report (Lib/tracemalloc/htmlreport.py).

ReportDataTests check the data written into the page without a browser:
exact totals after pruning, the diff, escaping, the size bound.

BrowserTests open reports in Debian's headless Chromium, driven through
chromedriver (Debian's chromium-driver package) with the W3C WebDriver
protocol, spoken here over HTTP with the standard library only.  They check
that the page logs no error and makes no request, that the graph's boxes add
up to the snapshot's totals, that zoom, search and table sorting work, and
take a screenshot.  They are skipped, saying which package is missing, when
Chromium or chromedriver is not installed; a browser that is installed but
does not start is an error.

Set TRACEMALLOC_HTML_SCREENSHOT=path.png to keep the screenshot (the one in
Doc/library/tracemalloc-report.png is made that way).
"""

import base64
import functools
import html
import io
import json
import os
import random
import re
import shutil
import socket
import subprocess
import tempfile
import time
import tracemalloc
import unittest
import urllib.error
import urllib.request
from unittest import mock

from tracemalloc import htmlreport

from test.support.script_helper import assert_python_ok


# --------------------------------------------------------------------------
# Snapshots to report: a small "service" whose call paths are known

def _make_record(index):
    return {"id": index, "name": f"user-{index:06d}", "tags": ["a", "b"]}


def _load_records(count):
    return [_make_record(index) for index in range(count)]


def _build_index(records):
    return {record["name"]: record for record in records}


def _render_page(records):
    return [f"<li>{record['name']}</li>".encode() * 4 for record in records]


def _handle_request(cache, count):
    records = _load_records(count)
    cache.append(_build_index(records))
    cache.append(_render_page(records))


def _serve(cache, requests):
    for request in range(requests):
        _handle_request(cache, 150)


def take_traced_snapshot(work, limit=25):
    """Run *work()* traced and return (snapshot, whatever work returned)."""
    if tracemalloc.is_tracing():
        raise unittest.SkipTest("tracemalloc is already tracing")
    tracemalloc.start(limit)
    try:
        result = work()
        snapshot = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    return snapshot, result


def service_snapshots():
    """Return (base, snapshot): the service before and after more requests.

    The second snapshot also dropped half of what the first one held, so
    that some call paths grew and others shrank.
    """
    def work():
        cache = []
        _serve(cache, 4)
        base = tracemalloc.take_snapshot()
        del cache[0:4]
        _serve(cache, 10)
        return base, cache
    snapshot, (base, cache) = take_traced_snapshot(work)
    return base, snapshot, cache


LIMIT_FRAME = ("<older calls beyond the traceback limit>", 0)


def frames_of(trace, limit):
    """(filename, lineno) pairs of a trace, oldest call first, under a
    marker when the traceback may have been cut by *limit*."""
    frames = tuple((frame.filename, frame.lineno)
                   for frame in trace.traceback)
    if not frames:
        return (("<unknown>", 0),)
    if limit > 1 and len(frames) >= limit:
        return (LIMIT_FRAME,) + frames
    return frames


def prefix_totals(snapshot):
    """{call path (oldest first): bytes} for every prefix of a traceback,
    and {traceback: bytes} for whole tracebacks: the reference the
    report's tree is checked against."""
    prefixes = {}
    whole = {}
    for trace in snapshot.traces:
        frames = frames_of(trace, snapshot.traceback_limit)
        for end in range(len(frames) + 1):
            key = frames[:end]
            prefixes[key] = prefixes.get(key, 0) + trace.size
        whole[frames] = whole.get(frames, 0) + trace.size
    return prefixes, whole


def synthetic_snapshot(ntraces, ncontexts, depth, seed=1, skewed=True,
                       branching=8):
    """A Snapshot of *ntraces* traces over about *ncontexts* call contexts.

    The contexts are paths in a random call tree where each call site has
    up to *branching* callees, the first ones more often, as in real
    programs.  With *skewed*, a few contexts also hold most traces;
    otherwise each context is as likely.  Built from raw traces as
    upstream's test_tracemalloc does; traces of one context share a frames
    tuple, as the engine's interned tracebacks do.
    """
    rng = random.Random(seed)
    files = [f"/srv/app/module{k}.py" for k in range(40)]
    callees = {}
    contexts = set()
    for attempt in range(ncontexts * 20):
        if len(contexts) >= ncontexts:
            break
        frames = ()
        for level in range(rng.randrange(1, depth + 1)):
            options = callees.get(frames)
            if options is None:
                options = callees[frames] = [
                    (rng.choice(files), rng.randrange(1, 400))
                    for _ in range(branching)]
            choice = min(rng.randrange(branching), rng.randrange(branching))
            frames += (options[choice],)
        # Raw frames are most recent first.
        contexts.add(frames[::-1])
    contexts = sorted(contexts)
    rng.shuffle(contexts)
    traces = []
    for index in range(ntraces):
        if skewed:
            frames = contexts[int(rng.paretovariate(1.2)) % len(contexts)]
        else:
            frames = contexts[index % len(contexts)]
        traces.append((0, rng.choice((16, 32, 64, 100, 4096)), frames,
                       len(frames)))
    return tracemalloc.Snapshot(traces, depth)


@functools.lru_cache(maxsize=1)
def large_snapshot():
    """10^6 traces over 50,000 call paths (shared by two tests)."""
    return synthetic_snapshot(1_000_000, 50_000, 12, skewed=False)


def report_data(text):
    """The JSON data embedded in a report."""
    match = re.search(r'<script type="application/json" id="report-data">'
                      r'(.*?)</script>', text, re.S)
    return json.loads(match.group(1))


def rebuild_tree(data):
    """Rebuild the report's tree: list of dicts with parent and children."""
    stride = data["tree"]["stride"]
    values = data["tree"]["values"]
    boxes = []
    open_boxes = []
    for index in range(len(values) // stride):
        record = values[index * stride:(index + 1) * stride]
        box = {"frame": record[0], "size": record[1], "count": record[2],
               "children": [], "parent": None}
        if stride == 6:
            box["base_size"], box["base_count"] = record[4], record[5]
        if open_boxes:
            parent = open_boxes[-1]
            box["parent"] = parent[0]
            boxes[parent[0]]["children"].append(index)
            parent[1] -= 1
            if parent[1] == 0:
                open_boxes.pop()
        boxes.append(box)
        if record[3]:
            open_boxes.append([index, record[3]])
    return boxes


def box_path(data, boxes, index):
    """The call path of a box: (filename, lineno) pairs, oldest first."""
    path = []
    while boxes[index]["parent"] is not None:
        frame = data["frames"][boxes[index]["frame"]]
        path.append((data["files"][frame[0]], frame[1]))
        index = boxes[index]["parent"]
    return tuple(reversed(path))


# --------------------------------------------------------------------------
# Tests without a browser

class ReportDataTests(unittest.TestCase):

    def write(self, snapshot, **kwargs):
        out = io.StringIO()
        htmlreport.write_html(snapshot, out, **kwargs)
        return out.getvalue()

    def check_tree(self, snapshot, data, base=None):
        """Every box's size is the exact sum of what lies under it."""
        boxes = rebuild_tree(data)
        prefixes, whole = prefix_totals(snapshot)
        total = sum(trace.size for trace in snapshot.traces)
        self.assertEqual(boxes[0]["size"], total)
        self.assertEqual(data["total"]["size"], total)
        self.assertEqual(boxes[0]["count"], len(snapshot.traces))
        others = 0
        for index, box in enumerate(boxes):
            if box["frame"] == -2:
                others += 1
                self.assertEqual(box["children"], [])
                continue
            path = box_path(data, boxes, index)
            self.assertEqual(box["size"], prefixes.get(path, 0), path)
            own = whole.get(path, 0)
            self.assertEqual(
                own + sum(boxes[c]["size"] for c in box["children"]),
                box["size"], path)
        return boxes, others

    def test_tree_is_exact(self):
        base, snapshot, cache = service_snapshots()
        data = report_data(self.write(snapshot))
        boxes, others = self.check_tree(snapshot, data)
        # The service's own call path is in the tree, frame by frame.
        names = {data["frames"][box["frame"]][2] for box in boxes
                 if box["frame"] >= 0}
        self.assertIn("cache.append(_render_page(records))", names)
        self.assertIsNone(data["base_total"])

    def test_pruning_keeps_totals_exact(self):
        snapshot = synthetic_snapshot(20_000, 3_000, 8)
        with mock.patch.object(htmlreport, "_MAX_BOXES", 50):
            data = report_data(self.write(snapshot))
        boxes, others = self.check_tree(snapshot, data)
        self.assertGreater(others, 0)
        call_paths = len(boxes) - others - 1
        self.assertLessEqual(call_paths, 50)
        self.assertGreater(call_paths, 10)
        # Sizes are strictly above the cutoff, "other" boxes aside.
        for box in boxes[1:]:
            if box["frame"] != -2:
                self.assertGreater(box["size"], data["cutoff"])

    def test_pruning_keeps_diff_totals_exact(self):
        # Half the call paths of the base are gone from the new snapshot:
        # what they held is in the "other" boxes' base sizes.
        base = synthetic_snapshot(20_000, 3_000, 8, seed=1)
        snapshot = synthetic_snapshot(20_000, 3_000, 8, seed=2)
        with mock.patch.object(htmlreport, "_MAX_BOXES", 50):
            data = report_data(self.write(snapshot, base=base))
        boxes, others = self.check_tree(snapshot, data)
        base_prefixes, base_whole = prefix_totals(base)
        self.assertEqual(boxes[0]["base_size"],
                         sum(trace.size for trace in base.traces))
        for index, box in enumerate(boxes):
            if box["frame"] == -2:
                continue
            path = box_path(data, boxes, index)
            self.assertEqual(box["base_size"], base_prefixes.get(path, 0))
            self.assertEqual(
                base_whole.get(path, 0)
                + sum(boxes[c]["base_size"] for c in box["children"]),
                box["base_size"], path)

    def test_diff(self):
        base, snapshot, cache = service_snapshots()
        data = report_data(self.write(snapshot, base=base))
        self.check_tree(snapshot, data)
        boxes = rebuild_tree(data)
        base_prefixes, _ = prefix_totals(base)
        self.assertEqual(boxes[0]["base_size"],
                         sum(trace.size for trace in base.traces))
        self.assertEqual(data["base_total"]["count"], len(base.traces))
        for index, box in enumerate(boxes):
            if box["frame"] != -2:
                path = box_path(data, boxes, index)
                self.assertEqual(box["base_size"],
                                 base_prefixes.get(path, 0), path)
        # The line table lists the changes, biggest first.
        rows = data["tables"]["lineno"]["rows"]
        changes = [abs(row[1] - row[3]) for row in rows]
        self.assertEqual(changes, sorted(changes, reverse=True))
        expected = {}
        for stat in snapshot.compare_to(base, "lineno"):
            frame = stat.traceback[0]
            expected[(frame.filename, frame.lineno)] = (stat.size,
                                                        stat.size_diff)
        for row in rows:
            filename = data["files"][data["frames"][row[0]][0]]
            lineno = data["frames"][row[0]][1]
            self.assertEqual((row[1], row[1] - row[3]),
                             expected[(filename, lineno)])

    def test_tables_match_statistics(self):
        base, snapshot, cache = service_snapshots()
        data = report_data(self.write(snapshot))
        for key_type in ("lineno", "filename", "traceback"):
            with self.subTest(key_type=key_type):
                table = data["tables"][key_type]
                stats = snapshot.statistics(key_type)
                self.assertEqual(len(table["rows"]) + table["rest"]["rows"],
                                 len(stats))
                self.assertEqual(
                    sum(row[1] for row in table["rows"])
                    + table["rest"]["values"][0],
                    sum(stat.size for stat in stats))
                self.assertEqual(table["rows"][0][1], stats[0].size)
                self.assertEqual(table["rows"][0][2], stats[0].count)

    def test_table_rest_row(self):
        snapshot = synthetic_snapshot(5_000, 2_000, 4, skewed=False)
        data = report_data(self.write(snapshot))
        table = data["tables"]["traceback"]
        self.assertEqual(len(table["rows"]),
                         htmlreport._MAX_TABLE_ROWS["traceback"])
        self.assertEqual(sum(row[1] for row in table["rows"])
                         + table["rest"]["values"][0],
                         sum(trace.size for trace in snapshot.traces))

    def test_self_contained(self):
        base, snapshot, cache = service_snapshots()
        text = self.write(snapshot, base=base)
        self.assertIn("Content-Security-Policy", text)
        self.assertIn("default-src 'none'", text)
        # Nothing to fetch: no URL, no external script, style or image.
        self.assertNotRegex(text, r"(?i)https?:|\bsrc\s*=|<link\b|@import|"
                                  r"url\(")

    def test_escaping(self):
        nasty = "</script><script>alert(1)</script><!--"
        traces = [(0, 100, ((nasty + ".py", 1), ("<stdin>", 2)), 2),
                  (0, 50, (("caf\xe9 \u2603.py", 3),), 1)]
        snapshot = tracemalloc.Snapshot(traces, 5)
        text = self.write(snapshot, title=nasty)
        # Only the page's own two script elements.
        self.assertEqual(text.count("<script"), 2)
        self.assertEqual(text.count("</script>"), 2)
        self.assertIn(f"<title>{html.escape(nasty)}</title>", text)
        data = report_data(text)
        self.assertIn(nasty + ".py", data["files"])
        self.assertIn("caf\xe9 \u2603.py", data["files"])
        self.assertEqual(data["title"], nasty)
        # The page's own markers in a title stay text.
        text = self.write(snapshot, title="@DATA@ @SCRIPT@ @STYLE@")
        self.assertIn("<title>@DATA@ @SCRIPT@ @STYLE@</title>", text)
        self.assertEqual(text.count("<script"), 2)

    def test_empty_snapshot(self):
        data = report_data(self.write(tracemalloc.Snapshot([], 1)))
        self.assertEqual(data["total"], {"size": 0, "count": 0,
                                         "tracebacks": 0})
        self.assertEqual(len(rebuild_tree(data)), 1)

    def test_file_name(self):
        base, snapshot, cache = service_snapshots()
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "report.html")
            htmlreport.write_html(snapshot, path)
            with open(path, encoding="utf-8") as file:
                text = file.read()
            self.assertEqual(text, self.write(snapshot))
            # A path-like object works too.
            import pathlib
            htmlreport.write_html(snapshot, pathlib.Path(path), title="t")
            with open(path, encoding="utf-8") as file:
                self.assertIn("<title>t</title>", file.read())

    def test_deep_traceback(self):
        # Deeper than the recursion limit: the report must not recurse.
        frames = tuple(("deep.py", line) for line in range(3000))
        snapshot = tracemalloc.Snapshot([(0, 10, frames, 3000)], 3000)
        data = report_data(self.write(snapshot))
        # The root, the traceback limit's marker, 3000 frames.
        self.assertEqual(len(rebuild_tree(data)), 3002)

    def test_traceback_limit_marker(self):
        # Tracebacks cut by the limit start under a marker of their own,
        # not where complete tracebacks start.
        main = ("main.py", 1)
        traces = [(0, 100, (("c.py", 3), ("b.py", 2), main), 3),
                  (0, 30, (("b.py", 2), main), 2),
                  (0, 7, (("d.py", 4), ("c.py", 3), ("b.py", 2)), 9)]
        data = report_data(self.write(tracemalloc.Snapshot(traces, 3)))
        boxes = rebuild_tree(data)
        top = {box_path(data, boxes, index): boxes[index]["size"]
               for index in boxes[0]["children"]}
        self.assertEqual(top, {(LIMIT_FRAME,): 107, (main,): 30})
        # With one frame per traceback, no marker.
        traces = [(0, 5, (main,), 1)]
        data = report_data(self.write(tracemalloc.Snapshot(traces, 1)))
        self.assertEqual(data["files"], ["main.py"])

    def test_large_snapshot_stays_small(self):
        # 10^6 traces over 50,000 call paths: the file stays under 5 MB
        # and the graph under its box budget.
        snapshot = large_snapshot()
        text = self.write(snapshot)
        self.assertLess(len(text.encode()), 5_000_000)
        data = report_data(text)
        boxes = rebuild_tree(data)
        others = sum(1 for box in boxes if box["frame"] == -2)
        self.assertLessEqual(len(boxes) - others - 1, htmlreport._MAX_BOXES)
        self.assertEqual(boxes[0]["size"],
                         sum(trace.size for trace in snapshot.traces))


# --------------------------------------------------------------------------
# A minimal WebDriver client (W3C protocol over HTTP, standard library only)

ELEMENT_KEY = "element-6066-11e4-a52e-4f735466cecf"
CHROMIUM_NAMES = ("chromium", "chromium-browser")


class WebDriverError(Exception):
    pass


class WebDriver:
    """One chromedriver process and one headless Chromium session."""

    def __init__(self, chromedriver, chromium):
        # Never send these requests through a proxy from the environment.
        self.opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}))
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [chromedriver, f"--port={port}", "--allowed-ips=127.0.0.1"],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{port}"
        self.session = None
        try:
            self._wait_ready()
            options = {
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1280,900",
                         "--hide-scrollbars", "--force-device-scale-factor=1",
                         "--no-first-run", "--disable-extensions"],
            }
            capabilities = {"alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": options,
                "goog:loggingPrefs": {"browser": "ALL"},
                "timeouts": {"script": 60_000, "pageLoad": 60_000},
            }}
            value = self._request("POST", "/session",
                                  {"capabilities": capabilities})
            self.session = value["sessionId"]
        except BaseException:
            self.quit()
            raise

    def _wait_ready(self):
        deadline = time.monotonic() + 30
        while True:
            try:
                if self._request("GET", "/status").get("ready"):
                    return
            except (OSError, WebDriverError):
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise WebDriverError("chromedriver did not start: "
                                     + self.driver_output())
            time.sleep(0.1)

    def driver_output(self):
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-2000:]

    def _request(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method,
            headers={"Content-Type": "application/json"})
        try:
            with self.opener.open(request, timeout=120) as response:
                reply = json.load(response)
        except urllib.error.HTTPError as exc:
            try:
                reply = json.load(exc)
            except ValueError:
                raise WebDriverError(f"{method} {path}: {exc}") from None
            value = reply.get("value") or {}
            raise WebDriverError(f"{method} {path}: {value.get('error')}: "
                                 f"{value.get('message')}") from None
        return reply.get("value")

    def command(self, method, path, body=None):
        return self._request(method, f"/session/{self.session}{path}", body)

    def open(self, url):
        self.command("POST", "/url", {"url": url})

    def execute(self, script, *args):
        return self.command("POST", "/execute/sync",
                            {"script": script, "args": list(args)})

    def find(self, selector):
        found = self.command("POST", "/element",
                             {"using": "css selector", "value": selector})
        return found[ELEMENT_KEY]

    def click(self, element):
        self.command("POST", f"/element/{element}/click", {})

    def type(self, element, text):
        self.command("POST", f"/element/{element}/value",
                     {"text": text})

    def hover(self, element):
        """Move the mouse over the middle of *element*."""
        self.command("POST", "/actions", {"actions": [{
            "type": "pointer", "id": "mouse",
            "parameters": {"pointerType": "mouse"},
            "actions": [{"type": "pointerMove", "duration": 0,
                         "origin": {ELEMENT_KEY: element},
                         "x": 0, "y": 0}]}]})

    def set_window_size(self, width, height):
        self.command("POST", "/window/rect",
                     {"width": width, "height": height})

    def screenshot(self):
        return base64.b64decode(self.command("GET", "/screenshot"))

    def browser_log(self):
        """Console messages and page errors since the last call."""
        return self.command("POST", "/se/log", {"type": "browser"})

    def quit(self):
        try:
            if self.session is not None:
                self.command("DELETE", "")
        except (OSError, WebDriverError):
            pass
        finally:
            self.session = None
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.log.close()


def find_browser():
    """Return (chromedriver, chromium) paths, or skip saying what is
    missing."""
    chromium = os.environ.get("TRACEMALLOC_TEST_CHROMIUM")
    if not chromium:
        chromium = next(filter(None, map(shutil.which, CHROMIUM_NAMES)),
                        None)
    chromedriver = (os.environ.get("TRACEMALLOC_TEST_CHROMEDRIVER")
                    or shutil.which("chromedriver"))
    missing = []
    if not chromium:
        missing.append("Chromium (Debian package 'chromium')")
    if not chromedriver:
        missing.append("chromedriver (Debian package 'chromium-driver')")
    if missing:
        raise unittest.SkipTest(
            "the browser tests of the HTML report need "
            + " and ".join(missing)
            + "; install them with: apt-get install chromium chromium-driver")
    return chromedriver, chromium


# --------------------------------------------------------------------------
# Tests in the browser

class BrowserTests(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        chromedriver, chromium = find_browser()
        cls.base, cls.snapshot, cls.cache = service_snapshots()
        cls.directory = tempfile.mkdtemp(prefix="tracemalloc-html-")
        try:
            cls.driver = WebDriver(chromedriver, chromium)
        except (OSError, WebDriverError) as exc:
            # Installed but broken is a failure, not a skip: CI installs
            # the browser so that these tests run.
            shutil.rmtree(cls.directory)
            raise RuntimeError(f"cannot start headless Chromium ({chromium}) "
                               f"through {chromedriver}: {exc}") from None

    @classmethod
    def tearDownClass(cls):
        cls.driver.quit()
        shutil.rmtree(cls.directory)

    def load(self, snapshot, name, **kwargs):
        """Write a report, open it, and check that it loaded cleanly."""
        path = os.path.join(self.directory, name)
        htmlreport.write_html(snapshot, path, **kwargs)
        driver = self.driver
        driver.browser_log()            # forget earlier messages
        driver.open("file://" + path)
        ready = driver.execute("return document.body.dataset.ready;")
        self.assertEqual(ready, "true", "the page's script did not finish")
        self.assert_no_errors()
        # Offline: the page fetched nothing (the CSP would also have
        # logged an error for any attempt).
        resources = driver.execute(
            "return performance.getEntriesByType('resource')"
            ".map(e => e.name);")
        self.assertEqual(resources, [])
        return path

    def assert_no_errors(self):
        entries = self.driver.browser_log()
        errors = [entry for entry in entries
                  if entry.get("level") == "SEVERE"]
        self.assertEqual(errors, [], "the page logged errors")

    def test_errors_are_seen(self):
        # The check above can fail: a page with a script error, a
        # console.error() and a request that its CSP blocks.
        path = os.path.join(self.directory, "broken.html")
        with open(path, "w", encoding="utf-8") as file:
            file.write("<!DOCTYPE html><html><head><meta "
                       "http-equiv='Content-Security-Policy' "
                       "content=\"default-src 'none'; "
                       "script-src 'unsafe-inline'\"></head><body>"
                       "<img src='blocked.png'>"
                       "<script>console.error('logged error');"
                       "no_such_function();</script></body></html>")
        self.driver.browser_log()
        self.driver.open("file://" + path)
        messages = " ".join(entry["message"]
                            for entry in self.driver.browser_log()
                            if entry.get("level") == "SEVERE")
        self.assertIn("logged error", messages)
        self.assertIn("no_such_function", messages)
        self.assertIn("blocked.png", messages)

    def boxes(self):
        """The drawn boxes: id, size, depth, pixel geometry, classes."""
        return self.driver.execute("""
            const graph = document.getElementById('graph');
            const origin = graph.getBoundingClientRect();
            return Array.from(graph.querySelectorAll('.box')).map(b => {
              const r = b.getBoundingClientRect();
              return {id: Number(b.dataset.box), size: Number(b.dataset.size),
                      depth: Number(b.dataset.depth),
                      growth: b.dataset.growth === undefined ? null
                              : Number(b.dataset.growth),
                      left: r.left - origin.left, width: r.width,
                      top: r.top - origin.top, cls: b.className,
                      colour: getComputedStyle(b).backgroundColor};
            });""")

    def tree(self):
        """The page's whole tree: parent and size of every box."""
        return self.driver.execute("""
            const r = window.tracemallocReport;
            return {parent: Array.from(r.parent), size: Array.from(r.size),
                    width: document.getElementById('graph').clientWidth};""")

    def test_leaking_sites_and_chains(self):
        # A leak check's sites, with the chains that hold them, drawn above
        # the graph as text (a name from the program is never HTML).
        chain = {"kind": "root", "root_kind": "module", "root": "module app",
                 "steps": [["global _CACHE", "dict"], ["['<b>x</b>']",
                                                       "list"]],
                 "length": 3, "count": 14, "size": 13613,
                 "types": {"list": 1, "bytes": 13}, "refcount": None,
                 "referrers": None,
                 "text": "module app \u2192 global _CACHE (dict) \u2192 "
                         "['<b>x</b>'] \u2192 list"}
        site = {"filename": "app.py", "lineno": 4, "domain": 0,
                "size": 12492, "count": 12, "sizes": [1041] * 12,
                "counts": [1] * 12, "rounds_grown": 12,
                "traceback": [["app.py", 4]],
                "retention": {"chains": [chain], "holders": 2, "count": 14,
                              "reached": 14, "types": chain["types"]}}
        unheld = dict(site, lineno=9, retention=None)
        # A search that failed is said (s38 review, G3's HTML side).
        failed = dict(site, lineno=11, retention=None,
                      retention_error="RuntimeError: <i>boom</i>")
        self.load(self.snapshot, "leaks.html", leaks=[site, unheld, failed])
        lines = self.driver.execute("""
            const section = document.getElementById('leaks-section');
            if (section.hidden) return null;
            return Array.from(section.querySelectorAll('li'),
                li => Array.from(li.children, d => d.textContent));""")
        self.assertEqual(lines, [
            ["app.py:4: grew 12.2 KiB in 12 blocks over 12 measured rounds "
             "(in 12 of them)",
             "held by: module app \u2192 global _CACHE (dict) \u2192 "
             "['<b>x</b>'] \u2192 list",
             "14 objects, 13.3 KiB under it (bytes 13, list 1)",
             "1 more holders not shown"],
            ["app.py:9: grew 12.2 KiB in 12 blocks over 12 measured rounds "
             "(in 12 of them)"],
            ["app.py:11: grew 12.2 KiB in 12 blocks over 12 measured rounds "
             "(in 12 of them)",
             "held by: unknown: the search failed (RuntimeError: "
             "<i>boom</i>)"]])
        self.assertEqual(self.driver.execute(
            "return document.querySelectorAll('#leaks b').length;"), 0)
        # Without leaks=, no section.
        self.load(self.snapshot, "noleaks.html")
        self.assertTrue(self.driver.execute(
            "return document.getElementById('leaks-section').hidden;"))

    def test_boxes_add_up_to_the_total(self):
        self.load(self.snapshot, "sizes.html")
        total = sum(trace.size for trace in self.snapshot.traces)
        prefixes, whole = prefix_totals(self.snapshot)
        tree = self.tree()
        boxes = self.boxes()
        drawn = {box["id"]: box for box in boxes}
        # The root box is the snapshot's total, and spans the graph.
        self.assertEqual(drawn[0]["size"], total)
        self.assertEqual(tree["size"][0], total)
        self.assertAlmostEqual(drawn[0]["width"], tree["width"], delta=1)
        # Each box of the page is the sum of its children plus the bytes
        # allocated by its own line (computed here from the snapshot).
        data = self.driver.execute(
            "return window.tracemallocReport.data;")
        python_boxes = rebuild_tree(data)
        children_sum = [0] * len(tree["size"])
        for index, parent in enumerate(tree["parent"]):
            if parent >= 0:
                children_sum[parent] += tree["size"][index]
        for index, box in enumerate(python_boxes):
            if box["frame"] == -2:
                continue
            path = box_path(data, python_boxes, index)
            self.assertEqual(tree["size"][index], prefixes[path])
            self.assertEqual(children_sum[index] + whole.get(path, 0),
                             tree["size"][index])
        # The top-level boxes add up to the total; those not drawn are
        # thinner than half a pixel.
        top = [index for index, parent in enumerate(tree["parent"])
               if parent == 0]
        self.assertEqual(sum(tree["size"][index] for index in top)
                         + whole.get((), 0), total)
        for index in top:
            if index not in drawn:
                self.assertLess(tree["size"][index] / total * tree["width"],
                                0.5)
        # Widths are proportional to bytes, and siblings do not overlap.
        for box in boxes:
            self.assertAlmostEqual(box["width"],
                                   box["size"] / total * tree["width"],
                                   delta=1.5)
        for depth in {box["depth"] for box in boxes}:
            row = sorted((box for box in boxes if box["depth"] == depth),
                         key=lambda box: box["left"])
            for left, right in zip(row, row[1:]):
                self.assertLessEqual(left["left"] + left["width"],
                                     right["left"] + 1)

    def test_zoom(self):
        self.load(self.snapshot, "zoom.html")
        tree = self.tree()
        boxes = self.boxes()
        # A box with a sibling and children, some levels down.
        candidates = [box for box in boxes
                      if box["depth"] >= 2 and "other" not in box["cls"]
                      and tree["parent"].count(box["id"]) > 0
                      and tree["parent"].count(
                          tree["parent"][box["id"]]) > 1]
        target = max(candidates, key=lambda box: (box["width"] > 40,
                                                  box["depth"]))
        sibling_ids = {index for index, parent in enumerate(tree["parent"])
                       if parent == tree["parent"][target["id"]]}
        sibling_ids.discard(target["id"])
        drawn_siblings = sibling_ids & {box["id"] for box in boxes}
        self.assertTrue(drawn_siblings)

        self.driver.click(self.driver.find(
            f'#graph .box[data-box="{target["id"]}"]'))
        zoomed = self.boxes()
        by_id = {box["id"]: box for box in zoomed}
        self.assertEqual(self.driver.execute(
            "return document.getElementById('graph').dataset.zoomed;"),
            str(target["id"]))
        # The zoomed box spans the graph, its siblings are gone, its
        # ancestors stay above it, and its children widened.
        self.assertAlmostEqual(by_id[target["id"]]["width"], tree["width"],
                               delta=1)
        self.assertFalse(drawn_siblings & set(by_id))
        ancestor = tree["parent"][target["id"]]
        while ancestor >= 0:
            self.assertIn("ancestor", by_id[ancestor]["cls"])
            ancestor = tree["parent"][ancestor]
        children = [box for box in zoomed
                    if tree["parent"][box["id"]] == target["id"]]
        self.assertTrue(children)
        for child in children:
            self.assertAlmostEqual(
                child["width"],
                child["size"] / target["size"] * tree["width"], delta=1.5)
        status = self.driver.execute(
            "return document.getElementById('status').textContent;")
        self.assertIn("zoomed on", status)

        # Clicking the root zooms back out.
        self.driver.click(self.driver.find('#graph .box[data-box="0"]'))
        self.assertEqual({box["id"] for box in self.boxes()},
                         {box["id"] for box in boxes})
        self.assert_no_errors()

    def test_search(self):
        self.load(self.snapshot, "search.html")
        search = self.driver.find("#search")
        # _build_index's dict: one line, reached through one call path.
        needle = "return {record[\"name\"]: record for record in records}"
        self.driver.type(search, needle + "\ue007")     # Enter
        matched = self.driver.execute(
            "return document.getElementById('graph').dataset.matchedBytes;")
        expected = sum(
            trace.size for trace in self.snapshot.traces
            if any(needle in linecache_line(frame)
                   for frame in trace.traceback))
        self.assertGreater(expected, 0)
        self.assertEqual(int(matched), expected)
        marked = [box for box in self.boxes() if "match" in box["cls"]]
        self.assertTrue(marked)
        # A match under a match (the comprehension runs in a frame of its
        # own, on the same line) is not counted twice.
        parent = self.tree()["parent"]
        marked_ids = {box["id"] for box in marked}

        def under_a_match(index):
            index = parent[index]
            while index >= 0:
                if index in marked_ids:
                    return True
                index = parent[index]
            return False
        self.assertEqual(sum(box["size"] for box in marked
                             if not under_a_match(box["id"])), expected)
        status = self.driver.execute(
            "return document.getElementById('status').textContent;")
        self.assertIn("search matches", status)

        # A search nothing matches, then an empty one.
        self.driver.execute("window.tracemallocReport.search(arguments[0]);",
                            "no such thing anywhere")
        self.assertEqual(self.driver.execute(
            "return document.getElementById('graph').dataset.matchedBytes;"),
            "0")
        self.driver.execute("window.tracemallocReport.search('');")
        self.assertFalse([box for box in self.boxes()
                          if "match" in box["cls"]])
        self.assert_no_errors()

    def column_values(self, table, column):
        return self.driver.execute(
            "return Array.from(document.querySelectorAll("
            "'#' + arguments[0] + ' tbody tr:not(.rest)')).map("
            "tr => Number(tr.cells[arguments[1]].dataset.value));",
            table, column)

    def test_tables(self):
        self.load(self.snapshot, "tables.html")
        stats = self.snapshot.statistics("lineno")
        sizes = self.column_values("table-lineno", 1)
        self.assertEqual(sizes, sorted(sizes, reverse=True))
        self.assertEqual(sizes[0], stats[0].size)
        self.assertEqual(len(sizes), len(stats))
        # Sorting by block count, descending then ascending.
        header = self.driver.find('#table-lineno th[data-column="2"]')
        self.driver.click(header)
        counts = self.column_values("table-lineno", 2)
        self.assertEqual(counts, sorted(counts, reverse=True))
        self.driver.click(header)
        counts = self.column_values("table-lineno", 2)
        self.assertEqual(counts, sorted(counts))
        # The other tables.
        for key_type in ("filename", "traceback"):
            self.driver.click(self.driver.find(
                f'.tabs button[data-table="{key_type}"]'))
            sizes = self.column_values(f"table-{key_type}", 1)
            self.assertEqual(sizes[0],
                             self.snapshot.statistics(key_type)[0].size)
        # Clicking a place searches the graph for it.
        self.driver.click(self.driver.find("#table-traceback tbody .find"))
        self.assertTrue(self.driver.execute(
            "return document.getElementById('search').value;"))
        self.assertTrue([box for box in self.boxes()
                         if "match" in box["cls"]])
        self.assert_no_errors()

    def test_diff_view(self):
        self.load(self.snapshot, "diff.html", base=self.base)
        data = self.driver.execute("return window.tracemallocReport.data;")
        python_boxes = rebuild_tree(data)
        base_prefixes, _ = prefix_totals(self.base)
        prefixes, _ = prefix_totals(self.snapshot)
        grew = shrank = 0
        for box in self.boxes():
            if box["id"] == 0 or "other" in box["cls"]:
                continue
            path = box_path(data, python_boxes, box["id"])
            growth = prefixes[path] - base_prefixes.get(path, 0)
            self.assertEqual(box["growth"], growth, path)
            red, green, blue = map(int, re.findall(r"\d+",
                                                   box["colour"])[:3])
            if growth > 0:
                self.assertGreaterEqual(red, blue, path)
                grew += 1
            elif growth < 0:
                self.assertGreater(blue, red, path)
                shrank += 1
        self.assertGreater(grew, 0)
        legend = self.driver.execute(
            "return document.getElementById('legend').textContent;")
        self.assertIn("grew by", legend)
        changes = self.column_values("table-lineno", 4)
        self.assertEqual([abs(change) for change in changes],
                         sorted((abs(change) for change in changes),
                                reverse=True))
        self.assert_no_errors()

    def legend(self):
        return self.driver.execute(
            "return document.getElementById('legend').textContent;")

    def test_legend_names_the_real_changes(self):
        # The legend once gave the biggest change either way as both the
        # biggest growth and the biggest release ("shrank by 10.2 MiB" when
        # nothing shrank).
        base = tracemalloc.Snapshot([(0, 100, (("a.py", 1),), 1)], 5)
        grown = tracemalloc.Snapshot([(0, 100, (("a.py", 1),), 1),
                                      (0, 5000, (("b.py", 2),), 1)], 5)
        self.load(grown, "grew-only.html", base=base)
        self.assertEqual(self.legend(), "unchangedgrew by up to 5000 B")

        base = tracemalloc.Snapshot([(0, 3000, (("a.py", 1),), 1)], 5)
        mixed = tracemalloc.Snapshot([(0, 1000, (("a.py", 1),), 1),
                                      (0, 500, (("b.py", 2),), 1)], 5)
        self.load(mixed, "mixed.html", base=base)
        self.assertEqual(self.legend(), "shrank by up to 2000 B"
                                        "unchangedgrew by up to 500 B")
        self.assert_no_errors()

    def test_hostile_names(self):
        nasty = "</script><img src=x onerror=alert(1)><!--"
        traces = [(0, 4000, ((nasty + ".py", 1), ("<stdin>", 2)), 2),
                  (0, 1000, (("caf\xe9 \u2603.py", 3),), 1)]
        snapshot = tracemalloc.Snapshot(traces, 5)
        self.load(snapshot, "nasty.html", title=nasty)
        self.assertEqual(self.driver.execute("return document.title;"),
                         nasty)
        self.assertEqual(self.driver.execute(
            "return document.querySelectorAll('img').length;"), 0)
        labels = self.driver.execute(
            "return Array.from(document.querySelectorAll('#graph .box'))"
            ".map(b => b.textContent);")
        # The label shows the part after the last slash, as text.
        self.assertTrue(any(label.startswith(nasty.split("/")[-1] + ".py:1")
                            for label in labels), labels)

    def test_command_line(self):
        # python -m tracemalloc run --html, end to end.
        script = os.path.join(self.directory, "leaky.py")
        with open(script, "w", encoding="utf-8") as file:
            file.write("kept = []\n"
                       "def remember(number):\n"
                       "    kept.append(str(number) * 50)  # the leak\n"
                       "for number in range(2000):\n"
                       "    remember(number)\n")
        path = os.path.join(self.directory, "cli.html")
        assert_python_ok("-m", "tracemalloc", "run", "--html", path, script)
        self.driver.browser_log()
        self.driver.open("file://" + path)
        self.assertEqual(
            self.driver.execute("return document.body.dataset.ready;"),
            "true")
        self.assert_no_errors()
        index, element = self.box_with_text("kept.append(str(number) * 50)")
        size = self.tree()["size"][index]
        self.assertGreaterEqual(size, 2000 * 100)

    def test_large_report(self):
        # 10^6 traces: what the page gets is bounded by the aggregation.
        snapshot = large_snapshot()
        path = self.load(snapshot, "large.html")
        self.assertLess(os.path.getsize(path), 5_000_000)
        timing = self.driver.execute("""
            const n = performance.getEntriesByType('navigation')[0];
            return {load: n.loadEventEnd - n.startTime,
                    render: Number(document.getElementById('graph')
                                   .dataset.renderMs),
                    drawn: Number(document.getElementById('graph')
                                  .dataset.drawn)};""")
        self.assertGreater(timing["drawn"], 100)
        if os.environ.get("TRACEMALLOC_HTML_TIMING"):
            print(f"\n10^6-trace report: {os.path.getsize(path)} bytes, "
                  f"page loaded in {timing['load']:.0f} ms, graph drawn in "
                  f"{timing['render']:.0f} ms ({timing['drawn']} boxes)")

    def box_with_text(self, text):
        """The element of the biggest drawn box whose label has *text*."""
        index = self.driver.execute("""
            const boxes = Array.from(document.querySelectorAll('#graph .box'))
              .filter(b => b.textContent.includes(arguments[0]));
            boxes.sort((a, b) => b.dataset.size - a.dataset.size);
            return boxes.length ? Number(boxes[0].dataset.box) : null;""",
            text)
        self.assertIsNotNone(index, f"no box labelled {text!r}")
        return index, self.driver.find(f'#graph .box[data-box="{index}"]')

    def test_tooltip(self):
        self.load(self.snapshot, "tooltip.html", base=self.base)
        index, element = self.box_with_text("_serve(cache, 10)")
        self.driver.hover(element)
        tooltip = self.driver.execute("""
            const t = document.getElementById('tooltip');
            return t.hidden ? null : t.textContent;""")
        self.assertIsNotNone(tooltip)
        size = self.tree()["size"][index]
        self.assertIn(":" + str(_serve_call_line()), tooltip)
        self.assertIn("_serve(cache, 10)", tooltip)
        self.assertIn("size: ", tooltip)
        self.assertIn("change: +", tooltip)
        self.assertGreater(size, 0)

    def test_screenshot(self):
        self.driver.set_window_size(1200, 820)
        try:
            self.load(self.snapshot, "screenshot.html", base=self.base,
                      title="tracemalloc report: 10 requests more")
            # Zoom on the service's requests, and hover the biggest grower.
            index, element = self.box_with_text("_serve(cache, 10)")
            self.driver.click(element)
            index, element = self.box_with_text("_make_record(index)")
            self.driver.hover(element)
            png = self.driver.screenshot()
        finally:
            self.driver.set_window_size(1280, 900)
        self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n")
        width = int.from_bytes(png[16:20], "big")
        height = int.from_bytes(png[20:24], "big")
        self.assertGreater(width, 500)
        self.assertGreater(height, 300)
        keep = os.environ.get("TRACEMALLOC_HTML_SCREENSHOT")
        if keep:
            with open(keep, "wb") as file:
                file.write(png)
        self.assert_no_errors()


def _serve_call_line():
    """The line of work() in service_snapshots() that calls _serve(.., 10)."""
    import inspect
    lines, first = inspect.getsourcelines(service_snapshots)
    for offset, line in enumerate(lines):
        if "_serve(cache, 10)" in line:
            return first + offset
    raise AssertionError("line not found")


def linecache_line(frame):
    import linecache
    return linecache.getline(frame.filename, frame.lineno)


if __name__ == "__main__":
    unittest.main()
