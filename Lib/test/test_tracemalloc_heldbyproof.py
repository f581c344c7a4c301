"""What held-by says about a site's live blocks that no object it can see
is.

An object that only C code keeps (a reference leaked by an extra
Py_IncRef()) is not listed by the collector and no container or frame
refers to it: the search from the objects alone never sees it, though the
engine knows its block.  The search takes such a block for an object only
when its layout proves it one (bytes, str, int, float, complex), and says
"kept by C code or a refcount leak" only when no live memory of the
interpreter holds its address.  Everything else is said as what it is:
a block not proven an object, an object whose address memory the search
cannot follow holds (a range's bounds, an untracked tuple's items), an
immortal or interned one, one that another interpreter may own.  Blocks
laid out like object headers are never read through.
"""

import json
import os
import sys
import textwrap
import unittest

from test.support import os_helper, script_helper

try:
    import ctypes
except ImportError:
    ctypes = None

C_KEPT = "kept by C code or a refcount leak"


def pymalloc():
    """Whether the object allocator is pymalloc (the untraced memory is
    searched only then; a sanitizer build uses malloc())."""
    for name in ("_testinternalcapi", "_testcapi"):
        try:
            module = __import__(name)
        except ImportError:
            continue
        if hasattr(module, "pymem_getallocatorsname"):
            return module.pymem_getallocatorsname().startswith("pymalloc")
    return True


def line_of(source, mark):
    """The line number (from 1) of the line of SOURCE ending with MARK."""
    for lineno, line in enumerate(source.splitlines(), 1):
        if line.rstrip().endswith(mark):
            return lineno
    raise ValueError(mark)


# The script's prelude: report(mark) prints the held-by of the line
# ending with MARK as JSON.
PRELUDE = """\
import ctypes, gc, json, sys, tracemalloc
from tracemalloc import retention
SOURCE = open(__file__, encoding="utf-8").read().splitlines()
def line_of(mark):
    for n, text in enumerate(SOURCE, 1):
        if text.rstrip().endswith(mark) and "line_of" not in text:
            return n
    raise ValueError(mark)
def report(mark, max_chains=5):
    r = retention.site_retention((__file__, line_of(mark)),
                                 max_chains=max_chains)
    print(json.dumps({"mark": mark,
                      "chains": [c.as_dict() for c in r.chains],
                      "text": [str(c) for c in r.chains] or [r.no_chain()],
                      "unseen": getattr(r, "unseen", []),
                      "holders": r.holders}))
incref = ctypes.pythonapi.Py_IncRef
incref.argtypes = [ctypes.py_object]
tracemalloc.start(1)
"""


