"""Tests of the command line, python -m tracemalloc, as its user sees it.

That its reports, in text and in HTML, show the target's call paths and
not the tool's own frames (runpy, the command line, the leak checker, the
import of the target); that every traceback it prints says its order; that
--html does not change the text report; that leaks says which round it is
in when the check is slow; that diff --fail-over gives its verdict either
way; that leaks accepts module:Class.method.

Every command runs in a child interpreter that imports the tracemalloc
package under test (tests may run from a source tree).
"""

import json
import os
import re
import select
import subprocess
import sys
import textwrap
import time
import tracemalloc
import unittest

from test.support import os_helper

PACKAGE_DIRECTORY = os.path.dirname(os.path.abspath(tracemalloc.__file__))
LIB_DIRECTORY = os.path.dirname(PACKAGE_DIRECTORY)

# A site line of a leak report: FILE:LINE: size=..., count=... per round
SITE_LINE = re.compile(r"^(?P<file>.+):(?P<line>\d+): size=\S+ \S+, "
                       r"count=\S+ per round")
# A progress line of leaks: tracemalloc: TARGET: round N of T (...), ...
PROGRESS_LINE = re.compile(r"tracemalloc: (?P<target>.+): round "
                           r"(?P<round>\d+) of (?P<total>\d+) "
                           r"\((?P<phase>warm-up|measured) (?P<phase_round>"
                           r"\d+) of (?P<phase_total>\d+)\), "
                           r"(?P<elapsed>[\d.]+) s elapsed")
TRACEBACK_HEADING = "Traceback (most recent call first):"
LIMIT_FRAME = ("<older calls beyond the traceback limit>", 0)
FILE_LINE = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)')

# Frames that a report must not show: the tool's (see the module's doc).
# The import system's frames may appear, below the target's import lines,
# never above the target's code.
TOOL_FRAME_FILES = ("<frozen runpy>",)


def child_env(**extra):
    env = dict(os.environ)
    paths = [LIB_DIRECTORY]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    # The tool's own start of tracing is under test.
    env.pop("PYTHONTRACEMALLOC", None)
    env.update(extra)
    return env


def is_tool_file(filename):
    return (filename in TOOL_FRAME_FILES
            or os.path.basename(filename) == "runpy.py"
            or os.path.dirname(os.path.abspath(filename))
            == PACKAGE_DIRECTORY)


def traceback_files(text):
    """(file, line) of every 'File "...", line N' line of *text*."""
    found = []
    for line in text.splitlines():
        match = FILE_LINE.match(line)
        if match:
            found.append((match["file"], int(match["line"])))
    return found


def report_data(path):
    """The JSON data that an HTML report embeds."""
    with open(path, encoding="utf-8") as file:
        text = file.read()
    match = re.search(r'<script type="application/json" id="report-data">'
                      r'(.*?)</script>', text, re.S)
    return json.loads(match.group(1))


