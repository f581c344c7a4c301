"""Deterministic programs whose live traces the fork must share with upstream.

Each scenario is a function that allocates, frees part of what it
allocated, and returns what stays alive; runner.py calls it with tracing
on and reports the traces allocated in this file.  The programs use no
randomness, no clock and no I/O, so two runs of the same interpreter give
the same traces, and the fork and pristine CPython 3.11.2 run the same
bytecode.

The programs avoid what depends on the interpreter's history rather than
on the tracer: the classes derive from a base class of their own (a new
direct subclass of object would grow object's table of subclasses, whose
resizes happen at different points on two interpreters that created a
different number of classes before), and runner.py empties the free lists
before tracing starts.
"""

import asyncio
import collections
import functools
import gc
import itertools
import re
import sys
import threading
import weakref

import _testcapi


# ---- recursion --------------------------------------------------------------

def build_tree(depth, label):
    node = {"label": label, "depth": depth}
    node["items"] = [label * depth for _ in range(3)]
    if depth:
        node["kids"] = (build_tree(depth - 1, label + "l"),
                        build_tree(depth - 1, label + "r"))
    return node


def ackermann_lists(m, n, out):
    out.append([m, n, str(m * 1000 + n)])
    if m == 0:
        return n + 1
    if n == 0:
        return ackermann_lists(m - 1, 1, out)
    return ackermann_lists(m - 1, ackermann_lists(m, n - 1, out), out)


def recursion():
    keep = [build_tree(6, "t")]
    scratch = [build_tree(4, "x") for _ in range(3)]
    del scratch
    out = []
    ackermann_lists(2, 3, out)
    keep.append(out[::3])
    return keep


# ---- generators resumed from several callers --------------------------------

def producer(tag):
    for i in range(30):
        yield [tag, i, "%s-%d" % (tag, i)]


def delegating(tag):
    yield from producer(tag)
    yield {"done": tag}


def consume_some(gen, count):
    return [next(gen) for _ in range(count)]


def consume_rest(gen):
    kept = []
    for item in gen:
        kept.append(item)
    return kept


def consume_by_send(gen, count):
    kept = [gen.send(None) for _ in range(count)]
    return kept


def generators():
    keep = []
    plain = producer("p")
    keep.append(consume_some(plain, 5))
    keep.append(consume_by_send(plain, 7))
    keep.append(consume_rest(plain))
    nested = delegating("d")
    keep.append(consume_some(nested, 4))
    keep.append(consume_rest(nested))
    paused = [producer("q%d" % i) for i in range(10)]
    for gen in paused:
        keep.append(next(gen))
    keep.append(paused)
    squares = (n * n for n in range(50))
    keep.append(list(zip(squares, map(str, range(50)))))
    resilient = guarded("g")
    keep.append(next(resilient))
    keep.append(throw_into(resilient))
    keep.append(next(resilient))
    resilient.close()
    keep.append(resilient)
    outer = delegating_guarded("o")
    keep.append(next(outer))
    keep.append(throw_into(outer))
    outer.close()
    doomed = guarded("x")
    keep.append(next(doomed))
    del doomed                      # closed by its deallocation
    return keep


class Retry(Exception):
    pass


def guarded(tag):
    log = []
    try:
        while True:
            try:
                yield [tag, "ok", len(log)]
            except Retry:
                log.append([tag, "retry"])
                yield {"retried": tag, "log": log}
    finally:
        log.append((tag, "closed"))
        GENERATOR_LOG.append(log)


def delegating_guarded(tag):
    result = yield from guarded(tag)
    return [result]


def throw_into(gen):
    return gen.throw(Retry)


GENERATOR_LOG = []


# ---- coroutines under asyncio -----------------------------------------------

async def fetch(tag, delay_steps):
    data = []
    for step in range(delay_steps):
        await asyncio.sleep(0)
        data.append((tag, step, "%s:%d" % (tag, step)))
    return {"tag": tag, "data": data}


async def ticker(count):
    for i in range(count):
        await asyncio.sleep(0)
        yield {"tick": i, "name": "t%d" % i}


async def gather_all():
    coros = [fetch("c%d" % i, i % 4 + 1) for i in range(8)]
    results = await asyncio.gather(*coros)
    ticks = [tick async for tick in ticker(12)]
    pending = [ticker(i + 2) for i in range(3)]
    for agen in pending:
        ticks.append(await agen.__anext__())
    queue = asyncio.Queue()
    for i in range(20):
        queue.put_nowait(["queued", i])
    drained = []
    while not queue.empty():
        drained.append(await queue.get())
    return results, drained, ticks, pending


