"""Tests of tracemalloc.retention: who holds leaked objects alive.

Every leak pattern of issue 30's corpus is planted in a module of its own
(put in sys.modules, as an application's module would be), and the search
must name its holder: the root's kind and description, each step, the
count and size under the holder.  The oracle is Debian's python3-objgraph
(pure Python, not ours): its find_backref_chain(), walking
gc.get_referrers() back from the same object to the same root, must find a
chain of the same length.  The oracle tests skip, saying so, when objgraph
is not installed (apt-get install python3-objgraph).
"""

import gc
import importlib
import importlib.util
import os
import sys
import textwrap
import threading
import tracemalloc
import types
import unittest

from tracemalloc import retention

try:
    import _testtracemalloc
except ImportError:
    _testtracemalloc = None
try:
    from _testcapi import with_tp_del
except ImportError:
    with_tp_del = None

OBJGRAPH_PATH = os.environ.get(
    "TRACEMALLOC_OBJGRAPH", "/usr/lib/python3/dist-packages/objgraph.py")
COUNT = 20


def load_objgraph():
    """Debian's objgraph, loaded from its file (not all of dist-packages,
    whose compiled modules are the system Python's), or None."""
    if not os.path.exists(OBJGRAPH_PATH):
        return None
    spec = importlib.util.spec_from_file_location("objgraph", OBJGRAPH_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


objgraph = load_objgraph()


class Payload:
    """What the leaks keep: an object of a type of its own."""

    def __init__(self, n):
        self.n = n


def plant(name, source, **names):
    """A module NAME in sys.modules, running SOURCE."""
    module = types.ModuleType(name)
    module.__dict__.update(names)
    sys.modules[name] = module
    exec(textwrap.dedent(source), module.__dict__)
    return module


class Pattern:
    """One leak pattern: set up, the targets, the expected chain, the
    root for the oracle (find_backref_chain's predicate) and the length
    that objgraph's chain has more than ours (the module object before
    its __dict__, the class before its)."""

    name = None

    def setup(self):
        raise NotImplementedError

    def cleanup(self):
        sys.modules.pop(self.module_name, None)

    @property
    def module_name(self):
        return f"leakapp_{self.name}"


class GlobalList(Pattern):
    name = "global_list"

    def setup(self):
        self.module = plant(self.module_name, """
            LEAKS = []
            def work(i):
                LEAKS.append(b"x" * 64 + str(i).encode())
            for i in range(COUNT):
                work(i)
        """, COUNT=COUNT)
        self.root_kind = "module"
        self.root = f"module {self.module_name}"
        self.steps = ["global LEAKS (list)", "[0]", "bytes"]
        self.oracle_root = self.module
        self.oracle_extra = 1
        return list(self.module.LEAKS)


class ClassRegistry(Pattern):
    name = "class_registry"

    def setup(self):
        self.module = plant(self.module_name, """
            class Session:
                registry = []
                def __init__(self, n):
                    self.payload = Payload(n)
                    Session.registry.append(self.payload)
            for i in range(COUNT):
                Session(i)
        """, COUNT=COUNT, Payload=Payload)
        cls = self.module.Session
        self.root_kind = "class"
        self.root = f"class {self.module_name}.Session"
        self.steps = ["attribute registry (list)", "[0]", _payload_type()]
        self.oracle_root = cls
        self.oracle_extra = 1
        return list(cls.registry)


class ClosureCell(Pattern):
    name = "closure_cell"

    def setup(self):
        self.module = plant(self.module_name, """
            def make_recorder():
                seen = []
                def record(n):
                    seen.append(Payload(n))
                return record
            record = make_recorder()
            for i in range(COUNT):
                record(i)
        """, COUNT=COUNT, Payload=Payload)
        self.root_kind = "module"
        self.root = f"module {self.module_name}"
        self.steps = ["global record (function)", "closure seen", "list",
                      "[0]", _payload_type()]
        self.oracle_root = self.module
        self.oracle_extra = 1
        return list(self.module.record.__closure__[0].cell_contents)


class LruCache(Pattern):
    name = "lru_cache"

    def setup(self):
        self.module = plant(self.module_name, """
            import functools
            @functools.lru_cache(maxsize=None)
            def load(key):
                return Payload(key)
            for i in range(COUNT):
                load(i)
        """, COUNT=COUNT, Payload=Payload)
        self.root_kind = "module"
        self.root = f"module {self.module_name}"
        self.steps = ["global load (functools._lru_cache_wrapper)", "dict", "[0]", _payload_type()]
        self.oracle_root = self.module
        self.oracle_extra = 1
        return [self.module.load(i) for i in range(COUNT)]


class ThreadingLocal(Pattern):
    name = "threading_local"

    def setup(self):
        self.module = plant(self.module_name, """
            import threading
            state = threading.local()
            state.items = [Payload(i) for i in range(COUNT)]
        """, COUNT=COUNT, Payload=Payload)
        self.root_kind = None   # checked in the test: base-dependent
        self.root = None
        self.steps = None
        self.oracle_root = self.module
        self.oracle_extra = 1
        return list(self.module.state.items)


class ThreadLocalVariable(Pattern):
    name = "thread_variable"

    def setup(self):
        self.ready = threading.Event()
        self.done = threading.Event()
        box = []

        def worker(ready, done, box):
            data = [Payload(i) for i in range(COUNT)]
            box.append(list(data))
            ready.set()
            done.wait()

        self.thread = threading.Thread(target=worker, name="leaky-worker",
                                       args=(self.ready, self.done, box))
        self.thread.start()
        self.ready.wait()
        targets = box.pop()
        self.root_kind = "frame"
        self.root = "thread leaky-worker, frame worker() at "
        self.steps = ["local data (list)", "[0]", _payload_type()]
        self.oracle_root = None    # set in the test: the thread's frame
        # objgraph's chain starts at the list (see compare()), ours at the
        # frame's locals.
        self.oracle_extra = -1
        return targets

    def cleanup(self):
        self.done.set()
        self.thread.join()


class DefaultArgument(Pattern):
    name = "default_argument"

    def setup(self):
        self.module = plant(self.module_name, """
            def handle(n, _seen=[]):
                _seen.append(Payload(n))
            for i in range(COUNT):
                handle(i)
        """, COUNT=COUNT, Payload=Payload)
        self.root_kind = "module"
        self.root = f"module {self.module_name}"
        self.steps = ["global handle (function)", "default _seen", "list",
                      "[0]", _payload_type()]
        self.oracle_root = self.module
        self.oracle_extra = 1
        return list(self.module.handle.__defaults__[0])


class BoundMethodCallback(Pattern):
    name = "bound_method"

    def setup(self):
        self.module = plant(self.module_name, """
            CALLBACKS = []
            class Listener:
                def __init__(self, n):
                    self.buffer = Payload(n)
                def on_event(self):
                    pass
            for i in range(COUNT):
                CALLBACKS.append(Listener(i).on_event)
        """, COUNT=COUNT, Payload=Payload)
        self.root_kind = "module"
        self.root = f"module {self.module_name}"
        self.steps = ["global CALLBACKS (list)", "[0]", "method",
                      ".__self__", f"{self.module_name}.Listener",
                      ".buffer", _payload_type()]
        self.oracle_root = self.module
        self.oracle_extra = 1
        return [m.__self__.buffer for m in self.module.CALLBACKS]


class DelCycle(Pattern):
    name = "del_cycle"

    def setup(self):
        # A cycle whose objects have a legacy finalizer (tp_del): the
        # collector cannot free it and moves it to gc.garbage.
        @with_tp_del
        class Node:
            def __init__(self, n):
                self.payload = Payload(n)
                self.partner = None

            def __tp_del__(self):
                pass

        gc.collect()
        self.garbage_before = len(gc.garbage)
        for i in range(COUNT):
            a, b = Node(i), Node(i)
            a.partner, b.partner = b, a
        del a, b
        gc.collect()
        self.nodes = gc.garbage[self.garbage_before:]
        self.root_kind = "gc.garbage"
        self.root = "gc.garbage"
        self.steps = [f"[{self.garbage_before}] ({__name__}.DelCycle."
                      f"setup.<locals>.Node)", ".payload", _payload_type()]
        self.oracle_root = gc.garbage
        self.oracle_extra = 0
        return [node.payload for node in self.nodes[::2]]

    def cleanup(self):
        for node in self.nodes:
            node.partner = None
        del gc.garbage[self.garbage_before:]
        self.nodes = None


class CStatic(Pattern):
    name = "c_static"

    def setup(self):
        held = [Payload(i) for i in range(COUNT)]
        self.previous = _testtracemalloc.keep_in_static(held)
        targets = list(held)
        del held
        self.root_kind = None
        self.root = None
        self.steps = ["list", "[0]", _payload_type()]
        self.oracle_root = None    # the static's list, set in the test
        self.oracle_extra = 0
        return targets

    def cleanup(self):
        _testtracemalloc.keep_in_static(self.previous)


def _payload_type():
    return f"{__name__}.Payload"


PATTERNS = [GlobalList, ClassRegistry, ClosureCell, LruCache,
            ThreadingLocal, ThreadLocalVariable, DefaultArgument,
            BoundMethodCallback, DelCycle, CStatic]


def _requirements(pattern):
    if pattern is DelCycle and with_tp_del is None:
        return "needs _testcapi.with_tp_del"
    if pattern is CStatic and _testtracemalloc is None:
        return "needs _testtracemalloc"
    return None


class RetentionPatternTests(unittest.TestCase):
    """Each corpus pattern: the chain that holds it."""

    def run_pattern(self, pattern_class):
        reason = _requirements(pattern_class)
        if reason:
            self.skipTest(reason)
        pattern = pattern_class()
        targets = pattern.setup()
        self.addCleanup(pattern.cleanup)
        result = retention.retention_paths(targets)
        self.assertEqual(result.count, COUNT)
        self.assertEqual(result.holders, 1, result)
        chain = result.chains[0]
        self.assertEqual(chain.count, COUNT, chain)
        self.assertEqual(chain.size,
                         sum(sys.getsizeof(t) for t in targets))
        self.assertEqual(chain.types, {type(targets[0]).__module__ + "."
                                       + type(targets[0]).__qualname__
                                       if type(targets[0]) is not bytes
                                       else "bytes": COUNT})
        if pattern.root_kind is not None:
            self.assertEqual(chain.kind, "root")
            self.assertEqual(chain.root_kind, pattern.root_kind, chain)
            self.assertTrue(chain.root.startswith(pattern.root), chain)
        if pattern.steps is not None:
            self.assertEqual(str(chain).split(" \u2192 ")[1:],
                             pattern.steps, chain)
        return pattern, targets, result, chain

    def test_global_list(self):
        pattern, targets, result, chain = self.run_pattern(GlobalList)
        self.assertEqual(
            str(chain), f"module {pattern.module_name} \u2192 global LEAKS "
            f"(list) \u2192 [0] \u2192 bytes")
        self.assertEqual(chain.length, 3)
        self.assertEqual(result.reached, COUNT)

    def test_class_registry(self):
        self.run_pattern(ClassRegistry)

    def test_closure_cell(self):
        self.run_pattern(ClosureCell)

    def test_lru_cache(self):
        self.run_pattern(LruCache)

    def test_threading_local(self):
        pattern, targets, result, chain = self.run_pattern(ThreadingLocal)
        self.assertEqual(chain.kind, "root")
        self.assertIn(chain.root_kind, ("module", "thread"), chain)
        text = str(chain)
        self.assertIn("list \u2192 [0] \u2192 " + _payload_type(), text)

    def test_thread_variable(self):
        pattern, targets, result, chain = self.run_pattern(
            ThreadLocalVariable)
        self.assertIn(__file__.rstrip("c"), chain.root)

    def test_default_argument(self):
        self.run_pattern(DefaultArgument)

    def test_bound_method_callback(self):
        self.run_pattern(BoundMethodCallback)

    def test_del_cycle(self):
        self.run_pattern(DelCycle)

    def test_c_static(self):
        pattern, targets, result, chain = self.run_pattern(CStatic)
        self.assertEqual(chain.kind, "no-referrer", chain)
        self.assertEqual(chain.refcount, 1)
        self.assertEqual(chain.referrers, 0)
        self.assertIsNone(chain.root)
        self.assertIn("no Python referrer (refcount 1, 0 referrer(s) found",
                      str(chain))
        self.assertEqual(result.reached, 0)


class RetentionTests(unittest.TestCase):
    """The search's other cases and its interface."""

    def test_uncollected_cycle(self):
        # A cycle that nothing reachable refers to, before the collector
        # runs: reported as such.
        enabled = gc.isenabled()
        gc.disable()
        self.addCleanup(lambda: gc.enable() if enabled else None)
        a, b = Payload(1), Payload(2)
        a.other, b.other = b, a
        a.leaf = Payload(3)
        targets = [a.leaf]
        del a, b
        result = retention.retention_paths(targets)
        chain = result.chains[0]
        self.assertEqual(chain.kind, "cycle", chain)
        self.assertTrue(str(chain).startswith("uncollected cycle"), chain)
        self.assertEqual(result.reached, 0)
        targets.clear()
        gc.collect()

    def test_frozen_holders(self):
        # A program's own gc.freeze() moves its objects to the permanent
        # generation, which gc.get_objects() leaves out: a frozen
        # uncollected cycle is still a cycle (it was "no Python referrer"),
        # and a site's frozen objects are still found.
        import subprocess
        script = textwrap.dedent("""\
            import gc, tracemalloc
            from tracemalloc import retention

            class Node:
                pass

            tracemalloc.start(1)
            node = Node(); node.self = node; node.items = []
            holder = node.items
            site = [None] * 3
            for i in range(3): site[i] = Node()  # SITE
            del node
            gc.disable()
            gc.freeze()
            leaked = [bytearray(10) for _ in range(3)]
            holder.extend(leaked)
            del holder
            result = retention.retention_paths(leaked)
            kinds = [chain.kind for chain in result.chains]
            assert kinds == ["cycle"], result.format()
            assert result.chains[0].refcount is None
            lineno = next(i for i, line in enumerate(
                open(__file__), 1) if line.endswith("# SITE\\n"))
            found = retention.site_objects(__file__, lineno)
            assert sorted(map(id, found)) == sorted(map(id, site)), found
            print("ok")
            """)
        path = os.path.join(self.enterContext(
            __import__("tempfile").TemporaryDirectory()), "frozen.py")
        with open(path, "w", encoding="utf-8") as file:
            file.write(script)
        env = dict(os.environ)
        env.pop("PYTHONTRACEMALLOC", None)
        process = subprocess.run([sys.executable, path], env=env,
                                 capture_output=True, text=True)
        self.assertEqual((process.returncode, process.stdout.strip()),
                         (0, "ok"), process.stderr)

    def test_unheld(self):
        # Only the caller's container refers to it.
        result = retention.retention_paths([Payload(1)])
        self.assertEqual(result.chains[0].kind, "unheld")
        self.assertEqual(result.reached, 0)

    def test_c_static_bytes(self):
        # A non-GC object kept by C code alone: no chain above it.
        if _testtracemalloc is None:
            self.skipTest("needs _testtracemalloc")
        obj = b"y" * COUNT * 5   # not a constant of the code object
        previous = _testtracemalloc.keep_in_static(obj)
        self.addCleanup(_testtracemalloc.keep_in_static, previous)
        targets = [obj]
        del obj
        result = retention.retention_paths(targets)
        chain = result.chains[0]
        self.assertEqual(chain.kind, "no-referrer", chain)
        self.assertEqual((chain.refcount, chain.referrers), (1, 0))
        self.assertEqual(chain.length, 1)

    def test_refcount_leak(self):
        # A reference leaked by C code (an extra Py_INCREF): the refcount
        # is higher than the referrers found.
        holder = plant("leakapp_refleak", "HELD = []")
        self.addCleanup(sys.modules.pop, "leakapp_refleak")
        obj = Payload(7)
        holder.HELD.append(obj)
        import ctypes
        address = ctypes.c_void_p(id(obj))
        ctypes.pythonapi.Py_IncRef(address)
        self.addCleanup(ctypes.pythonapi.Py_DecRef, address)
        holder.HELD.clear()
        targets = [obj]
        del obj
        result = retention.retention_paths(targets)
        chain = result.chains[0]
        self.assertEqual(chain.kind, "no-referrer", chain)
        self.assertEqual((chain.refcount, chain.referrers), (1, 0))

    def test_several_holders_largest_first(self):
        module = plant("leakapp_many", """
            BIG = [Payload(i) for i in range(30)]
            SMALL = [Payload(i) for i in range(5)]
            MEDIUM = {i: Payload(i) for i in range(10)}
            TINY = (Payload(0),)
        """, Payload=Payload)
        self.addCleanup(sys.modules.pop, "leakapp_many")
        targets = (module.BIG + module.SMALL + list(module.MEDIUM.values())
                   + list(module.TINY))
        result = retention.retention_paths(targets)
        self.assertEqual(result.holders, 4)
        self.assertEqual([c.count for c in result.chains], [30, 10, 5])
        self.assertEqual([c.steps[0].how for c in result.chains],
                         ["global BIG", "global MEDIUM", "global SMALL"])
        self.assertEqual(result.chains[1].steps[1].how, "[0]")
        lines = result.format()
        self.assertEqual(lines[-1], "(1 more holder(s))")
        self.assertEqual(len(retention.retention_paths(
            targets, max_chains=1).chains), 1)
        self.assertEqual(result.types, {_payload_type(): 46})

    def test_shortest_chain(self):
        # Held by a long chain and a short one: the short one is given.
        module = plant("leakapp_short", """
            LONG = [[[[None]]]]
            SHORT = [None]
        """)
        self.addCleanup(sys.modules.pop, "leakapp_short")
        obj = Payload(1)
        module.LONG[0][0][0][0] = obj
        module.SHORT[0] = obj
        targets = [obj]
        del obj
        chain = retention.retention_paths(targets).chains[0]
        self.assertEqual(chain.steps[0].how, "global SHORT")
        self.assertEqual(chain.length, 3)

    def test_long_chain_shortened(self):
        module = plant("leakapp_deep", """
            class Link:
                def __init__(self, next):
                    self.next = next
            HEAD = None
            for i in range(30):
                HEAD = Link(HEAD)
        """)
        self.addCleanup(sys.modules.pop, "leakapp_deep")
        link = module.HEAD
        while link.next is not None:
            link = link.next
        targets = [link]
        del link
        chain = retention.retention_paths(targets).chains[0]
        self.assertEqual(len(chain.steps), 30)
        self.assertEqual(chain.length, 31)
        text = str(chain)
        self.assertIn(" \u2192 ... 18 more steps ... \u2192 ", text)
        self.assertEqual(text.count(".next"), 5 + 6)
        self.assertEqual(chain.format(None).count(".next"), 29)

    def test_dict_key_repr_shortened(self):
        module = plant("leakapp_keys", "CACHE = {}")
        self.addCleanup(sys.modules.pop, "leakapp_keys")
        key = "k" * 200
        module.CACHE[key] = [b"z" * 50]
        targets = list(module.CACHE[key])
        chain = retention.retention_paths(targets).chains[0]
        how = chain.steps[1].how
        self.assertTrue(how.startswith("['kkk"), how)
        self.assertLessEqual(len(how), 50)
        self.assertTrue(how.endswith("...]"), how)

    def test_python_sizeof_not_called(self):
        # A __sizeof__ written in Python could run anything while the
        # search holds references it does not own: the size its type
        # declares is used instead.
        calls = []

        class Sized:
            def __sizeof__(self):
                calls.append(self)
                return 10 ** 6

        module = plant("leakapp_sized", "HELD = []")
        self.addCleanup(sys.modules.pop, "leakapp_sized")
        module.HELD.extend(Sized() for _ in range(3))
        targets = list(module.HELD)
        chain = retention.retention_paths(targets).chains[0]
        self.assertEqual(calls, [])
        self.assertEqual(chain.size, 3 * Sized.__basicsize__)

    def test_bad_arguments(self):
        with self.assertRaises(TypeError):
            retention.retention_paths(42)
        with self.assertRaises(ValueError):
            retention.retention_paths([], max_chains=-1)
        with self.assertRaises(TypeError):
            retention.retention_paths([], max_chains="3")
        import _tracemalloc
        with self.assertRaises(TypeError):
            _tracemalloc._retention_paths([])
        with self.assertRaises(TypeError):
            _tracemalloc._retention_paths([], [], bogus=1)

    def test_no_targets(self):
        result = retention.retention_paths([])
        self.assertEqual((result.count, result.holders, result.chains),
                         (0, 0, []))

    def test_search_untraced(self):
        # The search's own allocations are not traced.
        module = plant("leakapp_traced", """
            LEAKS = [Payload(i) for i in range(200)]
        """, Payload=Payload)
        self.addCleanup(sys.modules.pop, "leakapp_traced")
        targets = list(module.LEAKS)
        tracemalloc.start(1)
        self.addCleanup(tracemalloc.stop)
        import _tracemalloc
        namespaces = [ns for _, _, ns in retention.roots()]
        # Traced, the search's tables alone (more than 2 MB for the
        # table of 65536 entries it starts with) would raise the peak.
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        result = _tracemalloc._retention_paths(targets, namespaces)
        peak = tracemalloc.get_traced_memory()[1]
        self.assertEqual(result[0][0][3], 200)
        self.assertLess(peak - before, 64 * 1024)

    def test_site_retention(self):
        tracemalloc.start(1)
        self.addCleanup(tracemalloc.stop)
        module = plant("leakapp_site", """
            KEEP = []
            def grow():
                for i in range(COUNT):
                    KEEP.append(bytearray(100))   # the site
        """, COUNT=COUNT)
        self.addCleanup(sys.modules.pop, "leakapp_site")
        filename = "<string>"
        module.grow()
        snapshot = tracemalloc.take_snapshot()
        stat = [s for s in snapshot.statistics("lineno")
                if s.traceback[0].filename == filename][0]
        objects = retention.site_objects(filename, stat.traceback[0].lineno)
        self.assertEqual(len(objects), COUNT)
        del objects
        result = retention.site_retention(stat)
        self.assertEqual(result.count, COUNT)
        self.assertRegex(str(result.chains[0]),
                         r"^module leakapp_site \u2192 global KEEP \(list\) "
                         r"\u2192 \[\d+\] \u2192 bytearray$")

    def test_site_objects_kinds(self):
        # GC objects (the collector lists them), objects it does not
        # track (found through their containers), any line of a file.
        tracemalloc.start(1)
        self.addCleanup(tracemalloc.stop)
        module = plant("leakapp_kinds", """
            KEEP = []
            def grow():
                for i in range(COUNT):
                    KEEP.append(Payload(i))
                    KEEP.append(b"b" * (i + 100))
        """, COUNT=COUNT, Payload=Payload)
        self.addCleanup(sys.modules.pop, "leakapp_kinds")
        module.grow()
        lineno = module.grow.__code__.co_firstlineno
        payloads = retention.site_objects("<string>", lineno + 2)
        self.assertEqual(len(payloads), COUNT)
        self.assertTrue(all(type(p) is Payload for p in payloads))
        del payloads
        blobs = retention.site_objects("<string>", lineno + 3)
        self.assertEqual(sorted(map(len, blobs)),
                         [i + 100 for i in range(COUNT)])
        del blobs
        everything = retention.site_objects("<string>")
        self.assertGreaterEqual(len(everything), 2 * COUNT)
        del everything
        self.assertEqual(retention.site_objects("<string>", 10 ** 6), [])
        with self.assertRaises(TypeError):
            retention.site_objects(b"<string>", 1)
        with self.assertRaises(ValueError):
            retention.site_objects("<string>", -1)

    def test_leak_report_site(self):
        # A leak check's site: the chain of what keeps its growth.
        from tracemalloc import leaks
        module = plant("leakapp_checked", """
            HISTORY = []
            def workload():
                HISTORY.append(bytearray(2000))
        """)
        self.addCleanup(sys.modules.pop, "leakapp_checked")
        # Tracing started here: the check leaves it on, and the traces of
        # its rounds with it.
        tracemalloc.start(1)
        self.addCleanup(tracemalloc.stop)
        report = leaks.check(module.workload)
        self.assertTrue(report, report)
        site = report.sites[0]
        self.assertEqual((site.filename, site.lineno), ("<string>", 4))
        result = retention.site_retention(site)
        self.assertEqual(result.count, len(module.HISTORY))
        self.assertEqual(result.holders, 1)
        self.assertRegex(str(result.chains[0]),
                         r"^module leakapp_checked \u2192 global HISTORY "
                         r"\(list\) \u2192 \[\d+\] \u2192 bytearray$")

    def test_site_needs_tracing(self):
        if tracemalloc.is_tracing():
            self.skipTest("tracing already")
        with self.assertRaises(RuntimeError):
            retention.site_objects("x.py", 1)


DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir,
                   os.pardir, "Doc", "library", "tracemalloc.rst")