@unittest.skipIf(ctypes is None, "needs ctypes")
class HeldByProofTest(unittest.TestCase):

    def run_script(self, body):
        directory = self.enterContext(os_helper.temp_dir())
        path = os.path.join(directory, "heldby_script.py")
        with open(path, "w", encoding="utf-8") as file:
            file.write(PRELUDE + textwrap.dedent(body))
        res = script_helper.assert_python_ok(path)
        reports = {}
        for line in res.out.decode().splitlines():
            if line.startswith("{"):
                data = json.loads(line)
                reports[data["mark"]] = data
        return reports

    def assertNoCKept(self, data):
        for text in data["text"]:
            self.assertNotIn(C_KEPT, text, data)
        for group in data["unseen"]:
            self.assertNotEqual(group["kind"], "c-kept", data)

    def assertCKept(self, data, type_name, count, refcount=1):
        if not pymalloc():
            # Under malloc() only the traced memory is searched: said so,
            # never C code.
            self.assertNoCKept(data)
            self.assertEqual(
                sum(group["count"] for group in data["unseen"]
                    if group["kind"] == "unscanned"
                    and group["type"] == type_name), count, data)
            return
        chains = [chain for chain in data["chains"]
                  if chain["kind"] == "no-referrer"]
        self.assertEqual(len(chains), 1, data)
        chain = chains[0]
        self.assertEqual(chain["refcount"], refcount, data)
        self.assertEqual(chain["referrers"], 0, data)
        # The search for the objects' addresses reads memory in use that
        # may keep a stale copy of the last one's (a freed ctypes argument
        # whose block was reused): that one is then said to be referred
        # to, never kept by C code without a check.
        stale = sum(group["count"] for group in data["unseen"]
                    if group["kind"] == "referred"
                    and group["type"] == type_name)
        self.assertLessEqual(stale, 1, data)
        self.assertEqual(chain["count"] + stale, count, data)
        self.assertEqual(chain["types"], {type_name: chain["count"]}, data)
        self.assertEqual(
            chain["text"],
            f"no Python referrer (refcount {refcount}, 0 referrer(s) found: "
            f"{C_KEPT}) \u2192 {type_name}", data)

    # ---- objects only C code keeps: found, with type and refcount --------

    def test_incref_bytes(self):
        reports = self.run_script("""\
            for i in range(5):
                incref(bytes(range(i, 200)))                 # BYTES
            for i in range(3):
                b = bytes(range(i, 90))                      # TWICE
                incref(b); incref(b)
            del b
            gc.collect()
            report("# BYTES"); report("# TWICE")
            """)
        self.assertCKept(reports["# BYTES"], "bytes", 5)
        self.assertCKept(reports["# TWICE"], "bytes", 3, refcount=2)

    def test_incref_leaf_types(self):
        # str of every kind and length (a compact str shorter than str's
        # basic size included), ints of one digit and of many (an
        # arithmetic result keeps a spare digit), complex.
        reports = self.run_script("""\
            for i in range(4):
                incref("a" * (3 + i))                        # ASCII
                incref("\\xe9" * (30 + i))                   # LATIN1
                incref("\\u20ac" * (3 + i))                  # UCS2
                incref("\\U0001F600" * (30 + i))             # UCS4
                incref(-(10**5) - i)                         # SMALLINT
                incref(10**40 + i)                           # BIGINT
                incref(complex(i, 2.5))                      # COMPLEX
            for mark in ("ASCII", "LATIN1", "UCS2", "UCS4", "SMALLINT",
                         "BIGINT", "COMPLEX"):
                report("# " + mark)
            """)
        for mark, type_name in [("ASCII", "str"), ("LATIN1", "str"),
                                ("UCS2", "str"), ("UCS4", "str"),
                                ("SMALLINT", "int"), ("BIGINT", "int"),
                                ("COMPLEX", "complex")]:
            with self.subTest(mark):
                self.assertCKept(reports["# " + mark], type_name, 4)

    def test_cli(self):
        directory = self.enterContext(os_helper.temp_dir())
        source = textwrap.dedent("""\
            import ctypes

            def work():
                for i in range(20):
                    b = bytes(range(i % 7, 200))    # LEAKED
                    ctypes.pythonapi.Py_IncRef(ctypes.py_object(b))
            """)
        with open(os.path.join(directory, "increfleak.py"), "w",
                  encoding="utf-8") as file:
            file.write(source)
        res = script_helper.assert_python_failure(
            "-m", "tracemalloc", "leaks", "-q", "increfleak:work",
            __cwd=directory)
        report = res.err.decode()
        path = os.path.join(directory, "increfleak.py")
        self.assertIn(f"{path}:{line_of(source, '# LEAKED')}:", report)
        held = [line.strip() for line in report.splitlines()
                if "held by:" in line]
        self.assertTrue(held, report)
        if not pymalloc():
            self.assertNotIn(C_KEPT, report)
            self.assertIn("bytes objects", held[0], report)
            self.assertIn("the untraced memory was not searched", held[0],
                          report)
            return
        self.assertEqual(
            held[0],
            f"held by: no Python referrer (refcount 1, 0 referrer(s) found: "
            f"{C_KEPT}) \u2192 bytes", report)

    # ---- never C code where the search did not check ---------------------

    def test_holders_the_collector_does_not_follow(self):
        # A range's bounds, a timezone's offset, the bytes of tuples that
        # C code keeps (taken from a free list: untraced), bytes held by a
        # tuple of another line: held, not kept by C code.
        reports = self.run_script("""\
            import datetime
            KEEP = []
            for i in range(4):
                KEEP.append(range(10**20 + i, 10**30 + 7 * i))    # RANGE
                KEEP.append(datetime.timezone(
                    datetime.timedelta(hours=1, minutes=i)))     # TZ
            for i in range(4):
                b = bytes(range(i, 200))                         # ELSEWHERE
                incref((b, None))
                incref((bytes(range(i, 100)), bytes(range(i, 120))))  # PAIR
            del b
            gc.collect()
            for mark in ("RANGE", "TZ", "ELSEWHERE", "PAIR"):
                report("# " + mark)
            """)
        for mark in ("RANGE", "TZ", "ELSEWHERE", "PAIR"):
            with self.subTest(mark):
                self.assertNoCKept(reports["# " + mark])
        # What is checked is said: memory the search cannot follow holds
        # the bytes.
        for mark in ("ELSEWHERE", "PAIR"):
            kinds = {g["kind"] for g in reports["# " + mark]["unseen"]}
            # PAIR's tuples, which the collector no longer lists, are
            # blocks whose head names tuple: not proven, not read.
            if pymalloc():
                self.assertIn("referred", kinds, reports["# " + mark])
                self.assertLessEqual(kinds, {"referred", "block"},
                                     reports["# " + mark])
            else:
                self.assertTrue(kinds, reports["# " + mark])
                self.assertLessEqual(kinds, {"referred", "block",
                                             "unscanned"},
                                     reports["# " + mark])

    def test_code_constants(self):
        reports = self.run_script("""\
            FUNCS = []
            for i in range(5):
                FUNCS.append(eval(f"lambda x: (x, {i}, 'a fairly long "
                                  f"constant for number {i}')"))  # CONSTS
            gc.collect()
            report("# CONSTS")
            """)
        self.assertNoCKept(reports["# CONSTS"])

    def test_immortal_and_interned(self):
        reports = self.run_script("""\
            for i in range(5):
                eval(f"lambda: some_global_name_{i}_x")           # NAMES
            KEPT = [sys.intern("dyn_interned_%d_" % i * 3)
                    for i in range(5)]                            # INTERNED
            for i in range(5):
                incref(sys.intern("leaked_interned_%d_" % i * 3))  # LEAKINT
            gc.collect()
            report("# NAMES"); report("# INTERNED"); report("# LEAKINT")
            """)
        for mark in ("NAMES", "INTERNED", "LEAKINT"):
            with self.subTest(mark):
                self.assertNoCKept(reports["# " + mark])

    def test_other_interpreter(self):
        try:
            import _interpreters
        except ImportError:
            try:
                import _xxsubinterpreters
            except ImportError:
                self.skipTest("no subinterpreters")
        reports = self.run_script("""\
            try:
                import _interpreters as I
                make = lambda: I.create("legacy")
                run = I.exec
            except ImportError:
                import _xxsubinterpreters as I
                make = I.create
                run = I.run_string
            for i in range(3):
                incref(b"k" * (60 + i))                           # MAIN
            report("# MAIN")
            interp = make()
            # Objects another interpreter keeps, traced at a line of the
            # same name: never this interpreter's C code.
            run(interp, '''if 1:
                src = "KEEP = []\\\\ndef work():\\\\n    for i in range(5):\\\\n        KEEP.append(b'payload %d ' % i * 10)\\\\n"
                ns = {}
                exec(compile(src, "<shared>", "exec"), ns)
                ns["work"]()
                ''')
            r = retention.site_retention(("<shared>", 4), max_chains=5)
            print(json.dumps({"mark": "SHARED", "chains": [],
                              "text": [str(c) for c in r.chains]
                                      or [r.no_chain()],
                              "unseen": getattr(r, "unseen", []),
                              "holders": r.holders}))
            report("# MAIN")
            """)
        self.assertNoCKept(reports["SHARED"])
        self.assertTrue(reports["SHARED"]["unseen"], reports["SHARED"])
        # Once another interpreter runs, an object no memory of this one
        # refers to may be its: said so, not C code.
        data = reports["# MAIN"]
        self.assertNoCKept(data)
        self.assertEqual([g["kind"] for g in data["unseen"]],
                         ["other-interpreter" if pymalloc() else "unscanned"],
                         data)

    # ---- blocks laid out like headers: never read through ----------------

    def test_fake_headers(self):
        # Buffers whose first words name a tuple (with a garbage item), a
        # float, or a bytes object of exactly the buffer's size, held by
        # Python containers and then only by C code: no crash, and no
        # buffer taken for an object kept by C code.
        reports = self.run_script("""\
            import struct, array
            KEEP = []
            tup = struct.pack("QQQQQQ", 0, 0, 1, id(tuple), 1,
                              0x4141414141414140)
            flt = struct.pack("QQ", 1, id(float)) + bytes(16)
            for i in range(4):
                KEEP.append(bytearray(tup))                      # TUPLE
                KEEP.append(bytearray(flt))                      # FLOAT
                size = 100 + i
                fake = struct.pack("qQqq", 1, id(bytes), size - 32, -1)
                fake += b"A" * (size - 32)
                ba = bytearray()
                KEEP.append(ba)
                ba.extend(fake)                                  # BUFFER
                a = array.array("B", b"x" * 10)
                KEEP.append(a)
                a.frombytes(fake + b"\\0")                       # ARRAY
            del ba, a
            for mark in ("TUPLE", "FLOAT", "BUFFER", "ARRAY"):
                report("# " + mark)
            for obj in KEEP:
                incref(obj)
            KEEP.clear()
            del obj
            gc.collect()
            for mark in ("TUPLE", "FLOAT", "BUFFER", "ARRAY"):
                report("# " + mark)
            print("done")
            """)
        for mark in ("TUPLE", "FLOAT", "BUFFER", "ARRAY"):
            with self.subTest(mark):
                data = reports["# " + mark]
                for group in data["unseen"]:
                    self.assertNotEqual(group["kind"], "c-kept", data)
                for chain in data["chains"]:
                    # Only the containers C code keeps may be said so.
                    if chain["kind"] == "no-referrer":
                        self.assertNotIn("bytes", chain["types"], data)
                        self.assertNotIn("float", chain["types"], data)

    def test_raw_block_laid_out_as_bytes(self):
        # C memory from PyMem_RawMalloc() written as an exact bytes object
        # of its size, whose address only a Python int keeps (no pointer
        # to it anywhere): bytes come from PyObject_Malloc(), so a block
        # this small outside pymalloc is no bytes object kept by C code.
        reports = self.run_script("""\
            import struct
            raw_malloc = ctypes.pythonapi.PyMem_RawMalloc
            raw_malloc.restype = ctypes.c_void_p
            raw_malloc.argtypes = [ctypes.c_size_t]
            raw_free = ctypes.pythonapi.PyMem_RawFree
            raw_free.argtypes = [ctypes.c_void_p]
            size = 72
            head = struct.pack("qQqq", 1, id(bytes), size - 33, -1)
            body = head + b"B" * (size - len(head) - 1) + b"\\0"
            addresses = []
            for i in range(4):
                addresses.append(raw_malloc(size))                 # RAW
                ctypes.memmove(addresses[-1], body, size)
            report("# RAW")
            for address in addresses:
                raw_free(address)
            """)
        data = reports["# RAW"]
        self.assertNoCKept(data)
        kinds = [g["kind"] for g in data["unseen"]]
        if pymalloc():
            self.assertEqual(kinds, ["block"], data)
        else:
            # Not proven without the walk of pymalloc's blocks: said as
            # not searched, or as blocks.
            self.assertTrue(kinds, data)
            self.assertLessEqual(set(kinds), {"block", "unscanned"}, data)

    def test_subinterpreter_churn(self):
        # An interpreter with its own GIL makes and frees objects traced
        # at the line searched, while the search reads the line's blocks:
        # bounded by the searches made, not by time.
        try:
            import _interpreters
        except ImportError:
            self.skipTest("no own-GIL subinterpreters")
        reports = self.run_script("""\
            import threading, _interpreters, _tracemalloc
            code = '''if 1:
                src = "def churn(n):\\\\n    for i in range(n):\\\\n        t = (b'x' * (i % 50 + 40), [i], 10**30 + i, 's%d' % i * 5)\\\\n"
                ns = {}
                exec(compile(src, "<shared>", "exec"), ns)
                for _ in range(150):
                    ns["churn"](2000)
                '''
            def run():
                interp = _interpreters.create()
                try:
                    _interpreters.exec(interp, code)
                finally:
                    _interpreters.destroy(interp)
            t = threading.Thread(target=run)
            t.start()
            classes = retention._all_classes()
            n = 0
            while t.is_alive() and n < 2000:
                for item in _tracemalloc._site_unseen("<shared>", 3, [],
                                                      classes):
                    assert item[0] != "c-kept", item
                n += 1
            t.join()
            print(json.dumps({"mark": "CHURN", "searches": n}))
            """)
        self.assertIn("CHURN", reports)


if __name__ == "__main__":
    unittest.main()