def coroutines():
    keep = asyncio.run(gather_all())
    return keep


# ---- closures ---------------------------------------------------------------

def make_counter(start):
    state = {"count": start}

    def bump(step):
        state["count"] += step
        return [state["count"], str(state["count"])]
    return bump


def make_adders(count):
    return [lambda x, k=k: (x + k, "k%d" % k) for k in range(count)]


def closures():
    counters = [make_counter(i) for i in range(10)]
    keep = [counter(3) for counter in counters]
    keep.append([adder(100) for adder in make_adders(15)])
    keep.append(counters)
    return keep


# ---- calls: arguments packed while the callee's frame is made ---------------

def packed(*args, **kwargs):
    return [args, kwargs]


def defaults(a, b=(), *rest, key=None, **options):
    return {"a": a, "rest": rest, "options": options}


def calls():
    keep = [packed(1, 2, 3, x=4, y=5)]
    keep.append(packed(*range(10), **{"k%d" % i: i for i in range(10)}))
    keep.append(defaults("a", "b", "c", "d", key=1, extra=[2]))
    keep.append([packed(i, name="n%d" % i) for i in range(5)])
    keep.append(list(map(lambda i: packed(i, i + 1), range(5))))
    return keep


# ---- multi-line statements: the line of the allocating instruction --------

def multi_line():
    table = [
        [1, 2],
        (3,
         "four" * 2),
        {"five":
         [5]},
    ]
    joined = "-".join(
        str(part)
        for part in range(20)
    )
    chained = (
        "a b c d"
        .upper()
        .split()
    )
    mapping = {
        key:
        [key] * 2
        for key in range(8)
    }
    formatted = [
        f"{i:>4}"
        f"{i * 2}"
        for i in range(6)
    ]
    chosen = ([1, 2]
              if len(table) > 2
              else [3])
    called = packed(
        [1],
        (2, 3),
        key={"four": 4},
    )
    return [table, joined, chained, mapping, formatted, chosen, called]


# ---- deep recursion: tracebacks longer than N frames ------------------------

def descend(depth, out):
    if depth:
        descend(depth - 1, out)
        if depth % 10 == 0:
            out.append([depth] * 3)
    else:
        out.append({"bottom": [depth]})


def deep_recursion():
    out = []
    descend(60, out)
    return out


# ---- a thread started and joined --------------------------------------------

def worker(results, count):
    local = [(i, "w%d" % i) for i in range(count)]
    results.append(local)
    results.append({"done": count})


def threads():
    results = []
    # No switch forced by the clock while the scenario runs: the threads
    # interleave only where they block, the same way on every run.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    try:
        for count in (5, 10):
            thread = threading.Thread(target=worker, args=(results, count))
            thread.start()
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    return results


# ---- callbacks from C -------------------------------------------------------

def sort_key(word):
    return (len(word), word.upper())


def to_record(number):
    return {"n": number, "s": str(number), "t": (number, -number)}


def replace_word(match):
    return "<%s>" % match.group(0).upper()


class Version:
    def __init__(self, text):
        self.text = text

    def __lt__(self, other):
        mine = [int(part) for part in self.text.split(".")]
        theirs = [int(part) for part in other.text.split(".")]
        return mine < theirs


class Watched:
    pass


class Meta(type):
    def __new__(mcls, name, bases, namespace):
        namespace["registry"] = [name]
        return super().__new__(mcls, name, bases, namespace)


class Described:
    def __set_name__(self, owner, name):
        self.names = [owner.__name__, name]

    def __get__(self, instance, owner=None):
        return ("got", [instance is None])


@functools.lru_cache(maxsize=None)
def cached(n):
    return [n, "cached%d" % n]


class Finalized:
    def __init__(self, name):
        self.name = name
        self.cycle = self

    def __del__(self):
        FINALIZED.append([self.name, "finalized"])


FINALIZED = []