def doc_examples():
    """(code, output) of the examples of the documentation's section on
    retention paths."""
    with open(DOC, encoding="utf-8") as doc:
        text = doc.read()
    section = text[text.index(".. _tracemalloc-retention:"):]
    blocks = []
    lines = section.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].endswith("::") and not lines[i].startswith(".."):
            label = lines[i]
            i += 1
            block = []
            while i < len(lines) and (not lines[i] or
                                      lines[i].startswith("   ")):
                block.append(lines[i][3:])
                i += 1
            blocks.append((label, "\n".join(block).strip("\n")))
        else:
            i += 1
    examples = []
    for (label, code), (next_label, output) in zip(blocks, blocks[1:]):
        if next_label == "Output::" and label != "Output::":
            examples.append((code, output))
    return examples


@unittest.skipUnless(os.path.exists(DOC), f"no {DOC}")
class DocExampleTests(unittest.TestCase):
    """The documentation's examples run and print what it shows."""

    def test_examples(self):
        from test.support import script_helper, os_helper
        examples = doc_examples()
        self.assertEqual(len(examples), 2)
        for code, expected in examples:
            with self.subTest(code=code.splitlines()[-1]), \
                    os_helper.temp_dir() as directory:
                script = os.path.join(directory, "example.py")
                with open(script, "w", encoding="utf-8") as out:
                    out.write(code + "\n")
                res = script_helper.assert_python_ok(script)
                output = res.out.decode("utf-8").replace(
                    script, "/home/user/example.py")
                # The lines of the chains and their summaries.
                got = [line for line in output.splitlines()
                       if "\u2192" in line or "under it" in line]
                want = [line for line in expected.splitlines()
                        if "\u2192" in line or "under it" in line]
                self.assertEqual(got, want, output)
                # The other lines but tracemalloc's statistic (its count
                # and size depend on the base's allocations).
                self.assertEqual(
                    [line for line in output.splitlines()
                     if line not in got and "size=" not in line],
                    [line for line in expected.splitlines()
                     if line not in want and "size=" not in line])