def graph_paths(data):
    """The call path, oldest frame first, of every box of a report's graph
    that is not the root or an "other" box: tuples of (file, line)."""
    stride = data["tree"]["stride"]
    values = data["tree"]["values"]
    paths = []
    open_boxes = []         # [path, children still to come]
    for index in range(len(values) // stride):
        frame_index, size, count, nchildren = values[
            index * stride:index * stride + 4]
        parent = open_boxes[-1][0] if open_boxes else None
        if open_boxes:
            open_boxes[-1][1] -= 1
            if open_boxes[-1][1] == 0:
                open_boxes.pop()
        if parent is None:
            path = ()
        elif frame_index < 0:
            path = parent + (("<other>", 0),)
        else:
            filename_index, lineno, _ = data["frames"][frame_index]
            path = parent + ((data["files"][filename_index], lineno),)
            paths.append(path)
        if nchildren:
            open_boxes.append([path, nchildren])
    return paths


class CLITestCase(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.directory = self.enterContext(os_helper.temp_dir())

    def path(self, name):
        return os.path.join(self.directory, name)

    def script(self, name, source):
        path = self.path(name)
        with open(path, "w", encoding="utf-8") as file:
            file.write(textwrap.dedent(source))
        return path

    def cli(self, *args, **env):
        """Run python -m tracemalloc ARGS; return (status, stdout, stderr)."""
        process = subprocess.run(
            [sys.executable, "-X", "utf8", "-m", "tracemalloc", *args],
            cwd=self.directory, env=child_env(**env),
            stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=300)
        return process.returncode, process.stdout, process.stderr

    def assertGraphStartsAt(self, data, filename, call_line=False):
        """The top row of a report's graph is *filename*'s code (or the
        marker of tracebacks cut by the limit): no frame of the tool is
        above the target's.  With *call_line*, a lone box of the leak
        checker's call line is allowed: what a C callable called directly
        as the workload allocates is on that line."""
        paths = graph_paths(data)
        self.assertTrue(paths)
        tops = {path[0][0] for path in paths}
        self.assertIn(filename, tops)
        for path in paths:
            if (call_line and len(path) == 1
                    and os.path.dirname(path[0][0]) == PACKAGE_DIRECTORY):
                continue
            self.assertIn(path[0][0], (filename, LIMIT_FRAME[0]), path)
            self.assertNoToolFrames(
                [frame for frame in path if frame != LIMIT_FRAME], path)

    def assertNoToolFrames(self, frames, text=""):
        tool = [frame for frame in frames if is_tool_file(frame[0])]
        self.assertEqual(tool, [], text)


# --------------------------------------------------------------------------
# run

class RunTests(CLITestCase):
    LEAKY = """\
        import json

        kept = []


        def remember(number):
            kept.append(json.dumps({"n": number, "body": "x" * 100}))


        for number in range(2000):
            remember(number)
    """
    LEAK_LINE = 7
    CALL_LINE = 11

    def report_sites(self, err):
        """Header and site lines ("#N: FILE:LINE: ...") of a run report."""
        header = [line for line in err.splitlines()
                  if line.startswith("tracemalloc: memory allocated by")]
        sites = [line.split(": size=")[0].split(": ", 1)[1]
                 for line in err.splitlines() if re.match(r"#\d+: ", line)]
        return header, sites

    def test_html_does_not_change_the_text_report(self):
        # The tool imported the report's modules (json) before the target
        # ran: the target's import of json then cost nothing.
        script = self.script("leaky.py", self.LEAKY)
        rc, out, plain = self.cli("run", "--top", "1000", script)
        self.assertEqual(rc, 0, plain)
        rc, out, with_html = self.cli("run", "--top", "1000", "--html",
                                      self.path("report.html"), script)
        self.assertEqual(rc, 0, with_html)
        plain_header, plain_sites = self.report_sites(plain)
        html_header, html_sites = self.report_sites(with_html)
        self.assertEqual(len(plain_header), 1, plain)
        self.assertEqual(plain_header, html_header)
        self.assertEqual(sorted(plain_sites), sorted(html_sites))
        # json's own sites are the target's, as it imported json.
        self.assertTrue(any("json" in site for site in plain_sites), plain)

    def test_group_by_traceback(self):
        script = self.script("leaky.py", self.LEAKY)
        rc, out, err = self.cli("run", "--group-by", "traceback",
                                "--top", "1", script)
        self.assertEqual(rc, 0, err)
        lines = err.splitlines()
        first = next(index for index, line in enumerate(lines)
                     if line.startswith("#1: "))
        self.assertEqual(lines[first + 1].strip(), TRACEBACK_HEADING, err)
        frames = traceback_files(err)
        self.assertNoToolFrames(frames, err)
        # Most recent call first: json's encoder, then remember(), then
        # the module-level loop that calls it, last.
        script_frames = [frame for frame in frames if frame[0] == script]
        self.assertEqual(script_frames, [(script, self.LEAK_LINE),
                                         (script, self.CALL_LINE)], err)
        self.assertEqual(frames[-1], (script, self.CALL_LINE), err)

    def test_top_of_a_run_snapshot_agrees_with_run(self):
        script = self.script("leaky.py", self.LEAKY)
        snapshot = self.path("run.snap")
        rc, out, err = self.cli("run", "--group-by", "traceback", "--top",
                                "1", "-o", snapshot, script)
        self.assertEqual(rc, 0, err)
        run_frames = traceback_files(err)
        rc, out, top_err = self.cli("top", "--group-by", "traceback",
                                    "--limit", "1", snapshot)
        self.assertEqual(rc, 0, top_err)
        self.assertIn("#1: size=", out)
        self.assertEqual(out.splitlines()[2].strip(), TRACEBACK_HEADING, out)
        top_frames = traceback_files(out)
        self.assertNoToolFrames(top_frames, out)
        self.assertEqual(top_frames, run_frames, f"{err}\n{out}")

    def test_html_report_shows_the_target_first(self):
        script = self.script("leaky.py", self.LEAKY)
        report = self.path("report.html")
        rc, out, err = self.cli("run", "--html", report, script)
        self.assertEqual(rc, 0, err)
        self.assertGraphStartsAt(report_data(report), script)


# --------------------------------------------------------------------------
# top and diff

def write_snapshots(path):
    """Write two snapshot files, old.snap and new.snap (*path(name)* is
    where each goes), the second with 5000 more bytes; return their
    paths."""
    frames_a = (("a.py", 1),)
    frames_b = (("b.py", 2), ("a.py", 7))
    old = tracemalloc.Snapshot([(0, 100, frames_a, 1),
                                (0, 1000, frames_b, 2)], 5)
    new = tracemalloc.Snapshot([(0, 100, frames_a, 1),
                                (0, 1000, frames_b, 2),
                                (0, 5000, frames_b, 2)], 5)
    old_path, new_path = path("old.snap"), path("new.snap")
    old.dump(old_path)
    new.dump(new_path)
    return old_path, new_path


class SnapshotFileTests(CLITestCase):
    def make_snapshots(self):
        return write_snapshots(self.path)

    def test_fail_over_verdict(self):
        old_path, new_path = self.make_snapshots()
        rc, out, err = self.cli("diff", "--fail-over", "5000", old_path,
                                new_path)
        self.assertEqual(rc, 0, err)
        self.assertEqual(err.splitlines(), [
            "python -m tracemalloc diff: total growth +5000 B (5000 bytes) "
            "is within the limit of 5000 bytes"])
        rc, out, err = self.cli("diff", "--fail-over", "4999", old_path,
                                new_path)
        self.assertEqual(rc, 1, err)
        self.assertEqual(err.splitlines(), [
            "python -m tracemalloc diff: total growth +5000 B (5000 bytes) "
            "is over the limit of 4999 bytes"])
        # Without --fail-over there is no verdict to give.
        rc, out, err = self.cli("diff", old_path, new_path)
        self.assertEqual((rc, err), (0, ""))

    def test_traceback_listings_say_their_order(self):
        old_path, new_path = self.make_snapshots()
        for args in (("top", new_path), ("diff", old_path, new_path)):
            with self.subTest(command=args[0]):
                rc, out, err = self.cli(*args, "--group-by", "traceback")
                self.assertEqual(rc, 0, err)
                lines = out.splitlines()
                self.assertTrue(lines[1].startswith("#1: size=6000 B"), out)
                self.assertEqual(lines[2].strip(), TRACEBACK_HEADING, out)
                self.assertEqual(traceback_files("\n".join(lines[:5])),
                                 [("b.py", 2), ("a.py", 7)], out)


# --------------------------------------------------------------------------
# leaks

class LeaksTargetTests(CLITestCase):
    CLASSES = """\
        class Cache:
            def __init__(self):
                self.entries = []

            def remember(self):
                self.entries.append(bytes(300))         # the leak

            def look(self):
                return len(self.entries)

            @staticmethod
            def static_leak():
                _static.append(bytes(300))              # static leak

            @classmethod
            def class_leak(cls):
                cls.kept.append(bytes(300))             # class leak

            kept = []

            class Inner:
                def remember(self):
                    _static.append(bytes(300))          # inner leak


        _static = []


        class NeedsArgument:
            def __init__(self, argument):
                pass

            def run(self):
                pass
    """

    def first_site(self, err):
        for line in err.splitlines():
            match = SITE_LINE.match(line)
            if match:
                return match["file"], int(match["line"])
        return None

    def test_class_method(self):
        module = self.script("classes.py", self.CLASSES)
        for target, line in [("classes:Cache.remember", 6),
                             ("classes:Cache.static_leak", 13),
                             ("classes:Cache.class_leak", 17),
                             ("classes:Cache.Inner.remember", 23)]:
            with self.subTest(target=target):
                rc, out, err = self.cli("leaks", target)
                self.assertEqual(rc, 1, err)
                self.assertEqual(self.first_site(err), (module, line), err)
        rc, out, err = self.cli("leaks", "classes:Cache.look")
        self.assertEqual(rc, 0, err)

    def test_class_needs_arguments(self):
        self.script("classes.py", self.CLASSES)
        rc, out, err = self.cli("leaks", "classes:NeedsArgument.run")
        self.assertEqual(rc, 2, err)
        self.assertIn("usage: python -m tracemalloc leaks", err)
        self.assertIn("NeedsArgument", err)
        self.assertIn("without arguments", err)

    def test_html_report_shows_the_target_first(self):
        self.script("helper.py", """\
            import json

            kept = []


            def grow():
                kept.append(json.dumps({"body": "x" * 200}))
        """)
        script = self.script("slow_import.py", """\
            import helper
            import json

            helper.grow()
        """)
        for target, top_file in [(script, script),
                                 ("helper:grow", self.path("helper.py"))]:
            with self.subTest(target=target):
                report = self.path("leaks.html")
                rc, out, err = self.cli("leaks", "--html", report,
                                        target)
                self.assertEqual(rc, 1, err)
                self.assertGraphStartsAt(report_data(report), top_file,
                                         call_line=True)


class LeaksProgressTests(CLITestCase):
    # Each round takes 0.6 s: the check (three rounds) takes more than a
    # second, and says so from its second round on.
    SLOW = """\
        import time
        time.sleep(0.6)
    """
    SLOW_LEAK = """\
        import sys, time
        time.sleep(0.6)
        kept = sys.modules["time"].__dict__.setdefault("_kept", [])
        kept.append(bytes(5000))
    """

    def progress(self, err):
        return [PROGRESS_LINE.fullmatch(line) for line in err.splitlines()
                if line.startswith("tracemalloc: ")
                and " round " in line and "elapsed" in line]

    def test_one_line_per_round_when_not_a_terminal(self):
        script = self.script("slow.py", self.SLOW)
        rc, out, err = self.cli("leaks", "--warmup", "1", "--rounds", "2",
                                script)
        self.assertEqual(rc, 0, err)
        lines = self.progress(err)
        self.assertNotIn(None, lines, err)
        self.assertNotIn("\r", err)
        self.assertGreaterEqual(len(lines), 2, err)
        rounds = [int(match["round"]) for match in lines]
        # One line per round, in order, the last one to the end.
        self.assertEqual(rounds, sorted(set(rounds)), err)
        self.assertEqual(rounds[-1], 3, err)
        last = lines[-1]
        self.assertEqual((last["target"], last["total"], last["phase"],
                          last["phase_round"], last["phase_total"]),
                         (script, "3", "measured", "2", "2"))
        self.assertGreaterEqual(float(lines[0]["elapsed"]), 1.0)
        # Then the verdict, which the progress did not change: the thread
        # that watches the clock is not a leak.
        self.assertIn("no allocation site grew", err.splitlines()[-1])

    def test_slow_leak_is_still_found(self):
        script = self.script("slow_leak.py", self.SLOW_LEAK)
        rc, out, err = self.cli("leaks", "--warmup", "1", "--rounds", "3",
                                script)
        self.assertEqual(rc, 1, err)
        self.assertTrue(self.progress(err), err)
        sites = [line for line in err.splitlines() if SITE_LINE.match(line)]
        self.assertEqual(len(sites), 1, err)
        self.assertTrue(sites[0].startswith(f"{script}:4: "), err)

    def test_fast_check_says_nothing(self):
        module = self.script("fast.py", "def run():\n    pass\n")
        rc, out, err = self.cli("leaks", "--warmup", "0", "--rounds", "1",
                                "fast:run")
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertIn("no allocation site grew", err)

    def test_quiet(self):
        script = self.script("slow.py", self.SLOW)
        rc, out, err = self.cli("leaks", "-q", "--warmup", "1", "--rounds",
                                "1", script)
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.progress(err), [], err)
        self.assertEqual(len(err.splitlines()), 1, err)

    def test_status_line_on_a_terminal(self):
        try:
            import pty
        except ImportError:
            self.skipTest("needs the pty module")
        script = self.script("slow.py", self.SLOW)
        master, slave = pty.openpty()
        try:
            process = subprocess.Popen(
                [sys.executable, "-X", "utf8", "-m", "tracemalloc", "leaks",
                 "--warmup", "1", "--rounds", "2", script],
                cwd=self.directory, env=child_env(TERM="dumb"),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=slave)
        finally:
            os.close(slave)
        chunks = []
        deadline = time.monotonic() + 300
        try:
            while time.monotonic() < deadline:
                ready, _, _ = select.select([master], [], [], 1)
                if not ready:
                    if process.poll() is not None:
                        break
                    continue
                try:
                    chunk = os.read(master, 4096)
                except OSError:         # EIO: the child closed the pty
                    break
                if not chunk:
                    break
                chunks.append(chunk)
            rc = process.wait(timeout=60)
        finally:
            os.close(master)
        output = b"".join(chunks).decode()
        self.assertEqual(rc, 0, output)
        # Status lines rewritten in place: each starts with a carriage
        # return and clears the rest of the line; no newline between them.
        status = re.findall(r"\r(tracemalloc: [^\r\n]*?)\x1b\[K", output)
        self.assertTrue(status, repr(output))
        for text in status:
            self.assertIsNotNone(PROGRESS_LINE.fullmatch(text), text)
        self.assertIn("round 3 of 3 (measured 2 of 2)", status[-1])
        # The line is erased before the report, which starts at column 0.
        report = output.index("tracemalloc: " + script + ": no allocation")
        self.assertEqual(output[report - 4:report], "\r\x1b[K")
        self.assertNotIn("\n", output[:report])


if __name__ == "__main__":
    unittest.main()