def callbacks_from_c():
    words = ["w%d" % (i * 37 % 101) for i in range(60)]
    keep = [sorted(words, key=sort_key)]
    keep.append(sorted(words, key=lambda w: [w[::-1], len(w)]))
    keep.append(list(map(to_record, range(40))))
    keep.append(list(filter(lambda r: [r], keep[-1])))
    keep.append(functools.reduce(lambda acc, x: acc + [x], range(30), []))
    keep.append(max(words, key=lambda w: (w[-1], w)))
    keep.append(re.sub(r"w\d+", replace_word, " ".join(words)))
    versions = [Version("%d.%d" % (i % 5, i * 7 % 11)) for i in range(25)]
    keep.append(sorted(versions))
    notes = []
    watched = [Watched() for _ in range(6)]
    refs = [weakref.ref(w, lambda ref: notes.append(["gone", ref]))
            for w in watched]
    del watched
    keep.append((notes, refs))

    class Plugin(metaclass=Meta):
        attribute = Described()
    keep.append(Plugin)
    keep.append([Plugin.attribute, Plugin().attribute])
    keep.append([cached(i % 7) for i in range(20)])
    keep.append(list(itertools.chain.from_iterable(
        ([i] for i in range(10)))))
    keep.append(sorted(range(10), key=lambda i: sorted(
        [str(i), str(-i)], key=lambda s: [s[::-1]])))
    for i in range(3):
        Finalized("f%d" % i)
    gc.collect()                    # runs the __del__ methods
    keep.append(FINALIZED[:])
    del FINALIZED[:]
    return keep


# ---- exceptions -------------------------------------------------------------

class PayloadError(Exception):
    def __init__(self, payload):
        super().__init__("payload of %d" % len(payload))
        self.payload = payload


def fail(depth, payload):
    if depth:
        return fail(depth - 1, payload + [depth])
    raise PayloadError(payload)


def exceptions():
    caught = []
    for i in range(10):
        try:
            fail(i % 4, ["start", i])
        except PayloadError as exc:
            caught.append(exc)
    chained = []
    for i in range(5):
        try:
            try:
                {}["missing%d" % i]
            except KeyError as exc:
                raise ValueError(["context", i]) from exc
        except ValueError as exc:
            chained.append(exc)
    finals = []
    for i in range(5):
        try:
            finals.append([i])
            if i % 2:
                raise RuntimeError(i)
        except RuntimeError:
            finals.append(("odd", i))
        finally:
            finals.append({"i": i})
    return caught, chained, finals


# ---- comprehensions ---------------------------------------------------------

def comprehensions():
    keep = [[i, i * 2] for i in range(100)]
    keep.append({i: str(i) for i in range(50)})
    keep.append({(i, i % 7) for i in range(60)})
    keep.append([[(x, y) for y in range(5)] for x in range(10)])
    keep.append(tuple(str(x) for x in range(40)))
    keep.append(sum(len(str(x)) for x in range(100)))
    keep.append(dict((str(x), [x]) for x in range(30)))
    return keep


# ---- class bodies -----------------------------------------------------------

class Base:
    pass


def make_classes(count):
    classes = []
    for i in range(count):
        class Point(Base):
            __slots__ = ("x", "y")
            table = {"index": i, "names": ["x", "y"]}

            def __init__(self, x, y):
                self.x = x
                self.y = y

        class Record(Base):
            kind = "record%d" % i
            fields = tuple("f%d" % j for j in range(i + 1))

            def __init__(self, value):
                self.value = value
                self.extra = [value]

        classes.append((Point, Record))
    return classes


def class_bodies():
    classes = make_classes(8)
    instances = [(Point(i, -i), Record(str(i)))
                 for i, (Point, Record) in enumerate(classes)]
    return classes, instances


# ---- big buffers ------------------------------------------------------------

def big_buffers():
    keep = [bytearray(1 << 20), b"x" * 300_000, "y" * 70_000]
    grown = bytearray()
    for i in range(2000):
        grown += b"%05d" % i
    keep.append(grown)
    table = []
    for i in range(50_000):
        table.append(i & 255)
    keep.append(table)
    keep.append([None] * 100_000)
    keep.append(list(range(256)) * 400)
    keep.append(" ".join(map(str, range(20_000))))
    keep.append({i: i & 255 for i in range(2_000)})
    temporary = [bytes(100_000) for _ in range(5)]
    del temporary
    return keep


# ---- resizing: realloc moves a trace to the resizing line -------------------

# Allocated when the module is imported, before tracing starts (runner.py
# mode "start"), and resized while tracing.
GROWN_BEFORE_TRACING = [0] * 10
TEXT_BEFORE_TRACING = bytearray(b"before" * 10)


def new_list():
    return [0] * 10


def grow(items, count):
    for i in range(count):
        items.append(i & 255)


def shrink(items, count):
    for _ in range(count):
        items.pop()