@unittest.skipIf(objgraph is None,
                 f"objgraph is not installed (no {OBJGRAPH_PATH}; "
                 f"apt-get install python3-objgraph): the oracle "
                 f"comparison is skipped")
class ObjgraphOracleTests(unittest.TestCase):
    """objgraph.find_backref_chain() finds a chain of the same length from
    the same kind of root, per pattern."""

    def compare(self, pattern_class):
        reason = _requirements(pattern_class)
        if reason:
            self.skipTest(reason)
        pattern = pattern_class()
        targets = pattern.setup()
        self.addCleanup(pattern.cleanup)
        target = targets[0]
        root = pattern.oracle_root
        if pattern_class is ThreadLocalVariable:
            # objgraph walks gc.get_referrers(), which cannot see a
            # running frame's locals (a running frame's tp_traverse does
            # not visit them): its root is the list the local names,
            # whose only referrer is that frame.
            frame = sys._current_frames()[pattern.thread.ident]
            while frame.f_code.co_name != "worker":
                frame = frame.f_back
            root = frame.f_locals["data"]
            del frame
        elif pattern_class is CStatic:
            # No Python object refers to the static's list: the oracle's
            # root is the list itself.
            root = _testtracemalloc.keep_in_static(None)
            _testtracemalloc.keep_in_static(root)
        found = objgraph.find_backref_chain(
            target, lambda obj: obj is root, max_depth=20,
            extra_ignore=(id(targets), id(sys._getframe())))
        del root
        self.assertIs(found[-1], target)
        objgraph_types = [type(obj).__name__ for obj in found]
        del found, target
        # Ours after objgraph's: naming an instance's attribute creates its
        # __dict__ (3.12+ keeps the values inline until asked for it),
        # which would lengthen objgraph's chain by one.
        chain = retention.retention_paths(targets).chains[0]
        self.assertGreater(len(objgraph_types), 1, "objgraph found no chain")
        self.assertEqual(len(objgraph_types),
                         chain.length + pattern.oracle_extra,
                         (chain, objgraph_types))
        return chain, objgraph_types

    def test_global_list(self):
        self.compare(GlobalList)

    def test_class_registry(self):
        self.compare(ClassRegistry)

    def test_closure_cell(self):
        self.compare(ClosureCell)

    def test_lru_cache(self):
        self.compare(LruCache)

    def test_threading_local(self):
        self.compare(ThreadingLocal)

    def test_thread_variable(self):
        self.compare(ThreadLocalVariable)

    def test_default_argument(self):
        self.compare(DefaultArgument)

    def test_bound_method_callback(self):
        self.compare(BoundMethodCallback)

    def test_del_cycle(self):
        self.compare(DelCycle)

    def test_c_static(self):
        self.compare(CStatic)

    def oracle_chain(self, target, root):
        found = objgraph.find_backref_chain(
            target, lambda obj: obj is root, max_depth=20,
            extra_ignore=(id(sys._getframe()), id(sys._getframe(1))))
        self.assertIs(found[-1], target)
        return [type(obj).__name__ for obj in found]

    def test_buffer_owner(self):
        # A line that only grows a global bytearray: the site's object is
        # the buffer's owner (issue 43, 3.1), and objgraph's chain to it
        # has the length of ours, the module object added.
        tracemalloc.start(1)
        self.addCleanup(tracemalloc.stop)
        module = plant("leakapp_oracle_buffer", """
            _BUF = bytearray()
            CHUNK = b"x" * 300
            def grow():
                _BUF.extend(CHUNK)
            for i in range(COUNT):
                grow()
        """, COUNT=COUNT)
        self.addCleanup(sys.modules.pop, "leakapp_oracle_buffer")
        targets = retention.site_objects(
            "<string>", module.grow.__code__.co_firstlineno + 1)
        self.assertEqual([id(t) for t in targets], [id(module._BUF)])
        oracle = self.oracle_chain(module._BUF, module)
        chain = retention.retention_paths(targets).chains[0]
        self.assertEqual(len(oracle), chain.length + 1, (chain, oracle))
        self.assertEqual(oracle[-2:], ["dict", "bytearray"])

    def test_dict_keys(self):
        # Objects held only as dict keys (issue 43, 3.2).  A dict of
        # general keys: objgraph sees the key (dict_traverse() visits it)
        # and its chain has the length of ours.
        module = plant("leakapp_oracle_keys", """
            _BY_BYTES = {}
            _BY_PATH = {}
            def cache(i):
                _BY_BYTES[b"/tmp/zipped-" + str(i).encode() * 20] = []
                _BY_PATH["/tmp/zipped-" + str(i) * 20] = []
            for i in range(COUNT):
                cache(i)
        """, COUNT=COUNT)
        self.addCleanup(sys.modules.pop, "leakapp_oracle_keys")
        targets = list(module._BY_BYTES)
        oracle = self.oracle_chain(targets[0], module)
        chain = retention.retention_paths(targets).chains[0]
        self.assertEqual(str(chain).split(" \u2192 ")[1:],
                         ["global _BY_BYTES (dict)", "key", "bytes"])
        self.assertEqual(len(oracle), chain.length + 1, (chain, oracle))
        # A dict of str keys: dict_traverse() leaves the keys out, so
        # gc.get_referrers(), which objgraph walks, cannot see them (the
        # search visits them itself): ours is objgraph's chain to the dict,
        # one step longer.
        targets = list(module._BY_PATH)
        oracle = self.oracle_chain(module._BY_PATH, module)
        chain = retention.retention_paths(targets).chains[0]
        self.assertEqual(str(chain).split(" \u2192 ")[1:],
                         ["global _BY_PATH (dict)", "key", "str"])
        self.assertEqual(len(oracle) + 1, chain.length + 1, (chain, oracle))