def resizing():
    small = new_list()
    grow(small, 3)                  # in place, most likely
    big = new_list()
    grow(big, 5000)                 # moves
    shrunk = new_list()
    grow(shrunk, 1000)
    shrink(shrunk, 900)
    grow(GROWN_BEFORE_TRACING, 100)
    TEXT_BEFORE_TRACING.extend(b"after" * 100)
    text = "start"
    for i in range(300):
        text += "%d" % (i & 7)      # resizes the string in place
    buffer = bytearray(b"x" * 10_000)
    del buffer[100:]                # shrinks
    return [small, big, shrunk, text, buffer]


# ---- code compiled at run time ----------------------------------------------

GENERATED = """
def generated_{n}(size):
    return [{{"n": {n}, "i": i}} for i in range(size)]
"""


def dynamic_code():
    keep = []
    for n in range(6):
        namespace = {}
        exec(compile(GENERATED.format(n=n), "<parity-generated>", "exec"),
             namespace)
        keep.append(namespace["generated_%d" % n](3))
        keep.append(eval("[%d] * 3" % n))
        # The code objects of this round die here: their call sites must
        # not be confused with the next round's.
        del namespace
    point = collections.namedtuple("Point", "x y")
    keep.append([point(i, -i) for i in range(10)])
    return keep


# ---- free lists -------------------------------------------------------------

def churn(count):
    # Floats, tuples, lists and dicts that die at once: their memory goes
    # to the free lists, and comes back to the allocations below.
    for i in range(count):
        pair = (i, str(i))
        box = [i, pair]
        meta = {"i": i}
        ratio = i / 3
        del pair, box, meta, ratio


def free_lists():
    keep = []
    for round_number in range(5):
        churn(100)
        keep.append([(i, round_number) for i in range(20)])
        keep.append([[i] for i in range(20)])
        keep.append([{"k": i} for i in range(20)])
        keep.append([i / 7 for i in range(20)])
    return keep


# ---- the first tuple after start() ------------------------------------------

def tuple_after_start():
    pairs = [(i,) for i in range(4)]
    return pairs


# runner.py runs this one without emptying the free lists after start(),
# and only in its mode "start".
tuple_after_start.collect_after_start = False
tuple_after_start.modes = ("start",)


# ---- blocks of other domains (PyTraceMalloc_Track) --------------------------

# Made-up addresses: the blocks are never touched, only tracked.
FAKE_BLOCKS = 1 << 44


def track(domain, index, size, release_gil=False):
    _testcapi.tracemalloc_track(domain, FAKE_BLOCKS + 4096 * index, size,
                                release_gil)


def other_domains():
    for index in range(20):
        track(index % 3 + 1, index, 100 + index)
    for index in range(20, 30):
        track(2 ** 32 - 1, index, 5000, release_gil=True)
    for index in range(0, 20, 4):
        _testcapi.tracemalloc_untrack(index % 3 + 1,
                                      FAKE_BLOCKS + 4096 * index)
    track(1, 3, 999)                # tracked again: replaces the trace
    return []


# ---- a snapshot held while the next one is taken ----------------------------

def held_snapshot():
    import tracemalloc
    kept = []
    for i in range(300):
        pair = (i, "p%d" % i)       # 2-tuples, strings and lists freed:
        box = [pair]                # the snapshot below takes some of them
        if i % 3 == 0:              # back from the free lists
            kept.append(box)
    snapshot = tracemalloc.take_snapshot()
    kept.append([(i,) for i in range(10)])
    return kept, snapshot


# ---- a list freed just before the snapshot ----------------------------------

def list_freed_last():
    kept = [[i] for i in range(5)]
    scratch = [0, 1, 2]        # freed last: upstream's snapshot recycles it
    del scratch
    return kept


# runner.py takes the snapshot right after this one returns.
list_freed_last.recycle_a_list = False


SCENARIOS = {
    "recursion": recursion,
    "generators": generators,
    "coroutines": coroutines,
    "closures": closures,
    "calls": calls,
    "multi_line": multi_line,
    "deep_recursion": deep_recursion,
    "threads": threads,
    "callbacks_from_c": callbacks_from_c,
    "exceptions": exceptions,
    "comprehensions": comprehensions,
    "class_bodies": class_bodies,
    "big_buffers": big_buffers,
    "free_lists": free_lists,
    "resizing": resizing,
    "dynamic_code": dynamic_code,
    "tuple_after_start": tuple_after_start,
    "other_domains": other_domains,
    "held_snapshot": held_snapshot,
    "list_freed_last": list_freed_last,
}