# ---- the chain in the leak reports (issue 30, item 2) -----------------

REPORTED_SOURCE = """\
_CACHE = {}

def work():
    _CACHE.setdefault('u42', []).append(bytes(1000))

def clean():
    return [bytes(1000)]
"""
# The chain that holds the planted leak, but for the list's index.
REPORTED_CHAIN = "global _CACHE (dict) \u2192 ['u42'] \u2192 list"


class ReportedRetentionTests(unittest.TestCase):
    """A leak into a module-global dict is reported with the chain that
    holds it: by check() (LeakSite.retention), the CLI, the unittest
    decorator and mixin, pytest; a clean check runs no search."""

    counter = 0

    def setUp(self):
        from test.support import os_helper
        if tracemalloc.is_tracing():
            self.skipTest("tracemalloc is already tracing")
        self.directory = self.enterContext(os_helper.temp_dir())
        ReportedRetentionTests.counter += 1
        self.name = f"leakapp_reported{ReportedRetentionTests.counter}"
        with open(os.path.join(self.directory, self.name + ".py"), "w",
                  encoding="utf-8") as file:
            file.write(REPORTED_SOURCE)

    def load(self):
        sys.path.insert(0, self.directory)
        self.addCleanup(sys.path.remove, self.directory)
        self.addCleanup(sys.modules.pop, self.name, None)
        return importlib.import_module(self.name)

    def assertChain(self, text):
        line = next((line for line in text.splitlines()
                     if "held by:" in line), None)
        self.assertIsNotNone(line, text)
        self.assertIn(f"held by: module {self.name} \u2192 {REPORTED_CHAIN}",
                      line)
        # Down to one of the bytes, or to the list when the list too was
        # allocated at the line (regrtest's runs keep it).
        self.assertRegex(line, r"\u2192 list( \u2192 \[\d+\] \u2192 bytes)?$")
        # The summary line under it: the counts of objects under the dict.
        summary = text.splitlines()[text.splitlines().index(line) + 1]
        self.assertRegex(summary, r"^\s+\d+ objects, \d+ B under it "
                                  r"\(bytes \d+(, list 1)?\)$")

    def test_check_attribute(self):
        from tracemalloc import leaks
        module = self.load()
        report = leaks.check(module.work)
        self.assertTrue(report)
        site = report.sites[0]
        self.assertEqual(site.lineno, 4)
        self.assertIsNotNone(site.retention)
        chain = site.retention.chains[0]
        self.assertEqual(chain.kind, "root")
        self.assertEqual(chain.root, f"module {self.name}")
        self.assertEqual([step.how for step in chain.steps[:2]],
                         ["global _CACHE", "['u42']"])
        # The line allocated the list (in the first round) and every
        # bytes object in it: the chain ends at the list, or at one of the
        # bytes objects when the list was not seen as the line's.
        self.assertIn(chain.steps[-1].type, ("list", "bytes"))
        # Every bytes object of the line is under the dict, the warm-up
        # rounds' too.
        types = dict(chain.types)
        self.assertLessEqual(types.pop("list", 0), 1)
        self.assertEqual(types, {"bytes": len(module._CACHE['u42'])})
        self.assertLessEqual(len(site.retention.chains), 3)
        self.assertChain(report.format())

    def test_retention_off(self):
        from tracemalloc import leaks
        module = self.load()
        report = leaks.check(module.work, retention=False)
        self.assertTrue(report)
        self.assertIsNone(report.sites[0].retention)
        self.assertNotIn("held by:", report.format())

    def recording_search(self, fail=False):
        calls = []
        original = retention.site_retention

        def recording(site, **options):
            calls.append(site)
            if fail:
                raise RuntimeError("search failed")
            return original(site, **options)
        retention.site_retention = recording
        self.addCleanup(setattr, retention, "site_retention", original)
        return calls

    def test_clean_check_runs_no_search(self):
        from tracemalloc import leaks
        module = self.load()
        calls = self.recording_search()
        report = leaks.check(module.clean)
        self.assertFalse(report)
        self.assertEqual(calls, [])
        # The same recorder sees the search of a leak verdict: once per
        # site, after the rounds.
        report = leaks.check(module.work)
        self.assertTrue(report)
        self.assertEqual(calls, report.sites)

    def test_failing_search_keeps_verdict(self):
        from tracemalloc import leaks
        module = self.load()
        calls = self.recording_search(fail=True)
        report = leaks.check(module.work)
        self.assertTrue(report)
        self.assertTrue(calls)
        self.assertEqual(report.sites[0].lineno, 4)
        self.assertIsNone(report.sites[0].retention)
        # Issue 30 review (s38), f14: said, not hidden.
        self.assertEqual(report.sites[0].retention_error,
                         "RuntimeError: search failed")
        self.assertIn("held by: unknown: the search failed (RuntimeError: "
                      "search failed)", report.format())
        self.assertEqual(report.sites[0].as_dict()["retention_error"],
                         "RuntimeError: search failed")

    def test_cli(self):
        import subprocess
        command = [sys.executable, "-m", "tracemalloc", "leaks", "-q",
                   f"{self.name}:work"]
        env = dict(os.environ, PYTHONPATH=self.directory)
        env.pop("PYTHONTRACEMALLOC", None)
        process = subprocess.run(command, env=env, cwd=self.directory,
                                 capture_output=True, text=True)
        self.assertEqual(process.returncode, 1, process.stderr)
        self.assertChain(process.stderr)
        command.insert(-1, "--no-retention")
        process = subprocess.run(command, env=env,
                                 cwd=self.directory, capture_output=True,
                                 text=True)
        self.assertEqual(process.returncode, 1, process.stderr)
        self.assertNotIn("held by:", process.stderr)

    def assertJsonRetention(self, site):
        """*site*, a SITE of a JSON report, carries the chain that holds
        the planted leak."""
        retention = site["retention"]
        self.assertIsNotNone(retention, site)
        self.assertGreaterEqual(retention["holders"], 1)
        chain = retention["chains"][0]
        self.assertEqual(chain["kind"], "root")
        self.assertEqual(chain["root_kind"], "module")
        self.assertEqual(chain["root"], f"module {self.name}")
        self.assertEqual(chain["steps"][:3], [["global _CACHE", "dict"],
                                              ["['u42']", "list"],
                                              *chain["steps"][2:3]])
        self.assertEqual(chain["steps"][1], ["['u42']", "list"])
        self.assertIn(chain["steps"][-1][1], ("list", "bytes"))
        self.assertGreater(chain["types"]["bytes"], 0)
        self.assertEqual(sum(chain["types"].values()), chain["count"])
        self.assertGreater(chain["size"], 1000 * chain["types"]["bytes"])
        self.assertIsNone(chain["refcount"])
        self.assertIsNone(chain["referrers"])
        self.assertIn(REPORTED_CHAIN, chain["text"])

    def test_cli_html(self):
        # leaks --html: the report's data carries the leaking sites with
        # their chains (the page draws them; test_tracemalloc_html checks
        # the drawing in a browser).
        import subprocess
        from test.test_tracemalloc_html import report_data
        path = os.path.join(self.directory, "report.html")
        command = [sys.executable, "-m", "tracemalloc", "leaks", "-q",
                   "--html", path, f"{self.name}:work"]
        env = dict(os.environ, PYTHONPATH=self.directory)
        env.pop("PYTHONTRACEMALLOC", None)
        process = subprocess.run(command, env=env, cwd=self.directory,
                                 capture_output=True, text=True)
        self.assertEqual(process.returncode, 1, process.stderr)
        with open(path, encoding="utf-8") as file:
            data = report_data(file.read())
        site, = data["leaks"]
        self.assertEqual(site["filename"], os.path.join(self.directory,
                                                        self.name + ".py"))
        self.assertJsonRetention(site)

    def test_cli_json(self):
        import json
        import subprocess
        command = [sys.executable, "-m", "tracemalloc", "leaks", "-q",
                   "--json", f"{self.name}:work"]
        env = dict(os.environ, PYTHONPATH=self.directory)
        env.pop("PYTHONTRACEMALLOC", None)
        process = subprocess.run(command, env=env, cwd=self.directory,
                                 capture_output=True, text=True)
        self.assertEqual(process.returncode, 1, process.stderr)
        data = json.loads(process.stdout)
        self.assertJsonRetention(data["sites"][0])
        command.insert(-1, "--no-retention")
        process = subprocess.run(command, env=env, cwd=self.directory,
                                 capture_output=True, text=True)
        self.assertEqual(process.returncode, 1, process.stderr)
        self.assertIsNone(json.loads(process.stdout)["sites"][0]
                          ["retention"])

    def test_no_referrer_as_dict(self):
        # The diagnosis of an object that no Python object holds: its
        # refcount and the referrers found, in the JSON data too.
        chain = retention.Chain("no-referrer", None, None,
                                [retention.Step("", "bytes")], 1, 1, 1033,
                                {"bytes": 1}, refcount=2, referrers=0)
        data = retention.Chain.as_dict(chain)
        self.assertEqual((data["kind"], data["refcount"], data["referrers"],
                          data["root"], data["steps"]),
                         ("no-referrer", 2, 0, None, [["", "bytes"]]))
        self.assertIn("no Python referrer (refcount 2", data["text"])

    def run_case(self, case):
        result = unittest.TestResult()
        unittest.defaultTestLoader.loadTestsFromTestCase(case).run(result)
        self.assertEqual(len(result.failures), 1, result.errors)
        return result.failures[0][1]

    def test_no_leaks_message(self):
        from tracemalloc.testing import no_leaks
        module = self.load()

        class Leaky(unittest.TestCase):
            @no_leaks
            def test_leak(self):
                module.work()

        message = self.run_case(Leaky)
        self.assertChain(message)
        report_text = message[message.index("tracemalloc: "):]
        self.assertLessEqual(len(report_text.splitlines()), 32, report_text)

    def test_message_budget(self):
        # Three leaking sites with deep tracebacks: the chains take the
        # place of a frame each, and the message is no longer than the
        # same message without them.
        from tracemalloc.testing import no_leaks
        path = os.path.join(self.directory, self.name + ".py")
        with open(path, "a", encoding="utf-8") as file:
            file.write(textwrap.dedent("""
                _A, _B, _C = [], [], []

                def three():
                    _A.append(bytes(3000))
                    _B.append(bytes(2000))
                    _C.append(bytes(1000))

                def deep(n=5):
                    return deep(n - 1) if n else three()
                """))
        module = self.load()
        messages = {}
        for with_chains in (True, False):
            class Leaky(unittest.TestCase):
                @no_leaks(retention=with_chains)
                def test_leak(self):
                    module.deep()
            message = self.run_case(Leaky)
            messages[with_chains] = message[message.index("tracemalloc: "):]
        self.assertEqual(messages[True].count("held by: module"), 3,
                         messages[True])
        self.assertNotIn("held by:", messages[False])
        self.assertLessEqual(len(messages[True].splitlines()),
                             len(messages[False].splitlines()),
                             messages[True])
        self.assertLessEqual(len(messages[True].splitlines()), 34,
                             messages[True])
        if os.environ.get("TRACEMALLOC_SHOW_MESSAGE"):
            print(messages[True])

    def test_regrtest(self):
        import subprocess
        if (sys.getallocatedblocks() == 0
                and not hasattr(sys, "gettotalrefcount")):
            # A release build's regrtest -R sees a leak through
            # sys.getallocatedblocks(), which counts pymalloc's blocks
            # only: none under PYTHONMALLOC=malloc or a sanitizer build.
            self.skipTest("regrtest -R cannot see leaks here: "
                          "sys.getallocatedblocks() is 0 (no pymalloc)")
        with open(os.path.join(self.directory, f"test_{self.name}.py"), "w",
                  encoding="utf-8") as file:
            file.write(textwrap.dedent(f"""\
                import unittest
                import {self.name} as app

                class T(unittest.TestCase):
                    def test_leak(self):
                        app.work()
                """))
        env = dict(os.environ, PYTHONPATH=self.directory)
        env.pop("PYTHONTRACEMALLOC", None)
        process = subprocess.run(
            [sys.executable, "-X", "tracemalloc=25", "-m", "test",
             "--testdir", self.directory, "-R", "2:3", f"test_{self.name}"],
            env=env, cwd=self.directory, capture_output=True, text=True,
            timeout=600)
        output = process.stdout + process.stderr
        self.assertNotEqual(process.returncode, 0, output)
        self.assertIn(f"test_{self.name} leaked [", output)
        self.assertChain(output)

    def test_mixin_message(self):
        from tracemalloc.testing import LeakCheckMixin
        module = self.load()

        class Leaky(LeakCheckMixin, unittest.TestCase):
            def test_leak(self):
                module.work()

        self.assertChain(self.run_case(Leaky))

    def pytest_harness(self):
        """test_tracemalloc_pytest's harness, set up (its doCleanups() is
        the caller's); the test skips as it does without pytest."""
        from test.test_tracemalloc_pytest import PytestHarness

        class Harness(PytestHarness, unittest.TestCase):
            def runTest(self):
                pass
        harness = Harness()
        try:
            harness.setUp()
        except unittest.SkipTest as skip:
            self.skipTest(str(skip))
        return harness

    def test_pytest_failure(self):
        import json
        harness = self.pytest_harness()
        try:
            with open(os.path.join(self.directory, self.name + ".py"),
                      encoding="utf-8") as source:
                harness.write(self.name + ".py", source.read())
            harness.write("test_leaky.py", f"""\
                import {self.name} as app

                def test_leak():
                    app.work()
                """)
            report_path = os.path.join(self.directory, "report.json")
            returncode, output = harness.run_pytest(
                "--tracemalloc-leaks", f"--tracemalloc-report={report_path}",
                "test_leaky.py")
            with open(report_path, encoding="utf-8") as file:
                data = json.load(file)
            off = harness.run_pytest(
                "--tracemalloc-leaks", "--tracemalloc-no-retention",
                f"--tracemalloc-report={report_path}", "test_leaky.py")
            with open(report_path, encoding="utf-8") as file:
                data_off = json.load(file)
        finally:
            harness.doCleanups()
        self.assertEqual(returncode, 1, output)
        self.assertChain(output)
        test, = data["tests"]
        self.assertEqual(test["verdict"], "leaked")
        self.assertJsonRetention(test["report"]["sites"][0])
        # --tracemalloc-no-retention: the same verdict, no chain.
        self.assertEqual(off[0], 1, off[1])
        self.assertNotIn("held by:", off[1])
        test, = data_off["tests"]
        self.assertEqual(test["verdict"], "leaked")
        self.assertIsNone(test["report"]["sites"][0]["retention"])

    def test_pytest_failed_search(self):
        # Second s38 review, G3: a search that fails is said in the
        # failure message, as in check()'s report and the JSON.
        harness = self.pytest_harness()
        try:
            harness.write("conftest.py", """\
                import tracemalloc.retention as retention

                def failing(*args, **kwargs):
                    raise RuntimeError("the search broke")

                retention.site_retention = failing
                """)
            harness.write("test_leaky.py", """\
                KEEP = []

                def test_leak():
                    KEEP.append(bytearray(1000))
                """)
            returncode, output = harness.run_pytest("--tracemalloc-leaks",
                                                    "test_leaky.py")
        finally:
            harness.doCleanups()
        self.assertEqual(returncode, 1, output)
        self.assertIn("held by: unknown: the search failed (RuntimeError: "
                      "the search broke)", output)


class ReviewS38Tests(unittest.TestCase):
    """Issue 30 review (s38): wrong answers, one test each."""

    def test_step_names_from_a_copy(self):
        # Second s38 review, G4: another thread changes a dict while its
        # step is named: the name comes from a copy, retried once.
        calls = []

        def changing(parent):
            calls.append(parent)
            if len(calls) == 1:
                raise RuntimeError("dictionary changed size during "
                                   "iteration")
            return dict.items(parent)
        payload = object()
        items = retention._copied(changing, {"key": payload})
        self.assertEqual(items, [("key", payload)])
        self.assertEqual(len(calls), 2)
        holder = {"a": 1, "b": payload}
        self.assertEqual(retention._how(holder, payload), "['b']")

    def test_exec_separate_globals(self):
        # Second s38 review, G5: exec(code, globals, locals): what the
        # running code keeps in its globals is held by that frame.
        plugin = (
            "global CACHE\n"
            "CACHE = [bytearray(100) for _ in range(3)]\n"
            "result = retention.retention_paths(tuple(CACHE))\n")
        namespace = {}
        exec(compile(plugin, "<plugin>", "exec"),
             {"__name__": "plugin", "retention": retention}, namespace)
        chain = namespace["result"].chains[0]
        self.assertEqual(chain.kind, "root", chain)
        self.assertEqual(chain.root_kind, "frame")
        self.assertTrue(chain.root.endswith("<plugin>:3, its globals"),
                        chain.root)
        self.assertEqual([step.how for step in chain.steps],
                         ["global CACHE", "[0]"])

    def test_lazy_object_in_sys_modules(self):
        # Second s38 review, G8: an object in sys.modules whose
        # __getattr__ raises ImportError does not break the search nor a
        # leak check.
        from tracemalloc import leaks

        class Lazy:
            def __getattr__(self, name):
                raise ImportError(f"No module named 'plugin_{name}'")
        sys.modules["_s38_lazy_plugins"] = Lazy()
        self.addCleanup(sys.modules.pop, "_s38_lazy_plugins", None)
        kept = []
        chain = retention.retention_paths([kept]).chains
        self.assertIsNotNone(chain)
        held = []
        report = leaks.check(lambda: held.append(bytearray(1000)))
        self.assertTrue(report)

    def no_collection(self):
        enabled = gc.isenabled()
        gc.disable()
        self.addCleanup(lambda: gc.enable() if enabled else None)
        self.addCleanup(gc.collect)

    def test_untracked_dict_in_cycle(self):
        # f01: the collector does not track {"k": bytes}: its reference
        # is counted all the same, and the cycle is a cycle.
        self.no_collection()
        node = Payload(1)
        node.self = node
        node.cache = {"k": bytes(1000)}
        self.assertFalse(gc.is_tracked(node.cache))
        targets = [node.cache["k"]]
        del node
        chain = retention.retention_paths(targets).chains[0]
        self.assertEqual(chain.kind, "cycle", chain)
        self.assertEqual(str(chain),
                         "uncollected cycle \u2192 test.test_tracemalloc_"
                         "retention.Payload \u2192 .cache \u2192 dict "
                         "\u2192 ['k'] \u2192 bytes")

    def test_iterable_copy_is_own(self):
        # f02: asked with a set, retention_paths() copies it into a list:
        # that reference is the search's own, not a hidden holder.
        self.no_collection()
        node = Payload(1)
        node.self = node
        node.payload = Payload(2)
        targets = {node.payload}
        del node
        chain = retention.retention_paths(targets).chains[0]
        self.assertEqual(chain.kind, "cycle", chain)

    def test_exec_namespace_frame(self):
        # f07: a frame whose locals are its globals, a dict that is no
        # module's (exec(code, namespace)): a root, its variables locals.
        out = []
        exec(textwrap.dedent("""\
            KEEP = [bytearray(100) for _ in range(5)]
            OUT.append(retention.retention_paths(list(KEEP)))
            """), {"retention": retention, "OUT": out})
        chain = out[0].chains[0]
        self.assertEqual(chain.kind, "root", chain)
        self.assertEqual(chain.root_kind, "frame", chain)
        self.assertEqual(chain.steps[0].how, "local KEEP", chain)

    def test_for_loop_iterator(self):
        # f09: the list a for loop iterates over, held by nothing but the
        # loop's iterator on this frame's evaluation stack.
        def items():
            return [bytearray(10) for _ in range(3)]
        for item in items():
            targets = [item]
            del item
            chain = retention.retention_paths(targets).chains[0]
            break
        self.assertEqual(chain.kind, "root", chain)
        self.assertEqual(chain.root_kind, "frame", chain)
        self.assertIn("test_for_loop_iterator()", chain.root)
        self.assertEqual(
            [step.how for step in chain.steps],
            ["evaluation stack", "", "[0]"], chain)

    def test_thread_comprehension_stack(self):
        # f08: a comprehension's partial list, in a thread blocked while
        # it is being built.
        ready, stop = threading.Event(), threading.Event()
        handed = []

        def fetch(i):
            buf = bytearray(100)
            handed.append(buf)
            if i == 2:
                ready.set()
                stop.wait()
            return buf

        def worker():
            return [fetch(i) for i in range(4)]

        thread = threading.Thread(target=worker, name="s38-worker")
        thread.start()
        self.addCleanup(thread.join)
        self.addCleanup(stop.set)
        ready.wait()
        targets = handed[:2]
        handed.clear()
        result = retention.retention_paths(targets)
        chain = result.chains[0]
        self.assertEqual(chain.kind, "root", result.format())
        self.assertIn("thread s38-worker", chain.root)
        self.assertEqual(chain.steps[0].how, "evaluation stack", chain)
        self.assertEqual(chain.count, 2)

    def test_code_object_constants(self):
        # f06: the constants of code objects kept in a global list.
        module = plant("leakapp_s38_code", """
            COMPILED = [compile(f"x = b'payload-{i}' + b'!'", "<snippet>",
                                "exec") for i in range(5)]
        """)
        self.addCleanup(sys.modules.pop, "leakapp_s38_code")
        targets = [code.co_consts[0] for code in module.COMPILED]
        self.assertTrue(all(type(t) is bytes for t in targets))
        result = retention.retention_paths(targets)
        chain = result.chains[0]
        self.assertEqual((chain.kind, result.holders), ("root", 1), chain)
        self.assertEqual(chain.steps[0].how, "global COMPILED", chain)
        self.assertEqual(chain.steps[2].how, ".co_consts", chain)
        self.assertEqual(chain.count, 5)

    def test_c_static_untracked_tuples(self):
        # f05: a C static's list of (bytes, int) tuples that the collector
        # stopped tracking: one holder, the list, its chain through them.
        if _testtracemalloc is None:
            self.skipTest("needs _testtracemalloc")
        records = [(bytes(100 + i), i) for i in range(5)]
        gc.collect()
        self.assertFalse(any(gc.is_tracked(t) for t in records))
        targets = [t[0] for t in records]
        previous = _testtracemalloc.keep_in_static(records)
        self.addCleanup(_testtracemalloc.keep_in_static, previous)
        del records
        result = retention.retention_paths(targets)
        chain = result.chains[0]
        self.assertEqual((chain.kind, result.holders, chain.count),
                         ("no-referrer", 1, 5), result.format())
        self.assertEqual([step.type for step in chain.steps],
                         ["list", "tuple", "bytes"], chain)
        self.assertEqual((chain.refcount, chain.referrers), (1, 0))

    def test_long_chain_complete(self):
        # f03: a chain 1000 objects deep is whole.
        module = plant("leakapp_s38_deep", """
            class Node:
                def __init__(self, next):
                    self.next = next
                    self.data = bytearray(8)
            HEAD = None
            for _ in range(1000):
                HEAD = Node(HEAD)
            node = HEAD
            while node.next is not None:
                node = node.next
            LAST = node.data
            del node
        """)
        self.addCleanup(sys.modules.pop, "leakapp_s38_deep")
        targets = [module.LAST]
        del module.LAST
        chain = retention.retention_paths(targets).chains[0]
        self.assertEqual(chain.steps[0].how, "global HEAD", chain)
        self.assertEqual(len(chain.steps), 1001)
        self.assertGreaterEqual(chain.length, 1000 + 2)

    def test_ring_is_one_holder(self):
        # f04: an uncollected ring of nodes, each with a payload: one
        # holder, with the shortest chain, whatever the ring's size.
        self.no_collection()
        for size in (2, 10, 600):
            with self.subTest(size=size):
                nodes = [Payload(i) for i in range(size)]
                for i, node in enumerate(nodes):
                    node.next = nodes[(i + 1) % size]
                    node.payload = Payload(-i)
                targets = [node.payload for node in nodes]
                del nodes, node
                result = retention.retention_paths(targets)
                chain = result.chains[0]
                self.assertEqual((result.holders, chain.kind, chain.count),
                                 (1, "cycle", size), result.format())
                self.assertEqual([step.how for step in chain.steps],
                                 ["", ".payload"], chain)
                del targets, result, chain
                gc.collect()

    def test_site_objects_nested_untracked(self):
        # f15: a site's bytes in untracked tuples, several levels down.
        tracemalloc.start(1)
        self.addCleanup(tracemalloc.stop)
        module = plant("leakapp_s38_nested", """
            LEAK = []
            def payload():
                return bytes(100)
            def work():
                LEAK.append(("request", ("body", payload())))
        """)
        self.addCleanup(sys.modules.pop, "leakapp_s38_nested")
        for _ in range(5):
            module.work()
        gc.collect()
        lineno = module.payload.__code__.co_firstlineno + 1
        found = retention.site_objects("<string>", lineno)
        self.assertEqual(sorted(map(id, found)),
                         sorted(id(t[1][1]) for t in module.LEAK))

    def test_site_objects_thread_local(self):
        # f20: a site's bytes held only by a running thread's local.
        tracemalloc.start(1)
        self.addCleanup(tracemalloc.stop)
        ready, stop = threading.Event(), threading.Event()
        handed = []

        def worker():
            blob = b"x" * 100_000
            handed.append(id(blob))
            ready.set()
            stop.wait()

        thread = threading.Thread(target=worker, name="s38-local")
        thread.start()
        self.addCleanup(thread.join)
        self.addCleanup(stop.set)
        ready.wait()
        lineno = worker.__code__.co_firstlineno + 1
        found = retention.site_objects(__file__, lineno)
        self.assertEqual([id(obj) for obj in found], handed)
        del found
        result = retention.site_retention((__file__, lineno))
        self.assertEqual(result.chains[0].steps[0].how, "local blob",
                         result.format())

    def test_mock_spec_dict(self):
        # f14: isinstance(Mock(spec=dict), dict) is true; its items() is
        # no dict's.
        from unittest import mock
        module = plant("leakapp_s38_mock", "", CLIENT=mock.Mock(spec=dict))
        self.addCleanup(sys.modules.pop, "leakapp_s38_mock")
        module.CLIENT.get(bytearray(100))
        targets = [module.CLIENT.get.call_args_list[0].args[0]]
        chain = retention.retention_paths(targets).chains[0]
        self.assertEqual(chain.steps[0].how, "global CLIENT", chain)
        self.assertEqual(chain.kind, "root", chain)

    def test_subclass_step_names(self):
        # f13: a dict subclass's items() and a list subclass's __iter__
        # are not called: they may hide or reorder what they hold.
        class Settings(dict):
            def items(self):
                return [(k, v) for k, v in dict.items(self)
                        if not k.startswith("_")]

        class Stack(list):
            def __iter__(self):
                return reversed(list(list.__iter__(self)))

        module = plant("leakapp_s38_sub", "",
                       SETTINGS=Settings(_buffer=bytearray(5)),
                       STACK=Stack([bytearray(1), bytearray(2)]))
        self.addCleanup(sys.modules.pop, "leakapp_s38_sub")
        by_key = retention.retention_paths(
            [dict.__getitem__(module.SETTINGS, "_buffer")]).chains[0]
        by_index = retention.retention_paths(
            [list.__getitem__(module.STACK, 0)]).chains[0]
        self.assertEqual(by_key.steps[1].how, "['_buffer']", by_key)
        self.assertEqual(by_index.steps[1].how, "[0]", by_index)

    def test_slot_names(self):
        # f19: __slots__ as one string, and a private (mangled) slot.
        class Session:
            __slots__ = "buffer"

        class Connection:
            __slots__ = ("__pending",)

            def __init__(self):
                self.__pending = bytearray(3)

        session = Session()
        session.buffer = bytearray(1)
        module = plant("leakapp_s38_slots", "", SESSION=session,
                       CONNECTION=Connection())
        self.addCleanup(sys.modules.pop, "leakapp_s38_slots")
        one = retention.retention_paths([session.buffer]).chains[0]
        private = retention.retention_paths(
            [module.CONNECTION._Connection__pending]).chains[0]
        self.assertEqual(one.steps[1].how, ".buffer", one)
        self.assertEqual(private.steps[1].how, "._Connection__pending",
                         private)

    def test_multiline_key_repr(self):
        # f16: a chain is one line, whatever its keys' reprs.
        class Point:
            def __repr__(self):
                return "Point(\n  x=1,\n  y=2,\n)"

        module = plant("leakapp_s38_repr", "", TABLE={Point(): bytearray(1)})
        self.addCleanup(sys.modules.pop, "leakapp_s38_repr")
        chain = retention.retention_paths(
            list(module.TABLE.values())).chains[0]
        self.assertNotIn("\n", str(chain))
        self.assertEqual(chain.steps[1].how, "[Point( x=1, y=2, )]")

    def test_deleted_local_not_revived(self):
        # f17: the search reads no frame's f_locals (3.11 copies them into
        # the frame: a local deleted later stayed alive).
        import weakref
        keep = [bytearray(8)]

        def handler():
            scratch = Payload(1)
            alive = weakref.ref(scratch)
            retention.retention_paths(list(keep))
            del scratch
            return alive() is None

        self.assertTrue(handler())

    def test_result_untraced(self):
        # f10: the result's objects are made with tracing suspended.
        module = plant("leakapp_s38_untraced", """
            HOLD = [bytearray(100) for _ in range(20)]
        """)
        self.addCleanup(sys.modules.pop, "leakapp_s38_untraced")
        tracemalloc.start(1)
        self.addCleanup(tracemalloc.stop)
        result = retention.retention_paths(list(module.HOLD))
        chain = result.chains[0]
        for obj in (result, chain, chain.steps[0], chain.root,
                    chain.steps):
            self.assertIsNone(tracemalloc.get_object_traceback(obj), obj)


# ---- "held by:" never says "freed" about live memory (issue 43, 3) -------

class HeldByLiveMemoryTests(unittest.TestCase):
    """Memory measured live is never reported freed: a site whose blocks
    are a container's buffer, strings held only as dict keys, values kept
    by a thread's or a task's contextvars.Context, an object kept by a
    leaked reference."""

    def setUp(self):
        if tracemalloc.is_tracing():
            self.skipTest("tracemalloc is already tracing")
        tracemalloc.start(1)
        self.addCleanup(tracemalloc.stop)

    def plant(self, name, source, **names):
        self.addCleanup(sys.modules.pop, name, None)
        return plant(name, source, **names)

    def held_by(self, report):
        return [line for line in report.format().splitlines()
                if "held by:" in line]

    def test_buffer_owner(self):
        # The line only grows a bytearray and a list made at import: its
        # blocks are their buffers, and the buffers' owners are its
        # objects.
        module = self.plant("leakapp_buffers", """
            _BUF = bytearray()
            _ITEMS = []
            NONES = (None,) * 50
            CHUNK = b"x" * 300
            def grow_bytes():
                _BUF.extend(CHUNK)
            def grow_list():
                _ITEMS.extend(NONES)
        """)
        from tracemalloc import leaks
        for work, name, type_name in ((module.grow_bytes, "_BUF", "bytearray"),
                                      (module.grow_list, "_ITEMS", "list")):
            with self.subTest(name):
                report = leaks.check(work)
                self.assertTrue(report, report)
                site = report.sites[0]
                self.assertEqual(site.lineno,
                                 work.__code__.co_firstlineno + 1)
                chain = site.retention.chains[0]
                self.assertEqual(
                    str(chain), f"module leakapp_buffers \u2192 global "
                                f"{name} ({type_name})")
                self.assertEqual(chain.types, {type_name: 1})
                lines = self.held_by(report)
                self.assertIn(f"global {name} ({type_name})", lines[0])
                self.assertNotIn("freed", "\n".join(lines))

    def test_dict_key_strings(self):
        # Strings held only as the keys of a dict of str keys, which
        # dict_traverse() leaves out: found, and named as keys.
        module = self.plant("leakapp_keys", """
            _DIRECTORY = {}
            def cache(i):
                _DIRECTORY["/tmp/zipped-" + str(i) * 20] = None
            for i in range(COUNT):
                cache(i)
        """, COUNT=COUNT)
        lineno = module.cache.__code__.co_firstlineno + 1
        keys = retention.site_objects("<string>", lineno)
        self.assertEqual(sorted(keys), sorted(module._DIRECTORY))
        del keys
        result = retention.site_retention(("<string>", lineno))
        self.assertEqual(result.count, COUNT)
        self.assertEqual(result.holders, 1)
        chain = result.chains[0]
        self.assertEqual(str(chain), "module leakapp_keys \u2192 global "
                                     "_DIRECTORY (dict) \u2192 key \u2192 str")
        self.assertEqual((chain.count, chain.types), (COUNT, {"str": COUNT}))

    def test_dict_key_strings_counted(self):
        # A dict of str keys held by C code only: its keys are referred to
        # by it (the dict is the no-referrer holder, not each key).
        if _testtracemalloc is None:
            self.skipTest("needs _testtracemalloc")
        # (A list value: the dict is tracked, listed by the collector.)
        held = {"/tmp/path-" + str(i) * 30: [] for i in range(COUNT)}
        previous = _testtracemalloc.keep_in_static(held)
        self.addCleanup(_testtracemalloc.keep_in_static, previous)
        targets = list(held)
        del held
        result = retention.retention_paths(targets)
        self.assertEqual(result.holders, 1, result.format())
        chain = result.chains[0]
        self.assertEqual(chain.kind, "no-referrer", chain)
        self.assertEqual(str(chain).split(" \u2192 ", 1)[1], "dict \u2192 key "
                         "\u2192 str")
        self.assertEqual(chain.count, COUNT)

    def test_thread_context_root(self):
        # A value that only a ContextVar.set() of this thread keeps: the
        # thread's context is the root, not "no Python referrer".
        import contextvars
        targets = []

        def body():
            variable = contextvars.ContextVar("leaky_payload")
            variable.set([Payload(1)])
            targets.append(variable.get()[0])
            del variable
            return retention.retention_paths(targets)

        result = contextvars.copy_context().run(body)
        chain = result.chains[0]
        name = threading.current_thread().name
        self.assertEqual((chain.kind, chain.root_kind, chain.root),
                         ("root", "context", f"thread {name}, context"),
                         chain)
        self.assertEqual(str(chain),
                         f"thread {name}, context \u2192 ContextVar "
                         f"leaky_payload (list) \u2192 [0] \u2192 "
                         f"{_payload_type()}")

    def test_task_context_root(self):
        # The same in an asyncio task: the task's context is the root.
        import asyncio
        import contextvars
        targets = []
        found = []

        async def holder(ready, done):
            variable = contextvars.ContextVar("task_payload")
            variable.set(Payload(2))
            targets.append(variable.get())
            del variable
            ready.set()
            await done.wait()

        async def main():
            ready, done = asyncio.Event(), asyncio.Event()
            task = asyncio.create_task(holder(ready, done),
                                       name="holder-task")
            await ready.wait()
            found.append(retention.retention_paths(targets))
            done.set()
            await task

        asyncio.run(main())
        # asyncio.run() made the policy's default loop: leave none.
        asyncio.set_event_loop_policy(None)
        chain = found[0].chains[0]
        self.assertEqual((chain.root_kind, chain.root),
                         ("context", "asyncio task holder-task, context"),
                         chain)
        self.assertEqual(str(chain).split(" \u2192 ", 1)[1],
                         f"ContextVar task_payload ({_payload_type()})")

    def test_refcount_leak_not_freed(self):
        # bytes kept by a reference leaked from C (an extra Py_IncRef):
        # live, so never "freed"; the report gives the live blocks.
        import ctypes
        leaked = []
        module = self.plant("leakapp_incref", """
            def work():
                obj = bytes(range(250)) * 2
                incref(obj)
                leaked.append(id(obj))
        """, incref=lambda obj: ctypes.pythonapi.Py_IncRef(
                ctypes.py_object(obj)), leaked=leaked)

        def release():
            for address in leaked:
                ctypes.pythonapi.Py_DecRef(ctypes.c_void_p(address))
        self.addCleanup(release)
        from tracemalloc import leaks
        report = leaks.check(module.work)
        self.assertTrue(report, report)
        site = report.sites[0]
        self.assertEqual(site.lineno, 3)
        lines = site.format_retention()
        self.assertEqual(len(lines), 1, lines)
        self.assertNotIn("freed", lines[0])
        blocks, size = site.retention.blocks
        self.assertGreaterEqual(blocks, len(leaked) - 1)
        self.assertGreaterEqual(size, blocks * 500)
        self.assertIn(f"no object found in the {blocks} live blocks of "
                      f"this line ({size} B)", lines[0])

    def test_freed_said_when_checked(self):
        # No live block left at the line: that, and only that, is "freed".
        module = self.plant("leakapp_gone", """
            def work():
                return [bytearray(100) for _ in range(3)]
        """)
        module.work()
        lineno = module.work.__code__.co_firstlineno + 1
        result = retention.site_retention(("<string>", lineno))
        self.assertEqual(result.blocks, (0, 0))
        # Made untraced, as the rest of the result.
        self.assertIsNone(tracemalloc.get_object_traceback(result.blocks))
        self.assertEqual(result.chains, [])
        self.assertIn("freed", result.no_chain())


if __name__ == "__main__":
    unittest.main()
